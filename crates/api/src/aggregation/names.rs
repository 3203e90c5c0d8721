//! The structure of the aggregated object names: `<organization>.<owner>.<workspace>` (CoderWorkspace),
//! `<organization>.<template>` (CoderTemplate), `<organization>.<template>.<version>` (CoderTemplateVersion),
//! `<organization>.<group>` (CoderGroup), and a Coder name alone (CoderOrganization, CoderUser).
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

/// The parts of a group name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupName {
    pub organization: String,
    pub group: String,
}

/// Splits `<organization>.<group>` (exactly two non-empty segments).
pub fn parse_group_name(name: &str) -> Result<GroupName, NameError> {
    let [organization, group] = split_exactly::<2>(name, "group")?;
    Ok(GroupName { organization, group })
}

/// An organization name: one segment that follows Coder's name rule ([`coder_name_problem`]).
pub fn parse_organization_name(name: &str) -> Result<String, NameError> {
    single_coder_name(name, "organization")
}

/// A user name: one segment that follows Coder's name rule ([`coder_name_problem`]).
pub fn parse_user_name(name: &str) -> Result<String, NameError> {
    single_coder_name(name, "user")
}

/// The longest organization, user, workspace or template name Coder accepts.
pub const MAX_CODER_NAME_LENGTH: usize = 32;

/// Why `segment` is not a name Coder gives out for organizations, users, workspaces and templates (letters of either
/// case, digits and single hyphens between them, at most [`MAX_CODER_NAME_LENGTH`] characters), or `None`.
pub fn coder_name_problem(segment: &str) -> Option<String> {
    if segment.is_empty() {
        return Some("it must not be empty".to_owned());
    }
    if let Some(c) = segment.chars().find(|c| !c.is_ascii_alphanumeric() && *c != '-') {
        return Some(format!("{c:?} is not allowed; only letters, digits and '-' are"));
    }
    if segment.len() > MAX_CODER_NAME_LENGTH {
        return Some(format!("it is longer than {MAX_CODER_NAME_LENGTH} characters"));
    }
    let alphanumeric = |c: char| c.is_ascii_alphanumeric();
    if !segment.starts_with(alphanumeric) || !segment.ends_with(alphanumeric) || segment.contains("--") {
        return Some("it must start and end with a letter or digit, with single hyphens between".to_owned());
    }
    None
}

/// A one-segment name checked against Coder's name rule before it goes into any URL (no `.`, `/` or `..` can reach
/// a path).
fn single_coder_name(name: &str, object: &'static str) -> Result<String, NameError> {
    if name.is_empty() {
        return Err(NameError::new(object, name, "name must not be empty".to_owned()));
    }
    match coder_name_problem(name) {
        Some(problem) => Err(NameError::new(
            object,
            name,
            format!("not a Coder name: {problem}"),
        )),
        None => Ok(name.to_owned()),
    }
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

    #[test]
    fn organization_and_user_names_are_coder_names_so_no_path_can_be_made_of_them() {
        assert_eq!(parse_user_name("alice-1").unwrap(), "alice-1");
        assert_eq!(parse_organization_name("Acme").unwrap(), "Acme");
        for hostile in ["..", ".", "a/b", "a.b", "a%2Fb", "-a", "a-", "a--b", "a b", "ä"] {
            let error = parse_user_name(hostile).unwrap_err();
            assert!(
                error.reason().starts_with("not a Coder name: "),
                "{hostile}: {error}"
            );
        }
        assert_eq!(
            parse_user_name(&"a".repeat(33)).unwrap_err().to_string(),
            format!(
                "invalid user name {:?}: not a Coder name: it is longer than 32 characters",
                "a".repeat(33)
            )
        );
        assert_eq!(
            parse_organization_name("").unwrap_err().to_string(),
            "invalid organization name: name must not be empty"
        );
    }

    #[test]
    fn group_names_need_exactly_two_non_empty_segments() {
        assert_eq!(
            parse_group_name("default.Everyone").unwrap(),
            GroupName {
                organization: "default".into(),
                group: "Everyone".into()
            }
        );
        assert!(parse_group_name("default").is_err());
        assert!(parse_group_name("default.a.b").is_err());
        assert_eq!(
            parse_group_name(".x").unwrap_err().reason(),
            "segment 0 must not be empty"
        );
    }
}
