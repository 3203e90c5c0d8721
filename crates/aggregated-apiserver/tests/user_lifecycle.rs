//! Creating and deleting `CoderUser`s through a real kube-apiserver with the real kubectl, each flow against the
//! Coder API test server and a real Coder v2.30.0: a first password generated into a new Secret (which signs the
//! user in) or read from the caller's Secret, other login types, the deletion policy (a delete suspends the user and
//! hides it until it is created again; `Delete` deletes it in Coder), and every refusal before anything is written:
//! the caller's missing right to the Secret, an existing Secret, a spec Coder would refuse; Coder's own refusals
//! leave no Secret behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;

use std::sync::Arc;

use cluster::{SERVER_NAMESPACE, ServedByNamespace, assert_success, kubectl, stdout};
use coder_k8s_aggregated_apiserver::coder::registry_with;
use coder_k8s_aggregated_apiserver::coder::user_records::{
    KubeUserStore, USER_RECORD_LABEL, UserStore, record_name,
};
use coder_k8s_coder_client::types::users::LoginWithPasswordRequest;
use coder_k8s_coder_client::{CoderClient, Secret as Hidden, SessionToken};
use coder_k8s_coder_testserver::{Config, TestServer};
use coder_k8s_testenv::ControlPlane;
use coder_k8s_testenv::coder::RealCoder;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;
use uuid::Uuid;

/// One control plane per test process with the Coder-backed registry behind it, user records kept in the
/// server's namespace.
async fn served() -> &'static ServedByNamespace {
    static SERVED: OnceCell<ServedByNamespace> = OnceCell::const_new();
    SERVED
        .get_or_init(|| {
            ServedByNamespace::start(|kube, provider| {
                let store: Arc<dyn UserStore> = Arc::new(KubeUserStore::new(kube, SERVER_NAMESPACE));
                registry_with(provider, None, Some(store))
            })
        })
        .await
}

/// Where a flow runs: the Coder, an owner's client, its default organization and the namespace it serves.
struct Flow {
    cp: &'static ControlPlane,
    kube: kube::Client,
    url: url::Url,
    client: CoderClient,
    /// The test server, whose request log shows what reached Coder; `None` for a real Coder.
    server: Option<TestServer>,
    namespace: String,
    organization: String,
    /// Makes names unique on the shared real Coder.
    suffix: String,
}

impl Flow {
    async fn start(tag: &str, url: url::Url, token: String, server: Option<TestServer>) -> Flow {
        let served = served().await;
        let namespace = served.namespace(&format!("users-{tag}"), &url, &token).await;
        let client = CoderClient::new(url.clone(), SessionToken::new(token)).unwrap();
        let organization = client.default_organization().await.unwrap().name;
        Flow {
            cp: served.cp,
            kube: served.cp.client().unwrap(),
            url,
            client,
            server,
            namespace,
            organization,
            suffix: Uuid::new_v4().simple().to_string()[..8].to_owned(),
        }
    }

    async fn test_server(tag: &str, config: impl FnOnce(Config) -> Config) -> Flow {
        coder_k8s_coder_client::install_ring_provider();
        let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
        let db_url = pg.unique_coder_database(&format!("usr_{tag}")).await.unwrap();
        let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
            .await
            .unwrap()
            .expose();
        let server = TestServer::start(config(Config::new(&db_url))).await.unwrap();
        Flow::start(tag, server.url(), token, Some(server)).await
    }

    async fn real_coder(tag: &str) -> Flow {
        coder_k8s_coder_client::install_ring_provider();
        let coder = RealCoder::shared().await.unwrap();
        let url = url::Url::parse(coder.url()).unwrap();
        Flow::start(tag, url, coder.owner_token().to_owned(), None).await
    }

    fn user(&self, leaf: &str) -> String {
        format!("{leaf}-{}", self.suffix)
    }

    fn email(&self, leaf: &str) -> String {
        format!("{}@example.com", self.user(leaf))
    }

    /// A manifest of user `leaf` in the default organization with `spec` over email and organizations.
    fn manifest(&self, leaf: &str, spec: Value) -> String {
        let mut full = json!({"email": self.email(leaf), "organizations": {self.organization.as_str(): []}});
        for (key, value) in spec.as_object().unwrap() {
            full[key] = value.clone();
        }
        json!({
            "apiVersion": "aggregation.coder.com/v1alpha1",
            "kind": "CoderUser",
            "metadata": {"name": self.user(leaf), "namespace": self.namespace},
            "spec": full,
        })
        .to_string()
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut all = vec!["-n", self.namespace.as_str()];
        all.extend_from_slice(args);
        let out = kubectl(self.cp, &all, stdin);
        assert_success(&out, &all.join(" "));
        stdout(&out)
    }

    /// kubectl's error output of a command that must fail.
    fn fails(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut all = vec!["-n", self.namespace.as_str()];
        all.extend_from_slice(args);
        let out = kubectl(self.cp, &all, stdin);
        assert!(!out.status.success(), "{all:?} succeeded: {}", stdout(&out));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn object(&self, leaf: &str) -> Value {
        let name = self.user(leaf);
        serde_json::from_str(&self.run(&["get", "coderuser", &name, "-o", "json"], None)).unwrap()
    }

    fn listed(&self) -> Vec<String> {
        let list: Value =
            serde_json::from_str(&self.run(&["get", "coderusers", "-o", "json"], None)).unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Every write request the test server received since `clear` (none recorded for a real Coder).
    fn writes(&self) -> Vec<String> {
        self.server
            .iter()
            .flat_map(|s| s.requests())
            .filter(|r| r.method != "GET")
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    fn clear(&self) {
        if let Some(server) = &self.server {
            server.clear_requests();
        }
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.kube.clone(), &self.namespace)
    }

    async fn secret_value(&self, name: &str, key: &str) -> Option<String> {
        let secret = self.secrets().get_opt(name).await.unwrap()?;
        let bytes = secret.data.unwrap_or_default().get(key)?.0.clone();
        Some(String::from_utf8(bytes).unwrap())
    }

    async fn put_secret(&self, name: &str, key: &str, value: &str) {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": self.namespace},
            "stringData": {key: value},
        }))
        .unwrap();
        self.secrets()
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }

    async fn record(&self, leaf: &str) -> Option<ConfigMap> {
        Api::<ConfigMap>::namespaced(self.kube.clone(), SERVER_NAMESPACE)
            .get_opt(&record_name(&self.namespace, &self.user(leaf)))
            .await
            .unwrap()
    }

    /// The user's status in Coder; `None` when Coder has no such user.
    async fn status_in_coder(&self, leaf: &str) -> Option<String> {
        match self.client.user(&self.user(leaf)).await {
            Ok(user) => Some(user.status),
            Err(error) if error.status() == Some(400) => None,
            Err(error) => panic!("{error:?}"),
        }
    }

    /// Signs in as `leaf` with `password` and answers the user name Coder's `me` gives that session.
    async fn sign_in(&self, leaf: &str, password: &str) -> String {
        let request = LoginWithPasswordRequest {
            email: self.email(leaf),
            password: Hidden::new(password),
        };
        let session = self.client.login_with_password(&request).await.unwrap();
        let token = SessionToken::new(session.session_token.expose().to_owned());
        CoderClient::new(self.url.clone(), token)
            .unwrap()
            .me()
            .await
            .unwrap()
            .username
    }

    /// A Role and binding that let `user` do `verbs` on `resources` of `group` in the namespace.
    async fn allow(&self, user: &str, group: &str, resources: &[&str], verbs: &[&str]) {
        let role_name = format!("{user}-{}", resources.join("-"));
        let role: Role = serde_json::from_value(json!({
            "metadata": {"name": role_name, "namespace": self.namespace},
            "rules": [{"apiGroups": [group], "resources": resources, "verbs": verbs}],
        }))
        .unwrap();
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": role_name, "namespace": self.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }))
        .unwrap();
        Api::<Role>::namespaced(self.kube.clone(), &self.namespace)
            .create(&PostParams::default(), &role)
            .await
            .unwrap();
        Api::<RoleBinding>::namespaced(self.kube.clone(), &self.namespace)
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
    }
}

const INITIAL_PASSWORD: &str = "Initial-Pass-7f3c9a2e41";

/// A generated password: the Secret first, a user who signs in with it, the object showing neither.
async fn generated_password(flow: &Flow) {
    let spec = json!({
        "name": "Alice Liddell", "loginType": "password", "roles": ["template-admin"],
        "password": {"generate": {"secretName": "alice-login"}},
    });
    let out = flow.run(
        &["apply", "-f", "-", "-o", "json"],
        Some(&flow.manifest("alice", spec)),
    );
    let password = flow
        .secret_value("alice-login", "password")
        .await
        .expect("the generated password");
    assert!(!out.contains(&password), "{out}");
    assert_eq!(password.len(), 24);
    let secret = flow.secrets().get("alice-login").await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/basic-auth"));
    assert_eq!(
        flow.secret_value("alice-login", "username").await,
        Some(flow.email("alice"))
    );
    assert_eq!(flow.sign_in("alice", &password).await, flow.user("alice"));

    let object = flow.object("alice");
    assert!(!object.to_string().contains(&password), "{object}");
    assert_eq!(object["spec"].get("password"), None, "{object}");
    assert_eq!(object["spec"]["deletionPolicy"], "Suspend");
    assert_eq!(object["spec"]["loginType"], "password");
    assert_eq!(object["spec"]["roles"], json!(["template-admin"]));
    assert_eq!(object["spec"]["name"], "Alice Liddell");
    // Applied again, nothing is sent: the password is read only by a create.
    flow.clear();
    flow.run(
        &["apply", "-f", "-"],
        Some(&flow.manifest(
            "alice",
            json!({
                "name": "Alice Liddell", "loginType": "password", "roles": ["template-admin"],
                "password": {"generate": {"secretName": "alice-login"}},
            }),
        )),
    );
    assert_eq!(flow.writes(), Vec::<String>::new());
}

/// A first password from the caller's Secret, and a user of another login type, created suspended with the
/// deletion policy `Delete`, recorded outside Coder.
async fn password_from_secret_and_other_login_types(flow: &Flow) {
    flow.put_secret("carol-initial", "pw", INITIAL_PASSWORD).await;
    let spec = json!({"password": {"secretKeyRef": {"name": "carol-initial", "key": "pw"}}});
    let out = flow.run(
        &["create", "-f", "-", "-o", "json"],
        Some(&flow.manifest("carol", spec.clone())),
    );
    assert!(!out.contains(INITIAL_PASSWORD), "{out}");
    assert_eq!(flow.sign_in("carol", INITIAL_PASSWORD).await, flow.user("carol"));
    // The manifest leaves the login type to Coder's default: applied again (server-side), it changes nothing.
    flow.clear();
    let manifest = flow.manifest("carol", spec);
    flow.run(&["apply", "--server-side", "-f", "-"], Some(&manifest));
    assert_eq!(flow.writes(), Vec::<String>::new());
    // Deleted (suspended) and created again from the same manifest: the same user, active again.
    flow.run(&["delete", "coderuser", &flow.user("carol")], None);
    assert_eq!(flow.status_in_coder("carol").await.as_deref(), Some("suspended"));
    flow.run(&["create", "-f", "-"], Some(&manifest));
    assert_ne!(flow.status_in_coder("carol").await.as_deref(), Some("suspended"));

    let spec = json!({"loginType": "github", "suspended": true, "deletionPolicy": "Delete"});
    flow.run(&["apply", "-f", "-"], Some(&flow.manifest("bob", spec)));
    let bob = flow.client.user(&flow.user("bob")).await.unwrap();
    assert_eq!(
        (bob.login_type.as_str(), bob.status.as_str()),
        ("github", "suspended")
    );
    let object = flow.object("bob");
    assert_eq!(object["spec"]["deletionPolicy"], "Delete");
    assert_eq!(object["spec"]["suspended"], true);
    let record = flow.record("bob").await.expect("bob's record");
    assert_eq!(
        record.metadata.labels.unwrap_or_default()[USER_RECORD_LABEL],
        "true"
    );
    let data = record.data.unwrap_or_default();
    assert_eq!(
        (data["deletionPolicy"].as_str(), data["userID"].clone()),
        ("Delete", bob.id.to_string())
    );
}

/// `Suspend` (the default): the user is suspended, gone from the API, and back when created again, with its
/// password. `Delete`: gone from Coder, and its record too.
async fn deletion_policies(flow: &Flow) {
    let (alice, bob) = (flow.user("alice"), flow.user("bob"));
    flow.run(&["delete", "coderuser", &alice], None);
    assert_eq!(flow.status_in_coder("alice").await.as_deref(), Some("suspended"));
    let gone = flow.fails(&["get", "coderuser", &alice], None);
    assert!(gone.contains("NotFound") || gone.contains("not found"), "{gone}");
    assert!(!flow.listed().contains(&alice));

    let spec = json!({
        "name": "Alice Liddell", "loginType": "password", "roles": ["template-admin"],
        "password": {"generate": {"secretName": "alice-login"}},
    });
    let password = flow.secret_value("alice-login", "password").await.unwrap();
    flow.run(&["apply", "-f", "-"], Some(&flow.manifest("alice", spec)));
    assert_ne!(flow.status_in_coder("alice").await.as_deref(), Some("suspended"));
    assert!(flow.listed().contains(&alice));
    assert_eq!(
        flow.secret_value("alice-login", "password").await,
        Some(password.clone())
    );
    assert_eq!(flow.sign_in("alice", &password).await, alice);

    flow.run(&["delete", "coderuser", &bob], None);
    assert_eq!(flow.status_in_coder("bob").await, None);
    assert!(flow.record("bob").await.is_none(), "bob's record stayed");
}

/// Refusals before anything reaches Coder (the test server's log shows not one write), and Coder's own refusals,
/// after which no generated Secret is left.
async fn refusals(flow: &Flow) {
    let coder_user_verbs = ["get", "list", "create", "update", "patch", "delete"];
    flow.allow(
        "gail",
        "aggregation.coder.com",
        &["coderusers"],
        &coder_user_verbs,
    )
    .await;
    let generate = |secret: &str| json!({"password": {"generate": {"secretName": secret}}});

    flow.clear();
    let denied = flow.fails(
        &["--as=gail", "create", "-f", "-"],
        Some(&flow.manifest("dave", generate("dave-login"))),
    );
    assert!(
        denied.contains("User \"gail\" cannot create resource \"secrets\""),
        "{denied}"
    );
    let from_secret = json!({"password": {"secretKeyRef": {"name": "carol-initial", "key": "pw"}}});
    let denied = flow.fails(
        &["--as=gail", "create", "-f", "-"],
        Some(&flow.manifest("dave", from_secret)),
    );
    assert!(
        denied.contains("User \"gail\" cannot get resource \"secrets\""),
        "{denied}"
    );
    let taken = flow.fails(
        &["create", "-f", "-"],
        Some(&flow.manifest("dave", generate("carol-initial"))),
    );
    assert!(
        taken.contains("secrets \"carol-initial\" already exists"),
        "{taken}"
    );
    assert_eq!(
        flow.secret_value("carol-initial", "pw").await.as_deref(),
        Some(INITIAL_PASSWORD)
    );
    let invalid = flow.fails(
        &["create", "-f", "-"],
        Some(&flow.manifest(
            "dave",
            json!({"loginType": "github", "organizations": {}, "password": generate("x")["password"]}),
        )),
    );
    assert!(invalid.contains("spec.password: Forbidden"), "{invalid}");
    assert!(
        invalid.contains("spec.organizations: Required value"),
        "{invalid}"
    );
    // A name that is not a Coder user name never reaches Coder's URLs.
    let mut hostile: Value =
        serde_json::from_str(&flow.manifest("dave", json!({"loginType": "github"}))).unwrap();
    hostile["metadata"]["name"] = json!("dave_x");
    let refused = flow.fails(&["create", "-f", "-"], Some(&hostile.to_string()));
    assert!(
        refused.contains("BadRequest") || refused.contains("dave_x"),
        "{refused}"
    );
    assert_eq!(flow.writes(), Vec::<String>::new());
    assert_eq!(flow.status_in_coder("dave").await, None);
    assert!(flow.secrets().get_opt("dave-login").await.unwrap().is_none());

    // Coder refuses: a weak password, an email another user has (the generated Secret goes again).
    flow.put_secret("weak", "pw", "abc").await;
    let weak = json!({"password": {"secretKeyRef": {"name": "weak", "key": "pw"}}});
    let refused = flow.fails(&["create", "-f", "-"], Some(&flow.manifest("erin", weak)));
    assert!(refused.contains("Password is invalid"), "{refused}");
    assert!(!refused.contains("\"abc\""), "{refused}");
    let mut taken_email: Value =
        serde_json::from_str(&flow.manifest("frank", generate("frank-login"))).unwrap();
    taken_email["spec"]["email"] = json!(flow.email("alice"));
    let refused = flow.fails(&["create", "-f", "-"], Some(&taken_email.to_string()));
    assert!(
        refused.contains("another Coder user has this user name or email"),
        "{refused}"
    );
    assert!(
        flow.secrets().get_opt("frank-login").await.unwrap().is_none(),
        "the generated Secret stayed"
    );
    assert_eq!(flow.status_in_coder("frank").await, None);
}

async fn lifecycle(flow: &Flow) {
    generated_password(flow).await;
    password_from_secret_and_other_login_types(flow).await;
    deletion_policies(flow).await;
    refusals(flow).await;
}

// kubectl runs as a blocking child process: the test server needs worker threads of its own meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_are_created_with_a_first_password_and_deleted_by_policy_on_the_test_server() {
    let flow = Flow::test_server("ts", |mut config| {
        config.oidc_configured = true;
        config
    })
    .await;
    lifecycle(&flow).await;
    // A Coder with OIDC configured creates an OIDC user, without a password.
    flow.run(
        &["create", "-f", "-"],
        Some(&flow.manifest("olga", json!({"loginType": "oidc"}))),
    );
    let olga = flow.client.user(&flow.user("olga")).await.unwrap();
    assert_eq!(olga.login_type, "oidc");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_are_created_with_a_first_password_and_deleted_by_policy_on_a_real_coder() {
    let flow = Flow::real_coder("real").await;
    lifecycle(&flow).await;
    // OIDC is not configured on this Coder: its own refusal, and no user.
    let oidc = flow.fails(
        &["create", "-f", "-"],
        Some(&flow.manifest("olga", json!({"loginType": "oidc"}))),
    );
    assert!(
        oidc.contains("You must configure OIDC before creating OIDC users."),
        "{oidc}"
    );
    assert_eq!(flow.status_in_coder("olga").await, None);
}
