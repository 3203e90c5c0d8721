//! Template access lists as Coder v2.30.0's enterprise routes serve them (feature `template_rbac`, gated before
//! authentication): `GET /templates/{id}/acl` renders the stored user and group roles (deleted and suspended users
//! and missing groups left out, the group list under `group`), `PATCH` merges `user_perms` and `group_perms` into
//! them after Coder's validation (a role of `""` removes an entry and is not checked for existence).

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::JsonBody;
use super::groups::group_by_id;
use super::users::render_user;
use crate::auth::{Auth, require_feature};
use crate::errors::{ApiError, ApiResult, ok, parse_uuid};
use crate::state::{App, Mem};

const FEATURE: &str = "template_rbac";
const ROLES: [&str; 2] = ["admin", "use"];

pub(super) fn routes() -> Router<App> {
    Router::new().route("/templates/{id}/acl", get(get_acl).patch(patch_acl))
}

/// The gate precedes authentication, as Coder's middleware order has it.
fn gate(app: &App, auth: Result<Auth, ApiError>) -> Result<Auth, ApiError> {
    require_feature(app, FEATURE)?;
    auth
}

fn template_index(mem: &Mem, id: &str) -> Result<usize, ApiError> {
    let id = parse_uuid(id)?;
    mem.templates
        .iter()
        .position(|t| t.id == id && !t.deleted)
        .ok_or_else(ApiError::not_found)
}

async fn get_acl(State(app): State<App>, auth: Result<Auth, ApiError>, Path(id): Path<String>) -> ApiResult {
    gate(&app, auth)?;
    let (user_acl, group_acl) = {
        let mem = app.mem();
        let template = &mem.templates[template_index(&mem, &id)?];
        (template.user_acl.clone(), template.group_acl.clone())
    };
    let mut users = Vec::new();
    for (user_id, role) in &user_acl {
        let Some(user) = app.db.user_by_id(*user_id).await? else {
            continue;
        };
        if user.status == "suspended" {
            continue;
        }
        let mut rendered = render_user(&app, &user).await?;
        rendered["role"] = json!(role);
        users.push(rendered);
    }
    let mut groups = Vec::new();
    for (group_id, role) in &group_acl {
        if let Some(mut group) = group_by_id(&app, *group_id).await? {
            group["role"] = json!(role);
            groups.push(group);
        }
    }
    ok(json!({ "users": users, "group": groups }))
}

#[derive(Deserialize)]
struct UpdateAcl {
    #[serde(default)]
    user_perms: Option<BTreeMap<String, String>>,
    #[serde(default)]
    group_perms: Option<BTreeMap<String, String>>,
}

async fn patch_acl(
    State(app): State<App>,
    auth: Result<Auth, ApiError>,
    Path(id): Path<String>,
    body: JsonBody<UpdateAcl>,
) -> ApiResult {
    let auth = gate(&app, auth)?;
    let org_id = {
        let mem = app.mem();
        mem.templates[template_index(&mem, &id)?].organization.id
    };
    auth.require_org_admin(&app, org_id).await?;
    let body = body.parse()?;
    let users = body.user_perms.unwrap_or_default();
    let groups = body.group_perms.unwrap_or_default();
    let mut invalid = validate(&app, &groups, "group_perms", Subject::Group).await?;
    invalid.extend(validate(&app, &users, "user_perms", Subject::User).await?);
    if !invalid.is_empty() {
        return Err(invalid.into_iter().fold(
            ApiError::bad_request("Invalid request to update template ACL"),
            |error, (field, detail)| error.validation(&field, detail),
        ));
    }
    let mut mem = app.mem();
    let index = template_index(&mem, &id)?;
    let template = &mut mem.templates[index];
    merge(&mut template.user_acl, &users);
    merge(&mut template.group_acl, &groups);
    ok(json!({ "message": "Successfully updated template ACL list." }))
}

#[derive(Clone, Copy)]
enum Subject {
    User,
    Group,
}

/// Coder's `acl.Validate` for one map: the role, the ID's syntax, then (for roles other than `""`) that the user
/// or group exists.
async fn validate(
    app: &App,
    perms: &BTreeMap<String, String>,
    field: &str,
    subject: Subject,
) -> Result<Vec<(String, String)>, ApiError> {
    let mut invalid = Vec::new();
    for (id, role) in perms {
        if !role.is_empty() && !ROLES.contains(&role.as_str()) {
            invalid.push((
                field.to_owned(),
                format!("role {role:?} is not a valid template role"),
            ));
        }
        let Ok(parsed) = Uuid::parse_str(id) else {
            invalid.push((field.to_owned(), format!("{id} is not a valid UUID.")));
            continue;
        };
        if role.is_empty() || exists(app, parsed, subject).await? {
            continue;
        }
        let kind = match subject {
            Subject::User => "user",
            Subject::Group => "group",
        };
        invalid.push((
            field.to_owned(),
            format!("{kind} with ID {parsed} does not exist"),
        ));
    }
    Ok(invalid)
}

async fn exists(app: &App, id: Uuid, subject: Subject) -> Result<bool, ApiError> {
    Ok(match subject {
        Subject::User => app.db.user_by_id(id).await?.is_some(),
        Subject::Group => group_by_id(app, id).await?.is_some(),
    })
}

/// Coder's merge: a role sets the entry, `""` removes it, entries left out stay.
fn merge(stored: &mut BTreeMap<Uuid, String>, perms: &BTreeMap<String, String>) {
    for (id, role) in perms {
        let Ok(id) = Uuid::parse_str(id) else {
            continue;
        };
        if role.is_empty() {
            stored.remove(&id);
        } else {
            stored.insert(id, role.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_sets_and_removes_and_keeps_the_rest() {
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let mut stored = BTreeMap::from([(a, "use".to_owned()), (b, "admin".to_owned())]);
        let perms = BTreeMap::from([
            (a.to_string(), "admin".to_owned()),
            (b.to_string(), String::new()),
            (c.to_string(), "use".to_owned()),
        ]);
        merge(&mut stored, &perms);
        assert_eq!(
            stored,
            BTreeMap::from([(a, "admin".to_owned()), (c, "use".to_owned())])
        );
    }
}
