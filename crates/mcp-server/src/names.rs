//! The namespace and name arguments of the tools and their rules, checked before any request is sent. kube puts
//! namespaces and names into request paths without encoding them, so a `/`, `?`, `#` or `%` in one would change
//! which resource a request reaches (a pod's "logs" could be a Secret); every tool takes its namespace and name
//! arguments through [`required`] or [`optional`] with the [`Rule`] of what they name. A refused argument is a
//! tool error that names the argument, the value and the broken rule.

use coder_k8s_api::aggregation::names as aggregated;

/// The longest namespace, container name or kind: a DNS label.
pub const MAX_LABEL_LENGTH: usize = 63;
/// The longest Kubernetes object name: a DNS subdomain.
pub const MAX_OBJECT_NAME_LENGTH: usize = 253;
/// Characters of a refused value shown in its error; a longer value is cut (an argument may be huge).
const SHOWN_CHARS: usize = 64;

/// What an argument names, which decides the characters and length it may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A namespace: a DNS-1123 label (lowercase letters, digits and `-`, starting and ending with a letter or
    /// digit, at most 63 characters).
    Namespace,
    /// The name of a Kubernetes object of this kind: a DNS-1123 subdomain (dot-separated DNS-1123 labels, at most
    /// 253 characters).
    Object(&'static str),
    /// A CoderWorkspace: `<organization>.<owner>.<workspace>`, each segment a Coder name.
    Workspace,
    /// A CoderTemplate: `<organization>.<template>`, each segment a Coder name.
    Template,
    /// A CoderGroup: `<organization>.<group>`, each segment a Coder name.
    Group,
    /// A CoderOrganization or CoderUser: one Coder name (the kind is named in errors).
    CoderName(&'static str),
    /// A container of a pod: a DNS-1123 label.
    Container,
    /// The `involvedObject.name` an event is about: the name of an object of any kind, aggregated objects (whose
    /// Coder names may hold capitals) and RBAC objects (`system:...`) included.
    EventObject,
    /// The `involvedObject.kind` an event is about: a kind, whose lowercase form is a DNS-1035 label.
    EventKind,
}

impl Rule {
    /// What an error calls a value of this rule.
    fn what(self) -> String {
        match self {
            Self::Namespace => "namespace".to_owned(),
            Self::Object(kind) => format!("{kind} name"),
            Self::Workspace => "CoderWorkspace name (<organization>.<owner>.<workspace>)".to_owned(),
            Self::Template => "CoderTemplate name (<organization>.<template>)".to_owned(),
            Self::Group => "CoderGroup name (<organization>.<group>)".to_owned(),
            Self::CoderName(kind) => format!("{kind} name"),
            Self::Container => "container name".to_owned(),
            Self::EventObject => "object name".to_owned(),
            Self::EventKind => "kind".to_owned(),
        }
    }

    /// The broken rule, or `None` when `value` follows this one.
    fn problem(self, value: &str) -> Option<String> {
        match self {
            Self::Namespace | Self::Container => dns_label(value),
            Self::Object(_) => dns_subdomain(value),
            Self::Workspace => workspace_name(value),
            Self::Template => template_name(value),
            Self::Group => group_name(value),
            Self::CoderName(_) => coder_name(value),
            Self::EventObject => object_name_of_any_kind(value),
            Self::EventKind => kind(value),
        }
    }
}

/// A required argument: blank is `<field> is required`; anything else must follow `rule`.
pub fn required<'a>(field: &str, value: &'a str, rule: Rule) -> Result<&'a str, String> {
    if value.trim().is_empty() {
        return Err(format!("{field} is required"));
    }
    check(field, value, rule)
}

/// An optional argument: absent and empty both mean "not given" (clients that fill every field send `""`);
/// anything else must follow `rule`.
pub fn optional<'a>(field: &str, value: Option<&'a str>, rule: Rule) -> Result<Option<&'a str>, String> {
    match value {
        None | Some("") => Ok(None),
        Some(value) => check(field, value, rule).map(Some),
    }
}

fn check<'a>(field: &str, value: &'a str, rule: Rule) -> Result<&'a str, String> {
    match rule.problem(value) {
        None => Ok(value),
        Some(problem) => Err(format!(
            "{field} {} is not a valid {}: {problem}",
            shown(value),
            rule.what()
        )),
    }
}

/// `value` quoted with its control characters escaped, cut after [`SHOWN_CHARS`] characters.
fn shown(value: &str) -> String {
    let count = value.chars().count();
    if count <= SHOWN_CHARS {
        return format!("{value:?}");
    }
    let head: String = value.chars().take(SHOWN_CHARS).collect();
    format!("{head:?}… ({count} characters)")
}

fn dns_label(value: &str) -> Option<String> {
    if let Some(c) = value.chars().find(|c| !is_lowercase_label_char(*c)) {
        return Some(format!(
            "{c:?} is not allowed; only lowercase letters, digits and '-' are"
        ));
    }
    if value.len() > MAX_LABEL_LENGTH {
        return Some(format!("it is longer than {MAX_LABEL_LENGTH} characters"));
    }
    if !starts_and_ends_alphanumeric(value) {
        return Some("it must start and end with a lowercase letter or digit".to_owned());
    }
    None
}

fn dns_subdomain(value: &str) -> Option<String> {
    if let Some(c) = value.chars().find(|c| !is_lowercase_label_char(*c) && *c != '.') {
        return Some(format!(
            "{c:?} is not allowed; only lowercase letters, digits, '-' and '.' are"
        ));
    }
    if value.len() > MAX_OBJECT_NAME_LENGTH {
        return Some(format!("it is longer than {MAX_OBJECT_NAME_LENGTH} characters"));
    }
    if !value.split('.').all(starts_and_ends_alphanumeric) {
        return Some(
            "every dot-separated part must start and end with a lowercase letter or digit".to_owned(),
        );
    }
    None
}

fn workspace_name(value: &str) -> Option<String> {
    match aggregated::parse_workspace_name(value) {
        Err(error) => Some(error.reason().to_owned()),
        Ok(name) => coder_segments(&[
            ("organization", &name.organization),
            ("owner", &name.owner),
            ("workspace", &name.workspace),
        ]),
    }
}

fn template_name(value: &str) -> Option<String> {
    match aggregated::parse_template_name(value) {
        Err(error) => Some(error.reason().to_owned()),
        Ok(name) => coder_segments(&[("organization", &name.organization), ("template", &name.template)]),
    }
}

fn group_name(value: &str) -> Option<String> {
    match aggregated::parse_group_name(value) {
        Err(error) => Some(error.reason().to_owned()),
        Ok(name) => coder_segments(&[("organization", &name.organization), ("group", &name.group)]),
    }
}

/// The first segment that is not a Coder name, said with what it is.
fn coder_segments(segments: &[(&str, &str)]) -> Option<String> {
    segments.iter().find_map(|(what, segment)| {
        coder_name(segment)
            .map(|problem| format!("the {what} {} is not a Coder name: {problem}", shown(segment)))
    })
}

/// Coder's rule for organization, user, workspace and template names (shared with the aggregated API server).
fn coder_name(segment: &str) -> Option<String> {
    aggregated::coder_name_problem(segment)
}

/// The names Kubernetes stores across kinds: DNS subdomains for most, Coder names (capitals allowed) for the
/// aggregated objects, `:` in RBAC names.
fn object_name_of_any_kind(value: &str) -> Option<String> {
    if let Some(c) = value
        .chars()
        .find(|c| !c.is_ascii_alphanumeric() && !matches!(c, '-' | '.' | '_' | ':'))
    {
        return Some(format!(
            "{c:?} is not allowed; only letters, digits, '-', '.', '_' and ':' are"
        ));
    }
    if value.len() > MAX_OBJECT_NAME_LENGTH {
        return Some(format!("it is longer than {MAX_OBJECT_NAME_LENGTH} characters"));
    }
    if value == "." || value == ".." {
        return Some("it cannot be \".\" or \"..\"".to_owned());
    }
    None
}

/// A kind such as `Pod` or `CoderControlPlane`: lowercased, a DNS-1035 label (it starts with a letter).
fn kind(value: &str) -> Option<String> {
    if let Some(c) = value.chars().find(|c| !c.is_ascii_alphanumeric() && *c != '-') {
        return Some(format!("{c:?} is not allowed; only letters, digits and '-' are"));
    }
    if value.len() > MAX_LABEL_LENGTH {
        return Some(format!("it is longer than {MAX_LABEL_LENGTH} characters"));
    }
    if !value.starts_with(|c: char| c.is_ascii_alphabetic()) || value.ends_with('-') {
        return Some("it must start with a letter and end with a letter or digit".to_owned());
    }
    None
}

fn is_lowercase_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

fn starts_and_ends_alphanumeric(value: &str) -> bool {
    let alphanumeric = |c: char| c.is_ascii_alphanumeric();
    value.starts_with(alphanumeric) && value.ends_with(alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(rule: Rule, value: &str) -> String {
        required("name", value, rule).expect_err(value)
    }

    #[test]
    fn blank_required_arguments_are_required_and_blank_optional_ones_absent() {
        assert_eq!(refused(Rule::Namespace, ""), "name is required");
        assert_eq!(
            required("namespace", "  ", Rule::Namespace).unwrap_err(),
            "namespace is required"
        );
        assert_eq!(optional("container", Some(""), Rule::Container), Ok(None));
        assert_eq!(optional("container", None, Rule::Container), Ok(None));
        assert_eq!(
            optional("container", Some(" "), Rule::Container).unwrap_err(),
            "container \" \" is not a valid container name: ' ' is not allowed; only lowercase letters, digits and '-' are"
        );
    }

    #[test]
    fn namespaces_and_containers_are_dns_labels() {
        for good in ["a", "coder-system", "0", &"a".repeat(63)] {
            assert_eq!(required("namespace", good, Rule::Namespace), Ok(good));
        }
        assert_eq!(
            required("namespace", "coder/secrets/coder-db-app#", Rule::Namespace).unwrap_err(),
            "namespace \"coder/secrets/coder-db-app#\" is not a valid namespace: '/' is not allowed; only lowercase \
             letters, digits and '-' are"
        );
        assert!(refused(Rule::Namespace, "Coder").contains("'C' is not allowed"));
        assert!(refused(Rule::Namespace, "a.b").contains("'.' is not allowed"));
        assert!(
            refused(Rule::Namespace, "-a").ends_with("must start and end with a lowercase letter or digit")
        );
        assert!(refused(Rule::Container, "ü").contains("'ü' is not allowed"));
        assert!(refused(Rule::Namespace, &"a".repeat(64)).ends_with("longer than 63 characters"));
    }

    #[test]
    fn object_names_are_dns_subdomains() {
        let longest = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        assert_eq!(longest.len(), 253);
        for good in ["coder", "coder-a.b", "0.0", longest.as_str()] {
            assert_eq!(required("name", good, Rule::Object("Pod")), Ok(good));
        }
        assert_eq!(
            refused(Rule::Object("Pod"), ".."),
            "name \"..\" is not a valid Pod name: every dot-separated part must start and end with a lowercase letter \
             or digit"
        );
        assert!(refused(Rule::Object("Pod"), "a%2Fb").contains("'%' is not allowed"));
        assert!(refused(Rule::Object("Pod"), "a?b").contains("'?' is not allowed"));
        assert!(refused(Rule::Object("Pod"), "a.-b").contains("every dot-separated part"));
        let long = refused(Rule::Object("Service"), &format!("{longest}e"));
        assert!(long.ends_with("longer than 253 characters"), "{long}");
        assert!(long.contains("… (254 characters)"), "{long}");
    }

    #[test]
    fn aggregated_names_have_their_structure_and_coder_names_in_every_segment() {
        for good in [
            "acme.alice.dev",
            "Acme.Alice-1.my-ws",
            &format!("a.b.{}", "w".repeat(32)),
        ] {
            assert_eq!(required("name", good, Rule::Workspace), Ok(good));
        }
        assert_eq!(required("name", "acme.docker", Rule::Template), Ok("acme.docker"));
        assert_eq!(
            refused(Rule::Workspace, "acme.dev"),
            "name \"acme.dev\" is not a valid CoderWorkspace name (<organization>.<owner>.<workspace>): expected 2 \
             separators (\".\")"
        );
        assert_eq!(
            refused(Rule::Workspace, "acme..dev"),
            "name \"acme..dev\" is not a valid CoderWorkspace name (<organization>.<owner>.<workspace>): segment 1 \
             must not be empty"
        );
        assert_eq!(
            refused(Rule::Template, "ac/me.docker"),
            "name \"ac/me.docker\" is not a valid CoderTemplate name (<organization>.<template>): the organization \
             \"ac/me\" is not a Coder name: '/' is not allowed; only letters, digits and '-' are"
        );
        assert!(refused(Rule::Workspace, "a.b.c#").contains("the workspace \"c#\""));
        assert!(refused(Rule::Workspace, "a.b-.c").contains("the owner \"b-\""));
        assert!(refused(Rule::Workspace, "a.b--c.d").contains("single hyphens"));
        assert!(
            refused(Rule::Template, &format!("a.{}", "t".repeat(33))).ends_with("longer than 32 characters")
        );
    }

    #[test]
    fn event_filters_hold_what_involved_objects_can_hold() {
        for good in [
            "coder",
            "acme.Alice.dev",
            "system:controller:job-controller",
            "a_b",
        ] {
            assert_eq!(optional("name", Some(good), Rule::EventObject), Ok(Some(good)));
        }
        for bad in ["a,b", "a=b", "a!b", "a\\b", "a/b", "a b", "é", ".", ".."] {
            assert!(optional("name", Some(bad), Rule::EventObject).is_err(), "{bad}");
        }
        for good in ["Pod", "CoderControlPlane", "a-b1"] {
            assert_eq!(optional("kind", Some(good), Rule::EventKind), Ok(Some(good)));
        }
        for bad in ["1Pod", "Pod-", "Po d", "Pod,x", &format!("K{}", "a".repeat(63))] {
            assert!(optional("kind", Some(bad), Rule::EventKind).is_err(), "{bad}");
        }
        assert_eq!(
            optional("kind", Some("Pod=x"), Rule::EventKind).unwrap_err(),
            "kind \"Pod=x\" is not a valid kind: '=' is not allowed; only letters, digits and '-' are"
        );
    }

    #[test]
    fn control_characters_are_escaped_in_errors() {
        assert!(refused(Rule::Namespace, "a\nb").starts_with("name \"a\\nb\" is not a valid namespace"));
    }

    #[test]
    fn group_organization_and_user_names_are_coder_names() {
        assert_eq!(
            required("name", "acme.Everyone", Rule::Group),
            Ok("acme.Everyone")
        );
        assert_eq!(
            refused(Rule::Group, "acme/x.Everyone"),
            "name \"acme/x.Everyone\" is not a valid CoderGroup name (<organization>.<group>): the organization \
             \"acme/x\" is not a Coder name: '/' is not allowed; only letters, digits and '-' are"
        );
        assert!(refused(Rule::Group, "acme").contains("expected 1 separators"));
        assert_eq!(
            required("name", "alice", Rule::CoderName("CoderUser")),
            Ok("alice")
        );
        assert_eq!(
            refused(Rule::CoderName("CoderUser"), ".."),
            "name \"..\" is not a valid CoderUser name: '.' is not allowed; only letters, digits and '-' are"
        );
    }
}
