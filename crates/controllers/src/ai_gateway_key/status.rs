//! The conditions of a CoderAIGatewayKey pass, pure: the outcome (phase, reason, message) of each way it ends —
//! at rest with the key in its Secret, refused by the control plane, a Secret it does not own, a Coder error.

use std::time::Duration;

use coder_k8s_api::ai_gateway_key::reasons;
use coder_k8s_coder_client::Error as CoderError;

use super::desired::Status;
pub use crate::sync_status::Outcome;
use crate::sync_status::outcomes;

/// The outcome once the current key is in the Secret.
pub fn ready(status: &Status, secret_name: &str) -> Outcome {
    match status.previous_keys.len() {
        0 => Outcome::ready(reasons::KEY_READY, format!("The key is in Secret {secret_name}.")),
        waiting => Outcome::ready(
            reasons::ROTATING,
            format!(
                "The new key is in Secret {secret_name}; {waiting} replaced key(s) wait for the end of the grace period."
            ),
        ),
    }
}

/// A Secret under the output Secret's name that this object does not own: it is never written.
pub fn secret_not_owned(secret_name: &str) -> Outcome {
    Outcome::stalled(
        reasons::SECRET_NOT_OWNED,
        format!(
            "Secret {secret_name} exists and this object does not own it; name a Secret that does not exist in spec.secretName."
        ),
    )
}

/// Ready, with the next pass at the rotation or the end of a grace period (`next_wake`, at least a second away).
pub fn at_rest(status: &Status, secret_name: &str, next_wake: Option<Duration>) -> Outcome {
    let outcome = ready(status, secret_name);
    match next_wake {
        Some(wait) => outcome.requeue(wait.max(Duration::from_secs(1))),
        None => outcome,
    }
}

/// What the AI Gateway needs from Coder, said when Coder refuses a key call.
pub const NEEDS: &str = "the AI Gateway needs a Premium licence with the AI Gateway enabled, and the operator user must be a site owner";

/// The outcome of a failed Coder call during `action`.
pub fn coder_failed(action: &str, error: &CoderError) -> Outcome {
    outcomes::coder_failed(action, error, NEEDS)
}

#[cfg(test)]
mod tests {
    use super::super::desired::tests::{HOUR, at, created};
    use super::super::desired::{expired, rotate};
    use super::*;
    use crate::sync_status::SyncPhase;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn a_rotation_keeps_the_old_key_for_the_grace_period() {
        let mut status = Status::default();
        rotate(&mut status, created(1, 0), HOUR, at(0));
        rotate(&mut status, created(2, 100), HOUR, at(100));
        assert_eq!(status.previous_keys.len(), 1);
        assert_eq!(status.previous_keys[0].serial, 1);
        assert_eq!(status.previous_keys[0].delete_after, Time(at(3700)));
        assert!(expired(&status, at(3699)).is_empty());
        assert_eq!(expired(&status, at(3700)).len(), 1);
        assert_eq!(ready(&status, "out").reason, reasons::ROTATING);
        status.previous_keys.clear();
        assert_eq!(ready(&status, "out").reason, reasons::KEY_READY);
    }

    #[test]
    fn coder_errors_map_to_a_retry_or_a_stall() {
        let forbidden = CoderError::Forbidden {
            message: "AI Bridge is a Premium feature. Contact sales!".to_owned(),
        };
        assert_eq!(coder_failed("create", &forbidden).reason, reasons::NOT_SUPPORTED);
        assert_eq!(coder_failed("create", &forbidden).phase, SyncPhase::Stalled);
        let down = CoderError::Unavailable {
            reason: coder_k8s_coder_client::UnavailableReason::Connect,
            status: None,
            message: "connection refused".to_owned(),
        };
        assert_eq!(coder_failed("create", &down).reason, reasons::CODER_UNAVAILABLE);
        assert_eq!(coder_failed("create", &down).phase, SyncPhase::Pending);
    }
}
