//! What a CoderAIGatewayKey's spec resolves to: the output Secret and its data key, the rotation interval and the
//! grace period (Go duration strings, defaults 720h and 1h). Pure.

use std::time::Duration;

use coder_k8s_api::ai_gateway_key::{
    CoderAIGatewayKeySpec, DEFAULT_GRACE_PERIOD, DEFAULT_ROTATION_INTERVAL, DEFAULT_SECRET_KEY,
    default_secret_name,
};

use crate::duration::parse_go_duration;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CoderAIGatewayKeySpec {
        serde_json::from_value(serde_json::json!({"controlPlaneRef": {"name": "coder"}})).unwrap()
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
}
