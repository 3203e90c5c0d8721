//! The CoderAIGatewayKey controller on the real kube-apiserver, PostgreSQL and the Coder API test server: create,
//! rotation, grace period and delete with the Secret's contents checked; the opt-in with no Coder call; the cleanup
//! record before the create and no create without it; a changed deployment; a proxy's 404; a lost create answer.
//! Each test checks Coder's whole request log for the key calls it made.

use std::time::Duration;

use coder_k8s_api::ai_gateway_key::{
    AIGatewayKeyPhase, CoderAIGatewayKey, CoderAIGatewayKeyStatus, key_name,
};
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_coder_testserver::{Entitlement, Fault, FaultRule};
use coder_k8s_controllers::cleanup_records::record::record_name;
use coder_k8s_controllers::labels::CLEANUP_RECORD_LABEL as LABEL;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::control_plane::{Harness, harness, harness_with};
use crate::provisioner::ready_control_plane;
use crate::support::wait_for;

const CP: &str = "codercontrolplane-sample";
pub(crate) const KEYS: &str = "/api/v2/ai-gateway/keys";

/// A ready control plane entitled to the AI Gateway, with `allowKeys` as given; returns the operator token.
pub(crate) async fn setup(h: &Harness, allow_keys: bool) -> String {
    h.server.set_entitlement("aibridge", Entitlement::Entitled);
    let token = ready_control_plane(h).await;
    allow(h, allow_keys).await;
    token
}

async fn allow(h: &Harness, allow_keys: bool) {
    h.api::<CoderControlPlane>()
        .patch(
            CP,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"aiGateway": {"allowKeys": allow_keys}}})),
        )
        .await
        .unwrap();
}

pub(crate) async fn create_key_object(h: &Harness, name: &str) -> CoderAIGatewayKey {
    let spec = json!({"controlPlaneRef": {"name": CP}});
    let object = CoderAIGatewayKey::new(name, serde_json::from_value(spec).unwrap());
    h.api::<CoderAIGatewayKey>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

/// Waits until the `Ready` condition's reason is `reason` for the object's current generation (up to 60 s).
pub(crate) async fn wait_reason(h: &Harness, name: &str, reason: &str) -> CoderAIGatewayKeyStatus {
    crate::support::wait_ready_reason::<CoderAIGatewayKey, CoderAIGatewayKeyStatus>(&h.api(), name, reason)
        .await
}

async fn secret_value(h: &Harness, name: &str) -> String {
    let secret = h.api::<Secret>().get(name).await.unwrap();
    String::from_utf8(secret.data.unwrap()["key"].0.clone()).unwrap()
}

fn key_calls(h: &Harness) -> Vec<(String, String)> {
    h.server
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with(KEYS) || r.path == "/api/v2/buildinfo")
        .map(|r| (r.method, r.path))
        .collect()
}

fn posts(h: &Harness) -> usize {
    key_calls(h)
        .iter()
        .filter(|(method, path)| method == "POST" && path == KEYS)
        .count()
}

/// Sets status times in the past, as if that time had passed: the status is re-applied under the operator's own
/// field manager, as the operator would have written it earlier. Then the spec's grace period is edited to `grace`
/// so the object is reconciled now (a status edit alone does not wake it; its own timer would, much later).
async fn age(h: &Harness, name: &str, field: serde_json::Value, grace: &str) {
    let api = h.api::<CoderAIGatewayKey>();
    let mut status = serde_json::to_value(api.get(name).await.unwrap().status.unwrap()).unwrap();
    merge(&mut status, field);
    let apply = json!({"apiVersion": "coder.com/v1alpha1", "kind": "CoderAIGatewayKey", "status": status});
    api.patch_status(
        name,
        &PatchParams::apply("coder-k8s").force(),
        &Patch::Apply(&apply),
    )
    .await
    .unwrap();
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"gracePeriod": grace}})),
    )
    .await
    .unwrap();
}

/// A JSON merge patch of `patch` into `target` (objects merge, everything else replaces).
fn merge(target: &mut serde_json::Value, patch: serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(target), serde_json::Value::Object(patch)) => {
            for (key, value) in patch {
                merge(target.entry(key).or_insert(serde_json::Value::Null), value);
            }
        }
        (target, patch) => *target = patch,
    }
}

pub(crate) async fn delete_object(h: &Harness, name: &str) {
    h.api::<CoderAIGatewayKey>()
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

pub(crate) async fn wait_gone(h: &Harness, name: &str) {
    let api = h.api::<CoderAIGatewayKey>();
    wait_for(
        || async { api.get_opt(name).await.unwrap().is_none() },
        "the object to go",
    )
    .await;
}

pub(crate) fn uid_of(object: &CoderAIGatewayKey) -> String {
    object.metadata.uid.clone().unwrap()
}

#[tokio::test]
async fn a_key_is_created_rotated_deleted_after_the_grace_period_and_deleted_with_the_object() {
    let h = harness("aikey-life").await;
    setup(&h, true).await;
    let object = create_key_object(&h, "gateway").await;
    let uid = uid_of(&object);
    let status = wait_reason(&h, "gateway", "KeyReady").await;
    let current = status.current_key.clone().unwrap();
    assert_eq!(current.name, key_name(&uid, 1));
    assert_eq!(status.secret_ref.as_ref().unwrap().name, "gateway-ai-gateway-key");
    let first = secret_value(&h, "gateway-ai-gateway-key").await;
    assert!(
        first.starts_with(current.key_prefix.as_deref().unwrap()),
        "the Secret holds the created key"
    );
    assert_eq!(
        h.server.ai_gateway_keys(),
        vec![(current.id.clone(), current.name.clone())]
    );
    let record = h.api::<ConfigMap>().get(&record_name(&uid)).await.unwrap();
    assert_eq!(record.metadata.labels.unwrap()[LABEL], "CoderAIGatewayKey");
    let data = record.data.unwrap();
    assert_eq!(data["coderDeploymentID"], h.server.deployment_id());
    assert_eq!(data["keyNamePrefix"], format!("ck8s-{}-", uid.replace('-', "")));
    assert!(
        data.values().all(|v| !v.contains(&first)),
        "the record holds no secret"
    );
    assert_eq!(data["signature"].len(), 64, "records are signed");
    let signing = h
        .api::<Secret>()
        .get("coder-k8s-cleanup-records-key")
        .await
        .unwrap();
    assert_eq!(signing.data.unwrap()["key"].0.len(), 32);

    // At rest: no Coder call over several requeue intervals.
    h.server.clear_requests();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(key_calls(&h), Vec::<(String, String)>::new());

    // The rotation is due: a second key replaces the first, which stays for the grace period.
    age(
        &h,
        "gateway",
        json!({"currentKey": {"createdAt": "2020-01-01T00:00:00Z"}}),
        "59m",
    )
    .await;
    let status = wait_reason(&h, "gateway", "Rotating").await;
    let second = status.current_key.clone().unwrap();
    assert_eq!(second.serial, 2);
    assert_eq!(status.previous_keys.len(), 1);
    assert_eq!(status.previous_keys[0].serial, 1);
    let rotated = secret_value(&h, "gateway-ai-gateway-key").await;
    assert_ne!(rotated, first);
    assert!(rotated.starts_with(second.key_prefix.as_deref().unwrap()));
    assert_eq!(
        h.server.ai_gateway_keys().len(),
        2,
        "the replaced key works during its grace period"
    );

    // The grace period ends: the replaced key is deleted, the current one stays.
    age(&h, "gateway", json!({"previousKeys": [{"id": current.id, "name": current.name, "serial": 1, "deleteAfter": "2020-01-01T00:00:00Z"}]}), "58m").await;
    let status = wait_reason(&h, "gateway", "KeyReady").await;
    assert!(status.previous_keys.is_empty());
    assert_eq!(
        h.server.ai_gateway_keys(),
        vec![(second.id.clone(), second.name.clone())]
    );

    // The delete removes every key of the object in Coder, then the record.
    delete_object(&h, "gateway").await;
    wait_gone(&h, "gateway").await;
    assert_eq!(h.server.ai_gateway_keys(), Vec::<(String, String)>::new());
    assert!(!has_record(&h, &uid).await);
}

#[tokio::test]
async fn without_allow_keys_the_object_stalls_and_makes_no_coder_call() {
    let h = harness("aikey-notallowed").await;
    setup(&h, false).await;
    h.server.clear_requests();
    let object = create_key_object(&h, "gateway").await;
    let status = wait_reason(&h, "gateway", "NotAllowed").await;
    assert_eq!(status.phase.map(|p| format!("{p:?}")).as_deref(), Some("Stalled"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    delete_object(&h, "gateway").await;
    wait_gone(&h, "gateway").await;
    assert_eq!(
        key_calls(&h),
        Vec::<(String, String)>::new(),
        "no key call and no buildinfo read"
    );
    assert!(!has_record(&h, &uid_of(&object)).await);

    // Opting in later lets a new object create its key.
    allow(&h, true).await;
    create_key_object(&h, "gateway2").await;
    wait_reason(&h, "gateway2", "KeyReady").await;
    assert_eq!(posts(&h), 1);
}

#[tokio::test]
async fn no_key_is_created_when_the_cleanup_record_cannot_be_written() {
    // The operator namespace does not exist: every record write fails.
    let h = harness_with("aikey-norecord", |s| {
        s.operator_namespace = "no-such-namespace".to_owned()
    })
    .await;
    setup(&h, true).await;
    h.server.clear_requests();
    create_key_object(&h, "gateway").await;
    let status = wait_reason(&h, "gateway", "CleanupRecordFailed").await;
    assert!(status.current_key.is_none() && status.pending_key.is_none());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(posts(&h), 0, "no create without a record: {:?}", key_calls(&h));
    assert!(h.server.ai_gateway_keys().is_empty());
}

#[tokio::test]
async fn the_record_is_written_before_the_create_and_a_failed_create_leaves_no_duplicate() {
    let h = harness("aikey-order").await;
    setup(&h, true).await;
    // The first create fails: the record must already exist, and no key was made.
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: KEYS.to_owned(),
        fault: Fault::ServerError(500),
        times: Some(1),
    });
    let object = create_key_object(&h, "gateway").await;
    let uid = uid_of(&object);
    wait_for(
        || async {
            h.server
                .requests()
                .iter()
                .any(|r| r.method == "POST" && r.path == KEYS && r.status == 500)
        },
        "the failed create",
    )
    .await;
    assert!(has_record(&h, &uid).await, "the record precedes the create");
    let status = wait_reason(&h, "gateway", "KeyReady").await;
    // The lost answer's name was looked up and the next serial used; exactly one key exists.
    assert_eq!(status.current_key.as_ref().unwrap().serial, 2);
    assert_eq!(h.server.ai_gateway_keys().len(), 1);
}

#[tokio::test]
async fn a_create_whose_answer_is_lost_is_deleted_and_replaced_once() {
    let h = harness("aikey-lost").await;
    setup(&h, true).await;
    // Coder creates the key, but the answer never arrives: the value is lost.
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: KEYS.to_owned(),
        fault: Fault::DropAfterHandling,
        times: Some(1),
    });
    let object = create_key_object(&h, "gateway").await;
    let uid = uid_of(&object);
    let status = wait_reason(&h, "gateway", "KeyReady").await;
    let current = status.current_key.unwrap();
    assert_eq!(current.name, key_name(&uid, 2));
    assert_eq!(
        h.server.ai_gateway_keys(),
        vec![(current.id, current.name)],
        "the lost key was deleted"
    );
    let deletes = key_calls(&h).iter().filter(|(m, _)| m == "DELETE").count();
    assert_eq!(deletes, 1);
    assert_eq!(posts(&h), 2);
    assert!(
        secret_value(&h, "gateway-ai-gateway-key")
            .await
            .starts_with(current.key_prefix.as_deref().unwrap())
    );
}

#[tokio::test]
async fn a_changed_deployment_stalls_creates_nothing_and_releases_without_a_delete() {
    let h = harness("aikey-deployment").await;
    setup(&h, true).await;
    let object = create_key_object(&h, "gateway").await;
    let uid = uid_of(&object);
    wait_reason(&h, "gateway", "KeyReady").await;
    h.server.set_deployment_id("00000000-0000-4000-8000-00000000beef");
    h.server.clear_requests();
    age(
        &h,
        "gateway",
        json!({"currentKey": {"createdAt": "2020-01-01T00:00:00Z"}}),
        "59m",
    )
    .await;
    wait_reason(&h, "gateway", "CoderDeploymentChanged").await;
    assert_eq!(posts(&h), 0, "nothing is created in the new deployment");
    delete_object(&h, "gateway").await;
    wait_gone(&h, "gateway").await;
    assert_eq!(
        h.server.ai_gateway_keys().len(),
        1,
        "the key stays in the old deployment"
    );
    assert!(
        key_calls(&h).iter().all(|(m, _)| m == "GET"),
        "{:?}",
        key_calls(&h)
    );
    assert!(has_record(&h, &uid).await, "the record stays");
    assert_eq!(h.metrics.cleanup_counts("CoderAIGatewayKey").2, 1);
}

#[tokio::test]
async fn a_proxy_404_is_never_counted_as_a_deleted_key() {
    let h = harness("aikey-proxy404").await;
    setup(&h, true).await;
    create_key_object(&h, "gateway").await;
    wait_reason(&h, "gateway", "KeyReady").await;
    h.server.add_fault(FaultRule {
        method: Some("DELETE".to_owned()),
        path_prefix: KEYS.to_owned(),
        fault: Fault::ProxyNotFound,
        times: None,
    });
    delete_object(&h, "gateway").await;
    // The object says what its finalizer waits for.
    let waiting = wait_reason(&h, "gateway", "Deleting").await;
    assert_eq!(waiting.phase, Some(AIGatewayKeyPhase::Pending));
    let message = crate::support::ready_message(&waiting.conditions);
    assert!(
        message.starts_with("Deleting the AI Gateway keys named ck8s-")
            && message.contains("waiting: delete the AI Gateway keys: coder unavailable (not_coder_404"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        h.api::<CoderAIGatewayKey>()
            .get_opt("gateway")
            .await
            .unwrap()
            .is_some(),
        "the finalizer holds"
    );
    assert_eq!(h.server.ai_gateway_keys().len(), 1);
    h.server.clear_faults();
    wait_gone(&h, "gateway").await;
    assert!(h.server.ai_gateway_keys().is_empty());
    assert_eq!(h.metrics.cleanup_counts("CoderAIGatewayKey").2, 0);
}

/// Coder's 429 holds every key call of the object for its `Retry-After`, also when a watch event wakes the object
/// earlier; then the key is created once.
#[tokio::test]
async fn a_429_holds_the_objects_coder_calls_for_the_retry_after() {
    let h = harness("aikey-429").await;
    setup(&h, true).await;
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: KEYS.to_owned(),
        fault: Fault::RateLimited { retry_after_secs: 5 },
        times: Some(1),
    });
    create_key_object(&h, "gateway").await;
    let limited = wait_reason(&h, "gateway", "CoderUnavailable").await;
    let message = crate::support::ready_message(&limited.conditions);
    assert!(message.contains("rate limited (429"), "{message}");
    let key_calls = || {
        h.server
            .requests()
            .iter()
            .filter(|r| r.path.starts_with(KEYS) || r.path == "/api/v2/buildinfo")
            .count()
    };
    let calls_at_429 = key_calls();
    // A spec edit wakes the object within the 5 s.
    h.api::<CoderAIGatewayKey>()
        .patch(
            "gateway",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"gracePeriod": "2h"}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        key_calls(),
        calls_at_429,
        "no Coder call while the rate limit lasts"
    );
    wait_reason(&h, "gateway", "KeyReady").await;
    let creates = h
        .server
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.starts_with(KEYS))
        .count();
    assert_eq!(creates, 2, "the refused create and one more");
    assert_eq!(h.server.ai_gateway_keys().len(), 1);
}

#[tokio::test]
async fn a_deleted_control_plane_waits_for_its_keys_then_goes_after_the_bound() {
    let h = harness("aikey-cp-wait").await;
    setup(&h, true).await;
    let uid = uid_of(&create_key_object(&h, "gateway").await);
    wait_reason(&h, "gateway", "KeyReady").await;
    // Every key delete fails: the key's cleanup keeps retrying while the control plane waits.
    h.server.add_fault(FaultRule {
        method: Some("DELETE".to_owned()),
        path_prefix: KEYS.to_owned(),
        fault: Fault::ServerError(500),
        times: None,
    });
    delete_object(&h, "gateway").await;
    h.api::<CoderControlPlane>()
        .delete(CP, &DeleteParams::default())
        .await
        .unwrap();
    let control_planes = h.api::<CoderControlPlane>();
    wait_for(
        || async {
            h.server
                .requests()
                .iter()
                .filter(|r| r.method == "DELETE" && r.path.starts_with(KEYS))
                .count()
                >= 2
        },
        "key delete attempts while the control plane waits",
    )
    .await;
    assert!(
        control_planes.get_opt(CP).await.unwrap().is_some(),
        "the control plane waits for the key being deleted"
    );
    // After the wait and the last attempt (3 s + 2 s here), the control plane goes; the key's finalizer then goes
    // without a delete in Coder.
    wait_for(
        || async { control_planes.get_opt(CP).await.unwrap().is_none() },
        "the control plane to go",
    )
    .await;
    wait_gone(&h, "gateway").await;
    assert_eq!(h.server.ai_gateway_keys().len(), 1, "the key stays in Coder");
    assert!(has_record(&h, &uid).await, "its record stays for the sweep");
    assert_eq!(h.metrics.cleanup_counts("CoderAIGatewayKey").2, 1);
}

/// Whether the cleanup record of the object with `uid` exists (the harness keeps records in its own namespace).
pub(crate) async fn has_record(h: &Harness, uid: &str) -> bool {
    h.api::<ConfigMap>()
        .get_opt(&record_name(uid))
        .await
        .unwrap()
        .is_some()
}

/// `coder-k8s --app=controller` for the harness's namespace (cleanup records in that namespace too).
fn start_operator(h: &Harness) -> crate::support::Process {
    let mut command = crate::support::operator_command(h.cp, &h.ns);
    command
        .arg("--leader-elect=false")
        .stderr(std::process::Stdio::null());
    crate::support::Process(command.spawn().unwrap())
}

fn key_names(h: &Harness) -> Vec<String> {
    h.server
        .ai_gateway_keys()
        .into_iter()
        .map(|(_, name)| name)
        .collect()
}

/// Kills the operator (SIGKILL) while its key create is in flight, restarts it, and checks that the object ends
/// with exactly one key in Coder — the one in its Secret — with serial 2.
async fn kill_during_the_create(h: &Harness, name: &str, fault: Fault, created_before_the_kill: bool) {
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: KEYS.to_owned(),
        fault,
        times: Some(1),
    });
    let operator = start_operator(h);
    let uid = uid_of(&create_key_object(h, name).await);
    let first = key_name(&uid, 1);
    wait_for(
        || async {
            let in_flight = h
                .server
                .requests()
                .iter()
                .any(|r| r.method == "POST" && r.path == KEYS);
            in_flight && key_names(h).contains(&first) == created_before_the_kill
        },
        "the create in flight",
    )
    .await;
    assert!(has_record(h, &uid).await, "the record precedes the create");
    drop(operator);
    h.server.clear_faults();
    let operator = start_operator(h);
    let status = wait_reason(h, name, "KeyReady").await;
    let current = status.current_key.unwrap();
    assert_eq!(current.name, key_name(&uid, 2));
    let prefix = coder_k8s_api::ai_gateway_key::key_name_prefix(&uid);
    let mine: Vec<String> = key_names(h)
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert_eq!(mine, vec![current.name.clone()], "no leaked key, no duplicate");
    let value = {
        let secret = h
            .api::<Secret>()
            .get(&format!("{name}-ai-gateway-key"))
            .await
            .unwrap();
        String::from_utf8(secret.data.unwrap()["key"].0.clone()).unwrap()
    };
    assert!(
        value.starts_with(current.key_prefix.as_deref().unwrap()),
        "the Secret holds the key"
    );
    assert_eq!(operator.stop().code(), Some(0));
}

#[tokio::test]
async fn an_operator_killed_around_the_create_leaks_no_key_and_makes_no_duplicate() {
    let h = harness("aikey-kill").await;
    setup(&h, true).await;
    // From here on only the binary reconciles.
    h.stop.send(true).unwrap();
    // Killed between the record and the create: the create never reached Coder.
    kill_during_the_create(&h, "before", Fault::HoldThenFail(Duration::from_secs(60)), false).await;
    // Killed between the create and the Secret write: Coder made the key, its value is lost.
    kill_during_the_create(&h, "after", Fault::HandleThenHold(Duration::from_secs(60)), true).await;
    let deletes: Vec<String> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path)
        .collect();
    assert_eq!(
        deletes.len(),
        1,
        "only the key whose value was lost is deleted: {deletes:?}"
    );
}
