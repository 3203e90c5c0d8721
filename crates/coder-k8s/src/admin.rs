//! The admin HTTP server on `--health-probe-bind-address` (default :8081): `/healthz`, `/readyz`, `/metrics`.
//! Built as a value so tests drive it in process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

/// Readiness flag and metrics registry shared by the admin server and the components.
#[derive(Clone)]
pub struct AdminState {
    ready: Arc<AtomicBool>,
    registry: Arc<Registry>,
}

impl AdminState {
    pub fn new(registry: Registry) -> Self {
        Self {
            ready: Arc::new(AtomicBool::new(false)),
            registry: Arc::new(registry),
        }
    }

    /// Marks the process ready (or not) for `/readyz`.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }
}

/// The admin router.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn readyz(State(state): State<AdminState>) -> impl IntoResponse {
    if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

async fn metrics(State(state): State<AdminState>) -> impl IntoResponse {
    let mut body = String::new();
    match encode(&mut body, &state.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use prometheus_client::metrics::gauge::Gauge;
    use tower::ServiceExt;

    async fn get_path(app: Router, path: &str) -> (StatusCode, String) {
        let response = app
            .oneshot(Request::builder().uri(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn readiness_follows_the_flag_and_metrics_are_exposed() {
        let mut registry = Registry::default();
        let gauge = Gauge::<i64>::default();
        gauge.set(3);
        registry.register("coder_k8s_test_gauge", "a test gauge", gauge);
        let state = AdminState::new(registry);
        let app = router(state.clone());
        assert_eq!(
            get_path(app.clone(), "/healthz").await,
            (StatusCode::OK, "ok".to_owned())
        );
        assert_eq!(
            get_path(app.clone(), "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        state.set_ready(true);
        assert_eq!(
            get_path(app.clone(), "/readyz").await,
            (StatusCode::OK, "ok".to_owned())
        );
        let (status, body) = get_path(app, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("coder_k8s_test_gauge 3"), "{body}");
    }
}
