//! The CoderControlPlane controller on the real kube-apiserver, a real PostgreSQL with Coder's tables and the Coder
//! API test server. The controller runs in process, scoped to the test's namespace; Coder Service hosts resolve to
//! the test server (the out-of-cluster address override), and each control plane's Service port is the test
//! server's port. Without a kubelet, tests set the Deployment's ready replicas themselves.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use coder_k8s::kube_requests::KubeRequests;
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Config, Entitlement, TestServer};
use coder_k8s_controllers::context::Context;
use coder_k8s_controllers::metrics::ReconcileMetrics;
use coder_k8s_controllers::settings::ControllerSettings;
use coder_k8s_testenv::{ControlPlane, postgres};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::Role;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;

use crate::support::{control_plane_with_crds, wait_for};

const LICENSE_1: &str = "eyJhbGciOiJFZERTQSJ9.license-one.sig";
const LICENSE_2: &str = "eyJhbGciOiJFZERTQSJ9.license-two.sig";

pub(crate) struct Harness {
    pub(crate) cp: &'static ControlPlane,
    pub(crate) ns: String,
    pub(crate) db_url: String,
    pub(crate) server: TestServer,
    pub(crate) requests: KubeRequests,
    pub(crate) metrics: Arc<ReconcileMetrics>,
    pub(crate) ctx: Arc<Context>,
    pub(crate) admin: kube::Client,
    pub(crate) stop: watch::Sender<bool>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

pub(crate) fn settings(ns: &str) -> ControllerSettings {
    ControllerSettings {
        service_address_override: Some(std::net::Ipv4Addr::LOCALHOST.into()),
        watch_namespace: Some(ns.to_owned()),
        coder_request_timeout: Duration::from_secs(5),
        retry_interval: Duration::from_secs(1),
        entitlements_interval: Duration::from_secs(1),
        deletion_wait: Duration::from_secs(3),
        deletion_last_attempt: Duration::from_secs(2),
        referrer_hold: Duration::from_secs(2),
        cleanup_retry_window: Duration::from_secs(10),
        max_concurrent_reconciles: 4,
        restrict_workspace_rbac: false,
        // Cleanup records go to the test's own namespace unless a test names another.
        operator_namespace: ns.to_owned(),
        unmatched_record_event_interval: Duration::from_secs(3),
        job_queue_interval: Duration::from_secs(1),
    }
}

pub(crate) async fn harness(tag: &str) -> Harness {
    harness_with(tag, |_| {}).await
}

pub(crate) async fn harness_with(tag: &str, adjust: impl FnOnce(&mut ControllerSettings)) -> Harness {
    harness_on_with(control_plane_with_crds().await, tag, adjust).await
}

/// [`harness`] on another control plane than the shared one (which must have the CRDs installed).
pub(crate) async fn harness_on(cp: &'static ControlPlane, tag: &str) -> Harness {
    harness_on_with(cp, tag, |_| {}).await
}

async fn harness_on_with(
    cp: &'static ControlPlane,
    tag: &str,
    adjust: impl FnOnce(&mut ControllerSettings),
) -> Harness {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    coder_k8s::telemetry::init(coder_k8s::cli::LogFormat::Text);
    let ns = cp.namespace(tag).await.unwrap().name().to_owned();
    let db_name = format!(
        "ccp_{}_{}_{}",
        tag.replace('-', "_"),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let db_url = postgres::shared()
        .await
        .unwrap()
        .create_coder_database(&db_name)
        .await
        .unwrap();
    let mut config = Config::new(&db_url);
    config.accepted_licenses = vec![LICENSE_1.to_owned(), LICENSE_2.to_owned()];
    config
        .entitlements
        .insert("external_provisioner_daemons".to_owned(), Entitlement::Entitled);
    let server = TestServer::start(config).await.unwrap();
    Harness::start(cp, ns, db_url, server, adjust)
}

impl Harness {
    /// The operator's controllers on `ns` (a fresh context with its own request counter and metrics), next to the
    /// Coder test `server` whose tables live at `db_url`.
    pub(crate) fn start(
        cp: &'static ControlPlane,
        ns: String,
        db_url: String,
        server: TestServer,
        adjust: impl FnOnce(&mut ControllerSettings),
    ) -> Self {
        let requests = KubeRequests::default();
        let client = requests.client(cp.config().unwrap()).unwrap();
        let metrics = ReconcileMetrics::register(&mut prometheus_client::registry::Registry::default());
        let mut settings = settings(&ns);
        adjust(&mut settings);
        let ctx = Arc::new(Context::new(client, settings, metrics.clone()));
        let stop = spawn_controllers(&ctx);
        Self {
            metrics,
            ctx,
            admin: cp.client().unwrap(),
            cp,
            ns,
            db_url,
            server,
            requests,
            stop,
        }
    }
}

/// Starts the controllers of every built kind on `ctx`; each stops when the returned sender sends `true` (or drops).
pub(crate) fn spawn_controllers(ctx: &Arc<Context>) -> watch::Sender<bool> {
    let (stop, stopped) = watch::channel(false);
    let stopped_signal = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    };
    for task in &coder_k8s_controllers::CONTROLLERS {
        tokio::spawn((task.run)(ctx.clone(), Box::pin(stopped_signal())));
    }
    stop
}

impl Harness {
    pub(crate) fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    /// A control plane whose Service port is the test server's port, so its internal URL reaches the test server.
    pub(crate) async fn create(&self, name: &str, spec: serde_json::Value) -> CoderControlPlane {
        let mut spec = spec;
        spec["service"] = json!({"port": self.server.url().port().unwrap()});
        let object = CoderControlPlane::new(name, serde_json::from_value(spec).unwrap());
        self.api::<CoderControlPlane>()
            .create(&PostParams::default(), &object)
            .await
            .unwrap()
    }

    pub(crate) async fn put_secret(&self, name: &str, data: &[(&str, &str)]) {
        put_secret(&self.api::<Secret>(), name, data).await;
    }

    /// Marks the Coder Deployment ready, as a kubelet would.
    pub(crate) async fn deployment_ready(&self, name: &str) {
        let api = self.api::<Deployment>();
        wait_for(
            || async { api.get_opt(name).await.unwrap().is_some() },
            "the Deployment",
        )
        .await;
        let patch = json!({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    pub(crate) async fn get(&self, name: &str) -> CoderControlPlane {
        self.api::<CoderControlPlane>().get(name).await.unwrap()
    }

    pub(crate) async fn condition(&self, name: &str, type_: &str) -> Option<(String, String, String)> {
        let cp = self.get(name).await;
        cp.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status, c.reason, c.message))
    }

    pub(crate) async fn wait_reason(&self, name: &str, type_: &str, reason: &str) -> String {
        let mut message = String::new();
        for _ in 0..300 {
            if let Some((_, r, m)) = self.condition(name, type_).await {
                if r == reason {
                    return m;
                }
                message = format!("{r}: {m}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("{name}: {type_} never became {reason}; last {message:?}");
    }

    pub(crate) async fn wait_operator_access(&self, name: &str, ready: bool) -> CoderControlPlane {
        for _ in 0..300 {
            let cp = self.get(name).await;
            if cp.status.as_ref().and_then(|s| s.operator_access_ready) == Some(ready) {
                return cp;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!(
            "{name}: operatorAccessReady never became {ready}: {:?}",
            self.get(name).await.status
        );
    }

    pub(crate) fn coder(&self, token: &str) -> CoderClient {
        CoderClient::new(self.server.url(), SessionToken::new(token)).unwrap()
    }

    pub(crate) async fn token_of(&self, secret: &str) -> String {
        let secret = self.api::<Secret>().get(secret).await.unwrap();
        String::from_utf8(secret.data.unwrap()["token"].0.clone()).unwrap()
    }
}

/// Creates or replaces the Secret `name` in `api`'s namespace with `data` (server-side apply, manager `test`).
pub(crate) async fn put_secret(api: &Api<Secret>, name: &str, data: &[(&str, &str)]) {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Secret::default()
    };
    let params = PatchParams::apply("test").force();
    api.patch(name, &params, &Patch::Apply(&secret)).await.unwrap();
}

/// A CoderMCPServer that uses control plane `cp`; `held` gives it a test finalizer, so a delete leaves it
/// "being deleted" until the test releases it.
pub(crate) async fn mcp_referrer(
    h: &Harness,
    name: &str,
    cp: &str,
    held: bool,
) -> Api<kube::core::DynamicObject> {
    let spec = json!({"controlPlaneRef": {"name": cp}, "organization": "coder", "url": "https://mcp.example.com/mcp"});
    referrer(h, ("CoderMCPServer", "codermcpservers"), name, spec, held).await
}

/// An object of `kind` (kind, plural) with `spec`, optionally held by a test finalizer.
async fn referrer(
    h: &Harness,
    (kind, plural): (&str, &str),
    name: &str,
    spec: serde_json::Value,
    held: bool,
) -> Api<kube::core::DynamicObject> {
    let mut object = json!({
        "apiVersion": "coder.com/v1alpha1", "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    });
    if held {
        object["metadata"]["finalizers"] = json!(["test.coder.com/hold"]);
    }
    let resource = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("coder.com", "v1alpha1", kind),
        plural,
    );
    let api: Api<kube::core::DynamicObject> = Api::namespaced_with(h.admin.clone(), &h.ns, &resource);
    api.create(&PostParams::default(), &serde_json::from_value(object).unwrap())
        .await
        .unwrap();
    api
}

async fn release_referrer(mcps: &Api<kube::core::DynamicObject>, name: &str) {
    let release = json!({"metadata": {"finalizers": null}});
    mcps.patch(name, &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
}

#[tokio::test]
async fn database_secret_conditions_and_operator_access() {
    let h = harness("ccp-db").await;
    h.create(
        "coder",
        json!({"database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}}),
    )
    .await;

    // Created before its Secret: SecretNotFound, the Deployment references the Secret, the bootstrap waits.
    let message = h
        .wait_reason("coder", "DatabaseSecretResolved", "SecretNotFound")
        .await;
    assert!(message.contains("coder-db-app"), "{message}");
    let deployment = h.api::<Deployment>().get("coder").await.unwrap();
    let env = deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    let pg = env.iter().find(|e| e.name == "CODER_PG_CONNECTION_URL").unwrap();
    assert!(pg.value.is_none());
    let reference = pg.value_from.as_ref().unwrap().secret_key_ref.as_ref().unwrap();
    assert_eq!(
        (reference.name.as_str(), reference.key.as_str()),
        ("coder-db-app", "uri")
    );
    assert_ne!(
        h.get("coder").await.status.unwrap().operator_access_ready,
        Some(true)
    );

    // Each bad value gets its reason; messages never show the URL.
    let secret_url = "postgres://coder:Sekr1tPassw0rd@db.example:5432/coder";
    h.put_secret("coder-db-app", &[("other", "x")]).await;
    h.wait_reason("coder", "DatabaseSecretResolved", "KeyNotFound")
        .await;
    h.put_secret("coder-db-app", &[("uri", "   ")]).await;
    h.wait_reason("coder", "DatabaseSecretResolved", "EmptyValue")
        .await;
    h.put_secret(
        "coder-db-app",
        &[("uri", &secret_url.replace("postgres://", "Postgres://"))],
    )
    .await;
    let message = h
        .wait_reason("coder", "DatabaseSecretResolved", "InvalidURL")
        .await;
    assert!(
        !message.contains("Sekr1t") && !message.contains("db.example"),
        "{message}"
    );

    // The real URL: Resolved, then the bootstrap mints the operator token into an owned Secret.
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    let message = h.wait_reason("coder", "DatabaseSecretResolved", "Resolved").await;
    assert!(!message.contains(&h.db_url));
    let cp = h.wait_operator_access("coder", true).await;
    let status = cp.status.clone().unwrap();
    let reference = status.operator_token_secret_ref.unwrap();
    assert_eq!(reference.name, "coder-operator-token");
    let secret = h.api::<Secret>().get("coder-operator-token").await.unwrap();
    let owner = &secret.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        (cp.metadata.uid.as_deref().unwrap(), Some(true))
    );
    let token = h.token_of("coder-operator-token").await;
    assert_eq!(h.coder(&token).me().await.unwrap().username, "coder-k8s-operator");
    assert_eq!(
        h.condition("coder", "OperatorTokenSecretOwned").await.unwrap().1,
        "TokenSecretOwned"
    );
    assert_eq!(
        status.url.unwrap(),
        format!(
            "http://coder.{}.svc.cluster.local:{}",
            h.ns,
            h.server.url().port().unwrap()
        )
    );

    // Deleting the Secret is noticed through the watch.
    h.api::<Secret>()
        .delete("coder-db-app", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_reason("coder", "DatabaseSecretResolved", "SecretNotFound")
        .await;
}

/// Waits until the control plane controller has not reconciled for 1.5 s (1.5 times the tests' retry and
/// entitlements intervals); fails when it goes on reconciling for 20 s.
async fn wait_until_quiet(h: &Harness) {
    for _ in 0..13 {
        let runs = h.metrics.runs("CoderControlPlane");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        if h.metrics.runs("CoderControlPlane") == runs {
            return;
        }
    }
    panic!("the control planes were reconciled again and again for 20 s with nothing changing");
}

#[tokio::test]
async fn a_control_plane_waiting_for_its_database_is_not_reconciled_until_an_input_changes() {
    let h = harness("ccp-quiet").await;
    h.create(
        "waits",
        json!({"database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}}),
    )
    .await;
    h.create("no-database", json!({})).await;
    h.wait_reason("waits", "DatabaseSecretResolved", "SecretNotFound")
        .await;
    wait_for(
        || async {
            h.get("no-database")
                .await
                .status
                .is_some_and(|s| s.phase.is_some())
        },
        "the control plane without a database to get a status",
    )
    .await;
    wait_until_quiet(&h).await;

    // Five times the retry and entitlements intervals: neither control plane can change without an input
    // changing, so nothing runs and nothing is sent.
    let (runs, writes, reads) = (
        h.metrics.runs("CoderControlPlane"),
        h.requests.writes(),
        h.requests.reads(),
    );
    let coder_requests = h.server.requests().len();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        h.metrics.runs("CoderControlPlane"),
        runs,
        "no reconcile while waiting"
    );
    assert_eq!(
        (h.requests.writes(), h.requests.reads()),
        (writes, reads),
        "no Kubernetes request"
    );
    let coder_calls: Vec<_> = h.server.requests()[coder_requests..]
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(coder_calls, Vec::<String>::new(), "no Coder call while waiting");

    // The Secret's arrival is the change: the database resolves, operator access is bootstrapped, and from then on
    // Coder's state (entitlements, the token) is polled at the entitlements interval.
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.wait_operator_access("waits", true).await;
    let runs = h.metrics.runs("CoderControlPlane");
    wait_for(
        || async { h.metrics.runs("CoderControlPlane") >= runs + 3 },
        "the control plane with operator access to be polled",
    )
    .await;
    assert_eq!(
        h.get("no-database").await.status.unwrap().operator_access_ready,
        Some(false)
    );
}

#[tokio::test]
async fn token_secret_owned_by_someone_else_is_left_alone() {
    let h = harness("ccp-owned").await;
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.put_secret("coder-operator-token", &[("token", "not-ours")])
        .await;
    h.create(
        "coder",
        json!({"database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}}),
    )
    .await;
    let message = h
        .wait_reason("coder", "OperatorTokenSecretOwned", "TokenSecretNotOwned")
        .await;
    assert!(message.contains("coder-operator-token"), "{message}");
    let status = h.get("coder").await.status.unwrap();
    assert_eq!(status.operator_access_ready, Some(false));
    assert!(status.operator_token_secret_ref.is_none());
    assert_eq!(
        h.token_of("coder-operator-token").await,
        "not-ours",
        "never changed"
    );
    let secret = h.api::<Secret>().get("coder-operator-token").await.unwrap();
    assert!(secret.metadata.owner_references.is_none(), "never adopted");

    // The fix from the guide: delete the leftover; the controller creates its own.
    h.api::<Secret>()
        .delete("coder-operator-token", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_operator_access("coder", true).await;
    h.wait_reason("coder", "OperatorTokenSecretOwned", "TokenSecretOwned")
        .await;
}

#[tokio::test]
async fn disabling_operator_access_revokes_the_token() {
    let h = harness("ccp-disable").await;
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.create(
        "coder",
        json!({"database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}}),
    )
    .await;
    h.wait_operator_access("coder", true).await;
    let token = h.token_of("coder-operator-token").await;
    assert!(h.coder(&token).me().await.is_ok());

    let patch = json!({"spec": {"operatorAccess": {"disabled": true}}});
    h.api::<CoderControlPlane>()
        .patch("coder", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    h.wait_operator_access("coder", false).await;
    let secrets = h.api::<Secret>();
    wait_for(
        || async { secrets.get_opt("coder-operator-token").await.unwrap().is_none() },
        "the token Secret to go",
    )
    .await;
    assert!(
        h.coder(&token).me().await.is_err(),
        "the token is revoked in Coder's database"
    );
    assert!(
        h.get("coder")
            .await
            .status
            .unwrap()
            .operator_token_secret_ref
            .is_none()
    );
    assert!(h.condition("coder", "OperatorTokenSecretOwned").await.is_none());
}

#[tokio::test]
async fn licence_entitlements_and_a_silent_steady_state() {
    let h = harness("ccp-lic").await;
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.put_secret("coder-license", &[("license", LICENSE_1)]).await;
    h.create(
        "coder",
        json!({
            "database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}},
            "licenseSecretRef": {"name": "coder-license"},
        }),
    )
    .await;
    h.wait_reason("coder", "LicenseApplied", "Pending").await;
    h.deployment_ready("coder").await;
    h.wait_reason("coder", "LicenseApplied", "Applied").await;
    let status = h.get("coder").await.status.unwrap();
    assert_eq!(status.phase, Some(coder_k8s_api::shared::WorkloadPhase::Ready));
    assert_eq!(status.ready_replicas, Some(1));
    assert_eq!(
        status.license_last_applied_hash.as_deref(),
        Some(coder_k8s_controllers::control_plane::coder::license_hash(LICENSE_1).as_str())
    );
    wait_for(
        || async {
            h.get("coder")
                .await
                .status
                .unwrap()
                .external_provisioner_daemons_entitlement
                == Some(coder_k8s_api::control_plane::Entitlement::Entitled)
        },
        "the entitlement",
    )
    .await;
    let token = h.token_of("coder-operator-token").await;
    assert_eq!(h.coder(&token).licenses().await.unwrap().len(), 1);
    // Transitions were published as events.k8s.io Events.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(h.admin.clone(), &h.ns);
    let reasons: Vec<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    for reason in ["Ready", "OperatorAccessReady", "Applied"] {
        assert!(
            reasons.iter().any(|r| r == reason),
            "no {reason} Event in {reasons:?}"
        );
    }

    // Steady state: a reconcile every second (the 1 s entitlements interval of the tests), each reading from the
    // watch caches: no Kubernetes reads or writes, and no Coder call but the entitlements and token checks of that
    // interval.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (writes, reads, coder_requests) =
        (h.requests.writes(), h.requests.reads(), h.server.requests().len());
    let reconciles = h.metrics.runs("CoderControlPlane");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        h.metrics.runs("CoderControlPlane") >= reconciles + 3,
        "the controller kept reconciling during the window"
    );
    assert_eq!(
        h.requests.writes(),
        writes,
        "no Kubernetes writes at steady state"
    );
    assert_eq!(h.requests.reads(), reads, "no Kubernetes reads at steady state");
    let coder_calls: Vec<_> = h.server.requests()[coder_requests..]
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        coder_calls.iter().any(|c| c == "GET /api/v2/entitlements"),
        "the entitlements were checked: {coder_calls:?}"
    );
    let checks = ["GET /api/v2/entitlements", "GET /api/v2/users/me"];
    let others: Vec<_> = coder_calls
        .iter()
        .filter(|c| !checks.contains(&c.as_str()))
        .collect();
    assert!(
        others.is_empty(),
        "no Coder call but the interval checks at steady state: {others:?}"
    );
    assert!(
        coder_calls.len() <= 2 * 8,
        "at most one entitlements and one token check per second: {coder_calls:?}"
    );

    // A new licence is uploaded once.
    h.put_secret("coder-license", &[("license", LICENSE_2)]).await;
    wait_for(
        || async {
            h.get("coder")
                .await
                .status
                .unwrap()
                .license_last_applied_hash
                .as_deref()
                == Some(coder_k8s_controllers::control_plane::coder::license_hash(LICENSE_2).as_str())
        },
        "the second licence",
    )
    .await;
    assert_eq!(h.coder(&token).licenses().await.unwrap().len(), 2);

    // An entitlement change reaches the status.
    h.server
        .set_entitlement("external_provisioner_daemons", Entitlement::GracePeriod);
    wait_for(
        || async {
            h.get("coder")
                .await
                .status
                .unwrap()
                .external_provisioner_daemons_entitlement
                == Some(coder_k8s_api::control_plane::Entitlement::GracePeriod)
        },
        "the entitlement change",
    )
    .await;
}

#[tokio::test]
async fn exposure_and_workspace_rbac_follow_the_spec() {
    let h = harness("ccp-expose").await;
    let extra = h.cp.namespace("ccp-ws").await.unwrap().name().to_owned();
    h.create(
        "coder",
        json!({
            "expose": {"ingress": {"host": "coder.example.com"}},
            "rbac": {"workspaceNamespaces": [extra]},
        }),
    )
    .await;
    let ingresses = h.api::<Ingress>();
    wait_for(
        || async { ingresses.get_opt("coder").await.unwrap().is_some() },
        "the Ingress",
    )
    .await;
    let own_roles: Api<Role> = Api::namespaced(h.admin.clone(), &h.ns);
    let extra_roles: Api<Role> = Api::namespaced(h.admin.clone(), &extra);
    let count = |api: &Api<Role>| {
        let api = api.clone();
        async move { api.list(&Default::default()).await.unwrap().items.len() }
    };
    wait_for(
        || async { count(&extra_roles).await == 1 },
        "the workspace Role in the extra namespace",
    )
    .await;

    let patch = json!({"spec": {"expose": null, "rbac": {"workspaceNamespaces": null}}});
    h.api::<CoderControlPlane>()
        .patch("coder", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for(
        || async { ingresses.get_opt("coder").await.unwrap().is_none() },
        "the Ingress to go",
    )
    .await;
    wait_for(
        || async { count(&extra_roles).await == 0 },
        "the extra Role to go",
    )
    .await;
    assert_eq!(count(&own_roles).await, 1, "the own namespace keeps its Role");
}

/// A Service created with one port and settled there (its fields recorded under the create, not an apply) follows a
/// later port change: the old port goes, instead of staying beside the new one (which kube-apiserver refused as a
/// duplicate port name).
#[tokio::test]
async fn a_changed_service_port_replaces_the_old_one() {
    let h = harness("ccp-port").await;
    let first = h.create("coder", json!({})).await.spec.service.port;
    let second = first.checked_add(1).unwrap_or(first - 1);
    let services = h.api::<Service>();
    let ports = |services: Api<Service>| async move {
        services
            .get_opt("coder")
            .await
            .unwrap()
            .and_then(|s| s.spec)
            .and_then(|s| s.ports)
            .unwrap_or_default()
            .iter()
            .map(|p| (p.name.clone().unwrap_or_default(), p.port))
            .collect::<Vec<_>>()
    };
    wait_for(
        || async { ports(services.clone()).await == [("http".to_owned(), first)] },
        "the Service on its first port",
    )
    .await;
    let patch = json!({"spec": {"service": {"port": second}}});
    h.api::<CoderControlPlane>()
        .patch("coder", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for(
        || async { ports(services.clone()).await == [("http".to_owned(), second)] },
        "the Service on the second port only",
    )
    .await;
}

#[tokio::test]
async fn deletion_removes_rbac_first_and_waits_for_referrers() {
    let h = harness("ccp-delete").await;
    let extra = h.cp.namespace("ccp-del-ws").await.unwrap().name().to_owned();
    h.create("coder", json!({"rbac": {"workspaceNamespaces": [extra]}}))
        .await;
    let extra_roles: Api<Role> = Api::namespaced(h.admin.clone(), &extra);
    wait_for(
        || async {
            !extra_roles
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty()
        },
        "the Role",
    )
    .await;

    let mcps = mcp_referrer(&h, "tools", "coder", true).await;
    mcps.delete("tools", &DeleteParams::default()).await.unwrap();

    let started = std::time::Instant::now();
    h.api::<CoderControlPlane>()
        .delete("coder", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        || async {
            extra_roles
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty()
        },
        "RBAC removal",
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "workspace RBAC goes first, at once"
    );
    assert!(
        h.api::<CoderControlPlane>()
            .get_opt("coder")
            .await
            .unwrap()
            .is_some(),
        "still waiting for the referrer"
    );
    let cps = h.api::<CoderControlPlane>();
    wait_for(
        || async { cps.get_opt("coder").await.unwrap().is_none() },
        "the control plane to go",
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "waited the deletion wait (3 s) plus the last attempt (2 s), took {:?}",
        started.elapsed()
    );
    release_referrer(&mcps, "tools").await;
}

/// A CoderTemplateTest being deleted still has a workspace to delete in Coder: the control plane waits for it as
/// for the AI kinds (it was released at once before).
#[tokio::test]
async fn deletion_waits_for_a_template_test_being_deleted() {
    let h = harness("ccp-del-ktt").await;
    h.create("coder", json!({})).await;
    let cps = h.api::<CoderControlPlane>();
    // A control plane deleted before the controller added its finalizer goes at once: wait for the finalizer.
    wait_for(
        || async {
            let cp = cps.get("coder").await.unwrap();
            cp.metadata
                .finalizers
                .unwrap_or_default()
                .iter()
                .any(|f| f == coder_k8s_api::control_plane::FINALIZER)
        },
        "the control plane's finalizer",
    )
    .await;
    let spec = json!({"controlPlaneRef": {"name": "coder"}, "template": "coder.docker", "version": {"active": true}});
    let tests = referrer(&h, ("CoderTemplateTest", "codertemplatetests"), "run", spec, true).await;
    tests.delete("run", &DeleteParams::default()).await.unwrap();

    let started = std::time::Instant::now();
    cps.delete("coder", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        cps.get_opt("coder").await.unwrap().is_some(),
        "still waiting for the template test after {:?}",
        started.elapsed()
    );
    wait_for(
        || async { cps.get_opt("coder").await.unwrap().is_none() },
        "the control plane to go",
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "waited the deletion wait (3 s) plus the last attempt (2 s), took {:?}",
        started.elapsed()
    );
    release_referrer(&tests, "run").await;
}

#[tokio::test]
async fn deletion_without_referrers_is_immediate_and_unrelated_referrers_hold_briefly() {
    // A hold long enough to tell "no wait" from "held", even on a busy machine.
    let h = harness_with("ccp-nowait", |s| s.referrer_hold = Duration::from_secs(8)).await;
    h.create("alone", json!({})).await;
    let cps = h.api::<CoderControlPlane>();
    wait_for(
        || async { h.api::<Deployment>().get_opt("alone").await.unwrap().is_some() },
        "the Deployment",
    )
    .await;
    let started = std::time::Instant::now();
    cps.delete("alone", &DeleteParams::default()).await.unwrap();
    wait_for(
        || async { cps.get_opt("alone").await.unwrap().is_none() },
        "the control plane to go",
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "no wait without referrers: {:?}",
        started.elapsed()
    );

    // A referrer that is not being deleted holds the control plane for the hold time (8 s here), then not longer.
    h.create("used", json!({})).await;
    let mcps = mcp_referrer(&h, "kept", "used", false).await;
    wait_for(
        || async { h.api::<Deployment>().get_opt("used").await.unwrap().is_some() },
        "the Deployment",
    )
    .await;
    // A live object's bookkeeping: a status write the watch never showed (its answer had no version) stays until
    // the object goes. Put one in for the control plane and one for its referrer, so the check below can fail.
    let used_uid = h.get("used").await.metadata.uid.unwrap();
    h.ctx.statuses.record(&used_uid, "null", "{}".to_owned(), None);
    let kept = mcps.get("kept").await.unwrap();
    let kept_uid = kept.metadata.uid.unwrap();
    h.ctx.statuses.record(&kept_uid, "null", "{}".to_owned(), None);
    assert!(
        h.ctx.tracked_objects() >= 2,
        "the controller keeps facts about a live control plane"
    );
    let started = std::time::Instant::now();
    cps.delete("used", &DeleteParams::default()).await.unwrap();
    wait_for(
        || async { cps.get_opt("used").await.unwrap().is_none() },
        "the control plane to go",
    )
    .await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(7) && took < Duration::from_secs(20),
        "held for {took:?}"
    );
    // Nothing is kept about control planes that are gone (nor about the referrer, once it goes too: the
    // CoderMCPServer controller keeps its status while it lives).
    mcps.delete("kept", &DeleteParams::default()).await.unwrap();
    wait_for(
        || async { mcps.get_opt("kept").await.unwrap().is_none() },
        "the referrer to go",
    )
    .await;
    wait_for(
        || async { h.ctx.tracked_objects() == 0 },
        "the per-object bookkeeping to be dropped",
    )
    .await;
}

#[tokio::test]
async fn licence_failures_have_their_reasons() {
    use coder_k8s_coder_testserver::{Fault, FaultRule};
    let h = harness("ccp-licfail").await;
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.create(
        "coder",
        json!({
            "database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}},
            "licenseSecretRef": {"name": "coder-license"},
        }),
    )
    .await;
    h.deployment_ready("coder").await;
    h.wait_operator_access("coder", true).await;
    let message = h.wait_reason("coder", "LicenseApplied", "SecretMissing").await;
    assert!(message.contains("coder-license"), "{message}");

    let fault = |fault| FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: "/api/v2/licenses".to_owned(),
        fault,
        times: None,
    };
    h.server.add_fault(fault(Fault::RouteNotFound));
    h.put_secret("coder-license", &[("license", LICENSE_1)]).await;
    h.wait_reason("coder", "LicenseApplied", "NotSupported").await;
    h.server.clear_faults();
    h.server.add_fault(fault(Fault::ServerError(503)));
    h.wait_reason("coder", "LicenseApplied", "Error").await;
    h.server.clear_faults();

    // Coder answers 403 (a user without the owner role would; the controller re-enforces that role at once, see
    // operator_access.rs, so the answer is injected).
    h.server.add_fault(fault(Fault::Forbidden));
    h.wait_reason("coder", "LicenseApplied", "Forbidden").await;
    h.server.clear_faults();
    h.wait_reason("coder", "LicenseApplied", "Applied").await;
}

#[tokio::test]
async fn rotated_database_url_is_used_without_a_restart() {
    static ROLES: AtomicUsize = AtomicUsize::new(0);
    let h = harness("ccp-rotate").await;
    let pg = postgres::shared().await.unwrap();
    let db = h
        .db_url
        .rsplit('/')
        .next()
        .unwrap()
        .split('?')
        .next()
        .unwrap()
        .to_owned();
    let admin = pg.connect("postgres").await.unwrap();
    let n = ROLES.fetch_add(1, Ordering::Relaxed);
    let (old_role, new_role) = (
        format!("rot_old_{}_{n}", std::process::id()),
        format!("rot_new_{}_{n}", std::process::id()),
    );
    for role in [&old_role, &new_role] {
        admin
            .batch_execute(&format!("CREATE ROLE {role} LOGIN SUPERUSER"))
            .await
            .unwrap();
    }
    let url_for = |role: &str| format!("postgres://{role}@127.0.0.1:{}/{db}?sslmode=disable", pg.port());
    h.put_secret("coder-db-app", &[("uri", &url_for(&old_role))])
        .await;
    h.create(
        "coder",
        json!({"database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}}),
    )
    .await;
    h.wait_operator_access("coder", true).await;
    let first = h.token_of("coder-operator-token").await;

    // Rotate: the old credentials stop working, the Secret gets new ones, and Coder forgets the token.
    admin
        .batch_execute(&format!("ALTER ROLE {old_role} NOLOGIN"))
        .await
        .unwrap();
    h.put_secret("coder-db-app", &[("uri", &url_for(&new_role))])
        .await;
    let sql = pg.connect(&db).await.unwrap();
    sql.execute(
        "DELETE FROM api_keys WHERE token_name LIKE 'coder-k8s-operator-%'",
        &[],
    )
    .await
    .unwrap();
    let secrets = h.api::<Secret>();
    wait_for(
        || async {
            let token = secrets.get("coder-operator-token").await.unwrap().data.unwrap()["token"]
                .0
                .clone();
            String::from_utf8(token).unwrap() != first
        },
        "a new token minted through the rotated URL",
    )
    .await;
    let second = h.token_of("coder-operator-token").await;
    assert_eq!(
        h.coder(&second).me().await.unwrap().username,
        "coder-k8s-operator"
    );
    h.wait_operator_access("coder", true).await;
}

#[tokio::test]
async fn no_referrer_wait_while_the_namespace_is_terminating() {
    // A long wait, so a wrong wait would show.
    let h = harness_with("ccp-nsdel", |s| s.deletion_wait = Duration::from_secs(60)).await;
    h.create("coder", json!({})).await;
    let mcps = mcp_referrer(&h, "tools", "coder", true).await;
    mcps.delete("tools", &DeleteParams::default()).await.unwrap();
    wait_for(
        || async { h.api::<Deployment>().get_opt("coder").await.unwrap().is_some() },
        "the Deployment",
    )
    .await;

    // Without a namespace controller the namespace stays Terminating, which is all the controller looks at.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(h.admin.clone());
    namespaces.delete(&h.ns, &DeleteParams::default()).await.unwrap();
    let started = std::time::Instant::now();
    let cps = h.api::<CoderControlPlane>();
    cps.delete("coder", &DeleteParams::default()).await.unwrap();
    wait_for(
        || async { cps.get_opt("coder").await.unwrap().is_none() },
        "the control plane to go",
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "no 60 s wait: {:?}",
        started.elapsed()
    );
    release_referrer(&mcps, "tools").await;
}

#[tokio::test]
async fn no_referrer_wait_on_foreground_deletion() {
    let h = harness_with("ccp-fg", |s| s.deletion_wait = Duration::from_secs(60)).await;
    h.create("coder", json!({})).await;
    let mcps = mcp_referrer(&h, "tools", "coder", true).await;
    mcps.delete("tools", &DeleteParams::default()).await.unwrap();
    let cps = h.api::<CoderControlPlane>();
    wait_for(
        || async { h.api::<Deployment>().get_opt("coder").await.unwrap().is_some() },
        "the Deployment",
    )
    .await;

    cps.delete("coder", &DeleteParams::foreground()).await.unwrap();
    // Without a garbage collector the object keeps `foregroundDeletion`; ours must go at once, without the wait.
    wait_for(
        || async {
            cps.get_opt("coder").await.unwrap().is_none_or(|cp| {
                !cp.metadata
                    .finalizers
                    .unwrap_or_default()
                    .iter()
                    .any(|f| f == "coder.com/workspace-rbac-cleanup")
            })
        },
        "the workspace-rbac-cleanup finalizer to go",
    )
    .await;
    release_referrer(&mcps, "tools").await;
}

/// FNV-32a written out here, independently of the operator's, to compute names that depend on a generated namespace.
pub(crate) fn fnv32a_reference(bytes: &[u8]) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in bytes {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{hash:08x}")
}

#[test]
fn the_reference_fnv_matches_the_published_vectors() {
    assert_eq!(fnv32a_reference(b""), "811c9dc5");
    assert_eq!(fnv32a_reference(b"a"), "e40c292c");
    assert_eq!(fnv32a_reference(b"foobar"), "bf9cf968");
}

#[tokio::test]
async fn names_volumes_and_probes_are_the_go_operators() {
    let h = harness("ccp-go-names").await;
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    // 50 characters whose 39-byte cut for the token Secret ends in "-".
    let name = format!("{}-{}", "a".repeat(38), "b".repeat(11));
    let service_account = "s".repeat(240);
    h.create(
        &name,
        json!({
            "database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}},
            "serviceAccount": {"name": service_account},
            "tls": {"secretNames": ["coder.tls", "coder.tls"]},
            "certs": {"secrets": [{"name": "corp.ca", "key": "ca.crt"}, {"name": "corp.ca", "key": "ca.crt"}]},
            "livenessProbe": {"initialDelaySeconds": 30},
        }),
    )
    .await;
    h.deployment_ready(&name).await;
    let deployment = h.api::<Deployment>().get(&name).await.unwrap();
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    // Volume names computed with python3: FNV-32a of "tls\0coder.tls" is 6a3775d4, of "ca-cert\0corp.ca" e0843578.
    let volumes: Vec<&str> = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(volumes, ["tls-coder-tls-6a3775d4", "ca-cert-corp-ca-e0843578"]);
    let container = &pod.containers[0];
    let mounts: Vec<&str> = container
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert_eq!(
        mounts,
        ["/etc/ssl/certs/coder/coder.tls", "/etc/ssl/certs/corp.ca-ca.crt"]
    );
    let liveness = container
        .liveness_probe
        .as_ref()
        .expect("a liveness block without enabled is enabled");
    assert_eq!(liveness.initial_delay_seconds, Some(30));
    assert!(container.readiness_probe.is_some());

    // Workspace RBAC of a 240-character ServiceAccount: the Role is cut to 253 with the identity hash only.
    let hash = fnv32a_reference(format!("{}\0{name}", h.ns).as_bytes());
    let role = format!("{}-{hash}-workspace-perms", "s".repeat(228));
    let binding = format!("{service_account}-{hash}");
    let roles = h.api::<Role>();
    wait_for(
        || async { roles.get_opt(&role).await.unwrap().is_some() },
        "the workspace Role under the Go operator's name",
    )
    .await;
    let bindings = h.api::<k8s_openapi::api::rbac::v1::RoleBinding>();
    assert!(bindings.get_opt(&binding).await.unwrap().is_some(), "{binding}");

    // The operator token Secret: the first 39 bytes (ending in "-"), "-", FNV-32a of the name (python3: 6bee898c).
    let cp = h.wait_operator_access(&name, true).await;
    let token_secret = format!("{}--6bee898c-operator-token", "a".repeat(38));
    assert_eq!(
        cp.status.unwrap().operator_token_secret_ref.unwrap().name,
        token_secret
    );
    assert!(h.api::<Secret>().get_opt(&token_secret).await.unwrap().is_some());
}

#[tokio::test]
async fn entitlements_read_unknown_from_the_start_and_for_unlisted_features() {
    use coder_k8s_api::control_plane::{Entitlement as Ent, LicenseTier};
    let h = harness("ccp-unknown").await;
    h.server.hide_feature("external_provisioner_daemons");
    h.create("plain", json!({})).await;
    wait_for(
        || async { h.get("plain").await.status.and_then(|s| s.phase).is_some() },
        "the first status",
    )
    .await;
    let status = h.get("plain").await.status.unwrap();
    assert_eq!(status.license_tier, Some(LicenseTier::Unknown));
    assert_eq!(
        status.external_provisioner_daemons_entitlement,
        Some(Ent::Unknown)
    );

    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    h.create(
        "coder",
        json!({"database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}}),
    )
    .await;
    h.deployment_ready("coder").await;
    h.wait_operator_access("coder", true).await;
    wait_for(
        || async {
            h.get("coder")
                .await
                .status
                .is_some_and(|s| s.license_tier == Some(LicenseTier::Enterprise))
        },
        "Coder's entitlements to be read",
    )
    .await;
    assert!(
        h.server
            .requests()
            .iter()
            .any(|r| r.path == "/api/v2/entitlements"),
        "Coder was asked"
    );
    let status = h.get("coder").await.status.unwrap();
    assert!(status.entitlements_last_checked.is_some());
    assert_eq!(
        status.external_provisioner_daemons_entitlement,
        Some(Ent::Unknown),
        "a feature Coder does not list reads unknown, not not_entitled"
    );
}

#[tokio::test]
async fn disable_create_detaches_every_owned_service_account() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let h = harness("ccp-sa-detach").await;
    let cp = h
        .create("coder", json!({"serviceAccount": {"name": "first"}}))
        .await;
    let uid = cp.metadata.uid.unwrap();
    let accounts = h.api::<ServiceAccount>();
    let owned = |name: &'static str| {
        let (accounts, uid) = (accounts.clone(), uid.clone());
        async move {
            accounts.get_opt(name).await.unwrap().is_some_and(|sa| {
                sa.metadata
                    .owner_references
                    .unwrap_or_default()
                    .iter()
                    .any(|o| o.uid == uid)
            })
        }
    };
    wait_for(|| owned("first"), "ServiceAccount first").await;
    let patch = |spec: serde_json::Value| {
        let api = h.api::<CoderControlPlane>();
        async move {
            api.patch(
                "coder",
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": spec})),
            )
            .await
            .unwrap();
        }
    };
    patch(json!({"serviceAccount": {"name": "second"}})).await;
    wait_for(|| owned("second"), "ServiceAccount second").await;
    assert!(owned("first").await, "the earlier account is still owned");

    patch(json!({"serviceAccount": {"disableCreate": true}})).await;
    wait_for(
        || async { !owned("first").await && !owned("second").await },
        "both accounts to be detached",
    )
    .await;
    for name in ["first", "second"] {
        assert!(accounts.get_opt(name).await.unwrap().is_some(), "{name} is kept");
    }
}
