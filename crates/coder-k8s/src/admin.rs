//! The admin HTTP server on `--health-probe-bind-address` (default `:8081`, every IPv6 and IPv4 address): `/healthz`
//! (500 once a controller loop has stopped), `/readyz` (503 until the watch caches hold their first lists, and again
//! while shutting down) and `/metrics`. Built as a value so tests drive it in process.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// Readiness, liveness and the metrics registry, shared by the admin server and the components.
#[derive(Clone)]
pub struct AdminState {
    ready: Arc<AtomicBool>,
    /// Set once on the shutdown signal; `/readyz` then stays 503 whatever a late `set_ready(true)` says.
    shutting_down: Arc<AtomicBool>,
    /// The loops that stopped while they should have been running.
    dead: Arc<Mutex<Vec<String>>>,
    registry: Arc<Registry>,
}

impl AdminState {
    pub fn new(registry: Registry) -> Self {
        Self {
            ready: Arc::new(AtomicBool::new(false)),
            shutting_down: Arc::new(AtomicBool::new(false)),
            dead: Arc::default(),
            registry: Arc::new(registry),
        }
    }

    /// Marks the process ready (or not) for `/readyz`.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// The shutdown began: not ready from now on, even if a component that was still starting reports ready later.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire) && !self.shutting_down.load(Ordering::Acquire)
    }

    /// Records that loop `name` stopped (returned or panicked) while it should run: `/healthz` fails from now on,
    /// so the kubelet restarts the process.
    pub fn loop_died(&self, name: &str) {
        self.lock_dead().push(name.to_owned());
    }

    fn lock_dead(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.dead.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The admin router.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn healthz(State(state): State<AdminState>) -> impl IntoResponse {
    let dead = state.lock_dead().clone();
    if dead.is_empty() {
        (StatusCode::OK, "ok".to_owned())
    } else {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("stopped: {}", dead.join(", ")),
        )
    }
}

async fn readyz(State(state): State<AdminState>) -> impl IntoResponse {
    if state.is_ready() {
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

/// Waits for the task of loop `name`; when it ends (returns or panics) before `shutdown`, `/healthz` fails.
pub async fn supervise(
    name: &str,
    task: tokio::task::JoinHandle<()>,
    state: AdminState,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let outcome = task.await;
    if *shutdown.borrow() {
        return;
    }
    match outcome {
        Err(error) if error.is_panic() => tracing::error!(loop_name = name, "loop panicked; /healthz fails"),
        _ => tracing::error!(loop_name = name, "loop stopped before shutdown; /healthz fails"),
    }
    state.loop_died(name);
}

/// Where to listen for an address flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindPlan {
    /// No host (`:8081`, Go's form): every IPv6 and IPv4 address on this port, IPv4 only where IPv6 is unavailable.
    AllInterfaces(u16),
    /// A host and port as given (`127.0.0.1:8081`, `[::1]:8081`, `localhost:8081`).
    Exactly(String),
}

/// Reads the address flag. Pure.
pub fn bind_plan(address: &str) -> Result<BindPlan, String> {
    let Some((host, port)) = address.rsplit_once(':') else {
        return Err(format!("missing port in address {address:?}"));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("invalid port in address {address:?}"))?;
    Ok(if host.is_empty() {
        BindPlan::AllInterfaces(port)
    } else {
        BindPlan::Exactly(address.to_owned())
    })
}

/// Listens as `address` asks; see [`BindPlan`].
pub async fn bind(address: &str) -> std::io::Result<TcpListener> {
    bind_with(address, bind_dual_stack).await
}

/// [`bind`] with the dual-stack step given, so the IPv4 fallback can be tested on a host that has IPv6.
async fn bind_with(
    address: &str,
    dual_stack: impl FnOnce(u16) -> std::io::Result<TcpListener>,
) -> std::io::Result<TcpListener> {
    let plan =
        bind_plan(address).map_err(|reason| std::io::Error::new(std::io::ErrorKind::InvalidInput, reason))?;
    match plan {
        BindPlan::Exactly(address) => TcpListener::bind(address).await,
        BindPlan::AllInterfaces(port) => match dual_stack(port) {
            Ok(listener) => Ok(listener),
            Err(error) => {
                tracing::info!(%error, port, "IPv6 is unavailable; listening on IPv4 only");
                TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))).await
            }
        },
    }
}

/// One socket on `[::]:port` that also accepts IPv4 (IPv4-mapped addresses), whatever the system default is.
fn bind_dual_stack(port: u16) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_only_v6(false)?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)).into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use prometheus_client::metrics::gauge::Gauge;
    use std::net::IpAddr;
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

    #[tokio::test]
    async fn after_shutdown_began_a_late_ready_is_ignored() {
        let state = AdminState::new(Registry::default());
        let app = router(state.clone());
        state.set_ready(true);
        state.begin_shutdown();
        assert_eq!(
            get_path(app.clone(), "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        // A component that finished starting only now (the race with the signal) cannot turn it back.
        state.set_ready(true);
        assert_eq!(get_path(app, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
    }

    #[tokio::test]
    async fn healthz_fails_once_a_loop_died() {
        let state = AdminState::new(Registry::default());
        let app = router(state.clone());
        assert_eq!(get_path(app.clone(), "/healthz").await.0, StatusCode::OK);
        state.loop_died("CoderProvisioner controller");
        assert_eq!(
            get_path(app, "/healthz").await,
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "stopped: CoderProvisioner controller".to_owned()
            )
        );
    }

    #[tokio::test]
    async fn a_loop_that_panics_or_returns_before_shutdown_is_dead_and_after_it_is_not() {
        let state = AdminState::new(Registry::default());
        let app = router(state.clone());
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let panicking = tokio::spawn(async { panic!("reconciler bug") });
        supervise("panicking loop", panicking, state.clone(), stopped.clone()).await;
        let returning = tokio::spawn(async {});
        supervise("returning loop", returning, state.clone(), stopped.clone()).await;
        assert_eq!(
            get_path(app.clone(), "/healthz").await,
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "stopped: panicking loop, returning loop".to_owned()
            )
        );
        let healthy = AdminState::new(Registry::default());
        stop.send(true).unwrap();
        supervise("stopped loop", tokio::spawn(async {}), healthy.clone(), stopped).await;
        assert_eq!(get_path(router(healthy), "/healthz").await.0, StatusCode::OK);
    }

    #[test]
    fn bind_plans() {
        assert_eq!(bind_plan(":8081"), Ok(BindPlan::AllInterfaces(8081)));
        assert_eq!(
            bind_plan("127.0.0.1:8081"),
            Ok(BindPlan::Exactly("127.0.0.1:8081".to_owned()))
        );
        assert_eq!(bind_plan("[::1]:0"), Ok(BindPlan::Exactly("[::1]:0".to_owned())));
        assert!(bind_plan("8081").is_err());
        assert!(bind_plan(":http").is_err());
        assert!(bind_plan(":99999").is_err());
    }

    /// Asks `/healthz` at `target`.
    async fn healthz_at(target: SocketAddr) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(target).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    #[tokio::test]
    async fn without_ipv6_a_bare_port_listens_on_ipv4() {
        let no_ipv6 = |_| Err(std::io::Error::from(std::io::ErrorKind::AddrNotAvailable));
        let listener = bind_with(":0", no_ipv6).await.unwrap();
        let address = listener.local_addr().unwrap();
        assert!(address.is_ipv4() && address.ip().is_unspecified(), "{address}");
        tokio::spawn(axum::serve(listener, router(AdminState::new(Registry::default()))).into_future());
        let response = healthz_at(SocketAddr::from((Ipv4Addr::LOCALHOST, address.port()))).await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }

    #[tokio::test]
    async fn a_bare_port_listens_on_ipv6_and_ipv4() {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let listener = bind(&format!(":{port}")).await.unwrap();
        assert!(
            listener.local_addr().unwrap().is_ipv6(),
            "{:?}",
            listener.local_addr()
        );
        tokio::spawn(axum::serve(listener, router(AdminState::new(Registry::default()))).into_future());
        for host in [
            IpAddr::from(Ipv4Addr::LOCALHOST),
            IpAddr::from(Ipv6Addr::LOCALHOST),
        ] {
            let response = healthz_at(SocketAddr::new(host, port)).await;
            assert!(response.starts_with("HTTP/1.1 200"), "{host}: {response}");
        }
    }
}
