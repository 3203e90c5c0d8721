//! Workspaces.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::builds::{Transition, WorkspaceBuild, WorkspaceBuildStatus};

/// A rich parameter value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RichParameterValue {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
}

/// `Workspace` (the fields the operator uses).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Workspace {
    /// ID.
    pub id: Uuid,
    /// Created.
    pub created_at: String,
    /// Updated.
    pub updated_at: String,
    /// Owner.
    pub owner_id: Uuid,
    /// Owner name.
    pub owner_name: String,
    /// Organization.
    pub organization_id: Uuid,
    /// Organization name.
    pub organization_name: String,
    /// Template.
    pub template_id: Uuid,
    /// Template name.
    pub template_name: String,
    /// Template active version.
    pub template_active_version_id: Uuid,
    /// Latest build.
    pub latest_build: WorkspaceBuild,
    /// Outdated.
    pub outdated: bool,
    /// Name.
    pub name: String,
    /// Autostart schedule.
    pub autostart_schedule: Option<String>,
    /// TTL.
    pub ttl_ms: Option<i64>,
    /// Last used.
    pub last_used_at: String,
    /// Deleting at.
    pub deleting_at: Option<String>,
    /// Dormant at.
    pub dormant_at: Option<String>,
    /// `always` or `never`.
    pub automatic_updates: String,
    /// The template requires builds to use its active version (a start must name it).
    pub template_require_active_version: bool,
}

/// `GET /workspaces` answer: whole [`Workspace`]s, or the [`WorkspaceListing`]s a list shows.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct WorkspacesPage<W = Workspace> {
    /// Workspaces.
    pub workspaces: Vec<W>,
    /// Total count.
    pub count: i64,
}

/// What a listing of workspaces reads of each: its identity, settings and the state of its latest build. A page of
/// a hundred workspaces decodes into these without the build's job, resources and agents, which serde skips
/// without allocating them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct WorkspaceListing {
    /// ID.
    pub id: Uuid,
    /// Created.
    pub created_at: String,
    /// Owner name.
    pub owner_name: String,
    /// Organization name.
    pub organization_name: String,
    /// Template name.
    pub template_name: String,
    /// Latest build.
    pub latest_build: BuildListing,
    /// Name.
    pub name: String,
    /// Autostart schedule.
    pub autostart_schedule: Option<String>,
    /// TTL.
    pub ttl_ms: Option<i64>,
    /// Last used.
    pub last_used_at: String,
    /// `always` or `never`.
    pub automatic_updates: String,
}

/// What a listing reads of a workspace's latest build.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct BuildListing {
    /// ID.
    pub id: Uuid,
    /// The template version it built.
    pub template_version_id: Uuid,
    /// Start, stop or delete.
    pub transition: Transition,
    /// Why it was started.
    pub reason: String,
    /// Autostop deadline.
    pub deadline: Option<String>,
    /// Pending, running, failed…
    pub status: WorkspaceBuildStatus,
}

impl Workspace {
    /// The listing of this workspace: what a list of workspaces would have shown of it.
    pub fn listing(&self) -> WorkspaceListing {
        let build = &self.latest_build;
        WorkspaceListing {
            id: self.id,
            created_at: self.created_at.clone(),
            owner_name: self.owner_name.clone(),
            organization_name: self.organization_name.clone(),
            template_name: self.template_name.clone(),
            latest_build: BuildListing {
                id: build.id,
                template_version_id: build.template_version_id,
                transition: build.transition,
                reason: build.reason.clone(),
                deadline: build.deadline.clone(),
                status: build.status,
            },
            name: self.name.clone(),
            autostart_schedule: self.autostart_schedule.clone(),
            ttl_ms: self.ttl_ms,
            last_used_at: self.last_used_at.clone(),
            automatic_updates: self.automatic_updates.clone(),
        }
    }
}

/// `PUT /workspaces/{id}/ttl` body. `ttl_ms` is always sent: `null` (or 0) turns autostop off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateWorkspaceTtlRequest {
    /// Milliseconds; Coder keeps whole minutes.
    pub ttl_ms: Option<i64>,
}

/// `PUT /workspaces/{id}/autostart` body. No schedule (or an empty one) turns autostart off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateWorkspaceAutostartRequest {
    /// `[CRON_TZ=<zone> ]<minute> <hour> * * <day of week>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

/// `PUT /workspaces/{id}/autoupdates` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateWorkspaceAutomaticUpdatesRequest {
    /// `always` or `never`.
    pub automatic_updates: String,
}

/// `CreateWorkspaceRequest`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateWorkspaceRequest {
    /// Template (xor `template_version_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_id: Option<Uuid>,
    /// Template version (xor `template_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_version_id: Option<Uuid>,
    /// Name.
    pub name: String,
    /// Autostart cron.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autostart_schedule: Option<String>,
    /// TTL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// Parameters.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rich_parameter_values: Vec<RichParameterValue>,
    /// `always` or `never`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub automatic_updates: Option<String>,
}
