//! The read verbs: get, list and watch.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::params::Query;
use super::{Call, respond, streaming};
use crate::generic::encoded_lists::Representation;
use crate::generic::feed::{FeedLease, FeedRequest};
use crate::generic::negotiate::{Answering, ResponseFormat};
use crate::generic::request_info;
use crate::generic::selectors::{FieldSelector, LabelSelector};
use crate::generic::status::ApiError;
use crate::generic::table;
use crate::generic::watch::{
    Broadcaster, EventObjectFormat, WatchEvent, WatchFilter, WatchStart, WatchStream, WatchTiming,
};

pub async fn get(call: Call<'_>) -> Result<Response, ApiError> {
    let format = call.format(Answering::Object)?;
    let name = call.name()?;
    let object = call.within(call.def.storage.get(&call.ctx, name)).await?;
    Ok(respond::object(call.def, &format, StatusCode::OK, &object))
}

/// `labelSelector` and `fieldSelector` of a list or watch.
struct Selectors {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Selectors {
    fn from_query(query: &Query) -> Result<Self, ApiError> {
        Ok(Self {
            labels: LabelSelector::parse(query.get("labelSelector").unwrap_or_default())?,
            fields: FieldSelector::parse(query.get("fieldSelector").unwrap_or_default())?,
        })
    }

    fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }

    /// Neither selector was given (or both are empty): every object is selected.
    fn select_everything(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }
}

/// Every object in scope that the selectors select. The list's resourceVersion is the resource's watch counter,
/// read before the storage call so that a watch from it misses nothing written after the list began.
pub async fn list(call: Call<'_>) -> Result<Response, ApiError> {
    if call.query.get("sendInitialEvents").is_some() {
        return Err(list_options_invalid(
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
        ));
    }
    let selectors = Selectors::from_query(call.query)?;
    let format = call.format(Answering::List)?;
    let resource_version = call
        .broadcaster()
        .map(|b| b.resource_version())
        .unwrap_or_default();
    let items = call.within(call.def.storage.list_shared(&call.ctx)).await?;
    // Objects the storage keeps for its next list are worth keeping encoded too; a fresh list is encoded once.
    let kept_by_storage = Arc::strong_count(&items) > 1;
    // A feed that starts for a watch from this list's resourceVersion begins from what the client saw. The snapshot
    // shares the answer's objects rather than copying them; the one it replaces is freed after the answer is built.
    let mut forgotten = Vec::new();
    if let (Some(_), Some(broadcaster), Ok(counter)) = (
        &call.def.watch_feed,
        call.broadcaster(),
        resource_version.parse::<u64>(),
    ) {
        forgotten = broadcaster.remember_list(call.ctx.namespace.as_deref(), counter, items.clone());
    }
    let list_meta = json!({"resourceVersion": resource_version});
    let kept = kept_by_storage && selectors.select_everything();
    let response = match representation(&format).filter(|_| kept) {
        Some(representation) => {
            let text = call.shared.encoded_lists.encode(
                call.def,
                &call.group_version(),
                representation,
                &items,
                &list_meta,
                table::unix_now(),
            );
            respond::encoded_list(&format, text)
        }
        None => {
            let selected: Cow<'_, [Value]> = if selectors.select_everything() {
                Cow::Borrowed(items.as_slice())
            } else {
                Cow::Owned(items.iter().filter(|o| selectors.matches(o)).cloned().collect())
            };
            respond::list(call.def, &call.group_version(), &format, &selected, list_meta)
        }
    };
    free_later(forgotten);
    Ok(response)
}

/// The representation of `format` that [`EncodedLists`](crate::generic::encoded_lists::EncodedLists) keeps, if any.
fn representation(format: &ResponseFormat) -> Option<Representation> {
    match format {
        ResponseFormat::Json => Some(Representation::Json),
        ResponseFormat::Table { include_object } => Some(Representation::Table(*include_object)),
        ResponseFormat::PartialObjectMetadataList => Some(Representation::PartialObjectMetadataList),
        ResponseFormat::Yaml | ResponseFormat::PartialObjectMetadata => None,
    }
}

/// Frees `lists` on a blocking thread, off the path of the answer: freeing a thousand JSON trees costs about as
/// much as building them.
fn free_later(lists: Vec<Arc<Vec<Value>>>) {
    let freed = freed_by_dropping(lists);
    if !freed.is_empty() {
        drop(tokio::task::spawn_blocking(move || drop(freed)));
    }
}

/// The lists of `lists` that dropping would free. The others are still held elsewhere (an unchanged list is the
/// answer just given and the storage's memo too): dropping them here only lowers a count, which costs less than
/// waking a blocking thread on every list of unchanged objects.
fn freed_by_dropping(lists: Vec<Arc<Vec<Value>>>) -> Vec<Arc<Vec<Value>>> {
    lists
        .into_iter()
        .filter(|list| Arc::strong_count(list) == 1)
        .collect()
}

/// A stream of the changes after the requested resourceVersion, for `timeoutSeconds` (or a randomised default):
/// the writes made through this server and, for a resource with a feed, the changes the feed finds.
pub async fn watch(call: Call<'_>) -> Result<Response, ApiError> {
    check_watch_options(call.query)?;
    let selectors = Selectors::from_query(call.query)?;
    let format = call.format(Answering::Watch)?;
    let broadcaster = call.broadcaster().ok_or_else(request_info::not_found)?.clone();
    let (event_format, content_type) = event_format(&format);
    let timing = watch_timing(&call)?;
    let requested = call.query.get("resourceVersion").unwrap_or_default();
    let since = broadcaster.counter_of(requested);
    let lease = match &call.def.watch_feed {
        Some(feed) => {
            let request = FeedRequest {
                namespace: call.info.namespace.clone(),
                since,
                broadcaster: broadcaster.clone(),
            };
            Some(call.within(feed.join(request)).await?)
        }
        None => None,
    };
    let (receiver, start) = watch_start(&broadcaster, requested, since, lease.as_ref());
    let stream = WatchStream {
        receiver,
        start,
        lease,
        filter: WatchFilter {
            namespace: call.info.namespace.clone(),
            name: call.info.name.clone(),
            fields: selectors.fields,
            labels: selectors.labels,
        },
        format: event_format,
        def: call.def.clone(),
        group_version: call.group_version(),
        broadcaster,
        timing,
        stopping: call.stopping.clone(),
    };
    Ok(streaming(content_type, Body::from_stream(stream.into_lines())))
}

/// Where a watch from `requested` (read as the counter `since`) starts. With a feed, only a resourceVersion whose
/// later changes are all known is served, else the watch gets 410 Expired and the client relists. Without one
/// (the watch only sees writes through this server), a resourceVersion this server cannot place starts the watch
/// from now.
fn watch_start(
    broadcaster: &Broadcaster,
    requested: &str,
    since: Option<u64>,
    lease: Option<&FeedLease>,
) -> (broadcast::Receiver<Arc<WatchEvent>>, WatchStart) {
    let covered_since = lease.map(FeedLease::covered_since);
    let replayable = since.filter(|s| covered_since.is_none_or(|covered| *s >= covered));
    if let Some((receiver, backlog)) = replayable.and_then(|s| broadcaster.subscribe_after(s)) {
        return (receiver, WatchStart::Replay(backlog));
    }
    let start = if lease.is_some() {
        WatchStart::Expired(format!(
            "too old resource version: {requested} ({}): the changes after it are not known here; list again to continue",
            broadcaster.current()
        ))
    } else {
        WatchStart::Replay(Vec::new())
    };
    (broadcaster.subscribe(), start)
}

fn event_format(format: &ResponseFormat) -> (EventObjectFormat, &'static str) {
    match format {
        ResponseFormat::Json | ResponseFormat::Yaml => {
            (EventObjectFormat::Object, "application/json;stream=watch")
        }
        ResponseFormat::Table { include_object } => (
            EventObjectFormat::Table(*include_object),
            "application/json;as=Table;v=v1;g=meta.k8s.io;stream=watch",
        ),
        ResponseFormat::PartialObjectMetadata | ResponseFormat::PartialObjectMetadataList => (
            EventObjectFormat::PartialObjectMetadata,
            "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io;stream=watch",
        ),
    }
}

/// kube-apiserver's validation of watch options, then this server's limits: no initial events, and a watch must
/// start from a list's resourceVersion.
fn check_watch_options(query: &Query) -> Result<(), ApiError> {
    let send_initial_events = query.get("sendInitialEvents").is_some();
    let version_match = query.get("resourceVersionMatch").filter(|m| !m.is_empty());
    if send_initial_events && version_match != Some("NotOlderThan") {
        return Err(list_options_invalid(
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if version_match.is_some() && !send_initial_events {
        return Err(list_options_invalid(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    if version_match.is_some() {
        return Err(ApiError::bad_request(
            "sendInitialEvents and resourceVersionMatch are not supported: this server has no watch cache; list, then watch from the list's resourceVersion",
        ));
    }
    if matches!(query.get("resourceVersion"), None | Some("" | "0")) {
        return Err(ApiError::bad_request(
            "watch needs the resourceVersion of a list: this server has no watch cache, so a watch with resourceVersion omitted or \"0\" cannot be served; list first and pass the list's resourceVersion",
        ));
    }
    Ok(())
}

/// 422 as kube-apiserver words invalid list options.
fn list_options_invalid(detail: &str) -> ApiError {
    ApiError::invalid(format!("ListOptions.meta.k8s.io \"\" is invalid: {detail}"))
}

fn watch_timing(call: &Call<'_>) -> Result<WatchTiming, ApiError> {
    let settings = &call.shared.server.settings;
    let duration = watch_duration(call.query.get("timeoutSeconds"), settings.min_watch_timeout)?;
    let bookmarks = call
        .query
        .flag("allowWatchBookmarks")?
        .then_some(settings.bookmark_interval);
    Ok(WatchTiming { duration, bookmarks })
}

/// How long a watch runs: `timeoutSeconds`, where missing or 0 means a randomised default (as kube-apiserver reads
/// it) and anything longer than twice `min` is capped, so no deadline can overflow.
fn watch_duration(raw: Option<&str>, min: Duration) -> Result<Duration, ApiError> {
    let seconds = match raw.filter(|t| !t.is_empty()) {
        None => 0,
        Some(raw) => raw.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "invalid timeoutSeconds {raw:?}: expected a whole number of seconds"
            ))
        })?,
    };
    Ok(match seconds {
        0 => randomised(min),
        seconds => Duration::from_secs(seconds).min(min.saturating_mul(2)),
    })
}

/// Between `min` and twice `min`, so that watches started together do not all end together (as kube-apiserver).
fn randomised(min: Duration) -> Duration {
    let fraction = f64::from(uuid::Uuid::new_v4().as_u128() as u16) / f64::from(u16::MAX);
    min + min.mul_f64(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_durations_default_on_zero_and_are_capped() {
        let min = Duration::from_secs(1800);
        assert_eq!(watch_duration(Some("3"), min).unwrap(), Duration::from_secs(3));
        for raw in [None, Some(""), Some("0")] {
            let d = watch_duration(raw, min).unwrap();
            assert!(d >= min && d <= min * 2, "{raw:?}: {d:?}");
        }
        assert_eq!(
            watch_duration(Some("18446744073709551615"), min).unwrap(),
            min * 2
        );
        assert_eq!(watch_duration(Some("-1"), min).unwrap_err().code, 400);
        assert_eq!(watch_duration(Some("ten"), min).unwrap_err().code, 400);
    }

    #[test]
    fn randomised_watch_timeouts_stay_within_twice_the_minimum() {
        let min = Duration::from_secs(1800);
        for _ in 0..100 {
            let d = randomised(min);
            assert!(d >= min && d <= min * 2, "{d:?}");
        }
    }

    fn start_of(
        since: Option<u64>,
        lease: Option<&FeedLease>,
        broadcaster: &Broadcaster,
    ) -> Result<usize, String> {
        match watch_start(broadcaster, "rv", since, lease).1 {
            WatchStart::Replay(events) => Ok(events.len()),
            WatchStart::Expired(message) => Err(message),
        }
    }

    #[test]
    fn a_watch_replays_what_is_known_and_expires_what_is_not() {
        let broadcaster = Broadcaster::new(0);
        let listed = broadcaster.current();
        broadcaster.publish(
            crate::generic::EventType::Added,
            json!({"metadata": {"name": "a"}}),
        );
        let covered = |since| FeedLease::new(since, Box::new(()));
        // Without a feed: replayed when known, else from now.
        assert_eq!(start_of(Some(listed), None, &broadcaster), Ok(1));
        assert_eq!(start_of(None, None, &broadcaster), Ok(0));
        // With a feed: replayed when the feed covers it, else 410.
        assert_eq!(
            start_of(Some(listed), Some(&covered(listed)), &broadcaster),
            Ok(1)
        );
        let expired = start_of(Some(listed), Some(&covered(listed + 1)), &broadcaster).unwrap_err();
        assert!(expired.starts_with("too old resource version: rv ("), "{expired}");
        assert!(start_of(None, Some(&covered(0)), &broadcaster).is_err());
    }

    #[test]
    fn watch_options_follow_the_contract() {
        let check = |q: &str| check_watch_options(&Query::parse(Some(q))).map_err(|e| e.code);
        assert_eq!(check("resourceVersion=17"), Ok(()));
        assert_eq!(check(""), Err(400));
        assert_eq!(check("resourceVersion=0"), Err(400));
        assert_eq!(check("resourceVersion=17&sendInitialEvents=true"), Err(422));
        assert_eq!(
            check("resourceVersion=17&resourceVersionMatch=NotOlderThan"),
            Err(422)
        );
        assert_eq!(
            check("resourceVersion=17&resourceVersionMatch=NotOlderThan&sendInitialEvents=true"),
            Err(400)
        );
    }

    #[test]
    fn only_lists_held_nowhere_else_are_freed_off_the_answers_path() {
        let shared = Arc::new(vec![serde_json::json!({"kind": "Kept"})]);
        let answer = shared.clone();
        let sole = Arc::new(vec![serde_json::json!({"kind": "Replaced"})]);
        let freed = freed_by_dropping(vec![shared, sole]);
        assert_eq!(freed.len(), 1);
        assert_eq!(freed[0][0]["kind"], "Replaced");
        assert_eq!(
            Arc::strong_count(&answer),
            1,
            "the shared list's extra reference was dropped"
        );
    }
}
