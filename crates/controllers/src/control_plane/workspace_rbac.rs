//! The opt-in hardening of a control plane's workspace RBAC (`--restrict-workspace-rbac`, docs/controllers/
//! control-plane.md, "Workspace RBAC"): pure checks of `spec.rbac.extraRules` and `spec.rbac.workspaceNamespaces`.
//! Without the flag whoever may create a CoderControlPlane can give its pods any permission the operator holds, in
//! any namespace (v0.1.5); with it, rules on Secrets or RBAC objects, the verbs `escalate`, `bind` and
//! `impersonate`, wildcards, and namespaces without the opt-in label are refused, and then the whole workspace RBAC
//! of the control plane is refused.

use coder_k8s_api::control_plane::{RbacSpec, conditions, reasons};
use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::conditions::{ConditionStatus, Decided};

/// The label a namespace needs (value `"true"`) to receive a control plane's workspace Role in hardening mode. The
/// control plane's own namespace needs none.
pub const WORKSPACE_NAMESPACE_LABEL: &str = "coder.com/workspace-namespace";

/// Verbs that let a holder grant or assume more than it has.
const ESCALATING_VERBS: &[&str] = &["escalate", "bind", "impersonate"];
/// The API group of Roles, RoleBindings, ClusterRoles and ClusterRoleBindings.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Why the workspace RBAC of a control plane is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `spec.rbac.extraRules[index]` grants something the hardening rules forbid.
    Rule { index: usize, why: &'static str },
    /// A workspace namespace lacks the opt-in label (or does not exist).
    Namespace { name: String },
}

/// Why one extra rule is refused, or `None` when it passes.
pub fn rule_refusal(rule: &PolicyRule) -> Option<&'static str> {
    let groups = rule.api_groups.as_deref().unwrap_or_default();
    let resources = rule.resources.as_deref().unwrap_or_default();
    let is_wildcard = |values: &[String]| values.iter().any(|v| v.contains('*'));
    if is_wildcard(&rule.verbs)
        || is_wildcard(groups)
        || is_wildcard(resources)
        || is_wildcard(rule.resource_names.as_deref().unwrap_or_default())
    {
        return Some("a wildcard (*)");
    }
    if rule
        .non_resource_urls
        .as_ref()
        .is_some_and(|urls| !urls.is_empty())
    {
        return Some("non-resource URLs");
    }
    if rule.verbs.iter().any(|v| ESCALATING_VERBS.contains(&v.as_str())) {
        return Some("the verbs escalate, bind or impersonate");
    }
    if groups.iter().any(|g| g == RBAC_GROUP) {
        return Some("RBAC objects (rbac.authorization.k8s.io)");
    }
    let base = |resource: &String| resource.split('/').next().unwrap_or_default().to_owned();
    if resources.iter().map(base).any(|r| r == "secrets") {
        return Some("Secrets");
    }
    // Minting a token for any ServiceAccount of the namespace is as strong as impersonating it.
    if resources.iter().any(|r| r == "serviceaccounts/token") {
        return Some("ServiceAccount tokens (serviceaccounts/token)");
    }
    None
}

/// The first refusal of `rbac` in hardening mode: each extra rule, then each workspace namespace other than
/// `own_namespace` (`opted_in` tells whether a namespace carries the opt-in label).
pub fn refusal(rbac: &RbacSpec, own_namespace: &str, opted_in: impl Fn(&str) -> bool) -> Option<Refusal> {
    if let Some((index, why)) = rbac
        .extra_rules
        .iter()
        .enumerate()
        .find_map(|(index, rule)| rule_refusal(rule).map(|why| (index, why)))
    {
        return Some(Refusal::Rule { index, why });
    }
    rbac.workspace_namespaces
        .iter()
        .filter(|ns| !ns.is_empty() && ns.as_str() != own_namespace)
        .find(|ns| !opted_in(ns))
        .map(|ns| Refusal::Namespace { name: ns.clone() })
}

/// The namespaces whose opt-in label must be read for `rbac` (every workspace namespace but the own one).
pub fn namespaces_to_check<'a>(rbac: &'a RbacSpec, own_namespace: &str) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    for ns in &rbac.workspace_namespaces {
        if !ns.is_empty() && ns != own_namespace && !names.contains(&ns.as_str()) {
            names.push(ns);
        }
    }
    names
}

/// Whether a namespace's labels opt it in.
pub fn labels_opt_in(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(WORKSPACE_NAMESPACE_LABEL))
        .is_some_and(|v| v == "true")
}

/// `WorkspaceRBACAllowed` for the outcome of [`refusal`].
pub fn condition(refusal: Option<&Refusal>) -> Decided {
    let refused = " No workspace Role or RoleBinding of this control plane exists until this is fixed (--restrict-workspace-rbac).";
    match refusal {
        None => Decided::new(
            conditions::WORKSPACE_RBAC_ALLOWED,
            ConditionStatus::True,
            reasons::WORKSPACE_RBAC_ACCEPTED,
            "the workspace RBAC passed the hardening rules",
        ),
        Some(Refusal::Rule { index, why }) => Decided::new(
            conditions::WORKSPACE_RBAC_ALLOWED,
            ConditionStatus::False,
            reasons::WORKSPACE_RBAC_RULE_REFUSED,
            format!("spec.rbac.extraRules[{index}] grants {why}, which this operator refuses.{refused}"),
        ),
        Some(Refusal::Namespace { name }) => Decided::new(
            conditions::WORKSPACE_RBAC_ALLOWED,
            ConditionStatus::False,
            reasons::WORKSPACE_NAMESPACE_NOT_OPTED_IN,
            format!(
                "namespace {name:?} in spec.rbac.workspaceNamespaces does not exist or lacks the label {WORKSPACE_NAMESPACE_LABEL}=true.{refused}"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
        let owned = |values: &[&str]| values.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>();
        PolicyRule {
            api_groups: Some(owned(groups)),
            resources: Some(owned(resources)),
            verbs: owned(verbs),
            ..PolicyRule::default()
        }
    }

    #[test]
    fn each_forbidden_class_is_refused() {
        let cases = [
            (rule(&[""], &["secrets"], &["get"]), "Secrets"),
            (rule(&[""], &["secrets/status"], &["get"]), "Secrets"),
            (
                rule(&["rbac.authorization.k8s.io"], &["roles"], &["create"]),
                "RBAC objects (rbac.authorization.k8s.io)",
            ),
            (
                rule(&[""], &["serviceaccounts"], &["impersonate"]),
                "the verbs escalate, bind or impersonate",
            ),
            (
                rule(&["example.com"], &["widgets"], &["escalate"]),
                "the verbs escalate, bind or impersonate",
            ),
            (
                rule(&["example.com"], &["widgets"], &["bind"]),
                "the verbs escalate, bind or impersonate",
            ),
            (
                rule(&[""], &["serviceaccounts/token"], &["create"]),
                "ServiceAccount tokens (serviceaccounts/token)",
            ),
            (rule(&["*"], &["pods"], &["get"]), "a wildcard (*)"),
            (rule(&[""], &["*"], &["get"]), "a wildcard (*)"),
            (rule(&[""], &["configmaps"], &["*"]), "a wildcard (*)"),
        ];
        for (rule, why) in cases {
            assert_eq!(rule_refusal(&rule), Some(why), "{rule:?}");
        }
        let mut named = rule(&[""], &["configmaps"], &["get"]);
        named.resource_names = Some(vec!["*".to_owned()]);
        assert_eq!(rule_refusal(&named), Some("a wildcard (*)"));
    }

    #[test]
    fn ordinary_rules_pass() {
        assert_eq!(
            rule_refusal(&rule(&[""], &["configmaps"], &["get", "list"])),
            None
        );
        assert_eq!(
            rule_refusal(&rule(&["batch"], &["jobs"], &["create", "delete"])),
            None
        );
    }

    #[test]
    fn namespaces_must_opt_in_except_the_own_one() {
        let rbac = RbacSpec {
            extra_rules: vec![rule(&[""], &["configmaps"], &["get"])],
            workspace_namespaces: vec!["coder".to_owned(), "team-a".to_owned(), "team-b".to_owned()],
            ..RbacSpec::default()
        };
        assert_eq!(namespaces_to_check(&rbac, "coder"), ["team-a", "team-b"]);
        assert_eq!(refusal(&rbac, "coder", |_| true), None);
        assert_eq!(
            refusal(&rbac, "coder", |ns| ns == "team-a"),
            Some(Refusal::Namespace {
                name: "team-b".to_owned()
            })
        );
        let mut bad = rbac.clone();
        bad.extra_rules.push(rule(&[""], &["secrets"], &["get"]));
        assert_eq!(
            refusal(&bad, "coder", |_| true),
            Some(Refusal::Rule {
                index: 1,
                why: "Secrets"
            })
        );
        let labels = |value: &str| {
            std::collections::BTreeMap::from([(WORKSPACE_NAMESPACE_LABEL.to_owned(), value.to_owned())])
        };
        assert!(labels_opt_in(Some(&labels("true"))));
        assert!(!labels_opt_in(Some(&labels("yes"))));
        assert!(!labels_opt_in(None));
    }

    #[test]
    fn conditions_name_the_refusal() {
        let accepted = condition(None);
        assert_eq!(
            (accepted.status, accepted.reason),
            (ConditionStatus::True, reasons::WORKSPACE_RBAC_ACCEPTED)
        );
        let rule = condition(Some(&Refusal::Rule {
            index: 2,
            why: "Secrets",
        }));
        assert_eq!(rule.reason, reasons::WORKSPACE_RBAC_RULE_REFUSED);
        assert!(
            rule.message.contains("extraRules[2] grants Secrets"),
            "{}",
            rule.message
        );
        let namespace = condition(Some(&Refusal::Namespace {
            name: "team-b".to_owned(),
        }));
        assert_eq!(namespace.reason, reasons::WORKSPACE_NAMESPACE_NOT_OPTED_IN);
        assert!(namespace.message.contains("\"team-b\""));
    }
}
