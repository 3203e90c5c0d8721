//! `GET /api/v2/organizations/{organization}/groups`.

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
