//! Organization membership writes (in Coder's PostgreSQL), as Coder v2.30.0's `coderd/members.go` does them: add a
//! member, remove one, replace a member's organization roles, with Coder's checks, their order and texts.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{post, put};
use serde_json::{Value, json};
use tokio_postgres::error::SqlState;

use super::JsonBody;
use super::users::UpdateRoles;
use crate::auth::{self, Auth};
use crate::db::{Member, Organization, User};
use crate::errors::{ApiError, ApiResult, no_content, ok};
use crate::rbac::{self, Caller};
use crate::state::App;

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route(
            "/organizations/{organization}/members/{user}",
            post(add).delete(remove),
        )
        .route(
            "/organizations/{organization}/members/{user}/roles",
            put(put_roles),
        )
}

/// `codersdk.OrganizationMember`.
pub(super) fn render_member(member: &Member) -> Value {
    json!({
        "user_id": member.user_id,
        "organization_id": member.organization_id,
        "created_at": member.created_at,
        "updated_at": member.updated_at,
        "roles": member.roles.iter()
            .map(|r| rbac::slim_org_role(r, member.organization_id))
            .collect::<Vec<_>>(),
    })
}

/// Coder's `ExtractOrganizationMemberParam`: `{user}` resolved whatever the caller may read (Coder's 400 for an
/// unknown one), then its membership of `org` (404 when there is none; every member of an organization reads its
/// members).
async fn member_param(
    app: &App,
    auth: &Auth,
    org: &Organization,
    param: &str,
) -> Result<(User, Member), ApiError> {
    let user = auth::user(app, auth, param).await?;
    let member = app
        .db
        .member(org.id, user.id)
        .await?
        .ok_or_else(ApiError::not_found)?;
    Ok((user, member))
}

/// `POST /organizations/{organization}/members/{user}` (Coder's `postOrganizationMember`): the key, the organization
/// (404), the user (Coder's 400, also for one the caller may not read); the insert needs the right to assign the
/// implicit `organization-member` role and create members (owners, user admins, the organization's admins and user
/// admins; anyone else gets Coder's 404); a user who is already a member is a 400 `User is already an organization
/// member` (detail `<username> is already a member of <organization display name>`). The member gets no roles; 200
/// with the `OrganizationMember`.
async fn add(
    State(app): State<App>,
    auth: Auth,
    Path((org_param, user_param)): Path<(String, String)>,
) -> ApiResult {
    let org = auth::organization(&app, &auth, &org_param).await?;
    let caller = Caller::of(&app, &auth).await?;
    let user = auth::readable_user(&app, &auth, &caller, &user_param).await?;
    if !caller.manages_members(org.id) {
        return Err(ApiError::not_found());
    }
    match app.db.insert_member(org.id, user.id).await {
        Ok(member) => ok(render_member(&member)),
        Err(err) if err.code() == Some(&SqlState::UNIQUE_VIOLATION) => Err(ApiError::bad_request(
            "User is already an organization member",
        )
        .detail(format!(
            "{} is already a member of {}",
            user.username, org.display_name
        ))),
        Err(err) => Err(ApiError::internal(err)),
    }
}

/// `DELETE /organizations/{organization}/members/{user}` (Coder's `deleteOrganizationMember`): the key, the
/// organization, the member (Coder's 400 for an unknown user, 404 for one who is not a member); the caller itself
/// 400 `cannot remove self from an organization`; a system user (Coder's delete reads members without them) and a
/// caller who may not delete members (only owners, user admins and the organization's admins and user admins may)
/// get Coder's 404. 204; the user leaves the organization's groups at once, as Coder's
/// `trigger_delete_group_members_on_org_member_delete` makes it.
async fn remove(
    State(app): State<App>,
    auth: Auth,
    Path((org_param, user_param)): Path<(String, String)>,
) -> ApiResult {
    let org = auth::organization(&app, &auth, &org_param).await?;
    let (user, _) = member_param(&app, &auth, &org, &user_param).await?;
    if user.id == auth.user.id {
        return Err(ApiError::bad_request("cannot remove self from an organization"));
    }
    let caller = Caller::of(&app, &auth).await?;
    if user.is_system || !caller.manages_members(org.id) {
        return Err(ApiError::not_found());
    }
    app.db.delete_member(org.id, user.id).await?;
    super::groups::prune_members(&app, org.id).await?;
    no_content()
}

/// `PUT /organizations/{organization}/members/{user}/roles` (Coder's `putMemberRoles` and dbauthz's
/// `UpdateMemberRoles`), its checks in Coder's order: the key, the organization, the member (400 unknown user, 404
/// not a member); the caller's own roles 400 `You cannot change your own organization roles.`; the body; a system
/// user 403 `Forbidden.`; a role with a `:` 400 `attempt to assign a role "<role>", remove the ':<organization_id>
/// suffix`; the change against the stored roles, with the implicit `organization-member` always in the new set: a
/// role that is not an organization role Coder knows 400 `"<role>:<organization id>" is not a supported role` (the
/// first, added before removed); a caller who may not assign organization roles here (owners, user admins, the
/// organization's admins and user admins may) 403 `Forbidden.`; a role the caller may not assign 400 `not authorized
/// to assign role "<role>:<organization id>"` (user admins and organization user admins only `organization-member`).
/// The roles sent replace the stored ones, duplicates dropped; `updated_at` stays. 200 with the `OrganizationMember`.
async fn put_roles(
    State(app): State<App>,
    auth: Auth,
    Path((org_param, user_param)): Path<(String, String)>,
    body: JsonBody<UpdateRoles>,
) -> ApiResult {
    let org = auth::organization(&app, &auth, &org_param).await?;
    let (user, member) = member_param(&app, &auth, &org, &user_param).await?;
    if user.id == auth.user.id {
        return Err(
            ApiError::bad_request("You cannot change your own organization roles.")
                .detail("Another user with the appropriate permissions must change your roles."),
        );
    }
    let roles = body.parse()?.roles.unwrap_or_default();
    if user.is_system {
        return Err(ApiError::forbidden());
    }
    if let Some(scoped) = roles.iter().find(|r| r.contains(':')) {
        return Err(ApiError::bad_request(format!(
            "attempt to assign a role {scoped:?}, remove the ':<organization_id> suffix"
        )));
    }
    let mut wanted = roles.clone();
    wanted.push(rbac::ORG_MEMBER.to_owned());
    let (added, removed) = rbac::change_role_set(&member.roles, &wanted);
    let granted: Vec<&String> = added.iter().chain(&removed).collect();
    let scoped = |role: &str| format!("{role}:{}", org.id);
    if let Some(unknown) = granted.iter().find(|r| !rbac::is_org_role(r)) {
        return Err(ApiError::bad_request(format!(
            "{:?} is not a supported role",
            scoped(unknown)
        )));
    }
    let caller = Caller::of(&app, &auth).await?;
    if !caller.manages_members(org.id) {
        return Err(ApiError::forbidden());
    }
    if let Some(refused) = granted.iter().find(|r| !caller.may_assign_org_role(org.id, r)) {
        return Err(ApiError::bad_request(format!(
            "not authorized to assign role {:?}",
            scoped(refused)
        )));
    }
    let updated = app
        .db
        .update_member_roles(org.id, user.id, &roles)
        .await?
        .ok_or_else(ApiError::forbidden)?;
    ok(render_member(&updated))
}
