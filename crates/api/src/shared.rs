//! Types shared by several kinds, and the constants kept identical to coder-k8s v0.1.5.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::workload::{Flat, ServiceOptions};

/// API group of every custom resource.
pub const GROUP: &str = "coder.com";
/// API version of every custom resource.
pub const VERSION: &str = "v1alpha1";
/// Data key of a token in a token Secret when the reference names no key.
pub const DEFAULT_TOKEN_SECRET_KEY: &str = "token";
/// Data key of a licence JWT when `licenseSecretRef.key` is empty.
pub const DEFAULT_LICENSE_SECRET_KEY: &str = "license";
/// Image used when a spec names none.
pub const DEFAULT_CODER_IMAGE: &str = "ghcr.io/coder/coder:latest";

/// Label that marks a Secret as a credential a proxy or provisioner may use.
pub const CREDENTIAL_LABEL: &str = "coder.com/credential";
/// Annotation that lists the origins a credential Secret may be sent to (comma separated).
pub const CREDENTIAL_DESTINATIONS_ANNOTATION: &str = "coder.com/credential-destinations";

/// A reference to one key of a Secret in the namespace of the object.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeySelector {
    /// Name of the Secret.
    pub name: String,
    /// Key inside the Secret. Each field that uses this type documents its default key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl SecretKeySelector {
    /// The key, or `default` when the reference names none.
    pub fn key_or<'a>(&'a self, default: &'a str) -> &'a str {
        match self.key.as_deref() {
            Some(key) if !key.is_empty() => key,
            _ => default,
        }
    }
}

/// A reference to a CoderControlPlane in the same namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneReference {
    /// Name of the CoderControlPlane in the same namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A reference to an object by name in the same namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectReference {
    /// Name of the referenced object.
    pub name: String,
}

/// How a workload is exposed as a Kubernetes Service.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// Service type: `ClusterIP` (also for `""`), `NodePort` or `LoadBalancer`.
    #[serde(default = "default_service_type", rename = "type")]
    pub type_: ServiceType,
    /// Service port.
    #[serde(default = "default_service_port")]
    pub port: i32,
    /// Annotations added to the Service.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Traffic policy, load balancer, session affinity, node ports and extra ports.
    #[serde(flatten)]
    pub options: Flat<ServiceOptions>,
}

impl Default for ServiceSpec {
    fn default() -> Self {
        Self {
            type_: default_service_type(),
            port: default_service_port(),
            annotations: BTreeMap::new(),
            options: Flat::default(),
        }
    }
}

fn default_service_type() -> ServiceType {
    ServiceType::ClusterIP
}

fn default_service_port() -> i32 {
    80
}

/// The Service type a spec names. Any string is accepted, as v0.1.5's CRD did: an empty value means `ClusterIP`, and a
/// value Kubernetes does not know is passed on to the Service unchanged, so Kubernetes names what it does not support.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ServiceType {
    /// A cluster-internal virtual IP (also for `""`).
    #[default]
    ClusterIP,
    /// A port on every node.
    NodePort,
    /// An external load balancer.
    LoadBalancer,
    /// Any other value, passed on as written.
    Other(String),
}

impl ServiceType {
    /// The value Kubernetes uses in `Service.spec.type`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::ClusterIP => "ClusterIP",
            Self::NodePort => "NodePort",
            Self::LoadBalancer => "LoadBalancer",
            Self::Other(other) => other,
        }
    }

    /// The type named by `value`; `""` is `ClusterIP`.
    pub fn parse(value: &str) -> Self {
        match value {
            "" | "ClusterIP" => Self::ClusterIP,
            "NodePort" => Self::NodePort,
            "LoadBalancer" => Self::LoadBalancer,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl Serialize for ServiceType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ServiceType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        Ok(Self::parse(&value))
    }
}

impl JsonSchema for ServiceType {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ServiceType".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string"})
    }
}

/// Phase of a long-running workload object.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WorkloadPhase {
    /// Not ready yet; the conditions say why.
    #[default]
    Pending,
    /// Ready to serve.
    Ready,
}

/// Limit of names that must be DNS labels (Services, label values).
pub const DNS_LABEL_MAX: usize = 63;
/// Limit of names that must be DNS subdomains (Secrets, Deployments).
pub const DNS_SUBDOMAIN_MAX: usize = 253;

/// The name rule for derived names (the same as v0.1.5's): `<base><suffix>` when it fits in `limit`; otherwise a prefix of the
/// base, then `-<8 hex of FNV-32a of the base>`, then the suffix.
pub fn truncated_name(base: &str, suffix: &str, limit: usize) -> String {
    let full = format!("{base}{suffix}");
    if full.len() <= limit {
        return full;
    }
    let keep = limit.saturating_sub(suffix.len() + 9);
    let mut end = keep.min(base.len());
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    let prefix = base[..end].trim_end_matches(['-', '.']);
    format!("{prefix}-{:08x}{suffix}", fnv32a(base.as_bytes()))
}

/// 32-bit FNV-1a, the hash used by the derived-name rules.
pub fn fnv32a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

/// Default of `replicas` fields.
pub(crate) fn default_replicas() -> Option<i32> {
    Some(1)
}

/// Default of `image` fields that fall back to the Coder image.
pub(crate) fn default_coder_image() -> String {
    DEFAULT_CODER_IMAGE.to_owned()
}

/// Schema of a `conditions` list: `metav1.Condition` items, merged by `type` under server-side apply.
pub(crate) fn conditions_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let item = generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>();
    schemars::json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}

/// Reasons of `DeploymentReady`, shared by the kinds that run a Deployment (CoderProvisioner, CoderWorkspaceProxy).
/// Each kind re-exports them in its own `reasons`.
pub mod deployment_reasons {
    /// The Deployment has ready replicas.
    pub const MINIMUM_REPLICAS_READY: &str = "MinimumReplicasReady";
    /// The Deployment has no ready replica.
    pub const NO_REPLICAS_READY: &str = "NoReplicasReady";
}

/// `ResourcesOwned`, shared by every kind that runs workloads: present (False) only while an object the kind would
/// write (Deployment, Service, ServiceAccount) exists under its name and is not controlled by the custom resource.
/// The operator never writes or adopts such an object. Each kind re-exports these in its own `conditions` and
/// `reasons`.
pub mod ownership {
    /// Condition type.
    pub const RESOURCES_OWNED: &str = "ResourcesOwned";
    /// `ResourcesOwned`: an object under a name the kind uses exists and this custom resource does not control it.
    pub const RESOURCE_NOT_OWNED: &str = "ResourceNotOwned";
}

/// Reasons of `CredentialsReady`, shared by the kinds whose pods or Coder calls use credential Secrets
/// (CoderProvisioner, CoderWorkspaceProxy). Each kind re-exports them in its own `reasons`.
pub mod credential_reasons {
    /// Every referenced Secret consents to the destination.
    pub const CREDENTIALS_VERIFIED: &str = "CredentialsVerified";
    /// A referenced Secret does not exist.
    pub const CREDENTIAL_SECRET_NOT_FOUND: &str = "CredentialSecretNotFound";
    /// A referenced Secret lacks the label `coder.com/credential=true`.
    pub const CREDENTIAL_SECRET_NOT_MARKED: &str = "CredentialSecretNotMarked";
    /// A referenced Secret's `coder.com/credential-destinations` does not list the destination origin.
    pub const CREDENTIAL_DESTINATION_NOT_LISTED: &str = "CredentialDestinationNotListed";
}

/// Condition types and reasons shared by the kinds that sync one object into Coder (CoderAIProvider,
/// CoderAIGatewayKey, CoderMCPServer, and the Ready/Reconciling/Stalled types of CoderTemplateTest). Each kind
/// re-exports the ones it uses in its own `conditions` and `reasons`.
pub mod sync_status {
    /// Condition types.
    pub mod conditions {
        /// Condition: the object in Coder matches the spec.
        pub const READY: &str = "Ready";
        /// Condition: the operator is still working towards the spec.
        pub const RECONCILING: &str = "Reconciling";
        /// Condition: the operator cannot go on without a change by a person; the reason says which.
        pub const STALLED: &str = "Stalled";
    }

    /// Reasons.
    pub mod reasons {
        /// Reason: the object in Coder matches the spec.
        pub const SYNCED: &str = "Synced";
        /// Reason: the referenced CoderControlPlane is missing, being deleted or not ready.
        pub const CONTROL_PLANE_NOT_READY: &str = "ControlPlaneNotReady";
        /// Reason: the control plane has no working operator token yet.
        pub const OPERATOR_ACCESS_NOT_READY: &str = "OperatorAccessNotReady";
        /// Reason: Coder could not be reached, answered with a proxy's 404 or a server error, or `GET /api/v2/buildinfo`
        /// failed before a create; retried.
        pub const CODER_UNAVAILABLE: &str = "CoderUnavailable";
        /// Reason: the cleanup record could not be written, so no create was sent.
        pub const CLEANUP_RECORD_FAILED: &str = "CleanupRecordFailed";
        /// Reason (stalled): the control plane now reaches another Coder deployment than the one that holds the object.
        /// Nothing is created in the new deployment; a delete of the object removes the finalizer without a delete in Coder.
        pub const CODER_DEPLOYMENT_CHANGED: &str = "CoderDeploymentChanged";
        /// Reason (stalled): Coder rejected the request (a 4xx answer other than a conflict).
        pub const REJECTED: &str = "Rejected";
        /// Reason (stalled): this Coder version or licence has no API for the kind (`404 Route not found.`, or the
        /// feature is not enabled).
        pub const NOT_SUPPORTED: &str = "NotSupported";
        /// Reason: the object is being deleted and it is being deleted in Coder.
        pub const DELETING: &str = "Deleting";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_type_accepts_what_v015_accepted() {
        let parse = |json: &str| serde_json::from_str::<ServiceSpec>(json).unwrap().type_;
        assert_eq!(parse(r#"{"type": ""}"#), ServiceType::ClusterIP);
        assert_eq!(parse("{}"), ServiceType::ClusterIP);
        assert_eq!(parse(r#"{"type": "NodePort"}"#), ServiceType::NodePort);
        let other = parse(r#"{"type": "ExternalName"}"#);
        assert_eq!(other.as_str(), "ExternalName");
        assert_eq!(
            serde_json::to_value(&other).unwrap(),
            serde_json::json!("ExternalName")
        );
        assert_eq!(
            serde_json::to_value(ServiceType::parse("")).unwrap(),
            serde_json::json!("ClusterIP")
        );
    }

    #[test]
    fn fnv32a_matches_reference_values() {
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn truncated_names_keep_the_limit_and_stay_distinct() {
        assert_eq!(
            truncated_name("sample", "-provisioner", DNS_LABEL_MAX),
            "sample-provisioner"
        );
        let a = truncated_name(&"a".repeat(70), "-provisioner", DNS_LABEL_MAX);
        let b = truncated_name(&format!("{}b", "a".repeat(69)), "-provisioner", DNS_LABEL_MAX);
        assert!(a.len() <= DNS_LABEL_MAX && b.len() <= DNS_LABEL_MAX);
        assert!(a.ends_with("-provisioner"));
        assert_ne!(a, b);
        assert_eq!(
            a,
            format!(
                "{}-{:08x}-provisioner",
                "a".repeat(42),
                fnv32a("a".repeat(70).as_bytes())
            )
        );
    }
}
