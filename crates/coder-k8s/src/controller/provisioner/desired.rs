//! The desired objects of a CoderProvisioner (docs/controllers/provisioner.md, "What it creates"). Pure functions.

use std::collections::BTreeMap;

use coder_k8s_api::provisioner::{CoderProvisioner, CoderProvisionerSpec};
use coder_k8s_api::shared::DEFAULT_CODER_IMAGE;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, PodSpec, PodTemplateSpec, SecretKeySelector, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Resource;

use super::names::{ProvisionerNames, labels, names};

/// Pod annotation with a hash of the key, so a new key rolls the pods.
pub const KEY_CHECKSUM_ANNOTATION: &str = "checksum/provisioner-key";

/// What the shell resolved for the builder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inputs {
    /// `status.url` of the control plane: the pods connect there (not the operator's internal URL).
    pub control_plane_url: String,
    /// The control plane's `spec.image`, used when the provisioner names no image.
    pub control_plane_image: Option<String>,
    /// Hash of the current key, put on the pod template so a new key rolls the pods.
    pub key_checksum: String,
}

/// The objects a provisioner owns, in apply order.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredState {
    pub service_account: ServiceAccount,
    pub role: Role,
    pub role_binding: RoleBinding,
    pub deployment: Deployment,
}

/// Builds the desired objects; `None` for an object without name, namespace or UID.
pub fn desired_state(provisioner: &CoderProvisioner, inputs: &Inputs) -> Option<DesiredState> {
    let name = provisioner.metadata.name.clone()?;
    let namespace = provisioner.metadata.namespace.clone()?;
    let owner = provisioner.controller_owner_ref(&())?;
    let spec = &provisioner.spec;
    let names = names(&name, spec);
    let meta = |object_name: &str| ObjectMeta {
        name: Some(object_name.to_owned()),
        namespace: Some(namespace.clone()),
        labels: Some(labels(&name)),
        owner_references: Some(vec![owner.clone()]),
        ..ObjectMeta::default()
    };
    Some(DesiredState {
        service_account: ServiceAccount {
            metadata: meta(&names.service_account),
            ..ServiceAccount::default()
        },
        role: Role {
            metadata: meta(&names.role),
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["pods".to_owned(), "persistentvolumeclaims".to_owned()]),
                verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
                ..PolicyRule::default()
            }]),
        },
        role_binding: RoleBinding {
            metadata: meta(&names.role),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_owned(),
                kind: "Role".to_owned(),
                name: names.role.clone(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: names.service_account.clone(),
                namespace: Some(namespace.clone()),
                ..Subject::default()
            }]),
        },
        deployment: deployment(&name, spec, &names, inputs, meta(&names.deployment)),
    })
}

fn deployment(
    name: &str,
    spec: &CoderProvisionerSpec,
    names: &ProvisionerNames,
    inputs: &Inputs,
    metadata: ObjectMeta,
) -> Deployment {
    let image = spec
        .image
        .clone()
        .filter(|i| !i.is_empty())
        .or_else(|| inputs.control_plane_image.clone().filter(|i| !i.is_empty()))
        .unwrap_or_else(|| DEFAULT_CODER_IMAGE.to_owned());
    let mut args = vec!["provisioner".to_owned(), "start".to_owned()];
    args.extend(spec.extra_args.iter().cloned());
    let mut env = vec![
        EnvVar {
            name: "CODER_URL".to_owned(),
            value: Some(inputs.control_plane_url.clone()),
            ..EnvVar::default()
        },
        EnvVar {
            name: "CODER_PROVISIONER_DAEMON_KEY".to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: names.key_secret.clone(),
                    key: names.key_secret_key.clone(),
                    // Unset, as the Go operator writes it: `optional: false` would be a different pod template and
                    // roll every provisioner pod on an upgrade from it.
                    optional: None,
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        },
    ];
    env.extend(spec.extra_env.iter().cloned());
    Deployment {
        metadata,
        spec: Some(DeploymentSpec {
            replicas: Some(spec.replicas.unwrap_or(1)),
            selector: LabelSelector {
                match_labels: Some(labels(name)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(name)),
                    annotations: Some(BTreeMap::from([(
                        KEY_CHECKSUM_ANNOTATION.to_owned(),
                        inputs.key_checksum.clone(),
                    )])),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(names.service_account.clone()),
                    termination_grace_period_seconds: Some(
                        spec.termination_grace_period_seconds.unwrap_or(600),
                    ),
                    image_pull_secrets: (!spec.image_pull_secrets.is_empty())
                        .then(|| spec.image_pull_secrets.clone()),
                    containers: vec![Container {
                        name: "provisioner".to_owned(),
                        image: Some(image),
                        command: Some(vec!["coder".to_owned()]),
                        args: Some(args),
                        env: Some(env),
                        resources: spec.resources.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn provisioner(spec: serde_json::Value) -> CoderProvisioner {
        let mut p = CoderProvisioner::new("coderprovisioner-sample", serde_json::from_value(spec).unwrap());
        p.metadata.namespace = Some("coder".to_owned());
        p.metadata.uid = Some("uid-p".to_owned());
        p
    }

    fn inputs() -> Inputs {
        Inputs {
            control_plane_url: "http://codercontrolplane-sample.coder.svc.cluster.local:80".to_owned(),
            control_plane_image: Some("ghcr.io/coder/coder:v2.30.0".to_owned()),
            key_checksum: "abc".to_owned(),
        }
    }

    #[test]
    fn deployment_runs_the_provisioner_with_the_key() {
        let p = provisioner(serde_json::json!({
            "controlPlaneRef": {"name": "codercontrolplane-sample"},
            "extraArgs": ["--verbose"],
            "extraEnv": [{"name": "EXTRA", "value": "1"}],
        }));
        let state = desired_state(&p, &inputs()).unwrap();
        let spec = state.deployment.spec.unwrap();
        let template = spec.template;
        assert_eq!(
            template.metadata.unwrap().annotations.unwrap()[KEY_CHECKSUM_ANNOTATION],
            "abc"
        );
        let pod = template.spec.unwrap();
        assert_eq!(
            pod.service_account_name.as_deref(),
            Some("coderprovisioner-sample-provisioner")
        );
        assert_eq!(pod.termination_grace_period_seconds, Some(600));
        let container = &pod.containers[0];
        assert_eq!(container.name, "provisioner");
        assert_eq!(container.image.as_deref(), Some("ghcr.io/coder/coder:v2.30.0"));
        assert_eq!(container.command.as_ref().unwrap(), &["coder"]);
        assert_eq!(
            container.args.as_ref().unwrap(),
            &["provisioner", "start", "--verbose"]
        );
        let env: Vec<&str> = container
            .env
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(env, ["CODER_URL", "CODER_PROVISIONER_DAEMON_KEY", "EXTRA"]);
        let key = container.env.as_ref().unwrap()[1]
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (key.name.as_str(), key.key.as_str()),
            ("coderprovisioner-sample-provisioner-key", "key")
        );
        // The Go operator's selector carries only name and key (`optional` unset, not `false`).
        assert_eq!(key.optional, None);
        assert_eq!(
            state.role_binding.role_ref.name,
            "provisioner-coderprovisioner-sample"
        );
        assert_eq!(state.role.rules.unwrap()[0].verbs.len(), 7);
    }
}
