//! Groups as Coder v2.30.0's Premium server serves them (`enterprise/coderd/groups.go`): create, patch (members by
//! user ID, Coder's checks in their order, the `Everyone` group's limits), get and delete, behind the Template RBAC
//! gate (before the key on `/groups/{group}`), with members that follow organization membership.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use coder_k8s_coder_testserver::Entitlement;
use common::Env;
use serde_json::{Value, json};

const NOT_FOUND: &str = "Resource not found or you do not have access to this resource";

async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn licensed(tag: &str) -> Env {
    Env::start(tag, |c| {
        for feature in ["multiple_organizations", "template_rbac"] {
            c.entitlements.insert(feature.to_owned(), Entitlement::Entitled);
        }
    })
    .await
}

/// A request with another user's token.
fn as_user(
    env: &Env,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::RequestBuilder {
    let request = env
        .http
        .request(method, env.url(path))
        .header("Coder-Session-Token", token);
    match body {
        Some(body) => request.json(&body),
        None => request,
    }
}

fn assert_error(status: u16, body: &Value, want_status: u16, message: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["message"], message, "{body}");
}

async fn user(env: &Env, username: &str) -> Value {
    let (status, user) = answer(env.get(&format!("/api/v2/users/{username}"))).await;
    assert_eq!(status, 200, "{user}");
    user
}

async fn default_org(env: &Env) -> Value {
    let (status, org) = answer(env.get("/api/v2/organizations/default")).await;
    assert_eq!(status, 200, "{org}");
    org
}

async fn create_group(env: &Env, body: Value) -> Value {
    let (status, group) = answer(env.post("/api/v2/organizations/default/groups", body)).await;
    assert_eq!(status, 201, "{group}");
    group
}

async fn set_org_roles(env: &Env, org: &str, username: &str, roles: &[&str]) {
    let roles: Vec<String> = roles.iter().map(|r| (*r).to_owned()).collect();
    let changed = env
        .db()
        .await
        .execute(
            "UPDATE organization_members SET roles = $3 WHERE organization_id = $1 \
             AND user_id = (SELECT id FROM users WHERE username = $2 AND deleted = false)",
            &[&uuid::Uuid::parse_str(org).unwrap(), &username, &roles],
        )
        .await
        .unwrap();
    assert_eq!(changed, 1);
}

/// A group member as Coder renders it (`codersdk.ReducedUser`), from the user as `GET /users/{user}` renders it
/// (the users here never signed in: Go's zero time).
fn member(user: &Value) -> Value {
    let mut out = json!({"last_seen_at": "0001-01-01T00:00:00Z"});
    for field in [
        "id",
        "username",
        "name",
        "email",
        "created_at",
        "updated_at",
        "status",
        "login_type",
    ] {
        out[field] = user[field].clone();
    }
    out
}

#[tokio::test]
async fn group_routes_need_the_template_rbac_feature() {
    let env = Env::start("group_gate", |_| {}).await;
    let org = default_org(&env).await;
    let gate = "Template RBAC is a Premium feature. Contact sales!";
    let (status, body) =
        answer(env.post("/api/v2/organizations/default/groups", json!({"name": "devs"}))).await;
    assert_error(status, &body, 403, gate);
    // The organization and the body come after the gate.
    let (status, body) = answer(env.post("/api/v2/organizations/nope/groups", json!([]))).await;
    assert_error(status, &body, 403, gate);
    // On `/groups/{group}` the gate comes even before the key.
    let path = format!("/api/v2/groups/{}", org["id"].as_str().unwrap());
    for method in [
        reqwest::Method::GET,
        reqwest::Method::PATCH,
        reqwest::Method::DELETE,
    ] {
        let (status, body) = answer(env.http.request(method.clone(), env.url(&path)).json(&json!({}))).await;
        assert_error(status, &body, 403, gate);
        let (status, body) = answer(env.http.request(method, env.url("/api/v2/groups/not-a-uuid"))).await;
        assert_error(status, &body, 403, gate);
    }
    // On the organization's routes the key comes first.
    let (status, body) = answer(
        env.http
            .post(env.url("/api/v2/organizations/default/groups"))
            .json(&json!({"name": "devs"})),
    )
    .await;
    assert_error(
        status,
        &body,
        401,
        "You are signed out or your session has expired. Please sign in again to continue.",
    );
}

#[tokio::test]
async fn a_created_group_is_rendered_as_coder_does() {
    let env = licensed("group_create").await;
    let org = default_org(&env).await;
    let group = create_group(
        &env,
        json!({"name": "platform", "display_name": "Platform Team", "avatar_url": "/emojis/1f680.png",
               "quota_allowance": 10}),
    )
    .await;
    let id = group["id"].as_str().unwrap().to_owned();
    assert_ne!(id, org["id"].as_str().unwrap());
    assert_eq!(
        group,
        json!({
            "id": id, "name": "platform", "display_name": "Platform Team", "organization_id": org["id"],
            "members": [], "total_member_count": 0, "avatar_url": "/emojis/1f680.png", "quota_allowance": 10,
            "source": "user", "organization_name": "coder", "organization_display_name": "Coder",
        })
    );
    // Listed after Everyone, by name and by ID.
    let (status, groups) = answer(env.get("/api/v2/organizations/default/groups")).await;
    assert_eq!(status, 200, "{groups}");
    assert_eq!(groups.as_array().unwrap().len(), 2);
    assert_eq!(groups[0]["name"], "Everyone");
    assert_eq!(groups[1], group);
    let (status, by_name) = answer(env.get("/api/v2/organizations/default/groups/platform")).await;
    assert_eq!(status, 200);
    assert_eq!(by_name, group);
    let (status, by_id) = answer(env.get(&format!("/api/v2/groups/{id}"))).await;
    assert_eq!(status, 200);
    assert_eq!(by_id, group);

    // Only the name is needed; names are case-sensitive; a `null` reads as empty.
    let minimal = create_group(
        &env,
        json!({"name": "Platform", "display_name": null, "quota_allowance": null}),
    )
    .await;
    assert_eq!(minimal["display_name"], "");
    assert_eq!(minimal["avatar_url"], "");
    assert_eq!(minimal["quota_allowance"], 0);
    // Coder stores the quota as a 32-bit integer.
    let wrapped = create_group(
        &env,
        json!({"name": "wrapped", "quota_allowance": 4_294_967_297_i64}),
    )
    .await;
    assert_eq!(wrapped["quota_allowance"], 1);
}

#[tokio::test]
async fn group_create_refusals_are_coders() {
    let env = licensed("group_create_no").await;
    let base = "/api/v2/organizations/default/groups";
    let (status, body) = answer(env.post(base, json!({"display_name": "Trailing "}))).await;
    assert_error(status, &body, 400, "Validation failed.");
    assert_eq!(
        body["validations"],
        json!([
            {"field": "name", "detail": "Validation failed for tag \"required\" with value: \"\""},
            {"field": "display_name",
             "detail": "Validation failed for tag \"group_display_name\" with value: \"Trailing \""},
        ])
    );
    for bad in ["two words", "new", "under_score", "-dash"] {
        let (status, body) = answer(env.post(base, json!({ "name": bad }))).await;
        assert_error(status, &body, 400, "Validation failed.");
        assert_eq!(
            body["validations"],
            json!([{"field": "name", "detail": format!("Validation failed for tag \"group_name\" with value: \"{bad}\"")}]),
            "{bad}"
        );
    }
    let (status, body) = answer(env.post(base, json!({"name": "Everyone"}))).await;
    assert_error(status, &body, 400, "Invalid group name.");
    assert_eq!(
        body["validations"],
        json!([{"field": "name", "detail": "\"Everyone\" is a reserved group name"}])
    );
    create_group(&env, json!({"name": "devs"})).await;
    let (status, body) = answer(env.post(base, json!({"name": "devs", "display_name": "Other"}))).await;
    assert_error(status, &body, 409, "A group named \"devs\" already exists.");
    assert_eq!(
        body["validations"],
        json!([{"field": "name", "detail": "Group names must be unique"}])
    );
    let (status, body) = answer(env.post(base, json!({"name": "x", "quota_allowance": "1"}))).await;
    assert_error(status, &body, 400, "Request body must be valid JSON.");
    let (status, body) = answer(env.post("/api/v2/organizations/nope/groups", json!({"name": "x"}))).await;
    assert_error(status, &body, 404, NOT_FOUND);

    // A plain member: Coder's insert fails authorization (500); an organization user admin may create groups.
    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    let post = |name: &str| {
        as_user(
            &env,
            &alice,
            reqwest::Method::POST,
            base,
            Some(json!({ "name": name })),
        )
    };
    let (status, body) = answer(post("alices")).await;
    assert_error(status, &body, 500, "An internal server error occurred.");
    assert_eq!(body["detail"], "unauthorized: rbac: forbidden");
    let (status, body) = answer(post("devs")).await;
    assert_eq!(
        status, 500,
        "authorization comes before the name's uniqueness: {body}"
    );
    let org = default_org(&env).await;
    set_org_roles(
        &env,
        org["id"].as_str().unwrap(),
        "alice",
        &["organization-user-admin"],
    )
    .await;
    let (status, body) = answer(post("alices")).await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test]
async fn a_group_patch_changes_members_and_keeps_what_it_leaves_out() {
    let env = licensed("group_patch").await;
    env.server.mint_token("alice", &[]).await.unwrap();
    env.server.mint_token("bob", &[]).await.unwrap();
    let alice = user(&env, "alice").await;
    let bob = user(&env, "bob").await;
    let group = create_group(
        &env,
        json!({"name": "devs", "display_name": "Developers", "avatar_url": "/a.png", "quota_allowance": 5}),
    )
    .await;
    let path = format!("/api/v2/groups/{}", group["id"].as_str().unwrap());

    let (status, patched) = answer(env.patch(
        &path,
        json!({"add_users": [alice["id"], bob["id"]], "remove_users": [], "name": ""}),
    ))
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["members"], json!([member(&alice), member(&bob)]));
    assert!(
        patched["members"][0].get("avatar_url").is_none(),
        "an empty avatar is left out"
    );
    assert_eq!(patched["total_member_count"], 2);
    for field in [
        "id",
        "name",
        "display_name",
        "avatar_url",
        "quota_allowance",
        "organization_id",
        "source",
    ] {
        assert_eq!(patched[field], group[field], "{field}");
    }

    // Null keeps; a name equal to the current one is no rename; given fields replace, also with "".
    let (status, patched) = answer(env.patch(
        &path,
        json!({"name": "devs", "display_name": null, "avatar_url": null, "quota_allowance": null,
               "add_users": null, "remove_users": [bob["id"]]}),
    ))
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["display_name"], "Developers");
    assert_eq!(patched["avatar_url"], "/a.png");
    assert_eq!(patched["quota_allowance"], 5);
    assert_eq!(patched["members"], json!([member(&alice)]));
    assert_eq!(patched["total_member_count"], 1);
    let (status, patched) = answer(env.patch(
        &path,
        json!({"name": "developers", "display_name": "", "avatar_url": "", "quota_allowance": 0}),
    ))
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["name"], "developers");
    assert_eq!(patched["display_name"], "");
    assert_eq!(patched["avatar_url"], "");
    assert_eq!(patched["quota_allowance"], 0);
    assert_eq!(patched["total_member_count"], 1);
    // Removing a user who is not in the group does nothing; adding and removing in one request leaves them out.
    let (status, patched) = answer(env.patch(
        &path,
        json!({"add_users": [bob["id"]], "remove_users": [bob["id"], bob["id"]]}),
    ))
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["members"], json!([member(&alice)]));

    let (status, listed) = answer(env.get("/api/v2/organizations/default/groups/developers")).await;
    assert_eq!(status, 200);
    assert_eq!(listed, patched);

    // A group from `TestServer::add_group` starts without members and can be patched too.
    let org = default_org(&env).await;
    let ops = env
        .server
        .add_group(uuid::Uuid::parse_str(org["id"].as_str().unwrap()).unwrap(), "ops");
    let (status, patched) = answer(env.patch(
        &format!("/api/v2/groups/{ops}"),
        json!({"add_users": [bob["id"]], "display_name": "Operations"}),
    ))
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["name"], "ops");
    assert_eq!(patched["display_name"], "Operations");
    assert_eq!(patched["members"], json!([member(&bob)]));

    // The Everyone group keeps an avatar and a quota; an empty display name is no change.
    let everyone = format!("/api/v2/groups/{}", org["id"].as_str().unwrap());
    let (status, patched) = answer(env.patch(
        &everyone,
        json!({"name": "Everyone", "display_name": "", "avatar_url": "/all.png", "quota_allowance": 3}),
    ))
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["name"], "Everyone");
    assert_eq!(patched["avatar_url"], "/all.png");
    assert_eq!(patched["quota_allowance"], 3);
    let (_, groups) = answer(env.get("/api/v2/organizations/default/groups")).await;
    assert_eq!(groups.as_array().unwrap().len(), 3, "{groups}");
    assert_eq!(groups[0]["quota_allowance"], 3);
    assert_eq!(groups[0]["total_member_count"], patched["total_member_count"]);
}

#[tokio::test]
async fn group_patch_refusals_are_coders_in_coders_order() {
    let env = licensed("group_patch_no").await;
    let alice_token = env.server.mint_token("alice", &[]).await.unwrap();
    let alice = user(&env, "alice").await;
    let operator = user(&env, "me").await;
    let org = default_org(&env).await;
    // Carol is a member of another organization only.
    let (status, other) = answer(env.post("/api/v2/organizations", json!({"name": "other"}))).await;
    assert_eq!(status, 201, "{other}");
    env.server.mint_token("carol", &[]).await.unwrap();
    let carol = user(&env, "carol").await;
    env.db()
        .await
        .execute(
            "DELETE FROM organization_members WHERE organization_id = $1 AND user_id = $2",
            &[
                &uuid::Uuid::parse_str(org["id"].as_str().unwrap()).unwrap(),
                &uuid::Uuid::parse_str(carol["id"].as_str().unwrap()).unwrap(),
            ],
        )
        .await
        .unwrap();

    let devs = create_group(&env, json!({"name": "devs"})).await;
    create_group(&env, json!({"name": "ops"})).await;
    let path = format!("/api/v2/groups/{}", devs["id"].as_str().unwrap());
    let everyone = format!("/api/v2/groups/{}", org["id"].as_str().unwrap());

    let (status, body) = answer(env.patch("/api/v2/groups/not-a-uuid", json!({}))).await;
    assert_error(status, &body, 400, "Invalid UUID \"not-a-uuid\".");
    assert_eq!(body["detail"], "invalid UUID format");
    let (status, body) =
        answer(env.patch(&format!("/api/v2/groups/{}", uuid::Uuid::new_v4()), json!({}))).await;
    assert_error(status, &body, 404, NOT_FOUND);
    let (status, body) = answer(env.patch(&path, json!({"name": "no spaces", "display_name": " x"}))).await;
    assert_error(status, &body, 400, "Validation failed.");
    assert_eq!(
        body["validations"],
        json!([
            {"field": "name", "detail": "Validation failed for tag \"group_name\" with value: \"no spaces\""},
            {"field": "display_name", "detail": "Validation failed for tag \"group_display_name\" with value: \" x\""},
        ])
    );

    // The Everyone group: no rename, no display name, no member changes (checked in that order).
    let (status, body) = answer(env.patch(
        &everyone,
        json!({"name": "all", "display_name": "All", "add_users": [alice["id"]]}),
    ))
    .await;
    assert_error(status, &body, 400, "Cannot rename the \"Everyone\" group!");
    let (status, body) =
        answer(env.patch(&everyone, json!({"display_name": "All", "add_users": ["x"]}))).await;
    assert_error(
        status,
        &body,
        400,
        "Cannot update the Display Name for the \"Everyone\" group!",
    );
    let (status, body) = answer(env.patch(&everyone, json!({"remove_users": ["not-a-uuid"]}))).await;
    assert_error(
        status,
        &body,
        403,
        "Cannot add or remove users from the \"Everyone\" group!",
    );
    let (status, body) = answer(env.patch(&path, json!({"name": "Everyone", "add_users": ["x"]}))).await;
    assert_error(status, &body, 400, "\"Everyone\" is a reserved group name!");

    // Each user ID, added ones first: a UUID, a member of the group's organization (not a system user).
    let (status, body) = answer(env.patch(
        &path,
        json!({"add_users": [alice["id"], "alice"], "remove_users": [carol["id"]], "name": "ops"}),
    ))
    .await;
    assert_error(status, &body, 400, "ID \"alice\" must be a valid user UUID.");
    let (status, body) = answer(env.patch(
        &path,
        json!({"add_users": [alice["id"]], "remove_users": [carol["id"]], "name": "ops"}),
    ))
    .await;
    assert_error(
        status,
        &body,
        400,
        "User must be a member of organization \"devs\"",
    );
    let (status, body) = answer(env.patch(&path, json!({"add_users": [operator["id"]]}))).await;
    assert_error(
        status,
        &body,
        400,
        "User must be a member of organization \"devs\"",
    );
    let (status, body) = answer(env.patch(&path, json!({"add_users": [alice["id"]], "name": "ops"}))).await;
    assert_error(status, &body, 409, "A group with name \"ops\" already exists.");
    assert!(body.get("validations").is_none(), "{body}");

    // Adding a member twice fails the whole update.
    let (status, _) = answer(env.patch(&path, json!({"add_users": [alice["id"]]}))).await;
    assert_eq!(status, 200);
    let (status, body) = answer(env.patch(
        &path,
        json!({"add_users": [alice["id"]], "name": "renamed", "quota_allowance": 9}),
    ))
    .await;
    assert_error(status, &body, 400, "Cannot add the same user to a group twice!");
    assert_eq!(
        body["detail"],
        format!(
            "execute transaction: insert group member \"{}\": pq: duplicate key value violates unique constraint \
             \"group_members_user_id_group_id_key\"",
            alice["id"].as_str().unwrap()
        )
    );
    let (status, unchanged) = answer(env.get(&path)).await;
    assert_eq!(status, 200);
    assert_eq!(unchanged["name"], "devs");
    assert_eq!(unchanged["quota_allowance"], 0);
    assert_eq!(unchanged["total_member_count"], 1);

    // A plain member gets past every check above, then Coder's update fails authorization.
    let (status, body) = answer(as_user(
        &env,
        &alice_token,
        reqwest::Method::PATCH,
        &path,
        Some(json!({"display_name": "Mine"})),
    ))
    .await;
    assert_error(
        status,
        &body,
        400,
        "Failed to add or remove non-existent group member",
    );
    assert_eq!(
        body["detail"],
        "execute transaction: update group by ID: unauthorized: rbac: forbidden"
    );
    // A group of an organization the caller is not in is not found.
    let (status, other_group) = answer(env.post(
        &format!("/api/v2/organizations/{}/groups", other["id"].as_str().unwrap()),
        json!({"name": "theirs"}),
    ))
    .await;
    assert_eq!(status, 201, "{other_group}");
    let (status, body) = answer(as_user(
        &env,
        &alice_token,
        reqwest::Method::PATCH,
        &format!("/api/v2/groups/{}", other_group["id"].as_str().unwrap()),
        Some(json!({})),
    ))
    .await;
    assert_error(status, &body, 404, NOT_FOUND);
}

#[tokio::test]
async fn deleting_a_group() {
    let env = licensed("group_delete").await;
    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    let org = default_org(&env).await;
    let devs = create_group(&env, json!({"name": "devs"})).await;
    let path = format!("/api/v2/groups/{}", devs["id"].as_str().unwrap());

    let (status, body) = answer(env.delete(&format!("/api/v2/groups/{}", org["id"].as_str().unwrap()))).await;
    assert_error(
        status,
        &body,
        400,
        "\"Everyone\" is a reserved group and cannot be deleted!",
    );
    let (status, body) = answer(as_user(&env, &alice, reqwest::Method::DELETE, &path, None)).await;
    assert_error(status, &body, 500, "An internal server error occurred.");
    assert_eq!(body["detail"], "unauthorized: rbac: forbidden");

    let (status, body) = answer(env.delete(&path)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"message": "Successfully deleted group!"}));
    let (status, body) = answer(env.get(&path)).await;
    assert_error(status, &body, 404, NOT_FOUND);
    let (status, body) = answer(env.delete(&path)).await;
    assert_error(status, &body, 404, NOT_FOUND);
    let (_, groups) = answer(env.get("/api/v2/organizations/default/groups")).await;
    assert_eq!(
        groups.as_array().unwrap().len(),
        1,
        "only Everyone is left: {groups}"
    );
    // The name is free again.
    create_group(&env, json!({"name": "devs"})).await;
}

#[tokio::test]
async fn group_members_follow_organization_membership_and_deleted_organizations_hide_their_groups() {
    let env = licensed("group_members").await;
    env.server.mint_token("alice", &[]).await.unwrap();
    env.server.mint_token("bob", &[]).await.unwrap();
    let alice = user(&env, "alice").await;
    let bob = user(&env, "bob").await;
    let org = default_org(&env).await;
    let group = create_group(&env, json!({"name": "devs"})).await;
    let path = format!("/api/v2/groups/{}", group["id"].as_str().unwrap());
    let (status, _) = answer(env.patch(&path, json!({"add_users": [alice["id"], bob["id"]]}))).await;
    assert_eq!(status, 200);

    // A deleted user is no longer listed or counted.
    let db = env.db().await;
    let id = |user: &Value| uuid::Uuid::parse_str(user["id"].as_str().unwrap()).unwrap();
    db.execute("UPDATE users SET deleted = true WHERE id = $1", &[&id(&bob)])
        .await
        .unwrap();
    let (_, read) = answer(env.get(&path)).await;
    assert_eq!(read["members"], json!([member(&alice)]));
    assert_eq!(read["total_member_count"], 1);

    // Leaving the organization removes a user from its groups, also after joining again.
    let org_id = uuid::Uuid::parse_str(org["id"].as_str().unwrap()).unwrap();
    db.execute(
        "DELETE FROM organization_members WHERE organization_id = $1 AND user_id = $2",
        &[&org_id, &id(&alice)],
    )
    .await
    .unwrap();
    let (_, read) = answer(env.get(&path)).await;
    assert_eq!(read["members"], json!([]));
    assert_eq!(read["total_member_count"], 0);
    env.server.mint_token("alice", &[]).await.unwrap();
    let (_, read) = answer(env.get(&path)).await;
    assert_eq!(read["members"], json!([]), "group memberships do not come back");
    let (status, read) = answer(env.patch(&path, json!({"add_users": [alice["id"]]}))).await;
    assert_eq!(status, 200, "{read}");
    let alice = user(&env, "alice").await;
    assert_eq!(read["members"], json!([member(&alice)]));

    // The groups of a deleted organization are gone with it.
    let (status, other) = answer(env.post("/api/v2/organizations", json!({"name": "other"}))).await;
    assert_eq!(status, 201);
    let other_id = uuid::Uuid::parse_str(other["id"].as_str().unwrap()).unwrap();
    let theirs = env.server.add_group(other_id, "theirs");
    let (status, _) = answer(env.get(&format!("/api/v2/groups/{theirs}"))).await;
    assert_eq!(status, 200);
    env.server.delete_organization(other_id).await.unwrap();
    let (status, body) = answer(env.get(&format!("/api/v2/groups/{theirs}"))).await;
    assert_error(status, &body, 404, NOT_FOUND);
    let (status, _) = answer(env.get("/api/v2/organizations/other/groups")).await;
    assert_eq!(status, 404);
    let (status, _) = answer(env.get(&format!("/api/v2/groups/{other_id}"))).await;
    assert_eq!(status, 404, "nor its Everyone group");
}
