//! Build and import logs (`…/logs[?after=&follow]`).

use serde::{Deserialize, Serialize};

/// `ProvisionerJobLog`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProvisionerJobLog {
    /// Increasing ID (use as `after`).
    pub id: i64,
    /// Created.
    pub created_at: String,
    /// `provisioner_daemon` or `provisioner`.
    pub log_source: String,
    /// `trace`, `debug`, `info`, `warn`, `error`.
    pub log_level: String,
    /// Stage.
    pub stage: String,
    /// Text.
    pub output: String,
}
