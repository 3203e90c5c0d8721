//! The objects of one watch cache that name their owner by the owner-UID annotation (workspace Roles and
//! RoleBindings in other namespaces than their control plane, which an owner reference cannot reach), by that
//! owner's UID. A reconcile that looks for what its object left elsewhere reads one entry instead of filtering the
//! whole cache: with a thousand control planes, each pass scanned two thousand cached objects, and at rest that
//! scan was most of the operator's CPU.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::watcher;

use crate::labels::OWNER_UID_ANNOTATION;

/// Namespace and name of a cached object.
pub type Key = (String, String);

/// Owner UID → the keys of the objects that carry it in the owner-UID annotation, kept in step with the watch
/// events (a relist replaces the whole index at its end, as the cache's store is replaced).
#[derive(Debug, Default)]
pub struct OwnerIndex {
    current: Entries,
    relisting: Option<Entries>,
}

/// One entry per annotated object, in as few allocations as the lookups allow: with ten thousand control planes
/// the index holds twenty thousand objects, and a map of string pairs to a string cost over 500 bytes each.
#[derive(Debug, Default)]
struct Entries {
    /// (owner UID, object): an owner's objects are one range, in namespace and name order. A B-tree node holds
    /// eleven entries, so the set costs a few words per object.
    by_owner: BTreeSet<(Arc<str>, Packed)>,
    /// Each object's owner UID (the same allocation as in `by_owner`), to move or drop its entry.
    owner_of: HashMap<Packed, Arc<str>>,
}

/// An object's namespace and name in one shared allocation, `namespace/name` (neither part can hold a `/`),
/// ordered by namespace, then name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Packed(Arc<str>);

impl Packed {
    fn of(meta: &ObjectMeta) -> Self {
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        Self(format!("{namespace}/{name}").into())
    }

    /// The least key: every object sorts after it.
    fn first() -> Self {
        Self(Arc::from(""))
    }

    fn parts(&self) -> (&str, &str) {
        self.0.split_once('/').unwrap_or(("", &self.0))
    }

    fn key(&self) -> Key {
        let (namespace, name) = self.parts();
        (namespace.to_owned(), name.to_owned())
    }
}

impl Ord for Packed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl PartialOrd for Packed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

// `Packed` hashes and compares equal as its text does, so the map can be asked with a `&str`.
impl Borrow<str> for Packed {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl OwnerIndex {
    /// Follows one watch event; `claimed_by` reads the owner UID of an object.
    pub fn apply<K: Resource>(&mut self, event: &watcher::Event<K>, claimed_by: fn(&K) -> Option<&str>) {
        match event {
            watcher::Event::Apply(object) => self.current.set(object.meta(), claimed_by(object)),
            watcher::Event::Delete(object) => self.current.remove(&Packed::of(object.meta())),
            watcher::Event::Init => self.relisting = Some(Entries::default()),
            watcher::Event::InitApply(object) => {
                self.relisting
                    .get_or_insert_with(Entries::default)
                    .set(object.meta(), claimed_by(object));
            }
            watcher::Event::InitDone => self.current = self.relisting.take().unwrap_or_default(),
        }
    }

    /// The objects annotated with `owner_uid`, in namespace and name order.
    pub fn owned_by(&self, owner_uid: &str) -> Vec<Key> {
        let from = (Arc::from(owner_uid), Packed::first());
        self.current
            .by_owner
            .range((Bound::Included(from), Bound::Unbounded))
            .take_while(|(owner, _)| &**owner == owner_uid)
            .map(|(_, object)| object.key())
            .collect()
    }
}

impl Entries {
    fn set(&mut self, meta: &ObjectMeta, owner: Option<&str>) {
        let object = Packed::of(meta);
        if self
            .owner_of
            .get(&object)
            .is_some_and(|now| Some(&**now) == owner)
        {
            return;
        }
        self.remove(&object);
        if let Some(owner) = owner {
            let owner: Arc<str> = Arc::from(owner);
            self.by_owner.insert((owner.clone(), object.clone()));
            self.owner_of.insert(object, owner);
        }
    }

    fn remove(&mut self, object: &Packed) {
        if let Some((object, owner)) = self.owner_of.remove_entry(&*object.0) {
            self.by_owner.remove(&(owner, object));
        }
    }
}

/// The owner UID an object with its annotations cached names.
pub fn annotated<K: Resource>(object: &K) -> Option<&str> {
    object
        .meta()
        .annotations
        .as_ref()?
        .get(OWNER_UID_ANNOTATION)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::rbac::v1::Role;
    use kube::core::PartialObjectMeta;
    use watcher::Event;

    use crate::slim::Slim;

    use super::*;

    /// A Role as its watch cache holds it.
    fn role(namespace: &str, name: &str, owner: Option<&str>) -> Slim<Role> {
        let annotations = owner.map(|uid| [(OWNER_UID_ANNOTATION.to_owned(), uid.to_owned())].into());
        Slim::of_meta(PartialObjectMeta {
            metadata: ObjectMeta {
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                annotations,
                ..ObjectMeta::default()
            },
            ..PartialObjectMeta::default()
        })
    }

    fn keys(pairs: &[(&str, &str)]) -> Vec<Key> {
        pairs
            .iter()
            .map(|(ns, n)| ((*ns).to_owned(), (*n).to_owned()))
            .collect()
    }

    #[test]
    fn finds_the_annotated_objects_of_an_owner_and_nothing_else() {
        let mut index = OwnerIndex::default();
        index.apply(
            &Event::Apply(role("ws-b", "cp-workspace", Some("uid-1"))),
            Slim::claimed_by,
        );
        index.apply(
            &Event::Apply(role("ws-a", "cp-workspace", Some("uid-1"))),
            Slim::claimed_by,
        );
        index.apply(
            &Event::Apply(role("ws-a", "other", Some("uid-2"))),
            Slim::claimed_by,
        );
        index.apply(&Event::Apply(role("coder", "cp", None)), Slim::claimed_by);
        assert_eq!(
            index.owned_by("uid-1"),
            keys(&[("ws-a", "cp-workspace"), ("ws-b", "cp-workspace")])
        );
        assert_eq!(index.owned_by("uid-2"), keys(&[("ws-a", "other")]));
        assert_eq!(index.owned_by("uid-3"), Vec::<Key>::new());
    }

    #[test]
    fn a_changed_or_removed_annotation_and_a_deletion_move_the_entry() {
        let mut index = OwnerIndex::default();
        index.apply(&Event::Apply(role("ws", "a", Some("uid-1"))), Slim::claimed_by);
        index.apply(&Event::Apply(role("ws", "b", Some("uid-1"))), Slim::claimed_by);
        index.apply(&Event::Apply(role("ws", "a", Some("uid-2"))), Slim::claimed_by);
        assert_eq!(index.owned_by("uid-1"), keys(&[("ws", "b")]));
        assert_eq!(index.owned_by("uid-2"), keys(&[("ws", "a")]));
        index.apply(&Event::Apply(role("ws", "a", None)), Slim::claimed_by);
        assert_eq!(index.owned_by("uid-2"), Vec::<Key>::new());
        index.apply(&Event::Delete(role("ws", "b", Some("uid-1"))), Slim::claimed_by);
        assert_eq!(index.owned_by("uid-1"), Vec::<Key>::new());
        assert!(index.current.owner_of.is_empty() && index.current.by_owner.is_empty());
    }

    #[test]
    fn keys_sort_by_namespace_then_name_and_owners_do_not_share_a_prefix() {
        let mut index = OwnerIndex::default();
        // As one string "a-b/x" sorts before "a/y" ('-' is below '/'); by namespace, "a" comes first.
        index.apply(&Event::Apply(role("a-b", "x", Some("uid-1"))), Slim::claimed_by);
        index.apply(&Event::Apply(role("a", "y", Some("uid-1"))), Slim::claimed_by);
        index.apply(&Event::Apply(role("a", "x", Some("uid-10"))), Slim::claimed_by);
        assert_eq!(index.owned_by("uid-1"), keys(&[("a", "y"), ("a-b", "x")]));
        assert_eq!(index.owned_by("uid-10"), keys(&[("a", "x")]));
        assert_eq!(index.owned_by("uid"), Vec::<Key>::new());
    }

    #[test]
    fn an_object_seen_again_keeps_one_entry() {
        let mut index = OwnerIndex::default();
        for _ in 0..3 {
            index.apply(&Event::Apply(role("ws", "a", Some("uid-1"))), Slim::claimed_by);
        }
        assert_eq!(index.owned_by("uid-1"), keys(&[("ws", "a")]));
        assert_eq!(
            (index.current.by_owner.len(), index.current.owner_of.len()),
            (1, 1)
        );
    }

    #[test]
    fn a_relist_replaces_the_index_when_it_ends() {
        let mut index = OwnerIndex::default();
        index.apply(&Event::Apply(role("ws", "gone", Some("uid-1"))), Slim::claimed_by);
        index.apply(&Event::<Slim<Role>>::Init, Slim::claimed_by);
        index.apply(
            &Event::InitApply(role("ws", "kept", Some("uid-1"))),
            Slim::claimed_by,
        );
        // Until the relist ends, the index answers as the cache's store does: with what it had.
        assert_eq!(index.owned_by("uid-1"), keys(&[("ws", "gone")]));
        index.apply(&Event::<Slim<Role>>::InitDone, Slim::claimed_by);
        assert_eq!(index.owned_by("uid-1"), keys(&[("ws", "kept")]));
    }
}
