//! `GET /api/v2/buildinfo`.

use serde::{Deserialize, Serialize};

/// `BuildInfoResponse`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BuildInfo {
    /// Release or commit URL.
    pub external_url: String,
    /// e.g. `v2.30.0+abcdef`.
    pub version: String,
    /// Dashboard URL.
    pub dashboard_url: String,
    /// Telemetry enabled.
    pub telemetry: bool,
    /// Served by a workspace proxy.
    pub workspace_proxy: bool,
    /// Agent API version.
    pub agent_api_version: String,
    /// Provisioner API version.
    pub provisioner_api_version: String,
    /// Upgrade message.
    pub upgrade_message: String,
    /// The deployment ID (UUID form), also the ID of the `primary` workspace proxy.
    pub deployment_id: String,
}
