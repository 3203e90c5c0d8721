//! `codertemplateversions`: Coder template versions as read-only `CoderTemplateVersion` objects named
//! `<organization>.<template>.<version>`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderTemplateVersion, GROUP};
use serde_json::Value;

use super::convert;
use super::errors::within;
use super::names;
use super::provider::Provider;
use super::resources::{
    READ, TEMPLATE_VERSIONS, at, backend_of, column, schema, subject, unpaged_list_options,
};
use super::templates::{all_templates, named_template};
use crate::generic::{ApiError, Column, RequestContext, ResourceDef, Storage};

/// The whole time a template version list or get may spend in Coder; past it the answer is a 504, never a partial
/// list.
const TEMPLATE_VERSION_BUDGET: Duration = Duration::from_secs(25);

/// The `codertemplateversions` resource (get and list only).
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
    ResourceDef {
        plural: TEMPLATE_VERSIONS,
        singular: "codertemplateversion",
        kind: "CoderTemplateVersion",
        list_kind: "CoderTemplateVersionList",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: READ,
        schema: schema::<CoderTemplateVersion>(),
        columns: template_version_columns(),
        subresources: Vec::new(),
        storage: Arc::new(TemplateVersionStorage { provider }),
        watch_feed: None,
    }
}

fn template_version_columns() -> Vec<Column> {
    vec![
        column("Organization", "string", "The Coder organization.", 0, |o| {
            at(o, &["spec", "organization"]).clone()
        }),
        column("Template", "string", "The template of the version.", 0, |o| {
            at(o, &["spec", "templateName"]).clone()
        }),
        column(
            "Active",
            "boolean",
            "Whether this is the template's active version.",
            0,
            |o| at(o, &["status", "active"]).clone(),
        ),
        column(
            "Archived",
            "boolean",
            "Whether the version is archived.",
            0,
            |o| at(o, &["status", "archived"]).clone(),
        ),
        column(
            "Job Status",
            "string",
            "Status of the version's import job.",
            0,
            |o| at(o, &["status", "job", "status"]).clone(),
        ),
        column(
            "Created By",
            "string",
            "Username of the version's creator.",
            1,
            |o| at(o, &["status", "createdBy"]).clone(),
        ),
    ]
}

struct TemplateVersionStorage {
    provider: Arc<dyn Provider>,
}

impl TemplateVersionStorage {
    /// The request deadline, cut to the template version budget.
    fn deadline(ctx: &RequestContext) -> tokio::time::Instant {
        ctx.deadline
            .min(tokio::time::Instant::now() + TEMPLATE_VERSION_BUDGET)
    }
}

/// The list options a template version list takes (see [`unpaged_list_options`]).
fn check_list_options(query: &BTreeMap<String, String>) -> Result<(), ApiError> {
    unpaged_list_options(TEMPLATE_VERSIONS, query)
}

#[async_trait]
impl Storage for TemplateVersionStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let parsed = names::parse_template_version_name(name)?;
        let deadline = Self::deadline(ctx);
        let Some(backend) = backend_of(self.provider.as_ref(), ctx).await? else {
            return Err(ApiError::not_found(GROUP, TEMPLATE_VERSIONS, name));
        };
        let template = named_template(
            &backend.client,
            deadline,
            TEMPLATE_VERSIONS,
            name,
            &parsed.organization,
            &parsed.template,
        )
        .await?;
        let versions = within(
            deadline,
            subject(TEMPLATE_VERSIONS, name),
            backend.client.template_versions(template.id, true),
        )
        .await?;
        // Version names are compared exactly: another casing is another (missing) object.
        let version = versions
            .iter()
            .find(|v| v.name == parsed.version)
            .ok_or_else(|| ApiError::not_found(GROUP, TEMPLATE_VERSIONS, name))?;
        convert::template_version(&backend.namespace, &template, version)
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        check_list_options(&ctx.query)?;
        let deadline = Self::deadline(ctx);
        let mut objects = Vec::new();
        for backend in self.provider.resolve(ctx.namespace.as_deref()).await? {
            for template in all_templates(&backend.client, deadline, TEMPLATE_VERSIONS).await? {
                let mut versions = within(
                    deadline,
                    subject(TEMPLATE_VERSIONS, ""),
                    backend.client.template_versions(template.id, true),
                )
                .await?;
                versions.sort_by(|a, b| {
                    convert::time(&a.created_at)
                        .map(|t| t.0)
                        .cmp(&convert::time(&b.created_at).map(|t| t.0))
                        .then_with(|| a.name.cmp(&b.name))
                });
                for version in &versions {
                    objects.push(convert::template_version(&backend.namespace, &template, version)?);
                }
            }
        }
        Ok(objects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pairs: &[(&str, &str)]) -> Result<(), (u16, String)> {
        let query = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        check_list_options(&query).map_err(|e| (e.code, e.message))
    }

    #[test]
    fn lists_ignore_limit_and_refuse_paging_and_resource_versions() {
        assert_eq!(check(&[]), Ok(()));
        assert_eq!(check(&[("limit", "1")]), Ok(()));
        assert_eq!(check(&[("resourceVersion", "0")]), Ok(()));
        assert_eq!(check(&[("resourceVersion", "")]), Ok(()));
        assert_eq!(check(&[("continue", "")]), Ok(()));
        assert_eq!(check(&[("continue", "abc")]).unwrap_err().0, 400);
        let (code, message) = check(&[("resourceVersion", "17")]).unwrap_err();
        assert_eq!(code, 400);
        assert!(
            message.starts_with("resourceVersion \"17\" is not supported"),
            "{message}"
        );
        assert_eq!(
            check(&[("resourceVersion", "0"), ("resourceVersionMatch", "NotOlderThan")])
                .unwrap_err()
                .0,
            422
        );
    }
}
