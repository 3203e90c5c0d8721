//! What a CoderProvisioner should have (docs/controllers/provisioner.md, "What it creates"), pure: the names and
//! labels of what it creates, the tags hash of its key, the ServiceAccount, Role, RoleBinding and Deployment, and the
//! key plan (reuse, create, rotate, replace, or leave a key alone that nothing proves is this provisioner's).

use std::collections::BTreeMap;

use coder_k8s_api::provisioner::{
    CONTAINER_NAME, CoderProvisioner, CoderProvisionerSpec, CoderProvisionerStatus, DEFAULT_KEY_SECRET_KEY,
};
use coder_k8s_api::shared::{DEFAULT_CODER_IMAGE, DNS_LABEL_MAX, DNS_SUBDOMAIN_MAX};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Resource;

use crate::digest::{fnv32a_hex, hashed_name, hashed_object_name};
use crate::ownership::created_after;
use crate::workload::{self, secret_env, value_env};

/// `app.kubernetes.io/name` of provisioner objects.
pub const APP_NAME: &str = "coder-provisioner";
/// The organization of a spec that names none (also of `organizationName: ""`).
pub const DEFAULT_ORGANIZATION: &str = "default";
/// Longest provisioner key name Coder accepts.
const KEY_NAME_MAX: usize = 128;
/// Annotation on the owned key Secret: the ID of the key in Coder whose value the Secret holds, written by the
/// operator once it learnt the ID. The proof that a key is this provisioner's (status can be written by others).
pub const KEY_ID_ANNOTATION: &str = "coder.com/provisioner-key-id";
/// Annotation on the owned key Secret while a key create is under way: when the operator began it (RFC 3339),
/// written before the one create call. A key of the key's name that Coder created after it is this provisioner's, so
/// a create cut off before the key and its ID reached the Secret (a crash, a lost leader) leaves no key nobody owns:
/// the next pass replaces it.
pub const KEY_CREATE_STARTED_ANNOTATION: &str = "coder.com/provisioner-key-create-started-at";

/// Names of the objects a provisioner owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProvisionerNames {
    pub deployment: String,
    pub service_account: String,
    pub role: String,
    pub key_secret: String,
    pub key_secret_key: String,
    pub key_name: String,
}

/// Names derived from the object name and spec, the Go operator's names: over their limit, the Deployment and Role
/// (`provisioner-<name>`, 63), the ServiceAccount (`<name>-provisioner`, 63) and the default key Secret
/// (`<name>-provisioner-key`, 253) keep a prefix of the name, `-` and the FNV-32a of the name; a key name over 128
/// bytes keeps 119 bytes, `-` and the FNV-32a of the key name.
pub fn names(name: &str, spec: &CoderProvisionerSpec) -> ProvisionerNames {
    let deployment = hashed_object_name("provisioner-", name, "", DNS_LABEL_MAX);
    let given = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
    let key_name = given(&spec.key.name).unwrap_or_else(|| name.to_owned());
    ProvisionerNames {
        role: deployment.clone(),
        deployment,
        service_account: hashed_object_name("", name, "-provisioner", DNS_LABEL_MAX),
        key_secret: given(&spec.key.secret_name)
            .unwrap_or_else(|| hashed_object_name("", name, "-provisioner-key", DNS_SUBDOMAIN_MAX)),
        key_secret_key: given(&spec.key.secret_key).unwrap_or_else(|| DEFAULT_KEY_SECRET_KEY.to_owned()),
        key_name: hashed_name("", &key_name, "", KEY_NAME_MAX),
    }
}

/// The Coder organization of the key: `spec.organizationName`, `default` when empty.
pub fn organization_name(spec: &CoderProvisionerSpec) -> &str {
    match spec.organization_name.as_str() {
        "" => DEFAULT_ORGANIZATION,
        named => named,
    }
}

/// Labels of the provisioner's objects.
pub fn labels(name: &str) -> BTreeMap<String, String> {
    crate::labels::labels(APP_NAME, name)
}

/// `status.tagsHash`: 8 hex of FNV-32a over the tags sorted by key, each as `key \0 value \0` (the Go operator's
/// value, so a status it wrote shows no drift).
pub fn tags_hash(tags: &BTreeMap<String, String>) -> String {
    let mut bytes = Vec::new();
    for (key, value) in tags {
        bytes.extend_from_slice(key.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(value.as_bytes());
        bytes.push(0);
    }
    fnv32a_hex(&bytes)
}

/// The `checksum/provisioner-key` pod annotation: 8 hex of FNV-32a of the key (the Go operator's value, so an
/// upgrade does not roll the pods).
pub fn key_checksum(key: &str) -> String {
    fnv32a_hex(key.as_bytes())
}

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
    /// The replicas `spec.autoscaling` set from Coder's job queue, in place of `spec.replicas`.
    pub replicas: Option<i32>,
}

/// The label selector of the daemons' pods, as the scale subresource publishes it (`status.selector`).
pub fn selector(name: &str) -> String {
    labels(name)
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The objects a provisioner owns, in apply order.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredState {
    pub service_account: ServiceAccount,
    pub role: Role,
    pub role_binding: RoleBinding,
    pub deployment: Deployment,
    /// `spec.podDisruptionBudget`.
    pub pod_disruption_budget: Option<PodDisruptionBudget>,
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
        service_account: service_account(meta(&names.service_account), spec),
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
        pod_disruption_budget: workload::pod_disruption_budget(
            meta(&names.deployment),
            spec.workload.get(),
            labels(&name),
        ),
    })
}

/// The daemons' ServiceAccount, with the spec's annotations and labels (the operator's labels win a clash).
fn service_account(mut metadata: ObjectMeta, spec: &CoderProvisionerSpec) -> ServiceAccount {
    if let Some(wanted) = &spec.service_account {
        if !wanted.annotations.is_empty() {
            metadata.annotations = Some(wanted.annotations.clone());
        }
        let mut labels = wanted.labels.clone();
        labels.extend(metadata.labels.take().unwrap_or_default());
        metadata.labels = Some(labels);
    }
    ServiceAccount {
        metadata,
        ..ServiceAccount::default()
    }
}

fn deployment(
    name: &str,
    spec: &CoderProvisionerSpec,
    names: &ProvisionerNames,
    inputs: &Inputs,
    metadata: ObjectMeta,
) -> Deployment {
    let deployment = base_deployment(name, spec, names, inputs, metadata);
    let deployment = workload::with_pod_settings(deployment, spec.pod.get(), CONTAINER_NAME);
    workload::with_workload_options(deployment, spec.workload.get(), CONTAINER_NAME)
}

fn base_deployment(
    name: &str,
    spec: &CoderProvisionerSpec,
    names: &ProvisionerNames,
    inputs: &Inputs,
    metadata: ObjectMeta,
) -> Deployment {
    Deployment {
        metadata,
        spec: Some(DeploymentSpec {
            replicas: Some(inputs.replicas.unwrap_or(spec.replicas.unwrap_or(1))),
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
                spec: Some(pod_spec(spec, names, inputs)),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// `coder provisioner start` with the control plane's URL and the key from its Secret, under the provisioner's
/// ServiceAccount.
fn pod_spec(spec: &CoderProvisionerSpec, names: &ProvisionerNames, inputs: &Inputs) -> PodSpec {
    let image = spec
        .image
        .clone()
        .filter(|i| !i.is_empty())
        .or_else(|| inputs.control_plane_image.clone().filter(|i| !i.is_empty()))
        .unwrap_or_else(|| DEFAULT_CODER_IMAGE.to_owned());
    let mut args = vec!["provisioner".to_owned(), "start".to_owned()];
    args.extend(spec.extra_args.iter().cloned());
    PodSpec {
        service_account_name: Some(names.service_account.clone()),
        termination_grace_period_seconds: Some(spec.termination_grace_period_seconds.unwrap_or(600)),
        image_pull_secrets: (!spec.image_pull_secrets.is_empty()).then(|| spec.image_pull_secrets.clone()),
        containers: vec![Container {
            name: CONTAINER_NAME.to_owned(),
            image: Some(image),
            command: Some(vec!["coder".to_owned()]),
            args: Some(args),
            env: Some(env(spec, names, inputs)),
            resources: spec.resources.clone(),
            ..Container::default()
        }],
        ..PodSpec::default()
    }
}

/// `CODER_URL`, the key from its Secret, then the spec's own variables.
fn env(spec: &CoderProvisionerSpec, names: &ProvisionerNames, inputs: &Inputs) -> Vec<EnvVar> {
    let (secret, key) = (&names.key_secret, &names.key_secret_key);
    let mut env = vec![
        value_env("CODER_URL", inputs.control_plane_url.clone()),
        // `optional` unset, as the Go operator writes it: `optional: false` would be a different pod template and
        // roll every provisioner pod on an upgrade from it.
        secret_env("CODER_PROVISIONER_DAEMON_KEY", secret, key, None),
    ];
    env.extend(spec.extra_env.iter().cloned());
    env
}

/// What the key was made from; a change of any of these rotates the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyInputs {
    pub organization_name: String,
    pub key_name: String,
    pub tags_hash: String,
    pub control_plane: String,
    pub control_plane_url: String,
}

/// Whether the recorded key still matches its inputs, so that, with its Secret present, no Coder call is needed.
/// `resolved` is what the spec's organization (a name, or an alias such as `default`) was last found to be in
/// Coder: `(spec organization, organization ID)`, as the provisioner's memory keeps it.
pub fn key_current(
    status: &CoderProvisionerStatus,
    inputs: &KeyInputs,
    resolved: Option<(&str, &str)>,
) -> bool {
    let Some(organization_id) = status.organization_id.as_deref() else {
        return false;
    };
    let same_organization = status.organization_name.as_deref() == Some(inputs.organization_name.as_str())
        || resolved == Some((inputs.organization_name.as_str(), organization_id));
    status.provisioner_key_id.is_some() && same_organization && !drifted(status, organization_id, inputs)
}

/// Whether a recorded key was made from other inputs than now (organization ID, name, tags, control plane).
pub fn drifted(status: &CoderProvisionerStatus, organization_id: &str, inputs: &KeyInputs) -> bool {
    status.provisioner_key_id.is_some()
        && (status.organization_id.as_deref() != Some(organization_id)
            || status.provisioner_key_name.as_deref() != Some(inputs.key_name.as_str())
            || status.tags_hash.as_deref() != Some(inputs.tags_hash.as_str())
            || status.control_plane_ref_name.as_deref() != Some(inputs.control_plane.as_str())
            || status.control_plane_url.as_deref() != Some(inputs.control_plane_url.as_str()))
}

/// What to do with the key in Coder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyPlan {
    /// The stored Secret holds the key Coder lists under this ID.
    Reuse { key_id: String },
    /// No key of this name: create one.
    Create,
    /// A key of this name that this provisioner created but cannot use (no Secret, or drift): delete it, then
    /// create one, so there is never more than one.
    Replace { old_name: String },
    /// A key of this name that this provisioner did not create: neither used nor deleted.
    NotOwned { name: String },
    /// The key only `status.provisionerKeyID` names (a key Secret without a recorded ID) can no longer be used as
    /// it is (no key in the Secret, or drift): replacing it would delete it on the status's word, so nothing is done.
    Unproven { name: String },
}

/// A key Coder lists under the spec's name.
#[derive(Clone, Copy, Debug)]
pub struct ListedKey<'a> {
    pub id: &'a str,
    pub name: &'a str,
    /// When Coder created it (RFC 3339).
    pub created_at: &'a str,
}

/// What proves that a key Coder lists is this provisioner's. `status.provisionerKeyID` is not among the proofs:
/// anyone with status write access can set it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyProof<'a> {
    /// The key ID the operator wrote on the owned key Secret (`coder.com/provisioner-key-id`) once it learnt it.
    pub annotated_id: Option<&'a str>,
    /// This operator process created a key of this name in this organization and has not learnt its ID yet.
    pub created_here: bool,
    /// `status.provisionerKeyID` of a provisioner whose owned key Secret holds a key but carries no recorded ID (the
    /// Go operator's, or this operator's from before it recorded IDs there): that key is used as it is, but never
    /// replaced or deleted on the status's word.
    pub legacy_id: Option<&'a str>,
    /// The create marker on the owned key Secret (`coder.com/provisioner-key-create-started-at`): a key Coder created
    /// after it is this provisioner's.
    pub create_started_at: Option<&'a str>,
}

/// Decides from Coder's key of this name (if any), the proof of ownership, whether the owned Secret holds a key,
/// and drift. A listed key is this provisioner's only when the key Secret names its ID (or it was just created
/// here): a key of the same name made by anyone else is never taken over or deleted, and a key only the status names
/// is at most used as it is.
pub fn key_plan(
    listed: Option<ListedKey<'_>>,
    proof: KeyProof<'_>,
    secret_holds_key: bool,
    drifted: bool,
) -> KeyPlan {
    let Some(listed) = listed else {
        return KeyPlan::Create;
    };
    let marked = proof
        .create_started_at
        .is_some_and(|started| created_after(listed.created_at, started));
    let proven = proof.created_here || marked || proof.annotated_id == Some(listed.id);
    let usable = secret_holds_key && !drifted;
    let legacy = proof.legacy_id == Some(listed.id);
    match (proven, usable, legacy) {
        (true, true, _) | (false, true, true) => KeyPlan::Reuse {
            key_id: listed.id.to_owned(),
        },
        (true, false, _) => KeyPlan::Replace {
            old_name: listed.name.to_owned(),
        },
        (false, false, true) => KeyPlan::Unproven {
            name: listed.name.to_owned(),
        },
        (false, _, false) => KeyPlan::NotOwned {
            name: listed.name.to_owned(),
        },
    }
}

/// What deleting the provisioner does about its key in Coder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyCleanup<'a> {
    /// No organization recorded: no key was ever asked of Coder, so there is no Coder call.
    Nothing,
    /// The key Secret records no key ID: nothing proves that the key the status may name is this provisioner's, so
    /// it stays valid in Coder.
    Unproven,
    /// Delete the key with this ID (the key Secret's record) in this organization (the status's record).
    Delete {
        organization_id: &'a str,
        key_id: &'a str,
    },
}

/// The key the finalizer deletes: the one the key Secret records (`annotated_id`), in the organization the status
/// records, whether or not the status names a key at all: a pass can fail after the Secret recorded a new key and
/// before the status did, and the status's key ID proves nothing either way.
pub fn key_cleanup<'a>(status: &'a CoderProvisionerStatus, annotated_id: Option<&'a str>) -> KeyCleanup<'a> {
    match (status.organization_id.as_deref(), annotated_id) {
        (None, _) => KeyCleanup::Nothing,
        (Some(_), None) => KeyCleanup::Unproven,
        (Some(organization_id), Some(key_id)) => KeyCleanup::Delete {
            organization_id,
            key_id,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::status::{key_not_owned, key_unproven};
    use super::*;
    use crate::conditions::ConditionStatus;
    use coder_k8s_api::provisioner::reasons;

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
            replicas: None,
        }
    }

    fn key_inputs() -> KeyInputs {
        KeyInputs {
            organization_name: "coder".to_owned(),
            key_name: "p".to_owned(),
            tags_hash: "h".to_owned(),
            control_plane: "cp".to_owned(),
            control_plane_url: "http://cp".to_owned(),
        }
    }

    fn recorded() -> CoderProvisionerStatus {
        CoderProvisionerStatus {
            provisioner_key_id: Some("k1".to_owned()),
            organization_id: Some("o1".to_owned()),
            organization_name: Some("coder".to_owned()),
            provisioner_key_name: Some("p".to_owned()),
            tags_hash: Some("h".to_owned()),
            control_plane_ref_name: Some("cp".to_owned()),
            control_plane_url: Some("http://cp".to_owned()),
            ..Default::default()
        }
    }

    #[test]
    fn seed_000_names() {
        let spec: CoderProvisionerSpec = serde_json::from_value(
            serde_json::json!({"controlPlaneRef": {"name": "codercontrolplane-sample"}}),
        )
        .unwrap();
        let n = names("coderprovisioner-sample", &spec);
        assert_eq!(n.deployment, "provisioner-coderprovisioner-sample");
        assert_eq!(n.service_account, "coderprovisioner-sample-provisioner");
        assert_eq!(n.role, "provisioner-coderprovisioner-sample");
        assert_eq!(n.key_secret, "coderprovisioner-sample-provisioner-key");
        assert_eq!(n.key_secret_key, "key");
        assert_eq!(n.key_name, "coderprovisioner-sample");
        let long = names(&"p".repeat(70), &spec);
        assert!(long.deployment.len() <= 63 && long.service_account.len() <= 63);
    }

    #[test]
    fn tags_hash_and_key_checksum_are_the_go_operators() {
        // Expected values computed independently with python3 (FNV-32a, offset 0x811c9dc5, prime 0x01000193):
        // b"scope\0organization\0" -> cf1b2b92; b"pool\0gpu\0scope\0organization\0" -> a12cf0d4; b"" -> 811c9dc5;
        // b"test-provisioner-key-material" -> 3856bd10.
        let one = BTreeMap::from([("scope".to_owned(), "organization".to_owned())]);
        assert_eq!(tags_hash(&one), "cf1b2b92");
        let two = BTreeMap::from([
            ("scope".to_owned(), "organization".to_owned()),
            ("pool".to_owned(), "gpu".to_owned()),
        ]);
        assert_eq!(tags_hash(&two), "a12cf0d4", "sorted by key");
        assert_eq!(tags_hash(&BTreeMap::new()), "811c9dc5");
        assert_eq!(key_checksum("test-provisioner-key-material"), "3856bd10");
    }

    #[test]
    fn long_names_are_the_go_operators() {
        let spec: CoderProvisionerSpec =
            serde_json::from_value(serde_json::json!({"controlPlaneRef": {"name": "cp"}})).unwrap();
        // 60 p's: FNV-32a 73896435 (python3).
        let name = "p".repeat(60);
        let n = names(&name, &spec);
        assert_eq!(n.deployment, format!("provisioner-{}-73896435", "p".repeat(42)));
        assert_eq!(n.role, n.deployment);
        assert_eq!(
            n.service_account,
            format!("{}-73896435-provisioner", "p".repeat(42))
        );
        assert_eq!(n.key_secret, format!("{name}-provisioner-key"), "fits in 253");
        // 51 characters is the longest name that keeps provisioner-<name>.
        let fits = "q".repeat(51);
        assert_eq!(names(&fits, &spec).deployment, format!("provisioner-{fits}"));
        let very_long = "r".repeat(250);
        let hash = fnv32a_hex(very_long.as_bytes());
        let n = names(&very_long, &spec);
        assert_eq!(
            n.key_secret,
            format!("{}-{hash}-provisioner-key", "r".repeat(228))
        );
        assert_eq!(n.key_name, format!("{}-{hash}", "r".repeat(119)));
    }

    #[test]
    fn an_empty_organization_is_default() {
        let spec = |org: &str| -> CoderProvisionerSpec {
            serde_json::from_value(
                serde_json::json!({"controlPlaneRef": {"name": "cp"}, "organizationName": org}),
            )
            .unwrap()
        };
        assert_eq!(organization_name(&spec("")), "default");
        assert_eq!(organization_name(&spec("data")), "data");
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
        let key = crate::workload::secret_key_of(&container.env.as_ref().unwrap()[1]);
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

    #[test]
    fn a_current_key_needs_no_coder_call_and_any_input_change_drifts() {
        assert!(key_current(&recorded(), &key_inputs(), None));
        assert!(!key_current(
            &CoderProvisionerStatus::default(),
            &key_inputs(),
            None
        ));
        let mut changed = key_inputs();
        changed.tags_hash = "other".to_owned();
        assert!(!key_current(&recorded(), &changed, None));
        assert!(drifted(&recorded(), "o1", &changed));
        assert!(drifted(&recorded(), "o2", &key_inputs()), "another organization");
        assert!(
            !drifted(&CoderProvisionerStatus::default(), "o1", &changed),
            "no key yet, nothing drifts"
        );
        let mut renamed_org = key_inputs();
        renamed_org.organization_name = "other".to_owned();
        assert!(
            !key_current(&recorded(), &renamed_org, None),
            "a new organization name is looked up in Coder"
        );
        // `default` resolved to the organization named `coder` (ID o1) needs no new look-up.
        let mut alias = key_inputs();
        alias.organization_name = "default".to_owned();
        assert!(!key_current(&recorded(), &alias, None));
        assert!(key_current(&recorded(), &alias, Some(("default", "o1"))));
        assert!(
            !key_current(&recorded(), &alias, Some(("default", "o2"))),
            "resolved to another organization"
        );
    }

    fn annotated(id: &str) -> KeyProof<'_> {
        KeyProof {
            annotated_id: Some(id),
            ..KeyProof::default()
        }
    }

    #[test]
    fn key_plans() {
        let k1 = Some(ListedKey {
            id: "k1",
            name: "p",
            created_at: "2026-12-06T07:00:00Z",
        });
        assert_eq!(
            key_plan(k1, annotated("k1"), true, false),
            KeyPlan::Reuse {
                key_id: "k1".to_owned()
            }
        );
        assert_eq!(
            key_plan(k1, annotated("k1"), false, false),
            KeyPlan::Replace {
                old_name: "p".to_owned()
            }
        );
        assert_eq!(
            key_plan(k1, annotated("k1"), true, true),
            KeyPlan::Replace {
                old_name: "p".to_owned()
            }
        );
        assert_eq!(key_plan(None, annotated("k1"), true, false), KeyPlan::Create);
        assert_eq!(key_plan(None, KeyProof::default(), false, false), KeyPlan::Create);
    }

    #[test]
    fn a_key_this_provisioner_did_not_create_is_never_used_or_replaced() {
        let k1 = Some(ListedKey {
            id: "k1",
            name: "p",
            created_at: "2026-12-06T07:00:00Z",
        });
        let not_owned = KeyPlan::NotOwned { name: "p".to_owned() };
        for (proof, secret_holds_key, drifted) in [
            (KeyProof::default(), false, false),
            (KeyProof::default(), true, false),
            (KeyProof::default(), false, true),
            (annotated("k0"), true, false),
            (annotated("k0"), false, false),
            (annotated("k0"), true, true),
        ] {
            assert_eq!(
                key_plan(k1, proof, secret_holds_key, drifted),
                not_owned,
                "{proof:?}, secret holds a key {secret_holds_key}, drifted {drifted}"
            );
        }
        let here = KeyProof {
            created_here: true,
            ..KeyProof::default()
        };
        assert_eq!(
            key_plan(k1, here, false, false),
            KeyPlan::Replace {
                old_name: "p".to_owned()
            },
            "created by this operator, ID not learnt yet"
        );
        let condition = key_not_owned("p");
        assert_eq!(
            (condition.reason, condition.status),
            (reasons::PROVISIONER_KEY_NOT_OWNED, ConditionStatus::False)
        );
    }
    #[test]
    fn a_key_only_the_status_names_is_used_as_it_is_but_never_replaced() {
        let k1 = Some(ListedKey {
            id: "k1",
            name: "p",
            created_at: "2026-12-06T07:00:00Z",
        });
        let legacy = KeyProof {
            legacy_id: Some("k1"),
            ..KeyProof::default()
        };
        assert_eq!(
            key_plan(k1, legacy, true, false),
            KeyPlan::Reuse {
                key_id: "k1".to_owned()
            },
            "a key the Go operator recorded keeps working"
        );
        for (secret_holds_key, drifted) in [(false, false), (true, true)] {
            assert_eq!(
                key_plan(k1, legacy, secret_holds_key, drifted),
                KeyPlan::Unproven { name: "p".to_owned() }
            );
        }
        let other = KeyProof {
            legacy_id: Some("k0"),
            ..KeyProof::default()
        };
        assert_eq!(
            key_plan(k1, other, true, false),
            KeyPlan::NotOwned { name: "p".to_owned() }
        );
        assert_eq!(key_unproven("p").reason, reasons::PROVISIONER_KEY_NOT_OWNED);
    }

    #[test]
    fn a_key_coder_created_after_the_secrets_create_marker_is_this_provisioners() {
        let k1 = Some(ListedKey {
            id: "k1",
            name: "p",
            created_at: "2026-12-06T07:00:00Z",
        });
        let marked = |started| KeyProof {
            create_started_at: Some(started),
            ..KeyProof::default()
        };
        let replace = KeyPlan::Replace {
            old_name: "p".to_owned(),
        };
        // Cut off before the key reached the Secret: replaced (its value is gone), never left behind.
        assert_eq!(
            key_plan(k1, marked("2026-12-06T06:59:59Z"), false, false),
            replace
        );
        // Coder's clock a little behind the operator's.
        assert_eq!(
            key_plan(k1, marked("2026-12-06T07:00:04Z"), false, false),
            replace
        );
        // Cut off after the key reached the Secret but before its ID: reused.
        assert_eq!(
            key_plan(k1, marked("2026-12-06T06:59:59Z"), true, false),
            KeyPlan::Reuse {
                key_id: "k1".to_owned()
            }
        );
        // A key older than the marker is someone else's; so is any key when a time cannot be read.
        let not_owned = KeyPlan::NotOwned { name: "p".to_owned() };
        assert_eq!(
            key_plan(k1, marked("2026-12-06T07:00:06Z"), false, false),
            not_owned
        );
        assert_eq!(key_plan(k1, marked("yesterday"), false, false), not_owned);
    }

    #[test]
    fn the_finalizer_deletes_the_key_the_secret_records_in_the_recorded_organization() {
        let mut status = CoderProvisionerStatus::default();
        assert_eq!(
            key_cleanup(&status, Some("k2")),
            KeyCleanup::Nothing,
            "no organization: never keyed"
        );
        status.organization_id = Some("org".to_owned());
        status.provisioner_key_id = Some("k1".to_owned());
        assert_eq!(
            key_cleanup(&status, None),
            KeyCleanup::Unproven,
            "a key only the status names stays"
        );
        let recorded = KeyCleanup::Delete {
            organization_id: "org",
            key_id: "k2",
        };
        assert_eq!(
            key_cleanup(&status, Some("k2")),
            recorded,
            "the Secret's key, not the status's"
        );
        // A create marker (no key ID in the status) while the Secret already records the new key: a pass that
        // failed between the two records, or a status the watch has not caught up with.
        status.provisioner_key_id = None;
        status.key_create_started_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert_eq!(key_cleanup(&status, Some("k2")), recorded);
    }
}
