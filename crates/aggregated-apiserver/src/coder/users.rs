//! `coderusers`: Coder users as `CoderUser` objects named like the user, with their site roles and the roles they
//! hold in each organization they are a member of. Never a password or a token. An update of an existing user
//! (full name, site roles, memberships and their roles, suspension) is sent as the Coder calls of
//! [`user_writes::plan`]; creates and deletes are in [`super::user_lifecycle`]. The server's user records
//! ([`super::user_records`]) add the deletion policy and hide users a delete suspended.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderUser, GROUP};
use coder_k8s_coder_client::types::users::{UpdateRoles, UpdateUserProfileRequest, User};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use serde_json::{Value, json};
use tokio::time::Instant;
use uuid::Uuid;

use super::convert;
use super::errors::{map_coder_error, within};
use super::field_errors::{self, FieldError};
use super::names;
use super::provider::{Backend, Provider};
use super::resources::{
    ALL_VERBS, USERS, at, column, named_backend, not_canonical, schema, subject, unpaged_list_options,
};
use super::user_records::{UserRecord, UserStore};
use super::user_writes::{self, UserChange};
use super::write_rules::{check_current_version, parse_body, refuse_dry_run, unchanged};
use crate::generic::{ApiError, Column, Deleted, EventType, RequestContext, ResourceDef, Storage, Written};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;

/// The whole time a user list or get may spend in Coder; past it the answer is a 504, never a partial list.
const USER_BUDGET: Duration = Duration::from_secs(25);

/// The `coderusers` resource without a user store: no passwords from or into Secrets, no deletion policy, and no
/// delete that suspends.
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
    resource_with(provider, None)
}

/// The `coderusers` resource; `store` keeps the user records and reads and writes password Secrets.
pub fn resource_with(provider: Arc<dyn Provider>, store: Option<Arc<dyn UserStore>>) -> ResourceDef {
    ResourceDef {
        plural: USERS,
        singular: "coderuser",
        kind: "CoderUser",
        list_kind: "CoderUserList",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
        schema: schema::<CoderUser>(),
        columns: user_columns(),
        subresources: Vec::new(),
        storage: Arc::new(UserStorage { provider, store }),
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

pub(super) struct UserStorage {
    pub(super) provider: Arc<dyn Provider>,
    pub(super) store: Option<Arc<dyn UserStore>>,
}

/// A user as Coder holds it, with the server's record of it.
pub(super) struct Found {
    pub(super) user: User,
    pub(super) record: Option<UserRecord>,
    /// Its memberships by organization name, with the roles held there.
    pub(super) memberships: BTreeMap<String, Vec<String>>,
}

impl Found {
    /// Deleted through the API by suspending it: not shown.
    pub(super) fn hidden(&self) -> bool {
        self.record.as_ref().is_some_and(|r| r.hides(&self.user))
    }

    pub(super) fn object(&self, namespace: &str) -> Result<Value, ApiError> {
        let policy = self
            .record
            .as_ref()
            .map(|r| r.deletion_policy)
            .unwrap_or_default();
        convert::user(namespace, &self.user, self.memberships.clone(), policy.as_str())
    }
}

pub(super) fn deadline(ctx: &RequestContext) -> Instant {
    ctx.deadline.min(Instant::now() + USER_BUDGET)
}

/// Organization names by ID, from one organization list.
pub(super) async fn organization_names(
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

/// Every organization a change joins must exist (by its exact name): a 422 naming the entry otherwise, before
/// anything is written.
pub(super) async fn check_organizations_exist(
    client: &CoderClient,
    deadline: Instant,
    name: &str,
    changes: &[UserChange],
) -> Result<(), ApiError> {
    let joined: Vec<&str> = changes
        .iter()
        .filter_map(|change| match change {
            UserChange::Join(organization) => Some(organization.as_str()),
            _ => None,
        })
        .collect();
    if joined.is_empty() {
        return Ok(());
    }
    let known = organization_names(client, deadline, name).await?;
    let errors: Vec<FieldError> = joined
        .into_iter()
        .filter(|wanted| !known.values().any(|known| known == wanted))
        .map(|missing| {
            FieldError::not_found(
                format!("spec.organizations[{missing}]"),
                missing,
                "no organization of this name",
            )
        })
        .collect();
    field_errors::check("CoderUser", GROUP, name, &errors)
}

impl UserStorage {
    pub(super) async fn backend(&self, ctx: &RequestContext, name: &str) -> Result<Backend, ApiError> {
        named_backend(self.provider.as_ref(), ctx, USERS, name).await
    }

    /// The records of the users served in `namespace` (none without a store).
    pub(super) async fn records(&self, namespace: &str) -> Result<BTreeMap<String, UserRecord>, ApiError> {
        match &self.store {
            Some(store) => store.records(namespace).await,
            None => Ok(BTreeMap::new()),
        }
    }

    /// The user `name` (exact spelling) with its record, hidden or not; `None` when Coder has no such user.
    pub(super) async fn lookup(
        &self,
        backend: &Backend,
        deadline: Instant,
        name: &str,
    ) -> Result<Option<Found>, ApiError> {
        let requested = names::parse_user_name(name)?;
        let client = &backend.client;
        let user = match tokio::time::timeout_at(deadline, client.user(&requested)).await {
            Ok(Ok(user)) => user,
            // Coder answers an unknown user name with a 400 ("must be an existing uuid or username"); the name
            // passed Coder's name rule, so the user does not exist.
            Ok(Err(CoderError::Rejected { status: 400, .. })) => return Ok(None),
            Ok(Err(error)) => return Err(map_coder_error(&error, subject(USERS, name))),
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
        let record = self
            .records(&backend.namespace)
            .await?
            .remove(name)
            .filter(|r| r.applies_to(&user));
        Ok(Some(Found {
            user,
            record,
            memberships,
        }))
    }

    /// The user `name` and the object that shows it; a 404 for a user Coder does not have or a delete suspended.
    pub(super) async fn read(
        &self,
        backend: &Backend,
        deadline: Instant,
        name: &str,
    ) -> Result<(Found, Value), ApiError> {
        match self.lookup(backend, deadline, name).await? {
            Some(found) if !found.hidden() => {
                let object = found.object(&backend.namespace)?;
                Ok((found, object))
            }
            _ => Err(ApiError::not_found(GROUP, USERS, name)),
        }
    }

    /// Sends `changes` one by one. One that fails stops the update; the error says which went through before it.
    pub(super) async fn apply(
        &self,
        backend: &Backend,
        deadline: Instant,
        name: &str,
        user: &User,
        changes: &[UserChange],
    ) -> Result<(), ApiError> {
        for (done, change) in changes.iter().enumerate() {
            if let Err(mut error) = self.send(backend, deadline, name, user, change).await {
                if done > 0 {
                    let applied: Vec<String> = changes[..done].iter().map(UserChange::describe).collect();
                    error.message = format!(
                        "{} (already done before it: {}; read the user again before retrying)",
                        error.message,
                        applied.join(", ")
                    );
                }
                return Err(error);
            }
        }
        Ok(())
    }

    /// One change; organization names come from the caller, so they are held to Coder's name rule first.
    async fn send(
        &self,
        backend: &Backend,
        deadline: Instant,
        name: &str,
        user: &User,
        change: &UserChange,
    ) -> Result<(), ApiError> {
        let (client, subject) = (&backend.client, subject(USERS, name));
        let id = user.id.to_string();
        match change {
            UserChange::Join(organization) => {
                let organization = names::parse_organization_name(organization)?;
                within(
                    deadline,
                    subject,
                    client.add_organization_member(&organization, &id),
                )
                .await
            }
            UserChange::OrganizationRoles(organization, roles) => {
                let organization = names::parse_organization_name(organization)?;
                let request = UpdateRoles { roles: roles.clone() };
                within(
                    deadline,
                    subject,
                    client.update_member_roles(&organization, &id, &request),
                )
                .await
            }
            UserChange::Leave(organization) => {
                let organization = names::parse_organization_name(organization)?;
                within(
                    deadline,
                    subject,
                    client.remove_organization_member(&organization, &id),
                )
                .await
            }
            UserChange::SiteRoles(roles) => {
                let request = UpdateRoles { roles: roles.clone() };
                within(deadline, subject, client.update_user_roles(&id, &request))
                    .await
                    .map(drop)
            }
            UserChange::FullName(full_name) => {
                let request = UpdateUserProfileRequest {
                    username: user.username.clone(),
                    name: full_name.clone(),
                };
                within(deadline, subject, client.update_user_profile(&id, &request))
                    .await
                    .map(drop)
            }
            UserChange::Suspended(suspended) => {
                within(deadline, subject, client.set_user_suspended(&id, *suspended))
                    .await
                    .map(drop)
            }
            UserChange::DeletionPolicy(policy) => {
                let record = UserRecord {
                    user_id: user.id,
                    deletion_policy: *policy,
                    suspended_by_delete: None,
                };
                self.store_for(name, "spec.deletionPolicy")?
                    .write_record(&backend.namespace, name, &record)
                    .await
            }
        }
    }

    /// The user store, or the 422 on `field` of user `name`, which needs one.
    pub(super) fn store_for(&self, name: &str, field: &str) -> Result<&Arc<dyn UserStore>, ApiError> {
        self.store.as_ref().ok_or_else(|| {
            let error = FieldError::forbidden(
                field,
                "this needs the server's own namespace for its user records and Secrets (set POD_NAMESPACE)",
            );
            super::user_lifecycle::invalid(name, &[error])
        })
    }
}

#[async_trait]
impl Storage for UserStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let backend = self.backend(ctx, name).await?;
        Ok(self.read(&backend, deadline(ctx), name).await?.1)
    }

    fn check_write(&self, ctx: &RequestContext) -> Result<(), ApiError> {
        refuse_dry_run(ctx, USERS)
    }

    async fn update(
        &self,
        ctx: &RequestContext,
        name: &str,
        object: Value,
        allow_create: bool,
    ) -> Result<Written, ApiError> {
        refuse_dry_run(ctx, USERS)?;
        let desired: CoderUser = parse_body(object, "CoderUser")?;
        let backend = self.backend(ctx, name).await?;
        let deadline = deadline(ctx);
        let (found, current) = match self.read(&backend, deadline, name).await {
            Ok(found) => found,
            Err(error) if error.code == 404 && allow_create => {
                return self.create_user(ctx, &backend, name, desired).await;
            }
            Err(error) => return Err(error),
        };
        check_current_version(
            USERS,
            name,
            desired.metadata.resource_version.as_deref(),
            &current,
        )?;
        let held: CoderUser = parse_body(current.clone(), "CoderUser")?;
        // `plan` refuses only with field errors, so the fallback to no change is never taken.
        let changes = user_writes::plan(&held.spec, &desired.spec)
            .or_else(|errors| field_errors::check("CoderUser", GROUP, name, &errors).map(|()| Vec::new()))?;
        if changes.is_empty() {
            return Ok(unchanged(current));
        }
        check_organizations_exist(&backend.client, deadline, name, &changes).await?;
        self.apply(&backend, deadline, name, &found.user, &changes)
            .await?;
        Ok(Written {
            object: self.read(&backend, deadline, name).await?.1,
            created: false,
            event: Some(EventType::Modified),
        })
    }

    async fn create(&self, ctx: &RequestContext, object: Value) -> Result<Written, ApiError> {
        refuse_dry_run(ctx, USERS)?;
        let desired: CoderUser = parse_body(object, "CoderUser")?;
        let name = desired.metadata.name.clone().unwrap_or_default();
        let backend = self.backend(ctx, &name).await?;
        self.create_user(ctx, &backend, &name, desired).await
    }

    async fn delete(
        &self,
        ctx: &RequestContext,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        refuse_dry_run(ctx, USERS)?;
        let backend = self.backend(ctx, name).await?;
        self.delete_user(ctx, &backend, name, options).await
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
            let mut records = self.records(&backend.namespace).await?;
            for user in users {
                let record = records.remove(&user.username).filter(|r| r.applies_to(&user));
                let roles = memberships.remove(&user.id).unwrap_or_default();
                let memberships = by_organization_name(roles, &organizations);
                let found = Found {
                    user,
                    record,
                    memberships,
                };
                if !found.hidden() {
                    objects.push(found.object(&backend.namespace)?);
                }
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
