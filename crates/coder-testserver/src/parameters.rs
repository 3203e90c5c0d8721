//! Rich parameters as Coder v2.30.0 treats them with dynamic parameters (the flow of every template unless it asks
//! for the classic one):
//!
//! * a template version's parameters are the `data "coder_parameter"` blocks of the root `.tf` files of its archive
//!   (the attributes Coder shows: name, display name, description, type, form type, mutability, ephemerality,
//!   default, order, options and the `validation` bounds and regex), read from plain HCL, not a full parser;
//! * a build's values are the previous build's (ephemeral ones left out), overridden by the values the request
//!   names, then the defaults; values of names the version does not have are dropped;
//! * after the first build an immutable parameter may not change, a value must be one of the options when there
//!   are options, and a number must lie within the validation bounds (Coder's own reasons, with the value); any
//!   problem is a 400 `Unable to validate parameters` with one validation per parameter, sorted by name.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::errors::ApiError;
use crate::state::Mem;
use crate::variables::{literal, matching_brace, tar_entries, zip_entries};

/// One `coder_parameter` of a template version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Parameter {
    pub name: String,
    pub display_name: String,
    pub description: String,
    /// `string` unless the block says otherwise.
    pub type_: String,
    pub form_type: String,
    pub mutable: bool,
    pub ephemeral: bool,
    pub default: Option<String>,
    pub order: i64,
    /// `(name, value)` of each option.
    pub options: Vec<(String, String)>,
    pub min: Option<i64>,
    pub max: Option<i64>,
    pub regex: String,
}

/// The parameters of template version `version_id`, in Coder's order (by `order`, then name); none when the
/// version or its archive is unknown.
pub(crate) fn of_version(mem: &Mem, version_id: Uuid) -> Vec<Parameter> {
    let file = mem
        .version(version_id)
        .and_then(|v| mem.jobs.get(&v.job_id))
        .and_then(|job| mem.files.iter().find(|f| f.id == job.file_id));
    let Some(file) = file else {
        return Vec::new();
    };
    let entries = if file.content_type == "application/zip" {
        zip_entries(&file.data)
    } else {
        tar_entries(&file.data)
    };
    let mut roots: Vec<(String, String)> = entries
        .into_iter()
        .filter(|(name, _)| {
            let name = name.trim_start_matches("./");
            name.ends_with(".tf") && !name.contains('/')
        })
        .filter_map(|(name, bytes)| String::from_utf8(bytes).ok().map(|text| (name, text)))
        .collect();
    roots.sort();
    let mut parameters: Vec<Parameter> = roots.iter().flat_map(|(_, text)| scan(text)).collect();
    parameters.sort_by_key(|p| (p.order, p.name.to_lowercase()));
    parameters
}

/// The `data "coder_parameter" "<label>" { ... }` blocks of one file.
fn scan(text: &str) -> Vec<Parameter> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("data \"coder_parameter\"") {
        let Some(open) = rest[at..].find('{').map(|o| o + at) else {
            break;
        };
        let Some(close) = matching_brace(rest, open) else {
            break;
        };
        out.push(parameter(&rest[open + 1..close]));
        rest = &rest[close + 1..];
    }
    out
}

/// `(key, value as written)` of attributes, `(kind, body)` of nested blocks.
type Pairs<'a> = Vec<(&'a str, &'a str)>;

/// The attributes (`key = value`) and nested blocks (`kind { body }`) of a block body.
fn items(body: &str) -> (Pairs<'_>, Pairs<'_>) {
    let mut attributes = Vec::new();
    let mut blocks = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let rest = &body[at..];
        let start = rest.len() - rest.trim_start().len();
        let line_end = rest.find('\n').unwrap_or(rest.len());
        let word_end = rest[start..]
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(rest.len(), |e| e + start);
        let key = &rest[start..word_end];
        let after = rest[word_end..].trim_start_matches([' ', '\t']);
        if !key.is_empty() && after.starts_with('{') {
            let open = at + rest.len() - after.len();
            let Some(close) = matching_brace(body, open) else {
                break;
            };
            blocks.push((key, &body[open + 1..close]));
            at = close + 1;
            continue;
        }
        if !key.is_empty()
            && let Some(value) = after.strip_prefix('=')
        {
            let value_end = value.find('\n').unwrap_or(value.len());
            attributes.push((key, value[..value_end].trim()));
        }
        at += line_end.max(start) + 1;
    }
    (attributes, blocks)
}

/// A value as Coder stores it: strings unquoted, `jsonencode(...)` as the JSON text, anything else as written.
fn stored(raw: &str) -> String {
    match raw.strip_prefix("jsonencode(").and_then(|r| r.strip_suffix(')')) {
        Some(json) => serde_json::from_str::<Value>(json).map_or_else(|_| json.to_owned(), |v| v.to_string()),
        None => literal(raw),
    }
}

fn parameter(body: &str) -> Parameter {
    let (attributes, blocks) = items(body);
    let mut parameter = Parameter {
        type_: "string".to_owned(),
        ..Parameter::default()
    };
    for (key, raw) in attributes {
        let value = stored(raw);
        match key {
            "name" => parameter.name = value,
            "display_name" => parameter.display_name = value,
            "description" => parameter.description = value,
            "type" => parameter.type_ = value,
            "form_type" => parameter.form_type = value,
            "mutable" => parameter.mutable = value == "true",
            "ephemeral" => parameter.ephemeral = value == "true",
            "order" => parameter.order = value.parse().unwrap_or_default(),
            "default" if value != "null" => parameter.default = Some(value),
            _ => {}
        }
    }
    for (kind, inner) in blocks {
        let (attributes, _) = items(inner);
        let get = |wanted: &str| {
            attributes
                .iter()
                .find(|(key, _)| *key == wanted)
                .map(|(_, raw)| stored(raw))
        };
        match kind {
            "option" => parameter
                .options
                .push((get("name").unwrap_or_default(), get("value").unwrap_or_default())),
            "validation" => {
                parameter.min = get("min").and_then(|v| v.parse().ok());
                parameter.max = get("max").and_then(|v| v.parse().ok());
                parameter.regex = get("regex").unwrap_or_default();
            }
            _ => {}
        }
    }
    parameter
}

/// `TemplateVersionParameter` JSON.
pub(crate) fn render(parameter: &Parameter) -> Value {
    let options: Vec<Value> = parameter
        .options
        .iter()
        .map(|(name, value)| json!({"name": name, "description": "", "value": value, "icon": ""}))
        .collect();
    let mut body = json!({
        "name": parameter.name,
        "display_name": parameter.display_name,
        "description": parameter.description,
        "description_plaintext": parameter.description,
        "type": parameter.type_,
        "form_type": parameter.form_type,
        "mutable": parameter.mutable,
        "default_value": parameter.default.clone().unwrap_or_default(),
        "icon": "",
        "options": options,
        "required": parameter.default.is_none(),
        "ephemeral": parameter.ephemeral,
    });
    if let Some(min) = parameter.min {
        body["validation_min"] = json!(min);
    }
    if let Some(max) = parameter.max {
        body["validation_max"] = json!(max);
    }
    if !parameter.regex.is_empty() {
        body["validation_regex"] = json!(parameter.regex);
    }
    body
}

/// The values a build stores: `previous` (`None` for the first build) overridden by `given`, then the defaults;
/// only the version's parameters. A 400 as Coder answers it when a value is not allowed.
pub(crate) fn resolve(
    parameters: &[Parameter],
    previous: Option<&[(String, String)]>,
    given: &[(String, String)],
) -> Result<Vec<(String, String)>, ApiError> {
    let earlier: BTreeMap<&str, &str> = previous
        .unwrap_or_default()
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let named: BTreeMap<&str, &str> = given.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let mut problems = BTreeMap::new();
    let mut values = Vec::new();
    for parameter in parameters {
        let name = parameter.name.as_str();
        let kept = earlier.get(name).copied().filter(|_| !parameter.ephemeral);
        let value = named
            .get(name)
            .copied()
            .or(kept)
            .map(str::to_owned)
            .or_else(|| parameter.default.clone());
        let Some(value) = value else {
            problems.insert(
                name.to_owned(),
                "Required parameter not provided; parameter value is null".to_owned(),
            );
            continue;
        };
        let changed_immutable =
            previous.is_some() && !parameter.mutable && earlier.get(name).is_some_and(|was| *was != value);
        if changed_immutable {
            problems.insert(
                name.to_owned(),
                format!(
                    "Immutable parameter changed; Parameter {name:?} is not mutable, so it can't be updated after creating a workspace."
                ),
            );
        } else if let Some(reason) = refusal(parameter, &value) {
            problems.insert(name.to_owned(), reason);
        }
        values.push((name.to_owned(), value));
    }
    if problems.is_empty() {
        return Ok(values);
    }
    let mut error = ApiError::new(StatusCode::BAD_REQUEST, "Unable to validate parameters");
    for (name, reason) in problems {
        error = error.validation(&name, reason);
    }
    Err(error)
}

/// Why a value is not allowed: not one of the options, or a number out of the validation bounds.
fn refusal(parameter: &Parameter, value: &str) -> Option<String> {
    if !parameter.options.is_empty() && !parameter.options.iter().any(|(_, v)| v == value) {
        let empty = if value.is_empty() {
            ". The value is empty, did you forget to set it with a default or from user input?"
        } else {
            ""
        };
        return Some(format!(
            "Value must be a valid option{empty}; the value {value:?} must be defined as one of options"
        ));
    }
    let bounded = parameter.type_ == "number" && (parameter.min.is_some() || parameter.max.is_some());
    if !bounded {
        return None;
    }
    let reason = "Invalid parameter value according to 'validation' block";
    let Ok(number) = value.parse::<i64>() else {
        return Some(format!("{reason}; value {value:?} is not a number"));
    };
    if let Some(min) = parameter.min.filter(|min| number < *min) {
        return Some(format!("{reason}; value {number} is less than the minimum {min}"));
    }
    if let Some(max) = parameter.max.filter(|max| number > *max) {
        return Some(format!("{reason}; value {number} is more than the maximum {max}"));
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const SOURCE: &str = r#"
data "coder_parameter" "region" {
  name         = "region"
  display_name = "Region { x }"
  mutable      = true
  order 	 = 2
  default      = "eu-west"
  option {
    name  = "EU West"
    value = "eu-west"
  }
  option {
    name  = "US East"
    value = "us-east"
  }
}

data "coder_parameter" "cpus" {
  name    = "cpus"
  type    = "number"
  mutable = true
  order   = 1
  default = 2
  validation {
    min = 1
    max = 8
  }
}

data "coder_parameter" "disk" {
  name = "disk"
  order = 3
  default = jsonencode(["a", "b"])
}

data "coder_parameter" "token" {
  name = "token"
  order = 4
}
"#;

    fn parameters() -> Vec<Parameter> {
        let mut all = scan(SOURCE);
        all.sort_by_key(|p| p.order);
        all
    }

    fn pairs(values: &[(&str, &str)]) -> Vec<(String, String)> {
        values
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn problems(error: ApiError) -> Vec<(String, String)> {
        match error {
            ApiError::Json { validations, .. } => validations,
            ApiError::Text { .. } => Vec::new(),
        }
    }

    #[test]
    fn blocks_are_read_with_their_options_and_bounds() {
        let all = parameters();
        let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["cpus", "region", "disk", "token"]);
        assert_eq!(all[0].type_, "number");
        assert_eq!((all[0].min, all[0].max), (Some(1), Some(8)));
        assert_eq!(all[0].default.as_deref(), Some("2"));
        assert_eq!(all[1].display_name, "Region { x }");
        assert_eq!(
            all[1].options,
            pairs(&[("EU West", "eu-west"), ("US East", "us-east")])
        );
        assert!(all[1].mutable && !all[2].mutable);
        assert_eq!(all[2].default.as_deref(), Some(r#"["a","b"]"#));
        assert_eq!(all[3].default, None);
        assert_eq!(render(&all[3])["required"], true);
    }

    #[test]
    fn a_build_keeps_earlier_values_and_checks_new_ones() {
        let all = parameters();
        let first = resolve(
            &all,
            None,
            &pairs(&[("token", "t"), ("disk", "x"), ("nope", "1")]),
        )
        .unwrap();
        assert_eq!(
            first,
            pairs(&[
                ("cpus", "2"),
                ("region", "eu-west"),
                ("disk", "x"),
                ("token", "t")
            ])
        );
        let next = resolve(&all, Some(&first), &pairs(&[("cpus", "4")])).unwrap();
        assert_eq!(
            next,
            pairs(&[
                ("cpus", "4"),
                ("region", "eu-west"),
                ("disk", "x"),
                ("token", "t")
            ])
        );
        let refused = resolve(
            &all,
            Some(&first),
            &pairs(&[("disk", "y"), ("region", "mars"), ("cpus", "9")]),
        )
        .unwrap_err();
        assert_eq!(
            problems(refused),
            pairs(&[
                (
                    "cpus",
                    "Invalid parameter value according to 'validation' block; value 9 is more than the maximum 8"
                ),
                (
                    "disk",
                    "Immutable parameter changed; Parameter \"disk\" is not mutable, so it can't be updated after creating a workspace."
                ),
                (
                    "region",
                    "Value must be a valid option; the value \"mars\" must be defined as one of options"
                ),
            ])
        );
        let missing = resolve(&all, None, &[]).unwrap_err();
        assert_eq!(problems(missing)[0].0, "token");
    }
}
