//! TLS serving: a serving certificate that can be replaced while the server runs (renewal without restart), and
//! the accept loop that puts each connection's client certificate chain into its requests.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::crypto::ring::sign::any_supported_type;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

use super::StartupError;
use super::auth::PeerCertificates;

/// A client that opens a TCP connection and never finishes the handshake is dropped after this long.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// After shutdown is requested, requests in flight get this long before their connections close. Watches end at
/// once (see [`ServerStopping`]), so this bounds only slow ordinary requests.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// Accept errors (e.g. out of file descriptors) are usually transient; pausing avoids a busy loop.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);
/// Open connections at most (kube-apiserver keeps a few long-lived HTTP/2 connections to an aggregated server).
const MAX_CONNECTIONS: usize = 4096;
/// HTTP/2 keep-alive: a ping after this long without frames ...
const H2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// ... and the connection closes when the ping is not answered within this.
const H2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);

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

/// The TLS configuration the server listens with: `cert` as the served certificate (replaceable at run time),
/// client certificates checked by `verifier` (optional, so health probes work without one), ALPN `h2` and
/// `http/1.1`. Uses the ring provider explicitly, so it works whether or not a process-wide provider is installed.
pub fn server_config(
    cert: Arc<ServingCert>,
    verifier: Arc<dyn ClientCertVerifier>,
) -> Result<Arc<rustls::ServerConfig>, StartupError> {
    let mut config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|error| StartupError(format!("configure TLS: {error}")))?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `router` over TLS on `listener` until `shutdown` completes. Each request carries the connection's client
/// certificate chain as [`PeerCertificates`] (when one was presented) and its `ConnectInfo<SocketAddr>`. A failed
/// or slow handshake closes only that connection. On shutdown the listener closes at once; requests in flight get
/// up to 30 s to finish.
pub async fn serve(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let acceptor = TlsAcceptor::from(config);
    // Open connections are bounded: past the limit the server stops accepting until one closes, so clients that
    // hold connections open (no credential is needed to finish TLS) cannot exhaust file descriptors or memory.
    let limit = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = accept_within(&listener, &limit) => match accepted {
                Ok((tcp, remote, permit)) => {
                    let connection =
                        serve_connection(acceptor.clone(), tcp, remote, router.clone(), stop_rx.clone());
                    connections.spawn(async move {
                        connection.await;
                        drop(permit);
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // Receivers only fail when every connection is gone, which is fine.
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "closing connections still open after the shutdown grace period"
        );
        connections.shutdown().await;
    }
    Ok(())
}

/// A request extension that turns true when the server begins to shut down. Watches end their streams cleanly
/// then, as kube-apiserver's do: their clients re-watch through the Service and reach a replica that keeps running,
/// instead of holding this one's connections open until the grace period runs out.
#[derive(Clone, Debug)]
pub struct ServerStopping(pub watch::Receiver<bool>);

/// The next connection, once fewer than [`MAX_CONNECTIONS`] are open, with Nagle's algorithm off: an answer is
/// written as several pieces (HTTP/2 frames, TLS records), and with it on the last small piece would wait for the
/// peer's acknowledgement of the ones before, up to the peer's delayed-ACK timer (40 ms on Linux), on every answer
/// larger than one segment. Go, which kube-apiserver is written in, turns it off on every connection too.
async fn accept_within(
    listener: &TcpListener,
    limit: &Arc<tokio::sync::Semaphore>,
) -> std::io::Result<(TcpStream, SocketAddr, tokio::sync::OwnedSemaphorePermit)> {
    // The semaphore is never closed, so acquiring only waits.
    let permit = limit
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| std::io::Error::other("the connection limit was closed"))?;
    let (tcp, remote) = listener.accept().await?;
    if let Err(error) = tcp.set_nodelay(true) {
        // Only slower answers follow from it; the connection is served all the same.
        tracing::debug!(%remote, %error, "could not turn off Nagle's algorithm");
    }
    Ok((tcp, remote, permit))
}

async fn serve_connection(
    acceptor: TlsAcceptor,
    tcp: TcpStream,
    remote: SocketAddr,
    router: axum::Router,
    mut stop: watch::Receiver<bool>,
) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!(%remote, %error, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%remote, "TLS handshake timed out");
            return;
        }
    };
    let peer = peer_certificates(tls.get_ref().1);
    let stopping = ServerStopping(stop.clone());
    let service = router.map_request(move |mut request: http::Request<Incoming>| {
        if let Some(peer) = &peer {
            request.extensions_mut().insert(peer.clone());
        }
        request.extensions_mut().insert(ConnectInfo(remote));
        request.extensions_mut().insert(stopping.clone());
        request
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // With a timer, HTTP/1 applies its default 30 s limit on reading a request's headers (slow clients).
    builder.http1().timer(TokioTimer::new());
    // HTTP/2 has no header timer: keep-alive pings close connections whose peer stopped answering.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(H2_KEEP_ALIVE_INTERVAL))
        .keep_alive_timeout(H2_KEEP_ALIVE_TIMEOUT);
    let connection =
        builder.serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(service));
    let mut connection = std::pin::pin!(connection);
    let stopping = async move {
        // An error means the server is gone, which is a reason to stop as well.
        let _ = stop.wait_for(|stopping| *stopping).await;
    };
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = stopping => {
            connection.as_mut().graceful_shutdown();
            connection.as_mut().await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%remote, %error, "connection ended with an error");
    }
}

/// The chain the client presented, leaf first; `None` without a client certificate.
fn peer_certificates(connection: &rustls::ServerConnection) -> Option<PeerCertificates> {
    let chain = connection.peer_certificates()?;
    if chain.is_empty() {
        return None;
    }
    let owned = chain.iter().map(|cert| cert.clone().into_owned()).collect();
    Some(PeerCertificates(Arc::new(owned)))
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

    #[tokio::test]
    async fn accepted_connections_send_without_delay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let limit = Arc::new(tokio::sync::Semaphore::new(1));
        let (accepted, _client) = tokio::join!(accept_within(&listener, &limit), TcpStream::connect(address));
        let (tcp, _, _permit) = accepted.unwrap();
        assert!(
            tcp.nodelay().unwrap(),
            "Nagle's algorithm is on for an accepted connection"
        );
        assert_eq!(limit.available_permits(), 0, "the connection holds its permit");
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
