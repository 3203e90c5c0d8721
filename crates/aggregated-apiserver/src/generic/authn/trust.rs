//! Certificate trust built from the authentication ConfigMap: one WebPKI verifier per CA (front proxy, cluster
//! clients), swapped as a whole when the ConfigMap changes, and the rustls verifier that consults the current ones
//! during each handshake.
//!
//! Each request's chain is checked against the CAs configured when it arrives, so a CA taken out of the ConfigMap
//! stops the connections already open. The chains that verified are remembered by their bytes until the first of
//! their certificates expires: a connection presents the same chain on every request, and an ECDSA verification
//! costs more than the rest of a small request. The memory belongs to one [`Trust`], so a changed ConfigMap starts
//! with none.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{WebPkiSupportedAlgorithms, ring};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};
use sha2::{Digest as _, Sha256};

use super::config::AuthConfig;
use crate::generic::ttl_cache::TtlCache;

/// How long a verified chain is trusted without a new verification, at most (its certificates' expiry comes first).
const VERIFIED_TTL: Duration = Duration::from_secs(60);
/// Chains remembered at most: one per client connection (kube-apiserver keeps a few).
const VERIFIED_CAPACITY: usize = 1024;

/// Which CA a chain was verified against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum CaRole {
    RequestHeader,
    Client,
}

/// The parsed settings and the verifiers made from them.
#[derive(Debug)]
pub(crate) struct Trust {
    pub config: AuthConfig,
    client_ca: Option<Arc<dyn ClientCertVerifier>>,
    request_header_ca: Option<Arc<dyn ClientCertVerifier>>,
    /// Chains that verified, by the SHA-256 of their certificates and the CA, with when the first of them expires.
    verified: TtlCache<([u8; 32], CaRole), UnixTime>,
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
            verified: TtlCache::new(VERIFIED_TTL, VERIFIED_CAPACITY),
        })
    }

    /// Whether `chain` (leaf first) verifies against the front proxy CA now configured.
    pub(crate) fn is_request_header_chain(&self, chain: &[CertificateDer<'_>]) -> bool {
        self.verifies(CaRole::RequestHeader, chain, UnixTime::now(), Instant::now())
    }

    /// Whether `chain` (leaf first) verifies against the cluster client CA now configured.
    pub(crate) fn is_client_ca_chain(&self, chain: &[CertificateDer<'_>]) -> bool {
        self.verifies(CaRole::Client, chain, UnixTime::now(), Instant::now())
    }

    /// Whether `chain` verifies against `ca` at `now` (see [`Trust::verify`]).
    fn verifies(&self, ca: CaRole, chain: &[CertificateDer<'_>], now: UnixTime, clock: Instant) -> bool {
        self.verify(ca, chain, now, clock).is_ok()
    }

    /// `chain` (leaf first) verified against the front proxy CA or the cluster client CA, whichever is configured,
    /// as the TLS handshake asks: the error of the last CA tried when neither accepts it.
    fn verify_either(&self, chain: &[CertificateDer<'_>], now: UnixTime) -> Result<(), rustls::Error> {
        let clock = Instant::now();
        let mut last = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        for ca in [CaRole::RequestHeader, CaRole::Client] {
            if self.ca(ca).is_none() {
                continue;
            }
            match self.verify(ca, chain, now, clock) {
                Ok(()) => return Ok(()),
                Err(error) => last = error,
            }
        }
        Err(last)
    }

    /// `chain` verified against `ca` at `now`: remembered if it passed before and none of its certificates has
    /// expired since; otherwise verified, and remembered when it passes.
    fn verify(
        &self,
        ca: CaRole,
        chain: &[CertificateDer<'_>],
        now: UnixTime,
        clock: Instant,
    ) -> Result<(), rustls::Error> {
        let key = (chain_digest(chain), ca);
        if self
            .verified
            .get(&key, clock)
            .is_some_and(|expires| now.as_secs() < expires.as_secs())
        {
            return Ok(());
        }
        verify_now(self.ca(ca), chain, now)?;
        // A chain whose expiry cannot be read verified all the same; it is just not remembered.
        if let Some(expires) = first_expiry(chain) {
            self.verified.insert(key, expires, clock);
        }
        Ok(())
    }

    fn ca(&self, ca: CaRole) -> Option<&dyn ClientCertVerifier> {
        match ca {
            CaRole::RequestHeader => self.request_header_ca.as_deref(),
            CaRole::Client => self.client_ca.as_deref(),
        }
    }
}

/// The SHA-256 of the chain's certificates, each preceded by its length.
fn chain_digest(chain: &[CertificateDer<'_>]) -> [u8; 32] {
    let mut digest = Sha256::new();
    for cert in chain {
        digest.update((cert.len() as u64).to_be_bytes());
        digest.update(cert.as_ref());
    }
    digest.finalize().into()
}

/// When the first of the chain's certificates expires.
fn first_expiry(chain: &[CertificateDer<'_>]) -> Option<UnixTime> {
    chain
        .iter()
        .map(|cert| {
            let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
            u64::try_from(parsed.validity().not_after.timestamp()).ok()
        })
        .min()
        .flatten()
        .map(|secs| UnixTime::since_unix_epoch(Duration::from_secs(secs)))
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

/// `chain` verified against `verifier` at `now`, with no memory: what the memory saves.
fn verify_now(
    verifier: Option<&dyn ClientCertVerifier>,
    chain: &[CertificateDer<'_>],
    now: UnixTime,
) -> Result<(), rustls::Error> {
    let verifier = verifier.ok_or(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer))?;
    let (leaf, intermediates) = chain
        .split_first()
        .ok_or(rustls::Error::NoCertificatesPresented)?;
    verifier.verify_client_cert(leaf, intermediates, now).map(|_| ())
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
        // The chain is borrowed, not copied: only the slice of references is new. A chain that verified here is
        // remembered for the requests that follow on the connection (and on the next ones).
        let chain: Vec<CertificateDer<'_>> = std::iter::once(end_entity)
            .chain(intermediates)
            .map(|cert| CertificateDer::from(cert.as_ref()))
            .collect();
        current(&self.trust)
            .verify_either(&chain, now)
            .map(|()| ClientCertVerified::assertion())
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

    fn leaf_expiring(ca: &Ca, cn: &str, not_after: UnixTime) -> CertificateDer<'static> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_after = rcgen::date_time_ymd(1970, 1, 1) + Duration::from_secs(not_after.as_secs());
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
    fn a_chain_the_handshake_verified_is_remembered_for_its_ca_only() {
        let (client, proxy, other) = (ca("client"), ca("proxy"), ca("other"));
        let shared = trust(&client, &proxy);
        let verifier = DynamicClientVerifier::new(shared.clone());
        let trust = current(&shared);
        let (now, clock) = (UnixTime::now(), Instant::now());
        let proxy_leaf = client_leaf(&proxy, "front-proxy-client");
        let carol = client_leaf(&client, "carol");
        verifier.verify_client_cert(&proxy_leaf, &[], now).unwrap();
        verifier.verify_client_cert(&carol, &[], now).unwrap();
        let remembered = |leaf: &CertificateDer<'static>, ca| {
            let key = (chain_digest(std::slice::from_ref(leaf)), ca);
            trust.verified.get(&key, clock).is_some()
        };
        assert!(remembered(&proxy_leaf, CaRole::RequestHeader));
        assert!(remembered(&carol, CaRole::Client));
        assert!(
            !remembered(&carol, CaRole::RequestHeader),
            "tried first, refused, not remembered"
        );
        assert_eq!(trust.verified.len(), 2);
        // A refused chain is neither remembered nor answered with anything but the CA's own error.
        let refused = verifier.verify_client_cert(&client_leaf(&other, "x"), &[], now);
        assert_eq!(
            refused.unwrap_err(),
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)
        );
        assert_eq!(trust.verified.len(), 2);
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

    #[test]
    fn a_verified_chain_is_remembered_until_its_first_certificate_expires() {
        let (client, proxy) = (ca("client"), ca("proxy"));
        let trust = current(&trust(&client, &proxy));
        let now = UnixTime::now();
        let expires = UnixTime::since_unix_epoch(Duration::from_secs(now.as_secs() + 3_600));
        let chain = [leaf_expiring(&proxy, "front-proxy-client", expires)];
        let clock = Instant::now();
        assert!(trust.verifies(CaRole::RequestHeader, &chain, now, clock));
        let key = (chain_digest(&chain), CaRole::RequestHeader);
        assert_eq!(
            trust.verified.get(&key, clock).map(|e| e.as_secs()),
            Some(expires.as_secs())
        );
        // Past the expiry the memory is not used: the verification runs again, and fails.
        let later = UnixTime::since_unix_epoch(Duration::from_secs(expires.as_secs() + 1));
        assert!(!trust.verifies(CaRole::RequestHeader, &chain, later, clock));
    }

    #[test]
    fn a_remembered_chain_is_verified_again_after_the_time_to_live() {
        let (client, proxy) = (ca("client"), ca("proxy"));
        let trust = current(&trust(&client, &proxy));
        let (now, clock) = (UnixTime::now(), Instant::now());
        let expires = UnixTime::since_unix_epoch(Duration::from_secs(now.as_secs() + 86_400));
        // Planted for a chain of an unknown CA, as no verification would store it: seen while it lives, and
        // verified (and refused) once its time is up, however long its certificates are valid.
        let stranger = [client_leaf(&ca("other"), "x")];
        trust
            .verified
            .insert((chain_digest(&stranger), CaRole::Client), expires, clock);
        assert!(trust.verifies(CaRole::Client, &stranger, now, clock + VERIFIED_TTL / 2));
        assert!(!trust.verifies(CaRole::Client, &stranger, now, clock + VERIFIED_TTL));
    }

    #[test]
    fn a_remembered_chain_is_answered_without_a_verification_and_only_for_its_ca() {
        let (client, proxy, other) = (ca("client"), ca("proxy"), ca("other"));
        let trust = current(&trust(&client, &proxy));
        let stranger = [client_leaf(&other, "mallory")];
        let (now, clock) = (UnixTime::now(), Instant::now());
        let expires = UnixTime::since_unix_epoch(Duration::from_secs(now.as_secs() + 60));
        // Planted, as no verification would ever store it: a memory hit answers without verifying.
        trust
            .verified
            .insert((chain_digest(&stranger), CaRole::RequestHeader), expires, clock);
        assert!(trust.verifies(CaRole::RequestHeader, &stranger, now, clock));
        assert!(!trust.verifies(CaRole::Client, &stranger, now, clock));
    }

    #[test]
    fn a_refused_chain_is_not_remembered_and_a_new_trust_remembers_nothing() {
        let (client, proxy, other) = (ca("client"), ca("proxy"), ca("other"));
        let shared = trust(&client, &proxy);
        let first = current(&shared);
        assert!(!first.is_client_ca_chain(&[client_leaf(&other, "x")]));
        assert!(!first.is_request_header_chain(&[]));
        assert_eq!(first.verified.len(), 0);
        let proxy_leaf = [client_leaf(&proxy, "front-proxy-client")];
        assert!(first.is_request_header_chain(&proxy_leaf));
        assert_eq!(first.verified.len(), 1);

        // The ConfigMap drops the front proxy CA: the chain remembered under the old trust no longer passes.
        replace(
            &shared,
            Trust::build(AuthConfig {
                client_ca: Some(vec![client.der.clone()]),
                request_header: None,
            })
            .unwrap(),
        );
        let second = current(&shared);
        assert_eq!(second.verified.len(), 0);
        assert!(!second.is_request_header_chain(&proxy_leaf));
    }

    #[test]
    fn the_digest_tells_chains_apart_by_their_certificates_and_their_order() {
        let (client, proxy) = (ca("client"), ca("proxy"));
        let (a, b) = (client_leaf(&client, "a"), client_leaf(&proxy, "b"));
        let ab = chain_digest(&[a.clone(), b.clone()]);
        assert_eq!(ab, chain_digest(&[a.clone(), b.clone()]));
        assert_ne!(ab, chain_digest(&[b.clone(), a.clone()]));
        assert_ne!(ab, chain_digest(std::slice::from_ref(&a)));
        assert_ne!(chain_digest(&[]), chain_digest(&[a]));
    }
}
