//! What the test server's update routes do with the fields a request leaves out, as Coder's handlers do: AI
//! provider and MCP server config PATCHes keep them (pointer fields), a provider's settings block is replaced whole
//! (only the write-only AWS keys and the server-owned external ID survive), an MCP auth-type change clears the
//! other auth types' fields, and an MCP access-list PATCH changes only the entries it names.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Env;
use serde_json::{Value, json};

async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The stored provider named `name`, AWS keys included (the routes never return them).
fn stored_provider(env: &Env, name: &str) -> Value {
    env.server
        .ai_providers()
        .into_iter()
        .find(|p| p["name"] == name)
        .unwrap()
}

#[tokio::test]
async fn an_ai_provider_patch_keeps_what_it_leaves_out_and_replaces_the_settings_block() {
    let env = Env::start("omit_aiprov", |_| {}).await;
    let (status, created) = answer(env.post(
        "/api/v2/ai/providers",
        json!({"type": "bedrock", "name": "aws", "display_name": "AWS", "enabled": true,
               "base_url": "https://bedrock.example.com",
               "settings": {"_type": "bedrock", "_version": 1, "region": "us-east-1", "model": "sonnet",
                            "access_key": "AKIA1", "access_key_secret": "s3cr3t"}}),
    ))
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["settings"],
        json!({"_type": "bedrock", "_version": 1, "region": "us-east-1", "model": "sonnet"}),
        "the AWS keys are write-only"
    );

    // A patch of one field keeps the others; `null` counts as left out.
    let (status, patched) = answer(env.patch(
        "/api/v2/ai/providers/aws",
        json!({"enabled": false, "display_name": null}),
    ))
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["enabled"], false);
    assert_eq!(patched["display_name"], "AWS");
    assert_eq!(patched["base_url"], "https://bedrock.example.com");
    assert_eq!(patched["settings"], created["settings"]);

    // A settings block replaces the stored one: `model`, left out, is gone; the AWS keys stay.
    let (status, patched) = answer(env.patch(
        "/api/v2/ai/providers/aws",
        json!({"settings": {"_type": "bedrock", "_version": 1, "region": "eu-west-1"}}),
    ))
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        patched["settings"],
        json!({"_type": "bedrock", "_version": 1, "region": "eu-west-1"})
    );
    let stored = stored_provider(&env, "aws");
    assert_eq!(
        (
            &stored["settings"]["access_key"],
            &stored["settings"]["access_key_secret"]
        ),
        (&json!("AKIA1"), &json!("s3cr3t"))
    );

    // Settings without their discriminator do not decode, and nothing changes.
    let (status, refused) = answer(env.patch(
        "/api/v2/ai/providers/aws",
        json!({"enabled": true, "settings": {"region": "ap-south-1"}}),
    ))
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["message"], "Request body must be valid JSON.");
    assert_eq!(stored_provider(&env, "aws")["enabled"], false);
}

#[tokio::test]
async fn an_mcp_server_patch_keeps_what_it_leaves_out_and_an_auth_change_clears_the_old_auth() {
    let env = Env::start("omit_mcp", |_| {}).await;
    let base = "/api/v2/organizations/default/mcp-servers";
    let (status, created) = answer(env.post(
        base,
        json!({"display_name": "Docs", "slug": "docs", "description": "the docs", "transport": "streamable_http",
               "url": "https://mcp.example", "auth_type": "api_key", "api_key_header": "X-Key",
               "api_key_value": "secret", "availability": "default_on", "enabled": true,
               "model_intent": true, "tool_allow_list": ["search"]}),
    ))
    .await;
    assert_eq!(status, 201, "{created}");
    let path = format!("{base}/{}", created["id"].as_str().unwrap());

    let (status, patched) =
        answer(env.patch(&path, json!({"description": "new docs", "enabled": null}))).await;
    assert_eq!(status, 200, "{patched}");
    let kept = [
        "display_name",
        "url",
        "auth_type",
        "api_key_header",
        "has_api_key_value",
        "availability",
        "enabled",
        "model_intent",
        "tool_allow_list",
    ];
    for field in kept {
        assert_eq!(patched[field], created[field], "{field}");
    }
    assert_eq!(patched["description"], "new docs");

    // A new auth type clears the old one's fields, also when the request sent them.
    let (status, patched) = answer(env.patch(
        &path,
        json!({"auth_type": "oauth2", "oauth2_client_id": "client", "api_key_header": "X-Other"}),
    ))
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["oauth2_client_id"], "client");
    assert_eq!(patched["has_api_key_value"], false);
    assert!(patched.get("api_key_header").is_none(), "{patched}");
    assert_eq!(patched["model_intent"], true, "not an auth field");
}

#[tokio::test]
async fn an_mcp_access_list_patch_changes_only_the_entries_it_names() {
    let env = Env::start("omit_acl", |_| {}).await;
    let base = "/api/v2/organizations/default/mcp-servers";
    let (_, created) = answer(env.post(
        base,
        json!({"display_name": "Docs", "slug": "docs", "transport": "streamable_http", "url": "https://mcp.example"}),
    ))
    .await;
    let organization = created["organization_id"].as_str().unwrap().to_owned();
    let acl = format!("{base}/{}/acl", created["id"].as_str().unwrap());
    let org_id = uuid::Uuid::parse_str(&organization).unwrap();
    let engineers = env.server.add_group(org_id, "engineers").to_string();
    let operators = env.server.add_group(org_id, "operators").to_string();
    let grant = |groups: Value| env.patch(&acl, json!({"group_roles": groups, "user_roles": {}}));
    assert_eq!(answer(grant(json!({&engineers: "read"}))).await.0, 204);
    assert_eq!(answer(grant(json!({&operators: "read"}))).await.0, 204);
    let (_, listed) = answer(env.get(&acl)).await;
    let mut ids: Vec<&str> = listed["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    let mut expected = vec![engineers.as_str(), operators.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected, "the second grant kept the first");
    assert_eq!(answer(grant(json!({&engineers: ""}))).await.0, 204);
    let (_, listed) = answer(env.get(&acl)).await;
    assert_eq!(listed["groups"].as_array().unwrap().len(), 1);
    assert_eq!(listed["groups"][0]["id"], operators.as_str());
}
