//! Test support for `CoderTemplate` settings as code: one control plane per test process with `codertemplates`
//! registered behind kube-apiserver, each test namespace served by the Coder the test picks (the real open-source
//! Coder or a Coder API test server with the premium features it licenses), Secrets read with the control plane's
//! admin client, and kubectl helpers.
// Two test binaries use this module, each a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use coder_k8s_aggregated_apiserver::coder::template_import::{
    BACKOFF_AFTER_ENV, INITIAL_POLL_ENV, MAX_POLL_ENV, SettingsSource, WAIT_TIMEOUT_ENV,
};
use coder_k8s_aggregated_apiserver::coder::templates;
use coder_k8s_aggregated_apiserver::generic::Registry;
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::Secret as Value;
use coder_k8s_coder_client::types::{
    ArchiveKind, CreateTemplateRequest, CreateTemplateVersionRequest, JobStatus, Template, VariableValue,
};
use coder_k8s_coder_testserver::{Config, Entitlement, TestServer};
use coder_k8s_testenv::coder::EchoTemplate;
use coder_k8s_testenv::{ControlPlane, EchoVariable, RealCoder, echo_with_variables};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::sync::OnceCell;
use url::Url;
use uuid::Uuid;

use crate::cluster::{ServedByNamespace, kubectl, wait_until};

/// Every premium feature behind template settings.
pub const ALL_FEATURES: [&str; 4] = [
    "advanced_template_scheduling",
    "access_control",
    "control_shared_ports",
    "template_rbac",
];

/// The variables the templates of these tests declare: two plain ones with defaults and a sensitive one.
pub const VARIABLES: [EchoVariable; 3] = [
    EchoVariable {
        name: "region",
        default: Some("eu-west"),
        sensitive: false,
    },
    EchoVariable {
        name: "size",
        default: Some("small"),
        sensitive: false,
    },
    EchoVariable {
        name: "token",
        default: Some(""),
        sensitive: true,
    },
];

fn fast_waits() -> SettingsSource {
    let map: BTreeMap<&str, &str> = BTreeMap::from([
        (WAIT_TIMEOUT_ENV, "45s"),
        (BACKOFF_AFTER_ENV, "0s"),
        (INITIAL_POLL_ENV, "50ms"),
        (MAX_POLL_ENV, "100ms"),
    ]);
    Arc::new(move |name| map.get(name).map(|v| (*v).to_owned()))
}

/// The control plane of this test process with `codertemplates` served behind it, Secrets read as the admin user.
pub struct Served {
    pub cp: &'static ControlPlane,
    by_namespace: ServedByNamespace,
}

impl Served {
    pub async fn shared() -> &'static Served {
        static SERVED: OnceCell<Served> = OnceCell::const_new();
        SERVED.get_or_init(Served::start).await
    }

    async fn start() -> Served {
        coder_k8s_coder_client::install_ring_provider();
        let by_namespace = ServedByNamespace::start_reading_secrets(|_, provider| Registry {
            group: "aggregation.coder.com",
            version: "v1alpha1",
            resources: vec![templates::resource_with(provider, fast_waits())],
        })
        .await;
        Served {
            cp: by_namespace.cp,
            by_namespace,
        }
    }

    /// A new namespace whose templates `coder` serves.
    pub async fn namespace(&self, prefix: &str, coder: &Coder) -> String {
        self.by_namespace
            .namespace(prefix, &coder.url, &coder.token)
            .await
    }

    /// Creates Secret `name` in `namespace` holding `data`.
    pub async fn secret(&self, namespace: &str, name: &str, data: &[(&str, &str)]) {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace},
            "stringData": data.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<BTreeMap<_, _>>(),
        }))
        .unwrap();
        Api::<Secret>::namespaced(self.cp.client().unwrap(), namespace)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }

    /// `kubectl apply --server-side` of `manifest` (YAML), with extra arguments (`--as`, ...).
    pub fn apply(&self, manifest: &str, extra: &[&str]) -> Output {
        let mut args = vec!["apply", "--server-side", "--field-manager=gitops", "-f", "-"];
        args.extend_from_slice(extra);
        kubectl(self.cp, &args, Some(manifest))
    }

    /// `kubectl get codertemplate <name> -o json`.
    pub fn get(&self, namespace: &str, name: &str) -> serde_json::Value {
        crate::cluster::kubectl_json(
            self.cp,
            &["get", "codertemplate", name, "-n", namespace, "-o", "json"],
        )
    }
}

/// A Coder the tests write to: the shared real open-source Coder, or a test server of their own.
pub struct Coder {
    pub url: Url,
    pub token: String,
    pub client: CoderClient,
    pub organization: String,
    pub organization_id: Uuid,
    pub server: Option<TestServer>,
    real: Option<&'static RealCoder>,
}

impl Coder {
    pub async fn real() -> Coder {
        coder_k8s_coder_client::install_ring_provider();
        let coder = RealCoder::shared().await.unwrap();
        let url = Url::parse(coder.url()).unwrap();
        Self::of(url, coder.owner_token().to_owned(), None, Some(coder)).await
    }

    /// A test server on a fresh database with `features` licensed.
    pub async fn test_server(features: &[&str]) -> Coder {
        coder_k8s_coder_client::install_ring_provider();
        let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
        let db_url = pg.unique_coder_database("tplcode").await.unwrap();
        let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
            .await
            .unwrap()
            .expose();
        let mut config = Config::new(&db_url);
        config.build_duration = Duration::from_millis(60);
        for feature in features {
            config
                .entitlements
                .insert((*feature).to_owned(), Entitlement::Entitled);
        }
        let server = TestServer::start(config).await.unwrap();
        Self::of(server.url(), token, Some(server), None).await
    }

    async fn of(
        url: Url,
        token: String,
        server: Option<TestServer>,
        real: Option<&'static RealCoder>,
    ) -> Coder {
        let client = CoderClient::new(
            url.clone(),
            coder_k8s_coder_client::SessionToken::new(token.clone()),
        )
        .unwrap();
        let organization = client.default_organization().await.unwrap();
        Coder {
            url,
            token,
            client,
            organization: organization.name,
            organization_id: organization.id,
            server,
            real,
        }
    }

    pub fn is_real(&self) -> bool {
        self.real.is_some()
    }

    pub fn test_server_ref(&self) -> &TestServer {
        self.server.as_ref().expect("a test server")
    }

    /// A template source declaring [`VARIABLES`] that both servers import (real Coder: an echo archive).
    pub fn source(&self) -> Bytes {
        let echo = match self.real {
            Some(coder) => coder.echo_template(EchoTemplate::Success).unwrap(),
            None => coder_k8s_testenv::one_file_tar("README.md", b"# template\n"),
        };
        Bytes::from(echo_with_variables(&echo, &VARIABLES))
    }

    /// The provisioner of versions created in Coder: real Coder runs only echo.
    pub fn provisioner(&self) -> &'static str {
        if self.is_real() { "echo" } else { "terraform" }
    }

    /// A version imported from [`Coder::source`] with `request` filled by `edit`, waited for.
    pub async fn version(&self, edit: impl FnOnce(&mut CreateTemplateVersionRequest)) -> Uuid {
        let file = self
            .client
            .upload_file(ArchiveKind::Tar, self.source())
            .await
            .unwrap();
        let mut request = CreateTemplateVersionRequest::terraform(file.id);
        request.provisioner = self.provisioner().to_owned();
        request.user_variable_values = vec![variable("token", "initial-token")];
        edit(&mut request);
        let version = self
            .client
            .create_template_version(&self.organization, &request)
            .await
            .unwrap();
        wait_until("the import", Duration::from_secs(60), || async {
            let status = self.client.template_version(version.id).await.unwrap().job.status;
            assert_ne!(status, JobStatus::Failed, "the import failed");
            status == JobStatus::Succeeded
        })
        .await;
        version.id
    }

    /// A template `name` created in Coder out of band from a fresh version.
    pub async fn template(&self, name: &str) -> Template {
        let version = self.version(|_| {}).await;
        let request = CreateTemplateRequest {
            name: name.to_owned(),
            template_version_id: version,
            ..CreateTemplateRequest::default()
        };
        self.client
            .create_template(&self.organization, &request)
            .await
            .unwrap()
    }

    pub async fn read(&self, id: Uuid) -> Template {
        self.client.template(id).await.unwrap()
    }

    /// A user named `name` in the default organization (created in Coder); its ID.
    pub async fn user(&self, name: &str) -> Uuid {
        match (&self.server, self.real) {
            (Some(server), _) => {
                server.mint_token(name, &[]).await.unwrap();
            }
            (None, Some(coder)) => {
                let created = coder
                    .send_json(
                        "POST",
                        "/api/v2/users",
                        &json!({
                            "email": format!("{name}@coder-k8s.test"),
                            "username": name,
                            "password": format!("Pw-{}", Uuid::new_v4().simple()),
                            "login_type": "password",
                            "organization_ids": [self.organization_id],
                        }),
                    )
                    .await
                    .unwrap();
                assert_eq!(created.status, 201, "{}", created.text());
            }
            (None, None) => unreachable!("a Coder is real or a test server"),
        }
        self.client.user(name).await.unwrap().id
    }

    /// The test server's requests other than reads, as `METHOD path`.
    pub fn writes(&self) -> Vec<String> {
        self.test_server_ref()
            .requests()
            .iter()
            .filter(|r| r.method != "GET")
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }
}

pub fn variable(name: &str, value: &str) -> VariableValue {
    VariableValue {
        name: name.to_owned(),
        value: Value::new(value),
    }
}

/// A unique lower-case name (a valid template, user and namespace name).
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", &Uuid::new_v4().simple().to_string()[..8])
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// kubectl failed and said `expected` (on stderr).
pub fn assert_refused(out: &Output, expected: &str) {
    assert!(
        !out.status.success(),
        "kubectl succeeded: {}",
        crate::cluster::stdout(out)
    );
    let text = stderr(out);
    assert!(text.contains(expected), "{expected:?} not in:\n{text}");
}
