//! `ProvisionerJob`, shared by template versions and workspace builds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Job status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Queued.
    Pending,
    /// Running.
    Running,
    /// Succeeded.
    Succeeded,
    /// Being canceled.
    Canceling,
    /// Canceled.
    Canceled,
    /// Failed.
    Failed,
    /// Unknown (also any value this client does not know).
    #[default]
    #[serde(other)]
    Unknown,
}

impl JobStatus {
    /// Whether the job will not change any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Canceled | Self::Failed)
    }
}

/// `input` of a job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct JobInput {
    /// Template version (imports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_version_id: Option<Uuid>,
    /// Workspace build (builds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_build_id: Option<Uuid>,
    /// Error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `ProvisionerJob`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProvisionerJob {
    /// ID.
    pub id: Uuid,
    /// Created.
    pub created_at: String,
    /// Started.
    pub started_at: Option<String>,
    /// Completed.
    pub completed_at: Option<String>,
    /// Canceled.
    pub canceled_at: Option<String>,
    /// Error text.
    pub error: Option<String>,
    /// Error code (e.g. `REQUIRED_TEMPLATE_VARIABLES`).
    pub error_code: Option<String>,
    /// Status.
    pub status: JobStatus,
    /// Worker.
    pub worker_id: Option<Uuid>,
    /// File.
    pub file_id: Uuid,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Queue position.
    pub queue_position: i64,
    /// Queue size.
    pub queue_size: i64,
    /// Organization.
    pub organization_id: Uuid,
    /// Initiator.
    pub initiator_id: Uuid,
    /// Input.
    pub input: JobInput,
    /// `template_version_import`, `workspace_build`, `template_version_dry_run`.
    #[serde(rename = "type")]
    pub job_type: String,
    /// Logs overflowed.
    pub logs_overflowed: bool,
}
