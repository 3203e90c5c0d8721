//! What a CoderAIGatewayKey should have, pure: the spec's settings (the output Secret and its data key, the rotation
//! interval and the grace period — Go duration strings, defaults 720h and 1h) and the key decisions over its status
//! (which serial comes next, whether the current key is due for rotation, which replaced keys passed their grace
//! period, how a created key moves into the status, when to look again).

use std::time::Duration;

use coder_k8s_api::ai_gateway_key::{
    AIGatewayKeyStatus, CoderAIGatewayKeyStatus, PendingAIGatewayKey, PreviousAIGatewayKey, key_name,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use coder_k8s_api::ai_gateway_key::{
    CoderAIGatewayKeySpec, DEFAULT_GRACE_PERIOD, DEFAULT_ROTATION_INTERVAL, DEFAULT_SECRET_KEY,
    default_secret_name,
};

use coder_k8s_api::duration::parse_go_duration;

pub type Status = CoderAIGatewayKeyStatus;

/// `app.kubernetes.io/name` of the output Secret.
pub const APP: &str = "coder-ai-gateway-key";

/// The resolved settings of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySettings {
    pub secret_name: String,
    pub secret_key: String,
    pub rotation_interval: Duration,
    pub grace_period: Duration,
}

/// The settings of `spec` for the object named `name`; an unreadable duration is an error naming the field (the
/// CRD's pattern normally keeps them out).
pub fn settings(name: &str, spec: &CoderAIGatewayKeySpec) -> Result<KeySettings, String> {
    let secret_name = spec
        .secret_name
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| default_secret_name(name));
    let secret_key = Some(spec.secret_key.clone())
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| DEFAULT_SECRET_KEY.to_owned());
    Ok(KeySettings {
        secret_name,
        secret_key,
        rotation_interval: duration(
            "rotationInterval",
            &spec.rotation_interval,
            DEFAULT_ROTATION_INTERVAL,
        )?,
        grace_period: duration("gracePeriod", &spec.grace_period, DEFAULT_GRACE_PERIOD)?,
    })
}

fn duration(field: &str, value: &str, default: &str) -> Result<Duration, String> {
    let value = if value.trim().is_empty() { default } else { value };
    parse_go_duration(value)
        .ok()
        .filter(|d| !d.negative && !d.duration.is_zero())
        .map(|d| d.duration)
        .ok_or_else(|| format!("spec.{field} {value:?} is not a positive Go duration"))
}

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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn spec() -> CoderAIGatewayKeySpec {
        serde_json::from_value(serde_json::json!({"controlPlaneRef": {"name": "coder"}})).unwrap()
    }

    pub(crate) const UID: &str = "0b6e7a52-3c1d-4f8e-9a7b-112233445566";
    pub(crate) const HOUR: Duration = Duration::from_secs(3600);

    pub(crate) fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    /// A key Coder created with serial `serial` at `at(seconds)`.
    pub(crate) fn created(serial: i64, seconds: i64) -> NewKey {
        NewKey {
            id: format!("id-{serial}"),
            name: key_name(UID, serial),
            serial,
            key_prefix: "sk-ab".to_owned(),
            created_at: at(seconds),
        }
    }

    #[test]
    fn defaults_follow_the_release_notes() {
        let s = settings("gateway", &spec()).unwrap();
        assert_eq!(s.secret_name, "gateway-ai-gateway-key");
        assert_eq!(s.secret_key, "key");
        assert_eq!(s.rotation_interval, Duration::from_secs(30 * 24 * 3600));
        assert_eq!(s.grace_period, Duration::from_secs(3600));
    }

    #[test]
    fn set_fields_win_and_bad_durations_name_the_field() {
        let mut spec = spec();
        spec.secret_name = Some("out".to_owned());
        spec.secret_key = "token".to_owned();
        spec.rotation_interval = "2h30m".to_owned();
        spec.grace_period = "90s".to_owned();
        let s = settings("gateway", &spec).unwrap();
        assert_eq!((s.secret_name.as_str(), s.secret_key.as_str()), ("out", "token"));
        assert_eq!(s.rotation_interval, Duration::from_secs(9000));
        assert_eq!(s.grace_period, Duration::from_secs(90));
        spec.grace_period = "soon".to_owned();
        assert!(
            settings("gateway", &spec)
                .unwrap_err()
                .contains("spec.gracePeriod")
        );
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
}
