//! `GET /api/v2/organizations[/{organization}]`.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `Organization`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Organization {
    /// ID.
    pub id: Uuid,
    /// Name (the default org of a fresh deployment is `coder`).
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// Icon.
    pub icon: String,
    /// Description.
    pub description: String,
    /// Created (RFC 3339).
    pub created_at: String,
    /// Updated (RFC 3339).
    pub updated_at: String,
    /// The default organization.
    pub is_default: bool,
    /// Roles every member of the organization holds implicitly.
    pub default_org_member_roles: Vec<String>,
}
