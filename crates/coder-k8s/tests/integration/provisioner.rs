//! The CoderProvisioner controller on the real kube-apiserver, PostgreSQL and the Coder API test server (the same
//! harness as the control plane tests, which runs both controllers).

use std::time::Duration;

use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_coder_testserver::{Config, Entitlement, Fault, FaultRule, TestServer};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::control_plane::{Harness, harness};
use crate::support::wait_for;

/// A ready control plane with operator access; returns its operator token.
pub(crate) async fn ready_control_plane(h: &Harness) -> String {
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.create(
        "codercontrolplane-sample",
        json!({"database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}}),
    )
    .await;
    h.deployment_ready("codercontrolplane-sample").await;
    h.wait_operator_access("codercontrolplane-sample", true).await;
    h.token_of("codercontrolplane-sample-operator-token").await
}

pub(crate) async fn create_provisioner(h: &Harness, name: &str, spec: serde_json::Value) {
    let object = CoderProvisioner::new(name, serde_json::from_value(spec).unwrap());
    h.api::<CoderProvisioner>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

pub(crate) fn sample_spec() -> serde_json::Value {
    json!({"controlPlaneRef": {"name": "codercontrolplane-sample"}, "replicas": 1, "tags": {"scope": "organization"}})
}

async fn reason(h: &Harness, name: &str, type_: &str) -> Option<(String, String)> {
    let p = h.api::<CoderProvisioner>().get(name).await.unwrap();
    p.status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status, c.reason))
}

pub(crate) async fn wait_reason(h: &Harness, name: &str, type_: &str, expected: &str) {
    let mut last = None;
    for _ in 0..300 {
        last = reason(h, name, type_).await;
        if last.as_ref().is_some_and(|(_, r)| r == expected) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{name}: {type_} never became {expected}; last {last:?}");
}

fn keys(server: &TestServer) -> Vec<String> {
    server
        .provisioner_keys()
        .iter()
        .filter_map(|k| k["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn seed_000_tutorial_and_clean_up() {
    let h = harness("prov-seed").await;
    ready_control_plane(&h).await;
    create_provisioner(&h, "coderprovisioner-sample", sample_spec()).await;
    let deployments = h.api::<Deployment>();
    wait_for(
        || async {
            deployments
                .get_opt("provisioner-coderprovisioner-sample")
                .await
                .unwrap()
                .is_some()
        },
        "the Deployment",
    )
    .await;
    // The five objects of the tutorial's table.
    assert!(
        h.api::<ServiceAccount>()
            .get_opt("coderprovisioner-sample-provisioner")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        h.api::<Role>()
            .get_opt("provisioner-coderprovisioner-sample")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        h.api::<RoleBinding>()
            .get_opt("provisioner-coderprovisioner-sample")
            .await
            .unwrap()
            .is_some()
    );
    let secret = h
        .api::<Secret>()
        .get("coderprovisioner-sample-provisioner-key")
        .await
        .unwrap();
    let key = String::from_utf8(secret.data.unwrap()["key"].0.clone()).unwrap();
    assert_eq!(key.len(), 43);
    assert_eq!(keys(&h.server), ["coderprovisioner-sample"]);

    h.deployment_ready("provisioner-coderprovisioner-sample").await;
    wait_reason(
        &h,
        "coderprovisioner-sample",
        "DeploymentReady",
        "MinimumReplicasReady",
    )
    .await;
    let p = h
        .api::<CoderProvisioner>()
        .get("coderprovisioner-sample")
        .await
        .unwrap();
    let status = p.status.unwrap();
    assert_eq!(status.phase, Some(coder_k8s_api::shared::WorkloadPhase::Ready));
    assert!(status.provisioner_key_id.is_some() && status.organization_id.is_some());
    for (type_, expected) in [
        ("CredentialsReady", "True"),
        ("DeploymentReady", "True"),
        ("ProvisionerKeyReady", "True"),
    ] {
        let condition = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
        assert_eq!(condition.status, expected, "{type_}");
    }
    let deployment = deployments
        .get("provisioner-coderprovisioner-sample")
        .await
        .unwrap();
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    let url = container
        .env
        .as_ref()
        .unwrap()
        .iter()
        .find(|e| e.name == "CODER_URL")
        .unwrap()
        .value
        .clone()
        .unwrap();
    assert_eq!(
        url,
        format!(
            "http://codercontrolplane-sample.{}.svc.cluster.local:{}",
            h.ns,
            h.server.url().port().unwrap()
        )
    );

    // At rest: a Ready provisioner is not reconciled again (four times the tests' 1 s retry and entitlements
    // intervals). The only Coder calls are the control plane's own entitlements and token checks, at most one of
    // each per control plane pass; no Kubernetes read or write.
    let (reconciles, cp_runs) = (
        h.metrics.runs("CoderProvisioner"),
        h.metrics.runs("CoderControlPlane"),
    );
    let (coder_requests, reads, writes) =
        (h.server.requests().len(), h.requests.reads(), h.requests.writes());
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        h.metrics.runs("CoderProvisioner"),
        reconciles,
        "a Ready provisioner was reconciled at rest"
    );
    let cp_passes = h.metrics.runs("CoderControlPlane") - cp_runs;
    let calls: Vec<_> = h.server.requests()[coder_requests..]
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    let polls = ["GET /api/v2/entitlements", "GET /api/v2/users/me"];
    assert!(
        calls.iter().all(|c| polls.contains(&c.as_str())),
        "only the control plane's polls at rest: {calls:?}"
    );
    // One pass may be in flight at either end of the window, so one read more than the passes counted.
    let entitlement_reads = calls.iter().filter(|c| *c == polls[0]).count();
    assert!(
        cp_passes >= 2 && entitlement_reads <= cp_passes as usize + 1,
        "{entitlement_reads} entitlements reads in {cp_passes} control plane passes"
    );
    assert_eq!((h.requests.reads(), h.requests.writes()), (reads, writes));

    // The control plane's poll is what notices a licence change, and its status change wakes the provisioner.
    h.server
        .set_entitlement("external_provisioner_daemons", Entitlement::NotEntitled);
    wait_reason(
        &h,
        "coderprovisioner-sample",
        "ExternalProvisionersEntitled",
        "NotEntitled",
    )
    .await;
    h.server
        .set_entitlement("external_provisioner_daemons", Entitlement::Entitled);
    wait_reason(
        &h,
        "coderprovisioner-sample",
        "ExternalProvisionersEntitled",
        "Entitled",
    )
    .await;

    // Clean up: the key goes in Coder.
    h.api::<CoderProvisioner>()
        .delete("coderprovisioner-sample", &DeleteParams::default())
        .await
        .unwrap();
    let provisioners = h.api::<CoderProvisioner>();
    wait_for(
        || async {
            provisioners
                .get_opt("coderprovisioner-sample")
                .await
                .unwrap()
                .is_none()
        },
        "the provisioner to go",
    )
    .await;
    assert!(keys(&h.server).is_empty(), "{:?}", keys(&h.server));
}

#[tokio::test]
async fn spec_drift_rotates_to_exactly_one_new_key() {
    let h = harness("prov-drift").await;
    ready_control_plane(&h).await;
    create_provisioner(&h, "p", sample_spec()).await;
    wait_reason(&h, "p", "ProvisionerKeyReady", "ProvisionerKeyReady").await;
    let first = h
        .api::<CoderProvisioner>()
        .get("p")
        .await
        .unwrap()
        .status
        .unwrap()
        .provisioner_key_id
        .unwrap();
    let patch = json!({"spec": {"tags": {"scope": "organization", "pool": "gpu"}}});
    h.api::<CoderProvisioner>()
        .patch("p", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let provisioners = h.api::<CoderProvisioner>();
    wait_for(
        || async {
            provisioners
                .get("p")
                .await
                .unwrap()
                .status
                .unwrap()
                .provisioner_key_id
                .is_some_and(|id| id != first)
        },
        "a new key",
    )
    .await;
    let all = h.server.provisioner_keys();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["tags"]["pool"], "gpu");
}

#[tokio::test]
async fn credential_secrets_must_consent_to_the_origin() {
    let h = harness("prov-cred").await;
    ready_control_plane(&h).await;
    h.put_secret("extra", &[("value", "s3cret")]).await;
    let mut spec = sample_spec();
    spec["extraEnv"] =
        json!([{"name": "EXTRA", "valueFrom": {"secretKeyRef": {"name": "extra", "key": "value"}}}]);
    create_provisioner(&h, "p", spec).await;
    wait_reason(&h, "p", "CredentialsReady", "CredentialSecretNotMarked").await;
    assert!(
        h.api::<Deployment>()
            .get_opt("provisioner-p")
            .await
            .unwrap()
            .is_none(),
        "no Deployment while refused"
    );
    assert!(h.server.provisioner_keys().is_empty(), "no key while refused");

    let secrets = h.api::<Secret>();
    let mark = |origin: &str| {
        json!({"metadata": {
            "labels": {"coder.com/credential": "true"},
            "annotations": {"coder.com/credential-destinations": origin},
        }})
    };
    secrets
        .patch(
            "extra",
            &PatchParams::default(),
            &Patch::Merge(&mark("https://other.example.com")),
        )
        .await
        .unwrap();
    wait_reason(&h, "p", "CredentialsReady", "CredentialDestinationNotListed").await;
    let origin = format!(
        "http://codercontrolplane-sample.{}.svc.cluster.local:{}",
        h.ns,
        h.server.url().port().unwrap()
    );
    secrets
        .patch("extra", &PatchParams::default(), &Patch::Merge(&mark(&origin)))
        .await
        .unwrap();
    wait_reason(&h, "p", "CredentialsReady", "CredentialsVerified").await;
    let deployments = h.api::<Deployment>();
    wait_for(
        || async { deployments.get_opt("provisioner-p").await.unwrap().is_some() },
        "the Deployment",
    )
    .await;
}

#[tokio::test]
async fn key_secret_owned_by_someone_else_is_refused() {
    let h = harness("prov-owned").await;
    ready_control_plane(&h).await;
    h.put_secret("mine", &[("key", "do-not-touch")]).await;
    let mut spec = sample_spec();
    spec["key"] = json!({"secretName": "mine"});
    create_provisioner(&h, "p", spec).await;
    wait_reason(&h, "p", "CredentialsReady", "KeySecretNotOwned").await;
    let secret = h.api::<Secret>().get("mine").await.unwrap();
    assert_eq!(secret.data.unwrap()["key"].0, b"do-not-touch");
    assert!(h.server.provisioner_keys().is_empty());
}

#[tokio::test]
async fn rate_limit_then_success() {
    let h = harness("prov-429").await;
    ready_control_plane(&h).await;
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: "/api/v2/organizations/".to_owned(),
        fault: Fault::RateLimited { retry_after_secs: 1 },
        // Until the test has seen the condition: a single 429 followed by a 1 s retry can pass between two polls.
        times: None,
    });
    create_provisioner(&h, "p", sample_spec()).await;
    wait_reason(&h, "p", "ProvisionerKeyReady", "RateLimited").await;
    assert!(h.server.provisioner_keys().is_empty());
    h.server.clear_faults();
    wait_reason(&h, "p", "ProvisionerKeyReady", "ProvisionerKeyReady").await;
    assert_eq!(h.server.provisioner_keys().len(), 1);
}

#[tokio::test]
async fn cross_origin_redirect_on_the_key_call_is_refused() {
    let h = harness("prov-redirect").await;
    ready_control_plane(&h).await;
    let other = TestServer::start(Config::new(&h.db_url)).await.unwrap();
    h.server.add_fault(FaultRule {
        method: None,
        path_prefix: "/api/v2/organizations/".to_owned(),
        fault: Fault::RedirectTo(other.url()),
        times: None,
    });
    create_provisioner(&h, "p", sample_spec()).await;
    wait_reason(&h, "p", "ProvisionerKeyReady", "ProvisionerKeyFailed").await;
    assert!(
        other.requests().iter().all(|r| r.session_token.is_none()),
        "{:?}",
        other.requests()
    );
    assert!(h.server.provisioner_keys().is_empty());
}

#[tokio::test]
async fn delete_is_best_effort_and_retries_only_coder_unavailability() {
    let h = harness("prov-delete").await;
    ready_control_plane(&h).await;
    create_provisioner(&h, "p", sample_spec()).await;
    wait_reason(&h, "p", "ProvisionerKeyReady", "ProvisionerKeyReady").await;

    // A proxy's 404 on the delete is not "gone": the delete is retried within the window, then the finalizer is
    // released anyway and the key stays in Coder.
    h.server.add_fault(FaultRule {
        method: Some("DELETE".to_owned()),
        path_prefix: "/api/v2/organizations/".to_owned(),
        fault: Fault::ProxyNotFound,
        times: None,
    });
    let started = std::time::Instant::now();
    h.api::<CoderProvisioner>()
        .delete("p", &DeleteParams::default())
        .await
        .unwrap();
    let provisioners = h.api::<CoderProvisioner>();
    wait_for(
        || async { provisioners.get_opt("p").await.unwrap().is_none() },
        "the finalizer to be released",
    )
    .await;
    let deletes = h
        .server
        .requests()
        .iter()
        .filter(|r| r.method == "DELETE")
        .count();
    assert!(deletes >= 2, "the delete was retried ({deletes} tries)");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "retried within the window: {:?}",
        started.elapsed()
    );
    assert_eq!(
        h.server.provisioner_keys().len(),
        1,
        "the key stays valid in Coder"
    );

    // Without a recorded key there is no Coder call at all.
    h.server.clear_faults();
    h.server.clear_requests();
    create_provisioner(
        &h,
        "never",
        json!({"controlPlaneRef": {"name": "missing-control-plane"}}),
    )
    .await;
    wait_reason(&h, "never", "ControlPlaneReady", "ControlPlaneUnavailable").await;
    h.api::<CoderProvisioner>()
        .delete("never", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        || async { provisioners.get_opt("never").await.unwrap().is_none() },
        "the finalizer",
    )
    .await;
    assert!(h.server.requests().iter().all(|r| r.method != "DELETE"));
}

#[tokio::test]
async fn a_deletion_while_a_rotation_creates_the_new_key_deletes_the_new_key() {
    let h = harness("prov-delete-rotating").await;
    let token = ready_control_plane(&h).await;
    let org = h.coder(&token).default_organization().await.unwrap();
    create_provisioner(&h, "p", sample_spec()).await;
    wait_reason(&h, "p", "ProvisionerKeyReady", "ProvisionerKeyReady").await;

    // The rotation's create answers after 3 s, so the deletion arrives while the new key is being created: the pass
    // that handles it comes right after the rotating one, and the cache may still show the create marker.
    let key_path = format!("/api/v2/organizations/{}/provisionerkeys", org.id);
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: key_path.clone(),
        fault: Fault::Latency(Duration::from_secs(3)),
        times: Some(1),
    });
    h.server.clear_requests();
    let provisioners = h.api::<CoderProvisioner>();
    let patch = json!({"spec": {"tags": {"scope": "organization", "pool": "gpu"}}});
    provisioners
        .patch("p", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for(
        || async {
            let status = provisioners.get("p").await.unwrap().status.unwrap_or_default();
            status.key_create_started_at.is_some() && status.provisioner_key_id.is_none()
        },
        "the rotation's create marker",
    )
    .await;
    provisioners.delete("p", &DeleteParams::default()).await.unwrap();
    wait_for(
        || async { provisioners.get_opt("p").await.unwrap().is_none() },
        "the finalizer to be released",
    )
    .await;

    let requests = h.server.requests();
    let creates = requests
        .iter()
        .filter(|r| r.method == "POST" && r.path == key_path)
        .count();
    assert_eq!(creates, 1, "the rotation created one new key");
    let deletes: Vec<&str> = requests
        .iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path.as_str())
        .collect();
    let by_name = format!("{key_path}/p");
    assert_eq!(
        deletes,
        vec![by_name.as_str(), by_name.as_str()],
        "the old key at the rotation, the new one at the deletion (the whole request log)"
    );
    assert_eq!(
        keys(&h.server),
        Vec::<String>::new(),
        "no key stays valid in Coder"
    );
}

/// A second operator process on the harness's cluster and Coder (a restart or an upgrade): its own context, caches
/// and metrics. It stops when the returned sender is dropped.
fn restart_operator(
    h: &Harness,
) -> (
    std::sync::Arc<coder_k8s_controllers::metrics::ReconcileMetrics>,
    tokio::sync::watch::Sender<bool>,
) {
    let requests = coder_k8s::kube_requests::KubeRequests::default();
    let client = requests.client(h.cp.config().unwrap()).unwrap();
    let metrics = coder_k8s_controllers::metrics::ReconcileMetrics::register(
        &mut prometheus_client::registry::Registry::default(),
    );
    let ctx = std::sync::Arc::new(coder_k8s_controllers::context::Context::new(
        client,
        crate::control_plane::settings(&h.ns),
        metrics.clone(),
    ));
    (metrics, crate::control_plane::spawn_controllers(&ctx))
}

#[tokio::test]
async fn an_upgraded_provisioner_keeps_its_key_and_its_pods() {
    let h = harness("prov-upgrade").await;
    ready_control_plane(&h).await;
    create_provisioner(&h, "p", sample_spec()).await;
    wait_reason(&h, "p", "ProvisionerKeyReady", "ProvisionerKeyReady").await;
    let deployments = h.api::<Deployment>();
    wait_for(
        || async { deployments.get_opt("provisioner-p").await.unwrap().is_some() },
        "the Deployment",
    )
    .await;
    // The operator goes away; what stays is what the Go operator (v0.1.5) would have left behind.
    h.stop.send(true).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let key = String::from_utf8(
        h.api::<Secret>()
            .get("p-provisioner-key")
            .await
            .unwrap()
            .data
            .unwrap()["key"]
            .0
            .clone(),
    )
    .unwrap();
    let go_checksum = crate::control_plane::fnv32a_reference(key.as_bytes());
    let go_pod = json!({"metadata": {"labels": {"coder.com/desired-hash": null}},
        "spec": {"template": {"metadata": {"annotations": {"checksum/provisioner-key": go_checksum}}}}});
    deployments
        .patch("provisioner-p", &PatchParams::default(), &Patch::Merge(&go_pod))
        .await
        .unwrap();
    // tagsHash as the Go operator wrote it for {scope: organization}: FNV-32a of "scope\0organization\0",
    // computed with python3 -> cf1b2b92; organizationName is the spec's (default).
    let go_status = json!({"status": {"tagsHash": "cf1b2b92", "organizationName": "default"}});
    let provisioners = h.api::<CoderProvisioner>();
    provisioners
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&go_status))
        .await
        .unwrap();
    let key_id = provisioners
        .get("p")
        .await
        .unwrap()
        .status
        .unwrap()
        .provisioner_key_id;
    let before = deployments.get("provisioner-p").await.unwrap();
    h.server.clear_requests();

    let (metrics, _operator) = restart_operator(&h);
    wait_for(
        || async {
            deployments
                .get("provisioner-p")
                .await
                .unwrap()
                .metadata
                .labels
                .is_some_and(|a| a.contains_key("coder.com/desired-hash"))
        },
        "the new operator to apply the Deployment",
    )
    .await;
    wait_for(
        || async { metrics.runs("CoderProvisioner") >= 3 },
        "a few reconciles",
    )
    .await;
    let key_calls: Vec<String> = h
        .server
        .requests()
        .iter()
        .filter(|r| r.path.contains("provisionerkeys"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(key_calls.is_empty(), "the key was kept: {key_calls:?}");
    assert_eq!(keys(&h.server), ["p"]);
    // No rollout: the spec, pod template included, is exactly what the Go operator left, and so is the generation
    // (the operator's bookkeeping hash is a label; an annotation would count as a new generation).
    let deployment = deployments.get("provisioner-p").await.unwrap();
    assert_eq!(deployment.spec, before.spec, "no rollout");
    assert_eq!(
        deployment.metadata.generation, before.metadata.generation,
        "the generation stays"
    );
    let annotations = deployment
        .spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .annotations
        .unwrap();
    assert_eq!(annotations["checksum/provisioner-key"], go_checksum);
    let status = provisioners.get("p").await.unwrap().status.unwrap();
    assert_eq!(status.provisioner_key_id, key_id);
    assert_eq!(status.tags_hash.as_deref(), Some("cf1b2b92"));
}

#[tokio::test]
async fn long_names_and_an_empty_organization_are_the_go_operators() {
    let h = harness("prov-long").await;
    ready_control_plane(&h).await;
    // 60 characters; FNV-32a of the 60 p's is 73896435 (python3); 42 bytes of the name are kept.
    let name = "p".repeat(60);
    let mut spec = sample_spec();
    spec["organizationName"] = json!("");
    create_provisioner(&h, &name, spec).await;
    let workload = format!("provisioner-{}-73896435", "p".repeat(42));
    let deployments = h.api::<Deployment>();
    wait_for(
        || async { deployments.get_opt(&workload).await.unwrap().is_some() },
        "the Deployment under the Go operator's name",
    )
    .await;
    let account = format!("{}-73896435-provisioner", "p".repeat(42));
    assert!(
        h.api::<ServiceAccount>()
            .get_opt(&account)
            .await
            .unwrap()
            .is_some()
    );
    assert!(h.api::<Role>().get_opt(&workload).await.unwrap().is_some());
    assert!(h.api::<RoleBinding>().get_opt(&workload).await.unwrap().is_some());
    // organizationName "" is the default organization: the key is there.
    assert_eq!(keys(&h.server), [name]);
    assert!(
        h.server
            .requests()
            .iter()
            .all(|r| r.path != "/api/v2/organizations/"),
        "no look-up of an empty organization name"
    );
}

#[tokio::test]
async fn a_failed_gate_keeps_the_phase_and_names_the_first_failure() {
    let h = harness("prov-gate").await;
    ready_control_plane(&h).await;
    create_provisioner(&h, "p", sample_spec()).await;
    h.deployment_ready("provisioner-p").await;
    wait_reason(&h, "p", "DeploymentReady", "MinimumReplicasReady").await;
    let phase = |h: &Harness| {
        let api = h.api::<CoderProvisioner>();
        async move { api.get("p").await.unwrap().status.unwrap().phase }
    };
    assert_eq!(phase(&h).await, Some(coder_k8s_api::shared::WorkloadPhase::Ready));
    // Operator access turned off: the control plane is there but has neither readiness nor a token reference.
    let off = json!({"spec": {"operatorAccess": {"disabled": true}}});
    h.api::<coder_k8s_api::control_plane::CoderControlPlane>()
        .patch(
            "codercontrolplane-sample",
            &PatchParams::default(),
            &Patch::Merge(&off),
        )
        .await
        .unwrap();
    wait_reason(&h, "p", "OperatorAccessReady", "OperatorAccessNotReady").await;
    assert_eq!(
        reason(&h, "p", "ControlPlaneReady").await,
        Some(("True".to_owned(), "ControlPlaneAvailable".to_owned()))
    );
    assert_eq!(
        phase(&h).await,
        Some(coder_k8s_api::shared::WorkloadPhase::Ready),
        "the last phase is kept"
    );
}

#[tokio::test]
async fn a_key_only_a_create_marker_in_the_status_names_is_reported_and_never_deleted() {
    let h = harness("prov-crash").await;
    let token = ready_control_plane(&h).await;
    // What an operator stopped between the create call and the key Secret would leave: the create marker in the
    // status and the key in Coder, but no key ID and no key Secret. A status writer can write the same marker, so it
    // proves nothing: the key may be someone else's.
    h.stop.send(true).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    create_provisioner(&h, "p", sample_spec()).await;
    let coder = h.coder(&token);
    let org = coder.default_organization().await.unwrap();
    let marker = json!({"status": {
        "organizationID": org.id.to_string(),
        "provisionerKeyName": "p",
        "keyCreateStartedAt": k8s_openapi::jiff::Timestamp::now().to_string(),
    }});
    let provisioners = h.api::<CoderProvisioner>();
    provisioners
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&marker))
        .await
        .unwrap();
    coder
        .create_provisioner_key(&org.name, "p", &std::collections::BTreeMap::new())
        .await
        .unwrap();
    let left = h.server.provisioner_keys();
    assert_eq!(left.len(), 1);
    h.server.clear_requests();

    let (_metrics, _operator) = restart_operator(&h);
    wait_reason(&h, "p", "ProvisionerKeyReady", "ProvisionerKeyNotOwned").await;
    crate::support::several_requeues().await;
    assert_eq!(h.server.provisioner_keys(), left, "neither replaced nor deleted");
    let writes: Vec<String> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(writes, Vec::<String>::new(), "the whole request log");
}
