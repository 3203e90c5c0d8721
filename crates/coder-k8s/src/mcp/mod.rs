//! The MCP server mode (`--app=mcp-http`): checks `--mcp-token-file` at startup (the rules live in the
//! `coder-k8s-mcp-server` crate) and serves that crate's router on `--mcp-bind-address` until shutdown.

use coder_k8s_mcp_server::metrics::ToolMetrics;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use coder_k8s_mcp_server::{ServerSettings, TokenFile};
use tokio::sync::watch;

use crate::cli::StartupError;

/// Reads `--mcp-token-file`: one token of at least 32 bytes without whitespace; one trailing newline is ignored.
/// Errors name the file, never its content.
pub fn read_token_file(path: Option<&Path>) -> Result<TokenFile, StartupError> {
    let path = path.ok_or_else(|| {
        StartupError("assertion failed: --mcp-token-file is required for --app=mcp-http".to_owned())
    })?;
    TokenFile::open(path).map_err(|error| StartupError(error.0))
}

/// Serves the MCP server on `bind_address` with the Kubernetes `client` until `shutdown` turns true; `ready` runs
/// once it listens. On shutdown the MCP sessions end first, so open event streams do not hold the process.
pub async fn run(
    client: kube::Client,
    token: Arc<TokenFile>,
    bind_address: &str,
    metrics: ToolMetrics,
    ready: impl FnOnce(),
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listener = crate::admin::bind(bind_address)
        .await
        .with_context(|| format!("listen on --mcp-bind-address {bind_address}"))?;
    tracing::info!(address = ?listener.local_addr().ok(), "serving MCP on /mcp");
    let sessions_end = sessions_end_on(shutdown.clone());
    let settings = ServerSettings {
        version: crate::build_info::VERSION.to_owned(),
        metrics,
        ..ServerSettings::default()
    };
    let router = coder_k8s_mcp_server::router(client, token, &settings, sessions_end);
    ready();
    coder_k8s_mcp_server::serve(listener, router, crate::app::wait_for(shutdown))
        .await
        .context("serve MCP")
}

/// A cancellation token cancelled when `shutdown` turns true.
fn sessions_end_on(shutdown: watch::Receiver<bool>) -> coder_k8s_mcp_server::server::Shutdown {
    let token = coder_k8s_mcp_server::server::Shutdown::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        crate::app::wait_for(shutdown).await;
        cancel.cancel();
    });
    token
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file's own rules are tested in the crate; here only what this wrapper adds: the flag is required, and a
    /// good file becomes the server's token.
    #[test]
    fn the_flag_is_required_and_a_good_file_is_the_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let good = "a".repeat(32);
        std::fs::write(&path, format!("{good}\n")).unwrap();
        assert!(read_token_file(Some(&path)).unwrap().accepts(good.as_bytes()));
        assert!(
            !read_token_file(Some(&path))
                .unwrap()
                .accepts(b"another token of at least 32 bytes")
        );
        assert_eq!(
            read_token_file(None).unwrap_err().0,
            "assertion failed: --mcp-token-file is required for --app=mcp-http"
        );
    }
}
