//! The client against the real test server crate (`coder-k8s-coder-testserver`) backed by a real
//! PostgreSQL with Coder's schema; the operator token comes from the operator-access bootstrap.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use coder_k8s_coder_client::types::License;
use coder_k8s_coder_client::types::{
    ArchiveKind, CreateTemplateRequest, CreateTemplateVersionRequest, CreateWorkspaceBuildRequest,
    CreateWorkspaceRequest, JobStatus, Transition, WorkspaceBuildStatus,
};
use coder_k8s_coder_client::{
    ClientOptions, CoderClient, Error, LogStream, Secret, SessionToken, UnavailableReason, ai, found,
};
use coder_k8s_coder_testserver::{Config, Entitlement, Fault, FaultRule, TestServer};
use coder_k8s_operator_access::ensure_operator_access;
use futures::StreamExt;

const OPERATOR: &str = "coder-k8s-operator";

/// A fresh Coder database, the bootstrapped operator token and a running test server.
struct Env {
    db_url: String,
    token: String,
    server: TestServer,
}

async fn fresh_db(tag: &str) -> String {
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    pg.unique_coder_database(&format!("cc_{tag}")).await.unwrap()
}

fn config(db_url: &str) -> Config {
    let mut config = Config::new(db_url);
    for feature in ["external_provisioner_daemons", "workspace_proxy"] {
        config
            .entitlements
            .insert(feature.to_owned(), Entitlement::Entitled);
    }
    config.build_duration = Duration::from_millis(300);
    config
}

async fn env(tag: &str) -> Env {
    let db_url = fresh_db(tag).await;
    let token = ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let server = TestServer::start(config(&db_url)).await.unwrap();
    Env {
        db_url,
        token,
        server,
    }
}

impl Env {
    fn client(&self) -> CoderClient {
        CoderClient::new(self.server.url(), SessionToken::new(self.token.clone())).unwrap()
    }

    fn client_with(&self, options: ClientOptions) -> CoderClient {
        CoderClient::with_options(
            self.server.url(),
            Some(SessionToken::new(self.token.clone())),
            options,
        )
        .unwrap()
    }

    fn fault(&self, method: Option<&str>, path_prefix: &str, fault: Fault, times: Option<u32>) {
        self.server.add_fault(FaultRule {
            method: method.map(str::to_owned),
            path_prefix: path_prefix.to_owned(),
            fault,
            times,
        });
    }
}

#[tokio::test]
async fn bootstrapped_token_authenticates_as_the_operator_owner() {
    let env = env("auth").await;
    let client = env.client();
    let me = client.me().await.unwrap();
    assert_eq!(me.username, OPERATOR);
    assert!(me.has_role("owner"), "{:?}", me.roles);
    let info = client.buildinfo().await.unwrap();
    assert_eq!(info.deployment_id, env.server.deployment_id());
    let default = client.default_organization().await.unwrap();
    assert!(default.is_default);
    let orgs = client.organizations().await.unwrap();
    assert!(orgs.iter().any(|o| o.id == default.id));
    assert_eq!(
        client.organization_by_id(default.id).await.unwrap().name,
        default.name
    );
    assert_eq!(client.organization(&default.name).await.unwrap().id, default.id);
    let entitlements = client.entitlements().await.unwrap();
    assert!(entitlements.is_entitled("external_provisioner_daemons"));
    let recorded = env.server.requests();
    assert!(
        recorded
            .iter()
            .filter(|r| r.path == "/api/v2/users/me")
            .all(|r| r.session_token.as_deref() == Some(env.token.as_str()))
    );
}

#[tokio::test]
async fn cross_origin_redirect_is_refused_and_the_other_server_never_sees_the_token() {
    let env = env("xorigin").await;
    let other = TestServer::start(config(&env.db_url)).await.unwrap();
    env.fault(None, "/api/v2/users/me", Fault::RedirectTo(other.url()), None);
    let err = env.client().me().await.unwrap_err();
    assert!(matches!(err, Error::RedirectRefused { .. }), "{err:?}");
    assert!(!err.is_retryable());
    assert!(
        other.requests().iter().all(|r| r.session_token.is_none()),
        "{:?}",
        other.requests()
    );
    assert!(other.requests().is_empty(), "{:?}", other.requests());
}

#[tokio::test]
async fn same_origin_redirect_is_followed() {
    let env = env("sameorigin").await;
    let prefix = env.server.url();
    env.fault(None, "/api/v2/users/me", Fault::RedirectTo(prefix), Some(1));
    let me = env.client().me().await.unwrap();
    assert_eq!(me.username, OPERATOR);
    let tries: Vec<_> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v2/users/me")
        .collect();
    assert_eq!(tries.len(), 2, "{tries:?}");
    assert_eq!(tries[0].status, 307);
    assert_eq!(tries[1].status, 200);
    assert!(tries.iter().all(|r| r.session_token.is_some()));
}

#[tokio::test]
async fn only_coders_own_404_is_not_found() {
    let env = env("notfound").await;
    let client = env.client();

    env.fault(
        None,
        "/api/v2/workspaceproxies/behind-proxy",
        Fault::ProxyNotFound,
        None,
    );
    let err = client.workspace_proxy("behind-proxy").await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unavailable {
                reason: UnavailableReason::NotCoder404,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());

    env.fault(None, "/api/v2/entitlements", Fault::RouteNotFound, None);
    let err = client.entitlements().await.unwrap_err();
    assert!(!err.is_not_found(), "{err:?}");
    assert_eq!(err.category(), "unavailable");
    assert!(err.is_route_not_found(), "{err:?}");

    let err = client.workspace_proxy("does-not-exist").await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let err = client.organization("no-such-org").await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert!(found(client.organization("no-such-org").await).unwrap().is_none());
}

#[tokio::test]
async fn server_errors_are_unavailable() {
    let env = env("5xx").await;
    env.fault(None, "/api/v2/organizations", Fault::ServerError(503), None);
    let err = env.client().organizations().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unavailable {
                reason: UnavailableReason::ServerError,
                status: Some(503),
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn rate_limit_carries_retry_after() {
    let env = env("ratelimit").await;
    env.fault(
        None,
        "/api/v2/organizations",
        Fault::RateLimited { retry_after_secs: 42 },
        None,
    );
    let err = env.client().organizations().await.unwrap_err();
    assert_eq!(err.category(), "rate_limited");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(42)));
    assert!(err.is_retryable());
}

#[tokio::test]
async fn hostile_retry_after_is_capped_or_ignored_without_a_panic() {
    let env = env("hostile_retry").await;
    let cases = [
        (
            "18446744073709551615",
            Some(coder_k8s_coder_client::error::MAX_RETRY_AFTER),
        ),
        (
            "99999999999999999999999999",
            Some(coder_k8s_coder_client::error::MAX_RETRY_AFTER),
        ),
        (
            "Fri, 31 Dec 9999 23:59:59 GMT",
            Some(coder_k8s_coder_client::error::MAX_RETRY_AFTER),
        ),
        ("Thu, 01 Jan 1970 00:00:00 GMT", Some(Duration::ZERO)),
        ("-1", None),
        ("soon, maybe", None),
    ];
    for (value, expected) in cases {
        env.fault(
            None,
            "/api/v2/organizations",
            Fault::Answer {
                status: 429,
                headers: vec![("Retry-After".to_owned(), value.to_owned())],
                body: serde_json::json!({"message": "You've been rate limited."}),
            },
            Some(1),
        );
        let err = env.client().organizations().await.unwrap_err();
        assert_eq!(err.category(), "rate_limited", "{value}: {err:?}");
        assert_eq!(err.retry_after(), expected, "{value}");
    }
    // The server's own fault with the largest number of seconds.
    env.fault(
        None,
        "/api/v2/organizations",
        Fault::RateLimited {
            retry_after_secs: u64::MAX,
        },
        Some(1),
    );
    let err = env.client().organizations().await.unwrap_err();
    assert_eq!(
        err.retry_after(),
        Some(coder_k8s_coder_client::error::MAX_RETRY_AFTER)
    );
}

#[tokio::test]
async fn credentials_in_an_error_body_are_redacted_and_the_message_bounded() {
    let env = env("error_body").await;
    let echoed = "AbCdEf1234-0123456789abcdefGHIJKL";
    env.fault(
        None,
        "/api/v2/organizations",
        Fault::Answer {
            status: 400,
            headers: vec![],
            body: serde_json::json!({
                "message": format!("cannot reach https://admin:hunter2@db.internal:5432/coder with key {echoed}"),
                "detail": format!("Bearer s3cr3t-bearer {}", "padding ".repeat(100)),
            }),
        },
        Some(1),
    );
    let err = env.client().organizations().await.unwrap_err();
    let shown = format!("{err} {err:?}");
    for leaked in [
        "hunter2",
        "admin:",
        echoed,
        "0123456789abcdefGHIJKL",
        "s3cr3t-bearer",
    ] {
        assert!(!shown.contains(leaked), "{leaked} leaked: {shown}");
    }
    assert!(
        err.message()
            .starts_with("cannot reach https://[redacted]@db.internal:5432/coder with key [redacted]")
    );
    assert!(err.message().chars().count() <= coder_k8s_coder_client::redact::MAX_MESSAGE_CHARS + 1);
}

#[tokio::test]
async fn non_owner_bypass_gets_428_and_is_retried_without_the_header() {
    let env = env("bypass").await;
    let member_token = env.server.mint_token("alice", &[]).await.unwrap();
    let client = CoderClient::new(env.server.url(), SessionToken::new(member_token)).unwrap();
    env.server.clear_requests();
    // Whether a member may create the key does not matter here: both tries must be visible.
    let _ = client
        .create_provisioner_key("default", "alice-key", &BTreeMap::new())
        .await;
    let tries: Vec<_> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(tries.len(), 2, "{tries:?}");
    assert!(tries[0].bypass_ratelimit);
    assert_eq!(tries[0].status, 428);
    assert!(!tries[1].bypass_ratelimit);
    assert_ne!(tries[1].status, 428);

    // The owner's bypass is honoured: one try.
    env.server.clear_requests();
    env.client()
        .create_provisioner_key("default", "owner-key", &BTreeMap::new())
        .await
        .unwrap();
    let tries: Vec<_> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(tries.len(), 1, "{tries:?}");
    assert!(tries[0].bypass_ratelimit);
}

#[tokio::test]
async fn latency_beyond_the_timeout_is_unavailable_in_time() {
    let env = env("timeout").await;
    env.fault(
        None,
        "/api/v2/users/me",
        Fault::Latency(Duration::from_secs(5)),
        None,
    );
    let client = env.client_with(ClientOptions {
        timeout: Duration::from_millis(500),
        ..ClientOptions::default()
    });
    let start = Instant::now();
    let err = client.me().await.unwrap_err();
    let elapsed = start.elapsed();
    assert!(
        matches!(
            err,
            Error::Unavailable {
                reason: UnavailableReason::Timeout,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
}

#[tokio::test]
async fn dropped_connection_is_unavailable() {
    let env = env("drop").await;
    env.fault(None, "/api/v2/buildinfo", Fault::DropConnection, None);
    let err = env.client().buildinfo().await.unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(err.is_retryable());
    assert!(!format!("{err:?} {err}").contains(&env.token));
}

#[tokio::test]
async fn ensure_provisioner_key_reuses_by_name() {
    let env = env("pkey").await;
    let client = env.client();
    let tags = BTreeMap::from([("pool".to_owned(), "gpu".to_owned())]);
    let first = client
        .ensure_provisioner_key("default", "pool-a", &tags)
        .await
        .unwrap();
    assert!(first.created());
    assert_eq!(first.secret.as_ref().unwrap().expose().len(), 43);
    assert_eq!(first.key.tags, tags);
    assert!(!format!("{first:?}").contains(first.secret.as_ref().unwrap().expose()));

    let second = client
        .ensure_provisioner_key("default", "pool-a", &tags)
        .await
        .unwrap();
    assert!(!second.created());
    assert_eq!(second.key.id, first.key.id);
    assert_eq!(env.server.provisioner_keys().len(), 1);

    let listed = client.provisioner_keys("default").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "pool-a");

    client.delete_provisioner_key("default", "pool-a").await.unwrap();
    assert!(env.server.provisioner_keys().is_empty());
    let err = client
        .delete_provisioner_key("default", "pool-a")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

/// A one-file ustar archive (the test support's, as `Bytes`).
fn tar_with(name: &str, content: &[u8]) -> Bytes {
    Bytes::from(coder_k8s_testenv::one_file_tar(name, content))
}

async fn drain(stream: LogStream) -> Vec<coder_k8s_coder_client::types::ProvisionerJobLog> {
    let all: Vec<_> = tokio::time::timeout(Duration::from_secs(30), stream.collect::<Vec<_>>())
        .await
        .expect("the log stream did not end");
    all.into_iter().map(|r| r.expect("log stream error")).collect()
}

#[tokio::test]
async fn template_import_and_workspace_build_logs_follow_to_the_end() {
    let env = env("import").await;
    let client = env.client();
    let archive = tar_with("main.tf", b"terraform {}\n");
    let file = client
        .upload_file(ArchiveKind::Tar, archive.clone())
        .await
        .unwrap();
    assert!(file.created);
    let again = client.upload_file(ArchiveKind::Tar, archive).await.unwrap();
    assert_eq!(again.id, file.id);

    let version = client
        .create_template_version("default", &CreateTemplateVersionRequest::terraform(file.id))
        .await
        .unwrap();
    let logs = drain(client.follow_template_version_logs(version.id, 0).await.unwrap()).await;
    assert!(!logs.is_empty());
    let version = client.template_version(version.id).await.unwrap();
    assert_eq!(version.job.status, JobStatus::Succeeded);
    let snapshot = client.template_version_logs(version.id, None).await.unwrap();
    assert_eq!(snapshot.len(), logs.len());

    let template = client
        .create_template(
            "default",
            &CreateTemplateRequest {
                name: "tpl".to_owned(),
                template_version_id: version.id,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(template.active_version_id, version.id);
    assert_eq!(
        client.template_by_name("default", "tpl").await.unwrap().id,
        template.id
    );
    assert!(
        client
            .templates("default")
            .await
            .unwrap()
            .iter()
            .any(|t| t.id == template.id)
    );
    let versions = client.template_versions(template.id, true).await.unwrap();
    assert!(versions.iter().any(|v| v.id == version.id));

    let workspace = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: "ws1".to_owned(),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap();
    let build = workspace.latest_build.clone();
    let logs = drain(client.follow_workspace_build_logs(build.id, 0).await.unwrap()).await;
    assert!(!logs.is_empty());
    let build = client.workspace_build(build.id).await.unwrap();
    assert_eq!(build.status, WorkspaceBuildStatus::Running);
    let snapshot = client.workspace_build_logs(build.id, None).await.unwrap();
    assert_eq!(snapshot.len(), logs.len());
    let last = logs.last().unwrap().id;
    assert!(
        client
            .workspace_build_logs(build.id, Some(last))
            .await
            .unwrap()
            .is_empty()
    );

    let fetched = client.workspace_by_owner_and_name("me", "ws1").await.unwrap();
    assert_eq!(fetched.id, workspace.id);
    assert_eq!(client.workspace(workspace.id).await.unwrap().name, "ws1");
    let page = client.workspaces("owner:me", 0, 0).await.unwrap();
    assert!(page.workspaces.iter().any(|w| w.id == workspace.id));

    let stop = client
        .create_workspace_build(
            workspace.id,
            &CreateWorkspaceBuildRequest::transition(Transition::Stop),
        )
        .await
        .unwrap();
    let _ = drain(client.follow_workspace_build_logs(stop.id, 0).await.unwrap()).await;
    let stop = client.workspace_build(stop.id).await.unwrap();
    assert_eq!(stop.status, WorkspaceBuildStatus::Stopped);
    let builds = client.workspace_builds(workspace.id).await.unwrap();
    assert_eq!(builds.len(), 2);
}

#[tokio::test]
async fn workspace_proxy_lifecycle_hides_the_proxy_token() {
    let env = env("proxy").await;
    let client = env.client();
    let created = client
        .create_workspace_proxy(&coder_k8s_coder_client::types::CreateWorkspaceProxyRequest {
            name: "eu".to_owned(),
            display_name: "EU".to_owned(),
            icon: "/emojis/1f1ea-1f1fa.png".to_owned(),
        })
        .await
        .unwrap();
    assert!(!created.proxy_token.is_empty());
    assert!(!format!("{created:?}").contains(created.proxy_token.expose()));
    let got = client.workspace_proxy("eu").await.unwrap();
    assert_eq!(got.id, created.proxy.id);
    let patched = client
        .patch_workspace_proxy(&coder_k8s_coder_client::types::PatchWorkspaceProxy {
            id: got.id,
            name: "eu".to_owned(),
            display_name: "Europe".to_owned(),
            icon: "/emojis/1f1ea-1f1fa.png".to_owned(),
            regenerate_token: true,
        })
        .await
        .unwrap();
    assert!(!patched.proxy_token.is_empty());
    assert_ne!(patched.proxy_token, created.proxy_token);
    client.delete_workspace_proxy("eu").await.unwrap();
    assert!(client.workspace_proxy("eu").await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn licenses_upload_list_and_duplicate() {
    let db_url = fresh_db("license").await;
    let token = ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let mut cfg = config(&db_url);
    cfg.accepted_licenses = vec!["header.e30.sig".to_owned()];
    let server = TestServer::start(cfg).await.unwrap();
    let client = CoderClient::new(server.url(), SessionToken::new(token)).unwrap();
    assert!(client.licenses().await.unwrap().is_empty());
    let jwt = Secret::new("header.e30.sig");
    let license = client.upload_license(&jwt).await.unwrap();
    assert_eq!(client.licenses().await.unwrap()[0].id, license.id);
    let dup = client.upload_license(&jwt).await.unwrap_err();
    assert!(License::is_duplicate_message(dup.message()), "{dup:?}");
    assert!(!format!("{dup:?} {dup}").contains("header.e30.sig"));
    let bad = client
        .upload_license(&Secret::new("not.accepted.jwt"))
        .await
        .unwrap_err();
    assert!(matches!(bad, Error::Rejected { status: 400, .. }), "{bad:?}");
}

#[tokio::test]
async fn groups_of_the_default_organization() {
    let env = env("groups").await;
    env.server.set_entitlement("template_rbac", Entitlement::Entitled);
    let client = env.client();
    let org = client.default_organization().await.unwrap();
    let groups = client.groups("default").await.unwrap();
    assert!(!groups.is_empty(), "every organization has its Everyone group");
    assert!(groups.iter().all(|g| g.organization_id == org.id), "{groups:?}");
}

#[tokio::test]
async fn ai_routes_round_trip() {
    let env = env("ai").await;
    env.server.set_entitlement("aibridge", Entitlement::Entitled);
    let client = env.client();

    let key = client.create_ai_gateway_key("ci-key").await.unwrap();
    assert!(!key.key.is_empty());
    assert!(!format!("{key:?}").contains(key.key.expose()));
    let keys = client.ai_gateway_keys().await.unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].id, key.id);
    client.delete_ai_gateway_key(key.id).await.unwrap();
    assert!(client.ai_gateway_keys().await.unwrap().is_empty());

    let provider = client
        .create_ai_provider(&ai::CreateAiProviderRequest {
            provider_type: "openai".to_owned(),
            name: "openai-main".to_owned(),
            enabled: true,
            base_url: "https://api.openai.com/v1".to_owned(),
            api_keys: Some(vec![Secret::new("sk-upstream-1234")]),
            ..ai::CreateAiProviderRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(provider.api_keys.len(), 1);
    assert!(!provider.api_keys[0].masked.contains("sk-upstream"));
    assert_eq!(client.ai_provider("openai-main").await.unwrap().id, provider.id);
    let patched = client
        .patch_ai_provider(
            "openai-main",
            &ai::PatchAiProviderRequest {
                enabled: Some(false),
                ..ai::PatchAiProviderRequest::default()
            },
        )
        .await
        .unwrap();
    assert!(!patched.enabled);
    assert_eq!(client.ai_providers().await.unwrap().len(), 1);
    client.delete_ai_provider("openai-main").await.unwrap();
    assert!(
        client
            .ai_provider("openai-main")
            .await
            .unwrap_err()
            .is_not_found()
    );

    let mcp = client
        .create_mcp_server_config(
            "default",
            &ai::McpServerConfigRequest {
                display_name: Some("Docs".to_owned()),
                slug: Some("docs".to_owned()),
                transport: Some("streamable_http".to_owned()),
                url: Some("https://mcp.example.com/mcp".to_owned()),
                auth_type: Some("api_key".to_owned()),
                api_key_header: Some("X-Api-Key".to_owned()),
                api_key_value: Some(Secret::new("mcp-secret-value")),
                ..ai::McpServerConfigRequest::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(mcp.slug, "docs");
    let patched = client
        .patch_mcp_server_config(
            "default",
            mcp.id,
            &ai::McpServerConfigRequest {
                enabled: Some(true),
                ..ai::McpServerConfigRequest::default()
            },
        )
        .await
        .unwrap();
    assert!(patched.enabled);
    assert_eq!(client.mcp_server_configs("default").await.unwrap().len(), 1);
    client.delete_mcp_server_config("default", mcp.id).await.unwrap();
    assert!(client.mcp_server_configs("default").await.unwrap().is_empty());
    let recorded = env.server.requests();
    assert!(recorded.iter().any(|r| r.path == "/api/v2/ai-gateway/keys"));
}

#[tokio::test]
async fn service_host_resolves_to_an_override_address() {
    // The operator outside the cluster: the in-cluster URL stays, only address resolution changes.
    let env = env("resolve").await;
    let port = env.server.url().port().unwrap();
    let host = "coder.team.svc.cluster.local";
    let url: url::Url = format!("http://{host}:{port}").parse().unwrap();
    let options = ClientOptions {
        resolve_overrides: vec![(host.to_owned(), std::net::Ipv4Addr::LOCALHOST.into())],
        ..ClientOptions::default()
    };
    let client =
        CoderClient::with_options(url.clone(), Some(SessionToken::new(env.token.clone())), options).unwrap();
    assert_eq!(client.me().await.unwrap().username, OPERATOR);
    // Without the override the host does not resolve here.
    let plain = CoderClient::new(url, SessionToken::new(env.token.clone())).unwrap();
    assert!(matches!(plain.me().await.unwrap_err(), Error::Unavailable { .. }));
}
