//! The controllers, one module per kind, plus what they share: `apply` (server-side apply that skips unchanged
//! objects), `conditions`, `context` (client, settings, metrics, Events), `credentials` (the credential-Secret
//! contract) and `metrics`. CoderControlPlane, CoderProvisioner and CoderWorkspaceProxy run.

pub mod apply;
pub mod conditions;
pub mod context;
pub mod control_plane;
pub mod credentials;
pub mod kube_requests;
pub mod metrics;
pub mod provisioner;
pub mod secrets;
pub mod workspace_proxy;

/// Kinds whose reconciler runs.
pub const BUILT: &[&str] = &["CoderControlPlane", "CoderProvisioner", "CoderWorkspaceProxy"];
/// Kinds whose reconciler is not built yet (their objects are accepted but not reconciled).
pub const NOT_BUILT: &[&str] = &[
    "CoderTemplateTest",
    "CoderAIProvider",
    "CoderAIGatewayKey",
    "CoderMCPServer",
];
