//! The structure of the aggregated object names: `<organization>.<owner>.<workspace>` (CoderWorkspace),
//! `<organization>.<template>` (CoderTemplate) and `<organization>.<template>.<version>` (CoderTemplateVersion).
//! Pure parsers of the syntax only, shared by the aggregated API server (which checks aliases and casing against
//! Coder data) and the MCP server (which also holds every segment to Coder's name rule before using a name).

use std::fmt;

const SEPARATOR: char = '.';

/// The parts of a workspace name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceName {
    pub organization: String,
    pub owner: String,
    pub workspace: String,
}

/// The parts of a template name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateName {
    pub organization: String,
    pub template: String,
}

/// The parts of a template version name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateVersionName {
    pub organization: String,
    pub template: String,
    /// May contain `.`; compared case-sensitively.
    pub version: String,
}

/// Why a name does not parse. [`fmt::Display`] gives the whole message (`invalid workspace name "acme.dev": expected
/// 2 separators (".")`); [`NameError::reason`] only the broken rule, for callers that name the object themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameError {
    object: &'static str,
    name: String,
    reason: String,
}

impl NameError {
    fn new(object: &'static str, name: &str, reason: String) -> Self {
        Self {
            object,
            name: name.to_owned(),
            reason,
        }
    }

    /// The broken rule, for example `segment 1 must not be empty`.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name.is_empty() {
            write!(f, "invalid {} name: {}", self.object, self.reason)
        } else {
            write!(f, "invalid {} name {:?}: {}", self.object, self.name, self.reason)
        }
    }
}

impl std::error::Error for NameError {}

/// Splits `<organization>.<owner>.<workspace>` (exactly three non-empty segments).
pub fn parse_workspace_name(name: &str) -> Result<WorkspaceName, NameError> {
    let [organization, owner, workspace] = split_exactly::<3>(name, "workspace")?;
    Ok(WorkspaceName {
        organization,
        owner,
        workspace,
    })
}

/// Splits `<organization>.<template>` (exactly two non-empty segments).
pub fn parse_template_name(name: &str) -> Result<TemplateName, NameError> {
    let [organization, template] = split_exactly::<2>(name, "template")?;
    Ok(TemplateName {
        organization,
        template,
    })
}

/// Splits `<organization>.<template>.<version>`. Organization and template names cannot contain `.`, so the first
/// two dots separate the segments and the version keeps any further dots.
pub fn parse_template_version_name(name: &str) -> Result<TemplateVersionName, NameError> {
    let object = "template version";
    if name.is_empty() {
        return Err(NameError::new(object, name, "name must not be empty".to_owned()));
    }
    let segments: Vec<&str> = name.splitn(3, SEPARATOR).collect();
    let [organization, template, version] = segments[..] else {
        return Err(NameError::new(
            object,
            name,
            "expected <organization>.<template>.<version>".to_owned(),
        ));
    };
    if let Some(index) = [organization, template, version]
        .iter()
        .position(|s| s.is_empty())
    {
        return Err(NameError::new(
            object,
            name,
            format!("segment {index} must not be empty"),
        ));
    }
    Ok(TemplateVersionName {
        organization: organization.to_owned(),
        template: template.to_owned(),
        version: version.to_owned(),
    })
}

fn split_exactly<const N: usize>(name: &str, object: &'static str) -> Result<[String; N], NameError> {
    if name.is_empty() {
        return Err(NameError::new(object, name, "name must not be empty".to_owned()));
    }
    let segments: Vec<String> = name.split(SEPARATOR).map(str::to_owned).collect();
    let segments: [String; N] = segments.try_into().map_err(|_| {
        NameError::new(
            object,
            name,
            format!("expected {} separators (\"{SEPARATOR}\")", N - 1),
        )
    })?;
    if let Some(index) = segments.iter().position(String::is_empty) {
        return Err(NameError::new(
            object,
            name,
            format!("segment {index} must not be empty"),
        ));
    }
    Ok(segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_object_and_the_rule_and_reasons_only_the_rule() {
        let error = parse_workspace_name("acme.dev").unwrap_err();
        assert_eq!(
            error.to_string(),
            r#"invalid workspace name "acme.dev": expected 2 separators (".")"#
        );
        assert_eq!(error.reason(), r#"expected 2 separators (".")"#);
        assert_eq!(
            parse_template_name("").unwrap_err().to_string(),
            "invalid template name: name must not be empty"
        );
        assert_eq!(
            parse_template_name("acme.").unwrap_err().reason(),
            "segment 1 must not be empty"
        );
        assert_eq!(
            parse_template_version_name("acme").unwrap_err().to_string(),
            r#"invalid template version name "acme": expected <organization>.<template>.<version>"#
        );
    }

    #[test]
    fn segments_are_split_at_every_dot_except_in_a_version() {
        assert_eq!(
            parse_workspace_name("acme.alice.dev").unwrap(),
            WorkspaceName {
                organization: "acme".into(),
                owner: "alice".into(),
                workspace: "dev".into()
            }
        );
        assert!(parse_workspace_name("acme.alice.dev.x").is_err());
        assert_eq!(
            parse_template_version_name("acme.docker.v1.2").unwrap().version,
            "v1.2"
        );
    }
}
