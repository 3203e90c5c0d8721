//! MCP clients for tests of the coder-k8s MCP server: the rmcp client ([`connect`], [`call`]) and the official
//! Python SDK (`mcp` from PyPI, [`PYTHON_MCP_VERSION`]) in a virtual environment built when missing under
//! `~/.cache/coder-k8s/python-mcp-<version>` ([`python_mcp`]), and the Kubernetes objects the tools read
//! ([`seed_kubernetes_objects`]).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

/// The connected rmcp client.
pub type McpClient = RunningService<RoleClient, ClientConfig>;

/// The version of the Python `mcp` package the tests run.
pub const PYTHON_MCP_VERSION: &str = "2.3.0";

/// Connects to the streamable HTTP endpoint `url` (for example `http://127.0.0.1:8090/mcp`) with a bearer token
/// and runs the MCP handshake.
pub async fn connect(url: &str, token: &str) -> Result<McpClient> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned());
    let transport = StreamableHttpClientTransport::from_config(config);
    ClientConfig::default()
        .serve(transport)
        .await
        .with_context(|| format!("MCP handshake with {url}"))
}

/// What one tool call returned.
#[derive(Clone, Debug)]
pub struct ToolOutcome {
    /// `isError` of the result: the tool failed and `text` says why.
    pub is_error: bool,
    /// The structured output (JSON object) of a successful call.
    pub structured: Value,
    /// The text content blocks, joined by newlines.
    pub text: String,
    /// The whole result as JSON, to search it (for example for data that must never appear).
    pub raw: String,
}

impl ToolOutcome {
    /// The structured output; panics with the error text when the call failed.
    #[allow(clippy::panic)]
    pub fn ok(&self) -> &Value {
        if self.is_error {
            panic!("tool call failed: {}", self.text);
        }
        &self.structured
    }

    /// The error text; panics when the call succeeded.
    #[allow(clippy::panic)]
    pub fn err(&self) -> &str {
        if !self.is_error {
            panic!("tool call succeeded: {}", self.raw);
        }
        &self.text
    }
}

/// Calls tool `name` with the JSON object `arguments`.
pub async fn call(client: &McpClient, name: &str, arguments: Value) -> Result<ToolOutcome> {
    let Value::Object(arguments) = arguments else {
        bail!("tool arguments must be a JSON object");
    };
    let result = client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await
        .with_context(|| format!("call tool {name}"))?;
    let raw = serde_json::to_string(&result)?;
    let text = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    Ok(ToolOutcome {
        is_error: result.is_error == Some(true),
        structured: result.structured_content.clone().unwrap_or(Value::Null),
        text,
        raw,
    })
}

/// The Python interpreter of a virtual environment with the `mcp` package, built on first use (python3 with the
/// venv module and access to PyPI needed once). Concurrent first uses each build into a directory of their own and
/// the first rename wins.
pub fn python_mcp() -> Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let cache = PathBuf::from(home).join(".cache/coder-k8s");
    let venv = cache.join(format!("python-mcp-{PYTHON_MCP_VERSION}"));
    let python = venv.join("bin/python");
    if python.exists() {
        return Ok(python);
    }
    std::fs::create_dir_all(&cache).with_context(|| format!("create {}", cache.display()))?;
    let building = cache.join(format!(
        "python-mcp-{PYTHON_MCP_VERSION}.building-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&building);
    run(Command::new("python3").arg("-m").arg("venv").arg(&building))
        .context("create a Python virtual environment (install python3 and its venv module)")?;
    run(Command::new(building.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg(format!("mcp=={PYTHON_MCP_VERSION}")))
    .with_context(|| format!("pip install mcp=={PYTHON_MCP_VERSION} from PyPI"))?;
    if std::fs::rename(&building, &venv).is_err() {
        // Another test process finished first; use its environment.
        let _ = std::fs::remove_dir_all(&building);
    }
    if !python.exists() {
        bail!("{} is missing after building the environment", python.display());
    }
    Ok(python)
}

fn run(command: &mut Command) -> Result<()> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .context("start the command")?;
    if !output.status.success() {
        bail!(
            "{} failed ({}): {}",
            command.get_program().to_string_lossy(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

async fn apply(client: &kube::Client, namespace: &str, object: Value) -> Result<()> {
    let gvk: GroupVersionKind = serde_json::from_value::<kube::core::TypeMeta>(object.clone())?.try_into()?;
    let plural = match gvk.kind.as_str() {
        "CoderWorkspaceProxy" => "coderworkspaceproxies".to_owned(),
        kind => format!("{}s", kind.to_lowercase()),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk_with_plural(&gvk, &plural),
    );
    let name = object["metadata"]["name"]
        .as_str()
        .context("the object has no metadata.name")?
        .to_owned();
    let params = PatchParams::apply("mcp-tests").force();
    api.patch(&name, &params, &Patch::Apply(&object))
        .await
        .with_context(|| format!("apply {} {namespace}/{name}", gvk.kind))?;
    if let Some(status) = object.get("status") {
        let body = json!({"apiVersion": object["apiVersion"], "kind": object["kind"], "status": status});
        api.patch_status(&name, &params, &Patch::Apply(&body))
            .await
            .with_context(|| format!("apply the status of {} {namespace}/{name}", gvk.kind))?;
    }
    Ok(())
}

/// The objects the tools read: a control plane with status, its Deployment, two pods, a Service, a provisioner,
/// a workspace proxy and three events about the control plane.
pub async fn seed_kubernetes_objects(client: &kube::Client, ns: &str) -> Result<()> {
    let condition = json!({"type": "Available", "status": "True", "reason": "Ready", "message": "all good",
                           "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1});
    apply(client, ns, json!({
        "apiVersion": "coder.com/v1alpha1", "kind": "CoderControlPlane", "metadata": {"name": "coder"}, "spec": {},
        "status": {"observedGeneration": 1, "readyReplicas": 1, "url": "http://coder.ns.svc.cluster.local",
                   "phase": "Ready", "conditions": [condition]},
    }))
    .await?;
    let labels = json!({"app.kubernetes.io/name": "coder-control-plane", "app.kubernetes.io/instance": "coder",
                        "app.kubernetes.io/managed-by": "coder-k8s"});
    apply(client, ns, json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "coder", "labels": labels},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "coder", "image": "coder"}]}}},
        "status": {"replicas": 2, "readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1, "unavailableReplicas": 1,
                   "observedGeneration": 1, "conditions": [
                       {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                       {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}]},
    }))
    .await?;
    for name in ["coder-b", "coder-a"] {
        apply(client, ns, json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "coder", "image": "coder"}, {"name": "sidecar", "image": "s"}]},
        }))
        .await?;
    }
    apply(
        client,
        ns,
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other"},
            "spec": {"containers": [{"name": "c", "image": "c"}]},
        }),
    )
    .await?;
    apply(client, ns, json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "coder", "annotations": {"team": "platform"}},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]},
    }))
    .await?;
    apply(client, ns, json!({
        "apiVersion": "coder.com/v1alpha1", "kind": "CoderProvisioner", "metadata": {"name": "prov"},
        "spec": {"controlPlaneRef": {"name": "coder"}},
        "status": {"phase": "Pending", "readyReplicas": 0, "observedGeneration": 1, "organizationName": "default",
                   "provisionerKeyName": "prov-key", "conditions": [condition]},
    }))
    .await?;
    apply(client, ns, json!({
        "apiVersion": "coder.com/v1alpha1", "kind": "CoderWorkspaceProxy", "metadata": {"name": "proxy"}, "spec": {},
        "status": {"phase": "Ready", "readyReplicas": 1, "registered": true, "observedGeneration": 2},
    }))
    .await?;
    let events = Api::<Event>::namespaced(client.clone(), ns);
    for (i, reason) in ["Created", "Scaled", "Ready"].iter().enumerate() {
        let event: Event = serde_json::from_value(json!({
            "metadata": {"name": format!("coder.{i}")},
            "involvedObject": {"kind": "CoderControlPlane", "name": "coder", "namespace": ns},
            "type": "Normal", "reason": reason, "message": format!("event {i}"), "count": i + 1,
            "lastTimestamp": format!("2026-01-01T00:00:0{i}Z"),
        }))?;
        events.create(&PostParams::default(), &event).await?;
    }
    let other: Event = serde_json::from_value(json!({
        "metadata": {"name": "other.0"}, "involvedObject": {"kind": "Pod", "name": "other", "namespace": ns},
        "type": "Warning", "reason": "BackOff", "message": "pod event",
    }))?;
    events.create(&PostParams::default(), &other).await?;
    Ok(())
}
