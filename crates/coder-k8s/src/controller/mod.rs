//! The controllers, one module per kind (each: pure `names`/`desired`/`status` plus a short `reconcile`, and `run`
//! in its `mod.rs`), and what they share, written once: `runner` (watches, owned kinds, finalizer, concurrency,
//! error policy, metrics, shutdown), `cache` and `triggers` (watch caches and what a change of an owned or read
//! object reconciles), `decode` (the kinds' own objects decoded one at a time), `apply` (server-side apply skipped
//! when unchanged, ownership, deletes), `status_writer`, `owned_secret`, `digest`, `error`, `conditions`,
//! `credentials` (the credential-Secret rule) and `metrics`.
//! How each kind behaves is written down in docs/controllers/.

pub mod ai_gateway_key;
pub mod ai_provider;
pub mod apply;
pub mod cache;
pub mod cleanup_records;
pub mod conditions;
pub mod context;
pub mod control_plane;
pub mod credentials;
pub mod decode;
pub mod digest;
pub mod error;
pub mod finalizer;
pub mod http_route;
pub mod kube_requests;
pub mod labels;
pub mod mcp_server;
pub mod metrics;
pub mod owned_secret;
pub mod provisioner;
pub mod runner;
pub mod secrets;
pub mod status_writer;
pub mod sync_status;
pub mod takeover;
pub mod template_test;
pub mod triggers;
pub mod upstream;
pub mod workspace_proxy;

/// Kinds whose reconciler runs: every kind of `coder.com/v1alpha1`.
pub const BUILT: &[&str] = &[
    "CoderControlPlane",
    "CoderProvisioner",
    "CoderWorkspaceProxy",
    "CoderTemplateTest",
    "CoderAIGatewayKey",
    "CoderAIProvider",
    "CoderMCPServer",
];
