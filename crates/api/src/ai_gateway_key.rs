//! `CoderAIGatewayKey`: one Coder AI Gateway key, kept in a Secret that the object owns, rotated on a schedule.
//!
//! The operator creates keys with `POST /api/v2/ai-gateway/keys` under the name `ck8s-<uid>-<serial>` (the object's
//! UID without dashes, then a serial that grows by one per key), writes the key to the output Secret, and after each
//! rotation deletes the replaced key with `DELETE /api/v2/ai-gateway/keys/{id}` once its grace period is over.
//! Deleting the object deletes every key of the object. Keys are full-trust credentials.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::shared::{ControlPlaneReference, SecretKeySelector, conditions_schema};

/// Finalizer that deletes every key of the object in Coder before the object goes.
pub const FINALIZER: &str = "coder.com/ai-gateway-key-cleanup";
/// Prefix of every key name the operator creates. Do not give other keys names that start this way: the operator and
/// the cleanup sweep delete keys by `ck8s-<uid>-`.
pub const KEY_NAME_PREFIX: &str = "ck8s-";
/// Suffix of the default output Secret name `<name>-ai-gateway-key`.
pub const DEFAULT_SECRET_NAME_SUFFIX: &str = "-ai-gateway-key";
/// Data key of the gateway key in the output Secret when `secretKey` is unset.
pub const DEFAULT_SECRET_KEY: &str = "key";
/// Default rotation interval: 30 days.
pub const DEFAULT_ROTATION_INTERVAL: &str = "720h";
/// Default grace period before a replaced key is deleted.
pub const DEFAULT_GRACE_PERIOD: &str = "1h";
/// Go duration syntax accepted by `rotationInterval` and `gracePeriod` (no sign, no `µs`).
pub const DURATION_PATTERN: &str = "^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$";

/// Condition types of this kind.
pub mod conditions {
    pub use crate::shared::sync_status::conditions::{READY, RECONCILING, STALLED};
}

/// Condition reasons of this kind.
pub mod reasons {
    pub use crate::shared::sync_status::reasons::{
        CLEANUP_RECORD_FAILED, CODER_DEPLOYMENT_CHANGED, CODER_UNAVAILABLE, CONTROL_PLANE_NOT_READY,
        DELETING, NOT_SUPPORTED, OPERATOR_ACCESS_NOT_READY, REJECTED,
    };
    /// Reason: the current key exists in Coder and is in the output Secret.
    pub const KEY_READY: &str = "KeyReady";
    /// Reason (stalled): the control plane does not set `spec.aiGateway.allowKeys: true`. An object that never created a
    /// key makes no Coder call.
    pub const NOT_ALLOWED: &str = "NotAllowed";
    /// Reason (stalled): a Secret named `secretName` exists and this object is not its controller owner.
    pub const SECRET_NOT_OWNED: &str = "SecretNotOwned";
    /// Reason: a new key replaced the current one; the replaced key waits for its grace period.
    pub const ROTATING: &str = "Rotating";
}

/// One Coder AI Gateway key, kept in a Secret that the object owns and rotated on a schedule.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "coder.com",
    version = "v1alpha1",
    kind = "CoderAIGatewayKey",
    plural = "coderaigatewaykeys",
    namespaced,
    status = "CoderAIGatewayKeyStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "CoderAIGatewayKey keeps one Coder AI Gateway key in a Secret that the object owns: the operator creates the key, rotates it, deletes replaced keys after a grace period and deletes every key of the object when the object is deleted. The control plane must opt in with spec.aiGateway.allowKeys.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Secret", type_ = "string", json_path = ".status.secretRef.name"),
    printcolumn(
        name = "Key",
        type_ = "string",
        json_path = ".status.currentKey.name",
        priority = "1"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason",
        priority = "1"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(
    validation = kube::core::Rule::new(
        "!has(self.rotationInterval) || !self.rotationInterval.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self.rotationInterval) >= duration('1h')"
    ).message("rotationInterval must be at least 1h"),
    validation = kube::core::Rule::new(
        "!has(self.rotationInterval) || !has(self.gracePeriod) || !self.rotationInterval.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || !self.gracePeriod.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self.gracePeriod) < duration(self.rotationInterval)"
    ).message("gracePeriod must be shorter than rotationInterval"),
    validation = kube::core::Rule::new(
        "has(self.secretName) == has(oldSelf.secretName) && (!has(self.secretName) || self.secretName == oldSelf.secretName)"
    ).message("secretName is immutable")
)]
#[serde(rename_all = "camelCase")]
pub struct CoderAIGatewayKeySpec {
    /// The CoderControlPlane (same namespace) whose Coder deployment issues the key. It must set
    /// `spec.aiGateway.allowKeys: true`, and its operator user must be a site owner.
    pub control_plane_ref: ControlPlaneReference,
    /// Name of the output Secret that receives the key. Default `<name>-ai-gateway-key` (shortened with a hash when
    /// longer than 253 characters). The Secret must not exist yet, or must be owned by this object. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub secret_name: Option<String>,
    /// Data key of the gateway key in the output Secret.
    #[serde(default = "default_secret_key")]
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub secret_key: String,
    /// How long a key is used before the operator replaces it, as a Go duration (`720h`, `168h`, `1h30m`). At least
    /// `1h`. Default `720h` (30 days).
    #[serde(default = "default_rotation_interval")]
    #[schemars(length(min = 2, max = 32), regex(pattern = DURATION_PATTERN))]
    pub rotation_interval: String,
    /// How long a replaced key keeps working after a rotation, so that its users can pick up the new key, as a Go
    /// duration. Shorter than `rotationInterval`. Default `1h`.
    #[serde(default = "default_grace_period")]
    #[schemars(length(min = 2, max = 32), regex(pattern = DURATION_PATTERN))]
    pub grace_period: String,
}

impl Default for CoderAIGatewayKeySpec {
    fn default() -> Self {
        Self {
            control_plane_ref: ControlPlaneReference::default(),
            secret_name: None,
            secret_key: default_secret_key(),
            rotation_interval: default_rotation_interval(),
            grace_period: default_grace_period(),
        }
    }
}

fn default_secret_key() -> String {
    DEFAULT_SECRET_KEY.to_owned()
}

fn default_rotation_interval() -> String {
    DEFAULT_ROTATION_INTERVAL.to_owned()
}

fn default_grace_period() -> String {
    DEFAULT_GRACE_PERIOD.to_owned()
}

impl CoderAIGatewayKey {
    /// Name of the output Secret: `spec.secretName`, or `<name>-ai-gateway-key`.
    pub fn output_secret_name(&self) -> String {
        match self.spec.secret_name.as_deref() {
            Some(name) if !name.is_empty() => name.to_owned(),
            _ => default_secret_name(self.metadata.name.as_deref().unwrap_or_default()),
        }
    }

    /// Data key of the gateway key in the output Secret.
    pub fn output_secret_key(&self) -> &str {
        if self.spec.secret_key.is_empty() {
            DEFAULT_SECRET_KEY
        } else {
            &self.spec.secret_key
        }
    }
}

/// The object UID as it appears in key names: without dashes, lowercase.
fn compact_uid(uid: &str) -> String {
    uid.chars()
        .filter(|c| *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Prefix of every key name of the object with this UID: `ck8s-<uid without dashes>-`. The operator and the cleanup
/// sweep delete keys by this prefix.
pub fn key_name_prefix(uid: &str) -> String {
    format!("{KEY_NAME_PREFIX}{}-", compact_uid(uid))
}

/// Name of the key with `serial` of the object with this UID: `ck8s-<uid without dashes>-<serial>`. With a UUID it
/// has at most 57 characters, within Coder's 64-character limit for key names.
pub fn key_name(uid: &str, serial: i64) -> String {
    format!("{}{serial}", key_name_prefix(uid))
}

/// The serial of a key name of the object with this UID, or `None` when the name is not one of its keys.
pub fn key_serial(uid: &str, name: &str) -> Option<i64> {
    let digits = name.strip_prefix(&key_name_prefix(uid))?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.starts_with('0') {
        return None;
    }
    digits.parse().ok()
}

/// The default output Secret name for an object: `<name>-ai-gateway-key`. When that exceeds 253 characters, a
/// prefix of the name is kept, followed by `-<8 hex of FNV-32a of the name>` and the suffix.
pub fn default_secret_name(object_name: &str) -> String {
    crate::shared::truncated_name(
        object_name,
        DEFAULT_SECRET_NAME_SUFFIX,
        crate::shared::DNS_SUBDOMAIN_MAX,
    )
}

/// Observed state of a CoderAIGatewayKey.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CoderAIGatewayKeyStatus {
    /// Generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The output Secret and data key that hold the current key. Absent until the first key is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
    /// The key that the output Secret holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_key: Option<AIGatewayKeyStatus>,
    /// Replaced keys that still work until their `deleteAfter` time; the operator then deletes them in Coder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous_keys: Vec<PreviousAIGatewayKey>,
    /// A create the operator sent whose answer it has not stored yet. Coder shows a key value only once, so before it
    /// creates another key the operator looks this name up in Coder and deletes the key if it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_key: Option<PendingAIGatewayKey>,
    /// Deployment ID (from `GET /api/v2/buildinfo`) of the Coder deployment that holds the keys. When the control
    /// plane reaches another deployment, the object stalls with `CoderDeploymentChanged`.
    #[serde(
        default,
        rename = "coderDeploymentID",
        skip_serializing_if = "Option::is_none"
    )]
    pub coder_deployment_id: Option<String>,
    /// `Pending` while the operator works, `Ready` when the current key is in the Secret, `Stalled` when a person
    /// must act.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AIGatewayKeyPhase>,
    /// Conditions: `Ready`, `Reconciling`, `Stalled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// A key of the object in Coder.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AIGatewayKeyStatus {
    /// ID of the key in Coder.
    pub id: String,
    /// Name of the key in Coder: `ck8s-<uid without dashes>-<serial>`.
    pub name: String,
    /// Serial of the key; the first key has serial 1 and each rotation adds one.
    #[schemars(range(min = 1))]
    pub serial: i64,
    /// The non-secret prefix of the key that Coder shows in its key list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// Time Coder created the key; the next rotation is due at this time plus `rotationInterval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
}

/// A replaced key that keeps working until its grace period is over.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreviousAIGatewayKey {
    /// ID of the key in Coder.
    pub id: String,
    /// Name of the key in Coder.
    pub name: String,
    /// Serial of the key.
    #[schemars(range(min = 1))]
    pub serial: i64,
    /// Time after which the operator deletes the key in Coder: the rotation time plus `gracePeriod`.
    pub delete_after: Time,
}

/// A key create whose answer the operator has not stored yet.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PendingAIGatewayKey {
    /// Name the create used.
    pub name: String,
    /// Serial the create used.
    #[schemars(range(min = 1))]
    pub serial: i64,
    /// Time the operator recorded the create, before it sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
}

/// Phase of the CoderAIGatewayKey: `Pending` while the operator works towards the spec, `Ready` when the
/// current key exists in Coder and is in the output Secret, `Stalled` when the operator cannot go on without
/// a change by a person (the `Stalled` condition says why).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AIGatewayKeyPhase {
    /// The operator is working towards the spec; the conditions say what it waits for.
    #[default]
    Pending,
    /// The current key exists in Coder and is in the output Secret.
    Ready,
    /// The operator cannot go on without a change by a person; the `Stalled` condition says why.
    Stalled,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use kube::core::ObjectMeta;

    const UID: &str = "3F2504E0-4F89-11D3-9A0C-0305E82C3301";

    #[test]
    fn key_names_follow_the_release_notes() {
        assert_eq!(key_name_prefix(UID), "ck8s-3f2504e04f8911d39a0c0305e82c3301-");
        assert_eq!(key_name(UID, 1), "ck8s-3f2504e04f8911d39a0c0305e82c3301-1");
        assert_eq!(key_name(UID, 42), "ck8s-3f2504e04f8911d39a0c0305e82c3301-42");
        assert!(key_name(UID, i64::MAX).len() <= 64);
    }

    #[test]
    fn key_names_satisfy_coder_rule() {
        let name = key_name(UID, 7);
        assert!(name.len() <= 64);
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
        assert!(!name.contains("--"));
    }

    #[test]
    fn key_serial_parses_only_own_keys() {
        assert_eq!(key_serial(UID, &key_name(UID, 3)), Some(3));
        assert_eq!(key_serial(UID, "ck8s-3f2504e04f8911d39a0c0305e82c3301-"), None);
        assert_eq!(key_serial(UID, "ck8s-3f2504e04f8911d39a0c0305e82c3301-03"), None);
        assert_eq!(key_serial(UID, "ck8s-3f2504e04f8911d39a0c0305e82c3301-1x"), None);
        assert_eq!(key_serial(UID, "ck8s-00000000000000000000000000000000-1"), None);
        assert_eq!(key_serial(UID, "my-own-key"), None);
    }

    #[test]
    fn default_secret_name_is_suffixed_and_bounded() {
        assert_eq!(default_secret_name("gw"), "gw-ai-gateway-key");
        let long = "a".repeat(250);
        let name = default_secret_name(&long);
        assert_eq!(name.len(), 253);
        assert!(name.ends_with(DEFAULT_SECRET_NAME_SUFFIX));
        assert_eq!(name, default_secret_name(&long), "stable");
        assert_ne!(name, default_secret_name(&"b".repeat(250)));
        let dotted = format!("{}.{}", "a".repeat(228), "b".repeat(30));
        let name = default_secret_name(&dotted);
        assert!(!name.contains(".-"), "{name}");
    }

    #[test]
    fn output_secret_defaults() {
        let mut key = CoderAIGatewayKey {
            metadata: ObjectMeta {
                name: Some("team-a".into()),
                ..ObjectMeta::default()
            },
            spec: CoderAIGatewayKeySpec::default(),
            status: None,
        };
        assert_eq!(key.output_secret_name(), "team-a-ai-gateway-key");
        assert_eq!(key.output_secret_key(), "key");
        key.spec.secret_name = Some("custom".into());
        assert_eq!(key.output_secret_name(), "custom");
    }

    #[test]
    fn spec_defaults_when_parsed() {
        let spec: CoderAIGatewayKeySpec =
            serde_json::from_value(serde_json::json!({"controlPlaneRef": {"name": "cp"}}))
                .expect("parse spec");
        assert_eq!(spec.rotation_interval, "720h");
        assert_eq!(spec.grace_period, "1h");
        assert_eq!(spec.secret_key, "key");
        assert_eq!(spec.secret_name, None);
    }

    #[test]
    fn crd_carries_cel_messages_and_defaults() {
        let crd = CoderAIGatewayKey::crd();
        assert_eq!(crd.spec.names.plural, "coderaigatewaykeys");
        let json = serde_json::to_string(&crd).expect("serialise the CRD");
        for needle in [
            "rotationInterval must be at least 1h",
            "gracePeriod must be shorter than rotationInterval",
            "secretName is immutable",
            "\"default\":\"720h\"",
            "\"default\":\"1h\"",
            "\"default\":\"key\"",
            "\"coderDeploymentID\"",
            "\"deleteAfter\"",
        ] {
            assert!(json.contains(needle), "CRD lacks {needle}");
        }
        serde_saphyr::to_string(&crd).expect("serialise the CRD as YAML");
    }

    #[test]
    fn duration_pattern_is_in_the_schema() {
        let json = serde_json::to_value(CoderAIGatewayKey::crd()).expect("serialise the CRD");
        let spec =
            &json["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec["rotationInterval"]["pattern"], DURATION_PATTERN);
        assert_eq!(spec["gracePeriod"]["pattern"], DURATION_PATTERN);
        let rules = serde_json::to_string(&json).expect("serialise");
        assert!(
            rules.contains(&format!("matches('{DURATION_PATTERN}')")),
            "CEL guards use the same pattern"
        );
    }
}
