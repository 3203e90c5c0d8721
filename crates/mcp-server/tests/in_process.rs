//! The MCP server built by this crate, served in-process on a loopback port against a real kube-apiserver and
//! reached with the rmcp client over HTTP: the Kubernetes tools with their happy paths, errors and limits, the
//! security rules of `/mcp` (token, rotation, Host, Origin, Content-Type, body cap), that no output carries a
//! Secret's data, and the end of a session (its DELETE, also through the official Python SDK). The aggregated-API
//! tools are covered through the binary (crates/coder-k8s tests).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use coder_k8s_mcp_server::{ServerSettings, TokenFile, router, serve};
use coder_k8s_testenv::ControlPlane;
use coder_k8s_testenv::mcp::{ToolOutcome, call, connect, python_mcp, seed_kubernetes_objects};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

const TOKEN: &str = "in-process-token-0123456789abcdef0123";

async fn control_plane() -> &'static ControlPlane {
    static CRDS: OnceCell<()> = OnceCell::const_new();
    let cp = coder_k8s_testenv::shared().await.expect("a control plane");
    CRDS.get_or_init(|| async {
        let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/crd/bases");
        for args in [
            vec!["apply", "--server-side", "-f", crds],
            vec![
                "wait",
                "--for=condition=Established",
                "crd",
                "--all",
                "--timeout=60s",
            ],
        ] {
            let out = cp.kubectl().args(&args).stdin(Stdio::null()).output().unwrap();
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    })
    .await;
    cp
}

/// A server of this test's runtime with its own token file.
struct Served {
    addr: SocketAddr,
    token_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Served {
    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

async fn start(cp: &ControlPlane) -> Served {
    let settings = ServerSettings {
        version: "test".to_owned(),
        ..ServerSettings::default()
    };
    start_with(cp, settings).await
}

async fn start_with(cp: &ControlPlane, settings: ServerSettings) -> Served {
    start_app(cp, settings, |app| app).await
}

/// Every request's method and answer status, in arrival order.
type Exchanges = Arc<Mutex<Vec<(http::Method, http::StatusCode)>>>;

/// A server whose every request and answer status is recorded where the HTTP server meets the application.
async fn start_recording(cp: &ControlPlane) -> (Served, Exchanges) {
    let exchanges = Exchanges::default();
    let recorded = exchanges.clone();
    let served = start_app(cp, ServerSettings::default(), move |app| {
        app.layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let recorded = recorded.clone();
                async move {
                    let method = request.method().clone();
                    let response = next.run(request).await;
                    recorded.lock().unwrap().push((method, response.status()));
                    response
                }
            },
        ))
    })
    .await;
    (served, exchanges)
}

async fn start_app(
    cp: &ControlPlane,
    settings: ServerSettings,
    wrap: impl FnOnce(axum::Router) -> axum::Router,
) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let token_path = dir.path().join("token");
    std::fs::write(&token_path, format!("{TOKEN}\n")).unwrap();
    let token = Arc::new(TokenFile::open(&token_path).unwrap());
    let app = wrap(router(cp.client().unwrap(), token, &settings, Default::default()));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, app, std::future::pending()));
    Served {
        addr,
        token_path,
        _dir: dir,
    }
}

#[tokio::test]
async fn every_kubernetes_tool_answers_from_the_real_api_server() {
    let cp = control_plane().await;
    let ns = cp.namespace("mcp-tools").await.unwrap();
    let kube = cp.client().unwrap();
    seed_kubernetes_objects(&kube, &ns).await.unwrap();
    let served = start(cp).await;
    let client = connect(&served.url(), TOKEN).await.unwrap();
    assert_eq!(
        client.peer_info().unwrap().server_info.clone().unwrap().name,
        "coder-k8s"
    );
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(
        tools.len(),
        25,
        "{:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );

    let listed = call(&client, "list_control_planes", json!({"namespace": ns.name()}))
        .await
        .unwrap();
    assert_eq!(
        listed.ok()["items"],
        json!([{"name": "coder", "namespace": ns.name(), "phase": "Ready", "readyReplicas": 1,
                "url": "http://coder.ns.svc.cluster.local"}])
    );
    let everywhere = call(&client, "list_control_planes", json!({})).await.unwrap();
    assert!(
        everywhere.ok()["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["namespace"] == ns.name())
    );

    let status = call(
        &client,
        "get_control_plane_status",
        json!({"namespace": ns.name(), "name": "coder"}),
    )
    .await
    .unwrap();
    assert_eq!(
        status.ok(),
        &json!({"observedGeneration": 1, "readyReplicas": 1, "url": "http://coder.ns.svc.cluster.local", "phase": "Ready",
                "conditions": [{"type": "Available", "status": "True", "reason": "Ready", "message": "all good",
                                "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    );

    let pods = call(
        &client,
        "list_control_plane_pods",
        json!({"namespace": ns.name(), "name": "coder"}),
    )
    .await
    .unwrap();
    let items = pods.ok()["items"].as_array().unwrap();
    assert_eq!(
        items
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["coder-a", "coder-b"]
    );
    assert_eq!(items[0]["totalContainers"], 2);
    assert_eq!(items[0]["readyContainers"], 0);
    assert!(pods.ok().get("truncated").is_none());
    let one = call(
        &client,
        "list_control_plane_pods",
        json!({"namespace": ns.name(), "name": "coder", "limit": 1}),
    )
    .await
    .unwrap();
    assert_eq!(one.ok()["items"].as_array().unwrap().len(), 1);
    assert_eq!(one.ok()["truncated"], true);

    let deployment = call(
        &client,
        "get_control_plane_deployment_status",
        json!({"namespace": ns.name(), "name": "coder"}),
    )
    .await
    .unwrap();
    let deployment = deployment.ok();
    assert_eq!(
        (
            deployment["replicas"].as_i64(),
            deployment["readyReplicas"].as_i64(),
            deployment["unavailableReplicas"].as_i64()
        ),
        (Some(2), Some(1), Some(1))
    );
    assert_eq!(deployment["conditions"][0]["type"], "Available");
    assert_eq!(deployment["conditions"][1]["reason"], "NewReplicaSetAvailable");

    let service = call(
        &client,
        "get_service_status",
        json!({"namespace": ns.name(), "name": "coder"}),
    )
    .await
    .unwrap();
    let service = service.ok();
    assert_eq!(service["type"], "ClusterIP");
    assert!(!service["clusterIP"].as_str().unwrap().is_empty());
    assert_eq!(
        service["ports"],
        json!([{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}])
    );
    assert_eq!(service["annotations"], json!({"team": "platform"}));

    let provisioner = call(
        &client,
        "get_provisioner_status",
        json!({"namespace": ns.name(), "name": "prov"}),
    )
    .await
    .unwrap();
    assert_eq!(provisioner.ok()["provisionerKeyName"], "prov-key");
    assert_eq!(provisioner.ok()["phase"], "Pending");
    assert_eq!(provisioner.ok()["conditions"][0]["reason"], "Ready");
    let proxy = call(
        &client,
        "get_workspace_proxy_status",
        json!({"namespace": ns.name(), "name": "proxy"}),
    )
    .await
    .unwrap();
    assert_eq!(
        proxy.ok(),
        &json!({"name": "proxy", "namespace": ns.name(), "phase": "Ready", "readyReplicas": 1, "observedGeneration": 2,
                "registered": true, "conditions": []})
    );

    let health = call(&client, "check_health", json!({})).await.unwrap();
    assert_eq!(health.ok(), &json!({"status": "ok", "version": "test"}));
}

#[tokio::test]
async fn events_are_filtered_and_paged() {
    let cp = control_plane().await;
    let ns = cp.namespace("mcp-events").await.unwrap();
    seed_kubernetes_objects(&cp.client().unwrap(), &ns).await.unwrap();
    let served = start(cp).await;
    let client = connect(&served.url(), TOKEN).await.unwrap();

    let all = call(&client, "get_events", json!({"namespace": ns.name()}))
        .await
        .unwrap();
    assert_eq!(all.ok()["items"].as_array().unwrap().len(), 4);
    assert!(all.ok().get("continue").is_none());
    let of_pod = call(
        &client,
        "get_events",
        json!({"namespace": ns.name(), "kind": "Pod"}),
    )
    .await
    .unwrap();
    assert_eq!(
        of_pod.ok()["items"],
        json!([{"type": "Warning", "reason": "BackOff", "message": "pod event", "count": 0}])
    );
    let mut reasons = Vec::new();
    let mut token = Value::Null;
    let mut pages = 0;
    loop {
        let mut args =
            json!({"namespace": ns.name(), "name": "coder", "kind": "CoderControlPlane", "limit": 2});
        if !token.is_null() {
            args["continue"] = token.clone();
        }
        let page = call(&client, "get_events", args).await.unwrap();
        let items = page.ok()["items"].as_array().unwrap().clone();
        assert!(items.len() <= 2, "{items:?}");
        reasons.extend(items.iter().map(|i| i["reason"].as_str().unwrap().to_owned()));
        pages += 1;
        token = page.ok().get("continue").cloned().unwrap_or(Value::Null);
        if token.is_null() {
            break;
        }
    }
    assert_eq!(pages, 2);
    reasons.sort();
    assert_eq!(reasons, ["Created", "Ready", "Scaled"]);
    let first = call(
        &client,
        "get_events",
        json!({"namespace": ns.name(), "name": "coder", "limit": 1}),
    )
    .await
    .unwrap();
    assert_eq!(
        first.ok()["items"][0]["lastTimestamp"].as_str().unwrap().len(),
        20
    );

    for (args, message) in [
        (json!({}), "namespace is required"),
        (
            json!({"namespace": ns.name(), "limit": 0}),
            "limit must be between 1 and 1000 (got 0)",
        ),
        (
            json!({"namespace": ns.name(), "limit": 1001}),
            "limit must be between 1 and 1000 (got 1001)",
        ),
        (
            json!({"namespace": ns.name(), "name": "a,b"}),
            "name \"a,b\" is not a valid object name: ',' is not allowed",
        ),
    ] {
        let failed = call(&client, "get_events", args.clone()).await.unwrap();
        assert!(failed.err().contains(message), "{args}: {}", failed.text);
    }
    let bad_token = call(
        &client,
        "get_events",
        json!({"namespace": ns.name(), "continue": "garbage"}),
    )
    .await
    .unwrap();
    assert!(
        bad_token.err().starts_with("list events in namespace"),
        "{}",
        bad_token.text
    );
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_that_say_what_is_wrong() {
    let cp = control_plane().await;
    let ns = cp.namespace("mcp-errors").await.unwrap();
    let served = start(cp).await;
    let client = connect(&served.url(), TOKEN).await.unwrap();
    let named = [
        "get_control_plane_status",
        "get_control_plane_deployment_status",
        "get_service_status",
        "get_provisioner_status",
        "get_workspace_proxy_status",
        "list_control_plane_pods",
        "get_pod_logs",
        "get_workspace",
        "get_template",
        "get_workspace_build_logs",
        "start_workspace",
        "stop_workspace",
    ];
    for tool in named {
        let missing_ns = call(&client, tool, json!({"name": "x"})).await.unwrap();
        assert_eq!(missing_ns.err(), "namespace is required", "{tool}");
        let missing_name = call(&client, tool, json!({"namespace": ns.name()}))
            .await
            .unwrap();
        assert_eq!(missing_name.err(), "name is required", "{tool}");
    }
    for tool in ["set_workspace_running", "set_template_running"] {
        let missing = call(&client, tool, json!({"namespace": ns.name(), "running": true}))
            .await
            .unwrap();
        assert_eq!(missing.err(), "name is required", "{tool}");
    }
    let not_found = call(
        &client,
        "get_control_plane_status",
        json!({"namespace": ns.name(), "name": "nope"}),
    )
    .await
    .unwrap();
    assert_eq!(
        not_found.err(),
        format!(
            "get CoderControlPlane {}/nope: codercontrolplanes.coder.com \"nope\" not found",
            ns.name()
        )
    );
    let unknown = call(
        &client,
        "get_service_status",
        json!({"namespace": ns.name(), "name": "x", "bogus": 1}),
    )
    .await
    .unwrap();
    assert!(
        unknown.err().contains("unknown field `bogus`"),
        "{}",
        unknown.text
    );
    let wrong_type = call(
        &client,
        "list_control_plane_pods",
        json!({"namespace": ns.name(), "name": "x", "limit": "9"}),
    )
    .await
    .unwrap();
    assert!(wrong_type.err().contains("invalid type"), "{}", wrong_type.text);
    for (args, message) in [
        (json!({"limit": 0}), "limit must be between 1 and 500 (got 0)"),
        (json!({"limit": 501}), "limit must be between 1 and 500 (got 501)"),
    ] {
        let mut args = args;
        args["namespace"] = json!(ns.name());
        args["name"] = json!("coder");
        assert_eq!(
            call(&client, "list_control_plane_pods", args)
                .await
                .unwrap()
                .err(),
            message
        );
    }
    for (args, message) in [
        (json!({"tailLines": -1}), "tailLines must be at least 0 (got -1)"),
        (
            json!({"limitBytes": 0}),
            "limitBytes must be between 1 and 1048576 (got 0)",
        ),
        (
            json!({"limitBytes": 1048577}),
            "limitBytes must be between 1 and 1048576 (got 1048577)",
        ),
    ] {
        let mut args = args;
        args["namespace"] = json!(ns.name());
        args["name"] = json!("pod");
        assert_eq!(call(&client, "get_pod_logs", args).await.unwrap().err(), message);
    }
    let unscheduled = call(
        &client,
        "get_pod_logs",
        json!({"namespace": ns.name(), "name": "missing"}),
    )
    .await
    .unwrap();
    assert!(
        unscheduled
            .err()
            .starts_with(&format!("stream logs for pod {}/missing: ", ns.name())),
        "{}",
        unscheduled.text
    );
}

/// A POST of an MCP message with the given headers, without the rmcp client's own.
async fn post(served: &Served, headers: &[(&str, &str)], body: &str) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(served.url())
        .header("accept", "application/json, text/event-stream")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

#[tokio::test]
async fn the_endpoint_refuses_what_the_security_rules_refuse() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cp = control_plane().await;
    let served = start(cp).await;
    let bearer = format!("Bearer {TOKEN}");
    let json = ("content-type", "application/json");

    // A valid request opens a session.
    let opened = post(&served, &[("authorization", &bearer), json], INITIALIZE).await;
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();

    for (headers, what) in [
        (vec![json], "no token"),
        (
            vec![
                ("authorization", "Bearer wrong-token-0123456789abcdef0123456"),
                json,
            ],
            "wrong token",
        ),
        (
            vec![("authorization", TOKEN), json],
            "token without the Bearer scheme",
        ),
        (
            vec![
                ("authorization", "Bearer wrong-token-0123456789abcdef0123456"),
                json,
                ("mcp-session-id", &session),
            ],
            "wrong token with an existing session id",
        ),
        (
            vec![json, ("mcp-session-id", &session)],
            "no token with an existing session id",
        ),
    ] {
        let response = post(&served, &headers, INITIALIZE).await;
        assert_eq!(response.status(), 401, "{what}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer", "{what}");
        assert!(!response.text().await.unwrap().contains(TOKEN), "{what}");
    }
    let session_get = reqwest::Client::new()
        .get(served.url())
        .header("mcp-session-id", &session)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(
        session_get.status(),
        401,
        "GET of a session's stream without a token"
    );

    let evil_host = post(
        &served,
        &[("authorization", &bearer), json, ("host", "evil.example:8090")],
        INITIALIZE,
    )
    .await;
    assert_eq!(evil_host.status(), 403);
    let cross_origin = post(
        &served,
        &[
            ("authorization", &bearer),
            json,
            ("origin", "https://evil.example"),
        ],
        INITIALIZE,
    )
    .await;
    assert_eq!(cross_origin.status(), 403);
    let cross_site = post(
        &served,
        &[("authorization", &bearer), json, ("sec-fetch-site", "cross-site")],
        INITIALIZE,
    )
    .await;
    assert_eq!(cross_site.status(), 403);
    let local_origin = post(
        &served,
        &[
            ("authorization", &bearer),
            json,
            ("origin", "http://localhost:6274"),
        ],
        INITIALIZE,
    )
    .await;
    assert_eq!(local_origin.status(), 200);
    let text = post(
        &served,
        &[("authorization", &bearer), ("content-type", "text/plain")],
        INITIALIZE,
    )
    .await;
    assert_eq!(text.status(), 415);
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(1 << 20)
    );
    let too_large = post(&served, &[("authorization", &bearer), json], &huge).await;
    assert_eq!(too_large.status(), 413);
    // Without Content-Length (chunked), the bytes are counted as they arrive.
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = huge
        .as_bytes()
        .chunks(64 * 1024)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let chunked = reqwest::Client::new()
        .post(served.url())
        .header("authorization", &bearer)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_eq!(chunked.status(), 413);

    // Health needs no token.
    for path in ["healthz", "readyz"] {
        let response = reqwest::get(format!("http://{}/{path}", served.addr))
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.text().await.unwrap(), "ok");
    }
}

#[tokio::test]
async fn a_rotated_token_file_takes_effect_without_a_restart() {
    let cp = control_plane().await;
    let served = start(cp).await;
    let client = connect(&served.url(), TOKEN).await.unwrap();
    assert!(!call(&client, "check_health", json!({})).await.unwrap().is_error);

    let rotated = "rotated-token-abcdefghijklmnopqrstuvwxyz-0123";
    let staged = served.token_path.with_extension("new");
    std::fs::write(&staged, format!("{rotated}\n")).unwrap();
    std::fs::rename(&staged, &served.token_path).unwrap();

    // The session opened with the old token cannot go on; the new token works at once.
    assert!(call(&client, "check_health", json!({})).await.is_err());
    assert!(connect(&served.url(), TOKEN).await.is_err());
    let renewed = connect(&served.url(), rotated).await.unwrap();
    assert_eq!(
        call(&renewed, "check_health", json!({})).await.unwrap().ok()["status"],
        "ok"
    );
}

#[tokio::test]
async fn no_tool_output_contains_a_secrets_data() {
    let cp = control_plane().await;
    let ns = cp.namespace("mcp-secret").await.unwrap();
    let kube = cp.client().unwrap();
    seed_kubernetes_objects(&kube, &ns).await.unwrap();
    let marker = "secret-marker-7f3a9c";
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "coder"},
        "stringData": {"token": marker, "uri": format!("postgres://u:{marker}@db/coder")},
    }))
    .unwrap();
    Api::<Secret>::namespaced(kube.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    // The Secret shares its name with the objects the tools read.
    let served = start(cp).await;
    let client = connect(&served.url(), TOKEN).await.unwrap();
    let object = json!({"namespace": ns.name(), "name": "coder"});
    let mut outputs = Vec::new();
    for (tool, args) in [
        ("list_control_planes", json!({})),
        ("get_control_plane_status", object.clone()),
        ("list_control_plane_pods", object.clone()),
        ("get_control_plane_deployment_status", object.clone()),
        ("get_service_status", object.clone()),
        ("get_events", json!({"namespace": ns.name()})),
        ("get_events", json!({"namespace": ns.name(), "kind": "Secret"})),
        (
            "get_provisioner_status",
            json!({"namespace": ns.name(), "name": "prov"}),
        ),
        (
            "get_workspace_proxy_status",
            json!({"namespace": ns.name(), "name": "proxy"}),
        ),
        ("check_health", json!({})),
    ] {
        let outcome: ToolOutcome = call(&client, tool, args).await.unwrap();
        assert!(!outcome.is_error, "{tool}: {}", outcome.text);
        outputs.push((tool, outcome.raw));
    }
    let encoded = "c2VjcmV0LW1hcmtlci03ZjNhOWM"; // base64 of the marker, without padding
    for (tool, raw) in &outputs {
        assert!(
            !raw.contains(marker) && !raw.contains(encoded),
            "{tool} returned Secret data: {raw}"
        );
    }
    assert_eq!(outputs.len(), 10);
    let pods = Api::<Pod>::namespaced(kube.clone(), &ns);
    assert!(
        pods.get_opt("coder-a").await.unwrap().is_some(),
        "the seeded objects exist"
    );
    let _ = Api::<Service>::namespaced(kube.clone(), &ns)
        .get("coder")
        .await
        .unwrap();
    let _ = Api::<Deployment>::namespaced(kube, &ns)
        .get("coder")
        .await
        .unwrap();
}

#[tokio::test]
async fn an_idle_session_expires() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cp = control_plane().await;
    let settings = ServerSettings {
        session_idle_timeout: std::time::Duration::from_secs(2),
        ..ServerSettings::default()
    };
    let served = start_with(cp, settings).await;
    let bearer = format!("Bearer {TOKEN}");
    let json = ("content-type", "application/json");
    let opened = post(&served, &[("authorization", &bearer), json], INITIALIZE).await;
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    drop(opened);
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let version = ("mcp-protocol-version", "2025-06-18");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let sent = post(
        &served,
        &[
            ("authorization", &bearer),
            json,
            version,
            ("mcp-session-id", &session),
        ],
        initialized,
    )
    .await;
    assert_eq!(sent.status(), 202);
    let alive = post(
        &served,
        &[
            ("authorization", &bearer),
            json,
            version,
            ("mcp-session-id", &session),
        ],
        ping,
    )
    .await;
    assert_eq!(alive.status(), 200, "a used session lives");
    drop(alive);
    tokio::time::sleep(std::time::Duration::from_millis(4500)).await;
    let expired = post(
        &served,
        &[
            ("authorization", &bearer),
            json,
            version,
            ("mcp-session-id", &session),
        ],
        ping,
    )
    .await;
    assert_eq!(
        expired.status(),
        404,
        "the session expired after the idle timeout"
    );
}

/// A session's DELETE with the given token.
async fn delete_session(served: &Served, token: &str, session: &str) -> reqwest::Response {
    reqwest::Client::new()
        .delete(served.url())
        .bearer_auth(token)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_session_delete_answers_204_and_ends_the_session() {
    let cp = control_plane().await;
    let served = start(cp).await;
    let bearer = format!("Bearer {TOKEN}");
    let json = ("content-type", "application/json");
    let opened = post(&served, &[("authorization", &bearer), json], INITIALIZE).await;
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    drop(opened);

    let unauthorized = delete_session(&served, "wrong-token-0123456789abcdef0123456789", &session).await;
    assert_eq!(
        unauthorized.status(),
        401,
        "a DELETE needs the token like any request"
    );
    let deleted = delete_session(&served, TOKEN, &session).await;
    assert_eq!(deleted.status(), 204);
    assert_eq!(deleted.text().await.unwrap(), "");
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let after = post(
        &served,
        &[
            ("authorization", &bearer),
            json,
            ("mcp-protocol-version", "2025-06-18"),
            ("mcp-session-id", &session),
        ],
        ping,
    )
    .await;
    assert_eq!(after.status(), 404, "the deleted session is gone");
}

/// The official Python SDK: open a session, call one tool, close the session (its DELETE); its log goes to stderr.
const PYTHON_SESSION: &str = r#"
import asyncio, logging, sys
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")

async def main(url, token):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                result = await session.call_tool("check_health", {})
                print("is_error", result.is_error)

asyncio.run(main(*sys.argv[1:]))
"#;

#[tokio::test]
async fn the_python_client_closes_its_session_without_a_termination_warning() {
    let cp = control_plane().await;
    let (served, exchanges) = start_recording(cp).await;
    let url = served.url();
    let output = tokio::task::spawn_blocking(move || {
        let python = python_mcp().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("session.py");
        std::fs::write(&script, PYTHON_SESSION).unwrap();
        std::process::Command::new(python)
            .arg(&script)
            .args([url.as_str(), TOKEN])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "python client: {stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "is_error False");
    // The client logs at DEBUG, so its log is there to search.
    assert!(stderr.contains("DEBUG"), "{stderr}");
    assert!(
        !stderr.contains("Session termination failed"),
        "the client warned on close: {stderr}"
    );
    let deletes: Vec<http::StatusCode> = exchanges
        .lock()
        .unwrap()
        .iter()
        .filter(|(method, _)| method == http::Method::DELETE)
        .map(|(_, status)| *status)
        .collect();
    assert_eq!(
        deletes,
        [http::StatusCode::NO_CONTENT],
        "one DELETE closed the session"
    );
}

/// Every tool call is counted by tool and outcome; a name that is no tool is counted as `unknown`.
#[tokio::test]
async fn tool_calls_are_counted_by_tool_and_outcome() {
    use coder_k8s_mcp_server::metrics::{Outcome, ToolMetrics};
    let cp = control_plane().await;
    let metrics = ToolMetrics::default();
    let settings = ServerSettings {
        version: "test".to_owned(),
        metrics: metrics.clone(),
        ..ServerSettings::default()
    };
    let served = start_with(cp, settings).await;
    let client = connect(&served.url(), TOKEN).await.unwrap();
    assert!(!call(&client, "check_health", json!({})).await.unwrap().is_error);
    assert!(!call(&client, "check_health", json!({})).await.unwrap().is_error);
    let failed = call(&client, "get_workspace", json!({"name": "x"}))
        .await
        .unwrap();
    assert!(failed.is_error);
    assert!(call(&client, "no_such_tool", json!({})).await.is_err());
    assert_eq!(metrics.count("check_health", Outcome::Ok), 2);
    assert_eq!(metrics.count("get_workspace", Outcome::Error), 1);
    assert_eq!(metrics.count("get_workspace", Outcome::Ok), 0);
    assert_eq!(metrics.count("unknown", Outcome::Invalid), 1);
    assert_eq!(
        metrics.count("no_such_tool", Outcome::Invalid),
        0,
        "no series per unknown name"
    );
}
