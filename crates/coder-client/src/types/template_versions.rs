//! Template versions (imports).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use uuid::Uuid;

use super::jobs::ProvisionerJob;
use super::users::MinimalUser;
use crate::secret::Secret;

/// A template variable value (`user_variable_values` of a version create). The value may come from a Kubernetes
/// Secret, so its `Debug` is redacted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariableValue {
    /// Name.
    pub name: String,
    /// Value.
    pub value: Secret,
}

/// `TemplateVersionVariable`, one entry of `GET /templateversions/{id}/variables`: a Terraform variable the
/// version's source declares and the value its import used. Coder answers `*redacted*` for the value and the
/// default of a sensitive variable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateVersionVariable {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// `string`, `number` or `bool`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The value the import used (the default when none was given; [`REDACTED_VARIABLE`] when sensitive).
    pub value: String,
    /// The declared default ([`REDACTED_VARIABLE`] when sensitive).
    pub default_value: String,
    /// Declared without a default.
    pub required: bool,
    /// Declared `sensitive = true`.
    pub sensitive: bool,
}

/// What Coder answers in place of a sensitive variable's value and default.
pub const REDACTED_VARIABLE: &str = "*redacted*";

/// `CreateTemplateVersionRequest`.
#[derive(Debug, Clone, Serialize)]
pub struct CreateTemplateVersionRequest {
    /// Name (random when empty).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Attach to this template.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_id: Option<Uuid>,
    /// Always `file`.
    pub storage_method: String,
    /// The uploaded archive.
    pub file_id: Uuid,
    /// `terraform` or `echo`.
    pub provisioner: String,
    /// Provisioner tags.
    pub tags: BTreeMap<String, String>,
    /// Template variable values.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub user_variable_values: Vec<VariableValue>,
}

impl CreateTemplateVersionRequest {
    /// A terraform import of `file_id`.
    pub fn terraform(file_id: Uuid) -> Self {
        Self {
            name: String::new(),
            message: String::new(),
            template_id: None,
            storage_method: "file".to_owned(),
            file_id,
            provisioner: "terraform".to_owned(),
            tags: BTreeMap::new(),
            user_variable_values: Vec::new(),
        }
    }
}

/// `TemplateVersion`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateVersion {
    /// ID.
    pub id: Uuid,
    /// Template; `None` before a template is created from it (Coder then sends the nil UUID).
    #[serde(deserialize_with = "nil_is_none")]
    pub template_id: Option<Uuid>,
    /// Organization.
    pub organization_id: Uuid,
    /// Created.
    pub created_at: String,
    /// Updated.
    pub updated_at: String,
    /// Name.
    pub name: String,
    /// Message.
    pub message: String,
    /// The import job.
    pub job: ProvisionerJob,
    /// Readme.
    pub readme: String,
    /// Creator.
    pub created_by: MinimalUser,
    /// Archived.
    pub archived: bool,
}

/// An optional UUID where Coder sends the nil UUID for "none".
fn nil_is_none<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Uuid>, D::Error> {
    Ok(Option::<Uuid>::deserialize(deserializer)?.filter(|id| !id.is_nil()))
}

/// `POST /templates/{id}/versions/archive` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ArchiveTemplateVersionsResponse {
    /// Template.
    pub template_id: Uuid,
    /// Archived versions.
    pub archived_ids: Vec<Uuid>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nil_template_id_is_none() {
        let parse = |json: &str| serde_json::from_str::<TemplateVersion>(json).unwrap().template_id;
        assert_eq!(
            parse(r#"{"template_id":"00000000-0000-0000-0000-000000000000"}"#),
            None
        );
        assert_eq!(parse(r#"{"template_id":null}"#), None);
        assert_eq!(parse("{}"), None);
        let id = Uuid::from_u128(7);
        assert_eq!(parse(&format!(r#"{{"template_id":"{id}"}}"#)), Some(id));
    }
}
