//! A user's life as Coder v2.30.0 runs it (`coderd/users.go` `postUser` and `deleteUser`, `coderd/userauth.go`
//! `postLogin`, dbauthz): created, read, signed in with its password, deleted and created again under the same name;
//! every refusal with Coder's status and text, in Coder's order, and who may create and delete users.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Env;
use reqwest::Method;
use serde_json::{Value, json};

const STRONG: &str = "Correct-Horse-Battery-9!";
const UNKNOWN_USER: &str = "\"user\" must be an existing uuid or username.";
const NO_ORGANIZATION: &str = "No organization specified to place the user as a member of. It is required to specify \
                               at least one organization id to place the user in.";
const WEAK: &str = "insecure password, try including more special characters, using uppercase letters, using numbers \
                    or using a longer password";

async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A request with `token` (none: without a key).
fn call(
    env: &Env,
    token: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::RequestBuilder {
    let mut request = env.http.request(method, env.url(path));
    if let Some(token) = token {
        request = request.header("Coder-Session-Token", token);
    }
    match body {
        Some(body) => request.json(&body),
        None => request,
    }
}

/// `POST /users` with `token`.
async fn create(env: &Env, token: &str, body: Value) -> (u16, Value) {
    answer(call(env, Some(token), Method::POST, "/api/v2/users", Some(body))).await
}

/// `POST /users/login` without a key.
async fn login(env: &Env, email: &str, password: &str) -> (u16, Value) {
    let body = json!({"email": email, "password": password});
    answer(call(env, None, Method::POST, "/api/v2/users/login", Some(body))).await
}

async fn delete(env: &Env, token: &str, user: &str) -> (u16, Value) {
    answer(call(
        env,
        Some(token),
        Method::DELETE,
        &format!("/api/v2/users/{user}"),
        None,
    ))
    .await
}

fn assert_error(status: u16, body: &Value, want_status: u16, message: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["message"], message, "{body}");
}

async fn default_org(env: &Env) -> String {
    let (status, org) = answer(env.get("/api/v2/organizations/default")).await;
    assert_eq!(status, 200, "{org}");
    org["id"].as_str().unwrap().to_owned()
}

/// A user creation body: `name` as user name, `<name>@example.com`, the default organization.
fn user(name: &str, login_type: &str, password: &str) -> Value {
    let mut body = json!({
        "email": format!("{name}@example.com"),
        "username": name,
        "login_type": login_type,
        "organization_ids": ["00000000-0000-0000-0000-000000000000"],
    });
    if !password.is_empty() {
        body["password"] = json!(password);
    }
    body
}

#[tokio::test]
async fn a_user_is_created_read_signed_in_deleted_and_created_again() {
    let env = Env::start("ul_life", |_| {}).await;
    let org = default_org(&env).await;
    let (status, created) = create(
        &env,
        &env.token,
        json!({
            "email": "Ada@Example.com", "username": "ada", "name": "Ada Lovelace", "password": STRONG,
            "organization_ids": [org],
        }),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["username"], "ada");
    assert_eq!(created["email"], "Ada@Example.com");
    assert_eq!(created["name"], "Ada Lovelace");
    assert_eq!(created["status"], "dormant", "Coder's default status");
    assert_eq!(created["login_type"], "password", "Coder's default login type");
    assert_eq!(created["organization_ids"], json!([org]));
    assert_eq!(created["roles"], json!([]));
    assert_eq!(
        created["last_seen_at"], "0001-01-01T00:00:00Z",
        "Go's zero time: never seen"
    );
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, read) = answer(env.get("/api/v2/users/ada")).await;
    assert_eq!(status, 200);
    assert_eq!(read, created, "GET renders it as the create did");
    let (status, roles) = answer(env.get("/api/v2/users/ada/roles")).await;
    assert_eq!(status, 200);
    assert_eq!(
        roles["organization_roles"],
        json!({ org.as_str(): [] }),
        "a membership without roles"
    );

    // Stored as Coder's pbkdf2-sha256 hash; the email is found in any case.
    let db = env.db().await;
    let hashed: Vec<u8> = db
        .query_one("SELECT hashed_password FROM users WHERE username = 'ada'", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        hashed.starts_with(b"$pbkdf2-sha256$"),
        "{}",
        String::from_utf8_lossy(&hashed)
    );
    let response = call(
        &env,
        None,
        Method::POST,
        "/api/v2/users/login",
        Some(json!({"email": "ada@EXAMPLE.com", "password": STRONG})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 201);
    let cookie = response.headers()["set-cookie"].to_str().unwrap().to_owned();
    let token = response.json::<Value>().await.unwrap()["session_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        cookie,
        format!("coder_session_token={token}; Path=/; HttpOnly; SameSite=Lax")
    );
    let (status, me) = answer(call(&env, Some(&token), Method::GET, "/api/v2/users/me", None)).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["id"], id.as_str());
    assert_eq!(me["status"], "active", "signing in activates a dormant user");
    assert_ne!(me["last_seen_at"], "0001-01-01T00:00:00Z");
    let (status, tokens) = answer(call(
        &env,
        Some(&token),
        Method::GET,
        "/api/v2/users/me/keys/tokens",
        None,
    ))
    .await;
    assert_eq!((status, tokens), (200, json!([])), "a session key is no token");

    let (status, body) = delete(&env, &env.token, "ada").await;
    assert_eq!(
        (status, body),
        (200, json!({"message": "User has been deleted!"}))
    );
    let (status, body) = answer(env.get("/api/v2/users/ada")).await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    assert_eq!(body["detail"], "queried user=\"ada\"");
    let (status, listed) = answer(env.get("/api/v2/users")).await;
    assert_eq!(status, 200);
    assert!(
        listed["users"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["username"] != "ada"),
        "{listed}"
    );
    let (status, members) = answer(env.get(&format!("/api/v2/organizations/{org}/members"))).await;
    assert_eq!(status, 200);
    assert!(
        members.as_array().unwrap().iter().all(|m| m["username"] != "ada"),
        "{members}"
    );
    let (status, body) = answer(call(&env, Some(&token), Method::GET, "/api/v2/users/me", None)).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (401, Some("API key is invalid.")),
        "its keys go"
    );
    let (status, body) = login(&env, "ada@example.com", STRONG).await;
    assert_error(status, &body, 401, "Incorrect email or password.");
    // As Coder's GetUserByID, a lookup by ID still finds the deleted user (its memberships stay; its organization
    // roles are read without deleted users), and a second delete answers as the first.
    let (status, by_id) = answer(env.get(&format!("/api/v2/users/{id}"))).await;
    assert_eq!(status, 200, "{by_id}");
    assert_eq!(by_id["organization_ids"], json!([org]));
    let (status, roles) = answer(env.get(&format!("/api/v2/users/{id}/roles"))).await;
    assert_eq!((status, &roles["organization_roles"]), (200, &json!({})));
    let (status, _) = delete(&env, &env.token, &id).await;
    assert_eq!(status, 200);
    let (deleted, updated_at): (bool, String) = {
        let row = db
            .query_one(
                "SELECT deleted, to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
                 FROM users WHERE id = $1",
                &[&uuid::Uuid::parse_str(&id).unwrap()],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert!(deleted);
    assert_eq!(
        updated_at,
        me["updated_at"].as_str().unwrap(),
        "Coder's delete leaves updated_at"
    );

    // The name and the email are free again.
    let (status, again) = create(&env, &env.token, user("ada", "", STRONG)).await;
    assert_eq!(status, 201, "{again}");
    assert_ne!(again["id"], id.as_str());
    let (status, found) = answer(env.get("/api/v2/users/ADA")).await;
    assert_eq!((status, &found["id"]), (200, &again["id"]));
}

#[tokio::test]
async fn create_refusals_are_coders_in_coders_order() {
    let env = Env::start("ul_create_no", |_| {}).await;
    let owner = env.token.clone();
    let (status, body) = create(&env, &owner, json!({})).await;
    assert_error(status, &body, 400, "Validation failed.");
    assert_eq!(
        body["validations"],
        json!([
            {"field": "email", "detail": "Validation failed for tag \"required\" with value: \"\""},
            {"field": "username", "detail": "Validation failed for tag \"required\" with value: \"\""},
        ])
    );
    let (status, body) = create(
        &env,
        &owner,
        json!({"email": "a@b", "username": "-x", "name": " a"}),
    )
    .await;
    assert_error(status, &body, 400, "Validation failed.");
    assert_eq!(
        body["validations"],
        json!([
            {"field": "email", "detail": "Validation failed for tag \"email\" with value: \"a@b\""},
            {"field": "username", "detail": "Validation failed for tag \"username\" with value: \"-x\""},
            {"field": "name", "detail": "Validation failed for tag \"user_real_name\" with value: \" a\""},
        ])
    );
    let (status, body) = create(&env, &owner, json!({"email": "a@b.c.", "username": "ok"})).await;
    assert_eq!(body["validations"][0]["field"], "email", "{status} {body}");
    let (status, body) = create(&env, &owner, json!("nope")).await;
    assert_error(status, &body, 400, "Request body must be valid JSON.");

    // A password with another login type, before the organizations.
    let mut body = user("carl", "none", "x");
    body["organization_ids"] = json!([]);
    let (status, body) = create(&env, &owner, body).await;
    assert_error(
        status,
        &body,
        400,
        "Password cannot be set for non-password (\"none\") authentication.",
    );
    let mut body = user("carl", "none", "");
    body["organization_ids"] = json!([]);
    let (status, body) = create(&env, &owner, body).await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({
                "message": NO_ORGANIZATION,
                "detail": "required at least 1 value for the array 'organization_ids'",
                "validations": [{"field": "organization_ids", "detail": "Missing values, this cannot be empty"}],
            })
        )
    );

    // A taken username or email, in any case (system users too), before the organizations.
    let (status, _) = create(&env, &owner, user("taken", "none", "")).await;
    assert_eq!(status, 201);
    let mut clash = user("TAKEN", "none", "");
    clash["organization_ids"] = json!(["11111111-1111-1111-1111-111111111111"]);
    let (status, body) = create(&env, &owner, clash).await;
    assert_eq!((status, body), (409, json!({"message": "User already exists."})));
    let mut clash = user("other", "none", "");
    clash["email"] = json!("Taken@Example.COM");
    let (status, body) = create(&env, &owner, clash).await;
    assert_error(status, &body, 409, "User already exists.");

    let mut body = user("carl", "none", "");
    body["organization_ids"] = json!(["11111111-1111-1111-1111-111111111111"]);
    let (status, body) = create(&env, &owner, body).await;
    assert_eq!(
        (status, body),
        (
            404,
            json!({"message": "Organization does not exist with the provided id \"11111111-1111-1111-1111-111111111111\"."})
        )
    );

    let (status, body) = create(&env, &owner, user("carl", "password", "short")).await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"message": "Password is invalid", "validations": [{"field": "password", "detail": WEAK}]})
        )
    );
    let (status, body) = create(&env, &owner, user("carl", "", "")).await;
    assert_error(status, &body, 400, "Password is invalid");
    let (status, body) = create(&env, &owner, user("carl", "", &STRONG.repeat(3))).await;
    assert_eq!(
        body["validations"][0]["detail"], "password must be no more than 64 characters",
        "{status}"
    );
    let (status, body) = create(&env, &owner, user("carl", "oidc", "")).await;
    assert_error(
        status,
        &body,
        400,
        "You must configure OIDC before creating OIDC users.",
    );
    for login_type in ["token", "Password", "bogus"] {
        let (status, body) = create(&env, &owner, user("carl", login_type, "")).await;
        assert_error(
            status,
            &body,
            400,
            &format!("Unsupported login type {login_type:?} for manually creating new users."),
        );
    }

    // PostgreSQL's refusals come back as Coder's 500, and nothing is written.
    let org = default_org(&env).await;
    let mut body = user("carl", "none", "");
    body["user_status"] = json!("bogus");
    let (status, body) = create(&env, &owner, body).await;
    assert_eq!(
        (status, body),
        (
            500,
            json!({
                "message": "Internal error creating user.",
                "detail": "execute transaction: create user: pq: invalid input value for enum user_status: \"bogus\"",
            })
        )
    );
    let mut body = user("carl", "none", "");
    body["organization_ids"] = json!([org, "00000000-0000-0000-0000-000000000000"]);
    let (status, body) = create(&env, &owner, body).await;
    assert_error(status, &body, 500, "Internal error creating user.");
    assert_eq!(
        body["detail"],
        format!(
            "execute transaction: create organization member for \"{org}\": pq: duplicate key value violates unique \
             constraint \"organization_members_pkey\""
        )
    );
    let (status, body) = answer(env.get("/api/v2/users/carl")).await;
    assert_error(status, &body, 400, UNKNOWN_USER);
}

#[tokio::test]
async fn login_types_statuses_and_the_deprecated_organization_field() {
    let env = Env::start("ul_types", |_| {}).await;
    let owner = env.token.clone();
    let org = default_org(&env).await;
    for login_type in ["none", "github"] {
        let (status, body) = create(&env, &owner, user(login_type, login_type, "")).await;
        assert_eq!(
            (status, body["login_type"].as_str()),
            (201, Some(login_type)),
            "{body}"
        );
    }
    let mut body = user("gone", "none", "");
    body["user_status"] = json!("suspended");
    let (status, body) = create(&env, &owner, body).await;
    assert_eq!((status, body["status"].as_str()), (201, Some("suspended")));
    let mut body = user("busy", "none", "");
    body["user_status"] = json!("active");
    let (status, body) = create(&env, &owner, body).await;
    assert_eq!((status, body["status"].as_str()), (201, Some("active")));
    // Coder's decoder still appends `organization_id`, and reads keys in any case.
    let (status, body) = create(
        &env,
        &owner,
        json!({"EMAIL": "legacy@example.com", "Username": "legacy", "login_type": "none", "organization_id": org}),
    )
    .await;
    assert_eq!(
        (status, &body["organization_ids"]),
        (201, &json!([org])),
        "{body}"
    );

    let env = Env::start("ul_oidc", |config| config.oidc_configured = true).await;
    let (status, body) = create(&env, &env.token, user("sso", "oidc", "")).await;
    assert_eq!(
        (status, body["login_type"].as_str()),
        (201, Some("oidc")),
        "{body}"
    );
    let (status, body) = create(&env, &env.token, user("sso2", "oidc", STRONG)).await;
    assert_error(
        status,
        &body,
        400,
        "Password cannot be set for non-password (\"oidc\") authentication.",
    );
}

#[tokio::test]
async fn only_owners_and_user_admins_create_users() {
    let env = Env::start("ul_create_rbac", |_| {}).await;
    let member = env.server.mint_token("mia", &[]).await.unwrap();
    let auditor = env.server.mint_token("aude", &["auditor"]).await.unwrap();
    let user_admin = env.server.mint_token("uma", &["user-admin"]).await.unwrap();
    // A plain member gets every check before the authorization: a clash with itself (readable) is the 409; with a
    // user it may not read, Coder's 500; an organization it is not in, the 404; a weak password, the 400.
    let mut body = user("newbie", "none", "");
    body["email"] = json!("mia@testserver.invalid");
    let (status, body) = create(&env, &member, body).await;
    assert_error(status, &body, 409, "User already exists.");
    let (status, body) = create(&env, &member, user("uma", "none", "")).await;
    assert_eq!(
        (status, body),
        (
            500,
            json!({"message": "Internal error fetching user.", "detail": "unauthorized: rbac: forbidden"})
        )
    );
    let (status, body) = create(&env, &member, user("newbie", "none", "")).await;
    assert_eq!(
        (status, body),
        (403, json!({"message": "You are not authorized to create users."}))
    );
    let other = env.server.add_organization("elsewhere").await.unwrap();
    let mut body = user("newbie", "none", "");
    body["organization_ids"] = json!([other]);
    let (status, body) = create(&env, &member, body).await;
    assert_error(
        status,
        &body,
        404,
        &format!("Organization does not exist with the provided id \"{other}\"."),
    );
    let (status, body) = create(&env, &member, user("newbie", "password", "weak")).await;
    assert_error(status, &body, 400, "Password is invalid");
    // An auditor reads every user: a clash is the 409; the create itself is refused.
    let (status, body) = create(&env, &auditor, user("uma", "none", "")).await;
    assert_error(status, &body, 409, "User already exists.");
    let (status, body) = create(&env, &auditor, user("newbie", "none", "")).await;
    assert_error(status, &body, 403, "You are not authorized to create users.");
    let (status, body) = create(&env, &user_admin, user("newbie", "github", "")).await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = answer(env.get("/api/v2/users/newbie")).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn delete_refusals_are_coders_in_coders_order() {
    let env = Env::start("ul_delete_no", |_| {}).await;
    let member = env.server.mint_token("mia", &[]).await.unwrap();
    let auditor = env.server.mint_token("aude", &["auditor"]).await.unwrap();
    let user_admin = env.server.mint_token("uma", &["user-admin"]).await.unwrap();
    env.server.mint_token("bob", &[]).await.unwrap();

    let (status, body) = delete(&env, &env.token, "me").await;
    assert_eq!(
        (status, body),
        (403, json!({"message": "You cannot delete yourself!"}))
    );
    let (status, body) = delete(&env, &member, "mia").await;
    assert_error(status, &body, 403, "You cannot delete yourself!");
    let (status, body) = delete(&env, &member, "bob").await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    let (status, body) = delete(&env, &env.token, "nobody").await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    let (status, body) = delete(&env, &auditor, "bob").await;
    assert_error(status, &body, 403, "Forbidden.");

    // A user who owns a workspace: 417 until the workspace is deleted (a check before the authorization).
    let version = env.import_version(b"terraform {}", json!({})).await;
    let version = env.wait_version(version["id"].as_str().unwrap()).await;
    let (status, template) = answer(env.post(
        "/api/v2/organizations/default/templates",
        json!({"name": "base", "template_version_id": version["id"]}),
    ))
    .await;
    assert_eq!(status, 201, "{template}");
    let (status, workspace) = answer(env.post(
        "/api/v2/users/bob/workspaces",
        json!({"name": "dev", "template_id": template["id"]}),
    ))
    .await;
    assert_eq!(status, 201, "{workspace}");
    env.wait_build(workspace["latest_build"]["id"].as_str().unwrap())
        .await;
    let refused = "You cannot delete a user that has workspaces. Delete their workspaces and try again!";
    let (status, body) = delete(&env, &auditor, "bob").await;
    assert_error(status, &body, 417, refused);
    let (status, body) = delete(&env, &env.token, "bob").await;
    assert_error(status, &body, 417, refused);
    let (status, build) = answer(env.post(
        &format!("/api/v2/workspaces/{}/builds", workspace["id"].as_str().unwrap()),
        json!({"transition": "delete"}),
    ))
    .await;
    assert_eq!(status, 201, "{build}");
    env.wait_build(build["id"].as_str().unwrap()).await;
    // A user admin may delete any user, an owner too.
    let (status, body) = delete(&env, &user_admin, "bob").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = delete(&env, &user_admin, "me").await;
    assert_error(status, &body, 403, "You cannot delete yourself!");
    let owner = answer(env.get("/api/v2/users/me")).await.1["username"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = delete(&env, &user_admin, &owner).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn login_refusals_are_coders() {
    let env = Env::start("ul_login", |_| {}).await;
    for (name, login_type, password, status) in
        [("pat", "password", STRONG, "suspended"), ("nora", "none", "", "")]
    {
        let mut body = user(name, login_type, password);
        body["user_status"] = json!(status);
        let (code, body) = create(&env, &env.token, body).await;
        assert_eq!(code, 201, "{body}");
    }
    let (status, body) = answer(call(
        &env,
        None,
        Method::POST,
        "/api/v2/users/login",
        Some(json!({})),
    ))
    .await;
    assert_error(status, &body, 400, "Validation failed.");
    assert_eq!(
        body["validations"],
        json!([
            {"field": "email", "detail": "Validation failed for tag \"required\" with value: \"\""},
            {"field": "password", "detail": "Validation failed for tag \"required\" with value: \"\""},
        ])
    );
    let (status, body) = login(&env, "pat", "x").await;
    assert_eq!(
        body["validations"][0]["detail"], "Validation failed for tag \"email\" with value: \"pat\"",
        "{status}"
    );
    let (status, body) = login(&env, "pat@example.com", "wrong").await;
    assert_eq!(
        (status, body),
        (401, json!({"message": "Incorrect email or password."}))
    );
    let (status, body) = login(&env, "pat@example.com", STRONG).await;
    assert_eq!(
        (status, body),
        (
            401,
            json!({"message": "Your account is suspended. Contact an admin to reactivate your account."})
        )
    );
    // A user without a password, and one that does not exist, compare as Coder's simulated hash of "hunter2".
    let (status, body) = login(&env, "nora@example.com", "other").await;
    assert_error(status, &body, 401, "Incorrect email or password.");
    let (status, body) = login(&env, "nora@example.com", "hunter2").await;
    assert_error(
        status,
        &body,
        403,
        "Incorrect login type, attempting to use \"password\" but user is of login type \"none\"",
    );
    let (status, body) = login(&env, "nobody@example.com", "hunter2").await;
    assert_error(
        status,
        &body,
        403,
        "Incorrect login type, attempting to use \"password\" but user is of login type \"\"",
    );
    // A hash Coder cannot read (the minted users' `none`) is its 500 without a detail.
    env.server.mint_token("minted", &[]).await.unwrap();
    let (status, body) = login(&env, "minted@testserver.invalid", "anything").await;
    assert_eq!((status, body), (500, json!({"message": "Internal error."})));
    // `/users/login` is a user for any other method, as in Coder's router.
    let (status, body) = answer(env.get("/api/v2/users/login")).await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    let (status, body) = delete(&env, &env.token, "login").await;
    assert_error(status, &body, 400, UNKNOWN_USER);
    let (status, body) = delete(&env, &env.token, "first").await;
    assert_error(status, &body, 400, UNKNOWN_USER);
}
