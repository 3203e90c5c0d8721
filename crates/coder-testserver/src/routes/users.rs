//! Users and API tokens, read from and written to Coder's PostgreSQL.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::routing::{delete, get};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{JsonBody, flag, query_params};
use crate::auth::{self, Auth};
use crate::db::User;
use crate::errors::{ApiError, ApiResult, created, no_content, ok};
use crate::state::App;

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/users", get(list_users))
        .route("/users/first", get(first_user))
        .route("/users/{user}", get(get_user))
        .route("/users/{user}/roles", get(user_roles))
        .route("/users/{user}/keys/tokens", get(list_tokens).post(create_token))
        .route("/users/{user}/keys/tokens/{name}", get(get_token))
        .route("/users/{user}/keys/{id}", delete(delete_token))
}

fn role_display_name(role: &str) -> String {
    match role {
        "owner" => "Owner".to_owned(),
        "template-admin" => "Template Admin".to_owned(),
        "user-admin" => "User Admin".to_owned(),
        "auditor" => "Auditor".to_owned(),
        "member" => "Member".to_owned(),
        other => crate::config::humanize_feature(&other.replace('-', "_")),
    }
}

/// `User` JSON (`codersdk.User`).
pub(super) async fn render_user(app: &App, user: &User) -> Result<Value, ApiError> {
    let organization_ids: Vec<_> = app
        .db
        .memberships(user.id)
        .await?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let mut body = json!({
        "id": user.id,
        "username": user.username,
        "email": user.email,
        "created_at": user.created_at,
        "updated_at": user.updated_at,
        "status": user.status,
        "login_type": user.login_type,
        "organization_ids": organization_ids,
        "roles": user.rbac_roles.iter()
            .map(|r| json!({ "name": r, "display_name": role_display_name(r) }))
            .collect::<Vec<_>>(),
    });
    for (key, value) in [("name", &user.name), ("avatar_url", &user.avatar_url)] {
        if !value.is_empty() {
            body[key] = json!(value);
        }
    }
    if !user.last_seen_at.starts_with("0001-") {
        body["last_seen_at"] = json!(user.last_seen_at);
    }
    Ok(body)
}

async fn first_user(State(app): State<App>) -> ApiResult {
    let client = app.db.client().await?;
    let row = client
        .query_one(
            "SELECT count(*) FROM users WHERE deleted = false AND is_system = false",
            &[],
        )
        .await?;
    let count: i64 = row.try_get(0)?;
    if count == 0 {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "The initial user has not been created!",
        ));
    }
    ok(json!({ "message": "The initial user has already been created!" }))
}

/// `GET /users` (`GetUsersResponse`): every user for an owner, else only the caller (Coder filters the list by
/// what the caller may read). No search or paging.
async fn list_users(State(app): State<App>, auth: Auth) -> ApiResult {
    let users = if auth.is_owner() {
        app.db.users().await?
    } else {
        vec![auth.user.clone()]
    };
    let mut rendered = Vec::with_capacity(users.len());
    for user in &users {
        rendered.push(render_user(&app, user).await?);
    }
    ok(json!({ "users": rendered, "count": users.len() }))
}

/// `GET /users/{user}/roles` (`UserRoles`): site role names, and role names per organization the user is in.
async fn user_roles(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    let user = auth::user(&app, &auth, &param).await?;
    let organization_roles: serde_json::Map<String, Value> = app
        .db
        .memberships(user.id)
        .await?
        .into_iter()
        .map(|(id, roles)| (id.to_string(), json!(roles)))
        .collect();
    ok(json!({ "roles": user.rbac_roles, "organization_roles": organization_roles }))
}

async fn get_user(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    let user = auth::user(&app, &auth, &param).await?;
    ok(render_user(&app, &user).await?)
}

const MAX_ADMIN_LIFETIME_NS: i64 = 168 * 3600 * 1_000_000_000;
const MAX_LIFETIME_NS: i64 = 876_600 * 3600 * 1_000_000_000;
const DEFAULT_LIFETIME_SECONDS: i64 = 168 * 3600;

#[derive(Deserialize)]
struct CreateToken {
    #[serde(default)]
    lifetime: i64,
    #[serde(default)]
    token_name: String,
}

async fn create_token(
    State(app): State<App>,
    auth: Auth,
    Path(param): Path<String>,
    body: JsonBody<CreateToken>,
) -> ApiResult {
    let body = body.parse()?;
    let user = auth::user_for_write(&app, &auth, &param).await?;
    if user.is_system {
        return Err(ApiError::forbidden());
    }
    let max = if user.is_owner() {
        MAX_ADMIN_LIFETIME_NS
    } else {
        MAX_LIFETIME_NS
    };
    if body.lifetime < 0 || body.lifetime > max {
        return Err(
            ApiError::bad_request("Failed to validate create API key request.").detail(format!(
                "lifetime must be positive and at most {}h",
                max / 3_600_000_000_000
            )),
        );
    }
    let lifetime_seconds = if body.lifetime == 0 {
        DEFAULT_LIFETIME_SECONDS
    } else {
        body.lifetime / 1_000_000_000
    };
    let name = if body.token_name.is_empty() {
        format!(
            "token-{}",
            crate::util::random_hex(4).map_err(ApiError::internal)?
        )
    } else {
        body.token_name
    };
    let client = app.db.client().await?;
    let exists = client
        .query_opt(
            "SELECT 1 FROM api_keys WHERE user_id = $1 AND token_name = $2 AND login_type = 'token'::login_type",
            &[&user.id, &name],
        )
        .await?;
    if exists.is_some() {
        return Err(ApiError::conflict(format!(
            "A token with name {name:?} already exists."
        )));
    }
    let (id, secret) = app
        .db
        .insert_token(user.id, Some(&name), lifetime_seconds)
        .await
        .map_err(ApiError::internal)?;
    created(json!({ "key": format!("{id}-{secret}") }))
}

const TOKEN_SELECT: &str = "SELECT k.id, k.user_id, \
    to_char(k.last_used AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), \
    to_char(k.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), \
    to_char(k.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), \
    to_char(k.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), \
    k.login_type::text, k.scopes::text[], k.token_name, k.lifetime_seconds, k.allow_list, u.username \
    FROM api_keys k JOIN users u ON u.id = k.user_id";

fn render_token(row: &tokio_postgres::Row) -> Result<Value, tokio_postgres::Error> {
    let allow_list: Vec<String> = row.try_get(10)?;
    Ok(json!({
        "id": row.try_get::<_, String>(0)?,
        "user_id": row.try_get::<_, uuid::Uuid>(1)?,
        "last_used": row.try_get::<_, String>(2)?,
        "expires_at": row.try_get::<_, String>(3)?,
        "created_at": row.try_get::<_, String>(4)?,
        "updated_at": row.try_get::<_, String>(5)?,
        "login_type": row.try_get::<_, String>(6)?,
        "scope": "all",
        "scopes": row.try_get::<_, Vec<String>>(7)?,
        "token_name": row.try_get::<_, String>(8)?,
        "lifetime_seconds": row.try_get::<_, i64>(9)?,
        "allow_list": allow_list.iter().map(|entry| {
            let (kind, id) = entry.split_once(':').unwrap_or((entry.as_str(), ""));
            json!({ "type": kind, "id": id })
        }).collect::<Vec<_>>(),
        "username": row.try_get::<_, String>(11)?,
    }))
}

async fn list_tokens(State(app): State<App>, auth: Auth, Path(param): Path<String>, uri: Uri) -> ApiResult {
    let user = auth::user_for_write(&app, &auth, &param).await?;
    let include_all = flag(&query_params(&uri), "include_all") && auth.is_owner();
    let client = app.db.client().await?;
    let rows = if include_all {
        let sql = format!("{TOKEN_SELECT} WHERE k.login_type = 'token'::login_type ORDER BY k.created_at");
        client.query(&sql, &[]).await?
    } else {
        let sql = format!(
            "{TOKEN_SELECT} WHERE k.login_type = 'token'::login_type AND k.user_id = $1 ORDER BY k.created_at"
        );
        client.query(&sql, &[&user.id]).await?
    };
    let tokens = rows.iter().map(render_token).collect::<Result<Vec<_>, _>>()?;
    ok(Value::Array(tokens))
}

async fn get_token(
    State(app): State<App>,
    auth: Auth,
    Path((param, name)): Path<(String, String)>,
) -> ApiResult {
    let user = auth::user_for_write(&app, &auth, &param).await?;
    let client = app.db.client().await?;
    let sql = format!(
        "{TOKEN_SELECT} WHERE k.login_type = 'token'::login_type AND k.user_id = $1 AND k.token_name = $2"
    );
    let row = client
        .query_opt(&sql, &[&user.id, &name])
        .await?
        .ok_or_else(ApiError::not_found)?;
    ok(render_token(&row)?)
}

async fn delete_token(
    State(app): State<App>,
    auth: Auth,
    Path((param, id)): Path<(String, String)>,
) -> ApiResult {
    let user = auth::user_for_write(&app, &auth, &param).await?;
    let client = app.db.client().await?;
    let deleted = client
        .execute(
            "DELETE FROM api_keys WHERE id = $1 AND user_id = $2",
            &[&id, &user.id],
        )
        .await?;
    if deleted == 0 {
        return Err(ApiError::not_found());
    }
    no_content()
}
