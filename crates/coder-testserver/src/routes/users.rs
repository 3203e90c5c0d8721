//! Users and API tokens, read from and written to Coder's PostgreSQL: the user reads, the profile, status and site
//! role writes (Coder's `putUserProfile`, `putUserStatus`, `putUserRoles`), tokens; the routes of creating, deleting
//! and signing in users (`user_lifecycle`).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::routing::{delete, get, put};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{JsonBody, flag, query_params, user_lifecycle};
use crate::auth::{self, Auth};
use crate::db::User;
use crate::errors::{ApiError, ApiResult, created, no_content, ok};
use crate::rbac::{self, Caller};
use crate::state::App;
use crate::util::{valid_name, valid_user_real_name};

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/users", get(list_users).post(user_lifecycle::create_user))
        .route(
            "/users/first",
            get(first_user).delete(user_lifecycle::delete_first),
        )
        .route(
            "/users/{user}",
            get(get_user)
                .delete(user_lifecycle::delete_user)
                .post(user_lifecycle::post_user),
        )
        .route("/users/{user}/roles", get(user_roles).put(put_roles))
        .route("/users/{user}/profile", put(put_profile))
        .route("/users/{user}/status/suspend", put(suspend))
        .route("/users/{user}/status/activate", put(activate))
        .route("/users/{user}/keys/tokens", get(list_tokens).post(create_token))
        .route("/users/{user}/keys/tokens/{name}", get(get_token))
        .route("/users/{user}/keys/{id}", delete(delete_token))
}

/// Go's rendering of the zero `time.Time`: the `last_seen_at` of a user who never signed in.
const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

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
        "roles": user.rbac_roles.iter().map(|r| rbac::slim_site_role(r)).collect::<Vec<_>>(),
    });
    for (key, value) in [("name", &user.name), ("avatar_url", &user.avatar_url)] {
        if !value.is_empty() {
            body[key] = json!(value);
        }
    }
    body["last_seen_at"] = if user.last_seen_at.starts_with("0001-01-01T00:00:00.000000") {
        json!(ZERO_TIME)
    } else {
        json!(user.last_seen_at)
    };
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

/// `GET /users/{user}/roles` (`UserRoles`): site role names, and role names per organization the user is in. Coder's
/// `userRoles` reads the memberships with `OrganizationMembers` and `IncludeSystem: false`, so a system user (the
/// operator) has no organization roles there: `{}`; nor has a deleted user (that query leaves deleted users out).
async fn user_roles(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    let user = auth::user(&app, &auth, &param).await?;
    let memberships = if user.is_system || user.deleted {
        Vec::new()
    } else {
        app.db.memberships(user.id).await?
    };
    let organization_roles: serde_json::Map<String, Value> = memberships
        .into_iter()
        .map(|(id, roles)| (id.to_string(), json!(roles)))
        .collect();
    ok(json!({ "roles": user.rbac_roles, "organization_roles": organization_roles }))
}

async fn get_user(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    let user = auth::user(&app, &auth, &param).await?;
    ok(render_user(&app, &user).await?)
}

/// The text of a write Coder's RBAC refuses.
const UNAUTHORIZED: &str = "unauthorized: rbac: forbidden";

/// `UpdateUserProfileRequest`; a `null` reads as empty, as Go's decoder leaves the field alone.
#[derive(Deserialize)]
struct UpdateProfile {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

/// `PUT /users/{user}/profile` (Coder's `putUserProfile`), its checks in Coder's order: the key, the user (a user
/// the caller may not read is Coder's 400), the body and its validation (`username`: `required,username`; `name`:
/// `user_real_name`); a changed username (compared exactly) needs `update` on users, which only owners and user
/// admins have (anyone else, the user itself too, gets Coder's 404); a username another user has (any case, system
/// users too) is a 409; then the update (`update_personal`: the user itself, owners, user admins; anyone else gets
/// Coder's 500). Sets the username, the name and `updated_at`; 200 with the user.
async fn put_profile(
    State(app): State<App>,
    auth: Auth,
    Path(param): Path<String>,
    body: JsonBody<UpdateProfile>,
) -> ApiResult {
    let caller = Caller::of(&app, &auth).await?;
    let user = auth::readable_user(&app, &auth, &caller, &param).await?;
    let body = body.parse()?;
    let username = body.username.unwrap_or_default();
    let name = body.name.unwrap_or_default();
    let mut failures = Vec::new();
    if username.is_empty() {
        failures.push(("username", "required", username.as_str()));
    } else if !valid_name(&username) {
        failures.push(("username", "username", username.as_str()));
    }
    if !valid_user_real_name(&name) {
        failures.push(("name", "user_real_name", name.as_str()));
    }
    if !failures.is_empty() {
        return Err(ApiError::validation_failed(&failures));
    }
    if username != user.username && !caller.updates_users() {
        return Err(ApiError::not_found());
    }
    if let Some(existing) = app.db.user_by_username(&username).await?
        && existing.id != user.id
    {
        return Err(ApiError::conflict("A user with this username already exists.")
            .validation("username", "This username is already in use."));
    }
    if !caller.updates_personal(user.id) {
        return Err(
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal error updating user.")
                .detail(UNAUTHORIZED),
        );
    }
    let updated = app
        .db
        .update_user_profile(user.id, &username, &name)
        .await?
        .ok_or_else(ApiError::not_found)?;
    ok(render_user(&app, &updated).await?)
}

async fn suspend(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    put_status(&app, &auth, &param, "suspended").await
}

async fn activate(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    put_status(&app, &auth, &param, "active").await
}

/// `PUT /users/{user}/status/suspend` and `/status/activate` (Coder's `putUserStatus`): the key, the user (Coder's
/// 400 for one the caller may not read); a suspend of the caller itself is a 400 `You cannot suspend yourself.`, of
/// an owner a 400 (the owner role must go first); then the update, which needs `update` on users (owners and user
/// admins; anyone else gets Coder's 500). Any status may be set again (suspending a suspended user, activating an
/// active or dormant one); `updated_at` advances, `last_seen_at` stays. 200 with the user.
async fn put_status(app: &App, auth: &Auth, param: &str, status: &str) -> ApiResult {
    let caller = Caller::of(app, auth).await?;
    let user = auth::readable_user(app, auth, &caller, param).await?;
    if status == "suspended" {
        if user.id == auth.user.id {
            return Err(ApiError::bad_request("You cannot suspend yourself."));
        }
        if user.is_owner() {
            return Err(ApiError::bad_request(
                "You cannot suspend a user with the \"owner\" role. You must remove the role first.",
            ));
        }
    }
    if !caller.updates_users() {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Internal error updating user's status to {status:?}."),
        )
        .detail(UNAUTHORIZED));
    }
    let updated = app
        .db
        .update_user_status(user.id, status)
        .await?
        .ok_or_else(ApiError::not_found)?;
    ok(render_user(app, &updated).await?)
}

/// `UpdateRoles`; a `null` or left-out `roles` is no roles.
#[derive(Deserialize)]
pub(super) struct UpdateRoles {
    #[serde(default)]
    pub(super) roles: Option<Vec<String>>,
}

/// `PUT /users/{user}/roles` (Coder's `putUserRoles` and dbauthz's `UpdateUserRoles`), its checks in Coder's order:
/// the key, the user (Coder's 400 for one the caller may not read); the caller's own roles 400 `You cannot change
/// your own roles.`; the body; the change against the stored roles, with the implicit `member` always in the new set
/// (so it always counts as added unless stored): a role that is not a site role Coder knows 400 `"<role>" is not a
/// supported role` (the first, added before removed); a caller who may not assign site roles (only owners and user
/// admins may) 403 `Forbidden.`; a role the caller may not assign (user admins only `member`) 400 `not authorized to
/// assign role "<role>"`. The roles sent replace the stored ones, duplicates dropped (an explicit `member` is stored
/// and shown); `updated_at` stays. 200 with the user.
async fn put_roles(
    State(app): State<App>,
    auth: Auth,
    Path(param): Path<String>,
    body: JsonBody<UpdateRoles>,
) -> ApiResult {
    let caller = Caller::of(&app, &auth).await?;
    let user = auth::readable_user(&app, &auth, &caller, &param).await?;
    if user.id == auth.user.id {
        return Err(ApiError::bad_request("You cannot change your own roles."));
    }
    let roles = body.parse()?.roles.unwrap_or_default();
    let mut wanted = roles.clone();
    wanted.push(rbac::MEMBER.to_owned());
    let (added, removed) = rbac::change_role_set(&user.rbac_roles, &wanted);
    let granted: Vec<&String> = added.iter().chain(&removed).collect();
    if let Some(unknown) = granted.iter().find(|r| !rbac::is_site_role(r)) {
        return Err(ApiError::bad_request(format!(
            "{unknown:?} is not a supported role"
        )));
    }
    if !caller.assigns_site_roles() {
        return Err(ApiError::forbidden());
    }
    if let Some(refused) = granted.iter().find(|r| !caller.may_assign_site_role(r)) {
        return Err(ApiError::bad_request(format!(
            "not authorized to assign role {refused:?}"
        )));
    }
    let updated = app
        .db
        .update_user_roles(user.id, &roles)
        .await?
        .ok_or_else(ApiError::not_found)?;
    ok(render_user(&app, &updated).await?)
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
