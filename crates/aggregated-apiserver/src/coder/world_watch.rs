//! Watches that see changes made in Coder directly (its UI, CLI or API) and through other replicas: a shared
//! poll-and-diff feed per served namespace (one control plane each) and resource.
//!
//! The first watch of a namespace's `coderworkspaces` (or `codertemplates`, `coderorganizations`, `codergroups`,
//! `coderusers`) starts a poller; every further watch of it joins the same one, and the last one to leave stops it. A poller lists the resource through its storage (the
//! same Coder calls and conversion as a list) and compares the objects with the previous poll by name and
//! resourceVersion: new names are `ADDED`, changed resourceVersions `MODIFIED`, missing names `DELETED`. It polls
//! again soon after a change and ever more slowly while nothing changes, within the bounds and the share of Coder's
//! rate limit of its settings (`poll_cadence`).
//! Writes through this server still publish at once; the poller takes them into account so it does not report
//! them a second time. A failed poll (Coder down, 429, control plane not ready) publishes nothing and the next one
//! compares with the last good poll, so an outage never looks like a deletion.
//!
//! A poller starts from the client's own list when this process answered it (the list is remembered by the
//! generic server), otherwise from a first poll; a watch from a resourceVersion older than its poller's start gets
//! 410 Expired and relists.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_coder_client::calls::counted;
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use super::poll_cadence::{Cadence, CadenceRules};
use super::provider::Provider;
use super::resources::{GROUPS, ORGANIZATIONS, TEMPLATES, USERS, WORKSPACES};
use crate::generic::watch::{Broadcaster, WatchEvent};
use crate::generic::{
    ApiError, EventType, FeedLease, FeedRequest, Registry, RequestContext, Storage, UserInfo, WatchFeed,
};

/// The wait between two polls right after a change, when nothing else is configured.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// The longest wait between two polls (the latency of a change made in Coder directly at rest).
pub const DEFAULT_MAX_POLL_INTERVAL: Duration = Duration::from_secs(30);
/// Coder requests per minute all the pollers of one control plane may spend together: under a fifth of Coder's
/// default limit of 512 a minute per token, which the controllers and every request through this server share.
pub const DEFAULT_POLL_CALLS_PER_MINUTE: u32 = 100;

/// Each watched resource's share of a control plane's poll budget, in percent. Workspaces and templates change
/// often and a large namespace costs many requests a poll; organizations, groups and users change seldom and cost a
/// few requests a poll, so at rest (one poll per `max_interval`) they stay well within their share.
const POLL_SHARES: &[(&str, u32)] = &[
    (WORKSPACES, 40),
    (TEMPLATES, 40),
    (ORGANIZATIONS, 6),
    (GROUPS, 7),
    (USERS, 7),
];

/// How the feeds poll Coder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorldWatchSettings {
    /// The wait between two polls of one namespace and resource after a poll that saw a change.
    pub interval: Duration,
    /// The longest wait: every poll that sees nothing new doubles the wait, up to this (or longer, when one poll
    /// costs more requests than `calls_per_minute` allows in it).
    pub max_interval: Duration,
    /// Coder requests per minute the pollers of one control plane (one per watched resource) may spend together,
    /// each its resource's share; a poll that costs many requests waits longer.
    pub calls_per_minute: u32,
    /// Budget of one poll.
    pub poll_timeout: Duration,
}

impl Default for WorldWatchSettings {
    fn default() -> Self {
        Self {
            interval: DEFAULT_POLL_INTERVAL,
            max_interval: DEFAULT_MAX_POLL_INTERVAL,
            calls_per_minute: DEFAULT_POLL_CALLS_PER_MINUTE,
            poll_timeout: Duration::from_secs(30),
        }
    }
}

impl WorldWatchSettings {
    /// The pace of `resource`'s poller: its share of the budget, at least one request a minute.
    fn cadence(&self, resource: &str) -> CadenceRules {
        CadenceRules {
            fastest: self.interval.max(Duration::from_millis(10)),
            slowest: self.max_interval,
            calls_per_minute: (self.calls_per_minute.saturating_mul(poll_share(resource)) / 100).max(1),
        }
    }
}

/// `resource`'s share of a control plane's poll budget, in percent (0 for a resource that is not polled).
fn poll_share(resource: &str) -> u32 {
    POLL_SHARES
        .iter()
        .find(|(plural, _)| *plural == resource)
        .map_or(0, |(_, share)| *share)
}

/// Gives the watches of the resources with a poll share (workspaces, templates, organizations, groups, users) in
/// `registry` a poll-and-diff feed of Coder. Template versions are not watchable.
pub fn attach(registry: &mut Registry, provider: Arc<dyn Provider>, settings: WorldWatchSettings) {
    for def in &mut registry.resources {
        if poll_share(def.plural) > 0 {
            def.watch_feed = Some(Arc::new(PollFeed {
                resource: def.plural,
                storage: def.storage.clone(),
                provider: provider.clone(),
                settings,
                pollers: Arc::new(Mutex::new(Pollers::default())),
            }));
        }
    }
}

/// One poller's identity: the namespace and the broadcaster it publishes to (one per server router).
type PollerKey = (String, usize);

/// What a poller started from.
#[derive(Clone, Debug)]
enum Baseline {
    Pending,
    /// Every change after this broadcaster counter is published.
    Ready(u64),
    Failed(ApiError),
}

struct PollerEntry {
    generation: u64,
    members: usize,
    baseline: watch::Receiver<Baseline>,
    task: tokio::task::AbortHandle,
}

#[derive(Default)]
struct Pollers {
    entries: HashMap<PollerKey, PollerEntry>,
    next_generation: u64,
}

type SharedPollers = Arc<Mutex<Pollers>>;

fn locked(pollers: &Mutex<Pollers>) -> MutexGuard<'_, Pollers> {
    pollers.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The feed of one resource.
struct PollFeed {
    resource: &'static str,
    storage: Arc<dyn Storage>,
    provider: Arc<dyn Provider>,
    settings: WorldWatchSettings,
    pollers: SharedPollers,
}

/// One watch's place in a poller; the poller stops when the last membership is dropped.
struct Membership {
    pollers: SharedPollers,
    key: PollerKey,
    generation: u64,
}

impl Drop for Membership {
    fn drop(&mut self) {
        let mut pollers = locked(&self.pollers);
        let Some(entry) = pollers.entries.get_mut(&self.key) else {
            return;
        };
        if entry.generation != self.generation {
            return;
        }
        entry.members = entry.members.saturating_sub(1);
        if entry.members == 0 {
            entry.task.abort();
            pollers.entries.remove(&self.key);
        }
    }
}

#[async_trait]
impl WatchFeed for PollFeed {
    async fn join(&self, request: FeedRequest) -> Result<FeedLease, ApiError> {
        let namespaces = self.served_namespaces(request.namespace.as_deref()).await?;
        let mut memberships = Vec::new();
        let mut covered_since = 0;
        for namespace in namespaces {
            let (membership, mut baseline) = self.enter(namespace, &request);
            // Held before waiting: an error below drops it, which leaves the poller again.
            memberships.push(membership);
            covered_since = covered_since.max(ready(&mut baseline).await?);
        }
        Ok(FeedLease::new(covered_since, Box::new(memberships)))
    }
}

impl PollFeed {
    /// The namespaces a watch of `namespace` (`None`: all) covers: those with a backend.
    async fn served_namespaces(&self, namespace: Option<&str>) -> Result<Vec<String>, ApiError> {
        let mut namespaces: Vec<String> = self
            .provider
            .resolve(namespace)
            .await?
            .into_iter()
            .map(|backend| backend.namespace)
            .filter(|served| namespace.is_none_or(|wanted| wanted == served))
            .collect();
        namespaces.sort();
        namespaces.dedup();
        Ok(namespaces)
    }

    /// Joins the running poller of `namespace`, or starts one.
    fn enter(&self, namespace: String, request: &FeedRequest) -> (Membership, watch::Receiver<Baseline>) {
        let key = (namespace, Arc::as_ptr(&request.broadcaster) as usize);
        let mut pollers = locked(&self.pollers);
        let generation = pollers.next_generation + 1;
        let entry = match pollers.entries.entry(key.clone()) {
            Entry::Occupied(mut occupied) => {
                if !occupied.get().usable() {
                    let stale = occupied.insert(self.start(&key.0, request, generation));
                    stale.task.abort();
                }
                occupied.into_mut()
            }
            Entry::Vacant(vacant) => vacant.insert(self.start(&key.0, request, generation)),
        };
        entry.members += 1;
        let (entry_generation, baseline) = (entry.generation, entry.baseline.clone());
        pollers.next_generation = pollers.next_generation.max(entry_generation);
        let membership = Membership {
            pollers: self.pollers.clone(),
            key,
            generation: entry_generation,
        };
        (membership, baseline)
    }

    /// Spawns the poller of `namespace`, starting from the client's remembered list when there is one.
    fn start(&self, namespace: &str, request: &FeedRequest, generation: u64) -> PollerEntry {
        let (sender, baseline) = watch::channel(Baseline::Pending);
        let poller = Poller {
            resource: self.resource,
            namespace: namespace.to_owned(),
            storage: self.storage.clone(),
            broadcaster: request.broadcaster.clone(),
            settings: self.settings,
        };
        let start = request
            .since
            .and_then(|since| request.broadcaster.list_snapshot(namespace, since));
        let task = tokio::spawn(poller.run(start, sender)).abort_handle();
        PollerEntry {
            generation,
            members: 0,
            baseline,
            task,
        }
    }
}

impl PollerEntry {
    /// A poller that runs and did not fail to start.
    fn usable(&self) -> bool {
        !self.task.is_finished() && !matches!(*self.baseline.borrow(), Baseline::Failed(_))
    }
}

/// The counter a poller's baseline covers from, once it has one.
async fn ready(baseline: &mut watch::Receiver<Baseline>) -> Result<u64, ApiError> {
    loop {
        let state = baseline.borrow_and_update().clone();
        match state {
            Baseline::Ready(counter) => return Ok(counter),
            Baseline::Failed(error) => return Err(error),
            Baseline::Pending => {}
        }
        if baseline.changed().await.is_err() {
            return Err(ApiError::service_unavailable(
                "the watch feed stopped before its first poll finished; try again",
            ));
        }
    }
}

/// One namespace's poll loop.
struct Poller {
    resource: &'static str,
    namespace: String,
    storage: Arc<dyn Storage>,
    broadcaster: Arc<Broadcaster>,
    settings: WorldWatchSettings,
}

/// What a poller carries from one poll to the next.
struct Picture {
    /// The objects as the last good poll and the writes since showed them, by name.
    known: BTreeMap<String, Value>,
    /// The events published through the server (writes, other pollers), received as they come.
    writes: broadcast::Receiver<Arc<WatchEvent>>,
    /// Those received and not yet taken into `known`.
    pending: VecDeque<Arc<WatchEvent>>,
    /// Counters of the events this poller published, so it does not read them back as writes.
    own: HashSet<u64>,
    /// The objects of the last good poll, as the storage shared them, while `known` is exactly them: the last round
    /// took no write of this namespace. A poll answering with the very same objects then changes nothing.
    settled: Option<Arc<Vec<Value>>>,
}

impl Poller {
    async fn run(self, start: Option<(u64, Vec<Value>)>, baseline: watch::Sender<Baseline>) {
        let Some(mut picture) = self.baseline(start, &baseline).await else {
            return;
        };
        let mut cadence = Cadence::new(self.settings.cadence(self.resource));
        let (mut wait, mut calls) = (cadence.soonest(0), 0);
        loop {
            self.sleep_unless_written(&mut picture, wait, cadence.soonest(calls))
                .await;
            let started = self.broadcaster.current();
            let (polled, sent) = counted(self.poll()).await;
            calls = sent;
            let changed = self.round(&mut picture, polled, started);
            wait = cadence.after_poll(changed, calls);
        }
    }

    /// The first picture: the client's remembered list with what was announced since, or a first poll. Tells the
    /// joining watches what it covers (or why there is none).
    async fn baseline(
        &self,
        start: Option<(u64, Vec<Value>)>,
        sender: &watch::Sender<Baseline>,
    ) -> Option<Picture> {
        let mut writes = self.broadcaster.subscribe();
        let mut pending = VecDeque::new();
        let (known, covered_since) = match start {
            Some((counter, items)) => {
                // What was announced since that list is part of the picture, so it is not reported again.
                if let Some((receiver, announced)) = self.broadcaster.subscribe_after(counter) {
                    writes = receiver;
                    pending.extend(announced);
                }
                (by_name(items), counter)
            }
            None => {
                let counter = self.broadcaster.current();
                match self.poll().await {
                    Ok(items) => (by_name(Arc::unwrap_or_clone(items)), counter),
                    Err(error) => {
                        let _ = sender.send(Baseline::Failed(error));
                        return None;
                    }
                }
            }
        };
        let _ = sender.send(Baseline::Ready(covered_since));
        Some(Picture {
            known,
            writes,
            pending,
            own: HashSet::new(),
            settled: None,
        })
    }

    /// Waits `wait` for the next poll; a write in this namespace through the server cuts the wait to `soonest`
    /// after the last poll, so what follows it in Coder (a build) is seen soon, still within the budget.
    async fn sleep_unless_written(&self, picture: &mut Picture, wait: Duration, soonest: Duration) {
        let polled_at = tokio::time::Instant::now();
        let mut due = polled_at + wait;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(due) => return,
                received = picture.writes.recv() => match received {
                    Ok(event) if picture.own.contains(&event.counter) => {}
                    Ok(event) => {
                        if of_namespace(&event, &self.namespace) {
                            due = due.min(polled_at + soonest);
                        }
                        picture.pending.push_back(event);
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => {
                        tokio::time::sleep_until(due).await;
                        return;
                    }
                },
            }
        }
    }

    /// Takes one poll into the picture and publishes what changed in Coder; whether anything changed here (in Coder,
    /// or by a write through the server in this namespace).
    fn round(&self, picture: &mut Picture, polled: Result<Arc<Vec<Value>>, ApiError>, started: u64) -> bool {
        drain(&mut picture.writes, &mut picture.pending, &mut picture.own);
        let items = match polled {
            Ok(items) => items,
            Err(error) => {
                self.failed(&error);
                return false;
            }
        };
        let wrote = picture
            .pending
            .iter()
            .any(|event| of_namespace(event, &self.namespace));
        if !wrote
            && let Some(settled) = &picture.settled
            && Arc::ptr_eq(settled, &items)
        {
            // The storage answered with the objects of the last poll, which `known` already is.
            picture.pending.clear();
            return false;
        }
        picture.settled = (!wrote).then(|| items.clone());
        let writes = picture.pending.drain(..);
        let items = Arc::unwrap_or_clone(items);
        let events = poll_round(&mut picture.known, items, writes, started, &self.namespace);
        let saw = !events.is_empty();
        self.publish(events, &mut picture.own);
        wrote || saw
    }

    /// Publishes one poll's events, noting their counters as this poller's own.
    fn publish(&self, events: Vec<(EventType, Value)>, own: &mut HashSet<u64>) {
        for (kind, object) in events {
            own.extend(self.broadcaster.publish(kind, object));
        }
    }

    fn failed(&self, error: &ApiError) {
        tracing::warn!(
            resource = self.resource,
            namespace = %self.namespace,
            "watch poll failed, nothing published: {}",
            error.message
        );
    }

    /// Every object of the namespace, as a list answers it.
    async fn poll(&self) -> Result<Arc<Vec<Value>>, ApiError> {
        let ctx = RequestContext {
            user: UserInfo::default(),
            namespace: Some(self.namespace.clone()),
            deadline: tokio::time::Instant::now() + self.settings.poll_timeout,
            dry_run: false,
            query: BTreeMap::new(),
        };
        // The storage bounds its Coder calls by the deadline; this also bounds finding the backend.
        tokio::time::timeout(self.settings.poll_timeout, self.storage.list_shared(&ctx))
            .await
            .unwrap_or_else(|_| Err(ApiError::timeout("the watch poll did not finish in time")))
    }
}

/// Moves every event received so far into `pending`, except this poller's own. A lagging receiver lost writes; the
/// next poll still reports their effect, and the broadcaster drops the events that would only repeat a state a
/// write already announced.
fn drain(
    receiver: &mut broadcast::Receiver<Arc<WatchEvent>>,
    pending: &mut VecDeque<Arc<WatchEvent>>,
    own: &mut HashSet<u64>,
) {
    loop {
        match receiver.try_recv() {
            Ok(event) if own.contains(&event.counter) => {}
            Ok(event) => pending.push_back(event),
            Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => break,
        }
    }
    // Everything this poller published so far was sent before now: received above, or lost to lag.
    own.clear();
}

/// Objects by name.
fn by_name(items: Vec<Value>) -> BTreeMap<String, Value> {
    items
        .into_iter()
        .filter_map(|o| Some((o["metadata"]["name"].as_str()?.to_owned(), o)))
        .collect()
}

/// Whether a published event is of an object in `namespace`.
fn of_namespace(event: &WatchEvent, namespace: &str) -> bool {
    event.object["metadata"]["namespace"].as_str() == Some(namespace)
}

/// Takes a published event of `namespace` into the poller's picture.
fn apply(known: &mut BTreeMap<String, Value>, namespace: &str, event: &WatchEvent) {
    let Some(name) = event.object["metadata"]["name"].as_str() else {
        return;
    };
    if !of_namespace(event, namespace) {
        return;
    }
    match event.kind {
        EventType::Deleted => {
            known.remove(name);
        }
        EventType::Added | EventType::Modified => {
            known.insert(name.to_owned(), event.object.clone());
        }
    }
}

/// One poll's events: `known` (the last picture) takes in the `writes` published through this server since the
/// last round, then is compared with the poll's `items` and becomes them. Writes are already announced; one
/// published after the poll started (`counter > started`) may be missing from the poll, so its state stands until
/// the next poll rather than the poll's older one.
fn poll_round(
    known: &mut BTreeMap<String, Value>,
    items: Vec<Value>,
    writes: impl Iterator<Item = Arc<WatchEvent>>,
    started: u64,
    namespace: &str,
) -> Vec<(EventType, Value)> {
    let mut current = by_name(items);
    for event in writes {
        apply(known, namespace, &event);
        if event.counter > started {
            apply(&mut current, namespace, &event);
        }
    }
    let events = diff(known, &current);
    *known = current;
    events
}

fn resource_version(object: &Value) -> &Value {
    &object["metadata"]["resourceVersion"]
}

/// The events that turn `before` into `after`: `ADDED` for new names, `MODIFIED` for a changed resourceVersion,
/// `DELETED` (with the last known object) for names that are gone; in name order, deletions last.
pub fn diff(before: &BTreeMap<String, Value>, after: &BTreeMap<String, Value>) -> Vec<(EventType, Value)> {
    let mut events = Vec::new();
    for (name, object) in after {
        match before.get(name) {
            None => events.push((EventType::Added, object.clone())),
            Some(old) if resource_version(old) != resource_version(object) => {
                events.push((EventType::Modified, object.clone()));
            }
            Some(_) => {}
        }
    }
    for (name, object) in before {
        if !after.contains_key(name) {
            events.push((EventType::Deleted, object.clone()));
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(name: &str, rv: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}})
    }

    fn map(objects: &[Value]) -> BTreeMap<String, Value> {
        by_name(objects.to_vec())
    }

    fn kinds(events: &[(EventType, Value)]) -> Vec<(&'static str, String)> {
        events
            .iter()
            .map(|(kind, o)| {
                let name = o["metadata"]["name"].as_str().unwrap_or_default();
                let rv = o["metadata"]["resourceVersion"].as_str().unwrap_or_default();
                (kind.as_str(), format!("{name}@{rv}"))
            })
            .collect()
    }

    #[test]
    fn the_pollers_of_one_control_plane_share_its_budget() {
        let settings = WorldWatchSettings::default();
        let budgets: Vec<u32> = POLL_SHARES
            .iter()
            .map(|(plural, _)| settings.cadence(plural).calls_per_minute)
            .collect();
        assert_eq!(budgets, [40, 40, 6, 7, 7]);
        assert!(budgets.iter().sum::<u32>() <= DEFAULT_POLL_CALLS_PER_MINUTE);
        // A fifth of Coder's default rate limit per token.
        const { assert!(DEFAULT_POLL_CALLS_PER_MINUTE * 5 <= 512) };
        assert_eq!(poll_share("codertemplateversions"), 0);
        let tiny = WorldWatchSettings {
            calls_per_minute: 10,
            ..settings
        };
        assert_eq!(tiny.cadence(ORGANIZATIONS).calls_per_minute, 1, "never zero");
    }

    #[test]
    fn diff_reports_additions_changes_and_deletions() {
        let before = map(&[object("a", "1"), object("b", "1"), object("c", "1")]);
        let after = map(&[object("a", "1"), object("b", "2"), object("d", "1")]);
        assert_eq!(
            kinds(&diff(&before, &after)),
            [
                ("MODIFIED", "b@2".to_owned()),
                ("ADDED", "d@1".to_owned()),
                ("DELETED", "c@1".to_owned()),
            ]
        );
        assert!(diff(&after, &after).is_empty());
        assert_eq!(kinds(&diff(&BTreeMap::new(), &after)).len(), 3);
    }

    fn write(kind: EventType, object: Value, counter: u64) -> Arc<WatchEvent> {
        Arc::new(WatchEvent {
            kind,
            object,
            counter,
        })
    }

    #[test]
    fn a_poll_round_reports_coder_changes_but_not_writes_announced_already() {
        let mut known = map(&[object("a", "1"), object("b", "1")]);
        // "a" changed in Coder; "b" was written through the server before the poll started and the poll shows it;
        // "c" was created through the server while the poll ran and is not in it yet.
        let writes = [
            write(EventType::Modified, object("b", "2"), 5),
            write(EventType::Added, object("c", "1"), 15),
        ];
        let items = vec![object("a", "2"), object("b", "2")];
        let events = poll_round(&mut known, items, writes.into_iter(), 10, "ns");
        assert_eq!(kinds(&events), [("MODIFIED", "a@2".to_owned())]);
        assert_eq!(known.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        // The next poll shows "c": nothing new. Then "b" is deleted in Coder.
        let items = vec![object("a", "2"), object("b", "2"), object("c", "1")];
        assert!(poll_round(&mut known, items, std::iter::empty(), 20, "ns").is_empty());
        let items = vec![object("a", "2"), object("c", "1")];
        let events = poll_round(&mut known, items, std::iter::empty(), 30, "ns");
        assert_eq!(kinds(&events), [("DELETED", "b@2".to_owned())]);
    }

    #[test]
    fn a_poll_that_started_before_a_write_does_not_undo_it() {
        let mut known = map(&[object("a", "1")]);
        // The poll read "a" before the write through the server changed it.
        let writes = [write(EventType::Modified, object("a", "2"), 15)];
        let events = poll_round(&mut known, vec![object("a", "1")], writes.into_iter(), 10, "ns");
        assert!(events.is_empty(), "{:?}", kinds(&events));
        assert_eq!(known["a"]["metadata"]["resourceVersion"], "2");
    }

    #[test]
    fn published_writes_update_the_picture_of_their_namespace_only() {
        let mut known = map(&[object("a", "1")]);
        let event = |kind, object| WatchEvent {
            kind,
            object,
            counter: 1,
        };
        apply(&mut known, "ns", &event(EventType::Modified, object("a", "2")));
        apply(&mut known, "ns", &event(EventType::Added, object("b", "1")));
        let mut elsewhere = object("c", "1");
        elsewhere["metadata"]["namespace"] = "other".into();
        apply(&mut known, "ns", &event(EventType::Added, elsewhere));
        assert_eq!(known.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(known["a"]["metadata"]["resourceVersion"], "2");
        apply(&mut known, "ns", &event(EventType::Deleted, object("a", "9")));
        assert_eq!(known.keys().collect::<Vec<_>>(), ["b"]);
    }
}
