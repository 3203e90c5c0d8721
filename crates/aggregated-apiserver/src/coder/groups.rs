//! `codergroups`: Coder groups as `CoderGroup` objects named `<organization>.<group>`, members by user name.
//! Groups are a Premium feature (Template RBAC): open-source Coder serves no group routes and an unlicensed server
//! refuses them, yet every organization has its built-in `Everyone` group (all its members). Where Coder serves no
//! groups, `Everyone` is read from the organization's members; a get of any other group is Coder's own refusal
//! (unlicensed) or a 404 (open source, which has no other groups), and so is every write.
//!
//! Writes send Coder the difference: members are added and removed by user ID (resolved from the organization's
//! members, so a name that is not a member is a 422 before anything is written), and only the settings that differ
//! are sent, which leaves what Coder does not let change on `Everyone` (its name, display name and members) alone.

use std::sync::Arc;
use std::time::Duration;

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use coder_k8s_api::aggregation::names::GroupName;
use coder_k8s_api::aggregation::{CoderGroup, CoderGroupSpec, GROUP};
use coder_k8s_coder_client::types::groups::{CreateGroupRequest, Group, PatchGroupRequest};
use coder_k8s_coder_client::types::organizations::Organization;
use coder_k8s_coder_client::types::users::MinimalUser;
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;
use tokio::time::Instant;
use uuid::Uuid;

use super::convert;
use super::errors::{Subject, map_coder_error, timed_out, within};
use super::field_errors::{self, FieldError};
use super::names;
use super::provider::{Backend, Provider};
use super::resources::{
    ALL_VERBS, GROUPS, at, column, named_backend, not_canonical, schema, subject, unpaged_list_options,
};
use super::templates::exact_organization;
use super::write_rules::{
    check_current_version, check_preconditions, coder_write, gone, not_served, not_served_error, parse_body,
    refuse_dry_run, unchanged,
};
use crate::generic::{ApiError, Column, Deleted, EventType, RequestContext, ResourceDef, Storage, Written};

/// The whole time a group list or get may spend in Coder; past it the answer is a 504, never a partial list.
const GROUP_BUDGET: Duration = Duration::from_secs(25);

/// The name of every organization's built-in group of all its members.
pub const EVERYONE: &str = "Everyone";

/// The `codergroups` resource.
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
    ResourceDef {
        plural: GROUPS,
        singular: "codergroup",
        kind: "CoderGroup",
        list_kind: "CoderGroupList",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
        schema: schema::<CoderGroup>(),
        columns: group_columns(),
        subresources: Vec::new(),
        storage: Arc::new(GroupStorage { provider }),
        watch_feed: None,
    }
}

fn group_columns() -> Vec<Column> {
    vec![
        column("Organization", "string", "The Coder organization.", 0, |o| {
            at(o, &["spec", "organization"]).clone()
        }),
        column("Display Name", "string", "The group's display name.", 0, |o| {
            at(o, &["spec", "displayName"]).clone()
        }),
        column("Members", "integer", "How many members the group has.", 0, |o| {
            at(o, &["status", "memberCount"]).clone()
        }),
        column(
            "Source",
            "string",
            "user, or oidc for a group synced from the identity provider.",
            0,
            |o| at(o, &["status", "source"]).clone(),
        ),
    ]
}

struct GroupStorage {
    provider: Arc<dyn Provider>,
}

fn deadline(ctx: &RequestContext) -> Instant {
    ctx.deadline.min(Instant::now() + GROUP_BUDGET)
}

/// Whether Coder serves no groups here: open-source Coder has no group routes, an unlicensed server refuses them.
fn groups_not_served(error: &CoderError) -> bool {
    error.is_route_not_found() || matches!(error, CoderError::Forbidden { .. })
}

/// The organization's `Everyone` group as Coder defines it (ID = the organization's ID, every member), read from
/// the organization's members.
async fn everyone(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    organization: &Organization,
) -> Result<Group, ApiError> {
    let org = organization.id.to_string();
    let members = within(deadline, subject, client.organization_members(&org)).await?;
    let members: Vec<MinimalUser> = members
        .into_iter()
        .map(|m| MinimalUser {
            id: m.user_id,
            username: m.username,
            ..MinimalUser::default()
        })
        .collect();
    Ok(Group {
        id: organization.id,
        name: EVERYONE.to_owned(),
        organization_id: organization.id,
        total_member_count: i64::try_from(members.len()).unwrap_or(i64::MAX),
        members,
        source: "user".to_owned(),
        organization_name: organization.name.clone(),
        organization_display_name: organization.display_name.clone(),
        ..Group::default()
    })
}

/// The groups of one organization, sorted by name.
async fn organization_groups(
    client: &CoderClient,
    deadline: Instant,
    organization: &Organization,
) -> Result<Vec<Group>, ApiError> {
    let subject = subject(GROUPS, "");
    let org = organization.id.to_string();
    let mut groups = match tokio::time::timeout_at(deadline, client.groups(&org)).await {
        Ok(Ok(groups)) => groups,
        Ok(Err(error)) if groups_not_served(&error) => {
            vec![everyone(client, deadline, subject, organization).await?]
        }
        Ok(Err(error)) => return Err(map_coder_error(&error, subject)),
        Err(_) => return Err(timed_out(subject)),
    };
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(groups)
}

/// A Coder error of a group write: a write this Coder does not serve is a 405 saying why; anything else (the
/// Premium refusal of an unlicensed server, Coder's refusals for `Everyone`) is Coder's own message.
fn write_error(error: &CoderError, name: &str) -> ApiError {
    if not_served(error) {
        return not_served_error("groups", "Template RBAC", error);
    }
    map_coder_error(error, subject(GROUPS, name))
}

/// Runs a group write within `deadline`, its errors mapped by [`write_error`].
async fn write<T>(
    deadline: Instant,
    name: &str,
    call: impl Future<Output = Result<T, CoderError>>,
) -> Result<T, ApiError> {
    coder_write(deadline, subject(GROUPS, name), call, |e| write_error(e, name)).await
}

/// The user IDs of `members` (user names) among the organization's `known` members (name → ID). A name that is not
/// a member is a 422 naming it (Coder adds only members of the group's organization to a group).
fn member_ids(
    name: &str,
    members: &[String],
    known: &BTreeMap<String, Uuid>,
    organization: &str,
) -> Result<BTreeMap<String, Uuid>, ApiError> {
    let mut ids = BTreeMap::new();
    let mut errors = Vec::new();
    for (index, member) in members.iter().enumerate() {
        match known.get(member) {
            Some(id) => {
                ids.insert(member.clone(), *id);
            }
            None => errors.push(FieldError::not_found(
                format!("spec.members[{index}]"),
                member,
                format!("no member of organization {organization:?} has this user name"),
            )),
        }
    }
    field_errors::check("CoderGroup", GROUP, name, &errors)?;
    Ok(ids)
}

/// The PATCH that turns `current` into `desired`: members added and removed by ID, and only the settings that
/// differ (a PATCH leaves out what it does not change, which Coder keeps). `None` when nothing differs.
fn patch_request(
    current: &Group,
    desired: &CoderGroupSpec,
    wanted: &BTreeMap<String, Uuid>,
) -> Option<PatchGroupRequest> {
    let present: BTreeSet<Uuid> = current.members.iter().map(|m| m.id).collect();
    let wanted_ids: BTreeSet<Uuid> = wanted.values().copied().collect();
    let request = PatchGroupRequest {
        add_users: wanted_ids.difference(&present).map(Uuid::to_string).collect(),
        remove_users: present.difference(&wanted_ids).map(Uuid::to_string).collect(),
        name: String::new(),
        display_name: (desired.display_name != current.display_name).then(|| desired.display_name.clone()),
        avatar_url: (desired.avatar_url != current.avatar_url).then(|| desired.avatar_url.clone()),
        quota_allowance: (desired.quota_allowance != current.quota_allowance)
            .then_some(desired.quota_allowance),
    };
    (request != PatchGroupRequest::default()).then_some(request)
}

/// The body's organization must be the name's.
fn check_organization(name: &str, parsed: &GroupName, desired: &CoderGroupSpec) -> Result<(), ApiError> {
    if desired.organization.is_empty() || desired.organization == parsed.organization {
        return Ok(());
    }
    field_errors::check(
        "CoderGroup",
        GROUP,
        name,
        &[FieldError::invalid(
            "spec.organization",
            &desired.organization,
            format!("must be {:?}, the organization of the name", parsed.organization),
        )],
    )
}

impl GroupStorage {
    async fn backend(&self, ctx: &RequestContext, name: &str) -> Result<Backend, ApiError> {
        named_backend(self.provider.as_ref(), ctx, GROUPS, name).await
    }

    /// The group `name` (exact spelling) and its organization.
    async fn read(
        &self,
        backend: &Backend,
        deadline: Instant,
        name: &str,
        parsed: &GroupName,
    ) -> Result<(Organization, Group), ApiError> {
        let client = &backend.client;
        let object = (GROUPS, name, ("group", "group"));
        let organization = exact_organization(client, deadline, object, &parsed.organization).await?;
        let subject = subject(GROUPS, name);
        let found =
            tokio::time::timeout_at(deadline, client.group_by_name(&organization.name, &parsed.group));
        let group = match found.await {
            Ok(Ok(group)) => group,
            Ok(Err(error)) if groups_not_served(&error) && parsed.group == EVERYONE => {
                everyone(client, deadline, subject, &organization).await?
            }
            Ok(Err(error)) if error.is_route_not_found() => {
                return Err(ApiError::not_found(GROUP, GROUPS, name));
            }
            Ok(Err(error)) => return Err(map_coder_error(&error, subject)),
            Err(_) => return Err(timed_out(subject)),
        };
        if group.name != parsed.group {
            let canonical = names::group_name(&organization.name, &group.name)?;
            return Err(not_canonical("group", name, &canonical));
        }
        Ok((organization, group))
    }

    /// The organization's members by user name, for the member IDs of a write.
    async fn members(
        &self,
        backend: &Backend,
        deadline: Instant,
        name: &str,
        organization: &Organization,
    ) -> Result<BTreeMap<String, Uuid>, ApiError> {
        let org = organization.id.to_string();
        let members = within(
            deadline,
            subject(GROUPS, name),
            backend.client.organization_members(&org),
        )
        .await?;
        Ok(members.into_iter().map(|m| (m.username, m.user_id)).collect())
    }

    /// Creates the group, then adds its members (Coder creates a group without members). The members are checked
    /// before anything is written.
    async fn create_group(
        &self,
        backend: &Backend,
        deadline: Instant,
        name: &str,
        parsed: &GroupName,
        desired: &CoderGroupSpec,
    ) -> Result<Written, ApiError> {
        let client = &backend.client;
        let object = (GROUPS, name, ("group", "group"));
        let organization = exact_organization(client, deadline, object, &parsed.organization).await?;
        let known = self.members(backend, deadline, name, &organization).await?;
        let wanted = member_ids(name, &desired.members, &known, &organization.name)?;
        let request = CreateGroupRequest {
            name: parsed.group.clone(),
            display_name: desired.display_name.clone(),
            avatar_url: desired.avatar_url.clone(),
            quota_allowance: desired.quota_allowance,
        };
        let org = organization.id.to_string();
        let mut group = write(deadline, name, client.create_group(&org, &request)).await?;
        if !wanted.is_empty() {
            let add = PatchGroupRequest {
                add_users: wanted.values().map(Uuid::to_string).collect(),
                ..PatchGroupRequest::default()
            };
            group = write(deadline, name, client.patch_group(group.id, &add))
                .await
                .map_err(|mut error| {
                    error.message = format!("the group was created without its members: {}", error.message);
                    error
                })?;
        }
        Ok(Written {
            object: convert::group(&backend.namespace, &organization.name, &group)?,
            created: true,
            event: Some(EventType::Added),
        })
    }
}

#[async_trait]
impl Storage for GroupStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let parsed = names::parse_group_name(name)?;
        let backend = self.backend(ctx, name).await?;
        let (organization, group) = self.read(&backend, deadline(ctx), name, &parsed).await?;
        convert::group(&backend.namespace, &organization.name, &group)
    }

    fn check_write(&self, ctx: &RequestContext) -> Result<(), ApiError> {
        refuse_dry_run(ctx, GROUPS)
    }

    async fn create(&self, ctx: &RequestContext, object: Value) -> Result<Written, ApiError> {
        refuse_dry_run(ctx, GROUPS)?;
        let desired: CoderGroup = parse_body(object, "CoderGroup")?;
        let name = desired.metadata.name.clone().unwrap_or_default();
        let parsed = names::parse_group_name(&name)?;
        check_organization(&name, &parsed, &desired.spec)?;
        let backend = self.backend(ctx, &name).await?;
        self.create_group(&backend, deadline(ctx), &name, &parsed, &desired.spec)
            .await
    }

    async fn update(
        &self,
        ctx: &RequestContext,
        name: &str,
        object: Value,
        allow_create: bool,
    ) -> Result<Written, ApiError> {
        refuse_dry_run(ctx, GROUPS)?;
        let parsed = names::parse_group_name(name)?;
        let desired: CoderGroup = parse_body(object, "CoderGroup")?;
        check_organization(name, &parsed, &desired.spec)?;
        let backend = self.backend(ctx, name).await?;
        let deadline = deadline(ctx);
        let (organization, current) = match self.read(&backend, deadline, name, &parsed).await {
            Ok(found) => found,
            Err(error) if error.code == 404 && allow_create => {
                return self
                    .create_group(&backend, deadline, name, &parsed, &desired.spec)
                    .await;
            }
            Err(error) => return Err(error),
        };
        let object = convert::group(&backend.namespace, &organization.name, &current)?;
        check_current_version(
            GROUPS,
            name,
            desired.metadata.resource_version.as_deref(),
            &object,
        )?;
        let known = self.members(&backend, deadline, name, &organization).await?;
        let wanted = member_ids(name, &desired.spec.members, &known, &organization.name)?;
        let Some(patch) = patch_request(&current, &desired.spec, &wanted) else {
            return Ok(unchanged(object));
        };
        let updated = write(deadline, name, backend.client.patch_group(current.id, &patch)).await?;
        Ok(Written {
            object: convert::group(&backend.namespace, &organization.name, &updated)?,
            created: false,
            event: Some(EventType::Modified),
        })
    }

    async fn delete(
        &self,
        ctx: &RequestContext,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        refuse_dry_run(ctx, GROUPS)?;
        let parsed = names::parse_group_name(name)?;
        let backend = self.backend(ctx, name).await?;
        let deadline = deadline(ctx);
        let (organization, group) = self.read(&backend, deadline, name, &parsed).await?;
        let object = convert::group(&backend.namespace, &organization.name, &group)?;
        check_preconditions(GROUPS, name, &object, options)?;
        write(deadline, name, backend.client.delete_group(group.id)).await?;
        Ok(gone(object))
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        unpaged_list_options(GROUPS, &ctx.query)?;
        let deadline = deadline(ctx);
        let mut objects = Vec::new();
        for backend in self.provider.resolve(ctx.namespace.as_deref()).await? {
            let client = &backend.client;
            let mut organizations = within(deadline, subject(GROUPS, ""), client.organizations()).await?;
            organizations.sort_by(|a, b| a.name.cmp(&b.name));
            for organization in &organizations {
                for group in organization_groups(client, deadline, organization).await? {
                    match convert::group(&backend.namespace, &organization.name, &group) {
                        Ok(object) => objects.push(object),
                        // A group synced from an identity provider may carry a name with a `.`, which no object
                        // name can hold: it is left out of the list rather than failing it.
                        Err(error) => tracing::warn!(
                            organization = %organization.name, group = %group.name, %error,
                            "a Coder group is left out of the codergroups list"
                        ),
                    }
                }
            }
        }
        Ok(objects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn group(members: &[u128]) -> Group {
        Group {
            name: "ops".to_owned(),
            display_name: "Ops".to_owned(),
            avatar_url: "/a.png".to_owned(),
            quota_allowance: 5,
            members: members
                .iter()
                .map(|n| MinimalUser {
                    id: id(*n),
                    ..MinimalUser::default()
                })
                .collect(),
            ..Group::default()
        }
    }

    fn spec(display_name: &str, quota_allowance: i64) -> CoderGroupSpec {
        CoderGroupSpec {
            organization: "acme".to_owned(),
            display_name: display_name.to_owned(),
            avatar_url: "/a.png".to_owned(),
            quota_allowance,
            members: Vec::new(),
        }
    }

    fn wanted(ids: &[u128]) -> BTreeMap<String, Uuid> {
        ids.iter().map(|n| (format!("user{n}"), id(*n))).collect()
    }

    #[test]
    fn a_patch_adds_and_removes_members_and_sends_only_changed_settings() {
        let patch = patch_request(&group(&[1, 2]), &spec("Ops", 7), &wanted(&[2, 3])).unwrap();
        assert_eq!(patch.add_users, [id(3).to_string()]);
        assert_eq!(patch.remove_users, [id(1).to_string()]);
        assert_eq!(patch.name, "", "the name is kept");
        assert_eq!((patch.display_name, patch.avatar_url), (None, None));
        assert_eq!(patch.quota_allowance, Some(7));
        // What Coder does not let change on Everyone (name, display name, members) is left out when unchanged.
        let body =
            serde_json::to_value(patch_request(&group(&[1]), &spec("", 5), &wanted(&[1])).unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"add_users": [], "remove_users": [], "name": "", "display_name": ""})
        );
    }

    #[test]
    fn nothing_is_written_when_nothing_differs() {
        assert_eq!(
            patch_request(&group(&[1, 2]), &spec("Ops", 5), &wanted(&[1, 2])),
            None
        );
    }

    #[test]
    fn members_that_are_not_in_the_organization_are_named_in_one_422() {
        let known = wanted(&[1, 2]);
        let members = ["user2".to_owned(), "mallory".to_owned(), "eve".to_owned()];
        let error = member_ids("acme.ops", &members, &known, "acme").unwrap_err();
        assert_eq!(error.code, 422);
        assert!(
            error.message.contains("spec.members[1]: Not found: \"mallory\""),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("spec.members[2]: Not found: \"eve\""),
            "{}",
            error.message
        );
        let ids = member_ids("acme.ops", &members[..1], &known, "acme").unwrap();
        assert_eq!(ids, BTreeMap::from([("user2".to_owned(), id(2))]));
    }

    #[test]
    fn the_body_names_the_organization_of_the_name_or_none() {
        let parsed = GroupName {
            organization: "acme".to_owned(),
            group: "ops".to_owned(),
        };
        assert!(check_organization("acme.ops", &parsed, &spec("", 0)).is_ok());
        let mut other = spec("", 0);
        other.organization = "globex".to_owned();
        let error = check_organization("acme.ops", &parsed, &other).unwrap_err();
        assert_eq!(error.code, 422);
        assert!(error.message.contains("spec.organization"), "{}", error.message);
    }
}
