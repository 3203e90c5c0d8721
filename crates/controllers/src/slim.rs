//! The compact copy the watch caches keep of an object the operator writes, pure. A controller reads of such an
//! object only who holds it, whether it carries the hash of the desired state and whether a takeover is due (and of
//! a Deployment its ready replicas), so the copy keeps its identity and owner references, and the operator's marks
//! as plain fields instead of the label and annotation maps they were read from (the first node of a map alone is
//! 544 bytes, and a cached object had two).

use std::borrow::Cow;
use std::marker::PhantomData;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::PartialObjectMeta;

use crate::labels::{DESIRED_HASH_LABEL, OWNER_UID_ANNOTATION};
use crate::takeover::takeover_due;

/// What the operator reads of a live object it writes: its name, namespace and owner references (the rest of its
/// metadata is not read, and a UID or resourceVersion kept here would be copied again into the cache's key), and the
/// marks its labels and annotations held.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Live {
    pub metadata: ObjectMeta,
    /// The desired-hash label.
    pub desired_hash: Option<Box<str>>,
    /// The owner-UID annotation (the claim of an object an owner reference cannot point from).
    pub claimed_by: Option<Box<str>>,
    /// Whether fields recorded under an update manager of ours wait for a takeover before the next apply.
    pub takeover_due: bool,
}

impl Live {
    /// The live view of an object with `meta` (a watch event's or a read's), read once.
    pub fn of(meta: ObjectMeta) -> Self {
        let takeover_due = takeover_due(&meta);
        let mark = |map: Option<&std::collections::BTreeMap<String, String>>, key: &str| {
            map.and_then(|m| m.get(key)).map(|v| Box::from(v.as_str()))
        };
        let desired_hash = mark(meta.labels.as_ref(), DESIRED_HASH_LABEL);
        let claimed_by = mark(meta.annotations.as_ref(), OWNER_UID_ANNOTATION);
        Self {
            metadata: ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                owner_references: meta.owner_references,
                ..ObjectMeta::default()
            },
            desired_hash,
            claimed_by,
            takeover_due,
        }
    }

    pub fn desired_hash(&self) -> Option<&str> {
        self.desired_hash.as_deref()
    }

    pub fn claimed_by(&self) -> Option<&str> {
        self.claimed_by.as_deref()
    }
}

/// The cached copy of an owned object of kind `K`: a [`Resource`] of `K`'s kind, so the watch caches store and
/// index it like any object.
#[derive(Clone, Debug)]
pub struct Slim<K> {
    pub live: Live,
    /// A Deployment's `status.readyReplicas` (always `None` for other kinds).
    pub ready_replicas: Option<i32>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Slim<K> {
    fn new(live: Live, ready_replicas: Option<i32>) -> Self {
        Self {
            live,
            ready_replicas,
            kind: PhantomData,
        }
    }

    /// The copy of an object the metadata watch of `K` shows.
    pub fn of_meta(object: PartialObjectMeta<K>) -> Self {
        Self::new(Live::of(object.metadata), None)
    }

    pub fn claimed_by(&self) -> Option<&str> {
        self.live.claimed_by()
    }
}

impl Slim<Deployment> {
    /// The copy of a Deployment: what any owned object keeps, and its ready replicas.
    pub fn of_deployment(deployment: Deployment) -> Self {
        let ready = deployment.status.as_ref().and_then(|s| s.ready_replicas);
        Self::new(Live::of(deployment.metadata), ready)
    }
}

impl<K: Resource<DynamicType = ()>> Resource for Slim<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.live.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.live.metadata
    }
}

/// An object whose desired-hash mark can be read: a slim copy, or an object cached with its labels.
pub trait Marked {
    fn desired_hash(&self) -> Option<&str>;
}

impl<K> Marked for Slim<K> {
    fn desired_hash(&self) -> Option<&str> {
        self.live.desired_hash()
    }
}

impl<K> Marked for PartialObjectMeta<K> {
    fn desired_hash(&self) -> Option<&str> {
        crate::labels::desired_hash_of(&self.metadata)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentStatus;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference, Time};

    use crate::labels::{FIELD_MANAGER, LEGACY_FIELDS_MARK};

    fn meta() -> ObjectMeta {
        ObjectMeta {
            name: Some("coder".to_owned()),
            namespace: Some("ns".to_owned()),
            uid: Some("u-9".to_owned()),
            resource_version: Some("42".to_owned()),
            labels: Some(
                [
                    (DESIRED_HASH_LABEL.to_owned(), "abc".to_owned()),
                    ("app.kubernetes.io/name".to_owned(), "coder".to_owned()),
                ]
                .into(),
            ),
            annotations: Some([(OWNER_UID_ANNOTATION.to_owned(), "owner-1".to_owned())].into()),
            owner_references: Some(vec![OwnerReference {
                uid: "cp-1".to_owned(),
                controller: Some(true),
                ..OwnerReference::default()
            }]),
            creation_timestamp: Some(Time(Default::default())),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn the_marks_become_fields_and_the_maps_go() {
        let live = Live::of(meta());
        assert_eq!(live.desired_hash(), Some("abc"));
        assert_eq!(live.claimed_by(), Some("owner-1"));
        assert!(!live.takeover_due);
        // Name, namespace and owners stay (the store key and the holder are read from them); nothing else does.
        let kept = ObjectMeta {
            name: Some("coder".to_owned()),
            namespace: Some("ns".to_owned()),
            owner_references: meta().owner_references,
            ..ObjectMeta::default()
        };
        assert_eq!(live.metadata, kept);
    }

    #[test]
    fn an_object_without_marks_has_none() {
        let live = Live::of(ObjectMeta::default());
        assert_eq!(
            (live.desired_hash(), live.claimed_by(), live.takeover_due),
            (None, None, false)
        );
    }

    #[test]
    fn a_takeover_is_due_from_legacy_managed_fields_or_the_cache_mark() {
        let mut legacy = meta();
        legacy.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some(FIELD_MANAGER.to_owned()),
            operation: Some("Update".to_owned()),
            ..ManagedFieldsEntry::default()
        }]);
        let live = Live::of(legacy);
        assert!(live.takeover_due);
        assert_eq!(live.metadata.managed_fields, None, "read once, not kept");
        let mut marked = meta();
        marked
            .annotations
            .get_or_insert_with(Default::default)
            .insert(LEGACY_FIELDS_MARK.to_owned(), "true".to_owned());
        assert!(Live::of(marked).takeover_due);
    }

    #[test]
    fn a_deployment_keeps_its_ready_replicas_and_others_have_none() {
        let deployment = Deployment {
            metadata: meta(),
            status: Some(DeploymentStatus {
                ready_replicas: Some(3),
                ..DeploymentStatus::default()
            }),
            ..Deployment::default()
        };
        let slim = Slim::of_deployment(deployment);
        assert_eq!((slim.ready_replicas, slim.desired_hash()), (Some(3), Some("abc")));
        let service = Slim::<Service>::of_meta(PartialObjectMeta {
            metadata: meta(),
            ..PartialObjectMeta::default()
        });
        assert_eq!(service.ready_replicas, None);
        assert_eq!(Slim::<Service>::kind(&()), "Service");
        assert_eq!(service.meta().name.as_deref(), Some("coder"));
    }
}
