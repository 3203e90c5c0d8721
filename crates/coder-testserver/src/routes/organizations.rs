//! Organizations (read from Coder's PostgreSQL), the built-in `Everyone` group and the groups tests add, also by
//! name.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use super::JsonBody;
use crate::auth::{self, Auth, require_feature};
use crate::db::Organization;
use crate::errors::{ApiError, ApiResult, created, ok};
use crate::state::App;

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/organizations", get(list).post(create))
        .route("/organizations/{organization}", get(get_one))
        .route("/organizations/{organization}/groups", get(groups))
        .route("/organizations/{organization}/groups/{name}", get(group_by_name))
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

#[derive(Deserialize)]
struct CreateOrganization {
    #[serde(default)]
    name: String,
    #[serde(default)]
    display_name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    icon: String,
}

async fn create(State(app): State<App>, auth: Auth, body: JsonBody<CreateOrganization>) -> ApiResult {
    require_feature(&app, "multiple_organizations")?;
    auth.require_owner()?;
    let body = body.parse()?;
    if body.name.is_empty() {
        return Err(ApiError::required("name"));
    }
    if !crate::util::valid_template_name(&body.name) {
        return Err(ApiError::bad_request("Validation failed.").validation(
            "name",
            format!(
                "Validation failed for tag \"organization_name\" with value: {:?}",
                body.name
            ),
        ));
    }
    let orgs = app.db.organizations().await?;
    if orgs.iter().any(|o| o.name.eq_ignore_ascii_case(&body.name)) || body.name == "default" {
        return Err(ApiError::conflict(format!(
            "Organization already exists with the name {:?}.",
            body.name
        )));
    }
    let display_name = if body.display_name.is_empty() {
        body.name.clone()
    } else {
        body.display_name
    };
    let id = app
        .db
        .insert_organization(&body.name, &display_name, &body.description, &body.icon)
        .await?;
    app.db
        .add_member(id, auth.user.id, &["organization-admin"])
        .await?;
    let org = app
        .db
        .organizations()
        .await?
        .into_iter()
        .find(|o| o.id == id)
        .ok_or_else(|| ApiError::internal("organization vanished after insert"))?;
    created(render_organization(&org))
}

fn reduced_user(user: &crate::db::User) -> Value {
    json!({
        "id": user.id,
        "username": user.username,
        "name": user.name,
        "avatar_url": user.avatar_url,
        "email": user.email,
        "created_at": user.created_at,
        "updated_at": user.updated_at,
        "status": user.status,
        "login_type": user.login_type,
    })
}

/// The groups of `org` as Coder renders them: the implicit `Everyone` group (id = org id) holding all members, then
/// the groups added with `TestServer::add_group` (no members).
pub(super) async fn organization_groups(app: &App, org: &Organization) -> Result<Vec<Value>, ApiError> {
    let members = app.db.organization_members(org.id).await?;
    let added: Vec<Value> = app
        .mem()
        .groups
        .iter()
        .filter(|g| g["organization_id"] == json!(org.id))
        .map(|g| {
            json!({
                "id": g["id"], "name": g["name"], "display_name": "", "organization_id": org.id, "members": [],
                "total_member_count": 0, "avatar_url": "", "quota_allowance": 0, "source": "user",
                "organization_name": org.name, "organization_display_name": org.display_name,
            })
        })
        .collect();
    let everyone = json!({
        "id": org.id,
        "name": "Everyone",
        "display_name": "",
        "organization_id": org.id,
        "members": members.iter().map(reduced_user).collect::<Vec<_>>(),
        "total_member_count": members.len(),
        "avatar_url": "",
        "quota_allowance": 0,
        "source": "user",
        "organization_name": org.name,
        "organization_display_name": org.display_name,
    });
    Ok(std::iter::once(everyone).chain(added).collect())
}

/// Group `id` of any organization, as [`organization_groups`] renders it; `None` when there is none.
pub(super) async fn group_by_id(app: &App, id: uuid::Uuid) -> Result<Option<Value>, ApiError> {
    for org in app.db.organizations().await? {
        let found = organization_groups(app, &org)
            .await?
            .into_iter()
            .find(|g| g["id"] == json!(id));
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// `GET /organizations/{organization}/groups`: the key, then the Template RBAC gate (as for every group route of
/// Coder's Premium server), then the organization.
async fn groups(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    require_feature(&app, "template_rbac")?;
    let org = auth::organization(&app, &auth, &param).await?;
    ok(Value::Array(organization_groups(&app, &org).await?))
}

/// `GET /organizations/{organization}/groups/{groupName}`: the key, the organization, then the Template RBAC gate,
/// then the group by its exact name (404 when none).
async fn group_by_name(
    State(app): State<App>,
    auth: Auth,
    Path((param, name)): Path<(String, String)>,
) -> ApiResult {
    require_feature(&app, "template_rbac")?;
    let org = auth::organization(&app, &auth, &param).await?;
    organization_groups(&app, &org)
        .await?
        .into_iter()
        .find(|g| g["name"] == json!(name))
        .map_or_else(|| Err(ApiError::not_found()), ok)
}

async fn members(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    let org = auth::organization(&app, &auth, &param).await?;
    let client = app.db.client().await?;
    let rows = client
        .query(
            "SELECT user_id, roles FROM organization_members WHERE organization_id = $1",
            &[&org.id],
        )
        .await?;
    let members = app.db.organization_members(org.id).await?;
    let mut out = Vec::new();
    for user in &members {
        let roles: Vec<String> = rows
            .iter()
            .find(|r| r.try_get::<_, uuid::Uuid>(0).ok() == Some(user.id))
            .and_then(|r| r.try_get(1).ok())
            .unwrap_or_default();
        let mut entry = reduced_user(user);
        entry["organization_id"] = json!(org.id);
        entry["user_id"] = json!(user.id);
        entry["roles"] = roles
            .iter()
            .map(|r| json!({ "name": r, "display_name": "", "organization_id": org.id }))
            .collect();
        entry["global_roles"] = user
            .rbac_roles
            .iter()
            .map(|r| json!({ "name": r, "display_name": "" }))
            .collect();
        out.push(entry);
    }
    ok(Value::Array(out))
}
