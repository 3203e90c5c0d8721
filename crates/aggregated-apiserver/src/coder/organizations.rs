//! `coderorganizations`: Coder organizations as `CoderOrganization` objects named like the organization. Every
//! deployment has its default organization (open-source Coder has only that one); creating, changing and deleting
//! organizations is Coder's Premium feature "Multiple Organizations", refused with Coder's own message without it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderOrganization, CoderOrganizationSpec, GROUP};
use coder_k8s_coder_client::Error as CoderError;
use coder_k8s_coder_client::types::organizations::{
    CreateOrganizationRequest, Organization, UpdateOrganizationRequest,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;

use super::convert;
use super::errors::{map_coder_error, within};
use super::names;
use super::provider::{Backend, Provider};
use super::resources::{
    ALL_VERBS, ORGANIZATIONS, at, column, named_backend, not_canonical, schema, subject, unpaged_list_options,
};
use super::write_rules::{
    self, check_current_version, check_preconditions, coder_write, conflict, gone, not_served,
    not_served_error, parse_body, refuse_dry_run,
};
use crate::generic::{ApiError, Column, Deleted, EventType, RequestContext, ResourceDef, Storage, Written};

/// The whole time an organization list or get may spend in Coder; past it the answer is a 504.
const ORGANIZATION_BUDGET: Duration = Duration::from_secs(25);

/// The `coderorganizations` resource.
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
    ResourceDef {
        plural: ORGANIZATIONS,
        singular: "coderorganization",
        kind: "CoderOrganization",
        list_kind: "CoderOrganizationList",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
        schema: schema::<CoderOrganization>(),
        columns: organization_columns(),
        subresources: Vec::new(),
        storage: Arc::new(OrganizationStorage { provider }),
        watch_feed: None,
    }
}

fn organization_columns() -> Vec<Column> {
    vec![
        column(
            "Display Name",
            "string",
            "The organization's display name.",
            0,
            |o| at(o, &["spec", "displayName"]).clone(),
        ),
        column(
            "Default",
            "boolean",
            "Whether this is the deployment's default organization.",
            0,
            |o| at(o, &["status", "isDefault"]).clone(),
        ),
    ]
}

struct OrganizationStorage {
    provider: Arc<dyn Provider>,
}

fn deadline(ctx: &RequestContext) -> tokio::time::Instant {
    ctx.deadline
        .min(tokio::time::Instant::now() + ORGANIZATION_BUDGET)
}

/// A Coder error of an organization write: a write this Coder does not serve is a 405 saying why, a delete Coder
/// refuses because of what the organization still holds is a 409 with Coder's words.
fn write_error(error: &CoderError, name: &str) -> ApiError {
    if not_served(error) {
        return not_served_error("organizations", "Multiple Organizations", error);
    }
    if error.status() == Some(500) && error.message().contains("must be deleted first") {
        return conflict(ORGANIZATIONS, name, error.message().trim());
    }
    map_coder_error(error, subject(ORGANIZATIONS, name))
}

/// Runs an organization write within `deadline`, its errors mapped by [`write_error`].
async fn write<T>(
    deadline: tokio::time::Instant,
    name: &str,
    call: impl Future<Output = Result<T, CoderError>>,
) -> Result<T, ApiError> {
    coder_write(deadline, subject(ORGANIZATIONS, name), call, |e| {
        write_error(e, name)
    })
    .await
}

/// The PATCH body that makes the organization's settings `spec`: the name is kept (sent empty), the description
/// and icon are always sent (Coder keeps what a body leaves out), and an empty display name keeps Coder's, which
/// Coder never lets be empty.
fn update_request(spec: &CoderOrganizationSpec) -> UpdateOrganizationRequest {
    UpdateOrganizationRequest {
        name: String::new(),
        display_name: spec.display_name.clone(),
        description: Some(spec.description.clone()),
        icon: Some(spec.icon.clone()),
    }
}

/// Whether `desired` asks for nothing `current` does not already have (an empty display name keeps Coder's).
fn unchanged(current: &Organization, desired: &CoderOrganizationSpec) -> bool {
    (desired.display_name.is_empty() || desired.display_name == current.display_name)
        && desired.description == current.description
        && desired.icon == current.icon
}

impl OrganizationStorage {
    async fn backend(&self, ctx: &RequestContext, name: &str) -> Result<Backend, ApiError> {
        named_backend(self.provider.as_ref(), ctx, ORGANIZATIONS, name).await
    }

    /// The organization `name` exactly as Coder spells it.
    async fn read(
        &self,
        ctx: &RequestContext,
        backend: &Backend,
        name: &str,
    ) -> Result<Organization, ApiError> {
        let requested = names::parse_organization_name(name)?;
        let found = within(
            deadline(ctx),
            subject(ORGANIZATIONS, name),
            backend.client.organization(&requested),
        )
        .await
        // Coder answers 403 for an organization the caller may not see: the object does not exist for it.
        .map_err(|e| {
            if e.code == 403 {
                ApiError::not_found(GROUP, ORGANIZATIONS, name)
            } else {
                e
            }
        })?;
        if found.name != requested {
            // `default`, an ID or another casing that Coder resolved.
            return Err(not_canonical("organization", name, &found.name));
        }
        Ok(found)
    }

    async fn create_organization(
        &self,
        ctx: &RequestContext,
        backend: &Backend,
        desired: CoderOrganization,
    ) -> Result<Written, ApiError> {
        let name = desired.metadata.name.unwrap_or_default();
        let name = names::parse_organization_name(&name)?;
        let request = CreateOrganizationRequest {
            name: name.clone(),
            display_name: desired.spec.display_name,
            description: desired.spec.description,
            icon: desired.spec.icon,
        };
        let created = write(deadline(ctx), &name, backend.client.create_organization(&request)).await?;
        Ok(Written {
            object: convert::organization(&backend.namespace, &created)?,
            created: true,
            event: Some(EventType::Added),
        })
    }
}

#[async_trait]
impl Storage for OrganizationStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let backend = self.backend(ctx, name).await?;
        let found = self.read(ctx, &backend, name).await?;
        convert::organization(&backend.namespace, &found)
    }

    fn check_write(&self, ctx: &RequestContext) -> Result<(), ApiError> {
        refuse_dry_run(ctx, ORGANIZATIONS)
    }

    async fn create(&self, ctx: &RequestContext, object: Value) -> Result<Written, ApiError> {
        refuse_dry_run(ctx, ORGANIZATIONS)?;
        let desired: CoderOrganization = parse_body(object, "CoderOrganization")?;
        let name = desired.metadata.name.clone().unwrap_or_default();
        let backend = self.backend(ctx, &name).await?;
        self.create_organization(ctx, &backend, desired).await
    }

    async fn update(
        &self,
        ctx: &RequestContext,
        name: &str,
        object: Value,
        allow_create: bool,
    ) -> Result<Written, ApiError> {
        refuse_dry_run(ctx, ORGANIZATIONS)?;
        let desired: CoderOrganization = parse_body(object, "CoderOrganization")?;
        let backend = self.backend(ctx, name).await?;
        let current = match self.read(ctx, &backend, name).await {
            Ok(current) => current,
            Err(error) if error.code == 404 && allow_create => {
                return self.create_organization(ctx, &backend, desired).await;
            }
            Err(error) => return Err(error),
        };
        let object = convert::organization(&backend.namespace, &current)?;
        check_current_version(
            ORGANIZATIONS,
            name,
            desired.metadata.resource_version.as_deref(),
            &object,
        )?;
        if unchanged(&current, &desired.spec) {
            return Ok(write_rules::unchanged(object));
        }
        let id = current.id.to_string();
        let request = update_request(&desired.spec);
        let updated = write(
            deadline(ctx),
            name,
            backend.client.update_organization(&id, &request),
        )
        .await?;
        Ok(Written {
            object: convert::organization(&backend.namespace, &updated)?,
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
        refuse_dry_run(ctx, ORGANIZATIONS)?;
        let backend = self.backend(ctx, name).await?;
        let current = self.read(ctx, &backend, name).await?;
        let object = convert::organization(&backend.namespace, &current)?;
        check_preconditions(ORGANIZATIONS, name, &object, options)?;
        let id = current.id.to_string();
        write(deadline(ctx), name, backend.client.delete_organization(&id)).await?;
        Ok(gone(object))
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        unpaged_list_options(ORGANIZATIONS, &ctx.query)?;
        let deadline = deadline(ctx);
        let mut objects = Vec::new();
        for backend in self.provider.resolve(ctx.namespace.as_deref()).await? {
            let mut organizations = within(
                deadline,
                subject(ORGANIZATIONS, ""),
                backend.client.organizations(),
            )
            .await?;
            organizations.sort_by(|a, b| a.name.cmp(&b.name));
            for organization in &organizations {
                objects.push(convert::organization(&backend.namespace, organization)?);
            }
        }
        Ok(objects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn organization() -> Organization {
        Organization {
            name: "acme".to_owned(),
            display_name: "Acme".to_owned(),
            description: "builders".to_owned(),
            icon: "/icon/acme.svg".to_owned(),
            ..Organization::default()
        }
    }

    fn spec(display_name: &str, description: &str, icon: &str) -> CoderOrganizationSpec {
        CoderOrganizationSpec {
            display_name: display_name.to_owned(),
            description: description.to_owned(),
            icon: icon.to_owned(),
        }
    }

    #[test]
    fn an_update_sends_every_setting_and_keeps_the_name_and_an_empty_display_name() {
        let request = update_request(&spec("", "", ""));
        let body = serde_json::to_value(&request).unwrap();
        // Coder keeps a field a PATCH leaves out: description and icon are always there, also when emptied.
        assert_eq!(
            body,
            serde_json::json!({"name": "", "display_name": "", "description": "", "icon": ""})
        );
    }

    #[test]
    fn only_a_real_change_is_written() {
        let current = organization();
        assert!(unchanged(&current, &spec("Acme", "builders", "/icon/acme.svg")));
        assert!(
            unchanged(&current, &spec("", "builders", "/icon/acme.svg")),
            "empty display name keeps Coder's"
        );
        assert!(
            !unchanged(&current, &spec("Acme", "", "/icon/acme.svg")),
            "an emptied description is a change"
        );
        assert!(!unchanged(
            &current,
            &spec("Acme Inc", "builders", "/icon/acme.svg")
        ));
        assert!(!unchanged(&current, &spec("Acme", "builders", "")));
    }

    #[test]
    fn writes_coder_does_not_serve_or_refuses_for_what_is_left_are_explained() {
        let route = CoderError::Unavailable {
            reason: coder_k8s_coder_client::UnavailableReason::RouteNotFound,
            status: Some(404),
            message: "Route not found.".to_owned(),
        };
        let error = write_error(&route, "acme");
        assert_eq!(error.code, 405);
        assert!(
            error.message.contains("Multiple Organizations"),
            "{}",
            error.message
        );
        let busy = CoderError::Unavailable {
            reason: coder_k8s_coder_client::UnavailableReason::ServerError,
            status: Some(500),
            message:
                "Error deleting organization.: This organization has 1 template that must be deleted first."
                    .to_owned(),
        };
        let error = write_error(&busy, "acme");
        assert_eq!(error.code, 409);
        assert!(
            error.message.contains("1 template that must be deleted first"),
            "{}",
            error.message
        );
    }
}
