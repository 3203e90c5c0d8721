//! The inputs of the template version `spec.files` imports: provisioner tags, Terraform variable values (given, or
//! read from a Secret), the version's name and message. Reads show the active version's tags and variables in the
//! spec (its name and message in the status); a write imports a new version when an input the spec gives differs
//! from the active version's. Tags, and variables with a plain value, the spec leaves out are carried over to a new
//! version; a variable taken from a Secret, or sensitive, must be listed (a 422 otherwise), since its value cannot be
//! carried over.
//!
//! Coder never gives back a sensitive value, and does not record where a value came from. So the Secret references
//! a version was imported with are recorded in its message, one trailing line per variable
//! (`coder-k8s-variable-from: <variable>=<secret>/<key>`), which reads strip from `versionMessage`. They are shown,
//! never resolved: anyone who can push a version in Coder writes its message, so only a reference the spec itself
//! gives is read (else a crafted message would have the next apply copy any Secret into Coder). A variable given
//! from a Secret counts as unchanged while its recorded reference is the same: a rotated Secret reaches Coder with
//! the next new version (change `versionName` to import one). Values are read only when a version is imported, and
//! only after the caller was authorized to `get` the Secret (the server reads it with its own credentials); they
//! never appear in the object, in logs or in errors.

use std::collections::BTreeMap;

use coder_k8s_api::aggregation::{
    CoderTemplateSecretKeyRef, CoderTemplateSpec, CoderTemplateVariable, CoderTemplateVariableSource,
};
use coder_k8s_coder_client::Secret as Value;
use coder_k8s_coder_client::types::template_versions::{
    CreateTemplateVersionRequest, TemplateVersion, TemplateVersionVariable, VariableValue,
};

use super::field_errors::FieldError;
use super::k8s_names::{is_dns_subdomain, is_secret_data_key};
use super::provider::Provider;
use crate::generic::caller::{self, ExtraAction};
use crate::generic::{ApiError, RequestContext};

/// The prefix of a message line that records a variable's Secret reference.
pub const REFERENCE_PREFIX: &str = "coder-k8s-variable-from: ";
/// Coder's rule for version names, and its longest message in bytes.
const MAX_VERSION_NAME: usize = 64;
const MAX_MESSAGE_BYTES: usize = 1_048_576;
/// Coder's provisioner tag keys.
const SCOPE: &str = "scope";
const OWNER: &str = "owner";

/// What the active version was imported with, as Coder shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Active {
    pub name: String,
    /// The message without the reference lines.
    pub message: String,
    pub tags: BTreeMap<String, String>,
    pub variables: Vec<TemplateVersionVariable>,
    /// Variable → the Secret key it was read from.
    pub references: BTreeMap<String, CoderTemplateSecretKeyRef>,
}

impl Active {
    pub fn of(version: &TemplateVersion, variables: Vec<TemplateVersionVariable>) -> Self {
        let (message, references) = split_message(&version.message);
        Self {
            name: version.name.clone(),
            message,
            tags: version.job.tags.clone(),
            variables,
            references,
        }
    }

    /// The variables as the spec shows them, sorted by name: a value, the Secret reference a sensitive one was
    /// imported with, or (sensitive, set some other way) the name only.
    pub fn shown_variables(&self) -> Vec<CoderTemplateVariable> {
        let mut out: Vec<CoderTemplateVariable> = self
            .variables
            .iter()
            .map(|v| {
                let reference = self.references.get(&v.name).cloned();
                CoderTemplateVariable {
                    name: v.name.clone(),
                    value: (!v.sensitive && reference.is_none()).then(|| v.value.clone()),
                    value_from: reference
                        .map(|secret_key_ref| CoderTemplateVariableSource { secret_key_ref }),
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The variables whose value Coder shows and which no Secret reference is recorded for: those a new version can
    /// be given again without the spec.
    pub fn plain_variables(&self) -> Vec<CoderTemplateVariable> {
        self.shown_variables()
            .into_iter()
            .filter(|v| v.value.is_some())
            .collect()
    }

    /// Why the value of `declared` cannot reach a new version unless the spec gives it: taken from a Secret (whose
    /// recorded reference is not trusted), or sensitive (Coder does not give it back). `None` for a plain value.
    fn not_carried(&self, declared: &TemplateVersionVariable) -> Option<String> {
        if self.references.contains_key(&declared.name) {
            Some(format!("takes {:?} from a Secret", declared.name))
        } else if declared.sensitive {
            Some(format!(
                "holds {:?} as a sensitive value, which Coder does not give back",
                declared.name
            ))
        } else {
            None
        }
    }
}

/// Before a new version is imported: the variables of the active version it would lose, as field errors. One the
/// spec leaves out (no `spec.variables`) or gives by name only, which the active version took from a Secret or holds
/// as a sensitive value, would silently fall back to its default: the spec must give it (from a Secret).
pub fn unkept(spec: &CoderTemplateSpec, active: &Active) -> Vec<FieldError> {
    let Some(given) = &spec.variables else {
        return active
            .variables
            .iter()
            .filter_map(|declared| active.not_carried(declared))
            .map(|why| {
                FieldError::required(
                    "spec.variables",
                    format!(
                        "the active version {why}; list it in spec.variables with valueFrom.secretKeyRef to import a new version"
                    ),
                )
            })
            .collect();
    };
    given
        .iter()
        .enumerate()
        .filter(|(_, v)| v.value.is_none() && v.value_from.is_none())
        .filter_map(|(index, v)| {
            let declared = active.variables.iter().find(|d| d.name == v.name)?;
            let why = active.not_carried(declared)?;
            Some(FieldError::required(
                format!("spec.variables[{index}].valueFrom"),
                format!(
                    "the active version {why}; give it with valueFrom.secretKeyRef to import a new version"
                ),
            ))
        })
        .collect()
}

/// Splits a version message into the written message and the Secret references recorded after it.
pub fn split_message(message: &str) -> (String, BTreeMap<String, CoderTemplateSecretKeyRef>) {
    let mut lines: Vec<&str> = message.lines().collect();
    let mut references = BTreeMap::new();
    while let Some(line) = lines.last() {
        let Some(parsed) = line.strip_prefix(REFERENCE_PREFIX).and_then(parse_reference) else {
            break;
        };
        references.insert(parsed.0, parsed.1);
        lines.pop();
    }
    if references.is_empty() {
        return (message.to_owned(), references);
    }
    // The blank line that separates the written message from the references.
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    (lines.join("\n"), references)
}

fn parse_reference(text: &str) -> Option<(String, CoderTemplateSecretKeyRef)> {
    let (variable, source) = text.split_once('=')?;
    let (name, key) = source.split_once('/')?;
    Some((
        variable.to_owned(),
        CoderTemplateSecretKeyRef {
            name: name.to_owned(),
            key: key.to_owned(),
        },
    ))
}

/// The message a version is created with: the written one, then a line per Secret reference.
pub fn join_message(message: &str, references: &BTreeMap<String, CoderTemplateSecretKeyRef>) -> String {
    if references.is_empty() {
        return message.to_owned();
    }
    let lines: Vec<String> = references
        .iter()
        .map(|(variable, r)| format!("{REFERENCE_PREFIX}{variable}={}/{}", r.name, r.key))
        .collect();
    if message.is_empty() {
        lines.join("\n")
    } else {
        format!("{message}\n\n{}", lines.join("\n"))
    }
}

fn valid_version_name(name: &str) -> bool {
    // `^[a-zA-Z0-9]+(?:[_.-]{1}[a-zA-Z0-9]+)*$`: alphanumeric runs joined by single `_`, `.` or `-`.
    !name.is_empty()
        && name.len() <= MAX_VERSION_NAME
        && name
            .split(['_', '.', '-'])
            .all(|run| !run.is_empty() && run.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// The rules of the version inputs of a spec (paths under `spec.`).
pub fn validate(spec: &CoderTemplateSpec) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for key in spec.provisioner_tags.iter().flat_map(BTreeMap::keys) {
        if key.is_empty() {
            errors.push(FieldError::required("spec.provisionerTags", "a tag needs a key"));
        }
    }
    if let Some(name) = spec.version_name.as_ref().filter(|n| !valid_version_name(n)) {
        errors.push(FieldError::invalid(
            "spec.versionName",
            name,
            "must be letters and digits, joined by single '_', '.' or '-', at most 64 characters",
        ));
    }
    if spec
        .version_message
        .as_ref()
        .is_some_and(|m| m.len() > MAX_MESSAGE_BYTES / 2)
    {
        errors.push(FieldError::invalid(
            "spec.versionMessage",
            "<long message>",
            "must be at most 512 KiB",
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (index, variable) in spec.variables.iter().flatten().enumerate() {
        let at = format!("spec.variables[{index}]");
        if variable.name.is_empty() {
            errors.push(FieldError::required(format!("{at}.name"), ""));
        } else if seen.contains(&variable.name.as_str()) {
            errors.push(FieldError::duplicate(format!("{at}.name"), &variable.name));
        }
        seen.push(&variable.name);
        if variable.name.contains('=') {
            errors.push(FieldError::invalid(
                format!("{at}.name"),
                &variable.name,
                "is not a Terraform variable name",
            ));
        }
        let Some(source) = &variable.value_from else {
            continue;
        };
        if variable.value.is_some() {
            errors.push(FieldError::forbidden(
                format!("{at}.valueFrom"),
                "give value or valueFrom, not both",
            ));
        }
        let reference = &source.secret_key_ref;
        if !is_dns_subdomain(&reference.name) {
            errors.push(FieldError::invalid(
                format!("{at}.valueFrom.secretKeyRef.name"),
                &reference.name,
                "must be the name of a Secret in the object's namespace",
            ));
        }
        if !is_secret_data_key(&reference.key) {
            errors.push(FieldError::invalid(
                format!("{at}.valueFrom.secretKeyRef.key"),
                &reference.key,
                "must be a key of the Secret's data",
            ));
        }
    }
    errors
}

/// Whether the spec sets any version input (they describe the version `files` imports).
pub fn any_set(spec: &CoderTemplateSpec) -> Vec<&'static str> {
    [
        (spec.provisioner_tags.is_some(), "spec.provisionerTags"),
        (spec.variables.is_some(), "spec.variables"),
        (spec.version_name.is_some(), "spec.versionName"),
        (spec.version_message.is_some(), "spec.versionMessage"),
    ]
    .into_iter()
    .filter_map(|(set, path)| set.then_some(path))
    .collect()
}

/// The inputs of a new version: the spec's, and where the spec leaves tags or variables out the active version's
/// (of the variables, the plain values only: see [`unkept`]). The name and message are the spec's only (Coder's defaults otherwise: a random name, no message), since a name is
/// unique and a message describes one version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wanted {
    pub tags: BTreeMap<String, String>,
    pub variables: Vec<CoderTemplateVariable>,
    pub name: Option<String>,
    pub message: String,
}

pub fn wanted(spec: &CoderTemplateSpec, active: Option<&Active>) -> Wanted {
    Wanted {
        tags: spec
            .provisioner_tags
            .clone()
            .or_else(|| active.map(|a| a.tags.clone()))
            .unwrap_or_default(),
        variables: spec
            .variables
            .clone()
            .or_else(|| active.map(Active::plain_variables))
            .unwrap_or_default(),
        name: spec.version_name.clone(),
        message: spec.version_message.clone().unwrap_or_default(),
    }
}

/// Coder's `MutateTags` for a version the operator creates: empty values dropped, `scope` `organization` with an
/// empty `owner` unless the scope is `user` (whose owner Coder sets to the creator, not compared here).
fn as_coder_stores(tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = tags
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if out.get(SCOPE).map(String::as_str) != Some("user") {
        out.insert(SCOPE.to_owned(), "organization".to_owned());
        out.insert(OWNER.to_owned(), String::new());
    }
    out
}

fn same_tags(wanted: &BTreeMap<String, String>, active: &BTreeMap<String, String>) -> bool {
    let mut wanted = as_coder_stores(wanted);
    let mut active = active.clone();
    if wanted.get(SCOPE).map(String::as_str) == Some("user") {
        wanted.remove(OWNER);
        active.remove(OWNER);
    }
    wanted == active
}

/// Whether one declared variable of the active version already holds what `wanted` gives it.
fn same_variable(
    declared: &TemplateVersionVariable,
    given: Option<&CoderTemplateVariable>,
    active: &Active,
) -> bool {
    let recorded = active.references.get(&declared.name);
    match given {
        // Left out of the list: the default, which a sensitive variable's redacted value cannot show.
        None => declared.sensitive || (recorded.is_none() && declared.value == declared.default_value),
        Some(CoderTemplateVariable {
            value_from: Some(source),
            ..
        }) => recorded == Some(&source.secret_key_ref),
        Some(CoderTemplateVariable {
            value: Some(value), ..
        }) => !declared.sensitive && recorded.is_none() && declared.value == *value,
        // Shown by name only: whatever Coder holds.
        Some(_) => true,
    }
}

/// Whether the variables `given` are what the active version holds: each declared, each declared one the same.
fn same_variables(given: &[CoderTemplateVariable], active: &Active) -> bool {
    let declared_all_given = given
        .iter()
        .all(|v| active.variables.iter().any(|d| d.name == v.name));
    declared_all_given
        && active.variables.iter().all(|declared| {
            let given = given.iter().find(|v| v.name == declared.name);
            same_variable(declared, given, active)
        })
}

/// The spec fields whose input differs from the active version's, so that a new version is needed.
pub fn differences(spec: &CoderTemplateSpec, active: &Active) -> Vec<&'static str> {
    let wanted = wanted(spec, Some(active));
    let mut out = Vec::new();
    if !same_tags(&wanted.tags, &active.tags) {
        out.push("spec.provisionerTags");
    }
    // Left out, the variables are the active version's: nothing to compare.
    if let Some(given) = &spec.variables
        && !same_variables(given, active)
    {
        out.push("spec.variables");
    }
    if wanted.name.as_ref().is_some_and(|n| *n != active.name) {
        out.push("spec.versionName");
    }
    if spec
        .version_message
        .as_ref()
        .is_some_and(|m| *m != active.message)
    {
        out.push("spec.versionMessage");
    }
    out
}

/// The values to send and the Secret references to record, every Secret read (after authorizing the caller)
/// before anything is written. A variable shown by name only is not sent (Coder then uses its default).
pub async fn resolve_values(
    ctx: &RequestContext,
    provider: &dyn Provider,
    namespace: &str,
    variables: &[CoderTemplateVariable],
) -> Result<Result<Resolved, Vec<FieldError>>, ApiError> {
    let mut resolved = Resolved::default();
    let mut errors = Vec::new();
    for (index, variable) in variables.iter().enumerate() {
        let value = match (&variable.value, &variable.value_from) {
            (Some(value), _) => Value::new(value.clone()),
            (None, Some(source)) => {
                let at = format!("spec.variables[{index}].valueFrom.secretKeyRef");
                match secret_value(ctx, provider, namespace, &at, &source.secret_key_ref).await? {
                    Ok(value) => {
                        resolved
                            .references
                            .insert(variable.name.clone(), source.secret_key_ref.clone());
                        value
                    }
                    Err(error) => {
                        errors.push(error);
                        continue;
                    }
                }
            }
            (None, None) => continue,
        };
        resolved.values.push(VariableValue {
            name: variable.name.clone(),
            value,
        });
    }
    Ok(if errors.is_empty() {
        Ok(resolved)
    } else {
        Err(errors)
    })
}

/// The values of a new version and where the ones from Secrets came from.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    pub values: Vec<VariableValue>,
    pub references: BTreeMap<String, CoderTemplateSecretKeyRef>,
}

impl Resolved {
    /// The values read from Secrets, which must never show in an error.
    pub fn secret_values(&self) -> Vec<&str> {
        self.values
            .iter()
            .filter(|v| self.references.contains_key(&v.name))
            .map(|v| v.value.expose())
            .collect()
    }
}

/// One Secret key's value: the caller must be allowed to `get` the Secret (a 403 otherwise, before it is read); a
/// missing Secret or key, or a value that is not UTF-8, is a field error that never shows the value.
async fn secret_value(
    ctx: &RequestContext,
    provider: &dyn Provider,
    namespace: &str,
    at: &str,
    reference: &CoderTemplateSecretKeyRef,
) -> Result<Result<Value, FieldError>, ApiError> {
    caller::authorize(
        ctx,
        &ExtraAction::core("get", "secrets", namespace, &reference.name),
    )
    .await?;
    let Some(secret) = provider.read_secret(namespace, &reference.name).await? else {
        return Ok(Err(FieldError::not_found(
            format!("{at}.name"),
            &reference.name,
            format!("there is no such Secret in namespace {namespace:?}"),
        )));
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|data| data.get(&reference.key))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|data| data.get(&reference.key))
                .map(|s| s.clone().into_bytes())
        });
    let Some(bytes) = bytes else {
        return Ok(Err(FieldError::not_found(
            format!("{at}.key"),
            &reference.key,
            format!("Secret {:?} has no such key", reference.name),
        )));
    };
    Ok(String::from_utf8(bytes)
        .map(Value::new)
        .map_err(|_| FieldError::invalid(format!("{at}.key"), &reference.key, "the value is not UTF-8 text")))
}

/// The version create request with the wanted inputs.
pub fn request(
    base: CreateTemplateVersionRequest,
    wanted: &Wanted,
    resolved: Resolved,
) -> CreateTemplateVersionRequest {
    CreateTemplateVersionRequest {
        name: wanted.name.clone().unwrap_or_default(),
        message: join_message(&wanted.message, &resolved.references),
        tags: wanted.tags.clone(),
        user_variable_values: resolved.values,
        ..base
    }
}

/// What a new version's import says about the wanted variables, before the version is used: each must be declared
/// by the source, and one the source declares sensitive must come from a Secret (so that its value never shows in the
/// object). Field errors otherwise.
pub fn check_imported(wanted: &Wanted, declared: &[TemplateVersionVariable]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (index, variable) in wanted.variables.iter().enumerate() {
        let at = format!("spec.variables[{index}]");
        match declared.iter().find(|d| d.name == variable.name) {
            None => errors.push(FieldError::not_found(
                format!("{at}.name"),
                &variable.name,
                "the template source declares no such variable",
            )),
            Some(d) if d.sensitive && variable.value.as_ref().is_some_and(|v| !v.is_empty()) => {
                errors.push(FieldError::forbidden(
                    format!("{at}.value"),
                    "the source declares this variable sensitive: give it with valueFrom.secretKeyRef",
                ));
            }
            Some(_) => {}
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(name: &str, key: &str) -> CoderTemplateSecretKeyRef {
        CoderTemplateSecretKeyRef {
            name: name.into(),
            key: key.into(),
        }
    }

    fn plain(name: &str, value: &str) -> CoderTemplateVariable {
        CoderTemplateVariable {
            name: name.into(),
            value: Some(value.into()),
            value_from: None,
        }
    }

    fn from_secret(name: &str, secret: &str, key: &str) -> CoderTemplateVariable {
        CoderTemplateVariable {
            name: name.into(),
            value: None,
            value_from: Some(CoderTemplateVariableSource {
                secret_key_ref: reference(secret, key),
            }),
        }
    }

    fn declared(name: &str, value: &str, default: &str, sensitive: bool) -> TemplateVersionVariable {
        TemplateVersionVariable {
            name: name.into(),
            value: value.into(),
            default_value: default.into(),
            sensitive,
            ..TemplateVersionVariable::default()
        }
    }

    #[test]
    fn references_are_recorded_after_the_message_and_stripped_on_read() {
        let refs = BTreeMap::from([
            ("db_password".to_owned(), reference("db", "password")),
            ("token".to_owned(), reference("api", "token")),
        ]);
        let message = join_message("first release", &refs);
        assert_eq!(
            message,
            "first release\n\ncoder-k8s-variable-from: db_password=db/password\ncoder-k8s-variable-from: token=api/token"
        );
        assert_eq!(
            split_message(&message),
            ("first release".to_owned(), refs.clone())
        );
        assert_eq!(split_message(&join_message("", &refs)), (String::new(), refs));
        let untouched = "a message\nwith coder-k8s-variable-from: x=y/z inside";
        assert_eq!(split_message(untouched), (untouched.to_owned(), BTreeMap::new()));
        assert_eq!(join_message("m", &BTreeMap::new()), "m");
    }

    #[test]
    fn reads_show_values_references_or_names_only() {
        let version = TemplateVersion {
            name: "v1".into(),
            message: join_message("m", &BTreeMap::from([("db".to_owned(), reference("s", "k"))])),
            ..TemplateVersion::default()
        };
        let active = Active::of(
            &version,
            vec![
                declared("region", "eu", "us", false),
                declared("db", "*redacted*", "*redacted*", true),
                declared("other", "*redacted*", "*redacted*", true),
            ],
        );
        assert_eq!(active.message, "m");
        assert_eq!(
            active.shown_variables(),
            vec![
                from_secret("db", "s", "k"),
                CoderTemplateVariable {
                    name: "other".into(),
                    value: None,
                    value_from: None,
                },
                plain("region", "eu"),
            ]
        );
    }

    fn spec() -> CoderTemplateSpec {
        CoderTemplateSpec::default()
    }

    #[test]
    fn the_rules_of_the_inputs_name_the_field() {
        let spec = CoderTemplateSpec {
            version_name: Some("v 1".into()),
            provisioner_tags: Some(BTreeMap::from([(String::new(), "x".to_owned())])),
            variables: Some(vec![
                plain("a", "1"),
                plain("a", "2"),
                CoderTemplateVariable {
                    name: String::new(),
                    value: Some("x".into()),
                    value_from: Some(CoderTemplateVariableSource {
                        secret_key_ref: reference("Bad_Name", "k/ey"),
                    }),
                },
            ]),
            ..spec()
        };
        let errors: Vec<String> = validate(&spec).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "spec.provisionerTags: Required value: a tag needs a key",
                "spec.versionName: Invalid value: \"v 1\": must be letters and digits, joined by single '_', '.' or '-', at most 64 characters",
                "spec.variables[1].name: Duplicate value: \"a\"",
                "spec.variables[2].name: Required value",
                "spec.variables[2].valueFrom: Forbidden: give value or valueFrom, not both",
                "spec.variables[2].valueFrom.secretKeyRef.name: Invalid value: \"Bad_Name\": must be the name of a Secret in the object's namespace",
                "spec.variables[2].valueFrom.secretKeyRef.key: Invalid value: \"k/ey\": must be a key of the Secret's data",
            ]
        );
        for good in ["v1", "v1.2.3", "release_2026-01"] {
            assert!(valid_version_name(good), "{good}");
        }
        for bad in ["", "-v1", "v1-", "v1..2", &"x".repeat(65)] {
            assert!(!valid_version_name(bad), "{bad}");
        }
    }

    fn active() -> Active {
        Active {
            name: "v1".into(),
            message: "first".into(),
            tags: BTreeMap::from([
                ("env".to_owned(), "prod".to_owned()),
                ("owner".to_owned(), String::new()),
                ("scope".to_owned(), "organization".to_owned()),
            ]),
            variables: vec![
                declared("region", "eu", "us", false),
                declared("size", "small", "small", false),
                declared("db", "*redacted*", "*redacted*", true),
            ],
            references: BTreeMap::from([("db".to_owned(), reference("s", "k"))]),
        }
    }

    #[test]
    fn the_read_back_or_nothing_given_needs_no_new_version() {
        let active = active();
        assert!(differences(&spec(), &active).is_empty());
        let back = CoderTemplateSpec {
            provisioner_tags: Some(active.tags.clone()),
            variables: Some(active.shown_variables()),
            ..spec()
        };
        assert!(differences(&back, &active).is_empty());
        // What a Git file would hold: the tag without Coder's additions, the variables that are not defaults.
        let git = CoderTemplateSpec {
            provisioner_tags: Some(BTreeMap::from([("env".to_owned(), "prod".to_owned())])),
            variables: Some(vec![plain("region", "eu"), from_secret("db", "s", "k")]),
            version_name: Some("v1".into()),
            version_message: Some("first".into()),
            ..spec()
        };
        assert!(differences(&git, &active).is_empty());
    }

    #[test]
    fn a_changed_input_needs_a_new_version() {
        let active = active();
        let cases = [
            (
                CoderTemplateSpec {
                    provisioner_tags: Some(BTreeMap::from([("env".to_owned(), "dev".to_owned())])),
                    ..spec()
                },
                "spec.provisionerTags",
            ),
            (
                CoderTemplateSpec {
                    variables: Some(vec![plain("region", "us"), from_secret("db", "s", "k")]),
                    ..spec()
                },
                "spec.variables",
            ),
            (
                CoderTemplateSpec {
                    variables: Some(vec![plain("region", "eu"), from_secret("db", "s", "other")]),
                    ..spec()
                },
                "spec.variables",
            ),
            (
                CoderTemplateSpec {
                    // `region` left out: its default differs from the value Coder holds.
                    variables: Some(vec![from_secret("db", "s", "k")]),
                    ..spec()
                },
                "spec.variables",
            ),
            (
                CoderTemplateSpec {
                    variables: Some(vec![plain("undeclared", "x")]),
                    ..spec()
                },
                "spec.variables",
            ),
            (
                CoderTemplateSpec {
                    version_name: Some("v2".into()),
                    ..spec()
                },
                "spec.versionName",
            ),
            (
                CoderTemplateSpec {
                    version_message: Some("second".into()),
                    ..spec()
                },
                "spec.versionMessage",
            ),
        ];
        for (spec, field) in cases {
            assert_eq!(differences(&spec, &active), [field], "{spec:?}");
        }
    }

    #[test]
    fn a_new_version_keeps_what_the_spec_leaves_out_except_the_name() {
        let active = active();
        let kept = wanted(&spec(), Some(&active));
        assert_eq!(kept.tags, active.tags);
        assert_eq!(
            kept.variables,
            [plain("region", "eu"), plain("size", "small")],
            "the plain values"
        );
        assert_eq!(kept.message, "", "a message is not carried over");
        assert_eq!(kept.name, None);
        let request = request(
            CreateTemplateVersionRequest::terraform(uuid::Uuid::nil()),
            &kept,
            Resolved::default(),
        );
        assert_eq!(request.name, "");
        assert_eq!(request.message, "");
        assert_eq!(request.tags, active.tags);
    }

    #[test]
    fn a_reference_in_the_active_message_is_never_carried_into_a_new_version() {
        // Whoever pushed the active version wrote its message, and with it this reference.
        let version = TemplateVersion {
            name: "pushed".into(),
            message: join_message(
                "",
                &BTreeMap::from([("region".to_owned(), reference("other", "key"))]),
            ),
            ..TemplateVersion::default()
        };
        let active = Active::of(&version, vec![declared("region", "x", "us", false)]);
        assert_eq!(
            active.shown_variables(),
            [from_secret("region", "other", "key")],
            "reads show it"
        );
        let kept = wanted(&spec(), Some(&active));
        assert_eq!(kept.variables, [], "nothing to resolve");
        let errors: Vec<String> = unkept(&spec(), &active).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "spec.variables: Required value: the active version takes \"region\" from a Secret; list it in spec.variables with valueFrom.secretKeyRef to import a new version"
            ]
        );
    }

    #[test]
    fn a_new_version_refuses_to_drop_secret_and_sensitive_values() {
        let mut active = active();
        active
            .variables
            .push(declared("other", "*redacted*", "*redacted*", true));
        let left_out: Vec<String> = unkept(&spec(), &active).iter().map(ToString::to_string).collect();
        let tail = "list it in spec.variables with valueFrom.secretKeyRef to import a new version";
        assert_eq!(
            left_out,
            [
                format!(
                    "spec.variables: Required value: the active version takes \"db\" from a Secret; {tail}"
                ),
                format!(
                    "spec.variables: Required value: the active version holds \"other\" as a sensitive value, which Coder does not give back; {tail}"
                ),
            ]
        );
        let name_only = |name: &str| CoderTemplateVariable {
            name: name.into(),
            value: None,
            value_from: None,
        };
        let read_back = CoderTemplateSpec {
            variables: Some(vec![
                plain("region", "eu"),
                name_only("size"),
                name_only("other"),
                from_secret("db", "s", "k"),
            ]),
            ..spec()
        };
        let errors: Vec<String> = unkept(&read_back, &active)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "spec.variables[2].valueFrom: Required value: the active version holds \"other\" as a sensitive value, which Coder does not give back; give it with valueFrom.secretKeyRef to import a new version"
            ]
        );
        let given = CoderTemplateSpec {
            variables: Some(vec![from_secret("db", "s", "k"), from_secret("other", "s", "o")]),
            ..spec()
        };
        assert!(unkept(&given, &active).is_empty());
    }

    #[test]
    fn an_import_must_declare_every_variable_and_sensitive_ones_come_from_secrets() {
        let wanted = Wanted {
            variables: vec![
                plain("region", "eu"),
                plain("db", "hunter2"),
                from_secret("token", "s", "k"),
                plain("nope", "x"),
            ],
            ..Wanted::default()
        };
        let declared = [
            declared("region", "eu", "", false),
            declared("db", "*redacted*", "*redacted*", true),
            declared("token", "*redacted*", "*redacted*", true),
        ];
        let errors: Vec<String> = check_imported(&wanted, &declared)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "spec.variables[1].value: Forbidden: the source declares this variable sensitive: give it with valueFrom.secretKeyRef",
                "spec.variables[3].name: Not found: \"nope\": the template source declares no such variable",
            ]
        );
        assert!(
            !errors.iter().any(|e| e.contains("hunter2")),
            "values never appear in errors"
        );
    }
}
