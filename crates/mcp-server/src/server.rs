//! The HTTP server as a value: [`router`] puts rmcp's streamable HTTP service at `/mcp` behind the
//! [`crate::security::guard`] middleware and serves `/healthz` and `/readyz` without a token; [`serve`] runs it on
//! a listener until shutdown. A session's DELETE answers 204 (see [`session_closed_is_no_content`]).

use crate::metrics::ToolMetrics;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::get;
use http::{Method, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

/// Ends every MCP session when cancelled (re-exported so callers need no tokio-util of their own).
pub type Shutdown = CancellationToken;

use crate::security::{self, Guard};
use crate::token::TokenFile;
use crate::tools::McpServer;

/// The default listen address: loopback only, reached through `kubectl port-forward`.
pub const DEFAULT_BIND_ADDRESS: &str = "127.0.0.1:8090";
/// An MCP session ends after this long without a request.
pub const SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// The largest request body (a tool call's arguments are small).
pub const MAX_REQUEST_BODY_BYTES: usize = 1 << 20;

/// How the server is built.
#[derive(Clone, Debug)]
pub struct ServerSettings {
    /// An MCP session ends after this long without a request.
    pub session_idle_timeout: Duration,
    /// Request bodies above this size are refused with 413.
    pub max_request_body_bytes: usize,
    /// Reported as the server version (`initialize`, `check_health`).
    pub version: String,
    /// Where tool calls are counted (the process registers a clone on its `/metrics`).
    pub metrics: ToolMetrics,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            session_idle_timeout: SESSION_IDLE_TIMEOUT,
            max_request_body_bytes: MAX_REQUEST_BODY_BYTES,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            metrics: ToolMetrics::default(),
        }
    }
}

/// The whole HTTP application. Cancelling `shutdown` ends every MCP session (their streams close) so a graceful
/// HTTP shutdown does not wait for idle clients.
pub fn router(
    client: kube::Client,
    token: Arc<TokenFile>,
    settings: &ServerSettings,
    shutdown: CancellationToken,
) -> Router {
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(settings.session_idle_timeout);
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown)
        .with_max_request_body_bytes(settings.max_request_body_bytes);
    let (version, metrics) = (settings.version.clone(), settings.metrics.clone());
    let mcp = StreamableHttpService::new(
        move || Ok(McpServer::new(client.clone(), version.clone(), metrics.clone())),
        Arc::new(sessions),
        config,
    );
    let guard = Arc::new(Guard {
        token,
        max_body_bytes: settings.max_request_body_bytes,
    });
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn(session_closed_is_no_content))
        .layer(axum::middleware::from_fn_with_state(guard, security::guard))
        .route("/healthz", get(ok))
        .route("/readyz", get(ok))
}

async fn ok() -> &'static str {
    "ok"
}

/// rmcp answers a DELETE that closed its session with 202 Accepted and no body, although the session is gone by
/// then; clients expect 200 or 204 for a finished termination (the official Python SDK logs "Session termination
/// failed: 202" on every close otherwise). Other answers (400 without a session id, 405, 500) pass unchanged.
pub async fn session_closed_is_no_content(request: Request, next: Next) -> Response {
    let delete = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(without_delay(listener), router)
        .with_graceful_shutdown(shutdown)
        .await
}

/// `listener` with Nagle's algorithm off on every connection it accepts: an answer or a stream event written in
/// pieces would otherwise wait for the client's acknowledgement of the piece before, up to its delayed-ACK timer.
fn without_delay(
    listener: tokio::net::TcpListener,
) -> axum::serve::TapIo<tokio::net::TcpListener, fn(&mut tokio::net::TcpStream)> {
    use axum::serve::ListenerExt as _;
    listener.tap_io(send_without_delay)
}

fn send_without_delay(tcp: &mut tokio::net::TcpStream) {
    if let Err(error) = tcp.set_nodelay(true) {
        tracing::debug!(%error, "could not turn off Nagle's algorithm");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::serve::Listener as _;

    #[tokio::test]
    async fn accepted_connections_send_without_delay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut listener = without_delay(listener);
        let ((tcp, _), client) = tokio::join!(listener.accept(), tokio::net::TcpStream::connect(address));
        client.unwrap();
        assert!(
            tcp.nodelay().unwrap(),
            "Nagle's algorithm is on for an accepted connection"
        );
    }
}
