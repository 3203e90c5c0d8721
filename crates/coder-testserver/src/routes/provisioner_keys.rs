//! Provisioner keys (feature `external_provisioner_daemons`) and the daemon list.

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{delete, get};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::JsonBody;
use crate::auth::{self, Auth, require_feature};
use crate::errors::{ApiError, ApiResult, created, no_content, ok};
use crate::state::{App, ProvisionerKey};
use crate::util::{constant_time_eq, random_alphanumeric, sha256};

const FEATURE: &str = "external_provisioner_daemons";
/// Built-in keys: id, name. Hidden from the list, undeletable, unusable as names.
const RESERVED: [(u128, &str); 3] = [(1, "built-in"), (2, "user-auth"), (3, "psk")];

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route(
            "/organizations/{organization}/provisionerkeys",
            get(list).post(create),
        )
        .route(
            "/organizations/{organization}/provisionerkeys/daemons",
            get(list_with_daemons),
        )
        .route(
            "/organizations/{organization}/provisionerkeys/{name}",
            delete(remove),
        )
        .route("/organizations/{organization}/provisionerdaemons", get(daemons))
        .route("/provisionerkeys/{key}", get(get_by_key))
}

/// `ProvisionerKey` JSON: the org id is in field `organization`.
pub(crate) fn render_provisioner_key(key: &ProvisionerKey) -> Value {
    json!({
        "id": key.id,
        "created_at": key.created_at,
        "organization": key.organization_id,
        "name": key.name,
        "tags": key.tags,
    })
}

/// API key -> org -> feature gate, as Coder's middleware order.
async fn org_gate(app: &App, auth: &Auth, param: &str) -> Result<crate::db::Organization, ApiError> {
    let org = auth::organization(app, auth, param).await?;
    require_feature(app, FEATURE)?;
    Ok(org)
}

async fn list(State(app): State<App>, auth: Auth, Path(org): Path<String>) -> ApiResult {
    let org = org_gate(&app, &auth, &org).await?;
    auth.require_org_admin(&app, org.id).await?;
    let mem = app.mem();
    ok(mem
        .provisioner_keys
        .iter()
        .filter(|k| k.organization_id == org.id)
        .map(render_provisioner_key)
        .collect())
}

#[derive(Deserialize)]
struct CreateKey {
    #[serde(default)]
    name: String,
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
}

fn name_error(text: String) -> ApiError {
    ApiError::bad_request(text.clone()).validation("name", text)
}

async fn create(
    State(app): State<App>,
    auth: Auth,
    Path(org): Path<String>,
    body: JsonBody<CreateKey>,
) -> ApiResult {
    let org = org_gate(&app, &auth, &org).await?;
    auth.require_org_admin(&app, org.id).await?;
    let body = body.parse()?;
    if body.name.is_empty() {
        return Err(name_error("Name is required".to_owned()));
    }
    if body.name.len() > 64 {
        return Err(name_error("Name must be at most 64 characters".to_owned()));
    }
    if RESERVED.iter().any(|(_, n)| n.eq_ignore_ascii_case(&body.name)) {
        return Err(name_error(format!(
            "Name cannot be reserved name '{}'",
            body.name
        )));
    }
    let secret = random_alphanumeric(43).map_err(ApiError::internal)?;
    let mut mem = app.mem();
    if mem
        .provisioner_keys
        .iter()
        .any(|k| k.organization_id == org.id && k.name.eq_ignore_ascii_case(&body.name))
    {
        return Err(ApiError::conflict(format!(
            "Provisioner key with name '{}' already exists in organization",
            body.name
        )));
    }
    mem.provisioner_keys.push(ProvisionerKey {
        id: Uuid::new_v4(),
        created_at: crate::util::now(),
        organization_id: org.id,
        name: body.name,
        hashed_secret: sha256(secret.as_bytes()),
        tags: body.tags.unwrap_or_default(),
    });
    created(json!({ "key": secret }))
}

async fn remove(State(app): State<App>, auth: Auth, Path((org, name)): Path<(String, String)>) -> ApiResult {
    let org = org_gate(&app, &auth, &org).await?;
    auth.require_org_admin(&app, org.id).await?;
    if RESERVED.iter().any(|(_, n)| n.eq_ignore_ascii_case(&name)) {
        return Err(ApiError::bad_request(format!(
            "Cannot delete reserved '{name}' provisioner key"
        )));
    }
    let mut mem = app.mem();
    let before = mem.provisioner_keys.len();
    mem.provisioner_keys
        .retain(|k| !(k.organization_id == org.id && k.name.eq_ignore_ascii_case(&name)));
    if mem.provisioner_keys.len() == before {
        return Err(ApiError::not_found());
    }
    no_content()
}

async fn list_with_daemons(State(app): State<App>, auth: Auth, Path(org): Path<String>) -> ApiResult {
    let org = org_gate(&app, &auth, &org).await?;
    auth.require_org_admin(&app, org.id).await?;
    let user_auth = json!({
        "id": Uuid::from_u128(RESERVED[1].0),
        "created_at": org.created_at,
        "organization": org.id,
        "name": RESERVED[1].1,
        "tags": {},
    });
    let mem = app.mem();
    let mut out = vec![json!({ "key": user_auth, "daemons": [] })];
    out.extend(
        mem.provisioner_keys
            .iter()
            .filter(|k| k.organization_id == org.id)
            .map(|k| json!({ "key": render_provisioner_key(k), "daemons": [] })),
    );
    ok(Value::Array(out))
}

/// No external daemons ever connect; the simulated built-in provisioner is not listed.
async fn daemons(State(app): State<App>, auth: Auth, Path(org): Path<String>) -> ApiResult {
    auth::organization(&app, &auth, &org).await?;
    ok(json!([]))
}

/// Authenticated by the key itself in `Coder-Provisioner-Daemon-Key`.
async fn get_by_key(State(app): State<App>, headers: HeaderMap, Path(_key): Path<String>) -> ApiResult {
    let invalid = |status| ApiError::new(status, "provisioner daemon key invalid");
    let Some(key) = headers
        .get("Coder-Provisioner-Daemon-Key")
        .and_then(|v| v.to_str().ok())
    else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "provisioner daemon key required",
        ));
    };
    if key.len() != 43 {
        return Err(invalid(StatusCode::BAD_REQUEST).detail("must be 43 characters"));
    }
    let hashed = sha256(key.as_bytes());
    let mem = app.mem();
    let found = mem
        .provisioner_keys
        .iter()
        .find(|k| constant_time_eq(&k.hashed_secret, &hashed))
        .ok_or_else(|| invalid(StatusCode::UNAUTHORIZED))?;
    ok(render_provisioner_key(found))
}
