//! Deployment, pod and Service settings the workload kinds (CoderControlPlane, CoderProvisioner, CoderWorkspaceProxy)
//! share, with the meaning the values of Coder's Helm charts have. Every one is optional, and one left unset
//! changes nothing in the Deployment or Service the operator writes.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DeploymentStrategy;
use k8s_openapi::api::core::v1::{
    Affinity, Container, EnvFromSource, HostAlias, Lifecycle, PodSecurityContext, SecurityContext,
    ServicePort, Toleration, TopologySpreadConstraint, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A group of optional fields that sits flat in the spec's JSON (and schema) but costs one pointer in memory while
/// none of them is set: the operator's watch cache holds every object, so a few hundred bytes of empty fields per
/// object would add up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Flat<T>(Option<Box<T>>);

impl<T: Default + PartialEq> Flat<T> {
    /// `value`, kept only when it sets something.
    pub fn new(value: T) -> Self {
        Self((value != T::default()).then(|| Box::new(value)))
    }
}

impl<T> Flat<T> {
    /// The fields, when any is set.
    pub fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }
}

impl<T: Serialize + Default> Serialize for Flat<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(value) => value.serialize(serializer),
            // Every field of a flattened group is skipped when empty, so the default writes nothing.
            None => T::default().serialize(serializer),
        }
    }
}

impl<'de, T: Deserialize<'de> + Default + PartialEq> Deserialize<'de> for Flat<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Self::new)
    }
}

impl<T: JsonSchema> JsonSchema for Flat<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

/// `imagePullPolicy` of the operator's container.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImagePullPolicy {
    /// Pull on every start.
    Always,
    /// Pull when the node does not have the image.
    IfNotPresent,
    /// Never pull.
    Never,
}

impl ImagePullPolicy {
    /// The value Kubernetes uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::IfNotPresent => "IfNotPresent",
            Self::Never => "Never",
        }
    }
}

/// Deployment and pod settings of every workload kind (Coder's charts: `labels`, `annotations`, `podLabels`,
/// `podAnnotations`, `priorityClassName`, `image.pullPolicy`, `strategy`, `hostAliases`, `initContainers`,
/// `lifecycle`), plus sidecars and a PodDisruptionBudget.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadOptions {
    /// Labels of the Deployment (not of its pods, and not in its selector). The operator's own labels win a clash.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deployment_labels: BTreeMap<String, String>,
    /// Annotations of the Deployment. The operator's own annotations win a clash.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deployment_annotations: BTreeMap<String, String>,
    /// Labels of the pods. The operator's own labels (the Deployment's selector) win a clash.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_labels: BTreeMap<String, String>,
    /// Annotations of the pods. The operator's own annotations win a clash.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_annotations: BTreeMap<String, String>,
    /// PriorityClass of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub priority_class_name: Option<String>,
    /// Pull policy of the operator's container (Kubernetes' default when unset: `Always` for `:latest`, otherwise
    /// `IfNotPresent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,
    /// How the Deployment replaces its pods (Kubernetes' default when unset: a rolling update of 25 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<DeploymentStrategy>,
    /// Extra `/etc/hosts` entries of the pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_aliases: Vec<HostAlias>,
    /// Containers that run to completion before the operator's container starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    /// Sidecar containers next to the operator's container. None may take the operator's container's name; like
    /// every container of the pod they are subject to the credential-Secret rules of docs/security.md.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_containers: Vec<Container>,
    /// Lifecycle hooks (`postStart`, `preStop`) of the operator's container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// A PodDisruptionBudget for the pods, named like the Deployment. `{}` keeps at most one pod unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_disruption_budget: Option<PodDisruptionBudgetSpec>,
}

/// The budget of a PodDisruptionBudget: at most one of the two fields; neither means `maxUnavailable: 1`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = kube::core::Rule::new("!(has(self.minAvailable) && has(self.maxUnavailable))")
    .message("podDisruptionBudget takes at most one of minAvailable and maxUnavailable"))]
#[serde(rename_all = "camelCase")]
pub struct PodDisruptionBudgetSpec {
    /// Pods that must stay available during a voluntary disruption (a number or a percentage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
    /// Pods that may be unavailable during a voluntary disruption (a number or a percentage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

/// Scheduling, security and volume settings of the provisioner and the workspace proxy pods (the control plane has the
/// same fields under the same names): Coder's charts' `securityContext`, `podSecurityContext`, `affinity`,
/// `tolerations`, `nodeSelector`, `topologySpreadConstraints`, `volumes`, `volumeMounts`, `envFrom` and `certs`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSettings {
    /// Security context of the operator's container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    /// Security context of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<PodSecurityContext>,
    /// Affinity of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Tolerations of the pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Node selector of the pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Topology spread constraints of the pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// Extra volumes of the pods. A Secret volume must name a credential Secret for the Coder origin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Extra volume mounts of the operator's container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// Environment variables from ConfigMaps or Secrets. A `secretRef` must name a credential Secret for the Coder
    /// origin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = kube::core::Rule::new("self.all(e, !(has(e.configMapRef) && has(e.secretRef)))")
        .message("each envFrom entry may specify at most one of configMapRef or secretRef"))]
    pub env_from: Vec<EnvFromSource>,
    /// Extra CA certificates, each mounted at `/etc/ssl/certs/<name>.crt`. The Secrets hold public certificates, so
    /// they need no credential marking.
    #[serde(default, skip_serializing_if = "CertsSpec::is_empty")]
    pub certs: CertsSpec,
}

/// Extra CA certificates of a workload's container.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CertsSpec {
    /// Secret keys with PEM CA certificates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<CertSecretSelector>,
}

impl CertsSpec {
    /// Whether no certificate is listed.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }
}

/// A Secret key that holds a PEM CA certificate.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CertSecretSelector {
    /// Name of the Secret; the certificate is mounted at `/etc/ssl/certs/<name>.crt`.
    pub name: String,
    /// Key inside the Secret.
    pub key: String,
}

/// Service settings beyond the type, port and annotations (Coder's chart's `coder.service.*`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceOptions {
    /// `Cluster` or `Local`; used for a `LoadBalancer` or `NodePort` Service only (Kubernetes refuses it otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_traffic_policy: Option<String>,
    /// The load balancer's IP, for a `LoadBalancer` Service only (deprecated by Kubernetes; some providers still
    /// read it).
    #[serde(default, rename = "loadBalancerIP", skip_serializing_if = "Option::is_none")]
    pub load_balancer_ip: Option<String>,
    /// The load balancer implementation, for a `LoadBalancer` Service only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer_class: Option<String>,
    /// `None` or `ClientIP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity: Option<String>,
    /// Node port of the HTTP port, for a `NodePort` or `LoadBalancer` Service (unset: Kubernetes picks one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub node_port: Option<i32>,
    /// Node port of the HTTPS port of a control plane with TLS, for a `NodePort` or `LoadBalancer` Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub https_node_port: Option<i32>,
    /// More ports of the Service, appended after the operator's. Their names must differ from the operator's
    /// (`http`, `https`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_ports: Vec<ServicePort>,
}

/// The ServiceAccount the provisioner's pods run as (named `<name>-provisioner`): its annotations (a cloud IAM role
/// for workload identity) and labels.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountMetadata {
    /// Annotations of the ServiceAccount (for example `eks.amazonaws.com/role-arn` or
    /// `iam.gke.io/gcp-service-account`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Labels of the ServiceAccount. The operator's own labels win a clash.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Serialize, Deserialize, Debug, Default, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        image: String,
        #[serde(flatten)]
        workload: Flat<WorkloadOptions>,
    }

    #[test]
    fn an_empty_group_is_not_kept_and_writes_nothing() {
        let spec: Spec = serde_json::from_value(json!({"image": "x"})).unwrap();
        assert!(spec.workload.get().is_none());
        assert_eq!(serde_json::to_value(&spec).unwrap(), json!({"image": "x"}));
        let empty: Spec = serde_json::from_value(json!({"image": "x", "podLabels": {}})).unwrap();
        assert!(empty.workload.get().is_none(), "an empty map sets nothing");
    }

    #[test]
    fn a_set_field_is_kept_flat_and_round_trips() {
        let written = json!({"image": "x", "podLabels": {"team": "a"}, "priorityClassName": "high",
            "imagePullPolicy": "IfNotPresent", "podDisruptionBudget": {}});
        let spec: Spec = serde_json::from_value(written.clone()).unwrap();
        let workload = spec.workload.get().unwrap();
        assert_eq!(workload.pod_labels["team"], "a");
        assert_eq!(workload.image_pull_policy, Some(ImagePullPolicy::IfNotPresent));
        assert_eq!(
            workload.pod_disruption_budget,
            Some(PodDisruptionBudgetSpec::default())
        );
        assert_eq!(serde_json::to_value(&spec).unwrap(), written);
    }

    #[test]
    fn the_schema_of_a_flat_group_is_its_fields() {
        #[derive(JsonSchema)]
        #[allow(dead_code)]
        struct Holder {
            image: String,
            #[serde(flatten)]
            service: Flat<ServiceOptions>,
        }
        let schema = schemars::schema_for!(Holder);
        let properties = schema.as_value()["properties"].as_object().unwrap();
        for field in [
            "image",
            "externalTrafficPolicy",
            "loadBalancerIP",
            "nodePort",
            "extraPorts",
        ] {
            assert!(properties.contains_key(field), "{field} in {properties:?}");
        }
        assert_eq!(schema.as_value()["required"], json!(["image"]));
    }
}
