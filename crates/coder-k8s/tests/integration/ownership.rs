//! Ownership and consent on the real kube-apiserver and the Coder API test server: an owned Secret is never written
//! over a foreign one (not even one created between the check and the write), objects of the operator's names that
//! a custom resource does not control are reported and never written, and provisioner keys and workspace proxies in
//! Coder that were not created for an object are neither used, regenerated nor deleted (also when their ID is
//! written into an object's status).

use std::collections::BTreeMap;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_coder_client::types::CreateWorkspaceProxyRequest;
use coder_k8s_coder_testserver::Entitlement;
use coder_k8s_controllers::owned_secret::{self, OwnedSecret, Written};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::control_plane::{Harness, harness};
use crate::provisioner::{create_provisioner, ready_control_plane, sample_spec};
use crate::support::several_requeues;
use crate::support::wait_for;

/// A Secret `name` owned by the control plane `owner` (as the operator builds it), holding `value`.
fn owned(owner: &CoderControlPlane, name: &str, value: &[u8]) -> Secret {
    OwnedSecret {
        name,
        labels: BTreeMap::from([("app".to_owned(), "coder".to_owned())]),
        annotations: BTreeMap::new(),
        key: "token",
        value,
    }
    .build(owner)
    .unwrap()
}

#[tokio::test]
async fn a_foreign_secret_created_between_the_check_and_the_write_survives_byte_for_byte() {
    let h = harness("own-race").await;
    let cp = h.create("race", json!({})).await;
    // The check saw no Secret (`live` is None); then someone else created one of that name.
    h.put_secret("race-token", &[("token", "theirs")]).await;
    let before = h.api::<Secret>().get("race-token").await.unwrap();
    let written = owned_secret::write(&h.ctx, owned(&cp, "race-token", b"ours"), None)
        .await
        .unwrap();
    assert!(matches!(written, Written::Foreign), "{written:?}");
    let after = h.api::<Secret>().get("race-token").await.unwrap();
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version);
    assert_eq!(after.data, before.data);
    assert_eq!(after.data.unwrap()["token"].0, b"theirs");
    assert!(after.metadata.owner_references.is_none());
}

#[tokio::test]
async fn an_owned_secret_is_replaced_only_at_the_version_that_was_checked() {
    let h = harness("own-version").await;
    let cp = h.create("versioned", json!({})).await;
    let api = h.api::<Secret>();
    let Written::Stored(first) = owned_secret::write(&h.ctx, owned(&cp, "versioned-token", b"one"), None)
        .await
        .unwrap()
    else {
        panic!("an absent Secret is created");
    };
    // Someone hands the Secret to another owner after the operator's check.
    let mut handed_over = api.get("versioned-token").await.unwrap();
    handed_over.metadata.owner_references = None;
    handed_over.data = Some(BTreeMap::from([(
        "token".to_owned(),
        k8s_openapi::ByteString(b"theirs".to_vec()),
    )]));
    api.replace("versioned-token", &PostParams::default(), &handed_over)
        .await
        .unwrap();
    let error = owned_secret::write(
        &h.ctx,
        owned(&cp, "versioned-token", b"two"),
        Some(first.as_ref()),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, kube::Error::Api(status) if status.code == 409),
        "{error:?}"
    );
    let after = api.get("versioned-token").await.unwrap();
    assert_eq!(after.data.unwrap()["token"].0, b"theirs");
    assert!(after.metadata.owner_references.is_none());
    // At the version the operator read, its own Secret is replaced, and what others added stays.
    let mut mine = api.get("versioned-token").await.unwrap();
    mine.metadata.owner_references = first.metadata.owner_references.clone();
    mine.metadata
        .labels
        .get_or_insert_default()
        .insert("added-by".to_owned(), "someone".to_owned());
    let mine = api
        .replace("versioned-token", &PostParams::default(), &mine)
        .await
        .unwrap();
    let Written::Stored(stored) =
        owned_secret::write(&h.ctx, owned(&cp, "versioned-token", b"two"), Some(&mine))
            .await
            .unwrap()
    else {
        panic!("an owned Secret is replaced");
    };
    assert_eq!(stored.data.unwrap()["token"].0, b"two");
    assert_eq!(stored.metadata.labels.unwrap()["added-by"], "someone");
}

/// Objects named like the control plane's own, made by someone else (without the operator's labels).
async fn foreign_workload_objects(h: &Harness, name: &str) {
    let labels = json!({"app": "theirs"});
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "theirs", "image": "busybox"}]}},
        },
    }))
    .unwrap();
    h.api::<Deployment>()
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let service: Service =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"ports": [{"port": 1234}]}}))
            .unwrap();
    h.api::<Service>()
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    h.api::<ServiceAccount>()
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
}

async fn versions(h: &Harness, name: &str) -> [Option<String>; 3] {
    [
        h.api::<Deployment>()
            .get(name)
            .await
            .unwrap()
            .metadata
            .resource_version,
        h.api::<Service>()
            .get(name)
            .await
            .unwrap()
            .metadata
            .resource_version,
        h.api::<ServiceAccount>()
            .get(name)
            .await
            .unwrap()
            .metadata
            .resource_version,
    ]
}

#[tokio::test]
async fn workload_objects_the_control_plane_does_not_control_are_reported_and_never_written() {
    let h = harness("own-workload").await;
    foreign_workload_objects(&h, "taken").await;
    let before = versions(&h, "taken").await;
    h.create("taken", json!({})).await;
    let message = h.wait_reason("taken", "ResourcesOwned", "ResourceNotOwned").await;
    for named in [
        "ServiceAccount \"taken\"",
        "Service \"taken\"",
        "Deployment \"taken\"",
    ] {
        assert!(message.contains(named), "{message}");
    }
    several_requeues().await;
    assert_eq!(versions(&h, "taken").await, before, "nothing was written");
    let deployment = h.api::<Deployment>().get("taken").await.unwrap();
    assert!(deployment.metadata.owner_references.is_none());
    assert_eq!(
        deployment.spec.unwrap().template.spec.unwrap().containers[0].name,
        "theirs"
    );

    // Once the foreign objects are gone, the control plane creates its own and the condition goes.
    h.api::<Deployment>()
        .delete("taken", &DeleteParams::default())
        .await
        .unwrap();
    h.api::<Service>()
        .delete("taken", &DeleteParams::default())
        .await
        .unwrap();
    h.api::<ServiceAccount>()
        .delete("taken", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        || async { h.condition("taken", "ResourcesOwned").await.is_none() },
        "the condition to go",
    )
    .await;
    let ours = h.api::<Deployment>().get("taken").await.unwrap();
    assert_eq!(
        ours.metadata.owner_references.unwrap()[0].kind,
        "CoderControlPlane"
    );
}

#[tokio::test]
async fn a_provisioner_key_not_created_for_the_provisioner_is_neither_used_nor_deleted() {
    let h = harness("own-key").await;
    let token = ready_control_plane(&h).await;
    let coder = h.coder(&token);
    let org = coder.default_organization().await.unwrap();
    coder
        .create_provisioner_key(&org.name, "p", &BTreeMap::new())
        .await
        .unwrap();
    let existing = h.server.provisioner_keys();
    assert_eq!(existing.len(), 1);
    h.server.clear_requests();
    create_provisioner(&h, "p", sample_spec()).await;
    crate::provisioner::wait_reason(&h, "p", "ProvisionerKeyReady", "ProvisionerKeyNotOwned").await;
    several_requeues().await;
    let requests = h.server.requests();
    assert!(
        !requests.is_empty() && requests.iter().all(|r| r.method == "GET"),
        "only reads, no create, delete or change: {requests:?}"
    );
    assert_eq!(h.server.provisioner_keys(), existing, "the key is untouched");
    assert!(
        h.api::<Secret>()
            .get_opt("p-provisioner-key")
            .await
            .unwrap()
            .is_none(),
        "no key Secret"
    );
    assert!(
        h.api::<Deployment>()
            .get_opt("provisioner-p")
            .await
            .unwrap()
            .is_none(),
        "no Deployment"
    );
}

#[tokio::test]
async fn a_provisioner_key_id_forged_into_the_status_is_neither_rotated_out_nor_deleted() {
    let h = harness("own-key-forged").await;
    let token = ready_control_plane(&h).await;
    let coder = h.coder(&token);
    let org = coder.default_organization().await.unwrap();
    create_provisioner(&h, "p", sample_spec()).await;
    create_provisioner(&h, "q", sample_spec()).await;
    for name in ["p", "q"] {
        crate::provisioner::wait_reason(&h, name, "ProvisionerKeyReady", "ProvisionerKeyReady").await;
    }
    let provisioners = h.api::<coder_k8s_api::provisioner::CoderProvisioner>();
    let p_key = provisioners
        .get("p")
        .await
        .unwrap()
        .status
        .unwrap()
        .provisioner_key_id
        .unwrap();
    let secret = h.api::<Secret>().get("p-provisioner-key").await.unwrap();
    assert_eq!(
        secret.metadata.annotations.unwrap()["coder.com/provisioner-key-id"],
        p_key,
        "the key Secret records which key it holds"
    );

    // A subject with status write access points q at p's key; then q's tags change (a rotation) and q is deleted.
    h.server.clear_requests();
    let forged = json!({"status": {"provisionerKeyID": p_key, "organizationID": org.id.to_string()}});
    provisioners
        .patch_status("q", &PatchParams::default(), &Patch::Merge(&forged))
        .await
        .unwrap();
    let tags = json!({"spec": {"tags": {"scope": "organization", "team": "q"}}});
    provisioners
        .patch("q", &PatchParams::default(), &Patch::Merge(&tags))
        .await
        .unwrap();
    wait_for(
        || async {
            let status = provisioners.get("q").await.unwrap().status.unwrap_or_default();
            status.provisioner_key_id.is_some_and(|id| id != p_key)
                && status.tags_hash.as_deref() != Some("cf1b2b92")
        },
        "q's own key rotated",
    )
    .await;
    // The deletion comes once q's status and its key Secret name the same key: a deletion while a pass that saw the
    // forged status is still writing cannot prove the key is q's, and leaves it in Coder rather than risk p's.
    let secrets = h.api::<Secret>();
    wait_for(
        || async {
            let status = provisioners.get("q").await.unwrap().status.unwrap_or_default();
            let recorded = secrets
                .get_opt("q-provisioner-key")
                .await
                .unwrap()
                .and_then(|s| s.metadata.annotations)
                .and_then(|a| a.get("coder.com/provisioner-key-id").cloned());
            status.provisioner_key_id.is_some() && status.provisioner_key_id == recorded
        },
        "q's status and key Secret to name the same key",
    )
    .await;
    provisioners.delete("q", &DeleteParams::default()).await.unwrap();
    wait_for(
        || async { provisioners.get_opt("q").await.unwrap().is_none() },
        "q to go",
    )
    .await;
    let deletes: Vec<String> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path)
        .collect();
    // Keys are deleted by name: every delete of the whole request log is one of q's keys (its old one at the
    // rotation and its new one at the deletion; a pass that still sees the forged status while the operator's own
    // write is in flight may rotate once more), never p's.
    let q_keys = format!("/api/v2/organizations/{}/provisionerkeys/q", org.id);
    assert!(
        deletes.len() >= 2 && deletes.iter().all(|path| *path == q_keys),
        "only q's own old and new keys are deleted, never p's (the whole request log): {deletes:?}"
    );
    let left: Vec<String> = h
        .server
        .provisioner_keys()
        .iter()
        .filter_map(|k| k["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(left, vec![p_key], "p's key survives");
}

#[tokio::test]
async fn a_workspace_proxy_not_created_for_the_object_keeps_its_token() {
    let h = harness("own-proxy").await;
    h.server.set_entitlement("workspace_proxy", Entitlement::Entitled);
    let admin_token = h.server.mint_token("proxy-admin", &["owner"]).await.unwrap();
    let coder_url = h.server.url().as_str().trim_end_matches('/').to_owned();
    let coder = h.coder(&admin_token);
    let theirs = coder
        .create_workspace_proxy(&CreateWorkspaceProxyRequest {
            name: "west".to_owned(),
            display_name: "West".to_owned(),
            icon: "/emojis/1f310.png".to_owned(),
        })
        .await
        .unwrap();
    h.put_secret("coder-admin", &[("token", &admin_token)]).await;
    crate::workspace_proxy::mark(&h, "coder-admin", &coder_url).await;
    h.server.clear_requests();
    crate::workspace_proxy::create_proxy(
        &h,
        "west",
        json!({"bootstrap": {"coderURL": coder_url, "credentialsSecretRef": {"name": "coder-admin"}}}),
    )
    .await;
    crate::workspace_proxy::wait_reason(&h, "west", "ProxyRegistered", "ProxyNotOwned").await;
    several_requeues().await;
    let requests = h.server.requests();
    assert!(
        !requests.is_empty() && requests.iter().all(|r| r.method == "GET"),
        "only reads, no regenerate: {requests:?}"
    );
    assert!(
        h.api::<Secret>()
            .get_opt("west-proxy-token")
            .await
            .unwrap()
            .is_none(),
        "no token Secret"
    );
    let proxy_token = theirs.proxy_token.expose().to_owned();
    let still = coder.workspace_proxy("west").await.unwrap();
    assert_eq!(still.id, theirs.proxy.id);
    assert!(proxy_token.starts_with(&format!("{}:", theirs.proxy.id)));
}

#[tokio::test]
async fn the_provisioner_reads_the_operator_token_only_from_a_secret_its_control_plane_controls() {
    let h = harness("own-token").await;
    // Only the provisioner controller runs: the control plane's status is what the test writes.
    h.stop.send(true).unwrap();
    let client = h.requests.client(h.cp.config().unwrap()).unwrap();
    let ctx = std::sync::Arc::new(coder_k8s_controllers::context::Context::new(
        client,
        crate::control_plane::settings(&h.ns),
        h.metrics.clone(),
    ));
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(coder_k8s_controllers::runner::run::<
        coder_k8s_api::provisioner::CoderProvisioner,
    >(ctx, async move {
        let mut stopped = stopped;
        let _ = stopped.wait_for(|s| *s).await;
    }));
    let token = h.server.mint_token("someone", &["owner"]).await.unwrap();
    h.put_secret("someones-token", &[("token", &token)]).await;
    h.create("cp", json!({})).await;
    let port = h.server.url().port().unwrap();
    let status = json!({"status": {
        "url": format!("http://cp.{}.svc.cluster.local:{port}", h.ns),
        "operatorAccessReady": true,
        "operatorTokenSecretRef": {"name": "someones-token", "key": "token"},
    }});
    h.api::<CoderControlPlane>()
        .patch_status(
            "cp",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .unwrap();
    h.server.clear_requests();
    let mut spec = sample_spec();
    spec["controlPlaneRef"]["name"] = json!("cp");
    create_provisioner(&h, "p", spec).await;
    crate::provisioner::wait_reason(&h, "p", "OperatorAccessReady", "OperatorTokenSecretNotOwned").await;
    several_requeues().await;
    let requests = h.server.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.session_token.as_deref() != Some(token.as_str())),
        "the token was sent: {requests:?}"
    );
    assert!(h.server.provisioner_keys().is_empty());
}

#[tokio::test]
async fn a_provisioner_reports_a_deployment_it_does_not_control_and_leaves_it_alone() {
    let h = harness("own-prov-deploy").await;
    ready_control_plane(&h).await;
    let labels = json!({"app": "theirs"});
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "provisioner-p"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "theirs", "image": "busybox"}]}},
        },
    }))
    .unwrap();
    let before = h
        .api::<Deployment>()
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    create_provisioner(&h, "p", sample_spec()).await;
    crate::provisioner::wait_reason(&h, "p", "ResourcesOwned", "ResourceNotOwned").await;
    several_requeues().await;
    let after = h.api::<Deployment>().get("provisioner-p").await.unwrap();
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version);
    assert!(after.metadata.owner_references.is_none());
    // The objects that were free are the provisioner's.
    let account = h.api::<ServiceAccount>().get("p-provisioner").await.unwrap();
    assert_eq!(
        account.metadata.owner_references.unwrap()[0].kind,
        "CoderProvisioner"
    );
}

#[tokio::test]
async fn a_ready_provisioner_creates_an_object_once_the_foreign_one_of_its_name_is_gone() {
    let h = harness("own-prov-gone").await;
    ready_control_plane(&h).await;
    let theirs = ServiceAccount {
        metadata: kube::api::ObjectMeta {
            name: Some("p-provisioner".to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    let accounts = h.api::<ServiceAccount>();
    accounts.create(&PostParams::default(), &theirs).await.unwrap();
    create_provisioner(&h, "p", sample_spec()).await;
    crate::provisioner::wait_reason(&h, "p", "ResourcesOwned", "ResourceNotOwned").await;
    h.deployment_ready("provisioner-p").await;
    crate::provisioner::wait_reason(&h, "p", "DeploymentReady", "MinimumReplicasReady").await;
    // The foreign ServiceAccount carries neither the operator's label nor an owner reference to the provisioner:
    // its deletion wakes nothing, so a Ready provisioner that held one of its names must look again by itself.
    accounts
        .delete("p-provisioner", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        || async {
            accounts
                .get_opt("p-provisioner")
                .await
                .unwrap()
                .and_then(|a| a.metadata.owner_references)
                .is_some_and(|owners| owners.iter().any(|o| o.kind == "CoderProvisioner"))
        },
        "the provisioner to create its ServiceAccount",
    )
    .await;
    // The pass that created it writes the status after it: the condition goes with the conflict.
    let provisioners = h.api::<coder_k8s_api::provisioner::CoderProvisioner>();
    wait_for(
        || async {
            let status = provisioners.get("p").await.unwrap().status.unwrap_or_default();
            !status.conditions.iter().any(|c| c.type_ == "ResourcesOwned")
        },
        "ResourcesOwned to be removed",
    )
    .await;
}

#[tokio::test]
async fn a_workspace_role_the_control_plane_did_not_create_is_reported_and_never_written() {
    use coder_k8s_controllers::control_plane::desired::{ControlPlaneId, workspace_role_name};
    use k8s_openapi::api::rbac::v1::Role;
    let h = harness("own-role").await;
    let id = ControlPlaneId {
        name: "squat".to_owned(),
        namespace: h.ns.clone(),
    };
    let role_name = workspace_role_name(&id, "squat");
    let theirs: Role = serde_json::from_value(json!({
        "metadata": {"name": role_name},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    }))
    .unwrap();
    let roles = h.api::<Role>();
    let created = roles.create(&PostParams::default(), &theirs).await.unwrap();
    h.create("squat", json!({})).await;
    let message = h.wait_reason("squat", "ResourcesOwned", "ResourceNotOwned").await;
    assert!(message.contains(&format!("Role {role_name:?}")), "{message}");
    several_requeues().await;
    let after = roles.get(&role_name).await.unwrap();
    assert_eq!(
        after.metadata.resource_version, created.metadata.resource_version,
        "never written"
    );
    assert_eq!(after.rules, created.rules);
}
