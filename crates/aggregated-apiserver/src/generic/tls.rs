//! TLS serving: a serving certificate that can be replaced while the server runs (renewal without restart), and
//! the accept loop that puts each connection's client certificate chain into its requests.

use std::sync::{Arc, RwLock};

use rustls::crypto::ring::sign::any_supported_type;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate and key cannot be served.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CertError {
    #[error("the serving certificate holds no PEM certificate")]
    NoCertificate,
    #[error("the serving certificate PEM cannot be parsed")]
    BadCertificate,
    #[error("the serving key PEM cannot be parsed")]
    BadKey,
    #[error("the serving key type is not supported")]
    UnsupportedKey,
}

/// The certificate the server presents. [`ServingCert::replace`] swaps it for new handshakes; open connections
/// keep the one they started with.
#[derive(Debug)]
pub struct ServingCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ServingCert {
    /// From a PEM certificate chain (leaf first) and its PEM private key.
    pub fn from_pem(chain_pem: &[u8], key_pem: &[u8]) -> Result<Self, CertError> {
        Ok(Self {
            current: RwLock::new(Arc::new(certified_key(chain_pem, key_pem)?)),
        })
    }

    /// Serves a new certificate from the next handshake on. On error the current one stays.
    pub fn replace(&self, chain_pem: &[u8], key_pem: &[u8]) -> Result<(), CertError> {
        let key = Arc::new(certified_key(chain_pem, key_pem)?);
        // A poisoned lock only means a panic elsewhere while swapping an Arc; the value is still whole.
        let mut current = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *current = key;
        Ok(())
    }

    /// The leaf certificate now served (DER).
    pub fn leaf(&self) -> Option<CertificateDer<'static>> {
        self.current().cert.first().cloned()
    }

    fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn certified_key(chain_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, CertError> {
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| CertError::BadCertificate)?;
    if chain.is_empty() {
        return Err(CertError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| CertError::BadKey)?;
    let signing_key = any_supported_type(&key).map_err(|_| CertError::UnsupportedKey)?;
    Ok(CertifiedKey::new(chain, signing_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn self_signed(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn replace_swaps_the_served_leaf_and_keeps_it_on_error() {
        let (cert_a, key_a) = self_signed("a.example");
        let (cert_b, key_b) = self_signed("b.example");
        let served = ServingCert::from_pem(cert_a.as_bytes(), key_a.as_bytes()).unwrap();
        let first = served.leaf().unwrap();
        served.replace(cert_b.as_bytes(), key_b.as_bytes()).unwrap();
        let second = served.leaf().unwrap();
        assert_ne!(first, second);
        assert_eq!(
            served.replace(b"", key_b.as_bytes()),
            Err(CertError::NoCertificate)
        );
        assert_eq!(served.replace(cert_b.as_bytes(), b"junk"), Err(CertError::BadKey));
        assert_eq!(served.leaf().unwrap(), second);
    }
}
