//! Authentication against Coder's PostgreSQL tables, headers, feature gates, the bypass check.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use coder_k8s_coder_testserver::Entitlement;
use common::{BUILD_VERSION, Env, content_type, version_header};
use serde_json::{Value, json};

const SIGNED_OUT: &str = "You are signed out or your session has expired. Please sign in again to continue.";

#[tokio::test]
async fn operator_token_from_bootstrap_authenticates() {
    let env = Env::start("me", |_| {}).await;
    let response = env.get("/api/v2/users/me").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(version_header(&response).as_deref(), Some(BUILD_VERSION));
    assert_eq!(content_type(&response), "application/json; charset=utf-8");
    let me: Value = response.json().await.unwrap();
    assert_eq!(me["username"], "coder-k8s-operator");
    assert_eq!(me["roles"], json!([{ "name": "owner", "display_name": "Owner" }]));
    assert_eq!(me["status"], "active");
    assert_eq!(me["login_type"], "none");
    assert_eq!(me["organization_ids"].as_array().unwrap().len(), 1);

    // Organizations from PostgreSQL, with the `default` alias and lookup by name.
    let orgs: Value = env
        .get("/api/v2/organizations")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(orgs[0]["name"], "coder");
    assert_eq!(orgs[0]["is_default"], true);
    for alias in ["default", "coder", orgs[0]["id"].as_str().unwrap()] {
        let org: Value = env
            .get(&format!("/api/v2/organizations/{alias}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(org["id"], orgs[0]["id"], "{alias}");
    }
    let missing = env.get("/api/v2/organizations/nope").send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(
        body["message"],
        "Resource not found or you do not have access to this resource"
    );

    // The Everyone group holds the org's members (groups are Premium: Template RBAC).
    env.server.set_entitlement("template_rbac", Entitlement::Entitled);
    let groups: Value = env
        .get("/api/v2/organizations/default/groups")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(groups[0]["name"], "Everyone");
    assert_eq!(groups[0]["id"], orgs[0]["id"]);

    // Token via cookie and query parameter too.
    let cookie = env
        .http
        .get(env.url("/api/v2/users/me"))
        .header("Cookie", format!("coder_session_token={}", env.token))
        .send()
        .await
        .unwrap();
    assert_eq!(cookie.status(), 200);
    let query = env
        .http
        .get(env.url(&format!("/api/v2/users/me?coder_session_token={}", env.token)))
        .send()
        .await
        .unwrap();
    assert_eq!(query.status(), 200);

    // buildinfo is unauthenticated and carries the deployment id.
    let info: Value = env
        .http
        .get(env.url("/api/v2/buildinfo"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["deployment_id"], env.server.deployment_id());
    assert_eq!(info["version"], BUILD_VERSION);
}

async fn expect_401(env: &Env, token: Option<&str>, message: &str, detail_prefix: &str) {
    let mut request = env.http.get(env.url("/api/v2/users/me"));
    if let Some(token) = token {
        request = request.header("Coder-Session-Token", token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 401, "{token:?}");
    assert_eq!(version_header(&response).as_deref(), Some(BUILD_VERSION));
    assert_eq!(content_type(&response), "application/json; charset=utf-8");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["message"], message, "{token:?}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with(detail_prefix), "{token:?}: {detail}");
}

#[tokio::test]
async fn token_problems_get_coder_401_texts() {
    let env = Env::start("badtok", |_| {}).await;
    let (id, secret) = env.token.split_once('-').unwrap();
    expect_401(
        &env,
        None,
        SIGNED_OUT,
        "Cookie \"coder_session_token\" or query parameter must be provided.",
    )
    .await;
    expect_401(&env, Some("garbage"), SIGNED_OUT, "Invalid API key format: ").await;
    expect_401(&env, Some("abc-def"), SIGNED_OUT, "Invalid API key format: ").await;
    expect_401(
        &env,
        Some(&format!("ZZZZZZZZZZ-{secret}")),
        SIGNED_OUT,
        "API key is invalid.",
    )
    .await;
    let wrong = format!("{id}-{}", "A".repeat(22));
    expect_401(&env, Some(&wrong), SIGNED_OUT, "API key secret is invalid.").await;

    let db = env.db().await;
    db.execute(
        "UPDATE api_keys SET expires_at = now() - interval '1 hour' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
    expect_401(&env, Some(&env.token), SIGNED_OUT, "API key expired at \"").await;

    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    db.execute(
        "UPDATE users SET status = 'suspended' WHERE username = 'alice'",
        &[],
    )
    .await
    .unwrap();
    expect_401(
        &env,
        Some(&alice),
        "User is not active (status = \"suspended\"). Contact an admin to reactivate your account.",
        "",
    )
    .await;
}

#[tokio::test]
async fn sliding_expiry_and_dormant_activation() {
    let env = Env::start("slide", |_| {}).await;
    let db = env.db().await;
    let (id, _) = env.token.split_once('-').unwrap();
    db.execute(
        "UPDATE api_keys SET expires_at = now() + interval '1 day' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
    assert_eq!(env.get("/api/v2/users/me").send().await.unwrap().status(), 200);
    let row = db
        .query_one(
            "SELECT extract(epoch FROM expires_at - now())::float8 FROM api_keys WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let remaining: f64 = row.get(0);
    assert!(remaining > 364.0 * 86_400.0, "expiry was not pushed: {remaining}");

    let bob = env.server.mint_token("bob", &[]).await.unwrap();
    db.execute("UPDATE users SET status = 'dormant' WHERE username = 'bob'", &[])
        .await
        .unwrap();
    let me: Value = env
        .http
        .get(env.url("/api/v2/users/me"))
        .header("Coder-Session-Token", &bob)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["status"], "active");
}

#[tokio::test]
async fn headers_route_not_found_and_method_not_allowed() {
    let env = Env::start("hdr", |_| {}).await;
    let response = env.get("/api/v2/does-not-exist").send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert_eq!(version_header(&response).as_deref(), Some(BUILD_VERSION));
    assert_eq!(response.headers()["X-Content-Type-Options"], "nosniff");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body, json!({ "message": "Route not found." }));

    let bad_json = env
        .http
        .post(env.url("/api/v2/organizations/default/provisionerkeys"))
        .header("Coder-Session-Token", &env.token)
        .body("{not json")
        .send()
        .await
        .unwrap();
    // The feature gate answers first (not entitled).
    assert_eq!(bad_json.status(), 403);
    assert_eq!(version_header(&bad_json).as_deref(), Some(BUILD_VERSION));
}

#[tokio::test]
async fn feature_gates_and_entitlements() {
    let env = Env::start("gate", |c| {
        c.entitlements
            .insert("audit_log".to_owned(), Entitlement::GracePeriod);
    })
    .await;
    // Workspace proxies: the gate precedes auth.
    let response = env
        .http
        .get(env.url("/api/v2/workspaceproxies"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    assert_eq!(version_header(&response).as_deref(), Some(BUILD_VERSION));
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["message"],
        "Workspace Proxy is a Premium feature. Contact sales!"
    );

    // Provisioner keys: auth first (401 without a token), then the gate.
    let response = env
        .http
        .get(env.url("/api/v2/organizations/default/provisionerkeys"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let response = env
        .get("/api/v2/organizations/default/provisionerkeys")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["message"],
        "External Provisioner Daemons is a Premium feature. Contact sales!"
    );

    let response = env
        .post("/api/v2/organizations", json!({ "name": "second" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["message"],
        "Multiple Organizations is a Premium feature. Contact sales!"
    );

    let entitlements: Value = env
        .http
        .get(env.url("/api/v2/entitlements"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(entitlements["features"].as_object().unwrap().len(), 26);
    assert_eq!(
        entitlements["features"]["workspace_proxy"]["entitlement"],
        "not_entitled"
    );
    assert_eq!(entitlements["features"]["workspace_proxy"]["enabled"], false);
    assert_eq!(
        entitlements["features"]["audit_log"]["entitlement"],
        "grace_period"
    );
    assert_eq!(entitlements["features"]["audit_log"]["enabled"], true);
    assert_eq!(entitlements["has_license"], true);

    env.server
        .set_entitlement("workspace_proxy", Entitlement::Entitled);
    let response = env.get("/api/v2/workspaceproxies").send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["regions"][0]["name"], "primary");
    assert_eq!(body["regions"][0]["id"], env.server.deployment_id());
}

#[tokio::test]
async fn bypass_header_needs_owner() {
    let env = Env::start("bypass", |_| {}).await;
    let member = env.server.mint_token("member1", &[]).await.unwrap();
    let response = env
        .http
        .get(env.url("/api/v2/users/me"))
        .header("Coder-Session-Token", &member)
        .header("X-Coder-Bypass-Ratelimit", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 428);
    assert_eq!(version_header(&response).as_deref(), Some(BUILD_VERSION));
    assert!(content_type(&response).starts_with("text/plain"));
    assert_eq!(
        response.text().await.unwrap(),
        "\"X-Coder-Bypass-Ratelimit\" provided but user is not owner\n"
    );
    // Owners may bypass; members without the header are fine.
    let owner = env
        .get("/api/v2/users/me")
        .header("X-Coder-Bypass-Ratelimit", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(owner.status(), 200);
    let plain = env
        .http
        .get(env.url("/api/v2/users/me"))
        .header("Coder-Session-Token", &member)
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 200);
    // Non-owners cannot read licenses.
    let licenses = env
        .http
        .get(env.url("/api/v2/licenses"))
        .header("Coder-Session-Token", &member)
        .send()
        .await
        .unwrap();
    assert_eq!(licenses.status(), 403);
    let body: Value = licenses.json().await.unwrap();
    assert_eq!(body["message"], "Forbidden.");
}

#[tokio::test]
async fn licenses() {
    let jwt = "eyJhbGciOiJFZERTQSJ9.eyJmZWF0dXJlX3NldCI6InByZW1pdW0ifQ.c2ln";
    let env = Env::start("lic", |c| c.accepted_licenses = vec![jwt.to_owned()]).await;
    let response = env
        .post("/api/v2/licenses", json!({ "license": jwt }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let license: Value = response.json().await.unwrap();
    assert_eq!(license["id"], 1);
    assert_eq!(license["claims"]["feature_set"], "premium");
    let dup = env
        .post("/api/v2/licenses", json!({ "license": jwt }))
        .send()
        .await
        .unwrap();
    assert_eq!(dup.status(), 500);
    let body: Value = dup.json().await.unwrap();
    assert_eq!(body["message"], "Unable to add license to database");
    assert!(body["detail"].as_str().unwrap().contains("licenses_jwt_key"));
    let bad = env
        .post("/api/v2/licenses", json!({ "license": "x.y.z" }))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.unwrap();
    assert_eq!(body["message"], "Invalid license");
    let list: Value = env
        .get("/api/v2/licenses")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(
        env.delete("/api/v2/licenses/abc").send().await.unwrap().status(),
        404
    );
    assert_eq!(
        env.delete("/api/v2/licenses/7").send().await.unwrap().status(),
        404
    );
    let deleted = env.delete("/api/v2/licenses/1").send().await.unwrap();
    assert_eq!(deleted.status(), 200);
    assert_eq!(deleted.text().await.unwrap(), "");
}
