//! The CoderWorkspaceProxy controller on the real kube-apiserver and the Coder API test server: the credential-
//! Secret contract, direct mode and bootstrap mode.

use std::time::Duration;

use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use coder_k8s_coder_testserver::Entitlement;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::control_plane::{Harness, harness};
use crate::support::wait_for;

pub(crate) async fn create_proxy(h: &Harness, name: &str, spec: serde_json::Value) {
    let object = CoderWorkspaceProxy::new(name, serde_json::from_value(spec).unwrap());
    h.api::<CoderWorkspaceProxy>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

pub(crate) async fn wait_reason(h: &Harness, name: &str, type_: &str, expected: &str) {
    let api = h.api::<CoderWorkspaceProxy>();
    let mut last = None;
    for _ in 0..300 {
        let proxy = api.get(name).await.unwrap();
        last = proxy
            .status
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == type_))
            .map(|c| (c.status, c.reason));
        if last.as_ref().is_some_and(|(_, r)| r == expected) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("{name}: {type_} never became {expected}; last {last:?}");
}

pub(crate) async fn mark(h: &Harness, secret: &str, origin: &str) {
    let patch = json!({"metadata": {
        "labels": {"coder.com/credential": "true"},
        "annotations": {"coder.com/credential-destinations": origin},
    }});
    h.api::<Secret>()
        .patch(secret, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn direct_mode_uses_only_a_consenting_token_secret() {
    let h = harness("proxy-direct").await;
    h.put_secret("coderworkspaceproxy-token", &[("token", "proxy-id:secret")])
        .await;
    create_proxy(
        &h,
        "coderworkspaceproxy-sample",
        json!({"primaryAccessURL": "https://coder.example.com", "proxySessionTokenSecretRef": {"name": "coderworkspaceproxy-token", "key": "token"}}),
    )
    .await;
    wait_reason(
        &h,
        "coderworkspaceproxy-sample",
        "CredentialsReady",
        "CredentialSecretNotMarked",
    )
    .await;
    let deployments = h.api::<Deployment>();
    assert!(
        deployments
            .get_opt("wsproxy-coderworkspaceproxy-sample")
            .await
            .unwrap()
            .is_none()
    );

    mark(&h, "coderworkspaceproxy-token", "https://coder.example.com").await;
    wait_reason(
        &h,
        "coderworkspaceproxy-sample",
        "CredentialsReady",
        "CredentialsVerified",
    )
    .await;
    wait_for(
        || async {
            deployments
                .get_opt("wsproxy-coderworkspaceproxy-sample")
                .await
                .unwrap()
                .is_some()
        },
        "the Deployment",
    )
    .await;
    h.deployment_ready("wsproxy-coderworkspaceproxy-sample").await;
    wait_reason(
        &h,
        "coderworkspaceproxy-sample",
        "DeploymentReady",
        "MinimumReplicasReady",
    )
    .await;
    let status = h
        .api::<CoderWorkspaceProxy>()
        .get("coderworkspaceproxy-sample")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.phase, Some(coder_k8s_api::shared::WorkloadPhase::Ready));
    assert_eq!(
        status.proxy_token_secret_ref.unwrap().name,
        "coderworkspaceproxy-token"
    );

    // A Ready proxy is not reconciled again with nothing changing (three times the tests' 1 s retry interval).
    let runs = h.metrics.runs("CoderWorkspaceProxy");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.metrics.runs("CoderWorkspaceProxy"),
        runs,
        "a Ready proxy was reconciled at rest"
    );
}

#[tokio::test]
async fn bootstrap_registers_the_proxy_and_owns_its_token() {
    let h = harness("proxy-boot").await;
    h.server.set_entitlement("workspace_proxy", Entitlement::Entitled);
    let admin_token = h.server.mint_token("proxy-admin", &["owner"]).await.unwrap();
    let coder_url = h.server.url().as_str().trim_end_matches('/').to_owned();
    h.put_secret("coder-admin", &[("token", &admin_token)]).await;
    create_proxy(
        &h,
        "east",
        json!({"bootstrap": {"coderURL": coder_url, "credentialsSecretRef": {"name": "coder-admin"}}}),
    )
    .await;

    // The admin credential goes to Coder only when it consents to Coder's origin.
    wait_reason(&h, "east", "CredentialsReady", "CredentialSecretNotMarked").await;
    mark(&h, "coder-admin", "https://other.example.com").await;
    wait_reason(&h, "east", "CredentialsReady", "CredentialDestinationNotListed").await;
    assert!(
        h.server
            .requests()
            .iter()
            .all(|r| !r.path.starts_with("/api/v2/workspaceproxies")),
        "no Coder call before consent"
    );
    mark(&h, "coder-admin", &coder_url).await;
    wait_reason(&h, "east", "ProxyRegistered", "Registered").await;

    let token_secret = h.api::<Secret>().get("east-proxy-token").await.unwrap();
    assert_eq!(
        token_secret.metadata.owner_references.as_ref().unwrap()[0].kind,
        "CoderWorkspaceProxy"
    );
    let first = String::from_utf8(token_secret.data.unwrap()["token"].0.clone()).unwrap();
    assert!(first.contains(':'), "proxy tokens are <id>:<secret>");
    let coder = h.coder(&admin_token);
    let registered = coder.workspace_proxy("east").await.unwrap();
    assert_eq!(registered.name, "east");
    let deployment = h.api::<Deployment>().get("wsproxy-east").await.unwrap();
    let env = deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    assert_eq!(
        env[0].value.as_deref(),
        Some(coder_url.as_str()),
        "primaryAccessURL defaults to bootstrap.coderURL"
    );

    // A lost token Secret: the existing proxy gets a regenerated token, not a second proxy.
    h.api::<Secret>()
        .delete("east-proxy-token", &DeleteParams::default())
        .await
        .unwrap();
    let secrets = h.api::<Secret>();
    wait_for(
        || async {
            secrets
                .get_opt("east-proxy-token")
                .await
                .unwrap()
                .and_then(|s| s.data)
                .is_some_and(|d| d["token"].0 != first.as_bytes())
        },
        "a regenerated token",
    )
    .await;
    assert_eq!(coder.workspace_proxy("east").await.unwrap().id, registered.id);
}

#[tokio::test]
async fn registering_an_existing_proxy_keeps_its_display_name_and_icon() {
    let h = harness("proxy-keep").await;
    h.server.set_entitlement("workspace_proxy", Entitlement::Entitled);
    let admin_token = h.server.mint_token("proxy-admin", &["owner"]).await.unwrap();
    let coder_url = h.server.url().as_str().trim_end_matches('/').to_owned();
    h.put_secret("coder-admin", &[("token", &admin_token)]).await;
    mark(&h, "coder-admin", &coder_url).await;
    create_proxy(
        &h,
        "west",
        json!({"bootstrap": {"coderURL": coder_url, "credentialsSecretRef": {"name": "coder-admin"}}}),
    )
    .await;
    wait_reason(&h, "west", "ProxyRegistered", "Registered").await;
    // An admin sets the display name and icon in Coder; then the token Secret is lost, so the operator registers
    // the proxy again (a PATCH with a new token).
    let coder = h.coder(&admin_token);
    let registered = coder.workspace_proxy("west").await.unwrap();
    let renamed = coder_k8s_coder_client::types::PatchWorkspaceProxy {
        id: registered.id,
        name: "west".to_owned(),
        display_name: "West Europe".to_owned(),
        icon: "/emojis/1f1ea-1f1fa.png".to_owned(),
        regenerate_token: false,
    };
    coder.patch_workspace_proxy(&renamed).await.unwrap();
    let secrets = h.api::<Secret>();
    let first = secrets.get("west-proxy-token").await.unwrap().data.unwrap()["token"]
        .0
        .clone();
    h.server.clear_requests();
    secrets
        .delete("west-proxy-token", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        || async {
            secrets
                .get_opt("west-proxy-token")
                .await
                .unwrap()
                .and_then(|s| s.data)
                .is_some_and(|d| d["token"].0 != first)
        },
        "a regenerated token",
    )
    .await;
    let patches: Vec<_> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path.starts_with("/api/v2/workspaceproxies/"))
        .collect();
    assert_eq!(
        patches.len(),
        1,
        "the existing proxy got a new token: {patches:?}"
    );
    let proxy = coder.workspace_proxy("west").await.unwrap();
    assert_eq!(
        (proxy.display_name.as_str(), proxy.icon_url.as_str()),
        ("West Europe", "/emojis/1f1ea-1f1fa.png")
    );
}

#[tokio::test]
async fn long_names_and_an_empty_image_are_the_go_operators() {
    let h = harness("proxy-long").await;
    h.put_secret("proxy-token", &[("token", "proxy-id:secret")]).await;
    mark(&h, "proxy-token", "https://coder.example.com").await;
    // 60 characters: wsproxy-<first 46>-<FNV-32a of the name>; "p" * 60 hashes to 73896435 (python3).
    let name = "p".repeat(60);
    create_proxy(
        &h,
        &name,
        json!({"image": "", "primaryAccessURL": "https://coder.example.com", "proxySessionTokenSecretRef": {"name": "proxy-token"}}),
    )
    .await;
    let expected = format!("wsproxy-{}-73896435", "p".repeat(46));
    let deployments = h.api::<Deployment>();
    wait_for(
        || async { deployments.get_opt(&expected).await.unwrap().is_some() },
        "the Deployment under the Go operator's name",
    )
    .await;
    let deployment = deployments.get(&expected).await.unwrap();
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some("ghcr.io/coder/coder:latest"));
    let services = h.api::<k8s_openapi::api::core::v1::Service>();
    wait_for(
        || async { services.get_opt(&expected).await.unwrap().is_some() },
        "the Service under the same name",
    )
    .await;
}
