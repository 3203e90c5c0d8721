//! The request pipeline: open health paths, then authentication, authorization and dispatch to discovery, OpenAPI
//! and the verb handlers (get, list, watch, create, update, patch, delete) over a resource's storage. Every request
//! is logged at debug with an audit id that is echoed in the `Audit-Id` response header.

mod params;
mod patch;
mod read;
pub(crate) mod respond;
mod write;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

use super::auth::{Attributes, Decision, PeerCertificates, ResourceAttributes, UserInfo};
use super::encoded_lists::EncodedLists;
use super::negotiate::{self, Answering, ResponseFormat};
use super::registry::{ResourceDef, Verb};
use super::request_info::{self, RequestInfo, ResourceRequest};
use super::server::ApiServer;
use super::status::ApiError;
use super::storage::{EventType, RequestContext};
use super::tls::ServerStopping;
use super::watch::{Broadcaster, WatchHub};
use super::{discovery, openapi};

use params::Query;
pub use params::{MAX_BODY_BYTES, parse_go_duration};

/// What every request of one router shares: the server and the watch broadcasters of its resources.
pub struct Shared {
    pub server: ApiServer,
    pub hub: WatchHub,
    /// Lists kept encoded while their storage keeps their objects.
    pub encoded_lists: EncodedLists,
}

/// The paths answered without authentication.
const OPEN_PATHS: [&str; 3] = ["/healthz", "/livez", "/readyz"];

/// The axum handler for every path.
pub async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let started = std::time::Instant::now();
    let audit_id = audit_id(request.headers());
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().map(str::to_owned);
    let user_agent = header_str(request.headers(), header::USER_AGENT.as_str()).to_owned();
    let (mut response, user) = serve(&shared, request).await;
    if let Ok(value) = HeaderValue::from_str(&audit_id) {
        response.headers_mut().insert("Audit-Id", value);
    }
    let status = response.status().as_u16();
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    if !OPEN_PATHS.contains(&path.as_str()) {
        let seconds = started.elapsed().as_secs_f64();
        let metrics = &shared.server.settings.metrics;
        metrics.observe(&method, &path, query.as_deref(), status, seconds);
    }
    macro_rules! log_request {
        ($level:ident) => {
            tracing::$level!(%method, path, user, user_agent, status, audit_id, latency_ms, "request")
        };
    }
    // Failures of this server and every write are logged by default; reads (kube-apiserver's discovery and
    // availability checks among them) only at debug level.
    match log_level(&method, status) {
        tracing::Level::WARN => log_request!(warn),
        tracing::Level::INFO => log_request!(info),
        _ => log_request!(debug),
    }
    response
}

/// How a request is logged: 5xx as warnings, writes as info, reads as debug.
fn log_level(method: &http::Method, status: u16) -> tracing::Level {
    if status >= 500 {
        tracing::Level::WARN
    } else if matches!(*method, http::Method::GET | http::Method::HEAD) {
        tracing::Level::DEBUG
    } else {
        tracing::Level::INFO
    }
}

/// The answer and the name of the authenticated user (empty when there is none).
async fn serve(shared: &Shared, request: Request) -> (Response, String) {
    if let Some(response) = health(&shared.server, request.uri().path()) {
        return (response, String::new());
    }
    let (parts, body) = request.into_parts();
    let user = match authenticate(&shared.server, &parts).await {
        Ok(user) => user,
        Err(err) => return (err.into_response(), String::new()),
    };
    let response = authorize_and_dispatch(shared, parts, body, &user)
        .await
        .unwrap_or_else(IntoResponse::into_response);
    (response, user.name)
}

fn health(server: &ApiServer, path: &str) -> Option<Response> {
    if !OPEN_PATHS.contains(&path) {
        return None;
    }
    if path == "/readyz" && !server.is_ready() {
        return Some(
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "readyz check failed: not ready\n",
            )
                .into_response(),
        );
    }
    Some(
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "ok",
        )
            .into_response(),
    )
}

async fn authenticate(server: &ApiServer, parts: &Parts) -> Result<UserInfo, ApiError> {
    let peer = parts.extensions.get::<PeerCertificates>();
    server
        .authenticator
        .authenticate(peer, &parts.headers)
        .await?
        .ok_or_else(ApiError::unauthorized)
}

async fn authorize_and_dispatch(
    shared: &Shared,
    parts: Parts,
    body: Body,
    user: &UserInfo,
) -> Result<Response, ApiError> {
    let query = Query::parse(parts.uri.query());
    let info = request_info::parse(&parts.method, parts.uri.path(), query.watch())?;
    authorize(&shared.server, &attributes(user, &info)).await?;
    match info {
        RequestInfo::NonResource { path, .. } => {
            // The OpenAPI v3 documents read their `?hash=` from the query.
            let target = match parts.uri.query() {
                Some(query) => format!("{path}?{query}"),
                None => path,
            };
            non_resource(&shared.server, &target, &parts.headers)
        }
        RequestInfo::Resource(info) => resource(shared, parts, body, &query, &info, user).await,
    }
}

/// Asks the authorizer; a denial is kube-apiserver's 403 and a failure to decide refuses the request (500).
async fn authorize(server: &ApiServer, attributes: &Attributes) -> Result<(), ApiError> {
    match server.authorizer.authorize(attributes).await {
        Ok(Decision::Allow) => Ok(()),
        Ok(Decision::Deny(reason)) => Err(forbidden(attributes, &reason)),
        Err(err) => Err(ApiError::internal(format!(
            "authorization could not be decided, so the request was refused: {}",
            err.message
        ))),
    }
}

/// The SubjectAccessReview attributes of a request.
pub fn attributes(user: &UserInfo, info: &RequestInfo) -> Attributes {
    match info {
        RequestInfo::NonResource { path, verb } => Attributes {
            user: user.clone(),
            verb: verb.clone(),
            resource: None,
            path: Some(path.clone()),
        },
        RequestInfo::Resource(r) => Attributes {
            user: user.clone(),
            verb: r.verb.as_str().to_owned(),
            resource: Some(ResourceAttributes {
                group: r.group.clone(),
                version: r.version.clone(),
                resource: r.resource.clone(),
                subresource: r.subresource.clone().unwrap_or_default(),
                namespace: r.namespace.clone().unwrap_or_default(),
                name: r.name.clone().unwrap_or_default(),
            }),
            path: None,
        },
    }
}

/// kube-apiserver's 403: `<resource>.<group> "<name>" is forbidden: User "<u>" cannot <verb> resource ...`, with the
/// authorizer's reason after `: ` when it gave one.
pub fn forbidden(attributes: &Attributes, reason: &str) -> ApiError {
    let user = &attributes.user.name;
    let verb = &attributes.verb;
    let Some(r) = &attributes.resource else {
        let path = attributes.path.as_deref().unwrap_or_default();
        let message = with_reason(format!("User {user:?} cannot {verb} path {path:?}"), reason);
        return ApiError::forbidden(format!("forbidden: {message}"));
    };
    let mut resource = r.resource.clone();
    if !r.subresource.is_empty() {
        resource = format!("{resource}/{}", r.subresource);
    }
    let scope = if r.namespace.is_empty() {
        "at the cluster scope".to_owned()
    } else {
        format!("in the namespace {:?}", r.namespace)
    };
    let message = with_reason(
        format!(
            "User {user:?} cannot {verb} resource {resource:?} in API group {:?} {scope}",
            r.group
        ),
        reason,
    );
    let qualified = if r.group.is_empty() {
        r.resource.clone()
    } else {
        format!("{}.{}", r.resource, r.group)
    };
    let prefix = if r.name.is_empty() {
        qualified
    } else {
        format!("{qualified} {:?}", r.name)
    };
    ApiError::forbidden(format!("{prefix} is forbidden: {message}")).with_details(
        &r.name,
        &r.group,
        &r.resource,
    )
}

fn with_reason(message: String, reason: &str) -> String {
    if reason.is_empty() {
        message
    } else {
        format!("{message}: {reason}")
    }
}

fn non_resource(server: &ApiServer, path: &str, headers: &HeaderMap) -> Result<Response, ApiError> {
    discovery::answer(&server.registry, path, headers)
        .or_else(|| openapi::answer(&server.registry, path, headers))
        .ok_or_else(request_info::not_found)
}

/// Routes a resource request to its verb handler once the group, version, resource and scope are known.
async fn resource(
    shared: &Shared,
    parts: Parts,
    body: Body,
    query: &Query,
    info: &ResourceRequest,
    user: &UserInfo,
) -> Result<Response, ApiError> {
    let registry = &shared.server.registry;
    if info.group != registry.group || info.version != registry.version {
        return Err(request_info::not_found());
    }
    let def = registry
        .resource(&info.resource)
        .ok_or_else(request_info::not_found)?;
    check_scope(def, info)?;
    // Refused before the body is read: a write to a read-only resource must not upload it first.
    if info.subresource.is_none() && !def.serves(info.verb) {
        return Err(method_not_allowed());
    }
    let ctx = params::request_context(&shared.server.settings, query, info, user)?;
    let body = match info.verb {
        Verb::Create | Verb::Update | Verb::Patch | Verb::Delete => {
            tokio::time::timeout_at(ctx.deadline, params::read_body(body))
                .await
                .map_err(|_| {
                    ApiError::timeout("the request body did not arrive within the request timeout")
                })??
        }
        _ => Bytes::new(),
    };
    let call = Call {
        shared,
        def,
        info,
        ctx,
        headers: &parts.headers,
        query,
        body,
        stopping: parts.extensions.get::<ServerStopping>().map(|s| s.0.clone()),
    };
    // Storage calls can authorize further actions of the caller (see `caller`).
    let authorizer = shared.server.authorizer.clone();
    if let Some(subresource) = &info.subresource {
        return super::caller::with_authorizer(
            authorizer,
            write::subresource(call, subresource, parts.method),
        )
        .await;
    }
    super::caller::with_authorizer(authorizer, dispatch_verb(call)).await
}

async fn dispatch_verb(call: Call<'_>) -> Result<Response, ApiError> {
    match call.info.verb {
        Verb::Get => read::get(call).await,
        Verb::List => read::list(call).await,
        Verb::Watch => read::watch(call).await,
        Verb::Create => write::create(call).await,
        Verb::Update => write::update(call).await,
        Verb::Patch => patch::patch(call).await,
        Verb::Delete => write::delete(call).await,
        Verb::DeleteCollection => Err(ApiError::method_not_allowed(
            "deletecollection is not supported by this server; delete the objects one by one",
        )),
    }
}

/// Namespaced resources are addressed inside a namespace except for the all-namespaces list and watch;
/// cluster-scoped resources never are. kube-apiserver has no route for the other combinations.
fn check_scope(def: &ResourceDef, info: &ResourceRequest) -> Result<(), ApiError> {
    let collection_read = matches!(info.verb, Verb::List | Verb::Watch) && info.name.is_none();
    let ok = match (def.namespaced, &info.namespace) {
        (true, Some(_)) | (false, None) => true,
        (true, None) => collection_read,
        (false, Some(_)) => false,
    };
    if ok {
        Ok(())
    } else {
        Err(request_info::not_found())
    }
}

pub(crate) fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed("the server does not allow this method on the requested resource")
}

/// One resource request being served.
pub(crate) struct Call<'a> {
    pub shared: &'a Shared,
    pub def: &'a ResourceDef,
    pub info: &'a ResourceRequest,
    pub ctx: RequestContext,
    pub headers: &'a HeaderMap,
    pub query: &'a Query,
    pub body: Bytes,
    /// Turns true when the server begins to shut down (absent where the router is served without [`tls::serve`]).
    pub stopping: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Call<'_> {
    fn broadcaster(&self) -> Option<&Arc<Broadcaster>> {
        self.shared.hub.get(self.def.plural)
    }

    /// Tells watchers about a successful write.
    fn publish(&self, event: Option<EventType>, object: &Value) {
        if let (Some(event), Some(broadcaster)) = (event, self.broadcaster()) {
            broadcaster.publish(event, object.clone());
        }
    }

    /// Runs a storage call within the request's deadline: 504 Timeout when it takes longer.
    async fn within<T>(&self, call: impl Future<Output = Result<T, ApiError>>) -> Result<T, ApiError> {
        tokio::time::timeout_at(self.ctx.deadline, call)
            .await
            .unwrap_or_else(|_| Err(params::timeout_error()))
    }

    fn format(&self, answering: Answering) -> Result<ResponseFormat, ApiError> {
        negotiate::response_format(self.headers, answering, self.query.get("includeObject"))
    }

    fn group_version(&self) -> String {
        self.shared.server.registry.group_version()
    }

    fn name(&self) -> Result<&str, ApiError> {
        self.info.name.as_deref().ok_or_else(method_not_allowed)
    }

    /// A write that is about to create the object it names (server-side apply of a missing object) needs `create`
    /// as well as the request's own verb, as kube-apiserver asks: the caller must be allowed to create this object
    /// before anything reaches the storage's backend.
    async fn authorize_create(&self) -> Result<(), ApiError> {
        let mut request = self.info.clone();
        request.verb = Verb::Create;
        request.subresource = None;
        let create = attributes(&self.ctx.user, &RequestInfo::Resource(request));
        authorize(&self.shared.server, &create).await
    }
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The client's `Audit-Id` when it is a sensible token (kube-apiserver forwards its own), else a new UUID.
fn audit_id(headers: &HeaderMap) -> String {
    let given = header_str(headers, "Audit-Id");
    let sensible = !given.is_empty()
        && given.len() <= 128
        && given
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if sensible {
        given.to_owned()
    } else {
        uuid::Uuid::new_v4().to_string()
    }
}

/// A 200 response whose body streams (a watch).
pub(crate) fn streaming(content_type: &'static str, body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(body)
        .unwrap_or_else(|_| ApiError::internal("could not build the response").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_writes_are_logged_by_default_reads_at_debug() {
        assert_eq!(log_level(&http::Method::GET, 503), tracing::Level::WARN);
        assert_eq!(log_level(&http::Method::POST, 500), tracing::Level::WARN);
        assert_eq!(log_level(&http::Method::DELETE, 200), tracing::Level::INFO);
        assert_eq!(log_level(&http::Method::PATCH, 409), tracing::Level::INFO);
        assert_eq!(log_level(&http::Method::GET, 200), tracing::Level::DEBUG);
        assert_eq!(log_level(&http::Method::GET, 403), tracing::Level::DEBUG);
    }

    fn alice() -> UserInfo {
        UserInfo {
            name: "alice".into(),
            ..Default::default()
        }
    }

    fn resource_attributes(namespace: &str, name: &str, subresource: &str) -> Attributes {
        Attributes {
            user: alice(),
            verb: "list".into(),
            resource: Some(ResourceAttributes {
                group: "aggregation.coder.com".into(),
                version: "v1alpha1".into(),
                resource: "coderworkspaces".into(),
                subresource: subresource.into(),
                namespace: namespace.into(),
                name: name.into(),
            }),
            path: None,
        }
    }

    #[test]
    fn forbidden_wording_matches_kube_apiserver() {
        let err = forbidden(&resource_attributes("team-a", "", ""), "");
        assert_eq!(
            err.message,
            "coderworkspaces.aggregation.coder.com is forbidden: User \"alice\" cannot list resource \"coderworkspaces\" in API group \"aggregation.coder.com\" in the namespace \"team-a\""
        );
        assert_eq!((err.code, err.reason), (403, "Forbidden"));
        let err = forbidden(&resource_attributes("", "a.b.c", "log"), "RBAC: no binding");
        assert_eq!(
            err.message,
            "coderworkspaces.aggregation.coder.com \"a.b.c\" is forbidden: User \"alice\" cannot list resource \"coderworkspaces/log\" in API group \"aggregation.coder.com\" at the cluster scope: RBAC: no binding"
        );
    }

    #[test]
    fn forbidden_non_resource_path() {
        let attributes = Attributes {
            user: alice(),
            verb: "get".into(),
            resource: None,
            path: Some("/openapi/v2".into()),
        };
        assert_eq!(
            forbidden(&attributes, "").message,
            "forbidden: User \"alice\" cannot get path \"/openapi/v2\""
        );
    }

    #[test]
    fn audit_ids_are_kept_only_when_sensible() {
        let mut headers = HeaderMap::new();
        headers.insert("Audit-Id", HeaderValue::from_static("abc-123"));
        assert_eq!(audit_id(&headers), "abc-123");
        headers.insert("Audit-Id", HeaderValue::from_static("a b\"c"));
        assert_eq!(audit_id(&headers).len(), 36);
        assert_eq!(audit_id(&HeaderMap::new()).len(), 36);
    }
}
