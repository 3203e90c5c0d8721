//! Workspace writes and the `start`/`stop` subresources through the server's HTTP handlers, against the Coder API
//! test server (with its PostgreSQL): every verb, status code and message of create, update, patch, server-side
//! apply and delete, delete preconditions, dry-run, the canonical-name rule, and the decision table, re-reads and
//! time budget of start and stop. Where a test says nothing reached Coder, it reads the test server's whole request
//! log.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use bytes::Bytes;
use coder_k8s_aggregated_apiserver::coder::transitions::{self, Action, TransitionLimits};
use coder_k8s_aggregated_apiserver::coder::{Provider, StaticBackend, StaticProvider, registry};
use coder_k8s_aggregated_apiserver::generic::server::ServerSettings;
use coder_k8s_aggregated_apiserver::generic::{
    ApiError, ApiServer, Attributes, Authenticator, Authorizer, Decision, PeerCertificates, UserInfo,
};
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition, WorkspaceBuildStatus};
use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::template_versions::CreateTemplateVersionRequest;
use coder_k8s_coder_client::types::templates::{CreateTemplateRequest, Template};
use coder_k8s_coder_client::types::workspaces::{CreateWorkspaceRequest, Workspace};
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Config, Entitlement, Fault, FaultRule, RecordedRequest, TestServer};
use coder_k8s_control_plane_access::ClientSettings;
use futures::StreamExt;
use serde_json::{Value, json};
use tower::ServiceExt;
use uuid::Uuid;

const NAMESPACE: &str = "coder-ns";
const OWNER: &str = "coder-k8s-operator";
const BASE: &str = "/apis/aggregation.coder.com/v1alpha1/namespaces/coder-ns/coderworkspaces";

struct Anyone;

#[async_trait]
impl Authenticator for Anyone {
    async fn authenticate(
        &self,
        _peer: Option<&PeerCertificates>,
        _headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, ApiError> {
        Ok(Some(UserInfo {
            name: "alice".into(),
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

/// A Coder test server with one imported template (`docker`) and the server's router over it.
struct Env {
    server: TestServer,
    token: String,
    client: CoderClient,
    organization: String,
    template: Template,
    router: Router,
}

/// A one-file ustar archive (the test support's, as `Bytes`).
fn tar_with(name: &str, content: &[u8]) -> Bytes {
    Bytes::from(coder_k8s_testenv::one_file_tar(name, content))
}

async fn eventually<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..300 {
        if let Some(value) = probe().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn fresh_db(tag: &str) -> String {
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    pg.unique_coder_database(&format!("wsw_{tag}")).await.unwrap()
}

/// An imported version (optionally of `template`), waited for.
async fn imported_version(
    client: &CoderClient,
    organization: &str,
    name: &str,
    template: Option<Uuid>,
) -> Uuid {
    let file = client
        .upload_file(ArchiveKind::Tar, tar_with("main.tf", b"terraform {}\n"))
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.name = name.to_owned();
    request.template_id = template;
    let version = client
        .create_template_version(organization, &request)
        .await
        .unwrap();
    eventually("the template import", async || {
        let v = client.template_version(version.id).await.unwrap();
        (v.job.status == JobStatus::Succeeded).then_some(())
    })
    .await;
    version.id
}

async fn create_template(
    client: &CoderClient,
    organization: &str,
    name: &str,
    require_active: bool,
) -> Template {
    let version = imported_version(client, organization, &format!("{name}-v1"), None).await;
    client
        .create_template(
            organization,
            &CreateTemplateRequest {
                name: name.to_owned(),
                template_version_id: version,
                require_active_version: require_active,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap()
}

fn settings() -> ClientSettings {
    ClientSettings {
        timeout: Duration::from_secs(10),
        service_address_override: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
    }
}

async fn env(tag: &str, build_duration: Duration, limits: TransitionLimits) -> Env {
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
    let template = create_template(&client, &organization, "docker", false).await;
    let backend = StaticBackend {
        url: server.url(),
        token: token.clone(),
        namespace: NAMESPACE.to_owned(),
    };
    let provider: Arc<dyn Provider> = Arc::new(StaticProvider::new(&backend, &settings()).unwrap());
    let mut registry = registry(provider.clone());
    let workspaces = registry
        .resources
        .iter_mut()
        .find(|r| r.plural == "coderworkspaces")
        .unwrap();
    workspaces.subresources = vec![
        transitions::subresource(provider.clone(), Action::Start, limits),
        transitions::subresource(provider, Action::Stop, limits),
    ];
    let api = ApiServer {
        registry: Arc::new(registry),
        authenticator: Arc::new(Anyone),
        authorizer: Arc::new(AllowAll),
        ready: Arc::new(true.into()),
        settings: ServerSettings {
            request_timeout: Duration::from_secs(40),
            ..ServerSettings::default()
        },
    };
    Env {
        server,
        token,
        client,
        organization,
        template,
        router: api.router(),
    }
}

async fn default_env(tag: &str) -> Env {
    env(tag, Duration::from_millis(200), TransitionLimits::default()).await
}

struct Answer {
    status: StatusCode,
    body: Value,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status, self.body)
    }
}

impl Answer {
    fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }
}

impl Env {
    fn name(&self, leaf: &str) -> String {
        format!("{}.{OWNER}.{leaf}", self.organization)
    }

    async fn send(&self, method: Method, path: &str, content_type: &str, body: Option<String>) -> Answer {
        let mut builder = Request::builder().method(method).uri(path);
        if !content_type.is_empty() {
            builder = builder.header("content-type", content_type);
        }
        let request = builder.body(body.map_or_else(Body::empty, Body::from)).unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Answer { status, body }
    }

    async fn json(&self, method: Method, path: &str, body: &Value) -> Answer {
        self.send(method, path, "application/json", Some(body.to_string()))
            .await
    }

    async fn get(&self, name: &str) -> Answer {
        self.send(Method::GET, &format!("{BASE}/{name}"), "", None).await
    }

    fn manifest(&self, leaf: &str, running: bool) -> Value {
        json!({
            "apiVersion": "aggregation.coder.com/v1alpha1",
            "kind": "CoderWorkspace",
            "metadata": {"name": self.name(leaf), "namespace": NAMESPACE},
            "spec": {"organization": self.organization, "templateName": "docker", "running": running},
        })
    }

    /// A workspace made directly in Coder (as the operator), waited for until its first build succeeded.
    async fn coder_workspace(
        &self,
        leaf: &str,
        automatic_updates: Option<&str>,
        template: &Template,
    ) -> Workspace {
        let created = self
            .client
            .create_workspace(
                OWNER,
                &CreateWorkspaceRequest {
                    template_id: Some(template.id),
                    name: leaf.to_owned(),
                    automatic_updates: automatic_updates.map(str::to_owned),
                    ..CreateWorkspaceRequest::default()
                },
            )
            .await
            .unwrap();
        self.settled(created.id).await
    }

    /// The workspace once its latest build is no longer active.
    async fn settled(&self, id: Uuid) -> Workspace {
        eventually("the latest build to end", async || {
            let w = self.client.workspace(id).await.unwrap();
            w.latest_build.job.status.is_terminal().then_some(w)
        })
        .await
    }

    fn requests(&self) -> Vec<RecordedRequest> {
        self.server.requests()
    }

    fn writes(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.method != "GET")
            .collect()
    }

    /// Opens a watch on the workspaces of the namespace that ends after `seconds`; the task collects its events
    /// (bookmarks left out).
    async fn watch(&self, seconds: u32) -> tokio::task::JoinHandle<Vec<Value>> {
        let request = Request::builder()
            .uri(format!(
                "{BASE}?watch=true&resourceVersion=1&timeoutSeconds={seconds}"
            ))
            .body(Body::empty())
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        tokio::spawn(async move {
            let mut stream = response.into_body().into_data_stream();
            let mut buffer = Vec::new();
            while let Some(chunk) = stream.next().await {
                buffer.extend_from_slice(&chunk.unwrap());
            }
            String::from_utf8(buffer)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .filter(|e: &Value| e["type"] != "BOOKMARK")
                .collect()
        })
    }

    async fn transition(&self, name: &str, action: &str, query: &str, body: Option<&str>) -> Answer {
        self.send(
            Method::POST,
            &format!("{BASE}/{name}/{action}{query}"),
            "application/json",
            body.map(str::to_owned),
        )
        .await
    }

    fn fault(&self, method: &str, path_prefix: &str, fault: Fault) {
        self.server.add_fault(FaultRule {
            method: Some(method.to_owned()),
            path_prefix: path_prefix.to_owned(),
            fault,
            times: Some(1),
        });
    }
}

fn is_build_post(request: &RecordedRequest) -> bool {
    request.method == "POST" && request.path.ends_with("/builds")
}

#[tokio::test]
async fn create_makes_the_workspace_in_coder_and_watchers_see_it_added() {
    let env = default_env("create").await;
    let events = env.watch(3).await;
    let name = env.name("dev");
    let created = env.json(Method::POST, BASE, &env.manifest("dev", true)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    assert_eq!(created.body["metadata"]["name"], name);
    assert_eq!(created.body["metadata"]["namespace"], NAMESPACE);
    assert_eq!(created.body["spec"]["running"], true);
    assert_eq!(created.body["spec"]["templateName"], "docker");
    let in_coder = env
        .client
        .workspace_by_owner_and_name(OWNER, "dev")
        .await
        .unwrap();
    assert_eq!(created.body["metadata"]["uid"], in_coder.id.to_string());
    assert_eq!(
        in_coder.latest_build.template_version_id,
        env.template.active_version_id
    );
    let creates: Vec<_> = env
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == format!("/api/v2/users/{OWNER}/workspaces"))
        .collect();
    assert_eq!(creates.len(), 1, "{creates:?}");
    let events = events.await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["metadata"]["name"], name);

    // The same name again: Coder's conflict is AlreadyExists.
    let again = env.json(Method::POST, BASE, &env.manifest("dev", true)).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(again.body["reason"], "AlreadyExists");
    assert_eq!(
        again.message(),
        format!("coderworkspaces.aggregation.coder.com {name:?} already exists")
    );
}

#[tokio::test]
async fn create_checks_the_body_template_and_pinned_version() {
    let env = default_env("create-checks").await;
    let other = create_template(&env.client, &env.organization, "other", false).await;
    env.server.clear_requests();

    let mut wrong_org = env.manifest("a", true);
    wrong_org["spec"]["organization"] = json!("elsewhere");
    let answer = env.json(Method::POST, BASE, &wrong_org).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.message(),
        format!(
            "spec.organization \"elsewhere\" must match organization {:?} parsed from metadata.name",
            env.organization
        )
    );
    let mut no_template = env.manifest("a", true);
    no_template["spec"]["templateName"] = json!("");
    let answer = env.json(Method::POST, BASE, &no_template).await;
    assert_eq!(
        (answer.status, answer.message()),
        (StatusCode::BAD_REQUEST, "spec.templateName must not be empty")
    );
    let mut bad_name = env.manifest("a", true);
    bad_name["metadata"]["name"] = json!("just-a-name");
    let answer = env.json(Method::POST, BASE, &bad_name).await;
    assert_eq!(
        (answer.status, answer.message()),
        (
            StatusCode::BAD_REQUEST,
            r#"invalid workspace name "just-a-name": expected 2 separators (".")"#
        )
    );
    let mut not_uuid = env.manifest("a", true);
    not_uuid["spec"]["templateVersionID"] = json!("v1");
    let answer = env.json(Method::POST, BASE, &not_uuid).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(
        answer
            .message()
            .starts_with(r#"invalid workspace spec: invalid templateVersionID "v1": "#),
        "{answer:?}"
    );
    assert!(
        env.requests().is_empty(),
        "checks without Coder calls: {:?}",
        env.requests()
    );

    let mut missing_template = env.manifest("a", true);
    missing_template["spec"]["templateName"] = json!("nope");
    let answer = env.json(Method::POST, BASE, &missing_template).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");
    assert_eq!(
        answer.message(),
        format!(
            "codertemplates.aggregation.coder.com \"{}.nope\" not found",
            env.organization
        )
    );
    let mut foreign_version = env.manifest("a", true);
    foreign_version["spec"]["templateVersionID"] = json!(other.active_version_id.to_string());
    let answer = env.json(Method::POST, BASE, &foreign_version).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.message(),
        format!(
            "spec.templateVersionID \"{}\" does not belong to template \"docker\"",
            other.active_version_id
        )
    );
    assert!(env.writes().is_empty(), "{:?}", env.writes());

    // A version of the template is pinned in Coder's create request.
    let second = imported_version(&env.client, &env.organization, "docker-v2", Some(env.template.id)).await;
    let mut pinned = env.manifest("pinned", true);
    pinned["spec"]["templateVersionID"] = json!(second.to_string());
    let answer = env.json(Method::POST, BASE, &pinned).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(answer.body["spec"]["templateVersionID"], second.to_string());
    let in_coder = env
        .client
        .workspace_by_owner_and_name(OWNER, "pinned")
        .await
        .unwrap();
    assert_eq!(in_coder.latest_build.template_version_id, second);
}

#[tokio::test]
async fn create_refuses_aliases_before_any_write() {
    let env = default_env("create-alias").await;
    env.server.clear_requests();
    let cases = [
        (
            format!("default.{OWNER}.box"),
            format!(
                "workspace name \"default.{OWNER}.box\": organization segment \"default\" resolves to organization {:?}; use the canonical organization and owner names, for example \"{}.{OWNER}.box\" (the workspace segment is not checked on create)",
                env.organization, env.organization
            ),
        ),
        (
            format!("{}.me.box", env.organization),
            format!(
                "workspace name \"{}.me.box\": owner segment \"me\" resolves to user \"{OWNER}\"; use the canonical organization and owner names, for example \"{}.{OWNER}.box\" (the workspace segment is not checked on create)",
                env.organization, env.organization
            ),
        ),
    ];
    for (name, message) in cases {
        let organization = name.split('.').next().unwrap().to_owned();
        let body = json!({
            "metadata": {"name": name},
            "spec": {"organization": organization, "templateName": "docker", "running": true},
        });
        let answer = env.json(Method::POST, BASE, &body).await;
        assert_eq!(
            (answer.status, answer.message()),
            (StatusCode::BAD_REQUEST, message.as_str())
        );
    }
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    assert!(
        env.client
            .workspaces("", 0, 0)
            .await
            .unwrap()
            .workspaces
            .is_empty(),
        "no workspace was created"
    );
}

#[tokio::test]
async fn create_with_running_false_queues_a_stop_and_a_refused_stop_is_ignored() {
    let env = default_env("create-stopped").await;
    // Coder refuses a stop while the first start build is active: the workspace exists, and the answer says it runs.
    let answer = env.json(Method::POST, BASE, &env.manifest("busy", false)).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(answer.body["spec"]["running"], true);
    let stops: Vec<_> = env.requests().into_iter().filter(is_build_post).collect();
    assert_eq!(stops.len(), 1, "one stop build was asked for: {stops:?}");
    assert_eq!(stops[0].status, 409);

    // A stop that Coder accepts is the workspace's latest build in the answer.
    let stop_id = Uuid::new_v4();
    env.fault(
        "POST",
        "/api/v2/workspaces/",
        Fault::Answer {
            status: 201,
            headers: Vec::new(),
            body: json!({"id": stop_id, "transition": "stop", "status": "pending", "build_number": 2,
                         "job": {"status": "pending"}}),
        },
    );
    let answer = env.json(Method::POST, BASE, &env.manifest("quiet", false)).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(answer.body["spec"]["running"], false);
    assert_eq!(answer.body["status"]["latestBuildID"], stop_id.to_string());
}

/// GET, then PUT the object back with `edit` applied.
async fn put_edited(env: &Env, name: &str, edit: impl FnOnce(&mut Value)) -> Answer {
    let current = env.get(name).await;
    assert_eq!(current.status, StatusCode::OK, "{current:?}");
    let mut object = current.body;
    edit(&mut object);
    env.json(Method::PUT, &format!("{BASE}/{name}"), &object).await
}

#[tokio::test]
async fn update_changes_only_spec_running_with_the_current_resource_version() {
    let env = default_env("update").await;
    let workspace = env.coder_workspace("dev", None, &env.template).await;
    let name = env.name("dev");
    env.server.clear_requests();

    let missing = put_edited(&env, &name, |o| {
        o["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        o["spec"]["running"] = json!(false);
    })
    .await;
    assert_eq!(
        (missing.status, missing.message()),
        (
            StatusCode::BAD_REQUEST,
            "metadata.resourceVersion is required for update"
        )
    );
    let stale = put_edited(&env, &name, |o| {
        o["metadata"]["resourceVersion"] = json!("0123");
        o["spec"]["running"] = json!(false);
    })
    .await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    let current_rv = env.get(&name).await.body["metadata"]["resourceVersion"].clone();
    assert_eq!(
        stale.message(),
        format!(
            "Operation cannot be fulfilled on coderworkspaces.aggregation.coder.com {name:?}: resource version mismatch: got \"0123\", current is {current_rv}"
        )
    );
    for edit in [
        (|o: &mut Value| o["spec"]["templateName"] = json!("other")) as fn(&mut Value),
        |o| o["spec"]["templateVersionID"] = json!(Uuid::new_v4().to_string()),
    ] {
        let immutable = put_edited(&env, &name, edit).await;
        assert_eq!(
            (immutable.status, immutable.message()),
            (
                StatusCode::BAD_REQUEST,
                "workspace update only supports changing spec.running; other spec fields are immutable"
            )
        );
    }
    let unchanged = put_edited(&env, &name, |_| {}).await;
    assert_eq!(unchanged.status, StatusCode::OK, "{unchanged:?}");
    assert!(
        env.writes().is_empty(),
        "refused and empty updates write nothing: {:?}",
        env.writes()
    );

    let events = env.watch(3).await;
    let stopped = put_edited(&env, &name, |o| o["spec"]["running"] = json!(false)).await;
    assert_eq!(stopped.status, StatusCode::OK, "{stopped:?}");
    assert_eq!(stopped.body["spec"]["running"], false);
    let latest = env.client.workspace(workspace.id).await.unwrap().latest_build;
    assert_eq!(latest.transition, Transition::Stop);
    assert_eq!(stopped.body["status"]["latestBuildID"], latest.id.to_string());
    let events = events.await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "MODIFIED");
    assert_eq!(
        events[0]["object"]["status"]["latestBuildID"],
        latest.id.to_string()
    );
}

#[tokio::test]
async fn merge_patches_start_with_the_version_the_template_or_workspace_asks_for() {
    let env = default_env("patch").await;
    // Coder keeps a template's required active version only with access control licensed.
    env.server
        .set_entitlement("access_control", Entitlement::Entitled);
    let strict = create_template(&env.client, &env.organization, "strict", true).await;
    let cases = [
        ("plain", None, &env.template, false),
        ("always", Some("always"), &env.template, true),
        ("required", None, &strict, true),
    ];
    for (leaf, updates, template, wants_active) in cases {
        let workspace = env.coder_workspace(leaf, updates, template).await;
        let name = env.name(leaf);
        let patch = |running: bool| {
            let env = &env;
            let name = name.clone();
            async move {
                env.send(
                    Method::PATCH,
                    &format!("{BASE}/{name}"),
                    "application/merge-patch+json",
                    Some(json!({"spec": {"running": running}}).to_string()),
                )
                .await
            }
        };
        let stopped = patch(false).await;
        assert_eq!(stopped.status, StatusCode::OK, "{leaf}: {stopped:?}");
        env.settled(workspace.id).await;
        // A new active version: only a start that asks for the active version uses it.
        let newer = imported_version(
            &env.client,
            &env.organization,
            &format!("{leaf}-v2"),
            Some(template.id),
        )
        .await;
        env.client
            .promote_template_version(template.id, newer)
            .await
            .unwrap();
        let started = patch(true).await;
        assert_eq!(started.status, StatusCode::OK, "{leaf}: {started:?}");
        assert_eq!(started.body["spec"]["running"], true, "{leaf}");
        let build = env.client.workspace(workspace.id).await.unwrap().latest_build;
        assert_eq!(build.transition, Transition::Start, "{leaf}");
        let expected = if wants_active {
            newer
        } else {
            workspace.latest_build.template_version_id
        };
        assert_eq!(build.template_version_id, expected, "{leaf}");
    }
}

#[tokio::test]
async fn server_side_apply_creates_a_missing_workspace_and_a_second_apply_changes_nothing() {
    let env = default_env("apply").await;
    let name = env.name("applied");
    let apply = async || {
        env.send(
            Method::PATCH,
            &format!("{BASE}/{name}?fieldManager=tests"),
            "application/apply-patch+yaml",
            Some(env.manifest("applied", true).to_string()),
        )
        .await
    };
    let first = apply().await;
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    let id = env
        .client
        .workspace_by_owner_and_name(OWNER, "applied")
        .await
        .unwrap()
        .id;
    assert_eq!(first.body["metadata"]["uid"], id.to_string());
    env.settled(id).await;
    env.server.clear_requests();
    let second = apply().await;
    assert_eq!(second.status, StatusCode::OK, "{second:?}");
    assert!(env.writes().is_empty(), "{:?}", env.writes());

    // Apply of a missing workspace under an alias is refused before anything is created.
    let alias = format!("{}.me.other", env.organization);
    let mut manifest = env.manifest("other", true);
    manifest["metadata"]["name"] = json!(alias);
    let refused = env
        .send(
            Method::PATCH,
            &format!("{BASE}/{alias}?fieldManager=tests"),
            "application/apply-patch+yaml",
            Some(manifest.to_string()),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{refused:?}");
    assert!(env.writes().is_empty(), "{:?}", env.writes());
}

#[tokio::test]
async fn delete_queues_a_delete_build_answers_success_and_sends_modified() {
    let env = default_env("delete").await;
    let workspace = env.coder_workspace("dev", None, &env.template).await;
    let name = env.name("dev");
    let events = env.watch(3).await;
    let answer = env
        .send(Method::DELETE, &format!("{BASE}/{name}"), "", None)
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["kind"], "Status");
    assert_eq!(answer.body["status"], "Success");
    let latest = env.client.workspace(workspace.id).await.unwrap().latest_build;
    assert_eq!(latest.transition, Transition::Delete);
    let events = events.await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "MODIFIED");
    assert_eq!(
        events[0]["object"]["status"]["latestBuildID"],
        latest.id.to_string()
    );
    eventually("the workspace to be gone", async || {
        (env.get(&name).await.status == StatusCode::NOT_FOUND).then_some(())
    })
    .await;
}

#[tokio::test]
async fn delete_preconditions_are_checked_before_any_coder_write() {
    let env = default_env("preconditions").await;
    let workspace = env.coder_workspace("dev", None, &env.template).await;
    let name = env.name("dev");
    let current = env.get(&name).await.body;
    let rv = current["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let uid = workspace.id.to_string();
    env.server.clear_requests();
    let delete = async |preconditions: Value| {
        env.json(
            Method::DELETE,
            &format!("{BASE}/{name}"),
            &json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": preconditions}),
        )
        .await
    };
    let wrong = "00000000-0000-0000-0000-00000000dead";
    let cases = [
        (
            json!({"uid": wrong}),
            format!("UID in precondition: {wrong}, UID in object meta: {uid}"),
        ),
        (
            json!({"resourceVersion": "1"}),
            format!("ResourceVersion in precondition: 1, ResourceVersion in object meta: {rv}"),
        ),
        (
            json!({"uid": uid, "resourceVersion": "1"}),
            "ResourceVersion in precondition: 1".to_owned(),
        ),
        (
            json!({"uid": ""}),
            format!("UID in precondition: , UID in object meta: {uid}"),
        ),
        (
            json!({"resourceVersion": ""}),
            "ResourceVersion in precondition: , ".to_owned(),
        ),
    ];
    for (preconditions, expected) in cases {
        let answer = delete(preconditions.clone()).await;
        assert_eq!(answer.status, StatusCode::CONFLICT, "{preconditions}: {answer:?}");
        assert_eq!(answer.body["reason"], "Conflict");
        assert!(
            answer.message().starts_with(&format!(
                "Operation cannot be fulfilled on coderworkspaces.aggregation.coder.com {name:?}: StorageError: invalid object, Code: 4, Key: {name}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
            )) && answer.message().contains(&expected),
            "{preconditions}: {answer:?}"
        );
    }
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    assert!(env.requests().iter().all(|r| r.method == "GET"));

    let matching = delete(json!({"uid": uid, "resourceVersion": rv})).await;
    assert_eq!(matching.status, StatusCode::OK, "{matching:?}");
    let writes = env.writes();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert!(is_build_post(&writes[0]), "{writes:?}");
}

#[tokio::test]
async fn dry_run_writes_are_refused_and_nothing_reaches_coder() {
    let env = default_env("dryrun").await;
    env.coder_workspace("dev", None, &env.template).await;
    let name = env.name("dev");
    let item = format!("{BASE}/{name}");
    env.server.clear_requests();
    let manifest = env.manifest("dev", false).to_string();
    let answers = [
        env.send(
            Method::POST,
            &format!("{BASE}?dryRun=All"),
            "application/json",
            Some(env.manifest("new", true).to_string()),
        )
        .await,
        env.send(
            Method::PUT,
            &format!("{item}?dryRun=All"),
            "application/json",
            Some(manifest.clone()),
        )
        .await,
        env.send(
            Method::PATCH,
            &format!("{item}?dryRun=All"),
            "application/merge-patch+json",
            Some(r#"{"spec":{"running":false}}"#.to_owned()),
        )
        .await,
        env.send(
            Method::PATCH,
            &format!("{item}?dryRun=All&fieldManager=t"),
            "application/apply-patch+yaml",
            Some(manifest),
        )
        .await,
        env.send(Method::DELETE, &format!("{item}?dryRun=All"), "", None)
            .await,
        env.send(
            Method::DELETE,
            &item,
            "application/json",
            Some(r#"{"dryRun":["All"]}"#.to_owned()),
        )
        .await,
    ];
    for answer in answers {
        assert_eq!(
            (answer.status, answer.message()),
            (
                StatusCode::BAD_REQUEST,
                "server-side dry-run is not supported for coderworkspaces; nothing was changed"
            ),
            "{answer:?}"
        );
    }
    assert!(env.requests().is_empty(), "{:?}", env.requests());
}

/// Creates organization `other` (and makes the operator a member) through the test server's API.
async fn second_organization(env: &Env) {
    env.server
        .set_entitlement("multiple_organizations", Entitlement::Entitled);
    let response = reqwest::Client::new()
        .post(env.server.url().join("api/v2/organizations").unwrap())
        .header("Coder-Session-Token", &env.token)
        .json(&json!({"name": "other"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{:?}", response.text().await);
}

#[tokio::test]
async fn every_verb_serves_only_canonical_names_and_hides_other_organizations() {
    let env = default_env("names").await;
    env.coder_workspace("dev", None, &env.template).await;
    second_organization(&env).await;
    let org = env.organization.clone();
    let canonical = env.name("dev");
    env.server.clear_requests();
    let alias = |name: String, segments: &str| {
        (
            name.clone(),
            StatusCode::BAD_REQUEST,
            format!("workspace name {name:?}: {segments}; use the canonical name {canonical:?}"),
        )
    };
    let not_found = |name: String| {
        let message = format!("coderworkspaces.aggregation.coder.com {name:?} not found");
        (name, StatusCode::NOT_FOUND, message)
    };
    let cases = [
        alias(
            format!("default.{OWNER}.dev"),
            &format!("organization segment \"default\" resolves to organization {org:?}"),
        ),
        alias(
            format!("{org}.me.dev"),
            &format!("owner segment \"me\" resolves to user \"{OWNER}\""),
        ),
        alias(
            "default.me.dev".to_owned(),
            &format!(
                "organization segment \"default\" resolves to organization {org:?}, owner segment \"me\" resolves to user \"{OWNER}\""
            ),
        ),
        (
            format!("{org}.{OWNER}.DEV"),
            StatusCode::BAD_REQUEST,
            format!(
                "workspace name \"{org}.{OWNER}.DEV\": workspace segment \"DEV\" resolves to workspace \"dev\"; use the canonical name {canonical:?}"
            ),
        ),
        // The organization exists but the workspace is not in it; an unknown organization looks the same.
        not_found(format!("other.{OWNER}.dev")),
        not_found(format!("nowhere.{OWNER}.dev")),
    ];
    for (name, status, message) in cases {
        let item = format!("{BASE}/{name}");
        let answers = [
            ("get", env.get(&name).await),
            (
                "put",
                env.json(
                    Method::PUT,
                    &item,
                    &json!({"metadata": {"name": name, "resourceVersion": "x"}, "spec": {"running": false}}),
                )
                .await,
            ),
            (
                "patch",
                env.send(
                    Method::PATCH,
                    &item,
                    "application/merge-patch+json",
                    Some(r#"{"spec":{"running":false}}"#.into()),
                )
                .await,
            ),
            ("delete", env.send(Method::DELETE, &item, "", None).await),
            ("start", env.transition(&name, "start", "", None).await),
            ("stop", env.transition(&name, "stop", "", None).await),
        ];
        for (verb, answer) in answers {
            assert_eq!(
                (answer.status, answer.message()),
                (status, message.as_str()),
                "{verb} {name}"
            );
        }
    }
    // An organization the operator may not read is as opaque as another organization.
    env.fault("GET", "/api/v2/organizations/other", Fault::Forbidden);
    let denied = env.get(&format!("other.{OWNER}.dev")).await;
    assert_eq!(denied.status, StatusCode::NOT_FOUND, "{denied:?}");
    assert!(env.writes().is_empty(), "{:?}", env.writes());
}

#[tokio::test]
async fn start_and_stop_follow_the_decision_table_and_send_modified_when_queued() {
    let env = env("table", Duration::from_millis(1500), TransitionLimits::default()).await;
    let workspace = env.coder_workspace("dev", None, &env.template).await;
    let name = env.name("dev");
    let running_build = workspace.latest_build.clone();

    // start on a succeeded start: Unchanged, naming that build, no write.
    env.server.clear_requests();
    let unchanged = env.transition(&name, "start", "", Some("{}")).await;
    assert_eq!(unchanged.status, StatusCode::CREATED, "{unchanged:?}");
    assert_eq!(
        unchanged.body,
        json!({"apiVersion": "aggregation.coder.com/v1alpha1", "kind": "CoderWorkspaceTransition",
               "metadata": {"name": name, "namespace": NAMESPACE},
               "status": {"transition": "start", "outcome": "Unchanged", "buildID": running_build.id.to_string(),
                          "buildNumber": running_build.build_number, "jobStatus": "succeeded"}})
    );
    // stop dry-run: WouldQueue with empty build fields, no write.
    let would = env.transition(&name, "stop", "?dryRun=All", None).await;
    assert_eq!(would.status, StatusCode::CREATED, "{would:?}");
    assert_eq!(
        would.body["status"],
        json!({"transition": "stop", "outcome": "WouldQueue", "dryRun": true})
    );
    assert!(env.writes().is_empty(), "{:?}", env.writes());

    // stop on a succeeded start: Queued, one build, and watchers see the workspace with it.
    let events = env.watch(3).await;
    let queued = env.transition(&name, "stop", "", None).await;
    assert_eq!(queued.status, StatusCode::CREATED, "{queued:?}");
    assert_eq!(queued.body["status"]["outcome"], "Queued");
    let stop_build = env.client.workspace(workspace.id).await.unwrap().latest_build;
    assert_eq!(stop_build.transition, Transition::Stop);
    assert_eq!(queued.body["status"]["buildID"], stop_build.id.to_string());
    assert_eq!(queued.body["status"]["buildNumber"], stop_build.build_number);

    // While the stop is active: stop is InProgress, start is a 409 naming the build; neither writes.
    env.server.clear_requests();
    let in_progress = env.transition(&name, "stop", "", None).await;
    assert_eq!(
        in_progress.body["status"]["outcome"], "InProgress",
        "{in_progress:?}"
    );
    assert_eq!(in_progress.body["status"]["buildID"], stop_build.id.to_string());
    let busy = env.transition(&name, "start", "", None).await;
    assert_eq!(busy.status, StatusCode::CONFLICT, "{busy:?}");
    assert!(
        busy.message().starts_with(&format!(
            "Operation cannot be fulfilled on coderworkspaces.aggregation.coder.com {name:?}: a stop build is active (build #{}, job ",
            stop_build.build_number
        )) && busy.message().ends_with("); retry after it ends"),
        "{busy:?}"
    );
    // A dry run of the same request answers the same.
    let busy_dry = env.transition(&name, "start", "?dryRun=All", None).await;
    assert_eq!(busy_dry.status, StatusCode::CONFLICT, "{busy_dry:?}");
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    let events = events.await.unwrap();
    assert_eq!(events.len(), 1, "only the queued stop is an event: {events:?}");
    assert_eq!(events[0]["type"], "MODIFIED");
    assert_eq!(
        events[0]["object"]["status"]["latestBuildID"],
        stop_build.id.to_string()
    );

    // Once stopped: stop is Unchanged, start is Queued.
    env.settled(workspace.id).await;
    assert_eq!(
        env.transition(&name, "stop", "", None).await.body["status"]["outcome"],
        "Unchanged"
    );
    let started = env.transition(&name, "start", "", None).await;
    assert_eq!(started.body["status"]["outcome"], "Queued", "{started:?}");

    // A failed build is retried with a new build.
    env.settled(workspace.id).await;
    env.server
        .set_build_outcome(coder_k8s_coder_testserver::BuildOutcome::Fail);
    assert_eq!(
        env.transition(&name, "stop", "", None).await.body["status"]["outcome"],
        "Queued"
    );
    let failed = env.settled(workspace.id).await;
    assert_eq!(failed.latest_build.status, WorkspaceBuildStatus::Failed);
    env.server
        .set_build_outcome(coder_k8s_coder_testserver::BuildOutcome::Succeed);
    let retried = env.transition(&name, "stop", "", None).await;
    assert_eq!(retried.body["status"]["outcome"], "Queued", "{retried:?}");

    // A build being canceled blocks both.
    let id: Uuid = retried.body["status"]["buildID"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    eventually("the retried build to run", async || {
        let build = env.client.workspace_build(id).await.unwrap();
        (build.job.status == JobStatus::Running).then_some(())
    })
    .await;
    let cancel = reqwest::Client::new()
        .patch(
            env.server
                .url()
                .join(&format!("api/v2/workspacebuilds/{id}/cancel"))
                .unwrap(),
        )
        .header("Coder-Session-Token", &env.token)
        .send()
        .await
        .unwrap();
    assert!(cancel.status().is_success(), "{:?}", cancel.text().await);
    let latest = env.client.workspace(workspace.id).await.unwrap().latest_build;
    assert_eq!(latest.job.status, JobStatus::Canceling);
    for action in ["start", "stop"] {
        let blocked = env.transition(&name, action, "", None).await;
        assert_eq!(blocked.status, StatusCode::CONFLICT, "{action}: {blocked:?}");
        assert!(
            blocked.message().contains(&format!(
                ": a stop build is being canceled (build #{}, job canceling); retry after it ends",
                latest.build_number
            )),
            "{blocked:?}"
        );
    }
}

#[tokio::test]
async fn a_coder_conflict_is_re_read_once_and_never_posted_again() {
    let env = env(
        "conflict",
        Duration::from_millis(1500),
        TransitionLimits::default(),
    )
    .await;
    let workspace = env.coder_workspace("dev", None, &env.template).await;
    let name = env.name("dev");

    // Another build became active after the lookup and the re-read shows nothing that stops the workspace: 409
    // with Coder's reason.
    env.fault(
        "POST",
        "/api/v2/workspaces/",
        Fault::Answer {
            status: 409,
            headers: Vec::new(),
            body: json!({"message": "A workspace build is already active."}),
        },
    );
    env.server.clear_requests();
    let refused = env.transition(&name, "stop", "", None).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{refused:?}");
    assert_eq!(
        refused.message(),
        format!(
            "Operation cannot be fulfilled on coderworkspaces.aggregation.coder.com {name:?}: A workspace build is already active.; retry after the active build ends"
        )
    );
    let requests = env.requests();
    assert_eq!(
        requests.iter().filter(|r| is_build_post(r)).count(),
        1,
        "{requests:?}"
    );
    let rereads = format!("/api/v2/workspaces/{}", workspace.id);
    assert_eq!(
        requests.iter().filter(|r| r.path == rereads).count(),
        1,
        "{requests:?}"
    );

    // Another client queued the same stop while the POST was on its way: the re-read finds it in progress.
    env.fault(
        "POST",
        "/api/v2/workspaces/",
        Fault::Latency(Duration::from_millis(800)),
    );
    env.server.clear_requests();
    let request = env.transition(&name, "stop", "", None);
    let competitor = async {
        // Once this request's POST waits in the test server, another client queues the same stop.
        eventually("the request's POST", async || {
            env.requests().iter().any(is_build_post).then_some(())
        })
        .await;
        // Past the fault rule, which that POST has taken.
        tokio::time::sleep(Duration::from_millis(100)).await;
        env.client
            .create_workspace_build(
                workspace.id,
                &CreateWorkspaceBuildRequest::transition(Transition::Stop),
            )
            .await
            .unwrap()
    };
    let (answer, competing) = tokio::join!(request, competitor);
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(answer.body["status"]["outcome"], "InProgress");
    assert_eq!(answer.body["status"]["buildID"], competing.id.to_string());
    let posts: Vec<_> = env.requests().into_iter().filter(is_build_post).collect();
    assert_eq!(
        posts.len(),
        2,
        "the competitor's and this request's one POST: {posts:?}"
    );
}

#[tokio::test]
async fn an_uncertain_post_is_confirmed_by_one_re_read_or_answered_504() {
    let limits = TransitionLimits {
        budget: Duration::from_secs(3),
        confirm_reserve: Duration::from_secs(1),
    };
    let env = env("uncertain", Duration::from_millis(200), limits).await;
    let workspace = env.coder_workspace("dev", None, &env.template).await;
    let name = env.name("dev");

    // A gateway answered 503 after Coder queued the build: the re-read confirms it.
    env.fault("POST", "/api/v2/workspaces/", Fault::FailAfterHandling(503));
    let events = env.watch(2).await;
    let confirmed = env.transition(&name, "stop", "", None).await;
    assert_eq!(confirmed.status, StatusCode::CREATED, "{confirmed:?}");
    assert_eq!(confirmed.body["status"]["outcome"], "Queued");
    let stop = env.client.workspace(workspace.id).await.unwrap().latest_build;
    assert_eq!(confirmed.body["status"]["buildID"], stop.id.to_string());
    let events = events.await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0]["object"]["status"]["latestBuildID"],
        stop.id.to_string()
    );
    env.settled(workspace.id).await;

    // A gateway's 502 or 504, or a dropped connection, without a build: 504, uncertain, one POST, one re-read.
    let uncertain = "the result is uncertain: the Coder API did not confirm the start build in time; re-read the workspace's latest build before you retry";
    let rereads = format!("/api/v2/workspaces/{}", workspace.id);
    for fault in [
        Fault::ServerError(502),
        Fault::ServerError(504),
        Fault::DropConnection,
    ] {
        env.fault("POST", "/api/v2/workspaces/", fault.clone());
        env.server.clear_requests();
        let answer = env.transition(&name, "start", "", None).await;
        assert_eq!(
            (answer.status, answer.message()),
            (StatusCode::GATEWAY_TIMEOUT, uncertain),
            "{fault:?}"
        );
        let requests = env.requests();
        assert_eq!(
            requests.iter().filter(|r| is_build_post(r)).count(),
            1,
            "{fault:?}: {requests:?}"
        );
        assert_eq!(
            requests.iter().filter(|r| r.path == rereads).count(),
            1,
            "{fault:?}: {requests:?}"
        );
        env.server.clear_faults();
    }
    assert_eq!(
        env.client
            .workspace(workspace.id)
            .await
            .unwrap()
            .latest_build
            .transition,
        Transition::Stop,
        "no start was queued"
    );

    // A Coder answer that is certain is passed on without a re-read.
    env.fault(
        "POST",
        "/api/v2/workspaces/",
        Fault::Answer {
            status: 400,
            headers: Vec::new(),
            body: json!({"message": "Missing required parameter \"region\"."}),
        },
    );
    env.server.clear_requests();
    let refused = env.transition(&name, "start", "", None).await;
    assert_eq!(
        (refused.status, refused.message()),
        (StatusCode::BAD_REQUEST, "Missing required parameter \"region\".")
    );
    assert!(
        env.requests().iter().all(|r| r.path != rereads),
        "{:?}",
        env.requests()
    );

    // A stalled lookup ends within the budget with a 504 that names no URL, and nothing is posted.
    env.fault("GET", "/api/v2/users/", Fault::Latency(Duration::from_secs(30)));
    env.server.clear_requests();
    let started = std::time::Instant::now();
    let stalled = env.transition(&name, "start", "", None).await;
    assert_eq!(stalled.status, StatusCode::GATEWAY_TIMEOUT, "{stalled:?}");
    assert!(!stalled.message().contains("127.0.0.1"), "{stalled:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    env.server.clear_faults();

    // A POST that gets no answer within the budget while another user starts the workspace: that build does not
    // confirm this request's POST, so the answer is the uncertain 504, within the budget. (Last: the stalled POST
    // may still reach the test server later.)
    let other = env.server.mint_token("bob", &["owner"]).await.unwrap();
    let bob = CoderClient::new(env.server.url(), SessionToken::new(other)).unwrap();
    env.fault(
        "POST",
        "/api/v2/workspaces/",
        Fault::Latency(Duration::from_secs(30)),
    );
    env.server.clear_requests();
    let started = std::time::Instant::now();
    let request = env.transition(&name, "start", "", None);
    let competitor = async {
        eventually("the request's POST", async || {
            env.requests().iter().any(is_build_post).then_some(())
        })
        .await;
        // Past the fault rule, which that POST has taken.
        tokio::time::sleep(Duration::from_millis(100)).await;
        bob.create_workspace_build(
            workspace.id,
            &CreateWorkspaceBuildRequest::transition(Transition::Start),
        )
        .await
        .unwrap()
    };
    let (answer, competing) = tokio::join!(request, competitor);
    assert_eq!(
        (answer.status, answer.message()),
        (StatusCode::GATEWAY_TIMEOUT, uncertain)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let requests = env.requests();
    assert_eq!(
        requests.iter().filter(|r| r.path == rereads).count(),
        1,
        "{requests:?}"
    );
    assert_eq!(
        env.client.workspace(workspace.id).await.unwrap().latest_build.id,
        competing.id,
        "the re-read saw the other user's build"
    );
}

#[tokio::test]
async fn the_transition_body_is_checked_before_coder_is_asked() {
    let env = default_env("body").await;
    env.coder_workspace("dev", None, &env.template).await;
    let name = env.name("dev");
    env.server.clear_requests();
    let other = format!(
        r#"{{"metadata":{{"name":"{}.{OWNER}.other"}}}}"#,
        env.organization
    );
    let answer = env.transition(&name, "stop", "", Some(&other)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{answer:?}");
    assert_eq!(
        answer.message(),
        format!(
            "metadata.name \"{}.{OWNER}.other\" in the request body must match the workspace name {name:?} in the URL",
            env.organization
        )
    );
    let wrong_kind = env
        .transition(&name, "stop", "", Some(r#"{"kind":"CoderWorkspace"}"#))
        .await;
    assert_eq!(wrong_kind.status, StatusCode::BAD_REQUEST, "{wrong_kind:?}");
    assert!(env.requests().is_empty(), "{:?}", env.requests());
    // A status in the body is ignored, and a GET is not served.
    let ignored = env
        .transition(
            &name,
            "stop",
            "",
            Some(r#"{"status":{"outcome":"Unchanged","dryRun":true,"buildID":"x"}}"#),
        )
        .await;
    assert_eq!(ignored.body["status"]["outcome"], "Queued", "{ignored:?}");
    assert!(ignored.body["status"].get("dryRun").is_none());
    let get = env
        .send(Method::GET, &format!("{BASE}/{name}/stop"), "", None)
        .await;
    assert_eq!(get.status, StatusCode::METHOD_NOT_ALLOWED, "{get:?}");
}

#[tokio::test]
async fn coder_refusals_and_timeouts_of_writes_keep_their_status_and_never_name_coder() {
    let env = default_env("write-errors").await;
    env.coder_workspace("dev", None, &env.template).await;
    let name = env.name("dev");
    let coder_url = env.server.url().to_string();

    env.fault(
        "POST",
        &format!("/api/v2/users/{OWNER}/workspaces"),
        Fault::RateLimited { retry_after_secs: 7 },
    );
    let limited = env.json(Method::POST, BASE, &env.manifest("new", true)).await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS, "{limited:?}");
    assert_eq!(limited.body["details"]["retryAfterSeconds"], 7);

    env.fault("POST", "/api/v2/workspaces/", Fault::Forbidden);
    let forbidden = env
        .send(Method::DELETE, &format!("{BASE}/{name}"), "", None)
        .await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN, "{forbidden:?}");

    // A Coder call that outlives the request's timeout is a 504 that does not name the Coder URL.
    env.fault(
        "POST",
        &format!("/api/v2/users/{OWNER}/workspaces"),
        Fault::Latency(Duration::from_secs(10)),
    );
    let started = std::time::Instant::now();
    let slow = env
        .send(
            Method::POST,
            &format!("{BASE}?timeout=1s"),
            "application/json",
            Some(env.manifest("slow", true).to_string()),
        )
        .await;
    assert_eq!(slow.status, StatusCode::GATEWAY_TIMEOUT, "{slow:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    for leak in [coder_url.as_str(), "127.0.0.1", &env.token] {
        assert!(!slow.body.to_string().contains(leak), "{slow:?}");
        assert!(!limited.body.to_string().contains(leak), "{limited:?}");
    }
}

#[tokio::test]
async fn a_patch_is_applied_again_when_the_workspace_changed_between_its_read_and_its_write() {
    let env = default_env("patch-retry").await;
    let workspace = env.coder_workspace("dev", None, &env.template).await;
    let name = env.name("dev");
    let lookup = format!("/api/v2/users/{OWNER}/workspace/dev");
    let item = format!("{BASE}/{name}");
    // The patch's read passes; the update's own read waits while another client stops the workspace.
    env.fault("GET", &lookup, Fault::Latency(Duration::ZERO));
    env.fault("GET", &lookup, Fault::Latency(Duration::from_millis(1500)));
    env.server.clear_requests();
    let patch = env.send(
        Method::PATCH,
        &item,
        "application/merge-patch+json",
        Some(r#"{"spec":{"running":false}}"#.to_owned()),
    );
    let competitor = async {
        eventually("the update's read", async || {
            (env.requests().iter().filter(|r| r.path == lookup).count() == 2).then_some(())
        })
        .await;
        env.client
            .create_workspace_build(
                workspace.id,
                &CreateWorkspaceBuildRequest::transition(Transition::Stop),
            )
            .await
            .unwrap();
        env.settled(workspace.id).await
    };
    let (answer, stopped) = tokio::join!(patch, competitor);
    assert_eq!(stopped.latest_build.transition, Transition::Stop);
    // Applied again to the stopped workspace, the patch changes nothing: 200, and the only build is the other's.
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["spec"]["running"], false);
    assert_eq!(
        answer.body["status"]["latestBuildID"],
        stopped.latest_build.id.to_string()
    );
    let requests = env.requests();
    assert_eq!(
        requests.iter().filter(|r| is_build_post(r)).count(),
        1,
        "{requests:?}"
    );
    assert_eq!(
        requests.iter().filter(|r| r.path == lookup).count(),
        4,
        "{requests:?}"
    );

    // A patch that names the resourceVersion it read is not applied again: the conflict is the caller's.
    let current = env.get(&name).await.body;
    env.fault("GET", &lookup, Fault::Latency(Duration::ZERO));
    env.fault("GET", &lookup, Fault::Latency(Duration::from_millis(1500)));
    env.server.clear_requests();
    let pinned = json!({"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                        "spec": {"running": true}});
    let patch = env.send(
        Method::PATCH,
        &item,
        "application/merge-patch+json",
        Some(pinned.to_string()),
    );
    let competitor = async {
        eventually("the update's read", async || {
            (env.requests().iter().filter(|r| r.path == lookup).count() == 2).then_some(())
        })
        .await;
        env.client
            .create_workspace_build(
                workspace.id,
                &CreateWorkspaceBuildRequest::transition(Transition::Start),
            )
            .await
            .unwrap()
    };
    let (answer, _) = tokio::join!(patch, competitor);
    assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");
    assert!(
        answer.message().contains("resource version mismatch"),
        "{answer:?}"
    );
}
