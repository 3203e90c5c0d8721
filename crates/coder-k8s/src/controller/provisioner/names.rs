//! Names and labels of what a CoderProvisioner creates, and the tags hash of its key
//! (docs/controllers/provisioner.md, "What it creates"). Pure functions.

use std::collections::BTreeMap;

use coder_k8s_api::provisioner::{CoderProvisionerSpec, DEFAULT_KEY_SECRET_KEY};
use coder_k8s_api::shared::{DNS_LABEL_MAX, DNS_SUBDOMAIN_MAX};

use crate::controller::digest::{fnv32a_hex, hashed_name, hashed_object_name};

/// `app.kubernetes.io/name` of provisioner objects.
pub const APP_NAME: &str = "coder-provisioner";
/// The organization of a spec that names none (also of `organizationName: ""`).
pub const DEFAULT_ORGANIZATION: &str = "default";
/// Longest provisioner key name Coder accepts.
const KEY_NAME_MAX: usize = 128;
/// Annotation on the owned key Secret: the ID of the key in Coder whose value the Secret holds, written by the
/// operator once it learnt the ID. The proof that a key is this provisioner's (status can be written by others).
pub const KEY_ID_ANNOTATION: &str = "coder.com/provisioner-key-id";

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
    crate::controller::labels::labels(APP_NAME, name)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
