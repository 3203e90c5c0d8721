//! What every reconcile shares: the Kubernetes side (`k8s`: client, recorder, watch caches), the settings, the
//! metrics, control-plane access (one Coder client per control plane, the last entitlements read), the last status
//! written per object, the rate-limit gates and the key that signs cleanup records. What a kind remembers of its own
//! objects is typed and kept by its runner (`memory::PerObject`), not here.

use std::sync::{Arc, Mutex};

use coder_k8s_control_plane_access::{ClientCache, ClientSettings, EntitlementMemo};

use crate::cleanup_records::signing::RecordKey;
use crate::k8s::K8s;
use crate::memory::{StatusMemo, Tracked};
use crate::metrics::ReconcileMetrics;
use crate::provisioner::autoscale::JobQueues;
use crate::rate_limits::RateLimits;
use crate::settings::ControllerSettings;

/// Shared by every reconcile.
pub struct Context {
    pub k8s: K8s,
    pub settings: ControllerSettings,
    pub metrics: Arc<ReconcileMetrics>,
    /// One Coder client per control plane.
    pub clients: Arc<ClientCache>,
    /// The last entitlements read per control plane, shared by the control plane and its provisioners.
    pub entitlements: EntitlementMemo,
    /// The last status each object was given, so a cache that has not caught up does not cause a second write.
    pub statuses: StatusMemo,
    /// Per-object backoff after Coder's 429 (in memory, like v0.1.5).
    pub rate_limits: RateLimits,
    /// The key that signs cleanup records, read (or created) once.
    pub record_key: RecordKey,
    /// The last read of Coder's provisioner job queue per control plane and organization, shared by the
    /// provisioners that autoscale there.
    pub job_queues: JobQueues,
    /// Each running kind's memory of its objects (kept by its runner), counted by [`Context::tracked_objects`].
    memories: Mutex<Vec<Arc<dyn Tracked>>>,
}

impl Context {
    /// Starts the watch caches (on the current tokio runtime) and builds the context.
    pub fn new(client: kube::Client, settings: ControllerSettings, metrics: Arc<ReconcileMetrics>) -> Self {
        let clients = Arc::new(ClientCache::new(ClientSettings {
            timeout: settings.coder_request_timeout,
            service_address_override: settings.service_address_override,
        }));
        Self {
            k8s: K8s::start(
                client,
                settings.watch_namespace.as_deref(),
                &settings.operator_namespace,
            ),
            settings,
            metrics,
            clients,
            entitlements: EntitlementMemo::default(),
            statuses: StatusMemo::default(),
            rate_limits: RateLimits::default(),
            record_key: RecordKey::default(),
            job_queues: JobQueues::default(),
            memories: Mutex::default(),
        }
    }

    /// Counts `memory` (a kind's memory of its objects) in [`Context::tracked_objects`].
    pub fn track(&self, memory: Arc<dyn Tracked>) {
        self.memories
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(memory);
    }

    /// How many objects have per-object bookkeeping, here and in the kinds' memories (for tests of the clean-up).
    pub fn tracked_objects(&self) -> usize {
        let memories = self.memories.lock().unwrap_or_else(|p| p.into_inner());
        let kinds: usize = memories.iter().map(|memory| memory.remembered()).sum();
        self.statuses.len() + self.rate_limits.len() + self.clients.len() + kinds
    }

    /// Forgets everything kept about object `uid` here (it is gone); its kind's runner forgets its own memory.
    pub fn forget(&self, uid: &str) {
        self.statuses.forget(uid);
        self.clients.forget(uid);
        self.entitlements.forget(uid);
        self.rate_limits.passed(uid);
    }

    /// A Coder client for `url` with `token` that is not cached (credentials other than an operator token).
    pub fn uncached_coder_client(
        &self,
        url: &url::Url,
        token: &str,
    ) -> Result<coder_k8s_coder_client::CoderClient, coder_k8s_coder_client::Error> {
        self.clients.settings().build(url, token)
    }
}
