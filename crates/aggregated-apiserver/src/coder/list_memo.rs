//! The last converted list of each namespace, answered again while Coder's answer for it has not changed.
//!
//! A list still asks Coder every time; what it saves is the work after that. Decoding and converting a few hundred
//! templates, and freeing the objects of the list before, costs the server more than Coder takes to answer. The
//! conversion is a pure function of the namespace and Coder's answer, so an answer equal to the last one (the
//! storages compare the bytes Coder sent, before decoding them) gets the objects built for the last one, shared
//! rather than copied: the watch snapshot of a list and the encoded answers kept for it hold the same objects.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::generic::ApiError;

/// How long a namespace's list is kept without being asked for: a namespace no longer served is forgotten after it.
pub const MEMO_MAX_IDLE: Duration = Duration::from_secs(600);

/// Coder's answer and the objects converted from it.
pub struct Converted<S> {
    /// What Coder answered, in the order the storage asked.
    pub source: Vec<S>,
    /// The objects converted from it.
    pub objects: Arc<Vec<Value>>,
}

/// Each namespace's last list, with when it was last asked for.
type Entries<S> = HashMap<String, (Instant, Arc<Converted<S>>)>;

/// One remembered list per namespace (see the module documentation).
pub struct ListMemo<S> {
    entries: Mutex<Entries<S>>,
    max_idle: Duration,
}

impl<S> Default for ListMemo<S> {
    fn default() -> Self {
        Self::with_max_idle(MEMO_MAX_IDLE)
    }
}

impl<S> ListMemo<S> {
    /// A memo that forgets a namespace's list after `max_idle` without a list of it.
    pub fn with_max_idle(max_idle: Duration) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            max_idle,
        }
    }
}

impl<S: PartialEq> ListMemo<S> {
    /// The objects of `source` in `namespace`: those of the last list when `source` equals its answer, otherwise
    /// `convert(&source)`, which is then remembered (a failed conversion is not).
    pub fn objects(
        &self,
        namespace: &str,
        source: Vec<S>,
        convert: impl FnOnce(&[S]) -> Result<Vec<Value>, ApiError>,
    ) -> Result<Arc<Vec<Value>>, ApiError> {
        // Compared outside the lock: lists of other namespaces, and concurrent lists of this one, do not wait.
        if let Some(last) = self.last(namespace)
            && last.source == source
        {
            return Ok(last.objects.clone());
        }
        let objects = Arc::new(convert(&source)?);
        self.remember(namespace, source, objects.clone());
        Ok(objects)
    }

    /// Remembers `objects` as the conversion of `source` in `namespace`, replacing its last list. For a storage
    /// that compares Coder's answers with [`ListMemo::last`] as they arrive rather than all at once.
    pub fn remember(&self, namespace: &str, source: Vec<S>, objects: Arc<Vec<Value>>) {
        let converted = Arc::new(Converted { source, objects });
        self.entries()
            .insert(namespace.to_owned(), (Instant::now(), converted));
    }

    /// The last list of `namespace`, marked as used; lists idle for longer than the bound are dropped.
    pub fn last(&self, namespace: &str) -> Option<Arc<Converted<S>>> {
        let now = Instant::now();
        let max_idle = self.max_idle;
        let mut entries = self.entries();
        entries.retain(|_, (used, _)| now.duration_since(*used) <= max_idle);
        let (used, converted) = entries.get_mut(namespace)?;
        *used = now;
        Some(converted.clone())
    }

    /// How many namespaces have a list remembered.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether no namespace has a list remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn entries(&self) -> MutexGuard<'_, Entries<S>> {
        // The map is whole after any panic (each change is one insert or retain), so a poisoned lock is usable.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::cell::Cell;

    fn converter(calls: &Cell<usize>) -> impl Fn(&[u32]) -> Result<Vec<Value>, ApiError> + '_ {
        move |source| {
            calls.set(calls.get() + 1);
            Ok(source.iter().map(|n| json!({"n": n})).collect())
        }
    }

    #[test]
    fn an_unchanged_answer_gets_the_same_objects_without_a_conversion() {
        let memo = ListMemo::default();
        let calls = Cell::new(0);
        let first = memo.objects("ns", vec![1, 2], converter(&calls)).expect("first");
        let second = memo.objects("ns", vec![1, 2], converter(&calls)).expect("second");
        assert_eq!(calls.get(), 1);
        assert!(
            Arc::ptr_eq(&first, &second),
            "the second list shares the first list's objects"
        );
        assert_eq!(*second, vec![json!({"n": 1}), json!({"n": 2})]);
    }

    #[test]
    fn a_changed_answer_is_converted_and_replaces_the_last() {
        let memo = ListMemo::default();
        let calls = Cell::new(0);
        memo.objects("ns", vec![1, 2], converter(&calls)).expect("first");
        let changed = memo
            .objects("ns", vec![1, 3], converter(&calls))
            .expect("changed");
        assert_eq!(*changed, vec![json!({"n": 1}), json!({"n": 3})]);
        let again = memo.objects("ns", vec![1, 3], converter(&calls)).expect("again");
        assert_eq!(calls.get(), 2);
        assert!(Arc::ptr_eq(&changed, &again));
        let reverted = memo
            .objects("ns", vec![1, 2], converter(&calls))
            .expect("reverted");
        assert_eq!(calls.get(), 3, "only the last answer is remembered");
        assert_eq!(*reverted, vec![json!({"n": 1}), json!({"n": 2})]);
    }

    #[test]
    fn namespaces_are_remembered_apart() {
        let memo = ListMemo::default();
        let calls = Cell::new(0);
        let a = memo.objects("a", vec![1], converter(&calls)).expect("a");
        let b = memo.objects("b", vec![1], converter(&calls)).expect("b");
        assert_eq!(
            calls.get(),
            2,
            "the same answer in another namespace is converted for that namespace"
        );
        assert!(!Arc::ptr_eq(&a, &b));
        memo.objects("a", vec![1], converter(&calls)).expect("a again");
        assert_eq!((calls.get(), memo.len()), (2, 2));
    }

    #[test]
    fn a_failed_conversion_is_not_remembered() {
        let memo = ListMemo::<u32>::default();
        let failed = memo.objects("ns", vec![1], |_| Err(ApiError::internal("bad answer")));
        assert_eq!(failed.expect_err("the error is passed on").code, 500);
        assert!(memo.is_empty());
        let calls = Cell::new(0);
        memo.objects("ns", vec![1], converter(&calls)).expect("converted");
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn a_namespace_idle_for_longer_than_the_bound_is_forgotten() {
        let memo = ListMemo::with_max_idle(Duration::from_millis(50));
        let calls = Cell::new(0);
        memo.objects("idle", vec![1], converter(&calls)).expect("idle");
        std::thread::sleep(Duration::from_millis(100));
        memo.objects("busy", vec![1], converter(&calls)).expect("busy");
        assert_eq!(memo.len(), 1, "asking for any namespace drops the idle ones");
        memo.objects("idle", vec![1], converter(&calls))
            .expect("idle again");
        assert_eq!(calls.get(), 3);
    }
}
