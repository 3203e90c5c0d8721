//! The registry table of `aggregation.coder.com/v1alpha1`: each kind's module ([`super::workspaces`],
//! [`super::templates`], [`super::template_versions`], [`super::organizations`], [`super::groups`],
//! [`super::users`]) contributes its [`crate::generic::ResourceDef`]; this module
//! assembles them and holds what they share (schemas, columns, the backend of a request, name errors). Every object
//! is read from Coder through the [`Provider`] on each request; nothing is stored.

use std::sync::Arc;

use coder_k8s_api::aggregation::{GROUP, VERSION};
use schemars::JsonSchema;
use serde_json::Value;

use super::errors::Subject;
use super::provider::{Backend, Provider};
use super::user_records::UserStore;
use super::workspace_secrets::ParameterSecrets;
use super::{
    groups, organizations, promote, template_versions, templates, transitions, users, workspace_log,
    workspaces,
};
use crate::generic::{ApiError, Column, Registry, RequestContext, ResourceDef, SubresourceDef, Verb};

pub const WORKSPACES: &str = "coderworkspaces";
pub const TEMPLATES: &str = "codertemplates";
pub const TEMPLATE_VERSIONS: &str = "codertemplateversions";
pub const ORGANIZATIONS: &str = "coderorganizations";
pub const GROUPS: &str = "codergroups";
pub const USERS: &str = "coderusers";

pub(super) const READ: &[Verb] = &[Verb::Get, Verb::List];
/// Every verb a fully writable kind serves; `deletecollection` is not served anywhere.
pub(super) const ALL_VERBS: &[Verb] = &[
    Verb::Get,
    Verb::List,
    Verb::Watch,
    Verb::Create,
    Verb::Update,
    Verb::Patch,
    Verb::Delete,
];

/// The served resources, backed by Coder through `provider`; nothing is read from or kept in Kubernetes, so
/// workspace parameters from Secrets, user passwords from or into Secrets and user deletion policies are refused.
pub fn registry(provider: Arc<dyn Provider>) -> Registry {
    registry_with(provider, None, None)
}

/// The served resources; `parameter_secrets` serves workspace parameter values from Secrets, `user_store` user
/// passwords from and into Secrets and the user records (deletion policy, users a delete suspended).
pub fn registry_with(
    provider: Arc<dyn Provider>,
    parameter_secrets: Option<Arc<dyn ParameterSecrets>>,
    user_store: Option<Arc<dyn UserStore>>,
) -> Registry {
    Registry {
        group: GROUP,
        version: VERSION,
        resources: vec![
            with_subresources(
                workspaces::resource_with(provider.clone(), parameter_secrets),
                vec![
                    workspace_log::subresource(provider.clone()),
                    transitions::start(provider.clone()),
                    transitions::stop(provider.clone()),
                ],
            ),
            with_subresources(
                templates::resource(provider.clone()),
                vec![promote::subresource(provider.clone())],
            ),
            template_versions::resource(provider.clone()),
            organizations::resource(provider.clone()),
            groups::resource(provider.clone()),
            users::resource_with(provider, user_store),
        ],
    }
}

fn with_subresources(mut resource: ResourceDef, subresources: Vec<SubresourceDef>) -> ResourceDef {
    resource.subresources.extend(subresources);
    resource
}

/// The OpenAPI v3 schema of `T`: every subschema inlined (no `$ref`), without the meta-schema keyword. The API
/// crate builds it, so the generated reference pages show the schema this server publishes.
pub fn schema<T: JsonSchema>() -> Value {
    coder_k8s_api::generate::openapi_schema::<T>()
}

pub(super) fn at<'a>(object: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(object, |value, key| &value[*key])
}

pub(super) fn column(
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

pub(super) fn subject<'a>(resource: &'a str, name: &'a str) -> Subject<'a> {
    Subject {
        group: GROUP,
        resource,
        name,
    }
}

/// The one backend of a namespaced request, or `None` when the namespace is not served.
pub(super) async fn backend_of(
    provider: &dyn Provider,
    ctx: &RequestContext,
) -> Result<Option<Backend>, ApiError> {
    Ok(provider
        .resolve(ctx.namespace.as_deref())
        .await?
        .into_iter()
        .find(|b| Some(b.namespace.as_str()) == ctx.namespace.as_deref()))
}

/// The backend of the request's namespace, or a 404 of `name` in `resource` when the namespace has none.
pub(super) async fn named_backend(
    provider: &dyn Provider,
    ctx: &RequestContext,
    resource: &str,
    name: &str,
) -> Result<Backend, ApiError> {
    backend_of(provider, ctx)
        .await?
        .ok_or_else(|| ApiError::not_found(GROUP, resource, name))
}

/// A request named an object by a non-canonical spelling of its name (an alias or other casing Coder resolved).
pub(super) fn not_canonical(kind: &str, requested: &str, canonical: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} name {requested:?} is not canonical: use {canonical:?}"
    ))
}

/// The options of a list that is never paged and never served from a cache: `limit` is ignored, `continue` is a
/// 400, a `resourceVersion` other than empty or `0` a 400, and `resourceVersionMatch` a 422, as kube-apiserver words
/// invalid list options.
pub(super) fn unpaged_list_options(
    resource: &str,
    query: &std::collections::BTreeMap<String, String>,
) -> Result<(), ApiError> {
    if query.get("continue").is_some_and(|c| !c.is_empty()) {
        return Err(ApiError::bad_request(format!(
            "continue is not supported for {resource}: the list is never paged, so list again without continue"
        )));
    }
    if let Some(rv) = query
        .get("resourceVersion")
        .filter(|rv| !matches!(rv.as_str(), "" | "0"))
    {
        return Err(ApiError::bad_request(format!(
            "resourceVersion {rv:?} is not supported for {resource} lists: every list reads Coder, so leave resourceVersion unset or \"0\""
        )));
    }
    if let Some(matching) = query.get("resourceVersionMatch").filter(|m| !m.is_empty()) {
        return Err(ApiError::invalid(format!(
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch {matching:?} is not supported for {resource}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
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
        assert_eq!(verbs(TEMPLATES), templates::TEMPLATE_VERBS);
        assert_eq!(verbs(TEMPLATE_VERSIONS), [Verb::Get, Verb::List]);
        for resource in &registry.resources {
            assert!(resource.namespaced);
            assert_eq!(resource.list_kind, format!("{}List", resource.kind));
        }
        let subresources = |plural: &str| -> Vec<(&str, Vec<Verb>)> {
            let resource = registry.resource(plural).unwrap();
            resource
                .subresources
                .iter()
                .map(|s| (s.name, s.verbs.to_vec()))
                .collect()
        };
        assert_eq!(
            subresources(WORKSPACES),
            [
                ("log", vec![Verb::Get]),
                ("start", vec![Verb::Create]),
                ("stop", vec![Verb::Create])
            ]
        );
        assert_eq!(subresources(TEMPLATES), [("promote", vec![Verb::Create])]);
        assert!(subresources(TEMPLATE_VERSIONS).is_empty());
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
