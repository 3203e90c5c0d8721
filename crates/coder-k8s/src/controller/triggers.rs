//! The triggers of a kind's controller from the objects it owns or reads: each change that is news (not the echo
//! of the operator's own apply, and a change the controller reads) is mapped to the objects to reconcile.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use serde::de::DeserializeOwned;

use super::cache::{
    Change, ChangeFilter, Echoes, Fingerprint, Informer, changes, controller_owner, hash_only,
};
use super::runner::{Kind, Triggers};

/// A source of changes of `C`: a watch cache, or a channel a cache publishes on once it starts.
pub trait Subscribe<C> {
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change<C>>;
}

impl<C> Subscribe<C> for Informer<C>
where
    C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change<C>> {
        Informer::subscribe(self)
    }
}

impl<C, S: Subscribe<C>> Subscribe<C> for Arc<S> {
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change<C>> {
        self.as_ref().subscribe()
    }
}

impl<C> Subscribe<C> for tokio::sync::broadcast::Sender<Change<C>> {
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change<C>> {
        tokio::sync::broadcast::Sender::subscribe(self)
    }
}

/// Maps a changed object to the objects of kind `O` to reconcile.
pub type Targets<O, C> = fn(&Store<O>, &C) -> Vec<ObjectRef<O>>;

/// Triggers of kind `O` from the changes of `informer` (objects the operator applies as `applied_kind`).
pub fn from<O, C>(
    informer: &impl Subscribe<C>,
    echoes: &Arc<Echoes>,
    applied_kind: &str,
    fingerprint: fn(&C) -> Fingerprint,
    owners: Store<O>,
    targets: Targets<O, C>,
) -> Triggers<O>
where
    O: Kind,
    C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut filter = ChangeFilter::new(applied_kind, echoes.clone(), fingerprint);
    changes(informer.subscribe(), move |change: Change<C>| {
        if filter.is_news(&change) {
            targets(&owners, change.object())
        } else {
            Vec::new()
        }
    })
    .boxed()
}

/// Triggers of kind `O` from the objects of `informer` it controls, whose desired hash is all that matters.
pub fn owned<O, C>(informer: &impl Subscribe<C>, echoes: &Arc<Echoes>, owners: &Store<O>) -> Triggers<O>
where
    O: Kind,
    C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    from(
        informer,
        echoes,
        &C::kind(&()),
        hash_only,
        owners.clone(),
        owner::<O, C>,
    )
}

/// The controller owner, when it is of kind `O`.
pub fn owner<O: Kind, C: Resource>(_: &Store<O>, child: &C) -> Vec<ObjectRef<O>> {
    controller_owner::<O, C>(child).into_iter().collect()
}

/// The objects of kind `O` in the child's namespace for which `reads(object, child name)` holds.
pub fn readers<O: Kind, C: Resource>(
    store: &Store<O>,
    child: &C,
    reads: impl Fn(&O, &str) -> bool,
) -> Vec<ObjectRef<O>> {
    let namespace = child.meta().namespace.clone();
    let name = child.meta().name.clone().unwrap_or_default();
    store
        .state()
        .into_iter()
        .filter(|object| object.meta().namespace == namespace && reads(object, &name))
        .map(|object| ObjectRef::from_obj(object.as_ref()))
        .collect()
}
