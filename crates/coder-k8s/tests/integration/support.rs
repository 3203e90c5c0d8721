//! Helpers shared by the integration tests.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use coder_k8s_testenv::ControlPlane;
use tokio::sync::OnceCell;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared control plane with every CRD installed and Established (once per test process).
pub async fn control_plane_with_crds() -> &'static ControlPlane {
    static INSTALLED: OnceCell<()> = OnceCell::const_new();
    let cp = coder_k8s_testenv::shared()
        .await
        .expect("start the test control plane");
    INSTALLED.get_or_init(|| async { install_crds(cp) }).await;
    cp
}

/// Applies the CRDs of config/crd/bases and waits until they are Established.
pub fn install_crds(cp: &ControlPlane) {
    let out = kubectl(
        cp,
        &["apply", "--server-side", "-f", &path("config/crd/bases")],
        None,
    );
    assert_success(&out, "install CRDs");
    let out = kubectl(
        cp,
        &[
            "wait",
            "--for=condition=Established",
            "crd",
            "--all",
            "--timeout=60s",
        ],
        None,
    );
    assert_success(&out, "wait for CRDs");
}

pub fn path(relative: &str) -> String {
    repo_root().join(relative).display().to_string()
}

/// Runs the real kubectl against the control plane, with optional stdin.
pub fn kubectl(cp: &ControlPlane, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command: Command = cp.kubectl();
    command.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    if stdin.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().expect("run kubectl");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    child.wait_with_output().expect("wait for kubectl")
}

pub fn assert_success(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Polls `check` until it holds; fails the test naming `what` after 90 s.
pub async fn wait_for(mut check: impl AsyncFnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Longer than several requeue intervals of the controller test harness (its retry interval is 1 s), so a "nothing
/// happened" check covers several reconciles.
pub async fn several_requeues() {
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
}

/// A child process (the coder-k8s binary), killed if the test ends before it stops it.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Process {
    /// SIGTERM, then the exit status within 30 s.
    pub fn stop(mut self) -> std::process::ExitStatus {
        coder_k8s_testenv::send_signal("TERM", self.0.id());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "coder-k8s did not stop within 30 s of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `coder-k8s --app=controller` for `namespace` of `cp` as the tests run it out of cluster (Coder Services resolved
/// to this machine, 1 s requeues, only that namespace watched, cleanup records and the Lease there too, a free
/// health port); the caller adds `--leader-elect` and where stderr goes, then spawns it.
pub fn operator_command(cp: &ControlPlane, namespace: &str) -> Command {
    let [health] = coder_k8s_testenv::free_ports::<1>().expect("a free port");
    let mut command = Command::new(env!("CARGO_BIN_EXE_coder-k8s"));
    command
        .args([
            "--app=controller",
            "--service-address-override=127.0.0.1",
            "--requeue-interval=1s",
        ])
        .arg(format!("--watch-namespace={namespace}"))
        .arg(format!("--health-probe-bind-address=127.0.0.1:{health}"))
        .env("KUBECONFIG", cp.kubeconfig_path())
        .env("POD_NAMESPACE", namespace)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    command
}

/// A control plane of its own with kube-controller-manager, the scheduler and kwok, and a kwok node of each name
/// (pods scheduled there turn Running and Ready), started once in `cell`.
pub async fn kwok_control_plane(
    cell: &'static OnceCell<ControlPlane>,
    nodes: &[&str],
) -> &'static ControlPlane {
    cell.get_or_init(|| async {
        let cp = ControlPlane::builder()
            .with_kwok()
            .start()
            .await
            .expect("start a control plane with kwok");
        for node in nodes {
            cp.create_fake_node(node).await.expect("a fake node");
        }
        cp
    })
    .await
}

/// `gitopseval`, which runs the GitOps health rules in the engines Argo CD and Flux run them in, built from its Go
/// module (testenv/go/gitops) by hack/build-testenv.sh when missing.
fn gitopseval() -> std::path::PathBuf {
    static BINARY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BINARY
        .get_or_init(|| {
            let out = Command::new("bash")
                .arg(path("hack/build-testenv.sh"))
                .arg("gitops")
                .output()
                .expect("run hack/build-testenv.sh gitops");
            assert_success(&out, "hack/build-testenv.sh gitops");
            let dir = String::from_utf8_lossy(&out.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("gitops=").map(std::path::PathBuf::from))
                .expect("gitops=<bin dir> line");
            dir.join("gitopseval")
        })
        .clone()
}

/// `object` in a temporary file, for `gitopseval`.
fn object_file(object: &serde_json::Value) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), serde_json::to_vec(object).unwrap()).unwrap();
    file
}

/// The `(status, message)` of the Argo CD health rule in `rule` (a repository path) for `object`, run in gopher-lua
/// with the libraries Argo CD opens for a health customization.
pub fn argocd_health(rule: &str, object: &serde_json::Value) -> (String, String) {
    let file = object_file(object);
    let out = Command::new(gitopseval())
        .args(["argocd", &path(rule)])
        .arg(file.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let health: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        health["status"].as_str().unwrap().to_owned(),
        health["message"].as_str().unwrap().to_owned(),
    )
}

/// The status Flux gives `object` with the health check of `kind` in `rule` (a repository path): `InProgress`,
/// `Failed` or `Current`, evaluated with cel-go as Flux's status evaluator does. An expression Flux cannot evaluate
/// fails the test.
pub fn flux_health(rule: &str, kind: &str, object: &serde_json::Value) -> String {
    let text = std::fs::read_to_string(path(rule)).unwrap();
    let kustomization: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let check = &kustomization["spec"]["healthCheckExprs"][0];
    assert_eq!(check["kind"], kind);
    let expression = |key: &str| check[key].as_str().unwrap_or_default().to_owned();
    let file = object_file(object);
    let out = Command::new(gitopseval())
        .args([
            "flux",
            &expression("inProgress"),
            &expression("failed"),
            &expression("current"),
        ])
        .arg(file.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "Flux cannot evaluate the health check of {kind}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The message of the `Ready` condition in `conditions` (empty when there is none).
pub fn ready_message(conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]) -> String {
    conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Waits (up to 60 s) until the object's `Ready` condition has `reason` for its current generation
/// (`status.observedGeneration` equal to `metadata.generation`); returns the object's `status` as JSON-typed `S`.
pub async fn wait_ready_reason<K, S>(api: &kube::Api<K>, name: &str, reason: &str) -> S
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    S: serde::de::DeserializeOwned + Default,
{
    let mut last = serde_json::Value::Null;
    for _ in 0..300 {
        let object = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
        let status = &object["status"];
        let ready = status["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["reason"] == reason));
        if ready && status["observedGeneration"] == object["metadata"]["generation"] {
            return serde_json::from_value(status.clone()).unwrap();
        }
        last = status.clone();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{name} never reached reason {reason}; last status {last}");
}
