//! Upgrading in place from the Go operator (v0.1.x): its owned objects were written with create/update under the
//! manager `coder-k8s` and carry none of our desired-hash label. The tests let our operator build the objects,
//! stop it, write each object again the way the Go operator does (a create under its Update manager, no hash), then
//! start a fresh operator, as a user swapping the image would.

use std::collections::BTreeMap;
use std::sync::Arc;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use coder_k8s_controllers::context::Context;
use coder_k8s_controllers::labels::DESIRED_HASH_LABEL;
use coder_k8s_controllers::metrics::ReconcileMetrics;
use coder_k8s_controllers::provisioner::desired as names;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::watch;

use crate::control_plane::{Harness, harness, settings, spawn_controllers};
use crate::support::several_requeues;
use crate::support::wait_for;

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
    assert_no_rollout(&deployment, &go_deployment);
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

/// The Deployment as it is now against the one the Go operator left: same generation and pod template, so no pod
/// rolled.
fn assert_no_rollout(now: &Deployment, go: &Deployment) {
    assert_eq!(now.metadata.generation, go.metadata.generation, "no pod rolled");
    assert_eq!(
        serde_json::to_value(&now.spec.as_ref().unwrap().template).unwrap(),
        serde_json::to_value(&go.spec.as_ref().unwrap().template).unwrap(),
        "the pod template is the Go operator's"
    );
}

/// Every request of the Coder test server's whole log that is not a GET, as `METHOD path`.
fn coder_writes(h: &Harness) -> Vec<String> {
    h.server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
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
    assert_no_rollout(&deployment, &go_deployment);
    assert_eq!(
        resource_versions(&h.api::<Secret>()).await,
        secrets_before,
        "no Secret rewritten"
    );
    assert_eq!(h.server.provisioner_keys(), keys_before, "the same keys in Coder");
    let writes = coder_writes(&h);
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
    assert_no_rollout(&deployment, &go_deployment);
    assert_eq!(
        resource_versions(&h.api::<Secret>()).await,
        secrets_before,
        "the proxy token was not rewritten"
    );
    let writes = coder_writes(&h);
    assert!(
        writes.is_empty(),
        "no Coder write (no re-registration, no new token): {writes:?}"
    );
    let after = h.coder(&admin_token).workspace_proxy("east").await.unwrap();
    assert_eq!(after.id, proxies_before.id);
}

// ---------------------------------------------------------------------------------------------------------------
// Independent fixtures: the objects below are written as literal JSON derived by hand from the Go operator's
// controllers (coder/coder-k8s, internal/controller/codercontrolplane_controller.go and
// coderprovisioner_controller.go), not from anything our operator rendered. Each is created the way the Go
// operator's controllerutil.CreateOrUpdate does it: a plain create under the Update manager `coder-k8s`, without our
// desired-hash label. A difference between the Go rendering and ours would change the pod template (and bump
// `metadata.generation`) once our operator applies, which is a rolling restart of every pod on upgrade.
// ---------------------------------------------------------------------------------------------------------------

/// FNV-1a 32-bit as lowercase hex, the Go operator's `hashProvisionerSecret` (hash/fnv New32a, `%08x`); written out
/// here so the fixture does not depend on our implementation of it.
fn go_fnv32a_hex(bytes: &[u8]) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in bytes {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{hash:08x}")
}

/// Go `controlPlaneLabels(name)`.
fn go_control_plane_labels(name: &str) -> serde_json::Value {
    json!({
        "app.kubernetes.io/name": "coder-control-plane",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/managed-by": "coder-k8s",
    })
}

/// Go `provisionerLabels(name)` (names shorter than 63 characters are used as they are).
fn go_provisioner_labels(name: &str) -> serde_json::Value {
    json!({
        "app.kubernetes.io/name": "coder-provisioner",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/managed-by": "coder-k8s",
    })
}

/// Go `controllerutil.SetControllerReference(owner, object, scheme)`.
fn go_controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> serde_json::Value {
    json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "name": owner.meta().name.clone().unwrap(),
        "uid": owner.meta().uid.clone().unwrap(),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// Go `CoderControlPlaneReconciler.reconcileDeployment` for a spec without image, replicas, TLS, certs, envFrom,
/// database, probes or scheduling fields: one container `coder`, args `--http-address=0.0.0.0:8080`, env
/// KUBE_POD_IP / CODER_DERP_SERVER_RELAY_URL / CODER_ACCESS_URL (service port `port`, no TLS) then `extra_env`,
/// port `http` 8080, the default readiness probe of `buildProbe` (path /healthz, port `http`, scheme HTTP, 10/1/1/3,
/// initialDelaySeconds 0 which Go omits), no liveness probe, `resources: {}` (Go's zero struct), the spec's volumes
/// and mounts appended to the (empty) operator ones.
fn go_control_plane_deployment(
    cp: &CoderControlPlane,
    port: u16,
    extra_env: serde_json::Value,
    volumes: Option<serde_json::Value>,
    volume_mounts: Option<serde_json::Value>,
) -> serde_json::Value {
    let name = cp.name_any();
    let ns = cp.namespace().unwrap();
    let labels = go_control_plane_labels(&name);
    let mut env = vec![
        json!({"name": "KUBE_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}),
        json!({"name": "CODER_DERP_SERVER_RELAY_URL", "value": "http://$(KUBE_POD_IP):8080"}),
        json!({"name": "CODER_ACCESS_URL", "value": format!("http://{name}.{ns}.svc.cluster.local:{port}")}),
    ];
    env.extend(extra_env.as_array().unwrap().iter().cloned());
    let mut container = json!({
        "name": "coder",
        "image": "ghcr.io/coder/coder:latest",
        "args": ["--http-address=0.0.0.0:8080"],
        "env": env,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "resources": {},
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
            "periodSeconds": 10,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
    });
    if let Some(mounts) = volume_mounts {
        container["volumeMounts"] = mounts;
    }
    let mut pod = json!({"serviceAccountName": name, "containers": [container]});
    if let Some(volumes) = volumes {
        pod["volumes"] = volumes;
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [go_controller_ref(cp)]},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    })
}

/// Go `CoderControlPlaneReconciler.reconcileService` without TLS or annotations: ClusterIP, one port `http`
/// `port` -> 8080/TCP, selector = the control-plane labels.
fn go_control_plane_service(cp: &CoderControlPlane, port: u16) -> serde_json::Value {
    let name = cp.name_any();
    let labels = go_control_plane_labels(&name);
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [go_controller_ref(cp)]},
        "spec": {
            "type": "ClusterIP",
            "selector": labels,
            "ports": [{"name": "http", "port": port, "protocol": "TCP", "targetPort": 8080}],
        },
    })
}

/// Go `CoderControlPlaneReconciler.reconcileServiceAccount` without spec.serviceAccount labels/annotations.
fn go_control_plane_service_account(cp: &CoderControlPlane) -> serde_json::Value {
    let name = cp.name_any();
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "labels": go_control_plane_labels(&name), "ownerReferences": [go_controller_ref(cp)]},
    })
}

/// Creates `fixture` as the Go operator would (a create under the Update manager `coder-k8s`), after removing an
/// object of that name if one exists. Returns the stored object.
async fn create_go_fixture<K>(api: &Api<K>, fixture: serde_json::Value) -> K
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(fixture).unwrap();
    let name = object.meta().name.clone().unwrap();
    if api.get_opt(&name).await.unwrap().is_some() {
        api.delete(&name, &DeleteParams::default()).await.unwrap();
        wait_for(
            || async { api.get_opt(&name).await.unwrap().is_none() },
            "the old object to go",
        )
        .await;
    }
    let params = PostParams {
        field_manager: Some("coder-k8s".to_owned()),
        ..PostParams::default()
    };
    api.create(&params, &object).await.unwrap()
}

/// The pod template and generation of `before` are still those of the Deployment now stored, after our operator
/// applied it (hash label present) and several requeues passed.
async fn assert_deployment_not_rolled(deployments: &Api<Deployment>, before: &Deployment) {
    let name = before.name_any();
    wait_taken_over(deployments, &name).await;
    several_requeues().await;
    let after = deployments.get(&name).await.unwrap();
    assert_eq!(
        serde_json::to_value(&after.spec.as_ref().unwrap().template).unwrap(),
        serde_json::to_value(&before.spec.as_ref().unwrap().template).unwrap(),
        "{name}: the pod template the Go operator wrote is unchanged"
    );
    assert_eq!(
        after.metadata.generation, before.metadata.generation,
        "{name}: no new generation, no pod rolled"
    );
}

/// One control plane (spec `spec` plus the harness's service port) whose owned objects only the Go operator ever
/// wrote; our operator then starts for the first time.
async fn go_control_plane_is_taken_over_without_a_rollout(
    tag: &str,
    spec: serde_json::Value,
    extra_env: serde_json::Value,
    volumes: Option<serde_json::Value>,
    volume_mounts: Option<serde_json::Value>,
) {
    let h = harness(tag).await;
    // The Go operator is the one running: ours is stopped before the control plane exists.
    let _ = h.stop.send(true);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let cp = h.create(CP, spec).await;
    let port = h.server.url().port().unwrap();

    let deployments = h.api::<Deployment>();
    let services = h.api::<Service>();
    let go_account =
        create_go_fixture(&h.api::<ServiceAccount>(), go_control_plane_service_account(&cp)).await;
    let go_deployment = create_go_fixture(
        &deployments,
        go_control_plane_deployment(&cp, port, extra_env, volumes, volume_mounts),
    )
    .await;
    let go_service = create_go_fixture(&services, go_control_plane_service(&cp, port)).await;

    let (_ctx, _stop) = start_new_operator(&h);
    assert_deployment_not_rolled(&deployments, &go_deployment).await;
    let service = wait_taken_over(&services, CP).await;
    assert_eq!(
        serde_json::to_value(&service.spec).unwrap(),
        serde_json::to_value(&go_service.spec).unwrap(),
        "the Service is the Go operator's"
    );
    let account = wait_taken_over(&h.api::<ServiceAccount>(), CP).await;
    assert_eq!(account.metadata.annotations, go_account.metadata.annotations);
}

#[tokio::test]
async fn go_rendered_minimal_control_plane_rolls_no_pods() {
    go_control_plane_is_taken_over_without_a_rollout("upgrade-go-cp-min", json!({}), json!([]), None, None)
        .await;
}

#[tokio::test]
async fn go_rendered_control_plane_with_env_and_volume_rolls_no_pods() {
    let spec = json!({
        "extraEnv": [{"name": "FOO", "value": "bar"}],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
    });
    go_control_plane_is_taken_over_without_a_rollout(
        "upgrade-go-cp-vol",
        spec.clone(),
        spec["extraEnv"].clone(),
        Some(spec["volumes"].clone()),
        Some(spec["volumeMounts"].clone()),
    )
    .await;
}

/// Go `CoderProvisionerReconciler.reconcileDeployment` for the sample provisioner (no image, organization `default`,
/// no extraArgs/extraEnv/resources/imagePullSecrets): container `provisioner` running `coder provisioner start`
/// (v0.1.5: command `coder`, args `provisioner start`), env CODER_URL = the control plane's status.url and
/// CODER_PROVISIONER_DAEMON_KEY from the key Secret (a secretKeyRef with name and key only), no
/// CODER_ORGANIZATION for the default organization, `resources: {}` (Go's zero struct), terminationGracePeriodSeconds
/// 600, and the pod annotation `checksum/provisioner-key` = `hashProvisionerSecret(key)`.
fn go_provisioner_deployment(
    provisioner: &CoderProvisioner,
    coder_url: &str,
    key_secret: &str,
    key_checksum: &str,
) -> serde_json::Value {
    let name = provisioner.name_any();
    let labels = go_provisioner_labels(&name);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": format!("provisioner-{name}"),
            "labels": labels,
            "ownerReferences": [go_controller_ref(provisioner)],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {"checksum/provisioner-key": key_checksum}},
                "spec": {
                    "serviceAccountName": format!("{name}-provisioner"),
                    "terminationGracePeriodSeconds": 600,
                    "containers": [{
                        "name": "provisioner",
                        "image": "ghcr.io/coder/coder:latest",
                        "command": ["coder"],
                        "args": ["provisioner", "start"],
                        "env": [
                            {"name": "CODER_URL", "value": coder_url},
                            {"name": "CODER_PROVISIONER_DAEMON_KEY",
                             "valueFrom": {"secretKeyRef": {"name": key_secret, "key": "key"}}},
                        ],
                        "resources": {},
                    }],
                },
            },
        },
    })
}

/// Go `CoderProvisionerReconciler.reconcileServiceAccount`.
fn go_provisioner_service_account(provisioner: &CoderProvisioner) -> serde_json::Value {
    let name = provisioner.name_any();
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": format!("{name}-provisioner"),
            "labels": go_provisioner_labels(&name),
            "ownerReferences": [go_controller_ref(provisioner)],
        },
    })
}

/// Go `CoderProvisionerReconciler.reconcileRole`: pods and PVCs, get/list/watch/create/update/patch/delete.
fn go_provisioner_role(provisioner: &CoderProvisioner) -> serde_json::Value {
    let name = provisioner.name_any();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {
            "name": format!("provisioner-{name}"),
            "labels": go_provisioner_labels(&name),
            "ownerReferences": [go_controller_ref(provisioner)],
        },
        "rules": [{
            "apiGroups": [""],
            "resources": ["pods", "persistentvolumeclaims"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        }],
    })
}

/// Go `CoderProvisionerReconciler.reconcileRoleBinding`: the Role above bound to the provisioner's ServiceAccount.
fn go_provisioner_role_binding(provisioner: &CoderProvisioner) -> serde_json::Value {
    let name = provisioner.name_any();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": format!("provisioner-{name}"),
            "labels": go_provisioner_labels(&name),
            "ownerReferences": [go_controller_ref(provisioner)],
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("provisioner-{name}")},
        "subjects": [{"kind": "ServiceAccount", "name": format!("{name}-provisioner"), "namespace": provisioner.namespace().unwrap()}],
    })
}

#[tokio::test]
async fn go_rendered_sample_provisioner_rolls_no_pods() {
    let h = harness("upgrade-go-prov").await;
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.create(
        CP,
        json!({"database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}}),
    )
    .await;
    h.deployment_ready(CP).await;
    h.wait_operator_access(CP, true).await;
    // config/samples/coder_v1alpha1_coderprovisioner.yaml, pointed at this control plane.
    let name = "coderprovisioner-sample";
    let spec = json!({"controlPlaneRef": {"name": CP}, "replicas": 1, "tags": {"scope": "organization"}});
    let provisioners = h.api::<CoderProvisioner>();
    provisioners
        .create(
            &PostParams::default(),
            &CoderProvisioner::new(name, serde_json::from_value(spec).unwrap()),
        )
        .await
        .unwrap();
    wait_for(
        || async {
            let p = provisioners.get(name).await.unwrap();
            p.status.as_ref().is_some_and(|s| s.provisioner_key_id.is_some())
        },
        "the provisioner's key",
    )
    .await;
    // From here the Go operator owns the objects: ours stops, and each object is written from its Go fixture. The
    // key Secret (and the key in Coder) is the one the Go operator would have created; its checksum is Go's.
    let _ = h.stop.send(true);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let provisioner = provisioners.get(name).await.unwrap();
    let key_secret = format!("{name}-provisioner-key");
    let key = h.api::<Secret>().get(&key_secret).await.unwrap().data.unwrap()["key"]
        .0
        .clone();
    let coder_url = h.get(CP).await.status.unwrap().url.unwrap();

    create_go_fixture(
        &h.api::<ServiceAccount>(),
        go_provisioner_service_account(&provisioner),
    )
    .await;
    create_go_fixture(&h.api::<Role>(), go_provisioner_role(&provisioner)).await;
    create_go_fixture(&h.api::<RoleBinding>(), go_provisioner_role_binding(&provisioner)).await;
    let deployments = h.api::<Deployment>();
    let go_deployment = create_go_fixture(
        &deployments,
        go_provisioner_deployment(&provisioner, &coder_url, &key_secret, &go_fnv32a_hex(&key)),
    )
    .await;

    let (_ctx, _stop) = start_new_operator(&h);
    assert_deployment_not_rolled(&deployments, &go_deployment).await;
    let role = wait_taken_over(&h.api::<Role>(), &format!("provisioner-{name}")).await;
    assert_eq!(
        serde_json::to_value(&role.rules).unwrap(),
        go_provisioner_role(&provisioner)["rules"],
        "the Role's rules are the Go operator's"
    );
}

#[test]
fn go_fnv32a_matches_the_published_vectors() {
    // FNV-1a 32-bit reference values (offset basis for "", and "a").
    assert_eq!(go_fnv32a_hex(b""), "811c9dc5");
    assert_eq!(go_fnv32a_hex(b"a"), "e40c292c");
}
