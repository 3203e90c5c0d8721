//! What a CoderControlPlane should have, computed from its spec alone (docs/controllers/control-plane.md, "What it
//! creates"), pure: the names, labels and URLs of what it creates, and the objects themselves. The reconciler
//! applies the result with server-side apply; tests check it without an apiserver.

use std::collections::BTreeMap;

use coder_k8s_api::control_plane::{
    CONTAINER_NAME, CoderControlPlane, CoderControlPlaneSpec, PG_CONNECTION_URL_ENV, ProbeSpec,
};
use coder_k8s_api::shared::DEFAULT_CODER_IMAGE;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, ObjectFieldSelector, PodSpec,
    PodTemplateSpec, Probe, Service, ServiceAccount, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule, IngressServiceBackend,
    IngressSpec, IngressTLS, ServiceBackendPort,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use serde_json::json;

use coder_k8s_api::shared::{DNS_LABEL_MAX, DNS_SUBDOMAIN_MAX, fnv32a, truncated_name};

use crate::digest::{byte_prefix, hashed_object_name};
use crate::workload::{self, secret_env, secret_volume, service_port, value_env};
pub use crate::workload::{CertMount, cert_mounts, volume_name};

/// `app.kubernetes.io/name` of control-plane objects.
pub const APP_NAME: &str = "coder-control-plane";
/// Label naming the control plane on workspace RBAC objects.
pub const CONTROL_PLANE_LABEL: &str = "coder.com/control-plane";
/// Label naming the control plane's namespace on workspace RBAC objects (they can live in other namespaces).
pub const CONTROL_PLANE_NAMESPACE_LABEL: &str = "coder.com/control-plane-namespace";
/// Annotation with the UID of the control plane that owns workspace RBAC objects.
pub const WORKSPACE_RBAC_OWNER_UID_ANNOTATION: &str = crate::labels::OWNER_UID_ANNOTATION;
/// Container port of Coder's HTTP listener.
pub const HTTP_CONTAINER_PORT: i32 = 8080;
/// Container port of Coder's TLS listener.
pub const HTTPS_CONTAINER_PORT: i32 = 8443;

/// The identity of a control plane that every derived name depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlPlaneId {
    pub name: String,
    pub namespace: String,
}

impl ControlPlaneId {
    /// Name and namespace of the object; `None` when the object has neither (never true for stored objects).
    pub fn of(cp: &CoderControlPlane) -> Option<Self> {
        Some(Self {
            name: cp.metadata.name.clone()?,
            namespace: cp.metadata.namespace.clone()?,
        })
    }

    /// `app.kubernetes.io/instance`: the name, hash-truncated to a valid label value.
    pub fn instance_label(&self) -> String {
        crate::labels::instance(&self.name)
    }

    /// Labels of every object the control plane owns; also the Deployment selector.
    pub fn labels(&self) -> BTreeMap<String, String> {
        crate::labels::labels(APP_NAME, &self.name)
    }

    /// Labels of workspace Roles and RoleBindings: the control-plane labels plus its name and namespace.
    pub fn workspace_rbac_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.labels();
        labels.insert(CONTROL_PLANE_LABEL.to_owned(), self.instance_label());
        labels.insert(
            CONTROL_PLANE_NAMESPACE_LABEL.to_owned(),
            truncated_name(&self.namespace, "", DNS_LABEL_MAX),
        );
        labels
    }

    /// 8 hex of FNV-32a over `namespace \0 name`, which keeps workspace RBAC names of control planes apart.
    pub fn identity_hash(&self) -> String {
        let mut bytes = self.namespace.as_bytes().to_vec();
        bytes.push(0);
        bytes.extend_from_slice(self.name.as_bytes());
        format!("{:08x}", fnv32a(&bytes))
    }

    /// Default operator token Secret: `<cr>-operator-token`; over 63 bytes, the first 39 bytes of the name, `-`, the
    /// FNV-32a of the name and `-operator-token` (the Go operator's name).
    pub fn default_operator_token_secret(&self) -> String {
        hashed_object_name("", &self.name, "-operator-token", DNS_LABEL_MAX)
    }

    /// In-cluster DNS name of the control plane Service.
    pub fn service_host(&self) -> String {
        format!("{}.{}.svc.cluster.local", self.name, self.namespace)
    }
}

/// Name of the workspace Role: `<sa>-<hash8>-workspace-perms`.
pub fn workspace_role_name(id: &ControlPlaneId, service_account: &str) -> String {
    scoped_rbac_name(service_account, &id.identity_hash(), "-workspace-perms")
}

/// Name of the workspace RoleBinding: `<sa>-<hash8>`.
pub fn workspace_role_binding_name(id: &ControlPlaneId, service_account: &str) -> String {
    scoped_rbac_name(service_account, &id.identity_hash(), "")
}

/// `<sa>-<hash8><suffix>`; over 253 bytes the ServiceAccount name is cut to fit and loses leading and trailing `-`
/// and `.` (`workspace` when nothing is left). The identity hash already tells control planes apart, so no second
/// hash is added (the Go operator's rule).
fn scoped_rbac_name(service_account: &str, hash: &str, suffix: &str) -> String {
    let base = service_account.trim();
    let full = format!("{base}-{hash}{suffix}");
    if full.len() <= DNS_SUBDOMAIN_MAX {
        return full;
    }
    let available = DNS_SUBDOMAIN_MAX.saturating_sub(hash.len() + suffix.len() + 1);
    let cut = byte_prefix(base, available).trim_matches(['-', '.']);
    let cut = if cut.is_empty() { "workspace" } else { cut };
    format!("{cut}-{hash}{suffix}")
}

/// `CODER_ACCESS_URL`, set by the operator unless the user defines it.
pub const ACCESS_URL_ENV: &str = "CODER_ACCESS_URL";
/// Where TLS Secrets are mounted: `<dir>/<secret>/tls.crt`.
const TLS_MOUNT_DIR: &str = "/etc/ssl/certs/coder";

/// Everything the control plane owns, in apply order.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredState {
    /// `None` when `serviceAccount.disableCreate` is set.
    pub service_account: Option<ServiceAccount>,
    /// Role and RoleBinding per workspace namespace (own namespace first); empty when `workspacePerms` is false.
    pub workspace_rbac: Vec<(Role, RoleBinding)>,
    pub service: Service,
    pub deployment: Deployment,
    pub ingress: Option<Ingress>,
    /// gateway.networking.k8s.io/v1 HTTPRoute (no typed struct in k8s-openapi).
    pub http_route: Option<serde_json::Value>,
    /// `spec.podDisruptionBudget`.
    pub pod_disruption_budget: Option<PodDisruptionBudget>,
    /// The Service of Coder's Prometheus endpoint (`spec.monitoring`).
    pub metrics_service: Option<Service>,
    /// monitoring.coreos.com/v1 ServiceMonitor of the metrics Service (`spec.monitoring.serviceMonitor`).
    pub service_monitor: Option<serde_json::Value>,
}

/// Facts the shell resolves for the builder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inputs {
    /// Whether a ConfigMap or Secret named in `spec.envFrom` defines `CODER_ACCESS_URL` (with its prefix).
    pub env_from_defines_access_url: bool,
}

/// Whether built-in TLS is on.
pub fn tls_enabled(spec: &CoderControlPlaneSpec) -> bool {
    coder_k8s_control_plane_access::tls_enabled(spec)
}

/// `status.url`: `http://<svc>.<ns>.svc.cluster.local:<port>`, or `https://…:443` with TLS.
pub fn status_url(id: &ControlPlaneId, spec: &CoderControlPlaneSpec) -> String {
    if tls_enabled(spec) {
        format!("https://{}:443", id.service_host())
    } else {
        format!("http://{}:{}", id.service_host(), spec.service.port)
    }
}

/// The Service port that reaches Coder's plain HTTP listener: the spec port, or 80 when TLS takes 443.
pub fn http_service_port(spec: &CoderControlPlaneSpec) -> i32 {
    coder_k8s_control_plane_access::http_service_port(spec)
}

/// The URL every operator component uses for Coder API calls: plain HTTP on the Service (see
/// `coder_k8s_control_plane_access::internal_url`).
pub fn internal_url(id: &ControlPlaneId, spec: &CoderControlPlaneSpec) -> String {
    coder_k8s_control_plane_access::internal_url(&id.name, &id.namespace, spec)
}

/// `spec.extraEnv` sets `CODER_PG_CONNECTION_URL` although `spec.database` is set (ConflictingConfiguration).
pub fn database_conflict(spec: &CoderControlPlaneSpec) -> bool {
    spec.database.is_some() && spec.extra_env.iter().any(|e| e.name == PG_CONNECTION_URL_ENV)
}

/// ServiceAccount name of the Coder pods.
pub fn service_account_name(id: &ControlPlaneId, spec: &CoderControlPlaneSpec) -> String {
    spec.service_account
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| id.name.clone())
}

/// Builds the desired objects. `None` when the object has no name, namespace or UID (not stored yet).
pub fn desired_state(cp: &CoderControlPlane, inputs: &Inputs) -> Option<DesiredState> {
    let id = ControlPlaneId::of(cp)?;
    let owner = cp.controller_owner_ref(&())?;
    let uid = cp.metadata.uid.clone()?;
    let spec = &cp.spec;
    let sa = service_account_name(&id, spec);
    Some(DesiredState {
        service_account: (!spec.service_account.disable_create)
            .then(|| service_account(&id, spec, &sa, &owner)),
        workspace_rbac: workspace_rbac(&id, spec, &sa, &uid, &owner),
        service: service(&id, spec, &owner),
        deployment: deployment(&id, spec, inputs, &sa, &owner),
        ingress: ingress(&id, spec, &owner),
        http_route: http_route(&id, spec, &owner),
        pod_disruption_budget: workload::pod_disruption_budget(
            meta(&id, &id.name, &owner),
            spec.workload.get(),
            id.labels(),
        ),
        metrics_service: metrics_enabled(spec).then(|| metrics_service(&id, &owner)),
        service_monitor: service_monitor(&id, spec, &owner),
    })
}

/// Port of Coder's Prometheus endpoint in the pods and on the metrics Service.
pub const METRICS_PORT: i32 = 2112;
/// Name of that port.
pub const METRICS_PORT_NAME: &str = "prometheus-http";
/// `app.kubernetes.io/component` of the metrics Service, which its ServiceMonitor selects by.
pub const METRICS_COMPONENT: &str = "metrics";

/// Whether Coder's Prometheus endpoint is on.
pub fn metrics_enabled(spec: &CoderControlPlaneSpec) -> bool {
    spec.monitoring.as_ref().is_some_and(|m| m.is_enabled())
}

/// The metrics Service's name: `<name>-metrics`, hash-truncated to 63 bytes.
pub fn metrics_service_name(id: &ControlPlaneId) -> String {
    hashed_object_name("", &id.name, "-metrics", DNS_LABEL_MAX)
}

/// Labels of the metrics Service: the control plane's, and the metrics component.
fn metrics_labels(id: &ControlPlaneId) -> BTreeMap<String, String> {
    let mut labels = id.labels();
    labels.insert(
        "app.kubernetes.io/component".to_owned(),
        METRICS_COMPONENT.to_owned(),
    );
    labels
}

/// A ClusterIP Service in front of the pods' metrics port (the main Service, which may be a load balancer, does not
/// carry it).
fn metrics_service(id: &ControlPlaneId, owner: &OwnerReference) -> Service {
    let mut metadata = meta(id, &metrics_service_name(id), owner);
    metadata.labels = Some(metrics_labels(id));
    Service {
        metadata,
        spec: Some(k8s_openapi::api::core::v1::ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(id.labels()),
            ports: Some(vec![service_port(METRICS_PORT_NAME, METRICS_PORT, METRICS_PORT)]),
            ..Default::default()
        }),
        ..Service::default()
    }
}

/// The ServiceMonitor of the metrics Service, named like it, when the spec asks for one.
fn service_monitor(
    id: &ControlPlaneId,
    spec: &CoderControlPlaneSpec,
    owner: &OwnerReference,
) -> Option<serde_json::Value> {
    let monitoring = spec.monitoring.as_ref().filter(|m| m.is_enabled())?;
    let wanted = monitoring.service_monitor.as_ref().filter(|m| m.enabled)?;
    let mut labels = wanted.labels.clone();
    labels.extend(id.labels());
    let mut endpoint = json!({"port": METRICS_PORT_NAME, "path": "/metrics"});
    if let Some(interval) = &wanted.interval {
        endpoint["interval"] = json!(interval);
    }
    Some(json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {
            "name": metrics_service_name(id),
            "namespace": id.namespace,
            "labels": labels,
            "ownerReferences": [owner],
        },
        "spec": {
            "selector": {"matchLabels": metrics_labels(id)},
            "namespaceSelector": {"matchNames": [id.namespace]},
            "endpoints": [endpoint],
        },
    }))
}

fn meta(id: &ControlPlaneId, name: &str, owner: &OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(id.namespace.clone()),
        labels: Some(id.labels()),
        owner_references: Some(vec![owner.clone()]),
        ..ObjectMeta::default()
    }
}

fn service_account(
    id: &ControlPlaneId,
    spec: &CoderControlPlaneSpec,
    name: &str,
    owner: &OwnerReference,
) -> ServiceAccount {
    let mut metadata = meta(id, name, owner);
    let mut labels = id.labels();
    labels.extend(spec.service_account.labels.clone());
    metadata.labels = Some(labels);
    if !spec.service_account.annotations.is_empty() {
        metadata.annotations = Some(spec.service_account.annotations.clone());
    }
    ServiceAccount {
        metadata,
        ..ServiceAccount::default()
    }
}

fn workspace_rules(spec: &CoderControlPlaneSpec) -> Vec<PolicyRule> {
    let verbs: Vec<String> = [
        "get",
        "list",
        "watch",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    let mut rules = vec![PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["pods".to_owned(), "persistentvolumeclaims".to_owned()]),
        verbs: verbs.clone(),
        ..PolicyRule::default()
    }];
    if spec.rbac.enable_deployments.unwrap_or(true) {
        rules.push(PolicyRule {
            api_groups: Some(vec!["apps".to_owned()]),
            resources: Some(vec!["deployments".to_owned()]),
            verbs,
            ..PolicyRule::default()
        });
    }
    rules.extend(spec.rbac.extra_rules.iter().cloned());
    rules
}

fn workspace_rbac(
    id: &ControlPlaneId,
    spec: &CoderControlPlaneSpec,
    sa: &str,
    uid: &str,
    owner: &OwnerReference,
) -> Vec<(Role, RoleBinding)> {
    if !spec.rbac.workspace_perms.unwrap_or(true) {
        return Vec::new();
    }
    let mut namespaces = vec![id.namespace.clone()];
    for ns in &spec.rbac.workspace_namespaces {
        if !ns.is_empty() && !namespaces.contains(ns) {
            namespaces.push(ns.clone());
        }
    }
    let role_name = workspace_role_name(id, sa);
    let binding_name = workspace_role_binding_name(id, sa);
    namespaces
        .into_iter()
        .map(|namespace| {
            let own = namespace == id.namespace;
            let metadata = |name: &str| ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.clone()),
                labels: Some(id.workspace_rbac_labels()),
                annotations: Some(BTreeMap::from([(
                    WORKSPACE_RBAC_OWNER_UID_ANNOTATION.to_owned(),
                    uid.to_owned(),
                )])),
                // Owner references cannot cross namespaces; the finalizer cleans up the others.
                owner_references: own.then(|| vec![owner.clone()]),
                ..ObjectMeta::default()
            };
            let role = Role {
                metadata: metadata(&role_name),
                rules: Some(workspace_rules(spec)),
            };
            let binding = RoleBinding {
                metadata: metadata(&binding_name),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".to_owned(),
                    kind: "Role".to_owned(),
                    name: role_name.clone(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".to_owned(),
                    name: sa.to_owned(),
                    namespace: Some(id.namespace.clone()),
                    ..Subject::default()
                }]),
            };
            (role, binding)
        })
        .collect()
}

fn service(id: &ControlPlaneId, spec: &CoderControlPlaneSpec, owner: &OwnerReference) -> Service {
    let port = spec.service.port;
    let ports = match (tls_enabled(spec), port) {
        (false, _) => vec![service_port("http", port, HTTP_CONTAINER_PORT)],
        (true, 443) => vec![
            service_port("https", 443, HTTPS_CONTAINER_PORT),
            service_port("http", 80, HTTP_CONTAINER_PORT),
        ],
        (true, _) => vec![
            service_port("http", port, HTTP_CONTAINER_PORT),
            service_port("https", 443, HTTPS_CONTAINER_PORT),
        ],
    };
    workload::service(meta(id, &id.name, owner), &spec.service, id.labels(), ports)
}

/// Whether the user defines `CODER_ACCESS_URL`; then the operator leaves it alone.
fn user_defines_access_url(spec: &CoderControlPlaneSpec, inputs: &Inputs) -> bool {
    inputs.env_from_defines_access_url || spec.extra_env.iter().any(|e| e.name == ACCESS_URL_ENV)
}

/// The operator's env (KUBE_POD_IP, CODER_DERP_SERVER_RELAY_URL, CODER_ACCESS_URL, the TLS variables,
/// CODER_PG_CONNECTION_URL, in that order), then `extraEnv`.
pub fn container_env(id: &ControlPlaneId, spec: &CoderControlPlaneSpec, inputs: &Inputs) -> Vec<EnvVar> {
    let mut env = vec![
        pod_ip_env(),
        value_env(
            "CODER_DERP_SERVER_RELAY_URL",
            format!("http://$(KUBE_POD_IP):{HTTP_CONTAINER_PORT}"),
        ),
    ];
    env.extend(access_url_env(id, spec, inputs));
    env.extend(tls_env(spec));
    env.extend(database_env(spec));
    if metrics_enabled(spec) {
        // Coder listens on loopback by default; the pods' port must be reachable by a scraper.
        env.push(value_env("CODER_PROMETHEUS_ENABLE", "true"));
        env.push(value_env(
            "CODER_PROMETHEUS_ADDRESS",
            format!("0.0.0.0:{METRICS_PORT}"),
        ));
    }
    env.extend(spec.extra_env.iter().cloned());
    env
}

/// `KUBE_POD_IP`, from the pod's status.
fn pod_ip_env() -> EnvVar {
    EnvVar {
        name: "KUBE_POD_IP".to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "status.podIP".to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// `CODER_ACCESS_URL`: the Service's in-cluster URL, unless turned off or defined by the user.
fn access_url_env(id: &ControlPlaneId, spec: &CoderControlPlaneSpec, inputs: &Inputs) -> Option<EnvVar> {
    if !spec.env_use_cluster_access_url.unwrap_or(true) || user_defines_access_url(spec, inputs) {
        return None;
    }
    let url = if tls_enabled(spec) {
        format!("https://{}", id.service_host())
    } else if spec.service.port == 80 {
        format!("http://{}", id.service_host())
    } else {
        format!("http://{}:{}", id.service_host(), spec.service.port)
    };
    Some(value_env(ACCESS_URL_ENV, url))
}

/// The TLS variables, when TLS is enabled: the listen address and the mounted certificate and key files.
fn tls_env(spec: &CoderControlPlaneSpec) -> Vec<EnvVar> {
    if !tls_enabled(spec) {
        return Vec::new();
    }
    let files = |file: &str| {
        tls_secret_names(spec)
            .iter()
            .map(|s| format!("{TLS_MOUNT_DIR}/{s}/{file}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    vec![
        value_env("CODER_TLS_ENABLE", "true"),
        value_env("CODER_TLS_ADDRESS", format!("0.0.0.0:{HTTPS_CONTAINER_PORT}")),
        value_env("CODER_TLS_CERT_FILE", files("tls.crt")),
        value_env("CODER_TLS_KEY_FILE", files("tls.key")),
    ]
}

/// `CODER_PG_CONNECTION_URL` from the database Secret, when a database is set.
fn database_env(spec: &CoderControlPlaneSpec) -> Option<EnvVar> {
    let reference = &spec.database.as_ref()?.connection_secret_ref;
    let key = reference.key.clone().unwrap_or_default();
    Some(secret_env(PG_CONNECTION_URL_ENV, &reference.name, &key, None))
}

/// A probe block without `enabled` is an enabled probe (as in the Go operator); an absent block takes the spec
/// default (readiness on, liveness off), which sets `enabled` explicitly.
fn probe(spec: &ProbeSpec) -> Option<Probe> {
    spec.enabled.unwrap_or(true).then(|| Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/healthz".to_owned()),
            port: IntOrString::String("http".to_owned()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: Some(spec.initial_delay_seconds),
        period_seconds: Some(spec.period_seconds.unwrap_or(10)),
        timeout_seconds: Some(spec.timeout_seconds.unwrap_or(1)),
        success_threshold: Some(spec.success_threshold.unwrap_or(1)),
        failure_threshold: Some(spec.failure_threshold.unwrap_or(3)),
        ..Probe::default()
    })
}

/// `Some(list)` unless empty, so empty lists are not sent (and not owned under server-side apply).
fn some_if_any<T: Clone>(items: &[T]) -> Option<Vec<T>> {
    (!items.is_empty()).then(|| items.to_vec())
}

/// `spec.tls.secretNames` without blanks and repeats, in order: each Secret is mounted, and listed, once.
pub fn tls_secret_names(spec: &CoderControlPlaneSpec) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in spec.tls.secret_names.iter().map(|n| n.trim()) {
        if !name.is_empty() && !names.iter().any(|seen| seen == name) {
            names.push(name.to_owned());
        }
    }
    names
}

fn volumes(spec: &CoderControlPlaneSpec) -> (Vec<Volume>, Vec<VolumeMount>) {
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    for secret in tls_secret_names(spec) {
        let name = volume_name("tls", &secret);
        volumes.push(secret_volume(name.clone(), &secret));
        mounts.push(VolumeMount {
            name,
            mount_path: format!("{TLS_MOUNT_DIR}/{secret}"),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    let (cert_volumes, cert_mounts) = workload::ca_cert_volumes(&spec.certs);
    volumes.extend(cert_volumes);
    mounts.extend(cert_mounts);
    volumes.extend(spec.volumes.iter().cloned());
    mounts.extend(spec.volume_mounts.iter().cloned());
    (volumes, mounts)
}

/// The HTTP port, and the HTTPS port when TLS is enabled.
fn container_ports(spec: &CoderControlPlaneSpec) -> Vec<ContainerPort> {
    let port = |name: &str, number: i32| ContainerPort {
        name: Some(name.to_owned()),
        container_port: number,
        protocol: Some("TCP".to_owned()),
        ..ContainerPort::default()
    };
    let mut ports = vec![port("http", HTTP_CONTAINER_PORT)];
    if tls_enabled(spec) {
        ports.push(port("https", HTTPS_CONTAINER_PORT));
    }
    if metrics_enabled(spec) {
        ports.push(port(METRICS_PORT_NAME, METRICS_PORT));
    }
    ports
}

/// The `coder` container, mounting `volume_mounts`.
fn container(
    id: &ControlPlaneId,
    spec: &CoderControlPlaneSpec,
    inputs: &Inputs,
    volume_mounts: Vec<VolumeMount>,
) -> Container {
    let mut args = vec![format!("--http-address=0.0.0.0:{HTTP_CONTAINER_PORT}")];
    args.extend(spec.extra_args.iter().cloned());
    let image = if spec.image.is_empty() {
        DEFAULT_CODER_IMAGE.to_owned()
    } else {
        spec.image.clone()
    };
    Container {
        name: CONTAINER_NAME.to_owned(),
        image: Some(image),
        args: Some(args),
        env: Some(container_env(id, spec, inputs)),
        env_from: some_if_any(&spec.env_from),
        ports: Some(container_ports(spec)),
        readiness_probe: probe(&spec.readiness_probe),
        liveness_probe: probe(&spec.liveness_probe),
        resources: spec.resources.as_deref().cloned(),
        security_context: spec.security_context.as_deref().cloned(),
        volume_mounts: (!volume_mounts.is_empty()).then_some(volume_mounts),
        ..Container::default()
    }
}

fn deployment(
    id: &ControlPlaneId,
    spec: &CoderControlPlaneSpec,
    inputs: &Inputs,
    sa: &str,
    owner: &OwnerReference,
) -> Deployment {
    let deployment = base_deployment(id, spec, inputs, sa, owner);
    workload::with_workload_options(deployment, spec.workload.get(), CONTAINER_NAME)
}

fn base_deployment(
    id: &ControlPlaneId,
    spec: &CoderControlPlaneSpec,
    inputs: &Inputs,
    sa: &str,
    owner: &OwnerReference,
) -> Deployment {
    let (volumes, volume_mounts) = volumes(spec);
    let container = container(id, spec, inputs, volume_mounts);
    Deployment {
        metadata: meta(id, &id.name, owner),
        spec: Some(DeploymentSpec {
            replicas: Some(spec.replicas.unwrap_or(1)),
            selector: LabelSelector {
                match_labels: Some(id.labels()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(id.labels()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(sa.to_owned()),
                    containers: vec![container],
                    volumes: (!volumes.is_empty()).then_some(volumes),
                    image_pull_secrets: some_if_any(&spec.image_pull_secrets),
                    security_context: spec.pod_security_context.as_deref().cloned(),
                    node_selector: (!spec.node_selector.is_empty()).then(|| spec.node_selector.clone()),
                    tolerations: some_if_any(&spec.tolerations),
                    affinity: spec.affinity.as_deref().cloned(),
                    topology_spread_constraints: some_if_any(&spec.topology_spread_constraints),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

fn ingress(id: &ControlPlaneId, spec: &CoderControlPlaneSpec, owner: &OwnerReference) -> Option<Ingress> {
    let expose = spec.expose.as_ref()?.ingress.as_ref()?;
    let backend_port = http_service_port(spec);
    let rule = |host: &str| IngressRule {
        host: Some(host.to_owned()),
        http: Some(HTTPIngressRuleValue {
            paths: vec![HTTPIngressPath {
                path: Some("/".to_owned()),
                path_type: "Prefix".to_owned(),
                backend: IngressBackend {
                    service: Some(IngressServiceBackend {
                        name: id.name.clone(),
                        port: Some(ServiceBackendPort {
                            number: Some(backend_port),
                            ..ServiceBackendPort::default()
                        }),
                    }),
                    ..IngressBackend::default()
                },
            }],
        }),
    };
    let mut rules = vec![rule(&expose.host)];
    let mut tls = Vec::new();
    if let Some(secret) = expose.tls.as_ref().and_then(|t| t.secret_name.clone()) {
        tls.push(IngressTLS {
            hosts: Some(vec![expose.host.clone()]),
            secret_name: Some(secret),
        });
    }
    if let Some(wildcard) = expose.wildcard_host.as_ref().filter(|w| !w.is_empty()) {
        rules.push(rule(wildcard));
        if let Some(secret) = expose.tls.as_ref().and_then(|t| t.wildcard_secret_name.clone()) {
            tls.push(IngressTLS {
                hosts: Some(vec![wildcard.clone()]),
                secret_name: Some(secret),
            });
        }
    }
    let mut metadata = meta(id, &id.name, owner);
    if !expose.annotations.is_empty() {
        metadata.annotations = Some(expose.annotations.clone());
    }
    Some(Ingress {
        metadata,
        spec: Some(IngressSpec {
            ingress_class_name: expose.class_name.clone(),
            rules: Some(rules),
            tls: (!tls.is_empty()).then_some(tls),
            ..IngressSpec::default()
        }),
        ..Ingress::default()
    })
}

fn http_route(
    id: &ControlPlaneId,
    spec: &CoderControlPlaneSpec,
    owner: &OwnerReference,
) -> Option<serde_json::Value> {
    let expose = spec.expose.as_ref()?.gateway.as_ref()?;
    let mut hostnames = vec![expose.host.clone()];
    hostnames.extend(expose.wildcard_host.iter().filter(|w| !w.is_empty()).cloned());
    let parent_refs: Vec<serde_json::Value> = expose
        .parent_refs
        .iter()
        .map(|p| {
            let mut parent = json!({"name": p.name});
            if let Some(ns) = &p.namespace {
                parent["namespace"] = json!(ns);
            }
            if let Some(section) = &p.section_name {
                parent["sectionName"] = json!(section);
            }
            parent
        })
        .collect();
    Some(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": meta(id, &id.name, owner),
        "spec": {
            "hostnames": hostnames,
            "parentRefs": parent_refs,
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "backendRefs": [{"name": id.name, "port": http_service_port(spec)}],
            }],
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::fnv32a_hex;
    use coder_k8s_api::control_plane::{
        CertSecretSelector, DatabaseSpec, ExposeSpec, GatewayExposeSpec, GatewayParentRef, IngressExposeSpec,
        IngressTlsSpec,
    };
    use coder_k8s_api::shared::SecretKeySelector;

    fn control_plane(spec: serde_json::Value) -> CoderControlPlane {
        let mut cp = CoderControlPlane::new("coder", serde_json::from_value(spec).unwrap());
        cp.metadata.namespace = Some("team".to_owned());
        cp.metadata.uid = Some("uid-1".to_owned());
        cp
    }

    fn pod(state: &DesiredState) -> &PodSpec {
        state
            .deployment
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
    }

    fn env(state: &DesiredState) -> &[EnvVar] {
        pod(state).containers[0].env.as_deref().unwrap()
    }

    /// A Service's ports as (name, port).
    fn service_ports(service: Service) -> Vec<(String, i32)> {
        let ports = service.spec.unwrap().ports.unwrap();
        ports.into_iter().map(|p| (p.name.unwrap(), p.port)).collect()
    }

    fn env_names(state: &DesiredState) -> Vec<String> {
        env(state).iter().map(|e| e.name.clone()).collect()
    }

    fn env_value(state: &DesiredState, name: &str) -> Option<String> {
        env(state)
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    }

    #[test]
    fn defaults_give_the_contract_objects() {
        let state = desired_state(&control_plane(json!({})), &Inputs::default()).unwrap();
        assert_eq!(
            env_names(&state),
            ["KUBE_POD_IP", "CODER_DERP_SERVER_RELAY_URL", "CODER_ACCESS_URL"]
        );
        assert_eq!(
            env_value(&state, "CODER_ACCESS_URL").unwrap(),
            "http://coder.team.svc.cluster.local"
        );
        assert_eq!(
            env_value(&state, "CODER_DERP_SERVER_RELAY_URL").unwrap(),
            "http://$(KUBE_POD_IP):8080"
        );
        let deployment = state.deployment.spec.as_ref().unwrap();
        assert_eq!(deployment.replicas, Some(1));
        let pod = deployment.template.spec.as_ref().unwrap();
        assert_eq!(pod.service_account_name.as_deref(), Some("coder"));
        let container = &pod.containers[0];
        assert_eq!(container.name, "coder");
        assert_eq!(container.image.as_deref(), Some("ghcr.io/coder/coder:latest"));
        assert_eq!(container.args.as_ref().unwrap(), &["--http-address=0.0.0.0:8080"]);
        assert!(container.readiness_probe.is_some());
        assert!(container.liveness_probe.is_none());
        let readiness = container.readiness_probe.as_ref().unwrap();
        assert_eq!(
            (readiness.period_seconds, readiness.failure_threshold),
            (Some(10), Some(3))
        );
        let ports = state.service.spec.as_ref().unwrap().ports.as_ref().unwrap();
        assert_eq!(ports.len(), 1);
        assert_eq!((ports[0].name.as_deref(), ports[0].port), (Some("http"), 80));
        assert_eq!(state.workspace_rbac.len(), 1);
        let (role, binding) = &state.workspace_rbac[0];
        assert_eq!(role.rules.as_ref().unwrap().len(), 2, "pods/PVCs and deployments");
        assert_eq!(binding.role_ref.name, role.metadata.name.clone().unwrap());
        assert_eq!(
            role.metadata.annotations.as_ref().unwrap()[WORKSPACE_RBAC_OWNER_UID_ANNOTATION],
            "uid-1"
        );
        assert!(state.service_account.is_some());
        assert!(state.ingress.is_none() && state.http_route.is_none());
        let owner = &state.deployment.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("CoderControlPlane", Some(true))
        );
        let id = ControlPlaneId::of(&control_plane(json!({}))).unwrap();
        assert_eq!(
            status_url(&id, &control_plane(json!({})).spec),
            "http://coder.team.svc.cluster.local:80"
        );
    }

    #[test]
    fn access_url_is_left_to_the_user_when_defined() {
        let cp = control_plane(
            json!({"extraEnv": [{"name": "CODER_ACCESS_URL", "value": "https://coder.example.com"}]}),
        );
        let state = desired_state(&cp, &Inputs::default()).unwrap();
        assert_eq!(
            env_value(&state, "CODER_ACCESS_URL").unwrap(),
            "https://coder.example.com"
        );
        assert_eq!(
            env_names(&state)
                .iter()
                .filter(|n| *n == "CODER_ACCESS_URL")
                .count(),
            1
        );
        let state = desired_state(
            &control_plane(json!({})),
            &Inputs {
                env_from_defines_access_url: true,
            },
        )
        .unwrap();
        assert!(env_value(&state, "CODER_ACCESS_URL").is_none());
        let state = desired_state(
            &control_plane(json!({"envUseClusterAccessURL": false})),
            &Inputs::default(),
        )
        .unwrap();
        assert!(env_value(&state, "CODER_ACCESS_URL").is_none());
        let state = desired_state(
            &control_plane(json!({"service": {"port": 8080}})),
            &Inputs::default(),
        )
        .unwrap();
        assert_eq!(
            env_value(&state, "CODER_ACCESS_URL").unwrap(),
            "http://coder.team.svc.cluster.local:8080"
        );
    }

    #[test]
    fn tls_changes_env_ports_volumes_and_urls() {
        let mut cp = control_plane(json!({"service": {"port": 443}}));
        cp.spec.tls.secret_names = vec!["coder-tls".to_owned(), "other".to_owned()];
        let state = desired_state(&cp, &Inputs::default()).unwrap();
        assert_eq!(
            env_names(&state),
            [
                "KUBE_POD_IP",
                "CODER_DERP_SERVER_RELAY_URL",
                "CODER_ACCESS_URL",
                "CODER_TLS_ENABLE",
                "CODER_TLS_ADDRESS",
                "CODER_TLS_CERT_FILE",
                "CODER_TLS_KEY_FILE"
            ]
        );
        assert_eq!(
            env_value(&state, "CODER_ACCESS_URL").unwrap(),
            "https://coder.team.svc.cluster.local"
        );
        assert_eq!(
            env_value(&state, "CODER_TLS_CERT_FILE").unwrap(),
            "/etc/ssl/certs/coder/coder-tls/tls.crt,/etc/ssl/certs/coder/other/tls.crt"
        );
        let ports = service_ports(state.service);
        assert_eq!(ports, [("https".to_owned(), 443), ("http".to_owned(), 80)]);
        let id = ControlPlaneId::of(&cp).unwrap();
        assert_eq!(
            status_url(&id, &cp.spec),
            "https://coder.team.svc.cluster.local:443"
        );
        assert_eq!(
            internal_url(&id, &cp.spec),
            "http://coder.team.svc.cluster.local:80"
        );
        let pod = state.deployment.spec.unwrap().template.spec.unwrap();
        let names: Vec<String> = pod.volumes.unwrap().into_iter().map(|v| v.name).collect();
        assert_eq!(names, ["tls-coder-tls", "tls-other"]);

        let mut other_port = control_plane(json!({"service": {"port": 8080}}));
        other_port.spec.tls.secret_names = vec!["coder-tls".to_owned()];
        let ports = service_ports(service(
            &id,
            &other_port.spec,
            &cp.controller_owner_ref(&()).unwrap(),
        ));
        assert_eq!(ports, [("http".to_owned(), 8080), ("https".to_owned(), 443)]);
    }

    #[test]
    fn database_secret_is_referenced_never_copied() {
        let mut cp = control_plane(json!({"extraEnv": [{"name": "EXTRA", "value": "1"}]}));
        cp.spec.database = Some(DatabaseSpec {
            connection_secret_ref: SecretKeySelector {
                name: "coder-db-app".to_owned(),
                key: Some("uri".to_owned()),
            },
        });
        let state = desired_state(&cp, &Inputs::default()).unwrap();
        assert_eq!(env_names(&state).last().unwrap(), "EXTRA", "extraEnv comes last");
        let container = &pod(&state).containers[0];
        let pg = container
            .env
            .as_ref()
            .unwrap()
            .iter()
            .find(|e| e.name == PG_CONNECTION_URL_ENV)
            .unwrap();
        assert!(pg.value.is_none());
        let reference = pg.value_from.as_ref().unwrap().secret_key_ref.as_ref().unwrap();
        assert_eq!(
            (reference.name.as_str(), reference.key.as_str()),
            ("coder-db-app", "uri")
        );
        assert_eq!(
            reference.optional, None,
            "required by default, as the Go operator leaves it"
        );
        assert!(!database_conflict(&cp.spec));
        cp.spec
            .extra_env
            .push(value_env(PG_CONNECTION_URL_ENV, "postgres://x"));
        assert!(database_conflict(&cp.spec));
    }

    #[test]
    fn workspace_rbac_covers_extra_namespaces_and_can_be_off() {
        let cp = control_plane(
            json!({"rbac": {"workspaceNamespaces": ["ws-a", "team", "ws-b"], "enableDeployments": false}}),
        );
        let state = desired_state(&cp, &Inputs::default()).unwrap();
        let namespaces: Vec<String> = state
            .workspace_rbac
            .iter()
            .map(|(r, _)| r.metadata.namespace.clone().unwrap())
            .collect();
        assert_eq!(namespaces, ["team", "ws-a", "ws-b"]);
        assert!(
            state.workspace_rbac[1].0.metadata.owner_references.is_none(),
            "no cross-namespace owner refs"
        );
        assert_eq!(state.workspace_rbac[0].0.rules.as_ref().unwrap().len(), 1);
        let off = control_plane(
            json!({"rbac": {"workspacePerms": false}, "serviceAccount": {"disableCreate": true, "name": "byo"}}),
        );
        let state = desired_state(&off, &Inputs::default()).unwrap();
        assert!(state.workspace_rbac.is_empty());
        assert!(state.service_account.is_none());
        let pod = state.deployment.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.service_account_name.as_deref(), Some("byo"));
    }

    #[test]
    fn exposure_by_ingress_or_gateway() {
        let mut cp = control_plane(json!({}));
        cp.spec.expose = Some(Box::new(ExposeSpec {
            ingress: Some(IngressExposeSpec {
                host: "coder.example.com".to_owned(),
                wildcard_host: Some("*.coder.example.com".to_owned()),
                tls: Some(IngressTlsSpec {
                    secret_name: Some("tls".to_owned()),
                    wildcard_secret_name: None,
                }),
                ..IngressExposeSpec::default()
            }),
            gateway: None,
        }));
        let ingress = desired_state(&cp, &Inputs::default())
            .unwrap()
            .ingress
            .unwrap()
            .spec
            .unwrap();
        assert_eq!(ingress.rules.as_ref().unwrap().len(), 2);
        assert_eq!(ingress.tls.as_ref().unwrap().len(), 1);
        cp.spec.expose = Some(Box::new(ExposeSpec {
            ingress: None,
            gateway: Some(GatewayExposeSpec {
                host: "coder.example.com".to_owned(),
                wildcard_host: None,
                parent_refs: vec![GatewayParentRef {
                    name: "gw".to_owned(),
                    namespace: Some("infra".to_owned()),
                    section_name: None,
                }],
            }),
        }));
        let state = desired_state(&cp, &Inputs::default()).unwrap();
        assert!(state.ingress.is_none());
        let route = state.http_route.unwrap();
        assert_eq!(
            route["spec"]["parentRefs"][0],
            json!({"name": "gw", "namespace": "infra"})
        );
        assert_eq!(
            route["spec"]["rules"][0]["backendRefs"][0],
            json!({"name": "coder", "port": 80})
        );
    }

    #[test]
    fn ca_certs_are_mounted_by_key() {
        let mut cp = control_plane(json!({}));
        cp.spec.certs.secrets = vec![CertSecretSelector {
            name: "corp-ca".to_owned(),
            key: "ca.pem".to_owned(),
        }];
        let pod = pod_of(&cp);
        let mount = &pod.containers[0].volume_mounts.as_ref().unwrap()[0];
        assert_eq!(mount.mount_path, "/etc/ssl/certs/corp-ca.crt");
        assert_eq!(mount.sub_path.as_deref(), Some("ca.pem"));
        assert_eq!(mount.name, "ca-cert-corp-ca");
    }

    fn pod_of(cp: &CoderControlPlane) -> k8s_openapi::api::core::v1::PodSpec {
        desired_state(cp, &Inputs::default())
            .unwrap()
            .deployment
            .spec
            .unwrap()
            .template
            .spec
            .unwrap()
    }

    #[test]
    fn a_probe_block_without_enabled_is_enabled() {
        let cp = control_plane(json!({
            "readinessProbe": {"periodSeconds": 7},
            "livenessProbe": {"initialDelaySeconds": 30},
        }));
        let container = &pod_of(&cp).containers[0];
        assert_eq!(
            container.readiness_probe.as_ref().unwrap().period_seconds,
            Some(7)
        );
        let liveness = container.liveness_probe.as_ref().expect("liveness enabled");
        assert_eq!(liveness.initial_delay_seconds, Some(30));
        let off = control_plane(json!({"livenessProbe": {"enabled": false, "periodSeconds": 5}}));
        assert!(pod_of(&off).containers[0].liveness_probe.is_none());
        assert!(
            pod_of(&control_plane(json!({}))).containers[0]
                .liveness_probe
                .is_none()
        );
    }

    #[test]
    fn a_secret_named_twice_is_one_volume_and_never_crt_crt() {
        let mut cp = control_plane(json!({}));
        let cert = |name: &str, key: &str| CertSecretSelector {
            name: name.to_owned(),
            key: key.to_owned(),
        };
        cp.spec.certs.secrets = vec![cert("corp-ca", "ca.crt"), cert("corp-ca", "ca.crt")];
        cp.spec.tls.secret_names = vec!["coder-tls".to_owned(), " coder-tls ".to_owned()];
        let pod = pod_of(&cp);
        let volumes: Vec<&str> = pod
            .volumes
            .as_ref()
            .unwrap()
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(volumes, ["tls-coder-tls", "ca-cert-corp-ca"]);
        let mounts: Vec<&str> = pod.containers[0]
            .volume_mounts
            .as_ref()
            .unwrap()
            .iter()
            .map(|m| m.mount_path.as_str())
            .collect();
        assert_eq!(
            mounts,
            ["/etc/ssl/certs/coder/coder-tls", "/etc/ssl/certs/corp-ca-ca.crt"]
        );
        let state = desired_state(&cp, &Inputs::default()).unwrap();
        assert_eq!(
            env_value(&state, "CODER_TLS_CERT_FILE").as_deref(),
            Some("/etc/ssl/certs/coder/coder-tls/tls.crt")
        );
        // Two keys of one Secret: one volume, a file per key; a name ending in .crt gets no second .crt.
        cp.spec.certs.secrets = vec![
            cert("corp", "a.pem"),
            cert("corp", "b.pem"),
            cert("root.crt", "ca"),
        ];
        let files: Vec<String> = cert_mounts(&cp.spec.certs).into_iter().map(|m| m.file).collect();
        assert_eq!(files, ["corp-a.pem.crt", "corp-b.pem.crt", "root.crt"]);
        // Two selectors that give one file name: the second is numbered.
        cp.spec.certs.secrets = vec![cert("x", "y"), cert("x-y", "k"), cert("x", "z")];
        let files: Vec<String> = cert_mounts(&cp.spec.certs).into_iter().map(|m| m.file).collect();
        assert_eq!(files, ["x-y.crt", "x-y-2.crt", "x-z.crt"]);
    }

    #[test]
    fn objects_without_uid_are_not_built() {
        let mut cp = control_plane(json!({}));
        cp.metadata.uid = None;
        assert!(desired_state(&cp, &Inputs::default()).is_none());
    }

    fn id(name: &str) -> ControlPlaneId {
        ControlPlaneId {
            name: name.to_owned(),
            namespace: "coder".to_owned(),
        }
    }

    #[test]
    fn labels_and_names_follow_the_contract() {
        let cp = id("coder");
        assert_eq!(cp.labels()["app.kubernetes.io/name"], "coder-control-plane");
        assert_eq!(cp.labels()["app.kubernetes.io/instance"], "coder");
        assert_eq!(cp.labels()["app.kubernetes.io/managed-by"], "coder-k8s");
        assert_eq!(cp.default_operator_token_secret(), "coder-operator-token");
        assert_eq!(cp.service_host(), "coder.coder.svc.cluster.local");
        let hash = format!("{:08x}", fnv32a(b"coder\0coder"));
        assert_eq!(
            workspace_role_name(&cp, "coder"),
            format!("coder-{hash}-workspace-perms")
        );
        assert_eq!(workspace_role_binding_name(&cp, "coder"), format!("coder-{hash}"));
        assert_eq!(volume_name("tls", "coder"), "tls-coder");
        let rbac = cp.workspace_rbac_labels();
        assert_eq!(rbac[CONTROL_PLANE_LABEL], "coder");
        assert_eq!(rbac[CONTROL_PLANE_NAMESPACE_LABEL], "coder");
    }

    #[test]
    fn long_names_are_hash_truncated() {
        let long = id(&"c".repeat(80));
        assert!(long.instance_label().len() <= 63);
        assert!(long.default_operator_token_secret().len() <= 63);
        assert!(long.default_operator_token_secret().ends_with("-operator-token"));
        assert_ne!(
            id(&"c".repeat(80)).instance_label(),
            id(&"c".repeat(81)).instance_label()
        );
    }

    #[test]
    fn volume_names_are_the_go_operators() {
        assert_eq!(volume_name("tls", "coder-tls"), "tls-coder-tls");
        // Values computed independently with python3 (FNV-32a of prefix, NUL, Secret name):
        // "tls\0Coder.TLS" -> 0bea4f94, "ca-cert\0corp.ca" -> e0843578.
        assert_eq!(volume_name("tls", "Coder.TLS"), "tls-coder-tls-0bea4f94");
        assert_eq!(volume_name("ca-cert", "corp.ca"), "ca-cert-corp-ca-e0843578");
        // Runs of other characters become one dash, so "a--b" is not a DNS label as written and is hashed.
        assert!(volume_name("tls", "a--b").starts_with("tls-a-b-"));
        let long = volume_name("ca-cert", &"x".repeat(100));
        assert_eq!(long.len(), 63, "{long}");
        assert!(long.starts_with(&format!("ca-cert-{}-", "x".repeat(46))));
    }

    #[test]
    fn long_workspace_rbac_names_keep_the_identity_hash_only() {
        let cp = id("coder");
        let hash = cp.identity_hash();
        // "coder\0coder" -> 84e8e53b (python3, FNV-32a).
        assert_eq!(hash, "84e8e53b");
        let sa = format!("{}-{}", "s".repeat(230), "t".repeat(20));
        let role = workspace_role_name(&cp, &sa);
        assert_eq!(role.len(), 253);
        assert_eq!(role, format!("{}-{hash}-workspace-perms", &sa[..228]));
        let cut_at_dash = format!("{}-{}", "s".repeat(227), "t".repeat(40));
        assert_eq!(
            workspace_role_name(&cp, &cut_at_dash),
            format!("{}-{hash}-workspace-perms", "s".repeat(227))
        );
        let binding = workspace_role_binding_name(&cp, &"b".repeat(250));
        assert_eq!(binding, format!("{}-{hash}", "b".repeat(244)));
    }

    #[test]
    fn long_operator_token_secret_is_the_go_operators() {
        let name = format!("{}-{}", "c".repeat(38), "d".repeat(40));
        let hash = fnv32a_hex(name.as_bytes());
        assert_eq!(
            id(&name).default_operator_token_secret(),
            format!("{}--{hash}-operator-token", "c".repeat(38))
        );
    }
}
