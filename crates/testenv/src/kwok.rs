//! Fake nodes that kwok manages: pods scheduled there become Running and Ready without a kubelet.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, anyhow, bail};

use k8s_openapi::api::core::v1::{Node, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Name of the node [`crate::ControlPlane::create_fake_node`] creates by default.
pub const FAKE_NODE_NAME: &str = "kwok-node-0";
/// kwok is started with `--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake`.
pub const FAKE_NODE_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// Stage files (paths inside the kwok Go module) equal to kwokctl's defaults: node initialisation,
/// heartbeat with lease (kwok runs with `--node-lease-duration-seconds`), pod ready/complete/delete.
const DEFAULT_STAGES: [&str; 5] = [
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
];

/// The default Stage configs, read from the kwok module's own source. kwok since v0.8 has no built-in
/// stages when run on its own (it fails with "no stages found"); kwokctl passes these same files. They are
/// used in place from the Go module cache (`go mod download` in `testenv/go/kwok`, the module that builds
/// kwok, so the version always matches), not copied. Blocking.
pub fn default_stage_configs() -> Result<Vec<PathBuf>> {
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testenv/go/kwok");
    let hint = format!(
        "run `go mod download -json sigs.k8s.io/kwok` in {}",
        module.display()
    );
    let output = Command::new("go")
        .args(["mod", "download", "-json", "sigs.k8s.io/kwok"])
        .current_dir(&module)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running go to find kwok's stage files; {hint}"))?;
    if !output.status.success() {
        bail!(
            "go mod download sigs.k8s.io/kwok failed ({}): {}; {hint}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let info: serde_json::Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("parsing go mod download output; {hint}"))?;
    let dir = info
        .get("Dir")
        .and_then(|d| d.as_str())
        .ok_or_else(|| anyhow!("go mod download printed no Dir for sigs.k8s.io/kwok; {hint}"))?;
    DEFAULT_STAGES
        .iter()
        .map(|rel| {
            let path = Path::new(dir).join(rel);
            if path.is_file() {
                Ok(path)
            } else {
                Err(anyhow!("kwok stage file {} is missing; {hint}", path.display()))
            }
        })
        .collect()
}

/// kwok's command line. The selectors make it manage only nodes carrying [`FAKE_NODE_ANNOTATION`]; the IPs
/// are only written into pod and node status.
pub fn args(kubeconfig: &str, stage_configs: &[PathBuf]) -> Vec<String> {
    let configs = stage_configs
        .iter()
        .map(|path| format!("--config={}", path.display()));
    [
        format!("--kubeconfig={kubeconfig}"),
        "--manage-all-nodes=false".to_owned(),
        format!(
            "--manage-nodes-with-annotation-selector={}={}",
            FAKE_NODE_ANNOTATION.0, FAKE_NODE_ANNOTATION.1
        ),
        "--manage-nodes-with-label-selector=".to_owned(),
        "--manage-single-node=".to_owned(),
        "--cidr=10.0.0.1/24".to_owned(),
        "--node-ip=10.0.0.1".to_owned(),
        "--node-lease-duration-seconds=40".to_owned(),
    ]
    .into_iter()
    .chain(configs)
    .collect()
}

/// A node kwok will manage: the annotation, label `type=kwok`, generous capacity, and deliberately no
/// `kwok.x-k8s.io/node` taint, so workloads without tolerations (like the operator's) schedule on it.
pub fn fake_node(name: &str) -> Node {
    let resources: BTreeMap<String, Quantity> = [("cpu", "32"), ("memory", "256Gi"), ("pods", "110")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Quantity(v.to_owned())))
        .collect();
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some(BTreeMap::from([(
                FAKE_NODE_ANNOTATION.0.to_owned(),
                FAKE_NODE_ANNOTATION.1.to_owned(),
            )])),
            labels: Some(BTreeMap::from([
                ("type".to_owned(), "kwok".to_owned()),
                ("kubernetes.io/hostname".to_owned(), name.to_owned()),
                ("kubernetes.io/os".to_owned(), "linux".to_owned()),
                ("kubernetes.io/arch".to_owned(), go_arch().to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        spec: None,
        // Node create keeps status, so capacity is there before kwok's first heartbeat.
        status: Some(NodeStatus {
            allocatable: Some(resources.clone()),
            capacity: Some(resources),
            ..NodeStatus::default()
        }),
    }
}

/// This machine's architecture in Go's spelling, as a kubelet would label its node.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Whether the node's `Ready` condition is `True`.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conds| conds.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
