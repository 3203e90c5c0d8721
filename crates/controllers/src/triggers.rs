//! The triggers of a kind's controller from the objects it owns or reads: each change that is news (not the echo
//! of the operator's own apply, and a change the controller reads) is mapped to the objects to reconcile.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

use coder_k8s_api::control_plane::CoderControlPlane;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::apply::cached_ready_replicas;
use crate::cache::{
    Change, ChangeFilter, Echoes, Fanout, Fingerprint, Informer, changes, controller_owner, every_change,
    hash_only,
};
use crate::context::Context;
use crate::kind::Kind;
use crate::slim::Slim;

/// A trigger stream of a kind (from owned or read objects).
pub type Triggers<K> = BoxStream<'static, ObjectRef<K>>;

/// A source of changes of `C`: a watch cache, or the fan-out a cache publishes on once it starts.
pub trait Subscribe<C> {
    fn subscribe(&self) -> UnboundedReceiver<Change<C>>;
}

impl<C> Subscribe<C> for Informer<C>
where
    C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    fn subscribe(&self) -> UnboundedReceiver<Change<C>> {
        Informer::subscribe(self)
    }
}

impl<C, S: Subscribe<C>> Subscribe<C> for Arc<S> {
    fn subscribe(&self) -> UnboundedReceiver<Change<C>> {
        self.as_ref().subscribe()
    }
}

impl<C> Subscribe<C> for Fanout<C> {
    fn subscribe(&self) -> UnboundedReceiver<Change<C>> {
        Fanout::subscribe(self)
    }
}

/// Triggers of kind `O` from the changes of `informer` (objects the operator applies as `applied_kind`); `targets`
/// maps a changed object to the objects of kind `O` to reconcile.
pub fn from<O, C>(
    informer: &impl Subscribe<C>,
    echoes: &Arc<Echoes>,
    applied_kind: &str,
    fingerprint: fn(&C) -> Fingerprint,
    owners: Store<O>,
    targets: impl Fn(&Store<O>, &C) -> Vec<ObjectRef<O>> + Send + 'static,
) -> Triggers<O>
where
    O: Kind,
    C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
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

/// The triggers of one kind, listed the same way in every kind's `run`.
pub struct TriggerSet<O: Kind> {
    ctx: Arc<Context>,
    owners: Store<O>,
    list: Vec<Triggers<O>>,
}

impl<O: Kind> TriggerSet<O> {
    /// Triggers of the objects in `owners` (the kind's own watch cache).
    pub fn new(ctx: &Arc<Context>, owners: &Store<O>) -> Self {
        Self {
            ctx: ctx.clone(),
            owners: owners.clone(),
            list: Vec::new(),
        }
    }

    /// Changes of `informer` mapped by `targets`, filtered by `fingerprint`.
    pub fn with<C>(
        mut self,
        informer: &impl Subscribe<C>,
        fingerprint: fn(&C) -> Fingerprint,
        targets: impl Fn(&Store<O>, &C) -> Vec<ObjectRef<O>> + Send + 'static,
    ) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    {
        let kind = C::kind(&()).into_owned();
        let triggers = from(
            informer,
            &self.ctx.k8s.echoes,
            &kind,
            fingerprint,
            self.owners.clone(),
            targets,
        );
        self.list.push(triggers);
        self
    }

    /// Owned objects of `informer`, whose desired hash is all that matters, mapped to their controller owner.
    pub fn owned<C>(self, informer: &impl Subscribe<Slim<C>>) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    {
        self.with(informer, hash_only, owner::<O, Slim<C>>)
    }

    /// Owned Deployments: their desired hash and their ready replicas matter.
    pub fn deployments(self) -> Self {
        let deployments = self.ctx.k8s.caches.deployments.clone();
        self.with(&deployments, deployment_fingerprint, owner::<O, Slim<Deployment>>)
    }

    /// Secrets: every change of one the kind owns, or of one it reads (`reads(object, secret name)`).
    pub fn secrets(self, reads: fn(&O, &str) -> bool) -> Self {
        let secrets = self.ctx.k8s.caches.secrets.metadata().clone();
        self.with(
            &secrets,
            every_change,
            move |owners, secret: &PartialObjectMeta<Secret>| {
                let mut targets = owner(owners, secret);
                targets.extend(readers(owners, secret, reads));
                targets
            },
        )
    }

    /// Control planes: a change `fingerprint` sees reconciles the objects that refer to the control plane.
    pub fn control_planes(self, fingerprint: fn(&CoderControlPlane) -> Fingerprint) -> Self
    where
        O: RefersToControlPlane,
    {
        let control_planes = self.ctx.k8s.caches.control_planes.clone();
        self.with(&control_planes, fingerprint, referrers::<O>)
    }

    /// A stream the kind builds from the context and its own watch cache (a shared poll of Coder's state).
    pub fn polled(mut self, poll: fn(Arc<Context>, Store<O>) -> Triggers<O>) -> Self {
        self.list.push(poll(self.ctx.clone(), self.owners.clone()));
        self
    }

    pub fn build(self) -> Vec<Triggers<O>> {
        self.list
    }
}

/// A Deployment matters for its desired hash and its ready replicas.
pub fn deployment_fingerprint(deployment: &Slim<Deployment>) -> Fingerprint {
    let ready = cached_ready_replicas(deployment);
    Fingerprint {
        other: u64::from(ready.unsigned_abs()),
        ..hash_only(deployment)
    }
}

/// What every kind that reaches Coder through a control plane reads of it — where it is, its operator access and
/// token Secret, whether it is being deleted — plus `extra`, the parts the kind reads as well.
pub fn access_fingerprint(cp: &CoderControlPlane, extra: &impl serde::Serialize) -> Fingerprint {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let status = cp.status.clone().unwrap_or_default();
    status.url.hash(&mut hasher);
    status.operator_access_ready.hash(&mut hasher);
    serde_json::to_string(&status.operator_token_secret_ref)
        .unwrap_or_default()
        .hash(&mut hasher);
    serde_json::to_string(extra).unwrap_or_default().hash(&mut hasher);
    cp.metadata.deletion_timestamp.is_some().hash(&mut hasher);
    Fingerprint {
        desired_hash: None,
        other: hasher.finish(),
    }
}

/// A kind whose objects name a control plane in their own namespace (`spec.controlPlaneRef.name`); each such kind
/// says so where it is wired.
pub trait RefersToControlPlane {
    fn control_plane_name(&self) -> &str;
}

/// The objects of kind `O` in the control plane's namespace that refer to it.
pub fn referrers<O: Kind + RefersToControlPlane>(
    store: &Store<O>,
    cp: &CoderControlPlane,
) -> Vec<ObjectRef<O>> {
    let (namespace, name) = (
        cp.meta().namespace.clone(),
        cp.meta().name.clone().unwrap_or_default(),
    );
    store
        .state()
        .into_iter()
        .filter(|o| o.meta().namespace == namespace && o.control_plane_name() == name)
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
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
