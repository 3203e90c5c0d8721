//! A user's life as Coder v2.30.0 runs it: `POST /users` (`postUser`, `CreateUser`), `DELETE /users/{user}`
//! (`deleteUser`) and the password login `POST /users/login` (`postLogin`), each check in Coder's order with its
//! status and text; passwords kept as Coder's `pbkdf2-sha256` hashes (`crate::password`).

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::JsonBody;
use super::users::render_user;
use crate::auth::{self, Auth, SESSION_COOKIE};
use crate::db::NewUser;
use crate::errors::{ApiError, ApiResult, created, ok};
use crate::password;
use crate::rbac::Caller;
use crate::state::App;
use crate::util::{valid_email, valid_name, valid_user_real_name};

/// The detail of an action dbauthz refuses (`NotAuthorizedError` around RBAC's error).
const UNAUTHORIZED: &str = "unauthorized: rbac: forbidden";
const PASSWORD: &str = "password";

/// Go's `encoding/json` gives an object's key to the field of that JSON name in any case (an exact name first) and
/// skips unknown keys; `null` decodes to nothing. The object with each key of `fields` under its own spelling, for
/// serde; anything that is neither an object nor `null` stays as it is (and fails to decode, as in Go).
fn go_keys(value: Value, fields: &[&'static str]) -> Value {
    let map = match value {
        Value::Object(map) => map,
        Value::Null => return json!({}),
        other => return other,
    };
    let mut out = serde_json::Map::new();
    for field in fields {
        let exact = map.get(*field);
        let folded = || {
            map.iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(field))
                .map(|(_, value)| value)
        };
        if let Some(value) = exact.or_else(folded) {
            out.insert((*field).to_owned(), value.clone());
        }
    }
    Value::Object(out)
}

/// Decodes a request body as Go would into the type whose JSON names are `fields`.
fn decode<T: serde::de::DeserializeOwned>(
    body: &JsonBody<Value>,
    fields: &[&'static str],
) -> Result<T, ApiError> {
    serde_json::from_value(go_keys(body.parse()?, fields))
        .map_err(|e| ApiError::bad_request("Request body must be valid JSON.").detail(e.to_string()))
}

/// Coder's `CreateUserRequestWithOrgs`, with the `organization_id` its decoder still appends to the list.
#[derive(Deserialize)]
struct CreateUser {
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    login_type: Option<String>,
    #[serde(default)]
    user_status: Option<String>,
    #[serde(default)]
    organization_ids: Option<Vec<Uuid>>,
    #[serde(default)]
    organization_id: Option<Uuid>,
}

const CREATE_USER_FIELDS: &[&str] = &[
    "email",
    "username",
    "name",
    "password",
    "login_type",
    "user_status",
    "organization_ids",
    "organization_id",
];

/// `POST /users` (Coder's `postUser` and `CreateUser`), its checks in Coder's order: the key; the body and its
/// validation (`email` `required,email`, `username` `required,username`, `name` `user_real_name`); the login type
/// (`password` when empty), a password with another login type 400; no organization 400; a user (not deleted,
/// system users too) with this username or email in any case: 409 `User already exists.` if the caller may read it,
/// else Coder's 500 `Internal error fetching user.`; each organization (the nil UUID is the default one; a deleted one
/// counts), one that is missing or that the caller may not read 404; the login type: `none` and `github`, `password`
/// with a password `userpassword.Validate` accepts (else 400 `Password is invalid`), `oidc` only with
/// `Config::oidc_configured` (else 400), any other 400; a caller who may not create users (only owners and user
/// admins may) 403 `You are not authorized to create users.`; then the user (status `dormant` unless given, no site
/// roles) and its memberships (no roles) in one statement: an unknown status or an organization given twice is
/// Coder's 500 and nothing is written. 201 with the user, its organizations in the request's order.
pub(super) async fn create_user(State(app): State<App>, auth: Auth, body: JsonBody<Value>) -> ApiResult {
    let body: CreateUser = decode(&body, CREATE_USER_FIELDS)?;
    let email = body.email.unwrap_or_default();
    let username = body.username.unwrap_or_default();
    let name = body.name.unwrap_or_default();
    let password = body.password.unwrap_or_default();
    let mut failures = Vec::new();
    if email.is_empty() {
        failures.push(("email", "required", email.as_str()));
    } else if !valid_email(&email) {
        failures.push(("email", "email", email.as_str()));
    }
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
    let login_type = body
        .login_type
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| PASSWORD.to_owned());
    if login_type != PASSWORD && !password.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Password cannot be set for non-password ({login_type:?}) authentication."
        )));
    }
    let mut requested = body.organization_ids.unwrap_or_default();
    requested.extend(body.organization_id);
    if requested.is_empty() {
        return Err(ApiError::bad_request(
            "No organization specified to place the user as a member of. It is required to specify at least one \
             organization id to place the user in.",
        )
        .detail("required at least 1 value for the array 'organization_ids'")
        .validation("organization_ids", "Missing values, this cannot be empty"));
    }
    let caller = Caller::of(&app, &auth).await?;
    if let Some((existing, _)) = app.db.user_by_email_or_username(&username, &email).await? {
        if !caller.reads_user(existing.id) {
            return Err(
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal error fetching user.")
                    .detail(UNAUTHORIZED),
            );
        }
        return Err(ApiError::conflict("User already exists."));
    }
    let mut organization_ids = Vec::with_capacity(requested.len());
    for id in requested {
        match app.db.organization_by_id_any(id).await? {
            Some(org) if caller.reads_organization(org) => organization_ids.push(org),
            _ => {
                return Err(ApiError::not_found().retitle(format!(
                    "Organization does not exist with the provided id \"{id}\"."
                )));
            }
        }
    }
    match login_type.as_str() {
        "none" | "github" => {}
        PASSWORD => {
            if let Err(why) = password::validate(&password) {
                return Err(ApiError::bad_request("Password is invalid").validation(PASSWORD, why));
            }
        }
        "oidc" if app.oidc_configured => {}
        "oidc" => {
            return Err(ApiError::bad_request(
                "You must configure OIDC before creating OIDC users.",
            ));
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "Unsupported login type {other:?} for manually creating new users."
            )));
        }
    }
    if !caller.creates_users() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "You are not authorized to create users.",
        ));
    }
    let hashed_password = if password.is_empty() {
        String::new()
    } else {
        tokio::task::spawn_blocking(move || password::hash(&password))
            .await
            .map_err(ApiError::internal)?
            .map_err(ApiError::internal)?
    };
    let new_user = NewUser {
        email: &email,
        username: &username,
        name: &name,
        hashed_password: hashed_password.as_bytes(),
        login_type: &login_type,
        status: body.user_status.as_deref().unwrap_or_default(),
        organization_ids: &organization_ids,
    };
    let user = app
        .db
        .insert_user(&new_user)
        .await
        .map_err(|e| creation_failed(&e, &organization_ids))?;
    let mut rendered = render_user(&app, &user).await?;
    rendered["organization_ids"] = json!(organization_ids);
    created(rendered)
}

/// Coder's 500 for a failed user insert: its transaction's error, naming the organization a membership failed for
/// (the first one given twice) or else the user insert, with lib/pq's `pq: <message>`.
fn creation_failed(err: &tokio_postgres::Error, organization_ids: &[Uuid]) -> ApiError {
    let Some(db) = err.as_db_error() else {
        return ApiError::internal(err);
    };
    let step = if db.constraint() == Some("organization_members_pkey") {
        let repeated = organization_ids
            .iter()
            .enumerate()
            .find(|(i, id)| organization_ids[..*i].contains(id))
            .map(|(_, id)| *id)
            .unwrap_or_default();
        format!("create organization member for \"{repeated}\"")
    } else {
        "create user".to_owned()
    };
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal error creating user.")
        .detail(format!("execute transaction: {step}: pq: {}", db.message()))
}

/// `DELETE /users/{user}` (Coder's `deleteUser`), its checks in Coder's order: the key; the user (a UUID finds a
/// deleted user too; one the caller may not read is the 400 of an unknown user); the caller itself 403 `You cannot
/// delete yourself!`; a user who owns a workspace that is not deleted 417; a caller who may not delete users (only
/// owners and user admins may; a user admin may delete an owner) 403 `Forbidden.`. The row is marked deleted and its
/// API keys go (memberships stay, as in Coder); its username and email are free again. 200 with Coder's message.
pub(super) async fn delete_user(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    delete(&app, &auth, &param).await
}

/// `DELETE /users/first`: Coder's router has no such route and tries `/users/{user}` with the user `first`.
pub(super) async fn delete_first(State(app): State<App>, auth: Auth) -> ApiResult {
    delete(&app, &auth, "first").await
}

async fn delete(app: &App, auth: &Auth, param: &str) -> ApiResult {
    let caller = Caller::of(app, auth).await?;
    let user = auth::readable_user(app, auth, &caller, param).await?;
    if user.id == auth.user.id {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "You cannot delete yourself!",
        ));
    }
    let has_workspaces = app
        .mem()
        .workspaces
        .iter()
        .any(|w| w.owner.0 == user.id && !w.deleted);
    if has_workspaces {
        return Err(ApiError::new(
            StatusCode::EXPECTATION_FAILED,
            "You cannot delete a user that has workspaces. Delete their workspaces and try again!",
        ));
    }
    if !caller.creates_users() {
        return Err(ApiError::forbidden());
    }
    app.db.delete_user(user.id).await?;
    ok(json!({ "message": "User has been deleted!" }))
}

/// Coder's `LoginWithPasswordRequest`.
#[derive(Deserialize)]
struct Login {
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// Coder's 500 of a login that fails inside (no detail).
fn login_failed() -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal error.")
}

/// `POST /users/{user}`: the login for `login`. Coder's router serves `POST /users/login` and, for any other method
/// there, tries `/users/{user}` with the user `login` (as `GET /users/login` then looks that user up), so the test
/// server routes `/users/login` as a `{user}`; a `POST` to any other user has no route (405).
pub(super) async fn post_user(
    State(app): State<App>,
    Path(param): Path<String>,
    body: JsonBody<Value>,
) -> ApiResult {
    if param == "login" {
        login(&app, &body).await
    } else {
        Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "Method not allowed.",
        ))
    }
}

/// `POST /users/login` (Coder's `postLogin` and `loginRequest`), without a key, its checks in Coder's order: the
/// body and its validation (`email` `required,email`, `password` `required`); the user with this email in any case
/// (not deleted); the password against its hash (a missing user or an empty hash compares as `hunter2`, as Coder's
/// simulated hash does; a hash Coder cannot read, such as `TestServer::mint_token`'s users have, is its 500
/// `Internal error.`): a mismatch 401 `Incorrect email or password.`; a login type other than `password` (`""` for a
/// missing user) 403; a dormant user becomes active and seen; a user who is not active then 401 `Your account is
/// <status>. …`. 201 with `session_token`, a 24-hour key of login type `password`, also set as the session cookie.
async fn login(app: &App, body: &JsonBody<Value>) -> ApiResult {
    let body: Login = decode(body, &["email", "password"])?;
    let email = body.email.unwrap_or_default();
    let password = body.password.unwrap_or_default();
    let mut failures = Vec::new();
    if email.is_empty() {
        failures.push(("email", "required", email.as_str()));
    } else if !valid_email(&email) {
        failures.push(("email", "email", email.as_str()));
    }
    if password.is_empty() {
        failures.push(("password", "required", ""));
    }
    if !failures.is_empty() {
        return Err(ApiError::validation_failed(&failures));
    }
    let found = app.db.user_by_email_or_username("", &email).await?;
    let hashed = found.as_ref().map(|(_, h)| h.clone()).unwrap_or_default();
    let equal = tokio::task::spawn_blocking(move || password::compare(&hashed, &password))
        .await
        .map_err(|_| login_failed())?
        .map_err(|_| login_failed())?;
    if !equal {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Incorrect email or password.",
        ));
    }
    let login_type = found.as_ref().map_or("", |(u, _)| u.login_type.as_str());
    if login_type != PASSWORD {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "Incorrect login type, attempting to use {PASSWORD:?} but user is of login type {login_type:?}"
            ),
        ));
    }
    let Some((mut user, _)) = found else {
        return Err(login_failed());
    };
    if user.status == "dormant" {
        user = app
            .db
            .activate_signed_in_user(user.id)
            .await?
            .ok_or_else(login_failed)?;
    }
    if user.status != "active" {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!(
                "Your account is {}. Contact an admin to reactivate your account.",
                user.status
            ),
        ));
    }
    let token = app.db.insert_login_key(user.id).await.map_err(|e| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Failed to create API key.")
            .detail(format!("insert API key: {e}"))
    })?;
    let cookie = format!("{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax");
    let mut response = created(json!({ "session_token": token }))?;
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    Ok(response)
}
