//! Names, labels and URLs of what a CoderControlPlane creates (docs/controllers/control-plane.md, "What it creates"). Pure functions.

use std::collections::BTreeMap;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::shared::{DNS_LABEL_MAX, DNS_SUBDOMAIN_MAX, fnv32a, truncated_name};

/// `app.kubernetes.io/name` of control-plane objects.
pub const APP_NAME: &str = "coder-control-plane";
/// Label naming the control plane on workspace RBAC objects.
pub const CONTROL_PLANE_LABEL: &str = "coder.com/control-plane";
/// Label naming the control plane's namespace on workspace RBAC objects (they can live in other namespaces).
pub const CONTROL_PLANE_NAMESPACE_LABEL: &str = "coder.com/control-plane-namespace";
/// Annotation with the UID of the control plane that owns workspace RBAC objects.
pub const WORKSPACE_RBAC_OWNER_UID_ANNOTATION: &str = "coder.com/workspace-rbac-owner-uid";
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
        crate::controller::labels::instance(&self.name)
    }

    /// Labels of every object the control plane owns; also the Deployment selector.
    pub fn labels(&self) -> BTreeMap<String, String> {
        crate::controller::labels::labels(APP_NAME, &self.name)
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

    /// Default operator token Secret: `<cr>-operator-token`, hash-truncated at 63.
    pub fn default_operator_token_secret(&self) -> String {
        truncated_name(&self.name, "-operator-token", DNS_LABEL_MAX)
    }

    /// In-cluster DNS name of the control plane Service.
    pub fn service_host(&self) -> String {
        format!("{}.{}.svc.cluster.local", self.name, self.namespace)
    }
}

/// Name of the workspace Role: `<sa>-<hash8>-workspace-perms`.
pub fn workspace_role_name(id: &ControlPlaneId, service_account: &str) -> String {
    truncated_name(
        &format!("{service_account}-{}", id.identity_hash()),
        "-workspace-perms",
        DNS_SUBDOMAIN_MAX,
    )
}

/// Name of the workspace RoleBinding: `<sa>-<hash8>`.
pub fn workspace_role_binding_name(id: &ControlPlaneId, service_account: &str) -> String {
    truncated_name(
        &format!("{service_account}-{}", id.identity_hash()),
        "",
        DNS_SUBDOMAIN_MAX,
    )
}

/// A volume name from a Secret name: a DNS label (lowercase, `[a-z0-9-]`), hash-truncated when long.
pub fn volume_name(prefix: &str, secret: &str) -> String {
    let sanitized: String = secret
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    let base = format!("{prefix}{}", sanitized.trim_matches('-'));
    if base.len() <= DNS_LABEL_MAX && sanitized == secret {
        return base;
    }
    // A changed or long name gets the hash of the original, so two Secrets never share a volume name.
    let keep = DNS_LABEL_MAX - 9;
    let trimmed: String = base.chars().take(keep).collect();
    format!(
        "{}-{:08x}",
        trimmed.trim_end_matches('-'),
        fnv32a(secret.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn volume_names_are_dns_labels() {
        assert_eq!(volume_name("tls-", "coder-tls"), "tls-coder-tls");
        let odd = volume_name("tls-", "Coder.TLS");
        assert!(odd.starts_with("tls-coder-tls-"), "{odd}");
        assert_ne!(odd, volume_name("tls-", "coder-tls"));
        assert!(volume_name("ca-cert-", &"x".repeat(100)).len() <= 63);
    }
}
