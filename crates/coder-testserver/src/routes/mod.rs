//! The `/api/v2` router, standard headers, the 404/405 fallbacks and shared extractors.

mod ai;
mod deployment;
mod files;
mod groups;
mod logs;
mod members;
mod organizations;
mod provisioner_keys;
mod template_acl;
mod template_settings;
mod templates;
mod user_lifecycle;
mod users;
mod workspace_proxies;
mod workspaces;

use std::collections::HashMap;

use axum::Router;
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::Response;
use serde::de::DeserializeOwned;

use crate::errors::{ApiError, json_response};
use crate::state::App;
pub(crate) use ai::render_mcp_with_acl;
pub(crate) use provisioner_keys::render_provisioner_key;

/// The whole application: routes, then (outermost first) request recording, fault injection, headers.
pub(crate) fn router(app: App) -> Router {
    let api = Router::new()
        .merge(deployment::routes())
        .merge(users::routes())
        .merge(organizations::routes())
        .merge(members::routes())
        .merge(groups::routes())
        .merge(provisioner_keys::routes())
        .merge(workspace_proxies::routes())
        .merge(files::routes())
        .merge(templates::routes())
        .merge(template_acl::routes())
        .merge(workspaces::routes())
        .merge(logs::routes())
        .merge(ai::routes());
    Router::new()
        .nest("/api/v2", api)
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(app.clone(), standard_headers))
        .layer(middleware::from_fn_with_state(
            app.clone(),
            crate::faults::apply_faults,
        ))
        .layer(middleware::from_fn_with_state(
            app.clone(),
            crate::recording::record,
        ))
        .with_state(app)
}

async fn route_not_found() -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        &serde_json::json!({"message": "Route not found."}),
    )
}

async fn method_not_allowed() -> Response {
    json_response(
        StatusCode::METHOD_NOT_ALLOWED,
        &serde_json::json!({"message": "Method not allowed."}),
    )
}

/// `X-Coder-Build-Version` and `X-Content-Type-Options`, which Coder adds to every API response.
pub(crate) fn add_standard_headers(app: &App, response: &mut Response) {
    if let Ok(version) = HeaderValue::from_str(&app.build_version) {
        response.headers_mut().insert("X-Coder-Build-Version", version);
    }
    response
        .headers_mut()
        .insert("X-Content-Type-Options", HeaderValue::from_static("nosniff"));
}

async fn standard_headers(State(app): State<App>, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    add_standard_headers(&app, &mut response);
    response
}

/// A JSON request body, parsed by the handler with [`JsonBody::parse`] after its middleware-equivalent
/// checks (auth, org, feature gate), as Coder reads the body last. Malformed -> 400
/// `Request body must be valid JSON.`.
pub(crate) struct JsonBody<T> {
    bytes: bytes::Bytes,
    target: std::marker::PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> JsonBody<T> {
    pub(crate) fn parse(&self) -> Result<T, ApiError> {
        serde_json::from_slice(&self.bytes)
            .map_err(|e| ApiError::bad_request("Request body must be valid JSON.").detail(e.to_string()))
    }
}

impl<T, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = bytes::Bytes::from_request(request, state)
            .await
            .map_err(|e| ApiError::bad_request("Request body must be valid JSON.").detail(e.to_string()))?;
        Ok(Self {
            bytes,
            target: std::marker::PhantomData,
        })
    }
}

/// Query parameters (last value wins); a key without value maps to `""`.
pub(crate) fn query_params(uri: &Uri) -> HashMap<String, String> {
    url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// `true` for a present, non-false boolean query flag (`?follow`, `?follow=true`).
pub(crate) fn flag(params: &HashMap<String, String>, name: &str) -> bool {
    params.get(name).is_some_and(|v| v != "false" && v != "0")
}
