//! `codergroups`: Coder groups as read-only `CoderGroup` objects named `<organization>.<group>`, members by user
//! name. Groups are a Premium feature (Template RBAC): open-source Coder serves no group routes and an unlicensed
//! server refuses them, yet every organization has its built-in `Everyone` group (all its members). Where Coder
//! serves no groups, `Everyone` is read from the organization's members; a get of any other group is Coder's own
//! refusal (unlicensed) or a 404 (open source, which has no other groups).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderGroup, GROUP};
use coder_k8s_coder_client::types::groups::Group;
use coder_k8s_coder_client::types::organizations::Organization;
use coder_k8s_coder_client::types::users::MinimalUser;
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use serde_json::Value;
use tokio::time::Instant;

use super::convert;
use super::errors::{Subject, map_coder_error, timed_out, within};
use super::names;
use super::provider::Provider;
use super::resources::{
    GROUPS, WATCHED_READ, at, backend_of, column, not_canonical, schema, subject, unpaged_list_options,
};
use super::templates::exact_organization;
use crate::generic::{ApiError, Column, RequestContext, ResourceDef, Storage};

/// The whole time a group list or get may spend in Coder; past it the answer is a 504, never a partial list.
const GROUP_BUDGET: Duration = Duration::from_secs(25);

/// The name of every organization's built-in group of all its members.
pub const EVERYONE: &str = "Everyone";

/// The `codergroups` resource (get and list only).
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
    ResourceDef {
        plural: GROUPS,
        singular: "codergroup",
        kind: "CoderGroup",
        list_kind: "CoderGroupList",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: WATCHED_READ,
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

#[async_trait]
impl Storage for GroupStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let parsed = names::parse_group_name(name)?;
        let Some(backend) = backend_of(self.provider.as_ref(), ctx).await? else {
            return Err(ApiError::not_found(GROUP, GROUPS, name));
        };
        let (client, deadline) = (&backend.client, deadline(ctx));
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
        convert::group(&backend.namespace, &organization.name, &group)
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
