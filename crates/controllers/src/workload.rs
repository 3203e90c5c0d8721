//! Pure builders of the parts of a workload that the control plane, the provisioner and the workspace proxy build
//! alike: a container's environment variables (a plain value, a Secret key), CA certificate volumes, the Service in
//! front of the pods, and the Deployment, pod and Service settings every workload kind takes (labels and
//! annotations, scheduling, sidecars, a PodDisruptionBudget). A setting left unset leaves the object as it was.

use std::collections::BTreeMap;

use coder_k8s_api::shared::{DNS_LABEL_MAX, ServiceSpec, ServiceType};
use coder_k8s_api::workload::{CertsSpec, PodSettings, ServiceOptions, WorkloadOptions};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    EnvVar, EnvVarSource, PodSpec, SecretKeySelector, SecretVolumeSource, Service, ServicePort,
    ServiceSpec as K8sServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::digest::{byte_prefix, fnv32a_hex};

/// A variable with a plain value.
pub fn value_env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

/// A variable read from key `key` of Secret `secret`. `optional` is written as given: `None` where the Go operator
/// wrote no `optional` (any difference in the pod template rolls the pods on an upgrade from it).
pub fn secret_env(name: &str, secret: &str, key: &str, optional: Option<bool>) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional,
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// A TCP Service port `port` named `name` that forwards to container port `target`.
pub fn service_port(name: &str, port: i32, target: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_owned()),
        port,
        target_port: Some(IntOrString::Int(target)),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    }
}

/// The Service of `spec` (its type, annotations and options) selecting the pods labelled `selector`, with `ports`
/// (the HTTP port named `http` first, then `https` when there is one).
pub fn service(
    mut metadata: ObjectMeta,
    spec: &ServiceSpec,
    selector: BTreeMap<String, String>,
    mut ports: Vec<ServicePort>,
) -> Service {
    if !spec.annotations.is_empty() {
        metadata.annotations = Some(spec.annotations.clone());
    }
    let mut service_spec = K8sServiceSpec {
        type_: Some(spec.type_.as_str().to_owned()),
        selector: Some(selector),
        ..K8sServiceSpec::default()
    };
    if let Some(options) = spec.options.get() {
        with_service_options(&mut service_spec, &mut ports, &spec.type_, options);
    }
    service_spec.ports = Some(ports);
    Service {
        metadata,
        spec: Some(service_spec),
        ..Service::default()
    }
}

/// Coder's chart's Service values: the traffic policy and node ports where the type has them (Kubernetes refuses them
/// elsewhere), the load balancer's IP and class for a `LoadBalancer`, session affinity, and extra ports last.
fn with_service_options(
    service: &mut K8sServiceSpec,
    ports: &mut Vec<ServicePort>,
    type_: &ServiceType,
    options: &ServiceOptions,
) {
    let external = matches!(type_, ServiceType::LoadBalancer | ServiceType::NodePort);
    let load_balancer = *type_ == ServiceType::LoadBalancer;
    if external {
        service.external_traffic_policy = options.external_traffic_policy.clone();
        for port in ports.iter_mut() {
            port.node_port = match port.name.as_deref() {
                Some("http") => options.node_port,
                Some("https") => options.https_node_port,
                _ => None,
            };
        }
    }
    if load_balancer {
        service.load_balancer_ip = options.load_balancer_ip.clone();
        service.load_balancer_class = options.load_balancer_class.clone();
    }
    service.session_affinity = options.session_affinity.clone();
    ports.extend(options.extra_ports.iter().cloned());
}

/// `ours` over `theirs`: the user's labels or annotations with the operator's own winning a clash; `None` when both
/// are empty.
fn merged(
    theirs: &BTreeMap<String, String>,
    ours: Option<BTreeMap<String, String>>,
) -> Option<BTreeMap<String, String>> {
    if theirs.is_empty() {
        return ours;
    }
    let mut all = theirs.clone();
    all.extend(ours.unwrap_or_default());
    Some(all)
}

/// `deployment` with the shared Deployment and pod settings of `options`; `main` names the operator's container,
/// which takes the pull policy and lifecycle hooks. Sidecars follow it, init containers run before it.
pub fn with_workload_options(
    mut deployment: Deployment,
    options: Option<&WorkloadOptions>,
    main: &str,
) -> Deployment {
    let Some(options) = options else {
        return deployment;
    };
    deployment.metadata.labels = merged(&options.deployment_labels, deployment.metadata.labels.take());
    deployment.metadata.annotations = merged(
        &options.deployment_annotations,
        deployment.metadata.annotations.take(),
    );
    let Some(spec) = deployment.spec.as_mut() else {
        return deployment;
    };
    if options.strategy.is_some() {
        spec.strategy = options.strategy.clone();
    }
    let template = &mut spec.template;
    let metadata = template.metadata.get_or_insert_with(ObjectMeta::default);
    metadata.labels = merged(&options.pod_labels, metadata.labels.take());
    metadata.annotations = merged(&options.pod_annotations, metadata.annotations.take());
    let pod = template.spec.get_or_insert_with(PodSpec::default);
    if options.priority_class_name.is_some() {
        pod.priority_class_name = options.priority_class_name.clone();
    }
    if !options.host_aliases.is_empty() {
        pod.host_aliases = Some(options.host_aliases.clone());
    }
    if !options.init_containers.is_empty() {
        pod.init_containers = Some(options.init_containers.clone());
    }
    if let Some(container) = pod.containers.iter_mut().find(|c| c.name == main) {
        if let Some(policy) = options.image_pull_policy {
            container.image_pull_policy = Some(policy.as_str().to_owned());
        }
        if options.lifecycle.is_some() {
            container.lifecycle = options.lifecycle.clone();
        }
    }
    pod.containers.extend(options.extra_containers.iter().cloned());
    deployment
}

/// The pod template of `deployment` with the scheduling, security, volume, `envFrom` and CA certificate settings of
/// the provisioner's and the workspace proxy's `settings`, on the pod and on its `main` container.
pub fn with_pod_settings(
    mut deployment: Deployment,
    settings: Option<&PodSettings>,
    main: &str,
) -> Deployment {
    let Some(settings) = settings else {
        return deployment;
    };
    let Some(pod) = deployment.spec.as_mut().and_then(|d| d.template.spec.as_mut()) else {
        return deployment;
    };
    pod.security_context = settings
        .pod_security_context
        .clone()
        .or(pod.security_context.take());
    pod.affinity = settings.affinity.clone().or(pod.affinity.take());
    extend(&mut pod.tolerations, &settings.tolerations);
    extend(
        &mut pod.topology_spread_constraints,
        &settings.topology_spread_constraints,
    );
    if !settings.node_selector.is_empty() {
        pod.node_selector
            .get_or_insert_with(BTreeMap::new)
            .extend(settings.node_selector.clone());
    }
    let (cert_volumes, cert_mounts) = ca_cert_volumes(&settings.certs);
    extend(&mut pod.volumes, &cert_volumes);
    extend(&mut pod.volumes, &settings.volumes);
    if let Some(container) = pod.containers.iter_mut().find(|c| c.name == main) {
        container.security_context = settings
            .security_context
            .clone()
            .or(container.security_context.take());
        extend(&mut container.volume_mounts, &cert_mounts);
        extend(&mut container.volume_mounts, &settings.volume_mounts);
        extend(&mut container.env_from, &settings.env_from);
    }
    deployment
}

/// Appends `items` to a list that is absent while empty (so that an empty list is neither sent nor owned).
fn extend<T: Clone>(list: &mut Option<Vec<T>>, items: &[T]) {
    if !items.is_empty() {
        list.get_or_insert_with(Vec::new).extend(items.iter().cloned());
    }
}

/// The PodDisruptionBudget of `options` for the pods labelled `selector`, with `metadata` (named like the
/// Deployment); `None` when the spec asks for none.
pub fn pod_disruption_budget(
    metadata: ObjectMeta,
    options: Option<&WorkloadOptions>,
    selector: BTreeMap<String, String>,
) -> Option<PodDisruptionBudget> {
    let budget = options?.pod_disruption_budget.as_ref()?;
    let max_unavailable = match (&budget.min_available, &budget.max_unavailable) {
        (None, None) => Some(IntOrString::Int(1)),
        (_, max) => max.clone(),
    };
    Some(PodDisruptionBudget {
        metadata,
        spec: Some(PodDisruptionBudgetSpec {
            min_available: budget.min_available.clone(),
            max_unavailable,
            selector: Some(LabelSelector {
                match_labels: Some(selector),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    })
}

/// The volumes and mounts of the CA certificates of `certs`: one Secret volume per Secret, one mount per key at
/// `/etc/ssl/certs/<file>` (see [`cert_mounts`]).
pub fn ca_cert_volumes(certs: &CertsSpec) -> (Vec<Volume>, Vec<VolumeMount>) {
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    let mut secrets: Vec<String> = Vec::new();
    for cert in cert_mounts(certs) {
        let name = volume_name("ca-cert", &cert.secret);
        if !secrets.contains(&cert.secret) {
            secrets.push(cert.secret.clone());
            volumes.push(secret_volume(name.clone(), &cert.secret));
        }
        mounts.push(VolumeMount {
            name,
            mount_path: format!("/etc/ssl/certs/{}", cert.file),
            sub_path: Some(cert.key),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    (volumes, mounts)
}

/// A volume name for a Secret: `<prefix>-<secret>` when the lowercased name is already a DNS label that fits;
/// otherwise `<prefix>-<sanitized>-<hash8>`, where runs of other characters become one `-` and the hash is the
/// FNV-32a of `<prefix>\0<secret as written>`, so `a.b` and `a-b` never share a volume (the Go operator's names).
pub fn volume_name(prefix: &str, secret: &str) -> String {
    let normalized = secret.to_lowercase();
    let normalized = normalized.trim();
    let sanitized = sanitize_dns_label(normalized);
    let candidate = format!("{prefix}-{sanitized}");
    if candidate.len() <= DNS_LABEL_MAX && sanitized == normalized {
        return candidate;
    }
    let mut hashed = prefix.as_bytes().to_vec();
    hashed.push(0);
    hashed.extend_from_slice(secret.as_bytes());
    let available = DNS_LABEL_MAX.saturating_sub(prefix.len() + 10).max(1);
    let mut kept = sanitized.as_str();
    if kept.len() > available {
        kept = byte_prefix(kept, available).trim_matches('-');
        if kept.is_empty() {
            kept = "x";
        }
    }
    format!("{prefix}-{kept}-{}", fnv32a_hex(&hashed))
}

/// Lowercase `[a-z0-9]` with every run of other bytes as one `-`, no `-` at either end, `x` when nothing is left.
fn sanitize_dns_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut last_dash = false;
    for c in value.trim().to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
            last_dash = false;
        } else if !last_dash {
            out.push('-');
            last_dash = true;
        }
    }
    let trimmed = out.trim_matches('-');
    if trimmed.is_empty() {
        "x".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// A volume of Secret `secret`.
pub fn secret_volume(name: String, secret: &str) -> Volume {
    Volume {
        name,
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_owned()),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// One CA certificate mount: the Secret, its key, and the file under `/etc/ssl/certs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertMount {
    pub secret: String,
    pub key: String,
    pub file: String,
}

/// The CA certificate mounts of `certs.secrets` (the Go operator's files): one per distinct Secret and key;
/// the file is `<secret>.crt`, or `<secret>-<key>.crt` when the Secret is listed more than once; `.crt` is never
/// doubled, and a file name that is still taken gets `-2`, `-3`, ... before `.crt`.
pub fn cert_mounts(certs: &CertsSpec) -> Vec<CertMount> {
    let entries: Vec<(&str, &str)> = certs
        .secrets
        .iter()
        .map(|c| (c.name.trim(), c.key.trim()))
        .filter(|(name, key)| !name.is_empty() && !key.is_empty())
        .collect();
    let listed = |name: &str| entries.iter().filter(|(n, _)| *n == name).count();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    let mut files: Vec<String> = Vec::new();
    let mut mounts = Vec::new();
    for (name, key) in entries.iter().copied() {
        if seen.contains(&(name, key)) {
            continue;
        }
        seen.push((name, key));
        let base = if listed(name) > 1 {
            format!("{name}-{key}")
        } else {
            name.to_owned()
        };
        let file = if base.ends_with(".crt") {
            base
        } else {
            format!("{base}.crt")
        };
        let taken = files.iter().filter(|f| **f == file).count();
        files.push(file.clone());
        let file = if taken > 0 {
            format!("{}-{}.crt", file.trim_end_matches(".crt"), taken + 1)
        } else {
            file
        };
        mounts.push(CertMount {
            secret: name.to_owned(),
            key: key.to_owned(),
            file,
        });
    }
    mounts
}

/// The Secret key a variable reads (tests of the kinds' pod templates).
#[cfg(test)]
pub fn secret_key_of(env: &EnvVar) -> &SecretKeySelector {
    let source = env.value_from.as_ref().expect("the variable reads a Secret");
    source
        .secret_key_ref
        .as_ref()
        .expect("the variable reads a Secret key")
}

#[cfg(test)]
mod tests {
    use coder_k8s_api::workload::{CertSecretSelector, ImagePullPolicy, PodDisruptionBudgetSpec};
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy};
    use k8s_openapi::api::core::v1::{Container, HostAlias, LifecycleHandler, PodTemplateSpec, Toleration};
    use serde_json::json;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// A Deployment as the kinds build it: their labels, one container `main`.
    fn base() -> Deployment {
        let ours = labels(&[("app.kubernetes.io/name", "x")]);
        Deployment {
            metadata: ObjectMeta {
                name: Some("d".into()),
                labels: Some(ours.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(DeploymentSpec {
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(ours),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: "main".into(),
                            ..Container::default()
                        }],
                        ..PodSpec::default()
                    }),
                },
                ..DeploymentSpec::default()
            }),
            ..Deployment::default()
        }
    }

    fn pod(deployment: &Deployment) -> &PodSpec {
        deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
    }

    #[test]
    fn unset_or_empty_settings_leave_the_deployment_as_it_was() {
        assert_eq!(with_workload_options(base(), None, "main"), base());
        assert_eq!(with_pod_settings(base(), None, "main"), base());
        let empty = WorkloadOptions::default();
        assert_eq!(with_workload_options(base(), Some(&empty), "main"), base());
        assert_eq!(
            with_pod_settings(base(), Some(&PodSettings::default()), "main"),
            base()
        );
        assert!(pod_disruption_budget(ObjectMeta::default(), Some(&empty), BTreeMap::new()).is_none());
    }

    /// Every shared Deployment and pod setting set at once.
    fn every_option() -> WorkloadOptions {
        WorkloadOptions {
            deployment_labels: labels(&[("team", "a"), ("app.kubernetes.io/name", "theirs")]),
            deployment_annotations: labels(&[("note", "n")]),
            pod_labels: labels(&[("tier", "web"), ("app.kubernetes.io/name", "theirs")]),
            pod_annotations: labels(&[("prometheus.io/scrape", "true")]),
            priority_class_name: Some("high".into()),
            image_pull_policy: Some(ImagePullPolicy::IfNotPresent),
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                ..DeploymentStrategy::default()
            }),
            host_aliases: vec![HostAlias {
                ip: "10.0.0.1".into(),
                hostnames: Some(vec!["db".into()]),
            }],
            init_containers: vec![Container {
                name: "wait".into(),
                ..Container::default()
            }],
            extra_containers: vec![Container {
                name: "sidecar".into(),
                ..Container::default()
            }],
            lifecycle: Some(k8s_openapi::api::core::v1::Lifecycle {
                pre_stop: Some(LifecycleHandler {
                    sleep: Some(k8s_openapi::api::core::v1::SleepAction { seconds: 5 }),
                    ..LifecycleHandler::default()
                }),
                ..Default::default()
            }),
            pod_disruption_budget: None,
        }
    }

    #[test]
    fn workload_options_reach_the_deployment_and_its_pod_metadata() {
        let deployment = with_workload_options(base(), Some(&every_option()), "main");
        let meta = &deployment.metadata;
        assert_eq!(
            meta.labels.as_ref().unwrap(),
            &labels(&[("team", "a"), ("app.kubernetes.io/name", "x")]),
            "the operator's label wins"
        );
        assert_eq!(meta.annotations.as_ref().unwrap()["note"], "n");
        let spec = deployment.spec.as_ref().unwrap();
        assert_eq!(spec.strategy.as_ref().unwrap().type_.as_deref(), Some("Recreate"));
        let template = spec.template.metadata.as_ref().unwrap();
        assert_eq!(
            template.labels.as_ref().unwrap(),
            &labels(&[("tier", "web"), ("app.kubernetes.io/name", "x")]),
            "the selector label stays the operator's"
        );
        assert_eq!(
            template.annotations.as_ref().unwrap()["prometheus.io/scrape"],
            "true"
        );
    }

    #[test]
    fn workload_options_reach_the_pod_and_the_operator_container() {
        let deployment = with_workload_options(base(), Some(&every_option()), "main");
        let pod = pod(&deployment);
        assert_eq!(pod.priority_class_name.as_deref(), Some("high"));
        assert_eq!(pod.host_aliases.as_ref().unwrap()[0].ip, "10.0.0.1");
        assert_eq!(pod.init_containers.as_ref().unwrap()[0].name, "wait");
        let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["main", "sidecar"],
            "sidecars follow the operator's container"
        );
        assert_eq!(
            pod.containers[0].image_pull_policy.as_deref(),
            Some("IfNotPresent")
        );
        assert!(pod.containers[0].lifecycle.is_some());
        assert!(
            pod.containers[1].lifecycle.is_none(),
            "hooks are the operator's container's only"
        );
    }

    #[test]
    fn pod_settings_reach_the_pod_and_operator_container_with_ca_certificates() {
        let settings = PodSettings {
            tolerations: vec![Toleration {
                key: Some("gpu".into()),
                ..Toleration::default()
            }],
            node_selector: labels(&[("pool", "builds")]),
            env_from: vec![serde_json::from_value(json!({"configMapRef": {"name": "cfg"}})).unwrap()],
            volumes: vec![serde_json::from_value(json!({"name": "cache", "emptyDir": {}})).unwrap()],
            volume_mounts: vec![
                serde_json::from_value(json!({"name": "cache", "mountPath": "/cache"})).unwrap(),
            ],
            certs: CertsSpec {
                secrets: vec![CertSecretSelector {
                    name: "corp-ca".into(),
                    key: "ca.crt".into(),
                }],
            },
            security_context: Some(serde_json::from_value(json!({"runAsNonRoot": true})).unwrap()),
            ..PodSettings::default()
        };
        let deployment = with_pod_settings(base(), Some(&settings), "main");
        let pod = pod(&deployment);
        assert_eq!(pod.tolerations.as_ref().unwrap()[0].key.as_deref(), Some("gpu"));
        assert_eq!(pod.node_selector.as_ref().unwrap()["pool"], "builds");
        let volumes: Vec<&str> = pod
            .volumes
            .as_ref()
            .unwrap()
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(volumes, ["ca-cert-corp-ca", "cache"]);
        let main = &pod.containers[0];
        let mounts: Vec<(&str, Option<&str>)> = main
            .volume_mounts
            .as_ref()
            .unwrap()
            .iter()
            .map(|m| (m.mount_path.as_str(), m.sub_path.as_deref()))
            .collect();
        assert_eq!(
            mounts,
            [("/etc/ssl/certs/corp-ca.crt", Some("ca.crt")), ("/cache", None)]
        );
        assert_eq!(main.env_from.as_ref().unwrap().len(), 1);
        assert_eq!(
            main.security_context.as_ref().unwrap().run_as_non_root,
            Some(true)
        );
    }

    #[test]
    fn a_budget_keeps_one_pod_unless_it_says_otherwise() {
        let selector = labels(&[("app", "x")]);
        let with = |budget: PodDisruptionBudgetSpec| WorkloadOptions {
            pod_disruption_budget: Some(budget),
            ..WorkloadOptions::default()
        };
        let default = pod_disruption_budget(
            ObjectMeta::default(),
            Some(&with(PodDisruptionBudgetSpec::default())),
            selector.clone(),
        )
        .unwrap();
        let spec = default.spec.unwrap();
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(spec.min_available, None);
        assert_eq!(spec.selector.unwrap().match_labels.unwrap(), selector);
        let min = with(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::String("50%".into())),
            max_unavailable: None,
        });
        let spec = pod_disruption_budget(ObjectMeta::default(), Some(&min), selector)
            .unwrap()
            .spec
            .unwrap();
        assert_eq!(
            (spec.min_available, spec.max_unavailable),
            (Some(IntOrString::String("50%".into())), None)
        );
    }

    fn spec_of(value: serde_json::Value) -> ServiceSpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn service_options_apply_where_the_type_has_them() {
        let ports = || vec![service_port("http", 80, 8080), service_port("https", 443, 8443)];
        let options = json!({"externalTrafficPolicy": "Local", "loadBalancerIP": "1.2.3.4", "loadBalancerClass": "lb",
            "sessionAffinity": "ClientIP", "nodePort": 30080, "httpsNodePort": 30443,
            "extraPorts": [{"name": "ssh", "port": 22, "targetPort": 2222}]});
        let mut balancer = options.clone();
        balancer["type"] = json!("LoadBalancer");
        let balanced = service(
            ObjectMeta::default(),
            &spec_of(balancer),
            BTreeMap::new(),
            ports(),
        );
        let spec = balanced.spec.unwrap();
        assert_eq!(spec.external_traffic_policy.as_deref(), Some("Local"));
        assert_eq!(spec.load_balancer_ip.as_deref(), Some("1.2.3.4"));
        assert_eq!(spec.load_balancer_class.as_deref(), Some("lb"));
        assert_eq!(spec.session_affinity.as_deref(), Some("ClientIP"));
        let ports_of = |spec: &K8sServiceSpec| -> Vec<(String, Option<i32>)> {
            spec.ports
                .as_ref()
                .unwrap()
                .iter()
                .map(|p| (p.name.clone().unwrap_or_default(), p.node_port))
                .collect()
        };
        assert_eq!(
            ports_of(&spec),
            [
                ("http".into(), Some(30080)),
                ("https".into(), Some(30443)),
                ("ssh".into(), None)
            ]
        );
        let cluster = service(ObjectMeta::default(), &spec_of(options), BTreeMap::new(), ports());
        let spec = cluster.spec.unwrap();
        assert_eq!(
            spec.external_traffic_policy, None,
            "Kubernetes refuses it on a ClusterIP Service"
        );
        assert_eq!(
            (&spec.load_balancer_ip, &spec.load_balancer_class),
            (&None, &None)
        );
        assert_eq!(spec.session_affinity.as_deref(), Some("ClientIP"));
        assert_eq!(ports_of(&spec)[0], ("http".into(), None));
        let plain = service(
            ObjectMeta::default(),
            &spec_of(json!({})),
            BTreeMap::new(),
            ports(),
        );
        let plain = plain.spec.unwrap();
        assert_eq!(plain.session_affinity, None);
        assert_eq!(plain.ports.as_ref().unwrap().len(), 2);
    }
}
