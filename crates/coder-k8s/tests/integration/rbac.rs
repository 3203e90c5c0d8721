//! The shipped RBAC on a real kube-apiserver: `kubectl apply -f config/crd/bases/ -f config/rbac/` (the v0.1.5
//! install step) works, and the operator ServiceAccount gets exactly the access the controllers need.

use crate::support::{assert_success, control_plane_with_crds, kubectl, path, stdout};

const OPERATOR: &str = "system:serviceaccount:coder-system:coder-k8s";

fn can_i(cp: &coder_k8s_testenv::ControlPlane, args: &[&str]) -> String {
    let mut full = vec!["auth", "can-i"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--as", OPERATOR]);
    stdout(&kubectl(cp, &full, None)).trim().to_owned()
}

#[tokio::test]
async fn v015_install_step_applies_and_grants_the_operator_access() {
    let cp = control_plane_with_crds().await;
    let out = kubectl(cp, &["create", "namespace", "coder-system"], None);
    assert!(out.status.success() || String::from_utf8_lossy(&out.stderr).contains("AlreadyExists"));
    let out = kubectl(
        cp,
        &[
            "apply",
            "-f",
            &path("config/crd/bases"),
            "-f",
            &path("config/rbac"),
        ],
        None,
    );
    assert_success(&out, "kubectl apply -f config/crd/bases/ -f config/rbac/");
    // The opt-in admission policy of the release notes applies as shipped (checked by the API server, not stored:
    // it would bind every namespace of the shared test control plane).
    let out = kubectl(
        cp,
        &["apply", "--dry-run=server", "-f", &path("config/admission")],
        None,
    );
    assert_success(&out, "kubectl apply -f config/admission/");
    assert!(stdout(&out).contains("status-operator-only"), "{}", stdout(&out));
    for (name, namespace) in [
        ("clusterrole/manager-role", None),
        ("clusterrolebinding/coder-k8s", None),
        ("role/manager-role", Some("coder-system")),
        ("rolebinding/coder-k8s-cleanup-records", Some("coder-system")),
        ("serviceaccount/coder-k8s", Some("coder-system")),
        ("clusterrolebinding/coder-k8s-auth-delegator", None),
        ("rolebinding/coder-k8s-authentication-reader", Some("kube-system")),
    ] {
        let mut args = vec!["get", name];
        if let Some(ns) = namespace {
            args.extend_from_slice(&["-n", ns]);
        }
        assert_success(&kubectl(cp, &args, None), name);
    }

    assert_eq!(
        can_i(
            cp,
            &[
                "patch",
                "codercontrolplanes.coder.com",
                "--subresource=status",
                "-n",
                "coder"
            ]
        ),
        "yes"
    );
    assert_eq!(
        can_i(
            cp,
            &[
                "update",
                "codermcpservers.coder.com",
                "--subresource=finalizers",
                "-n",
                "x"
            ]
        ),
        "yes"
    );
    assert_eq!(can_i(cp, &["create", "deployments.apps", "-n", "coder"]), "yes");
    assert_eq!(
        can_i(cp, &["create", "events.events.k8s.io", "-n", "coder"]),
        "yes"
    );
    assert_eq!(
        can_i(
            cp,
            &["update", "leases.coordination.k8s.io", "-n", "coder-system"]
        ),
        "yes"
    );
    // ConfigMaps: write only in the operator namespace (cleanup records), read everywhere.
    assert_eq!(can_i(cp, &["create", "configmaps", "-n", "coder-system"]), "yes");
    assert_eq!(can_i(cp, &["create", "configmaps", "-n", "coder"]), "no");
    assert_eq!(can_i(cp, &["list", "configmaps", "-n", "coder"]), "yes");
    // Nothing cluster-admin-like.
    assert_eq!(can_i(cp, &["create", "clusterrolebindings"]), "no");
    assert_eq!(can_i(cp, &["delete", "namespaces"]), "no");
}
