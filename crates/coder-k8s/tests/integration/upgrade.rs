//! Upgrading in place from the Go operator (v0.1.x): its owned objects were written with create/update under the
//! manager `coder-k8s` and carry none of our desired-hash label. The tests let our operator build the objects,
//! stop it, write each object again the way the Go operator does (a create under its Update manager, no hash), then
//! start a fresh operator, as a user swapping the image would.

use std::collections::BTreeMap;
use std::sync::Arc;

use coder_k8s::controller::apply::DESIRED_HASH_LABEL;
use coder_k8s::controller::context::Context;
use coder_k8s::controller::metrics::ReconcileMetrics;
use coder_k8s::controller::provisioner::names;
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::watch;

use crate::control_plane::{Harness, harness, settings, spawn_controllers, wait_for};
use crate::support::several_requeues;

const CP: &str = "coder";

fn control_plane_spec(db_secret: bool) -> serde_json::Value {
    let mut spec = json!({
        "extraEnv": [
            {"name": "KEEP_ME", "value": "1"},
            {"name": "DROP_ME", "value": "2"}
        ],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
        "serviceAccount": {"annotations": {"team": "a", "drop": "me"}}
    });
    if db_secret {
        spec["database"] = json!({"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}});
    }
    spec
}

/// Writes `name` again as the Go operator would have: deleted and created under the Update manager `coder-k8s`,
/// without our desired-hash label, same content and owner. Returns the new object.
async fn rewrite_as_go_operator<K>(api: &Api<K>, name: &str) -> K
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let mut object = api.get(name).await.unwrap();
    let meta = object.meta_mut();
    meta.resource_version = None;
    meta.uid = None;
    meta.creation_timestamp = None;
    meta.managed_fields = None;
    meta.generation = None;
    if let Some(labels) = meta.labels.as_mut() {
        labels.remove(DESIRED_HASH_LABEL);
    }
    api.delete(name, &DeleteParams::default()).await.unwrap();
    wait_for(
        || async { api.get_opt(name).await.unwrap().is_none() },
        "the old object to go",
    )
    .await;
    let params = PostParams {
        field_manager: Some("coder-k8s".to_owned()),
        ..PostParams::default()
    };
    api.create(&params, &object).await.unwrap()
}

/// A fresh operator process on the harness's namespace (new caches, new controllers).
fn start_new_operator(h: &Harness) -> (Arc<Context>, watch::Sender<bool>) {
    let client = h.requests.client(h.cp.config().unwrap()).unwrap();
    let metrics = ReconcileMetrics::register(&mut prometheus_client::registry::Registry::default());
    let ctx = Arc::new(Context::new(client, settings(&h.ns), metrics));
    let stop = spawn_controllers(&ctx);
    (ctx, stop)
}

fn managers(meta: &kube::api::ObjectMeta) -> Vec<(String, String)> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|e| e.subresource.as_deref().unwrap_or_default().is_empty())
        .map(|e| {
            (
                e.manager.clone().unwrap_or_default(),
                e.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// The FieldsV1 JSON of the main-resource entry of manager `coder-k8s` with `operation`.
fn fields_of(meta: &kube::api::ObjectMeta, operation: &str) -> String {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|e| e.subresource.is_none() && e.manager.as_deref() == Some("coder-k8s"))
        .find(|e| e.operation.as_deref() == Some(operation))
        .and_then(|e| e.fields_v1.as_ref())
        .map(|f| f.0.to_string())
        .unwrap_or_default()
}

async fn wait_taken_over<K>(api: &Api<K>, name: &str) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    wait_for(
        || async {
            let object = api.get(name).await.unwrap();
            object.labels().contains_key(DESIRED_HASH_LABEL)
        },
        "our operator to apply the object",
    )
    .await;
    api.get(name).await.unwrap()
}

fn env_names(deployment: &Deployment) -> Vec<String> {
    deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect()
}

#[tokio::test]
async fn go_written_objects_are_taken_over_without_a_rollout_and_dropped_fields_go() {
    let h = harness("upgrade-cp").await;
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.create(CP, control_plane_spec(true)).await;
    h.deployment_ready(CP).await;
    h.wait_operator_access(CP, true).await;
    let _ = h.stop.send(true);

    let deployments = h.api::<Deployment>();
    let accounts = h.api::<ServiceAccount>();
    let services = h.api::<Service>();
    let go_deployment = rewrite_as_go_operator(&deployments, CP).await;
    let go_account = rewrite_as_go_operator(&accounts, CP).await;
    rewrite_as_go_operator(&services, CP).await;
    h.deployment_ready(CP).await;
    assert_eq!(
        managers(&go_deployment.metadata),
        [("coder-k8s".to_owned(), "Update".to_owned())]
    );
    let secrets_before = resource_versions(&h.api::<Secret>()).await;

    let (_ctx, _stop) = start_new_operator(&h);
    let deployment = wait_taken_over(&deployments, CP).await;
    let account = wait_taken_over(&accounts, CP).await;
    wait_taken_over(&services, CP).await;

    // Nothing moved: the pod template and the generation are the Go operator's, no Secret was written again.
    // Nothing may happen on later passes either (a rotation judged from the status, a Secret rewrite).
    several_requeues().await;
    let deployment = deployments.get(&deployment.name_any()).await.unwrap();
    assert_eq!(
        deployment.metadata.generation, go_deployment.metadata.generation,
        "no pod rolled"
    );
    assert_eq!(
        serde_json::to_value(&deployment.spec.as_ref().unwrap().template).unwrap(),
        serde_json::to_value(&go_deployment.spec.as_ref().unwrap().template).unwrap()
    );
    assert_eq!(account.metadata.annotations, go_account.metadata.annotations);
    assert_eq!(resource_versions(&h.api::<Secret>()).await, secrets_before);
    // What our desired state sets moved to our Apply entry; the old Update entry keeps only what it alone set
    // (values the API server defaulted).
    for (meta, fields) in [
        (&deployment.metadata, &["DROP_ME", "KEEP_ME", "scratch"][..]),
        (&account.metadata, &["f:drop", "f:team"][..]),
    ] {
        let apply = fields_of(meta, "Apply");
        let update = fields_of(meta, "Update");
        for field in fields {
            assert!(apply.contains(field), "{field} is ours: {apply}");
            assert!(!update.contains(field), "{field} left the old manager: {update}");
        }
    }

    // A field dropped from the spec now disappears from the owned objects.
    let mut spec = control_plane_spec(true);
    spec["extraEnv"] = json!([{"name": "KEEP_ME", "value": "1"}]);
    spec["volumes"] = json!([]);
    spec["volumeMounts"] = json!([]);
    spec["serviceAccount"] = json!({"annotations": {"team": "a", "drop": null}}); // null: a merge patch deletes the key
    spec["service"] = json!({"port": h.server.url().port().unwrap()});
    h.api::<CoderControlPlane>()
        .patch(CP, &PatchParams::default(), &Patch::Merge(&json!({"spec": spec})))
        .await
        .unwrap();
    wait_for(
        || async {
            let d = deployments.get(CP).await.unwrap();
            !env_names(&d).contains(&"DROP_ME".to_owned())
        },
        "DROP_ME to leave the Deployment",
    )
    .await;
    let deployment = deployments.get(CP).await.unwrap();
    assert!(env_names(&deployment).contains(&"KEEP_ME".to_owned()));
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    assert!(
        !pod.volumes.iter().flatten().any(|v| v.name == "scratch"),
        "the dropped volume is gone: {:?}",
        pod.volumes
    );
    assert!(
        !pod.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "scratch"),
        "the dropped mount is gone"
    );
    wait_for(
        || async {
            let a = accounts.get(CP).await.unwrap();
            a.annotations().get("team").map(String::as_str) == Some("a")
                && !a.annotations().contains_key("drop")
        },
        "the dropped ServiceAccount annotation to go",
    )
    .await;
}

async fn resource_versions(api: &Api<Secret>) -> BTreeMap<String, String> {
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| (s.name_any(), s.resource_version().unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn upgraded_provisioner_keeps_its_key_and_pods() {
    let h = harness("upgrade-prov").await;
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.create(
        CP,
        json!({"database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}}),
    )
    .await;
    h.deployment_ready(CP).await;
    h.wait_operator_access(CP, true).await;
    let spec = json!({"controlPlaneRef": {"name": CP}, "replicas": 1, "tags": {"scope": "organization", "team": "a"}});
    let object = CoderProvisioner::new("prov", serde_json::from_value(spec).unwrap());
    h.api::<CoderProvisioner>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let provisioners = h.api::<CoderProvisioner>();
    wait_for(
        || async {
            let p = provisioners.get("prov").await.unwrap();
            p.status.as_ref().is_some_and(|s| s.provisioner_key_id.is_some())
        },
        "the provisioner's key",
    )
    .await;
    let _ = h.stop.send(true);

    let deployments = h.api::<Deployment>();
    let names = names::names("prov", &provisioners.get("prov").await.unwrap().spec);
    let go_deployment = rewrite_as_go_operator(&deployments, &names.deployment).await;
    rewrite_as_go_operator(&h.api::<ServiceAccount>(), &names.service_account).await;
    rewrite_as_go_operator(&h.api::<Role>(), &names.role).await;
    rewrite_as_go_operator(&h.api::<RoleBinding>(), &names.role).await;
    let secrets_before = resource_versions(&h.api::<Secret>()).await;
    let keys_before = h.server.provisioner_keys();
    h.server.clear_requests();

    let (_ctx, _stop) = start_new_operator(&h);
    let deployment = wait_taken_over(&deployments, &names.deployment).await;
    wait_taken_over(&h.api::<ServiceAccount>(), &names.service_account).await;
    wait_taken_over(&h.api::<Role>(), &names.role).await;
    wait_taken_over(&h.api::<RoleBinding>(), &names.role).await;

    // Nothing may happen on later passes either (a rotation judged from the status, a Secret rewrite).
    several_requeues().await;
    let deployment = deployments.get(&deployment.name_any()).await.unwrap();
    assert_eq!(
        deployment.metadata.generation, go_deployment.metadata.generation,
        "no pod rolled"
    );
    assert_eq!(
        serde_json::to_value(&deployment.spec.as_ref().unwrap().template).unwrap(),
        serde_json::to_value(&go_deployment.spec.as_ref().unwrap().template).unwrap()
    );
    assert_eq!(
        resource_versions(&h.api::<Secret>()).await,
        secrets_before,
        "no Secret rewritten"
    );
    assert_eq!(h.server.provisioner_keys(), keys_before, "the same keys in Coder");
    let writes: Vec<_> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "no Coder write after the upgrade: {writes:?}");
}

#[tokio::test]
async fn upgraded_workspace_proxy_keeps_its_registration_and_token() {
    let h = harness("upgrade-proxy").await;
    h.server.set_entitlement(
        "workspace_proxy",
        coder_k8s_coder_testserver::Entitlement::Entitled,
    );
    let admin_token = h.server.mint_token("proxy-admin", &["owner"]).await.unwrap();
    let coder_url = h.server.url().as_str().trim_end_matches('/').to_owned();
    h.put_secret("coder-admin", &[("token", &admin_token)]).await;
    let consent = json!({"metadata": {
        "labels": {"coder.com/credential": "true"},
        "annotations": {"coder.com/credential-destinations": coder_url},
    }});
    h.api::<Secret>()
        .patch("coder-admin", &PatchParams::default(), &Patch::Merge(&consent))
        .await
        .unwrap();
    let spec = json!({"bootstrap": {"coderURL": coder_url, "credentialsSecretRef": {"name": "coder-admin"}}});
    let proxy = CoderWorkspaceProxy::new("east", serde_json::from_value(spec).unwrap());
    let proxies = h.api::<CoderWorkspaceProxy>();
    proxies.create(&PostParams::default(), &proxy).await.unwrap();
    let deployments = h.api::<Deployment>();
    wait_for(
        || async { deployments.get_opt("wsproxy-east").await.unwrap().is_some() },
        "the proxy's Deployment",
    )
    .await;
    let _ = h.stop.send(true);

    let go_deployment = rewrite_as_go_operator(&deployments, "wsproxy-east").await;
    let secrets_before = resource_versions(&h.api::<Secret>()).await;
    let proxies_before = h.coder(&admin_token).workspace_proxy("east").await.unwrap();
    h.server.clear_requests();

    let (_ctx, _stop) = start_new_operator(&h);
    let deployment = wait_taken_over(&deployments, "wsproxy-east").await;
    // Nothing may happen on later passes either (a rotation judged from the status, a Secret rewrite).
    several_requeues().await;
    let deployment = deployments.get(&deployment.name_any()).await.unwrap();
    assert_eq!(
        deployment.metadata.generation, go_deployment.metadata.generation,
        "no pod rolled"
    );
    assert_eq!(
        serde_json::to_value(&deployment.spec.as_ref().unwrap().template).unwrap(),
        serde_json::to_value(&go_deployment.spec.as_ref().unwrap().template).unwrap()
    );
    assert_eq!(
        resource_versions(&h.api::<Secret>()).await,
        secrets_before,
        "the proxy token was not rewritten"
    );
    let writes: Vec<_> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        writes.is_empty(),
        "no Coder write (no re-registration, no new token): {writes:?}"
    );
    let after = h.coder(&admin_token).workspace_proxy("east").await.unwrap();
    assert_eq!(after.id, proxies_before.id);
}
