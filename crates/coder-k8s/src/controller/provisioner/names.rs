//! Names and labels of what a CoderProvisioner creates, and the tags hash of its key
//! (docs/controllers/provisioner.md, "What it creates"). Pure functions.

use std::collections::BTreeMap;

use coder_k8s_api::provisioner::{CoderProvisionerSpec, DEFAULT_KEY_SECRET_KEY};
use coder_k8s_api::shared::{DNS_LABEL_MAX, truncated_name};

/// `app.kubernetes.io/name` of provisioner objects.
pub const APP_NAME: &str = "coder-provisioner";

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

/// Names derived from the object name and spec (the Deployment, Role and ServiceAccount names are hash-truncated to 63; the key Secret name is not).
pub fn names(name: &str, spec: &CoderProvisionerSpec) -> ProvisionerNames {
    let deployment = truncated_name(&format!("provisioner-{name}"), "", DNS_LABEL_MAX);
    ProvisionerNames {
        role: deployment.clone(),
        deployment,
        service_account: truncated_name(name, "-provisioner", DNS_LABEL_MAX),
        key_secret: spec
            .key
            .secret_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("{name}-provisioner-key")),
        key_secret_key: spec
            .key
            .secret_key
            .clone()
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| DEFAULT_KEY_SECRET_KEY.to_owned()),
        key_name: spec
            .key
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| name.to_owned()),
    }
}

/// Labels of the provisioner's objects.
pub fn labels(name: &str) -> BTreeMap<String, String> {
    crate::controller::labels::labels(APP_NAME, name)
}

/// `status.tagsHash`: 16 hex of FNV-64a over the tags sorted by key, as `key=value` lines.
pub fn tags_hash(tags: &BTreeMap<String, String>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (key, value) in tags {
        for byte in format!("{key}={value}\n").bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
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
    fn tags_hash_depends_on_tags_only() {
        let a = BTreeMap::from([("scope".to_owned(), "organization".to_owned())]);
        let b = BTreeMap::from([("scope".to_owned(), "user".to_owned())]);
        assert_eq!(tags_hash(&a), tags_hash(&a.clone()));
        assert_ne!(tags_hash(&a), tags_hash(&b));
        assert_eq!(tags_hash(&BTreeMap::new()).len(), 16);
    }
}
