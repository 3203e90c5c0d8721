//! The per-resource storage contract the verb handlers call. A storage holds no HTTP knowledge: it gets parsed
//! objects and a request context, and answers objects or an [`ApiError`]. Objects are JSON values with
//! `apiVersion`, `kind` and `metadata` set; the handlers do content negotiation, selectors, Table conversion,
//! patching and watch fan-out.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;

use super::auth::UserInfo;
use super::status::ApiError;

/// What a storage call knows about the request it serves.
#[derive(Clone, Debug)]
pub struct RequestContext {
    /// The authenticated caller (already authorized for this request).
    pub user: UserInfo,
    /// The namespace of the request; `None` for an all-namespaces list or watch.
    pub namespace: Option<String>,
    /// When the request must be answered by (from the client's `timeout` or the server default).
    pub deadline: tokio::time::Instant,
    /// `dryRun=All` was asked for.
    pub dry_run: bool,
    /// Query parameters of the request, for storages that honour more than the handlers do.
    pub query: BTreeMap<String, String>,
}

/// Which watch event a write produces, if any. A storage decides: a delete that only starts a deletion in the
/// backend may be a `Modified`, not a `Deleted`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    /// The `type` of a watch event.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// The result of a create or update.
#[derive(Clone, Debug)]
pub struct Written {
    pub object: Value,
    /// The object did not exist before (201 rather than 200).
    pub created: bool,
    /// The event watchers see; `None` for a dry run or when nothing changed.
    pub event: Option<EventType>,
}

/// The result of a delete.
#[derive(Clone, Debug)]
pub enum Deleted {
    /// The object is gone (or going); the body is the object as it was, and watchers get the event.
    Object { object: Value, event: Option<EventType> },
    /// The deletion was accepted; the body is a `Status` with `status: Success`. Watchers get `event` with
    /// `object` when both are set.
    Success {
        object: Option<Value>,
        event: Option<EventType>,
    },
}

/// One resource's backend. Verbs the resource does not list in its [`super::ResourceDef`] are refused by the
/// handlers before a storage is called, so the default bodies only answer for a misconfigured registry.
#[async_trait]
pub trait Storage: Send + Sync {
    /// One object by name in `ctx.namespace`.
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError>;

    /// The object a patch or server-side apply of `name` is merged into: [`Storage::get`] unless a resource shows
    /// something on reads that a write must not take over unless the caller gives it again.
    async fn patch_base(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        self.get(ctx, name).await
    }

    /// Every object in `ctx.namespace` (all namespaces when `None`). Selectors are applied by the handlers.
    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError>;

    /// [`Storage::list`] as shared objects, which is what the list handler asks for: a storage that keeps the
    /// objects of its last list answers with them instead of building and later freeing a copy.
    async fn list_shared(&self, ctx: &RequestContext) -> Result<Arc<Vec<Value>>, ApiError> {
        Ok(Arc::new(self.list(ctx).await?))
    }

    /// Whether this storage can serve a write with this context at all (for example a dry run), answered before
    /// anything reaches its backend. The patch handler asks it before reading the current object; a storage that
    /// refuses also checks it in its own write methods.
    fn check_write(&self, _ctx: &RequestContext) -> Result<(), ApiError> {
        Ok(())
    }

    /// Create `object` (its name and namespace already checked against the request).
    async fn create(&self, _ctx: &RequestContext, _object: Value) -> Result<Written, ApiError> {
        Err(ApiError::method_not_allowed(
            "create is not supported on this resource",
        ))
    }

    /// Replace the object `name` with `object`. `allow_create` is set only for a server-side apply that found no
    /// object and whose caller passed the `create` authorization: then a missing object is created through the
    /// update path. Without it a missing object is a 404 (the apply handler then reads again and authorizes).
    async fn update(
        &self,
        _ctx: &RequestContext,
        _name: &str,
        _object: Value,
        _allow_create: bool,
    ) -> Result<Written, ApiError> {
        Err(ApiError::method_not_allowed(
            "update is not supported on this resource",
        ))
    }

    /// Delete the object `name`, honouring `options.preconditions`.
    async fn delete(
        &self,
        _ctx: &RequestContext,
        _name: &str,
        _options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        Err(ApiError::method_not_allowed(
            "delete is not supported on this resource",
        ))
    }
}
