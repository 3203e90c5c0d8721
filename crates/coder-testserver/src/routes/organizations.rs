//! Organizations (in Coder's PostgreSQL): list, get, and the Premium (Multiple Organizations) create, update and
//! delete with Coder's checks and texts; the organization member list.

use std::collections::BTreeMap;

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

/// `GET /organizations/{organization}/members` (Coder's `listMembers`, `[]OrganizationMemberWithUserData`): the
/// organization (404), then the `q` search ([`member_filter`]); the members Coder's `OrganizationMembers` query
/// lists ([`crate::db::Db::listed_members`]: without system users, such as the operator and Coder's `prebuilds`
/// user, unless `q` has `include_system:true`), by user name, each with its `OrganizationMember` (the membership's
/// times and organization roles), username, name and avatar URL (left out when empty), email and site roles.
async fn members(
    State(app): State<App>,
    auth: Auth,
    Path(param): Path<String>,
    uri: axum::http::Uri,
) -> ApiResult {
    let org = auth::organization(&app, &auth, &param).await?;
    let q = url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "q")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    let filter = member_filter(&q).map_err(|validations| {
        validations.into_iter().fold(
            ApiError::bad_request("Invalid organization member search query."),
            |error, (field, detail)| error.validation(&field, detail),
        )
    })?;
    let rows = app.db.member_rows(org.id).await?;
    let users = app
        .db
        .listed_members(
            org.id,
            filter.user_id,
            filter.github_user_id,
            filter.include_system,
        )
        .await?;
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

/// The filter of Coder's `OrganizationMembersParams` that `searchquery.Members` reads from `q`: the nil UUID and 0
/// filter nothing.
#[derive(Debug, Default, PartialEq)]
struct MemberFilter {
    user_id: uuid::Uuid,
    github_user_id: i64,
    include_system: bool,
}

/// A `(field, detail)` validation of Coder's 400 answers.
type Validation = (String, String);

/// Coder's `searchquery.Members`: an empty (or all white space) `q` filters nothing; else `q`'s terms
/// ([`search_terms`]; a bare word other than `user_id`, `github_user_id` or `include_system` is the validation `q`
/// `invalid search term: <words>`), read by Coder's query parameter parser in its order: `user_id` (a UUID),
/// `include_system` (Go's `strconv.ParseBool`), `github_user_id` (a 64-bit integer), each given at most once (an
/// empty value keeps the default), then one validation per other key (`"<key>" is not a valid query param`).
fn member_filter(q: &str) -> Result<MemberFilter, Vec<Validation>> {
    let q = q.trim();
    if q.is_empty() {
        return Ok(MemberFilter::default());
    }
    let values = search_terms(q, |term, values| match term {
        "user_id" | "github_user_id" | "include_system" => {
            values.insert(term.to_owned(), vec![String::new()]);
            Ok(())
        }
        _ => Err(format!("invalid search term: {term}")),
    })?;
    let mut errors = Vec::new();
    let user_id = query_param(&values, "user_id", &mut errors, |v| {
        uuid::Uuid::parse_str(v).map_err(|_| "Query param \"user_id\" must be a valid uuid".to_owned())
    });
    let include_system = query_param(&values, "include_system", &mut errors, |v| {
        parse_bool(v).ok_or_else(|| {
            format!(
                "Query param \"include_system\" must be a valid boolean: strconv.ParseBool: parsing {v:?}: invalid \
                 syntax"
            )
        })
    });
    let github_user_id = query_param(&values, "github_user_id", &mut errors, |v| {
        v.parse::<i64>().map_err(|err| {
            let reason = match err.kind() {
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                    "value out of range"
                }
                _ => "invalid syntax",
            };
            format!(
                "Query param \"github_user_id\" must be a valid 64-bit integer: strconv.ParseInt: parsing {v:?}: \
                 {reason}"
            )
        })
    });
    for key in values.keys() {
        if !["user_id", "include_system", "github_user_id"].contains(&key.as_str()) {
            errors.push((key.clone(), format!("{key:?} is not a valid query param")));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(MemberFilter {
        user_id: user_id.unwrap_or_default(),
        github_user_id: github_user_id.unwrap_or_default(),
        include_system: include_system.unwrap_or_default(),
    })
}

/// One parameter as Coder's `QueryParamParser` reads it: absent, or an empty first value, is `None`; more than one
/// value is the validation `Query param "<key>" provided more than once, found <n> times. Only provide 1 instance
/// of this query param.`; else `parse` (its error the validation's detail).
fn query_param<T>(
    values: &BTreeMap<String, Vec<String>>,
    key: &str,
    errors: &mut Vec<Validation>,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Option<T> {
    let set = values
        .get(key)
        .filter(|set| set.first().is_some_and(|v| !v.is_empty()))?;
    if set.len() > 1 {
        errors.push((
            key.to_owned(),
            format!(
                "Query param {key:?} provided more than once, found {} times. Only provide 1 instance of this query \
                 param.",
                set.len()
            ),
        ));
        return None;
    }
    parse(&set[0])
        .map_err(|detail| errors.push((key.to_owned(), detail)))
        .ok()
}

/// Go's `strconv.ParseBool`.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Coder's `searchTerms`: `query` split at spaces outside double quotes; the `key:value` elements (keys in lower
/// case, values without their surrounding quotes) added to the values, the other words joined with spaces into one
/// last element for `default_key`. An element that starts or ends with `:` (`Query element "<e>" cannot start or end
/// with ':'`) or holds more than one (`Query element "<e>" can only contain 1 ':'`), or that `default_key` refuses, is
/// the one validation (field `q`).
fn search_terms(
    query: &str,
    default_key: impl Fn(&str, &mut BTreeMap<String, Vec<String>>) -> Result<(), String>,
) -> Result<BTreeMap<String, Vec<String>>, Vec<Validation>> {
    let refuse = |detail: String| vec![("q".to_owned(), detail)];
    let tokens = split_outside_quotes(query, ' ', true);
    let (mut elements, words): (Vec<String>, Vec<String>) =
        tokens.into_iter().partition(|token| token.contains(':'));
    if !words.is_empty() {
        elements.push(words.join(" "));
    }
    let mut values = BTreeMap::new();
    for element in elements {
        if element.starts_with(':') || element.ends_with(':') {
            return Err(refuse(format!(
                "Query element {element:?} cannot start or end with ':'"
            )));
        }
        match split_outside_quotes(&element, ':', false).as_slice() {
            [_] => default_key(&element, &mut values).map_err(refuse)?,
            [key, value] => values
                .entry(key.to_lowercase())
                .or_insert_with(Vec::new)
                .push(value.clone()),
            _ => {
                return Err(refuse(format!(
                    "Query element {element:?} can only contain 1 ':'"
                )));
            }
        }
    }
    Ok(values)
}

/// Coder's `splitQueryParameterByDelimiter`: Go's `strings.FieldsFunc` at `delimiter` outside double quotes (each
/// `"` toggles; empty parts dropped), each part without its leading and trailing quotes unless `keep_quotes`.
fn split_outside_quotes(text: &str, delimiter: char, keep_quotes: bool) -> Vec<String> {
    let mut quoted = false;
    text.split(|c: char| {
        if c == '"' {
            quoted = !quoted;
        }
        !quoted && c == delimiter
    })
    .filter(|part| !part.is_empty())
    .map(|part| {
        if keep_quotes {
            part.to_owned()
        } else {
            part.trim_matches('"').to_owned()
        }
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(q: &str) -> Vec<Validation> {
        member_filter(q).unwrap_err()
    }

    #[test]
    fn an_empty_member_search_filters_nothing() {
        assert_eq!(member_filter(""), Ok(MemberFilter::default()));
        assert_eq!(member_filter("  "), Ok(MemberFilter::default()));
        assert_eq!(member_filter("user_id"), Ok(MemberFilter::default()));
        assert_eq!(
            member_filter("include_system:"),
            Err(vec![(
                "q".to_owned(),
                "Query element \"include_system:\" cannot start or end with ':'".to_owned()
            )])
        );
    }

    #[test]
    fn member_search_terms_read_as_coders() {
        let id = uuid::Uuid::from_u128(7);
        assert_eq!(
            member_filter(&format!("include_system:true user_id:{id} github_user_id:\"42\"")),
            Ok(MemberFilter {
                user_id: id,
                github_user_id: 42,
                include_system: true
            })
        );
        assert!(member_filter("INCLUDE_SYSTEM:T").unwrap().include_system);
        assert!(!member_filter("include_system:false").unwrap().include_system);
        assert_eq!(
            refused("alice bob"),
            [("q".to_owned(), "invalid search term: alice bob".to_owned())]
        );
        assert_eq!(
            refused("a:b:c"),
            [(
                "q".to_owned(),
                "Query element \"a:b:c\" can only contain 1 ':'".to_owned()
            )]
        );
        assert_eq!(
            refused(
                "user_id:x include_system:yes github_user_id:99999999999999999999 role:owner"
            ),
            [
                ("user_id".to_owned(), "Query param \"user_id\" must be a valid uuid".to_owned()),
                (
                    "include_system".to_owned(),
                    "Query param \"include_system\" must be a valid boolean: strconv.ParseBool: parsing \"yes\": \
                     invalid syntax"
                        .to_owned()
                ),
                (
                    "github_user_id".to_owned(),
                    "Query param \"github_user_id\" must be a valid 64-bit integer: strconv.ParseInt: parsing \
                     \"99999999999999999999\": value out of range"
                        .to_owned()
                ),
                ("role".to_owned(), "\"role\" is not a valid query param".to_owned()),
            ]
        );
        assert_eq!(
            refused("include_system:true include_system:false"),
            [(
                "include_system".to_owned(),
                "Query param \"include_system\" provided more than once, found 2 times. Only provide 1 instance \
                 of this query param."
                    .to_owned()
            )]
        );
    }
}
