//! The conditions of a CoderProvisioner (docs/controllers/provisioner.md), pure: control-plane access, the
//! entitlement gate, credentials, the provisioner key and its Secret, and the phase a pass starts from. A pass ends
//! when it has set them, with the time of the next one.

use std::time::Duration;

use coder_k8s_api::control_plane::Entitlement;
use coder_k8s_api::provisioner::{conditions, reasons};
use coder_k8s_api::shared::WorkloadPhase;
use coder_k8s_coder_client::Error as CoderError;
use coder_k8s_control_plane_access::AccessError;

pub use crate::conditions::Requeue as Outcome;
use crate::conditions::{ConditionStatus, Decided};
use crate::credentials;

/// The phase a pass starts from: the last one, so that a failed gate keeps it (as the Go operator did); `Pending`
/// for a provisioner that never had one. Only a pass that applies the Deployment sets it anew.
pub fn phase_before_gates(last: Option<WorkloadPhase>) -> WorkloadPhase {
    last.unwrap_or(WorkloadPhase::Pending)
}

/// `ControlPlaneReady` and `OperatorAccessReady` for an access failure.
pub fn access_refused(control_plane: &str, error: &AccessError) -> Vec<Decided> {
    if error.is_control_plane_missing() {
        return vec![Decided::new(
            conditions::CONTROL_PLANE_READY,
            ConditionStatus::False,
            reasons::CONTROL_PLANE_UNAVAILABLE,
            error.message(),
        )];
    }
    let reason = match error {
        AccessError::TokenSecretRefMissing { .. } => reasons::OPERATOR_TOKEN_SECRET_REF_MISSING,
        AccessError::AccessNotReady { .. } => reasons::OPERATOR_ACCESS_NOT_READY,
        AccessError::TokenSecretUnavailable { .. } => reasons::OPERATOR_TOKEN_SECRET_UNAVAILABLE,
        AccessError::TokenSecretRefInvalid { .. }
        | AccessError::ClientUnusable
        | AccessError::ControlPlaneUnavailable { .. } => reasons::OPERATOR_TOKEN_SECRET_REF_INVALID,
    };
    vec![
        control_plane_available(control_plane),
        Decided::new(
            conditions::OPERATOR_ACCESS_READY,
            ConditionStatus::False,
            reason,
            error.message(),
        ),
    ]
}

fn control_plane_available(control_plane: &str) -> Decided {
    Decided::new(
        conditions::CONTROL_PLANE_READY,
        ConditionStatus::True,
        reasons::CONTROL_PLANE_AVAILABLE,
        format!("CoderControlPlane {control_plane:?} is available"),
    )
}

/// `ControlPlaneReady` and `OperatorAccessReady` when the operator token can be used.
pub fn access_ready(control_plane: &str) -> Vec<Decided> {
    vec![
        control_plane_available(control_plane),
        Decided::new(
            conditions::OPERATOR_ACCESS_READY,
            ConditionStatus::True,
            reasons::OPERATOR_ACCESS_READY,
            "the operator token is available",
        ),
    ]
}

/// `ExternalProvisionersEntitled` for the gate's outcome.
pub fn entitlement_condition(outcome: Result<bool, &CoderError>) -> Decided {
    let (status, reason, message) = match outcome {
        Ok(true) => (
            ConditionStatus::True,
            reasons::ENTITLED,
            "external provisioner daemons are entitled".to_owned(),
        ),
        Ok(false) => (
            ConditionStatus::False,
            reasons::NOT_ENTITLED,
            "the Coder licence does not entitle external provisioner daemons".to_owned(),
        ),
        Err(e) if no_entitlements_api(e) => (
            ConditionStatus::False,
            reasons::NOT_SUPPORTED,
            "this Coder deployment has no entitlements API".to_owned(),
        ),
        Err(e @ (CoderError::Unauthorized { .. } | CoderError::Forbidden { .. })) => (
            ConditionStatus::False,
            reasons::FORBIDDEN,
            format!("reading entitlements: {e}"),
        ),
        Err(e) => (
            ConditionStatus::False,
            reasons::ENTITLEMENTS_QUERY_FAILED,
            format!("reading entitlements: {e}"),
        ),
    };
    Decided::new(
        conditions::EXTERNAL_PROVISIONERS_ENTITLED,
        status,
        reason,
        message,
    )
}

/// How the entitlement gate ends a pass: `None` lets it go on. The control plane polls its entitlements and records
/// every change in its status (`recorded`), which wakes its provisioners. So an answer that is what the control plane
/// records (not entitled, or a Coder without an entitlements API, recorded as `unknown`) waits for that to change.
/// Any other (the record is older than the provisioner's own read, or the read failed) is tried again after the
/// entitlements interval: the control plane's next poll may change nothing in its status.
pub fn after_entitlement(
    outcome: Result<bool, &CoderError>,
    recorded: Option<Entitlement>,
    interval: Duration,
) -> Option<Outcome> {
    let as_recorded = match outcome {
        Ok(true) => return None,
        Ok(false) => recorded == Some(Entitlement::NotEntitled),
        Err(e) => no_entitlements_api(e) && recorded == Some(Entitlement::Unknown),
    };
    Some(match as_recorded {
        true => Outcome::ON_CHANGE,
        false => Outcome::after(interval),
    })
}

fn no_entitlements_api(error: &CoderError) -> bool {
    error.is_route_not_found() || matches!(error, CoderError::NotFound { .. })
}

/// `CredentialsReady`: the first refusal (reason, message), or verified.
pub fn credentials_condition(refusal: Option<(&'static str, String)>) -> Decided {
    credentials::condition(
        refusal,
        "every Secret the pods receive is a credential Secret for the control plane's origin",
    )
}

/// `ProvisionerKeyReady` when Coder holds a key of this name that this provisioner did not create.
pub fn key_not_owned(name: &str) -> Decided {
    Decided::new(
        conditions::PROVISIONER_KEY_READY,
        ConditionStatus::False,
        reasons::PROVISIONER_KEY_NOT_OWNED,
        format!(
            "Coder already has a provisioner key named {name:?} that this provisioner did not create (its ID is not status.provisionerKeyID); it is neither used nor deleted. Delete it in Coder (`coder provisioner keys delete`) or set spec.key.name to another name."
        ),
    )
}

/// `ProvisionerKeyReady` when the key that only `status.provisionerKeyID` names would have to be replaced.
pub fn key_unproven(name: &str) -> Decided {
    Decided::new(
        conditions::PROVISIONER_KEY_READY,
        ConditionStatus::False,
        reasons::PROVISIONER_KEY_NOT_OWNED,
        format!(
            "Coder has a provisioner key named {name:?} that only status.provisionerKeyID names (the key Secret records no key ID); it is neither replaced nor deleted. Delete it in Coder (`coder provisioner keys delete`) and the next pass creates a new one."
        ),
    )
}

/// `CredentialsReady` when the key Secret was created by someone else while the key was being made.
pub fn key_secret_taken(secret: &str) -> Decided {
    credentials_condition(Some((
        reasons::KEY_SECRET_NOT_OWNED,
        format!(
            "Secret {secret:?} appeared while the provisioner key was created and this provisioner does not own it; it was not changed, and the new key was deleted again"
        ),
    )))
}

/// `OperatorAccessReady` when the operator token Secret is not controlled by the control plane.
pub fn token_secret_not_owned(control_plane: &str, secret: &str) -> Vec<Decided> {
    vec![
        control_plane_available(control_plane),
        Decided::new(
            conditions::OPERATOR_ACCESS_READY,
            ConditionStatus::False,
            reasons::OPERATOR_TOKEN_SECRET_NOT_OWNED,
            format!(
                "Secret {secret:?} named as the operator token of CoderControlPlane {control_plane:?} is not controlled by that control plane; it is not read"
            ),
        ),
    ]
}

/// `ProvisionerKeyReady` after a failed Coder call.
pub fn key_failed(error: &CoderError) -> Decided {
    let reason = if matches!(error, CoderError::RateLimited { .. }) {
        reasons::RATE_LIMITED
    } else {
        reasons::PROVISIONER_KEY_FAILED
    };
    Decided::new(
        conditions::PROVISIONER_KEY_READY,
        ConditionStatus::False,
        reason,
        format!("provisioner key: {error}"),
    )
}

/// `ProvisionerKeyReady` and `ProvisionerKeySecretReady` once the key is in Coder and in its Secret.
pub fn key_ready(secret: &str) -> Vec<Decided> {
    vec![
        Decided::new(
            conditions::PROVISIONER_KEY_READY,
            ConditionStatus::True,
            reasons::PROVISIONER_KEY_READY,
            "the provisioner key exists in Coder",
        ),
        Decided::new(
            conditions::PROVISIONER_KEY_SECRET_READY,
            ConditionStatus::True,
            reasons::SECRET_READY,
            format!("Secret {secret:?} holds the key"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_failed_gate_keeps_the_last_phase() {
        assert_eq!(
            phase_before_gates(Some(WorkloadPhase::Ready)),
            WorkloadPhase::Ready
        );
        assert_eq!(phase_before_gates(None), WorkloadPhase::Pending);
    }

    #[test]
    fn access_reasons() {
        let missing = access_refused(
            "cp",
            &AccessError::ControlPlaneUnavailable {
                control_plane: "cp".to_owned(),
            },
        );
        assert_eq!(
            (missing.len(), missing[0].reason),
            (1, reasons::CONTROL_PLANE_UNAVAILABLE)
        );
        let not_ready = access_refused(
            "cp",
            &AccessError::AccessNotReady {
                control_plane: "cp".to_owned(),
            },
        );
        assert_eq!(not_ready[0].reason, reasons::CONTROL_PLANE_AVAILABLE);
        assert_eq!(not_ready[1].reason, reasons::OPERATOR_ACCESS_NOT_READY);
        assert_eq!(access_ready("cp")[1].status, ConditionStatus::True);
    }

    #[test]
    fn entitlement_reasons() {
        assert_eq!(entitlement_condition(Ok(true)).reason, reasons::ENTITLED);
        assert_eq!(entitlement_condition(Ok(false)).reason, reasons::NOT_ENTITLED);
        let forbidden = CoderError::Forbidden {
            message: "no".to_owned(),
        };
        assert_eq!(entitlement_condition(Err(&forbidden)).reason, reasons::FORBIDDEN);
    }

    #[test]
    fn an_answer_the_control_plane_records_waits_for_it_and_any_other_is_retried() {
        use Entitlement::{Entitled, NotEntitled, Unknown};
        let interval = Duration::from_secs(120);
        let retry = Some(Outcome::after(interval));
        let on_change = Some(Outcome::ON_CHANGE);
        assert_eq!(after_entitlement(Ok(true), Some(NotEntitled), interval), None);
        assert_eq!(
            after_entitlement(Ok(false), Some(NotEntitled), interval),
            on_change
        );
        // The record says entitled (older than this read) or nothing: the next poll may not change the status.
        assert_eq!(after_entitlement(Ok(false), Some(Entitled), interval), retry);
        assert_eq!(after_entitlement(Ok(false), None, interval), retry);
        let unavailable = |reason| CoderError::Unavailable {
            reason,
            status: Some(404),
            message: "no".to_owned(),
        };
        let no_api = unavailable(coder_k8s_coder_client::UnavailableReason::RouteNotFound);
        assert_eq!(
            after_entitlement(Err(&no_api), Some(Unknown), interval),
            on_change
        );
        assert_eq!(
            after_entitlement(Err(&no_api), Some(NotEntitled), interval),
            retry
        );
        let down = unavailable(coder_k8s_coder_client::UnavailableReason::ServerError);
        assert_eq!(after_entitlement(Err(&down), Some(Unknown), interval), retry);
        let forbidden = CoderError::Forbidden {
            message: "no".to_owned(),
        };
        assert_eq!(after_entitlement(Err(&forbidden), Some(Unknown), interval), retry);
    }
}
