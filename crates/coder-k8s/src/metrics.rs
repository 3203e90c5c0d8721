//! Every metric the process serves on `/metrics`, registered once at start: the leader gauge, the reconciles, the
//! Kubernetes requests, the aggregated API server's requests, the MCP server's tool calls, and the Coder requests by
//! endpoint and status (so Coder's 429s show), whichever components the mode runs.

use std::sync::Arc;

use coder_k8s_aggregated_apiserver::generic::metrics::RequestMetrics;
use coder_k8s_controllers::metrics::ReconcileMetrics;
use coder_k8s_mcp_server::metrics::ToolMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::kube_requests::KubeRequests;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CoderRequestLabels {
    method: String,
    endpoint: String,
    /// The HTTP status, or `error` when no answer came.
    code: String,
}

/// The process's metrics (each cheap to clone; clones count into the same series).
#[derive(Clone)]
pub struct ProcessMetrics {
    pub leader: Gauge<i64>,
    pub reconciles: Arc<ReconcileMetrics>,
    pub kube_requests: KubeRequests,
    pub apiserver: RequestMetrics,
    pub mcp: ToolMetrics,
    coder_requests: Family<CoderRequestLabels, Counter>,
}

impl ProcessMetrics {
    /// Registers every series in `registry` and makes this process's Coder clients report to it.
    pub fn register(registry: &mut Registry) -> Self {
        let leader = Gauge::<i64>::default();
        registry.register(
            "coder_k8s_leader",
            "1 while this replica holds the controller leader Lease",
            leader.clone(),
        );
        let metrics = Self {
            leader,
            reconciles: ReconcileMetrics::register(registry),
            kube_requests: KubeRequests::register(registry),
            apiserver: RequestMetrics::default(),
            mcp: ToolMetrics::default(),
            coder_requests: Family::default(),
        };
        metrics.apiserver.register(registry);
        metrics.mcp.register(registry);
        registry.register(
            "coder_k8s_coder_requests",
            "Requests the operator sent to Coder, by method, endpoint (names and IDs as {}) and status code (error: no answer)",
            metrics.coder_requests.clone(),
        );
        let coder_requests = metrics.coder_requests.clone();
        // One observer per process; a second registration (tests) keeps the first.
        coder_k8s_coder_client::observe::set_observer(move |request| {
            let code = request
                .status
                .map_or_else(|| "error".to_owned(), |s| s.to_string());
            coder_requests
                .get_or_create(&CoderRequestLabels {
                    method: request.method.to_owned(),
                    endpoint: request.endpoint.to_owned(),
                    code,
                })
                .inc();
        });
        metrics
    }
}

#[cfg(test)]
mod tests {
    use axum::routing::get;
    use coder_k8s_coder_client::{CoderClient, SessionToken};

    use super::*;

    /// A Coder that answers `/api/v2/buildinfo` and rate-limits `/api/v2/users/{user}`.
    async fn coder() -> url::Url {
        let app = axum::Router::new()
            .route(
                "/api/v2/buildinfo",
                get(|| async { axum::Json(serde_json::json!({"version": "v2.30.0"})) }),
            )
            .route(
                "/api/v2/users/{user}",
                get(|| async {
                    (
                        axum::http::StatusCode::TOO_MANY_REQUESTS,
                        axum::Json(serde_json::json!({"message": "rate limit exceeded"})),
                    )
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(axum::serve(listener, app).into_future());
        format!("http://{addr}/").parse().unwrap()
    }

    #[tokio::test]
    async fn coder_requests_are_counted_by_endpoint_and_code_with_429s_visible() {
        let mut registry = Registry::default();
        let _metrics = ProcessMetrics::register(&mut registry);
        let client = CoderClient::new(
            coder().await,
            SessionToken::new("abcdefghij-0123456789abcdefghijkl"),
        )
        .unwrap();
        client.buildinfo().await.unwrap();
        let _ = client.user("alice").await;
        let _ = client.user("bob").await;
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"coder_k8s_coder_requests_total{method="GET",endpoint="/api/v2/buildinfo",code="200"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"coder_k8s_coder_requests_total{method="GET",endpoint="/api/v2/users/{}",code="429"} 2"#
            ),
            "one series for every user, the 429s visible: {text}"
        );
    }
}
