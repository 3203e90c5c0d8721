//! Template archives: `POST /files`, `GET /files/{id}`.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::json;
use uuid::Uuid;

use crate::auth::Auth;
use crate::errors::{ApiError, ApiResult, created, ok, parse_uuid};
use crate::state::{App, File};

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/files", post(upload))
        .route("/files/{id}", get(download))
}

async fn upload(State(app): State<App>, auth: Auth, headers: HeaderMap, body: Bytes) -> ApiResult {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if content_type != "application/x-tar" && content_type != "application/zip" {
        return Err(
            ApiError::bad_request(format!("Unsupported content type header {content_type:?}."))
                .detail("Only \"application/x-tar\" and \"application/zip\" are supported."),
        );
    }
    let hash = crate::util::sha256(&body);
    let mut mem = app.mem();
    if let Some(existing) = mem
        .files
        .iter()
        .find(|f| f.hash == hash && f.created_by == auth.user.id)
    {
        return ok(json!({ "hash": existing.id }));
    }
    let id = Uuid::new_v4();
    mem.files.push(File {
        id,
        hash,
        created_by: auth.user.id,
        content_type,
        data: body,
    });
    created(json!({ "hash": id }))
}

/// Raw bytes with the stored content type (`?format=zip` conversion is not simulated).
async fn download(State(app): State<App>, _auth: Auth, Path(id): Path<String>) -> ApiResult {
    let id = parse_uuid(&id)?;
    let mem = app.mem();
    let file = mem
        .files
        .iter()
        .find(|f| f.id == id)
        .ok_or_else(ApiError::not_found)?;
    let mut response = (StatusCode::OK, file.data.clone()).into_response();
    if let Ok(value) = HeaderValue::from_str(&file.content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    Ok(response)
}
