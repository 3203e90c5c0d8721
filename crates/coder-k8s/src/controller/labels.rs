//! The labels every object the operator creates carries: `app.kubernetes.io/name` (the kind's app), `instance`
//! (the owner's name, hash-truncated to a valid label value) and `managed-by: coder-k8s`, which the owned-object
//! watches select on.

use std::collections::BTreeMap;

use coder_k8s_api::shared::DNS_LABEL_MAX;

/// `app.kubernetes.io/managed-by` of every object the operator creates.
pub const MANAGED_BY: &str = "coder-k8s";
/// The label selector of the owned-object watches.
pub const MANAGED_BY_SELECTOR: &str = "app.kubernetes.io/managed-by=coder-k8s";

/// `app.kubernetes.io/instance` for an owner named `name`: the name, or for a name over 63 bytes its first 54 bytes,
/// `-` and the FNV-32a of the name, exactly as the Go operator wrote it (a Deployment selector cannot change).
pub fn instance(name: &str) -> String {
    super::digest::hashed_name("", name, "", DNS_LABEL_MAX)
}

/// The labels of the objects of owner `name` of an app (`coder-control-plane`, `coder-provisioner`, ...).
pub fn labels(app: &str, name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), app.to_owned()),
        ("app.kubernetes.io/instance".to_owned(), instance(name)),
        ("app.kubernetes.io/managed-by".to_owned(), MANAGED_BY.to_owned()),
    ])
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
        let hash = super::super::digest::fnv32a_hex(dotted.as_bytes());
        assert_eq!(instance(&dotted), format!("{}.-{hash}", "x".repeat(53)));
    }
}
