//! The shipped RBAC on a real kube-apiserver: `kubectl apply -f config/crd/bases/ -f config/rbac/` (the v0.1.5
//! install step) works, and the operator ServiceAccount gets exactly the access the controllers need. The opt-in
//! status admission policy (`config/admission/` and the chart's `admissionPolicy.enabled`) denies every status write
//! of every coder.com kind but the operator's.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{assert_success, control_plane_with_crds, kubectl, path, stderr, stdout};

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

/// Every coder.com kind (its sample in config/samples) and its plural: each one's status is the operator's alone.
const STATUS_KINDS: [(&str, &str); 7] = [
    ("coder_v1alpha1_codercontrolplane.yaml", "codercontrolplanes"),
    ("coder_v1alpha1_coderprovisioner.yaml", "coderprovisioners"),
    ("coder_v1alpha1_coderworkspaceproxy.yaml", "coderworkspaceproxies"),
    ("coder_v1alpha1_codertemplatetest.yaml", "codertemplatetests"),
    ("coder_v1alpha1_coderaiprovider.yaml", "coderaiproviders"),
    ("coder_v1alpha1_coderaigatewaykey.yaml", "coderaigatewaykeys"),
    ("coder_v1alpha1_codermcpserver.yaml", "codermcpservers"),
];

/// The sample of `file`, moved to `namespace`; returns it and its name.
fn sample(file: &str, namespace: &str) -> (Value, String) {
    let text = std::fs::read_to_string(path(&format!("config/samples/{file}"))).unwrap();
    let mut object: Value = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .find(|doc| doc["kind"].is_string())
        .unwrap();
    object["metadata"]["namespace"] = json!(namespace);
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    (object, name)
}

/// The policy and its binding as shipped, renamed for this test and bound to `namespace` only (the API server is
/// shared by parallel tests).
fn scoped_policy(policy: &Value, binding: &Value, namespace: &str) -> String {
    let name = format!("status-operator-only-{namespace}");
    let (mut policy, mut binding) = (policy.clone(), binding.clone());
    policy["metadata"] = json!({"name": name});
    binding["metadata"] = json!({"name": name});
    binding["spec"]["policyName"] = json!(name);
    binding["spec"]["matchResources"] =
        json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}});
    json!({"apiVersion": "v1", "kind": "List", "items": [policy, binding]}).to_string()
}

/// Applies the policy to a fresh namespace with one object of every kind, then checks that a cluster admin's status
/// write is denied with `denied` for each kind, and the operator ServiceAccount's is allowed; removes the policy.
async fn only_the_operator_writes_status(policy: &Value, binding: &Value, denied: &str) {
    let cp = control_plane_with_crds().await;
    let namespace = cp.namespace("status-policy").await.unwrap().name().to_owned();
    let out = kubectl(cp, &["create", "namespace", "coder-system"], None);
    assert!(out.status.success() || stderr(&out).contains("AlreadyExists"));
    assert_success(
        &kubectl(cp, &["apply", "-f", &path("config/rbac")], None),
        "apply the RBAC",
    );
    let mut objects = Vec::new();
    for (file, plural) in STATUS_KINDS {
        let (object, name) = sample(file, &namespace);
        assert_success(
            &kubectl(cp, &["apply", "-f", "-"], Some(&object.to_string())),
            &format!("create the {plural} sample"),
        );
        objects.push((plural, name));
    }
    assert_success(
        &kubectl(
            cp,
            &["apply", "-f", "-"],
            Some(&scoped_policy(policy, binding, &namespace)),
        ),
        "apply the policy",
    );
    // Each write changes the status (observedGeneration), so none is a no-op the API server skips.
    let write = |plural: &str, name: &str, user: Option<&str>, attempt: u32| {
        let patch = format!(r#"{{"status":{{"observedGeneration":{attempt}}}}}"#);
        let resource = format!("{plural}.coder.com");
        let mut args = vec!["patch", resource.as_str(), name, "-n", namespace.as_str()];
        args.extend_from_slice(&["--subresource=status", "--type=merge", "-p", patch.as_str()]);
        if let Some(user) = user {
            args.extend_from_slice(&["--as", user]);
        }
        kubectl(cp, &args, None)
    };
    // The policy takes effect once the API server has loaded it.
    let (first_plural, first_name) = &objects[0];
    let mut loaded = false;
    for attempt in 1..100 {
        if !write(first_plural, first_name, None, attempt).status.success() {
            loaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(loaded, "the policy never denied the admin");
    for (plural, name) in &objects {
        let out = write(plural, name, None, 500);
        assert!(!out.status.success(), "the admin wrote {plural}/status");
        assert!(stderr(&out).contains(denied), "{plural}: {}", stderr(&out));
        let out = write(plural, name, Some(OPERATOR), 501);
        assert_success(&out, &format!("the operator writes {plural}/status"));
    }
    let name = format!("status-operator-only-{namespace}");
    for kind in ["validatingadmissionpolicybinding", "validatingadmissionpolicy"] {
        assert_success(&kubectl(cp, &["delete", kind, &name], None), "remove the policy");
    }
}

#[tokio::test]
async fn the_shipped_status_admission_policy_leaves_every_kinds_status_to_the_operator() {
    let text = std::fs::read_to_string(path("config/admission/status-operator-only.yaml")).unwrap();
    let documents: Vec<Value> = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect();
    // The names of the first release, which covered CoderMCPServer only, stay: re-applying updates it in place.
    assert_eq!(
        documents[0]["metadata"]["name"],
        "coder-k8s-mcp-server-status-operator-only"
    );
    assert_eq!(
        documents[1]["spec"]["policyName"],
        "coder-k8s-mcp-server-status-operator-only"
    );
    only_the_operator_writes_status(&documents[0], &documents[1], "Only the coder-k8s operator").await;
}

#[tokio::test]
async fn the_charts_status_admission_policy_leaves_every_kinds_status_to_the_operator() {
    let rendered = crate::packaging::template(&["admissionPolicy.enabled=true"]);
    let policy = &rendered["ValidatingAdmissionPolicy//coder-k8s-status-operator-only"];
    let binding = &rendered["ValidatingAdmissionPolicyBinding//coder-k8s-status-operator-only"];
    only_the_operator_writes_status(policy, binding, "only the coder-k8s operator").await;
}
