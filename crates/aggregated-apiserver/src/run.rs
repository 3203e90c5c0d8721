//! Starting the aggregated API server as one process component: delegated authentication first, then the serving
//! certificate, then the listener, in the order the start-up errors are documented; then serving with the
//! certificate renewal and the APIService caBundle controller beside it until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tokio::net::TcpListener;

use crate::generic::authn::DelegatedAuthenticator;
use crate::generic::authz::SubjectAccessReviewAuthorizer;
use crate::generic::server::ServerSettings;
use crate::generic::{ApiServer, Registry, StartupError, tls};
use crate::serving::{self, ServingMaterial, ServingSettings};

/// How to serve.
#[derive(Clone, Debug)]
pub struct Options {
    /// The serving-CA Secret to use; `None` outside a cluster: a self-signed `localhost` certificate.
    pub serving: Option<ServingSettings>,
    pub server: ServerSettings,
}

/// A server that passed every start-up check and holds its listener.
pub struct Prepared {
    client: kube::Client,
    server: ApiServer,
    listener: TcpListener,
    material: ServingMaterial,
    options: Options,
    tls: Arc<rustls::ServerConfig>,
}

/// Runs the start-up checks. Errors are the documented start-up errors. `listener` is bound by the caller (the
/// process binds dual-stack; tests bind port 0).
pub async fn prepare(
    client: kube::Client,
    registry: Registry,
    listener: TcpListener,
    options: Options,
) -> Result<Prepared, StartupError> {
    registry.validate().map_err(StartupError)?;
    let authenticator = DelegatedAuthenticator::start(client.clone()).await?;
    let material = match &options.serving {
        Some(settings) => serving::load_or_create(client.clone(), settings).await?,
        None => serving::self_signed_localhost()?,
    };
    let server = ApiServer {
        registry: Arc::new(registry),
        authenticator: authenticator.clone(),
        authorizer: Arc::new(SubjectAccessReviewAuthorizer::new(client.clone())),
        ready: Arc::new(AtomicBool::new(false)),
        settings: options.server.clone(),
    };
    let tls = tls::server_config(material.cert.clone(), authenticator.client_cert_verifier())?;
    Ok(Prepared {
        client,
        server,
        listener,
        material,
        options,
        tls,
    })
}

impl Prepared {
    /// The address the listener is bound to (tests bind port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The CA that signs the serving certificate (what the APIService caBundle must hold).
    pub fn ca_pem(&self) -> &[u8] {
        &self.material.ca_pem
    }

    /// The server value, e.g. to watch its readiness.
    pub fn server(&self) -> &ApiServer {
        &self.server
    }

    /// Serves until `shutdown` completes. The certificate renewal and, in a cluster, the caBundle controller run
    /// beside the listener and stop with it.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        let Prepared {
            client,
            server,
            listener,
            material,
            options,
            tls,
        } = self;
        let (ca_tx, ca_rx) = tokio::sync::watch::channel(material.ca_pem.clone());
        let mut background = tokio::task::JoinSet::new();
        if let Some(settings) = options.serving.clone() {
            background.spawn(serving::run_renewal(
                client.clone(),
                settings,
                material.cert.clone(),
                ca_tx,
            ));
            background.spawn(serving::run_ca_bundle_controller(client, ca_rx));
        }
        server.ready.store(true, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(address = ?listener.local_addr().ok(), "serving the aggregated API");
        let result = tls::serve(listener, tls, server.router(), shutdown).await;
        background.abort_all();
        result
    }
}
