//! Deployment identity and licensing: `/buildinfo`, `/entitlements`, `/licenses`.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{delete, get};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::JsonBody;
use crate::auth::Auth;
use crate::config::{Entitlement, FEATURE_NAMES};
use crate::errors::{ApiError, ApiResult, created, ok};
use crate::state::{App, License, lock};

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/buildinfo", get(buildinfo))
        .route("/entitlements", get(entitlements))
        .route("/licenses", get(list_licenses).post(add_license))
        .route("/licenses/{id}", delete(delete_license))
}

async fn buildinfo(State(app): State<App>) -> ApiResult {
    ok(json!({
        "external_url": "https://github.com/coder/coder",
        "version": app.build_version,
        "dashboard_url": format!("{}/", app.base_url()),
        "telemetry": false,
        "workspace_proxy": false,
        "agent_api_version": "2.0",
        "provisioner_api_version": "1.0",
        "upgrade_message": "",
        "deployment_id": app.deployment_id(),
    }))
}

/// Features whose `enabled` follows the entitlement alone (the rest are enabled when entitled, too; the
/// test server has no deployment flags that could disable them).
async fn entitlements(State(app): State<App>) -> ApiResult {
    let user_count = app.db.active_user_count().await?;
    let configured = lock(&app.entitlements).clone();
    let hidden = lock(&app.hidden_features).clone();
    let mut features = serde_json::Map::new();
    for name in FEATURE_NAMES
        .iter()
        .copied()
        .chain(configured.keys().map(String::as_str))
    {
        if hidden.contains(name) {
            continue;
        }
        let entitlement = configured.get(name).copied().unwrap_or(Entitlement::NotEntitled);
        let mut feature = json!({
            "entitlement": entitlement.as_str(),
            "enabled": entitlement.is_entitled(),
        });
        if name == "user_limit" {
            feature["actual"] = json!(user_count);
        }
        features.insert(name.to_owned(), feature);
    }
    let has_license = !app.mem().licenses.is_empty() || configured.values().any(|e| e.is_entitled());
    let warnings: Vec<String> = configured
        .iter()
        .filter(|(_, e)| **e == Entitlement::GracePeriod)
        .map(|(name, _)| {
            format!(
                "{} is enabled but your license for this feature is expired.",
                crate::config::humanize_feature(name)
            )
        })
        .collect();
    ok(json!({
        "features": features,
        "warnings": warnings,
        "errors": [],
        "has_license": has_license,
        "trial": false,
        "require_telemetry": false,
        "refreshed_at": crate::util::now(),
    }))
}

fn render_license(license: &License) -> Value {
    json!({
        "id": license.id,
        "uuid": license.uuid,
        "uploaded_at": license.uploaded_at,
        "claims": license.claims,
    })
}

async fn list_licenses(State(app): State<App>, auth: Auth) -> ApiResult {
    auth.require_owner()?;
    let mem = app.mem();
    ok(mem.licenses.iter().map(render_license).collect())
}

#[derive(Deserialize)]
struct AddLicense {
    #[serde(default)]
    license: String,
}

/// The JWT's payload as JSON (no signature check: acceptance is decided by `Config::accepted_licenses`).
fn claims_of(jwt: &str) -> Value {
    let payload = jwt.split('.').nth(1).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| json!({}))
}

async fn add_license(State(app): State<App>, auth: Auth, body: JsonBody<AddLicense>) -> ApiResult {
    auth.require_owner()?;
    let body = body.parse()?;
    if body.license.is_empty() {
        return Err(ApiError::required("license"));
    }
    if !app.accepted_licenses.contains(&body.license) {
        return Err(ApiError::bad_request("Invalid license")
            .detail("license is not among the test server's accepted licenses"));
    }
    let claims = claims_of(&body.license);
    if let Some(ids) = claims.get("deployment_ids").and_then(Value::as_array)
        && !ids.is_empty()
        && !ids
            .iter()
            .any(|id| id.as_str() == Some(app.deployment_id().as_str()))
    {
        return Err(
            ApiError::bad_request("License cannot be used on this deployment!").detail(format!(
                "The deployment ID {:?} is not in the license's deployment_ids.",
                app.deployment_id()
            )),
        );
    }
    let mut mem = app.mem();
    if mem.licenses.iter().any(|l| l.jwt == body.license) {
        return Err(ApiError::internal(
            "pq: duplicate key value violates unique constraint \"licenses_jwt_key\"",
        )
        .retitle("Unable to add license to database"));
    }
    let id = mem.licenses.iter().map(|l| l.id).max().unwrap_or(0) + 1;
    let license = License {
        id,
        uuid: Uuid::new_v4(),
        uploaded_at: crate::util::now(),
        jwt: body.license,
        claims,
    };
    let rendered = render_license(&license);
    mem.licenses.push(license);
    created(rendered)
}

async fn delete_license(State(app): State<App>, auth: Auth, Path(id): Path<String>) -> ApiResult {
    auth.require_owner()?;
    let id: i32 = id
        .parse()
        .map_err(|_| ApiError::new(StatusCode::NOT_FOUND, "License ID must be an integer"))?;
    let mut mem = app.mem();
    let before = mem.licenses.len();
    mem.licenses.retain(|l| l.id != id);
    if mem.licenses.len() == before {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "Unknown license ID"));
    }
    Ok(StatusCode::OK.into_response())
}
