//! The CoderControlPlane and CoderProvisioner controllers against a real open-source Coder server (crates/testenv
//! `RealCoder`) instead of the Coder API test server: the control plane's Service port is the real Coder's port, its
//! Service host resolves to 127.0.0.1 (the out-of-cluster address override) and its database Secret holds the real
//! Coder's database URL. Checks operator access, the licence and the entitlements on a Coder without licences, and a
//! provisioner that such a Coder cannot entitle. Without a kubelet, tests set the Deployment's ready replicas.

use std::sync::Arc;
use std::time::{Duration, Instant};

use coder_k8s::kube_requests::KubeRequests;
use coder_k8s_api::control_plane::{CoderControlPlane, Entitlement, LicenseTier};
use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_api::shared::WorkloadPhase;
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_controllers::context::Context;
use coder_k8s_controllers::metrics::ReconcileMetrics;
use coder_k8s_testenv::RealCoder;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio::sync::watch;

use crate::control_plane::{settings, spawn_controllers};
use crate::support::control_plane_with_crds;
use crate::support::wait_for;

const LICENSE: &str = "eyJhbGciOiJFZERTQSJ9.real-coder.sig";

/// The controllers on their own namespace, pointed at the shared real Coder.
struct RealHarness {
    coder: &'static RealCoder,
    ns: String,
    admin: kube::Client,
    metrics: Arc<ReconcileMetrics>,
    /// Where `metrics` is registered: its text form holds the failure counters.
    registry: Registry,
    stop: watch::Sender<bool>,
}

impl Drop for RealHarness {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn real_harness(tag: &str) -> RealHarness {
    coder_k8s::telemetry::init(coder_k8s::cli::LogFormat::Text);
    let coder = RealCoder::shared().await.unwrap();
    let cp = control_plane_with_crds().await;
    let ns = cp.namespace(tag).await.unwrap().name().to_owned();
    let client = KubeRequests::default().client(cp.config().unwrap()).unwrap();
    let mut registry = Registry::default();
    let metrics = ReconcileMetrics::register(&mut registry);
    let ctx = Arc::new(Context::new(client, settings(&ns), metrics.clone()));
    let stop = spawn_controllers(&ctx);
    RealHarness {
        coder,
        ns,
        admin: cp.client().unwrap(),
        metrics,
        registry,
        stop,
    }
}

impl RealHarness {
    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    async fn put_secret(&self, name: &str, data: &[(&str, &str)]) {
        crate::control_plane::put_secret(&self.api::<Secret>(), name, data).await;
    }

    /// A control plane on the real Coder's port and database (`spec` adds to that), made Ready with operator
    /// access.
    async fn ready_control_plane(&self, name: &str, spec: serde_json::Value) -> CoderControlPlane {
        self.put_secret("coder-db", &[("uri", self.coder.database_url())])
            .await;
        let mut spec = spec;
        spec["service"] = json!({"port": self.coder.port()});
        spec["database"] = json!({"connectionSecretRef": {"name": "coder-db", "key": "uri"}});
        let object = CoderControlPlane::new(name, serde_json::from_value(spec).unwrap());
        self.api::<CoderControlPlane>()
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
        self.deployment_ready(name).await;
        self.wait_control_plane(name, "Ready with operator access", |cp| {
            let status = cp.status.as_ref();
            status.and_then(|s| s.operator_access_ready) == Some(true)
                && status.and_then(|s| s.phase) == Some(WorkloadPhase::Ready)
        })
        .await
    }

    /// Marks the Deployment ready, as a kubelet would.
    async fn deployment_ready(&self, name: &str) {
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

    async fn wait_control_plane(
        &self,
        name: &str,
        what: &str,
        done: impl Fn(&CoderControlPlane) -> bool,
    ) -> CoderControlPlane {
        let api = self.api::<CoderControlPlane>();
        for _ in 0..300 {
            let cp = api.get(name).await.unwrap();
            if done(&cp) {
                return cp;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("{name}: never {what}: {:?}", api.get(name).await.unwrap().status);
    }

    async fn condition(&self, name: &str, type_: &str) -> Option<(String, String, String)> {
        let cp = self.api::<CoderControlPlane>().get(name).await.unwrap();
        cp.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status, c.reason, c.message))
    }

    async fn token_of(&self, secret: &str) -> String {
        let secret = self.api::<Secret>().get(secret).await.unwrap();
        String::from_utf8(secret.data.unwrap()["token"].0.clone()).unwrap()
    }

    /// Failed reconciles of `kind` so far, summed over the error categories (from the registry's text form).
    fn failures(&self, kind: &str) -> u64 {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        let prefix = format!("coder_k8s_reconcile_failures_total{{kind=\"{kind}\",");
        text.lines()
            .filter(|line| line.starts_with(&prefix))
            .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    }
}

/// The `Route not found.` answer of the open-source build, for a route it lacks.
async fn assert_route_not_found(coder: &RealCoder, method: &str, path: &str) {
    let response = match method {
        "GET" => coder.get(path).await.unwrap(),
        _ => coder
            .send_json(method, path, &json!({"license": LICENSE}))
            .await
            .unwrap(),
    };
    assert_eq!(response.status, 404, "{method} {path}: {}", response.text());
    assert_eq!(
        response.json().unwrap(),
        json!({"message": "Route not found."}),
        "{method} {path}"
    );
}

#[tokio::test]
async fn control_plane_on_real_coder_is_ready_with_a_working_operator_token() {
    let h = real_harness("rc-ready").await;
    let cp = h.ready_control_plane("coder", json!({})).await;
    let status = cp.status.unwrap();
    assert_eq!(
        status.url.as_deref(),
        Some(format!("http://coder.{}.svc.cluster.local:{}", h.ns, h.coder.port()).as_str())
    );
    let reference = status.operator_token_secret_ref.unwrap();
    assert_eq!(
        (reference.name.as_str(), reference.key.as_deref()),
        ("coder-operator-token", Some("token"))
    );
    for (type_, expected) in [
        ("DatabaseSecretResolved", ("True", "Resolved")),
        ("OperatorTokenSecretOwned", ("True", "TokenSecretOwned")),
        ("LicenseApplied", ("Unknown", "Pending")),
    ] {
        let (status, reason, _) = h.condition("coder", type_).await.unwrap();
        assert_eq!((status.as_str(), reason.as_str()), expected, "{type_}");
    }

    // The token in the owned Secret is this control plane's, and the real Coder takes it as the operator user.
    let token = h.token_of("coder-operator-token").await;
    let coder = CoderClient::new(
        url::Url::parse(h.coder.url()).unwrap(),
        SessionToken::new(token.clone()),
    )
    .unwrap();
    let me = coder.me().await.unwrap();
    assert_eq!(me.username, "coder-k8s-operator");
    assert_eq!((me.status.as_str(), me.login_type.as_str()), ("active", "none"));
    let roles: Vec<&str> = me.roles.iter().map(|role| role.name.as_str()).collect();
    assert_eq!(roles, ["owner"]);
    assert!(
        me.organization_ids
            .iter()
            .any(|id| id.to_string() == h.coder.organization_id()),
        "{:?}",
        me.organization_ids
    );
    let (db, connection) = tokio_postgres::connect(h.coder.database_url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let token_names: Vec<String> = db
        .query(
            "SELECT token_name FROM api_keys WHERE id = $1",
            &[&token.split('-').next().unwrap()],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        token_names,
        [coder_k8s_operator_access::token_name(&h.ns, "coder")]
    );

    // Real open-source Coder has no entitlements API: both values become `unknown`.
    assert_route_not_found(h.coder, "GET", "/api/v2/entitlements").await;
    let cp = h
        .wait_control_plane("coder", "with recorded entitlements", |cp| {
            cp.status
                .as_ref()
                .is_some_and(|s| s.entitlements_last_checked.is_some())
        })
        .await;
    let status = cp.status.unwrap();
    assert_eq!(
        (
            status.external_provisioner_daemons_entitlement,
            status.license_tier
        ),
        (Some(Entitlement::Unknown), Some(LicenseTier::Unknown))
    );
}

#[tokio::test]
async fn licence_on_real_coder_is_not_supported_without_an_error_loop() {
    let h = real_harness("rc-licence").await;
    assert_route_not_found(h.coder, "POST", "/api/v2/licenses").await;
    h.put_secret("coder-license", &[("license", LICENSE)]).await;
    h.ready_control_plane("coder", json!({"licenseSecretRef": {"name": "coder-license"}}))
        .await;
    h.wait_control_plane("coder", "LicenseApplied NotSupported", |cp| {
        cp.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "LicenseApplied" && c.reason == "NotSupported")
        })
    })
    .await;
    let expected = (
        "False".to_owned(),
        "NotSupported".to_owned(),
        "this Coder deployment has no licences API".to_owned(),
    );
    assert_eq!(h.condition("coder", "LicenseApplied").await.unwrap(), expected);

    // Retried every second (the tests' retry interval) as a condition, never as a failed reconcile.
    let (runs, failures) = (
        h.metrics.runs("CoderControlPlane"),
        h.failures("CoderControlPlane"),
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        h.metrics.runs("CoderControlPlane") >= runs + 3,
        "the controller kept retrying during the window"
    );
    assert_eq!(h.failures("CoderControlPlane"), failures, "no failed reconcile");
    assert_eq!(h.condition("coder", "LicenseApplied").await.unwrap(), expected);
    let status = h
        .api::<CoderControlPlane>()
        .get("coder")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        (status.license_last_applied_hash, status.license_last_applied),
        (None, None)
    );
    assert_eq!(status.operator_access_ready, Some(true));
}

#[tokio::test]
async fn provisioner_on_real_coder_is_not_supported_and_gets_no_key() {
    let h = real_harness("rc-prov").await;
    h.ready_control_plane("coder", json!({})).await;
    h.wait_control_plane("coder", "with recorded entitlements", |cp| {
        cp.status
            .as_ref()
            .is_some_and(|s| s.external_provisioner_daemons_entitlement == Some(Entitlement::Unknown))
    })
    .await;
    // Open-source Coder has no provisioner key routes, so the key can only be checked on the provisioner's side.
    let keys = format!(
        "/api/v2/organizations/{}/provisionerkeys",
        h.coder.organization_id()
    );
    assert_route_not_found(h.coder, "GET", &keys).await;

    let spec =
        json!({"controlPlaneRef": {"name": "coder"}, "replicas": 1, "tags": {"scope": "organization"}});
    let object = CoderProvisioner::new("p", serde_json::from_value(spec).unwrap());
    let provisioners = h.api::<CoderProvisioner>();
    provisioners
        .create(&PostParams::default(), &object)
        .await
        .unwrap();

    // The control plane's `unknown` record is no answer: the provisioner asks Coder, whose 404 says why. Nothing
    // else is ever shown (in particular not `NotEntitled`).
    let started = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    let entitled = loop {
        let p = provisioners.get("p").await.unwrap();
        let condition = p.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "ExternalProvisionersEntitled")
                .cloned()
        });
        if let Some(c) = &condition
            && seen.last() != Some(&c.reason)
        {
            seen.push(c.reason.clone());
        }
        if let Some(c) = condition.filter(|c| c.reason == "NotSupported") {
            break c;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "ExternalProvisionersEntitled never became NotSupported; reasons seen {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(seen, ["NotSupported"]);
    assert_eq!(
        (entitled.status.as_str(), entitled.message.as_str()),
        ("False", "this Coder deployment has no entitlements API")
    );

    // It stays there without another reconcile (three times the tests' 1 s intervals: only a change of the control
    // plane's recorded entitlement can change the answer), and no key step ran: no key ID, no key Secret, no
    // Deployment.
    let (runs, failures) = (h.metrics.runs("CoderProvisioner"), h.failures("CoderProvisioner"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.metrics.runs("CoderProvisioner"),
        runs,
        "the provisioner was reconciled again with nothing changing"
    );
    assert_eq!(h.failures("CoderProvisioner"), failures, "no failed reconcile");
    let status = provisioners.get("p").await.unwrap().status.unwrap();
    let reasons: Vec<(&str, &str, &str)> = status
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("ControlPlaneReady", "True", "ControlPlaneAvailable"),
            ("OperatorAccessReady", "True", "OperatorAccessReady"),
            ("ExternalProvisionersEntitled", "False", "NotSupported"),
        ]
    );
    assert_eq!(status.phase, Some(WorkloadPhase::Pending));
    assert_eq!((status.provisioner_key_id, status.organization_id), (None, None));
    assert!(
        h.api::<Secret>()
            .get_opt("p-provisioner-key")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        h.api::<Deployment>()
            .get_opt("provisioner-p")
            .await
            .unwrap()
            .is_none()
    );
}
