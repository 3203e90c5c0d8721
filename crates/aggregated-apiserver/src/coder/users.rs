//! `coderusers`: Coder users as read-only `CoderUser` objects named like the user, with their site roles and the
//! roles they hold in each organization they are a member of. Never a password or a token.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderUser, GROUP};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use serde_json::{Value, json};
use tokio::time::Instant;
use uuid::Uuid;

use super::convert;
use super::errors::within;
use super::names;
use super::provider::Provider;
use super::resources::{
    USERS, WATCHED_READ, at, backend_of, column, not_canonical, schema, subject, unpaged_list_options,
};
use crate::generic::{ApiError, Column, RequestContext, ResourceDef, Storage};

/// The whole time a user list or get may spend in Coder; past it the answer is a 504, never a partial list.
const USER_BUDGET: Duration = Duration::from_secs(25);

/// The `coderusers` resource (get and list only).
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
    ResourceDef {
        plural: USERS,
        singular: "coderuser",
        kind: "CoderUser",
        list_kind: "CoderUserList",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: WATCHED_READ,
        schema: schema::<CoderUser>(),
        columns: user_columns(),
        subresources: Vec::new(),
        storage: Arc::new(UserStorage { provider }),
        watch_feed: None,
    }
}

fn user_columns() -> Vec<Column> {
    vec![
        column("Email", "string", "The user's email address.", 0, |o| {
            at(o, &["spec", "email"]).clone()
        }),
        column("Login Type", "string", "How the user signs in.", 0, |o| {
            at(o, &["spec", "loginType"]).clone()
        }),
        column("Status", "string", "active, dormant or suspended.", 0, |o| {
            at(o, &["status", "status"]).clone()
        }),
        column("Roles", "string", "Site-wide roles.", 1, |o| {
            let roles: Vec<&str> = at(o, &["spec", "roles"])
                .as_array()
                .map(|roles| roles.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            json!(roles.join(","))
        }),
    ]
}

struct UserStorage {
    provider: Arc<dyn Provider>,
}

fn deadline(ctx: &RequestContext) -> Instant {
    ctx.deadline.min(Instant::now() + USER_BUDGET)
}

/// Organization names by ID, from one organization list.
async fn organization_names(
    client: &CoderClient,
    deadline: Instant,
    name: &str,
) -> Result<BTreeMap<Uuid, String>, ApiError> {
    let organizations = within(deadline, subject(USERS, name), client.organizations()).await?;
    Ok(organizations.into_iter().map(|o| (o.id, o.name)).collect())
}

/// A user's roles in each organization, by organization name (organizations the operator cannot see are left out).
fn by_organization_name(
    roles: BTreeMap<Uuid, Vec<String>>,
    organizations: &BTreeMap<Uuid, String>,
) -> BTreeMap<String, Vec<String>> {
    roles
        .into_iter()
        .filter_map(|(id, roles)| Some((organizations.get(&id)?.clone(), roles)))
        .collect()
}

#[async_trait]
impl Storage for UserStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let requested = names::parse_user_name(name)?;
        let Some(backend) = backend_of(self.provider.as_ref(), ctx).await? else {
            return Err(ApiError::not_found(GROUP, USERS, name));
        };
        let (client, deadline) = (&backend.client, deadline(ctx));
        let user = match tokio::time::timeout_at(deadline, client.user(&requested)).await {
            Ok(Ok(user)) => user,
            // Coder answers an unknown user name with a 400 ("must be an existing uuid or username"); the name
            // passed Coder's name rule, so the user does not exist.
            Ok(Err(CoderError::Rejected { status: 400, .. })) => {
                return Err(ApiError::not_found(GROUP, USERS, name));
            }
            Ok(Err(error)) => return Err(super::errors::map_coder_error(&error, subject(USERS, name))),
            Err(_) => return Err(super::errors::timed_out(subject(USERS, name))),
        };
        if user.username != requested {
            // Another casing Coder resolved.
            return Err(not_canonical("user", name, &user.username));
        }
        let id = user.id.to_string();
        let roles = within(deadline, subject(USERS, name), client.user_roles(&id)).await?;
        let organizations = organization_names(client, deadline, name).await?;
        let memberships = by_organization_name(roles.organization_roles, &organizations);
        convert::user(&backend.namespace, &user, memberships)
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        unpaged_list_options(USERS, &ctx.query)?;
        let deadline = deadline(ctx);
        let mut objects = Vec::new();
        for backend in self.provider.resolve(ctx.namespace.as_deref()).await? {
            let client = &backend.client;
            let mut users = within(deadline, subject(USERS, ""), client.users()).await?;
            users.sort_by(|a, b| a.username.cmp(&b.username));
            let organizations = organization_names(client, deadline, "").await?;
            let mut memberships: BTreeMap<Uuid, BTreeMap<Uuid, Vec<String>>> = BTreeMap::new();
            for id in organizations.keys() {
                let org = id.to_string();
                let members = within(deadline, subject(USERS, ""), client.organization_members(&org)).await?;
                for member in members {
                    let roles = member.roles.into_iter().map(|r| r.name).collect();
                    memberships.entry(member.user_id).or_default().insert(*id, roles);
                }
            }
            for user in &users {
                let roles = memberships.remove(&user.id).unwrap_or_default();
                let memberships = by_organization_name(roles, &organizations);
                objects.push(convert::user(&backend.namespace, user, memberships)?);
            }
        }
        Ok(objects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn organization_roles_are_shown_by_organization_name_and_unseen_ones_left_out() {
        let (seen, unseen) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let organizations = BTreeMap::from([(seen, "acme".to_owned())]);
        let roles = BTreeMap::from([
            (seen, vec!["organization-admin".to_owned()]),
            (unseen, Vec::new()),
        ]);
        assert_eq!(
            by_organization_name(roles, &organizations),
            BTreeMap::from([("acme".to_owned(), vec!["organization-admin".to_owned()])])
        );
    }
}
