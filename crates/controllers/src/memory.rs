//! What the operator keeps in memory per object between passes, dropped when the object goes: the last status
//! written (so a watch cache that has not caught up with a write does not cause a second write and a second Event),
//! and each kind's own typed memory (for example the token a control plane verified at a Secret version).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A kind's memory of its objects, by UID: `M` is the kind's own type (its `Memory`).
pub struct PerObject<M> {
    by_uid: Mutex<HashMap<String, M>>,
}

impl<M> Default for PerObject<M> {
    fn default() -> Self {
        Self {
            by_uid: Mutex::default(),
        }
    }
}

impl<M: Clone + Default> PerObject<M> {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, M>> {
        self.by_uid.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What is remembered of object `uid` (the default when nothing is).
    pub fn get(&self, uid: &str) -> M {
        self.lock().get(uid).cloned().unwrap_or_default()
    }

    /// What `read` makes of what is remembered of object `uid` (`None`: nothing is), without a copy.
    pub fn read<R>(&self, uid: &str, read: impl FnOnce(Option<&M>) -> R) -> R {
        read(self.lock().get(uid))
    }

    /// Changes what is remembered of object `uid`.
    pub fn update(&self, uid: &str, change: impl FnOnce(&mut M)) {
        change(self.lock().entry(uid.to_owned()).or_default());
    }

    /// Forgets object `uid` (it is gone).
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// How many objects are remembered (for tests of the clean-up).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A kind's memory as the context counts it: how many objects it remembers.
pub trait Tracked: Send + Sync {
    fn remembered(&self) -> usize;
}

impl<M: Clone + Default + Send> Tracked for PerObject<M> {
    fn remembered(&self) -> usize {
        self.len()
    }
}

/// The last status written per object UID (as compact JSON), with a hash of the status it replaced.
#[derive(Default)]
pub struct StatusMemo {
    last: PerObject<Written>,
}

#[derive(Clone, Default)]
struct Written {
    replaced: u64,
    written: String,
}

/// Compact JSON of a status (`null` for none), as the memo compares it.
pub fn json<S: Serialize>(status: &S) -> String {
    serde_json::to_string(status).unwrap_or_default()
}

fn hash_of(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

impl StatusMemo {
    /// The status the object really has: the one last written when the cache still shows the status that write
    /// replaced, else `current`.
    pub fn effective<S: Serialize + DeserializeOwned + Clone>(
        &self,
        uid: &str,
        current: Option<&S>,
    ) -> Option<S> {
        let shown = hash_of(&json(&current));
        let pending = self.last.read(uid, |last| match last {
            Some(last) if last.replaced == shown => Some(serde_json::from_str(&last.written).ok()),
            _ => None,
        });
        match pending {
            Some(written) => written,
            None => {
                self.caught_up(uid, current);
                current.cloned()
            }
        }
    }

    /// Forgets the write of `uid` once the cache shows another status than the one it replaced: the cache has
    /// caught up (or someone wrote after us), and the memo only serves while it lags. Called for every change the
    /// watch shows, so an object at rest keeps no copy of its status here.
    pub fn caught_up<S: Serialize>(&self, uid: &str, shown: Option<&S>) {
        let shown = hash_of(&json(&shown));
        if self
            .last
            .read(uid, |last| last.is_some_and(|last| last.replaced != shown))
        {
            self.last.forget(uid);
        }
    }

    /// Whether `status` is what was last written while the cache still shows what that write replaced.
    pub fn already_written(&self, uid: &str, shown: &str, status: &str) -> bool {
        self.last.read(uid, |last| {
            last.is_some_and(|last| last.replaced == hash_of(shown) && last.written == status)
        })
    }

    /// Records that `written` replaced `replaced` (both compact JSON).
    pub fn record(&self, uid: &str, replaced: &str, written: String) {
        let replaced = hash_of(replaced);
        self.last
            .update(uid, |last| *last = Written { replaced, written });
    }

    pub fn forget(&self, uid: &str) {
        self.last.forget(uid);
    }

    pub fn len(&self) -> usize {
        self.last.len()
    }

    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
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
        assert!(
            memo.is_empty(),
            "a cache that moved on leaves nothing to remember"
        );
        memo.record("uid", &json(&old), json(&"ready"));
        memo.forget("uid");
        assert!(memo.is_empty());
    }

    #[test]
    fn the_write_is_forgotten_once_the_watch_shows_another_status() {
        let memo = StatusMemo::default();
        let old = Some("pending".to_owned());
        memo.record("uid", &json(&old), json(&"ready"));
        // A change that still shows the replaced status (a label edit before the write arrived) keeps the memo.
        memo.caught_up("uid", old.as_ref());
        assert_eq!(memo.len(), 1);
        assert_eq!(memo.effective("uid", old.as_ref()).as_deref(), Some("ready"));
        // The echo of the write itself ends it; another object's is not concerned.
        memo.record("other", &json(&old), json(&"ready"));
        memo.caught_up("uid", Some(&"ready".to_owned()));
        assert_eq!(memo.len(), 1);
        assert_eq!(
            memo.effective("uid", Some(&"ready".to_owned())).as_deref(),
            Some("ready")
        );
        assert!(memo.already_written("other", &json(&old), &json(&"ready")));
    }

    #[test]
    fn a_kinds_memory_is_kept_per_object_until_forgotten() {
        let memory = PerObject::<Option<String>>::default();
        assert_eq!(memory.get("a"), None);
        memory.update("a", |m| *m = Some("x".to_owned()));
        memory.update("b", |m| *m = Some("y".to_owned()));
        assert_eq!(memory.get("a").as_deref(), Some("x"));
        memory.forget("a");
        assert_eq!(memory.get("a"), None);
        assert_eq!(memory.len(), 1);
    }
}
