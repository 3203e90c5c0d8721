//! Provisioner keys (feature `external_provisioner_daemons`), the daemon list and the organization's provisioner jobs.

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
        .route("/organizations/{organization}/provisionerjobs", get(jobs))
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

/// The query parameters `GET /provisionerjobs` accepts; any other is a 400, as in Coder.
const JOB_PARAMS: [&str; 5] = ["limit", "status", "ids", "tags", "initiator"];

/// `GET /organizations/{organization}/provisionerjobs`: the organization's jobs, newest first, filtered by `status`
/// (a comma list), `tags` (a JSON object the job's tags contain) and `ids`, at most `limit` (default 50). Owners and
/// organization admins only; anyone else gets a 404, as in Coder.
async fn jobs(
    State(app): State<App>,
    auth: Auth,
    Path(org): Path<String>,
    uri: axum::http::Uri,
) -> ApiResult {
    let org = auth::organization(&app, &auth, &org).await?;
    auth.require_org_admin(&app, org.id)
        .await
        .map_err(|_| ApiError::not_found())?;
    let params = super::query_params(&uri);
    let invalid = |field: &str, detail: String| {
        ApiError::bad_request("Invalid query parameters.".to_owned()).validation(field, detail)
    };
    if let Some(extra) = params.keys().find(|k| !JOB_PARAMS.contains(&k.as_str())) {
        return Err(invalid(extra, format!("{extra:?} is not a valid query param")));
    }
    let limit = match params.get("limit") {
        None => 50,
        Some(text) => text.parse::<i32>().ok().filter(|l| *l > 0).ok_or_else(|| {
            invalid(
                "limit",
                format!("Query param \"limit\" must be a valid positive 32-bit integer ({text:?})"),
            )
        })?,
    };
    let statuses: Vec<&str> = params
        .get("status")
        .map(|s| s.split(',').filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    let tags: BTreeMap<String, String> = match params.get("tags") {
        None => BTreeMap::new(),
        Some(text) => serde_json::from_str(text).map_err(|_| {
            invalid(
                "tags",
                "Query param \"tags\" must be a valid JSON object".to_owned(),
            )
        })?,
    };
    let ids: Vec<String> = params
        .get("ids")
        .map(|s| s.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let mem = app.mem();
    let mut found: Vec<&crate::state::Job> = mem
        .jobs
        .values()
        .filter(|j| j.organization_id == org.id)
        .filter(|j| statuses.is_empty() || statuses.contains(&j.status()))
        .filter(|j| tags.iter().all(|(k, v)| j.tags.get(k) == Some(v)))
        .filter(|j| ids.is_empty() || ids.contains(&j.id.to_string()))
        .collect();
    found.sort_by_key(|j| std::cmp::Reverse(j.created_at));
    ok(found
        .into_iter()
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(|j| crate::provisioner::render_job(j, &mem))
        .collect())
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
