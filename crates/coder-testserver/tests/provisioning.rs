//! Provisioner keys, workspace proxies, files, template imports, workspaces, builds and logs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use coder_k8s_coder_testserver::{BuildOutcome, Entitlement};
use common::{Env, version_header};
use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

#[tokio::test]
async fn provisioner_key_round_trip() {
    let env = Env::start("pkeys", |c| {
        c.entitlements
            .insert("external_provisioner_daemons".to_owned(), Entitlement::Entitled);
    })
    .await;
    let base = "/api/v2/organizations/default/provisionerkeys";
    let response = env
        .post(base, json!({ "name": "k8s-pool", "tags": { "pool": "a" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let created: Value = response.json().await.unwrap();
    let key = created["key"].as_str().unwrap().to_owned();
    assert_eq!(key.len(), 43);
    assert_eq!(
        created.as_object().unwrap().len(),
        1,
        "only the key is returned: {created}"
    );

    let dup = env
        .post(base, json!({ "name": "K8S-pool", "tags": null }))
        .send()
        .await
        .unwrap();
    assert_eq!(dup.status(), 409);
    let body: Value = dup.json().await.unwrap();
    assert_eq!(
        body["message"],
        "Provisioner key with name 'K8S-pool' already exists in organization"
    );
    let reserved = env.post(base, json!({ "name": "PSK" })).send().await.unwrap();
    assert_eq!(reserved.status(), 400);
    let body: Value = reserved.json().await.unwrap();
    assert_eq!(body["validations"][0]["field"], "name");

    let list: Value = env.get(base).send().await.unwrap().json().await.unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["name"], "k8s-pool");
    assert_eq!(list[0]["tags"], json!({ "pool": "a" }));
    let orgs: Value = env
        .get("/api/v2/organizations")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list[0]["organization"], orgs[0]["id"]);
    assert_eq!(env.server.provisioner_keys().len(), 1);

    // The key authenticates itself.
    let own = env
        .http
        .get(env.url(&format!("/api/v2/provisionerkeys/{key}")))
        .header("Coder-Provisioner-Daemon-Key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 200);

    assert_eq!(
        env.delete(&format!("{base}/built-in"))
            .send()
            .await
            .unwrap()
            .status(),
        400
    );
    let deleted = env.delete(&format!("{base}/k8s-pool")).send().await.unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(version_header(&deleted).as_deref(), Some(common::BUILD_VERSION));
    assert_eq!(
        env.delete(&format!("{base}/k8s-pool"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert!(env.server.provisioner_keys().is_empty());
}

#[tokio::test]
async fn workspace_proxy_lifecycle() {
    let env = Env::start("proxies", |c| {
        c.entitlements
            .insert("workspace_proxy".to_owned(), Entitlement::Entitled);
    })
    .await;
    let reserved = env
        .post("/api/v2/workspaceproxies", json!({ "name": "Primary" }))
        .send()
        .await
        .unwrap();
    assert_eq!(reserved.status(), 400);
    let response = env
        .post("/api/v2/workspaceproxies", json!({ "name": "eu" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let created: Value = response.json().await.unwrap();
    let token = created["proxy_token"].as_str().unwrap();
    let (id, secret) = token.split_once(':').unwrap();
    assert_eq!(id, created["proxy"]["id"].as_str().unwrap());
    assert_eq!(secret.len(), 64);
    assert_eq!(created["proxy"]["status"]["status"], "unregistered");
    let dup = env
        .post("/api/v2/workspaceproxies", json!({ "name": "EU" }))
        .send()
        .await
        .unwrap();
    assert_eq!(dup.status(), 409);

    // The required-fields pitfall.
    let patch = env
        .patch(
            "/api/v2/workspaceproxies/eu",
            json!({ "id": id, "name": "eu", "display_name": "EU", "icon": "" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(patch.status(), 400);
    let body: Value = patch.json().await.unwrap();
    assert_eq!(body["message"], "Validation failed.");
    assert_eq!(body["validations"][0]["field"], "icon");
    let patch = env
        .patch(
            &format!("/api/v2/workspaceproxies/{id}"),
            json!({ "id": id, "name": "eu", "display_name": "EU", "icon": "/e.png", "regenerate_token": true }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(patch.status(), 200);
    let body: Value = patch.json().await.unwrap();
    assert_ne!(body["proxy_token"].as_str().unwrap(), token);
    assert_eq!(body["proxy"]["icon_url"], "/e.png");

    let deleted = env.delete("/api/v2/workspaceproxies/eu").send().await.unwrap();
    assert_eq!(deleted.status(), 200);
    let body: Value = deleted.json().await.unwrap();
    assert_eq!(body["message"], "Proxy has been deleted!");
    assert_eq!(
        env.get("/api/v2/workspaceproxies/eu")
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        env.delete("/api/v2/workspaceproxies/primary")
            .send()
            .await
            .unwrap()
            .status(),
        400
    );
}

#[tokio::test]
async fn template_import_succeeds_then_workspace_builds() {
    let env = Env::start("import", |c| c.build_duration = Duration::from_millis(100)).await;
    let version = env.import_version(b"archive-one", json!({ "name": "v1" })).await;
    assert_eq!(version["job"]["status"], "pending");
    assert_eq!(version["job"]["type"], "template_version_import");
    assert_eq!(version["created_by"]["username"], "coder-k8s-operator");
    // Same content again: 200 with the same file id.
    let again = env
        .http
        .post(env.url("/api/v2/files"))
        .header("Coder-Session-Token", &env.token)
        .header("Content-Type", "application/x-tar")
        .body(b"archive-one".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    let id = version["id"].as_str().unwrap();
    let done = env.wait_version(id).await;
    assert_eq!(done["job"]["status"], "succeeded");
    let logs: Value = env
        .get(&format!("/api/v2/templateversions/{id}/logs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(logs.as_array().unwrap().len() >= 3, "{logs}");
    let after: Value = env
        .get(&format!(
            "/api/v2/templateversions/{id}/logs?after={}",
            logs[0]["id"]
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        after.as_array().unwrap().len(),
        logs.as_array().unwrap().len() - 1
    );

    let response = env
        .post(
            "/api/v2/organizations/default/templates",
            json!({ "name": "k8s", "template_version_id": id }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let template: Value = response.json().await.unwrap();
    assert_eq!(template["active_version_id"], id);
    let dup = env
        .post(
            "/api/v2/organizations/default/templates",
            json!({ "name": "k8s", "template_version_id": id }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(dup.status(), 409);
    let template_id = template["id"].as_str().unwrap();
    let by_name: Value = env
        .get("/api/v2/organizations/default/templates/k8s")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(by_name["id"], template_id);

    // A second version attached to the template, promoted once built.
    let v2 = env
        .import_version(
            b"archive-two",
            json!({ "name": "v2", "template_id": template_id }),
        )
        .await;
    let v2_id = v2["id"].as_str().unwrap();
    let early = env
        .patch(
            &format!("/api/v2/templates/{template_id}/versions"),
            json!({ "id": v2_id }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(early.status(), 403);
    env.wait_version(v2_id).await;
    let promoted = env
        .patch(
            &format!("/api/v2/templates/{template_id}/versions"),
            json!({ "id": v2_id }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(promoted.status(), 200);
    let versions: Value = env
        .get(&format!("/api/v2/templates/{template_id}/versions"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(versions.as_array().unwrap().len(), 2);

    // Workspace: the first build is queued; a second build while it runs is a conflict.
    let response = env
        .post(
            "/api/v2/users/me/workspaces",
            json!({ "name": "dev", "template_id": template_id }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let workspace: Value = response.json().await.unwrap();
    let ws_id = workspace["id"].as_str().unwrap();
    assert_eq!(workspace["latest_build"]["transition"], "start");
    assert_eq!(workspace["latest_build"]["template_version_id"], v2_id);
    let busy = env
        .post(
            &format!("/api/v2/workspaces/{ws_id}/builds"),
            json!({ "transition": "stop" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(busy.status(), 409);
    let body: Value = busy.json().await.unwrap();
    assert_eq!(body["message"], "A workspace build is already active.");
    let build = env
        .wait_build(workspace["latest_build"]["id"].as_str().unwrap())
        .await;
    assert_eq!(build["status"], "running");
    let stop = env
        .post(
            &format!("/api/v2/workspaces/{ws_id}/builds"),
            json!({ "transition": "stop" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(stop.status(), 201);
    let stop: Value = stop.json().await.unwrap();
    assert_eq!(stop["build_number"], 2);
    let stopped = env.wait_build(stop["id"].as_str().unwrap()).await;
    assert_eq!(stopped["status"], "stopped");
    let list: Value = env
        .get("/api/v2/workspaces?q=owner:me")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["count"], 1);

    // Delete transition removes the workspace from listings.
    let delete = env
        .post(
            &format!("/api/v2/workspaces/{ws_id}/builds"),
            json!({ "transition": "delete" }),
        )
        .send()
        .await
        .unwrap();
    let delete: Value = delete.json().await.unwrap();
    let deleted = env.wait_build(delete["id"].as_str().unwrap()).await;
    assert_eq!(deleted["status"], "deleted");
    let list: Value = env
        .get("/api/v2/workspaces")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["count"], 0);
    assert_eq!(
        env.get(&format!("/api/v2/workspaces/{ws_id}"))
            .send()
            .await
            .unwrap()
            .status(),
        410
    );
}

#[tokio::test]
async fn template_import_fails() {
    let env = Env::start("importfail", |c| {
        c.build_outcome = BuildOutcome::Fail;
        c.build_duration = Duration::from_millis(50);
    })
    .await;
    let version = env.import_version(b"broken", json!({})).await;
    let id = version["id"].as_str().unwrap();
    let done = env.wait_version(id).await;
    assert_eq!(done["job"]["status"], "failed");
    assert!(!done["job"]["error"].as_str().unwrap().is_empty());
    let logs: Value = env
        .get(&format!("/api/v2/templateversions/{id}/logs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(logs.as_array().unwrap().iter().any(|l| l["log_level"] == "error"));
    // A failed version can still form a template, but a workspace cannot use it.
    let template: Value = env
        .post(
            "/api/v2/organizations/default/templates",
            json!({ "name": "broken", "template_version_id": id }),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let response = env
        .post(
            "/api/v2/users/me/workspaces",
            json!({ "name": "dev", "template_id": template["id"] }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    // Bulk archive takes failed, unused versions only (the active one is in use).
    let archived: Value = env
        .post(
            &format!(
                "/api/v2/templates/{}/versions/archive",
                template["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(archived["archived_ids"], json!([]));
}

#[tokio::test]
async fn follow_logs_websocket_closes_with_1000() {
    let env = Env::start("follow", |c| c.build_duration = Duration::from_millis(400)).await;
    let version = env.import_version(b"follow-me", json!({})).await;
    let id = version["id"].as_str().unwrap();
    let ws_url = env
        .url(&format!("/api/v2/templateversions/{id}/logs?follow&after=0"))
        .replacen("http://", "ws://", 1);
    let mut request = ws_url.into_client_request().unwrap();
    request.headers_mut().insert(
        "Cookie",
        format!("coder_session_token={}", env.token).parse().unwrap(),
    );
    let (mut socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(response.status(), 101);
    let mut logs = Vec::new();
    let close = loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("websocket stalled")
            .expect("stream ended without a close frame")
            .unwrap();
        match message {
            Message::Text(text) => logs.push(serde_json::from_str::<Value>(&text).unwrap()),
            Message::Close(frame) => break frame.unwrap(),
            _ => {}
        }
    };
    assert_eq!(u16::from(close.code), 1000);
    assert!(logs.len() >= 3, "{logs:?}");
    let ids: Vec<i64> = logs.iter().map(|l| l["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let done: Value = env
        .get(&format!("/api/v2/templateversions/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(done["job"]["status"], "succeeded");

    // Following a completed job: the backlog, then close 1000 at once.
    let ws_url = env
        .url(&format!("/api/v2/templateversions/{id}/logs?follow"))
        .replacen("http://", "ws://", 1);
    let mut request = ws_url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Coder-Session-Token", env.token.parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut count = 0;
    while let Some(message) = socket.next().await {
        match message.unwrap() {
            Message::Text(_) => count += 1,
            Message::Close(frame) => {
                assert_eq!(u16::from(frame.unwrap().code), 1000);
                break;
            }
            _ => {}
        }
    }
    assert_eq!(count, logs.len());
}

#[tokio::test]
async fn ai_gateway_keys_are_gated() {
    let env = Env::start("aikeys", |_| {}).await;
    let gated = env
        .post("/api/v2/ai-gateway/keys", json!({ "name": "ci" }))
        .send()
        .await
        .unwrap();
    assert_eq!(gated.status(), 403);
    let body: Value = gated.json().await.unwrap();
    assert_eq!(body["message"], "AI Bridge is a Premium feature. Contact sales!");
    env.server.set_entitlement("aibridge", Entitlement::Entitled);
    let created = env
        .post("/api/v2/ai-gateway/keys", json!({ "name": "ci" }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    assert!(
        created["key"]
            .as_str()
            .unwrap()
            .starts_with(created["key_prefix"].as_str().unwrap())
    );
    let dup = env
        .post("/api/v2/ai-gateway/keys", json!({ "name": "ci" }))
        .send()
        .await
        .unwrap();
    assert_eq!(dup.status(), 400);
    let body: Value = dup.json().await.unwrap();
    assert_eq!(body["message"], "Key name must be unique.");
    let list: Value = env
        .get("/api/v2/ai-gateway/keys")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert!(list[0].get("key").is_none());
    let id = created["id"].as_str().unwrap();
    assert_eq!(
        env.delete(&format!("/api/v2/ai-gateway/keys/{id}"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );

    // AI providers and MCP servers (unstable in Coder).
    let provider = env
        .post(
            "/api/v2/ai/providers",
            json!({ "type": "openai", "name": "openai-main", "enabled": true, "base_url": "https://api.openai.com", "api_keys": ["sk-abcdef1234"] }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(provider.status(), 201);
    let provider: Value = provider.json().await.unwrap();
    assert_eq!(provider["api_keys"][0]["masked"], "****1234");
    assert_eq!(
        env.delete("/api/v2/ai/providers/openai-main")
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let mcp = env
        .post(
            "/api/v2/organizations/default/mcp-servers",
            json!({ "display_name": "Docs", "slug": "docs", "transport": "streamable_http", "url": "https://mcp.example", "auth_type": "api_key", "api_key_value": "secret" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(mcp.status(), 201);
    let mcp: Value = mcp.json().await.unwrap();
    assert!(mcp.get("api_key_value").is_none());
    assert_eq!(mcp["has_api_key_value"], true);
    let path = format!(
        "/api/v2/organizations/default/mcp-servers/{}",
        mcp["id"].as_str().unwrap()
    );
    assert_eq!(env.delete(&path).send().await.unwrap().status(), 204);
}

#[tokio::test]
async fn mcp_server_routes_need_a_site_owner_answer_404s_and_keep_an_access_list() {
    let env = Env::start("mcpacl", |_| {}).await;
    // Listing groups below needs Coder's Premium groups (Template RBAC).
    env.server.set_entitlement("template_rbac", Entitlement::Entitled);
    let base = "/api/v2/organizations/default/mcp-servers";
    let body = json!({ "display_name": "Docs", "slug": "docs", "transport": "streamable_http", "url": "https://mcp.example" });
    // A plain member is refused; an unknown organization or config is Coder's 404 (JSON, not `Route not found.`).
    let member = env.server.mint_token("member", &[]).await.unwrap();
    let refused = env
        .http
        .post(env.url(base))
        .header("Coder-Session-Token", &member)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let unknown_org = env
        .get("/api/v2/organizations/nope/mcp-servers")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown_org.status(), 404);
    let message: Value = unknown_org.json().await.unwrap();
    assert_ne!(message["message"], "Route not found.");
    let unknown_id = env
        .get(&format!("{base}/{}/acl", uuid::Uuid::new_v4()))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown_id.status(), 404);

    let created: Value = env.post(base, body).send().await.unwrap().json().await.unwrap();
    let acl = format!("{base}/{}/acl", created["id"].as_str().unwrap());
    let org = created["organization_id"].as_str().unwrap().to_owned();
    let group = env
        .server
        .add_group(uuid::Uuid::parse_str(&org).unwrap(), "engineers");
    let groups: Value = env
        .get("/api/v2/organizations/default/groups")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(groups[1]["name"], "engineers");
    let user = uuid::Uuid::new_v4().to_string();
    let patch = json!({"group_roles": {group.to_string(): "read"}, "user_roles": {user.clone(): "read"}});
    assert_eq!(env.patch(&acl, patch).send().await.unwrap().status(), 204);
    let read: Value = env.get(&acl).send().await.unwrap().json().await.unwrap();
    assert_eq!(read["groups"][0]["name"], "engineers");
    assert_eq!(read["groups"][0]["role"], "read");
    assert_eq!(read["users"][0]["id"], user.as_str());
    // `""` removes an entry; a group of no organization is a 400 and changes nothing.
    let foreign = uuid::Uuid::new_v4().to_string();
    let rejected = env
        .patch(
            &acl,
            json!({"group_roles": {foreign: "read"}, "user_roles": {user.clone(): ""}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(rejected.status(), 400);
    assert_eq!(env.server.mcp_servers()[0]["acl"]["users"][&user], "read");
    let removed = env
        .patch(&acl, json!({"user_roles": {user.clone(): ""}}))
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), 204);
    let after = &env.server.mcp_servers()[0]["acl"];
    assert_eq!(after["users"], json!({}));
    assert_eq!(after["groups"][group.to_string()], "read");
}
