//! `coderorganizations`: Coder organizations as read-only `CoderOrganization` objects named like the organization.
//! Every deployment has its default organization (open-source Coder has only that one); more are a Premium feature.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderOrganization, GROUP};
use serde_json::Value;

use super::convert;
use super::errors::within;
use super::names;
use super::provider::Provider;
use super::resources::{
    ORGANIZATIONS, WATCHED_READ, at, backend_of, column, not_canonical, schema, subject, unpaged_list_options,
};
use crate::generic::{ApiError, Column, RequestContext, ResourceDef, Storage};

/// The whole time an organization list or get may spend in Coder; past it the answer is a 504.
const ORGANIZATION_BUDGET: Duration = Duration::from_secs(25);

/// The `coderorganizations` resource (get and list only).
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
    ResourceDef {
        plural: ORGANIZATIONS,
        singular: "coderorganization",
        kind: "CoderOrganization",
        list_kind: "CoderOrganizationList",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: WATCHED_READ,
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

#[async_trait]
impl Storage for OrganizationStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let requested = names::parse_organization_name(name)?;
        let Some(backend) = backend_of(self.provider.as_ref(), ctx).await? else {
            return Err(ApiError::not_found(GROUP, ORGANIZATIONS, name));
        };
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
        convert::organization(&backend.namespace, &found)
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
