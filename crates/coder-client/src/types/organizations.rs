//! Organizations: `GET /api/v2/organizations[/{organization}]` and the organization writes.

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

/// `POST /api/v2/organizations` (Premium: Multiple Organizations). An empty display name becomes the name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateOrganizationRequest {
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub icon: String,
}

/// `PATCH /api/v2/organizations/{organization}`. Coder keeps the current name and display name when they are sent
/// empty, and the description and icon when they are left out (`None`); a given value replaces, also an empty one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateOrganizationRequest {
    pub name: String,
    pub display_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
}
