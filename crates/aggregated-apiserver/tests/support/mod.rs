//! The in-process harness: a registry of test resources over [`MemoryStorage`], a header-driven authenticator, an
//! authorizer that denies one user and fails for another, and helpers to send requests through the router.
// Each test binary uses a part of the harness.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use coder_k8s_aggregated_apiserver::generic::memory::MemoryStorage;
use coder_k8s_aggregated_apiserver::generic::server::ServerSettings;
use coder_k8s_aggregated_apiserver::generic::{
    ApiError, ApiServer, Attributes, Authenticator, Authorizer, Decision, Deleted, EventType,
    PeerCertificates, Registry, RequestContext, ResourceDef, Storage, SubresourceDef, SubresourceHandler,
    SubresourceRequest, UserInfo, Verb, Written,
};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::{Value, json};
use tower::ServiceExt;

pub const GROUP: &str = "test.example.com";
const USER_HEADER: &str = "x-test-user";
const ALL_VERBS: &[Verb] = &[
    Verb::Get,
    Verb::List,
    Verb::Watch,
    Verb::Create,
    Verb::Update,
    Verb::Patch,
    Verb::Delete,
];

/// A user from the `x-test-user` header; `authn-broken` makes authentication fail (503).
struct HeaderAuthenticator;

#[async_trait]
impl Authenticator for HeaderAuthenticator {
    async fn authenticate(
        &self,
        _peer: Option<&PeerCertificates>,
        headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, ApiError> {
        match headers.get(USER_HEADER).and_then(|v| v.to_str().ok()) {
            None => Ok(None),
            Some("authn-broken") => Err(ApiError::service_unavailable("token review is unreachable")),
            Some(name) => Ok(Some(UserInfo {
                name: name.to_owned(),
                ..Default::default()
            })),
        }
    }
}

/// Allows everyone except `mallory` (denied with a reason), `authz-broken` (an error) and `patcher` (every verb but
/// `create`, as a user bound to get, list, watch, update, patch and delete); records every call.
#[derive(Default)]
struct RecordingAuthorizer {
    log: Mutex<Vec<Attributes>>,
}

#[async_trait]
impl Authorizer for RecordingAuthorizer {
    async fn authorize(&self, attributes: &Attributes) -> Result<Decision, ApiError> {
        if let Ok(mut log) = self.log.lock() {
            log.push(attributes.clone());
        }
        match attributes.user.name.as_str() {
            "mallory" => Ok(Decision::Deny("no RBAC rule allows it".into())),
            "authz-broken" => Err(ApiError::internal("subject access review failed")),
            "patcher" if attributes.verb == "create" => Ok(Decision::Deny(String::new())),
            _ => Ok(Decision::Allow),
        }
    }
}

/// Answers 201 with what it was given, so tests can see the name and dry-run flag a subresource receives.
struct EchoPoke;

#[async_trait]
impl SubresourceHandler for EchoPoke {
    async fn handle(&self, request: SubresourceRequest) -> Result<Response, ApiError> {
        let body = json!({"name": request.name, "dryRun": request.ctx.dry_run});
        Ok((StatusCode::CREATED, axum::Json(body)).into_response())
    }
}

/// A storage whose reads take longer than any test waits.
struct SlowStorage;

#[async_trait]
impl Storage for SlowStorage {
    async fn get(&self, _ctx: &RequestContext, _name: &str) -> Result<Value, ApiError> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(json!({}))
    }

    async fn list(&self, _ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(Vec::new())
    }
}

/// Memory storage whose deletes are only accepted (a Success Status and a MODIFIED event), as a backend that
/// deletes asynchronously answers.
struct AcceptingDeletes(MemoryStorage);

#[async_trait]
impl Storage for AcceptingDeletes {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        self.0.get(ctx, name).await
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        self.0.list(ctx).await
    }

    async fn create(&self, ctx: &RequestContext, object: Value) -> Result<Written, ApiError> {
        self.0.create(ctx, object).await
    }

    async fn delete(
        &self,
        ctx: &RequestContext,
        name: &str,
        _options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let object = self.0.get(ctx, name).await?;
        Ok(Deleted::Success {
            object: Some(object),
            event: Some(EventType::Modified),
        })
    }
}

/// Memory storage whose first read of any name finds an object that is gone by the write, as when someone deletes
/// it between an apply's read and its write. Later reads see the memory storage as it is.
struct VanishingStorage {
    memory: MemoryStorage,
    ghost_served: AtomicBool,
}

#[async_trait]
impl Storage for VanishingStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        if !self.ghost_served.swap(true, Ordering::SeqCst) {
            let mut ghost = thing(name, json!({}));
            ghost["kind"] = "VanishingThing".into();
            ghost["metadata"]["resourceVersion"] = "1".into();
            return Ok(ghost);
        }
        self.memory.get(ctx, name).await
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        self.memory.list(ctx).await
    }

    async fn update(
        &self,
        ctx: &RequestContext,
        name: &str,
        object: Value,
        allow_create: bool,
    ) -> Result<Written, ApiError> {
        self.memory.update(ctx, name, object, allow_create).await
    }
}

fn resource(
    plural: &'static str,
    kind: &'static str,
    list_kind: &'static str,
    verbs: &'static [Verb],
    storage: Arc<dyn Storage>,
) -> ResourceDef {
    ResourceDef {
        plural,
        singular: kind,
        kind,
        list_kind,
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs,
        schema: json!({"type": "object"}),
        columns: Vec::new(),
        subresources: Vec::new(),
        storage,
        watch_feed: None,
    }
}

fn registry() -> Registry {
    let mut things = resource(
        "things",
        "Thing",
        "ThingList",
        ALL_VERBS,
        Arc::new(MemoryStorage::new(GROUP, "things")),
    );
    things.singular = "thing";
    things.subresources.push(SubresourceDef {
        name: "poke",
        kind: "Poke",
        verbs: &[Verb::Create],
        handler: Arc::new(EchoPoke),
    });
    Registry {
        group: GROUP,
        version: "v1",
        resources: vec![
            things,
            resource(
                "readonlythings",
                "ReadOnlyThing",
                "ReadOnlyThingList",
                &[Verb::Get, Verb::List],
                Arc::new(MemoryStorage::new(GROUP, "readonlythings")),
            ),
            resource(
                "slowthings",
                "SlowThing",
                "SlowThingList",
                ALL_VERBS,
                Arc::new(SlowStorage),
            ),
            resource(
                "lazythings",
                "LazyThing",
                "LazyThingList",
                ALL_VERBS,
                Arc::new(AcceptingDeletes(MemoryStorage::new(GROUP, "lazythings"))),
            ),
            resource(
                "vanishingthings",
                "VanishingThing",
                "VanishingThingList",
                ALL_VERBS,
                Arc::new(VanishingStorage {
                    memory: MemoryStorage::new(GROUP, "vanishingthings"),
                    ghost_served: AtomicBool::new(false),
                }),
            ),
        ],
    }
}

pub fn thing(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "test.example.com/v1",
        "kind": "Thing",
        "metadata": {"name": name, "labels": labels},
        "spec": {"n": 1},
    })
}

/// A collected response.
pub struct Collected {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Collected {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

pub struct Harness {
    router: Router,
    ready: Arc<AtomicBool>,
    authorizer: Arc<RecordingAuthorizer>,
    /// The server's request metrics.
    pub metrics: coder_k8s_aggregated_apiserver::generic::metrics::RequestMetrics,
}

impl Harness {
    pub fn new() -> Self {
        let ready = Arc::new(AtomicBool::new(false));
        let authorizer = Arc::new(RecordingAuthorizer::default());
        let server = ApiServer {
            registry: Arc::new(registry()),
            authenticator: Arc::new(HeaderAuthenticator),
            authorizer: authorizer.clone(),
            ready: ready.clone(),
            settings: ServerSettings {
                request_timeout: Duration::from_secs(2),
                bookmark_interval: Duration::from_millis(200),
                min_watch_timeout: Duration::from_secs(2),
                ..ServerSettings::default()
            },
        };
        Self {
            router: server.router(),
            ready,
            authorizer,
            metrics: server.settings.metrics.clone(),
        }
    }

    /// The router, for tests that serve it on a socket.
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    pub fn authorizer_log(&self) -> Vec<Attributes> {
        self.authorizer.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Sends a request and returns the response head with the body unread (for watches).
    pub async fn request(&self, request: Request<Body>) -> Response {
        match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    pub async fn open(&self, method: Method, path: &str, user: Option<&str>) -> Response {
        self.request(build(method, path, user, &[], Body::empty())).await
    }

    pub async fn send(&self, method: Method, path: &str, user: Option<&str>) -> Collected {
        collect(self.open(method, path, user).await).await
    }

    pub async fn send_with(&self, method: Method, path: &str, headers: &[(&str, &str)]) -> Collected {
        collect(
            self.request(build(method, path, None, headers, Body::empty()))
                .await,
        )
        .await
    }

    pub async fn send_json(&self, method: Method, path: &str, user: Option<&str>, body: &Value) -> Collected {
        let request = build(
            method,
            path,
            user,
            &[("content-type", "application/json")],
            Body::from(body.to_string()),
        );
        collect(self.request(request).await).await
    }

    /// As alice, with a raw body of `content_type`.
    pub async fn send_raw(&self, method: Method, path: &str, content_type: &str, body: Vec<u8>) -> Collected {
        let request = build(
            method,
            path,
            Some("alice"),
            &[("content-type", content_type)],
            Body::from(body),
        );
        collect(self.request(request).await).await
    }

    /// Creates `name` under the collection `path` as alice and returns the stored object.
    pub async fn create(&self, path: &str, name: &str) -> Value {
        let mut object = thing(name, json!({}));
        // The server fills in the kind of the resource the path names.
        if let Some(fields) = object.as_object_mut() {
            fields.remove("kind");
        }
        let response = self.send_json(Method::POST, path, Some("alice"), &object).await;
        assert_eq!(
            response.status,
            StatusCode::CREATED,
            "create {name}: {}",
            response.text()
        );
        response.json()
    }
}

pub fn build(
    method: Method,
    path: &str,
    user: Option<&str>,
    headers: &[(&str, &str)],
    body: Body,
) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(user) = user {
        builder = builder.header(USER_HEADER, user);
    }
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(body).expect("a valid request")
}

pub async fn collect(response: Response) -> Collected {
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .expect("a readable body");
    Collected {
        status: parts.status,
        headers: parts.headers,
        body: body.to_vec(),
    }
}

/// Every event of a watch until its stream ends; `None` when it has not ended within `limit`.
pub async fn read_watch(response: Response, limit: Duration) -> Option<Vec<Value>> {
    let mut stream = response.into_body().into_data_stream();
    let mut buffer = Vec::new();
    let read_all = async {
        while let Some(chunk) = stream.next().await {
            buffer.extend_from_slice(&chunk.expect("a readable chunk"));
        }
    };
    tokio::time::timeout(limit, read_all).await.ok()?;
    let text = String::from_utf8(buffer).expect("UTF-8");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "events are newline-terminated: {text:?}"
    );
    Some(
        text.lines()
            .map(|line| serde_json::from_str(line).expect("one JSON event per line"))
            .collect(),
    )
}
