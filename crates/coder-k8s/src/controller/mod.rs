//! The controllers, one module per kind, plus what they share: `apply` (server-side apply that skips unchanged
//! objects), `conditions`, `context` (client, settings, metrics, Events), `credentials` (the credential-Secret
//! contract) and `metrics`. CoderControlPlane runs; `provisioner` has its pure core only.

pub mod apply;
pub mod conditions;
pub mod context;
pub mod control_plane;
pub mod credentials;
pub mod kube_requests;
pub mod metrics;
pub mod provisioner;

/// Kinds whose reconciler runs.
pub const BUILT: &[&str] = &["CoderControlPlane"];
/// Kinds whose reconciler is not built yet (their objects are accepted but not reconciled).
pub const NOT_BUILT: &[&str] = &[
    "CoderProvisioner",
    "CoderWorkspaceProxy",
    "CoderTemplateTest",
    "CoderAIProvider",
    "CoderAIGatewayKey",
    "CoderMCPServer",
];
