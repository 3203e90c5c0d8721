//! How kube-apiserver comes to trust the server, on a real control plane: the caBundle controller fills the
//! APIService, repairs it after another writer, respects the opt-out annotation, and a wrong caBundle reproduces
//! the x509 symptom the troubleshooting guide describes. One test, because every step changes the one APIService.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;

use std::time::Duration;

use base64::Engine as _;
use cluster::{APISERVICE, Served, apiservices, kubectl, wait_until};
use kube::api::{Patch, PatchParams};
use serde_json::json;

const MANAGER: &str = "coder-k8s-apiservice-cabundle";

fn b64(pem: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(pem)
}

async fn ca_bundle(client: &kube::Client) -> (String, Option<bool>) {
    let apiservice = apiservices(client).get(APISERVICE).await.expect("get APIService");
    let spec = &apiservice.data["spec"];
    (
        spec["caBundle"].as_str().unwrap_or_default().to_owned(),
        spec["insecureSkipTLSVerify"].as_bool(),
    )
}

/// When the controller's field manager last wrote the APIService.
async fn our_last_write(client: &kube::Client) -> Option<String> {
    let apiservice = apiservices(client).get(APISERVICE).await.expect("get APIService");
    apiservice
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .find(|entry| entry.manager.as_deref() == Some(MANAGER))
        .and_then(|entry| entry.time)
        .map(|time| format!("{:?}", time.0))
}

async fn other_writer_sets(client: &kube::Client, ca_bundle: &str, annotations: serde_json::Value) {
    let patch = json!({"metadata": {"annotations": annotations}, "spec": {"caBundle": ca_bundle}});
    apiservices(client)
        .patch(
            APISERVICE,
            &PatchParams {
                field_manager: Some("someone-else".to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await
        .expect("patch the APIService as another writer");
}

fn proxied_discovery_works(served: &Served) -> bool {
    kubectl(
        served.cp,
        &["get", "--raw", "/apis/aggregation.coder.com/v1alpha1"],
        None,
    )
    .status
    .success()
}

fn foreign_ca() -> Vec<u8> {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).expect("self-signed").pem().into_bytes()
}

#[tokio::test]
async fn the_ca_bundle_is_managed_repaired_and_left_alone_when_opted_out() {
    let served = Served::shared().await;
    let client = served.cp.client().expect("client");
    let ours = b64(&served.ca_pem);

    // Filled at start: the serving CA, TLS verification on, written by the controller's field manager.
    let (bundle, insecure) = ca_bundle(&client).await;
    assert_eq!(bundle, ours);
    // `false` is the API's default and is not stored (omitempty): absent means verified.
    assert!(!insecure.unwrap_or(false), "insecureSkipTLSVerify is off");
    let managers = apiservices(&client)
        .get(APISERVICE)
        .await
        .expect("get")
        .metadata
        .managed_fields
        .unwrap_or_default();
    assert!(
        managers.iter().any(|m| m.manager.as_deref() == Some(MANAGER)),
        "{managers:?}"
    );

    // Another writer changes it: repaired without a restart.
    let foreign = b64(&foreign_ca());
    other_writer_sets(&client, &foreign, json!({})).await;
    wait_until("the caBundle is repaired", Duration::from_secs(30), || async {
        ca_bundle(&client).await.0 == ours
    })
    .await;
    wait_until("proxied requests work again", Duration::from_secs(30), || async {
        proxied_discovery_works(served)
    })
    .await;

    // Opted out: a wrong caBundle stays, and kube-apiserver reports the x509 error of the troubleshooting guide.
    other_writer_sets(&client, &foreign, json!({"coder.com/manage-ca-bundle": "false"})).await;
    let last_write = our_last_write(&client).await;
    wait_until(
        "kube-apiserver refuses the server's certificate",
        Duration::from_secs(60),
        || async {
            let out = kubectl(
                served.cp,
                &["get", "--raw", "/apis/aggregation.coder.com/v1alpha1"],
                None,
            );
            !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("ServiceUnavailable")
        },
    )
    .await;
    let log =
        std::fs::read_to_string(served.cp.log_dir().join("kube-apiserver.log")).expect("kube-apiserver log");
    assert!(
        log.lines()
            .any(|l| l.contains("x509: certificate signed by unknown authority") && l.contains(APISERVICE)),
        "the kube-apiserver log names the x509 error for the APIService"
    );
    // The controller only acts on watch events (it never polls): a change it would have made comes within
    // milliseconds of the event, so 5 s without a write shows the opt-out is respected.
    tokio::time::sleep(Duration::from_secs(5)).await;
    // (kube-apiserver's availability controller writes the status meanwhile, so the resourceVersion moves.)
    assert_eq!(
        ca_bundle(&client).await.0,
        foreign,
        "an opted-out APIService keeps the other writer's caBundle"
    );
    assert_eq!(
        our_last_write(&client).await,
        last_write,
        "and the controller wrote nothing"
    );

    // Opting back in gives the field back.
    apiservices(&client)
        .patch(
            APISERVICE,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"coder.com/manage-ca-bundle": null}}})),
        )
        .await
        .expect("remove the opt-out");
    wait_until(
        "the caBundle is managed again",
        Duration::from_secs(30),
        || async { ca_bundle(&client).await.0 == ours },
    )
    .await;
    wait_until(
        "proxied requests work after opting back in",
        Duration::from_secs(30),
        || async { proxied_discovery_works(served) },
    )
    .await;
}
