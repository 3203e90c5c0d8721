//! The serving certificate Secret and the APIService caBundle controller against a real kube-apiserver.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use coder_k8s_aggregated_apiserver::generic::tls::ServingCert;
use coder_k8s_aggregated_apiserver::serving::apiservice::{
    FIELD_MANAGER, MISSING_PERMISSION_LOG, NOT_REGISTERED_LOG, OPT_OUT_ANNOTATION, OPTED_OUT_LOG,
    SET_AGAIN_LOG, SET_LOG, apiservice_resource,
};
use coder_k8s_aggregated_apiserver::serving::material::{
    self, CA_CERT_KEY, CA_KEY_KEY, CERT_KEY, KEY_KEY, SECRET_NAME, SECRET_TYPE, TrustMaterial,
};
use coder_k8s_aggregated_apiserver::serving::{
    ServingSettings, load_or_create, run_ca_bundle_controller_for, run_renewal_every,
};
use coder_k8s_testenv::ControlPlane;
use k8s_openapi::ByteString;
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::sync::watch;
use tracing::instrument::WithSubscriber;

const WAIT: Duration = Duration::from_secs(30);

async fn control_plane() -> &'static ControlPlane {
    coder_k8s_testenv::shared()
        .await
        .expect("start the test control plane")
}

/// Polls `check` every 100 ms until it returns `Some`, or panics naming `what` after [`WAIT`].
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn now() -> Timestamp {
    Timestamp::now()
}

fn names(ns: &str) -> Vec<String> {
    material::service_dns_names(material::DEFAULT_SERVICE_NAME, ns)
}

fn data_of(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(key, value)| (key.clone(), value.0.clone()))
        .collect()
}

fn secret_with(ns: &str, type_: &str, data: BTreeMap<String, Vec<u8>>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(SECRET_NAME.to_owned()),
            namespace: Some(ns.to_owned()),
            ..ObjectMeta::default()
        },
        type_: Some(type_.to_owned()),
        data: (!data.is_empty()).then(|| data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        ..Secret::default()
    }
}

async fn put_secret(cp: &ControlPlane, secret: &Secret) -> Secret {
    let ns = secret.metadata.namespace.clone().unwrap();
    Api::<Secret>::namespaced(cp.client().unwrap(), &ns)
        .create(&PostParams::default(), secret)
        .await
        .unwrap()
}

async fn read_secret(cp: &ControlPlane, ns: &str) -> Secret {
    Api::<Secret>::namespaced(cp.client().unwrap(), ns)
        .get(SECRET_NAME)
        .await
        .unwrap()
}

/// A Role in `ns` with `verbs` on the serving Secret only, bound to `user`; returns a client acting as `user`.
async fn client_with_secret_verbs(cp: &ControlPlane, ns: &str, user: &str, verbs: &[&str]) -> kube::Client {
    let admin = cp.client().unwrap();
    let role = Role {
        metadata: ObjectMeta {
            name: Some(user.to_owned()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".to_owned()]),
            resource_names: Some(vec![SECRET_NAME.to_owned()]),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            ..PolicyRule::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some(user.to_owned()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: user.to_owned(),
        },
        subjects: Some(vec![user_subject(user)]),
    };
    Api::<RoleBinding>::namespaced(admin, ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let client = cp.client_as(user, &[]).unwrap();
    // RBAC changes reach the authorizer's cache asynchronously.
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    if verbs.contains(&"get") {
        eventually("the Role to take effect", || async {
            match secrets.get_opt(SECRET_NAME).await {
                Err(kube::Error::Api(status)) if status.code == 403 => None,
                _ => Some(()),
            }
        })
        .await;
    }
    client
}

fn user_subject(user: &str) -> Subject {
    Subject {
        api_group: Some("rbac.authorization.k8s.io".to_owned()),
        kind: "User".to_owned(),
        name: user.to_owned(),
        namespace: None,
    }
}

/// The leaf a TLS client sees from `cert`, verifying it against `ca_pem` for the Service name as kube-apiserver
/// does (it verifies `<service>.<namespace>.svc`).
async fn served_over_tls(
    cert: Arc<ServingCert>,
    ca_pem: &[u8],
    server_name: &str,
) -> CertificateDer<'static> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server_config = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(cert);
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem).unwrap())
        .unwrap();
    let client_config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));
    let server = tokio::spawn(async move { acceptor.accept(server_io).await.map(|_| ()) });
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
    let stream = connector
        .connect(ServerName::try_from(server_name.to_owned()).unwrap(), client_io)
        .await
        .expect("TLS handshake verified against the CA");
    let leaf = stream.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned();
    server.await.unwrap().unwrap();
    leaf
}

fn first_cert(pem: &[u8]) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem).unwrap()
}

/// Valid material of a CA made 300 days ago whose serving certificate was issued `days_ago` days ago.
fn material_issued_days_ago(ns: &str, days_ago: i64) -> TrustMaterial {
    let ca_made = now() - SignedDuration::from_hours(24 * 300);
    let fresh = material::generate(&names(ns), ca_made).unwrap();
    let issued = now() - SignedDuration::from_hours(24 * days_ago);
    material::renew_serving_cert(&fresh, &names(ns), issued).unwrap()
}

// ---------------------------------------------------------------------------------------------------------------
// The Secret
// ---------------------------------------------------------------------------------------------------------------

#[tokio::test]
async fn first_start_creates_the_secret_with_type_labels_keys_and_service_names() {
    let cp = control_plane().await;
    let ns = cp.namespace("serving-create").await.unwrap();
    let settings = ServingSettings::new(ns.name());

    let served = load_or_create(cp.client().unwrap(), &settings).await.unwrap();

    let secret = read_secret(cp, &ns).await;
    assert_eq!(secret.type_.as_deref(), Some(SECRET_TYPE));
    let labels = secret.metadata.labels.clone().unwrap_or_default();
    for (key, value) in [
        ("app.kubernetes.io/component", "aggregated-apiserver-serving-ca"),
        ("app.kubernetes.io/name", "coder-k8s"),
        ("app.kubernetes.io/managed-by", "coder-k8s"),
    ] {
        assert_eq!(labels.get(key).map(String::as_str), Some(value), "label {key}");
    }
    let data = data_of(&secret);
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        [CA_CERT_KEY, CA_KEY_KEY, CERT_KEY, KEY_KEY]
    );
    let valid = material::validate(Some(SECRET_TYPE), false, &data, now()).unwrap();
    assert_eq!(valid.leaf.dns_names, names(&ns));
    let lifetime = valid.leaf.not_after - valid.leaf.not_before;
    assert_eq!(
        lifetime,
        365 * 86400 + 3600,
        "one year (started an hour early for clock skew)"
    );
    assert_eq!(served.ca_pem, data[CA_CERT_KEY]);
    assert_eq!(served.cert.leaf().unwrap(), first_cert(&data[CERT_KEY]));
    let over_tls = served_over_tls(
        served.cert.clone(),
        &served.ca_pem,
        &format!("coder-k8s-apiserver.{ns}.svc"),
    )
    .await;
    assert_eq!(over_tls, first_cert(&data[CERT_KEY]));

    // The next start uses the same Secret as it is.
    let again = load_or_create(cp.client().unwrap(), &settings).await.unwrap();
    assert_eq!(again.ca_pem, served.ca_pem);
    let unchanged = read_secret(cp, &ns).await;
    assert_eq!(
        unchanged.metadata.resource_version,
        secret.metadata.resource_version
    );
}

#[tokio::test]
async fn a_placeholder_is_filled_with_get_and_update_only() {
    let cp = control_plane().await;
    let ns = cp.namespace("serving-placeholder").await.unwrap();
    put_secret(cp, &secret_with(&ns, SECRET_TYPE, BTreeMap::new())).await;
    let client = client_with_secret_verbs(cp, &ns, "placeholder-filler", &["get", "update"]).await;

    let served = load_or_create(client, &ServingSettings::new(ns.name()))
        .await
        .unwrap();

    let data = data_of(&read_secret(cp, &ns).await);
    let valid = material::validate(Some(SECRET_TYPE), false, &data, now()).unwrap();
    assert_eq!(valid.leaf.dns_names, names(&ns));
    assert_eq!(served.ca_pem, data[CA_CERT_KEY]);
    assert_eq!(served.cert.leaf().unwrap(), first_cert(&data[CERT_KEY]));
}

async fn startup_error(client: kube::Client, ns: &str) -> String {
    load_or_create(client, &ServingSettings::new(ns))
        .await
        .expect_err("start-up must be refused")
        .to_string()
}

#[tokio::test]
async fn a_missing_get_permission_names_the_verb() {
    let cp = control_plane().await;
    let ns = cp.namespace("serving-noget").await.unwrap();
    let error = startup_error(cp.client_as("no-rights", &[]).unwrap(), &ns).await;
    let expected = format!(
        "configure aggregated API server serving certificate: get secret {ns}/{SECRET_NAME}: secrets \"{SECRET_NAME}\" is forbidden"
    );
    assert!(error.starts_with(&expected), "{error}");
}

#[tokio::test]
async fn a_missing_create_permission_names_the_verb_and_the_placeholder() {
    let cp = control_plane().await;
    let ns = cp.namespace("serving-nocreate").await.unwrap();
    let client = client_with_secret_verbs(cp, &ns, "no-create", &["get", "update"]).await;
    let error = startup_error(client, &ns).await;
    let expected = format!(
        "configure aggregated API server serving certificate: create secret {ns}/{SECRET_NAME}: secrets is forbidden"
    );
    assert!(error.starts_with(&expected), "{error}");
    assert!(error.contains("create an empty placeholder Secret"), "{error}");
    let secrets = Api::<Secret>::namespaced(cp.client().unwrap(), &ns);
    assert!(secrets.get_opt(SECRET_NAME).await.unwrap().is_none());
}

#[tokio::test]
async fn a_missing_update_permission_names_fill_placeholder() {
    let cp = control_plane().await;
    let ns = cp.namespace("serving-nofill").await.unwrap();
    put_secret(cp, &secret_with(&ns, SECRET_TYPE, BTreeMap::new())).await;
    let client = client_with_secret_verbs(cp, &ns, "no-fill", &["get"]).await;
    let error = startup_error(client, &ns).await;
    let expected = format!(
        "configure aggregated API server serving certificate: fill placeholder secret {ns}/{SECRET_NAME}: secrets \"{SECRET_NAME}\" is forbidden"
    );
    assert!(error.starts_with(&expected), "{error}");
}

#[tokio::test]
async fn a_missing_update_permission_names_update_when_renewal_is_due() {
    let cp = control_plane().await;
    let ns = cp.namespace("serving-noupdate").await.unwrap();
    let due = material_issued_days_ago(&ns, 250);
    put_secret(cp, &secret_with(&ns, SECRET_TYPE, due.to_data())).await;
    let client = client_with_secret_verbs(cp, &ns, "no-update", &["get"]).await;
    let error = startup_error(client, &ns).await;
    let expected = format!(
        "configure aggregated API server serving certificate: update secret {ns}/{SECRET_NAME}: secrets \"{SECRET_NAME}\" is forbidden"
    );
    assert!(error.starts_with(&expected), "{error}");
}

/// Stores a broken Secret, checks start-up is refused with `problem` in the message and the Secret is untouched.
async fn refused_naming(
    ns_prefix: &str,
    break_it: impl FnOnce(&mut BTreeMap<String, Vec<u8>>, &mut String),
    problem: &str,
) {
    let cp = control_plane().await;
    let ns = cp.namespace(ns_prefix).await.unwrap();
    let mut data = material::generate(&names(&ns), now()).unwrap().to_data();
    let mut type_ = SECRET_TYPE.to_owned();
    break_it(&mut data, &mut type_);
    let stored = put_secret(cp, &secret_with(&ns, &type_, data)).await;

    let error = startup_error(cp.client().unwrap(), &ns).await;

    let expected =
        format!("configure aggregated API server serving certificate: secret {ns}/{SECRET_NAME}: {problem}");
    assert!(error.starts_with(&expected), "{error}\nwanted: {expected}");
    assert!(!error.contains("PRIVATE KEY"), "{error}");
    let after = read_secret(cp, &ns).await;
    assert_eq!(after.metadata.resource_version, stored.metadata.resource_version);
}

#[tokio::test]
async fn a_missing_ca_key_refuses_start_up_naming_the_field() {
    refused_naming(
        "serving-noca-key",
        |data, _| {
            data.remove(CA_KEY_KEY);
        },
        "data[\"ca.key\"] is missing or empty",
    )
    .await;
}

#[tokio::test]
async fn a_wrong_type_refuses_start_up_naming_the_field() {
    refused_naming(
        "serving-type",
        |_, type_| *type_ = "kubernetes.io/tls".to_owned(),
        "type is \"kubernetes.io/tls\", want \"coder.com/aggregated-apiserver-serving-ca\"",
    )
    .await;
}

#[tokio::test]
async fn unparsable_pem_refuses_start_up_naming_the_field() {
    refused_naming(
        "serving-pem",
        |data, _| {
            data.insert(
                CERT_KEY.to_owned(),
                b"-----BEGIN CERTIFICATE-----\nnot base64\n".to_vec(),
            );
        },
        "data[\"tls.crt\"]: unparsable PEM certificate",
    )
    .await;
}

#[tokio::test]
async fn a_ca_that_is_no_ca_refuses_start_up_naming_the_field() {
    refused_naming(
        "serving-notca",
        |data, _| {
            let leaf = data[CERT_KEY].clone();
            data.insert(CA_CERT_KEY.to_owned(), leaf);
        },
        "data[\"ca.crt\"] is not a CA certificate",
    )
    .await;
}

#[tokio::test]
async fn a_serving_certificate_from_another_ca_refuses_start_up_naming_the_field() {
    refused_naming(
        "serving-foreign",
        |data, _| {
            let other = material::generate(&["x".to_owned()], now()).unwrap();
            data.insert(CERT_KEY.to_owned(), other.cert_pem);
            data.insert(KEY_KEY.to_owned(), other.key_pem);
        },
        "data[\"tls.crt\"] is not signed by the CA in data[\"ca.crt\"]",
    )
    .await;
}

#[tokio::test]
async fn a_key_that_does_not_match_refuses_start_up_naming_the_field() {
    refused_naming(
        "serving-mismatch",
        |data, _| {
            let other = material::generate(&["x".to_owned()], now()).unwrap();
            data.insert(CA_KEY_KEY.to_owned(), other.ca_key_pem);
        },
        "data[\"ca.key\"] does not match the certificate in data[\"ca.crt\"]",
    )
    .await;
}

#[tokio::test]
async fn start_up_renews_a_serving_certificate_with_less_than_a_third_left_in_place() {
    let cp = control_plane().await;
    let ns = cp.namespace("serving-renew-start").await.unwrap();
    let due = material_issued_days_ago(&ns, 250);
    let mut data = due.to_data();
    data.insert("note".to_owned(), b"kept".to_vec());
    put_secret(cp, &secret_with(&ns, SECRET_TYPE, data)).await;

    let served = load_or_create(cp.client().unwrap(), &ServingSettings::new(ns.name()))
        .await
        .unwrap();

    let after = data_of(&read_secret(cp, &ns).await);
    assert_eq!(after[CA_CERT_KEY], due.ca_cert_pem, "same CA");
    assert_eq!(after[CA_KEY_KEY], due.ca_key_pem, "the CA key is kept");
    assert_eq!(after["note"], b"kept");
    assert_ne!(after[CERT_KEY], due.cert_pem);
    assert_ne!(after[KEY_KEY], due.key_pem);
    let valid = material::validate(Some(SECRET_TYPE), false, &after, now()).unwrap();
    assert!(valid.leaf.not_after > now().as_second() + 364 * 86400);
    assert_eq!(served.cert.leaf().unwrap(), first_cert(&after[CERT_KEY]));
    assert_eq!(served.ca_pem, due.ca_cert_pem);
}

#[tokio::test]
async fn start_up_keeps_a_serving_certificate_with_more_than_a_third_left() {
    let cp = control_plane().await;
    let ns = cp.namespace("serving-keep").await.unwrap();
    let fine = material_issued_days_ago(&ns, 200);
    let stored = put_secret(cp, &secret_with(&ns, SECRET_TYPE, fine.to_data())).await;

    let served = load_or_create(cp.client().unwrap(), &ServingSettings::new(ns.name()))
        .await
        .unwrap();

    assert_eq!(
        read_secret(cp, &ns).await.metadata.resource_version,
        stored.metadata.resource_version
    );
    assert_eq!(served.cert.leaf().unwrap(), first_cert(&fine.cert_pem));
}

#[tokio::test]
async fn the_periodic_check_renews_in_place_and_serves_the_new_certificate_without_restart() {
    let cp = control_plane().await;
    let ns = cp.namespace("serving-renew-run").await.unwrap();
    let settings = ServingSettings::new(ns.name());
    let fresh = material_issued_days_ago(&ns, 1);
    put_secret(cp, &secret_with(&ns, SECRET_TYPE, fresh.to_data())).await;
    let served = load_or_create(cp.client().unwrap(), &settings).await.unwrap();
    let server_name = format!("coder-k8s-apiserver.{ns}.svc");
    let first_leaf = served_over_tls(served.cert.clone(), &served.ca_pem, &server_name).await;
    assert_eq!(first_leaf, first_cert(&fresh.cert_pem));
    let (ca_tx, ca_rx) = watch::channel(served.ca_pem.clone());
    let renewal = tokio::spawn(run_renewal_every(
        cp.client().unwrap(),
        settings.clone(),
        served.cert.clone(),
        ca_tx,
        Duration::from_secs(1),
    ));

    // The serving certificate in the Secret becomes due (issued 250 days ago by the same CA).
    let mut secret = read_secret(cp, &ns).await;
    let backdated =
        material::renew_serving_cert(&fresh, &names(&ns), now() - SignedDuration::from_hours(24 * 250))
            .unwrap();
    let data = secret.data.as_mut().unwrap();
    data.insert(CERT_KEY.to_owned(), ByteString(backdated.cert_pem.clone()));
    data.insert(KEY_KEY.to_owned(), ByteString(backdated.key_pem.clone()));
    Api::<Secret>::namespaced(cp.client().unwrap(), &ns)
        .replace(SECRET_NAME, &PostParams::default(), &secret)
        .await
        .unwrap();

    let renewed = eventually("the Secret's serving certificate to be renewed", || async {
        let data = data_of(&read_secret(cp, &ns).await);
        (data[CERT_KEY] != backdated.cert_pem).then_some(data)
    })
    .await;
    assert_eq!(renewed[CA_CERT_KEY], served.ca_pem, "same CA");
    assert_eq!(renewed[CA_KEY_KEY], fresh.ca_key_pem, "the CA key is kept");
    let renewed_leaf = first_cert(&renewed[CERT_KEY]);
    assert_ne!(renewed_leaf, first_leaf);
    eventually("the new certificate to be served", || async {
        (served.cert.leaf().as_ref() == Some(&renewed_leaf)).then_some(())
    })
    .await;
    assert_eq!(
        served_over_tls(served.cert.clone(), &served.ca_pem, &server_name).await,
        renewed_leaf
    );
    assert!(!ca_rx.has_changed().unwrap(), "the CA did not change");
    renewal.abort();
}

#[tokio::test]
async fn the_periodic_check_publishes_a_new_ca_after_the_secret_was_deleted() {
    let cp = control_plane().await;
    let ns = cp.namespace("serving-new-ca").await.unwrap();
    let settings = ServingSettings::new(ns.name());
    let served = load_or_create(cp.client().unwrap(), &settings).await.unwrap();
    let (ca_tx, mut ca_rx) = watch::channel(served.ca_pem.clone());
    let renewal = tokio::spawn(run_renewal_every(
        cp.client().unwrap(),
        settings,
        served.cert.clone(),
        ca_tx,
        Duration::from_secs(1),
    ));
    Api::<Secret>::namespaced(cp.client().unwrap(), &ns)
        .delete(SECRET_NAME, &DeleteParams::default())
        .await
        .unwrap();

    tokio::time::timeout(WAIT, ca_rx.changed())
        .await
        .unwrap()
        .unwrap();
    let new_ca = ca_rx.borrow_and_update().clone();
    let data = data_of(&read_secret(cp, &ns).await);
    assert_ne!(new_ca, served.ca_pem);
    assert_eq!(new_ca, data[CA_CERT_KEY]);
    eventually("the certificate of the new CA to be served", || async {
        (served.cert.leaf() == Some(first_cert(&data[CERT_KEY]))).then_some(())
    })
    .await;
    renewal.abort();
}

// ---------------------------------------------------------------------------------------------------------------
// The APIService caBundle controller
// ---------------------------------------------------------------------------------------------------------------

/// Log lines written by one controller task.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    fn count(&self, message: &str) -> usize {
        self.text().lines().filter(|line| line.contains(message)).count()
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every request a client sent: (method, path and query).
#[derive(Clone, Default)]
struct Requests(Arc<Mutex<Vec<(String, String)>>>);

impl Requests {
    fn all(&self) -> Vec<(String, String)> {
        self.0.lock().unwrap().clone()
    }

    fn with_method(&self, method: &str) -> Vec<String> {
        self.all()
            .into_iter()
            .filter(|(m, _)| m == method)
            .map(|(_, uri)| uri)
            .collect()
    }
}

fn recording_client(config: kube::Config) -> (kube::Client, Requests) {
    let requests = Requests::default();
    let log = requests.clone();
    let layer = tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
        log.0
            .lock()
            .unwrap()
            .push((request.method().to_string(), request.uri().to_string()));
        request
    });
    let client = kube::client::ClientBuilder::try_from(config)
        .unwrap()
        .with_layer(&layer)
        .build();
    (client, requests)
}

/// A running controller for one test's APIService.
struct Running {
    logs: Logs,
    requests: Requests,
    ca_tx: watch::Sender<Vec<u8>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn start_controller(config: kube::Config, name: &str, ca_pem: &[u8]) -> Running {
    let (client, requests) = recording_client(config);
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let (ca_tx, ca_rx) = watch::channel(ca_pem.to_vec());
    let task = tokio::spawn(
        run_ca_bundle_controller_for(client, name.to_owned(), ca_rx).with_subscriber(subscriber),
    );
    Running {
        logs,
        requests,
        ca_tx,
        task,
    }
}

/// A unique APIService `v1alpha1.<group>`, pointing at a Service that does not exist (kube-apiserver accepts it).
fn unique_apiservice_name() -> String {
    format!(
        "v1alpha1.t{}.coder.com",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

fn apiservices(cp: &ControlPlane) -> Api<DynamicObject> {
    Api::all_with(cp.client().unwrap(), &apiservice_resource())
}

async fn create_apiservice(
    cp: &ControlPlane,
    name: &str,
    annotations: serde_json::Value,
    trust: serde_json::Value,
) {
    let (version, group) = name.split_once('.').unwrap();
    let mut spec = json!({
        "group": group,
        "version": version,
        "service": {"namespace": "coder-system", "name": "coder-k8s-apiserver", "port": 443},
        "groupPriorityMinimum": 1000,
        "versionPriority": 100,
    });
    spec.as_object_mut()
        .unwrap()
        .extend(trust.as_object().unwrap().clone());
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": name, "annotations": annotations},
        "spec": spec,
    }))
    .unwrap();
    let params = PostParams {
        field_manager: Some("test-setup".to_owned()),
        ..PostParams::default()
    };
    apiservices(cp).create(&params, &object).await.unwrap();
}

async fn patch_as_other_writer(cp: &ControlPlane, name: &str, patch: serde_json::Value) -> DynamicObject {
    apiservices(cp)
        .patch(
            name,
            &PatchParams {
                field_manager: Some("other-writer".to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(patch),
        )
        .await
        .unwrap()
}

async fn delete_apiservice(cp: &ControlPlane, name: &str) {
    let _ = apiservices(cp).delete(name, &DeleteParams::default()).await;
}

async fn get_apiservice(cp: &ControlPlane, name: &str) -> DynamicObject {
    apiservices(cp).get(name).await.unwrap()
}

fn ca_bundle(object: &DynamicObject) -> Option<String> {
    object.data["spec"]["caBundle"].as_str().map(str::to_owned)
}

fn insecure(object: &DynamicObject) -> bool {
    object.data["spec"]["insecureSkipTLSVerify"]
        .as_bool()
        .unwrap_or(false)
}

/// Waits until the APIService trusts `ca_pem` with TLS verification on.
async fn wait_trusted(cp: &ControlPlane, name: &str, ca_pem: &[u8]) -> DynamicObject {
    let wanted = STANDARD.encode(ca_pem);
    eventually("the APIService to trust the serving CA", || async {
        let object = get_apiservice(cp, name).await;
        (ca_bundle(&object).as_deref() == Some(wanted.as_str()) && !insecure(&object)).then_some(object)
    })
    .await
}

fn managers_of_ca_bundle(object: &DynamicObject) -> Vec<String> {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|entry| {
            entry
                .fields_v1
                .as_ref()
                .is_some_and(|fields| fields.0["f:spec"].get("f:caBundle").is_some())
        })
        .filter_map(|entry| entry.manager.clone())
        .collect()
}

fn test_ca() -> Vec<u8> {
    material::generate(&["x".to_owned()], now()).unwrap().ca_cert_pem
}

/// Longer than the first retries of a failed patch (0.5 + 1 + 2 s), so a write that was going to happen has.
async fn quiet_window() {
    tokio::time::sleep(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn the_controller_sets_the_ca_bundle_and_verification_and_sets_it_again_after_another_writer() {
    let cp = control_plane().await;
    let name = unique_apiservice_name();
    create_apiservice(cp, &name, json!({}), json!({"insecureSkipTLSVerify": true})).await;
    let ca = test_ca();
    let running = start_controller(cp.config().unwrap(), &name, &ca);

    let trusted = wait_trusted(cp, &name, &ca).await;
    assert_eq!(managers_of_ca_bundle(&trusted), [FIELD_MANAGER]);
    eventually("the first write to be logged", || async {
        (running.logs.count(SET_LOG) == 1).then_some(())
    })
    .await;
    assert_eq!(running.logs.count(SET_AGAIN_LOG), 0);

    let other = STANDARD.encode(test_ca());
    patch_as_other_writer(cp, &name, json!({"spec": {"caBundle": other}})).await;
    wait_trusted(cp, &name, &ca).await;
    eventually("the second write to be logged", || async {
        (running.logs.count(SET_AGAIN_LOG) == 1).then_some(())
    })
    .await;
    assert_eq!(running.logs.count(SET_LOG), 1);
    let patches = running.requests.with_method("PATCH");
    assert_eq!(patches.len(), 2, "{patches:?}");
    assert!(
        patches
            .iter()
            .all(|uri| uri.contains("fieldManager=coder-k8s-apiservice-cabundle")),
        "{patches:?}"
    );
    // It watches the one APIService by name and never reads it otherwise.
    let reads = running.requests.with_method("GET");
    assert!(!reads.is_empty());
    for uri in &reads {
        assert!(
            uri.contains(&format!("fieldSelector=metadata.name%3D{name}")),
            "{uri}"
        );
    }
    delete_apiservice(cp, &name).await;
}

#[tokio::test]
async fn the_controller_writes_nothing_when_the_ca_bundle_is_already_right() {
    let cp = control_plane().await;
    let name = unique_apiservice_name();
    let ca = test_ca();
    create_apiservice(cp, &name, json!({}), json!({"caBundle": STANDARD.encode(&ca)})).await;
    let running = start_controller(cp.config().unwrap(), &name, &ca);
    eventually("the controller to watch", || async {
        running
            .requests
            .all()
            .iter()
            .any(|(_, uri)| uri.contains("watch=true"))
            .then_some(())
    })
    .await;
    quiet_window().await;
    // An unrelated change is seen and needs no write either.
    let touched = patch_as_other_writer(cp, &name, json!({"metadata": {"labels": {"touched": "yes"}}})).await;
    quiet_window().await;

    let after = get_apiservice(cp, &name).await;
    assert_eq!(after.metadata.resource_version, touched.metadata.resource_version);
    assert_eq!(managers_of_ca_bundle(&after), ["test-setup"]);
    let requests = running.requests.all();
    assert!(
        requests.iter().all(|(method, _)| method == "GET"),
        "only list and watch requests: {requests:?}"
    );
    assert_eq!(running.logs.count("Set the APIService caBundle"), 0);

    // The controller was live all along: a wrong value is fixed.
    patch_as_other_writer(
        cp,
        &name,
        json!({"spec": {"caBundle": STANDARD.encode(test_ca())}}),
    )
    .await;
    wait_trusted(cp, &name, &ca).await;
    delete_apiservice(cp, &name).await;
}

#[tokio::test]
async fn the_controller_respects_the_opt_out_annotation() {
    let cp = control_plane().await;
    let name = unique_apiservice_name();
    let wrong = STANDARD.encode(test_ca());
    create_apiservice(
        cp,
        &name,
        json!({OPT_OUT_ANNOTATION: "false"}),
        json!({"caBundle": wrong}),
    )
    .await;
    let ca = test_ca();
    let running = start_controller(cp.config().unwrap(), &name, &ca);
    eventually("the opt-out to be logged", || async {
        (running.logs.count(OPTED_OUT_LOG) == 1).then_some(())
    })
    .await;
    let touched = patch_as_other_writer(cp, &name, json!({"metadata": {"labels": {"touched": "yes"}}})).await;
    quiet_window().await;

    let after = get_apiservice(cp, &name).await;
    assert_eq!(after.metadata.resource_version, touched.metadata.resource_version);
    assert_eq!(ca_bundle(&after).as_deref(), Some(wrong.as_str()));
    assert!(running.requests.with_method("PATCH").is_empty());
    assert_eq!(running.logs.count(OPTED_OUT_LOG), 1, "{}", running.logs.text());

    // Giving the field back: the controller takes over.
    patch_as_other_writer(
        cp,
        &name,
        json!({"metadata": {"annotations": {OPT_OUT_ANNOTATION: null}}}),
    )
    .await;
    wait_trusted(cp, &name, &ca).await;
    delete_apiservice(cp, &name).await;
}

#[tokio::test]
async fn the_controller_waits_for_a_missing_apiservice() {
    let cp = control_plane().await;
    let name = unique_apiservice_name();
    let ca = test_ca();
    let running = start_controller(cp.config().unwrap(), &name, &ca);
    eventually("the absence to be logged", || async {
        (running.logs.count(NOT_REGISTERED_LOG) == 1).then_some(())
    })
    .await;

    create_apiservice(cp, &name, json!({}), json!({"insecureSkipTLSVerify": true})).await;
    wait_trusted(cp, &name, &ca).await;
    delete_apiservice(cp, &name).await;
}

#[tokio::test]
async fn the_controller_writes_a_new_ca_from_the_channel() {
    let cp = control_plane().await;
    let name = unique_apiservice_name();
    create_apiservice(cp, &name, json!({}), json!({})).await;
    let first = test_ca();
    let running = start_controller(cp.config().unwrap(), &name, &first);
    wait_trusted(cp, &name, &first).await;

    let second = test_ca();
    running.ca_tx.send(second.clone()).unwrap();
    wait_trusted(cp, &name, &second).await;
    delete_apiservice(cp, &name).await;
}

#[tokio::test]
async fn a_missing_patch_permission_is_logged_once_and_retried_until_granted() {
    let cp = control_plane().await;
    let name = unique_apiservice_name();
    create_apiservice(cp, &name, json!({}), json!({"insecureSkipTLSVerify": true})).await;
    let user = format!("cabundle-{}", &name[10..22]);
    let admin = cp.client().unwrap();
    let rule = |verbs: &[&str]| PolicyRule {
        api_groups: Some(vec!["apiregistration.k8s.io".to_owned()]),
        resources: Some(vec!["apiservices".to_owned()]),
        resource_names: Some(vec![name.clone()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    };
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(user.clone()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![rule(&["get", "list", "watch"])]),
        ..ClusterRole::default()
    };
    let roles = Api::<ClusterRole>::all(admin.clone());
    roles.create(&PostParams::default(), &role).await.unwrap();
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(user.clone()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: user.clone(),
        },
        subjects: Some(vec![user_subject(&user)]),
    };
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    cp.wait_until_allowed(&user, apiservice_attributes(&name, "watch"))
        .await
        .unwrap();
    let mut config = cp.config().unwrap();
    config.auth_info.impersonate = Some(user.clone());
    let ca = test_ca();
    let running = start_controller(config, &name, &ca);

    eventually("several refused patches", || async {
        (running.requests.with_method("PATCH").len() >= 3).then_some(())
    })
    .await;
    assert_eq!(
        running.logs.count(MISSING_PERMISSION_LOG),
        1,
        "{}",
        running.logs.text()
    );
    assert!(
        running
            .logs
            .text()
            .contains(&format!("patch apiservices.apiregistration.k8s.io/{name}"))
    );
    let refused = get_apiservice(cp, &name).await;
    assert!(
        insecure(&refused) && ca_bundle(&refused).is_none(),
        "unchanged while the patch is refused"
    );

    let mut granted = role.clone();
    granted.rules = Some(vec![rule(&["get", "list", "watch", "patch"])]);
    granted.metadata.resource_version = roles.get(&user).await.unwrap().metadata.resource_version;
    roles
        .replace(&user, &PostParams::default(), &granted)
        .await
        .unwrap();
    cp.wait_until_allowed(&user, apiservice_attributes(&name, "patch"))
        .await
        .unwrap();
    wait_trusted(cp, &name, &ca).await;
    assert_eq!(running.logs.count(SET_LOG), 1);
    delete_apiservice(cp, &name).await;
}

/// `verb` on the APIService `name`, for waiting until a new grant reaches kube-apiserver's authorizer.
fn apiservice_attributes(name: &str, verb: &str) -> ResourceAttributes {
    ResourceAttributes {
        verb: Some(verb.to_owned()),
        group: Some("apiregistration.k8s.io".to_owned()),
        resource: Some("apiservices".to_owned()),
        name: Some(name.to_owned()),
        ..ResourceAttributes::default()
    }
}
