//! The TLS accept loop: optional client certificates, ALPN, hot reload of the serving certificate, failed
//! handshakes that do not stop the loop, and graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::routing::get;
use coder_k8s_aggregated_apiserver::generic::authn::DelegatedAuthenticator;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::support::{TestCa, TestServer, echo_router, front_proxy_identity};

async fn server() -> (&'static coder_k8s_testenv::ControlPlane, TestServer) {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let authenticator = DelegatedAuthenticator::start(cp.client().unwrap()).await.unwrap();
    let server = TestServer::start(
        echo_router(authenticator.clone()),
        authenticator.client_cert_verifier(),
    )
    .await;
    (cp, server)
}

#[tokio::test]
async fn a_client_without_a_certificate_reaches_the_router() {
    let (_cp, server) = server().await;
    let answer = server.client().get("/healthz", &[]).await.unwrap();
    assert_eq!((answer.status, answer.body.as_str()), (200, "ok"));
    let peer = server.client().get("/peer", &[]).await.unwrap();
    assert_eq!(peer.body, "0", "no PeerCertificates without a client certificate");
}

#[tokio::test]
async fn the_client_chain_reaches_requests_over_http1_and_http2() {
    let (cp, server) = server().await;
    let proxy = server.client().with_identity(&front_proxy_identity(cp));
    let http1 = proxy.get("/peer", &[]).await.unwrap();
    assert_eq!((http1.status, http1.body.as_str()), (200, "1"));

    let h2 = proxy.clone().http2();
    let stream = h2.connect().await.unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(b"h2".as_slice()));
    drop(stream);
    let answer = h2.get("/whoami", &[("X-Remote-User", "over-h2")]).await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("\"name\":\"over-h2\""), "{}", answer.body);
}

#[tokio::test]
async fn a_replaced_serving_certificate_is_served_from_the_next_handshake() {
    let (_cp, server) = server().await;
    let before = server.client().get("/healthz", &[]).await.unwrap().server_leaf;
    assert_eq!(Some(&before), server.serving.leaf().as_ref());
    let (cert, key) = server.serving_ca.server();
    server.serving.replace(cert.as_bytes(), key.as_bytes()).unwrap();
    let after = server.client().get("/healthz", &[]).await.unwrap().server_leaf;
    assert_ne!(before, after);
    assert_eq!(Some(&after), server.serving.leaf().as_ref());
}

#[tokio::test]
async fn failed_handshakes_do_not_stop_the_loop() {
    let (_cp, server) = server().await;
    // Not TLS at all.
    let mut plain = TcpStream::connect(server.addr).await.unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // A client certificate of an unknown CA.
    let stranger = TestCa::new("stranger").client("mallory", None);
    assert!(
        server
            .client()
            .with_identity(&stranger)
            .get("/healthz", &[])
            .await
            .is_err()
    );
    // A client that does not trust the server.
    let untrusting = server.client().trusting(&TestCa::new("unrelated").pem);
    assert!(untrusting.get("/healthz", &[]).await.is_err());
    // An idle connection that never starts a handshake.
    let _idle = TcpStream::connect(server.addr).await.unwrap();

    // Served while the idle connection still waits for its handshake (which times out only after 10 s).
    let answer = tokio::time::timeout(Duration::from_secs(5), server.client().get("/healthz", &[]))
        .await
        .expect("a pending handshake must not hold up other connections")
        .unwrap();
    assert_eq!(answer.status, 200);
}

#[tokio::test]
async fn shutdown_lets_requests_in_flight_finish_and_stops_accepting() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let authenticator = DelegatedAuthenticator::start(cp.client().unwrap()).await.unwrap();
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
    let entered = Arc::new(std::sync::Mutex::new(Some(entered_tx)));
    let router = echo_router(authenticator.clone()).route(
        "/slow",
        get(move |_request: Request| {
            let entered = entered.clone();
            async move {
                if let Some(tx) = entered.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
                "finished"
            }
        }),
    );
    let server = TestServer::start(router, authenticator.client_cert_verifier()).await;
    let client = server.client();
    let addr = server.addr;
    let in_flight = tokio::spawn(async move { client.get("/slow", &[]).await });
    entered_rx.await.unwrap();
    server.stop().await.unwrap();
    let answer = in_flight.await.unwrap().unwrap();
    assert_eq!((answer.status, answer.body.as_str()), (200, "finished"));
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the listener is closed after shutdown"
    );
}

#[tokio::test]
async fn a_client_that_never_finishes_its_request_headers_is_disconnected() {
    let (_cp, server) = server().await;
    let mut stream = server.client().connect().await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    stream.flush().await.unwrap();
    let mut buffer = Vec::new();
    // hyper's HTTP/1 header read timeout is 30 s.
    let closed = tokio::time::timeout(Duration::from_secs(45), stream.read_to_end(&mut buffer)).await;
    assert!(closed.is_ok(), "the connection is still open after 45 s");
}
