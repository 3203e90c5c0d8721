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
    /// The resourceVersion the write stored: the watch event that carries it is the write's own echo.
    stored: Option<String>,
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
        self.last.read(uid, |last| match last {
            Some(last) if last.replaced == shown => serde_json::from_str(&last.written).ok(),
            _ => current.cloned(),
        })
    }

    /// Forgets the write of `uid` once the watch shows it (an object at `resource_version`, the one the write
    /// stored): the memo only serves while the cache lags, so an object at rest keeps no copy of its status here.
    /// Only the write's own echo ends it: a lagging event of an older version (a pass can write twice) must not, or
    /// the status in between would be believed.
    pub fn caught_up(&self, uid: &str, resource_version: Option<&str>) {
        let echoed = self.last.read(uid, |last| {
            last.is_some_and(|last| last.stored.is_some() && last.stored.as_deref() == resource_version)
        });
        if echoed {
            self.last.forget(uid);
        }
    }

    /// Whether `status` is what was last written while the cache still shows what that write replaced.
    pub fn already_written(&self, uid: &str, shown: &str, status: &str) -> bool {
        self.last.read(uid, |last| {
            last.is_some_and(|last| last.replaced == hash_of(shown) && last.written == status)
        })
    }

    /// Records that `written` replaced `replaced` (both compact JSON) and was stored at `stored` (the
    /// resourceVersion of the write's answer).
    pub fn record(&self, uid: &str, replaced: &str, written: String, stored: Option<String>) {
        let replaced = hash_of(replaced);
        self.last.update(uid, |last| {
            *last = Written {
                replaced,
                written,
                stored,
            }
        });
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
        memo.record("uid", &json(&old), json(&"ready"), Some("5".to_owned()));
        assert_eq!(memo.effective("uid", old.as_ref()).as_deref(), Some("ready"));
        assert!(memo.already_written("uid", &json(&old), &json(&"ready")));
        // Once the cache shows something else (the write, or another writer's), the cache is believed.
        let newer = Some("failed".to_owned());
        assert_eq!(memo.effective("uid", newer.as_ref()).as_deref(), Some("failed"));
        assert!(!memo.already_written("uid", &json(&newer), &json(&"ready")));
        memo.forget("uid");
        assert!(memo.is_empty());
    }

    #[test]
    fn the_write_is_forgotten_once_the_watch_shows_its_version() {
        let memo = StatusMemo::default();
        let old = Some("pending".to_owned());
        let ready = Some("ready".to_owned());
        memo.record("uid", &json(&old), json(&ready), Some("5".to_owned()));
        // An event of an earlier version (a label edit before the write arrived) keeps the memo.
        memo.caught_up("uid", Some("4"));
        assert_eq!(memo.len(), 1);
        assert_eq!(memo.effective("uid", old.as_ref()), ready);
        // The echo of the write itself ends it; another object's is not concerned.
        memo.record("other", &json(&old), json(&ready), Some("5".to_owned()));
        memo.caught_up("uid", Some("5"));
        assert_eq!(memo.len(), 1);
        assert!(memo.already_written("other", &json(&old), &json(&ready)));
        // A write whose answer carried no version is kept until the object goes.
        memo.record("unversioned", &json(&old), json(&ready), None);
        memo.caught_up("unversioned", None);
        assert_eq!(memo.len(), 2);
    }

    #[test]
    fn a_lagging_event_of_an_older_version_keeps_the_second_write_of_a_pass() {
        let memo = StatusMemo::default();
        let (first, second, third) = (
            Some("s0".to_owned()),
            Some("s1".to_owned()),
            Some("s2".to_owned()),
        );
        // One pass writes s1 (over s0, stored at 6) and then s2 (over s1, stored at 7); the watch still delivers a
        // change of version 5, which shows s0.
        memo.record("uid", &json(&first), json(&second), Some("6".to_owned()));
        memo.record("uid", &json(&second), json(&third), Some("7".to_owned()));
        memo.caught_up("uid", Some("5"));
        // When the cache then shows s1, s2 is what the object has.
        assert_eq!(memo.effective("uid", second.as_ref()), third);
        memo.caught_up("uid", Some("6"));
        assert_eq!(memo.len(), 1);
        memo.caught_up("uid", Some("7"));
        assert!(memo.is_empty());
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
