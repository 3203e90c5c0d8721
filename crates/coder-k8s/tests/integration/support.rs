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

/// `value` as a Lua expression (objects as tables with string keys, arrays as sequences).
pub fn to_lua(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "nil".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => lua_string(s),
        Value::Array(items) => format!("{{{}}}", items.iter().map(to_lua).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("[{}] = {}", lua_string(k), to_lua(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `text` as a Lua string literal.
pub fn lua_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\{:03}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The `(status, message)` of the Argo CD health rule in `rule` (a repository path) for `object`, run by the real
/// Lua 5.4 interpreter.
pub fn argocd_health(rule: &str, object: &serde_json::Value) -> (String, String) {
    let script = format!(
        "obj = {}\nlocal hs = assert(loadfile({}))()\nio.write(hs.status, \"\\t\", hs.message or \"\")\n",
        to_lua(object),
        lua_string(&path(rule))
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.lua");
    std::fs::write(&file, script).unwrap();
    let out = Command::new("lua5.4")
        .arg(&file)
        .output()
        .expect("lua5.4 runs the Argo CD health rule; hack/test.sh installs the Debian package lua5.4 when it is missing");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let (status, message) = text.split_once('\t').unwrap();
    (status.to_owned(), message.to_owned())
}

/// The `inProgress`, `failed` and `current` of the Flux health check of `kind` in `rule` (a repository path) for
/// `object`, evaluated by a CEL interpreter with the object's top-level fields as variables (as Flux does).
pub fn flux_health(rule: &str, kind: &str, object: &serde_json::Value) -> (bool, bool, bool) {
    let text = std::fs::read_to_string(path(rule)).unwrap();
    let kustomization: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let check = &kustomization["spec"]["healthCheckExprs"][0];
    assert_eq!(check["kind"], kind);
    let evaluate = |key: &str| {
        let expression = check[key].as_str().unwrap();
        let program = cel::Program::compile(expression).unwrap();
        let mut context = cel::Context::default();
        for (name, value) in object.as_object().unwrap() {
            context.add_variable(name.as_str(), value.clone()).unwrap();
        }
        match program.execute(&context) {
            Ok(cel::Value::Bool(b)) => b,
            other => panic!("{key}: {expression} gave {other:?}"),
        }
    };
    (evaluate("inProgress"), evaluate("failed"), evaluate("current"))
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
