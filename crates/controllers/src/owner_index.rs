//! The objects of one watch cache that name their owner by the owner-UID annotation (workspace Roles and
//! RoleBindings in other namespaces than their control plane, which an owner reference cannot reach), by that
//! owner's UID. A reconcile that looks for what its object left elsewhere reads one entry instead of filtering the
//! whole cache: with a thousand control planes, each pass scanned two thousand cached objects, and at rest that
//! scan was most of the operator's CPU.

use std::collections::HashMap;

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

#[derive(Debug, Default)]
struct Entries {
    owner_of: HashMap<Key, String>,
    /// Sorted keys: an owner has a handful of objects, and a set's first node alone would take 544 bytes.
    by_owner: HashMap<String, Vec<Key>>,
}

impl OwnerIndex {
    /// Follows one watch event; `claimed_by` reads the owner UID of an object.
    pub fn apply<K: Resource>(&mut self, event: &watcher::Event<K>, claimed_by: fn(&K) -> Option<&str>) {
        match event {
            watcher::Event::Apply(object) => self.current.set(object.meta(), claimed_by(object)),
            watcher::Event::Delete(object) => self.current.remove(&key(object.meta())),
            watcher::Event::Init => self.relisting = Some(Entries::default()),
            watcher::Event::InitApply(object) => {
                self.relisting
                    .get_or_insert_with(Entries::default)
                    .set(object.meta(), claimed_by(object));
            }
            watcher::Event::InitDone => self.current = self.relisting.take().unwrap_or_default(),
        }
    }

    /// The objects annotated with `owner_uid`, in name order.
    pub fn owned_by(&self, owner_uid: &str) -> Vec<Key> {
        self.current.by_owner.get(owner_uid).cloned().unwrap_or_default()
    }
}

impl Entries {
    fn set(&mut self, meta: &ObjectMeta, owner: Option<&str>) {
        let key = key(meta);
        self.remove(&key);
        if let Some(owner) = owner {
            let keys = self.by_owner.entry(owner.to_owned()).or_default();
            if let Err(at) = keys.binary_search(&key) {
                keys.insert(at, key.clone());
            }
            self.owner_of.insert(key, owner.to_owned());
        }
    }

    fn remove(&mut self, key: &Key) {
        let Some(owner) = self.owner_of.remove(key) else {
            return;
        };
        if let Some(keys) = self.by_owner.get_mut(&owner) {
            if let Ok(at) = keys.binary_search(key) {
                keys.remove(at);
            }
            if keys.is_empty() {
                self.by_owner.remove(&owner);
            }
        }
    }
}

fn key(meta: &ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
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
