//! The CoderAIProvider controller on the real kube-apiserver, PostgreSQL and the Coder API test server: create with
//! the keys from a Secret, a patch only for a change, nothing at rest, delete; a missing Secret; a name that belongs
//! to another provider; a foreign provider ID written into the status (also of an object that never created one);
//! an object of the Go operator adopted from its unsigned record and status; a changed deployment. Each test checks
//! Coder's whole request log for the provider calls.

use std::time::Duration;

use coder_k8s_api::ai_provider::{CoderAIProvider, CoderAIProviderStatus};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::ai::CreateAiProviderRequest;
use coder_k8s_controllers::cleanup_records::record::{Created, Record, RecordKind, record_name};
use coder_k8s_controllers::labels::CLEANUP_RECORD_LABEL as LABEL;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::ai_gateway_key::has_record;
use crate::control_plane::{Harness, harness};
use crate::provisioner::ready_control_plane;
use crate::support::wait_for;

const CP: &str = "codercontrolplane-sample";
pub(crate) const PROVIDERS: &str = "/api/v2/ai/providers";

pub(crate) fn spec() -> serde_json::Value {
    json!({
        "controlPlaneRef": {"name": CP}, "type": "openai", "baseURL": "https://api.openai.com/v1/",
        "apiKeySecretRefs": [{"name": "openai"}],
    })
}

pub(crate) async fn create_object(h: &Harness, name: &str, spec: serde_json::Value) -> CoderAIProvider {
    let object = CoderAIProvider::new(name, serde_json::from_value(spec).unwrap());
    h.api::<CoderAIProvider>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

/// Waits until the `Ready` condition's reason is `reason` for the object's current generation (up to 60 s).
pub(crate) async fn wait_reason(h: &Harness, name: &str, reason: &str) -> CoderAIProviderStatus {
    crate::support::wait_ready_reason::<CoderAIProvider, CoderAIProviderStatus>(&h.api(), name, reason).await
}

/// The provider calls and buildinfo reads Coder received: `(method, path)`.
fn provider_calls(h: &Harness) -> Vec<(String, String)> {
    h.server
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with(PROVIDERS) || r.path == "/api/v2/buildinfo")
        .map(|r| (r.method, r.path))
        .collect()
}

fn writes(h: &Harness) -> Vec<(String, String)> {
    provider_calls(h)
        .into_iter()
        .filter(|(method, _)| method != "GET")
        .collect()
}

async fn delete_and_wait(h: &Harness, name: &str) {
    let api = h.api::<CoderAIProvider>();
    api.delete(name, &DeleteParams::default()).await.unwrap();
    wait_for(
        || async { api.get_opt(name).await.unwrap().is_none() },
        "the object to go",
    )
    .await;
}

async fn edit_spec(h: &Harness, name: &str, patch: serde_json::Value) {
    h.api::<CoderAIProvider>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": patch})),
        )
        .await
        .unwrap();
}

/// A provider made in Coder by someone else.
pub(crate) async fn foreign_provider(coder: &CoderClient, name: &str) -> String {
    let request = CreateAiProviderRequest {
        provider_type: "anthropic".to_owned(),
        name: name.to_owned(),
        enabled: true,
        base_url: "https://api.anthropic.com/".to_owned(),
        ..CreateAiProviderRequest::default()
    };
    coder.create_ai_provider(&request).await.unwrap().id.to_string()
}

#[tokio::test]
async fn a_provider_is_created_patched_only_for_a_change_and_deleted() {
    let h = harness("aiprov-life").await;
    let coder = h.coder(&ready_control_plane(&h).await);
    h.put_secret("openai", &[("api-key", " sk-test-0001\n")]).await;
    let object = create_object(&h, "openai", spec()).await;
    let uid = object.metadata.uid.clone().unwrap();
    let status = wait_reason(&h, "openai", "Synced").await;
    let id = status.provider_id.clone().unwrap();
    let live = coder.ai_provider("openai").await.unwrap();
    assert_eq!(live.id.to_string(), id);
    assert_eq!(
        (live.provider_type.as_str(), live.base_url.as_str()),
        ("openai", "https://api.openai.com/v1/")
    );
    assert!(live.enabled);
    let masked: Vec<&str> = live.api_keys.iter().map(|k| k.masked.as_str()).collect();
    assert_eq!(masked, ["****0001"], "the trimmed key from the Secret");
    assert_eq!(
        status.coder_deployment_id.as_deref(),
        Some(h.server.deployment_id().as_str())
    );
    let record = h.api::<ConfigMap>().get(&record_name(&uid)).await.unwrap();
    assert_eq!(record.metadata.labels.unwrap()[LABEL], "CoderAIProvider");
    let data = record.data.unwrap();
    assert_eq!(
        (data["providerName"].as_str(), data["providerID"].as_str()),
        ("openai", id.as_str())
    );
    assert!(
        data.values().all(|v| !v.contains("sk-test")),
        "the record holds no secret"
    );

    // At rest: no Coder call over several requeue intervals.
    h.server.clear_requests();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(provider_calls(&h), Vec::<(String, String)>::new());

    // A spec change: one PATCH.
    edit_spec(&h, "openai", json!({"enabled": false})).await;
    wait_for(
        || async { !coder.ai_provider("openai").await.unwrap().enabled },
        "the provider disabled",
    )
    .await;
    wait_reason(&h, "openai", "Synced").await;
    assert_eq!(
        writes(&h),
        vec![("PATCH".to_owned(), format!("{PROVIDERS}/{id}"))]
    );

    // A new key in the Secret: one more PATCH, with the new key.
    h.server.clear_requests();
    h.put_secret("openai", &[("api-key", "sk-test-0002")]).await;
    wait_for(
        || async {
            coder
                .ai_provider("openai")
                .await
                .unwrap()
                .api_keys
                .iter()
                .any(|k| k.masked == "****0002")
        },
        "the new key in Coder",
    )
    .await;
    assert_eq!(
        writes(&h),
        vec![("PATCH".to_owned(), format!("{PROVIDERS}/{id}"))]
    );

    // The delete deletes the provider in Coder, then the record.
    h.server.clear_requests();
    delete_and_wait(&h, "openai").await;
    assert_eq!(
        writes(&h),
        vec![("DELETE".to_owned(), format!("{PROVIDERS}/{id}"))]
    );
    assert!(coder.ai_provider("openai").await.unwrap_err().is_not_found());
    assert!(!has_record(&h, &uid).await);
}

#[tokio::test]
async fn a_missing_secret_waits_without_a_coder_call() {
    let h = harness("aiprov-secret").await;
    ready_control_plane(&h).await;
    h.server.clear_requests();
    create_object(&h, "openai", spec()).await;
    let status = wait_reason(&h, "openai", "SecretNotReady").await;
    let message = &status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .message;
    assert!(
        message.contains("openai") && message.contains("api-key"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(provider_calls(&h), Vec::<(String, String)>::new());
    h.put_secret("openai", &[("api-key", "sk-test-0001")]).await;
    wait_reason(&h, "openai", "Synced").await;
}

#[tokio::test]
async fn a_name_taken_by_another_provider_is_a_conflict_and_never_touched() {
    let h = harness("aiprov-conflict").await;
    let coder = h.coder(&ready_control_plane(&h).await);
    h.put_secret("openai", &[("api-key", "sk-test-0001")]).await;
    let theirs = foreign_provider(&coder, "openai").await;
    h.server.clear_requests();
    create_object(&h, "openai", spec()).await;
    let status = wait_reason(&h, "openai", "NameConflict").await;
    assert_eq!(status.provider_id, None);
    delete_and_wait(&h, "openai").await;
    assert_eq!(
        writes(&h),
        Vec::<(String, String)>::new(),
        "no create, patch or delete"
    );
    assert_eq!(coder.ai_provider("openai").await.unwrap().id.to_string(), theirs);
}

#[tokio::test]
async fn a_foreign_provider_id_written_into_the_status_is_never_patched_or_deleted() {
    let h = harness("aiprov-foreign-id").await;
    let coder = h.coder(&ready_control_plane(&h).await);
    h.put_secret("openai", &[("api-key", "sk-test-0001")]).await;
    create_object(&h, "openai", spec()).await;
    let ours = wait_reason(&h, "openai", "Synced").await.provider_id.unwrap();
    let theirs = foreign_provider(&coder, "someone-elses").await;
    let before = coder.ai_provider(&theirs).await.unwrap();
    // A subject with status write access points the object at another provider, then the spec changes.
    h.api::<CoderAIProvider>()
        .patch_status(
            "openai",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"providerID": theirs}})),
        )
        .await
        .unwrap();
    h.server.clear_requests();
    edit_spec(&h, "openai", json!({"displayName": "OpenAI"})).await;
    wait_for(
        || async { coder.ai_provider(&ours).await.unwrap().display_name == "OpenAI" },
        "the object's own provider patched",
    )
    .await;
    delete_and_wait(&h, "openai").await;
    let touched: Vec<(String, String)> = writes(&h);
    assert_eq!(
        touched,
        vec![
            ("PATCH".to_owned(), format!("{PROVIDERS}/{ours}")),
            ("DELETE".to_owned(), format!("{PROVIDERS}/{ours}"))
        ]
    );
    assert_eq!(coder.ai_provider(&theirs).await.unwrap(), before, "unchanged");
}

/// The provider with this ID as the test server stores it (masked keys, base URL, times).
fn stored(h: &Harness, id: &str) -> serde_json::Value {
    h.server
        .ai_providers()
        .into_iter()
        .find(|p| p["id"] == id)
        .unwrap_or_else(|| panic!("no provider {id} in Coder"))
}

async fn forge_provider_id(h: &Harness, name: &str, id: &str) {
    h.api::<CoderAIProvider>()
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"providerID": id}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_provider_id_forged_into_an_object_that_never_created_one_is_neither_patched_nor_deleted() {
    let h = harness("aiprov-forged").await;
    let coder = h.coder(&ready_control_plane(&h).await);
    // The forger exists first and waits for its Secret: it never creates anything, and it is older than P.
    let mut forger = spec();
    forger["name"] = json!("openai");
    forger["baseURL"] = json!("https://forger.example.com/v1/");
    forger["apiKeySecretRefs"] = json!([{"name": "forger"}]);
    create_object(&h, "forger", forger).await;
    wait_reason(&h, "forger", "SecretNotReady").await;
    h.put_secret("openai", &[("api-key", "sk-test-0001")]).await;
    create_object(&h, "openai", spec()).await;
    let p = wait_reason(&h, "openai", "Synced").await.provider_id.unwrap();
    h.put_secret("forger", &[("api-key", "sk-forger-9999")]).await;
    wait_reason(&h, "forger", "NameConflict").await;
    let before = stored(&h, &p);

    h.server.clear_requests();
    forge_provider_id(&h, "forger", &p).await;
    edit_spec(&h, "forger", json!({"displayName": "Forged"})).await;
    let status = wait_reason(&h, "forger", "NameConflict").await;
    assert_eq!(
        status.provider_id.as_deref(),
        Some(p.as_str()),
        "the forged ID is shown, not used"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(stored(&h, &p), before, "base URL and key unchanged");
    delete_and_wait(&h, "forger").await;
    assert_eq!(
        writes(&h),
        Vec::<(String, String)>::new(),
        "no PATCH or DELETE of P (the whole request log)"
    );
    assert_eq!(stored(&h, &p), before, "P survives the forger's deletion");
    let live = coder.ai_provider(&p).await.unwrap();
    assert_eq!(live.base_url, "https://api.openai.com/v1/");
}

#[tokio::test]
async fn an_object_of_the_go_operator_is_adopted_from_its_unsigned_record_and_status_and_re_signed() {
    let h = harness("aiprov-v015").await;
    let coder = h.coder(&ready_control_plane(&h).await);
    // What v0.1.5 left: the provider it created, its unsigned record and the status naming the provider.
    let request = CreateAiProviderRequest {
        provider_type: "openai".to_owned(),
        name: "openai".to_owned(),
        enabled: true,
        base_url: "https://old.example.com/v1/".to_owned(),
        ..CreateAiProviderRequest::default()
    };
    let p = coder.create_ai_provider(&request).await.unwrap().id.to_string();
    let object = create_object(&h, "openai", spec()).await;
    let uid = object.metadata.uid.clone().unwrap();
    wait_reason(&h, "openai", "SecretNotReady").await;
    let unsigned = Record {
        kind: RecordKind::AIProvider,
        namespace: h.ns.clone(),
        name: "openai".to_owned(),
        uid: uid.clone(),
        deployment_id: h.server.deployment_id(),
        created: Created::Provider {
            name: "openai".to_owned(),
            id: Some(p.clone()),
        },
    }
    .to_config_map(&h.ns);
    h.api::<ConfigMap>()
        .create(&PostParams::default(), &unsigned)
        .await
        .unwrap();
    forge_provider_id(&h, "openai", &p).await;

    h.server.clear_requests();
    h.put_secret("openai", &[("api-key", "sk-test-0001")]).await;
    let status = wait_reason(&h, "openai", "Synced").await;
    assert_eq!(status.provider_id.as_deref(), Some(p.as_str()));
    assert_eq!(
        coder.ai_provider(&p).await.unwrap().base_url,
        "https://api.openai.com/v1/"
    );
    assert_eq!(
        writes(&h),
        vec![("PATCH".to_owned(), format!("{PROVIDERS}/{p}"))],
        "adopted, not created again"
    );
    let data = h
        .api::<ConfigMap>()
        .get(&record_name(&uid))
        .await
        .unwrap()
        .data
        .unwrap();
    assert_eq!(data["providerID"], p);
    assert_eq!(data["signature"].len(), 64, "re-signed");
    assert!(data.contains_key("writtenAt"));
    h.server.clear_requests();
    delete_and_wait(&h, "openai").await;
    assert_eq!(
        writes(&h),
        vec![("DELETE".to_owned(), format!("{PROVIDERS}/{p}"))]
    );
}

#[tokio::test]
async fn a_changed_deployment_stalls_and_the_delete_releases_without_a_coder_delete() {
    let h = harness("aiprov-deployment").await;
    let coder = h.coder(&ready_control_plane(&h).await);
    h.put_secret("openai", &[("api-key", "sk-test-0001")]).await;
    let uid = create_object(&h, "openai", spec()).await.metadata.uid.unwrap();
    wait_reason(&h, "openai", "Synced").await;
    h.server.set_deployment_id("00000000-0000-4000-8000-00000000beef");
    h.server.clear_requests();
    edit_spec(&h, "openai", json!({"enabled": false})).await;
    wait_reason(&h, "openai", "CoderDeploymentChanged").await;
    delete_and_wait(&h, "openai").await;
    assert_eq!(
        writes(&h),
        Vec::<(String, String)>::new(),
        "nothing written in the new deployment"
    );
    assert!(coder.ai_provider("openai").await.is_ok(), "the provider stays");
    assert!(has_record(&h, &uid).await, "the record stays");
    assert_eq!(h.metrics.cleanup_counts("CoderAIProvider").2, 1);
}

/// A failed delete in Coder keeps the finalizer, shows `Deleting` with what it waits for, and is retried.
#[tokio::test]
async fn a_failed_delete_shows_deleting_and_is_retried() {
    let h = harness("aiprov-delete").await;
    let coder = h.coder(&ready_control_plane(&h).await);
    h.put_secret("openai", &[("api-key", "sk-test-0001")]).await;
    create_object(&h, "openai", spec()).await;
    let id = wait_reason(&h, "openai", "Synced").await.provider_id.unwrap();
    h.server.add_fault(coder_k8s_coder_testserver::FaultRule {
        method: Some("DELETE".to_owned()),
        path_prefix: PROVIDERS.to_owned(),
        fault: coder_k8s_coder_testserver::Fault::ServerError(503),
        times: None,
    });
    let api = h.api::<CoderAIProvider>();
    api.delete("openai", &DeleteParams::default()).await.unwrap();
    let waiting = wait_reason(&h, "openai", "Deleting").await;
    assert_eq!(
        waiting.phase,
        Some(coder_k8s_api::ai_provider::AIProviderPhase::Pending)
    );
    let message = crate::support::ready_message(&waiting.conditions);
    assert!(
        message.starts_with("Deleting the AI provider \"openai\" in Coder; waiting: delete the AI provider: coder unavailable (server_error"),
        "{message}"
    );
    wait_for(
        || async { writes(&h).iter().filter(|(m, _)| m == "DELETE").count() >= 2 },
        "a second delete attempt",
    )
    .await;
    assert!(
        api.get_opt("openai").await.unwrap().is_some(),
        "the finalizer holds"
    );
    h.server.clear_faults();
    wait_for(
        || async { api.get_opt("openai").await.unwrap().is_none() },
        "the object to go",
    )
    .await;
    let deletes: Vec<_> = writes(&h).into_iter().filter(|(m, _)| m == "DELETE").collect();
    assert!(
        deletes
            .iter()
            .all(|(_, path)| *path == format!("{PROVIDERS}/{id}"))
            && deletes.len() >= 3,
        "only the object's own provider, retried until it went: {deletes:?}"
    );
    let gone = coder_k8s_coder_client::found(coder.ai_provider(&id).await).unwrap();
    assert!(gone.is_none(), "the provider is deleted in Coder");
}

/// A 429 on the delete holds the finalizer's next attempt for Coder's `Retry-After`, not the retry interval (1 s here).
#[tokio::test]
async fn a_429_on_the_delete_holds_the_next_attempt_for_the_retry_after() {
    let h = harness("aiprov-delete-429").await;
    ready_control_plane(&h).await;
    h.put_secret("openai", &[("api-key", "sk-test-0001")]).await;
    create_object(&h, "openai", spec()).await;
    wait_reason(&h, "openai", "Synced").await;
    h.server.add_fault(coder_k8s_coder_testserver::FaultRule {
        method: Some("DELETE".to_owned()),
        path_prefix: PROVIDERS.to_owned(),
        fault: coder_k8s_coder_testserver::Fault::RateLimited { retry_after_secs: 5 },
        times: Some(1),
    });
    let api = h.api::<CoderAIProvider>();
    api.delete("openai", &DeleteParams::default()).await.unwrap();
    let waiting = wait_reason(&h, "openai", "Deleting").await;
    let message = crate::support::ready_message(&waiting.conditions);
    assert!(message.contains("rate limited (429"), "{message}");
    let deletes = || writes(&h).iter().filter(|(m, _)| m == "DELETE").count();
    assert_eq!(deletes(), 1);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(deletes(), 1, "no second delete before the Retry-After");
    wait_for(
        || async { api.get_opt("openai").await.unwrap().is_none() },
        "the object to go",
    )
    .await;
    assert_eq!(deletes(), 2, "the refused delete and one more");
}
