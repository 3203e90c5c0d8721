//! `SubjectAccessReviewAuthorizer` on the real kube-apiserver's RBAC: allow and deny (subresources, resource
//! names, non-resource paths), the caches, the `system:masters` bypass and failing closed.

use std::time::Duration;

use coder_k8s_aggregated_apiserver::generic::auth::ResourceAttributes;
use coder_k8s_aggregated_apiserver::generic::authz::SubjectAccessReviewAuthorizer;
use coder_k8s_aggregated_apiserver::generic::{Attributes, Authorizer, Decision, UserInfo};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ObjectMeta, PostParams};

use crate::support::{recording_client, unique_user};

const GROUP: &str = "aggregation.coder.com";
const SAR_PATH: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

fn user(name: &str) -> UserInfo {
    UserInfo {
        name: name.to_owned(),
        uid: format!("uid-{name}"),
        groups: vec!["system:authenticated".to_owned()],
        ..UserInfo::default()
    }
}

fn on_workspace(user: &UserInfo, verb: &str, namespace: &str, name: &str, subresource: &str) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: verb.to_owned(),
        resource: Some(ResourceAttributes {
            group: GROUP.to_owned(),
            version: "v1alpha1".to_owned(),
            resource: "coderworkspaces".to_owned(),
            subresource: subresource.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }),
        path: None,
    }
}

fn subject(user: &str) -> Subject {
    Subject {
        kind: "User".into(),
        name: user.to_owned(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Subject::default()
    }
}

fn rule(resources: &[&str], verbs: &[&str], names: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![GROUP.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        resource_names: (!names.is_empty()).then(|| names.iter().map(|n| (*n).to_owned()).collect()),
        ..PolicyRule::default()
    }
}

/// In `ns`, `user` may get and list workspaces, create the `start` subresource of `ws-a` only.
async fn grant(client: &kube::Client, ns: &str, user: &str) {
    let role = Role {
        metadata: ObjectMeta {
            name: Some("workspace-reader".into()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![
            rule(&["coderworkspaces"], &["get", "list"], &[]),
            rule(&["coderworkspaces/start"], &["create"], &["ws-a"]),
        ]),
    };
    Api::<Role>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some("workspace-reader".into()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "workspace-reader".into(),
        },
        subjects: Some(vec![subject(user)]),
    };
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let cp = coder_k8s_testenv::shared().await.unwrap();
    cp.wait_until_allowed(
        user,
        k8s_openapi::api::authorization::v1::ResourceAttributes {
            verb: Some("create".into()),
            group: Some(GROUP.into()),
            resource: Some("coderworkspaces".into()),
            subresource: Some("start".into()),
            namespace: Some(ns.to_owned()),
            name: Some("ws-a".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
}

fn is_deny(decision: &Decision) -> bool {
    matches!(decision, Decision::Deny(_))
}

#[tokio::test]
async fn rbac_decides_per_verb_namespace_subresource_and_name() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let client = cp.client().unwrap();
    let ns = cp.namespace("authz-rbac").await.unwrap();
    let other_ns = cp.namespace("authz-other").await.unwrap();
    let name = unique_user("limited");
    grant(&client, &ns, &name).await;
    let authorizer = SubjectAccessReviewAuthorizer::new(client);
    let alice = user(&name);

    let allowed = [
        on_workspace(&alice, "get", &ns, "ws-a", ""),
        on_workspace(&alice, "list", &ns, "", ""),
        on_workspace(&alice, "create", &ns, "ws-a", "start"),
    ];
    for attributes in &allowed {
        assert_eq!(
            authorizer.authorize(attributes).await.unwrap(),
            Decision::Allow,
            "{attributes:?}"
        );
    }
    let denied = [
        on_workspace(&alice, "delete", &ns, "ws-a", ""),
        on_workspace(&alice, "get", &other_ns, "ws-a", ""),
        on_workspace(&alice, "create", &ns, "ws-b", "start"),
        on_workspace(&alice, "create", &ns, "ws-a", "stop"),
        on_workspace(&user(&unique_user("stranger")), "get", &ns, "ws-a", ""),
    ];
    for attributes in &denied {
        let decision = authorizer.authorize(attributes).await.unwrap();
        assert!(is_deny(&decision), "{attributes:?} gave {decision:?}");
    }
}

#[tokio::test]
async fn non_resource_paths_are_reviewed_by_path() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let client = cp.client().unwrap();
    let name = unique_user("paths");
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec!["/openapi/v3/apis/aggregation.coder.com/*".into()]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    };
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: name.clone(),
        },
        subjects: Some(vec![subject(&name)]),
    };
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    cp.wait_until_path_allowed(&name, "get", "/openapi/v3/apis/aggregation.coder.com/v1alpha1")
        .await
        .unwrap();
    let authorizer = SubjectAccessReviewAuthorizer::new(client);
    let path = |path: &str| Attributes {
        user: user(&name),
        verb: "get".into(),
        resource: None,
        path: Some(path.to_owned()),
    };
    assert_eq!(
        authorizer
            .authorize(&path("/openapi/v3/apis/aggregation.coder.com/v1alpha1"))
            .await
            .unwrap(),
        Decision::Allow
    );
    assert!(is_deny(&authorizer.authorize(&path("/metrics")).await.unwrap()));
}

#[tokio::test]
async fn allowed_and_denied_answers_are_cached_per_attribute_tuple() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let (client, log) = recording_client(cp.config().unwrap());
    let ns = cp.namespace("authz-cache").await.unwrap();
    let name = unique_user("cached");
    grant(&cp.client().unwrap(), &ns, &name).await;
    let authorizer = SubjectAccessReviewAuthorizer::new(client);
    let alice = user(&name);
    let get = on_workspace(&alice, "get", &ns, "ws-a", "");
    let delete = on_workspace(&alice, "delete", &ns, "ws-a", "");

    for _ in 0..3 {
        assert_eq!(authorizer.authorize(&get).await.unwrap(), Decision::Allow);
        assert!(is_deny(&authorizer.authorize(&delete).await.unwrap()));
    }
    assert_eq!(log.entries(), vec![format!("POST {SAR_PATH}?"); 2]);

    // Any difference in the tuple is a new question.
    let other_name = on_workspace(&alice, "get", &ns, "ws-b", "");
    assert_eq!(authorizer.authorize(&other_name).await.unwrap(), Decision::Allow);
    let mut other_groups = alice.clone();
    other_groups.groups.push("extra-group".into());
    assert_eq!(
        authorizer
            .authorize(&on_workspace(&other_groups, "get", &ns, "ws-a", ""))
            .await
            .unwrap(),
        Decision::Allow
    );
    assert_eq!(log.count("POST", SAR_PATH), 4, "{:?}", log.entries());
}

#[tokio::test]
async fn cached_answers_expire() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let (client, log) = recording_client(cp.config().unwrap());
    let ns = cp.namespace("authz-expiry").await.unwrap();
    let authorizer = SubjectAccessReviewAuthorizer::with_cache_ttl(client, Duration::from_millis(300));
    let attributes = on_workspace(&user(&unique_user("expiry")), "get", &ns, "ws-a", "");
    assert!(is_deny(&authorizer.authorize(&attributes).await.unwrap()));
    assert!(is_deny(&authorizer.authorize(&attributes).await.unwrap()));
    assert_eq!(log.count("POST", SAR_PATH), 1, "{:?}", log.entries());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(is_deny(&authorizer.authorize(&attributes).await.unwrap()));
    assert_eq!(log.count("POST", SAR_PATH), 2, "{:?}", log.entries());
}

#[tokio::test]
async fn system_masters_are_allowed_without_a_review() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let (client, log) = recording_client(cp.config().unwrap());
    let authorizer = SubjectAccessReviewAuthorizer::new(client);
    let mut admin = user(&unique_user("master"));
    admin.groups.push("system:masters".into());
    let attributes = on_workspace(&admin, "delete", "anywhere", "ws", "");
    assert_eq!(authorizer.authorize(&attributes).await.unwrap(), Decision::Allow);
    assert_eq!(log.entries(), Vec::<String>::new());
}

#[tokio::test]
async fn a_server_that_may_not_review_fails_closed_with_a_500_naming_subjectaccessreviews() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let server_identity = unique_user("no-auth-delegator");
    let authorizer = SubjectAccessReviewAuthorizer::new(cp.client_as(&server_identity, &[]).unwrap());
    let attributes = on_workspace(&user("alice"), "get", "default", "ws", "");
    let error = authorizer.authorize(&attributes).await.unwrap_err();
    assert_eq!(error.code, 500);
    assert!(
        error
            .message
            .contains("subjectaccessreviews.authorization.k8s.io is forbidden"),
        "{}",
        error.message
    );
    // Errors are not cached: the next request asks again (and fails again).
    assert_eq!(authorizer.authorize(&attributes).await.unwrap_err().code, 500);
}
