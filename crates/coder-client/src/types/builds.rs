//! Workspace builds.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::jobs::ProvisionerJob;
use super::workspaces::RichParameterValue;

/// Build transition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    /// Start.
    #[default]
    Start,
    /// Stop.
    Stop,
    /// Delete.
    Delete,
}

/// Build status (derived from job status + transition).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceBuildStatus {
    /// Pending.
    Pending,
    /// Starting.
    Starting,
    /// Running.
    Running,
    /// Stopping.
    Stopping,
    /// Stopped.
    Stopped,
    /// Failed.
    Failed,
    /// Canceling.
    Canceling,
    /// Canceled.
    Canceled,
    /// Deleting.
    Deleting,
    /// Deleted.
    Deleted,
    /// Unknown value.
    #[default]
    #[serde(other)]
    Unknown,
}

/// Reason given when creating a build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildReason {
    /// Dashboard.
    Dashboard,
    /// CLI.
    Cli,
}

/// `CreateWorkspaceBuildRequest`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateWorkspaceBuildRequest {
    /// Version (default: the latest build's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_version_id: Option<Uuid>,
    /// Transition.
    pub transition: Transition,
    /// Dry run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Orphan (delete only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub orphan: bool,
    /// Parameters.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rich_parameter_values: Vec<RichParameterValue>,
    /// `debug` for verbose logs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// Reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<BuildReason>,
}

impl CreateWorkspaceBuildRequest {
    /// A build with this transition and defaults otherwise.
    pub fn transition(transition: Transition) -> Self {
        Self {
            transition,
            ..Self::default()
        }
    }
}

/// `WorkspaceBuild` (the fields the operator uses).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkspaceBuild {
    /// ID.
    pub id: Uuid,
    /// Created.
    pub created_at: String,
    /// Updated.
    pub updated_at: String,
    /// Workspace.
    pub workspace_id: Uuid,
    /// Workspace name.
    pub workspace_name: String,
    /// Owner.
    pub workspace_owner_id: Uuid,
    /// Owner name.
    pub workspace_owner_name: String,
    /// Template version.
    pub template_version_id: Uuid,
    /// Template version name.
    pub template_version_name: String,
    /// Build number.
    pub build_number: i64,
    /// Transition.
    pub transition: Transition,
    /// Initiator.
    pub initiator_id: Uuid,
    /// Initiator name.
    pub initiator_name: String,
    /// Job.
    pub job: ProvisionerJob,
    /// Reason.
    pub reason: String,
    /// Deadline.
    pub deadline: Option<String>,
    /// Status.
    pub status: WorkspaceBuildStatus,
    /// The resources the build made, with their agents.
    pub resources: Vec<WorkspaceResource>,
}

/// `WorkspaceResource` (the fields the operator uses).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkspaceResource {
    /// ID.
    pub id: Uuid,
    /// Agents of the resource.
    pub agents: Vec<WorkspaceAgent>,
}

/// `WorkspaceAgent` (the fields the operator uses).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkspaceAgent {
    /// ID.
    pub id: Uuid,
    /// Name.
    pub name: String,
    /// `connecting`, `connected`, `disconnected` or `timeout`.
    pub status: String,
    /// `created`, `starting`, `start_timeout`, `start_error`, `ready`, `shutting_down`, `shutdown_timeout`,
    /// `shutdown_error` or `off`.
    pub lifecycle_state: String,
    /// Set for devcontainer sub-agents.
    pub parent_id: Option<Uuid>,
}
