//! The one status writer: server-side apply of `status` only when it differs from what the object shows, Events for
//! the transitions it records, and a memo of the last write per object so a watch cache that has not caught up with
//! that write does not cause a second write (and a second Event).

use std::collections::HashMap;
use std::sync::Mutex;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::apply::FIELD_MANAGER;
use super::apply::Namespaced;
use super::context::Context;

/// An Event to publish with a status write: type, reason, note.
pub type Transition = (EventType, String, String);

/// The last status written per object UID (as compact JSON), with a hash of the status it replaced.
#[derive(Default)]
pub struct StatusMemo {
    last: Mutex<HashMap<String, Written>>,
}

struct Written {
    replaced: u64,
    written: String,
}

fn json<S: Serialize>(status: &S) -> String {
    serde_json::to_string(status).unwrap_or_default()
}

fn hash_of(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

impl StatusMemo {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Written>> {
        self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The status the object really has: the one last written when the cache still shows the status that write
    /// replaced, else `current`.
    pub fn effective<S: Serialize + DeserializeOwned + Clone>(
        &self,
        uid: &str,
        current: Option<&S>,
    ) -> Option<S> {
        let shown = hash_of(&json(&current));
        match self.lock().get(uid) {
            Some(last) if last.replaced == shown => serde_json::from_str(&last.written).ok(),
            _ => current.cloned(),
        }
    }

    /// Whether `status` is what was last written while the cache still shows what that write replaced.
    fn already_written(&self, uid: &str, shown: &str, status: &str) -> bool {
        self.lock()
            .get(uid)
            .is_some_and(|last| last.replaced == hash_of(shown) && last.written == status)
    }

    fn record(&self, uid: &str, replaced: &str, written: String) {
        let replaced = hash_of(replaced);
        self.lock().insert(uid.to_owned(), Written { replaced, written });
    }

    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Writes `status` for `object` (whose cached status is `current`) when it changed, then publishes `transitions`.
/// Returns whether a write was sent.
pub async fn write_status<K, S>(
    ctx: &Context,
    object: &K,
    current: Option<&S>,
    status: &S,
    transitions: Vec<Transition>,
) -> Result<bool, kube::Error>
where
    K: Namespaced,
    S: Serialize + PartialEq,
{
    if current == Some(status) {
        return Ok(false);
    }
    let uid = object.meta().uid.clone().unwrap_or_default();
    let shown = json(&current);
    let wanted = json(status);
    if ctx.statuses.already_written(&uid, &shown, &wanted) {
        return Ok(false);
    }
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &object.namespace().unwrap_or_default());
    api.patch_status(
        &object.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    ctx.statuses.record(&uid, &shown, wanted);
    publish(ctx, object, transitions).await;
    Ok(true)
}

/// Records `outcome` in `status` (phase, conditions, observed generation), writes it when it changed (with an Event
/// when the phase or reason changed) and says when to look again: after a 429 the object's rate-limit backoff,
/// else the outcome's requeue, the retry interval while pending, else only a change. `before` is the status the
/// object showed when the pass began.
pub async fn write_outcome<K, S>(
    ctx: &Context,
    object: &K,
    before: Option<&S>,
    mut status: S,
    outcome: &super::sync_status::Outcome,
) -> Result<kube::runtime::controller::Action, kube::Error>
where
    K: Namespaced,
    S: Serialize + DeserializeOwned + Clone + PartialEq + super::sync_status::SyncedStatus,
{
    use kube::runtime::controller::Action;
    let events = outcome.transition(before.and_then(|s| s.shown()));
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    status.record(outcome, object.meta().generation, &now);
    // A write earlier in the pass (a create marker) is what the object shows now.
    let uid = object.meta().uid.clone().unwrap_or_default();
    let shown = ctx.statuses.effective(&uid, before);
    write_status(ctx, object, shown.as_ref(), &status, events).await?;
    if let Some(retry_after) = outcome.rate_limited {
        return Ok(Action::requeue(ctx.rate_limited(&uid, retry_after)));
    }
    if outcome.phase != super::sync_status::SyncPhase::Pending {
        ctx.rate_limit_passed(&uid);
    }
    Ok(match (outcome.requeue, outcome.phase) {
        (Some(after), _) => Action::requeue(after),
        (None, super::sync_status::SyncPhase::Pending) => Action::requeue(ctx.settings.retry_interval),
        (None, _) => Action::await_change(),
    })
}

/// A finalizer that has to wait for Coder: the object shows `outcome` (reason `Deleting`), and the next attempt
/// comes after the retry interval, or after a 429 after the object's rate-limit backoff.
pub async fn deletion_waits<K, S>(
    ctx: &Context,
    object: &K,
    before: Option<&S>,
    outcome: super::sync_status::Outcome,
) -> Result<super::runner::Cleanup, kube::Error>
where
    K: Namespaced,
    S: Serialize + DeserializeOwned + Clone + PartialEq + Default + super::sync_status::SyncedStatus,
{
    let uid = object.meta().uid.clone().unwrap_or_default();
    let wait = match outcome.rate_limited {
        Some(retry_after) => ctx.rate_limited(&uid, retry_after),
        None => ctx.settings.retry_interval,
    };
    let shown = super::sync_status::Outcome {
        rate_limited: None,
        ..outcome
    };
    let status = before.cloned().unwrap_or_default();
    write_outcome(ctx, object, before, status, &shown).await?;
    Ok(super::runner::Cleanup::WaitFor(wait))
}

/// The finalizer's wait while Coder's rate limit for object `uid` lasts (after a 429 in a pass or an earlier
/// attempt): nothing is sent to Coder before it ends.
pub fn cleanup_waiting_out_rate_limit(ctx: &Context, uid: &str) -> Option<super::runner::Cleanup> {
    ctx.rate_limit_remaining(uid).map(super::runner::Cleanup::WaitFor)
}

/// While Coder's rate limit for object `uid` lasts (after a 429), the pass reads and writes nothing and looks
/// again when it ends, also when a watch event woke it earlier.
pub fn waiting_out_rate_limit(ctx: &Context, uid: &str) -> Option<kube::runtime::controller::Action> {
    let left = ctx.rate_limit_remaining(uid)?;
    tracing::debug!(?left, "waiting out Coder's rate limit");
    Some(kube::runtime::controller::Action::requeue(left))
}

async fn publish<K: Resource<DynamicType = ()>>(ctx: &Context, object: &K, transitions: Vec<Transition>) {
    for (type_, reason, note) in transitions {
        let event = Event {
            type_,
            reason,
            note: Some(note),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(error) = ctx.recorder.publish(&event, &object.object_ref(&())).await {
            tracing::debug!(%error, "publishing an Event failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_cache_shows_the_last_written_status() {
        let memo = StatusMemo::default();
        let old = Some("pending".to_owned());
        memo.record("uid", &json(&old), json(&"ready"));
        assert_eq!(memo.effective("uid", old.as_ref()).as_deref(), Some("ready"));
        assert!(memo.already_written("uid", &json(&old), &json(&"ready")));
        // Once the cache shows something else (the write, or another writer's), the cache is believed.
        let newer = Some("failed".to_owned());
        assert_eq!(memo.effective("uid", newer.as_ref()).as_deref(), Some("failed"));
        assert!(!memo.already_written("uid", &json(&newer), &json(&"ready")));
        memo.forget("uid");
        assert!(memo.is_empty());
    }
}
