//! The one table of served resources: each [`ResourceDef`] says what discovery, OpenAPI, Table output and the
//! verb handlers need to know about a resource, and which [`Storage`] backs it.

use std::sync::Arc;

use async_trait::async_trait;
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;

use super::feed::WatchFeed;
use super::status::ApiError;
use super::storage::{EventType, RequestContext, Storage};

/// A Kubernetes verb a resource can serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }
}

/// A Table column: `kubectl get` prints it, `-o wide` also prints columns with priority > 0.
#[derive(Clone)]
pub struct Column {
    pub name: &'static str,
    /// OpenAPI type of the cells: `string`, `integer`, `number`, `boolean`, `date`.
    pub type_: &'static str,
    /// OpenAPI format (`name` for the name column, `date-time`, or empty).
    pub format: &'static str,
    pub description: &'static str,
    /// 0 for the default view, 1 for `-o wide` only.
    pub priority: i32,
    /// The cell for one object (`null` when the object has no value).
    pub cell: fn(&Value) -> Value,
}

impl std::fmt::Debug for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Column")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A request to a subresource (`<resource>/<name>/<subresource>`), already authenticated and authorized.
pub struct SubresourceRequest {
    pub ctx: RequestContext,
    pub name: String,
    pub method: http::Method,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

/// Header values (a bearer token) and the body are left out: a logged request must not carry a credential.
impl std::fmt::Debug for SubresourceRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubresourceRequest")
            .field("ctx", &self.ctx)
            .field("name", &self.name)
            .field("method", &self.method)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

/// The backend of one subresource. It answers the whole HTTP response (subresources may stream plain text).
#[async_trait]
pub trait SubresourceHandler: Send + Sync {
    async fn handle(&self, request: SubresourceRequest) -> Result<Response, ApiError>;
}

/// A watch event a subresource handler asks the server to send to the watchers of the parent resource (a `start`
/// that queued a build changed the workspace). The handler puts it in its response's extensions; the server takes it
/// out and publishes it once the handler answered successfully.
#[derive(Clone, Debug)]
pub struct ParentEvent {
    pub kind: EventType,
    pub object: Value,
}

/// A subresource as discovery lists it, and its handler.
#[derive(Clone)]
pub struct SubresourceDef {
    pub name: &'static str,
    /// The kind of the subresource's request/response object (discovery's `kind`).
    pub kind: &'static str,
    pub verbs: &'static [Verb],
    pub handler: Arc<dyn SubresourceHandler>,
}

/// One served resource.
#[derive(Clone)]
pub struct ResourceDef {
    /// Plural, lower case: the path segment (`coderworkspaces`).
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub list_kind: &'static str,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub namespaced: bool,
    pub verbs: &'static [Verb],
    /// The kind's OpenAPI v3 schema (a JSON Schema object with `properties`), without the group-version-kind
    /// extension: the OpenAPI documents add it.
    pub schema: Value,
    /// Table columns after `Name` (the handlers add `Name` first and `Age` last).
    pub columns: Vec<Column>,
    pub subresources: Vec<SubresourceDef>,
    pub storage: Arc<dyn Storage>,
    /// Changes made outside this server, for watches; `None`: watches see only writes through this server.
    pub watch_feed: Option<Arc<dyn WatchFeed>>,
}

impl ResourceDef {
    pub fn serves(&self, verb: Verb) -> bool {
        self.verbs.contains(&verb)
    }
}

impl std::fmt::Debug for ResourceDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceDef")
            .field("plural", &self.plural)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// The served API: one group and version, and its resources.
#[derive(Clone, Debug)]
pub struct Registry {
    pub group: &'static str,
    pub version: &'static str,
    pub resources: Vec<ResourceDef>,
}

impl Registry {
    /// `<group>/<version>`.
    pub fn group_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    pub fn resource(&self, plural: &str) -> Option<&ResourceDef> {
        self.resources.iter().find(|r| r.plural == plural)
    }

    /// Refuses a table that kube-apiserver or kubectl could not use: duplicate plurals or kinds, names that are not
    /// lower-case DNS labels, a kind without verbs.
    pub fn validate(&self) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for r in &self.resources {
            if !seen.insert(r.plural) || !seen.insert(r.kind) {
                return Err(format!(
                    "resource {} or kind {} is registered twice",
                    r.plural, r.kind
                ));
            }
            let label =
                |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
            if !label(r.plural) || !label(r.singular) {
                return Err(format!(
                    "resource {} must be lower-case letters and digits",
                    r.plural
                ));
            }
            if r.verbs.is_empty() {
                return Err(format!("resource {} serves no verb", r.plural));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generic::auth::UserInfo;

    #[test]
    fn a_subresource_request_never_shows_its_credentials() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer s3cr3t-token"),
        );
        let request = SubresourceRequest {
            ctx: RequestContext {
                user: UserInfo::default(),
                namespace: Some("team".into()),
                deadline: tokio::time::Instant::now(),
                dry_run: false,
                query: Default::default(),
            },
            name: "acme.alice.dev".into(),
            method: http::Method::POST,
            headers,
            body: Bytes::from_static(b"{\"token\":\"body-secret\"}"),
        };
        let printed = format!("{request:?}");
        assert!(
            printed.contains("authorization") && printed.contains("acme.alice.dev"),
            "{printed}"
        );
        assert!(
            !printed.contains("s3cr3t") && !printed.contains("body-secret"),
            "{printed}"
        );
    }
}
