//! The one runner of a kind's controller: the kind's watch cache as the main trigger (only spec and deletion
//! changes, not status or finalizer writes), the triggers of owned and read objects, bounded concurrency, the
//! finalizer, metrics, the error policy, per-object bookkeeping dropped when an object goes, and graceful shutdown.

use std::fmt::Debug;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt, future::BoxFuture};
use kube::runtime::Controller;
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::cache::{Change, Informer, changes};
use super::context::Context;
use super::error::{Error, Result};
use super::finalizer;

/// What a cleanup decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Cleanup {
    /// Everything is cleaned up: release the finalizer.
    Done,
    /// Keep the finalizer and look again after this long (waiting is not a failure).
    WaitFor(Duration),
}

/// A kind the runner can run.
pub trait Kind:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
    /// Kind label of metrics and logs.
    const KIND: &'static str;
    /// The kind's finalizer, if it has one.
    const FINALIZER: Option<&'static str>;
}

/// The kind's reconcile steps.
pub struct Steps<K> {
    pub apply: fn(Arc<K>, Arc<Context>) -> BoxFuture<'static, Result<Action>>,
    pub cleanup: fn(Arc<K>, Arc<Context>) -> BoxFuture<'static, Result<Cleanup>>,
}

impl<K> Clone for Steps<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for Steps<K> {}

/// A trigger stream of a kind (from owned or read objects).
pub type Triggers<K> = BoxStream<'static, ObjectRef<K>>;

/// What of the main object starts a reconcile: its spec (generation) and its deletion.
fn main_fingerprint<K: Resource>(object: &K) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    object.meta().generation.hash(&mut hasher);
    object.meta().deletion_timestamp.is_some().hash(&mut hasher);
    hasher.finish()
}

/// The main trigger: every object once at start, then spec and deletion changes. Deleted objects are forgotten.
fn main_triggers<K: Kind>(
    ctx: &Arc<Context>,
    informer: &Informer<K>,
) -> impl futures::Stream<Item = std::result::Result<K, kube::runtime::watcher::Error>> + Send + 'static {
    let ctx = ctx.clone();
    let mut seen = std::collections::HashMap::<String, u64>::new();
    let later = changes(informer.subscribe(), move |change| match change {
        Change::Deleted(object) => {
            let uid = object.uid().unwrap_or_default();
            seen.remove(&uid);
            // An object that merely became unreadable keeps its bookkeeping (e.g. the proof of what it created).
            if !super::cache::is_unreadable(object.as_ref()) {
                ctx.forget(&uid);
            }
            Vec::new()
        }
        Change::Applied(object) => {
            let print = main_fingerprint(object.as_ref());
            match seen.insert(object.uid().unwrap_or_default(), print) {
                Some(previous) if previous == print => Vec::new(),
                _ => vec![Ok(object.as_ref().clone())],
            }
        }
    });
    let initial: Vec<_> = informer
        .store()
        .state()
        .iter()
        .map(|o| Ok(o.as_ref().clone()))
        .collect();
    futures::stream::iter(initial).chain(later)
}

/// Runs the controller of `K` until `shutdown` completes. From then on no new reconcile starts; the call returns
/// once the reconciles in flight have finished (the caller bounds that wait).
pub async fn run<K: Kind>(
    ctx: Arc<Context>,
    informer: Arc<Informer<K>>,
    triggers: Vec<Triggers<K>>,
    steps: Steps<K>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    use futures::FutureExt as _;
    // A shutdown while the caches are still filling ends the controller before it starts.
    let shutdown = shutdown.shared();
    tracing::debug!(kind = K::KIND, "waiting for the watch caches");
    tokio::select! {
        () = ctx.caches.ready() => {}
        () = shutdown.clone() => return,
    }
    tracing::debug!(kind = K::KIND, "watch caches ready; starting the controller");
    let main = main_triggers(&ctx, &informer);
    let config = Config::default().concurrency(ctx.settings.max_concurrent_reconciles);
    Controller::for_stream(main, informer.store().clone())
        .with_config(config)
        .reconcile_on(futures::stream::select_all(triggers))
        .graceful_shutdown_on(shutdown)
        .run(
            move |object, ctx| reconcile(object, ctx, steps),
            error_policy::<K>,
            ctx.clone(),
        )
        .for_each(|result| {
            if let Err(error) = result {
                tracing::debug!(%error, "controller event");
            }
            std::future::ready(())
        })
        .await;
}

fn reconcile<K: Kind>(
    object: Arc<K>,
    ctx: Arc<Context>,
    steps: Steps<K>,
) -> Pin<Box<dyn Future<Output = Result<Action>> + Send>> {
    Box::pin(async move {
        let metrics = ctx.metrics.clone();
        let _measure = metrics.start(K::KIND);
        if object.meta().deletion_timestamp.is_some() {
            return delete(object, ctx, steps).await;
        }
        let object = match K::FINALIZER {
            Some(name) if !finalizer::has(object.as_ref(), name) => {
                finalizer::add(&ctx, object, name).await?
            }
            _ => object,
        };
        if object.meta().deletion_timestamp.is_some() {
            // Deleted while the finalizer was being added.
            return delete(object, ctx, steps).await;
        }
        (steps.apply)(object, ctx).await
    })
}

async fn delete<K: Kind>(object: Arc<K>, ctx: Arc<Context>, steps: Steps<K>) -> Result<Action> {
    let Some(name) = K::FINALIZER.filter(|name| finalizer::has(object.as_ref(), name)) else {
        return Ok(Action::await_change());
    };
    match (steps.cleanup)(object.clone(), ctx.clone()).await? {
        Cleanup::Done => {
            finalizer::release(&ctx, object.as_ref(), name).await?;
            ctx.forget(&object.uid().unwrap_or_default());
            Ok(Action::await_change())
        }
        Cleanup::WaitFor(after) => Ok(Action::requeue(after)),
    }
}

/// Requeue after a failed reconcile; also counts and logs the failure.
fn error_policy<K: Kind>(object: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.failure(K::KIND, error.category());
    tracing::warn!(kind = K::KIND, name = %object.name_any(), namespace = ?object.namespace(), category = error.category(), %error, "reconcile failed");
    Action::requeue(ctx.settings.retry_interval)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn status_and_finalizer_writes_do_not_start_a_reconcile() {
        let mut object = ConfigMap::default();
        object.metadata.generation = Some(1);
        let before = main_fingerprint(&object);
        object.metadata.finalizers = Some(vec!["coder.com/x".to_owned()]);
        object.metadata.resource_version = Some("2".to_owned());
        assert_eq!(main_fingerprint(&object), before);
        object.metadata.generation = Some(2);
        assert_ne!(main_fingerprint(&object), before, "a spec change does");
        let spec_changed = main_fingerprint(&object);
        object.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert_ne!(main_fingerprint(&object), spec_changed, "a deletion does");
    }
}
