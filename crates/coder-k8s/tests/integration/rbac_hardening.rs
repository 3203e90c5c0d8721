//! `--restrict-workspace-rbac` on the real kube-apiserver: without it a control plane's workspace RBAC is applied as
//! v0.1.5 applies it; with it, rules on Secrets or RBAC objects, escalating verbs, wildcards and namespaces without
//! the opt-in label refuse the whole workspace RBAC of the control plane, shown in `WorkspaceRBACAllowed`.

use coder_k8s_api::control_plane::CoderControlPlane;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::control_plane::{Harness, harness, harness_with};
use crate::support::several_requeues;
use crate::support::wait_for;

const OWNER_UID: &str = "coder.com/workspace-rbac-owner-uid";

/// Names of the Roles and RoleBindings in `namespace` that belong to the control plane with `uid`.
async fn workspace_rbac(h: &Harness, namespace: &str, uid: &str) -> (Vec<Role>, Vec<String>) {
    let ours = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(OWNER_UID))
            .is_some_and(|owner| owner == uid)
    };
    let roles = Api::<Role>::namespaced(h.admin.clone(), namespace)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|r| ours(&r.metadata))
        .collect();
    let bindings = Api::<RoleBinding>::namespaced(h.admin.clone(), namespace)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|b| ours(&b.metadata))
        .filter_map(|b| b.metadata.name)
        .collect();
    (roles, bindings)
}

fn uid(cp: &CoderControlPlane) -> String {
    cp.metadata.uid.clone().unwrap()
}

fn secrets_rule() -> serde_json::Value {
    json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
}

async fn restricted(tag: &str) -> Harness {
    harness_with(tag, |settings| settings.restrict_workspace_rbac = true).await
}

#[tokio::test]
async fn default_mode_applies_every_rule_in_every_namespace_as_v0_1_5_does() {
    let h = harness("rbac-default").await;
    let other = h.cp.namespace("rbac-default-other").await.unwrap();
    let cp = h
        .create(
            "open",
            json!({"rbac": {"extraRules": [secrets_rule()], "workspaceNamespaces": [other.name()]}}),
        )
        .await;
    for namespace in [h.ns.as_str(), other.name()] {
        wait_for(
            || async {
                let (roles, bindings) = workspace_rbac(&h, namespace, &uid(&cp)).await;
                roles.len() == 1
                    && bindings.len() == 1
                    && roles[0]
                        .rules
                        .iter()
                        .flatten()
                        .any(|r| r.resources.iter().flatten().any(|x| x == "secrets"))
            },
            "the workspace Role with the extra rule",
        )
        .await;
    }
    assert!(h.condition("open", "WorkspaceRBACAllowed").await.is_none());
}

#[tokio::test]
async fn hardening_refuses_each_forbidden_rule_class_and_creates_no_role() {
    let h = restricted("rbac-rules").await;
    let classes = [
        ("secrets", secrets_rule()),
        (
            "rbac",
            json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["create"]}),
        ),
        (
            "escalate",
            json!({"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["escalate"]}),
        ),
        (
            "bind",
            json!({"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["bind"]}),
        ),
        (
            "impersonate",
            json!({"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}),
        ),
        (
            "wildcard",
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}),
        ),
    ];
    let mut created = Vec::new();
    for (name, rule) in classes {
        let cp = h.create(name, json!({"rbac": {"extraRules": [rule]}})).await;
        created.push((name, cp));
    }
    for (name, _) in &created {
        let message = h
            .wait_reason(name, "WorkspaceRBACAllowed", "WorkspaceRBACRuleRefused")
            .await;
        assert!(message.contains("extraRules[0]"), "{name}: {message}");
    }
    several_requeues().await;
    for (name, cp) in &created {
        let (roles, bindings) = workspace_rbac(&h, &h.ns, &uid(cp)).await;
        assert!(
            roles.is_empty() && bindings.is_empty(),
            "{name}: {roles:?} {bindings:?}"
        );
    }
    // A control plane whose rules pass gets its Role in the same mode.
    let fine = h
        .create(
            "fine",
            json!({"rbac": {"extraRules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}}),
        )
        .await;
    h.wait_reason("fine", "WorkspaceRBACAllowed", "WorkspaceRBACAccepted")
        .await;
    wait_for(
        || async { workspace_rbac(&h, &h.ns, &uid(&fine)).await.0.len() == 1 },
        "the accepted workspace Role",
    )
    .await;
}

#[tokio::test]
async fn hardening_needs_the_namespace_opt_in_and_refuses_the_whole_set() {
    let h = restricted("rbac-ns").await;
    let other = h.cp.namespace("rbac-ns-other").await.unwrap();
    let cp = h
        .create("spread", json!({"rbac": {"workspaceNamespaces": [other.name()]}}))
        .await;
    let message = h
        .wait_reason("spread", "WorkspaceRBACAllowed", "WorkspaceNamespaceNotOptedIn")
        .await;
    assert!(message.contains(other.name()), "{message}");
    several_requeues().await;
    for namespace in [h.ns.as_str(), other.name()] {
        let (roles, bindings) = workspace_rbac(&h, namespace, &uid(&cp)).await;
        assert!(
            roles.is_empty() && bindings.is_empty(),
            "the whole set is refused, also in the own namespace: {namespace}"
        );
    }

    let patch = json!({"metadata": {"labels": {"coder.com/workspace-namespace": "true"}}});
    Api::<Namespace>::all(h.admin.clone())
        .patch(other.name(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    h.wait_reason("spread", "WorkspaceRBACAllowed", "WorkspaceRBACAccepted")
        .await;
    for namespace in [h.ns.as_str(), other.name()] {
        wait_for(
            || async {
                let (roles, bindings) = workspace_rbac(&h, namespace, &uid(&cp)).await;
                roles.len() == 1 && bindings.len() == 1
            },
            "the workspace Role after the opt-in",
        )
        .await;
    }

    // A refused rule added later removes what was granted before.
    let spec =
        json!({"spec": {"rbac": {"workspaceNamespaces": [other.name()], "extraRules": [secrets_rule()]}}});
    h.api::<CoderControlPlane>()
        .patch("spread", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .unwrap();
    h.wait_reason("spread", "WorkspaceRBACAllowed", "WorkspaceRBACRuleRefused")
        .await;
    for namespace in [h.ns.as_str(), other.name()] {
        wait_for(
            || async {
                let (roles, bindings) = workspace_rbac(&h, namespace, &uid(&cp)).await;
                roles.is_empty() && bindings.is_empty()
            },
            "the workspace Roles to be removed",
        )
        .await;
    }
}
