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
