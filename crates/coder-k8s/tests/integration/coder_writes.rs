//! The controllers' updates of Coder change only what the spec manages: a field set in Coder that the spec does not
//! manage is still there after a reconcile wrote to the same object. Against the Coder API test server, whose
//! update routes treat left-out fields as Coder's handlers do (docs/reference/coder-test-server.md, "What an
//! update does with the fields it leaves out").

use coder_k8s_api::ai_provider::CoderAIProvider;
use coder_k8s_coder_client::ai::PatchAiProviderRequest;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::ai_provider::{PROVIDERS, create_object, wait_reason as provider_reason};
use crate::control_plane::{Harness, harness};
use crate::mcp_server::{
    create_server, credential_secret, patch_spec, setup, spec as mcp_spec, wait_config,
    wait_reason as mcp_reason,
};
use crate::provisioner::ready_control_plane;
use crate::support::wait_for;

const CP: &str = "codercontrolplane-sample";

/// The writes (not GETs) sent with `token`: `METHOD path`.
fn writes_by(h: &Harness, token: &str) -> Vec<String> {
    h.server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET" && r.session_token.as_deref() == Some(token))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

#[tokio::test]
async fn a_bedrock_settings_patch_keeps_the_settings_the_spec_does_not_set() {
    let h = harness("writes-bedrock").await;
    let operator = ready_control_plane(&h).await;
    let admin = h.coder(&h.server.mint_token("admin", &["owner"]).await.unwrap());
    h.put_secret(
        "aws",
        &[
            ("AWS_ACCESS_KEY_ID", "AKIA0001"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
        ],
    )
    .await;
    let spec = json!({
        "controlPlaneRef": {"name": CP}, "type": "bedrock", "baseURL": "https://bedrock.example.com",
        "settings": {"bedrock": {"region": "us-east-1", "accessKeyIDSecretRef": {"name": "aws"},
                                 "secretAccessKeySecretRef": {"name": "aws"}}},
    });
    create_object(&h, "bedrock", spec).await;
    let id = provider_reason(&h, "bedrock", "Synced")
        .await
        .provider_id
        .unwrap();
    // An admin picks the small model in Coder, a setting the spec leaves out: Coder takes the whole block.
    let mut block = admin.ai_provider("bedrock").await.unwrap().settings;
    block["small_fast_model"] = json!("claude-haiku");
    let set_in_coder = PatchAiProviderRequest {
        settings: Some(block),
        ..PatchAiProviderRequest::default()
    };
    admin.patch_ai_provider("bedrock", &set_in_coder).await.unwrap();

    h.server.clear_requests();
    h.api::<CoderAIProvider>()
        .patch(
            "bedrock",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"settings": {"bedrock": {"region": "eu-west-1"}}}})),
        )
        .await
        .unwrap();
    wait_for(
        || async { admin.ai_provider("bedrock").await.unwrap().settings["region"] == "eu-west-1" },
        "the new region in Coder",
    )
    .await;
    provider_reason(&h, "bedrock", "Synced").await;
    assert_eq!(
        writes_by(&h, &operator),
        [format!("PATCH {PROVIDERS}/{id}")],
        "one settings patch"
    );
    let settings = admin.ai_provider("bedrock").await.unwrap().settings;
    assert_eq!(
        settings,
        json!({"_type": "bedrock", "_version": 1, "region": "eu-west-1", "small_fast_model": "claude-haiku"}),
        "the admin's model survived the operator's patch"
    );
    let stored = h
        .server
        .ai_providers()
        .into_iter()
        .find(|p| p["name"] == "bedrock")
        .unwrap();
    assert_eq!(
        stored["settings"]["access_key"], "AKIA0001",
        "the AWS keys are still the Secret's"
    );
}

#[tokio::test]
async fn an_mcp_server_patch_keeps_the_fields_the_spec_does_not_manage() {
    let h = harness("writes-mcp").await;
    let s = setup(&h, true).await;
    credential_secret(&h, Some("https://mcp.example.com")).await;
    let mut spec = mcp_spec(&s.organization);
    spec["authType"] = json!("api_key");
    spec["apiKey"] = json!({"valueSecretRef": {"name": "mcp-key"}});
    create_server(&h, "keyed", spec).await;
    let id = mcp_reason(&h, "keyed", "Synced").await.server_id.unwrap();
    // An admin turns on model intent in Coder: the CRD has no such field, so the operator never sends it.
    let admin = h.server.mint_token("intent-admin", &["owner"]).await.unwrap();
    let url = h
        .server
        .url()
        .join(&format!(
            "api/v2/organizations/{}/mcp-servers/{id}",
            s.organization
        ))
        .unwrap();
    coder_k8s_coder_client::install_ring_provider();
    let answer = reqwest::Client::new()
        .patch(url)
        .header("Coder-Session-Token", &admin)
        .json(&json!({"model_intent": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);

    h.server.clear_requests();
    patch_spec(&h, "keyed", json!({"description": "the team's tools"})).await;
    let after = wait_config(&h, "keyed", "the new description", |c| {
        c["description"] == "the team's tools"
    })
    .await;
    mcp_reason(&h, "keyed", "Synced").await;
    assert_eq!(
        writes_by(&h, &s.operator),
        [format!(
            "PATCH /api/v2/organizations/{}/mcp-servers/{id}",
            s.organization_id
        )]
    );
    assert_eq!(after["model_intent"], true, "Coder's own field survived");
    assert_eq!(
        (&after["has_api_key_value"], &after["api_key_header"]),
        (&json!(true), &json!("Authorization")),
        "the API key, unchanged and not resent, was kept"
    );
}

#[tokio::test]
async fn adding_an_access_group_keeps_the_groups_already_granted() {
    let h = harness("writes-acl").await;
    let s = setup(&h, true).await;
    let engineers = h.server.add_group(s.organization_id, "engineers").to_string();
    let operators = h.server.add_group(s.organization_id, "operators").to_string();
    let mut spec = mcp_spec(&s.organization);
    spec["access"] = json!({"groups": ["engineers"]});
    create_server(&h, "tools", spec).await;
    mcp_reason(&h, "tools", "Synced").await;
    wait_config(&h, "tools", "engineers have access", |c| {
        c["acl"]["groups"] == json!({&engineers: "read"})
    })
    .await;

    h.server.clear_requests();
    patch_spec(
        &h,
        "tools",
        json!({"access": {"groups": ["engineers", "operators"]}}),
    )
    .await;
    mcp_reason(&h, "tools", "Synced").await;
    let granted = wait_config(&h, "tools", "both groups have access", |c| {
        c["acl"]["groups"].as_object().is_some_and(|g| g.len() == 2)
    })
    .await;
    assert_eq!(
        granted["acl"]["groups"],
        json!({&engineers: "read", &operators: "read"}),
        "the patch that added operators kept engineers"
    );
    let acl_writes: Vec<String> = writes_by(&h, &s.operator)
        .into_iter()
        .filter(|w| w.ends_with("/acl"))
        .collect();
    assert_eq!(acl_writes.len(), 1, "{acl_writes:?}");
}
