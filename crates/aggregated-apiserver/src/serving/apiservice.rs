//! The APIService trust rules as plain values: what the `caBundle` controller reads from the APIService, whether
//! it patches (and with what), its retry backoff and its warning rate limit. No I/O happens here.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use tokio::time::Instant;

/// The APIService that routes `aggregation.coder.com/v1alpha1` to this server.
pub const APISERVICE_NAME: &str = "v1alpha1.aggregation.coder.com";
/// The field manager of the controller's patches, visible in `managedFields`.
pub const FIELD_MANAGER: &str = "coder-k8s-apiservice-cabundle";
/// Set to `"false"` on the APIService, the controller leaves it alone (another tool owns `caBundle`).
pub const OPT_OUT_ANNOTATION: &str = "coder.com/manage-ca-bundle";
/// First delay after a failed patch; it doubles up to [`RETRY_MAX_DELAY`].
pub const RETRY_BASE_DELAY: Duration = Duration::from_millis(500);
/// Bounds how long a repaired permission takes to be noticed.
pub const RETRY_MAX_DELAY: Duration = Duration::from_secs(60);
/// A warning of one kind is logged at most once per this interval (e.g. while RBAC is missing).
pub const WARN_INTERVAL: Duration = Duration::from_secs(5 * 60);

pub const SET_LOG: &str = "Set the APIService caBundle to the serving CA and enabled TLS verification";
pub const SET_AGAIN_LOG: &str = "Set the APIService caBundle again";
pub const OPTED_OUT_LOG: &str = "APIService opted out of caBundle management; leaving it unchanged";
pub const NOT_REGISTERED_LOG: &str = "APIService is not registered; its caBundle will be set once it exists";
pub const MISSING_PERMISSION_LOG: &str =
    "missing permission to patch the APIService caBundle; apply config/rbac/apiservice-cabundle-role.yaml";
pub const PATCH_FAILED_LOG: &str = "cannot patch the APIService caBundle; retrying";
pub const WATCH_FAILED_LOG: &str = "cannot watch the APIService; retrying";

/// `apiregistration.k8s.io/v1` `APIService`; k8s-openapi has no kube-aggregator types.
pub fn apiservice_resource() -> ApiResource {
    ApiResource {
        group: "apiregistration.k8s.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "apiregistration.k8s.io/v1".to_owned(),
        kind: "APIService".to_owned(),
        plural: "apiservices".to_owned(),
    }
}

/// What the controller reads from an APIService.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustFields {
    pub opted_out: bool,
    /// `spec.caBundle` (base64 in JSON).
    pub ca_bundle: Option<String>,
    pub insecure_skip_tls_verify: bool,
}

impl TrustFields {
    pub fn of(apiservice: &DynamicObject) -> Self {
        let opted_out = apiservice
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(OPT_OUT_ANNOTATION))
            .is_some_and(|value| value == "false");
        let spec = apiservice.data.get("spec");
        Self {
            opted_out,
            ca_bundle: spec
                .and_then(|spec| spec.get("caBundle"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            insecure_skip_tls_verify: spec
                .and_then(|spec| spec.get("insecureSkipTLSVerify"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }
    }
}

/// What to do with the APIService.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    NotRegistered,
    /// No serving CA known yet: nothing to trust.
    NoCa,
    OptedOut,
    UpToDate,
    /// Send this JSON merge patch.
    Patch(Value),
}

/// Patches only when `caBundle` differs from the serving CA or TLS verification is off; one patch sets both,
/// because the API rejects `insecureSkipTLSVerify: true` together with a `caBundle`.
pub fn decide(apiservice: Option<&TrustFields>, ca_pem: &[u8]) -> Decision {
    let Some(apiservice) = apiservice else {
        return Decision::NotRegistered;
    };
    if apiservice.opted_out {
        return Decision::OptedOut;
    }
    if ca_pem.is_empty() {
        return Decision::NoCa;
    }
    let wanted = STANDARD.encode(ca_pem);
    if apiservice.ca_bundle.as_deref() == Some(wanted.as_str()) && !apiservice.insecure_skip_tls_verify {
        return Decision::UpToDate;
    }
    Decision::Patch(json!({"spec": {"caBundle": wanted, "insecureSkipTLSVerify": false}}))
}

/// Exponential retry delays: [`RETRY_BASE_DELAY`], doubling, capped at [`RETRY_MAX_DELAY`].
#[derive(Clone, Debug)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            next: RETRY_BASE_DELAY,
        }
    }
}

impl Backoff {
    /// The delay before the next retry.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(RETRY_MAX_DELAY);
        delay
    }

    /// After a success the next failure starts again at the base delay.
    pub fn reset(&mut self) {
        self.next = RETRY_BASE_DELAY;
    }
}

/// Lets a warning of each kind through at most once per [`WARN_INTERVAL`].
#[derive(Debug, Default)]
pub struct WarnLimiter {
    last: HashMap<&'static str, Instant>,
}

impl WarnLimiter {
    pub fn allow(&mut self, kind: &'static str, now: Instant) -> bool {
        match self.last.get(kind) {
            Some(last) if now.saturating_duration_since(*last) < WARN_INTERVAL => false,
            _ => {
                self.last.insert(kind, now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &[u8] = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn apiservice(annotations: Value, spec: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": APISERVICE_NAME, "annotations": annotations},
            "spec": spec,
        }))
        .unwrap()
    }

    fn fields(annotations: Value, spec: Value) -> TrustFields {
        TrustFields::of(&apiservice(annotations, spec))
    }

    fn wanted_patch() -> Decision {
        Decision::Patch(json!({"spec": {"caBundle": STANDARD.encode(CA), "insecureSkipTLSVerify": false}}))
    }

    #[test]
    fn reads_the_trust_fields() {
        let read = fields(
            json!({OPT_OUT_ANNOTATION: "false"}),
            json!({"caBundle": "Zm9v", "insecureSkipTLSVerify": true}),
        );
        assert_eq!(
            read,
            TrustFields {
                opted_out: true,
                ca_bundle: Some("Zm9v".to_owned()),
                insecure_skip_tls_verify: true
            }
        );
        assert_eq!(fields(json!({}), json!({})), TrustFields::default());
    }

    #[test]
    fn only_the_exact_value_false_opts_out() {
        for value in ["true", "False", "no", ""] {
            assert!(
                !fields(json!({OPT_OUT_ANNOTATION: value}), json!({})).opted_out,
                "{value}"
            );
        }
    }

    #[test]
    fn patches_a_missing_or_different_ca_bundle() {
        assert_eq!(decide(Some(&fields(json!({}), json!({}))), CA), wanted_patch());
        let other = fields(json!({}), json!({"caBundle": STANDARD.encode(b"other")}));
        assert_eq!(decide(Some(&other), CA), wanted_patch());
    }

    #[test]
    fn patches_when_tls_verification_is_off_even_with_the_right_ca() {
        let insecure = fields(
            json!({}),
            json!({"caBundle": STANDARD.encode(CA), "insecureSkipTLSVerify": true}),
        );
        assert_eq!(decide(Some(&insecure), CA), wanted_patch());
    }

    #[test]
    fn leaves_an_equal_ca_bundle_alone() {
        let equal = fields(
            json!({}),
            json!({"caBundle": STANDARD.encode(CA), "insecureSkipTLSVerify": false}),
        );
        assert_eq!(decide(Some(&equal), CA), Decision::UpToDate);
    }

    #[test]
    fn respects_the_opt_out_absence_and_an_unknown_ca() {
        let opted_out = fields(json!({OPT_OUT_ANNOTATION: "false"}), json!({}));
        assert_eq!(decide(Some(&opted_out), CA), Decision::OptedOut);
        assert_eq!(decide(None, CA), Decision::NotRegistered);
        assert_eq!(decide(Some(&fields(json!({}), json!({}))), b""), Decision::NoCa);
    }

    #[test]
    fn backoff_doubles_from_half_a_second_to_a_minute_and_resets() {
        let mut backoff = Backoff::default();
        let delays: Vec<_> = (0..10).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(
            delays,
            [500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]
        );
        backoff.reset();
        assert_eq!(backoff.next_delay(), RETRY_BASE_DELAY);
    }

    #[test]
    fn warnings_are_limited_per_kind_to_one_per_five_minutes() {
        let start = Instant::now();
        let mut limiter = WarnLimiter::default();
        assert!(limiter.allow("forbidden", start));
        assert!(!limiter.allow("forbidden", start + Duration::from_secs(299)));
        assert!(limiter.allow("patch", start + Duration::from_secs(1)));
        assert!(limiter.allow("forbidden", start + Duration::from_secs(300)));
        assert!(!limiter.allow("forbidden", start + Duration::from_secs(301)));
    }
}
