//! Test PKI, a TLS server running `serve` with a router that echoes what the authenticator decided, an HTTP
//! client over rustls (HTTP/1.1 or HTTP/2), and a kube client that records every request it sends.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use coder_k8s_aggregated_apiserver::generic::tls::{ServingCert, serve, server_config};
use coder_k8s_aggregated_apiserver::generic::{Authenticator, PeerCertificates};
use coder_k8s_testenv::ControlPlane;
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::client::ClientBuilder;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair,
};
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;

/// A CA that can sign certificates.
pub struct TestCa {
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A CA of the test control plane, from its certificate and key files (its subject is its CN alone).
    pub fn from_files(cert: &std::path::Path, key: &std::path::Path) -> Self {
        let pem = std::fs::read_to_string(cert).unwrap();
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
        let cn = parsed
            .subject()
            .iter_common_name()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::from_pem(&std::fs::read_to_string(key).unwrap()).unwrap();
        Self {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A client certificate with subject CN=`cn`, O=`orgs` (one O only: rcgen keeps one value per type).
    pub fn client(&self, cn: &str, org: Option<&str>) -> Identity {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        if let Some(org) = org {
            params.distinguished_name.push(DnType::OrganizationName, org);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Identity {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A `localhost` serving certificate and key (PEM).
    pub fn server(&self) -> (String, String) {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A client certificate and key (PEM).
#[derive(Clone)]
pub struct Identity {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Identity {
    pub fn from_files(cert: &std::path::Path, key: &std::path::Path) -> Self {
        Self {
            cert_pem: std::fs::read_to_string(cert).unwrap(),
            key_pem: std::fs::read_to_string(key).unwrap(),
        }
    }
}

/// The front-proxy client certificate kube-apiserver itself uses (CN `front-proxy-client`).
pub fn front_proxy_identity(cp: &ControlPlane) -> Identity {
    Identity::from_files(
        &cp.pki().front_proxy_client_cert,
        &cp.pki().front_proxy_client_key,
    )
}

/// A server running `serve` on a loopback port, stopped when dropped or by [`TestServer::stop`].
pub struct TestServer {
    pub addr: SocketAddr,
    pub serving: Arc<ServingCert>,
    pub serving_ca: TestCa,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    /// Serves `router` with `verifier`.
    pub async fn start(router: axum::Router, verifier: Arc<dyn ClientCertVerifier>) -> Self {
        let serving_ca = TestCa::new("serving-ca");
        let (cert, key) = serving_ca.server();
        let serving = Arc::new(ServingCert::from_pem(cert.as_bytes(), key.as_bytes()).unwrap());
        let config = server_config(serving.clone(), verifier).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, config, router, async move {
            let _ = stopped.await;
        }));
        Self {
            addr,
            serving,
            serving_ca,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Requests shutdown and waits for `serve` to return.
    pub async fn stop(mut self) -> std::io::Result<()> {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap()
    }

    pub fn client(&self) -> TlsClient {
        TlsClient {
            addr: self.addr,
            ca_pem: self.serving_ca.pem.clone(),
            identity: None,
            alpn: Vec::new(),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// A rustls client of a [`TestServer`].
#[derive(Clone)]
pub struct TlsClient {
    addr: SocketAddr,
    ca_pem: String,
    identity: Option<Identity>,
    alpn: Vec<Vec<u8>>,
}

/// What a request got back, and what the handshake showed.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    pub server_leaf: CertificateDer<'static>,
}

impl TlsClient {
    pub fn with_identity(mut self, identity: &Identity) -> Self {
        self.identity = Some(identity.clone());
        self
    }

    /// Trusts `ca_pem` instead of the server's CA.
    pub fn trusting(mut self, ca_pem: &str) -> Self {
        ca_pem.clone_into(&mut self.ca_pem);
        self
    }

    /// Offers only HTTP/2 through ALPN and speaks it.
    pub fn http2(mut self) -> Self {
        self.alpn = vec![b"h2".to_vec()];
        self
    }

    /// Completes a TLS handshake; returns the stream.
    pub async fn connect(&self) -> Result<tokio_rustls::client::TlsStream<TcpStream>, std::io::Error> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let builder =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots);
        let mut config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some(identity) => {
                let chain = CertificateDer::pem_slice_iter(identity.cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                let key = PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes()).unwrap();
                builder.with_client_auth_cert(chain, key).unwrap()
            }
        };
        config.alpn_protocols = self.alpn.clone();
        let tcp = TcpStream::connect(self.addr).await?;
        let stream = TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await?;
        // With TLS 1.3 a refused client certificate shows only on the first read, i.e. in the request.
        Ok(stream)
    }

    /// GET `path` with `headers`.
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Result<Answer, String> {
        let tls = self.connect().await.map_err(|e| format!("handshake: {e}"))?;
        let server_leaf = tls.get_ref().1.peer_certificates().unwrap()[0]
            .clone()
            .into_owned();
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
        let mut request = http::Request::get(format!("https://localhost{path}"));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Empty::<bytes::Bytes>::new()).unwrap();
        let io = TokioIo::new(tls);
        let response = if h2 {
            let (mut sender, connection) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            sender.send_request(request).await
        } else {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            sender.send_request(request).await
        }
        .map_err(|e| format!("request: {e}"))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok(Answer {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
            server_leaf,
        })
    }
}

/// `/whoami` answers the authenticator's decision as JSON (401 for none, the error's code for errors);
/// `/healthz` answers `ok` without authentication; `/peer` tells whether a client chain reached the router.
pub fn echo_router(authenticator: Arc<dyn Authenticator>) -> axum::Router {
    axum::Router::new()
        .route("/whoami", get(whoami))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/peer",
            get(|request: Request| async move {
                let chain = request
                    .extensions()
                    .get::<PeerCertificates>()
                    .map_or(0, |p| p.0.len());
                format!("{chain}")
            }),
        )
        .with_state(authenticator)
}

async fn whoami(State(authenticator): State<Arc<dyn Authenticator>>, request: Request) -> Response {
    let peer = request.extensions().get::<PeerCertificates>();
    match authenticator.authenticate(peer, request.headers()).await {
        Ok(Some(user)) => axum::Json(serde_json::json!({
            "name": user.name,
            "uid": user.uid,
            "groups": user.groups,
            "extra": user.extra,
        }))
        .into_response(),
        Ok(None) => StatusCode::UNAUTHORIZED.into_response(),
        Err(error) => error.into_response(),
    }
}

/// Every request a kube client sent: `<METHOD> <path>[?<query>]`.
#[derive(Clone, Default)]
pub struct RequestLog(Arc<Mutex<Vec<String>>>);

impl RequestLog {
    pub fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// How many requests went to a path ending in `path_suffix` with `method`.
    pub fn count(&self, method: &str, path_suffix: &str) -> usize {
        self.count_matching(|entry| {
            let path = entry.split('?').next().unwrap_or_default();
            entry.starts_with(&format!("{method} ")) && path.ends_with(path_suffix)
        })
    }

    pub fn count_matching(&self, predicate: impl Fn(&str) -> bool) -> usize {
        self.entries().iter().filter(|entry| predicate(entry)).count()
    }
}

/// A kube client for `config` that records each request in the returned log.
pub fn recording_client(config: kube::Config) -> (kube::Client, RequestLog) {
    let log = RequestLog::default();
    let recorder = log.clone();
    let layer = tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
        recorder
            .0
            .lock()
            .unwrap()
            .push(format!("{} {}", request.method(), request.uri()));
        request
    });
    let client = ClientBuilder::try_from(config)
        .unwrap()
        .with_layer(&layer)
        .build();
    (client, log)
}

/// A config impersonating `user` (no groups beyond `system:authenticated`).
pub fn config_as(cp: &ControlPlane, user: &str) -> kube::Config {
    let mut config = cp.config().unwrap();
    config.auth_info.impersonate = Some(user.to_owned());
    config
}

/// A user name nobody else in this run uses.
pub fn unique_user(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}
