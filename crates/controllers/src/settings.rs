//! The controllers' settings: timings, concurrency, scope and the out-of-cluster address override. Durations are
//! settings so tests can run fast.

use std::net::IpAddr;
use std::time::Duration;

/// Where the operator runs when neither `POD_NAMESPACE` nor a ServiceAccount says otherwise.
pub const DEFAULT_OPERATOR_NAMESPACE: &str = "coder-system";

/// Timings, concurrency and the out-of-cluster address override. Durations are settings so tests can run fast.
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    /// When set, Coder Service hosts (`*.svc.cluster.local`) resolve to this address: the operator runs outside
    /// the cluster (local environment, tests). URLs, `Host` headers and the same-origin rule do not change.
    pub service_address_override: Option<IpAddr>,
    /// Reconcile only this namespace (default: every namespace).
    pub watch_namespace: Option<String>,
    /// Timeout of one Coder API call.
    pub coder_request_timeout: Duration,
    /// Requeue after errors and while waiting on something outside the operator (30 s).
    pub retry_interval: Duration,
    /// How often a control plane with operator access checks Coder's entitlements and its token (2 min); also the
    /// requeue of a settled MCP server and a provisioner's retry of a failed entitlements read.
    pub entitlements_interval: Duration,
    /// How long a deleted control plane waits for referrers that are being deleted (10 min).
    pub deletion_wait: Duration,
    /// After `deletion_wait`, the time for one last delete attempt (5 min).
    pub deletion_last_attempt: Duration,
    /// How long referrers that are not being deleted hold a deleted control plane (30 s).
    pub referrer_hold: Duration,
    /// How long a deleted provisioner retries a key delete that met a retryable answer before it releases its
    /// finalizer anyway (best effort).
    pub cleanup_retry_window: Duration,
    /// Reconciles of one kind that run at the same time.
    pub max_concurrent_reconciles: u16,
    /// `--restrict-workspace-rbac`: refuse workspace RBAC that grants Secrets, RBAC objects, escalating verbs or
    /// wildcards, or reaches namespaces that did not opt in (control_plane::workspace_rbac).
    pub restrict_workspace_rbac: bool,
    /// The namespace the operator runs in: cleanup records are written there (default `coder-system`).
    pub operator_namespace: String,
    /// How often a cleanup record that no ready control plane matches gets a `NoMatchingDeployment` Event (10 min).
    pub unmatched_record_event_interval: Duration,
    /// How often Coder's provisioner job queue is read at most, per control plane and organization, for the
    /// provisioners with `spec.autoscaling` (30 s).
    pub job_queue_interval: Duration,
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
            max_concurrent_reconciles: 16,
            restrict_workspace_rbac: false,
            operator_namespace: DEFAULT_OPERATOR_NAMESPACE.to_owned(),
            unmatched_record_event_interval: Duration::from_secs(600),
            job_queue_interval: Duration::from_secs(30),
        }
    }
}
