//! Server configuration, license entitlements and the simulated provisioner's outcome.

use std::collections::BTreeMap;
use std::time::Duration;

/// Default `X-Coder-Build-Version`.
pub const DEFAULT_BUILD_VERSION: &str = "v2.30.0+testsrv";

/// Feature names of Coder v2.30.0's `codersdk.FeatureNames` list; all appear in `/entitlements`.
pub const FEATURE_NAMES: [&str; 26] = [
    "user_limit",
    "audit_log",
    "connection_log",
    "browser_only",
    "scim",
    "template_rbac",
    "high_availability",
    "multiple_external_auth",
    "external_provisioner_daemons",
    "appearance",
    "advanced_template_scheduling",
    "workspace_proxy",
    "user_role_management",
    "external_token_encryption",
    "workspace_batch_actions",
    "task_batch_actions",
    "access_control",
    "control_shared_ports",
    "custom_roles",
    "multiple_organizations",
    "workspace_prebuilds",
    "managed_agent_limit",
    "workspace_external_agent",
    "aibridge",
    "boundary",
    "ai_governance_user_limit",
];

/// A feature's license entitlement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entitlement {
    Entitled,
    GracePeriod,
    NotEntitled,
}

impl Entitlement {
    /// The JSON value: `entitled`, `grace_period` or `not_entitled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Entitled => "entitled",
            Self::GracePeriod => "grace_period",
            Self::NotEntitled => "not_entitled",
        }
    }

    /// Coder's `Entitled()`: `entitled` or `grace_period`.
    pub fn is_entitled(self) -> bool {
        !matches!(self, Self::NotEntitled)
    }
}

/// What the simulated provisioner does with each job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BuildOutcome {
    #[default]
    Succeed,
    Fail,
    /// Delete builds fail; every other job succeeds.
    FailDeletes,
}

/// An agent that every successful start build reports, as the test sets it (read when a build is rendered, so a
/// test can let agents connect and become ready later).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSpec {
    /// `connecting`, `connected`, `disconnected` or `timeout`.
    pub status: String,
    /// `created`, `starting`, `ready`, `start_error`, `start_timeout`, `shutting_down`, `off`, …
    pub lifecycle_state: String,
    /// A devcontainer sub-agent (it has a parent agent).
    pub sub_agent: bool,
}

impl AgentSpec {
    /// A top-level agent with this status and lifecycle state.
    pub fn new(status: &str, lifecycle_state: &str) -> Self {
        Self {
            status: status.to_owned(),
            lifecycle_state: lifecycle_state.to_owned(),
            sub_agent: false,
        }
    }

    /// A connected, ready top-level agent.
    pub fn ready() -> Self {
        Self::new("connected", "ready")
    }
}

/// Test server configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Coder's PostgreSQL: users, organizations, organization_members and api_keys are read from it on every request.
    pub database_url: String,
    /// UUID string; also the id of the built-in `primary` workspace proxy.
    pub deployment_id: String,
    /// Sent as `X-Coder-Build-Version` on every response.
    pub build_version: String,
    /// Feature name -> entitlement; a missing feature is `not_entitled`.
    pub entitlements: BTreeMap<String, Entitlement>,
    /// License JWTs that `POST /licenses` accepts; any other -> 400 `Invalid license`.
    pub accepted_licenses: Vec<String>,
    /// Outcome of every simulated provisioner job.
    pub build_outcome: BuildOutcome,
    /// How long a simulated job runs; its logs stream during that time.
    pub build_duration: Duration,
    /// Whether the server acts as a Coder with OIDC sign-in configured: `POST /users` then creates users of login
    /// type `oidc`. Off (the default), it answers their creation as a Coder without OIDC does: 400 `You must
    /// configure OIDC before creating OIDC users.`. No OIDC sign-in is simulated either way.
    pub oidc_configured: bool,
}

impl Config {
    pub fn new(database_url: impl Into<String>) -> Self {
        Self {
            database_url: database_url.into(),
            deployment_id: uuid::Uuid::new_v4().to_string(),
            build_version: DEFAULT_BUILD_VERSION.to_owned(),
            entitlements: BTreeMap::new(),
            accepted_licenses: Vec::new(),
            build_outcome: BuildOutcome::Succeed,
            build_duration: Duration::from_millis(200),
            oidc_configured: false,
        }
    }
}

/// Coder's humanized feature name, as used in the 403 of a licence feature gate (`<name> is a Premium feature. …`).
pub fn humanize_feature(name: &str) -> String {
    match name {
        "template_rbac" => return "Template RBAC".to_owned(),
        "scim" => return "SCIM".to_owned(),
        "aibridge" => return "AI Bridge".to_owned(),
        "ai_governance_user_limit" => return "AI Governance User Limit".to_owned(),
        _ => {}
    }
    name.split('_')
        .map(|word| {
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn humanized_names() {
        assert_eq!(humanize_feature("workspace_proxy"), "Workspace Proxy");
        assert_eq!(
            humanize_feature("external_provisioner_daemons"),
            "External Provisioner Daemons"
        );
        assert_eq!(
            humanize_feature("multiple_organizations"),
            "Multiple Organizations"
        );
        assert_eq!(humanize_feature("aibridge"), "AI Bridge");
        assert_eq!(humanize_feature("template_rbac"), "Template RBAC");
    }
}
