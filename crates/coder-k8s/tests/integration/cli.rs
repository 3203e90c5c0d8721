//! The binary's flag syntax and errors (Go's `flag` forms, exit 1, exact v0.1.5 texts) and its health server,
//! readiness, leader election and SIGTERM handling against the real control plane, PostgreSQL and the Coder API test
//! server.

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

#[test]
fn go_single_dash_forms_reach_the_same_checks() {
    let message = r#"assertion failed: unsupported --app value "bogus"; must be one of: all, controller, aggregated-apiserver, mcp-http"#;
    for form in [
        &["-app=bogus"][..],
        &["-app", "bogus"],
        &["--app", "bogus"],
        &["--app=bogus"],
        &["-leader-elect", "-app=bogus"],
        &["-leader-elect=false", "--app=controller", "-app=bogus"],
    ] {
        assert_fails_with(form, message);
    }
    assert_fails_with(
        &["-app", "controller", "-coder-url", "ftp://coder.example.com"],
        r#"assertion failed: invalid --coder-url "ftp://coder.example.com": scheme must be http or https"#,
    );
}

#[test]
fn bad_flags_exit_1_with_go_texts_and_the_usage() {
    for (args, message) in [
        (&["-bogus"][..], "flag provided but not defined: -bogus"),
        (&["--bogus=1"], "flag provided but not defined: -bogus"),
        (&["-app"], "flag needs an argument: -app"),
        (&["---app=controller"], "bad flag syntax: ---app=[redacted]"),
        (
            &["-leader-elect=maybe"],
            r#"invalid boolean value "maybe" for -leader-elect: parse error"#,
        ),
    ] {
        assert_fails_with(args, message);
        let stderr = String::from_utf8_lossy(&coder_k8s(args).stderr).into_owned();
        assert!(
            stderr.contains("--health-probe-bind-address"),
            "{args:?}: no usage in {stderr}"
        );
    }
    // A value clap's types refuse is a bad flag too: exit 1, not clap's 2.
    let out = coder_k8s(&["-max-concurrent-reconciles=0"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn help_prints_the_usage_and_exits_0() {
    for help in ["-h", "-help", "--help"] {
        let out = coder_k8s(&[help]);
        assert_eq!(out.status.code(), Some(0), "{help}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("--coder-url"),
            "{help}"
        );
    }
}

#[test]
fn coder_url_errors_never_quote_user_information() {
    for (url, shown) in [
        (
            "ftp://admin:hunter2@coder.example.com",
            "ftp://[redacted]@coder.example.com",
        ),
        ("admin:hunter2@coder.example.com", "[redacted]@coder.example.com"),
    ] {
        let out = coder_k8s(&["--app=controller", &format!("--coder-url={url}")]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(shown), "{stderr}");
        assert!(
            !stderr.contains("hunter2") && !stderr.contains("admin:"),
            "{stderr}"
        );
    }
}

fn free_port() -> u16 {
    let [port] = coder_k8s_testenv::free_ports().unwrap();
    port
}

pub(crate) async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http_get_at(std::net::Ipv4Addr::LOCALHOST.into(), port, path).await
}

async fn http_get_at(host: std::net::IpAddr, port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect((host, port)).await.ok()?;
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
    wait_exit_within(child, Duration::from_secs(10))
}

fn wait_exit_within(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("coder-k8s did not stop within {limit:?} of SIGTERM");
}

/// A running binary, killed if the test fails before it stops.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
        .arg(format!("--mcp-bind-address=127.0.0.1:{}", free_port()))
        .env("KUBECONFIG", unreachable_kubeconfig(dir.path()))
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

/// A kubeconfig whose API server refuses every connection: the watch caches can never fill.
fn unreachable_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{}\n\
         users:\n- name: u\n  user:\n    token: not-used\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n\
         current-context: c\n",
        free_port()
    );
    std::fs::write(&path, config).unwrap();
    path
}

#[tokio::test]
async fn not_ready_while_the_caches_cannot_fill_healthy_on_ipv4_and_ipv6_and_a_prompt_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Running(
        Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
            .args(["-app", "controller", "-leader-elect=false"])
            .arg(format!("-health-probe-bind-address=:{port}"))
            .env("KUBECONFIG", unreachable_kubeconfig(dir.path()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_body(port, "/healthz", "ok").await;
    let v6 = http_get_at(std::net::Ipv6Addr::LOCALHOST.into(), port, "/healthz").await;
    assert_eq!(v6, Some((200, "ok".to_owned())), "/healthz over IPv6");
    // The caches cannot fill, so readiness never comes, however long we ask.
    for _ in 0..10 {
        for host in [
            std::net::IpAddr::from(std::net::Ipv4Addr::LOCALHOST),
            std::net::Ipv6Addr::LOCALHOST.into(),
        ] {
            let readyz = http_get_at(host, port, "/readyz").await;
            assert_eq!(readyz.map(|(status, _)| status), Some(503), "{host}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Nothing is in flight: SIGTERM ends the process at once, not after the grace period.
    let started = std::time::Instant::now();
    sigterm(&child.0);
    assert!(wait_exit(&mut child.0).success());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn controller_mode_takes_the_leader_lease_on_a_real_apiserver() {
    let cp = crate::support::control_plane_with_crds().await;
    let ns = cp.namespace("leader").await.expect("namespace");
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
        .args([
            "--app=controller",
            &format!("--health-probe-bind-address=127.0.0.1:{port}"),
            // Only this test's namespace: a controller watching all of them would reconcile the other tests'
            // objects on the shared control plane while it runs.
            &format!("--watch-namespace={}", ns.name()),
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
    wait_for_body(port, "/readyz", "ok").await;
    let holder = || {
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
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(holder(), "coder-k8s-test-0");
    sigterm(&child);
    assert!(wait_exit(&mut child).success());
    // The Lease was given up on the way out, so a successor need not wait for it to expire.
    assert_eq!(holder(), "");
}

/// Polls `check` every 50 ms for up to 60 s.
async fn poll_until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    for _ in 0..1200 {
        if let Some(found) = check() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn sigterm_lets_the_reconcile_in_flight_write_its_status_starts_nothing_new_and_exits_0() {
    use coder_k8s_api::control_plane::CoderControlPlane;
    use coder_k8s_coder_testserver::{Config, Fault, FaultRule, TestServer};
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Api, Patch, PatchParams, PostParams};

    let cp = crate::support::control_plane_with_crds().await;
    let ns = cp.namespace("sigterm").await.unwrap();
    let db_url = coder_k8s_testenv::postgres::shared()
        .await
        .unwrap()
        .create_coder_database(&format!("cli_sigterm_{}", std::process::id()))
        .await
        .unwrap();
    let server = TestServer::start(Config::new(&db_url)).await.unwrap();
    // A Ready control plane's last Coder call is the entitlements read; its answer lands in the status write.
    server.add_fault(FaultRule {
        method: Some("GET".to_owned()),
        path_prefix: "/api/v2/entitlements".to_owned(),
        fault: Fault::Latency(Duration::from_secs(4)),
        times: None,
    });
    let admin = cp.client().unwrap();
    crate::control_plane::put_secret(
        &Api::<Secret>::namespaced(admin.clone(), ns.name()),
        "coder-db-app",
        &[("uri", &db_url)],
    )
    .await;
    let spec = serde_json::json!({
        "database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}},
        "service": {"port": server.url().port().unwrap()},
    });
    let control_planes = Api::<CoderControlPlane>::namespaced(admin.clone(), ns.name());
    control_planes
        .create(
            &PostParams::default(),
            &CoderControlPlane::new("coder", serde_json::from_value(spec).unwrap()),
        )
        .await
        .unwrap();

    let port = free_port();
    let mut child = Running(
        Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
            .args([
                "-app=controller",
                "-leader-elect=false",
                "-service-address-override=127.0.0.1",
                "-requeue-interval=1s",
                "-entitlements-interval=1s",
            ])
            .arg(format!("-watch-namespace={}", ns.name()))
            .arg(format!("-health-probe-bind-address=127.0.0.1:{port}"))
            .env("KUBECONFIG", cp.kubeconfig_path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_body(port, "/readyz", "ok").await;
    // Ready replicas, as a kubelet would report them.
    let deployments = Api::<Deployment>::namespaced(admin.clone(), ns.name());
    let mut named = None;
    for _ in 0..300 {
        named = deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .next();
        if named.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let name = named.and_then(|d| d.metadata.name).expect("the Coder Deployment");
    let ready = serde_json::json!({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}});
    deployments
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&ready))
        .await
        .unwrap();

    poll_until("the entitlements read in flight", || {
        server
            .requests()
            .iter()
            .any(|r| r.path == "/api/v2/entitlements" && r.status == 0)
            .then_some(())
    })
    .await;
    let checked = |object: &CoderControlPlane| {
        object
            .status
            .as_ref()
            .and_then(|s| s.entitlements_last_checked.clone())
    };
    assert_eq!(
        checked(&control_planes.get("coder").await.unwrap()),
        None,
        "written before SIGTERM"
    );
    let requests_before = server.requests().len();
    sigterm(&child.0);

    // While the reconcile finishes, the replica reports itself not ready.
    let mut readyz = None;
    for _ in 0..40 {
        readyz = http_get(port, "/readyz").await.map(|(status, _)| status);
        if readyz == Some(503) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(readyz, Some(503), "/readyz during the grace period");
    // Waited for without blocking: the Coder test server answering the slow call runs on this test's runtime.
    let mut exit = None;
    for _ in 0..400 {
        exit = child.0.try_wait().unwrap();
        if exit.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        exit.and_then(|status| status.code()),
        Some(0),
        "exit within 40 s of SIGTERM"
    );
    let after = control_planes.get("coder").await.unwrap();
    assert!(
        checked(&after).is_some(),
        "the status write of the reconcile in flight: {:?}",
        after.status
    );
    let later: Vec<_> = server.requests().into_iter().skip(requests_before).collect();
    assert!(later.is_empty(), "Coder calls started after SIGTERM: {later:?}");
}
