//! Runs the components of the selected `--app` mode until SIGTERM or SIGINT, then shuts down gracefully.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::admin::{self, AdminState};
use crate::cli::{AppMode, Args, Settings, StartupError};
use crate::metrics::ProcessMetrics;
use crate::{aggregated, leader, mcp};
use coder_k8s_aggregated_apiserver::coder::{
    ControlPlaneProvider, Provider, StaticProvider, UnconfiguredProvider,
};
use coder_k8s_control_plane_access::ClientSettings;
use coder_k8s_controllers::context::Context as ControllerContext;
use coder_k8s_controllers::settings::{ControllerSettings, DEFAULT_OPERATOR_NAMESPACE};

/// Everything the startup checks produced; the components start from it without validating again.
#[derive(Debug)]
pub struct Startup {
    pub settings: Settings,
    /// The static Coder backend of `--app=aggregated-apiserver` (none: every request will answer 503).
    pub standalone_backend: Option<aggregated::StaticBackend>,
    /// The checked `--mcp-token-file` of `--app=mcp-http`.
    pub mcp_token: Option<Arc<coder_k8s_mcp_server::TokenFile>>,
}

/// Checks every startup rule of the mode before anything listens, so flag errors exit at once.
pub fn startup_checks(args: &Args) -> Result<Startup, StartupError> {
    let settings = args.validate()?;
    let mut standalone_backend = None;
    let mut mcp_token = None;
    match settings.mode {
        AppMode::McpHttp => {
            mcp_token = Some(Arc::new(mcp::read_token_file(args.mcp_token_file.as_deref())?));
        }
        AppMode::AggregatedApiserver => {
            standalone_backend = aggregated::standalone_backend(
                settings.coder_url.as_ref(),
                &args.coder_session_token,
                &args.coder_namespace,
            )?;
        }
        AppMode::All | AppMode::Controller => {}
    }
    Ok(Startup {
        settings,
        standalone_backend,
        mcp_token,
    })
}

/// How long the reconciles in flight at SIGTERM get to finish: below Kubernetes' default
/// `terminationGracePeriodSeconds` (30 s), leaving time to release the leader Lease before the kubelet kills.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// Runs the process after [`startup_checks`] passed, until SIGTERM or SIGINT. On the signal: `/readyz` turns 503, no
/// new reconcile starts, the reconciles in flight get [`SHUTDOWN_GRACE`] to finish, the leader Lease is released,
/// and the process exits 0.
pub async fn run(startup: Startup) -> Result<()> {
    let settings = &startup.settings;
    let mut registry = Registry::default();
    let metrics = ProcessMetrics::register(&mut registry);
    let admin_state = AdminState::new(registry);
    let listener = admin::bind(&settings.health_probe_bind_address)
        .await
        .with_context(|| {
            format!(
                "listen on --health-probe-bind-address {}",
                settings.health_probe_bind_address
            )
        })?;
    tracing::info!(address = ?listener.local_addr().ok(), mode = settings.mode.as_str(), "serving /healthz, /readyz and /metrics");

    // Health stays served through the grace period; the admin server stops last.
    let (admin_stop_tx, admin_stop_rx) = watch::channel(false);
    let admin = tokio::spawn(
        axum::serve(listener, admin::router(admin_state.clone()))
            .with_graceful_shutdown(wait_for(admin_stop_rx))
            .into_future(),
    );
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let signal_state = admin_state.clone();
    let signal = tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!(grace = ?SHUTDOWN_GRACE, "shutdown signal received; finishing the reconciles in flight");
        signal_state.begin_shutdown();
        let _ = shutdown_tx.send(true);
    });

    let result = run_components(&startup, admin_state, metrics, shutdown_rx).await;
    signal.abort();
    let _ = admin_stop_tx.send(true);
    match tokio::time::timeout(Duration::from_secs(5), admin).await {
        Ok(Ok(Ok(()))) | Err(_) => {}
        Ok(Ok(Err(error))) => tracing::warn!(%error, "admin server stopped with an error"),
        Ok(Err(error)) => tracing::warn!(%error, "admin server task failed"),
    }
    tracing::info!("stopped");
    result
}

async fn run_components(
    startup: &Startup,
    admin_state: AdminState,
    metrics: ProcessMetrics,
    shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let settings = &startup.settings;
    let ProcessMetrics {
        leader: leader_gauge,
        reconciles: reconcile_metrics,
        kube_requests,
        apiserver: api_metrics,
        mcp: tool_metrics,
        ..
    } = metrics;
    match settings.mode {
        AppMode::McpHttp => {
            let token = startup
                .mcp_token
                .clone()
                .context("assertion failed: the MCP token file was not checked at startup")?;
            let config = kube::Config::infer()
                .await
                .context("find the Kubernetes configuration (in-cluster, KUBECONFIG or ~/.kube/config)")?;
            let client = kube_requests.client(config).context("connect to Kubernetes")?;
            let ready = move || admin_state.set_ready(true);
            mcp::run(
                client,
                token,
                &settings.mcp_bind_address,
                tool_metrics,
                ready,
                shutdown,
            )
            .await
        }
        AppMode::AggregatedApiserver => {
            let config = aggregated::delegation_config()
                .await
                .map_err(|error| anyhow::anyhow!("configure delegated authentication: {error}"))?;
            let client = kube_requests.client(config).context("connect to Kubernetes")?;
            let provider = standalone_provider(startup, settings, &client)?;
            let ready = move || admin_state.set_ready(true);
            aggregated::run(
                client,
                provider,
                &settings.apiserver_bind_address,
                api_metrics,
                ready,
                delayed(shutdown, settings.shutdown_delay),
            )
            .await
        }
        AppMode::All | AppMode::Controller => {
            let config = kube::Config::infer()
                .await
                .context("find the Kubernetes configuration (in-cluster, KUBECONFIG or ~/.kube/config)")?;
            let client = kube_requests.client(config).context("connect to Kubernetes")?;
            let controller_settings = ControllerSettings {
                service_address_override: settings.service_address_override,
                coder_request_timeout: settings.coder_request_timeout,
                max_concurrent_reconciles: settings.max_concurrent_reconciles,
                restrict_workspace_rbac: settings.restrict_workspace_rbac,
                retry_interval: settings.requeue_interval,
                entitlements_interval: settings.entitlements_interval,
                watch_namespace: settings.watch_namespace.clone(),
                operator_namespace: crate::leader::current_namespace()
                    .unwrap_or_else(|| DEFAULT_OPERATOR_NAMESPACE.to_owned()),
                ..ControllerSettings::default()
            };
            let ctx = Arc::new(ControllerContext::new(
                client.clone(),
                controller_settings,
                reconcile_metrics,
            ));
            // The aggregated API server reuses the controllers' Coder clients (one per control plane, forgotten
            // when the control plane is deleted).
            let clients = ctx.clients.clone();
            let reads = Arc::new(aggregated::CachedReads::new(ctx.clone()));
            let controllers = run_controller(
                ctx,
                settings.leader_elect,
                admin_state,
                leader_gauge,
                shutdown.clone(),
            );
            if settings.mode == AppMode::Controller {
                return controllers.await;
            }
            // Every replica serves the aggregated API; only the leader runs the controllers. Either failing stops
            // the process.
            // Control planes and their token Secrets come from the controllers' caches: no Kubernetes read per
            // request.
            let provider = Arc::new(ControlPlaneProvider::with_reads(client.clone(), reads, clients));
            // Readiness follows the controllers' caches, as in controller mode.
            let api = aggregated::run(
                client,
                provider,
                &settings.apiserver_bind_address,
                api_metrics,
                || {},
                delayed(shutdown, settings.shutdown_delay),
            );
            tokio::try_join!(controllers, api).map(|_| ())
        }
    }
}

/// The Coder client settings of the aggregated API server.
fn client_settings(settings: &Settings) -> ClientSettings {
    ClientSettings {
        timeout: settings.coder_request_timeout,
        service_address_override: settings.service_address_override,
    }
}

/// Standalone mode's provider: the static backend of the flags (reading the Secrets template variables refer to
/// with `client`), or (none given) one that answers 503.
fn standalone_provider(
    startup: &Startup,
    settings: &Settings,
    client: &kube::Client,
) -> Result<Arc<dyn Provider>> {
    Ok(match &startup.standalone_backend {
        Some(backend) => {
            tracing::info!(namespace = %backend.namespace, "aggregated API provider: static Coder backend from the flags");
            Arc::new(
                StaticProvider::new(backend, &client_settings(settings))
                    .context("build the Coder client")?
                    .with_secrets(client.clone()),
            )
        }
        None => {
            tracing::warn!("aggregated API provider: not configured; every resource request answers 503");
            Arc::new(UnconfiguredProvider)
        }
    })
}

async fn run_controller(
    ctx: Arc<ControllerContext>,
    leader_elect: bool,
    admin_state: AdminState,
    leader_gauge: Gauge<i64>,
    shutdown: watch::Receiver<bool>,
) -> Result<()> {
    tokio::spawn(ready_once_cached(
        ctx.clone(),
        admin_state.clone(),
        shutdown.clone(),
    ));
    tracing::info!(built = ?coder_k8s_controllers::built(), "controllers");
    if !leader_elect {
        leader_gauge.set(1);
        run_controllers(ctx, admin_state, shutdown).await;
        return Ok(());
    }
    let namespace = leader::current_lease_namespace();
    let leadership = leader::elect(ctx.k8s.client.clone(), &namespace)
        .await
        .with_context(|| {
            format!(
                "start leader election on Lease {namespace}/{}",
                leader::LEASE_NAME
            )
        })?;
    let result = lead(
        ctx,
        &namespace,
        &leadership.leading,
        admin_state,
        &leader_gauge,
        shutdown,
    )
    .await;
    leadership.release().await;
    leader_gauge.set(0);
    result
}

/// Waits for the Lease, then runs the controllers until shutdown; losing the Lease is an error.
async fn lead(
    ctx: Arc<ControllerContext>,
    namespace: &str,
    leading: &watch::Receiver<bool>,
    admin_state: AdminState,
    leader_gauge: &Gauge<i64>,
    shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let mut leading = leading.clone();
    let mut shutdown_watch = shutdown.clone();
    // Only the Lease holder runs the controllers (the writers).
    loop {
        let is_leader = *leading.borrow_and_update();
        leader_gauge.set(i64::from(is_leader));
        tracing::info!(lease = leader::LEASE_NAME, %namespace, is_leader, "leader election state");
        if is_leader {
            break;
        }
        tokio::select! {
            changed = leading.changed() => if changed.is_err() { anyhow::bail!("leader election stopped") },
            _ = shutdown_watch.changed() => return Ok(()),
        }
    }
    let controllers = run_controllers(ctx, admin_state, shutdown.clone());
    tokio::pin!(controllers);
    loop {
        tokio::select! {
            () = &mut controllers => return Ok(()),
            changed = leading.changed() => {
                if changed.is_err() || !*leading.borrow() {
                    // Another replica took over: exit so a restart starts from a clean state.
                    anyhow::bail!("lost the leader Lease {namespace}/{}", leader::LEASE_NAME);
                }
            }
        }
    }
}

/// `/readyz` turns ready once every watch cache holds its first list (unless shutdown began first).
async fn ready_once_cached(
    ctx: Arc<ControllerContext>,
    admin_state: AdminState,
    shutdown: watch::Receiver<bool>,
) {
    ctx.k8s.caches.ready().await;
    if !*shutdown.borrow() {
        tracing::info!("watch caches synced; ready");
        admin_state.set_ready(true);
    }
}

/// Every task of the controllers' table as its own task, until shutdown plus at most [`SHUTDOWN_GRACE`] for the reconciles in
/// flight. A controller that stops before shutdown makes `/healthz` fail.
async fn run_controllers(
    ctx: Arc<ControllerContext>,
    admin_state: AdminState,
    shutdown: watch::Receiver<bool>,
) {
    let loops: Vec<_> = coder_k8s_controllers::CONTROLLERS
        .iter()
        .map(|task| {
            let run = (task.run)(ctx.clone(), Box::pin(wait_for(shutdown.clone())));
            (task.name, tokio::spawn(run))
        })
        .collect();
    // Also when this future is dropped (a lost Lease): a replica that is not the leader must not keep writing.
    let _abort_on_drop = AbortOnDrop(loops.iter().map(|(_, task)| task.abort_handle()).collect());
    let supervised = futures::future::join_all(
        loops
            .into_iter()
            .map(|(name, task)| admin::supervise(name, task, admin_state.clone(), shutdown.clone())),
    );
    let grace_over = async {
        wait_for(shutdown.clone()).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        _ = supervised => {}
        () = grace_over => {
            tracing::warn!(grace = ?SHUTDOWN_GRACE, "reconciles still running after the grace period; stopping them");
        }
    }
}

/// Aborts the tasks when dropped.
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.iter().for_each(tokio::task::AbortHandle::abort);
    }
}

/// A shutdown signal that turns true `delay` after `shutdown` does. The aggregated API server stops on it: `/readyz`
/// fails from the first signal, so the Service's endpoints drop this pod while it still answers.
fn delayed(shutdown: watch::Receiver<bool>, delay: std::time::Duration) -> watch::Receiver<bool> {
    let (delayed_tx, delayed_rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for(shutdown).await;
        if !delay.is_zero() {
            tracing::info!(
                ?delay,
                "the aggregated API keeps serving while its endpoints are removed"
            );
            tokio::time::sleep(delay).await;
        }
        let _ = delayed_tx.send(true);
    });
    delayed_rx
}

pub(crate) async fn wait_for(mut shutdown: watch::Receiver<bool>) {
    while !*shutdown.borrow_and_update() {
        if shutdown.changed().await.is_err() {
            return;
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
