//! The one runner of a kind's controller: the kind's watch cache as the main trigger (only spec and deletion
//! changes, not status or finalizer writes), the triggers of owned and read objects, bounded concurrency, the
//! finalizer, metrics, per-object bookkeeping dropped when an object goes, and graceful shutdown. A pass runs the
//! kind's steps up to an outcome; the runner sends a settled outcome to the kind's status writer and a failure to
//! the error policy.

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::runtime::Controller as KubeController;
use kube::runtime::controller::{Action, Config};
use kube::{Resource, ResourceExt};

use crate::cache::{Change, Informer, changes, is_unreadable};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::finalizer;
use crate::halt::Halt;
use crate::k8s::Caches;
use crate::kind::{Cleanup, Kind};
use crate::memory::PerObject;
use crate::pass::Pass;
use crate::triggers::TriggerSet;

/// What ends a controller: it completes when the process shuts down.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// A kind's controller: what else wakes its objects, and its steps.
pub trait Controller: Kind {
    /// How a pass ends: what the kind's status writer records.
    type Outcome: Send;

    /// The owned and read objects (in `caches`) whose changes reconcile objects of the kind.
    fn triggers(triggers: TriggerSet<Self>, caches: &Caches) -> TriggerSet<Self>;

    /// One pass over a live object: dereference → validate → build → apply, up to its outcome; a step stops it
    /// early with a [`Halt`].
    fn reconcile(
        pass: &mut Pass<'_, Self>,
    ) -> impl Future<Output = Result<Self::Outcome, Halt<Self::Outcome>>> + Send;

    /// Writes the status the pass built with its outcome, and says when to look again.
    fn settle(
        pass: &mut Pass<'_, Self>,
        outcome: Self::Outcome,
    ) -> impl Future<Output = Result<Action>> + Send;

    /// The finalizer's work before an object goes (only kinds with a finalizer are asked).
    fn cleanup(pass: &mut Pass<'_, Self>) -> impl Future<Output = Result<Cleanup>> + Send {
        let _ = pass;
        std::future::ready(Ok(Cleanup::Done))
    }
}

/// The steps of a kind's [`Controller`] impl, each done by a function of the kind's modules (`reconcile`, `settle`
/// and, for a kind with a finalizer, `cleanup`, with the trait's parameters): one line in each kind's wiring
/// instead of the same three forwarding methods.
macro_rules! steps {
    (reconcile: $reconcile:path, settle: $settle:path $(, cleanup: $cleanup:path)? $(,)?) => {
        async fn reconcile(
            pass: &mut $crate::pass::Pass<'_, Self>,
        ) -> ::std::result::Result<Self::Outcome, $crate::halt::Halt<Self::Outcome>> {
            $reconcile(pass).await
        }

        async fn settle(
            pass: &mut $crate::pass::Pass<'_, Self>,
            outcome: Self::Outcome,
        ) -> $crate::error::Result<::kube::runtime::controller::Action> {
            $settle(pass, outcome).await
        }

        $(
            async fn cleanup(
                pass: &mut $crate::pass::Pass<'_, Self>,
            ) -> $crate::error::Result<$crate::kind::Cleanup> {
                $cleanup(pass).await
            }
        )?
    };
}
pub(crate) use steps;

/// What the reconciles of one kind share: the context and the kind's memory of its objects.
struct Shared<K: Kind> {
    ctx: Arc<Context>,
    memory: Arc<PerObject<K::Memory>>,
}

impl<K: Kind> Shared<K> {
    /// Forgets everything kept about object `uid` (it is gone).
    fn forget(&self, uid: &str) {
        self.ctx.forget(uid);
        self.memory.forget(uid);
    }
}

/// What of the main object starts a reconcile: its spec (generation) and its deletion.
fn main_fingerprint<K: Resource>(object: &K) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    object.meta().generation.hash(&mut hasher);
    object.meta().deletion_timestamp.is_some().hash(&mut hasher);
    hasher.finish()
}

/// The main trigger: every object once at start, then spec and deletion changes. Deleted objects are forgotten.
fn main_triggers<K: Kind>(
    shared: &Arc<Shared<K>>,
    informer: &Informer<K>,
) -> impl futures::Stream<Item = std::result::Result<K, kube::runtime::watcher::Error>> + Send + 'static {
    let shared = shared.clone();
    let mut seen = std::collections::HashMap::<String, u64>::new();
    let later = changes(informer.subscribe(), move |change| match change {
        Change::Deleted(object) => {
            let uid = object.uid().unwrap_or_default();
            seen.remove(&uid);
            // An object that merely became unreadable keeps its bookkeeping (e.g. the proof of what it created).
            if !is_unreadable(object.as_ref()) {
                shared.forget(&uid);
            }
            Vec::new()
        }
        Change::Applied(object) => {
            let uid = object.uid().unwrap_or_default();
            let version = object.meta().resource_version.as_deref();
            shared.ctx.statuses.caught_up(&uid, version);
            let print = main_fingerprint(object.as_ref());
            match seen.insert(uid, print) {
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
pub async fn run<K: Controller>(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    use futures::FutureExt as _;
    let informer = K::cache(&ctx.k8s.caches).clone();
    // Subscribed before the first lists, so the changes they offer are seen.
    let triggers = K::triggers(TriggerSet::new(&ctx, informer.store()), &ctx.k8s.caches).build();
    // A shutdown while the caches are still filling ends the controller before it starts.
    let shutdown = shutdown.shared();
    tracing::debug!(kind = K::KIND, "waiting for the watch caches");
    tokio::select! {
        () = ctx.k8s.caches.ready() => {}
        () = shutdown.clone() => return,
    }
    tracing::debug!(kind = K::KIND, "watch caches ready; starting the controller");
    let config = Config::default().concurrency(ctx.settings.max_concurrent_reconciles);
    let memory = Arc::new(PerObject::<K::Memory>::default());
    ctx.track(memory.clone());
    let shared = Arc::new(Shared::<K> { ctx, memory });
    KubeController::for_stream(main_triggers(&shared, &informer), informer.store().clone())
        .with_config(config)
        .reconcile_on(futures::stream::select_all(triggers))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::<K>, error_policy::<K>, shared)
        .for_each(|result| {
            if let Err(error) = result {
                tracing::debug!(%error, "controller event");
            }
            std::future::ready(())
        })
        .await;
}

/// The runner of `K` as a task of the process.
pub fn task<K: Controller>(ctx: Arc<Context>, shutdown: Shutdown) -> BoxFuture<'static, ()> {
    Box::pin(run::<K>(ctx, shutdown))
}

fn reconcile<K: Controller>(object: Arc<K>, shared: Arc<Shared<K>>) -> BoxFuture<'static, Result<Action>> {
    Box::pin(async move {
        let ctx = &shared.ctx;
        let _measure = ctx.metrics.start(K::KIND);
        if object.meta().deletion_timestamp.is_some() {
            return delete(object, &shared).await;
        }
        let object = match K::FINALIZER {
            Some(name) if !finalizer::has(object.as_ref(), name) => finalizer::add(ctx, object, name).await?,
            _ => object,
        };
        if object.meta().deletion_timestamp.is_some() {
            // Deleted while the finalizer was being added.
            return delete(object, &shared).await;
        }
        let mut pass = Pass::begin(object.as_ref(), ctx, &shared.memory)?;
        match K::reconcile(&mut pass).await {
            Ok(outcome) | Err(Halt::Settled(outcome)) => K::settle(&mut pass, outcome).await,
            Err(Halt::Wait(action)) => Ok(action),
            Err(Halt::Failed(error)) => Err(error),
        }
    })
}

async fn delete<K: Controller>(object: Arc<K>, shared: &Shared<K>) -> Result<Action> {
    let Some(name) = K::FINALIZER.filter(|name| finalizer::has(object.as_ref(), name)) else {
        return Ok(Action::await_change());
    };
    let mut pass = Pass::begin(object.as_ref(), &shared.ctx, &shared.memory)?;
    match K::cleanup(&mut pass).await? {
        Cleanup::Done => {
            finalizer::release(&shared.ctx, object.as_ref(), name).await?;
            shared.forget(&object.uid().unwrap_or_default());
            Ok(Action::await_change())
        }
        Cleanup::WaitFor(after) => Ok(Action::requeue(after)),
    }
}

/// Requeue after a failed reconcile; also counts and logs the failure.
fn error_policy<K: Kind>(object: Arc<K>, error: &Error, shared: Arc<Shared<K>>) -> Action {
    let ctx = &shared.ctx;
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
