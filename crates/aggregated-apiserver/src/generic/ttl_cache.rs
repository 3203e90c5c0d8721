//! A small bounded cache whose entries expire after a fixed time, for the TokenReview and SubjectAccessReview
//! answers. Callers pass the current instant, so tests control time without sleeping.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries live for `ttl`; at most `capacity` entries are kept (expired ones are dropped first, then the oldest).
#[derive(Debug)]
pub(crate) struct TtlCache<K, V> {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    pub(crate) fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The value stored for `key` if it was stored less than `ttl` before `now`.
    pub(crate) fn get(&self, key: &K, now: Instant) -> Option<V> {
        let entries = self.lock();
        let (stored, value) = entries.get(key)?;
        (now.saturating_duration_since(*stored) < self.ttl).then(|| value.clone())
    }

    pub(crate) fn insert(&self, key: K, value: V, now: Instant) {
        let mut entries = self.lock();
        if !entries.contains_key(&key) && entries.len() >= self.capacity {
            let ttl = self.ttl;
            entries.retain(|_, (stored, _)| now.saturating_duration_since(*stored) < ttl);
            if entries.len() >= self.capacity
                && let Some(oldest) = entries
                    .iter()
                    .min_by_key(|(_, (stored, _))| *stored)
                    .map(|(k, _)| k.clone())
            {
                entries.remove(&oldest);
            }
        }
        entries.insert(key, (now, value));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, (Instant, V)>> {
        // A poisoned lock only means a panic elsewhere while holding a plain map; the map is still whole.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    #[test]
    fn an_entry_is_served_until_its_ttl_and_not_after() {
        let cache = TtlCache::new(TTL, 8);
        let start = Instant::now();
        cache.insert("a", 1, start);
        assert_eq!(cache.get(&"a", start), Some(1));
        assert_eq!(cache.get(&"a", start + Duration::from_millis(9_999)), Some(1));
        assert_eq!(cache.get(&"a", start + TTL), None);
        assert_eq!(cache.get(&"b", start), None);
    }

    #[test]
    fn reinserting_restarts_the_ttl() {
        let cache = TtlCache::new(TTL, 8);
        let start = Instant::now();
        cache.insert("a", 1, start);
        cache.insert("a", 2, start + Duration::from_secs(8));
        assert_eq!(cache.get(&"a", start + Duration::from_secs(12)), Some(2));
    }

    #[test]
    fn a_full_cache_drops_expired_entries_then_the_oldest() {
        let cache = TtlCache::new(TTL, 2);
        let start = Instant::now();
        cache.insert("old", 1, start);
        cache.insert("newer", 2, start + Duration::from_secs(5));
        // "old" has expired by now: it goes, "newer" stays.
        cache.insert("third", 3, start + Duration::from_secs(11));
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&"newer", start + Duration::from_secs(11)), Some(2));
        // Nothing has expired: the oldest ("newer") goes.
        cache.insert("fourth", 4, start + Duration::from_secs(12));
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&"newer", start + Duration::from_secs(12)), None);
        assert_eq!(cache.get(&"third", start + Duration::from_secs(12)), Some(3));
        assert_eq!(cache.get(&"fourth", start + Duration::from_secs(12)), Some(4));
    }
}
