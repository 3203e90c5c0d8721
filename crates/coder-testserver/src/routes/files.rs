//! Template archives: `POST /files`, `GET /files/{id}` (with `?format=zip`, a stored tar converted to zip).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
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

/// Raw bytes with the stored content type; `?format=zip` answers a zip (a stored tar is converted).
async fn download(State(app): State<App>, _auth: Auth, Path(id): Path<String>, uri: Uri) -> ApiResult {
    let id = parse_uuid(&id)?;
    if super::query_params(&uri)
        .get("format")
        .is_some_and(|f| f == "zip")
    {
        return download_zip(&app, id);
    }
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

// `?format=zip` (aggregated API, codertemplates): Coder converts a stored tar archive to zip.
fn download_zip(app: &App, id: Uuid) -> ApiResult {
    let (content_type, data) = {
        let mem = app.mem();
        let file = mem
            .files
            .iter()
            .find(|f| f.id == id)
            .ok_or_else(ApiError::not_found)?;
        (file.content_type.clone(), file.data.clone())
    };
    let zip = if content_type == "application/zip" {
        data
    } else {
        Bytes::from(tar_to_zip(&data).map_err(ApiError::internal)?)
    };
    let mut response = (StatusCode::OK, zip).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/zip"));
    Ok(response)
}

/// The regular files of a ustar archive, as a deflated zip (directories and other entry types left out).
fn tar_to_zip(tar: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Write as _;
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let mut at = 0;
    while at + 512 <= tar.len() {
        let header = &tar[at..at + 512];
        if header.iter().all(|b| *b == 0) {
            break;
        }
        let field = |range: std::ops::Range<usize>| {
            let raw = &header[range];
            let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
            String::from_utf8_lossy(&raw[..end]).trim().to_owned()
        };
        let size = usize::from_str_radix(&field(124..136), 8).map_err(|e| format!("tar size: {e}"))?;
        let prefix = field(345..500);
        let name = field(0..100);
        let name = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let start = at + 512;
        let content = tar
            .get(start..start + size)
            .ok_or_else(|| "tar entry runs past the archive".to_owned())?;
        if matches!(header[156], b'0' | 0) {
            writer.start_file(name, options).map_err(|e| e.to_string())?;
            writer.write_all(content).map_err(|e| e.to_string())?;
        }
        at = start + size.div_ceil(512) * 512;
    }
    Ok(writer.finish().map_err(|e| e.to_string())?.into_inner())
}
