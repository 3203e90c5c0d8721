//! `CoderWorkspaceProxy`: a Coder workspace proxy (`coder wsproxy server`) Deployment and Service.

use k8s_openapi::api::core::v1::{
    EnvVar, LocalObjectReference as K8sLocalObjectReference, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::shared::{SecretKeySelector, ServiceSpec, WorkloadPhase, conditions_schema, default_coder_image};
use crate::workload::{Flat, PodSettings, ServiceAccountMetadata, WorkloadOptions};

/// Admission message when `spec.extraEnv` sets the primary URL the operator sets.
pub const PRIMARY_ACCESS_URL_ENV_MESSAGE: &str = "spec.extraEnv must not set CODER_PRIMARY_ACCESS_URL: the operator sets it from spec.primaryAccessURL or spec.bootstrap.coderURL";
/// Admission message when `spec.extraArgs` sets the primary URL the operator sets.
pub const PRIMARY_ACCESS_URL_ARG_MESSAGE: &str = "spec.extraArgs must not set --primary-access-url: the operator sets the primary URL from spec.primaryAccessURL or spec.bootstrap.coderURL";
/// Annotation on the generated token Secret with the ID of the proxy the operator created in Coder for this object:
/// the proof that lets it regenerate that proxy's token later.
pub const PROXY_ID_ANNOTATION: &str = "coder.com/workspace-proxy-id";
/// Annotation on the generated token Secret, written (with no token yet) just before the operator asks Coder to
/// create the proxy: a proxy of that name Coder created after it is this object's, so a create whose answer (the only
/// copy of the token) was lost with the process is taken over on the next pass instead of reported as someone else's.
/// Emptied once the token and the proxy's ID are stored.
pub const PROXY_CREATE_STARTED_ANNOTATION: &str = "coder.com/workspace-proxy-create-started-at";

/// Condition types of a CoderWorkspaceProxy.
pub mod conditions {
    /// The proxy is registered in Coder and its token Secret is ready (bootstrap mode).
    pub const PROXY_REGISTERED: &str = "ProxyRegistered";
    /// Every Secret the pods receive is a marked credential Secret for the Coder origin.
    pub const CREDENTIALS_READY: &str = "CredentialsReady";
    /// The Deployment has ready replicas.
    pub const DEPLOYMENT_READY: &str = "DeploymentReady";
    pub use crate::shared::ownership::RESOURCES_OWNED;
}

/// Condition reasons of a CoderWorkspaceProxy. (A workspace proxy has no finalizer: deleting the object leaves the
/// proxy registered in Coder, as v0.1.5 does.)
pub mod reasons {
    pub use crate::shared::credential_reasons::*;
    pub use crate::shared::deployment_reasons::*;
    pub use crate::shared::ownership::RESOURCE_NOT_OWNED;
    /// `ProxyRegistered`: Coder holds a proxy under the bootstrap name that this object did not create (its ID is
    /// not the one recorded on the owned token Secret); its token is not regenerated.
    pub const PROXY_NOT_OWNED: &str = "ProxyNotOwned";
    /// `ProxyRegistered`: the spec names no usable primary URL or token.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// `ProxyRegistered`: the generated token Secret exists and this proxy does not own it.
    pub const TOKEN_SECRET_NOT_OWNED: &str = "TokenSecretNotOwned";
    /// `ProxyRegistered`: registering the proxy in Coder failed.
    pub const REGISTRATION_FAILED: &str = "RegistrationFailed";
    /// `ProxyRegistered`: the proxy is registered and its token Secret holds the token.
    pub const REGISTERED: &str = "Registered";
}

/// A Coder workspace proxy: either with a proxy token you supply (direct mode) or registered in Coder by the operator
/// (bootstrap mode).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "coder.com",
    version = "v1alpha1",
    kind = "CoderWorkspaceProxy",
    plural = "coderworkspaceproxies",
    namespaced,
    status = "WorkspaceProxyStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "CoderWorkspaceProxy runs a Coder workspace proxy and, in bootstrap mode, registers it in Coder.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Registered", type_ = "boolean", json_path = ".status.registered"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(validation = kube::core::Rule::new(CONTAINER_NAMES_RULE).message(CONTAINER_NAMES_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceProxySpec {
    /// Container image.
    #[serde(default = "default_coder_image")]
    pub image: String,
    /// Number of proxy replicas.
    #[serde(
        default = "crate::shared::default_replicas",
        skip_serializing_if = "Option::is_none"
    )]
    pub replicas: Option<i32>,
    /// Service in front of the proxy. Defaults to a ClusterIP Service on port 80.
    #[serde(default)]
    pub service: ServiceSpec,
    /// URL of the primary Coder deployment. Defaults to `bootstrap.coderURL` in bootstrap mode.
    #[serde(default, rename = "primaryAccessURL", skip_serializing_if = "Option::is_none")]
    pub primary_access_url: Option<String>,
    /// Secret key with the proxy session token (direct mode). The key defaults to `token`. The Secret must be a
    /// credential Secret for the origin of the primary access URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_session_token_secret_ref: Option<SecretKeySelector>,
    /// Register the proxy in Coder and generate its token (bootstrap mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<ProxyBootstrapSpec>,
    /// Run only the DERP relay.
    #[serde(default)]
    pub derp_only: bool,
    /// Extra arguments appended after `wsproxy server --http-address=0.0.0.0:3001`. They must not set
    /// `--primary-access-url` (no argument may start with it): the operator sets the primary URL, the origin the
    /// proxy token is consented for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    // One `startsWith` per argument: a rule that also compares for equality exceeds the API server's CEL cost budget
    // on a list without `maxItems`, and v0.1.5 set no `maxItems`.
    #[x_kube(validation = kube::core::Rule::new("!self.exists(a, a.startsWith('--primary-access-url'))")
        .message(PRIMARY_ACCESS_URL_ARG_MESSAGE))]
    pub extra_args: Vec<String>,
    /// Extra environment variables. A `secretKeyRef` must name a credential Secret for the Coder origin. They must
    /// not set `CODER_PRIMARY_ACCESS_URL`: the operator sets it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = kube::core::Rule::new("!self.exists(e, e.name == 'CODER_PRIMARY_ACCESS_URL')")
        .message(PRIMARY_ACCESS_URL_ENV_MESSAGE))]
    pub extra_env: Vec<EnvVar>,
    /// Pull secrets for the image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<K8sLocalObjectReference>,
    /// Resources of the proxy container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Box<ResourceRequirements>>,
    /// A ServiceAccount for the proxy pods (`wsproxy-<name>`), with these annotations and labels. Unset: the pods run
    /// as the namespace's `default` ServiceAccount, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountMetadata>,
    /// Deployment and pod settings shared by the workload kinds: labels and annotations, priority class, pull policy,
    /// strategy, host aliases, init and sidecar containers, lifecycle hooks and a PodDisruptionBudget.
    #[serde(flatten)]
    pub workload: Flat<WorkloadOptions>,
    /// Scheduling, security contexts, volumes, `envFrom` and CA certificates of the proxy pods.
    #[serde(flatten)]
    pub pod: Flat<PodSettings>,
}

/// Name of the proxy's container.
pub const CONTAINER_NAME: &str = "workspace-proxy";
/// The admission rule that keeps extra and init containers off the proxy's container name.
const CONTAINER_NAMES_RULE: &str = "(!has(self.extraContainers) || self.extraContainers.all(c, c.name != 'workspace-proxy')) && (!has(self.initContainers) || self.initContainers.all(c, c.name != 'workspace-proxy'))";
/// Admission message when an extra or init container takes the proxy's container name.
pub const CONTAINER_NAMES_MESSAGE: &str = "spec.extraContainers and spec.initContainers must not name a container workspace-proxy: that is the proxy's container";

/// Registration of the proxy in Coder by the operator.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProxyBootstrapSpec {
    /// URL of the Coder deployment to register with.
    #[serde(rename = "coderURL")]
    pub coder_url: String,
    /// Secret key with a Coder session token that may manage workspace proxies. The key defaults to `token`. The
    /// Secret must be a credential Secret for the origin of `coderURL`.
    pub credentials_secret_ref: SecretKeySelector,
    /// Name of the proxy in Coder. Default: the object name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_name: Option<String>,
    /// Display name of the proxy in Coder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Icon of the proxy in Coder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    /// Secret that receives the generated proxy token. Default `<name>-proxy-token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_token_secret_name: Option<String>,
}

/// Observed state of a CoderWorkspaceProxy.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceProxyStatus {
    /// Generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready replicas of the proxy Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Whether the proxy is registered in Coder (bootstrap mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered: Option<bool>,
    /// Secret with the proxy token the pods use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_token_secret_ref: Option<SecretKeySelector>,
    /// `Ready` when the Deployment has ready replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<WorkloadPhase>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}
