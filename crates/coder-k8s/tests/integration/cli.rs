//! The binary's flag errors (exit 1, exact v0.1.5 texts) and its health server, leader election and SIGTERM
//! handling against the real control plane.

use std::process::{Command, Stdio};
use std::time::Duration;

fn coder_k8s(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
        .args(args)
        .env("RUST_LOG", "off")
        .stdin(Stdio::null())
        .output()
        .expect("run coder-k8s")
}

fn assert_fails_with(args: &[&str], message: &str) {
    let out = coder_k8s(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(
        stderr.lines().any(|line| line == message),
        "{args:?}: expected line {message:?} in {stderr}"
    );
}

#[test]
fn unknown_app_exits_1_with_the_contract_message() {
    assert_fails_with(
        &["--app=bogus"],
        r#"assertion failed: unsupported --app value "bogus"; must be one of: all, controller, aggregated-apiserver, mcp-http"#,
    );
}

#[test]
fn coder_url_errors() {
    assert_fails_with(
        &["--app=controller", "--coder-url=coder.example.com"],
        r#"assertion failed: invalid --coder-url "coder.example.com": must include scheme and host (for example, https://coder.example.com)"#,
    );
    assert_fails_with(
        &["--app=controller", "--coder-url=ftp://coder.example.com"],
        r#"assertion failed: invalid --coder-url "ftp://coder.example.com": scheme must be http or https"#,
    );
}

#[test]
fn negative_request_timeout_is_refused() {
    let out = coder_k8s(&["--app=controller", "--coder-request-timeout=-1s"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("assertion failed: coder request timeout must not be negative")
    );
}

#[test]
fn mcp_http_needs_a_valid_token_file() {
    let out = coder_k8s(&["--app=mcp-http"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--mcp-token-file is required"));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "too-short-token\n").unwrap();
    let out = coder_k8s(&["--app=mcp-http", &format!("--mcp-token-file={}", file.display())]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("shorter than 32 bytes"), "{stderr}");
    assert!(!stderr.contains("too-short-token"), "the token leaked: {stderr}");
}

#[test]
fn standalone_aggregated_flags_must_be_complete() {
    let out = coder_k8s(&[
        "--app=aggregated-apiserver",
        "--coder-url=https://coder.example.com",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("coder client provider is partially configured: "));
    let out = coder_k8s(&[
        "--app=aggregated-apiserver",
        "--coder-url=https://coder.example.com",
        "--coder-session-token=abc",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .any(|l| l == "coder client provider namespace is not configured: configure --coder-namespace")
    );
}

fn free_port() -> u16 {
    let [port] = coder_k8s_testenv::free_ports().unwrap();
    port
}

async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    Some((status, body))
}

async fn wait_for_body(port: u16, path: &str, needle: &str) -> String {
    let mut last = String::new();
    for _ in 0..120 {
        if let Some((200, body)) = http_get(port, path).await {
            if body.contains(needle) {
                return body;
            }
            last = body;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("{path} never contained {needle:?}; last body: {last}");
}

fn sigterm(child: &std::process::Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    for _ in 0..100 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("coder-k8s did not stop within 10 s of SIGTERM");
}

#[tokio::test]
async fn mcp_mode_serves_health_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{}\n", "t".repeat(40))).unwrap();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
        .args(["--app=mcp-http", &format!("--mcp-token-file={}", file.display())])
        .arg(format!("--health-probe-bind-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_body(port, "/healthz", "ok").await;
    wait_for_body(port, "/readyz", "ok").await;
    sigterm(&child);
    assert!(wait_exit(&mut child).success());
}

#[tokio::test]
async fn controller_mode_takes_the_leader_lease_on_a_real_apiserver() {
    let cp = coder_k8s_testenv::shared().await.expect("control plane");
    let ns = cp.namespace("leader").await.expect("namespace");
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
        .args([
            "--app=controller",
            &format!("--health-probe-bind-address=127.0.0.1:{port}"),
        ])
        .env("KUBECONFIG", cp.kubeconfig_path())
        .env("POD_NAMESPACE", ns.name())
        .env("POD_NAME", "coder-k8s-test-0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let metrics = wait_for_body(port, "/metrics", "coder_k8s_leader 1").await;
    assert!(metrics.contains("coder_k8s_leader 1"));
    let out = cp
        .kubectl()
        .args([
            "get",
            "lease",
            "coder-k8s-controller.coder.com",
            "-n",
            ns.name(),
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "coder-k8s-test-0");
    sigterm(&child);
    assert!(wait_exit(&mut child).success());
}
