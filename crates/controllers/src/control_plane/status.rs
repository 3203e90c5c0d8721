//! Pure decisions behind the CoderControlPlane conditions (docs/controllers/control-plane.md, "Conditions"): the database Secret check and
//! the operator token Secret ownership check, and the Events of status transitions. Messages name Secrets and keys, never a URL or a credential.

use std::collections::BTreeMap;
use std::time::Duration;

use coder_k8s_api::control_plane::conditions::{
    DATABASE_SECRET_RESOLVED as CONDITION_DATABASE_SECRET_RESOLVED,
    OPERATOR_TOKEN_SECRET_OWNED as CONDITION_OPERATOR_TOKEN_SECRET_OWNED,
};
use coder_k8s_api::control_plane::{CoderControlPlaneStatus, reasons};
use coder_k8s_api::shared::{SecretKeySelector, WorkloadPhase};
use coder_k8s_operator_access::{UrlProblem, parse_database_url};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::events::EventType;

use crate::conditions::{ConditionStatus, Decided};

/// How a pass ends: when the next one is due without a change (`None`: only when something the control plane
/// watches changes, its spec, a Secret or ConfigMap it reads, an owned object).
pub use crate::conditions::Requeue as Outcome;

/// The next pass: the soonest any step asked for (`asked`), and the entitlements and token poll while the
/// control plane has operator access (Coder's state is not watched). Without operator access nothing is polled,
/// so a control plane that waits for a database or a Secret costs nothing until that input changes.
pub fn next_pass(asked: Option<Duration>, operator_access_ready: bool, poll_interval: Duration) -> Outcome {
    let poll = operator_access_ready.then_some(poll_interval);
    Outcome([asked, poll].into_iter().flatten().min())
}

/// The outcome of the database Secret check; `url` is only set when resolved and is never displayed.
pub struct DatabaseCheck {
    pub condition: Decided,
    pub url: Option<String>,
}

impl std::fmt::Debug for DatabaseCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseCheck")
            .field("condition", &self.condition)
            .field("url", &self.url.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Evaluates `DatabaseSecretResolved` from `spec.database.connectionSecretRef` and the Secret's data (`None` when
/// the Secret does not exist). `conflicting` is true when `spec.extraEnv` also sets `CODER_PG_CONNECTION_URL`.
pub fn check_database_secret(
    reference: &SecretKeySelector,
    secret_data: Option<&BTreeMap<String, ByteString>>,
    conflicting: bool,
) -> DatabaseCheck {
    let (status, reason, message, url) = match database_url(reference, secret_data, conflicting) {
        Ok((url, at)) => {
            let message = format!(
                "{at} holds a PostgreSQL URL. This does not mean that the database is reachable or healthy."
            );
            (ConditionStatus::True, reasons::RESOLVED, message, Some(url))
        }
        Err((reason, message)) => (ConditionStatus::False, reason, message, None),
    };
    DatabaseCheck {
        condition: Decided {
            type_: CONDITION_DATABASE_SECRET_RESOLVED,
            status,
            reason,
            message,
        },
        url,
    }
}

/// The connection URL the Secret holds and where (`key "k" of Secret "s"`), or why it cannot be used (reason and
/// message).
fn database_url(
    reference: &SecretKeySelector,
    secret_data: Option<&BTreeMap<String, ByteString>>,
    conflicting: bool,
) -> Result<(String, String), (&'static str, String)> {
    use reasons::{CONFLICTING_CONFIGURATION, EMPTY_VALUE, INVALID_URL, KEY_NOT_FOUND, SECRET_NOT_FOUND};
    let key = reference.key.as_deref().unwrap_or_default();
    let at = format!("key {key:?} of Secret {:?}", reference.name);
    if conflicting {
        let message = "spec.extraEnv also sets CODER_PG_CONNECTION_URL; remove it or remove spec.database. The \
                       Deployment is not changed.";
        return Err((CONFLICTING_CONFIGURATION, message.to_owned()));
    }
    let Some(data) = secret_data else {
        let message = format!(
            "Secret {:?} does not exist in the namespace of the control plane",
            reference.name
        );
        return Err((SECRET_NOT_FOUND, message));
    };
    let Some(value) = data.get(key) else {
        return Err((
            KEY_NOT_FOUND,
            format!("Secret {:?} has no key {key:?}", reference.name),
        ));
    };
    let Ok(url) = String::from_utf8(value.0.clone()) else {
        return Err((INVALID_URL, format!("{at} is not UTF-8 text")));
    };
    if url.trim().is_empty() {
        return Err((EMPTY_VALUE, format!("{at} is empty or only whitespace")));
    }
    match parse_database_url(&url).err().map(|error| error.problem()) {
        // TLS is a limit of the operator's own bootstrap, not of the URL: Coder itself can use it.
        None | Some(UrlProblem::TlsUnsupported) => Ok((url, at)),
        Some(problem) => Err((
            INVALID_URL,
            format!("{at} must be a postgres:// or postgresql:// URL (lowercase scheme): {problem}"),
        )),
    }
}

/// Who controls the operator token Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenSecretOwnership {
    /// The Secret does not exist: the controller creates it, owned by the control plane.
    Absent,
    /// The control plane (same UID) is its controller owner: read and update it.
    Owned,
    /// Another owner or no owner controls it: never read, change or adopt it.
    NotOwned,
}

/// Decides ownership of an existing (or absent) token Secret for the control plane with `uid`.
pub fn token_secret_ownership(secret: Option<&Secret>, uid: &str) -> TokenSecretOwnership {
    let Some(secret) = secret else {
        return TokenSecretOwnership::Absent;
    };
    if crate::ownership::controlled_by(&secret.metadata, uid) {
        TokenSecretOwnership::Owned
    } else {
        TokenSecretOwnership::NotOwned
    }
}

/// The `OperatorTokenSecretOwned` condition for an ownership decision.
pub fn token_secret_condition(ownership: TokenSecretOwnership, secret_name: &str) -> Decided {
    match ownership {
        TokenSecretOwnership::Absent | TokenSecretOwnership::Owned => Decided {
            type_: CONDITION_OPERATOR_TOKEN_SECRET_OWNED,
            status: ConditionStatus::True,
            reason: reasons::TOKEN_SECRET_OWNED,
            message: format!("The control plane owns the operator token Secret {secret_name:?}"),
        },
        TokenSecretOwnership::NotOwned => Decided {
            type_: CONDITION_OPERATOR_TOKEN_SECRET_OWNED,
            status: ConditionStatus::False,
            reason: reasons::TOKEN_SECRET_NOT_OWNED,
            message: format!(
                "Secret {secret_name:?} exists and this control plane is not its controller owner; the operator does not read, change or adopt it. Delete it if it is a leftover operator token Secret, or set spec.operatorAccess.generatedTokenSecretName to a name that does not exist."
            ),
        },
    }
}

/// Events for what changed between two statuses: the phase, operator access, and every condition whose status or
/// reason changed. Returns (type, reason, note).
pub fn transitions(
    old: &CoderControlPlaneStatus,
    new: &CoderControlPlaneStatus,
) -> Vec<(EventType, String, String)> {
    let mut events = Vec::new();
    if old.phase != new.phase {
        match new.phase {
            Some(WorkloadPhase::Ready) => events.push((
                EventType::Normal,
                "Ready".to_owned(),
                "The Coder Deployment has a ready replica".to_owned(),
            )),
            _ if old.phase == Some(WorkloadPhase::Ready) => events.push((
                EventType::Warning,
                "NotReady".to_owned(),
                "The Coder Deployment has no ready replica".to_owned(),
            )),
            _ => {}
        }
    }
    if old.operator_access_ready.unwrap_or(false) != new.operator_access_ready.unwrap_or(false) {
        events.push(if new.operator_access_ready == Some(true) {
            (
                EventType::Normal,
                "OperatorAccessReady".to_owned(),
                "The operator token works".to_owned(),
            )
        } else {
            (
                EventType::Warning,
                "OperatorAccessNotReady".to_owned(),
                "Operator access is not ready".to_owned(),
            )
        });
    }
    for condition in &new.conditions {
        let before = old.conditions.iter().find(|c| c.type_ == condition.type_);
        // A condition seen for the first time is an Event only when it reports a problem: a new object gets no
        // Events for its first, expected states.
        let changed = match before {
            Some(b) => b.status != condition.status || b.reason != condition.reason,
            None => condition.status == "False",
        };
        if changed {
            let type_ = if condition.status == "False" {
                EventType::Warning
            } else {
                EventType::Normal
            };
            events.push((type_, condition.reason.clone(), condition.message.clone()));
        }
    }
    events
}

/// `externalProvisionerDaemonsEntitlement` and `licenseTier` from Coder's entitlements (premium = custom roles or
/// multiple organizations entitled).
pub fn entitlement_summary(
    read: &coder_k8s_coder_client::types::Entitlements,
) -> (
    coder_k8s_api::control_plane::Entitlement,
    coder_k8s_api::control_plane::LicenseTier,
) {
    use coder_k8s_api::control_plane::{Entitlement, LicenseTier};
    use coder_k8s_coder_client::types::Entitlement as Coder;
    // A feature Coder does not list is `unknown`, not `not_entitled` (the Go operator's reading).
    let external = match read
        .features
        .get("external_provisioner_daemons")
        .map(|f| f.entitlement)
    {
        Some(Coder::Entitled) => Entitlement::Entitled,
        Some(Coder::GracePeriod) => Entitlement::GracePeriod,
        Some(Coder::NotEntitled) => Entitlement::NotEntitled,
        Some(Coder::Unknown) | None => Entitlement::Unknown,
    };
    let tier = if !read.has_license {
        LicenseTier::None
    } else if read.trial {
        LicenseTier::Trial
    } else if read.is_entitled("custom_roles") || read.is_entitled("multiple_organizations") {
        LicenseTier::Premium
    } else {
        LicenseTier::Enterprise
    };
    (external, tier)
}

/// `licenseTier` and `externalProvisionerDaemonsEntitlement` read `unknown` until Coder's entitlements were read, so
/// both are in the status from the first reconcile (as with the Go operator).
pub fn entitlements_unknown_until_read(status: &mut coder_k8s_api::control_plane::CoderControlPlaneStatus) {
    use coder_k8s_api::control_plane::{Entitlement, LicenseTier};
    status.license_tier.get_or_insert(LicenseTier::Unknown);
    status
        .external_provisioner_daemons_entitlement
        .get_or_insert(Entitlement::Unknown);
}

/// An AI or MCP object that refers to a control plane being deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Referrer {
    pub label: String,
    pub deleting: bool,
}

/// How much longer a deleted control plane keeps its finalizer, `elapsed` after its deletion started: while
/// referrers are being deleted, up to the deletion wait plus the last attempt; while other referrers exist, up to
/// the referrer hold; else not at all.
pub fn referrer_wait(
    referrers: &[Referrer],
    elapsed: std::time::Duration,
    settings: &crate::settings::ControllerSettings,
) -> Option<std::time::Duration> {
    let limit = settings
        .deletion_wait
        .saturating_add(settings.deletion_last_attempt);
    if referrers.iter().any(|r| r.deleting) && elapsed < limit {
        Some(limit - elapsed)
    } else if referrers.iter().any(|r| !r.deleting) && elapsed < settings.referrer_hold {
        Some(settings.referrer_hold - elapsed)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_control_plane_with_operator_access_is_polled() {
        let poll = Duration::from_secs(120);
        let retry = Duration::from_secs(30);
        assert_eq!(next_pass(None, false, poll), Outcome(None), "waits for a change");
        assert_eq!(next_pass(Some(retry), false, poll), Outcome(Some(retry)));
        assert_eq!(next_pass(None, true, poll), Outcome(Some(poll)));
        assert_eq!(
            next_pass(Some(retry), true, poll),
            Outcome(Some(retry)),
            "the sooner one"
        );
        assert_eq!(
            next_pass(Some(Duration::from_secs(300)), true, poll),
            Outcome(Some(poll))
        );
    }

    #[test]
    fn missing_features_read_unknown_and_the_status_starts_unknown() {
        use coder_k8s_api::control_plane::{CoderControlPlaneStatus, Entitlement, LicenseTier};
        let read: coder_k8s_coder_client::types::Entitlements =
            serde_json::from_value(serde_json::json!({"has_license": true, "features": {}})).unwrap();
        assert_eq!(
            entitlement_summary(&read),
            (Entitlement::Unknown, LicenseTier::Enterprise)
        );
        let listed: coder_k8s_coder_client::types::Entitlements = serde_json::from_value(serde_json::json!({
            "has_license": true,
            "features": {"external_provisioner_daemons": {"entitlement": "not_entitled", "enabled": false}},
        }))
        .unwrap();
        assert_eq!(entitlement_summary(&listed).0, Entitlement::NotEntitled);
        let mut status = CoderControlPlaneStatus::default();
        entitlements_unknown_until_read(&mut status);
        assert_eq!(status.license_tier, Some(LicenseTier::Unknown));
        assert_eq!(
            status.external_provisioner_daemons_entitlement,
            Some(Entitlement::Unknown)
        );
        status.license_tier = Some(LicenseTier::Premium);
        entitlements_unknown_until_read(&mut status);
        assert_eq!(
            status.license_tier,
            Some(LicenseTier::Premium),
            "a read value stays"
        );
    }

    #[test]
    fn referrers_hold_a_deletion_for_their_windows() {
        use std::time::Duration;
        let settings = crate::settings::ControllerSettings::default();
        let deleting = Referrer {
            label: "CoderMCPServer/a".to_owned(),
            deleting: true,
        };
        let kept = Referrer {
            label: "CoderMCPServer/b".to_owned(),
            deleting: false,
        };
        let secs = Duration::from_secs;
        assert_eq!(referrer_wait(&[], secs(0), &settings), None);
        assert_eq!(
            referrer_wait(std::slice::from_ref(&deleting), secs(60), &settings),
            Some(secs(840))
        );
        assert_eq!(referrer_wait(&[deleting], secs(900), &settings), None);
        assert_eq!(
            referrer_wait(std::slice::from_ref(&kept), secs(10), &settings),
            Some(secs(20))
        );
        assert_eq!(referrer_wait(&[kept], secs(30), &settings), None);
    }
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn reference() -> SecretKeySelector {
        SecretKeySelector {
            name: "coder-db-app".to_owned(),
            key: Some("uri".to_owned()),
        }
    }

    fn data(value: &str) -> BTreeMap<String, ByteString> {
        BTreeMap::from([("uri".to_owned(), ByteString(value.as_bytes().to_vec()))])
    }

    #[test]
    fn database_reasons() {
        let url = "postgres://coder:hunter2@db:5432/coder?sslmode=disable";
        let check = |data: Option<&BTreeMap<String, ByteString>>, conflicting| {
            let result = check_database_secret(&reference(), data, conflicting);
            assert!(
                !result.condition.message.contains("hunter2"),
                "{}",
                result.condition.message
            );
            assert!(!format!("{result:?}").contains("hunter2"));
            result
        };
        let resolved = check(Some(&data(url)), false);
        assert_eq!(resolved.condition.reason, "Resolved");
        assert_eq!(resolved.condition.status, ConditionStatus::True);
        assert_eq!(resolved.url.as_deref(), Some(url));
        assert!(
            resolved.condition.message.contains("coder-db-app") && resolved.condition.message.contains("uri")
        );
        assert_eq!(
            check(Some(&data("postgresql://db/coder?sslmode=require")), false)
                .condition
                .reason,
            "Resolved"
        );
        assert_eq!(check(None, false).condition.reason, "SecretNotFound");
        assert_eq!(
            check(Some(&BTreeMap::new()), false).condition.reason,
            "KeyNotFound"
        );
        assert_eq!(check(Some(&data("  \n")), false).condition.reason, "EmptyValue");
        assert_eq!(check(Some(&data("")), false).condition.reason, "EmptyValue");
        assert_eq!(
            check(Some(&data("Postgres://db/coder")), false).condition.reason,
            "InvalidURL"
        );
        assert_eq!(
            check(Some(&data("mysql://db/coder")), false).condition.reason,
            "InvalidURL"
        );
        assert_eq!(
            check(Some(&data(&format!("{url}\n"))), false).condition.reason,
            "InvalidURL"
        );
        let conflict = check(Some(&data(url)), true);
        assert_eq!(conflict.condition.reason, "ConflictingConfiguration");
        assert!(conflict.url.is_none());
    }

    fn secret_owned_by(uid: &str, controller: bool) -> Secret {
        Secret {
            metadata: ObjectMeta {
                owner_references: Some(vec![OwnerReference {
                    uid: uid.to_owned(),
                    controller: Some(controller),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        }
    }

    #[test]
    fn events_only_for_transitions() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
        let condition = |status: &str, reason: &str| Condition {
            type_: "DatabaseSecretResolved".to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: "m".to_owned(),
            observed_generation: None,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        };
        let pending = CoderControlPlaneStatus {
            phase: Some(WorkloadPhase::Pending),
            conditions: vec![condition("False", "SecretNotFound")],
            ..Default::default()
        };
        let ready = CoderControlPlaneStatus {
            phase: Some(WorkloadPhase::Ready),
            operator_access_ready: Some(true),
            conditions: vec![condition("True", "Resolved")],
            ..Default::default()
        };
        let reasons: Vec<String> = transitions(&pending, &ready).into_iter().map(|e| e.1).collect();
        assert_eq!(reasons, ["Ready", "OperatorAccessReady", "Resolved"]);
        assert!(transitions(&ready, &ready).is_empty());
        let back: Vec<(EventType, String)> = transitions(&ready, &pending)
            .into_iter()
            .map(|e| (e.0, e.1))
            .collect();
        assert_eq!(
            back,
            [
                (EventType::Warning, "NotReady".to_owned()),
                (EventType::Warning, "OperatorAccessNotReady".to_owned()),
                (EventType::Warning, "SecretNotFound".to_owned())
            ]
        );
    }

    #[test]
    fn token_secret_ownership_rules() {
        assert_eq!(token_secret_ownership(None, "u1"), TokenSecretOwnership::Absent);
        assert_eq!(
            token_secret_ownership(Some(&secret_owned_by("u1", true)), "u1"),
            TokenSecretOwnership::Owned
        );
        assert_eq!(
            token_secret_ownership(Some(&secret_owned_by("u2", true)), "u1"),
            TokenSecretOwnership::NotOwned
        );
        assert_eq!(
            token_secret_ownership(Some(&secret_owned_by("u1", false)), "u1"),
            TokenSecretOwnership::NotOwned
        );
        assert_eq!(
            token_secret_ownership(Some(&Secret::default()), "u1"),
            TokenSecretOwnership::NotOwned
        );
        let condition = token_secret_condition(TokenSecretOwnership::NotOwned, "cp-operator-token");
        assert_eq!(
            (condition.status, condition.reason),
            (ConditionStatus::False, "TokenSecretNotOwned")
        );
        assert!(condition.message.contains("cp-operator-token"));
        assert_eq!(
            token_secret_condition(TokenSecretOwnership::Absent, "x").reason,
            "TokenSecretOwned"
        );
    }
}
