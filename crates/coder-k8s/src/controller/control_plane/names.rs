//! Names, labels and URLs of what a CoderControlPlane creates (docs/controllers/control-plane.md, "What it creates"). Pure functions.

use std::collections::BTreeMap;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::shared::{DNS_LABEL_MAX, DNS_SUBDOMAIN_MAX, fnv32a, truncated_name};

use crate::controller::digest::{byte_prefix, fnv32a_hex, hashed_object_name};

/// `app.kubernetes.io/name` of control-plane objects.
pub const APP_NAME: &str = "coder-control-plane";
/// Label naming the control plane on workspace RBAC objects.
pub const CONTROL_PLANE_LABEL: &str = "coder.com/control-plane";
/// Label naming the control plane's namespace on workspace RBAC objects (they can live in other namespaces).
pub const CONTROL_PLANE_NAMESPACE_LABEL: &str = "coder.com/control-plane-namespace";
/// Annotation with the UID of the control plane that owns workspace RBAC objects.
pub const WORKSPACE_RBAC_OWNER_UID_ANNOTATION: &str = crate::controller::apply::OWNER_UID_ANNOTATION;
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
