//! The API server as a value: the registry, the authenticator and authorizer, and settings, turned into an axum
//! [`Router`] that tests drive in-process and [`super::tls`] serves over TLS.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;

use super::auth::{Authenticator, Authorizer};
use super::encoded_lists::EncodedLists;
use super::handlers::{self, Shared};
use super::metrics::RequestMetrics;
use super::registry::Registry;
use super::watch::WatchHub;

/// Timing settings, the defaults kube-apiserver's where it has one, and the request metrics.
#[derive(Clone, Debug)]
pub struct ServerSettings {
    /// Budget of a non-watch request when the client sets no `timeout` (kube-apiserver: 60 s).
    pub request_timeout: Duration,
    /// Interval of watch bookmarks for clients that ask for them.
    pub bookmark_interval: Duration,
    /// A watch without `timeoutSeconds` ends after a random time between this and twice this (kube-apiserver:
    /// `--min-request-timeout` 1800 s).
    pub min_watch_timeout: Duration,
    /// Where requests are counted (the process registers a clone on its `/metrics`).
    pub metrics: RequestMetrics,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(60),
            bookmark_interval: Duration::from_secs(60),
            min_watch_timeout: Duration::from_secs(1800),
            metrics: RequestMetrics::default(),
        }
    }
}

/// Everything the HTTP layer needs. Cheap to clone.
#[derive(Clone)]
pub struct ApiServer {
    pub registry: Arc<Registry>,
    pub authenticator: Arc<dyn Authenticator>,
    pub authorizer: Arc<dyn Authorizer>,
    /// `/readyz` answers 200 only while this is set.
    pub ready: Arc<AtomicBool>,
    pub settings: ServerSettings,
}

impl ApiServer {
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// The HTTP routes: open health paths, then authentication, authorization and dispatch to discovery,
    /// OpenAPI and the resource handlers.
    ///
    /// Each router owns the watch broadcasters of the registry's resources: writes through one router are seen by
    /// watches through the same router, so build one router per server.
    pub fn router(&self) -> Router {
        let shared = Arc::new(Shared {
            server: self.clone(),
            hub: WatchHub::new(&self.registry),
            encoded_lists: EncodedLists::default(),
        });
        Router::new().fallback(handlers::handle).with_state(shared)
    }
}
