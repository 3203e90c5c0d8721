//! The serving certificate's trust material as plain values: generating a CA and a serving certificate, checking
//! the Secret's data field by field, and deciding when the serving certificate is renewed. No I/O happens here.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData, SerialNumber, SignatureAlgorithm,
};
use rustls::SignatureScheme;
use rustls::sign::SigningKey as TlsSigningKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
use x509_parser::x509::SubjectPublicKeyInfo;

/// The Secret that holds the CA and the serving certificate, in the server's namespace.
pub const SECRET_NAME: &str = "coder-k8s-apiserver-tls";
/// Not `kubernetes.io/tls`: the Secret also holds the CA's private key.
pub const SECRET_TYPE: &str = "coder.com/aggregated-apiserver-serving-ca";
/// The Service in front of the server; the serving certificate is issued for its DNS names.
pub const DEFAULT_SERVICE_NAME: &str = "coder-k8s-apiserver";
pub const CA_CERT_KEY: &str = "ca.crt";
pub const CA_KEY_KEY: &str = "ca.key";
pub const CERT_KEY: &str = "tls.crt";
pub const KEY_KEY: &str = "tls.key";
/// The data keys in the order they are checked (and named in errors).
pub const DATA_KEYS: [&str; 4] = [CA_CERT_KEY, CA_KEY_KEY, CERT_KEY, KEY_KEY];
/// Labels of a Secret the server creates.
pub const SECRET_LABELS: [(&str, &str); 3] = [
    ("app.kubernetes.io/name", "coder-k8s"),
    ("app.kubernetes.io/component", "aggregated-apiserver-serving-ca"),
    ("app.kubernetes.io/managed-by", "coder-k8s"),
];

/// Lifetime of a generated CA.
pub const CA_VALIDITY: Duration = Duration::from_secs(3650 * 24 * 60 * 60);
/// Lifetime of a serving certificate.
pub const SERVING_CERT_VALIDITY: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// Serving certificates start an hour in the past so a peer whose clock is a little behind accepts them.
const CLOCK_SKEW_ALLOWANCE: Duration = Duration::from_secs(60 * 60);

/// The DNS names kube-apiserver and in-cluster clients use for `service` in `namespace`.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// The four PEM values the Secret holds.
#[derive(Clone, PartialEq, Eq)]
pub struct TrustMaterial {
    pub ca_cert_pem: Vec<u8>,
    pub ca_key_pem: Vec<u8>,
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl TrustMaterial {
    /// The Secret `data` for this material.
    pub fn to_data(&self) -> BTreeMap<String, Vec<u8>> {
        [
            (CA_CERT_KEY, &self.ca_cert_pem),
            (CA_KEY_KEY, &self.ca_key_pem),
            (CERT_KEY, &self.cert_pem),
            (KEY_KEY, &self.key_pem),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.clone()))
        .collect()
    }
}

/// Keys are never printed.
impl fmt::Debug for TrustMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrustMaterial")
            .field("ca_cert_pem", &String::from_utf8_lossy(&self.ca_cert_pem))
            .field("cert_pem", &String::from_utf8_lossy(&self.cert_pem))
            .finish_non_exhaustive()
    }
}

/// What the renewal decision needs to know of the serving certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafFacts {
    /// Unix seconds.
    pub not_before: i64,
    /// Unix seconds.
    pub not_after: i64,
    pub dns_names: Vec<String>,
    /// Usable for TLS servers: an extended key usage of serverAuth or any, or none at all.
    pub server_auth: bool,
}

/// Material that passed [`validate`].
#[derive(Clone, Debug)]
pub struct ValidMaterial {
    pub material: TrustMaterial,
    pub leaf: LeafFacts,
}

/// Why the Secret's content cannot be used. The message names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// Why new material could not be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GenerateError(pub String);

/// An empty placeholder the server may fill: the managed type, no data keys at all, and writable.
pub fn is_placeholder(secret_type: Option<&str>, data_keys: usize, immutable: bool) -> bool {
    secret_type == Some(SECRET_TYPE) && data_keys == 0 && !immutable
}

/// Checks the Secret's type and data: every key present, PEM that parses, a CA that is a valid CA now, keys that
/// match their certificates and a serving certificate the CA signed. An expired serving certificate is valid here
/// (it is renewed); an expired CA is not.
pub fn validate(
    secret_type: Option<&str>,
    immutable: bool,
    data: &BTreeMap<String, Vec<u8>>,
    now: Timestamp,
) -> Result<ValidMaterial, Invalid> {
    let actual_type = secret_type.unwrap_or("");
    if actual_type != SECRET_TYPE {
        return Err(Invalid(format!("type is {actual_type:?}, want {SECRET_TYPE:?}")));
    }
    if data.is_empty() && immutable {
        return Err(Invalid(
            "the Secret has no data and is immutable, so it cannot be filled as a placeholder".to_owned(),
        ));
    }
    let value = |key: &str| -> Result<Vec<u8>, Invalid> {
        match data.get(key) {
            Some(value) if !value.is_empty() => Ok(value.clone()),
            _ => Err(Invalid(format!("data[{key:?}] is missing or empty"))),
        }
    };
    let material = TrustMaterial {
        ca_cert_pem: value(CA_CERT_KEY)?,
        ca_key_pem: value(CA_KEY_KEY)?,
        cert_pem: value(CERT_KEY)?,
        key_pem: value(KEY_KEY)?,
    };
    let leaf = check_material(&material, now.as_second())?;
    Ok(ValidMaterial { material, leaf })
}

fn check_material(material: &TrustMaterial, now: i64) -> Result<LeafFacts, Invalid> {
    let ca_der = single_certificate(CA_CERT_KEY, &material.ca_cert_pem)?;
    let ca = parse_certificate(CA_CERT_KEY, &ca_der)?;
    check_ca(&ca, now)?;
    let ca_key = private_key(CA_KEY_KEY, &material.ca_key_pem)?;
    check_key_matches(CA_KEY_KEY, ca_key.as_ref(), CA_CERT_KEY, &ca)?;

    let leaf_der = single_certificate(CERT_KEY, &material.cert_pem)?;
    let leaf = parse_certificate(CERT_KEY, &leaf_der)?;
    if leaf.issuer().as_raw() != ca.subject().as_raw()
        || leaf.verify_signature(Some(ca.public_key())).is_err()
    {
        return Err(Invalid(format!(
            "data[{CERT_KEY:?}] is not signed by the CA in data[{CA_CERT_KEY:?}]"
        )));
    }
    let leaf_key = private_key(KEY_KEY, &material.key_pem)?;
    check_key_matches(KEY_KEY, leaf_key.as_ref(), CERT_KEY, &leaf)?;
    leaf_facts(&leaf).map_err(|problem| Invalid(format!("data[{CERT_KEY:?}]: {problem}")))
}

fn single_certificate(key: &str, pem: &[u8]) -> Result<CertificateDer<'static>, Invalid> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| Invalid(format!("data[{key:?}]: unparsable PEM certificate")))?;
    match <[_; 1]>::try_from(certificates) {
        Ok([certificate]) => Ok(certificate),
        Err(certificates) if certificates.is_empty() => Err(Invalid(format!(
            "data[{key:?}]: unparsable PEM certificate: no CERTIFICATE block"
        ))),
        Err(certificates) => Err(Invalid(format!(
            "data[{key:?}] holds {} certificates, want exactly 1",
            certificates.len()
        ))),
    }
}

fn parse_certificate<'a>(key: &str, der: &'a CertificateDer<'_>) -> Result<X509Certificate<'a>, Invalid> {
    X509Certificate::from_der(der)
        .map(|(_, certificate)| certificate)
        .map_err(|_| Invalid(format!("data[{key:?}]: unparsable certificate")))
}

fn check_ca(ca: &X509Certificate<'_>, now: i64) -> Result<(), Invalid> {
    let can_sign_certificates = matches!(ca.key_usage(), Ok(Some(usage)) if usage.value.key_cert_sign());
    if !ca.is_ca() || !can_sign_certificates {
        return Err(Invalid(format!("data[{CA_CERT_KEY:?}] is not a CA certificate")));
    }
    let not_before = ca.validity().not_before.timestamp();
    let not_after = ca.validity().not_after.timestamp();
    if now < not_before {
        return Err(Invalid(format!(
            "the CA in data[{CA_CERT_KEY:?}] is not valid until {}",
            rfc3339(not_before)
        )));
    }
    if now >= not_after {
        return Err(Invalid(format!(
            "the CA in data[{CA_CERT_KEY:?}] expired at {}",
            rfc3339(not_after)
        )));
    }
    Ok(())
}

fn private_key(key: &str, pem: &[u8]) -> Result<Arc<dyn TlsSigningKey>, Invalid> {
    let der = PrivateKeyDer::from_pem_slice(pem)
        .map_err(|_| Invalid(format!("data[{key:?}]: unparsable PEM private key")))?;
    rustls::crypto::ring::sign::any_supported_type(&der)
        .map_err(|_| Invalid(format!("data[{key:?}]: unsupported private key type")))
}

fn check_key_matches(
    key_field: &str,
    key: &dyn TlsSigningKey,
    cert_field: &str,
    certificate: &X509Certificate<'_>,
) -> Result<(), Invalid> {
    let matches = key.public_key().is_some_and(|spki| {
        SubjectPublicKeyInfo::from_der(&spki).is_ok_and(|(_, public)| {
            public.subject_public_key.data == certificate.public_key().subject_public_key.data
        })
    });
    if matches {
        Ok(())
    } else {
        Err(Invalid(format!(
            "data[{key_field:?}] does not match the certificate in data[{cert_field:?}]"
        )))
    }
}

fn leaf_facts(leaf: &X509Certificate<'_>) -> Result<LeafFacts, &'static str> {
    let dns_names = match leaf.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                _ => None,
            })
            .collect(),
        Ok(None) => Vec::new(),
        Err(_) => return Err("unparsable subject alternative names"),
    };
    let server_auth = match leaf.extended_key_usage() {
        Ok(Some(usage)) => usage.value.server_auth || usage.value.any,
        Ok(None) => true,
        Err(_) => return Err("unparsable extended key usage"),
    };
    Ok(LeafFacts {
        not_before: leaf.validity().not_before.timestamp(),
        not_after: leaf.validity().not_after.timestamp(),
        dns_names,
        server_auth,
    })
}

fn rfc3339(unix_seconds: i64) -> String {
    Timestamp::from_second(unix_seconds)
        .map_or_else(|_| format!("unix time {unix_seconds}"), |t| t.to_string())
}

/// Why the serving certificate is re-issued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenewalReason {
    NotYetValid,
    /// Less than a third of its lifetime is left (or it has expired).
    LessThanAThirdLeft,
    /// It does not cover a name of the Service, e.g. after the Secret was copied from another namespace.
    MissingName(String),
    NoServerAuth,
}

impl fmt::Display for RenewalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotYetValid => f.write_str("the serving certificate is not valid yet"),
            Self::LessThanAThirdLeft => {
                f.write_str("less than a third of the serving certificate's lifetime is left")
            }
            Self::MissingName(name) => write!(f, "the serving certificate does not cover {name}"),
            Self::NoServerAuth => f.write_str("the serving certificate is not usable for TLS servers"),
        }
    }
}

/// Whether (and why) the serving certificate must be re-issued for `names` at `now`.
pub fn renewal_reason(leaf: &LeafFacts, names: &[String], now: Timestamp) -> Option<RenewalReason> {
    let now = now.as_second();
    let lifetime = leaf.not_after.saturating_sub(leaf.not_before);
    let renew_at = leaf
        .not_before
        .saturating_add(lifetime / 3 * 2 + lifetime % 3 * 2 / 3);
    if now < leaf.not_before {
        return Some(RenewalReason::NotYetValid);
    }
    if now >= renew_at {
        return Some(RenewalReason::LessThanAThirdLeft);
    }
    if let Some(missing) = names
        .iter()
        .find(|name| !leaf.dns_names.iter().any(|dns| dns.eq_ignore_ascii_case(name)))
    {
        return Some(RenewalReason::MissingName(missing.clone()));
    }
    if !leaf.server_auth {
        return Some(RenewalReason::NoServerAuth);
    }
    None
}

/// A new CA (valid [`CA_VALIDITY`] from `now`) and a serving certificate for `names` signed by it.
pub fn generate(names: &[String], now: Timestamp) -> Result<TrustMaterial, GenerateError> {
    let ca_key = KeyPair::generate().map_err(|e| GenerateError(format!("generate CA key: {e}")))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(
        DnType::CommonName,
        format!("{DEFAULT_SERVICE_NAME}-ca@{}", now.as_second()),
    );
    params
        .distinguished_name
        .push(DnType::OrganizationName, "coder-k8s");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    params.not_before = system_time(now, Duration::ZERO, false).into();
    params.not_after = system_time(now, CA_VALIDITY, true).into();
    params.serial_number = Some(random_serial());
    let ca = params
        .self_signed(&ca_key)
        .map_err(|e| GenerateError(format!("generate CA certificate: {e}")))?;
    let with_ca = TrustMaterial {
        ca_cert_pem: ca.pem().into_bytes(),
        ca_key_pem: ca_key.serialize_pem().into_bytes(),
        cert_pem: Vec::new(),
        key_pem: Vec::new(),
    };
    renew_serving_cert(&with_ca, names, now)
}

/// The same CA with a new serving certificate (and key) for `names`, valid [`SERVING_CERT_VALIDITY`] from `now`
/// but not beyond the CA. The result is checked like a Secret read from the cluster, so nothing unusable is ever
/// written back.
pub fn renew_serving_cert(
    material: &TrustMaterial,
    names: &[String],
    now: Timestamp,
) -> Result<TrustMaterial, GenerateError> {
    let ca_der = single_certificate(CA_CERT_KEY, &material.ca_cert_pem).map_err(|e| GenerateError(e.0))?;
    let ca = parse_certificate(CA_CERT_KEY, &ca_der).map_err(|e| GenerateError(e.0))?;
    // rcgen rebuilds the issuer name from its parts; it supports one attribute per RDN only.
    if ca.subject().iter().any(|rdn| rdn.iter().count() != 1) {
        return Err(GenerateError(
            "cannot issue a serving certificate: the CA's subject has a multi-valued name part".to_owned(),
        ));
    }
    let ca_not_after = ca.validity().not_after.timestamp();
    let signer = CaSigner::new(&material.ca_key_pem, &ca)?;
    let issuer = Issuer::from_ca_cert_der(&ca_der, signer)
        .map_err(|e| GenerateError(format!("read the CA certificate: {e}")))?;

    let leaf_key = KeyPair::generate().map_err(|e| GenerateError(format!("generate serving key: {e}")))?;
    let mut params = CertificateParams::new(names.to_vec())
        .map_err(|e| GenerateError(format!("serving certificate names: {e}")))?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    let common_name = names.get(2).or(names.first()).cloned().unwrap_or_default();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.serial_number = Some(random_serial());
    params.not_before = system_time(now, CLOCK_SKEW_ALLOWANCE, false).into();
    let wanted_end = now.as_second().saturating_add(secs(SERVING_CERT_VALIDITY));
    params.not_after = unix_time(wanted_end.min(ca_not_after)).into();
    let leaf = params
        .signed_by(&leaf_key, &issuer)
        .map_err(|e| GenerateError(format!("sign serving certificate: {e}")))?;

    let renewed = TrustMaterial {
        ca_cert_pem: material.ca_cert_pem.clone(),
        ca_key_pem: material.ca_key_pem.clone(),
        cert_pem: leaf.pem().into_bytes(),
        key_pem: leaf_key.serialize_pem().into_bytes(),
    };
    check_material(&renewed, now.as_second()).map_err(|e| {
        GenerateError(format!(
            "assertion failed: the new serving certificate is unusable: {e}"
        ))
    })?;
    Ok(renewed)
}

/// A self-signed certificate for `localhost` and `127.0.0.1` (certificate PEM, key PEM), for a server outside a
/// cluster.
pub fn self_signed_localhost(now: Timestamp) -> Result<(Vec<u8>, Vec<u8>), GenerateError> {
    let key = KeyPair::generate().map_err(|e| GenerateError(format!("generate key: {e}")))?;
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .map_err(|e| GenerateError(format!("certificate names: {e}")))?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, format!("localhost@{}", now.as_second()));
    params.not_before = system_time(now, CLOCK_SKEW_ALLOWANCE, false).into();
    params.not_after = system_time(now, SERVING_CERT_VALIDITY, true).into();
    params.serial_number = Some(random_serial());
    let cert = params
        .self_signed(&key)
        .map_err(|e| GenerateError(format!("generate self-signed certificate: {e}")))?;
    Ok((cert.pem().into_bytes(), key.serialize_pem().into_bytes()))
}

fn secs(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

fn system_time(now: Timestamp, offset: Duration, forward: bool) -> SystemTime {
    let now = now.as_second();
    unix_time(if forward {
        now.saturating_add(secs(offset))
    } else {
        now.saturating_sub(secs(offset))
    })
}

fn unix_time(unix_seconds: i64) -> SystemTime {
    let magnitude = Duration::from_secs(unix_seconds.unsigned_abs());
    let time = if unix_seconds >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(magnitude)
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(magnitude)
    };
    time.unwrap_or(SystemTime::UNIX_EPOCH)
}

/// A positive 128-bit serial with its top byte set, so its DER encoding keeps all 16 bytes.
fn random_serial() -> SerialNumber {
    let mut bytes = *uuid::Uuid::new_v4().as_bytes();
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    SerialNumber::from_slice(&bytes)
}

/// Signs certificates with the CA key as stored in the Secret. rcgen's own key type reads PKCS#8 only; CA keys
/// written by other tools are often SEC1 (`EC PRIVATE KEY`) or PKCS#1, which rustls reads.
struct CaSigner {
    key: Arc<dyn TlsSigningKey>,
    scheme: SignatureScheme,
    algorithm: &'static SignatureAlgorithm,
    public_key: Vec<u8>,
}

/// The signature scheme used with each key type, as rustls and rcgen name it.
const SIGNING_SCHEMES: [(SignatureScheme, &SignatureAlgorithm); 4] = [
    (
        SignatureScheme::ECDSA_NISTP256_SHA256,
        &rcgen::PKCS_ECDSA_P256_SHA256,
    ),
    (
        SignatureScheme::ECDSA_NISTP384_SHA384,
        &rcgen::PKCS_ECDSA_P384_SHA384,
    ),
    (SignatureScheme::ED25519, &rcgen::PKCS_ED25519),
    (SignatureScheme::RSA_PKCS1_SHA256, &rcgen::PKCS_RSA_SHA256),
];

impl CaSigner {
    fn new(ca_key_pem: &[u8], ca: &X509Certificate<'_>) -> Result<Self, GenerateError> {
        let key = private_key(CA_KEY_KEY, ca_key_pem).map_err(|e| GenerateError(e.0))?;
        let (scheme, algorithm) = SIGNING_SCHEMES
            .into_iter()
            .find(|(scheme, _)| key.choose_scheme(&[*scheme]).is_some())
            .ok_or_else(|| GenerateError(format!("data[{CA_KEY_KEY:?}]: unsupported private key type")))?;
        Ok(Self {
            key,
            scheme,
            algorithm,
            public_key: ca.public_key().subject_public_key.data.to_vec(),
        })
    }
}

impl PublicKeyData for CaSigner {
    fn der_bytes(&self) -> &[u8] {
        &self.public_key
    }

    fn algorithm(&self) -> &'static SignatureAlgorithm {
        self.algorithm
    }
}

impl rcgen::SigningKey for CaSigner {
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        let signer = self
            .key
            .choose_scheme(&[self.scheme])
            .ok_or(rcgen::Error::RemoteKeyError)?;
        signer.sign(message).map_err(|_| rcgen::Error::RemoteKeyError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn at(unix_seconds: i64) -> Timestamp {
        Timestamp::from_second(unix_seconds).unwrap()
    }

    fn names() -> Vec<String> {
        service_dns_names(DEFAULT_SERVICE_NAME, "coder-system")
    }

    fn data_of(material: &TrustMaterial) -> BTreeMap<String, Vec<u8>> {
        material.to_data()
    }

    fn check(data: &BTreeMap<String, Vec<u8>>) -> Result<ValidMaterial, Invalid> {
        validate(Some(SECRET_TYPE), false, data, at(NOW))
    }

    fn problem(data: &BTreeMap<String, Vec<u8>>) -> String {
        check(data).unwrap_err().0
    }

    fn parsed(pem: &[u8]) -> (i64, i64, bool) {
        let der = single_certificate("x", pem).unwrap();
        let cert = parse_certificate("x", &der).unwrap();
        (
            cert.validity().not_before.timestamp(),
            cert.validity().not_after.timestamp(),
            cert.is_ca(),
        )
    }

    /// The SEC1 (`EC PRIVATE KEY`) form of a PKCS#8 P-256 key, as Go's x509.MarshalECPrivateKey writes CA keys.
    fn sec1_pem(pkcs8_pem: &[u8]) -> Vec<u8> {
        let der = PrivateKeyDer::from_pem_slice(pkcs8_pem).unwrap();
        let (_, outer) = x509_parser::der_parser::parse_der(der.secret_der()).unwrap();
        let items = outer.as_sequence().unwrap();
        let sec1 = items.last().unwrap().as_slice().unwrap();
        let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, sec1);
        format!("-----BEGIN EC PRIVATE KEY-----\n{encoded}\n-----END EC PRIVATE KEY-----\n").into_bytes()
    }

    /// Verifies the serving certificate against the CA for `name` as a TLS client does (webpki).
    fn verify_for(material: &TrustMaterial, name: &str) -> Result<(), rustls::Error> {
        use rustls::client::danger::ServerCertVerifier as _;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(&material.ca_cert_pem).unwrap())
            .unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let leaf = CertificateDer::from_pem_slice(&material.cert_pem).unwrap();
        let server_name = rustls_pki_types::ServerName::try_from(name.to_owned()).unwrap();
        verifier
            .verify_server_cert(&leaf, &[], &server_name, &[], rustls_pki_types::UnixTime::now())
            .map(|_| ())
    }

    #[test]
    fn tls_clients_accept_the_serving_certificate_for_each_service_name_only() {
        let material = generate(&names(), Timestamp::now()).unwrap();
        for name in names() {
            verify_for(&material, &name).unwrap();
        }
        assert!(verify_for(&material, "coder-k8s-apiserver.other.svc").is_err());
        let other = generate(&names(), Timestamp::now()).unwrap();
        let foreign = TrustMaterial {
            cert_pem: other.cert_pem,
            ..material
        };
        assert!(verify_for(&foreign, &names()[2]).is_err());
    }

    #[test]
    fn service_names_cover_every_in_cluster_form() {
        assert_eq!(
            service_dns_names("coder-k8s-apiserver", "ns1"),
            [
                "coder-k8s-apiserver",
                "coder-k8s-apiserver.ns1",
                "coder-k8s-apiserver.ns1.svc",
                "coder-k8s-apiserver.ns1.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn generated_material_is_valid_with_a_ten_year_ca_and_a_one_year_serving_certificate() {
        let material = generate(&names(), at(NOW)).unwrap();
        let valid = check(&data_of(&material)).unwrap();
        assert_eq!(valid.leaf.dns_names, names());
        assert!(valid.leaf.server_auth);
        assert_eq!(valid.leaf.not_before, NOW - 3600);
        assert_eq!(valid.leaf.not_after, NOW + 365 * 86400);
        let (ca_not_before, ca_not_after, is_ca) = parsed(&material.ca_cert_pem);
        assert!(is_ca);
        assert_eq!((ca_not_before, ca_not_after), (NOW, NOW + 3650 * 86400));
        assert!(
            !parsed(&material.cert_pem).2,
            "the serving certificate must not be a CA"
        );
        assert_eq!(renewal_reason(&valid.leaf, &names(), at(NOW)), None);
        assert_eq!(
            material.to_data().keys().collect::<Vec<_>>(),
            ["ca.crt", "ca.key", "tls.crt", "tls.key"]
        );
    }

    #[test]
    fn debug_output_never_shows_the_keys() {
        let material = generate(&names(), at(NOW)).unwrap();
        let printed = format!("{material:?}");
        assert!(!printed.contains("PRIVATE KEY"), "{printed}");
        assert!(printed.contains("CERTIFICATE"), "{printed}");
    }

    #[test]
    fn renewal_is_due_when_less_than_a_third_of_the_lifetime_is_left() {
        let leaf = LeafFacts {
            not_before: 0,
            not_after: 300,
            dns_names: names(),
            server_auth: true,
        };
        assert_eq!(renewal_reason(&leaf, &names(), at(0)), None);
        assert_eq!(renewal_reason(&leaf, &names(), at(199)), None);
        assert_eq!(
            renewal_reason(&leaf, &names(), at(200)),
            Some(RenewalReason::LessThanAThirdLeft)
        );
        assert_eq!(
            renewal_reason(&leaf, &names(), at(301)),
            Some(RenewalReason::LessThanAThirdLeft)
        );
        assert_eq!(
            renewal_reason(&leaf, &names(), at(-1)),
            Some(RenewalReason::NotYetValid)
        );
    }

    #[test]
    fn renewal_is_due_when_a_service_name_or_server_usage_is_missing() {
        let mut leaf = LeafFacts {
            not_before: 0,
            not_after: 300,
            dns_names: service_dns_names(DEFAULT_SERVICE_NAME, "elsewhere"),
            server_auth: true,
        };
        assert_eq!(
            renewal_reason(&leaf, &names(), at(10)),
            Some(RenewalReason::MissingName(
                "coder-k8s-apiserver.coder-system".to_owned()
            ))
        );
        leaf.dns_names = names();
        leaf.server_auth = false;
        assert_eq!(
            renewal_reason(&leaf, &names(), at(10)),
            Some(RenewalReason::NoServerAuth)
        );
    }

    #[test]
    fn a_generated_certificate_is_due_for_renewal_after_two_thirds_of_a_year() {
        let valid = check(&data_of(&generate(&names(), at(NOW)).unwrap())).unwrap();
        let lifetime = 365 * 86400 + 3600;
        let renew_at = NOW - 3600 + lifetime * 2 / 3;
        assert_eq!(renewal_reason(&valid.leaf, &names(), at(renew_at - 1)), None);
        assert_eq!(
            renewal_reason(&valid.leaf, &names(), at(renew_at)),
            Some(RenewalReason::LessThanAThirdLeft)
        );
    }

    #[test]
    fn renewal_keeps_the_ca_and_replaces_the_serving_certificate_and_key() {
        let material = generate(&names(), at(NOW)).unwrap();
        let later = NOW + 300 * 86400;
        let renewed = renew_serving_cert(&material, &names(), at(later)).unwrap();
        assert_eq!(renewed.ca_cert_pem, material.ca_cert_pem);
        assert_eq!(renewed.ca_key_pem, material.ca_key_pem);
        assert_ne!(renewed.cert_pem, material.cert_pem);
        assert_ne!(renewed.key_pem, material.key_pem);
        let valid = validate(Some(SECRET_TYPE), false, &renewed.to_data(), at(later)).unwrap();
        assert_eq!(valid.leaf.not_after, later + 365 * 86400);
        assert_eq!(renewal_reason(&valid.leaf, &names(), at(later)), None);
    }

    #[test]
    fn a_serving_certificate_never_outlives_its_ca() {
        let material = generate(&names(), at(NOW)).unwrap();
        let near_ca_end = NOW + 3650 * 86400 - 10 * 86400;
        let renewed = renew_serving_cert(&material, &names(), at(near_ca_end)).unwrap();
        let valid = validate(Some(SECRET_TYPE), false, &renewed.to_data(), at(near_ca_end)).unwrap();
        assert_eq!(valid.leaf.not_after, NOW + 3650 * 86400);
    }

    #[test]
    fn a_sec1_ca_key_as_go_writes_it_is_accepted_and_signs_renewals() {
        let today = Timestamp::now();
        let mut material = generate(&names(), today).unwrap();
        material.ca_key_pem = sec1_pem(&material.ca_key_pem);
        assert!(String::from_utf8_lossy(&material.ca_key_pem).contains("EC PRIVATE KEY"));
        validate(Some(SECRET_TYPE), false, &data_of(&material), today).unwrap();
        let renewed = renew_serving_cert(&material, &names(), today).unwrap();
        assert_eq!(renewed.ca_key_pem, material.ca_key_pem);
        assert_ne!(renewed.cert_pem, material.cert_pem);
        validate(Some(SECRET_TYPE), false, &data_of(&renewed), today).unwrap();
        verify_for(&renewed, "coder-k8s-apiserver.coder-system.svc").unwrap();
    }

    #[test]
    fn placeholders_are_the_managed_type_without_data_and_writable() {
        assert!(is_placeholder(Some(SECRET_TYPE), 0, false));
        assert!(!is_placeholder(Some(SECRET_TYPE), 0, true));
        assert!(!is_placeholder(Some(SECRET_TYPE), 1, false));
        assert!(!is_placeholder(Some("Opaque"), 0, false));
        assert!(!is_placeholder(None, 0, false));
    }

    #[test]
    fn a_wrong_type_is_named() {
        let data = data_of(&generate(&names(), at(NOW)).unwrap());
        assert_eq!(
            validate(Some("Opaque"), false, &data, at(NOW)).unwrap_err().0,
            r#"type is "Opaque", want "coder.com/aggregated-apiserver-serving-ca""#
        );
    }

    #[test]
    fn each_missing_or_empty_key_is_named() {
        let data = data_of(&generate(&names(), at(NOW)).unwrap());
        for key in DATA_KEYS {
            let mut missing = data.clone();
            missing.remove(key);
            assert_eq!(problem(&missing), format!("data[\"{key}\"] is missing or empty"));
            let mut empty = data.clone();
            empty.insert(key.to_owned(), Vec::new());
            assert_eq!(problem(&empty), format!("data[\"{key}\"] is missing or empty"));
        }
    }

    #[test]
    fn an_immutable_empty_secret_is_named() {
        let problem = validate(Some(SECRET_TYPE), true, &BTreeMap::new(), at(NOW))
            .unwrap_err()
            .0;
        assert!(problem.contains("immutable"), "{problem}");
    }

    #[test]
    fn unparsable_pem_is_named() {
        let data = data_of(&generate(&names(), at(NOW)).unwrap());
        for (key, expected) in [
            (CA_CERT_KEY, "data[\"ca.crt\"]: unparsable PEM certificate"),
            (CA_KEY_KEY, "data[\"ca.key\"]: unparsable PEM private key"),
            (CERT_KEY, "data[\"tls.crt\"]: unparsable PEM certificate"),
            (KEY_KEY, "data[\"tls.key\"]: unparsable PEM private key"),
        ] {
            let mut broken = data.clone();
            broken.insert(key.to_owned(), b"not pem".to_vec());
            let problem = problem(&broken);
            assert!(problem.starts_with(expected), "{key}: {problem}");
        }
    }

    #[test]
    fn two_certificates_in_one_field_are_named() {
        let material = generate(&names(), at(NOW)).unwrap();
        let mut data = data_of(&material);
        let mut both = material.ca_cert_pem.clone();
        both.extend_from_slice(&material.cert_pem);
        data.insert(CA_CERT_KEY.to_owned(), both);
        assert_eq!(
            problem(&data),
            "data[\"ca.crt\"] holds 2 certificates, want exactly 1"
        );
    }

    #[test]
    fn a_ca_certificate_that_is_no_ca_is_named() {
        let material = generate(&names(), at(NOW)).unwrap();
        let mut data = data_of(&material);
        data.insert(CA_CERT_KEY.to_owned(), material.cert_pem.clone());
        assert_eq!(problem(&data), "data[\"ca.crt\"] is not a CA certificate");
    }

    #[test]
    fn an_expired_or_future_ca_is_named() {
        let data = data_of(&generate(&names(), at(NOW)).unwrap());
        let expired = validate(Some(SECRET_TYPE), false, &data, at(NOW + 3651 * 86400))
            .unwrap_err()
            .0;
        assert!(
            expired.starts_with("the CA in data[\"ca.crt\"] expired at 20"),
            "{expired}"
        );
        let future = validate(Some(SECRET_TYPE), false, &data, at(NOW - 10))
            .unwrap_err()
            .0;
        assert!(
            future.starts_with("the CA in data[\"ca.crt\"] is not valid until 20"),
            "{future}"
        );
    }

    #[test]
    fn keys_that_do_not_match_their_certificates_are_named() {
        let material = generate(&names(), at(NOW)).unwrap();
        let other = generate(&names(), at(NOW)).unwrap();
        let mut data = data_of(&material);
        data.insert(CA_KEY_KEY.to_owned(), other.ca_key_pem.clone());
        assert_eq!(
            problem(&data),
            "data[\"ca.key\"] does not match the certificate in data[\"ca.crt\"]"
        );
        let mut data = data_of(&material);
        data.insert(KEY_KEY.to_owned(), other.key_pem.clone());
        assert_eq!(
            problem(&data),
            "data[\"tls.key\"] does not match the certificate in data[\"tls.crt\"]"
        );
    }

    #[test]
    fn a_serving_certificate_from_another_ca_is_named() {
        let material = generate(&names(), at(NOW)).unwrap();
        let other = generate(&names(), at(NOW)).unwrap();
        let mut data = data_of(&material);
        data.insert(CERT_KEY.to_owned(), other.cert_pem.clone());
        data.insert(KEY_KEY.to_owned(), other.key_pem.clone());
        assert_eq!(
            problem(&data),
            "data[\"tls.crt\"] is not signed by the CA in data[\"ca.crt\"]"
        );
    }

    #[test]
    fn an_expired_serving_certificate_is_valid_and_due_for_renewal() {
        let data = data_of(&generate(&names(), at(NOW)).unwrap());
        let later = at(NOW + 400 * 86400);
        let valid = validate(Some(SECRET_TYPE), false, &data, later).unwrap();
        assert_eq!(
            renewal_reason(&valid.leaf, &names(), later),
            Some(RenewalReason::LessThanAThirdLeft)
        );
    }

    #[test]
    fn the_localhost_certificate_is_servable() {
        let (cert, key) = self_signed_localhost(at(NOW)).unwrap();
        crate::generic::tls::ServingCert::from_pem(&cert, &key).unwrap();
        let der = single_certificate("x", &cert).unwrap();
        let parsed = parse_certificate("x", &der).unwrap();
        let facts = leaf_facts(&parsed).unwrap();
        assert_eq!(facts.dns_names, ["localhost"]);
    }
}
