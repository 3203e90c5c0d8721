//! Registers an aggregated API server that runs on this machine with a test control plane: an ExternalName Service
//! (kube-apiserver resolves it to localhost, as there is no kube-proxy) and the APIService without a caBundle, which
//! the server under test fills itself.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::ControlPlane;

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

/// How long [`wait_until_served`] waits: kube-apiserver marks an APIService available after its own checks of the
/// Service and the server, and retries a failed discovery fetch with a backoff that grows to a minute.
const SERVED_TIMEOUT: Duration = Duration::from_secs(90);

/// The suffix of every resource of the group in `kubectl api-resources -o name`.
const GROUP_SUFFIX: &str = ".aggregation.coder.com";

/// Waits until kubectl can use the aggregated API through kube-apiserver: the proxy answers for the group version,
/// and the cluster's aggregated discovery lists resources of the group (a server under test may serve a part of
/// them). The two become true at different times: kube-apiserver fetches the server's discovery in its own worker,
/// and a fetch that failed while the APIService was still being set up (no caBundle yet) is retried with a backoff,
/// so `kubectl get coderworkspaces` can say "the server doesn't have a resource type" for seconds after the proxy
/// works.
pub async fn wait_until_served(cp: &ControlPlane) -> Result<()> {
    let deadline = Instant::now() + SERVED_TIMEOUT;
    loop {
        let last_failure = match served_as_kubectl_sees_it(cp)? {
            None => return Ok(()),
            Some(failure) => failure,
        };
        if Instant::now() >= deadline {
            bail!(
                "kube-apiserver did not serve the aggregated API to kubectl within {SERVED_TIMEOUT:?}: {last_failure}"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `None` when kubectl is served; otherwise what is missing.
fn served_as_kubectl_sees_it(cp: &ControlPlane) -> Result<Option<String>> {
    let proxied = cp
        .kubectl()
        .args(["get", "--raw", "/apis/aggregation.coder.com/v1alpha1"])
        .output()
        .context("running kubectl")?;
    if !proxied.status.success() {
        let stderr = String::from_utf8_lossy(&proxied.stderr);
        return Ok(Some(format!("the proxy does not answer: {}", stderr.trim())));
    }
    // api-resources refreshes kubectl's discovery cache instead of trusting it.
    let discovery = cp
        .kubectl()
        .args(["api-resources", "--api-group=aggregation.coder.com", "-o", "name"])
        .output()
        .context("running kubectl")?;
    // Until kube-apiserver has fetched the server's discovery, the group is listed without resources.
    let names = String::from_utf8_lossy(&discovery.stdout);
    if names.lines().any(|name| name.trim().ends_with(GROUP_SUFFIX)) {
        return Ok(None);
    }
    Ok(Some(format!(
        "discovery lists no resource of the group yet (kubectl api-resources: {})",
        String::from_utf8_lossy(&discovery.stderr).trim()
    )))
}
