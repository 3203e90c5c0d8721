//! The controllers, one module per kind. No reconciler runs yet, so the controller process holds the leader Lease,
//! reports leadership in metrics and reconciles nothing; `control_plane` has its pure desired-state core.

pub mod conditions;
pub mod control_plane;

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
