//! The controllers. Each kind gets its own module here; none is built yet, so the controller process holds the
//! leader Lease, reports leadership in metrics and reconciles nothing.

/// The kinds whose reconcilers will live in this module, for the startup log.
pub const KINDS: &[&str] = &[
    "CoderControlPlane",
    "CoderProvisioner",
    "CoderWorkspaceProxy",
    "CoderTemplateTest",
    "CoderAIProvider",
    "CoderAIGatewayKey",
    "CoderMCPServer",
];
