//! Watch streams: per-resource event fan-out of the writes made through this server, bookmarks and timeouts.
//!
//! There is no watch cache: a watch sees the writes made through this server after it started, nothing older and
//! nothing changed behind the server's back. Each resource has a [`Broadcaster`] (a tokio broadcast channel of 100
//! events); a watcher that falls more than 100 events behind gets an `ERROR` event with a 410 `Expired` Status and
//! its stream ends, so clients relist.
//!
//! resourceVersions: objects carry whatever their storage sets. Lists and bookmarks carry the broadcaster's
//! counter, a per-resource number seeded with the server's start time in microseconds (so it keeps growing across
//! restarts) and incremented by every event. Because object resourceVersions come from storages and are not
//! comparable with it, a watch accepts any resourceVersion other than `0` and streams from the moment it starts.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::{Instant, Interval};

use super::negotiate::IncludeObject;
use super::registry::{Registry, ResourceDef};
use super::selectors::{FieldSelector, LabelSelector};
use super::storage::EventType;
use super::table;

/// Events a watcher may fall behind by before it is ended with 410 Expired.
pub const CHANNEL_CAPACITY: usize = 100;

/// One write, as watchers see it.
#[derive(Clone, Debug)]
pub struct WatchEvent {
    pub kind: EventType,
    pub object: Value,
}

/// The event fan-out and resourceVersion counter of one resource.
pub struct Broadcaster {
    sender: broadcast::Sender<Arc<WatchEvent>>,
    resource_version: AtomicU64,
}

impl Broadcaster {
    /// A broadcaster whose counter starts at `seed`.
    pub fn new(seed: u64) -> Self {
        let (sender, _) = broadcast::channel(CHANNEL_CAPACITY);
        Self {
            sender,
            resource_version: AtomicU64::new(seed),
        }
    }

    /// Sends `object` to every current watcher and advances the counter.
    pub fn publish(&self, kind: EventType, object: Value) {
        self.resource_version.fetch_add(1, Ordering::SeqCst);
        // An error only means nobody is watching.
        let _ = self.sender.send(Arc::new(WatchEvent { kind, object }));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<WatchEvent>> {
        self.sender.subscribe()
    }

    /// The counter, as lists and bookmarks report it.
    pub fn resource_version(&self) -> String {
        self.resource_version.load(Ordering::SeqCst).to_string()
    }
}

/// The broadcasters of every registered resource.
pub struct WatchHub {
    broadcasters: BTreeMap<&'static str, Arc<Broadcaster>>,
}

impl WatchHub {
    /// One broadcaster per resource of `registry`, counters seeded with the current time in microseconds.
    pub fn new(registry: &Registry) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2));
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

/// Everything a running watch needs.
pub struct WatchStream {
    pub receiver: broadcast::Receiver<Arc<WatchEvent>>,
    pub filter: WatchFilter,
    pub format: EventObjectFormat,
    pub def: ResourceDef,
    pub group_version: String,
    /// The resource's broadcaster, for the resourceVersion of bookmarks.
    pub broadcaster: Arc<Broadcaster>,
    pub timing: WatchTiming,
}

/// What woke a waiting watch.
enum Wake {
    Deadline,
    Bookmark,
    Event(Result<Arc<WatchEvent>, RecvError>),
}

struct Running {
    watch: WatchStream,
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
        let running = Running {
            deadline: now + self.timing.duration,
            watch: self,
            bookmarks,
            ended: false,
        };
        futures::stream::unfold(running, |mut running| async move {
            let line = running.next_line().await?;
            Some((Ok(line), running))
        })
    }
}

impl Running {
    async fn next_line(&mut self) -> Option<Bytes> {
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
        tokio::select! {
            () = tokio::time::sleep_until(self.deadline) => Wake::Deadline,
            _ = bookmark_tick => Wake::Bookmark,
            received = self.watch.receiver.recv() => Wake::Event(received),
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
            table::table(def, std::slice::from_ref(object), list_meta, include)
        }
        EventObjectFormat::PartialObjectMetadata => table::partial_object_metadata(object),
    }
}

fn event_line(kind: &str, object: Value) -> Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// The `ERROR` event a lagging watcher ends with: clients see 410 Expired and relist.
fn expired_line(missed: u64) -> Bytes {
    let status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "too old resource version: the watch fell {missed} events behind and was ended; list again to continue"
        ),
        "reason": "Expired",
        "code": 410,
    });
    event_line("ERROR", status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishing_advances_the_counter() {
        let broadcaster = Broadcaster::new(41);
        assert_eq!(broadcaster.resource_version(), "41");
        broadcaster.publish(EventType::Added, json!({}));
        assert_eq!(broadcaster.resource_version(), "42");
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
