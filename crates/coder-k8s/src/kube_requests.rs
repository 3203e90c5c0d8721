//! Counts every Kubernetes API request the operator sends, by verb: `coder_k8s_kube_requests_total{verb}`. The
//! steady-state test and the benchmark read it to prove and measure "zero writes when nothing changed".

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tower::util::MapRequestLayer;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: &'static str,
}

/// Request counters; cheap to clone.
#[derive(Clone, Default)]
pub struct KubeRequests {
    by_verb: Family<VerbLabels, Counter>,
    writes: Arc<AtomicU64>,
    reads: Arc<AtomicU64>,
    total: Arc<AtomicU64>,
}

/// The Kubernetes verb of a request: `watch` and `list`/`get` are told apart by the query and path.
pub fn verb_of(method: &http::Method, uri: &http::Uri) -> &'static str {
    let query = uri.query().unwrap_or_default();
    match *method {
        http::Method::GET if query.split('&').any(|p| p == "watch=true" || p == "watch=1") => "watch",
        http::Method::GET if is_collection(uri.path()) => "list",
        http::Method::GET => "get",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

/// Whether `path` names a collection (`/api/v1/secrets`, `/apis/g/v/namespaces/ns/things`) rather than one object
/// or its subresource.
fn is_collection(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segments.first() {
        Some(&"api") => segments.get(2..),
        Some(&"apis") => segments.get(3..),
        _ => None,
    };
    let Some(mut rest) = rest else { return false };
    if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
        rest = &rest[2..];
    }
    rest.len() == 1
}

impl KubeRequests {
    /// Registers the counter in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let requests = Self::default();
        registry.register(
            "coder_k8s_kube_requests",
            "Kubernetes API requests sent by the operator, by verb",
            requests.by_verb.clone(),
        );
        requests
    }

    fn record(&self, verb: &'static str) {
        self.by_verb.get_or_create(&VerbLabels { verb }).inc();
        self.total.fetch_add(1, Ordering::Relaxed);
        if matches!(verb, "create" | "update" | "patch" | "delete") {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
        if verb == "get" {
            self.reads.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Write requests (create, update, patch, delete) so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Read requests (get and list; not watches) so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// All requests so far.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// A client for `config` whose requests are counted here.
    pub fn client(&self, config: kube::Config) -> Result<kube::Client, kube::Error> {
        let counter = self.clone();
        let layer = MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
            counter.record(verb_of(request.method(), request.uri()));
            request
        });
        Ok(kube::client::ClientBuilder::try_from(config)?
            .with_layer(&layer)
            .build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs() {
        let uri = |s: &str| s.parse::<http::Uri>().unwrap();
        assert_eq!(
            verb_of(
                &http::Method::GET,
                &uri("/api/v1/secrets?watch=true&resourceVersion=1")
            ),
            "watch"
        );
        assert_eq!(
            verb_of(&http::Method::GET, &uri("/api/v1/namespaces/a/secrets/b")),
            "get"
        );
        assert_eq!(verb_of(&http::Method::PATCH, &uri("/apis/apps/v1/x")), "patch");
        for list in [
            "/api/v1/secrets",
            "/api/v1/namespaces",
            "/api/v1/namespaces/a/secrets?labelSelector=x",
            "/apis/coder.com/v1alpha1/codercontrolplanes",
            "/apis/coder.com/v1alpha1/namespaces/a/codercontrolplanes",
        ] {
            assert_eq!(verb_of(&http::Method::GET, &uri(list)), "list", "{list}");
        }
        for get in [
            "/api/v1/namespaces/a",
            "/api/v1/namespaces/a/secrets/b",
            "/apis/coder.com/v1alpha1/namespaces/a/codercontrolplanes/b/status",
            "/apis/apps/v1/namespaces/a/deployments/b",
            "/version",
        ] {
            assert_eq!(verb_of(&http::Method::GET, &uri(get)), "get", "{get}");
        }
        let requests = KubeRequests::default();
        requests.record("get");
        requests.record("patch");
        requests.record("watch");
        assert_eq!((requests.total(), requests.writes(), requests.reads()), (3, 1, 1));
    }
}
