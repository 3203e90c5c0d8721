//! The `coderworkspaces/log` and `codertemplates/promote` subresources against real backends: in-process through
//! the server's router over a Coder API test server (every rule, message and limit, with small limits), through the
//! real kube-apiserver with the real kubectl, and the log of a build on a real Coder.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use coder_k8s_aggregated_apiserver::coder::workspace_log::{self, LogLimits};
use coder_k8s_aggregated_apiserver::coder::{StaticBackend, StaticProvider, promote, templates, workspaces};
use coder_k8s_aggregated_apiserver::generic::server::ServerSettings;
use coder_k8s_aggregated_apiserver::generic::{
    ApiError, ApiServer, Attributes, Authenticator, Authorizer, Decision, PeerCertificates, Registry,
    UserInfo,
};
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition, WorkspaceBuildStatus};
use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::logs::ProvisionerJobLog;
use coder_k8s_coder_client::types::template_versions::{CreateTemplateVersionRequest, TemplateVersion};
use coder_k8s_coder_client::types::templates::{CreateTemplateRequest, Template};
use coder_k8s_coder_client::types::workspaces::{CreateWorkspaceRequest, Workspace};
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{BuildOutcome, Config, Fault, FaultRule, RecordedRequest, TestServer};
use coder_k8s_control_plane_access::ClientSettings;
use futures::StreamExt;
use serde_json::{Value, json};
use tower::ServiceExt;
use uuid::Uuid;

const NAMESPACE: &str = "coder-ns";
const OPERATOR: &str = "coder-k8s-operator";
const API: &str = "/apis/aggregation.coder.com/v1alpha1";

// ---------------------------------------------------------------------------------------------------------------
// Fixtures

/// A Coder test server with one imported template (`docker`) and one workspace (`dev`) whose first build finished.
struct Coder {
    server: TestServer,
    token: String,
    client: CoderClient,
    organization: String,
    template: Template,
    workspace: Workspace,
}

impl Coder {
    fn workspace_name(&self) -> String {
        format!("{}.{OPERATOR}.dev", self.organization)
    }

    fn template_name(&self) -> String {
        format!("{}.docker", self.organization)
    }

    fn provider(&self, namespace: &str) -> Arc<StaticProvider> {
        let backend = StaticBackend {
            url: self.server.url(),
            token: self.token.clone(),
            namespace: namespace.to_owned(),
        };
        let settings = ClientSettings {
            timeout: Duration::from_secs(10),
            service_address_override: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        };
        Arc::new(StaticProvider::new(&backend, &settings).unwrap())
    }

    /// A new version of `template` (imported; its outcome is the server's current build outcome).
    async fn version(&self, template: Option<Uuid>, name: &str) -> TemplateVersion {
        let file = self
            .client
            .upload_file(ArchiveKind::Tar, tar_with("main.tf", name.as_bytes()))
            .await
            .unwrap();
        let mut request = CreateTemplateVersionRequest::terraform(file.id);
        request.name = name.to_owned();
        request.template_id = template;
        let version = self
            .client
            .create_template_version(&self.organization, &request)
            .await
            .unwrap();
        eventually("the import", async || {
            let v = self.client.template_version(version.id).await.unwrap();
            v.job.status.is_terminal().then_some(v)
        })
        .await
    }

    async fn active_version(&self) -> Uuid {
        self.client
            .template(self.template.id)
            .await
            .unwrap()
            .active_version_id
    }

    /// Requests recorded since the last clear, optionally only those with `method`.
    fn recorded(&self, method: Option<&str>) -> Vec<RecordedRequest> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| method.is_none_or(|m| r.method == m))
            .collect()
    }
}

async fn fresh_db(tag: &str) -> String {
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    pg.unique_coder_database(&format!("aggsub_{tag}")).await.unwrap()
}

/// A one-file ustar archive (the test support's, as `Bytes`).
fn tar_with(name: &str, content: &[u8]) -> Bytes {
    Bytes::from(coder_k8s_testenv::one_file_tar(name, content))
}

async fn eventually<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..600 {
        if let Some(value) = probe().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// A test server whose jobs run for `build_duration`, with the template `docker` and the workspace `dev`.
async fn coder(tag: &str, build_duration: Duration) -> Coder {
    coder_k8s_coder_client::install_ring_provider();
    let db_url = fresh_db(tag).await;
    let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let mut config = Config::new(&db_url);
    config.build_duration = build_duration;
    let server = TestServer::start(config).await.unwrap();
    let client = CoderClient::new(server.url(), SessionToken::new(token.clone())).unwrap();
    let organization = client.default_organization().await.unwrap().name;
    let mut coder = Coder {
        server,
        token,
        client,
        organization,
        template: Template::default(),
        workspace: Workspace::default(),
    };
    let version = coder.version(None, "v1").await;
    assert_eq!(version.job.status, JobStatus::Succeeded);
    coder.template = coder
        .client
        .create_template(
            &coder.organization,
            &CreateTemplateRequest {
                name: "docker".to_owned(),
                template_version_id: version.id,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap();
    let created = coder
        .client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(coder.template.id),
                name: "dev".to_owned(),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap();
    coder.workspace = eventually("the first build", async || {
        let w = coder.client.workspace(created.id).await.unwrap();
        (w.latest_build.status == WorkspaceBuildStatus::Running).then_some(w)
    })
    .await;
    coder
}

/// Users from the `x-test-user` header.
struct HeaderAuthenticator;

#[async_trait]
impl Authenticator for HeaderAuthenticator {
    async fn authenticate(
        &self,
        _peer: Option<&PeerCertificates>,
        headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, ApiError> {
        Ok(headers
            .get("x-test-user")
            .and_then(|v| v.to_str().ok())
            .map(|name| UserInfo {
                name: name.to_owned(),
                ..Default::default()
            }))
    }
}

struct AllowAll;

#[async_trait]
impl Authorizer for AllowAll {
    async fn authorize(&self, _attributes: &Attributes) -> Result<Decision, ApiError> {
        Ok(Decision::Allow)
    }
}

/// `coderworkspaces` with `log` and `codertemplates` with `promote`, attached as the lead attaches them.
fn registry(provider: Arc<StaticProvider>, limits: LogLimits) -> Registry {
    let mut workspaces = workspaces::resource(provider.clone());
    workspaces
        .subresources
        .push(workspace_log::subresource_with(provider.clone(), limits).unwrap());
    let mut templates = templates::resource(provider.clone());
    templates.subresources.push(promote::subresource(provider));
    Registry {
        group: "aggregation.coder.com",
        version: "v1alpha1",
        resources: vec![workspaces, templates],
    }
}

/// The in-process server: the router a served process uses, with a header authenticator.
struct Api {
    router: axum::Router,
}

impl Api {
    fn new(coder: &Coder, limits: LogLimits) -> Self {
        let server = ApiServer {
            registry: Arc::new(registry(coder.provider(NAMESPACE), limits)),
            authenticator: Arc::new(HeaderAuthenticator),
            authorizer: Arc::new(AllowAll),
            ready: Arc::new(AtomicBool::new(true)),
            settings: ServerSettings::default(),
        };
        Self {
            router: server.router(),
        }
    }

    async fn open(
        &self,
        method: Method,
        path: &str,
        user: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Response {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header("x-test-user", user);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Body::from(body.to_owned())).unwrap();
        match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Collected {
        collect(self.open(Method::GET, path, "alice", headers, "").await).await
    }

    async fn post(&self, path: &str, body: &Value) -> Collected {
        let headers = [("content-type", "application/json")];
        collect(
            self.open(Method::POST, path, "alice", &headers, &body.to_string())
                .await,
        )
        .await
    }
}

struct Collected {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Collected {
    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("UTF-8")
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    fn message(&self) -> String {
        self.json()["message"].as_str().unwrap_or_default().to_owned()
    }

    fn warnings(&self) -> Vec<String> {
        self.headers
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }
}

async fn collect(response: Response) -> Collected {
    let status = response.status();
    let headers = response.headers().clone();
    let body = tokio::time::timeout(
        Duration::from_secs(30),
        axum::body::to_bytes(response.into_body(), usize::MAX),
    )
    .await
    .expect("the body ends within 30 s")
    .expect("a complete body")
    .to_vec();
    Collected {
        status,
        headers,
        body,
    }
}

fn log_path(name: &str) -> String {
    format!("{API}/namespaces/{NAMESPACE}/coderworkspaces/{name}/log")
}

fn promote_path(name: &str) -> String {
    format!("{API}/namespaces/{NAMESPACE}/codertemplates/{name}/promote")
}

/// Coder's text form of `logs`, one line each, as Go's `ProvisionerJobLog.Text()` prints them.
fn rendered(logs: &[ProvisionerJobLog]) -> String {
    logs.iter()
        .map(|l| {
            let time: k8s_openapi::jiff::Timestamp = l.created_at.parse().unwrap();
            format!(
                "{} [{}] [{}|{}] {}\n",
                time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                l.log_level,
                l.log_source,
                l.stage,
                l.output
            )
        })
        .collect()
}

fn promotion(version: Uuid) -> Value {
    json!({"apiVersion": "aggregation.coder.com/v1alpha1", "kind": "CoderTemplateVersionPromotion",
           "spec": {"versionID": version.to_string()}})
}

fn small_limits() -> LogLimits {
    LogLimits {
        max_open: 3,
        max_open_per_user: 2,
        read_time: Duration::from_secs(5),
        write_time: Duration::from_secs(5),
        ..LogLimits::default()
    }
}

/// Adds `n` lines of about 100 bytes to the workspace's latest build.
fn grow_log(coder: &Coder, n: usize) {
    let outputs: Vec<String> = (0..n).map(|i| format!("{i:05} {}", "x".repeat(90))).collect();
    assert!(
        coder
            .server
            .append_build_logs(coder.workspace.latest_build.id, "info", "Applying", &outputs)
    );
}

// ---------------------------------------------------------------------------------------------------------------
// log

#[tokio::test]
async fn log_is_the_latest_build_log_in_coders_text_form() {
    let coder = coder("text", Duration::from_millis(200)).await;
    let api = Api::new(&coder, LogLimits::default());
    let logs = coder
        .client
        .workspace_build_logs(coder.workspace.latest_build.id, None)
        .await
        .unwrap();
    assert!(logs.len() > 3, "{logs:?}");

    let answer = api
        .get(&format!("{}?tailLines=3", log_path(&coder.workspace_name())), &[])
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(answer.text(), rendered(&logs), "unknown parameters are ignored");
    assert!(answer.warnings().is_empty());
    let first = answer.text().lines().next().unwrap().to_owned();
    let (time, rest) = first.split_once(' ').unwrap();
    assert!(
        time.len() == 20 && time.ends_with('Z') && !time.contains('.'),
        "{first}"
    );
    assert!(
        rest.starts_with("[info] [provisioner_daemon|Setting up]"),
        "{first}"
    );

    let cut = api
        .get(
            &format!("{}?limitBytes=30", log_path(&coder.workspace_name())),
            &[],
        )
        .await;
    assert_eq!(cut.status, 200);
    assert_eq!(cut.body, rendered(&logs).as_bytes()[..30]);
    assert!(cut.warnings().is_empty(), "the caller's own limit has no warning");

    let wide_accept = api
        .get(
            &log_path(&coder.workspace_name()),
            &[("accept", "application/json, */*")],
        )
        .await;
    assert_eq!(wide_accept.status, 200);
}

#[tokio::test]
async fn bad_log_requests_are_refused_before_any_coder_call() {
    let coder = coder("badlog", Duration::from_millis(200)).await;
    let api = Api::new(&coder, LogLimits::default());
    let path = log_path(&coder.workspace_name());
    coder.server.clear_requests();

    let zero = api.get(&format!("{path}?limitBytes=0"), &[]).await;
    assert_eq!(
        (zero.status, zero.json()["reason"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("Invalid"))
    );
    assert_eq!(
        zero.message(),
        format!(
            "CoderWorkspaceLogOptions.aggregation.coder.com \"{}\" is invalid: limitBytes: Invalid value: 0: must be greater than 0",
            coder.workspace_name()
        )
    );
    assert_eq!(api.get(&format!("{path}?limitBytes=-1"), &[]).await.status, 422);
    assert_eq!(api.get(&format!("{path}?limitBytes=ten"), &[]).await.status, 400);
    assert_eq!(api.get(&format!("{path}?follow=perhaps"), &[]).await.status, 400);
    let text_only = api.get(&path, &[("accept", "text/plain")]).await;
    assert_eq!(
        text_only.status,
        StatusCode::NOT_ACCEPTABLE,
        "{}",
        text_only.text()
    );
    let upgrade = api
        .get(&path, &[("connection", "Upgrade"), ("upgrade", "websocket")])
        .await;
    assert_eq!(upgrade.status, 400);
    assert!(upgrade.message().contains("upgrade"), "{}", upgrade.message());
    let malformed_name = api.get(&log_path("acme.dev"), &[]).await;
    assert_eq!(malformed_name.status, 400);
    assert!(
        coder.recorded(None).is_empty(),
        "refused requests reached Coder: {:?}",
        coder.recorded(None)
    );

    // Names are checked against Coder before the log is read.
    let alias = api.get(&log_path(&format!("default.{OPERATOR}.dev")), &[]).await;
    assert_eq!(alias.status, 400, "{}", alias.text());
    assert!(
        alias.message().contains(&coder.workspace_name()),
        "{}",
        alias.message()
    );
    let cased = api
        .get(&log_path(&format!("{}.{OPERATOR}.DEV", coder.organization)), &[])
        .await;
    assert_eq!(cased.status, 400);
    let unknown = api.get(&log_path(&format!("nowhere.{OPERATOR}.dev")), &[]).await;
    assert_eq!(unknown.status, 404);
    let missing = api
        .get(&log_path(&format!("{}.{OPERATOR}.gone", coder.organization)), &[])
        .await;
    assert_eq!(missing.status, 404);
    assert!(
        !coder
            .recorded(None)
            .iter()
            .any(|r| r.path.starts_with("/api/v2/workspacebuilds/")),
        "a log was read for a refused name"
    );
}

#[tokio::test]
async fn a_log_cut_by_a_server_limit_says_so_in_a_warning() {
    let coder = coder("cut", Duration::from_millis(200)).await;
    grow_log(&coder, 200);
    let logs = coder
        .client
        .workspace_build_logs(coder.workspace.latest_build.id, None)
        .await
        .unwrap();
    let full = rendered(&logs);
    let path = log_path(&coder.workspace_name());

    let response_capped = Api::new(
        &coder,
        LogLimits {
            max_response_bytes: 4096,
            ..LogLimits::default()
        },
    );
    let answer = response_capped.get(&path, &[]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, full.as_bytes()[..4096]);
    assert_eq!(
        answer.warnings(),
        ["299 - \"build log truncated at the server limit of 4096 bytes\""]
    );
    let asked_more = response_capped
        .get(&format!("{path}?limitBytes=100000"), &[])
        .await;
    assert_eq!(asked_more.body.len(), 4096);
    assert_eq!(asked_more.warnings().len(), 1, "the server's limit still warns");

    let read_capped = Api::new(
        &coder,
        LogLimits {
            max_read_bytes: 8192,
            ..LogLimits::default()
        },
    );
    let answer = read_capped.get(&path, &[]).await;
    assert_eq!(answer.status, 200);
    let text = answer.text();
    assert!(
        !text.is_empty() && full.starts_with(&text) && text.len() < full.len() && text.ends_with('\n'),
        "the complete entries read: {} of {} bytes",
        text.len(),
        full.len()
    );
    assert_eq!(
        answer.warnings(),
        ["299 - \"build log truncated: Coder returned more than the server read limit of 8192 bytes\""]
    );
}

#[tokio::test]
async fn open_log_requests_are_limited_per_user_and_per_server_without_coder_calls() {
    let coder = coder("slots", Duration::from_millis(200)).await;
    // Larger than what an unread answer buffers, so an unread answer keeps its slot.
    grow_log(&coder, 2000);
    let api = Api::new(&coder, small_limits());
    let path = log_path(&coder.workspace_name());
    let alice_1 = api.open(Method::GET, &path, "alice", &[], "").await;
    let alice_2 = api.open(Method::GET, &path, "alice", &[], "").await;
    assert_eq!(
        (alice_1.status(), alice_2.status()),
        (StatusCode::OK, StatusCode::OK)
    );

    coder.server.clear_requests();
    let refused = collect(api.open(Method::GET, &path, "alice", &[], "").await).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers["retry-after"], "5");
    assert_eq!(
        refused.message(),
        "too many open coderworkspaces/log requests for this user (limit 2); close one or retry later"
    );
    assert!(coder.recorded(None).is_empty(), "{:?}", coder.recorded(None));

    let bob = api.open(Method::GET, &path, "bob", &[], "").await;
    assert_eq!(bob.status(), StatusCode::OK);
    coder.server.clear_requests();
    let full = collect(api.open(Method::GET, &path, "carol", &[], "").await).await;
    assert_eq!(full.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(full.headers["retry-after"], "5");
    assert_eq!(
        full.message(),
        "too many open coderworkspaces/log requests on this server; retry later"
    );
    assert!(coder.recorded(None).is_empty(), "{:?}", coder.recorded(None));

    // Reading an answer to its end frees its slot.
    let whole = collect(alice_1).await;
    assert_eq!(whole.status, 200);
    assert!(whole.body.len() > 200_000, "{}", whole.body.len());
    let again = eventually("alice's slot is free", async || {
        let answer = collect(api.open(Method::GET, &path, "alice", &[], "").await).await;
        (answer.status == StatusCode::OK).then_some(answer)
    })
    .await;
    assert_eq!(again.body, whole.body);
    drop((alice_2, bob));
}

#[tokio::test]
async fn an_answer_not_read_within_the_write_time_is_broken_and_frees_its_slot() {
    let coder = coder("write", Duration::from_millis(200)).await;
    grow_log(&coder, 2000);
    let limits = LogLimits {
        max_open: 1,
        max_open_per_user: 1,
        read_time: Duration::from_secs(1),
        write_time: Duration::from_secs(2),
        ..LogLimits::default()
    };
    let api = Api::new(&coder, limits);
    let path = log_path(&coder.workspace_name());
    let stalled = api.open(Method::GET, &path, "alice", &[], "").await;
    assert_eq!(stalled.status(), StatusCode::OK);
    let busy = collect(api.open(Method::GET, &path, "bob", &[], "").await).await;
    assert_eq!(busy.status, StatusCode::TOO_MANY_REQUESTS);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let late = tokio::time::timeout(
        Duration::from_secs(10),
        axum::body::to_bytes(stalled.into_body(), usize::MAX),
    )
    .await
    .expect("the stalled answer ends");
    assert!(
        late.is_err(),
        "an answer cut by the write time must not look complete"
    );
    let next = collect(api.open(Method::GET, &path, "bob", &[], "").await).await;
    assert_eq!(
        next.status,
        StatusCode::OK,
        "the slot was freed at the write time"
    );
}

#[tokio::test]
async fn coder_slower_than_the_read_time_is_a_504() {
    let coder = coder("slow", Duration::from_millis(200)).await;
    let api = Api::new(
        &coder,
        LogLimits {
            read_time: Duration::from_secs(1),
            write_time: Duration::from_secs(1),
            ..LogLimits::default()
        },
    );
    coder.server.add_fault(FaultRule {
        method: Some("GET".to_owned()),
        path_prefix: "/api/v2/workspacebuilds/".to_owned(),
        fault: Fault::Latency(Duration::from_secs(4)),
        times: None,
    });
    let started = std::time::Instant::now();
    let answer = api.get(&log_path(&coder.workspace_name()), &[]).await;
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT, "{}", answer.text());
    assert_eq!(
        answer.message(),
        "Timeout: reading the build log from Coder timed out"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(!answer.text().contains("127.0.0.1"), "{}", answer.text());
    coder.server.clear_faults();
    assert_eq!(api.get(&log_path(&coder.workspace_name()), &[]).await.status, 200);
}

/// Starts a stop build of the workspace and returns its ID.
async fn stop_build(coder: &Coder) -> Uuid {
    coder
        .client
        .create_workspace_build(
            coder.workspace.id,
            &CreateWorkspaceBuildRequest::transition(Transition::Stop),
        )
        .await
        .unwrap()
        .id
}

#[tokio::test]
async fn follow_streams_the_build_until_it_ends() {
    let coder = coder("follow", Duration::from_millis(1500)).await;
    let api = Api::new(&coder, LogLimits::default());
    let build = stop_build(&coder).await;
    let response = api
        .open(
            Method::GET,
            &format!("{}?follow", log_path(&coder.workspace_name())),
            "alice",
            &[],
            "",
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body().into_data_stream();
    let first = tokio::time::timeout(Duration::from_secs(10), body.next())
        .await
        .expect("a first chunk")
        .expect("not the end")
        .expect("no error");
    let status_at_first_chunk = coder.client.workspace_build(build).await.unwrap().job.status;
    assert!(
        !status_at_first_chunk.is_terminal(),
        "the first chunk came while the build ran: {status_at_first_chunk:?}"
    );
    let mut text = first.to_vec();
    let rest = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(chunk) = body.next().await {
            text.extend_from_slice(&chunk.expect("no error"));
        }
    })
    .await;
    assert!(rest.is_ok(), "the stream ends when the build ends");
    let done = coder.client.workspace_build(build).await.unwrap();
    assert!(done.job.status.is_terminal(), "{:?}", done.job.status);
    let logs = coder.client.workspace_build_logs(build, None).await.unwrap();
    assert_eq!(String::from_utf8(text).unwrap(), rendered(&logs));
    assert!(
        rendered(&logs).contains("|Cleaning Up]"),
        "the entry logged at the end"
    );
}

#[tokio::test]
async fn follow_ends_at_its_read_time_and_at_the_callers_limit() {
    let coder = coder("followcut", Duration::from_millis(1500)).await;
    let api = Api::new(
        &coder,
        LogLimits {
            follow_read_time: Duration::from_millis(400),
            follow_write_time: Duration::from_secs(5),
            ..LogLimits::default()
        },
    );
    let build = stop_build(&coder).await;
    let started = std::time::Instant::now();
    let answer = api
        .get(&format!("{}?follow=true", log_path(&coder.workspace_name())), &[])
        .await;
    assert_eq!(answer.status, 200);
    assert!(
        started.elapsed() < Duration::from_millis(1200),
        "{:?}",
        started.elapsed()
    );
    let job = coder.client.workspace_build(build).await.unwrap().job.status;
    assert!(!job.is_terminal(), "the stream ended before the build: {job:?}");
    assert!(!answer.text().contains("|Cleaning Up]"), "{}", answer.text());
    assert!(
        answer.warnings().is_empty(),
        "no warning for a cut in the live part"
    );

    let limited = Api::new(&coder, LogLimits::default())
        .get(
            &format!("{}?follow&limitBytes=20", log_path(&coder.workspace_name())),
            &[],
        )
        .await;
    assert_eq!((limited.status, limited.body.len()), (StatusCode::OK, 20));
}

// ---------------------------------------------------------------------------------------------------------------
// promote

/// The test server with a second succeeded version `v2` of `docker`.
async fn promotable() -> (Coder, Api, TemplateVersion) {
    let coder = coder("promote", Duration::from_millis(100)).await;
    let v2 = coder.version(Some(coder.template.id), "v2").await;
    assert_eq!(v2.job.status, JobStatus::Succeeded);
    let api = Api::new(&coder, LogLimits::default());
    (coder, api, v2)
}

#[tokio::test]
async fn promote_activates_a_version_once_and_reports_it() {
    let (coder, api, v2) = promotable().await;
    let previous = coder.active_version().await;
    let path = promote_path(&coder.template_name());

    coder.server.clear_requests();
    let dry = api.post(&format!("{path}?dryRun=All"), &promotion(v2.id)).await;
    assert_eq!(dry.status, StatusCode::CREATED, "{}", dry.text());
    assert_eq!(dry.json()["status"]["result"], "WouldPromote");
    assert_eq!(dry.json()["status"]["activeVersionID"], previous.to_string());
    assert!(coder.recorded(Some("PATCH")).is_empty());
    assert_eq!(coder.active_version().await, previous);

    let promoted = api.post(&path, &promotion(v2.id)).await;
    assert_eq!(promoted.status, StatusCode::CREATED, "{}", promoted.text());
    let body = promoted.json();
    assert_eq!(body["kind"], "CoderTemplateVersionPromotion");
    assert_eq!(body["metadata"]["name"], coder.template_name());
    assert_eq!(body["metadata"]["namespace"], NAMESPACE);
    assert_eq!(body["spec"]["versionID"], v2.id.to_string());
    assert_eq!(body["status"]["result"], "Promoted");
    assert_eq!(body["status"]["previousActiveVersionID"], previous.to_string());
    assert_eq!(body["status"]["activeVersionID"], v2.id.to_string());
    assert_eq!(coder.active_version().await, v2.id);
    assert_eq!(coder.recorded(Some("PATCH")).len(), 1);

    coder.server.clear_requests();
    let again = api.post(&path, &promotion(v2.id)).await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.json()["status"]["result"], "AlreadyActive");
    assert!(
        coder.recorded(Some("PATCH")).is_empty(),
        "an active version gets no write"
    );
}

#[tokio::test]
async fn promote_refuses_what_cannot_be_promoted_without_a_write() {
    let (coder, api, _v2) = promotable().await;
    let path = promote_path(&coder.template_name());
    let name = coder.template_name();
    let other = coder.version(None, "elsewhere").await;
    coder
        .client
        .create_template(
            &coder.organization,
            &CreateTemplateRequest {
                name: "other".to_owned(),
                template_version_id: other.id,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap();
    let archived = coder.version(Some(coder.template.id), "old").await;
    coder.client.archive_template_version(archived.id).await.unwrap();
    coder.server.set_build_outcome(BuildOutcome::Fail);
    let failed = coder.version(Some(coder.template.id), "broken").await;
    coder.server.set_build_outcome(BuildOutcome::Succeed);
    coder.server.clear_requests();

    let not_ours = format!("spec.versionID is not a version of template {name:?}");
    for version in [Uuid::new_v4(), other.id] {
        let answer = api.post(&path, &promotion(version)).await;
        assert_eq!(
            (answer.status, answer.message()),
            (StatusCode::BAD_REQUEST, not_ours.clone())
        );
    }
    let answer = api.post(&path, &promotion(archived.id)).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.message(),
        format!(
            "version {} of template {name:?} is archived; unarchive it in Coder before promoting it",
            archived.id
        )
    );
    let answer = api.post(&path, &promotion(failed.id)).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.message(),
        format!(
            "version {} of template {name:?} cannot be promoted: its import job is \"failed\"; only versions whose import succeeded can be promoted",
            failed.id
        )
    );
    let answer = api
        .post(&path, &json!({"spec": {"versionID": "not-a-uuid"}}))
        .await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        answer
            .message()
            .contains("spec.versionID: Invalid value: \"not-a-uuid\""),
        "{}",
        answer.message()
    );
    let answer = api
        .post(&format!("{path}?dryRun=Some"), &promotion(failed.id))
        .await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        coder.recorded(Some("PATCH")).is_empty(),
        "{:?}",
        coder.recorded(None)
    );
}

#[tokio::test]
async fn promote_needs_fifteen_seconds_before_it_activates() {
    let (coder, api, v2) = promotable().await;
    coder.server.clear_requests();
    let answer = api
        .post(
            &format!("{}?timeout=14s", promote_path(&coder.template_name())),
            &promotion(v2.id),
        )
        .await;
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT, "{}", answer.text());
    assert_eq!(
        answer.message(),
        format!(
            "Timeout: the promotion of version {} on template {:?} was not attempted: too little of the request time was left after the lookups; nothing was sent to Coder, so it is safe to try again",
            v2.id,
            coder.template_name()
        )
    );
    assert!(coder.recorded(Some("PATCH")).is_empty());
    let enough = api
        .post(
            &format!("{}?timeout=16s", promote_path(&coder.template_name())),
            &promotion(v2.id),
        )
        .await;
    assert_eq!(enough.status, StatusCode::CREATED, "{}", enough.text());
}

/// Promotes `v2` with `fault` on the activation; returns the answer and the number of activations sent.
async fn promote_with_fault(
    coder: &Coder,
    api: &Api,
    version: Uuid,
    method: &str,
    prefix: String,
    fault: Fault,
) -> (Collected, usize) {
    coder.server.clear_requests();
    coder.server.add_fault(FaultRule {
        method: Some(method.to_owned()),
        path_prefix: prefix,
        fault,
        times: Some(1),
    });
    let answer = api
        .post(&promote_path(&coder.template_name()), &promotion(version))
        .await;
    coder.server.clear_faults();
    (answer, coder.recorded(Some("PATCH")).len())
}

#[tokio::test]
async fn coders_answers_to_the_activation_are_mapped_and_never_retried() {
    let (coder, api, v2) = promotable().await;
    let previous = coder.active_version().await;
    let activation = format!("/api/v2/templates/{}/versions", coder.template.id);
    let answer = |status: u16| Fault::Answer {
        status,
        headers: Vec::new(),
        body: json!({"message": "secret coder detail"}),
    };
    let name = coder.template_name();

    let (gone, sent) =
        promote_with_fault(&coder, &api, v2.id, "PATCH", activation.clone(), answer(404)).await;
    assert_eq!((gone.status, sent), (StatusCode::CONFLICT, 1));
    assert_eq!(
        gone.message(),
        format!(
            "Operation cannot be fulfilled on codertemplates.aggregation.coder.com {name:?}: the template or version {} was not found in Coder during the activation; nothing was changed: re-read before retrying",
            v2.id
        )
    );
    let (limited, sent) = promote_with_fault(
        &coder,
        &api,
        v2.id,
        "PATCH",
        activation.clone(),
        Fault::RateLimited { retry_after_secs: 7 },
    )
    .await;
    assert_eq!((limited.status, sent), (StatusCode::TOO_MANY_REQUESTS, 1));
    assert_eq!(
        limited.message(),
        "Coder rate-limited the activation; nothing was changed"
    );
    let (refused, sent) =
        promote_with_fault(&coder, &api, v2.id, "PATCH", activation.clone(), answer(403)).await;
    assert_eq!((refused.status, sent), (StatusCode::BAD_REQUEST, 1));
    assert_eq!(
        refused.message(),
        format!(
            "Coder refused to activate version {} on template {name:?} (status 403); nothing was changed: check that its import succeeded and that it is not archived",
            v2.id
        )
    );
    let could_not_confirm = format!(
        "could not confirm the promotion of version {} on template {name:?}; it may or may not have been applied: re-read the template before retrying",
        v2.id
    );
    let (uncertain, sent) = promote_with_fault(
        &coder,
        &api,
        v2.id,
        "PATCH",
        activation.clone(),
        Fault::ServerError(503),
    )
    .await;
    assert_eq!((uncertain.status, sent), (StatusCode::SERVICE_UNAVAILABLE, 1));
    assert_eq!(uncertain.message(), could_not_confirm);
    assert!(uncertain.headers.get("retry-after").is_none());
    // Coder says yes but another version is active: someone else changed it meanwhile.
    let (superseded, sent) =
        promote_with_fault(&coder, &api, v2.id, "PATCH", activation.clone(), answer(200)).await;
    assert_eq!((superseded.status, sent), (StatusCode::CONFLICT, 1));
    assert_eq!(
        superseded.message(),
        format!(
            "Operation cannot be fulfilled on codertemplates.aggregation.coder.com {name:?}: the promotion of version {} was superseded by a concurrent change: version {previous} is active; re-read before retrying",
            v2.id
        )
    );
    assert_eq!(
        coder.active_version().await,
        previous,
        "none of these changed Coder"
    );
    for answer in [&gone, &limited, &refused, &uncertain, &superseded] {
        assert!(
            !answer.text().contains("secret coder detail"),
            "{}",
            answer.text()
        );
    }

    // The activation is applied but its confirmation cannot be read.
    let reread = format!("/api/v2/templates/{}", coder.template.id);
    let (unconfirmed, sent) =
        promote_with_fault(&coder, &api, v2.id, "GET", reread, Fault::ServerError(500)).await;
    assert_eq!((unconfirmed.status, sent), (StatusCode::SERVICE_UNAVAILABLE, 1));
    assert_eq!(unconfirmed.message(), could_not_confirm);
    assert_eq!(coder.active_version().await, v2.id);
}

// ---------------------------------------------------------------------------------------------------------------
// Through kube-apiserver and kubectl

// kubectl runs blocking on a worker while the Coder test server answers on the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_reads_logs_and_promotes_through_kube_apiserver() {
    let cp: &'static coder_k8s_testenv::ControlPlane = Box::leak(Box::new(
        coder_k8s_testenv::ControlPlane::builder()
            .start()
            .await
            .expect("a control plane"),
    ));
    let client = cp.client().unwrap();
    let namespace = cp.namespace("agg-sub").await.unwrap().name().to_owned();
    let server_namespace =
        serde_json::from_value(json!({"metadata": {"name": cluster::SERVER_NAMESPACE}})).unwrap();
    kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&kube::api::PostParams::default(), &server_namespace)
        .await
        .unwrap();
    let coder = coder("kubectl", Duration::from_millis(1500)).await;
    let v2 = coder.version(Some(coder.template.id), "v2").await;
    let (addr, _) = cluster::spawn_server(cp, registry(coder.provider(&namespace), LogLimits::default()));
    cluster::register(&client, addr.port()).await;
    cluster::wait_until(
        "the aggregated API is served",
        Duration::from_secs(60),
        || async {
            cluster::kubectl(cp, &["get", "--raw", API], None)
                .status
                .success()
        },
    )
    .await;
    let base = format!("{API}/namespaces/{namespace}");
    let log = format!("{base}/coderworkspaces/{}/log", coder.workspace_name());

    let out = cluster::kubectl(cp, &["get", "--raw", &log], None);
    cluster::assert_success(&out, "kubectl get --raw .../log");
    let logs = coder
        .client
        .workspace_build_logs(coder.workspace.latest_build.id, None)
        .await
        .unwrap();
    assert_eq!(cluster::stdout(&out), rendered(&logs));

    let build = stop_build(&coder).await;
    let follow = format!("{log}?follow=true");
    let out = tokio::task::spawn_blocking(move || cluster::kubectl(cp, &["get", "--raw", &follow], None))
        .await
        .unwrap();
    cluster::assert_success(&out, "kubectl get --raw .../log?follow=true");
    let done = coder.client.workspace_build(build).await.unwrap();
    assert!(
        done.job.status.is_terminal(),
        "kubectl returned before the build ended"
    );
    let logs = coder.client.workspace_build_logs(build, None).await.unwrap();
    assert_eq!(cluster::stdout(&out), rendered(&logs));

    cluster::grant(cp, &namespace, "bob", &["get"]).await;
    let object = format!("{base}/coderworkspaces/{}", coder.workspace_name());
    cluster::wait_until("bob may get the workspace", Duration::from_secs(30), || async {
        cluster::kubectl(cp, &["get", "--raw", &object, "--as=bob"], None)
            .status
            .success()
    })
    .await;
    let out = cluster::kubectl(cp, &["get", "--raw", &log, "--as=bob"], None);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("coderworkspaces/log"),
        "a get grant on coderworkspaces is not enough: {stderr}"
    );

    let body = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(body.path(), promotion(v2.id).to_string()).unwrap();
    let promote = format!("{base}/codertemplates/{}/promote", coder.template_name());
    let file = body.path().to_str().unwrap().to_owned();
    let dry = format!("{promote}?dryRun=All");
    let out = cluster::kubectl(cp, &["create", "--raw", &dry, "-f", &file], None);
    cluster::assert_success(&out, "kubectl create --raw .../promote?dryRun=All");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["status"]["result"], "WouldPromote");
    let out = cluster::kubectl(cp, &["create", "--raw", &promote, "-f", &file], None);
    cluster::assert_success(&out, "kubectl create --raw .../promote");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["status"]["result"], "Promoted", "{answer}");
    assert_eq!(coder.active_version().await, v2.id);
}

// ---------------------------------------------------------------------------------------------------------------
// Real Coder

#[tokio::test]
async fn the_log_of_a_build_on_real_coder() {
    use coder_k8s_testenv::coder::{EchoTemplate, OWNER_USERNAME, RealCoder};
    coder_k8s_coder_client::install_ring_provider();
    let real = RealCoder::shared().await.unwrap();
    let client =
        CoderClient::new(real.url().parse().unwrap(), SessionToken::new(real.owner_token())).unwrap();
    let file = client
        .upload_file(
            ArchiveKind::Tar,
            Bytes::from(real.echo_template(EchoTemplate::Success).unwrap()),
        )
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    let version = client.create_template_version("default", &request).await.unwrap();
    let version = eventually("the echo import", async || {
        let v = client.template_version(version.id).await.unwrap();
        v.job.status.is_terminal().then_some(v)
    })
    .await;
    assert_eq!(version.job.status, JobStatus::Succeeded);
    let suffix = &Uuid::new_v4().simple().to_string()[..10];
    let template = client
        .create_template(
            "default",
            &CreateTemplateRequest {
                name: format!("logs-{suffix}"),
                template_version_id: version.id,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap();
    let workspace = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: format!("ws-{suffix}"),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap();
    let followed_by_coder = eventually("the first build", async || {
        let build = client.workspace_build(workspace.latest_build.id).await.unwrap();
        build.job.status.is_terminal().then_some(build)
    })
    .await;
    assert_eq!(followed_by_coder.job.status, JobStatus::Succeeded);

    let backend = StaticBackend {
        url: real.url().parse().unwrap(),
        token: real.owner_token().to_owned(),
        namespace: NAMESPACE.to_owned(),
    };
    let settings = ClientSettings {
        timeout: Duration::from_secs(20),
        service_address_override: None,
    };
    let provider = Arc::new(StaticProvider::new(&backend, &settings).unwrap());
    let server = ApiServer {
        registry: Arc::new(registry(provider, LogLimits::default())),
        authenticator: Arc::new(HeaderAuthenticator),
        authorizer: Arc::new(AllowAll),
        ready: Arc::new(AtomicBool::new(true)),
        settings: ServerSettings::default(),
    };
    let api = Api {
        router: server.router(),
    };
    let organization = client.default_organization().await.unwrap().name;
    let name = format!("{organization}.{OWNER_USERNAME}.{}", workspace.name);
    let logs = client
        .workspace_build_logs(workspace.latest_build.id, None)
        .await
        .unwrap();
    assert!(!logs.is_empty());
    for path in [log_path(&name), format!("{}?follow", log_path(&name))] {
        let answer = api.get(&path, &[]).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.text());
        assert_eq!(answer.text(), rendered(&logs), "{path}");
    }
    let map: BTreeMap<&str, usize> = logs.iter().fold(BTreeMap::new(), |mut m, l| {
        *m.entry(l.log_source.as_str()).or_default() += 1;
        m
    });
    assert!(map.contains_key("provisioner_daemon"), "{map:?}");
}
