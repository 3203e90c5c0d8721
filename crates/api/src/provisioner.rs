//! `CoderProvisioner`: external provisioner daemons with a provisioner key.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EnvVar, LocalObjectReference as K8sLocalObjectReference, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::shared::{SecretKeySelector, WorkloadPhase, conditions_schema};
use crate::workload::{Flat, PodSettings, ServiceAccountMetadata, WorkloadOptions};

/// Finalizer that deletes the provisioner key in Coder.
pub const FINALIZER: &str = "coder.com/provisioner-key-cleanup";
/// Data key of the provisioner key in its Secret when `spec.key.secretKey` is empty.
pub const DEFAULT_KEY_SECRET_KEY: &str = "key";

/// Admission message when `spec.extraEnv` sets the Coder URL the operator sets.
pub const URL_ENV_MESSAGE: &str =
    "spec.extraEnv must not set CODER_URL: the operator sets it to the URL of the control plane";
/// Admission message when `spec.extraArgs` sets the Coder URL the operator sets.
pub const URL_ARG_MESSAGE: &str =
    "spec.extraArgs must not set --url: the operator sets the Coder URL to the URL of the control plane";

/// Condition types of a CoderProvisioner.
pub mod conditions {
    /// The referenced control plane exists and has a URL.
    pub const CONTROL_PLANE_READY: &str = "ControlPlaneReady";
    /// The control plane's operator token can be used.
    pub const OPERATOR_ACCESS_READY: &str = "OperatorAccessReady";
    /// The licence entitles external provisioner daemons.
    pub const EXTERNAL_PROVISIONERS_ENTITLED: &str = "ExternalProvisionersEntitled";
    /// The provisioner key exists in Coder.
    pub const PROVISIONER_KEY_READY: &str = "ProvisionerKeyReady";
    /// The provisioner key Secret holds the key.
    pub const PROVISIONER_KEY_SECRET_READY: &str = "ProvisionerKeySecretReady";
    /// The Deployment has ready replicas.
    pub const DEPLOYMENT_READY: &str = "DeploymentReady";
    /// Every Secret the pods receive is a marked credential Secret for the control plane's origin.
    pub const CREDENTIALS_READY: &str = "CredentialsReady";
    pub use crate::shared::ownership::RESOURCES_OWNED;
}

/// Condition reasons of a CoderProvisioner.
pub mod reasons {
    pub use crate::shared::credential_reasons::*;
    pub use crate::shared::deployment_reasons::*;
    pub use crate::shared::ownership::RESOURCE_NOT_OWNED;
    /// `OperatorAccessReady`: the Secret the control plane names as its operator token is not controlled by that
    /// control plane; it is not read.
    pub const OPERATOR_TOKEN_SECRET_NOT_OWNED: &str = "OperatorTokenSecretNotOwned";
    /// `ProvisionerKeyReady`: Coder holds a key under the spec's name that this provisioner did not create (its ID
    /// is not the one recorded in `status.provisionerKeyID`); it is neither used nor deleted.
    pub const PROVISIONER_KEY_NOT_OWNED: &str = "ProvisionerKeyNotOwned";
    /// `ControlPlaneReady`: the control plane exists and has a URL.
    pub const CONTROL_PLANE_AVAILABLE: &str = "ControlPlaneAvailable";
    /// `ControlPlaneReady`: the control plane does not exist or has no `status.url` yet.
    pub const CONTROL_PLANE_UNAVAILABLE: &str = "ControlPlaneUnavailable";
    /// `OperatorAccessReady`: the operator token is available.
    pub const OPERATOR_ACCESS_READY: &str = "OperatorAccessReady";
    /// `OperatorAccessReady`: the control plane has no `operatorTokenSecretRef`.
    pub const OPERATOR_TOKEN_SECRET_REF_MISSING: &str = "OperatorTokenSecretRefMissing";
    /// `OperatorAccessReady`: the control plane's operator access is not ready.
    pub const OPERATOR_ACCESS_NOT_READY: &str = "OperatorAccessNotReady";
    /// `OperatorAccessReady`: the reference names no Secret, or the URL or token cannot be used.
    pub const OPERATOR_TOKEN_SECRET_REF_INVALID: &str = "OperatorTokenSecretRefInvalid";
    /// `OperatorAccessReady`: the token Secret is missing or empty.
    pub const OPERATOR_TOKEN_SECRET_UNAVAILABLE: &str = "OperatorTokenSecretUnavailable";
    /// `ExternalProvisionersEntitled`: entitled (or in the grace period).
    pub const ENTITLED: &str = "Entitled";
    /// `ExternalProvisionersEntitled`: the licence does not entitle external provisioner daemons.
    pub const NOT_ENTITLED: &str = "NotEntitled";
    /// `ExternalProvisionersEntitled`: this Coder deployment has no entitlements API.
    pub const NOT_SUPPORTED: &str = "NotSupported";
    /// `ExternalProvisionersEntitled`: Coder answered 401 or 403.
    pub const FORBIDDEN: &str = "Forbidden";
    /// `ExternalProvisionersEntitled`: reading entitlements failed otherwise.
    pub const ENTITLEMENTS_QUERY_FAILED: &str = "EntitlementsQueryFailed";
    /// `CredentialsReady`: the provisioner key Secret exists and this provisioner does not own it.
    pub const KEY_SECRET_NOT_OWNED: &str = "KeySecretNotOwned";
    /// `ProvisionerKeyReady`: the key exists in Coder.
    pub const PROVISIONER_KEY_READY: &str = "ProvisionerKeyReady";
    /// `ProvisionerKeyReady`: Coder answered 429; retried with backoff.
    pub const RATE_LIMITED: &str = "RateLimited";
    /// `ProvisionerKeyReady`: a Coder call for the key failed.
    pub const PROVISIONER_KEY_FAILED: &str = "ProvisionerKeyFailed";
    /// `ProvisionerKeySecretReady`: the Secret holds the key.
    pub const SECRET_READY: &str = "SecretReady";
}

/// Name of the daemons' container.
pub const CONTAINER_NAME: &str = "provisioner";
/// The admission rule that keeps extra and init containers off the daemons' container name.
const CONTAINER_NAMES_RULE: &str = "(!has(self.extraContainers) || self.extraContainers.all(c, c.name != 'provisioner')) && (!has(self.initContainers) || self.initContainers.all(c, c.name != 'provisioner'))";
/// Admission message when an extra or init container takes the daemons' container name.
pub const CONTAINER_NAMES_MESSAGE: &str = "spec.extraContainers and spec.initContainers must not name a container provisioner: that is the daemons' container";

/// External Coder provisioner daemons (`coder provisioner start`) authenticated with a provisioner key that the
/// operator creates in Coder.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "coder.com",
    version = "v1alpha1",
    kind = "CoderProvisioner",
    plural = "coderprovisioners",
    namespaced,
    status = "CoderProvisionerStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "CoderProvisioner runs external Coder provisioner daemons with a provisioner key managed by the operator.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(validation = kube::core::Rule::new(CONTAINER_NAMES_RULE).message(CONTAINER_NAMES_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct CoderProvisionerSpec {
    /// The CoderControlPlane in the same namespace whose Coder server the daemons connect to.
    pub control_plane_ref: K8sLocalObjectReference,
    /// Coder organization of the provisioner key.
    #[serde(default = "default_organization")]
    #[schemars(length(max = 128))]
    pub organization_name: String,
    /// The provisioner key.
    #[serde(default)]
    pub key: ProvisionerKeySpec,
    /// Number of provisioner daemon replicas.
    #[serde(
        default = "crate::shared::default_replicas",
        skip_serializing_if = "Option::is_none"
    )]
    pub replicas: Option<i32>,
    /// Provisioner tags attached to the key; they route template and workspace jobs to these daemons.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Container image. Empty: the control plane's `spec.image`, then `ghcr.io/coder/coder:latest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Extra arguments appended after `provisioner start`. They must not set `--url`: the operator points the daemons
    /// at the control plane, the origin the provisioner key is consented for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = kube::core::Rule::new("!self.exists(a, a == '--url' || a.startsWith('--url='))")
        .message(URL_ARG_MESSAGE))]
    pub extra_args: Vec<String>,
    /// Extra environment variables. A `secretKeyRef` must name a credential Secret (label `coder.com/credential=true`,
    /// annotation `coder.com/credential-destinations` listing the control plane's origin). They must not set
    /// `CODER_URL`: the operator sets it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = kube::core::Rule::new("!self.exists(e, e.name == 'CODER_URL')").message(URL_ENV_MESSAGE))]
    pub extra_env: Vec<EnvVar>,
    /// Resources of the provisioner container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Pull secrets for the image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<K8sLocalObjectReference>,
    /// Grace period for running builds when a pod stops.
    #[serde(
        default = "default_termination_grace",
        skip_serializing_if = "Option::is_none"
    )]
    pub termination_grace_period_seconds: Option<i64>,
    /// Annotations and labels of the ServiceAccount the daemons run as (`<name>-provisioner`), for example a cloud
    /// IAM role for workload identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountMetadata>,
    /// Read Coder's queue of provisioner jobs for this provisioner's tags, publish the pending and running jobs in
    /// `status.jobs` and as the metric `coder_k8s_provisioner_jobs`, and, with `autoscaling`, set `replicas` from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<AutoscalingSpec>,
    /// Deployment and pod settings shared by the workload kinds: labels and annotations, priority class, pull policy,
    /// strategy, host aliases, init and sidecar containers, lifecycle hooks and a PodDisruptionBudget.
    #[serde(flatten)]
    pub workload: Flat<WorkloadOptions>,
    /// Scheduling, security contexts, volumes, `envFrom` and CA certificates of the daemons' pods.
    #[serde(flatten)]
    pub pod: Flat<PodSettings>,
}

/// Replicas set from Coder's queue of provisioner jobs. Each daemon runs one job at a time, so the operator asks for
/// enough daemons to run every running and pending job (`jobsPerReplica` of them per daemon), within `minReplicas` and
/// `maxReplicas`. It lowers `replicas` only after the queue has wanted fewer for `scaleDownDelay`, and never below
/// the number of running jobs: a daemon that is stopped finishes its running build first (within
/// `terminationGracePeriodSeconds`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(validation = kube::core::Rule::new("!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas")
    .message("autoscaling.minReplicas must not be above autoscaling.maxReplicas"))]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingSpec {
    /// Set `spec.replicas` from the queue. False: only publish the queue (for a HorizontalPodAutoscaler or KEDA on the
    /// scale subresource). Default true.
    #[serde(default = "default_some_true", skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Fewest daemons. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_replicas: Option<i32>,
    /// Most daemons. Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_replicas: Option<i32>,
    /// Queued and running jobs one daemon is counted for. Default 1 (a daemon runs one job at a time; a higher value
    /// lets jobs wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub jobs_per_replica: Option<i32>,
    /// How long the queue must want fewer daemons before `replicas` is lowered, as a Go duration (`5m`, `90s`).
    /// Default `5m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32), regex(pattern = crate::ai_gateway_key::DURATION_PATTERN))]
    pub scale_down_delay: Option<String>,
}

impl AutoscalingSpec {
    /// Whether the operator sets `replicas` (not only publishes the queue).
    pub fn sets_replicas(&self) -> bool {
        self.enabled != Some(false)
    }
}

fn default_some_true() -> Option<bool> {
    Some(true)
}

/// Coder's provisioner jobs this provisioner's daemons can take, as last read.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionerJobsStatus {
    /// Jobs waiting for a daemon.
    pub pending: i32,
    /// Jobs a daemon is running.
    pub running: i32,
    /// When Coder's queue was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

fn default_organization() -> String {
    "default".to_owned()
}

fn default_termination_grace() -> Option<i64> {
    Some(600)
}

/// The provisioner key and its Secret.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionerKeySpec {
    /// Name of the key in Coder. Default: the object name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub name: Option<String>,
    /// Secret that receives the key. Default `<name>-provisioner-key`. It must not exist yet: the operator creates and
    /// owns it, and refuses a Secret it does not own (reason `KeySecretNotOwned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub secret_name: Option<String>,
    /// Data key of the key in the Secret. Default `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub secret_key: Option<String>,
}

/// Observed state of a CoderProvisioner.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CoderProvisionerStatus {
    /// Generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready replicas of the provisioner Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Replicas of the provisioner Deployment (the scale subresource's `status.replicas`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Label selector of the daemons' pods (the scale subresource's selector, for a HorizontalPodAutoscaler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Coder's provisioner jobs for this provisioner's tags, while `spec.autoscaling` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<ProvisionerJobsStatus>,
    /// `Ready` when every check passed and the Deployment has ready replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<WorkloadPhase>,
    /// Coder organization ID of the key. Deletion uses it, never the spec.
    #[serde(default, rename = "organizationID", skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<String>,
    /// Coder organization name of the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization_name: Option<String>,
    /// Coder ID of the provisioner key. Deletion uses it, never the spec.
    #[serde(default, rename = "provisionerKeyID", skip_serializing_if = "Option::is_none")]
    pub provisioner_key_id: Option<String>,
    /// Name of the provisioner key in Coder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioner_key_name: Option<String>,
    /// When the operator asked Coder for a new key (written before the request, cleared once the key ID is
    /// recorded). With `organizationID` and `provisionerKeyName` it proves that a key of that name made afterwards is
    /// this provisioner's, even when the operator stopped before it could record the key's ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_create_started_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// Hash (FNV) of the sorted tags of the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags_hash: Option<String>,
    /// Control plane the key was created for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref_name: Option<String>,
    /// URL of that control plane when the key was created.
    #[serde(default, rename = "controlPlaneURL", skip_serializing_if = "Option::is_none")]
    pub control_plane_url: Option<String>,
    /// Secret that holds the provisioner key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
    /// Conditions: `ControlPlaneReady`, `OperatorAccessReady`, `ExternalProvisionersEntitled`, `ProvisionerKeyReady`,
    /// `ProvisionerKeySecretReady`, `CredentialsReady`, `DeploymentReady`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_status_names() {
        let spec: CoderProvisionerSpec =
            serde_json::from_value(serde_json::json!({"controlPlaneRef": {"name": "cp"}})).unwrap();
        assert_eq!(spec.organization_name, "default");
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.termination_grace_period_seconds, Some(600));
        let status = CoderProvisionerStatus {
            organization_id: Some("o".into()),
            provisioner_key_id: Some("k".into()),
            control_plane_url: Some("u".into()),
            ..Default::default()
        };
        let value = serde_json::to_value(&status).unwrap();
        assert_eq!(value["organizationID"], "o");
        assert_eq!(value["provisionerKeyID"], "k");
        assert_eq!(value["controlPlaneURL"], "u");
    }
}
