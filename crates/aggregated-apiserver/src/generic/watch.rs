//! Watch streams: per-resource event fan-out, a short event history for resuming, bookmarks and timeouts.
//!
//! Each resource has a [`Broadcaster`] (a tokio broadcast channel of 100 events). Writes through this server
//! publish into it, and so does the resource's [`WatchFeed`](super::feed::WatchFeed) when it has one (changes made
//! behind the server's back). A watcher that falls more than 100 events behind gets an `ERROR` event with a 410
//! `Expired` Status and its stream ends, so clients relist.
//!
//! resourceVersions: objects carry whatever their storage sets. Lists, bookmarks and events carry the broadcaster's
//! counter, a hybrid clock: at least the wall-clock time in microseconds and strictly growing, so counters of
//! replicas (and of a restarted process) are comparable up to clock skew. The last [`HISTORY_CAPACITY`] events are
//! kept with their counters, so a watch can resume from a list's or bookmark's resourceVersion, or from the
//! resourceVersion of an object it was sent. A `DELETED` event's object gets the event's counter as its
//! resourceVersion (as kube-apiserver gives a deletion a new one), so every event of the history has its own.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::hash::{Hash as _, Hasher as _};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;
use tokio::time::{Instant, Interval};

use super::feed::FeedLease;
use super::negotiate::IncludeObject;
use super::registry::{Registry, ResourceDef};
use super::selectors::{FieldSelector, LabelSelector};
use super::storage::EventType;
use super::table;

/// Events a watcher may fall behind by before it is ended with 410 Expired.
pub const CHANNEL_CAPACITY: usize = 100;

/// Events kept per resource for watches that resume from an earlier resourceVersion.
pub const HISTORY_CAPACITY: usize = 1000;

/// Lists remembered per resource (the newest per namespace scope), for feeds that start from a client's list.
const LIST_SNAPSHOTS: usize = 16;

/// How long a remembered list may serve as the starting point of a feed.
const LIST_SNAPSHOT_MAX_AGE: Duration = Duration::from_secs(600);

/// How far ahead of this process's clock a counter from another replica may be and still be read as one.
const CLOCK_SKEW: u64 = 60_000_000;

/// One change, as watchers see it.
#[derive(Clone, Debug)]
pub struct WatchEvent {
    pub kind: EventType,
    pub object: Value,
    /// The broadcaster's counter for this event.
    pub counter: u64,
}

/// A watcher's end of a broadcaster.
pub type EventReceiver = broadcast::Receiver<Arc<WatchEvent>>;

/// A list answered for a namespace scope (`None`: all namespaces), before selectors were applied.
struct ListSnapshot {
    scope: Option<String>,
    counter: u64,
    taken: Instant,
    items: Arc<Vec<Value>>,
}

/// The counter, the event history and the remembered lists of one resource.
struct Journal {
    counter: u64,
    history: VecDeque<Arc<WatchEvent>>,
    /// Every event with a counter above this is still in `history`.
    complete_after: u64,
    lists: VecDeque<ListSnapshot>,
    /// What the last `ADDED` or `MODIFIED` event of each object (by namespace and name) carried, so the same state
    /// is never announced twice in a row.
    last_state: HashMap<(String, String), ObjectState>,
}

/// An object's resourceVersion and a digest of the whole object.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ObjectState {
    resource_version: String,
    digest: u64,
}

/// The object's namespace and name, when it has a name.
fn object_key(object: &Value) -> Option<(String, String)> {
    let meta = &object["metadata"];
    let name = meta["name"].as_str()?;
    Some((
        meta["namespace"].as_str().unwrap_or_default().to_owned(),
        name.to_owned(),
    ))
}

fn object_state(object: &Value) -> ObjectState {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    object.to_string().hash(&mut hasher);
    ObjectState {
        resource_version: object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        digest: hasher.finish(),
    }
}

impl Journal {
    /// Advances the counter: strictly growing, and at least the wall-clock time in microseconds.
    fn tick(&mut self) -> u64 {
        self.counter = self.counter.saturating_add(1).max(now_micros());
        self.counter
    }

    /// The counter as of now, without an event.
    fn observe(&mut self) -> u64 {
        self.counter = self.counter.max(now_micros());
        self.counter
    }
}

/// Microseconds since the Unix epoch.
pub fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2))
}

/// The event fan-out, history and resourceVersion counter of one resource.
pub struct Broadcaster {
    sender: broadcast::Sender<Arc<WatchEvent>>,
    journal: Mutex<Journal>,
}

impl Broadcaster {
    /// A broadcaster whose counter starts at `seed` (or the current time, when later). Nothing before it can be
    /// replayed.
    pub fn new(seed: u64) -> Self {
        let (sender, _) = broadcast::channel(CHANNEL_CAPACITY);
        Self {
            sender,
            journal: Mutex::new(Journal {
                counter: seed,
                history: VecDeque::new(),
                complete_after: seed,
                lists: VecDeque::new(),
                last_state: HashMap::new(),
            }),
        }
    }

    fn journal(&self) -> MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `object` to every current watcher, records it in the history and answers its counter. An `ADDED` or
    /// `MODIFIED` event that repeats the object's last announced state (same resourceVersion and content, as when a
    /// poll reports again what a write already announced) is not sent: `None`.
    pub fn publish(&self, kind: EventType, mut object: Value) -> Option<u64> {
        let mut journal = self.journal();
        if let Some(key) = object_key(&object) {
            if kind == EventType::Deleted {
                journal.last_state.remove(&key);
            } else {
                let state = object_state(&object);
                if journal.last_state.get(&key) == Some(&state) {
                    return None;
                }
                journal.last_state.insert(key, state);
            }
        }
        let counter = journal.tick();
        if kind == EventType::Deleted && object["metadata"].is_object() {
            object["metadata"]["resourceVersion"] = counter.to_string().into();
        }
        let event = Arc::new(WatchEvent {
            kind,
            object,
            counter,
        });
        if journal.history.len() == HISTORY_CAPACITY
            && let Some(dropped) = journal.history.pop_front()
        {
            journal.complete_after = dropped.counter;
        }
        journal.history.push_back(event.clone());
        // Sent under the lock, so a watcher that subscribes and reads the history under it sees each event once.
        // An error only means nobody is watching.
        let _ = self.sender.send(event);
        Some(counter)
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<WatchEvent>> {
        self.sender.subscribe()
    }

    /// A receiver of the events after `since` and the recorded ones after it, or `None` when the history no
    /// longer holds every event after `since`.
    pub fn subscribe_after(&self, since: u64) -> Option<(EventReceiver, Vec<Arc<WatchEvent>>)> {
        let journal = self.journal();
        if since < journal.complete_after {
            return None;
        }
        let backlog = journal
            .history
            .iter()
            .filter(|e| e.counter > since)
            .cloned()
            .collect();
        Some((self.sender.subscribe(), backlog))
    }

    /// The counter as of now, as lists and bookmarks report it.
    pub fn current(&self) -> u64 {
        self.journal().observe()
    }

    /// [`Self::current`] as a resourceVersion string.
    pub fn resource_version(&self) -> String {
        self.current().to_string()
    }

    /// The counter a client's resourceVersion stands for: the resourceVersion of an object in the history (the
    /// newest event carrying it), or a counter of this broadcaster (or of another replica, up to [`CLOCK_SKEW`]
    /// ahead of this process's clock, which this counter then catches up with). `None` when it is neither. The
    /// bound is the wall clock, not the counter: a counter that caught up with a client's resourceVersion must not
    /// raise the bound for the next one, or requests could push it ever further ahead of the other replicas.
    pub fn counter_of(&self, resource_version: &str) -> Option<u64> {
        let mut journal = self.journal();
        let sent = journal
            .history
            .iter()
            .rev()
            .find(|e| e.object["metadata"]["resourceVersion"].as_str() == Some(resource_version))
            .map(|e| e.counter);
        if sent.is_some() {
            return sent;
        }
        let counter = resource_version
            .parse::<u64>()
            .ok()
            .filter(|counter| *counter <= now_micros().saturating_add(CLOCK_SKEW))?;
        journal.observe();
        journal.counter = journal.counter.max(counter);
        Some(counter)
    }

    /// Remembers a list answered at `counter` for `scope` (the namespace, `None` for all), replacing the last one of
    /// the same scope. Answers the lists it no longer remembers, so that the caller can free them after answering
    /// (a list of a thousand objects takes a while to free) rather than under this lock.
    pub fn remember_list(
        &self,
        scope: Option<&str>,
        counter: u64,
        items: Arc<Vec<Value>>,
    ) -> Vec<Arc<Vec<Value>>> {
        let mut journal = self.journal();
        let mut forgotten = Vec::new();
        journal.lists.retain_mut(|l| {
            let same_scope = l.scope.as_deref() == scope;
            if same_scope {
                forgotten.push(std::mem::take(&mut l.items));
            }
            !same_scope
        });
        if journal.lists.len() == LIST_SNAPSHOTS {
            forgotten.extend(journal.lists.pop_front().map(|l| l.items));
        }
        journal.lists.push_back(ListSnapshot {
            scope: scope.map(str::to_owned),
            counter,
            taken: Instant::now(),
            items,
        });
        forgotten
    }

    /// The newest remembered list that covers `namespace` and was answered at or before `at_or_before`, no older
    /// than ten minutes: its counter and the objects of that namespace.
    pub fn list_snapshot(&self, namespace: &str, at_or_before: u64) -> Option<(u64, Vec<Value>)> {
        let journal = self.journal();
        journal
            .lists
            .iter()
            .filter(|l| l.scope.as_deref().is_none_or(|s| s == namespace))
            .filter(|l| l.counter <= at_or_before && l.taken.elapsed() <= LIST_SNAPSHOT_MAX_AGE)
            .max_by_key(|l| l.counter)
            .map(|l| {
                let items = l
                    .items
                    .iter()
                    .filter(|o| o["metadata"]["namespace"].as_str() == Some(namespace))
                    .cloned()
                    .collect();
                (l.counter, items)
            })
    }
}

/// The broadcasters of every registered resource.
pub struct WatchHub {
    broadcasters: BTreeMap<&'static str, Arc<Broadcaster>>,
}

impl WatchHub {
    /// One broadcaster per resource of `registry`, counters seeded with the current time in microseconds.
    pub fn new(registry: &Registry) -> Self {
        let seed = now_micros();
        let broadcasters = registry
            .resources
            .iter()
            .map(|r| (r.plural, Arc::new(Broadcaster::new(seed))))
            .collect();
        Self { broadcasters }
    }

    pub fn get(&self, plural: &str) -> Option<&Arc<Broadcaster>> {
        self.broadcasters.get(plural)
    }
}

/// Which events a watcher gets.
#[derive(Clone, Debug, Default)]
pub struct WatchFilter {
    /// Only objects in this namespace (`None`: all namespaces).
    pub namespace: Option<String>,
    /// Only the object of this name (a watch on an item path).
    pub name: Option<String>,
    pub fields: FieldSelector,
    pub labels: LabelSelector,
}

impl WatchFilter {
    pub fn matches(&self, object: &Value) -> bool {
        let meta = &object["metadata"];
        let namespace_ok = self
            .namespace
            .as_deref()
            .is_none_or(|ns| meta["namespace"].as_str() == Some(ns));
        let name_ok = self
            .name
            .as_deref()
            .is_none_or(|name| meta["name"].as_str() == Some(name));
        namespace_ok && name_ok && self.fields.matches(object) && self.labels.matches(object)
    }
}

/// How the object inside each event is represented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventObjectFormat {
    /// The object itself (JSON).
    Object,
    /// A one-row `meta.k8s.io/v1` Table.
    Table(IncludeObject),
    PartialObjectMetadata,
}

/// How long a watch runs and whether it gets bookmarks.
#[derive(Clone, Copy, Debug)]
pub struct WatchTiming {
    pub duration: Duration,
    /// `Some(interval)` when the client asked for bookmarks.
    pub bookmarks: Option<Duration>,
}

/// Where a watch starts.
pub enum WatchStart {
    /// The recorded events after the requested resourceVersion, then what follows.
    Replay(Vec<Arc<WatchEvent>>),
    /// The requested resourceVersion cannot be served: one `ERROR` event with a 410 `Expired` Status (its
    /// message), then the end, so the client relists.
    Expired(String),
}

/// Everything a running watch needs.
pub struct WatchStream {
    pub receiver: broadcast::Receiver<Arc<WatchEvent>>,
    pub start: WatchStart,
    /// Keeps the resource's feed running for this watch; dropped when the stream ends.
    pub lease: Option<FeedLease>,
    pub filter: WatchFilter,
    pub format: EventObjectFormat,
    pub def: ResourceDef,
    pub group_version: String,
    /// The resource's broadcaster, for the resourceVersion of bookmarks.
    pub broadcaster: Arc<Broadcaster>,
    pub timing: WatchTiming,
    /// Turns true when the server shuts down: the stream ends like at its deadline, so the client re-watches.
    pub stopping: Option<watch::Receiver<bool>>,
}

/// What woke a waiting watch.
enum Wake {
    Deadline,
    Bookmark,
    Event(Result<Arc<WatchEvent>, RecvError>),
}

struct Running {
    watch: WatchStream,
    backlog: VecDeque<Arc<WatchEvent>>,
    deadline: Instant,
    bookmarks: Option<Interval>,
    ended: bool,
}

impl WatchStream {
    /// Newline-delimited `{"type":..,"object":..}` lines until the deadline, an overflow (then an `ERROR` line) or
    /// the server's end.
    pub fn into_lines(self) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
        let now = Instant::now();
        let bookmarks = self
            .timing
            .bookmarks
            .map(|period| tokio::time::interval_at(now + period, period));
        let (backlog, ended_with) = match &self.start {
            WatchStart::Replay(events) => (events.iter().cloned().collect(), None),
            WatchStart::Expired(message) => (VecDeque::new(), Some(message.clone())),
        };
        if let Some(message) = ended_with {
            return futures::stream::iter(vec![Ok(expired_message_line(&message))]).left_stream();
        }
        let running = Running {
            backlog,
            deadline: now + self.timing.duration,
            watch: self,
            bookmarks,
            ended: false,
        };
        futures::stream::unfold(running, |mut running| async move {
            let line = running.next_line().await?;
            Some((Ok(line), running))
        })
        .right_stream()
    }
}

impl Running {
    async fn next_line(&mut self) -> Option<Bytes> {
        while let Some(event) = self.backlog.pop_front() {
            if self.watch.filter.matches(&event.object) {
                return Some(self.line(event.kind.as_str(), &event.object));
            }
        }
        while !self.ended {
            match self.wait().await {
                Wake::Deadline | Wake::Event(Err(RecvError::Closed)) => return None,
                Wake::Bookmark => return Some(self.bookmark()),
                Wake::Event(Ok(event)) if self.watch.filter.matches(&event.object) => {
                    return Some(self.line(event.kind.as_str(), &event.object));
                }
                Wake::Event(Ok(_)) => {}
                Wake::Event(Err(RecvError::Lagged(missed))) => {
                    self.ended = true;
                    return Some(expired_line(missed));
                }
            }
        }
        None
    }

    async fn wait(&mut self) -> Wake {
        let bookmarks = &mut self.bookmarks;
        let bookmark_tick = async {
            match bookmarks.as_mut() {
                Some(interval) => interval.tick().await,
                None => std::future::pending().await,
            }
        };
        let stopping = &mut self.watch.stopping;
        let server_stops = async {
            match stopping.as_mut() {
                // An error means the server is gone: stop as well.
                Some(stopping) => drop(stopping.wait_for(|stopping| *stopping).await),
                None => std::future::pending().await,
            }
        };
        // Events already received go out before a shutdown ends the stream.
        tokio::select! {
            biased;
            () = tokio::time::sleep_until(self.deadline) => Wake::Deadline,
            _ = bookmark_tick => Wake::Bookmark,
            received = self.watch.receiver.recv() => Wake::Event(received),
            () = server_stops => Wake::Deadline,
        }
    }

    fn line(&self, kind: &str, object: &Value) -> Bytes {
        let object = convert(&self.watch.def, self.watch.format, object);
        event_line(kind, object)
    }

    fn bookmark(&self) -> Bytes {
        let resource_version = self.watch.broadcaster.resource_version();
        let object = match self.watch.format {
            EventObjectFormat::Object => json!({
                "apiVersion": self.watch.group_version,
                "kind": self.watch.def.kind,
                "metadata": {"resourceVersion": resource_version},
            }),
            EventObjectFormat::Table(_) => json!({
                "apiVersion": "meta.k8s.io/v1",
                "kind": "Table",
                "metadata": {"resourceVersion": resource_version},
                "columnDefinitions": [],
                "rows": [],
            }),
            EventObjectFormat::PartialObjectMetadata => json!({
                "apiVersion": "meta.k8s.io/v1",
                "kind": "PartialObjectMetadata",
                "metadata": {"resourceVersion": resource_version},
            }),
        };
        event_line("BOOKMARK", object)
    }
}

/// The object of an event in the watcher's representation.
fn convert(def: &ResourceDef, format: EventObjectFormat, object: &Value) -> Value {
    match format {
        EventObjectFormat::Object => object.clone(),
        EventObjectFormat::Table(include) => {
            let list_meta = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
            table::table(def, std::slice::from_ref(object), list_meta, include).to_value()
        }
        EventObjectFormat::PartialObjectMetadata => table::partial_object_metadata(object).to_value(),
    }
}

fn event_line(kind: &str, object: Value) -> Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// The `ERROR` event a lagging watcher ends with: clients see 410 Expired and relist.
fn expired_line(missed: u64) -> Bytes {
    expired_message_line(&format!(
        "too old resource version: the watch fell {missed} events behind and was ended; list again to continue"
    ))
}

/// An `ERROR` event with a 410 `Expired` Status saying `message`.
fn expired_message_line(message: &str) -> Bytes {
    let status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Expired",
        "code": 410,
    });
    event_line("ERROR", status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishing_advances_the_counter_past_the_clock() {
        let far_future = now_micros() + 3_600_000_000;
        let broadcaster = Broadcaster::new(far_future);
        assert_eq!(broadcaster.current(), far_future);
        assert_eq!(
            broadcaster.publish(EventType::Added, json!({})),
            Some(far_future + 1)
        );
        assert_eq!(broadcaster.resource_version(), (far_future + 1).to_string());
        let seeded_in_the_past = Broadcaster::new(41);
        let before = now_micros();
        assert!(
            seeded_in_the_past
                .publish(EventType::Added, json!({}))
                .is_some_and(|c| c >= before)
        );
    }

    fn named(name: &str, rv: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}})
    }

    #[test]
    fn a_watch_resumes_after_a_counter_or_an_object_resource_version() {
        let broadcaster = Broadcaster::new(0);
        let listed = broadcaster.current();
        let first = broadcaster
            .publish(EventType::Added, named("a", "rv-a1"))
            .unwrap();
        broadcaster.publish(EventType::Modified, named("a", "rv-a2"));
        let (_, backlog) = broadcaster.subscribe_after(listed).unwrap();
        assert_eq!(backlog.len(), 2);
        let (_, backlog) = broadcaster.subscribe_after(first).unwrap();
        assert_eq!(backlog.len(), 1);
        assert_eq!(backlog[0].object["metadata"]["resourceVersion"], "rv-a2");
        assert_eq!(broadcaster.counter_of("rv-a1"), Some(first));
        assert_eq!(broadcaster.counter_of(&listed.to_string()), Some(listed));
        assert_eq!(broadcaster.counter_of("unknown-fingerprint"), None);
        let far = (now_micros() + 10 * CLOCK_SKEW).to_string();
        assert_eq!(broadcaster.counter_of(&far), None, "far beyond any clock");
    }

    #[test]
    fn a_deleted_object_gets_the_counter_of_its_event() {
        let broadcaster = Broadcaster::new(0);
        broadcaster.publish(EventType::Added, named("a", "rv-a1"));
        let deleted = broadcaster
            .publish(EventType::Deleted, named("a", "rv-a1"))
            .unwrap();
        let (_, backlog) = broadcaster.subscribe_after(0).unwrap();
        assert_eq!(
            backlog[1].object["metadata"]["resourceVersion"],
            deleted.to_string()
        );
        // The ADDED event still resolves to itself, not to the deletion.
        assert_eq!(broadcaster.counter_of("rv-a1"), Some(backlog[0].counter));
    }

    #[test]
    fn the_same_state_of_an_object_is_announced_once() {
        let broadcaster = Broadcaster::new(0);
        assert!(broadcaster.publish(EventType::Added, named("a", "1")).is_some());
        assert_eq!(broadcaster.publish(EventType::Modified, named("a", "1")), None);
        assert_eq!(broadcaster.publish(EventType::Added, named("a", "1")), None);
        // Another object, another resourceVersion, or other content with the same resourceVersion is news.
        assert!(
            broadcaster
                .publish(EventType::Modified, named("b", "1"))
                .is_some()
        );
        assert!(
            broadcaster
                .publish(EventType::Modified, named("a", "2"))
                .is_some()
        );
        let mut relabelled = named("a", "2");
        relabelled["metadata"]["labels"] = json!({"x": "y"});
        assert!(broadcaster.publish(EventType::Modified, relabelled).is_some());
        // After a deletion the same state is an object that came back.
        assert!(broadcaster.publish(EventType::Deleted, named("a", "2")).is_some());
        assert!(broadcaster.publish(EventType::Added, named("a", "2")).is_some());
        let (_, backlog) = broadcaster.subscribe_after(0).unwrap();
        let sent: Vec<(&str, &str)> = backlog
            .iter()
            .map(|e| (e.kind.as_str(), e.object["metadata"]["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            sent,
            [
                ("ADDED", "a"),
                ("MODIFIED", "b"),
                ("MODIFIED", "a"),
                ("MODIFIED", "a"),
                ("DELETED", "a"),
                ("ADDED", "a")
            ]
        );
    }

    #[test]
    fn resource_versions_from_clients_cannot_push_the_counter_past_the_clock_skew() {
        let replica_a = Broadcaster::new(0);
        let replica_b = Broadcaster::new(0);
        for _ in 0..5 {
            // Just inside the bound, as seen by a's counter.
            let ahead = replica_a.current() + CLOCK_SKEW - 1_000;
            replica_a.counter_of(&ahead.to_string());
        }
        let bound = now_micros() + CLOCK_SKEW;
        let listed = replica_a.current();
        assert!(
            listed <= bound,
            "the counter ran {} s past the clock",
            (listed - now_micros()) / 1_000_000
        );
        // A list answered by one replica is a resourceVersion the other one accepts.
        assert_eq!(replica_b.counter_of(&listed.to_string()), Some(listed));
    }

    #[test]
    fn an_evicted_history_cannot_be_replayed() {
        let broadcaster = Broadcaster::new(0);
        let start = broadcaster.current();
        assert!(broadcaster.subscribe_after(start).is_some());
        for i in 0..=HISTORY_CAPACITY {
            broadcaster.publish(EventType::Modified, named("a", &i.to_string()));
        }
        assert!(broadcaster.subscribe_after(start).is_none());
        assert!(broadcaster.subscribe_after(broadcaster.current()).is_some());
        assert!(
            Broadcaster::new(now_micros()).subscribe_after(5).is_none(),
            "before the seed"
        );
    }

    #[test]
    fn list_snapshots_are_found_by_namespace_and_counter() {
        let broadcaster = Broadcaster::new(0);
        let all = [
            named("a", "1"),
            json!({"metadata": {"name": "b", "namespace": "other"}}),
        ];
        broadcaster.remember_list(None, 10, Arc::new(all.to_vec()));
        broadcaster.remember_list(Some("ns"), 20, Arc::new(vec![named("c", "3")]));
        let (counter, items) = broadcaster.list_snapshot("ns", 15).unwrap();
        assert_eq!((counter, items.len()), (10, 1));
        assert_eq!(items[0]["metadata"]["name"], "a");
        let (counter, items) = broadcaster.list_snapshot("ns", 25).unwrap();
        assert_eq!((counter, items[0]["metadata"]["name"].clone()), (20, json!("c")));
        assert!(broadcaster.list_snapshot("ns", 5).is_none());
        assert_eq!(broadcaster.list_snapshot("other", 25).unwrap().1.len(), 1);
    }

    #[test]
    fn filter_checks_namespace_name_and_selectors() {
        let object = json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"app": "web"}}});
        let mut filter = WatchFilter {
            namespace: Some("ns".into()),
            ..Default::default()
        };
        assert!(filter.matches(&object));
        filter.name = Some("b".into());
        assert!(!filter.matches(&object));
        filter.name = None;
        filter.labels = LabelSelector::parse("app=db").expect("selector");
        assert!(!filter.matches(&object));
        filter.labels = LabelSelector::default();
        filter.namespace = Some("other".into());
        assert!(!filter.matches(&object));
    }

    #[test]
    fn expired_line_is_a_410_status() {
        let line = expired_line(3);
        let event: Value = serde_json::from_slice(&line).expect("json");
        assert_eq!(event["type"], "ERROR");
        assert_eq!(event["object"]["code"], 410);
        assert_eq!(event["object"]["reason"], "Expired");
        assert!(line.ends_with(b"\n"));
    }
}
