//! `CoderControlPlane`: one Coder server (coderd) Deployment and everything around it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, LocalObjectReference as K8sLocalObjectReference, PodSecurityContext,
    ResourceRequirements, SecurityContext, Toleration, TopologySpreadConstraint, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::shared::{SecretKeySelector, ServiceSpec, WorkloadPhase, conditions_schema, default_coder_image};
pub use crate::workload::{CertSecretSelector, CertsSpec};
use crate::workload::{Flat, WorkloadOptions};

/// Finalizer that removes the workspace Roles and RoleBindings, also in other namespaces.
pub const FINALIZER: &str = "coder.com/workspace-rbac-cleanup";
/// Environment variable that carries Coder's PostgreSQL connection URL.
pub const PG_CONNECTION_URL_ENV: &str = "CODER_PG_CONNECTION_URL";

/// Condition types of a CoderControlPlane.
pub mod conditions {
    /// The database Secret named by `spec.database` resolves to a PostgreSQL URL.
    pub const DATABASE_SECRET_RESOLVED: &str = "DatabaseSecretResolved";
    /// The control plane owns its operator token Secret.
    pub const OPERATOR_TOKEN_SECRET_OWNED: &str = "OperatorTokenSecretOwned";
    /// The licence in `spec.licenseSecretRef` is applied in Coder.
    pub const LICENSE_APPLIED: &str = "LicenseApplied";
    /// Only with `--restrict-workspace-rbac`: the workspace RBAC the spec asks for passed the hardening rules.
    pub const WORKSPACE_RBAC_ALLOWED: &str = "WorkspaceRBACAllowed";
    pub use crate::shared::ownership::RESOURCES_OWNED;
}

/// Condition reasons of a CoderControlPlane.
pub mod reasons {
    /// `DatabaseSecretResolved`: the Secret key holds a PostgreSQL URL.
    pub const RESOLVED: &str = "Resolved";
    pub use crate::shared::ownership::RESOURCE_NOT_OWNED;
    /// `WorkspaceRBACAllowed`: every rule and namespace passed the hardening rules; the Roles are applied.
    pub const WORKSPACE_RBAC_ACCEPTED: &str = "WorkspaceRBACAccepted";
    /// `WorkspaceRBACAllowed`: a rule grants Secrets, RBAC objects, `escalate`/`bind`/`impersonate` or a wildcard;
    /// no workspace Role or RoleBinding of the control plane exists.
    pub const WORKSPACE_RBAC_RULE_REFUSED: &str = "WorkspaceRBACRuleRefused";
    /// `WorkspaceRBACAllowed`: a workspace namespace lacks the opt-in label; no workspace Role or RoleBinding of the
    /// control plane exists.
    pub const WORKSPACE_NAMESPACE_NOT_OPTED_IN: &str = "WorkspaceNamespaceNotOptedIn";
    /// `DatabaseSecretResolved`: the Secret does not exist.
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    /// `DatabaseSecretResolved`: the Secret has no such key.
    pub const KEY_NOT_FOUND: &str = "KeyNotFound";
    /// `DatabaseSecretResolved`: the value is empty or only white space.
    pub const EMPTY_VALUE: &str = "EmptyValue";
    /// `DatabaseSecretResolved`: the value is not a `postgres://` or `postgresql://` URL.
    pub const INVALID_URL: &str = "InvalidURL";
    /// `DatabaseSecretResolved`: `spec.extraEnv` also sets the connection URL.
    pub const CONFLICTING_CONFIGURATION: &str = "ConflictingConfiguration";
    /// `OperatorTokenSecretOwned`: the token Secret is absent or owned by this control plane.
    pub const TOKEN_SECRET_OWNED: &str = "TokenSecretOwned";
    /// `OperatorTokenSecretOwned`: a Secret of that name exists and this control plane does not own it.
    pub const TOKEN_SECRET_NOT_OWNED: &str = "TokenSecretNotOwned";
    /// `LicenseApplied`: no licence Secret, or waiting for the control plane to be ready.
    pub const LICENSE_PENDING: &str = "Pending";
    /// `LicenseApplied`: the licence Secret or its key is missing or empty.
    pub const LICENSE_SECRET_MISSING: &str = "SecretMissing";
    /// `LicenseApplied`: the upload failed for another reason.
    pub const LICENSE_ERROR: &str = "Error";
    /// `LicenseApplied`: Coder refused the upload (401 or 403).
    pub const LICENSE_FORBIDDEN: &str = "Forbidden";
    /// `LicenseApplied`: this Coder deployment has no licences API.
    pub const LICENSE_NOT_SUPPORTED: &str = "NotSupported";
    /// `LicenseApplied`: the licence is applied.
    pub const LICENSE_APPLIED: &str = "Applied";
}

/// Name of the Coder server's container.
pub const CONTAINER_NAME: &str = "coder";
/// The admission rule that keeps extra and init containers off the Coder server's container name.
const CONTAINER_NAMES_RULE: &str = "(!has(self.extraContainers) || self.extraContainers.all(c, c.name != 'coder')) && (!has(self.initContainers) || self.initContainers.all(c, c.name != 'coder'))";
/// Admission message when an extra or init container takes the Coder server's container name.
pub const CONTAINER_NAMES_MESSAGE: &str = "spec.extraContainers and spec.initContainers must not name a container coder: that is the Coder server's container";

/// A Coder control plane: the Coder server Deployment, its Service, ServiceAccount, workspace RBAC, exposure, operator
/// access to Coder's database, licence and entitlements.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "coder.com",
    version = "v1alpha1",
    kind = "CoderControlPlane",
    plural = "codercontrolplanes",
    namespaced,
    status = "CoderControlPlaneStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "CoderControlPlane runs a Coder server (coderd) and manages its database secret, operator access, licence, entitlements, TLS and exposure.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "URL", type_ = "string", json_path = ".status.url", priority = "1"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(validation = kube::core::Rule::new(
    "!(has(self.database) && has(self.extraEnv) && self.extraEnv.exists(e, e.name == 'CODER_PG_CONNECTION_URL'))"
).message("spec.extraEnv must not set CODER_PG_CONNECTION_URL when spec.database.connectionSecretRef is set"))]
#[x_kube(validation = kube::core::Rule::new(CONTAINER_NAMES_RULE).message(CONTAINER_NAMES_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct CoderControlPlaneSpec {
    /// Container image of the Coder server.
    #[serde(default = "default_coder_image")]
    pub image: String,
    /// Number of Coder server replicas.
    #[serde(
        default = "crate::shared::default_replicas",
        skip_serializing_if = "Option::is_none"
    )]
    pub replicas: Option<i32>,
    /// Service in front of the Coder server. Defaults to a ClusterIP Service on port 80.
    #[serde(default)]
    pub service: ServiceSpec,
    /// Extra arguments appended after `--http-address=0.0.0.0:8080`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
    /// Extra environment variables appended after the ones the operator sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_env: Vec<EnvVar>,
    /// Pull secrets for the Coder image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<K8sLocalObjectReference>,
    /// Operator access: a `coder-k8s-operator` user and API token created in Coder's database, used by the operator
    /// and by the aggregated API server.
    #[serde(default)]
    pub operator_access: OperatorAccessSpec,
    /// Secret key that holds a Coder licence JWT. The key defaults to `license`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_secret_ref: Option<SecretKeySelector>,
    /// ServiceAccount of the Coder server pods.
    #[serde(default)]
    pub service_account: ServiceAccountSpec,
    /// RBAC that lets Coder manage workspace pods.
    #[serde(default)]
    pub rbac: RbacSpec,
    // The large optional pod fields are boxed (same JSON and schema): the watch cache holds every control plane, and
    // inline they took about 1.5 KB of each, set or not.
    /// Resources of the Coder container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Box<ResourceRequirements>>,
    /// Security context of the Coder container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<Box<SecurityContext>>,
    /// Security context of the Coder pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<Box<PodSecurityContext>>,
    /// Built-in TLS of the Coder server. A non-empty `secretNames` enables it.
    #[serde(default)]
    pub tls: TlsSpec,
    /// Readiness probe on `/healthz`. Enabled by default.
    #[serde(default = "default_readiness_probe")]
    pub readiness_probe: ProbeSpec,
    /// Liveness probe on `/healthz`. Disabled by default.
    #[serde(default = "default_liveness_probe")]
    pub liveness_probe: ProbeSpec,
    /// Set `CODER_ACCESS_URL` to the in-cluster Service URL unless `extraEnv` or `envFrom` defines it. Default true.
    #[serde(
        default = "default_true",
        rename = "envUseClusterAccessURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub env_use_cluster_access_url: Option<bool>,
    /// Exposure outside the cluster through an Ingress or a Gateway API HTTPRoute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expose: Option<Box<ExposeSpec>>,
    /// Environment variables from ConfigMaps or Secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = kube::core::Rule::new("self.all(e, !(has(e.configMapRef) && has(e.secretRef)))")
        .message("each envFrom entry may specify at most one of configMapRef or secretRef"))]
    pub env_from: Vec<EnvFromSource>,
    /// Extra volumes of the Coder pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Extra volume mounts of the Coder container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// Extra CA certificates, each mounted at `/etc/ssl/certs/<name>.crt`.
    #[serde(default)]
    pub certs: CertsSpec,
    /// Node selector of the Coder pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of the Coder pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Affinity of the Coder pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<Affinity>>,
    /// Topology spread constraints of the Coder pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// PostgreSQL connection of the Coder server. The URL stays in the Secret: the Deployment references it with
    /// `secretKeyRef`, and the operator reads it only for the operator-access bootstrap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<DatabaseSpec>,
    /// Settings used by CoderTemplateTest objects that reference this control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_tests: Option<TemplateTestsSpec>,
    /// Opt-in for CoderAIGatewayKey objects that reference this control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ai_gateway: Option<AIGatewaySpec>,
    /// Opt-in for CoderMCPServer objects that reference this control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<MCPServersSpec>,
    /// Coder's Prometheus endpoint: the metrics port on the pods, a metrics Service and, where the Prometheus
    /// Operator's CRDs are installed, a ServiceMonitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<Box<MonitoringSpec>>,
    /// Deployment and pod settings shared by the workload kinds: labels and annotations, priority class, pull policy,
    /// strategy, host aliases, init and sidecar containers, lifecycle hooks and a PodDisruptionBudget.
    #[serde(flatten)]
    pub workload: Flat<WorkloadOptions>,
}

/// Coder's Prometheus endpoint (`CODER_PROMETHEUS_ENABLE`), served on port 2112 of every pod.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MonitoringSpec {
    /// Turn the endpoint on. Default true when `monitoring` is present.
    #[serde(default = "default_true", skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// A `monitoring.coreos.com/v1` ServiceMonitor for the metrics Service. It is written once the Prometheus
    /// Operator's CRDs are installed; without them the operator logs it, looks again every 2 minutes, and the rest of
    /// the control plane works on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_monitor: Option<ServiceMonitorSpec>,
}

impl MonitoringSpec {
    /// Whether the endpoint is on.
    pub fn is_enabled(&self) -> bool {
        self.enabled != Some(false)
    }
}

/// The ServiceMonitor of a control plane's metrics Service.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    /// Write the ServiceMonitor. Default false.
    #[serde(default)]
    pub enabled: bool,
    /// Labels of the ServiceMonitor (a Prometheus picks ServiceMonitors by label).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Scrape interval, as a Prometheus duration (`30s`, `1m`). Default: the Prometheus' own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(0|(([0-9]+)(ms|s|m|h))+)$"))]
    pub interval: Option<String>,
}

fn default_true() -> Option<bool> {
    Some(true)
}

fn default_readiness_probe() -> ProbeSpec {
    ProbeSpec {
        enabled: Some(true),
        ..ProbeSpec::default()
    }
}

fn default_liveness_probe() -> ProbeSpec {
    ProbeSpec {
        enabled: Some(false),
        ..ProbeSpec::default()
    }
}

/// Operator access to Coder.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OperatorAccessSpec {
    /// Turn operator access off: the operator revokes its token and deletes the token Secret it owns.
    #[serde(default)]
    pub disabled: bool,
    /// Name of the Secret that receives the operator token. Default `<control plane>-operator-token`. The Secret must
    /// not exist yet or be owned by this control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_token_secret_name: Option<String>,
}

/// ServiceAccount of the Coder server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountSpec {
    /// Do not create the ServiceAccount; use an existing one with `name`.
    #[serde(default)]
    pub disable_create: bool,
    /// Name of the ServiceAccount. Default: the control plane name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Annotations of the ServiceAccount (for example a cloud IAM role).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Labels of the ServiceAccount.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// Workspace RBAC of the Coder ServiceAccount.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RbacSpec {
    /// Create a Role and RoleBinding that let Coder manage workspace pods and PVCs. Default true.
    #[serde(default = "default_true", skip_serializing_if = "Option::is_none")]
    pub workspace_perms: Option<bool>,
    /// Also allow Deployments in the workspace Role. Default true.
    #[serde(default = "default_true", skip_serializing_if = "Option::is_none")]
    pub enable_deployments: Option<bool>,
    /// Extra rules appended to the workspace Role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_rules: Vec<PolicyRule>,
    /// Extra namespaces that receive the workspace Role and RoleBinding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workspace_namespaces: Vec<String>,
}

impl Default for RbacSpec {
    fn default() -> Self {
        Self {
            workspace_perms: default_true(),
            enable_deployments: default_true(),
            extra_rules: Vec::new(),
            workspace_namespaces: Vec::new(),
        }
    }
}

/// Built-in TLS of the Coder server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// Names of `kubernetes.io/tls` Secrets mounted into the Coder container. Non-empty enables TLS on port 8443.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_names: Vec<String>,
}

/// An HTTP probe on `/healthz` of the Coder container.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProbeSpec {
    /// Whether the probe is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Seconds after the container starts before the first probe.
    #[serde(default)]
    pub initial_delay_seconds: i32,
    /// Seconds between probes. Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<i32>,
    /// Probe timeout in seconds. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// Successes needed after a failure. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<i32>,
    /// Failures before the probe gives up. Default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<i32>,
}

/// Exposure of the Coder server outside the cluster. Set at most one of `ingress` and `gateway`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(validation = kube::core::Rule::new("!(has(self.ingress) && has(self.gateway))")
    .message("only one of ingress or gateway may be set"))]
#[serde(rename_all = "camelCase")]
pub struct ExposeSpec {
    /// Expose through a networking.k8s.io/v1 Ingress named like the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<IngressExposeSpec>,
    /// Expose through a gateway.networking.k8s.io/v1 HTTPRoute named like the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewayExposeSpec>,
}

/// Ingress exposure.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct IngressExposeSpec {
    /// IngressClass name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_name: Option<String>,
    /// Host name of the Coder access URL.
    pub host: String,
    /// Wildcard host for workspace apps, for example `*.coder.example.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wildcard_host: Option<String>,
    /// Annotations of the Ingress.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// TLS Secrets of the Ingress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<IngressTlsSpec>,
}

/// TLS Secrets of the Ingress.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct IngressTlsSpec {
    /// Secret with the certificate of `host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// Secret with the certificate of `wildcardHost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wildcard_secret_name: Option<String>,
}

/// Gateway API exposure.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayExposeSpec {
    /// Host name of the Coder access URL.
    pub host: String,
    /// Wildcard host for workspace apps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wildcard_host: Option<String>,
    /// Gateways the HTTPRoute attaches to.
    #[schemars(length(min = 1))]
    pub parent_refs: Vec<GatewayParentRef>,
}

/// A Gateway the HTTPRoute attaches to.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayParentRef {
    /// Name of the Gateway.
    pub name: String,
    /// Namespace of the Gateway. Default: the control plane namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Listener of the Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
}

/// PostgreSQL connection of the Coder server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(
    validation = kube::core::Rule::new("self.connectionSecretRef.name != ''")
        .message("connectionSecretRef.name must not be empty"),
    validation = kube::core::Rule::new("has(self.connectionSecretRef.key) && self.connectionSecretRef.key != ''")
        .message("connectionSecretRef.key must not be empty")
)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseSpec {
    /// Secret key in the control plane namespace holding a `postgres://` or `postgresql://` URL. Both `name` and
    /// `key` are required. The Coder container gets it as `CODER_PG_CONNECTION_URL` through `secretKeyRef`, and the
    /// operator reads it for the operator-access bootstrap. Do not also set `CODER_PG_CONNECTION_URL` in `extraEnv`.
    pub connection_secret_ref: SecretKeySelector,
}

/// Settings for CoderTemplateTest objects.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TemplateTestsSpec {
    /// UUID of the Coder user that owns test workspaces. The user must be an active plain member.
    #[serde(default, rename = "ownerUserID", skip_serializing_if = "Option::is_none")]
    pub owner_user_id: Option<String>,
    /// Allow the annotation `coder.com/deletion-policy: retain` on template tests.
    #[serde(default)]
    pub allow_retain: bool,
}

/// Opt-in for AI Gateway keys.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AIGatewaySpec {
    /// Allow CoderAIGatewayKey objects to create keys in this Coder deployment. Without it they stall with
    /// `NotAllowed`.
    #[serde(default)]
    pub allow_keys: bool,
}

/// Opt-in for MCP server configs.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MCPServersSpec {
    /// Coder organizations (names) in which CoderMCPServer objects may manage MCP server configs. An object whose
    /// organization is not listed stalls with `MCPServersNotAllowed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub organizations: Vec<String>,
}

/// Observed state of a CoderControlPlane.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CoderControlPlaneStatus {
    /// Generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready replicas of the Coder Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// In-cluster URL of the Coder server: `http://<svc>.<ns>.svc.cluster.local:<port>`, or
    /// `https://<svc>.<ns>.svc.cluster.local:443` with TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The operator token Secret (key `token`). Absent while operator access is not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_token_secret_ref: Option<SecretKeySelector>,
    /// Whether the operator token works for this control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_access_ready: Option<bool>,
    /// Time of the last successful licence upload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_last_applied: Option<Time>,
    /// SHA-256 (hex) of the trimmed licence JWT last uploaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_last_applied_hash: Option<String>,
    /// Licence tier reported by the entitlements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_tier: Option<LicenseTier>,
    /// Time the entitlements were last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entitlements_last_checked: Option<Time>,
    /// Entitlement of the `external_provisioner_daemons` feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_provisioner_daemons_entitlement: Option<Entitlement>,
    /// `Ready` once the Coder Deployment has a ready replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<WorkloadPhase>,
    /// Conditions: `DatabaseSecretResolved`, `OperatorTokenSecretOwned`, `LicenseApplied`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// Licence tier.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LicenseTier {
    /// No licence.
    None,
    /// A trial licence.
    Trial,
    /// Enterprise features.
    Enterprise,
    /// Premium features (`custom_roles` or `multiple_organizations` entitled).
    Premium,
    /// Could not be determined.
    Unknown,
}

/// Entitlement of a Coder feature.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Entitlement {
    /// Entitled.
    Entitled,
    /// Entitled during the licence's grace period.
    GracePeriod,
    /// Not entitled.
    NotEntitled,
    /// Could not be determined.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::ServiceType;

    #[test]
    fn empty_spec_gets_the_contract_defaults() {
        let spec: CoderControlPlaneSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(spec.image, "ghcr.io/coder/coder:latest");
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.service.type_, ServiceType::ClusterIP);
        assert_eq!(spec.service.port, 80);
        assert_eq!(spec.readiness_probe.enabled, Some(true));
        assert_eq!(spec.liveness_probe.enabled, Some(false));
        assert_eq!(spec.env_use_cluster_access_url, Some(true));
        assert_eq!(spec.rbac.workspace_perms, Some(true));
        assert_eq!(spec.rbac.enable_deployments, Some(true));
        assert!(!spec.operator_access.disabled);
    }

    #[test]
    fn json_names_match_v015() {
        let spec: CoderControlPlaneSpec = serde_json::from_value(serde_json::json!({
            "envUseClusterAccessURL": false,
            "operatorAccess": {"generatedTokenSecretName": "tok"},
            "templateTests": {"ownerUserID": "u", "allowRetain": true},
            "licenseSecretRef": {"name": "lic"},
        }))
        .unwrap();
        assert_eq!(spec.env_use_cluster_access_url, Some(false));
        assert_eq!(
            spec.operator_access.generated_token_secret_name.as_deref(),
            Some("tok")
        );
        assert_eq!(
            spec.template_tests
                .as_ref()
                .and_then(|t| t.owner_user_id.as_deref()),
            Some("u")
        );
        let license = spec.license_secret_ref.unwrap();
        assert_eq!(
            license.key_or(crate::shared::DEFAULT_LICENSE_SECRET_KEY),
            "license"
        );

        let status = CoderControlPlaneStatus {
            external_provisioner_daemons_entitlement: Some(Entitlement::GracePeriod),
            license_tier: Some(LicenseTier::Premium),
            ..Default::default()
        };
        let value = serde_json::to_value(&status).unwrap();
        assert_eq!(value["externalProvisionerDaemonsEntitlement"], "grace_period");
        assert_eq!(value["licenseTier"], "premium");
        assert!(
            value.get("conditions").is_none(),
            "empty fields are omitted for server-side apply"
        );
    }
}
