//! Groups (Premium: Template RBAC), as Coder's `enterprise/coderd/groups.go` serves them: each organization's
//! implicit `Everyone` group (ID = organization ID, every member but the system users) and the groups created through
//! the API or `TestServer::add_group`, kept in memory with their members; list, get (by name or ID), create, patch
//! (members by user ID) and delete, with Coder's checks, their order and texts. No group lists a system user.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::JsonBody;
use crate::auth::{self, Auth, require_feature};
use crate::db::{Organization, User};
use crate::errors::{ApiError, ApiResult, created, ok, parse_uuid};
use crate::state::{App, Group};
use crate::util::{valid_display_name, valid_group_name};

const FEATURE: &str = "template_rbac";
const EVERYONE: &str = "Everyone";
/// Coder's `database.PrebuildsSystemUserID`: a patch adds it to a group without the membership check.
const PREBUILDS_USER: Uuid = Uuid::from_u128(0xc42f_df75_3097_471c_8c33_fb52_454d_81c0);
/// Who Coder's RBAC lets create, update and delete groups besides site owners.
const SITE_MANAGERS: &[&str] = &["user-admin"];
const ORG_MANAGERS: &[&str] = &["organization-admin", "organization-user-admin"];
/// The error text of a write Coder's RBAC refuses.
const UNAUTHORIZED: &str = "unauthorized: rbac: forbidden";

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/organizations/{organization}/groups", get(list).post(create))
        .route("/organizations/{organization}/groups/{name}", get(by_name))
        .route("/groups/{group}", get(get_one).patch(update).delete(remove))
}

/// Go's rendering of the zero `time.Time`, which a user who never signed in has as `last_seen_at`.
const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// A group member as Coder renders it (`codersdk.ReducedUser`: `name` and `avatar_url` left out when empty,
/// `last_seen_at` always there).
fn group_member(user: &User) -> Value {
    let last_seen_at = if user.last_seen_at.starts_with("0001-01-01T00:00:00.000000") {
        ZERO_TIME
    } else {
        user.last_seen_at.as_str()
    };
    let mut body = json!({
        "id": user.id,
        "username": user.username,
        "email": user.email,
        "created_at": user.created_at,
        "updated_at": user.updated_at,
        "last_seen_at": last_seen_at,
        "status": user.status,
        "login_type": user.login_type,
    });
    for (key, value) in [("name", &user.name), ("avatar_url", &user.avatar_url)] {
        if !value.is_empty() {
            body[key] = json!(value);
        }
    }
    body
}

/// `codersdk.Group` of `group` with `members` (already the users Coder lists: Coder's `GetGroupMembersByGroupID` and
/// `GetGroupMembersCountByGroupID` with `IncludeSystem: false`, so `total_member_count` counts no system user
/// either).
fn render(group: &Group, org: &Organization, members: &[&User]) -> Value {
    json!({
        "id": group.id,
        "name": group.name,
        "display_name": group.display_name,
        "organization_id": org.id,
        "members": members.iter().map(|u| group_member(u)).collect::<Vec<_>>(),
        "total_member_count": members.len(),
        "avatar_url": group.avatar_url,
        "quota_allowance": group.quota_allowance,
        "source": "user",
        "organization_name": org.name,
        "organization_display_name": org.display_name,
    })
}

/// The users Coder lists as members of the `Everyone` group: the organization's members that are not system users
/// (Coder's `group_members_expanded` view holds every `organization_members` row as a member of the group with the
/// organization's ID, and its group member queries leave out `user_is_system`).
fn everyone_members(org_members: &[User]) -> Vec<&User> {
    org_members.iter().filter(|u| !u.is_system).collect()
}

/// The users Coder lists as members of an added group: its stored members that are users (not deleted) and not
/// system users, in the order they were added.
fn listed_members<'a>(group: &Group, org_members: &'a [User]) -> Vec<&'a User> {
    group
        .members
        .iter()
        .filter_map(|id| org_members.iter().find(|u| u.id == *id))
        .filter(|u| !u.is_system)
        .collect()
}

/// Drops the members of `org`'s groups that are no longer members of `org`, as Coder's
/// `trigger_delete_group_members_on_org_member_delete` does when a membership row goes.
pub(super) async fn prune_members(app: &App, org: uuid::Uuid) -> Result<(), ApiError> {
    let member_ids = app.db.organization_member_ids(org).await?;
    let mut mem = app.mem();
    for group in mem.groups.iter_mut().filter(|g| g.organization_id == org) {
        group.members.retain(|id| member_ids.contains(id));
    }
    Ok(())
}

/// The `Everyone` group of `org`: its stored settings, if patched.
fn everyone_of(mem: &crate::state::Mem, org: uuid::Uuid) -> Group {
    mem.groups
        .iter()
        .find(|g| g.id == org && g.is_everyone())
        .cloned()
        .unwrap_or_else(|| Group::everyone(org))
}

/// Renders one group of `org` (the `Everyone` group holds every member of `org` but the system users).
async fn render_one(app: &App, org: &Organization, group: &Group) -> Result<Value, ApiError> {
    let members = app.db.organization_members(org.id).await?;
    if group.is_everyone() {
        return Ok(render(group, org, &everyone_members(&members)));
    }
    Ok(render(group, org, &listed_members(group, &members)))
}

/// The groups of `org` as Coder renders them: the `Everyone` group (id = org id) holding all members but the system
/// users, then the other groups in creation order with their members.
pub(super) async fn organization_groups(app: &App, org: &Organization) -> Result<Vec<Value>, ApiError> {
    prune_members(app, org.id).await?;
    let members = app.db.organization_members(org.id).await?;
    let (everyone, added) = {
        let mem = app.mem();
        let added: Vec<Group> = mem.added_groups(org.id).cloned().collect();
        (everyone_of(&mem, org.id), added)
    };
    Ok(
        std::iter::once(render(&everyone, org, &everyone_members(&members)))
            .chain(added.iter().map(|g| render(g, org, &listed_members(g, &members))))
            .collect(),
    )
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

/// Coder's `ExtractGroupParam`: a UUID (400 `Invalid UUID "<x>".` otherwise), then a group of an undeleted
/// organization the caller may read (a member of it, a site owner or user admin), else 404. The group comes back
/// with its members pruned as [`prune_members`] does.
async fn group_param(app: &App, auth: &Auth, param: &str) -> Result<(Organization, Group), ApiError> {
    let id = parse_uuid(param)?;
    let orgs = app.db.organizations().await?;
    let org_id = match orgs.iter().find(|o| o.id == id) {
        Some(org) => org.id,
        None => app
            .mem()
            .groups
            .iter()
            .find(|g| g.id == id)
            .map(|g| g.organization_id)
            .ok_or_else(ApiError::not_found)?,
    };
    let org = orgs
        .into_iter()
        .find(|o| o.id == org_id)
        .ok_or_else(ApiError::not_found)?;
    let member = app
        .db
        .memberships(auth.user.id)
        .await?
        .iter()
        .any(|(id, _)| *id == org.id);
    if !member && !auth.has_role(app, org.id, SITE_MANAGERS, &[]).await? {
        return Err(ApiError::not_found());
    }
    prune_members(app, org.id).await?;
    let mem = app.mem();
    let group = if id == org.id {
        everyone_of(&mem, org.id)
    } else {
        mem.groups
            .iter()
            .find(|g| g.id == id)
            .cloned()
            .ok_or_else(ApiError::not_found)?
    };
    drop(mem);
    Ok((org, group))
}

/// Whether the caller may create, update and delete groups of `org`.
async fn manages_groups(app: &App, auth: &Auth, org: uuid::Uuid) -> Result<bool, ApiError> {
    auth.has_role(app, org, SITE_MANAGERS, ORG_MANAGERS).await
}

/// `GET /organizations/{organization}/groups`: the key, then the Template RBAC gate (as for every group route of
/// Coder's Premium server), then the organization.
async fn list(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    require_feature(&app, FEATURE)?;
    let org = auth::organization(&app, &auth, &param).await?;
    ok(Value::Array(organization_groups(&app, &org).await?))
}

/// `GET /organizations/{organization}/groups/{groupName}`: the key, the Template RBAC gate, the organization, then
/// the group by its exact name (404 when none).
async fn by_name(
    State(app): State<App>,
    auth: Auth,
    Path((param, name)): Path<(String, String)>,
) -> ApiResult {
    require_feature(&app, FEATURE)?;
    let org = auth::organization(&app, &auth, &param).await?;
    organization_groups(&app, &org)
        .await?
        .into_iter()
        .find(|g| g["name"] == json!(name))
        .map_or_else(|| Err(ApiError::not_found()), ok)
}

/// `GET /groups/{group}`: the Template RBAC gate (before the key, as on all of Coder's `/groups` routes), the key,
/// then the group.
async fn get_one(
    State(app): State<App>,
    auth: Result<Auth, ApiError>,
    Path(param): Path<String>,
) -> ApiResult {
    require_feature(&app, FEATURE)?;
    let auth = auth?;
    let (org, group) = group_param(&app, &auth, &param).await?;
    ok(render_one(&app, &org, &group).await?)
}

/// `CreateGroupRequest`; a `null` reads as the zero value, as Go's decoder leaves the field alone.
#[derive(Deserialize)]
struct CreateGroup {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    avatar_url: Option<String>,
    #[serde(default)]
    quota_allowance: Option<i64>,
}

/// Go's `int32(x)` of a Go `int`: the low 32 bits, as Coder stores a quota allowance.
#[allow(clippy::cast_possible_truncation)]
fn int32(value: i64) -> i32 {
    value as i32
}

/// `POST /organizations/{organization}/groups` (Coder's `postGroupByOrganization`): the key, the Template RBAC gate,
/// the organization, the body and its validation (`name`: `required,group_name`; `display_name`:
/// `omitempty,group_display_name`), the reserved name `Everyone`, then the insert: only an owner, a user admin or the
/// organization's (user) admin may; a name the organization already has (exact case) is a 409.
async fn create(
    State(app): State<App>,
    auth: Auth,
    Path(param): Path<String>,
    body: JsonBody<CreateGroup>,
) -> ApiResult {
    require_feature(&app, FEATURE)?;
    let org = auth::organization(&app, &auth, &param).await?;
    let body = body.parse()?;
    let name = body.name.unwrap_or_default();
    let display_name = body.display_name.unwrap_or_default();
    let mut failures = Vec::new();
    if name.is_empty() {
        failures.push(("name", "required", name.as_str()));
    } else if !valid_group_name(&name) {
        failures.push(("name", "group_name", name.as_str()));
    }
    if !valid_display_name(&display_name) {
        failures.push(("display_name", "group_display_name", display_name.as_str()));
    }
    if !failures.is_empty() {
        return Err(ApiError::validation_failed(&failures));
    }
    if name == EVERYONE {
        return Err(ApiError::bad_request("Invalid group name.")
            .validation("name", format!("{EVERYONE:?} is a reserved group name")));
    }
    if !manages_groups(&app, &auth, org.id).await? {
        return Err(ApiError::internal(UNAUTHORIZED));
    }
    let group = {
        let mut mem = app.mem();
        if mem.added_groups(org.id).any(|g| g.name == name) {
            return Err(
                ApiError::conflict(format!("A group named {name:?} already exists."))
                    .validation("name", "Group names must be unique"),
            );
        }
        let group = Group {
            display_name,
            avatar_url: body.avatar_url.unwrap_or_default(),
            quota_allowance: int32(body.quota_allowance.unwrap_or_default()),
            ..Group::new(org.id, &name)
        };
        mem.groups.push(group.clone());
        group
    };
    created(render(&group, &org, &[]))
}

/// `PatchGroupRequest`: `add_users` and `remove_users` are user IDs; an empty `name` (or the current one) keeps
/// the name; `display_name`, `avatar_url` and `quota_allowance` are pointers (left out or `null` keeps).
#[derive(Deserialize)]
struct PatchGroup {
    #[serde(default)]
    add_users: Option<Vec<String>>,
    #[serde(default)]
    remove_users: Option<Vec<String>>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    avatar_url: Option<String>,
    #[serde(default)]
    quota_allowance: Option<i64>,
}

/// The error of a write inside Coder's group update transaction.
fn member_insert_error(message: &str, status: StatusCode, id: &str, cause: &str) -> ApiError {
    ApiError::new(status, message).detail(format!(
        "execute transaction: insert group member {id:?}: pq: {cause}"
    ))
}

/// `PATCH /groups/{group}` (Coder's `patchGroup`), its checks in Coder's order: the Template RBAC gate, the key,
/// the group, the body and its validation; a `name` equal to the current one counts as empty; the `Everyone` group
/// cannot be renamed (400), get a display name (400) or have users added or removed (403); no group may be renamed
/// `Everyone` (400); each user ID (added, then removed) must be a UUID and a member of the group's organization
/// (400); a new name another group of the organization has is a 409; then the update (only for an owner, a user
/// admin or the organization's (user) admin), where adding a member twice is a 400 and nothing changes. Removing a
/// user who is not a member does nothing.
async fn update(
    State(app): State<App>,
    auth: Result<Auth, ApiError>,
    Path(param): Path<String>,
    body: JsonBody<PatchGroup>,
) -> ApiResult {
    require_feature(&app, FEATURE)?;
    let auth = auth?;
    let (org, group) = group_param(&app, &auth, &param).await?;
    let body = body.parse()?;
    let mut name = body.name.unwrap_or_default();
    let mut failures = Vec::new();
    if !name.is_empty() && !valid_group_name(&name) {
        failures.push(("name", "group_name", name.as_str()));
    }
    if let Some(display_name) = body.display_name.as_deref().filter(|d| !valid_display_name(d)) {
        failures.push(("display_name", "group_display_name", display_name));
    }
    if !failures.is_empty() {
        return Err(ApiError::validation_failed(&failures));
    }
    if name == group.name {
        name.clear();
    }
    if group.is_everyone() && !name.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Cannot rename the {EVERYONE:?} group!"
        )));
    }
    if group.is_everyone() && body.display_name.as_deref().is_some_and(|d| !d.is_empty()) {
        return Err(ApiError::bad_request(format!(
            "Cannot update the Display Name for the {EVERYONE:?} group!"
        )));
    }
    if name == EVERYONE {
        return Err(ApiError::bad_request(format!(
            "{EVERYONE:?} is a reserved group name!"
        )));
    }
    let add = body.add_users.unwrap_or_default();
    let remove = body.remove_users.unwrap_or_default();
    if (!add.is_empty() || !remove.is_empty()) && group.name == EVERYONE {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("Cannot add or remove users from the {EVERYONE:?} group!"),
        ));
    }
    let org_members = app.db.organization_members(org.id).await?;
    for id in add.iter().chain(&remove) {
        let Ok(user_id) = Uuid::parse_str(id) else {
            return Err(ApiError::bad_request(format!(
                "ID {id:?} must be a valid user UUID."
            )));
        };
        if user_id == PREBUILDS_USER {
            continue;
        }
        if !org_members.iter().any(|u| u.id == user_id && !u.is_system) {
            return Err(ApiError::bad_request(format!(
                "User must be a member of organization {:?}",
                group.name
            )));
        }
    }
    if !name.is_empty() {
        let taken = {
            let mem = app.mem();
            mem.added_groups(org.id).any(|g| g.name == name)
        };
        if taken {
            return Err(ApiError::conflict(format!(
                "A group with name {name:?} already exists."
            )));
        }
    }
    if !manages_groups(&app, &auth, org.id).await? {
        return Err(
            ApiError::bad_request("Failed to add or remove non-existent group member")
                .detail(format!("execute transaction: update group by ID: {UNAUTHORIZED}")),
        );
    }
    let prebuilds_user_exists = if add
        .iter()
        .any(|id| Uuid::parse_str(id).ok() == Some(PREBUILDS_USER))
    {
        app.db.user_by_id(PREBUILDS_USER).await?.is_some()
    } else {
        true
    };
    let updated = {
        let mut mem = app.mem();
        let mut updated = if group.is_everyone() {
            everyone_of(&mem, org.id)
        } else {
            mem.groups
                .iter()
                .find(|g| g.id == group.id)
                .cloned()
                .ok_or_else(ApiError::not_found)?
        };
        if let Some(avatar_url) = body.avatar_url {
            updated.avatar_url = avatar_url;
        }
        if !name.is_empty() {
            updated.name = name;
        }
        if let Some(quota) = body.quota_allowance {
            updated.quota_allowance = int32(quota);
        }
        if let Some(display_name) = body.display_name {
            updated.display_name = display_name;
        }
        for id in &add {
            let user_id = parse_uuid(id)?;
            if user_id == PREBUILDS_USER && !prebuilds_user_exists {
                return Err(member_insert_error(
                    "An internal server error occurred.",
                    StatusCode::INTERNAL_SERVER_ERROR,
                    id,
                    "insert or update on table \"group_members\" violates foreign key constraint \
                     \"group_members_user_id_fkey\"",
                ));
            }
            if updated.members.contains(&user_id) {
                return Err(member_insert_error(
                    "Cannot add the same user to a group twice!",
                    StatusCode::BAD_REQUEST,
                    id,
                    "duplicate key value violates unique constraint \"group_members_user_id_group_id_key\"",
                ));
            }
            updated.members.push(user_id);
        }
        for id in &remove {
            let user_id = parse_uuid(id)?;
            updated.members.retain(|m| *m != user_id);
        }
        match mem.groups.iter_mut().find(|g| g.id == updated.id) {
            Some(stored) => *stored = updated.clone(),
            None => mem.groups.push(updated.clone()),
        }
        updated
    };
    ok(render_one(&app, &org, &updated).await?)
}

/// `DELETE /groups/{group}` (Coder's `deleteGroup`): the Template RBAC gate, the key, the group; the `Everyone` group
/// is a 400; then the delete (only for an owner, a user admin or the organization's (user) admin).
async fn remove(
    State(app): State<App>,
    auth: Result<Auth, ApiError>,
    Path(param): Path<String>,
) -> ApiResult {
    require_feature(&app, FEATURE)?;
    let auth = auth?;
    let (org, group) = group_param(&app, &auth, &param).await?;
    if group.name == EVERYONE {
        return Err(ApiError::bad_request(format!(
            "{EVERYONE:?} is a reserved group and cannot be deleted!"
        )));
    }
    if !manages_groups(&app, &auth, org.id).await? {
        return Err(ApiError::internal(UNAUTHORIZED));
    }
    app.mem().groups.retain(|g| g.id != group.id);
    ok(json!({ "message": "Successfully deleted group!" }))
}
