//! Writes of `coderorganizations` and `codergroups`: against the Coder API test server playing a licensed Premium
//! server (create, update, read back, members by user name, delete, Coder's refusals), unlicensed (Coder's own
//! message), and a real open-source Coder v2.30.0, which serves none of these writes (a 405 that says why, and a
//! write that changes nothing is not sent at all). Updates of `coderusers` (full name, roles, memberships,
//! suspension): the same checks against the test server and the real Coder; creates and deletes without a user
//! store (tests/user_lifecycle.rs has them with one).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use coder_k8s_aggregated_apiserver::generic::{
    ApiError, Deleted, EventType, Registry, RequestContext, Written,
};
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Entitlement, TestServer};
use coder_k8s_testenv::coder::RealCoder;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::{Value, json};

mod coder_fixture;
mod people_support;

use coder_fixture::coder;
use people_support::{NAMESPACE, ctx, get, registry_over};

const ORGANIZATIONS: &str = "coderorganizations";
const GROUPS: &str = "codergroups";
const USERS: &str = "coderusers";

async fn create(registry: &Registry, plural: &str, object: Value) -> Result<Written, ApiError> {
    registry
        .resource(plural)
        .unwrap()
        .storage
        .create(&ctx(), object)
        .await
}

async fn update(registry: &Registry, plural: &str, object: Value) -> Result<Written, ApiError> {
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    let storage = &registry.resource(plural).unwrap().storage;
    storage.update(&ctx(), &name, object, false).await
}

async fn delete(registry: &Registry, plural: &str, name: &str) -> Result<Deleted, ApiError> {
    let storage = &registry.resource(plural).unwrap().storage;
    storage.delete(&ctx(), name, &DeleteOptions::default()).await
}

fn organization(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "aggregation.coder.com/v1alpha1", "kind": "CoderOrganization",
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec,
    })
}

fn group(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "aggregation.coder.com/v1alpha1", "kind": "CoderGroup",
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec,
    })
}

/// `object` with `changes` merged into its spec (the resourceVersion it was read with is kept).
fn changed(mut object: Value, changes: Value) -> Value {
    for (key, value) in changes.as_object().unwrap() {
        object["spec"][key] = value.clone();
    }
    object
}

/// Every request the test server received that is not a read.
fn writes(server: &TestServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

#[tokio::test]
async fn organizations_are_created_changed_and_deleted_on_a_licensed_server() {
    let coder = coder("org-writes").await;
    let registry = registry_over(coder.server.url(), &coder.token);
    coder
        .server
        .set_entitlement("multiple_organizations", Entitlement::Entitled);

    let spec = json!({"displayName": "Platform", "description": "builders", "icon": "/icon/p.svg"});
    let written = create(&registry, ORGANIZATIONS, organization("platform", spec))
        .await
        .unwrap();
    assert!(written.created);
    assert_eq!(written.event, Some(EventType::Added));
    let made = coder.client.organization("platform").await.unwrap();
    assert_eq!(
        (
            made.display_name.as_str(),
            made.description.as_str(),
            made.icon.as_str()
        ),
        ("Platform", "builders", "/icon/p.svg")
    );
    assert_eq!(
        written.object,
        get(&registry, ORGANIZATIONS, "platform").await.unwrap()
    );
    let again = create(&registry, ORGANIZATIONS, organization("platform", json!({})))
        .await
        .unwrap_err();
    assert_eq!((again.code, again.reason), (409, "AlreadyExists"), "{again}");

    // An update names the current resourceVersion; an unchanged one is not sent to Coder at all.
    let current = written.object.clone();
    let mut stale = changed(current.clone(), json!({"description": "stale"}));
    stale["metadata"]["resourceVersion"] = json!("1");
    let conflict = update(&registry, ORGANIZATIONS, stale).await.unwrap_err();
    assert_eq!(conflict.code, 409, "{conflict}");
    coder.server.clear_requests();
    let same = update(&registry, ORGANIZATIONS, current.clone()).await.unwrap();
    assert_eq!(same.event, None);
    assert_eq!(
        writes(&coder.server),
        Vec::<String>::new(),
        "nothing changed, nothing written"
    );

    // An emptied description and icon are sent (Coder keeps what a PATCH leaves out); an empty display name keeps
    // Coder's, which cannot be empty.
    let cleared = changed(current, json!({"displayName": "", "description": "", "icon": ""}));
    let updated = update(&registry, ORGANIZATIONS, cleared).await.unwrap();
    assert_eq!(updated.event, Some(EventType::Modified));
    let made = coder.client.organization("platform").await.unwrap();
    assert_eq!(
        (
            made.display_name.as_str(),
            made.description.as_str(),
            made.icon.as_str()
        ),
        ("Platform", "", "")
    );

    // Coder's refusals: the default organization cannot go, a dry run is refused before Coder is asked.
    let default = coder.client.default_organization().await.unwrap();
    let refused = delete(&registry, ORGANIZATIONS, &default.name).await.unwrap_err();
    assert_eq!(refused.code, 400, "{refused}");
    assert!(
        refused.message.contains("Default organization cannot be deleted"),
        "{refused}"
    );
    coder.server.clear_requests();
    let dry = RequestContext {
        dry_run: true,
        ..ctx()
    };
    let storage = &registry.resource(ORGANIZATIONS).unwrap().storage;
    let error = storage
        .delete(&dry, "platform", &DeleteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.code, 400, "{error}");
    assert_eq!(
        coder.server.requests().len(),
        0,
        "a dry run reaches Coder not at all"
    );

    let deleted = delete(&registry, ORGANIZATIONS, "platform").await.unwrap();
    assert!(matches!(
        deleted,
        Deleted::Success {
            event: Some(EventType::Deleted),
            ..
        }
    ));
    let gone = get(&registry, ORGANIZATIONS, "platform").await.unwrap_err();
    assert_eq!(gone.code, 404, "{gone}");

    // Unlicensed: Coder's own message.
    coder
        .server
        .set_entitlement("multiple_organizations", Entitlement::NotEntitled);
    let premium = create(&registry, ORGANIZATIONS, organization("later", json!({})))
        .await
        .unwrap_err();
    assert_eq!(premium.code, 403, "{premium}");
    assert!(
        premium
            .message
            .contains("Multiple Organizations is a Premium feature"),
        "{premium}"
    );
}

#[tokio::test]
async fn groups_are_created_with_members_by_user_name_changed_and_deleted_on_a_licensed_server() {
    let coder = coder("group-writes").await;
    let registry = registry_over(coder.server.url(), &coder.token);
    coder
        .server
        .set_entitlement("template_rbac", Entitlement::Entitled);
    for user in ["alice", "bob"] {
        coder.server.mint_token(user, &[]).await.unwrap();
    }
    let org = coder.client.default_organization().await.unwrap().name;
    let name = format!("{org}.ops");

    // A member that is not in the organization is a 422 before anything is written.
    coder.server.clear_requests();
    let spec = json!({"organization": org, "members": ["alice", "mallory"]});
    let invalid = create(&registry, GROUPS, group(&name, spec)).await.unwrap_err();
    assert_eq!(invalid.code, 422, "{invalid}");
    assert!(invalid.message.contains("spec.members[1]"), "{invalid}");
    assert_eq!(writes(&coder.server), Vec::<String>::new());

    let spec =
        json!({"organization": org, "displayName": "Ops", "quotaAllowance": 3, "members": ["bob", "alice"]});
    let written = create(&registry, GROUPS, group(&name, spec)).await.unwrap();
    assert!(written.created);
    assert_eq!(written.object["spec"]["members"], json!(["alice", "bob"]));
    let made = coder.client.group_by_name(&org, "ops").await.unwrap();
    assert_eq!((made.display_name.as_str(), made.quota_allowance), ("Ops", 3));
    assert_eq!(written.object, get(&registry, GROUPS, &name).await.unwrap());

    // Bob leaves, the quota changes: one PATCH that removes bob's ID and sends the quota.
    coder.server.clear_requests();
    let desired = changed(
        written.object.clone(),
        json!({"members": ["alice"], "quotaAllowance": 5}),
    );
    let updated = update(&registry, GROUPS, desired).await.unwrap();
    assert_eq!(updated.event, Some(EventType::Modified));
    assert_eq!(writes(&coder.server).len(), 1, "{:?}", writes(&coder.server));
    let made = coder.client.group_by_name(&org, "ops").await.unwrap();
    let members: Vec<&str> = made.members.iter().map(|m| m.username.as_str()).collect();
    assert_eq!(
        (members, made.quota_allowance, made.display_name.as_str()),
        (vec!["alice"], 5, "Ops")
    );

    // Everyone: an unchanged apply writes nothing; a change of its members is Coder's refusal.
    let everyone = get(&registry, GROUPS, &format!("{org}.Everyone")).await.unwrap();
    coder.server.clear_requests();
    assert_eq!(
        update(&registry, GROUPS, everyone.clone()).await.unwrap().event,
        None
    );
    assert_eq!(writes(&coder.server), Vec::<String>::new());
    let refused = update(
        &registry,
        GROUPS,
        changed(everyone, json!({"members": ["alice"]})),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code, 403, "{refused}");
    assert!(
        refused
            .message
            .contains("Cannot add or remove users from the \"Everyone\" group"),
        "{refused}"
    );
    let refused = delete(&registry, GROUPS, &format!("{org}.Everyone"))
        .await
        .unwrap_err();
    assert_eq!(refused.code, 400, "{refused}");

    // The body's organization must be the name's.
    let elsewhere = group(&name, json!({"organization": "globex"}));
    assert_eq!(create(&registry, GROUPS, elsewhere).await.unwrap_err().code, 422);

    delete(&registry, GROUPS, &name).await.unwrap();
    assert_eq!(get(&registry, GROUPS, &name).await.unwrap_err().code, 404);

    // Unlicensed: Coder's own message, for a create as for a change.
    coder
        .server
        .set_entitlement("template_rbac", Entitlement::NotEntitled);
    let premium = create(&registry, GROUPS, group(&name, json!({"organization": org})))
        .await
        .unwrap_err();
    assert_eq!(premium.code, 403, "{premium}");
    assert!(
        premium.message.contains("Template RBAC is a Premium feature"),
        "{premium}"
    );
}

#[tokio::test]
async fn a_real_open_source_coder_refuses_organization_and_group_writes_with_a_reason() {
    coder_k8s_coder_client::install_ring_provider();
    let real = RealCoder::shared().await.unwrap();
    let url: url::Url = real.url().parse().unwrap();
    let client = CoderClient::new(url.clone(), SessionToken::new(real.owner_token())).unwrap();
    let registry = registry_over(url, real.owner_token());
    let org = client.default_organization().await.unwrap();

    let refused = create(&registry, ORGANIZATIONS, organization("platform", json!({})))
        .await
        .unwrap_err();
    assert_eq!(refused.code, 405, "{refused}");
    assert!(refused.message.contains("Multiple Organizations"), "{refused}");
    let current = get(&registry, ORGANIZATIONS, &org.name).await.unwrap();
    let refused = update(
        &registry,
        ORGANIZATIONS,
        changed(current.clone(), json!({"description": "x"})),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code, 405, "{refused}");
    // Nothing to change: nothing is sent, so it succeeds on open-source Coder too.
    assert_eq!(
        update(&registry, ORGANIZATIONS, current).await.unwrap().event,
        None
    );
    assert_eq!(
        client.organization(&org.name).await.unwrap().description,
        org.description,
        "the refused write changed nothing"
    );

    let refused = create(&registry, GROUPS, group(&format!("{}.ops", org.name), json!({})))
        .await
        .unwrap_err();
    assert_eq!(refused.code, 405, "{refused}");
    assert!(refused.message.contains("Template RBAC"), "{refused}");
    // Other tests of this process add users to the shared real Coder, which changes Everyone between a read and
    // the update (a 409): read again then.
    let everyone = format!("{}.Everyone", org.name);
    let mut outcomes = Vec::new();
    for _ in 0..10 {
        let current = get(&registry, GROUPS, &everyone).await.unwrap();
        let same = update(&registry, GROUPS, current.clone()).await;
        let quota = update(&registry, GROUPS, changed(current, json!({"quotaAllowance": 4}))).await;
        let raced = |result: &Result<Written, ApiError>| matches!(result, Err(e) if e.code == 409);
        if !raced(&same) && !raced(&quota) {
            outcomes.push((same, quota));
            break;
        }
    }
    let (same, quota) = outcomes
        .pop()
        .expect("an Everyone group that held still for two requests");
    assert_eq!(same.unwrap().event, None, "an unchanged update sends nothing");
    let refused = quota.unwrap_err();
    assert_eq!(refused.code, 405, "{refused}");
}

/// The user update checks every Coder answers alike, on `user`, a plain member of the default organization.
async fn a_user_is_updated_the_same_everywhere(registry: &Registry, client: &CoderClient, user: &str) {
    let org = client.default_organization().await.unwrap();
    let current = get(registry, USERS, user).await.unwrap();
    assert_eq!(
        current["spec"]["organizations"],
        json!({&org.name: []}),
        "{current}"
    );

    // A full name, a site role and a role in the organization: read back from Coder.
    let desired = changed(
        current.clone(),
        json!({"name": "Carol C.", "roles": ["auditor"], "organizations": {&org.name: ["organization-auditor"]}}),
    );
    let written = update(registry, USERS, desired).await.unwrap();
    assert_eq!(written.event, Some(EventType::Modified));
    let read = client.user(user).await.unwrap();
    assert_eq!(read.name, "Carol C.");
    assert!(read.has_role("auditor"), "{read:?}");
    let roles = client.user_roles(&read.id.to_string()).await.unwrap();
    assert_eq!(roles.organization_roles[&org.id], ["organization-auditor"]);
    assert_eq!(written.object, get(registry, USERS, user).await.unwrap());

    // Nothing to change: no write.
    assert_eq!(
        update(registry, USERS, written.object.clone())
            .await
            .unwrap()
            .event,
        None
    );

    // Suspended, then active again.
    let suspended = update(
        registry,
        USERS,
        changed(written.object.clone(), json!({"suspended": true})),
    )
    .await
    .unwrap();
    assert_eq!(client.user(user).await.unwrap().status, "suspended");
    assert_eq!(suspended.object["status"]["status"], "suspended");
    let active = update(
        registry,
        USERS,
        changed(suspended.object, json!({"suspended": false})),
    )
    .await
    .unwrap();
    assert_ne!(client.user(user).await.unwrap().status, "suspended");

    // Refused before anything is written: an email change, an unknown organization, a stale resourceVersion.
    let refused = update(
        registry,
        USERS,
        changed(active.object.clone(), json!({"email": "x@example.com"})),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code, 422, "{refused}");
    assert!(refused.message.contains("spec.email"), "{refused}");
    let nowhere = changed(
        active.object.clone(),
        json!({"organizations": {&org.name: [], "nowhere": []}}),
    );
    let refused = update(registry, USERS, nowhere).await.unwrap_err();
    assert_eq!(refused.code, 422, "{refused}");
    assert!(
        refused.message.contains("spec.organizations[nowhere]"),
        "{refused}"
    );
    let mut stale = changed(active.object.clone(), json!({"name": "Stale"}));
    stale["metadata"]["resourceVersion"] = json!("1");
    assert_eq!(update(registry, USERS, stale).await.unwrap_err().code, 409);

    // Back to a plain member: the role lists are sent whole, also when empty.
    let plain = changed(
        active.object,
        json!({"roles": [], "organizations": {&org.name: []}}),
    );
    update(registry, USERS, plain).await.unwrap();
    let roles = client.user_roles(&read.id.to_string()).await.unwrap();
    assert_eq!(
        (roles.roles.len(), roles.organization_roles[&org.id].len()),
        (0, 0),
        "{roles:?}"
    );
    assert_eq!(client.user(user).await.unwrap().name, "Carol C.");
}

#[tokio::test]
async fn users_are_updated_on_the_test_server() {
    let coder = coder("user-writes").await;
    let registry = registry_over(coder.server.url(), &coder.token);
    coder.server.mint_token("carol", &[]).await.unwrap();
    a_user_is_updated_the_same_everywhere(&registry, &coder.client, "carol").await;

    // The refusals and the unchanged update sent Coder nothing: check the whole log around one of each.
    let current = get(&registry, USERS, "carol").await.unwrap();
    coder.server.clear_requests();
    assert_eq!(
        update(&registry, USERS, current.clone()).await.unwrap().event,
        None
    );
    let email = changed(current.clone(), json!({"email": "x@example.com"}));
    update(&registry, USERS, email).await.unwrap_err();
    assert_eq!(writes(&coder.server), Vec::<String>::new());

    // Memberships: joining an organization with a role, and leaving it.
    coder
        .server
        .set_entitlement("multiple_organizations", Entitlement::Entitled);
    let org = coder.client.default_organization().await.unwrap().name;
    coder.server.add_organization("initech").await.unwrap();
    let joined = changed(
        current,
        json!({"organizations": {&org: [], "initech": ["organization-admin"]}}),
    );
    let written = update(&registry, USERS, joined).await.unwrap();
    assert_eq!(
        written.object["spec"]["organizations"],
        json!({&org: [], "initech": ["organization-admin"]})
    );
    let members = coder.client.organization_members("initech").await.unwrap();
    assert!(members.iter().any(|m| m.username == "carol"), "{members:?}");
    let left = changed(written.object, json!({"organizations": {&org: []}}));
    let written = update(&registry, USERS, left).await.unwrap();
    assert_eq!(written.object["spec"]["organizations"], json!({&org: []}));
    let members = coder.client.organization_members("initech").await.unwrap();
    assert!(!members.iter().any(|m| m.username == "carol"), "{members:?}");

    // Without a user store (no namespace of its own), what needs a Secret or a record is refused before Coder is
    // asked: a generated password (422), and a delete that would suspend (405, which names the other policy).
    let storage = &registry.resource(USERS).unwrap().storage;
    coder.server.clear_requests();
    let missing = json!({"metadata": {"name": "dave", "namespace": NAMESPACE}, "spec": {
        "email": "dave@example.com", "organizations": {&org: []},
        "password": {"generate": {"secretName": "dave-login"}},
    }});
    let error = storage.update(&ctx(), "dave", missing, true).await.unwrap_err();
    assert_eq!(error.code, 422, "{error}");
    assert!(
        error.message.contains("spec.password.generate: Forbidden"),
        "{error}"
    );
    let error = delete(&registry, USERS, "carol").await.unwrap_err();
    assert_eq!(error.code, 405, "{error}");
    assert!(error.message.contains("deletionPolicy: Delete"), "{error}");
    assert_eq!(writes(&coder.server), Vec::<String>::new());
}

#[tokio::test]
async fn users_are_updated_on_a_real_coder() {
    coder_k8s_coder_client::install_ring_provider();
    let real = RealCoder::shared().await.unwrap();
    let url: url::Url = real.url().parse().unwrap();
    let client = CoderClient::new(url.clone(), SessionToken::new(real.owner_token())).unwrap();
    let registry = registry_over(url, real.owner_token());
    let org = client.default_organization().await.unwrap();
    // A user who signs in nowhere (login type none), a member of the default organization.
    let username = format!("carol-{}", std::process::id() % 100_000);
    let body = json!({
        "email": format!("{username}@example.com"), "username": username, "login_type": "none",
        "organization_ids": [org.id],
    });
    let created = real.send_json("POST", "/api/v2/users", &body).await.unwrap();
    assert_eq!(created.status, 201, "{}", created.text());
    a_user_is_updated_the_same_everywhere(&registry, &client, &username).await;
}
