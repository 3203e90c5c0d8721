//! Organizations (in Coder's PostgreSQL): list, get, and the Premium (Multiple Organizations) create, update and
//! delete with Coder's checks and texts; the organization member list.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_postgres::error::SqlState;

use super::JsonBody;
use crate::auth::{self, Auth, require_feature};
use crate::db::Organization;
use crate::errors::{ApiError, ApiResult, IN_USE, created, ok};
use crate::state::App;

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/organizations", get(list).post(create))
        .route(
            "/organizations/{organization}",
            get(get_one).patch(update).delete(remove),
        )
        .route("/organizations/{organization}/members", get(members))
        .route("/users/{user}/organizations", get(user_organizations))
}

pub(super) fn render_organization(org: &Organization) -> Value {
    json!({
        "id": org.id,
        "name": org.name,
        "display_name": org.display_name,
        "icon": org.icon,
        "description": org.description,
        "created_at": org.created_at,
        "updated_at": org.updated_at,
        "is_default": org.is_default,
    })
}

/// The organizations `user_id` belongs to (all of them for owners when `all_for_owner`).
async fn visible(app: &App, user_id: uuid::Uuid, all: bool) -> Result<Vec<Organization>, ApiError> {
    let orgs = app.db.organizations().await?;
    if all {
        return Ok(orgs);
    }
    let memberships = app.db.memberships(user_id).await?;
    Ok(orgs
        .into_iter()
        .filter(|o| memberships.iter().any(|(id, _)| *id == o.id))
        .collect())
}

async fn list(State(app): State<App>, auth: Auth) -> ApiResult {
    let orgs = visible(&app, auth.user.id, auth.is_owner()).await?;
    ok(orgs.iter().map(render_organization).collect())
}

async fn get_one(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    let org = auth::organization(&app, &auth, &param).await?;
    ok(render_organization(&org))
}

async fn user_organizations(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    let user = auth::user(&app, &auth, &param).await?;
    let orgs = visible(&app, user.id, false).await?;
    ok(orgs.iter().map(render_organization).collect())
}

/// `CreateOrganizationRequest`; a `null` reads as empty, as Go's decoder leaves the field alone.
#[derive(Deserialize)]
struct CreateOrganization {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    icon: Option<String>,
}

/// `UpdateOrganizationRequest`: an empty `name` or `display_name` keeps the current one; `description` and `icon`
/// are pointers (left out or `null` keeps, a string, also `""`, replaces).
#[derive(Deserialize)]
struct UpdateOrganization {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    icon: Option<String>,
}

/// The org roles Coder's RBAC lets update and delete an organization (besides site owners).
const ORG_MANAGERS: &[&str] = &["organization-admin"];
const UNAUTHORIZED: &str = "unauthorized: rbac: forbidden";
/// The reserved name that always means the default organization (as `me` means the caller).
const DEFAULT: &str = "default";

/// The `validate` tags of the organization requests: `name` (`required` on create, else `omitempty`) with
/// `organization_name`, `display_name` with `omitempty,organization_display_name`.
fn validate_organization(name: &str, display_name: &str, name_required: bool) -> Result<(), ApiError> {
    let mut failures = Vec::new();
    if name.is_empty() {
        if name_required {
            failures.push(("name", "required", name));
        }
    } else if !crate::util::valid_name(name) {
        failures.push(("name", "organization_name", name));
    }
    if !crate::util::valid_display_name(display_name) {
        failures.push(("display_name", "organization_display_name", display_name));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(ApiError::validation_failed(&failures))
    }
}

fn reserved_name(name: &str) -> Result<(), ApiError> {
    if name == DEFAULT {
        return Err(ApiError::bad_request(format!(
            "Organization name {DEFAULT:?} is reserved."
        )));
    }
    Ok(())
}

/// `POST /organizations` (Coder's `postOrganizations`): the key, the Multiple Organizations gate, the body and its
/// validation, the reserved name `default` (400), a name an undeleted organization has in any case (409), then the
/// insert, which only an owner may do. The creator becomes a member without roles; the organization's `Everyone`
/// group is implicit.
async fn create(State(app): State<App>, auth: Auth, body: JsonBody<CreateOrganization>) -> ApiResult {
    require_feature(&app, "multiple_organizations")?;
    let body = body.parse()?;
    let name = body.name.unwrap_or_default();
    let display_name = body.display_name.unwrap_or_default();
    validate_organization(&name, &display_name, true)?;
    reserved_name(&name)?;
    let orgs = app.db.organizations().await?;
    if let Some(taken) = orgs.iter().find(|o| o.name.to_lowercase() == name.to_lowercase()) {
        // Coder reads the organization with the caller's rights: one they cannot see is an error, not a conflict.
        let visible = auth.is_owner()
            || app
                .db
                .memberships(auth.user.id)
                .await?
                .iter()
                .any(|(id, _)| *id == taken.id);
        if !visible {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Internal error fetching organization {name:?}."),
            )
            .detail(UNAUTHORIZED));
        }
        return Err(ApiError::conflict("Organization already exists with that name."));
    }
    if !auth.is_owner() {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error inserting organization member.",
        )
        .detail(format!(
            "execute transaction: create organization: {UNAUTHORIZED}"
        )));
    }
    let display_name = if display_name.is_empty() {
        name.clone()
    } else {
        display_name
    };
    let id = app
        .db
        .insert_organization(
            &name,
            &display_name,
            &body.description.unwrap_or_default(),
            &body.icon.unwrap_or_default(),
        )
        .await?;
    app.db.add_member(id, auth.user.id, &[]).await?;
    let org = app
        .db
        .organizations()
        .await?
        .into_iter()
        .find(|o| o.id == id)
        .ok_or_else(|| ApiError::internal("organization vanished after insert"))?;
    created(render_organization(&org))
}

/// `PATCH /organizations/{organization}` (Coder's `patchOrganization`): the key, the Multiple Organizations gate,
/// the organization, the body and its validation, the reserved name `default` (400); then the update, which only an
/// owner or the organization's admin may do (anyone else gets Coder's 404); a name another undeleted organization has
/// (any case) is a 409.
async fn update(
    State(app): State<App>,
    auth: Auth,
    Path(param): Path<String>,
    body: JsonBody<UpdateOrganization>,
) -> ApiResult {
    require_feature(&app, "multiple_organizations")?;
    let org = auth::organization(&app, &auth, &param).await?;
    let body = body.parse()?;
    let name = body.name.unwrap_or_default();
    let display_name = body.display_name.unwrap_or_default();
    validate_organization(&name, &display_name, false)?;
    reserved_name(&name)?;
    if !auth.has_role(&app, org.id, &[], ORG_MANAGERS).await? {
        return Err(ApiError::not_found());
    }
    let pick = |new: String, current: &str| if new.is_empty() { current.to_owned() } else { new };
    let updated = app
        .db
        .update_organization(
            org.id,
            &pick(name.clone(), &org.name),
            &pick(display_name, &org.display_name),
            body.description.as_deref().unwrap_or(&org.description),
            body.icon.as_deref().unwrap_or(&org.icon),
        )
        .await;
    match updated {
        Ok(Some(org)) => ok(render_organization(&org)),
        Ok(None) => Err(ApiError::not_found()),
        Err(err) if err.code() == Some(&SqlState::UNIQUE_VIOLATION) => Err(ApiError::conflict(format!(
            "Organization already exists with the name {name:?}."
        ))
        .validation("name", IN_USE)),
        Err(err) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error updating organization.",
        )
        .detail(format!("update organization: {err}"))),
    }
}

/// `"1 workspace"`, `"2 workspaces"`, nothing for 0 (or less), as Coder's `addDetailPart`.
fn count_part(parts: &mut Vec<String>, resource: &str, count: i64) {
    match count {
        1 => parts.push(format!("1 {resource}")),
        n if n > 1 => parts.push(format!("{n} {resource}s")),
        _ => {}
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `DELETE /organizations/{organization}` (Coder's `deleteOrganization`): the key, the Multiple Organizations gate,
/// the organization; the default organization is a 400. The soft delete (only an owner or the organization's admin
/// may) fails, as Coder's `protect_deleting_organizations` trigger makes it, while the organization has workspaces,
/// templates or provisioner keys, more than one member (the members of deleted users not counted) or a group besides
/// `Everyone`: 500 `Error deleting organization.` naming what is left.
async fn remove(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    require_feature(&app, "multiple_organizations")?;
    let org = auth::organization(&app, &auth, &param).await?;
    if org.is_default {
        return Err(ApiError::bad_request("Default organization cannot be deleted."));
    }
    if !auth.has_role(&app, org.id, &[], ORG_MANAGERS).await? {
        // Coder's delete fails authorization; its follow-up resource count needs rights a member lacks too.
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error deleting organization.",
        )
        .detail(format!(
            "delete organization: execute transaction: delete organization: {UNAUTHORIZED}"
        )));
    }
    let members = count(app.db.organization_members(org.id).await?.len());
    let mut parts = Vec::new();
    {
        let mem = app.mem();
        let workspaces = mem
            .workspaces
            .iter()
            .filter(|w| w.organization.0 == org.id && !w.deleted)
            .count();
        let templates = mem
            .templates
            .iter()
            .filter(|t| t.organization.id == org.id && !t.deleted)
            .count();
        // The Everyone group counts, as its row in Coder's `groups` table does.
        let groups = 1 + mem.added_groups(org.id).count();
        let keys = mem
            .provisioner_keys
            .iter()
            .filter(|k| k.organization_id == org.id)
            .count();
        count_part(&mut parts, "workspace", count(workspaces));
        count_part(&mut parts, "template", count(templates));
        count_part(&mut parts, "member", members - 1);
        count_part(&mut parts, "group", count(groups) - 1);
        count_part(&mut parts, "provisioner key", count(keys));
    }
    if !parts.is_empty() {
        return Err(
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Error deleting organization.").detail(format!(
                "This organization has {} that must be deleted first.",
                parts.join(", ")
            )),
        );
    }
    app.db.delete_organization(org.id).await?;
    ok(json!({ "message": "Organization has been deleted." }))
}

/// `GET /organizations/{organization}/members` (`[]OrganizationMemberWithUserData`): each member's
/// `OrganizationMember` (the membership's times and organization roles) with its username, name and avatar URL (left
/// out when empty), email and site roles.
async fn members(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    let org = auth::organization(&app, &auth, &param).await?;
    let rows = app.db.member_rows(org.id).await?;
    let users = app.db.organization_members(org.id).await?;
    let mut out = Vec::new();
    for user in &users {
        let Some(member) = rows.iter().find(|m| m.user_id == user.id) else {
            continue;
        };
        let mut entry = super::members::render_member(member);
        entry["username"] = json!(user.username);
        entry["email"] = json!(user.email);
        entry["global_roles"] = user
            .rbac_roles
            .iter()
            .map(|r| crate::rbac::slim_site_role(r))
            .collect();
        for (key, value) in [("name", &user.name), ("avatar_url", &user.avatar_url)] {
            if !value.is_empty() {
                entry[key] = json!(value);
            }
        }
        out.push(entry);
    }
    ok(Value::Array(out))
}
