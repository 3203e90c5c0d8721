//! The decisions of a CoderAIGatewayKey pass over its status, pure: which serial comes next, whether the current
//! key is due for rotation, which replaced keys passed their grace period, how a created key moves into the status,
//! when to look again, and the outcome of a Coder error.

use std::time::Duration;

use coder_k8s_api::ai_gateway_key::{
    AIGatewayKeyPhase, AIGatewayKeyStatus, CoderAIGatewayKeyStatus, PendingAIGatewayKey,
    PreviousAIGatewayKey, key_name, reasons,
};
use coder_k8s_coder_client::Error as CoderError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::controller::sync_status::{Outcome, SyncPhase};

pub type Status = CoderAIGatewayKeyStatus;

/// A key Coder just created (its value goes to the Secret, never to the status).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewKey {
    pub id: String,
    pub name: String,
    pub serial: i64,
    pub key_prefix: String,
    pub created_at: Timestamp,
}

/// One above every serial the status knows (the first key is serial 1).
pub fn next_serial(status: &Status) -> i64 {
    let current = status.current_key.iter().map(|k| k.serial);
    let previous = status.previous_keys.iter().map(|k| k.serial);
    let pending = status.pending_key.iter().map(|k| k.serial);
    current.chain(previous).chain(pending).max().unwrap_or(0) + 1
}

/// The marker written before a create: the key's name and serial, so a lost answer can be found and deleted.
pub fn pending(uid: &str, serial: i64, now: Timestamp) -> PendingAIGatewayKey {
    PendingAIGatewayKey {
        name: key_name(uid, serial),
        serial,
        started_at: Some(Time(now)),
    }
}

/// When the current key is due for rotation; `None` without a current key or a creation time.
pub fn rotation_time(status: &Status, rotation: Duration) -> Option<Timestamp> {
    let created = status.current_key.as_ref()?.created_at.as_ref()?.0;
    created.checked_add(SignedDuration::try_from(rotation).ok()?).ok()
}

/// Whether a new key is needed: none yet, its value is not in the Secret, or the current one is due.
pub fn needs_key(status: &Status, secret_holds_key: bool, rotation: Duration, now: Timestamp) -> bool {
    status.current_key.is_none()
        || !secret_holds_key
        || rotation_time(status, rotation).is_none_or(|due| due <= now)
}

/// The replaced keys whose grace period ended.
pub fn expired(status: &Status, now: Timestamp) -> Vec<PreviousAIGatewayKey> {
    status
        .previous_keys
        .iter()
        .filter(|k| k.delete_after.0 <= now)
        .cloned()
        .collect()
}

/// Records `created` as the current key; the replaced one waits `grace` before it is deleted.
pub fn rotate(status: &mut Status, created: NewKey, grace: Duration, now: Timestamp) {
    if let Some(old) = status.current_key.take() {
        let delete_after = now
            .checked_add(SignedDuration::try_from(grace).unwrap_or(SignedDuration::ZERO))
            .unwrap_or(now);
        status.previous_keys.push(PreviousAIGatewayKey {
            id: old.id,
            name: old.name,
            serial: old.serial,
            delete_after: Time(delete_after),
        });
    }
    status.current_key = Some(AIGatewayKeyStatus {
        id: created.id,
        name: created.name,
        serial: created.serial,
        key_prefix: Some(created.key_prefix).filter(|p| !p.is_empty()),
        created_at: Some(Time(created.created_at)),
    });
    status.pending_key = None;
}

/// How long until something is due: the rotation or the end of a grace period.
pub fn next_wake(status: &Status, rotation: Duration, now: Timestamp) -> Option<Duration> {
    let rotation = rotation_time(status, rotation);
    let graces = status.previous_keys.iter().map(|k| k.delete_after.0);
    rotation
        .into_iter()
        .chain(graces)
        .min()
        .map(|due| Duration::try_from(due.duration_since(now)).unwrap_or(Duration::ZERO))
}

/// Whether the object ever sent a create: without one, its delete needs no Coder call.
pub fn never_created(status: &Status) -> bool {
    status.current_key.is_none()
        && status.previous_keys.is_empty()
        && status.pending_key.is_none()
        && status.coder_deployment_id.is_none()
}

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

/// The outcome of a failed Coder call during `action`: a retry, or a stall that needs a person.
pub fn coder_failed(action: &str, error: &CoderError) -> Outcome {
    let message = format!("{action}: {error}");
    match error {
        CoderError::Forbidden { .. } => Outcome::stalled(
            reasons::NOT_SUPPORTED,
            format!(
                "{message} (the AI Gateway needs a Premium licence with the AI Gateway enabled, and the operator user must be a site owner)"
            ),
        ),
        e if e.is_route_not_found() => Outcome::stalled(
            reasons::NOT_SUPPORTED,
            format!("{message} (this Coder version has no AI Gateway keys API)"),
        ),
        CoderError::Rejected { .. } | CoderError::Conflict { .. } | CoderError::Invalid { .. } => {
            Outcome::stalled(reasons::REJECTED, message)
        }
        _ => Outcome::pending(reasons::CODER_UNAVAILABLE, message),
    }
}

/// The kind's phase for a shared phase.
pub fn phase(phase: SyncPhase) -> AIGatewayKeyPhase {
    match phase {
        SyncPhase::Pending => AIGatewayKeyPhase::Pending,
        SyncPhase::Ready => AIGatewayKeyPhase::Ready,
        SyncPhase::Stalled => AIGatewayKeyPhase::Stalled,
    }
}

/// The shared phase of the kind's phase.
pub fn sync_phase(phase: AIGatewayKeyPhase) -> SyncPhase {
    match phase {
        AIGatewayKeyPhase::Pending => SyncPhase::Pending,
        AIGatewayKeyPhase::Ready => SyncPhase::Ready,
        AIGatewayKeyPhase::Stalled => SyncPhase::Stalled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0b6e7a52-3c1d-4f8e-9a7b-112233445566";
    const HOUR: Duration = Duration::from_secs(3600);

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn created(serial: i64, seconds: i64) -> NewKey {
        NewKey {
            id: format!("id-{serial}"),
            name: key_name(UID, serial),
            serial,
            key_prefix: "sk-ab".to_owned(),
            created_at: at(seconds),
        }
    }

    #[test]
    fn the_first_key_is_serial_one_and_serials_never_repeat() {
        let mut status = Status::default();
        assert_eq!(next_serial(&status), 1);
        status.pending_key = Some(pending(UID, 4, at(0)));
        assert_eq!(next_serial(&status), 5);
        rotate(&mut status, created(5, 0), HOUR, at(0));
        assert_eq!(status.pending_key, None);
        assert_eq!(next_serial(&status), 6);
        assert_eq!(
            status.current_key.as_ref().unwrap().name,
            format!("ck8s-{}-5", UID.replace('-', ""))
        );
    }

    #[test]
    fn a_key_is_needed_when_missing_lost_or_due() {
        let rotation = 720 * HOUR;
        let mut status = Status::default();
        assert!(needs_key(&status, false, rotation, at(0)));
        rotate(&mut status, created(1, 0), HOUR, at(0));
        assert!(!needs_key(&status, true, rotation, at(10)));
        assert!(
            needs_key(&status, false, rotation, at(10)),
            "the Secret lost the value"
        );
        let due = i64::try_from(rotation.as_secs()).unwrap();
        assert!(!needs_key(&status, true, rotation, at(due - 1)));
        assert!(needs_key(&status, true, rotation, at(due)));
    }

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
    fn the_next_wake_is_the_earliest_due_time() {
        let mut status = Status::default();
        assert_eq!(next_wake(&status, HOUR * 2, at(0)), None);
        rotate(&mut status, created(1, 0), HOUR, at(0));
        assert_eq!(next_wake(&status, HOUR * 2, at(0)), Some(HOUR * 2));
        rotate(&mut status, created(2, 60), HOUR, at(60));
        assert_eq!(next_wake(&status, HOUR * 2, at(60)), Some(HOUR));
        assert_eq!(next_wake(&status, HOUR * 2, at(99_999)), Some(Duration::ZERO));
    }

    #[test]
    fn an_object_that_never_created_a_key_needs_no_coder_call_to_go() {
        let mut status = Status::default();
        assert!(never_created(&status));
        status.pending_key = Some(pending(UID, 1, at(0)));
        assert!(!never_created(&status));
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
