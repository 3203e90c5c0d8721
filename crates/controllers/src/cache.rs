//! Watch caches shared by every controller of the process: one watch per resource type, objects stripped to what
//! the controllers read (no managed fields, no `last-applied-configuration`, no Deployment spec), and a fan-out of
//! every change, deletions included, that each controller maps to the objects it must reconcile. Reconciles read
//! owned objects here instead of sending GETs, so a steady object costs no API reads.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use crate::decode;
use crate::labels::{LAST_APPLIED_ANNOTATION, LEGACY_FIELDS_MARK, UNREADABLE_MARK};
use crate::owner_index::{self, OwnerIndex};
use crate::slim::{Live, Marked, Slim};
use crate::takeover::has_legacy_entries;

/// What every watched object is: a static Kubernetes type that can be decoded, cloned and shared across tasks.
pub trait Object:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Object for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// One change of a watched object.
#[derive(Clone, Debug)]
pub enum Change<K> {
    Applied(Arc<K>),
    Deleted(Arc<K>),
}

impl<K> Change<K> {
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Applied(k) | Self::Deleted(k) => k,
        }
    }
}

/// A watch of one resource type: its store and its change fan-out.
pub struct Informer<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    changes: Fanout<K>,
    /// Set once the first list is cached. (kube's own readiness wakes only one waiter; several controllers wait.)
    listed: tokio::sync::watch::Receiver<bool>,
    /// The cached objects that carry the owner-UID annotation, by that UID.
    owners: Arc<Mutex<OwnerIndex>>,
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts the watch on `api`; `strip` removes what no controller reads before an object is cached.
    pub fn start(api: Api<K>, config: watcher::Config, strip: fn(&mut K)) -> Arc<Self> {
        Self::start_with(api, config, strip, Fanout::default())
    }

    /// Like [`Informer::start`], publishing changes on `changes` (subscribers may exist before the watch starts).
    pub fn start_with(
        api: Api<K>,
        config: watcher::Config,
        strip: fn(&mut K),
        changes: Fanout<K>,
    ) -> Arc<Self> {
        let events = watcher(api, config).default_backoff().modify(strip);
        Self::from_events(events, changes, owner_index::annotated::<K>)
    }

    /// Like [`Informer::start`] for a custom resource whose stored objects may not fit the Rust type (stored before
    /// a schema change, or a value the schema allows and the type does not): the objects are listed and watched as
    /// JSON and decoded one by one. One that cannot be decoded is left out of the cache (as if deleted) and reported
    /// once per version with a Warning Event and a log line that name the field but not the value; the others go on.
    pub fn start_decoding_each(
        client: &kube::Client,
        namespace: Option<&str>,
        config: watcher::Config,
        strip: fn(&mut K),
    ) -> Arc<Self>
    where
        K: Default,
    {
        let resource = ApiResource::erase::<K>(&());
        let api: Api<DynamicObject> = match namespace {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let mut failures = DecodeFailures::new(client.clone(), resource);
        let events = watcher(api, config)
            .default_backoff()
            .filter_map(move |event| std::future::ready(failures.typed(event)))
            .modify(strip);
        Self::from_events(events, Fanout::default(), owner_index::annotated::<K>)
    }
}

impl<K> Informer<Slim<K>>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    /// Starts the watch of the objects of `api`, each cached as `slim(object)` (see [`Slim`]), publishing changes
    /// on `changes`.
    pub fn start_slim<S>(
        api: Api<S>,
        config: watcher::Config,
        slim: fn(S) -> Slim<K>,
        changes: Fanout<Slim<K>>,
    ) -> Arc<Self>
    where
        S: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let events = watcher(api, config)
            .default_backoff()
            .map(move |event| event.map(|event| map_event(event, slim)));
        Self::from_events(events, changes, Slim::claimed_by)
    }
}

impl<K> Informer<Slim<K>>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    /// What the cache shows of `namespace/name`.
    pub fn live(&self, namespace: &str, name: &str) -> Option<Live> {
        self.get(namespace, name).map(|object| object.live.clone())
    }
}

impl<K> Informer<kube::core::PartialObjectMeta<K>>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    /// The cached metadata of `namespace/name`.
    pub fn meta(&self, namespace: &str, name: &str) -> Option<ObjectMeta> {
        self.get(namespace, name).map(|object| object.metadata.clone())
    }
}

/// `event` with its object mapped by `f`.
fn map_event<A, B>(event: watcher::Event<A>, f: impl FnOnce(A) -> B) -> watcher::Event<B> {
    match event {
        watcher::Event::Apply(object) => watcher::Event::Apply(f(object)),
        watcher::Event::Delete(object) => watcher::Event::Delete(f(object)),
        watcher::Event::InitApply(object) => watcher::Event::InitApply(f(object)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    /// Caches the objects of `events`, publishing their changes on `changes`; `claimed_by` reads the owner UID an
    /// object is indexed under.
    fn from_events(
        events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
        changes: Fanout<K>,
        claimed_by: fn(&K) -> Option<&str>,
    ) -> Arc<Self> {
        let (store, mut writer) = reflector::store();
        let (listed_tx, listed) = tokio::sync::watch::channel(false);
        let owners = Arc::new(Mutex::new(OwnerIndex::default()));
        let informer = Arc::new(Self {
            store: store.clone(),
            changes: changes.clone(),
            listed,
            owners: owners.clone(),
        });
        tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => {
                        writer.apply_watcher_event(&event);
                        owners
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .apply(&event, claimed_by);
                        if matches!(event, watcher::Event::InitDone) {
                            listed_tx.send_replace(true);
                        }
                        fan_out(&store, &changes, event);
                    }
                    Err(error) => {
                        tracing::warn!(%error, kind = %K::kind(&()), "watch error (controllers wait until every watch cache has listed once); retrying")
                    }
                }
            }
        });
        informer
    }

    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// Changes from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Change<K>> {
        self.changes.subscribe()
    }

    /// The cached object `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.store.get(&ObjectRef::new(name).within(namespace))
    }

    /// The cached objects whose owner-UID annotation names `owner_uid`, in namespace and name order (read from an
    /// index, not by filtering the cache).
    pub fn annotated_owned_by(&self, owner_uid: &str) -> Vec<Arc<K>> {
        let keys = self
            .owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .owned_by(owner_uid);
        keys.iter()
            .filter_map(|(namespace, name)| self.get(namespace, name))
            .collect()
    }

    /// Waits until the first list is cached.
    pub async fn ready(&self) {
        let mut listed = self.listed.clone();
        if listed.wait_for(|listed| *listed).await.is_err() {
            tracing::warn!(kind = %K::kind(&()), "a watch cache stopped before its first list");
        }
    }

    /// Whether the first list is cached.
    pub fn is_ready(&self) -> bool {
        *self.listed.borrow()
    }
}

/// Turns watch events of JSON objects into events of `K`, reporting the objects that cannot be decoded.
struct DecodeFailures {
    recorder: Recorder,
    resource: ApiResource,
    /// UID → resourceVersion of each object reported, so a version is reported once (not at every relist).
    reported: HashMap<String, String>,
}

impl DecodeFailures {
    fn new(client: kube::Client, resource: ApiResource) -> Self {
        let reporter = Reporter {
            controller: "coder-k8s".to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client, reporter),
            resource,
            reported: HashMap::new(),
        }
    }

    /// The event of `K`; `None` drops an object of a (re)list that cannot be decoded. A watched change to such an
    /// object becomes a deletion, so no controller goes on with a spec it can no longer read.
    fn typed<K>(
        &mut self,
        event: Result<watcher::Event<DynamicObject>, watcher::Error>,
    ) -> Option<Result<watcher::Event<K>, watcher::Error>>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Default,
    {
        let event = match event {
            Err(error) => return Some(Err(error)),
            Ok(event) => event,
        };
        Some(Ok(match event {
            watcher::Event::Init => watcher::Event::Init,
            watcher::Event::InitDone => watcher::Event::InitDone,
            watcher::Event::InitApply(object) => watcher::Event::InitApply(self.decode(&object)?),
            watcher::Event::Apply(object) => match self.decode(&object) {
                Some(typed) => watcher::Event::Apply(typed),
                None => watcher::Event::Delete(unreadable(object)),
            },
            watcher::Event::Delete(object) => {
                self.reported
                    .remove(&object.metadata.uid.clone().unwrap_or_default());
                watcher::Event::Delete(decode::decode(&object).unwrap_or_else(|_| placeholder(object)))
            }
        }))
    }

    fn decode<K: DeserializeOwned>(&mut self, object: &DynamicObject) -> Option<K> {
        let uid = object.metadata.uid.clone().unwrap_or_default();
        match decode::decode(object) {
            Ok(typed) => {
                self.reported.remove(&uid);
                Some(typed)
            }
            Err(error) => {
                let version = object.metadata.resource_version.clone().unwrap_or_default();
                if self.reported.get(&uid) != Some(&version) {
                    self.reported.insert(uid, version);
                    self.report(object, &error);
                }
                None
            }
        }
    }

    fn report(&self, object: &DynamicObject, error: &decode::DecodeError) {
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        tracing::warn!(kind = %self.resource.kind, %namespace, %name, %error, "cannot decode the object; it is not reconciled until it changes");
        let reference = ObjectReference {
            api_version: Some(self.resource.api_version.clone()),
            kind: Some(self.resource.kind.clone()),
            namespace: Some(namespace),
            name: Some(name),
            uid: object.metadata.uid.clone(),
            ..ObjectReference::default()
        };
        let event = Event {
            type_: EventType::Warning,
            reason: DECODE_FAILED_REASON.to_owned(),
            note: Some(format!(
                "The operator cannot read this object, so it does not reconcile it: {error}. Correct the field; the object is read again when it changes."
            )),
            action: "Decode".to_owned(),
            secondary: None,
        };
        let recorder = self.recorder.clone();
        tokio::spawn(async move {
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::debug!(%error, "publishing an Event failed");
            }
        });
    }
}

/// Reason of the Warning Event on an object the operator cannot decode.
pub const DECODE_FAILED_REASON: &str = "DecodeFailed";

/// An object of `K` that carries only the metadata of `object`: what a deletion from the cache needs.
fn placeholder<K: Resource + Default>(object: DynamicObject) -> K {
    let mut typed = K::default();
    *typed.meta_mut() = object.metadata;
    typed
}

fn unreadable<K: Resource + Default>(object: DynamicObject) -> K {
    let mut typed: K = placeholder(object);
    typed
        .meta_mut()
        .annotations
        .get_or_insert_with(Default::default)
        .insert(UNREADABLE_MARK.to_owned(), "true".to_owned());
    typed
}

/// Whether a deletion only stands for an object that cannot be decoded (see [`unreadable`]).
pub fn is_unreadable<K: Resource>(object: &K) -> bool {
    object
        .meta()
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(UNREADABLE_MARK))
}

/// The subscribers to the changes of one resource type. Each gets its own unbounded queue, so no change is lost
/// and nothing is kept once every subscriber has taken it.
pub struct Fanout<K> {
    subscribers: Arc<std::sync::Mutex<Vec<mpsc::UnboundedSender<Change<K>>>>>,
}

impl<K> Default for Fanout<K> {
    fn default() -> Self {
        Self {
            subscribers: Arc::default(),
        }
    }
}

impl<K> Clone for Fanout<K> {
    fn clone(&self) -> Self {
        Self {
            subscribers: self.subscribers.clone(),
        }
    }
}

impl<K> Fanout<K> {
    /// A queue of the changes from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Change<K>> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.lock().push(sender);
        receiver
    }

    fn send(&self, change: Change<K>)
    where
        K: Clone,
    {
        // Subscribers that went away are dropped.
        self.lock().retain(|sender| sender.send(change.clone()).is_ok());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<mpsc::UnboundedSender<Change<K>>>> {
        self.subscribers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn fan_out<K>(store: &Store<K>, changes: &Fanout<K>, event: watcher::Event<K>)
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    match event {
        watcher::Event::Apply(object) => {
            if let Some(cached) = store.get(&ObjectRef::from_obj(&object)) {
                changes.send(Change::Applied(cached));
            }
        }
        watcher::Event::Delete(object) => {
            changes.send(Change::Deleted(Arc::new(object)));
        }
        // After a (re)list every object is offered again; the subscribers' fingerprints drop what did not change.
        watcher::Event::InitDone => {
            tracing::debug!(kind = %K::kind(&()), objects = store.len(), "watch cache listed");
            for object in store.state() {
                changes.send(Change::Applied(object));
            }
        }
        watcher::Event::Init | watcher::Event::InitApply(_) => {}
    }
}

/// Strips what no controller reads from object metadata.
pub fn strip_meta(meta: &mut ObjectMeta) {
    // What the managed fields tell a controller, kept as an in-memory mark: fields recorded under an update
    // manager of ours wait for a takeover before the next apply (see `takeover`).
    if has_legacy_entries(meta.managed_fields.as_deref().unwrap_or_default()) {
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(LEGACY_FIELDS_MARK.to_owned(), "true".to_owned());
    }
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
}

/// A stream of the changes `receiver` gets, mapped by `map` (which may keep state).
pub fn changes<K, T>(
    receiver: mpsc::UnboundedReceiver<Change<K>>,
    mut map: impl FnMut(Change<K>) -> Vec<T> + Send + 'static,
) -> impl Stream<Item = T> + Send + 'static
where
    K: Clone + Send + Sync + 'static,
    T: Send + 'static,
{
    futures::stream::unfold(receiver, |mut receiver| async move {
        let change = receiver.recv().await?;
        Some((change, receiver))
    })
    .flat_map(move |change| futures::stream::iter(map(change)))
}

/// What an owned or read object looks like to the controller that uses it: the desired-hash label the operator
/// wrote, and anything else the controller reads (for example a Deployment's ready replicas).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    pub desired_hash: Option<String>,
    pub other: u64,
}

/// The last apply of the operator per object (hashed keys and values, so each costs a few bytes), so the watch echo of
/// its own write does not trigger another reconcile in any controller that watches the object.
#[derive(Default)]
pub struct Echoes {
    applied: Mutex<HashMap<u64, u64>>,
}

impl Echoes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, u64>> {
        self.applied.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn record(&self, kind: &str, namespace: &str, name: &str, hash: &str) {
        self.lock()
            .insert(hash_value(&(kind, namespace, name)), hash_value(hash));
    }

    /// Whether `hash` is what the operator last applied to the object.
    pub fn is_own(&self, kind: &str, namespace: &str, name: &str, hash: Option<&str>) -> bool {
        let Some(hash) = hash else {
            return false;
        };
        self.lock().get(&hash_value(&(kind, namespace, name))) == Some(&hash_value(hash))
    }

    pub fn forget(&self, kind: &str, namespace: &str, name: &str) {
        self.lock().remove(&hash_value(&(kind, namespace, name)));
    }
}

/// Decides which changes of a watched object are news to the controller: not the echo of the operator's own
/// apply, and not a change the controller does not read.
pub struct ChangeFilter<K> {
    kind: String,
    echoes: Arc<Echoes>,
    fingerprint: fn(&K) -> Fingerprint,
    /// Hash of namespace/name → (hash of the desired hash, the rest of the fingerprint) last seen.
    seen: HashMap<u64, (u64, u64)>,
}

fn hash_value<T: Hash + ?Sized>(value: &T) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

impl<K: Resource> ChangeFilter<K> {
    /// A filter for objects of `kind` (the kind the operator applies: `Secret`, not its metadata-only view).
    pub fn new(kind: &str, echoes: Arc<Echoes>, fingerprint: fn(&K) -> Fingerprint) -> Self {
        Self {
            kind: kind.to_owned(),
            echoes,
            fingerprint,
            seen: HashMap::new(),
        }
    }

    /// Whether `change` should trigger the controller.
    pub fn is_news(&mut self, change: &Change<K>) -> bool {
        let object = change.object();
        let key = (
            object.meta().namespace.clone().unwrap_or_default(),
            object.meta().name.clone().unwrap_or_default(),
        );
        match change {
            Change::Deleted(_) => {
                self.seen.remove(&hash_value(&key));
                self.echoes.forget(&self.kind, &key.0, &key.1);
                true
            }
            Change::Applied(_) => {
                let print = (self.fingerprint)(object);
                let own = self
                    .echoes
                    .is_own(&self.kind, &key.0, &key.1, print.desired_hash.as_deref());
                let now = (hash_value(&print.desired_hash), print.other);
                match self.seen.insert(hash_value(&key), now) {
                    // First sight, or a new desired hash: news unless the operator applied it.
                    None => !own,
                    Some((hash, _)) if hash != now.0 => !own,
                    // Same desired hash: news when what else the controller reads changed.
                    Some((_, other)) => other != now.1,
                }
            }
        }
    }
}

/// The fingerprint of an owned object that only the desired-hash label describes.
pub fn hash_only<K: Marked>(object: &K) -> Fingerprint {
    Fingerprint {
        desired_hash: object.desired_hash().map(str::to_owned),
        other: 0,
    }
}

/// The fingerprint of an object whose every change matters (a Secret or ConfigMap a spec names).
pub fn every_change<K: Resource + Marked>(object: &K) -> Fingerprint {
    Fingerprint {
        other: hash_value(&object.meta().resource_version),
        ..hash_only(object)
    }
}

/// The controller owner of `child` if it is of kind `O`.
pub fn controller_owner<O, C>(child: &C) -> Option<ObjectRef<O>>
where
    O: Resource<DynamicType = ()>,
    C: Resource,
{
    let owner = child
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == O::kind(&()))?;
    let reference = ObjectRef::new(&owner.name);
    Some(match child.meta().namespace.as_deref() {
        Some(namespace) => reference.within(namespace),
        None => reference,
    })
}

/// Full objects (Secrets, ConfigMaps) read by value, fetched with one GET only when the cached metadata shows a new
/// resourceVersion; objects the operator wrote itself are served from what it wrote until the watch catches up.
pub struct ValueReader<K: Resource<DynamicType = ()> + Clone + 'static> {
    metadata: Arc<Informer<kube::core::PartialObjectMeta<K>>>,
    values: Mutex<HashMap<(String, String), Value<K>>>,
    last_sweep: Mutex<Instant>,
}

struct Value<K> {
    resource_version: Option<String>,
    object: Arc<K>,
    /// Set when the operator wrote the object: trusted while the watch has not shown it yet.
    written_at: Option<Instant>,
}

/// How long an object the operator wrote is served while the watch does not show it yet.
const WRITE_TRUST: Duration = Duration::from_secs(10);
/// How often values of objects that are gone are dropped.
const SWEEP_INTERVAL: Duration = Duration::from_secs(60);

impl<K> ValueReader<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    pub fn new(metadata: Arc<Informer<kube::core::PartialObjectMeta<K>>>) -> Self {
        Self {
            metadata,
            values: Mutex::default(),
            last_sweep: Mutex::new(Instant::now()),
        }
    }

    pub fn metadata(&self) -> &Arc<Informer<kube::core::PartialObjectMeta<K>>> {
        &self.metadata
    }

    /// The object `namespace/name`, or `None` when it does not exist.
    pub async fn get(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<K>>, kube::Error> {
        self.sweep();
        let key = (namespace.to_owned(), name.to_owned());
        let cached = self.metadata.get(namespace, name);
        if let Some(hit) = self.hit(&key, cached.as_deref().map(|m| &m.metadata)) {
            return Ok(hit);
        }
        let fetched = Api::<K>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await?;
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        match fetched {
            Some(object) => {
                let object = Arc::new(object);
                values.insert(
                    key,
                    Value {
                        resource_version: object.meta().resource_version.clone(),
                        object: object.clone(),
                        written_at: None,
                    },
                );
                Ok(Some(object))
            }
            None => {
                values.remove(&key);
                Ok(None)
            }
        }
    }

    /// `Some(answer)` when the cache can answer without a GET.
    #[allow(clippy::option_option)]
    fn hit(&self, key: &(String, String), cached: Option<&ObjectMeta>) -> Option<Option<Arc<K>>> {
        let values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        let value = values.get(key);
        match (cached, value) {
            (Some(meta), Some(value)) if meta.resource_version == value.resource_version => {
                Some(Some(value.object.clone()))
            }
            (None, Some(value)) if value.written_at.is_some_and(|at| at.elapsed() < WRITE_TRUST) => {
                Some(Some(value.object.clone()))
            }
            (None, _) => Some(None),
            (Some(_), _) => None,
        }
    }

    /// Records an object the operator just wrote (the answer of its apply).
    pub fn wrote(&self, object: K) {
        let key = (
            object.meta().namespace.clone().unwrap_or_default(),
            object.meta().name.clone().unwrap_or_default(),
        );
        let value = Value {
            resource_version: object.meta().resource_version.clone(),
            object: Arc::new(object),
            written_at: Some(Instant::now()),
        };
        self.values
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, value);
    }

    /// Forgets an object the operator deleted.
    pub fn deleted(&self, namespace: &str, name: &str) {
        self.values
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(namespace.to_owned(), name.to_owned()));
    }

    fn sweep(&self) {
        {
            let mut last = self.last_sweep.lock().unwrap_or_else(|p| p.into_inner());
            if last.elapsed() < SWEEP_INTERVAL {
                return;
            }
            *last = Instant::now();
        }
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        values.retain(|(namespace, name), value| {
            self.metadata.get(namespace, name).is_some()
                || value.written_at.is_some_and(|at| at.elapsed() < WRITE_TRUST)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::PartialObjectMeta;

    type MapMeta = PartialObjectMeta<ConfigMap>;

    fn map(hash: Option<&str>, version: &str) -> Arc<MapMeta> {
        let mut object = MapMeta::default();
        object.metadata.name = Some("m".to_owned());
        object.metadata.namespace = Some("team".to_owned());
        object.metadata.resource_version = Some(version.to_owned());
        if let Some(hash) = hash {
            object.metadata.labels = Some(std::collections::BTreeMap::from([(
                crate::labels::DESIRED_HASH_LABEL.to_owned(),
                hash.to_owned(),
            )]));
        }
        Arc::new(object)
    }

    #[test]
    fn only_news_triggers() {
        let echoes = Arc::new(Echoes::default());
        let mut owned = ChangeFilter::new("ConfigMap", echoes.clone(), hash_only::<MapMeta>);
        // The echo of the operator's own apply is not news, for every controller that watches the object.
        echoes.record("ConfigMap", "team", "m", "h1");
        assert!(!owned.is_news(&Change::Applied(map(Some("h1"), "1"))));
        let mut other_controller = ChangeFilter::new("ConfigMap", echoes.clone(), hash_only::<MapMeta>);
        assert!(!other_controller.is_news(&Change::Applied(map(Some("h1"), "1"))));
        // A change that leaves the fingerprint alone is not news; another hash is.
        assert!(!owned.is_news(&Change::Applied(map(Some("h1"), "2"))));
        assert!(owned.is_news(&Change::Applied(map(Some("edited"), "3"))));
        assert!(owned.is_news(&Change::Deleted(map(Some("edited"), "3"))));
        // After a deletion the object is new again.
        assert!(owned.is_news(&Change::Applied(map(Some("edited"), "4"))));

        let mut read = ChangeFilter::new("ConfigMap", echoes, every_change::<MapMeta>);
        assert!(read.is_news(&Change::Applied(map(None, "1"))));
        assert!(
            !read.is_news(&Change::Applied(map(None, "1"))),
            "the same version again"
        );
        assert!(
            read.is_news(&Change::Applied(map(None, "2"))),
            "any new version of a read object"
        );
    }

    fn proxy(replicas: serde_json::Value, version: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "coder.com/v1alpha1",
            "kind": "CoderWorkspaceProxy",
            "metadata": {"name": "p", "namespace": "team", "uid": "u1", "resourceVersion": version},
            "spec": {"replicas": replicas},
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn an_undecodable_object_is_left_out_until_it_can_be_read() {
        use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
        // No API server: the Events fail to publish, which is only logged.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let mut failures = DecodeFailures::new(client, ApiResource::erase::<CoderWorkspaceProxy>(&()));
        let bad = || proxy(serde_json::json!(4_294_967_296_u64), "1");

        let listed = failures.typed::<CoderWorkspaceProxy>(Ok(watcher::Event::InitApply(bad())));
        assert!(
            listed.is_none(),
            "a listed object that cannot be decoded is skipped"
        );
        assert_eq!(failures.reported.get("u1").map(String::as_str), Some("1"));
        let changed = failures.typed::<CoderWorkspaceProxy>(Ok(watcher::Event::Apply(bad())));
        match changed {
            Some(Ok(watcher::Event::Delete(gone))) => {
                assert_eq!(gone.metadata.name.as_deref(), Some("p"));
                assert!(is_unreadable(&gone), "marked: its bookkeeping stays");
            }
            other => panic!("a watched change that cannot be decoded removes the object: {other:?}"),
        }
        let fixed = failures
            .typed::<CoderWorkspaceProxy>(Ok(watcher::Event::Apply(proxy(serde_json::json!(2), "2"))));
        match fixed {
            Some(Ok(watcher::Event::Apply(proxy))) => assert_eq!(proxy.spec.replicas, Some(2)),
            other => panic!("a readable change is applied: {other:?}"),
        }
        assert!(failures.reported.is_empty(), "forgotten once readable");
        let deleted = failures.typed::<CoderWorkspaceProxy>(Ok(watcher::Event::Delete(bad())));
        match deleted {
            Some(Ok(watcher::Event::Delete(gone))) => {
                assert!(
                    !is_unreadable(&gone),
                    "a real deletion is not marked: its bookkeeping goes"
                )
            }
            other => panic!("a deletion stays a deletion: {other:?}"),
        }
    }

    #[tokio::test]
    async fn every_subscriber_gets_every_change_and_gone_ones_are_dropped() {
        let fanout = Fanout::<MapMeta>::default();
        let mut first = fanout.subscribe();
        let second = fanout.subscribe();
        drop(second);
        fanout.send(Change::Applied(map(None, "1")));
        fanout.send(Change::Deleted(map(None, "1")));
        assert!(matches!(first.recv().await, Some(Change::Applied(_))));
        assert!(matches!(first.recv().await, Some(Change::Deleted(_))));
        assert_eq!(fanout.lock().len(), 1, "the dropped subscriber is gone");
    }
}
