//! `/api/v2/workspaceproxies` (feature `workspace_proxy`).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::secret::Secret;

/// Health report of a proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkspaceProxyReport {
    /// Errors.
    pub errors: Vec<String>,
    /// Warnings.
    pub warnings: Vec<String>,
}

/// `status` of a proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkspaceProxyStatus {
    /// `ok`, `unreachable`, `unhealthy`, `unregistered`, `unknown`.
    pub status: String,
    /// Report.
    pub report: WorkspaceProxyReport,
    /// Checked (RFC 3339).
    pub checked_at: String,
}

/// `WorkspaceProxy` (region fields flattened).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkspaceProxy {
    /// ID.
    pub id: Uuid,
    /// Name.
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// Icon URL.
    pub icon_url: String,
    /// Healthy.
    pub healthy: bool,
    /// Path app URL.
    pub path_app_url: String,
    /// Wildcard hostname.
    pub wildcard_hostname: String,
    /// DERP enabled.
    pub derp_enabled: bool,
    /// DERP only.
    pub derp_only: bool,
    /// Status.
    pub status: WorkspaceProxyStatus,
    /// Created.
    pub created_at: String,
    /// Updated.
    pub updated_at: String,
    /// Deleted.
    pub deleted: bool,
    /// Version.
    pub version: String,
}

/// `POST /workspaceproxies` body.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateWorkspaceProxyRequest {
    /// Name (not `primary`).
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// Icon.
    pub icon: String,
}

/// `PATCH /workspaceproxies/{id}` body. `id`, `name`, `display_name`, `icon` must all be non-empty
/// (Coder validates them as required).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PatchWorkspaceProxy {
    /// ID.
    pub id: Uuid,
    /// Name.
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// Icon.
    pub icon: String,
    /// Issue a new proxy token (the old one stops working).
    pub regenerate_token: bool,
}

/// `UpdateWorkspaceProxyResponse` (create and patch).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct UpdateWorkspaceProxyResponse {
    /// The proxy.
    pub proxy: WorkspaceProxy,
    /// `<proxy id>:<secret>`; empty on a patch without `regenerate_token`.
    pub proxy_token: Secret,
}
