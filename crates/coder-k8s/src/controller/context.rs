//! What every reconciler shares: the Kubernetes client, settings, metrics and the Event recorder.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use coder_k8s_coder_client::{ClientOptions, CoderClient, SessionToken};
use kube::runtime::events::{Recorder, Reporter};

use super::metrics::ReconcileMetrics;

/// Timings and the out-of-cluster address override. Durations are settings so tests can run fast.
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    /// When set, Coder Service hosts (`*.svc.cluster.local`) resolve to this address: the operator runs outside
    /// the cluster (local environment, tests). URLs, `Host` headers and the same-origin rule do not change.
    pub service_address_override: Option<IpAddr>,
    /// Reconcile only this namespace (default: every namespace).
    pub watch_namespace: Option<String>,
    /// Timeout of one Coder API call.
    pub coder_request_timeout: Duration,
    /// Requeue after errors and while waiting on something outside the operator (contract: 30 s).
    pub retry_interval: Duration,
    /// How often entitlements are read once the control plane is Ready (contract: 2 min).
    pub entitlements_interval: Duration,
    /// How long a deleted control plane waits for referrers that are being deleted (v0.1.5: 10 min).
    pub deletion_wait: Duration,
    /// After `deletion_wait`, the time for one last delete attempt (v0.1.5: 5 min).
    pub deletion_last_attempt: Duration,
    /// How long referrers that are not being deleted hold a deleted control plane (v0.1.5: 30 s).
    pub referrer_hold: Duration,
    /// How long a deleted provisioner retries a key delete that met a retryable answer before it releases its
    /// finalizer anyway (best effort, v0.1.5).
    pub cleanup_retry_window: Duration,
}

impl Default for ControllerSettings {
    fn default() -> Self {
        Self {
            service_address_override: None,
            watch_namespace: None,
            coder_request_timeout: Duration::from_secs(30),
            retry_interval: Duration::from_secs(30),
            entitlements_interval: Duration::from_secs(120),
            deletion_wait: Duration::from_secs(600),
            deletion_last_attempt: Duration::from_secs(300),
            referrer_hold: Duration::from_secs(30),
            cleanup_retry_window: Duration::from_secs(120),
        }
    }
}

/// Backoff state of one object after Coder's 429.
#[derive(Default)]
struct RateLimit {
    backoff: coder_k8s_coder_client::backoff::Backoff,
    until: Option<std::time::Instant>,
}

/// Shared by every reconcile.
pub struct Context {
    pub client: kube::Client,
    pub settings: ControllerSettings,
    pub metrics: Arc<ReconcileMetrics>,
    pub recorder: Recorder,
    /// Per-object backoff after Coder's 429 (in memory, like v0.1.5), keyed by object UID.
    rate_limits: std::sync::Mutex<std::collections::HashMap<String, RateLimit>>,
}

impl Context {
    /// An API for `K` in the watched namespace, or in every namespace.
    pub fn watched_api<K>(&self) -> kube::Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match &self.settings.watch_namespace {
            Some(namespace) => kube::Api::namespaced(self.client.clone(), namespace),
            None => kube::Api::all(self.client.clone()),
        }
    }

    pub fn new(client: kube::Client, settings: ControllerSettings, metrics: Arc<ReconcileMetrics>) -> Self {
        let reporter = Reporter {
            controller: "coder-k8s".to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            settings,
            metrics,
            rate_limits: std::sync::Mutex::default(),
        }
    }

    /// The requeue after a 429 for object `uid`: 2 s doubling to 2 min with ±20 % jitter, and never before Coder's
    /// `Retry-After`.
    pub fn rate_limited(&self, uid: &str, retry_after: Option<Duration>) -> Duration {
        let mut limits = self
            .rate_limits
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let limit = limits.entry(uid.to_owned()).or_default();
        let delay = limit
            .backoff
            .next_delay(&mut coder_k8s_coder_client::backoff::OsRandom)
            .max(retry_after.unwrap_or_default());
        limit.until = Some(std::time::Instant::now() + delay);
        delay
    }

    /// How long object `uid` must still wait after a 429, if at all.
    pub fn rate_limit_remaining(&self, uid: &str) -> Option<Duration> {
        let limits = self
            .rate_limits
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let until = limits.get(uid)?.until?;
        until
            .checked_duration_since(std::time::Instant::now())
            .filter(|d| !d.is_zero())
    }

    /// Forgets the backoff of object `uid` after a success.
    pub fn rate_limit_passed(&self, uid: &str) {
        self.rate_limits
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(uid);
    }

    /// A Coder client for `url` with the operator token, honouring the address override.
    pub fn coder_client(
        &self,
        url: &url::Url,
        token: &str,
    ) -> Result<CoderClient, coder_k8s_coder_client::Error> {
        let mut options = ClientOptions {
            timeout: self.settings.coder_request_timeout,
            ..ClientOptions::default()
        };
        if let (Some(address), Some(host)) = (self.settings.service_address_override, url.host_str())
            && host.ends_with(".svc.cluster.local")
        {
            options.resolve_overrides.push((host.to_owned(), address));
        }
        CoderClient::with_options(url.clone(), Some(SessionToken::new(token)), options)
    }
}
