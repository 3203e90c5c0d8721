//! Organization writes as Coder v2.30.0's Premium server does them (`enterprise/coderd/organizations.go`): create
//! (the creator a member without roles), update (empty and left-out fields kept, `default` reserved, unique names)
//! and delete (the default organization refused, Coder's list of what is left, soft delete), behind the Multiple
//! Organizations gate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use coder_k8s_coder_testserver::Entitlement;
use common::Env;
use serde_json::{Value, json};

async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn licensed(tag: &str) -> Env {
    Env::start(tag, |c| {
        for feature in [
            "multiple_organizations",
            "template_rbac",
            "external_provisioner_daemons",
        ] {
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

async fn create_org(env: &Env, body: Value) -> Value {
    let (status, org) = answer(env.post("/api/v2/organizations", body)).await;
    assert_eq!(status, 201, "{org}");
    org
}

async fn user_id(env: &Env, username: &str) -> String {
    let (status, user) = answer(env.get(&format!("/api/v2/users/{username}"))).await;
    assert_eq!(status, 200, "{user}");
    user["id"].as_str().unwrap().to_owned()
}

/// Gives `username` the org roles `roles` in organization `org`.
async fn set_org_roles(env: &Env, org: &str, username: &str, roles: &[&str]) {
    let roles: Vec<String> = roles.iter().map(|r| (*r).to_owned()).collect();
    let org = uuid::Uuid::parse_str(org).unwrap();
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

fn assert_error(status: u16, body: &Value, want_status: u16, message: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["message"], message, "{body}");
}

/// A template named `name` in organization `org` (its version imported and built first).
async fn template_in(env: &Env, org: &str, name: &str) -> String {
    let file = env
        .http
        .post(env.url("/api/v2/files"))
        .header("Coder-Session-Token", &env.token)
        .header("Content-Type", "application/x-tar")
        .body(format!("archive of {name}").into_bytes())
        .send()
        .await
        .unwrap();
    let file: Value = file.json().await.unwrap();
    let (status, version) = answer(env.post(
        &format!("/api/v2/organizations/{org}/templateversions"),
        json!({"storage_method": "file", "file_id": file["hash"], "provisioner": "terraform", "tags": {}}),
    ))
    .await;
    assert_eq!(status, 201, "{version}");
    let version_id = version["id"].as_str().unwrap();
    env.wait_version(version_id).await;
    let (status, template) = answer(env.post(
        &format!("/api/v2/organizations/{org}/templates"),
        json!({"name": name, "template_version_id": version_id}),
    ))
    .await;
    assert_eq!(status, 201, "{template}");
    template["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn organization_writes_need_a_key_then_the_multiple_organizations_feature() {
    let env = Env::start("org_gate", |_| {}).await;
    let gate = "Multiple Organizations is a Premium feature. Contact sales!";
    let (status, body) = answer(env.post("/api/v2/organizations", json!({"name": "acme"}))).await;
    assert_error(status, &body, 403, gate);
    let (status, body) = answer(env.patch("/api/v2/organizations/default", json!({"name": "acme"}))).await;
    assert_error(status, &body, 403, gate);
    let (status, body) = answer(env.delete("/api/v2/organizations/default")).await;
    assert_error(status, &body, 403, gate);
    // The gate comes before the organization and the body.
    let (status, body) = answer(env.patch("/api/v2/organizations/nope", json!("not an object"))).await;
    assert_error(status, &body, 403, gate);
    // The key comes first.
    let signed_out = "You are signed out or your session has expired. Please sign in again to continue.";
    let (status, body) = answer(
        env.http
            .patch(env.url("/api/v2/organizations/default"))
            .json(&json!({})),
    )
    .await;
    assert_error(status, &body, 401, signed_out);
    let (status, body) = answer(env.http.delete(env.url("/api/v2/organizations/default"))).await;
    assert_error(status, &body, 401, signed_out);
}

#[tokio::test]
async fn a_new_organization_has_its_creator_as_a_member_without_roles_and_an_everyone_group() {
    let env = licensed("org_create").await;
    let org = create_org(
        &env,
        json!({"name": "acme", "description": "Acme Inc.", "icon": "/emojis/1f3ed.png", "display_name": null}),
    )
    .await;
    let id = org["id"].as_str().unwrap();
    assert_eq!(org["name"], "acme");
    assert_eq!(
        org["display_name"], "acme",
        "the display name defaults to the name"
    );
    assert_eq!(org["description"], "Acme Inc.");
    assert_eq!(org["icon"], "/emojis/1f3ed.png");
    assert_eq!(org["is_default"], false);
    assert_eq!(org["created_at"], org["updated_at"]);

    // The creator here is the operator, a system user: Coder lists it only when the search asks for system users.
    let (status, members) = answer(env.get(&format!("/api/v2/organizations/{id}/members"))).await;
    assert_eq!(status, 200, "{members}");
    assert_eq!(members, json!([]), "system users are not listed");
    let (status, members) = answer(env.get(&format!(
        "/api/v2/organizations/{id}/members?q=include_system:true"
    )))
    .await;
    assert_eq!(status, 200, "{members}");
    assert_eq!(members.as_array().unwrap().len(), 1);
    assert_eq!(members[0]["username"], "coder-k8s-operator");
    assert_eq!(
        members[0]["roles"],
        json!([]),
        "the creator gets no organization roles"
    );

    let (status, groups) = answer(env.get("/api/v2/organizations/acme/groups")).await;
    assert_eq!(status, 200, "{groups}");
    assert_eq!(groups.as_array().unwrap().len(), 1);
    assert_eq!(groups[0]["id"], id);
    assert_eq!(groups[0]["name"], "Everyone");
    assert_eq!(groups[0]["organization_name"], "acme");
    assert_eq!(groups[0]["members"], json!([]));
    assert_eq!(groups[0]["total_member_count"], 0);
}

#[tokio::test]
async fn organization_create_refusals_are_coders() {
    let env = licensed("org_create_no").await;
    let (status, body) = answer(env.post("/api/v2/organizations", json!({"display_name": " padded"}))).await;
    assert_error(status, &body, 400, "Validation failed.");
    assert_eq!(
        body["validations"],
        json!([
            {"field": "name", "detail": "Validation failed for tag \"required\" with value: \"\""},
            {"field": "display_name",
             "detail": "Validation failed for tag \"organization_display_name\" with value: \" padded\""},
        ])
    );
    let (status, body) = answer(env.post("/api/v2/organizations", json!({"name": "my_org"}))).await;
    assert_error(status, &body, 400, "Validation failed.");
    assert_eq!(
        body["validations"],
        json!([{"field": "name", "detail": "Validation failed for tag \"organization_name\" with value: \"my_org\""}])
    );
    let (status, body) = answer(env.post("/api/v2/organizations", json!({"name": "default"}))).await;
    assert_error(status, &body, 400, "Organization name \"default\" is reserved.");
    assert!(body.get("validations").is_none(), "{body}");
    // The default organization is named `coder`; names compare in any case.
    let (status, body) = answer(env.post("/api/v2/organizations", json!({"name": "CODER"}))).await;
    assert_error(status, &body, 409, "Organization already exists with that name.");
    assert!(body.get("validations").is_none(), "{body}");
    let (status, body) = answer(env.post("/api/v2/organizations", json!({"name": 7}))).await;
    assert_error(status, &body, 400, "Request body must be valid JSON.");

    // Only owners create organizations: Coder's insert fails authorization inside its transaction.
    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    create_org(&env, json!({"name": "hidden"})).await;
    let post = |name: &str| {
        as_user(
            &env,
            &alice,
            reqwest::Method::POST,
            "/api/v2/organizations",
            Some(json!({ "name": name })),
        )
    };
    let (status, body) = answer(post("alices-org")).await;
    assert_error(
        status,
        &body,
        500,
        "Internal error inserting organization member.",
    );
    assert_eq!(
        body["detail"],
        "execute transaction: create organization: unauthorized: rbac: forbidden"
    );
    // A taken name: a conflict when the caller can see the organization, else Coder's read error.
    let (status, body) = answer(post("coder")).await;
    assert_error(status, &body, 409, "Organization already exists with that name.");
    let (status, body) = answer(post("hidden")).await;
    assert_error(
        status,
        &body,
        500,
        "Internal error fetching organization \"hidden\".",
    );
    assert_eq!(body["detail"], "unauthorized: rbac: forbidden");
}

#[tokio::test]
async fn an_organization_patch_keeps_what_it_leaves_out() {
    let env = licensed("org_patch").await;
    let org = create_org(
        &env,
        json!({"name": "acme", "display_name": "Acme", "description": "Acme Inc.", "icon": "/icon/acme.svg"}),
    )
    .await;
    let id = org["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v2/organizations/{id}");

    // Empty names and left-out or null pointers keep everything; only `updated_at` moves.
    let (status, same) = answer(env.patch(
        &path,
        json!({"name": "", "display_name": "", "description": null}),
    ))
    .await;
    assert_eq!(status, 200, "{same}");
    for field in [
        "id",
        "name",
        "display_name",
        "description",
        "icon",
        "created_at",
        "is_default",
    ] {
        assert_eq!(same[field], org[field], "{field}");
    }
    assert!(
        same["updated_at"].as_str().unwrap() > org["updated_at"].as_str().unwrap(),
        "{same}"
    );

    // A string replaces, also an empty one.
    let (status, patched) =
        answer(env.patch(&path, json!({"description": "", "icon": "/icon/new.svg"}))).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["description"], "");
    assert_eq!(patched["icon"], "/icon/new.svg");
    assert_eq!(patched["name"], "acme");
    assert_eq!(patched["display_name"], "Acme");

    let (status, renamed) =
        answer(env.patch(&path, json!({"name": "acme-corp", "display_name": "Acme Corp"}))).await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(renamed["name"], "acme-corp");
    assert_eq!(renamed["display_name"], "Acme Corp");
    assert_eq!(renamed["description"], "");
    assert_eq!(renamed["icon"], "/icon/new.svg");
    let (status, read) = answer(env.get("/api/v2/organizations/acme-corp")).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read, renamed);
    let (status, _) = answer(env.get("/api/v2/organizations/acme")).await;
    assert_eq!(status, 404);
    // Its own name in another case is no conflict.
    let (status, renamed) = answer(env.patch(&path, json!({"name": "Acme-Corp"}))).await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(renamed["name"], "Acme-Corp");

    // The organization's admin may update it too.
    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    set_org_roles(&env, &id, "alice", &["organization-admin"]).await;
    let (status, patched) = answer(as_user(
        &env,
        &alice,
        reqwest::Method::PATCH,
        &path,
        Some(json!({"display_name": "Acme by Alice"})),
    ))
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["display_name"], "Acme by Alice");
}

#[tokio::test]
async fn organization_patch_refusals_are_coders() {
    let env = licensed("org_patch_no").await;
    let org = create_org(&env, json!({"name": "acme"})).await;
    let id = org["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v2/organizations/{id}");

    let (status, body) = answer(env.patch(&path, json!({"name": "a b", "display_name": "x\ny"}))).await;
    assert_error(status, &body, 400, "Validation failed.");
    assert_eq!(
        body["validations"],
        json!([
            {"field": "name", "detail": "Validation failed for tag \"organization_name\" with value: \"a b\""},
            {"field": "display_name",
             "detail": "Validation failed for tag \"organization_display_name\" with value: \"x\ny\""},
        ])
    );
    let (status, body) = answer(env.patch(&path, json!({"name": "default"}))).await;
    assert_error(status, &body, 400, "Organization name \"default\" is reserved.");
    let (status, body) = answer(env.patch(&path, json!({"name": "Coder"}))).await;
    assert_error(
        status,
        &body,
        409,
        "Organization already exists with the name \"Coder\".",
    );
    assert_eq!(
        body["validations"],
        json!([{"field": "name", "detail": "This value is already in use and should be unique."}])
    );
    let (status, body) = answer(env.patch(&path, json!({"icon": 1}))).await;
    assert_error(status, &body, 400, "Request body must be valid JSON.");
    let (status, body) = answer(env.patch("/api/v2/organizations/nope", json!({}))).await;
    assert_error(
        status,
        &body,
        404,
        "Resource not found or you do not have access to this resource",
    );
    let (status, unchanged) = answer(env.get(&path)).await;
    assert_eq!(status, 200);
    assert_eq!(unchanged, org, "nothing changed");

    // A plain member: Coder's update fails authorization, which it answers as a 404.
    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    let (status, body) = answer(as_user(
        &env,
        &alice,
        reqwest::Method::PATCH,
        &path,
        Some(json!({"display_name": "Mine"})),
    ))
    .await;
    assert_error(
        status,
        &body,
        404,
        "Resource not found or you do not have access to this resource",
    );
}

#[tokio::test]
async fn an_organization_with_resources_is_not_deleted_and_an_empty_one_is() {
    let env = licensed("org_delete").await;
    let (status, body) = answer(env.delete("/api/v2/organizations/default")).await;
    assert_error(status, &body, 400, "Default organization cannot be deleted.");

    // Two templates, a workspace, a second member, two groups besides Everyone and a provisioner key.
    let busy = create_org(&env, json!({"name": "busy"})).await;
    let busy_id = busy["id"].as_str().unwrap().to_owned();
    let first = template_in(&env, &busy_id, "first").await;
    template_in(&env, &busy_id, "second").await;
    let (status, workspace) = answer(env.post(
        "/api/v2/users/me/workspaces",
        json!({"name": "dev", "template_id": first}),
    ))
    .await;
    assert_eq!(status, 201, "{workspace}");
    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    for name in ["devs", "ops"] {
        let (status, group) = answer(env.post(
            &format!("/api/v2/organizations/{busy_id}/groups"),
            json!({ "name": name }),
        ))
        .await;
        assert_eq!(status, 201, "{group}");
    }
    let (status, key) = answer(env.post(
        &format!("/api/v2/organizations/{busy_id}/provisionerkeys"),
        json!({"name": "pool"}),
    ))
    .await;
    assert_eq!(status, 201, "{key}");
    let (status, body) = answer(env.delete("/api/v2/organizations/busy")).await;
    assert_error(status, &body, 500, "Error deleting organization.");
    assert_eq!(
        body["detail"],
        "This organization has 1 workspace, 2 templates, 1 member, 2 groups, 1 provisioner key that must be \
         deleted first."
    );
    let (status, _) = answer(env.get("/api/v2/organizations/busy")).await;
    assert_eq!(status, 200, "still there");

    // A member who is not the organization's admin: Coder's delete and its resource count both fail authorization.
    let (status, body) = answer(as_user(
        &env,
        &alice,
        reqwest::Method::DELETE,
        "/api/v2/organizations/busy",
        None,
    ))
    .await;
    assert_error(status, &body, 500, "Internal error deleting organization.");
    assert_eq!(
        body["detail"],
        "delete organization: execute transaction: delete organization: unauthorized: rbac: forbidden"
    );

    // One member (the creator) and the Everyone group do not stop a delete.
    let empty = create_org(&env, json!({"name": "empty"})).await;
    let empty_id = empty["id"].as_str().unwrap().to_owned();
    let (status, body) = answer(env.delete(&format!("/api/v2/organizations/{empty_id}"))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"message": "Organization has been deleted."}));
    let (status, _) = answer(env.get(&format!("/api/v2/organizations/{empty_id}"))).await;
    assert_eq!(status, 404);
    let (status, _) = answer(env.get(&format!("/api/v2/organizations/{empty_id}/groups"))).await;
    assert_eq!(status, 404, "a deleted organization lists no groups");
    let (status, _) = answer(env.delete(&format!("/api/v2/organizations/{empty_id}"))).await;
    assert_eq!(status, 404);
    let deleted: bool = env
        .db()
        .await
        .query_one(
            "SELECT deleted FROM organizations WHERE id = $1",
            &[&uuid::Uuid::parse_str(&empty_id).unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert!(deleted, "a soft delete");
    // Its name is free again.
    create_org(&env, json!({"name": "empty"})).await;

    // Two members are one too many; once the second leaves, the organization can go.
    let shared = create_org(&env, json!({"name": "shared"})).await;
    let shared_id = shared["id"].as_str().unwrap().to_owned();
    env.server.mint_token("bob", &[]).await.unwrap();
    let (status, body) = answer(env.delete("/api/v2/organizations/shared")).await;
    assert_error(status, &body, 500, "Error deleting organization.");
    assert_eq!(
        body["detail"],
        "This organization has 1 member that must be deleted first."
    );
    let bob = user_id(&env, "bob").await;
    env.db()
        .await
        .execute(
            "DELETE FROM organization_members WHERE organization_id = $1 AND user_id = $2",
            &[
                &uuid::Uuid::parse_str(&shared_id).unwrap(),
                &uuid::Uuid::parse_str(&bob).unwrap(),
            ],
        )
        .await
        .unwrap();
    let (status, body) = answer(env.delete("/api/v2/organizations/shared")).await;
    assert_eq!(status, 200, "{body}");
}

/// The usernames in a member list or a group's `members`.
fn usernames(members: &Value) -> Vec<String> {
    members
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["username"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn member_lists_leave_out_system_users_as_coder_does() {
    let env = licensed("org_system_members").await;
    env.server.mint_token("alice", &[]).await.unwrap();
    let alice = user_id(&env, "alice").await;
    let operator = user_id(&env, "me").await;
    // Coder's built-in `prebuilds` system user, a member of the organization as Coder's prebuilds reconciler makes it.
    let prebuilds = uuid::Uuid::from_u128(0xc42f_df75_3097_471c_8c33_fb52_454d_81c0);
    let client = env.db().await;
    client
        .execute(
            "INSERT INTO users (id, email, username, name, hashed_password, created_at, updated_at, rbac_roles, \
             login_type, status, is_system) VALUES ($1, 'prebuilds@system', 'prebuilds', 'Prebuilds Owner', \
             'none', now(), now(), '{}', 'none'::login_type, 'active'::user_status, true)",
            &[&prebuilds],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO organization_members (organization_id, user_id, created_at, updated_at, roles) \
             SELECT id, $1, now(), now(), '{}' FROM organizations WHERE is_default",
            &[&prebuilds],
        )
        .await
        .unwrap();
    let members = |q: &str| {
        let path = if q.is_empty() {
            "/api/v2/organizations/default/members".to_owned()
        } else {
            format!("/api/v2/organizations/default/members?q={}", urlencode(q))
        };
        answer(env.get(&path))
    };

    // `listMembers`: `OrganizationMembers` without system users, unless the search includes them.
    let (status, body) = members("").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(usernames(&body), ["alice"]);
    let (status, body) = members("include_system:true").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(usernames(&body), ["alice", "coder-k8s-operator", "prebuilds"]);
    let (_, body) = members("include_system:false").await;
    assert_eq!(usernames(&body), ["alice"]);
    let (_, body) = members(&format!("user_id:{alice}")).await;
    assert_eq!(usernames(&body), ["alice"]);
    let (_, body) = members(&format!("user_id:{operator}")).await;
    assert_eq!(body, json!([]));
    let (_, body) = members(&format!("user_id:{operator} include_system:true")).await;
    assert_eq!(usernames(&body), ["coder-k8s-operator"]);
    let (status, body) = members("alice").await;
    assert_error(status, &body, 400, "Invalid organization member search query.");
    assert_eq!(
        body["validations"],
        json!([{"field": "q", "detail": "invalid search term: alice"}])
    );
    let (status, body) = members("include_system:maybe").await;
    assert_error(status, &body, 400, "Invalid organization member search query.");
    assert_eq!(
        body["validations"],
        json!([{"field": "include_system",
                "detail": "Query param \"include_system\" must be a valid boolean: strconv.ParseBool: parsing \"maybe\": invalid syntax"}])
    );

    // The Everyone group's `members` and `total_member_count` (`GetGroupMembersByGroupID`,
    // `GetGroupMembersCountByGroupID`, both without system users), listed and by ID.
    let (status, groups) = answer(env.get("/api/v2/organizations/default/groups")).await;
    assert_eq!(status, 200, "{groups}");
    let everyone = &groups[0];
    assert_eq!(everyone["name"], "Everyone");
    assert_eq!(usernames(&everyone["members"]), ["alice"]);
    assert_eq!(everyone["total_member_count"], 1);
    let (status, by_id) =
        answer(env.get(&format!("/api/v2/groups/{}", everyone["id"].as_str().unwrap()))).await;
    assert_eq!(status, 200, "{by_id}");
    assert_eq!(&by_id, everyone);

    // `userRoles` reads the memberships without system users too: the operator has no organization roles there.
    let (status, roles) = answer(env.get("/api/v2/users/me/roles")).await;
    assert_eq!(status, 200, "{roles}");
    assert_eq!(roles, json!({"roles": ["owner"], "organization_roles": {}}));
    let (_, roles) = answer(env.get("/api/v2/users/alice/roles")).await;
    assert_eq!(
        roles["organization_roles"].as_object().unwrap().len(),
        1,
        "{roles}"
    );
    // `GET /users` leaves them out as well; `users/me` still shows the operator's memberships.
    let (status, users) = answer(env.get("/api/v2/users")).await;
    assert_eq!(status, 200, "{users}");
    assert_eq!(usernames(&users["users"]), ["alice"]);
    assert_eq!(users["count"], 1);
    let (_, me) = answer(env.get("/api/v2/users/me")).await;
    assert_eq!(me["organization_ids"].as_array().unwrap().len(), 1, "{me}");
}

fn urlencode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
