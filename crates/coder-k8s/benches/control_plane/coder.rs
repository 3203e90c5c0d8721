//! The Coder side of the provisioner and AI Gateway key rounds, set up like the integration tests (tests/integration/control_plane.rs):
//! a PostgreSQL database with Coder's tables, the Coder API test server with external provisioner daemons and the
//! AI Gateway entitled, and one CoderControlPlane made Ready with operator access. The operator runs with
//! `--service-address-override=127.0.0.1`, and the control plane's Service port is the test server's port, so the
//! control plane's in-cluster URL reaches the test server.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_coder_testserver::{Config, Entitlement, TestServer};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// The name of the Ready control plane that the provisioners use.
pub const CONTROL_PLANE: &str = "coder";
const DATABASE_SECRET: &str = "coder-db-app";
/// Coder's AI Gateway key routes.
const AI_GATEWAY_KEYS: &str = "/api/v2/ai-gateway/keys";

/// PostgreSQL (shared by the process, stopped with it) and the Coder API test server (stopped when dropped).
pub struct Coder {
    pub server: TestServer,
    db_url: String,
}

impl Coder {
    pub async fn start() -> Result<Self> {
        let postgres = coder_k8s_testenv::postgres::shared()
            .await
            .context("starting PostgreSQL")?;
        let db_url = postgres
            .create_coder_database(&format!("bench_{}", std::process::id()))
            .await?;
        let mut config = Config::new(&db_url);
        for feature in ["external_provisioner_daemons", "aibridge"] {
            config
                .entitlements
                .insert(feature.to_owned(), Entitlement::Entitled);
        }
        let server = TestServer::start(config)
            .await
            .context("starting the Coder API test server")?;
        Ok(Self { server, db_url })
    }

    /// Requests the test server has received so far.
    pub fn calls(&self) -> usize {
        self.server.requests().len()
    }

    /// Requests to Coder's AI Gateway key routes so far.
    pub fn key_calls(&self) -> usize {
        self.server
            .requests()
            .iter()
            .filter(|r| r.path.starts_with(AI_GATEWAY_KEYS))
            .count()
    }

    /// Sets `spec.aiGateway.allowKeys: true` on [`CONTROL_PLANE`] in `namespace`, so its keys may be created.
    pub async fn allow_keys(&self, client: &Client, namespace: &str) -> Result<()> {
        let patch = json!({"spec": {"aiGateway": {"allowKeys": true}}});
        Api::<CoderControlPlane>::namespaced(client.clone(), namespace)
            .patch(CONTROL_PLANE, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .context("allowing AI Gateway keys on the Ready control plane")?;
        Ok(())
    }

    /// Creates [`CONTROL_PLANE`] in `namespace` with its database Secret, marks its Deployment ready (as a kubelet
    /// would) and waits until the operator reports operator access ready.
    pub async fn ready_control_plane(&self, client: &Client, namespace: &str) -> Result<()> {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(DATABASE_SECRET.to_owned()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(
                "uri".to_owned(),
                ByteString(self.db_url.as_bytes().to_vec()),
            )])),
            ..Secret::default()
        };
        Api::<Secret>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &secret)
            .await
            .context("creating the database Secret")?;
        let spec = json!({
            "database": {"connectionSecretRef": {"name": DATABASE_SECRET, "key": "uri"}},
            "service": {"port": self.server.url().port()},
        });
        let object = CoderControlPlane::new(
            CONTROL_PLANE,
            serde_json::from_value(spec).context("the control plane spec")?,
        );
        let control_planes: Api<CoderControlPlane> = Api::namespaced(client.clone(), namespace);
        control_planes
            .create(&PostParams::default(), &object)
            .await
            .context("creating the Ready control plane")?;

        let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
        wait_until(
            Duration::from_secs(60),
            "the control plane's Deployment",
            || async { Ok(deployments.get_opt(CONTROL_PLANE).await?.is_some()) },
        )
        .await?;
        mark_ready(&deployments, CONTROL_PLANE).await?;
        wait_until(Duration::from_secs(60), "operator access", || async {
            let cp = control_planes.get(CONTROL_PLANE).await?;
            Ok(cp.status.and_then(|s| s.operator_access_ready) == Some(true))
        })
        .await
    }
}

/// Sets one ready replica in the Deployment's status, as a kubelet and the Deployment controller would.
pub async fn mark_ready(deployments: &Api<Deployment>, name: &str) -> Result<()> {
    let patch =
        json!({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1}});
    deployments
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("marking Deployment {name} ready"))?;
    Ok(())
}

async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await? {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
