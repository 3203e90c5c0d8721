//! MCP clients for tests of the coder-k8s MCP server: the rmcp client ([`connect`], [`call`]) and the official
//! Python SDK (`mcp` from PyPI, [`PYTHON_MCP_VERSION`]) in a virtual environment built when missing under
//! `~/.cache/coder-k8s/python-mcp-<version>` ([`python_mcp`]).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;

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
