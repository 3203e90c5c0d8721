//! What the shared machinery knows of a kind: its name, its finalizer, its memory type, and which watch
//! cache holds its objects. How a kind reconciles is `runner::Controller`.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use kube::core::object::HasStatus;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::{Informer, Object};
use crate::k8s::Caches;

/// A kind of `coder.com/v1alpha1` the operator reconciles. Its status type and the status it shows are the ones its
/// `CustomResource` derive declares (`HasStatus`).
pub trait Kind:
    Object
    + kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
    + HasStatus<
        Status: Serialize + DeserializeOwned + Clone + PartialEq + Default + Debug + Send + Sync + 'static,
    >
{
    /// Kind label of metrics and logs.
    const KIND: &'static str;
    /// The kind's finalizer, if it has one.
    const FINALIZER: Option<&'static str>;
    /// What a pass remembers of an object for the next ones (in memory; dropped when the object goes).
    type Memory: Clone + Default + Send + Sync + 'static;

    /// The watch cache of the kind's objects.
    fn cache(caches: &Caches) -> &Arc<Informer<Self>>;
}

/// What a cleanup decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Cleanup {
    /// Everything is cleaned up: release the finalizer.
    Done,
    /// Keep the finalizer and look again after this long (waiting is not a failure).
    WaitFor(Duration),
}
