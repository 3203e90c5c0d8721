//! TLS to PostgreSQL with libpq's `sslmode` and `sslrootcert` meanings, on rustls with the ring provider.
//!
//! What is checked (the connection strategy per mode lives in `bootstrap::connect`):
//! - `verify-full`: the certificate chain and the host name;
//! - `verify-ca`: the chain only;
//! - `require`, `prefer`, `allow`: nothing, unless `sslrootcert` names a file: then the chain, as libpq does when a
//!   root certificate file is present.
//!
//! Trust anchors: the PEM file named by `sslrootcert`, else the system's CA certificates (`sslrootcert=system`, or
//! no `sslrootcert` at all: the operator has no `~/.postgresql/root.crt`, so the system store is its default).

use std::fmt;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP only.
    Disable,
    /// Plain first; TLS when the server refuses the plain connection.
    Allow,
    /// TLS first; plain when the server has no TLS or refuses the TLS connection (libpq's default).
    Prefer,
    /// TLS only; the certificate is checked only when `sslrootcert` names a file.
    Require,
    /// TLS only; the certificate chain is checked, the host name is not.
    VerifyCa,
    /// TLS only; the certificate chain and the host name are checked.
    VerifyFull,
}

impl SslMode {
    /// One of libpq's six spellings.
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "disable" => Self::Disable,
            "allow" => Self::Allow,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Allow => "allow",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }
}

/// libpq's `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCerts {
    /// Not set (or empty): the system's CA certificates when a check is asked for.
    Default,
    /// `sslrootcert=system`: the system's CA certificates.
    System,
    /// A PEM file in the operator's file system; only its certificates are trusted.
    File(PathBuf),
}

impl RootCerts {
    pub fn parse(value: &str) -> Self {
        match value {
            "" => Self::Default,
            "system" => Self::System,
            path => Self::File(PathBuf::from(path)),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Default | Self::System => "the system CA certificates".to_owned(),
            Self::File(path) => format!("the CA file sslrootcert={:?}", path.display().to_string()),
        }
    }
}

/// What the server certificate is checked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verification {
    Nothing,
    Chain,
    ChainAndHostName,
}

/// `sslrootcert=system` with an `sslmode` weaker than `verify-full`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeakSslModeWithSystemRoots;

/// The TLS part of a connection URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    mode: SslMode,
    root_certs: RootCerts,
}

impl TlsSettings {
    /// libpq's defaults: `prefer`, or `verify-full` with `sslrootcert=system`, which refuses any other mode.
    pub fn new(mode: Option<SslMode>, root_certs: RootCerts) -> Result<Self, WeakSslModeWithSystemRoots> {
        let system = root_certs == RootCerts::System;
        let mode = match mode {
            None if system => SslMode::VerifyFull,
            None => SslMode::Prefer,
            Some(mode) if system && mode != SslMode::VerifyFull => return Err(WeakSslModeWithSystemRoots),
            Some(mode) => mode,
        };
        Ok(Self { mode, root_certs })
    }

    pub fn mode(&self) -> SslMode {
        self.mode
    }

    pub fn root_certs(&self) -> &RootCerts {
        &self.root_certs
    }

    pub fn verification(&self) -> Verification {
        match (self.mode, &self.root_certs) {
            (SslMode::VerifyFull, _) => Verification::ChainAndHostName,
            (SslMode::VerifyCa, _) | (_, RootCerts::File(_)) => Verification::Chain,
            _ => Verification::Nothing,
        }
    }
}

/// TLS could not be set up or the handshake failed. Never contains the URL or a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TlsFailure(String);

impl TlsFailure {
    pub fn message(&self) -> &str {
        &self.0
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The trust anchors for `settings`: the `sslrootcert` file, else the system store.
async fn load_roots(root_certs: &RootCerts) -> Result<RootCertStore, TlsFailure> {
    let mut store = RootCertStore::empty();
    match root_certs {
        RootCerts::File(path) => {
            let shown = root_certs.describe();
            let pem = tokio::fs::read(path)
                .await
                .map_err(|e| TlsFailure(format!("cannot read {shown}: {e}")))?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| TlsFailure(format!("{shown} is not valid PEM: {e}")))?;
                store
                    .add(cert)
                    .map_err(|e| TlsFailure(format!("{shown} holds an unusable certificate: {e}")))?;
            }
            if store.is_empty() {
                return Err(TlsFailure(format!("{shown} holds no PEM certificate")));
            }
        }
        RootCerts::Default | RootCerts::System => {
            let loaded = tokio::task::spawn_blocking(rustls_native_certs::load_native_certs)
                .await
                .map_err(|e| TlsFailure(format!("loading the system CA certificates failed: {e}")))?;
            let (added, _ignored) = store.add_parsable_certificates(loaded.certs);
            if added == 0 {
                return Err(TlsFailure(
                    "no system CA certificates found; set sslrootcert to the file of the CA that signed the \
                     PostgreSQL server certificate"
                        .to_owned(),
                ));
            }
        }
    }
    Ok(store)
}

/// A tokio-postgres TLS connector for `settings`. `attempted` turns true once a TLS handshake starts, so the
/// caller can tell a TLS failure from a server that never offered TLS.
pub(crate) async fn connector(settings: &TlsSettings) -> Result<RustlsConnect, TlsFailure> {
    let provider = provider();
    let verification = settings.verification();
    let verifier: Arc<dyn ServerCertVerifier> = match verification {
        Verification::Nothing => Arc::new(AcceptAnyCertificate(provider.clone())),
        Verification::Chain | Verification::ChainAndHostName => {
            let roots = load_roots(&settings.root_certs).await?;
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| TlsFailure(format!("setting up certificate verification failed: {e}")))?;
            if verification == Verification::Chain {
                Arc::new(ChainOnly(webpki))
            } else {
                webpki
            }
        }
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsFailure(format!("setting up TLS failed: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(RustlsConnect {
        config: Arc::new(config),
        context: Arc::new(HandshakeContext {
            mode: settings.mode,
            roots: settings.root_certs.describe(),
        }),
        attempted: Arc::new(AtomicBool::new(false)),
    })
}

/// `require`/`prefer`/`allow` without a CA file: encryption without authentication, as in libpq. The handshake
/// signatures are still checked, so the peer holds the key of the certificate it shows.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: webpki's checks except the host name. webpki checks the chain before the name, so a name
/// mismatch means the chain was valid.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// What a handshake error message needs to explain itself.
#[derive(Debug)]
struct HandshakeContext {
    mode: SslMode,
    roots: String,
}

impl HandshakeContext {
    /// A handshake error in words that point at the setting to change.
    fn explain(&self, error: &io::Error) -> TlsFailure {
        let mode = self.mode.as_str();
        let Some(tls) = error.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) else {
            return TlsFailure(format!("TLS handshake failed (sslmode={mode}): {error}"));
        };
        TlsFailure(match tls {
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
                "the server certificate is not signed by a CA in {} (sslmode={mode}); set sslrootcert to the file of \
                 the CA that signed it",
                self.roots
            ),
            rustls::Error::InvalidCertificate(
                name @ (CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }),
            ) => format!(
                "the server certificate does not match the host name in the URL (sslmode={mode} checks it; \
                 verify-ca does not): {name}"
            ),
            rustls::Error::InvalidCertificate(other) => {
                format!("the server certificate was rejected (sslmode={mode}): {other}")
            }
            other => format!("TLS handshake failed (sslmode={mode}): {other}"),
        })
    }
}

/// Makes one [`RustlsConnector`] per host tokio-postgres tries.
#[derive(Clone)]
pub(crate) struct RustlsConnect {
    config: Arc<rustls::ClientConfig>,
    context: Arc<HandshakeContext>,
    attempted: Arc<AtomicBool>,
}

impl RustlsConnect {
    /// Whether a TLS handshake was started with this connector.
    pub(crate) fn attempted(&self) -> bool {
        self.attempted.load(Ordering::SeqCst)
    }
}

impl<S> MakeTlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnector;
    type Error = TlsFailure;

    fn make_tls_connect(&mut self, host: &str) -> Result<RustlsConnector, TlsFailure> {
        // Called for every host, even without TLS (a Unix socket passes ""): a bad name only fails a handshake.
        Ok(RustlsConnector {
            connect: self.clone(),
            server_name: ServerName::try_from(host.to_owned()).ok(),
        })
    }
}

/// Wraps one connection to one host in TLS.
pub(crate) struct RustlsConnector {
    connect: RustlsConnect,
    server_name: Option<ServerName<'static>>,
}

impl<S> TlsConnect<S> for RustlsConnector
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = TlsFailure;
    type Future = Pin<Box<dyn Future<Output = Result<RustlsStream<S>, TlsFailure>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        self.connect.attempted.store(true, Ordering::SeqCst);
        Box::pin(async move {
            let Some(server_name) = self.server_name else {
                return Err(TlsFailure(
                    "TLS needs a host name or IP address in the URL (use sslmode=disable for a Unix socket)"
                        .to_owned(),
                ));
            };
            let connector = tokio_rustls::TlsConnector::from(self.connect.config.clone());
            connector
                .connect(server_name, stream)
                .await
                .map(RustlsStream)
                .map_err(|error| self.connect.context.explain(&error))
        })
    }
}

/// A TLS stream for tokio-postgres. It offers no channel binding: SCRAM then authenticates without `-PLUS`.
pub(crate) struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S> fmt::Debug for RustlsStream<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RustlsStream")
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_with_libpq_spellings() {
        for mode in [
            SslMode::Disable,
            SslMode::Allow,
            SslMode::Prefer,
            SslMode::Require,
            SslMode::VerifyCa,
            SslMode::VerifyFull,
        ] {
            assert_eq!(SslMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(SslMode::parse("Require"), None);
        assert_eq!(SslMode::parse("verify_full"), None);
    }

    fn settings(mode: Option<SslMode>, root: &str) -> TlsSettings {
        TlsSettings::new(mode, RootCerts::parse(root)).unwrap()
    }

    #[test]
    fn what_each_mode_verifies() {
        use Verification::*;
        let cases = [
            (SslMode::Disable, "", Nothing),
            (SslMode::Allow, "", Nothing),
            (SslMode::Prefer, "", Nothing),
            (SslMode::Require, "", Nothing),
            (SslMode::VerifyCa, "", Chain),
            (SslMode::VerifyFull, "", ChainAndHostName),
            // A CA file makes libpq check the chain in every mode.
            (SslMode::Allow, "/ca.crt", Chain),
            (SslMode::Prefer, "/ca.crt", Chain),
            (SslMode::Require, "/ca.crt", Chain),
            (SslMode::VerifyCa, "/ca.crt", Chain),
            (SslMode::VerifyFull, "/ca.crt", ChainAndHostName),
            (SslMode::VerifyFull, "system", ChainAndHostName),
        ];
        for (mode, root, expected) in cases {
            assert_eq!(
                settings(Some(mode), root).verification(),
                expected,
                "{mode:?} {root:?}"
            );
        }
    }

    #[test]
    fn system_roots_need_verify_full() {
        assert_eq!(settings(None, "system").mode(), SslMode::VerifyFull);
        assert_eq!(settings(None, "").mode(), SslMode::Prefer);
        for weak in [
            SslMode::Disable,
            SslMode::Allow,
            SslMode::Prefer,
            SslMode::Require,
            SslMode::VerifyCa,
        ] {
            assert_eq!(
                TlsSettings::new(Some(weak), RootCerts::System),
                Err(WeakSslModeWithSystemRoots),
                "{weak:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_missing_or_empty_ca_file_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("coder-k8s-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.crt");
        let err = load_roots(&RootCerts::File(missing.clone())).await.unwrap_err();
        assert!(
            err.message().starts_with(&format!(
                "cannot read the CA file sslrootcert={:?}",
                missing.display().to_string()
            )),
            "{err}"
        );
        let empty = dir.join("empty.crt");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = load_roots(&RootCerts::File(empty)).await.unwrap_err();
        assert!(err.message().ends_with("holds no PEM certificate"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
