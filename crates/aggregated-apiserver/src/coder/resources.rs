//! The registry table of `aggregation.coder.com/v1alpha1` and its read storages. Every object is read from Coder
//! through the [`Provider`] on each request; nothing is stored. Writes and subresources are not served yet, so the
//! table lists only the verbs implemented here (watch is served by the generic server from its broadcaster).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderTemplate, CoderTemplateVersion, CoderWorkspace, GROUP, VERSION};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::templates::Template;
use coder_k8s_coder_client::types::workspaces::Workspace;
use schemars::JsonSchema;
use serde_json::Value;

use super::convert;
use super::errors::{Subject, within};
use super::names;
use super::provider::{Backend, Provider};
use crate::generic::{ApiError, Column, Registry, RequestContext, ResourceDef, Storage, Verb};

pub const WORKSPACES: &str = "coderworkspaces";
pub const TEMPLATES: &str = "codertemplates";
pub const TEMPLATE_VERSIONS: &str = "codertemplateversions";

/// The whole time a template version list or get may spend in Coder; past it the answer is a 504, never a partial
/// list.
const TEMPLATE_VERSION_BUDGET: Duration = Duration::from_secs(25);

const READ_WATCH: &[Verb] = &[Verb::Get, Verb::List, Verb::Watch];
const READ: &[Verb] = &[Verb::Get, Verb::List];

/// The served resources, backed by Coder through `provider`.
pub fn registry(provider: Arc<dyn Provider>) -> Registry {
    Registry {
        group: GROUP,
        version: VERSION,
        resources: vec![
            ResourceDef {
                plural: WORKSPACES,
                singular: "coderworkspace",
                kind: "CoderWorkspace",
                list_kind: "CoderWorkspaceList",
                short_names: &[],
                categories: &[],
                namespaced: true,
                verbs: READ_WATCH,
                schema: schema::<CoderWorkspace>(),
                columns: workspace_columns(),
                subresources: Vec::new(),
                storage: Arc::new(WorkspaceStorage {
                    provider: provider.clone(),
                }),
            },
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
                storage: Arc::new(TemplateStorage {
                    provider: provider.clone(),
                }),
            },
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
            },
        ],
    }
}

/// The OpenAPI v3 schema of `T`: every subschema inlined (no `$ref`), without the meta-schema keyword.
pub fn schema<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(object) = schema.as_object_mut() {
        for keyword in ["$schema", "title", "components", "definitions", "$defs"] {
            object.remove(keyword);
        }
    }
    schema
}

fn at<'a>(object: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(object, |value, key| &value[*key])
}

fn column(
    name: &'static str,
    type_: &'static str,
    description: &'static str,
    priority: i32,
    cell: fn(&Value) -> Value,
) -> Column {
    Column {
        name,
        type_,
        format: "",
        description,
        priority,
        cell,
    }
}

fn workspace_columns() -> Vec<Column> {
    vec![
        column("Organization", "string", "The Coder organization.", 0, |o| {
            at(o, &["spec", "organization"]).clone()
        }),
        column("Owner", "string", "The workspace owner.", 0, |o| {
            at(o, &["status", "ownerName"]).clone()
        }),
        column(
            "Template",
            "string",
            "The template the workspace is built from.",
            0,
            |o| at(o, &["spec", "templateName"]).clone(),
        ),
        column(
            "Running",
            "boolean",
            "Whether the workspace is started.",
            0,
            |o| at(o, &["spec", "running"]).clone(),
        ),
        column(
            "Last Build Status",
            "string",
            "Status of the latest build.",
            0,
            |o| at(o, &["status", "latestBuildStatus"]).clone(),
        ),
        column("Latest Build ID", "string", "ID of the latest build.", 1, |o| {
            at(o, &["status", "latestBuildID"]).clone()
        }),
        column(
            "Auto Shutdown",
            "date",
            "When the workspace stops automatically.",
            1,
            |o| at(o, &["status", "autoShutdown"]).clone(),
        ),
        column("Last Used", "date", "When the workspace was last used.", 1, |o| {
            at(o, &["status", "lastUsedAt"]).clone()
        }),
    ]
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

fn subject<'a>(resource: &'a str, name: &'a str) -> Subject<'a> {
    Subject {
        group: GROUP,
        resource,
        name,
    }
}

/// The one backend of a namespaced request, or `None` when the namespace is not served.
async fn backend_of(provider: &dyn Provider, ctx: &RequestContext) -> Result<Option<Backend>, ApiError> {
    Ok(provider
        .resolve(ctx.namespace.as_deref())
        .await?
        .into_iter()
        .find(|b| Some(b.namespace.as_str()) == ctx.namespace.as_deref()))
}

/// A request named an object by a non-canonical spelling of its name (an alias or other casing Coder resolved).
fn not_canonical(kind: &str, requested: &str, canonical: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} name {requested:?} is not canonical: use {canonical:?}"
    ))
}

struct WorkspaceStorage {
    provider: Arc<dyn Provider>,
}

/// Every workspace Coder shows the operator, page by page until Coder's count is reached.
async fn all_workspaces(client: &CoderClient, ctx: &RequestContext) -> Result<Vec<Workspace>, ApiError> {
    const PAGE: u32 = 100;
    let mut workspaces: Vec<Workspace> = Vec::new();
    loop {
        let offset = u32::try_from(workspaces.len()).unwrap_or(u32::MAX);
        let page = within(
            ctx.deadline,
            subject(WORKSPACES, ""),
            client.workspaces("", PAGE, offset),
        )
        .await?;
        let received = page.workspaces.len();
        workspaces.extend(page.workspaces);
        if received == 0 || i64::try_from(workspaces.len()).unwrap_or(i64::MAX) >= page.count {
            return Ok(workspaces);
        }
    }
}

#[async_trait]
impl Storage for WorkspaceStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let parsed = names::parse_workspace_name(name)?;
        let Some(backend) = backend_of(self.provider.as_ref(), ctx).await? else {
            return Err(ApiError::not_found(GROUP, WORKSPACES, name));
        };
        let workspace = within(
            ctx.deadline,
            subject(WORKSPACES, name),
            backend
                .client
                .workspace_by_owner_and_name(&parsed.owner, &parsed.workspace),
        )
        .await?;
        // A workspace of another organization is not found: the answer must not reveal that it exists.
        if workspace.organization_name != parsed.organization {
            return Err(ApiError::not_found(GROUP, WORKSPACES, name));
        }
        let object = convert::workspace(&backend.namespace, &workspace)?;
        match object["metadata"]["name"].as_str() {
            Some(canonical) if canonical == name => Ok(object),
            Some(canonical) => Err(not_canonical("workspace", name, canonical)),
            None => Err(ApiError::internal("a converted workspace has no name")),
        }
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        let mut objects = Vec::new();
        for backend in self.provider.resolve(ctx.namespace.as_deref()).await? {
            for workspace in all_workspaces(&backend.client, ctx).await? {
                objects.push(convert::workspace(&backend.namespace, &workspace)?);
            }
        }
        Ok(objects)
    }
}

struct TemplateStorage {
    provider: Arc<dyn Provider>,
}

/// Every template of every organization, sorted by organization and name.
async fn all_templates(
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
async fn named_template(
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
    use serde_json::json;

    struct Unserved;

    #[async_trait]
    impl Provider for Unserved {
        async fn resolve(&self, _namespace: Option<&str>) -> Result<Vec<Backend>, ApiError> {
            Ok(Vec::new())
        }
    }

    fn registry_for_tests() -> Registry {
        registry(Arc::new(Unserved))
    }

    #[test]
    fn the_table_is_valid_and_lists_only_implemented_verbs() {
        let registry = registry_for_tests();
        registry.validate().unwrap();
        assert_eq!(registry.group_version(), "aggregation.coder.com/v1alpha1");
        let verbs = |plural: &str| registry.resource(plural).unwrap().verbs.to_vec();
        assert_eq!(verbs(WORKSPACES), [Verb::Get, Verb::List, Verb::Watch]);
        assert_eq!(verbs(TEMPLATES), [Verb::Get, Verb::List, Verb::Watch]);
        assert_eq!(verbs(TEMPLATE_VERSIONS), [Verb::Get, Verb::List]);
        for resource in &registry.resources {
            assert!(resource.namespaced);
            assert!(resource.subresources.is_empty());
            assert_eq!(resource.list_kind, format!("{}List", resource.kind));
        }
    }

    #[test]
    fn schemas_are_inlined_openapi_objects() {
        let registry = registry_for_tests();
        let workspace = &registry.resource(WORKSPACES).unwrap().schema;
        let text = workspace.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert!(!text.contains("$schema"));
        assert_eq!(workspace["properties"]["spec"]["required"], json!(["running"]));
        assert_eq!(
            workspace["properties"]["metadata"]["properties"]["name"]["type"],
            "string"
        );
        assert_eq!(
            workspace["properties"]["status"]["properties"]["lastUsedAt"]["format"],
            "date-time"
        );
        let version = &registry.resource(TEMPLATE_VERSIONS).unwrap().schema;
        assert!(version["properties"]["status"]["properties"]["job"]["properties"]["errorCode"].is_object());
    }

    #[test]
    fn columns_read_the_converted_objects() {
        let registry = registry_for_tests();
        let workspace = json!({
            "spec": {"organization": "acme", "templateName": "docker", "running": true},
            "status": {"ownerName": "alice", "latestBuildStatus": "running", "latestBuildID": "b1",
                       "autoShutdown": "2026-01-01T18:00:00Z", "lastUsedAt": "2026-01-01T11:00:00Z"}
        });
        let cells = |plural: &str, object: &Value| -> Vec<(String, i32, Value)> {
            registry
                .resource(plural)
                .unwrap()
                .columns
                .iter()
                .map(|c| (c.name.to_owned(), c.priority, (c.cell)(object)))
                .collect()
        };
        assert_eq!(
            cells(WORKSPACES, &workspace),
            [
                ("Organization".into(), 0, json!("acme")),
                ("Owner".into(), 0, json!("alice")),
                ("Template".into(), 0, json!("docker")),
                ("Running".into(), 0, json!(true)),
                ("Last Build Status".into(), 0, json!("running")),
                ("Latest Build ID".into(), 1, json!("b1")),
                ("Auto Shutdown".into(), 1, json!("2026-01-01T18:00:00Z")),
                ("Last Used".into(), 1, json!("2026-01-01T11:00:00Z")),
            ]
        );
        let template = json!({"spec": {"organization": "acme", "displayName": "Docker"},
                              "status": {"activeVersionID": "v1", "updatedAt": "2026-01-02T00:00:00Z"}});
        assert_eq!(
            cells(TEMPLATES, &template),
            [
                ("Organization".into(), 0, json!("acme")),
                ("Active Version".into(), 0, json!("v1")),
                ("Deprecated".into(), 0, json!(false)),
                ("Display Name".into(), 1, json!("Docker")),
                ("Updated".into(), 1, json!("2026-01-02T00:00:00Z")),
            ]
        );
        let version = json!({"spec": {"organization": "acme", "templateName": "docker"},
                             "status": {"active": true, "archived": false, "createdBy": "alice", "job": {"status": "succeeded"}}});
        assert_eq!(
            cells(TEMPLATE_VERSIONS, &version),
            [
                ("Organization".into(), 0, json!("acme")),
                ("Template".into(), 0, json!("docker")),
                ("Active".into(), 0, json!(true)),
                ("Archived".into(), 0, json!(false)),
                ("Job Status".into(), 0, json!("succeeded")),
                ("Created By".into(), 1, json!("alice")),
            ]
        );
    }
}
