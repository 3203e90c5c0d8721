//! The `coder-k8s` process: one binary whose `--app` selects the controllers, the aggregated API server or the MCP
//! server.
pub mod admin;
pub mod aggregated;
pub mod app;
pub mod build_info;
pub mod cli;
pub mod go_flags;
pub mod kube_requests;
pub mod leader;
pub mod mcp;
pub mod metrics;
pub mod telemetry;
