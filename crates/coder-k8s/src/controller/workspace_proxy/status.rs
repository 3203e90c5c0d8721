//! Pure decisions behind the CoderWorkspaceProxy conditions (docs/controllers/workspace-proxy.md): which Secrets must
//! consent to which origin, the registration plan of bootstrap mode, the names sent to Coder, and the conditions.

use coder_k8s_api::workspace_proxy::{ProxyBootstrapSpec, WorkspaceProxySpec, conditions, reasons};

use crate::controller::conditions::{ConditionStatus, Decided};
use crate::controller::credentials;

/// Icon sent when the spec names none: Coder requires a non-empty icon on PATCH.
pub const DEFAULT_ICON: &str = "/emojis/1f310.png";

/// Every Secret whose value leaves the cluster, with the origin it goes to: the extraEnv Secrets and a given token
/// Secret go to the primary access URL's origin, the bootstrap credentials to `coderURL`'s origin.
pub fn credential_checks(
    spec: &WorkspaceProxySpec,
    token_secret: Option<&str>,
    primary_origin: &str,
) -> Vec<(String, String)> {
    let mut checks: Vec<(String, String)> = credentials::secret_refs(&spec.extra_env)
        .into_iter()
        .map(|secret| (secret, primary_origin.to_owned()))
        .collect();
    if let Some(token_secret) = token_secret {
        checks.push((token_secret.to_owned(), primary_origin.to_owned()));
    }
    if let Some(bootstrap) = &spec.bootstrap {
        let coder_origin = credentials::origin_of(&bootstrap.coder_url).unwrap_or_default();
        checks.push((bootstrap.credentials_secret_ref.name.clone(), coder_origin));
    }
    checks
}

/// What bootstrap mode does with the generated token Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistrationPlan {
    /// Someone else's Secret has the name: refuse, touch nothing.
    Refuse,
    /// No token yet: register the proxy in Coder (create, or regenerate the token of an existing one).
    Register,
    /// The owned Secret holds a token: nothing to ask of Coder.
    Keep,
}

/// Decides from the generated Secret: `None` when absent, else (owned by this proxy, holds a token).
pub fn registration_plan(secret: Option<(bool, bool)>) -> RegistrationPlan {
    match secret {
        Some((false, _)) => RegistrationPlan::Refuse,
        Some((true, true)) => RegistrationPlan::Keep,
        Some((true, false)) | None => RegistrationPlan::Register,
    }
}

/// Whether the proxy Coder holds under the bootstrap name, with `existing_id`, is the one this object created: its
/// ID is the one recorded on the owned token Secret. Anyone else's proxy is never taken over.
pub fn proxy_owned(existing_id: &str, recorded_id: Option<&str>) -> bool {
    recorded_id == Some(existing_id)
}

/// `ProxyRegistered` when Coder holds a proxy of this name that this object did not create.
pub fn proxy_not_owned(proxy_name: &str) -> Decided {
    Decided::new(
        conditions::PROXY_REGISTERED,
        ConditionStatus::False,
        reasons::PROXY_NOT_OWNED,
        format!(
            "Coder already has a workspace proxy named {proxy_name:?} that this object did not create; its token is not regenerated. Delete it in Coder or set bootstrap.proxyName to another name."
        ),
    )
}

/// The proxy name, display name and icon sent to Coder when it creates the proxy (each defaulted when empty).
pub fn proxy_names(name: &str, bootstrap: &ProxyBootstrapSpec) -> (String, String, String) {
    let proxy_name = given(&bootstrap.proxy_name).unwrap_or_else(|| name.to_owned());
    let display_name = given(&bootstrap.display_name).unwrap_or_else(|| proxy_name.clone());
    let icon = given(&bootstrap.icon).unwrap_or_else(|| DEFAULT_ICON.to_owned());
    (proxy_name, display_name, icon)
}

/// The display name and icon sent when an existing proxy is registered again: the spec's when given, else the ones
/// Coder already has (as the Go operator did), so a re-registration never resets what an admin set in Coder.
pub fn kept_display(
    name: &str,
    bootstrap: &ProxyBootstrapSpec,
    existing_display_name: &str,
    existing_icon: &str,
) -> (String, String) {
    let (_, default_display, default_icon) = proxy_names(name, bootstrap);
    let display_name = given(&bootstrap.display_name)
        .or_else(|| Some(existing_display_name.to_owned()).filter(|v| !v.is_empty()))
        .unwrap_or(default_display);
    // Coder refuses an empty icon on PATCH, so a proxy without one gets the default.
    let icon = given(&bootstrap.icon)
        .or_else(|| Some(existing_icon.to_owned()).filter(|v| !v.is_empty()))
        .unwrap_or(default_icon);
    (display_name, icon)
}

fn given(value: &Option<String>) -> Option<String> {
    value.clone().filter(|v| !v.is_empty())
}

pub fn invalid_spec(message: &str) -> Decided {
    Decided::new(
        conditions::PROXY_REGISTERED,
        ConditionStatus::False,
        reasons::INVALID_SPEC,
        message,
    )
}

/// `CredentialsReady`: the first refusal (reason, message), or verified.
pub fn credentials_condition(refusal: Option<(&'static str, String)>) -> Decided {
    credentials::condition(
        refusal,
        "every Secret used is a credential Secret for its destination",
    )
}

pub fn token_secret_not_owned(secret: &str) -> Decided {
    Decided::new(
        conditions::PROXY_REGISTERED,
        ConditionStatus::False,
        reasons::TOKEN_SECRET_NOT_OWNED,
        format!(
            "Secret {secret:?} exists and this proxy does not own it; set bootstrap.generatedTokenSecretName to a name that does not exist"
        ),
    )
}

pub fn registration_failed(message: String) -> Decided {
    Decided::new(
        conditions::PROXY_REGISTERED,
        ConditionStatus::False,
        reasons::REGISTRATION_FAILED,
        message,
    )
}

pub fn registered() -> Decided {
    Decided::new(
        conditions::PROXY_REGISTERED,
        ConditionStatus::True,
        reasons::REGISTERED,
        "the proxy is registered in Coder",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use coder_k8s_api::shared::SecretKeySelector;

    #[test]
    fn only_the_recorded_proxy_is_taken_over() {
        assert!(proxy_owned("p1", Some("p1")));
        assert!(!proxy_owned("p1", Some("p2")));
        assert!(!proxy_owned("p1", None), "nothing recorded: someone else's proxy");
        assert_eq!(proxy_not_owned("eu").reason, reasons::PROXY_NOT_OWNED);
    }

    #[test]
    fn registration_plans() {
        assert_eq!(registration_plan(None), RegistrationPlan::Register);
        assert_eq!(registration_plan(Some((true, false))), RegistrationPlan::Register);
        assert_eq!(registration_plan(Some((true, true))), RegistrationPlan::Keep);
        assert_eq!(registration_plan(Some((false, true))), RegistrationPlan::Refuse);
    }

    #[test]
    fn names_default_to_the_object_name_and_a_globe() {
        let bootstrap = ProxyBootstrapSpec::default();
        assert_eq!(
            proxy_names("eu", &bootstrap),
            ("eu".to_owned(), "eu".to_owned(), DEFAULT_ICON.to_owned())
        );
        let named = ProxyBootstrapSpec {
            proxy_name: Some("europe".to_owned()),
            display_name: Some(String::new()),
            ..ProxyBootstrapSpec::default()
        };
        assert_eq!(
            proxy_names("eu", &named).1,
            "europe",
            "an empty display name falls back to the proxy name"
        );
    }

    #[test]
    fn registering_again_keeps_what_coder_has() {
        let bootstrap: ProxyBootstrapSpec = serde_json::from_value(serde_json::json!({
            "coderURL": "https://coder.example.com",
            "credentialsSecretRef": {"name": "admin"},
        }))
        .unwrap();
        assert_eq!(
            kept_display("eu", &bootstrap, "Europe", "/emojis/1f1ea-1f1fa.png"),
            ("Europe".to_owned(), "/emojis/1f1ea-1f1fa.png".to_owned())
        );
        assert_eq!(
            kept_display("eu", &bootstrap, "", ""),
            ("eu".to_owned(), DEFAULT_ICON.to_owned())
        );
        let mut named = bootstrap.clone();
        named.display_name = Some("EU West".to_owned());
        named.icon = Some("/icon/eu.svg".to_owned());
        assert_eq!(
            kept_display("eu", &named, "Europe", "/emojis/1f1ea-1f1fa.png"),
            ("EU West".to_owned(), "/icon/eu.svg".to_owned())
        );
    }

    #[test]
    fn bootstrap_credentials_consent_to_the_coder_origin() {
        let spec = WorkspaceProxySpec {
            bootstrap: Some(ProxyBootstrapSpec {
                coder_url: "https://coder.example.com/".to_owned(),
                credentials_secret_ref: SecretKeySelector {
                    name: "admin".to_owned(),
                    key: None,
                },
                ..ProxyBootstrapSpec::default()
            }),
            ..WorkspaceProxySpec::default()
        };
        let checks = credential_checks(&spec, Some("token"), "https://primary.example.com");
        assert_eq!(
            checks,
            vec![
                ("token".to_owned(), "https://primary.example.com".to_owned()),
                ("admin".to_owned(), "https://coder.example.com".to_owned()),
            ]
        );
    }
}
