//! `/api/v2/organizations/{organization}/templates`, `/api/v2/templates/{template}`.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `Template` (the fields the operator uses; others ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Template {
    /// ID.
    pub id: Uuid,
    /// Created.
    pub created_at: String,
    /// Updated.
    pub updated_at: String,
    /// Organization.
    pub organization_id: Uuid,
    /// Organization name.
    pub organization_name: String,
    /// Name.
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// Provisioner.
    pub provisioner: String,
    /// Active version.
    pub active_version_id: Uuid,
    /// Active users.
    pub active_user_count: i64,
    /// Description.
    pub description: String,
    /// Deprecated.
    pub deprecated: bool,
    /// Icon.
    pub icon: String,
    /// Default TTL.
    pub default_ttl_ms: i64,
    /// Creator.
    pub created_by_id: Uuid,
    /// Creator name.
    pub created_by_name: String,
    /// Require the active version.
    pub require_active_version: bool,
}

/// `CreateTemplateRequest` (common fields).
#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateTemplateRequest {
    /// Name.
    pub name: String,
    /// The version to start with.
    pub template_version_id: Uuid,
    /// Display name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// Description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Icon.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub icon: String,
    /// Do not grant the Everyone group `use`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disable_everyone_group_access: bool,
    /// Require the active version.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub require_active_version: bool,
}

/// `UpdateTemplateMeta` as the aggregated API sends it: the three fields a `CoderTemplate` carries, always sent
/// (an empty string clears the field).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateTemplateMeta {
    /// Display name.
    pub display_name: String,
    /// Description.
    pub description: String,
    /// Icon.
    pub icon: String,
}
