//! The MCP server of coder-k8s (`--app=mcp-http`): the Kubernetes and Coder tools of `tools`, served over rmcp's
//! streamable HTTP transport at `/mcp` behind the bearer-token, Host, Origin and Content-Type checks of `security`.
//! Every tool acts with the process's Kubernetes identity, so Kubernetes RBAC decides what it may read or change.

pub mod limits;
pub mod metrics;
pub mod names;
pub mod security;
pub mod server;
pub mod token;
pub mod tools;

pub use server::{ServerSettings, router, serve};
pub use token::{McpToken, TokenFile, TokenFileError, read_token_file};
