//! Rich parameters: what a template version asks for (`GET /templateversions/{id}/rich-parameters`) and the values a
//! workspace build used (`GET /workspacebuilds/{id}/parameters`, which answers [`super::RichParameterValue`]s).

use serde::{Deserialize, Serialize};

/// `TemplateVersionParameter` (the fields a workspace write checks values against).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateVersionParameter {
    /// The name builds set it by.
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// `string`, `number`, `bool` or `list(string)`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether a build after the first may change the value.
    pub mutable: bool,
    /// Whether the value must be given again for every build (it is not taken from the previous one).
    pub ephemeral: bool,
    /// The value a build without one gets.
    pub default_value: String,
    /// Whether a value must be given (no default).
    pub required: bool,
    /// The allowed values, when the template lists them.
    pub options: Vec<TemplateVersionParameterOption>,
    /// Regular expression a value must match.
    pub validation_regex: String,
    /// Bounds of a number.
    pub validation_min: Option<i32>,
    pub validation_max: Option<i32>,
}

/// One allowed value of a [`TemplateVersionParameter`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateVersionParameterOption {
    pub name: String,
    pub value: String,
}
