//! Object names of the Coder resources: `<organization>.<owner>.<workspace>`, `<organization>.<template>`,
//! `<organization>.<template>.<version>`, `<organization>.<group>`, and an organization's or user's name alone. The parsers (syntax only, shared with the MCP server through
//! `coder_k8s_api::aggregation::names`; aliases and casing are checked against Coder data by the storages) as 400s,
//! and the formatters.

use coder_k8s_api::aggregation::names::{self as syntax, NameError};
pub use coder_k8s_api::aggregation::names::{GroupName, TemplateName, TemplateVersionName, WorkspaceName};

use crate::generic::ApiError;

const SEPARATOR: char = '.';

/// Splits `<organization>.<owner>.<workspace>` (exactly three non-empty segments); a 400 otherwise.
pub fn parse_workspace_name(name: &str) -> Result<WorkspaceName, ApiError> {
    syntax::parse_workspace_name(name).map_err(bad_request)
}

/// Splits `<organization>.<template>` (exactly two non-empty segments); a 400 otherwise.
pub fn parse_template_name(name: &str) -> Result<TemplateName, ApiError> {
    syntax::parse_template_name(name).map_err(bad_request)
}

/// Splits `<organization>.<template>.<version>` (the version keeps any further dots); a 400 otherwise.
pub fn parse_template_version_name(name: &str) -> Result<TemplateVersionName, ApiError> {
    syntax::parse_template_version_name(name).map_err(bad_request)
}

/// Splits `<organization>.<group>` (exactly two non-empty segments); a 400 otherwise.
pub fn parse_group_name(name: &str) -> Result<GroupName, ApiError> {
    syntax::parse_group_name(name).map_err(bad_request)
}

/// An organization name, held to Coder's name rule before it reaches a URL; a 400 otherwise.
pub fn parse_organization_name(name: &str) -> Result<String, ApiError> {
    syntax::parse_organization_name(name).map_err(bad_request)
}

/// A user name, held to Coder's name rule before it reaches a URL; a 400 otherwise.
pub fn parse_user_name(name: &str) -> Result<String, ApiError> {
    syntax::parse_user_name(name).map_err(bad_request)
}

fn bad_request(error: NameError) -> ApiError {
    ApiError::bad_request(error.to_string())
}

/// `<organization>.<owner>.<workspace>`, or an error when Coder handed out a segment that cannot be part of a name.
pub fn workspace_name(organization: &str, owner: &str, workspace: &str) -> Result<String, ApiError> {
    segment("organization", organization)?;
    segment("owner", owner)?;
    segment("workspace", workspace)?;
    Ok(format!("{organization}.{owner}.{workspace}"))
}

/// `<organization>.<template>`.
pub fn template_name(organization: &str, template: &str) -> Result<String, ApiError> {
    segment("organization", organization)?;
    segment("template", template)?;
    Ok(format!("{organization}.{template}"))
}

/// `<organization>.<template>.<version>`; the version may contain `.` but must not be empty.
pub fn template_version_name(organization: &str, template: &str, version: &str) -> Result<String, ApiError> {
    segment("organization", organization)?;
    segment("template", template)?;
    if version.is_empty() {
        return Err(ApiError::internal(
            "Coder returned a template version without a name",
        ));
    }
    Ok(format!("{organization}.{template}.{version}"))
}

/// `<organization>.<group>`.
pub fn group_name(organization: &str, group: &str) -> Result<String, ApiError> {
    segment("organization", organization)?;
    segment("group", group)?;
    Ok(format!("{organization}.{group}"))
}

/// An organization's or user's name as an object name (`what` says which).
pub fn single_name(what: &str, name: &str) -> Result<String, ApiError> {
    segment(what, name)?;
    Ok(name.to_owned())
}

fn segment(what: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() || value.contains(SEPARATOR) {
        return Err(ApiError::internal(format!(
            "Coder returned a {what} name {value:?} that cannot be part of an object name"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn message(result: Result<impl std::fmt::Debug, ApiError>) -> String {
        let error = result.unwrap_err();
        assert_eq!((error.code, error.reason), (400, "BadRequest"), "{error}");
        error.message
    }

    #[test]
    fn workspace_names_need_exactly_three_non_empty_segments() {
        assert_eq!(
            parse_workspace_name("acme.alice.dev").unwrap(),
            WorkspaceName {
                organization: "acme".into(),
                owner: "alice".into(),
                workspace: "dev".into()
            }
        );
        assert_eq!(
            message(parse_workspace_name("")),
            "invalid workspace name: name must not be empty"
        );
        assert_eq!(
            message(parse_workspace_name("acme.dev")),
            r#"invalid workspace name "acme.dev": expected 2 separators (".")"#
        );
        assert_eq!(
            message(parse_workspace_name("acme.alice.dev.x")),
            r#"invalid workspace name "acme.alice.dev.x": expected 2 separators (".")"#
        );
        assert_eq!(
            message(parse_workspace_name("acme..dev")),
            r#"invalid workspace name "acme..dev": segment 1 must not be empty"#
        );
    }

    #[test]
    fn template_names_need_exactly_two_non_empty_segments() {
        assert_eq!(
            parse_template_name("acme.docker").unwrap(),
            TemplateName {
                organization: "acme".into(),
                template: "docker".into()
            }
        );
        assert_eq!(
            message(parse_template_name("docker")),
            r#"invalid template name "docker": expected 1 separators (".")"#
        );
        assert_eq!(
            message(parse_template_name(".docker")),
            r#"invalid template name ".docker": segment 0 must not be empty"#
        );
        assert_eq!(
            message(parse_template_name("")),
            "invalid template name: name must not be empty"
        );
    }

    #[test]
    fn template_version_names_keep_dots_and_case_in_the_version() {
        assert_eq!(
            parse_template_version_name("acme.docker.V1.2.3").unwrap(),
            TemplateVersionName {
                organization: "acme".into(),
                template: "docker".into(),
                version: "V1.2.3".into()
            }
        );
        assert_eq!(
            message(parse_template_version_name("acme.docker")),
            r#"invalid template version name "acme.docker": expected <organization>.<template>.<version>"#
        );
        assert_eq!(
            message(parse_template_version_name("acme.docker.")),
            r#"invalid template version name "acme.docker.": segment 2 must not be empty"#
        );
        assert_eq!(
            message(parse_template_version_name("")),
            "invalid template version name: name must not be empty"
        );
    }

    #[test]
    fn formatters_refuse_segments_that_would_not_parse_back() {
        assert_eq!(workspace_name("acme", "alice", "dev").unwrap(), "acme.alice.dev");
        assert_eq!(template_name("acme", "docker").unwrap(), "acme.docker");
        assert_eq!(
            template_version_name("acme", "docker", "v1.2").unwrap(),
            "acme.docker.v1.2"
        );
        assert_eq!(workspace_name("a.b", "alice", "dev").unwrap_err().code, 500);
        assert_eq!(template_name("acme", "").unwrap_err().code, 500);
        assert_eq!(template_version_name("acme", "docker", "").unwrap_err().code, 500);
    }

    fn segment_strategy() -> impl Strategy<Value = String> {
        "[^.]{1,12}"
    }

    proptest! {
        #[test]
        fn workspace_names_round_trip(o in segment_strategy(), u in segment_strategy(), w in segment_strategy()) {
            let parsed = parse_workspace_name(&workspace_name(&o, &u, &w).unwrap()).unwrap();
            prop_assert_eq!(parsed, WorkspaceName { organization: o, owner: u, workspace: w });
        }

        #[test]
        fn template_names_round_trip(o in segment_strategy(), t in segment_strategy()) {
            let parsed = parse_template_name(&template_name(&o, &t).unwrap()).unwrap();
            prop_assert_eq!(parsed, TemplateName { organization: o, template: t });
        }

        #[test]
        fn template_version_names_round_trip(o in segment_strategy(), t in segment_strategy(), v in ".{1,20}") {
            let parsed = parse_template_version_name(&template_version_name(&o, &t, &v).unwrap()).unwrap();
            prop_assert_eq!(parsed, TemplateVersionName { organization: o, template: t, version: v });
        }

        #[test]
        fn parsers_never_panic_and_answer_400_or_a_name_that_formats_back(name in prop_oneof![".{0,40}", "[a.]{0,8}"]) {
            match parse_workspace_name(&name) {
                Ok(n) => prop_assert_eq!(workspace_name(&n.organization, &n.owner, &n.workspace).unwrap(), name.clone()),
                Err(e) => prop_assert_eq!(e.code, 400),
            }
            match parse_template_name(&name) {
                Ok(n) => prop_assert_eq!(template_name(&n.organization, &n.template).unwrap(), name.clone()),
                Err(e) => prop_assert_eq!(e.code, 400),
            }
            match parse_template_version_name(&name) {
                Ok(n) => prop_assert_eq!(
                    template_version_name(&n.organization, &n.template, &n.version).unwrap(),
                    name.clone()
                ),
                Err(e) => prop_assert_eq!(e.code, 400),
            }
        }
    }
}
