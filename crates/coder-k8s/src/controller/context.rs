//! What every reconciler shares: the Kubernetes client, settings, metrics, the Event recorder, the watch caches,
//! control-plane access (one Coder client per control plane) and the per-object bookkeeping that is dropped when
//! the object goes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coder_k8s_api::ai_gateway_key::CoderAIGatewayKey;
use coder_k8s_api::ai_provider::CoderAIProvider;
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::mcp_server::CoderMCPServer;
use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_api::template_test::CoderTemplateTest;
use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use coder_k8s_control_plane_access::{ClientCache, ClientSettings, EntitlementMemo};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::core::PartialObjectMeta;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;

use super::cache::{Echoes, Informer, ValueReader, strip_meta};
use super::http_route::HttpRoute;
use super::metrics::ReconcileMetrics;
use super::status_writer::StatusMemo;

use super::labels::MANAGED_BY_SELECTOR;

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
    /// How often entitlements are read once the control plane is Ready (2 min); also the requeue of Ready objects.
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
        }
    }
}

/// One watch per resource type the controllers own or read.
pub struct Caches {
    pub control_planes: Arc<Informer<CoderControlPlane>>,
    pub provisioners: Arc<Informer<CoderProvisioner>>,
    pub workspace_proxies: Arc<Informer<CoderWorkspaceProxy>>,
    pub template_tests: Arc<Informer<CoderTemplateTest>>,
    pub ai_providers: Arc<Informer<CoderAIProvider>>,
    pub ai_gateway_keys: Arc<Informer<CoderAIGatewayKey>>,
    pub mcp_servers: Arc<Informer<CoderMCPServer>>,
    /// Cleanup records: ConfigMaps labelled `coder.com/cleanup-record` in the operator namespace (whole objects;
    /// they are small and hold no secret).
    pub cleanup_records: Arc<Informer<ConfigMap>>,
    pub deployments: Arc<Informer<Deployment>>,
    pub services: Arc<Informer<PartialObjectMeta<Service>>>,
    pub service_accounts: Arc<Informer<PartialObjectMeta<ServiceAccount>>>,
    pub ingresses: Arc<Informer<PartialObjectMeta<Ingress>>>,
    pub roles: Arc<Informer<PartialObjectMeta<Role>>>,
    pub role_bindings: Arc<Informer<PartialObjectMeta<RoleBinding>>>,
    /// HTTPRoutes (the Gateway API is optional): the watch starts once the API is found; changes are published
    /// on `http_route_changes` from then on.
    http_routes: std::sync::OnceLock<Arc<Informer<PartialObjectMeta<HttpRoute>>>>,
    pub http_route_changes: super::cache::Fanout<PartialObjectMeta<HttpRoute>>,
    client: kube::Client,
    namespace: Option<String>,
    discovered: tokio::sync::OnceCell<()>,
    /// Every Secret's metadata, values fetched only when they change.
    pub secrets: ValueReader<Secret>,
    /// Every ConfigMap's metadata, values fetched only when they change.
    pub config_maps: ValueReader<ConfigMap>,
}

fn strip_object<K: kube::Resource>(object: &mut K) {
    strip_meta(object.meta_mut());
}

/// Owned objects are read for their owner, their desired hash and (workspace RBAC) their owner UID: the rest goes.
fn strip_owned<K: kube::Resource>(object: &mut K) {
    strip_owned_meta(object.meta_mut());
}

fn strip_owned_meta(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    use super::apply::DESIRED_HASH_LABEL;
    use super::control_plane::names::WORKSPACE_RBAC_OWNER_UID_ANNOTATION;
    strip_meta(meta);
    meta.creation_timestamp = None;
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|key, _| key == DESIRED_HASH_LABEL);
    }
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|key, _| {
            key == WORKSPACE_RBAC_OWNER_UID_ANNOTATION || key == super::takeover::LEGACY_FIELDS_MARK
        });
    }
}

/// Of a Deployment only its ready replicas are read.
fn strip_deployment(deployment: &mut Deployment) {
    strip_owned_meta(&mut deployment.metadata);
    deployment.spec = None;
    let ready_replicas = deployment.status.as_ref().and_then(|s| s.ready_replicas);
    deployment.status = Some(k8s_openapi::api::apps::v1::DeploymentStatus {
        ready_replicas,
        ..Default::default()
    });
}

impl Caches {
    fn start(client: &kube::Client, namespace: Option<&str>, operator_namespace: &str) -> Self {
        let all = watcher::Config::default();
        let managed = watcher::Config::default().labels(MANAGED_BY_SELECTOR);
        macro_rules! watch {
            ($kind:ty, $config:expr, $strip:expr) => {
                Informer::start(scoped_api::<$kind>(client, namespace), $config, $strip)
            };
        }
        macro_rules! everywhere {
            ($kind:ty, $config:expr) => {
                Informer::start(
                    scoped_api::<PartialObjectMeta<$kind>>(client, None),
                    $config,
                    strip_owned,
                )
            };
        }
        macro_rules! owned {
            ($kind:ty, $config:expr) => {
                watch!(PartialObjectMeta<$kind>, $config, strip_owned)
            };
        }
        // `Api<PartialObjectMeta<K>>` asks the API server for metadata only.
        macro_rules! metadata {
            ($kind:ty, $config:expr) => {
                watch!(PartialObjectMeta<$kind>, $config, strip_object)
            };
        }
        Self {
            // The kinds' own objects are decoded one by one: one the types cannot read must not stop the others.
            control_planes: Informer::start_decoding_each(client, namespace, all.clone(), strip_object),
            provisioners: Informer::start_decoding_each(client, namespace, all.clone(), strip_object),
            workspace_proxies: Informer::start_decoding_each(client, namespace, all.clone(), strip_object),
            template_tests: Informer::start_decoding_each(client, namespace, all.clone(), strip_object),
            ai_providers: Informer::start_decoding_each(client, namespace, all.clone(), strip_object),
            ai_gateway_keys: Informer::start_decoding_each(client, namespace, all.clone(), strip_object),
            mcp_servers: Informer::start_decoding_each(client, namespace, all.clone(), strip_object),
            cleanup_records: Informer::start(
                kube::Api::namespaced(client.clone(), operator_namespace),
                watcher::Config::default().labels(super::cleanup_records::record::LABEL),
                strip_object,
            ),
            deployments: watch!(Deployment, managed.clone(), strip_deployment),
            services: owned!(Service, managed.clone()),
            service_accounts: owned!(ServiceAccount, managed.clone()),
            ingresses: owned!(Ingress, managed.clone()),
            // Workspace RBAC lives in other namespaces too: these two are watched everywhere.
            roles: everywhere!(Role, managed.clone()),
            role_bindings: everywhere!(RoleBinding, managed),
            http_routes: std::sync::OnceLock::new(),
            http_route_changes: super::cache::Fanout::default(),
            client: client.clone(),
            namespace: namespace.map(str::to_owned),
            discovered: tokio::sync::OnceCell::new(),
            secrets: ValueReader::new(metadata!(Secret, all.clone())),
            config_maps: ValueReader::new(metadata!(ConfigMap, all)),
        }
    }

    /// Waits until every cache holds its first list, so no reconcile mistakes "not cached yet" for "absent".
    pub async fn ready(&self) {
        self.discovered.get_or_init(|| self.discover_http_routes()).await;
        if let Some(routes) = self.http_routes.get() {
            routes.ready().await;
        }
        futures::join!(
            self.control_planes.ready(),
            self.provisioners.ready(),
            self.workspace_proxies.ready(),
            self.template_tests.ready(),
            self.ai_providers.ready(),
            self.ai_gateway_keys.ready(),
            self.mcp_servers.ready(),
            self.cleanup_records.ready(),
            self.deployments.ready(),
            self.services.ready(),
            self.service_accounts.ready(),
            self.ingresses.ready(),
            self.roles.ready(),
            self.role_bindings.ready(),
            self.secrets.metadata().ready(),
            self.config_maps.metadata().ready(),
        );
    }
}

impl Caches {
    /// The HTTPRoute cache once it holds its first list; `None` while the Gateway API was not found.
    pub fn http_routes(&self) -> Option<&Arc<Informer<PartialObjectMeta<HttpRoute>>>> {
        self.http_routes.get().filter(|informer| informer.is_ready())
    }

    /// Looks for the Gateway API (one discovery request) and starts the HTTPRoute watch when it is served. Called
    /// once at start, and again by a control plane that wants a route while the API was not found.
    pub async fn discover_http_routes(&self) {
        if self.http_routes.get().is_some() {
            return;
        }
        let served = self
            .client
            .list_api_group_resources("gateway.networking.k8s.io/v1")
            .await
            .is_ok_and(|list| list.resources.iter().any(|r| r.name == "httproutes"));
        if served {
            let config = watcher::Config::default().labels(MANAGED_BY_SELECTOR);
            let api = scoped_api::<PartialObjectMeta<HttpRoute>>(&self.client, self.namespace.as_deref());
            let changes = self.http_route_changes.clone();
            let _ = self
                .http_routes
                .set(Informer::start_with(api, config, strip_owned, changes));
        }
    }
}

/// An API for `K` in `namespace`, or in every namespace. Metadata-only watches use it too
/// (`PartialObjectMeta<K>` is served by the same URLs).
fn scoped_api<K>(client: &kube::Client, namespace: Option<&str>) -> kube::Api<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(namespace) => kube::Api::namespaced(client.clone(), namespace),
        None => kube::Api::all(client.clone()),
    }
}

/// The wait after a 429: the backoff, but never before Coder's `Retry-After`, and never longer than the client's
/// cap on `Retry-After` (the client caps it already; this keeps the bound if another caller builds the error).
fn rate_limit_delay(backoff: Duration, retry_after: Option<Duration>) -> Duration {
    backoff
        .max(retry_after.unwrap_or_default())
        .min(coder_k8s_coder_client::error::MAX_RETRY_AFTER)
}

/// `now + delay`, or the latest instant the platform can represent near it: adding to an `Instant` must not panic.
fn deadline_after(now: Instant, delay: Duration) -> Instant {
    now.checked_add(delay)
        .or_else(|| now.checked_add(coder_k8s_coder_client::error::MAX_RETRY_AFTER))
        .unwrap_or(now)
}

/// Backoff state of one object after Coder's 429.
#[derive(Default)]
struct RateLimit {
    backoff: coder_k8s_coder_client::backoff::Backoff,
    until: Option<Instant>,
}

/// Shared by every reconcile.
pub struct Context {
    pub client: kube::Client,
    pub settings: ControllerSettings,
    pub metrics: Arc<ReconcileMetrics>,
    pub recorder: Recorder,
    pub caches: Caches,
    /// The operator's own applies, so their watch echo does not trigger a reconcile.
    pub echoes: Arc<Echoes>,
    /// One Coder client per control plane.
    pub clients: Arc<ClientCache>,
    /// The last entitlements read per control plane, shared by the control plane and its provisioners.
    pub entitlements: EntitlementMemo,
    /// The last status each object was given, so a cache that has not caught up does not cause a second write.
    pub statuses: StatusMemo,
    /// Per-object facts a kind keeps between reconciles (for example the token verified at a Secret version),
    /// keyed by object UID and the fact's name.
    facts: Mutex<HashMap<(String, &'static str), String>>,
    /// Per-object backoff after Coder's 429 (in memory, like v0.1.5), keyed by object UID.
    rate_limits: Mutex<HashMap<String, RateLimit>>,
}

impl Context {
    /// Starts the watch caches (on the current tokio runtime) and builds the context.
    pub fn new(client: kube::Client, settings: ControllerSettings, metrics: Arc<ReconcileMetrics>) -> Self {
        let reporter = Reporter {
            controller: "coder-k8s".to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let clients = Arc::new(ClientCache::new(ClientSettings {
            timeout: settings.coder_request_timeout,
            service_address_override: settings.service_address_override,
        }));
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            caches: Caches::start(
                &client,
                settings.watch_namespace.as_deref(),
                &settings.operator_namespace,
            ),
            client,
            settings,
            metrics,
            echoes: Arc::default(),
            clients,
            entitlements: EntitlementMemo::default(),
            statuses: StatusMemo::default(),
            facts: Mutex::default(),
            rate_limits: Mutex::default(),
        }
    }

    /// Forgets everything kept about object `uid` (it is gone).
    pub fn forget(&self, uid: &str) {
        self.statuses.forget(uid);
        self.clients.forget(uid);
        self.entitlements.forget(uid);
        self.lock_facts().retain(|(owner, _), _| owner != uid);
        self.lock_rate_limits().remove(uid);
    }

    /// How many objects have per-object bookkeeping (for tests of the clean-up).
    pub fn tracked_objects(&self) -> usize {
        self.statuses.len() + self.lock_facts().len() + self.lock_rate_limits().len() + self.clients.len()
    }

    fn lock_facts(&self) -> std::sync::MutexGuard<'_, HashMap<(String, &'static str), String>> {
        self.facts.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_rate_limits(&self) -> std::sync::MutexGuard<'_, HashMap<String, RateLimit>> {
        self.rate_limits.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The fact `name` kept for object `uid`, if any.
    pub fn fact(&self, uid: &str, name: &'static str) -> Option<String> {
        self.lock_facts().get(&(uid.to_owned(), name)).cloned()
    }

    /// Keeps (or with `None` drops) the fact `name` of object `uid`.
    pub fn set_fact(&self, uid: &str, name: &'static str, fact: Option<String>) {
        let mut facts = self.lock_facts();
        let key = (uid.to_owned(), name);
        match fact {
            Some(fact) => facts.insert(key, fact),
            None => facts.remove(&key),
        };
    }

    /// The requeue after a 429 for object `uid`: 2 s doubling to 2 min with ±20 % jitter, and never before Coder's
    /// `Retry-After`.
    pub fn rate_limited(&self, uid: &str, retry_after: Option<Duration>) -> Duration {
        let mut limits = self.lock_rate_limits();
        let limit = limits.entry(uid.to_owned()).or_default();
        let backoff = limit
            .backoff
            .next_delay(&mut coder_k8s_coder_client::backoff::OsRandom);
        let delay = rate_limit_delay(backoff, retry_after);
        limit.until = Some(deadline_after(Instant::now(), delay));
        delay
    }

    /// How long object `uid` must still wait after a 429, if at all.
    pub fn rate_limit_remaining(&self, uid: &str) -> Option<Duration> {
        let until = self.lock_rate_limits().get(uid)?.until?;
        until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    }

    /// Forgets the backoff of object `uid` after a success.
    pub fn rate_limit_passed(&self, uid: &str) {
        self.lock_rate_limits().remove(uid);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_waits_for_retry_after_but_never_past_the_cap() {
        let second = Duration::from_secs(1);
        assert_eq!(rate_limit_delay(2 * second, None), 2 * second);
        assert_eq!(rate_limit_delay(2 * second, Some(60 * second)), 60 * second);
        assert_eq!(rate_limit_delay(90 * second, Some(60 * second)), 90 * second);
        assert_eq!(
            rate_limit_delay(2 * second, Some(Duration::MAX)),
            coder_k8s_coder_client::error::MAX_RETRY_AFTER
        );
    }

    #[test]
    fn a_deadline_never_overflows() {
        let now = Instant::now();
        assert_eq!(
            deadline_after(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        assert!(deadline_after(now, Duration::MAX) >= now);
    }
}
