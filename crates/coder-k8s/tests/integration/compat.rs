//! Upgrading in place from v0.1.5: objects the operator's types cannot read do not stop a controller, and objects
//! v0.1.5 accepted (no spec, an empty Service type) are reconciled.

use std::time::Duration;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use coder_k8s_controllers::cache::DECODE_FAILED_REASON;
use coder_k8s_controllers::context::Context;
use coder_k8s_controllers::metrics::ReconcileMetrics;
use k8s_openapi::api::core::v1::Service;
use kube::CustomResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::control_plane::{Harness, harness, settings};
use crate::support::wait_for;
use crate::support::{assert_success, kubectl, path};

/// Creates a CoderWorkspaceProxy from raw JSON (the typed client could not write what the types cannot hold).
async fn create_raw_proxy(h: &Harness, body: serde_json::Value) {
    let resource = ApiResource::erase::<CoderWorkspaceProxy>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(h.admin.clone(), &h.ns, &resource);
    let mut object: DynamicObject = serde_json::from_value(body).unwrap();
    object.types = Some(kube::api::TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    api.create(&PostParams::default(), &object).await.unwrap();
}

async fn proxy_reason(h: &Harness, name: &str) -> Option<String> {
    let proxy = h.api::<CoderWorkspaceProxy>().get_opt(name).await.ok()??;
    proxy
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "ProxyRegistered")
        .map(|c| c.reason)
}

/// The notes of the `DecodeFailed` Events about `name`.
async fn decode_failures(h: &Harness, name: &str) -> Vec<String> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(h.admin.clone(), &h.ns);
    events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(DECODE_FAILED_REASON)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .filter_map(|e| e.note)
        .collect()
}

/// `spec.replicas` beyond i32, which the Rust type cannot hold.
const UNREADABLE_REPLICAS: u64 = 4_294_967_296;

const PROXY_CRD: &str = "coderworkspaceproxies.coder.com";

/// While it lives, the CoderWorkspaceProxy CRD lets `spec.replicas` be any integer, as a CRD before a schema change
/// could; dropping it applies the generated CRD again.
struct LooserReplicas(&'static coder_k8s_testenv::ControlPlane);

impl LooserReplicas {
    fn new(cp: &'static coder_k8s_testenv::ControlPlane) -> Self {
        let patch = r#"[{"op": "remove", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/replicas/format"}]"#;
        let out = kubectl(cp, &["patch", "crd", PROXY_CRD, "--type=json", "-p", patch], None);
        assert_success(&out, "loosen spec.replicas");
        Self(cp)
    }
}

impl Drop for LooserReplicas {
    fn drop(&mut self) {
        let file = path("config/crd/bases/coder.com_coderworkspaceproxies.yaml");
        let out = kubectl(
            self.0,
            &["apply", "--server-side", "--force-conflicts", "-f", &file],
            None,
        );
        assert_success(&out, "restore the CRD");
    }
}

/// Stores a proxy whose `spec.replicas` the Rust type cannot hold, as one stored before a schema change.
async fn store_unreadable_proxy(h: &Harness, name: &str) {
    let _looser = LooserReplicas::new(h.cp);
    let resource = ApiResource::erase::<CoderWorkspaceProxy>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(h.admin.clone(), &h.ns, &resource);
    let body = json!({
        "apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": {"name": name}, "spec": {"replicas": UNREADABLE_REPLICAS},
    });
    let object: DynamicObject = serde_json::from_value(body).unwrap();
    // The API server takes a moment to serve the looser schema.
    for _ in 0..100 {
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => return,
            Err(kube::Error::Api(status)) if status.code == 422 => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("create {name}: {error}"),
        }
    }
    panic!("the looser CRD was never served");
}

#[tokio::test]
async fn an_object_the_types_cannot_read_is_reported_and_the_others_are_reconciled() {
    let h = harness("undecodable").await;
    store_unreadable_proxy(&h, "unreadable").await;
    create_raw_proxy(&h, json!({"metadata": {"name": "readable"}})).await;

    // The readable proxy is reconciled (it names no primary URL, so its spec is invalid).
    wait_for(
        || async { proxy_reason(&h, "readable").await.as_deref() == Some("InvalidSpec") },
        "the readable proxy's ProxyRegistered condition",
    )
    .await;
    // The unreadable one is reported with the field, without the value, and is not reconciled.
    let mut notes = Vec::new();
    for _ in 0..100 {
        notes = decode_failures(&h, "unreadable").await;
        if !notes.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(notes.len(), 1, "one Event per version: {notes:?}");
    assert!(
        notes[0].contains("field `spec.replicas`: invalid value, expected i32"),
        "{notes:?}"
    );
    assert!(!notes[0].contains(&UNREADABLE_REPLICAS.to_string()), "{notes:?}");
    // Read as JSON: the typed client cannot decode it either.
    let raw: Api<DynamicObject> = Api::namespaced_with(
        h.admin.clone(),
        &h.ns,
        &ApiResource::erase::<CoderWorkspaceProxy>(&()),
    );
    let stored = raw.get("unreadable").await.unwrap();
    assert!(
        stored.data.get("status").is_none(),
        "not reconciled: {:?}",
        stored.data.get("status")
    );

    // A watch that starts now lists both: its first list completes, without the unreadable object.
    let fresh = Context::new(
        h.cp.client().unwrap(),
        settings(&h.ns),
        ReconcileMetrics::register(&mut prometheus_client::registry::Registry::default()),
    );
    tokio::time::timeout(Duration::from_secs(30), fresh.k8s.caches.ready())
        .await
        .expect("every watch cache lists despite the unreadable object");
    let cached = &fresh.k8s.caches.workspace_proxies;
    assert!(cached.get(&h.ns, "readable").is_some());
    assert!(cached.get(&h.ns, "unreadable").is_none());

    // The controller still runs: once corrected, the object is reconciled.
    h.api::<CoderWorkspaceProxy>()
        .patch(
            "unreadable",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    wait_for(
        || async { proxy_reason(&h, "unreadable").await.as_deref() == Some("InvalidSpec") },
        "the corrected proxy's ProxyRegistered condition",
    )
    .await;
}

#[tokio::test]
async fn a_control_plane_without_spec_and_an_empty_service_type_is_reconciled() {
    let h = harness("nospec").await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        h.admin.clone(),
        &h.ns,
        &ApiResource::erase::<CoderControlPlane>(&()),
    );
    for (name, body) in [
        ("bare", json!({})),
        ("empty-type", json!({"spec": {"service": {"type": ""}}})),
    ] {
        let mut object: DynamicObject = serde_json::from_value(body).unwrap();
        object.metadata.name = Some(name.to_owned());
        object.types = Some(kube::api::TypeMeta {
            api_version: "coder.com/v1alpha1".to_owned(),
            kind: CoderControlPlane::crd().spec.names.kind,
        });
        api.create(&PostParams::default(), &object).await.unwrap();
    }
    let services = h.api::<Service>();
    for name in ["bare", "empty-type"] {
        wait_for(
            || async { services.get_opt(name).await.unwrap().is_some() },
            "the control plane's Service",
        )
        .await;
        let service = services.get(name).await.unwrap();
        assert_eq!(
            service.spec.unwrap().type_.as_deref(),
            Some("ClusterIP"),
            "{name}"
        );
    }
    assert_eq!(
        h.get("empty-type").await.spec.service.type_,
        coder_k8s_api::shared::ServiceType::ClusterIP
    );
}
