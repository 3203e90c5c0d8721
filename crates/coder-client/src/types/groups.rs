//! Groups: `GET /api/v2/organizations/{organization}/groups` and the group writes.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::users::MinimalUser;

/// `Group`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Group {
    /// ID (the `Everyone` group's ID is the organization ID).
    pub id: Uuid,
    /// Name.
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// Organization.
    pub organization_id: Uuid,
    /// Members.
    pub members: Vec<MinimalUser>,
    /// Member count.
    pub total_member_count: i64,
    /// Avatar.
    pub avatar_url: String,
    /// Quota allowance.
    pub quota_allowance: i64,
    /// `user` or `oidc`.
    pub source: String,
    /// Organization name.
    pub organization_name: String,
    /// Organization display name.
    pub organization_display_name: String,
}

/// `POST /api/v2/organizations/{organization}/groups` (Premium: Template RBAC). A new group has no members.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateGroupRequest {
    pub name: String,
    pub display_name: String,
    pub avatar_url: String,
    pub quota_allowance: i64,
}

/// `PATCH /api/v2/groups/{id}`. Members change by user ID (`add_users`, `remove_users`); a name sent empty or equal
/// to the current one keeps it, and the other fields are kept when left out (`None`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchGroupRequest {
    pub add_users: Vec<String>,
    pub remove_users: Vec<String>,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avatar_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota_allowance: Option<i64>,
}
