//! User and organization membership writes as Coder v2.30.0 does them (`coderd/users.go`, `coderd/members.go`,
//! dbauthz's role-assignment rules): profile, suspend and activate, site roles; add, remove and re-role organization
//! members; each read back through the GET routes, each refusal with Coder's status and text.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use coder_k8s_coder_testserver::Entitlement;
use common::Env;
use reqwest::Method;
use serde_json::{Value, json};

async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A request with `token`.
fn call(env: &Env, token: &str, method: Method, path: &str, body: Option<Value>) -> reqwest::RequestBuilder {
    let request = env
        .http
        .request(method, env.url(path))
        .header("Coder-Session-Token", token);
    match body {
        Some(body) => request.json(&body),
        None => request,
    }
}

/// A `PUT` with the owner's token.
fn put(env: &Env, path: &str, body: Value) -> reqwest::RequestBuilder {
    call(env, &env.token, Method::PUT, path, Some(body))
}

fn assert_error(status: u16, body: &Value, want_status: u16, message: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["message"], message, "{body}");
}

async fn get(env: &Env, path: &str) -> Value {
    let (status, body) = answer(env.get(path)).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// The names of a rendered role list, as a set (Coder stores roles without duplicates, in no fixed order).
fn role_names(roles: &Value) -> BTreeSet<String> {
    roles
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Gives `username` the organization roles `roles` in organization `org` (SQL).
async fn set_org_roles(env: &Env, org: uuid::Uuid, username: &str, roles: &[&str]) {
    let roles: Vec<String> = roles.iter().map(|r| (*r).to_owned()).collect();
    let changed = env
        .db()
        .await
        .execute(
            "UPDATE organization_members SET roles = $3 WHERE organization_id = $1 \
             AND user_id = (SELECT id FROM users WHERE username = $2 AND deleted = false)",
            &[&org, &username, &roles],
        )
        .await
        .unwrap();
    assert_eq!(changed, 1);
}

const UNKNOWN_USER: &str = "\"user\" must be an existing uuid or username.";

#[tokio::test]
async fn a_profile_update_sets_the_username_and_name_seen_by_every_read() {
    let env = Env::start("uw_profile", |_| {}).await;
    env.server.mint_token("alice", &[]).await.unwrap();
    let before = get(&env, "/api/v2/users/alice").await;

    let (status, user) = answer(put(
        &env,
        "/api/v2/users/alice/profile",
        json!({"username": "alice-2", "name": "Alice Liddell"}),
    ))
    .await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["id"], before["id"]);
    assert_eq!(user["username"], "alice-2");
    assert_eq!(user["name"], "Alice Liddell");
    assert_eq!(user["email"], before["email"], "the email stays");
    assert_eq!(user["organization_ids"], before["organization_ids"]);
    assert_ne!(user["updated_at"], before["updated_at"]);
    assert_eq!(
        user,
        get(&env, "/api/v2/users/alice-2").await,
        "rendered as GET renders it"
    );
    let listed = get(&env, "/api/v2/users").await;
    assert!(
        listed["users"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["username"] == "alice-2" && u["name"] == "Alice Liddell"),
        "{listed}"
    );
    let (status, body) = answer(env.get("/api/v2/users/alice")).await;
    assert_error(status, &body, 400, UNKNOWN_USER);

    // A change of case of its own name is no conflict; an empty name clears it (then left out).
    let (status, user) = answer(put(
        &env,
        &format!("/api/v2/users/{}/profile", before["id"].as_str().unwrap()),
        json!({"username": "Alice-2", "name": ""}),
    ))
    .await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["username"], "Alice-2");
    assert!(user.get("name").is_none(), "{user}");
}

#[tokio::test]
async fn profile_refusals_are_coders_in_coders_order() {
    let env = Env::start("uw_profile_no", |_| {}).await;
    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    env.server.mint_token("bob", &[]).await.unwrap();
    let template_admin = env.server.mint_token("tina", &["template-admin"]).await.unwrap();

    let (status, body) = answer(put(
        &env,
        "/api/v2/users/alice/profile",
        json!({"name": " padded"}),
    ))
    .await;
    assert_error(status, &body, 400, "Validation failed.");
    assert_eq!(
        body["validations"],
        json!([
            {"field": "username", "detail": "Validation failed for tag \"required\" with value: \"\""},
            {"field": "name", "detail": "Validation failed for tag \"user_real_name\" with value: \" padded\""},
        ])
    );
    let (status, body) = answer(put(
        &env,
        "/api/v2/users/alice/profile",
        json!({"username": "alice_b"}),
    ))
    .await;
    assert_error(status, &body, 400, "Validation failed.");
    assert_eq!(
        body["validations"],
        json!([{"field": "username", "detail": "Validation failed for tag \"username\" with value: \"alice_b\""}])
    );
    let (status, body) = answer(put(&env, "/api/v2/users/alice/profile", json!("nope"))).await;
    assert_error(status, &body, 400, "Request body must be valid JSON.");
    // The user comes before the body.
    let (status, body) = answer(put(&env, "/api/v2/users/nobody/profile", json!("nope"))).await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    assert_eq!(body["detail"], "queried user=\"nobody\"");

    // Another user's name, in any case: 409 with a validation.
    let (status, body) = answer(put(
        &env,
        "/api/v2/users/alice/profile",
        json!({"username": "BOB"}),
    ))
    .await;
    assert_error(status, &body, 409, "A user with this username already exists.");
    assert_eq!(
        body["validations"],
        json!([{"field": "username", "detail": "This username is already in use."}])
    );

    // A plain member: another user is unknown to it; its own username needs `update` on users (404); its name it
    // may change.
    let as_alice = |path: &str, body: Value| call(&env, &alice, Method::PUT, path, Some(body));
    let (status, body) = answer(as_alice("/api/v2/users/bob/profile", json!({"username": "bob"}))).await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    let (status, body) = answer(as_alice(
        "/api/v2/users/me/profile",
        json!({"username": "alicia"}),
    ))
    .await;
    assert_error(
        status,
        &body,
        404,
        "Resource not found or you do not have access to this resource",
    );
    let (status, user) = answer(as_alice(
        "/api/v2/users/me/profile",
        json!({"username": "alice", "name": "Alice"}),
    ))
    .await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["name"], "Alice");

    // A template admin reads users but may not update another's profile.
    let (status, body) = answer(call(
        &env,
        &template_admin,
        Method::PUT,
        "/api/v2/users/bob/profile",
        Some(json!({"username": "bob", "name": "Bob"})),
    ))
    .await;
    assert_error(status, &body, 500, "Internal error updating user.");
    assert_eq!(body["detail"], "unauthorized: rbac: forbidden");
    assert!(
        get(&env, "/api/v2/users/bob")
            .await
            .get("name")
            .is_some_and(|n| n == "bob")
    );
}

#[tokio::test]
async fn suspend_and_activate_set_the_status_in_the_database() {
    let env = Env::start("uw_status", |_| {}).await;
    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    let before = get(&env, "/api/v2/users/alice").await;

    let (status, user) = answer(put(&env, "/api/v2/users/alice/status/suspend", json!({}))).await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["status"], "suspended");
    assert_ne!(user["updated_at"], before["updated_at"]);
    assert_eq!(user, get(&env, "/api/v2/users/alice").await);
    let stored: String = env
        .db()
        .await
        .query_one("SELECT status::text FROM users WHERE username = 'alice'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, "suspended");
    let (status, body) = answer(call(&env, &alice, Method::GET, "/api/v2/users/me", None)).await;
    assert_error(
        status,
        &body,
        401,
        "User is not active (status = \"suspended\"). Contact an admin to reactivate your account.",
    );
    // Suspending a suspended user is no error.
    let (status, user) = answer(put(&env, "/api/v2/users/alice/status/suspend", json!({}))).await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["status"], "suspended");

    let (status, user) = answer(put(&env, "/api/v2/users/alice/status/activate", json!({}))).await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["status"], "active");
    let (status, me) = answer(call(&env, &alice, Method::GET, "/api/v2/users/me", None)).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["status"], "active");

    // A dormant user is activated too; activating an active one is no error.
    env.db()
        .await
        .execute(
            "UPDATE users SET status = 'dormant' WHERE username = 'alice'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(get(&env, "/api/v2/users/alice").await["status"], "dormant");
    let (status, user) = answer(put(&env, "/api/v2/users/alice/status/activate", json!({}))).await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["status"], "active");
    let (status, user) = answer(put(&env, "/api/v2/users/alice/status/activate", json!({}))).await;
    assert_eq!(status, 200, "{user}");
    let listed = get(&env, "/api/v2/users").await;
    assert!(
        listed["users"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["username"] == "alice" && u["status"] == "active")
    );
}

#[tokio::test]
async fn status_refusals_are_coders() {
    let env = Env::start("uw_status_no", |_| {}).await;
    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    env.server.mint_token("bob", &[]).await.unwrap();
    env.server.mint_token("olga", &["owner"]).await.unwrap();
    let user_admin = env.server.mint_token("ursula", &["user-admin"]).await.unwrap();

    let (status, body) = answer(put(&env, "/api/v2/users/me/status/suspend", json!({}))).await;
    assert_error(status, &body, 400, "You cannot suspend yourself.");
    let (status, body) = answer(put(&env, "/api/v2/users/olga/status/suspend", json!({}))).await;
    assert_error(
        status,
        &body,
        400,
        "You cannot suspend a user with the \"owner\" role. You must remove the role first.",
    );
    let (status, body) = answer(put(&env, "/api/v2/users/nobody/status/activate", json!({}))).await;
    assert_error(status, &body, 400, UNKNOWN_USER);

    // A plain member: another user is unknown to it; itself it may not suspend, nor (without `update` on users)
    // activate.
    let (status, body) = answer(call(
        &env,
        &alice,
        Method::PUT,
        "/api/v2/users/bob/status/suspend",
        None,
    ))
    .await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    let (status, body) = answer(call(
        &env,
        &alice,
        Method::PUT,
        "/api/v2/users/me/status/suspend",
        None,
    ))
    .await;
    assert_error(status, &body, 400, "You cannot suspend yourself.");
    let (status, body) = answer(call(
        &env,
        &alice,
        Method::PUT,
        "/api/v2/users/me/status/activate",
        None,
    ))
    .await;
    assert_error(
        status,
        &body,
        500,
        "Internal error updating user's status to \"active\".",
    );
    assert_eq!(body["detail"], "unauthorized: rbac: forbidden");

    // A user admin may.
    let (status, user) = answer(call(
        &env,
        &user_admin,
        Method::PUT,
        "/api/v2/users/bob/status/suspend",
        None,
    ))
    .await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["status"], "suspended");
}

#[tokio::test]
async fn site_roles_are_replaced_whole() {
    let env = Env::start("uw_roles", |_| {}).await;
    env.server.mint_token("alice", &[]).await.unwrap();

    let (status, user) = answer(put(
        &env,
        "/api/v2/users/alice/roles",
        json!({"roles": ["auditor", "template-admin", "auditor"]}),
    ))
    .await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(role_names(&user["roles"]), names(&["auditor", "template-admin"]));
    for role in user["roles"].as_array().unwrap() {
        let want = if role["name"] == "auditor" {
            "Auditor"
        } else {
            "Template Admin"
        };
        assert_eq!(role, &json!({"name": role["name"], "display_name": want}));
    }
    assert_eq!(user, get(&env, "/api/v2/users/alice").await);
    let roles = get(&env, "/api/v2/users/alice/roles").await;
    let stored: BTreeSet<String> = roles["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(stored, names(&["auditor", "template-admin"]));

    // The whole list replaces: what is left out goes.
    let (status, user) = answer(put(
        &env,
        "/api/v2/users/alice/roles",
        json!({"roles": ["owner"]}),
    ))
    .await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["roles"], json!([{"name": "owner", "display_name": "Owner"}]));
    let (status, user) = answer(put(&env, "/api/v2/users/alice/roles", json!({}))).await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["roles"], json!([]));
    // `member` is implicit, yet sent it is stored and shown.
    let (status, user) = answer(put(
        &env,
        "/api/v2/users/alice/roles",
        json!({"roles": ["member"]}),
    ))
    .await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(
        user["roles"],
        json!([{"name": "member", "display_name": "Member"}])
    );
    assert_eq!(
        get(&env, "/api/v2/users/alice/roles").await["roles"],
        json!(["member"])
    );
}

#[tokio::test]
async fn site_role_refusals_are_coders_in_coders_order() {
    let env = Env::start("uw_roles_no", |_| {}).await;
    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    env.server.mint_token("bob", &["auditor"]).await.unwrap();
    let auditor = env.server.mint_token("audrey", &["auditor"]).await.unwrap();
    let user_admin = env.server.mint_token("ursula", &["user-admin"]).await.unwrap();

    let (status, body) = answer(put(&env, "/api/v2/users/me/roles", json!({"roles": []}))).await;
    assert_error(status, &body, 400, "You cannot change your own roles.");
    // Its own roles come before the body.
    let (status, body) = answer(put(&env, "/api/v2/users/me/roles", json!("nope"))).await;
    assert_error(status, &body, 400, "You cannot change your own roles.");
    let (status, body) = answer(put(&env, "/api/v2/users/alice/roles", json!("nope"))).await;
    assert_error(status, &body, 400, "Request body must be valid JSON.");
    let (status, body) = answer(put(
        &env,
        "/api/v2/users/alice/roles",
        json!({"roles": ["auditor", "bogus"]}),
    ))
    .await;
    assert_error(status, &body, 400, "\"bogus\" is not a supported role");
    let (status, body) = answer(put(
        &env,
        "/api/v2/users/alice/roles",
        json!({"roles": ["organization-admin"]}),
    ))
    .await;
    assert_error(
        status,
        &body,
        400,
        "\"organization-admin\" is not a supported role",
    );
    assert_eq!(
        get(&env, "/api/v2/users/alice").await["roles"],
        json!([]),
        "nothing changed"
    );

    // A plain member: others are unknown to it, its own roles it may not change.
    let (status, body) = answer(call(
        &env,
        &alice,
        Method::PUT,
        "/api/v2/users/bob/roles",
        Some(json!({})),
    ))
    .await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    let (status, body) = answer(call(
        &env,
        &alice,
        Method::PUT,
        "/api/v2/users/me/roles",
        Some(json!({})),
    ))
    .await;
    assert_error(status, &body, 400, "You cannot change your own roles.");

    // An auditor reads users but may not assign roles: 403, after the unknown-role check.
    let as_auditor = |body: Value| {
        call(
            &env,
            &auditor,
            Method::PUT,
            "/api/v2/users/alice/roles",
            Some(body),
        )
    };
    let (status, body) = answer(as_auditor(json!({"roles": []}))).await;
    assert_error(status, &body, 403, "Forbidden.");
    assert_eq!(
        body["detail"],
        "You don't have permission to view this content. If you believe this is a mistake, please contact your \
         administrator or try signing in with different credentials."
    );
    let (status, body) = answer(as_auditor(json!({"roles": ["bogus"]}))).await;
    assert_error(status, &body, 400, "\"bogus\" is not a supported role");

    // A user admin may assign `member` only: adding or removing anything else is refused.
    let as_user_admin = |path: &str, body: Value| call(&env, &user_admin, Method::PUT, path, Some(body));
    let (status, body) = answer(as_user_admin(
        "/api/v2/users/alice/roles",
        json!({"roles": ["auditor"]}),
    ))
    .await;
    assert_error(status, &body, 400, "not authorized to assign role \"auditor\"");
    let (status, body) = answer(as_user_admin("/api/v2/users/bob/roles", json!({"roles": []}))).await;
    assert_error(status, &body, 400, "not authorized to assign role \"auditor\"");
    let (status, user) = answer(as_user_admin(
        "/api/v2/users/alice/roles",
        json!({"roles": ["member"]}),
    ))
    .await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(role_names(&user["roles"]), names(&["member"]));
}

async fn org_env(tag: &str) -> (Env, uuid::Uuid) {
    let env = Env::start(tag, |c| {
        c.entitlements
            .insert("template_rbac".to_owned(), Entitlement::Entitled);
    })
    .await;
    let org = env.server.add_organization("acme").await.unwrap();
    (env, org)
}

fn member_path(org: uuid::Uuid, user: &str) -> String {
    format!("/api/v2/organizations/{org}/members/{user}")
}

#[tokio::test]
async fn adding_a_member_shows_in_every_read() {
    let (env, org) = org_env("uw_member_add").await;
    // A mint joins every organization: alice leaves `acme` first.
    env.server.mint_token("alice", &[]).await.unwrap();
    let alice_id = get(&env, "/api/v2/users/alice").await["id"].clone();
    env.db()
        .await
        .execute(
            "DELETE FROM organization_members WHERE organization_id = $1 AND user_id = \
             (SELECT id FROM users WHERE username = 'alice')",
            &[&org],
        )
        .await
        .unwrap();
    let before = get(&env, "/api/v2/users/alice").await;
    assert!(
        !before["organization_ids"]
            .as_array()
            .unwrap()
            .contains(&json!(org))
    );

    let (status, member) = answer(env.post(&member_path(org, "alice"), json!({}))).await;
    assert_eq!(status, 200, "{member}");
    let keys: BTreeSet<&str> = member.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["user_id", "organization_id", "created_at", "updated_at", "roles"])
    );
    assert_eq!(member["user_id"], alice_id);
    assert_eq!(member["organization_id"], json!(org));
    assert_eq!(member["roles"], json!([]));
    assert_eq!(member["created_at"], member["updated_at"]);

    let members = get(&env, &format!("/api/v2/organizations/{org}/members")).await;
    let listed = members
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["username"] == "alice")
        .unwrap();
    assert_eq!(listed["user_id"], alice_id);
    assert_eq!(listed["created_at"], member["created_at"]);
    assert_eq!(listed["roles"], json!([]));
    assert_eq!(listed["global_roles"], json!([]));
    let user = get(&env, "/api/v2/users/alice").await;
    assert!(user["organization_ids"].as_array().unwrap().contains(&json!(org)));
    assert_eq!(
        get(&env, "/api/v2/users/alice/roles").await["organization_roles"][org.to_string()],
        json!([])
    );
    let groups = get(&env, &format!("/api/v2/organizations/{org}/groups")).await;
    assert!(
        groups[0]["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["username"] == "alice"),
        "the Everyone group holds the new member: {groups}"
    );

    // Again: Coder's 400 from the unique violation.
    let (status, body) = answer(env.post(&member_path(org, "alice"), json!({}))).await;
    assert_error(status, &body, 400, "User is already an organization member");
    assert_eq!(body["detail"], "alice is already a member of acme");
}

#[tokio::test]
async fn member_add_refusals_are_coders() {
    let (env, org) = org_env("uw_member_add_no").await;
    let bob = env.server.mint_token("bob", &[]).await.unwrap();
    let uma = env.server.mint_token("uma", &[]).await.unwrap();
    env.server.mint_token("carol", &[]).await.unwrap();
    // Created after the mints: nobody is in it.
    let outsider_org = env.server.add_organization("other").await.unwrap();
    env.db()
        .await
        .execute(
            "DELETE FROM organization_members WHERE organization_id = $1 AND user_id = \
             (SELECT id FROM users WHERE username = 'carol')",
            &[&org],
        )
        .await
        .unwrap();

    let (status, body) = answer(env.post(&member_path(org, "nobody"), json!({}))).await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    let (status, body) = answer(env.post("/api/v2/organizations/nope/members/carol", json!({}))).await;
    assert_error(
        status,
        &body,
        404,
        "Resource not found or you do not have access to this resource",
    );

    // A plain member: other users are unknown to it; adding itself (or anyone) it may not.
    let (status, body) = answer(call(&env, &bob, Method::POST, &member_path(org, "carol"), None)).await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    let (status, body) = answer(call(&env, &bob, Method::POST, &member_path(org, "me"), None)).await;
    assert_error(
        status,
        &body,
        404,
        "Resource not found or you do not have access to this resource",
    );
    // An organization it is not in is a 404.
    let (status, body) = answer(call(
        &env,
        &bob,
        Method::POST,
        &member_path(outsider_org, "me"),
        None,
    ))
    .await;
    assert_error(
        status,
        &body,
        404,
        "Resource not found or you do not have access to this resource",
    );

    // The organization's user admin reads users and adds members.
    set_org_roles(&env, org, "uma", &["organization-user-admin"]).await;
    let (status, member) = answer(call(&env, &uma, Method::POST, &member_path(org, "carol"), None)).await;
    assert_eq!(status, 200, "{member}");
    assert_eq!(member["roles"], json!([]));
}

#[tokio::test]
async fn removing_a_member_drops_it_from_the_reads_and_the_groups() {
    let (env, org) = org_env("uw_member_remove").await;
    env.server.mint_token("alice", &[]).await.unwrap();
    let alice_id = get(&env, "/api/v2/users/alice").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, group) = answer(env.post(
        &format!("/api/v2/organizations/{org}/groups"),
        json!({"name": "devs"}),
    ))
    .await;
    assert_eq!(status, 201, "{group}");
    let group_path = format!("/api/v2/groups/{}", group["id"].as_str().unwrap());
    let (status, group) = answer(env.patch(&group_path, json!({"add_users": [alice_id]}))).await;
    assert_eq!(status, 200, "{group}");
    assert_eq!(group["total_member_count"], 1);

    let response = env.delete(&member_path(org, "alice")).send().await.unwrap();
    assert_eq!(response.status(), 204);
    assert!(response.text().await.unwrap().is_empty());

    let members = get(&env, &format!("/api/v2/organizations/{org}/members")).await;
    assert!(
        !members
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["username"] == "alice"),
        "{members}"
    );
    let user = get(&env, "/api/v2/users/alice").await;
    assert!(!user["organization_ids"].as_array().unwrap().contains(&json!(org)));
    assert!(
        get(&env, "/api/v2/users/alice/roles").await["organization_roles"]
            .get(org.to_string())
            .is_none()
    );
    // Back in the organization, the user is no longer in the group: it left it at once.
    let (status, _) = answer(env.post(&member_path(org, "alice"), json!({}))).await;
    assert_eq!(status, 200);
    let group = get(&env, &group_path).await;
    assert_eq!(group["members"], json!([]), "{group}");
    assert_eq!(group["total_member_count"], 0);
}

#[tokio::test]
async fn member_remove_refusals_are_coders() {
    let (env, org) = org_env("uw_member_remove_no").await;
    let bob = env.server.mint_token("bob", &[]).await.unwrap();
    env.server.mint_token("carol", &[]).await.unwrap();
    let owner = env.server.mint_token("olga", &["owner"]).await.unwrap();
    env.db()
        .await
        .execute(
            "DELETE FROM organization_members WHERE organization_id = $1 AND user_id = \
             (SELECT id FROM users WHERE username = 'carol')",
            &[&org],
        )
        .await
        .unwrap();
    let not_found = "Resource not found or you do not have access to this resource";
    // The operator (a system user) joins `acme`.
    let (status, body) = answer(env.post(&member_path(org, "me"), json!({}))).await;
    assert_eq!(status, 200, "{body}");

    let (status, body) = answer(env.delete(&member_path(org, "me"))).await;
    assert_error(status, &body, 400, "cannot remove self from an organization");
    let (status, body) = answer(env.delete(&member_path(org, "nobody"))).await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    let (status, body) = answer(env.delete(&member_path(org, "carol"))).await;
    assert_error(status, &body, 404, not_found);
    // A plain member: itself is refused first; anyone else it may not remove.
    let (status, body) = answer(call(&env, &bob, Method::DELETE, &member_path(org, "me"), None)).await;
    assert_error(status, &body, 400, "cannot remove self from an organization");
    let (status, body) = answer(call(&env, &bob, Method::DELETE, &member_path(org, "olga"), None)).await;
    assert_error(status, &body, 404, not_found);
    // A system user (the operator) cannot be removed.
    let (status, body) = answer(call(
        &env,
        &owner,
        Method::DELETE,
        &member_path(org, "coder-k8s-operator"),
        None,
    ))
    .await;
    assert_error(status, &body, 404, not_found);
    // Everyone stays: bob and olga, and the operator, listed only when the search asks for system users.
    let listed = |members: Value| -> Vec<String> {
        members
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["username"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        listed(get(&env, &format!("/api/v2/organizations/{org}/members")).await),
        ["bob", "olga"]
    );
    assert_eq!(
        listed(
            get(
                &env,
                &format!("/api/v2/organizations/{org}/members?q=include_system:true")
            )
            .await
        ),
        ["bob", "coder-k8s-operator", "olga"]
    );
}

#[tokio::test]
async fn member_roles_are_replaced_whole() {
    let (env, org) = org_env("uw_member_roles").await;
    env.server.mint_token("alice", &["auditor"]).await.unwrap();
    let path = format!("{}/roles", member_path(org, "alice"));

    let (status, member) = answer(put(
        &env,
        &path,
        json!({"roles": ["organization-admin", "organization-auditor", "organization-admin"]}),
    ))
    .await;
    assert_eq!(status, 200, "{member}");
    assert_eq!(
        role_names(&member["roles"]),
        names(&["organization-admin", "organization-auditor"])
    );
    for role in member["roles"].as_array().unwrap() {
        let want = if role["name"] == "organization-admin" {
            "Organization Admin"
        } else {
            "Organization Auditor"
        };
        assert_eq!(
            role,
            &json!({"name": role["name"], "display_name": want, "organization_id": org})
        );
    }
    let members = get(&env, &format!("/api/v2/organizations/{org}/members")).await;
    let listed = members
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["username"] == "alice")
        .unwrap();
    assert_eq!(role_names(&listed["roles"]), role_names(&member["roles"]));
    assert_eq!(listed["updated_at"], member["updated_at"]);
    assert_eq!(
        listed["global_roles"],
        json!([{"name": "auditor", "display_name": "Auditor"}])
    );
    let roles = get(&env, "/api/v2/users/alice/roles").await;
    let stored: BTreeSet<String> = roles["organization_roles"][org.to_string()]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(stored, names(&["organization-admin", "organization-auditor"]));

    let (status, member) = answer(put(
        &env,
        &path,
        json!({"roles": ["organization-template-admin"]}),
    ))
    .await;
    assert_eq!(status, 200, "{member}");
    assert_eq!(
        member["roles"],
        json!([{"name": "organization-template-admin", "display_name": "Organization Template Admin",
                "organization_id": org}])
    );
    // The implicit `organization-member` may be sent: it is stored, without a display name.
    let (status, member) = answer(put(&env, &path, json!({"roles": ["organization-member"]}))).await;
    assert_eq!(status, 200, "{member}");
    assert_eq!(
        member["roles"],
        json!([{"name": "organization-member", "display_name": "", "organization_id": org}])
    );
    let (status, member) = answer(put(&env, &path, json!({"roles": null}))).await;
    assert_eq!(status, 200, "{member}");
    assert_eq!(member["roles"], json!([]));
}

#[tokio::test]
async fn member_role_refusals_are_coders_in_coders_order() {
    let (env, org) = org_env("uw_member_roles_no").await;
    let bob = env.server.mint_token("bob", &[]).await.unwrap();
    env.server.mint_token("alice", &[]).await.unwrap();
    env.server.mint_token("carol", &[]).await.unwrap();
    let uma = env.server.mint_token("uma", &[]).await.unwrap();
    let ada = env.server.mint_token("ada", &[]).await.unwrap();
    let owner = env.server.mint_token("olga", &["owner"]).await.unwrap();
    set_org_roles(&env, org, "uma", &["organization-user-admin"]).await;
    set_org_roles(&env, org, "ada", &["organization-admin"]).await;
    env.db()
        .await
        .execute(
            "DELETE FROM organization_members WHERE organization_id = $1 AND user_id = \
             (SELECT id FROM users WHERE username = 'carol')",
            &[&org],
        )
        .await
        .unwrap();
    let roles_of = |user: &str| format!("{}/roles", member_path(org, user));
    let put_as =
        |token: &str, user: &str, body: Value| call(&env, token, Method::PUT, &roles_of(user), Some(body));
    // The operator (a system user) joins `acme`.
    let (status, body) = answer(env.post(&member_path(org, "me"), json!({}))).await;
    assert_eq!(status, 200, "{body}");

    let (status, body) = answer(put(&env, &roles_of("me"), json!("nope"))).await;
    assert_error(
        status,
        &body,
        400,
        "You cannot change your own organization roles.",
    );
    assert_eq!(
        body["detail"],
        "Another user with the appropriate permissions must change your roles."
    );
    let (status, body) = answer(put(&env, &roles_of("nobody"), json!({}))).await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    let (status, body) = answer(put(&env, &roles_of("carol"), json!({}))).await;
    assert_error(
        status,
        &body,
        404,
        "Resource not found or you do not have access to this resource",
    );
    let (status, body) = answer(put(&env, &roles_of("alice"), json!("nope"))).await;
    assert_error(status, &body, 400, "Request body must be valid JSON.");
    let (status, body) = answer(put(
        &env,
        &roles_of("alice"),
        json!({"roles": ["organization-admin", "bogus"]}),
    ))
    .await;
    assert_error(
        status,
        &body,
        400,
        &format!("\"bogus:{org}\" is not a supported role"),
    );
    let (status, body) = answer(put(&env, &roles_of("alice"), json!({"roles": ["owner"]}))).await;
    assert_error(
        status,
        &body,
        400,
        &format!("\"owner:{org}\" is not a supported role"),
    );
    let scoped = format!("organization-admin:{org}");
    let (status, body) = answer(put(&env, &roles_of("alice"), json!({"roles": [scoped]}))).await;
    assert_error(
        status,
        &body,
        400,
        &format!("attempt to assign a role \"{scoped}\", remove the ':<organization_id> suffix"),
    );
    // A system user's roles: 403.
    let (status, body) = answer(put_as(&owner, "coder-k8s-operator", json!({"roles": []}))).await;
    assert_error(status, &body, 403, "Forbidden.");

    // A plain member may not assign: 403, after the unknown-role check.
    let (status, body) = answer(put_as(&bob, "alice", json!({"roles": []}))).await;
    assert_error(status, &body, 403, "Forbidden.");
    let (status, body) = answer(put_as(&bob, "alice", json!({"roles": ["bogus"]}))).await;
    assert_error(
        status,
        &body,
        400,
        &format!("\"bogus:{org}\" is not a supported role"),
    );

    // The organization's user admin may assign `organization-member` only; its admin any organization role.
    let (status, body) = answer(put_as(&uma, "alice", json!({"roles": ["organization-auditor"]}))).await;
    assert_error(
        status,
        &body,
        400,
        &format!("not authorized to assign role \"organization-auditor:{org}\""),
    );
    let (status, member) = answer(put_as(&uma, "alice", json!({"roles": []}))).await;
    assert_eq!(status, 200, "{member}");
    let (status, member) = answer(put_as(&ada, "alice", json!({"roles": ["organization-auditor"]}))).await;
    assert_eq!(status, 200, "{member}");
    assert_eq!(role_names(&member["roles"]), names(&["organization-auditor"]));
    // Removing a role the caller may not assign is refused the same way.
    let (status, body) = answer(put_as(&uma, "alice", json!({"roles": []}))).await;
    assert_error(
        status,
        &body,
        400,
        &format!("not authorized to assign role \"organization-auditor:{org}\""),
    );
}
