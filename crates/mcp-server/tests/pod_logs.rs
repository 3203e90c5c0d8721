//! `get_pod_logs` through a real kube-apiserver: the pod runs on a node whose kubelet is a fake HTTPS server of
//! this test (kube-apiserver does not verify kubelet certificates unless configured to), which records the log
//! request kube-apiserver forwards and answers a fixed log. Checks the defaults and limits the tool sends
//! (tailLines, limitBytes) and that a log longer than limitBytes is cut and marked.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use coder_k8s_mcp_server::{ServerSettings, TokenFile, router, serve};
use coder_k8s_testenv::mcp::{call, connect};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const TOKEN: &str = "pod-logs-token-0123456789abcdef0123456";

/// A fake kubelet: every request gets `body`; the request lines are recorded.
async fn fake_kubelet(body: String) -> (u16, Arc<Mutex<Vec<String>>>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = seen.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, body, seen) = (acceptor.clone(), body.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && tls.read(&mut byte).await.unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                seen.lock().unwrap().push(line);
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, recorded)
}

#[tokio::test]
async fn pod_logs_are_read_through_kube_apiserver_with_their_defaults_and_limits() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let kube = cp.client().unwrap();
    let ns = cp.namespace("mcp-logs").await.unwrap();
    let log: String = (0..100).map(|i| format!("line {i:03}\n")).collect();
    let (port, seen) = fake_kubelet(log.clone()).await;

    let node_name = format!("fake-kubelet-{port}");
    let node: Node = serde_json::from_value(json!({"metadata": {"name": node_name}})).unwrap();
    let nodes = Api::<Node>::all(kube.clone());
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = json!({"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
    }});
    nodes
        .patch_status(&node_name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "app"},
        "spec": {"nodeName": node_name, "containers": [{"name": "main", "image": "app"}, {"name": "side", "image": "s"}]},
    }))
    .unwrap();
    Api::<Pod>::namespaced(kube.clone(), &ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let token_path = dir.path().join("token");
    std::fs::write(&token_path, TOKEN).unwrap();
    let app = router(
        kube.clone(),
        Arc::new(TokenFile::open(&token_path).unwrap()),
        &ServerSettings::default(),
        Default::default(),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve(listener, app, std::future::pending()));
    let client = connect(&url, TOKEN).await.unwrap();

    let all = call(
        &client,
        "get_pod_logs",
        json!({"namespace": ns.name(), "name": "app", "container": "main"}),
    )
    .await
    .unwrap();
    assert_eq!(all.ok()["logs"], log.as_str());
    let request = seen.lock().unwrap().last().cloned().unwrap();
    assert!(
        request.starts_with(&format!("GET /containerLogs/{}/app/main?", ns.name())),
        "{request}"
    );
    assert!(
        request.contains("tailLines=2000") && request.contains("limitBytes=1048577"),
        "{request}"
    );

    let cut = call(
        &client,
        "get_pod_logs",
        json!({"namespace": ns.name(), "name": "app", "container": "side", "tailLines": 5, "limitBytes": 20}),
    )
    .await
    .unwrap();
    assert_eq!(cut.ok()["logs"], format!("{}\n(truncated)", &log[..20]));
    let request = seen.lock().unwrap().last().cloned().unwrap();
    assert!(
        request.starts_with(&format!("GET /containerLogs/{}/app/side?", ns.name())),
        "{request}"
    );
    assert!(
        request.contains("tailLines=5") && request.contains("limitBytes=21"),
        "{request}"
    );

    // Two containers and none named: kube-apiserver's own error, as a tool error.
    let ambiguous = call(
        &client,
        "get_pod_logs",
        json!({"namespace": ns.name(), "name": "app"}),
    )
    .await
    .unwrap();
    assert!(
        ambiguous.err().contains("a container name must be specified"),
        "{}",
        ambiguous.text
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        2,
        "the ambiguous request never reached the kubelet"
    );
    nodes.delete(&node_name, &Default::default()).await.unwrap();
}
