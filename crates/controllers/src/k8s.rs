//! The Kubernetes side every reconcile shares: the client, the Event recorder, the process-wide watch caches (one
//! watch per resource type the controllers own or read, objects stripped to what they read) and the echoes of the
//! operator's own applies.

use std::sync::{Arc, OnceLock};

use coder_k8s_api::ai_gateway_key::CoderAIGatewayKey;
use coder_k8s_api::ai_provider::CoderAIProvider;
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::mcp_server::CoderMCPServer;
use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_api::template_test::CoderTemplateTest;
use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Resource;
use kube::core::PartialObjectMeta;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;

use crate::cache::{Echoes, Fanout, Informer, Object, ValueReader, strip_meta};
use crate::labels::{CLEANUP_RECORD_LABEL, MANAGED_BY_SELECTOR};
use crate::optional_kinds::{HttpRoute, ServiceMonitor};
use crate::slim::Slim;

/// The client, the recorder, the watch caches and the echoes of the operator's own applies.
pub struct K8s {
    pub client: kube::Client,
    pub recorder: Recorder,
    pub caches: Caches,
    /// The operator's own applies, so their watch echo does not trigger a reconcile.
    pub echoes: Arc<Echoes>,
}

impl K8s {
    /// Starts the watch caches (on the current tokio runtime) of `namespace` (`None`: every namespace), the
    /// cleanup records in `operator_namespace`.
    pub fn start(client: kube::Client, namespace: Option<&str>, operator_namespace: &str) -> Self {
        let reporter = Reporter {
            controller: "coder-k8s".to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            caches: Caches::start(&client, namespace, operator_namespace),
            client,
            echoes: Arc::default(),
        }
    }
}

impl K8s {
    /// The Secret `namespace/name` (its value fetched only when it changed since the last read); `None` when it
    /// does not exist.
    pub async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Arc<Secret>>, kube::Error> {
        self.caches.secrets.get(&self.client, namespace, name).await
    }

    /// The ConfigMap `namespace/name`, read like [`K8s::secret`].
    pub async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<ConfigMap>>, kube::Error> {
        self.caches.config_maps.get(&self.client, namespace, name).await
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
    /// The objects the operator creates, as the little the controllers read of them (see [`Slim`]).
    pub deployments: Arc<Informer<Slim<Deployment>>>,
    pub services: Arc<Informer<Slim<Service>>>,
    pub service_accounts: Arc<Informer<Slim<ServiceAccount>>>,
    pub ingresses: Arc<Informer<Slim<Ingress>>>,
    pub pod_disruption_budgets: Arc<Informer<Slim<PodDisruptionBudget>>>,
    pub roles: Arc<Informer<Slim<Role>>>,
    pub role_bindings: Arc<Informer<Slim<RoleBinding>>>,
    /// HTTPRoutes (the Gateway API is optional).
    pub http_routes: OptionalWatch<HttpRoute>,
    /// ServiceMonitors (the Prometheus Operator is optional).
    pub service_monitors: OptionalWatch<ServiceMonitor>,
    client: kube::Client,
    namespace: Option<String>,
    discovered: tokio::sync::OnceCell<()>,
    /// Every Secret's metadata, values fetched only when they change.
    pub secrets: ValueReader<Secret>,
    /// Every ConfigMap's metadata, values fetched only when they change.
    pub config_maps: ValueReader<ConfigMap>,
}

fn strip_object<K: Resource>(object: &mut K) {
    strip_meta(object.meta_mut());
}

/// The watch of a kind's own objects, decoded one by one: one the types cannot read must not stop the others.
fn own<K: Object + Default>(client: &kube::Client, namespace: Option<&str>) -> Arc<Informer<K>> {
    Informer::start_decoding_each(client, namespace, watcher::Config::default(), strip_object)
}

/// The metadata watch of objects the operator creates (selected by its label) in `namespace`, cached slim.
fn owned<K>(client: &kube::Client, namespace: Option<&str>) -> Arc<Informer<Slim<K>>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    PartialObjectMeta<K>: Object + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    owned_with(client, namespace, Fanout::default())
}

fn owned_with<K>(
    client: &kube::Client,
    namespace: Option<&str>,
    changes: Fanout<Slim<K>>,
) -> Arc<Informer<Slim<K>>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    PartialObjectMeta<K>: Object + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    let managed = watcher::Config::default().labels(MANAGED_BY_SELECTOR);
    let api = scoped_api::<PartialObjectMeta<K>>(client, namespace);
    Informer::start_slim(api, managed, Slim::of_meta, changes)
}

/// Every object's metadata, for the values read by [`ValueReader`].
fn values<K>(client: &kube::Client, namespace: Option<&str>) -> ValueReader<K>
where
    K: Object + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    PartialObjectMeta<K>: Object + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    let all = watcher::Config::default();
    ValueReader::new(Informer::start(scoped_api(client, namespace), all, strip_object))
}

impl Caches {
    fn start(client: &kube::Client, namespace: Option<&str>, operator_namespace: &str) -> Self {
        let records = watcher::Config::default().labels(CLEANUP_RECORD_LABEL);
        let managed = watcher::Config::default().labels(MANAGED_BY_SELECTOR);
        Self {
            control_planes: own(client, namespace),
            provisioners: own(client, namespace),
            workspace_proxies: own(client, namespace),
            template_tests: own(client, namespace),
            ai_providers: own(client, namespace),
            ai_gateway_keys: own(client, namespace),
            mcp_servers: own(client, namespace),
            cleanup_records: Informer::start(
                kube::Api::namespaced(client.clone(), operator_namespace),
                records,
                strip_object,
            ),
            // Whole Deployments are listed (a metadata watch has no status), and kept slim with their ready replicas.
            deployments: Informer::start_slim(
                scoped_api(client, namespace),
                managed,
                Slim::of_deployment,
                Fanout::default(),
            ),
            services: owned(client, namespace),
            service_accounts: owned(client, namespace),
            ingresses: owned(client, namespace),
            pod_disruption_budgets: owned(client, namespace),
            // Workspace RBAC lives in other namespaces too: these two are watched everywhere.
            roles: owned(client, None),
            role_bindings: owned(client, None),
            http_routes: OptionalWatch::default(),
            service_monitors: OptionalWatch::default(),
            client: client.clone(),
            namespace: namespace.map(str::to_owned),
            discovered: tokio::sync::OnceCell::new(),
            secrets: values(client, namespace),
            config_maps: values(client, namespace),
        }
    }

    /// Waits until every cache holds its first list, so no reconcile mistakes "not cached yet" for "absent".
    pub async fn ready(&self) {
        self.discovered
            .get_or_init(|| async {
                futures::join!(
                    self.http_routes.discover(&self.client, self.namespace.as_deref()),
                    self.service_monitors
                        .discover(&self.client, self.namespace.as_deref()),
                );
            })
            .await;
        futures::join!(self.http_routes.ready(), self.service_monitors.ready());
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
            self.pod_disruption_budgets.ready(),
            self.roles.ready(),
            self.role_bindings.ready(),
            self.secrets.metadata().ready(),
            self.config_maps.metadata().ready(),
        );
    }

    /// Looks for the optional API of `watch` again (a control plane wants such an object while it was not found).
    pub async fn discover<K>(&self, watch: &OptionalWatch<K>)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
        PartialObjectMeta<K>:
            Object + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        watch.discover(&self.client, self.namespace.as_deref()).await;
    }
}

/// The watch of an owned kind whose API is optional (see `optional_kinds`): it starts once discovery finds the API,
/// and its changes are published on `changes` from then on, so controllers can subscribe before it exists.
pub struct OptionalWatch<K: Resource<DynamicType = ()> + Clone + 'static> {
    informer: OnceLock<Arc<Informer<Slim<K>>>>,
    pub changes: Fanout<Slim<K>>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Default for OptionalWatch<K> {
    fn default() -> Self {
        Self {
            informer: OnceLock::new(),
            changes: Fanout::default(),
        }
    }
}

impl<K> OptionalWatch<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    PartialObjectMeta<K>: Object + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    /// Whether the API was found and its watch started (its cache may still wait for the first list).
    pub fn found(&self) -> bool {
        self.informer.get().is_some()
    }

    /// The cache once it holds its first list; `None` while the API was not found.
    pub fn cache(&self) -> Option<&Arc<Informer<Slim<K>>>> {
        self.informer.get().filter(|informer| informer.is_ready())
    }

    /// Looks for the API (one discovery request) and starts the watch when it is served. Called once at start, and
    /// again by a control plane that wants such an object while the API was not found.
    async fn discover(&self, client: &kube::Client, namespace: Option<&str>) {
        if self.informer.get().is_some() {
            return;
        }
        let plural = K::plural(&());
        let served = client
            .list_api_group_resources(&K::api_version(&()))
            .await
            .is_ok_and(|list| list.resources.iter().any(|r| r.name == plural));
        if served {
            let _ = self
                .informer
                .set(owned_with(client, namespace, self.changes.clone()));
        }
    }

    /// Waits for the first list of a started watch.
    async fn ready(&self) {
        if let Some(informer) = self.informer.get() {
            informer.ready().await;
        }
    }
}

/// An API for `K` in `namespace`, or in every namespace. Metadata-only watches use it too
/// (`PartialObjectMeta<K>` is served by the same URLs).
fn scoped_api<K>(client: &kube::Client, namespace: Option<&str>) -> kube::Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(namespace) => kube::Api::namespaced(client.clone(), namespace),
        None => kube::Api::all(client.clone()),
    }
}
