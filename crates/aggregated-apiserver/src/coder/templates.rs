//! `codertemplates`: Coder templates as `CoderTemplate` objects named `<organization>.<template>`.

use std::sync::Arc;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderTemplate, GROUP};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::templates::Template;
use serde_json::Value;

use super::convert;
use super::errors::within;
use super::names;
use super::provider::Provider;
use super::resources::{READ_WATCH, TEMPLATES, at, backend_of, column, not_canonical, schema, subject};
use crate::generic::{ApiError, Column, RequestContext, ResourceDef, Storage};

/// The `codertemplates` resource.
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
    ResourceDef {
        plural: TEMPLATES,
        singular: "codertemplate",
        kind: "CoderTemplate",
        list_kind: "CoderTemplateList",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: READ_WATCH,
        schema: schema::<CoderTemplate>(),
        columns: template_columns(),
        subresources: Vec::new(),
        storage: Arc::new(TemplateStorage { provider }),
        watch_feed: None,
    }
}

fn template_columns() -> Vec<Column> {
    vec![
        column("Organization", "string", "The Coder organization.", 0, |o| {
            at(o, &["spec", "organization"]).clone()
        }),
        column(
            "Active Version",
            "string",
            "ID of the active template version.",
            0,
            |o| at(o, &["status", "activeVersionID"]).clone(),
        ),
        column(
            "Deprecated",
            "boolean",
            "Whether the template is deprecated.",
            0,
            |o| Value::Bool(at(o, &["status", "deprecated"]).as_bool().unwrap_or(false)),
        ),
        column("Display Name", "string", "The template's display name.", 1, |o| {
            at(o, &["spec", "displayName"]).clone()
        }),
        column("Updated", "date", "When the template last changed.", 1, |o| {
            at(o, &["status", "updatedAt"]).clone()
        }),
    ]
}

struct TemplateStorage {
    provider: Arc<dyn Provider>,
}

/// Every template of every organization, sorted by organization and name.
pub(super) async fn all_templates(
    client: &CoderClient,
    deadline: tokio::time::Instant,
    resource: &str,
) -> Result<Vec<Template>, ApiError> {
    let organizations = within(deadline, subject(resource, ""), client.organizations()).await?;
    let mut templates = Vec::new();
    for organization in organizations {
        templates.extend(
            within(
                deadline,
                subject(resource, ""),
                client.templates(&organization.name),
            )
            .await?,
        );
    }
    templates.sort_by(|a, b| (&a.organization_name, &a.name).cmp(&(&b.organization_name, &b.name)));
    Ok(templates)
}

/// The template `<organization>.<template>` exactly as named: another organization is 404, another spelling of the
/// template name 400.
pub(super) async fn named_template(
    client: &CoderClient,
    deadline: tokio::time::Instant,
    resource: &str,
    name: &str,
    organization: &str,
    template: &str,
) -> Result<Template, ApiError> {
    let found = within(
        deadline,
        subject(resource, name),
        client.template_by_name(organization, template),
    )
    .await?;
    if found.organization_name != organization {
        return Err(ApiError::not_found(GROUP, resource, name));
    }
    if found.name != template {
        let canonical = names::template_name(&found.organization_name, &found.name)?;
        return Err(not_canonical(
            "template",
            &format!("{organization}.{template}"),
            &canonical,
        ));
    }
    Ok(found)
}

#[async_trait]
impl Storage for TemplateStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let parsed = names::parse_template_name(name)?;
        let Some(backend) = backend_of(self.provider.as_ref(), ctx).await? else {
            return Err(ApiError::not_found(GROUP, TEMPLATES, name));
        };
        let template = named_template(
            &backend.client,
            ctx.deadline,
            TEMPLATES,
            name,
            &parsed.organization,
            &parsed.template,
        )
        .await?;
        convert::template(&backend.namespace, &template)
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        let mut objects = Vec::new();
        for backend in self.provider.resolve(ctx.namespace.as_deref()).await? {
            for template in all_templates(&backend.client, ctx.deadline, TEMPLATES).await? {
                objects.push(convert::template(&backend.namespace, &template)?);
            }
        }
        Ok(objects)
    }
}
