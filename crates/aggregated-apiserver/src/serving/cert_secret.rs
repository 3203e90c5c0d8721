//! The Secret `coder-k8s-apiserver-tls` on the cluster: read it, create it or fill its placeholder, renew its
//! serving certificate in place (same CA) and serve the result without a restart.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tokio::sync::watch;

use crate::generic::kube_call::kube_message;

use super::material::{self, RenewalReason, SECRET_LABELS, SECRET_NAME, SECRET_TYPE, TrustMaterial};
use crate::generic::StartupError;
use crate::generic::tls::ServingCert;

/// How often [`run_renewal`] re-reads the Secret and renews the serving certificate when due.
pub const RENEWAL_CHECK_INTERVAL: Duration = Duration::from_secs(12 * 60 * 60);
/// Start-up errors start with this, as the troubleshooting guide quotes it.
pub const STARTUP_ERROR_CONTEXT: &str = "configure aggregated API server serving certificate";
/// Writes that lost a race with another replica are retried from a fresh read this many times.
const MAX_ATTEMPTS: usize = 5;

/// Where the serving certificate lives and which names it covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServingSettings {
    /// The server's namespace, which holds the Secret.
    pub namespace: String,
    /// The Service in front of the server (`coder-k8s-apiserver`).
    pub service_name: String,
}

impl ServingSettings {
    /// The default Service name in `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            service_name: material::DEFAULT_SERVICE_NAME.to_owned(),
        }
    }

    fn dns_names(&self) -> Vec<String> {
        material::service_dns_names(&self.service_name, &self.namespace)
    }

    fn secret_ref(&self) -> String {
        format!("{}/{SECRET_NAME}", self.namespace)
    }
}

/// The certificate to serve and the CA (PEM) that signed it, which is what the APIService `caBundle` must hold.
#[derive(Clone, Debug)]
pub struct ServingMaterial {
    pub cert: Arc<ServingCert>,
    pub ca_pem: Vec<u8>,
}

/// What [`ensure`] did to the Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A valid Secret was used as it is.
    Adopted,
    Created,
    FilledPlaceholder,
    Renewed(RenewalReason),
}

/// Reads the Secret, creates it (or fills its empty placeholder) on first start, renews the serving certificate
/// when due, and returns what to serve. An unusable Secret is never overwritten: the error names the field.
pub async fn load_or_create(
    client: kube::Client,
    settings: &ServingSettings,
) -> Result<ServingMaterial, StartupError> {
    let secrets = Api::namespaced(client, &settings.namespace);
    let (material, _) = ensure(&secrets, settings)
        .await
        .map_err(|e| StartupError(format!("{STARTUP_ERROR_CONTEXT}: {e}")))?;
    let cert = ServingCert::from_pem(&material.cert_pem, &material.key_pem)
        .map_err(|e| StartupError(format!("{STARTUP_ERROR_CONTEXT}: {e}")))?;
    Ok(ServingMaterial {
        cert: Arc::new(cert),
        ca_pem: material.ca_cert_pem,
    })
}

/// Outside a cluster: a self-signed certificate for `localhost`; it is its own CA.
pub fn self_signed_localhost() -> Result<ServingMaterial, StartupError> {
    let (cert_pem, key_pem) = material::self_signed_localhost(Timestamp::now())
        .map_err(|e| StartupError(format!("{STARTUP_ERROR_CONTEXT}: {e}")))?;
    let cert = ServingCert::from_pem(&cert_pem, &key_pem)
        .map_err(|e| StartupError(format!("{STARTUP_ERROR_CONTEXT}: {e}")))?;
    Ok(ServingMaterial {
        cert: Arc::new(cert),
        ca_pem: cert_pem,
    })
}

/// Every [`RENEWAL_CHECK_INTERVAL`]: [`run_renewal_every`].
pub async fn run_renewal(
    client: kube::Client,
    settings: ServingSettings,
    cert: Arc<ServingCert>,
    ca_tx: watch::Sender<Vec<u8>>,
) {
    run_renewal_every(client, settings, cert, ca_tx, RENEWAL_CHECK_INTERVAL).await;
}

/// Every `interval` (the first check one interval from now): re-reads the Secret as at start-up, renews the
/// serving certificate when due, serves whatever the Secret then holds through `cert` (so a renewal by another
/// replica is picked up too) and publishes a changed CA on `ca_tx`. Failures are logged and the current
/// certificate stays. Runs until the task is dropped.
pub async fn run_renewal_every(
    client: kube::Client,
    settings: ServingSettings,
    cert: Arc<ServingCert>,
    ca_tx: watch::Sender<Vec<u8>>,
    interval: Duration,
) {
    let secrets = Api::namespaced(client, &settings.namespace);
    let interval = interval.max(Duration::from_millis(10));
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match ensure(&secrets, &settings).await {
            Ok((material, _)) => serve(&cert, &ca_tx, &material),
            Err(error) => tracing::error!(
                %error,
                "Could not refresh the aggregated API server serving certificate; still serving the current one"
            ),
        }
    }
}

/// Swaps the served certificate when it changed and publishes a changed CA.
fn serve(cert: &ServingCert, ca_tx: &watch::Sender<Vec<u8>>, material: &TrustMaterial) {
    let new_leaf = CertificateDer::pem_slice_iter(&material.cert_pem)
        .next()
        .and_then(Result::ok);
    if cert.leaf() != new_leaf {
        if let Err(error) = cert.replace(&material.cert_pem, &material.key_pem) {
            tracing::error!(%error, "Cannot serve the aggregated API server certificate from the Secret; still serving the current one");
            return;
        }
        tracing::info!("Serving the new aggregated API server certificate");
    }
    ca_tx.send_if_modified(|ca| {
        if *ca == material.ca_cert_pem {
            return false;
        }
        ca.clone_from(&material.ca_cert_pem);
        true
    });
}

/// Why [`ensure`] failed; the message names the field or the missing permission (verb).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SecretError(pub String);

/// Loads, creates or renews the Secret; returns its (valid) material and what was done.
pub async fn ensure(
    secrets: &Api<Secret>,
    settings: &ServingSettings,
) -> Result<(TrustMaterial, Outcome), SecretError> {
    let secret_ref = settings.secret_ref();
    for _ in 0..MAX_ATTEMPTS {
        let now = Timestamp::now();
        let existing = secrets
            .get_opt(SECRET_NAME)
            .await
            .map_err(|e| SecretError(format!("get secret {secret_ref}: {}", kube_message(&e))))?;
        let attempt = match existing {
            None => create(secrets, settings, now).await?,
            Some(secret) if is_placeholder(&secret) => {
                fill_placeholder(secrets, settings, secret, now).await?
            }
            Some(secret) => adopt_or_renew(secrets, settings, secret, now).await?,
        };
        if let Some(done) = attempt {
            log_outcome(settings, &done.1);
            return Ok(done);
        }
    }
    Err(SecretError(format!(
        "secret {secret_ref} kept changing; gave up after {MAX_ATTEMPTS} attempts"
    )))
}

/// `None`: another replica wrote the Secret first; read it again.
type Attempt = Option<(TrustMaterial, Outcome)>;

async fn create(
    secrets: &Api<Secret>,
    settings: &ServingSettings,
    now: Timestamp,
) -> Result<Attempt, SecretError> {
    let secret_ref = settings.secret_ref();
    let material = material::generate(&settings.dns_names(), now).map_err(|e| SecretError(e.0))?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(SECRET_NAME.to_owned()),
            namespace: Some(settings.namespace.clone()),
            labels: Some(
                SECRET_LABELS
                    .iter()
                    .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        type_: Some(SECRET_TYPE.to_owned()),
        data: Some(secret_data(&material)),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(Some((material, Outcome::Created))),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
        Err(kube::Error::Api(status)) if status.code == 403 => Err(SecretError(format!(
            "create secret {secret_ref}: {}; if this identity may not create Secrets, create an empty placeholder \
             Secret {SECRET_NAME:?} of type {SECRET_TYPE:?} (no data) and the server fills it",
            status.message
        ))),
        Err(e) => Err(SecretError(format!(
            "create secret {secret_ref}: {}",
            kube_message(&e)
        ))),
    }
}

async fn fill_placeholder(
    secrets: &Api<Secret>,
    settings: &ServingSettings,
    mut secret: Secret,
    now: Timestamp,
) -> Result<Attempt, SecretError> {
    let secret_ref = settings.secret_ref();
    let material = material::generate(&settings.dns_names(), now).map_err(|e| SecretError(e.0))?;
    secret.data = Some(secret_data(&material));
    match replace_guarded(secrets, &secret).await {
        Ok(()) => Ok(Some((material, Outcome::FilledPlaceholder))),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
        Err(e) => Err(SecretError(format!(
            "fill placeholder secret {secret_ref}: {}",
            kube_message(&e)
        ))),
    }
}

async fn adopt_or_renew(
    secrets: &Api<Secret>,
    settings: &ServingSettings,
    mut secret: Secret,
    now: Timestamp,
) -> Result<Attempt, SecretError> {
    let secret_ref = settings.secret_ref();
    let data = plain_data(&secret);
    let valid = material::validate(secret.type_.as_deref(), immutable(&secret), &data, now).map_err(|e| {
        SecretError(format!(
            "secret {secret_ref}: {e}; fix it, or delete it so coder-k8s generates a new CA (clients that trust \
             the old CA must then be updated)"
        ))
    })?;
    let names = settings.dns_names();
    let Some(reason) = material::renewal_reason(&valid.leaf, &names, now) else {
        return Ok(Some((valid.material, Outcome::Adopted)));
    };
    let renewed = material::renew_serving_cert(&valid.material, &names, now).map_err(|e| SecretError(e.0))?;
    // Only the serving certificate and key change; every other key (above all the CA key) stays as read.
    let mut data = secret.data.take().unwrap_or_default();
    data.insert(
        material::CERT_KEY.to_owned(),
        ByteString(renewed.cert_pem.clone()),
    );
    data.insert(material::KEY_KEY.to_owned(), ByteString(renewed.key_pem.clone()));
    secret.data = Some(data);
    match replace_guarded(secrets, &secret).await {
        Ok(()) => Ok(Some((renewed, Outcome::Renewed(reason)))),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
        Err(e) => Err(SecretError(format!(
            "update secret {secret_ref}: {}",
            kube_message(&e)
        ))),
    }
}

/// An update guarded by the resourceVersion that was read, so a CA another replica wrote meanwhile is never
/// replaced: the API server answers 409 and the caller reads again.
async fn replace_guarded(secrets: &Api<Secret>, secret: &Secret) -> Result<(), kube::Error> {
    if secret
        .metadata
        .resource_version
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        return Err(kube::Error::Api(Box::new(kube::core::Status::failure(
            "assertion failed: the Secret read has no resourceVersion",
            "InternalError",
        ))));
    }
    secrets
        .replace(SECRET_NAME, &PostParams::default(), secret)
        .await
        .map(|_| ())
}

fn is_placeholder(secret: &Secret) -> bool {
    let keys = secret.data.as_ref().map_or(0, BTreeMap::len);
    material::is_placeholder(secret.type_.as_deref(), keys, immutable(secret))
}

fn immutable(secret: &Secret) -> bool {
    secret.immutable.unwrap_or(false)
}

fn plain_data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(key, value)| (key.clone(), value.0.clone()))
        .collect()
}

fn secret_data(material: &TrustMaterial) -> BTreeMap<String, ByteString> {
    material
        .to_data()
        .into_iter()
        .map(|(key, value)| (key, ByteString(value)))
        .collect()
}

/// The API server's own message (it names the verb, resource and user); other errors as they print.
fn log_outcome(settings: &ServingSettings, outcome: &Outcome) {
    let secret = settings.secret_ref();
    match outcome {
        Outcome::Adopted => {}
        Outcome::Created => {
            tracing::info!(%secret, "Created aggregated API server CA and serving certificate");
        }
        Outcome::FilledPlaceholder => tracing::info!(
            %secret,
            "Created aggregated API server CA and serving certificate in the placeholder Secret"
        ),
        Outcome::Renewed(reason) => {
            tracing::info!(%secret, %reason, "Renewed aggregated API server serving certificate");
        }
    }
}
