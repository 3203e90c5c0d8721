//! The server's request metrics, as kube-apiserver keeps its own: requests by verb, resource and status code, and the
//! latency of every request but a watch (a watch lasts as long as its client keeps it). Cheap to clone: every clone
//! counts into the same series, so the process registers one clone and hands another to the server.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::request_info::{self, RequestInfo};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: String,
    resource: String,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    verb: String,
    resource: String,
}

/// Latency buckets in seconds: kube-apiserver's request timeout is 60 s, and a list of a slow Coder can take seconds.
const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

/// `coder_k8s_apiserver_requests_total` and `coder_k8s_apiserver_request_duration_seconds`.
#[derive(Clone, Debug)]
pub struct RequestMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<LatencyLabels, Histogram>,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(|| Histogram::new(BUCKETS)),
        }
    }
}

impl RequestMetrics {
    /// Registers the series in `registry` (the process's `/metrics`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "coder_k8s_apiserver_requests",
            "Requests the aggregated API server answered, by verb, resource (with subresource) and status code",
            self.requests.clone(),
        );
        registry.register(
            "coder_k8s_apiserver_request_duration_seconds",
            "Time the aggregated API server took to answer a request, watches excepted, by verb and resource",
            self.duration.clone(),
        );
    }

    /// Counts one answered request of `method` on `path` (its query tells a watch) with `code`, which took `seconds`.
    pub fn observe(&self, method: &http::Method, path: &str, query: Option<&str>, code: u16, seconds: f64) {
        let watch = query.is_some_and(|q| {
            q.split('&')
                .any(|pair| pair == "watch=true" || pair == "watch=1" || pair == "watch")
        });
        let (verb, resource) = match request_info::parse(method, path, watch) {
            Ok(RequestInfo::Resource(info)) => {
                let resource = match &info.subresource {
                    Some(sub) => format!("{}/{sub}", info.resource),
                    None => info.resource.clone(),
                };
                (info.verb.as_str().to_owned(), resource)
            }
            Ok(RequestInfo::NonResource { verb, .. }) => (verb, String::new()),
            Err(_) => (method.as_str().to_ascii_lowercase(), String::new()),
        };
        if verb != "watch" {
            self.duration
                .get_or_create(&LatencyLabels {
                    verb: verb.clone(),
                    resource: resource.clone(),
                })
                .observe(seconds);
        }
        self.requests
            .get_or_create(&RequestLabels { verb, resource, code })
            .inc();
    }

    /// The requests counted so far for `verb`, `resource` and `code` (tests).
    pub fn count(&self, verb: &str, resource: &str, code: u16) -> u64 {
        self.requests
            .get_or_create(&RequestLabels {
                verb: verb.to_owned(),
                resource: resource.to_owned(),
                code,
            })
            .get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORKSPACES: &str = "/apis/aggregation.coder.com/v1alpha1/namespaces/team/coderworkspaces";

    #[test]
    fn requests_are_counted_by_verb_resource_and_code() {
        let metrics = RequestMetrics::default();
        metrics.observe(&http::Method::GET, WORKSPACES, None, 200, 0.01);
        metrics.observe(&http::Method::GET, WORKSPACES, None, 200, 0.02);
        metrics.observe(
            &http::Method::GET,
            &format!("{WORKSPACES}/a.b.c"),
            None,
            404,
            0.01,
        );
        metrics.observe(
            &http::Method::GET,
            WORKSPACES,
            Some("watch=true&timeoutSeconds=5"),
            200,
            5.0,
        );
        metrics.observe(
            &http::Method::POST,
            &format!("{WORKSPACES}/a.b.c/start"),
            None,
            201,
            0.3,
        );
        assert_eq!(metrics.count("list", "coderworkspaces", 200), 2);
        assert_eq!(metrics.count("get", "coderworkspaces", 404), 1);
        assert_eq!(metrics.count("watch", "coderworkspaces", 200), 1);
        assert_eq!(metrics.count("create", "coderworkspaces/start", 201), 1);
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(r#"coder_k8s_apiserver_request_duration_seconds_count{verb="list",resource="coderworkspaces"} 2"#),
            "{text}"
        );
        assert!(
            !text.contains(r#"duration_seconds_count{verb="watch""#),
            "no latency for a watch: {text}"
        );
    }
}
