//! The controllers, one module per kind. No reconciler runs yet, so the controller process holds the leader Lease,
//! reports leadership in metrics and reconciles nothing. The pure cores exist: `control_plane` and `provisioner`
//! (names, desired objects, condition decisions), `credentials` (the credential-Secret contract) and `conditions`.

pub mod conditions;
pub mod control_plane;
pub mod credentials;
pub mod provisioner;

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
