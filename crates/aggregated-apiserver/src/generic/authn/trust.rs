//! Certificate trust built from the authentication ConfigMap: one WebPKI verifier per CA (front proxy, cluster
//! clients), swapped as a whole when the ConfigMap changes, and the rustls verifier that consults the current ones
//! during each handshake.

use std::sync::{Arc, RwLock};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{WebPkiSupportedAlgorithms, ring};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::config::AuthConfig;

/// The parsed settings and the verifiers made from them.
#[derive(Debug)]
pub(crate) struct Trust {
    pub config: AuthConfig,
    client_ca: Option<Arc<dyn ClientCertVerifier>>,
    request_header_ca: Option<Arc<dyn ClientCertVerifier>>,
}

impl Trust {
    pub(crate) fn build(config: AuthConfig) -> Result<Self, String> {
        let client_ca = config
            .client_ca
            .as_deref()
            .map(|certs| verifier(certs, "client-ca-file"))
            .transpose()?;
        let request_header_ca = config
            .request_header
            .as_ref()
            .map(|rh| verifier(&rh.ca, "requestheader-client-ca-file"))
            .transpose()?;
        Ok(Self {
            config,
            client_ca,
            request_header_ca,
        })
    }

    /// Whether `chain` (leaf first) verifies against the front proxy CA now configured.
    pub(crate) fn is_request_header_chain(&self, chain: &[CertificateDer<'_>]) -> bool {
        verifies(self.request_header_ca.as_deref(), chain)
    }

    /// Whether `chain` (leaf first) verifies against the cluster client CA now configured.
    pub(crate) fn is_client_ca_chain(&self, chain: &[CertificateDer<'_>]) -> bool {
        verifies(self.client_ca.as_deref(), chain)
    }
}

fn verifier(certs: &[CertificateDer<'static>], key: &str) -> Result<Arc<dyn ClientCertVerifier>, String> {
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert.clone())
            .map_err(|error| format!("data[{key:?}] holds an unusable CA certificate: {error}"))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::new(ring::default_provider()))
        .allow_unauthenticated()
        .build()
        .map_err(|error| format!("data[{key:?}]: {error}"))
}

fn verifies(verifier: Option<&dyn ClientCertVerifier>, chain: &[CertificateDer<'_>]) -> bool {
    let (Some(verifier), Some((leaf, intermediates))) = (verifier, chain.split_first()) else {
        return false;
    };
    verifier
        .verify_client_cert(leaf, intermediates, UnixTime::now())
        .is_ok()
}

/// The current [`Trust`], shared by the authenticator, the ConfigMap watch and the TLS verifier.
pub(crate) type SharedTrust = Arc<RwLock<Arc<Trust>>>;

pub(crate) fn current(trust: &SharedTrust) -> Arc<Trust> {
    // A poisoned lock only means a panic elsewhere while swapping an Arc; the value is still whole.
    trust
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

pub(crate) fn replace(trust: &SharedTrust, next: Trust) {
    *trust.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(next);
}

/// Asks for a client certificate but does not require one (health probes have none); a certificate that is
/// presented must chain to the front proxy CA or the cluster client CA as they are at handshake time. Which of the
/// two it is, and what identity follows, the authenticator decides per request.
#[derive(Debug)]
pub(crate) struct DynamicClientVerifier {
    trust: SharedTrust,
    algorithms: WebPkiSupportedAlgorithms,
}

impl DynamicClientVerifier {
    pub(crate) fn new(trust: SharedTrust) -> Self {
        Self {
            trust,
            algorithms: ring::default_provider().signature_verification_algorithms,
        }
    }
}

impl ClientCertVerifier for DynamicClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    /// No hints: the acceptable CAs change at run time, and clients (Go's and rustls's) send their certificate
    /// when the server names none.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let trust = current(&self.trust);
        let mut last_error = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        for verifier in [&trust.request_header_ca, &trust.client_ca].into_iter().flatten() {
            match verifier.verify_client_cert(end_entity, intermediates, now) {
                Ok(verified) => return Ok(verified),
                Err(error) => last_error = error,
            }
        }
        Err(last_error)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };

    use super::*;
    use crate::generic::authn::config::RequestHeaderConfig;

    struct Ca {
        der: CertificateDer<'static>,
        issuer: Issuer<'static, KeyPair>,
    }

    fn ca(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    fn client_leaf(ca: &Ca, cn: &str) -> CertificateDer<'static> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        params.signed_by(&key, &ca.issuer).unwrap().der().clone()
    }

    fn trust(client: &Ca, proxy: &Ca) -> SharedTrust {
        let config = AuthConfig {
            client_ca: Some(vec![client.der.clone()]),
            request_header: Some(RequestHeaderConfig {
                ca: vec![proxy.der.clone()],
                ..RequestHeaderConfig::default()
            }),
        };
        Arc::new(RwLock::new(Arc::new(Trust::build(config).unwrap())))
    }

    #[test]
    fn each_chain_is_attributed_to_its_own_ca() {
        let (client, proxy, other) = (ca("client"), ca("proxy"), ca("other"));
        let shared = trust(&client, &proxy);
        let trust = current(&shared);
        let proxy_leaf = client_leaf(&proxy, "front-proxy-client");
        let client_leaf_ = client_leaf(&client, "carol");
        assert!(trust.is_request_header_chain(std::slice::from_ref(&proxy_leaf)));
        assert!(!trust.is_client_ca_chain(std::slice::from_ref(&proxy_leaf)));
        assert!(trust.is_client_ca_chain(std::slice::from_ref(&client_leaf_)));
        assert!(!trust.is_request_header_chain(std::slice::from_ref(&client_leaf_)));
        assert!(!trust.is_client_ca_chain(&[client_leaf(&other, "x")]));
        assert!(!trust.is_client_ca_chain(&[]));
    }

    #[test]
    fn the_handshake_verifier_accepts_either_ca_and_follows_replacement() {
        let (client, proxy, other) = (ca("client"), ca("proxy"), ca("other"));
        let shared = trust(&client, &proxy);
        let verifier = DynamicClientVerifier::new(shared.clone());
        assert!(verifier.offer_client_auth());
        assert!(!verifier.client_auth_mandatory());
        let now = UnixTime::now();
        assert!(
            verifier
                .verify_client_cert(&client_leaf(&client, "a"), &[], now)
                .is_ok()
        );
        assert!(
            verifier
                .verify_client_cert(&client_leaf(&proxy, "b"), &[], now)
                .is_ok()
        );
        let other_leaf = client_leaf(&other, "c");
        assert!(verifier.verify_client_cert(&other_leaf, &[], now).is_err());

        replace(
            &shared,
            Trust::build(AuthConfig {
                client_ca: Some(vec![other.der.clone()]),
                request_header: None,
            })
            .unwrap(),
        );
        assert!(verifier.verify_client_cert(&other_leaf, &[], now).is_ok());
        assert!(
            verifier
                .verify_client_cert(&client_leaf(&proxy, "b"), &[], now)
                .is_err()
        );
    }

    #[test]
    fn without_any_ca_every_certificate_is_refused() {
        let shared = Arc::new(RwLock::new(Arc::new(
            Trust::build(AuthConfig::default()).unwrap(),
        )));
        let verifier = DynamicClientVerifier::new(shared);
        let leaf = client_leaf(&ca("x"), "a");
        assert!(verifier.verify_client_cert(&leaf, &[], UnixTime::now()).is_err());
    }
}
