//! Every mark the operator puts on Kubernetes objects, in one leaf module: the field manager of its writes, the
//! labels every object it creates carries (`app.kubernetes.io/name` — the kind's app, `instance` — the owner's name,
//! hash-truncated to a valid label value, and `managed-by: coder-k8s`, which the owned-object watches select on), the
//! desired-hash label, the owner-UID annotation and the in-memory marks the watch caches add (never written).

use std::collections::BTreeMap;

use coder_k8s_api::shared::DNS_LABEL_MAX;

/// The field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "coder-k8s";
/// `app.kubernetes.io/managed-by` of every object the operator creates.
pub const MANAGED_BY: &str = "coder-k8s";
/// The label selector of the owned-object watches.
pub const MANAGED_BY_SELECTOR: &str = "app.kubernetes.io/managed-by=coder-k8s";
/// Label with the hash of the desired state last applied. A label, not an annotation: any annotation change bumps a
/// Deployment's generation, so an annotation would move the generation of every object taken over from the Go
/// operator.
pub const DESIRED_HASH_LABEL: &str = "coder.com/desired-hash";
/// Annotation with the owner's UID on objects an owner reference cannot point from (workspace RBAC in other
/// namespaces): the claim such an object carries instead of a controller reference.
pub const OWNER_UID_ANNOTATION: &str = "coder.com/workspace-rbac-owner-uid";
/// The label of every cleanup record (a ConfigMap in the operator namespace, docs/cleanup-records.md).
pub const CLEANUP_RECORD_LABEL: &str = "coder.com/cleanup-record";
/// Annotation that `kubectl apply` writes; it can hold a whole object (a Secret's data too), so it is never cached.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// In-memory mark (never written) on a cached object whose managed fields hold a legacy entry: the watch caches drop
/// managed fields, so this is how an apply knows a takeover is due without reading the object (see `takeover`).
pub const LEGACY_FIELDS_MARK: &str = "coder.com/in-memory-legacy-fields";
/// In-memory mark (never written) on the deletion that stands for an object that still exists but can no longer be
/// decoded: it leaves the caches, but its per-object bookkeeping (recorded IDs, backoffs) is kept for when it is
/// readable again.
pub const UNREADABLE_MARK: &str = "coder.com/in-memory-unreadable";

/// `app.kubernetes.io/instance` for an owner named `name`: the name, or for a name over 63 bytes its first 54 bytes,
/// `-` and the FNV-32a of the name, exactly as the Go operator wrote it (a Deployment selector cannot change).
pub fn instance(name: &str) -> String {
    crate::digest::hashed_name("", name, "", DNS_LABEL_MAX)
}

/// The labels of the objects of owner `name` of an app (`coder-control-plane`, `coder-provisioner`, ...).
pub fn labels(app: &str, name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), app.to_owned()),
        ("app.kubernetes.io/instance".to_owned(), instance(name)),
        ("app.kubernetes.io/managed-by".to_owned(), MANAGED_BY.to_owned()),
    ])
}

/// The value of the desired-hash label an object carries.
pub fn desired_hash_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<&str> {
    meta.labels.as_ref()?.get(DESIRED_HASH_LABEL).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_matches_the_label() {
        let labels = labels("coder-provisioner", "p");
        let (key, value) = MANAGED_BY_SELECTOR.split_once('=').unwrap();
        assert_eq!(labels[key], value);
        assert_eq!(labels["app.kubernetes.io/instance"], "p");
        assert!(instance(&"x".repeat(80)).len() <= 63);
        // A cut that ends in "-" or "." stays as the Go operator left it (both are valid inside a label value).
        let dotted = format!("{}.{}", "x".repeat(53), "y".repeat(20));
        let hash = crate::digest::fnv32a_hex(dotted.as_bytes());
        assert_eq!(instance(&dotted), format!("{}.-{hash}", "x".repeat(53)));
    }
}
