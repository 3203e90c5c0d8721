//! Test support: a real control plane with the aggregated API server of this crate registered behind it (served
//! from in-memory storages, or from Coder for one namespace or for each namespace a test adds, on a runtime of its
//! own, reached through an ExternalName Service), and kubectl helpers.
// Many test binaries use this module, each a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use rustls_pki_types::pem::PemObject as _;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_aggregated_apiserver::coder::provider::NO_SECRETS;
use coder_k8s_aggregated_apiserver::coder::{Backend, Provider, StaticBackend, StaticProvider};
use coder_k8s_aggregated_apiserver::generic::ApiError;
use coder_k8s_aggregated_apiserver::generic::memory::MemoryStorage;
use coder_k8s_aggregated_apiserver::generic::server::ServerSettings;
use coder_k8s_aggregated_apiserver::generic::{Column, Registry, ResourceDef, Verb};
use coder_k8s_aggregated_apiserver::run::{Options, prepare};
use coder_k8s_aggregated_apiserver::serving::ServingSettings;
use coder_k8s_control_plane_access::ClientSettings;
use coder_k8s_testenv::ControlPlane;
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;
use url::Url;

/// The namespace the server runs in (its Service and serving-CA Secret live there).
pub const SERVER_NAMESPACE: &str = "coder-system";
pub const APISERVICE: &str = coder_k8s_testenv::apiservice::APISERVICE;

/// A control plane with the server registered and available.
pub struct Served {
    pub cp: &'static ControlPlane,
    /// `https://coder-k8s-apiserver.coder-system.svc:<port>`: the server itself, for direct requests with
    /// [`direct_client`] (which resolves that name to the local listener, so the serving certificate verifies).
    pub url: String,
    pub addr: SocketAddr,
    /// The serving CA the server started with.
    pub ca_pem: Vec<u8>,
}

impl Served {
    /// One per test process: a control plane with kube-controller-manager (for namespace deletion) and the server.
    pub async fn shared() -> &'static Served {
        static SERVED: OnceCell<Served> = OnceCell::const_new();
        SERVED.get_or_init(|| async { Served::start().await }).await
    }

    async fn start() -> Served {
        let cp: &'static ControlPlane = Box::leak(Box::new(
            ControlPlane::builder()
                .controller_manager(true)
                .start()
                .await
                .expect("start a control plane with kube-controller-manager"),
        ));
        let client = cp.client().expect("client");
        create_namespace(&client, SERVER_NAMESPACE).await;
        let workspaces = Arc::new(MemoryStorage::new("aggregation.coder.com", "coderworkspaces"));
        let (addr, ca_pem) = spawn_server(cp, test_registry(workspaces));
        register(&client, addr.port()).await;
        let served = Served {
            cp,
            url: format!(
                "https://coder-k8s-apiserver.{SERVER_NAMESPACE}.svc:{}",
                addr.port()
            ),
            addr,
            ca_pem,
        };
        coder_k8s_testenv::apiservice::wait_until_served(cp)
            .await
            .unwrap();
        served
    }
}

/// The Coder deployment of each served namespace, filled by the tests: the provider of the test binaries that share
/// one control plane and serve each test's namespace from a Coder of the test's own.
pub struct ByNamespace {
    backends: Mutex<BTreeMap<String, Backend>>,
    /// Reads Secrets as the control plane's admin, with a client built per read on the server's runtime (a client
    /// works only while the runtime it was built on runs, and each test has a runtime of its own); `None` refuses
    /// like a provider without a Kubernetes client.
    secrets: Option<kube::Config>,
}

#[async_trait]
impl Provider for ByNamespace {
    async fn resolve(&self, namespace: Option<&str>) -> Result<Vec<Backend>, ApiError> {
        let backends = self.backends.lock().expect("backends");
        Ok(match namespace {
            Some(ns) => backends.get(ns).cloned().into_iter().collect(),
            None => backends.values().cloned().collect(),
        })
    }

    async fn read_secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, ApiError> {
        let Some(config) = &self.secrets else {
            return Err(ApiError::internal(NO_SECRETS));
        };
        let client = kube::Client::try_from(config.clone())
            .map_err(|e| ApiError::internal(format!("build a kube client: {e}")))?;
        Api::<Secret>::namespaced(client, namespace)
            .get_opt(name)
            .await
            .map_err(|e| ApiError::internal(format!("read Secret {namespace}/{name}: {e}")))
    }
}

/// One control plane per test process with a Coder-backed registry over [`ByNamespace`] registered behind it: the
/// test binaries that serve a namespace per test built this alike but for their registry; each keeps its own
/// `OnceCell` and starts this in it.
pub struct ServedByNamespace {
    pub cp: &'static ControlPlane,
    pub backends: Arc<ByNamespace>,
}

impl ServedByNamespace {
    /// Starts the control plane, creates [`SERVER_NAMESPACE`] and serves the registry `build` makes on the server's
    /// runtime from a kube client of that runtime and the provider; returns once the aggregated API answers. The
    /// provider refuses to read Secrets.
    pub async fn start(
        build: impl FnOnce(kube::Client, Arc<dyn Provider>) -> Registry + Send + 'static,
    ) -> ServedByNamespace {
        Self::start_with(false, build).await
    }

    /// [`ServedByNamespace::start`] with a provider that reads Secrets as the control plane's admin.
    pub async fn start_reading_secrets(
        build: impl FnOnce(kube::Client, Arc<dyn Provider>) -> Registry + Send + 'static,
    ) -> ServedByNamespace {
        Self::start_with(true, build).await
    }

    async fn start_with(
        reads_secrets: bool,
        build: impl FnOnce(kube::Client, Arc<dyn Provider>) -> Registry + Send + 'static,
    ) -> ServedByNamespace {
        let cp = leaked_control_plane().await;
        let client = cp.client().expect("client");
        create_namespace(&client, SERVER_NAMESPACE).await;
        let backends = Arc::new(ByNamespace {
            backends: Mutex::default(),
            secrets: reads_secrets.then(|| cp.config().expect("kube config")),
        });
        let provider: Arc<dyn Provider> = backends.clone();
        let (addr, _) = spawn_server_with(cp, move |kube| build(kube, provider));
        register(&client, addr.port()).await;
        coder_k8s_testenv::apiservice::wait_until_served(cp)
            .await
            .unwrap();
        ServedByNamespace { cp, backends }
    }

    /// A new namespace of the control plane (named from `prefix`) served by the Coder at `url` with `token`.
    pub async fn namespace(&self, prefix: &str, url: &Url, token: &str) -> String {
        let namespace = self
            .cp
            .namespace(prefix)
            .await
            .expect("a namespace")
            .name()
            .to_owned();
        let settings = ClientSettings {
            timeout: Duration::from_secs(20),
            service_address_override: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        };
        let backend = Backend {
            namespace: namespace.clone(),
            client: settings.build(url, token).expect("a Coder client"),
        };
        self.backends
            .backends
            .lock()
            .expect("backends")
            .insert(namespace.clone(), backend);
        namespace
    }
}

/// A control plane without kube-controller-manager, leaked to `'static`: the server on it outlives the runtime of
/// the test that starts it.
async fn leaked_control_plane() -> &'static ControlPlane {
    Box::leak(Box::new(
        ControlPlane::builder().start().await.expect("a control plane"),
    ))
}

/// The provider of tests served by one Coder: `namespace` served by the Coder at `url` with `token`, each call
/// timing out after `timeout`.
pub fn static_provider(url: Url, token: &str, namespace: &str, timeout: Duration) -> Arc<StaticProvider> {
    let backend = StaticBackend {
        url,
        token: token.to_owned(),
        namespace: namespace.to_owned(),
    };
    let settings = ClientSettings {
        timeout,
        service_address_override: None,
    };
    Arc::new(StaticProvider::new(&backend, &settings).expect("a static provider"))
}

/// A control plane of one test's own (a test needs one when its registry differs from the other tests' of its
/// binary, as the APIService is cluster-wide) with [`SERVER_NAMESPACE`] and `namespace` created and the registry
/// `make_registry` makes registered behind it; returns once `kubectl get <plural> -n <namespace>` answers.
pub async fn serve_alone(
    namespace: &str,
    plural: &str,
    make_registry: impl FnOnce(kube::Client) -> Registry + Send + 'static,
) -> &'static ControlPlane {
    let cp = leaked_control_plane().await;
    let client = cp.client().expect("client");
    for name in [SERVER_NAMESPACE, namespace] {
        create_namespace(&client, name).await;
    }
    let (addr, _) = spawn_server_with(cp, make_registry);
    register(&client, addr.port()).await;
    wait_until(
        &format!("{plural} is served through kube-apiserver"),
        Duration::from_secs(60),
        || async {
            kubectl(cp, &["get", plural, "-n", namespace], None)
                .status
                .success()
        },
    )
    .await;
    cp
}

/// Starts the server on a thread and runtime of its own (each test has its own runtime; the server outlives them).
pub fn spawn_server(cp: &'static ControlPlane, registry: Registry) -> (SocketAddr, Vec<u8>) {
    spawn_server_with(cp, move |_| registry)
}

/// [`spawn_server`] with a registry made on the server's runtime from a client of its own (a kube client works only
/// while the runtime it was made on runs).
pub fn spawn_server_with(
    cp: &'static ControlPlane,
    make_registry: impl FnOnce(kube::Client) -> Registry + Send + 'static,
) -> (SocketAddr, Vec<u8>) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .expect("bind");
            let options = Options {
                serving: Some(ServingSettings::new(SERVER_NAMESPACE)),
                server: ServerSettings {
                    bookmark_interval: Duration::from_secs(1),
                    ..ServerSettings::default()
                },
            };
            let registry = make_registry(cp.client().expect("client"));
            let prepared = prepare(cp.client().expect("client"), registry, listener, options)
                .await
                .expect("start-up checks");
            tx.send((prepared.local_addr().expect("bound"), prepared.ca_pem().to_vec()))
                .expect("send");
            prepared.run(std::future::pending()).await.expect("serve");
        });
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the server started")
}

/// Registers the server on localhost:`port` with kube-apiserver (the caBundle is left to the server).
pub async fn register(client: &kube::Client, port: u16) {
    coder_k8s_testenv::apiservice::register(client, SERVER_NAMESPACE, port)
        .await
        .expect("register the aggregated API server");
}

pub fn apiservices(client: &kube::Client) -> Api<DynamicObject> {
    coder_k8s_testenv::apiservice::apiservices(client)
}

pub async fn create_namespace(client: &kube::Client, name: &str) {
    let namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
    let api = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    match api.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("create namespace {name}: {error}"),
    }
}

/// `coderworkspaces` and `codertemplates` on in-memory storages, with a schema and columns like the real ones.
pub fn test_registry(workspaces: Arc<MemoryStorage>) -> Registry {
    let schema = |spec: Value| {
        json!({
            "type": "object",
            "description": "A test object.",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": spec,
                "status": {"type": "object"},
            },
        })
    };
    let workspace_spec = json!({
        "type": "object",
        "description": "What the workspace should be.",
        "required": ["running"],
        "properties": {
            "organization": {"type": "string", "description": "The Coder organization."},
            "templateName": {"type": "string", "description": "The template the workspace is built from."},
            "running": {"type": "boolean", "description": "Whether the workspace should run."},
        },
    });
    let template_spec = json!({"type": "object", "properties": {"organization": {"type": "string"}}});
    let verbs: &'static [Verb] = &[
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
    ];
    Registry {
        group: "aggregation.coder.com",
        version: "v1alpha1",
        resources: vec![
            ResourceDef {
                plural: "coderworkspaces",
                singular: "coderworkspace",
                kind: "CoderWorkspace",
                list_kind: "CoderWorkspaceList",
                short_names: &[],
                categories: &[],
                namespaced: true,
                verbs,
                schema: schema(workspace_spec),
                columns: vec![
                    Column {
                        name: "Running",
                        type_: "boolean",
                        format: "",
                        description: "Whether the workspace should run.",
                        priority: 0,
                        cell: |o| o["spec"]["running"].clone(),
                    },
                    Column {
                        name: "Template",
                        type_: "string",
                        format: "",
                        description: "The template.",
                        priority: 1,
                        cell: |o| o["spec"]["templateName"].clone(),
                    },
                ],
                subresources: vec![],
                storage: workspaces,
                watch_feed: None,
            },
            ResourceDef {
                plural: "codertemplates",
                singular: "codertemplate",
                kind: "CoderTemplate",
                list_kind: "CoderTemplateList",
                short_names: &[],
                categories: &[],
                namespaced: true,
                verbs,
                schema: schema(template_spec),
                columns: vec![],
                subresources: vec![],
                storage: Arc::new(MemoryStorage::new("aggregation.coder.com", "codertemplates")),
                watch_feed: None,
            },
        ],
    }
}

/// Gives `user` the `verbs` on coderworkspaces in `namespace`.
pub async fn grant(cp: &ControlPlane, namespace: &str, user: &str, verbs: &[&str]) {
    let client = cp.client().expect("client");
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": format!("{user}-workspaces"), "namespace": namespace},
        "rules": [{"apiGroups": ["aggregation.coder.com"], "resources": ["coderworkspaces"], "verbs": verbs}],
    }))
    .expect("role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("{user}-workspaces"), "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{user}-workspaces")},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))
    .expect("binding");
    Api::<Role>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    Api::<RoleBinding>::namespaced(client, namespace)
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
    if let Some(verb) = verbs.first() {
        let attributes = ResourceAttributes {
            verb: Some((*verb).to_owned()),
            group: Some("aggregation.coder.com".to_owned()),
            resource: Some("coderworkspaces".to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ResourceAttributes::default()
        };
        cp.wait_until_allowed(user, attributes)
            .await
            .expect("the grant to apply");
    }
}

/// An HTTPS client for direct requests to the server, trusting its serving CA and sending no credential.
pub fn direct_client(served: &Served) -> reqwest::Client {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&served.ca_pem) {
        roots.add(cert.expect("CA PEM")).expect("CA");
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("protocols")
            .with_root_certificates(roots)
            .with_no_client_auth();
    reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .resolve(
            &format!("coder-k8s-apiserver.{SERVER_NAMESPACE}.svc"),
            served.addr,
        )
        .build()
        .expect("client")
}

pub fn kubectl(cp: &ControlPlane, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = cp.kubectl();
    command.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    run(command, stdin)
}

fn run(mut command: Command, stdin: Option<&str>) -> Output {
    use std::io::Write;
    command.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = command.spawn().expect("run kubectl");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("kubectl output")
}

pub fn kubectl_json(cp: &ControlPlane, args: &[&str]) -> Value {
    let out = kubectl(cp, args, None);
    assert_success(&out, &args.join(" "));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{}: not JSON: {e}\n{}", args.join(" "), stdout(&out)))
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn assert_success(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        stdout(out),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Polls `check` every 250 ms until it holds or `timeout` passes (then panics naming `what`).
pub async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("timed out after {timeout:?} waiting until {what}");
}
