//! Session-token authentication against Coder's PostgreSQL (`api_keys`, with sliding expiry), the
//! `X-Coder-Bypass-Ratelimit` check (owners only), licence feature gates, and path resolution of `{organization}`
//! (`default`, an ID or a name) and `{user}` (`me`, an ID or a username).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use uuid::Uuid;

use crate::config::humanize_feature;
use crate::db::{Organization, User};
use crate::errors::ApiError;
use crate::state::App;
use crate::util::{constant_time_eq, sha256};

pub(crate) const SESSION_COOKIE: &str = "coder_session_token";
pub(crate) const SESSION_HEADER: &str = "Coder-Session-Token";
const SIGNED_OUT: &str = "You are signed out or your session has expired. Please sign in again to continue.";

/// The token from, in order: cookie `coder_session_token`, query parameter `coder_session_token`, header
/// `Coder-Session-Token`.
pub(crate) fn session_token(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    let from_cookie = headers.get_all(header::COOKIE).iter().find_map(|value| {
        value.to_str().ok()?.split(';').find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == SESSION_COOKIE && !value.is_empty()).then(|| value.to_owned())
        })
    });
    let from_query = || {
        url::form_urlencoded::parse(uri.query()?.as_bytes())
            .find(|(k, v)| k == SESSION_COOKIE && !v.is_empty())
            .map(|(_, v)| v.into_owned())
    };
    let from_header = || {
        headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    from_cookie.or_else(from_query).or_else(from_header)
}

fn signed_out(detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, SIGNED_OUT).detail(detail)
}

/// An authenticated caller.
#[derive(Clone, Debug)]
pub(crate) struct Auth {
    pub user: User,
}

impl Auth {
    pub(crate) fn is_owner(&self) -> bool {
        self.user.is_owner()
    }

    /// Site-wide administration (licenses, proxies, AI configuration): owners only, else 403 `Forbidden.`.
    pub(crate) fn require_owner(&self) -> Result<(), ApiError> {
        if self.is_owner() {
            Ok(())
        } else {
            Err(ApiError::forbidden())
        }
    }

    /// Owner or `organization-admin` of `org`, else 403 `Forbidden.`.
    pub(crate) async fn require_org_admin(&self, app: &App, org: Uuid) -> Result<(), ApiError> {
        if self.is_owner() {
            return Ok(());
        }
        let memberships = app.db.memberships(self.user.id).await?;
        let admin = memberships
            .iter()
            .any(|(id, roles)| *id == org && roles.iter().any(|r| r == "organization-admin"));
        if admin { Ok(()) } else { Err(ApiError::forbidden()) }
    }

    /// Whether the caller is an owner, has one of `site_roles`, or has one of `org_roles` in `org` (what Coder's
    /// RBAC grants those roles; the caller answers the refusal Coder gives on its route).
    pub(crate) async fn has_role(
        &self,
        app: &App,
        org: Uuid,
        site_roles: &[&str],
        org_roles: &[&str],
    ) -> Result<bool, ApiError> {
        if self.is_owner()
            || self
                .user
                .rbac_roles
                .iter()
                .any(|r| site_roles.contains(&r.as_str()))
        {
            return Ok(true);
        }
        let memberships = app.db.memberships(self.user.id).await?;
        Ok(memberships
            .iter()
            .any(|(id, roles)| *id == org && roles.iter().any(|r| org_roles.contains(&r.as_str()))))
    }
}

impl FromRequestParts<App> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, ApiError> {
        let token = session_token(&parts.headers, &parts.uri).ok_or_else(|| {
            signed_out("Cookie \"coder_session_token\" or query parameter must be provided.")
        })?;
        let user = authenticate(app, &token).await?;
        let bypass = parts
            .headers
            .get("X-Coder-Bypass-Ratelimit")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if bypass && !user.is_owner() {
            return Err(ApiError::text(
                StatusCode::PRECONDITION_REQUIRED,
                "\"X-Coder-Bypass-Ratelimit\" provided but user is not owner\n",
            ));
        }
        Ok(Self { user })
    }
}

async fn authenticate(app: &App, token: &str) -> Result<User, ApiError> {
    let parts: Vec<&str> = token.split('-').collect();
    let &[id, secret] = parts.as_slice() else {
        return Err(signed_out(format!(
            "Invalid API key format: incorrect amount of API key parts, expected 2 got {}",
            parts.len()
        )));
    };
    if id.len() != 10 {
        return Err(signed_out(format!(
            "Invalid API key format: invalid API key ID length, expected 10 got {}",
            id.len()
        )));
    }
    if secret.len() != 22 {
        return Err(signed_out(format!(
            "Invalid API key format: invalid API key secret length, expected 22 got {}",
            secret.len()
        )));
    }
    let key = app
        .db
        .api_key(id)
        .await?
        .ok_or_else(|| signed_out("API key is invalid."))?;
    if !constant_time_eq(&sha256(secret.as_bytes()), &key.hashed_secret) {
        return Err(signed_out("API key secret is invalid."));
    }
    if key.expired {
        return Err(signed_out(format!("API key expired at {:?}.", key.expires_at)));
    }
    let mut user = app
        .db
        .user_by_id(key.user_id)
        .await?
        .ok_or_else(|| signed_out("API key is invalid."))?;
    if user.status == "dormant" {
        app.db.activate_user(user.id).await?;
        user.status = "active".to_owned();
    }
    if user.status != "active" {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!(
                "User is not active (status = {:?}). Contact an admin to reactivate your account.",
                user.status
            ),
        ));
    }
    app.db.touch_api_key(id).await?;
    Ok(user)
}

/// 403 `<Humanized> is a Premium feature. Contact sales!` unless the feature is entitled.
pub(crate) fn require_feature(app: &App, feature: &str) -> Result<(), ApiError> {
    if app.entitlement(feature).is_entitled() {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "{} is a Premium feature. Contact sales!",
                humanize_feature(feature)
            ),
        ))
    }
}

/// Resolves `{organization}`: `default` or the nil UUID -> the default org; a UUID -> by id; else by
/// name. Non-members other than owners get the same 404 as a missing org.
pub(crate) async fn organization(app: &App, auth: &Auth, param: &str) -> Result<Organization, ApiError> {
    let orgs = app.db.organizations().await?;
    let found = match Uuid::parse_str(param) {
        Ok(id) if id.is_nil() => orgs.into_iter().find(|o| o.is_default),
        Ok(id) => orgs.into_iter().find(|o| o.id == id),
        Err(_) if param == "default" => orgs.into_iter().find(|o| o.is_default),
        Err(_) => orgs.into_iter().find(|o| o.name.eq_ignore_ascii_case(param)),
    }
    .ok_or_else(ApiError::not_found)?;
    if !auth.is_owner() {
        let memberships = app.db.memberships(auth.user.id).await?;
        if !memberships.iter().any(|(id, _)| *id == found.id) {
            return Err(ApiError::not_found());
        }
    }
    Ok(found)
}

/// Resolves `{user}`: `me`, a UUID or a username. An unknown user is Coder's 400 (not a 404), the same for a
/// missing user and for garbage. As Coder's `ExtractUserContext` (`GetUserByID`), a UUID finds a deleted user too;
/// a username does not.
pub(crate) async fn user(app: &App, auth: &Auth, param: &str) -> Result<User, ApiError> {
    if param == "me" {
        return Ok(auth.user.clone());
    }
    let found = match Uuid::parse_str(param) {
        Ok(id) => app.db.user_by_id_any(id).await?,
        Err(_) => app.db.user_by_username(param).await?,
    };
    found.ok_or_else(|| unknown_user(param))
}

fn unknown_user(param: &str) -> ApiError {
    ApiError::bad_request("\"user\" must be an existing uuid or username.")
        .detail(format!("queried user={param:?}"))
}

/// Coder's `ExtractUserParam` with the caller's rights, as its user write routes resolve `{user}`: like [`user`],
/// but another user the caller may not read (a plain member reads only itself) is the same 400 as a missing one.
pub(crate) async fn readable_user(
    app: &App,
    auth: &Auth,
    caller: &crate::rbac::Caller,
    param: &str,
) -> Result<User, ApiError> {
    let found = user(app, auth, param).await?;
    if found.id != auth.user.id && !caller.reads_users() {
        return Err(unknown_user(param));
    }
    Ok(found)
}

/// Like [`user`], but only the user itself or an owner may act on it (tokens, workspaces).
pub(crate) async fn user_for_write(app: &App, auth: &Auth, param: &str) -> Result<User, ApiError> {
    let user = user(app, auth, param).await?;
    if user.id != auth.user.id && !auth.is_owner() {
        return Err(ApiError::not_found());
    }
    Ok(user)
}
