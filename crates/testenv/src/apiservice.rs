//! Registers an aggregated API server that runs on this machine with a test control plane: an ExternalName Service
//! (kube-apiserver resolves it to localhost, as there is no kube-proxy) and the APIService without a caBundle, which
//! the server under test fills itself.

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

/// The APIService of the aggregated API.
pub const APISERVICE: &str = "v1alpha1.aggregation.coder.com";
/// The Service the APIService names, as the manifests ship it.
pub const SERVICE: &str = "coder-k8s-apiserver";

/// The APIService API (cluster-scoped, read as dynamic objects).
pub fn apiservices(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "apiservices"),
    )
}

/// Applies the Service in `namespace` and the APIService leading kube-apiserver to a server on localhost:`port`.
/// Server-side apply, so registering again moves the APIService to another port.
pub async fn register(client: &kube::Client, namespace: &str, port: u16) -> Result<()> {
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": SERVICE, "namespace": namespace},
        "spec": {"type": "ExternalName", "externalName": "localhost"},
    }))?;
    let apply = PatchParams::apply("coder-k8s-testenv").force();
    Api::<Service>::namespaced(client.clone(), namespace)
        .patch(SERVICE, &apply, &Patch::Apply(&service))
        .await
        .context("applying the aggregated API server's Service")?;
    let apiservice = json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": APISERVICE},
        "spec": {
            "group": "aggregation.coder.com",
            "version": "v1alpha1",
            "groupPriorityMinimum": 1000,
            "versionPriority": 100,
            "service": {"name": SERVICE, "namespace": namespace, "port": port},
        },
    });
    apiservices(client)
        .patch(APISERVICE, &apply, &Patch::Apply(&apiservice))
        .await
        .context("applying the APIService")?;
    Ok(())
}
