//! Hostile Coder answers on the real kube-apiserver, PostgreSQL and the Coder API test server: error texts reach
//! conditions and Events cut short and without anything that looks like a credential, and a huge `Retry-After`
//! neither panics nor stops a controller.

use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_coder_testserver::{Fault, FaultRule};
use k8s_openapi::api::core::v1::Event;
use kube::api::PostParams;
use serde_json::json;

use crate::control_plane::{Harness, harness};

/// A Coder API token, as Coder formats them.
const ECHOED_TOKEN: &str = "AbCdEf1234-0123456789abcdefGHIJKL";
/// Pieces that must never reach a condition or an Event.
const LEAKS: [&str; 5] = [
    ECHOED_TOKEN,
    "0123456789abcdefGHIJKL",
    "hunter2",
    "admin:",
    "s3cr3t-bearer",
];

/// A hostile error body: a token, a URL with user information, a bearer value and a long tail.
fn hostile_answer() -> Fault {
    Fault::Answer {
        status: 400,
        headers: vec![],
        body: json!({
            "message": format!("licence key {ECHOED_TOKEN} rejected by https://admin:hunter2@coder.internal/api"),
            "detail": format!("Bearer s3cr3t-bearer {}", "tail ".repeat(400)),
        }),
    }
}

fn assert_clean(text: &str) {
    for leak in LEAKS {
        assert!(!text.contains(leak), "{leak:?} leaked into {text:?}");
    }
    // Coder's text is there, redacted: the message still tells what happened.
    assert!(
        text.contains("licence key [redacted] rejected by https://[redacted]@coder.internal/api"),
        "{text}"
    );
    assert!(
        text.chars().count() < 400,
        "not cut short: {} characters",
        text.chars().count()
    );
}

#[tokio::test]
async fn a_coder_error_body_reaches_the_condition_and_the_event_redacted_and_cut_short() {
    let h = harness("coder-errors").await;
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.put_secret(
        "coder-license",
        &[("license", "eyJhbGciOiJFZERTQSJ9.license-one.sig")],
    )
    .await;
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: "/api/v2/licenses".to_owned(),
        fault: hostile_answer(),
        times: None,
    });
    h.create(
        "coder",
        json!({
            "database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}},
            "licenseSecretRef": {"name": "coder-license"},
        }),
    )
    .await;
    h.deployment_ready("coder").await;
    let message = h.wait_reason("coder", "LicenseApplied", "Error").await;
    assert_clean(&message);

    let events = h.api::<Event>();
    let mut notes = Vec::new();
    for _ in 0..100 {
        notes = events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                e.involved_object.name.as_deref() == Some("coder") && e.reason.as_deref() == Some("Error")
            })
            .filter_map(|e| e.message)
            .collect();
        if !notes.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(!notes.is_empty(), "no Warning Event for the failed upload");
    for note in &notes {
        assert_clean(note);
    }
}

async fn provisioner_reason(h: &Harness, name: &str, type_: &str) -> Option<String> {
    let object = h.api::<CoderProvisioner>().get(name).await.unwrap();
    object
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.reason)
}

async fn wait_provisioner_reason(h: &Harness, name: &str, type_: &str, expected: &str) {
    let mut last = None;
    for _ in 0..300 {
        last = provisioner_reason(h, name, type_).await;
        if last.as_deref() == Some(expected) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let object = h.api::<CoderProvisioner>().get(name).await.unwrap();
    panic!(
        "{name}: {type_} never became {expected}; last {last:?}; status {:?}",
        object.status
    );
}

#[tokio::test]
async fn a_huge_retry_after_neither_panics_nor_stops_the_controller() {
    let h = harness("retry-after").await;
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.create(
        "coder",
        json!({"database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}}),
    )
    .await;
    h.deployment_ready("coder").await;
    h.wait_operator_access("coder", true).await;
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: "/api/v2/organizations/".to_owned(),
        fault: Fault::Answer {
            status: 429,
            headers: vec![("Retry-After".to_owned(), u64::MAX.to_string())],
            body: json!({"message": "You've been rate limited."}),
        },
        times: Some(1),
    });
    let create = |name: &str| {
        let spec =
            json!({"controlPlaneRef": {"name": "coder"}, "replicas": 1, "tags": {"scope": "organization"}});
        CoderProvisioner::new(name, serde_json::from_value(spec).unwrap())
    };
    let provisioners = h.api::<CoderProvisioner>();
    provisioners
        .create(&PostParams::default(), &create("first"))
        .await
        .unwrap();
    wait_provisioner_reason(&h, "first", "ProvisionerKeyReady", "RateLimited").await;
    // The controller survived the answer: the next object is reconciled to the end.
    provisioners
        .create(&PostParams::default(), &create("second"))
        .await
        .unwrap();
    wait_provisioner_reason(&h, "second", "ProvisionerKeyReady", "ProvisionerKeyReady").await;
    assert_eq!(
        provisioner_reason(&h, "first", "ProvisionerKeyReady")
            .await
            .as_deref(),
        Some("RateLimited"),
        "the first is still waiting for its rate limit (the cap itself is checked in the client's unit tests)"
    );
}
