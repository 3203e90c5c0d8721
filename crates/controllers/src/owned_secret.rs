//! The one builder and the one writer of a Secret that an object owns (operator token, provisioner key, proxy
//! token): Opaque, one key, the owner's labels and a controller owner reference, so it goes with its owner. The
//! ownership check and the write cannot race: a Secret the operator has not seen is created (POST, which fails when
//! anyone created it in between), and an owned one is replaced only at the resourceVersion that was checked. What the
//! API server stored is recorded in the Secret cache, so the next read serves it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::labels::FIELD_MANAGER;
use crate::ownership::{controlled_by, controller_uid};

/// Adds to `annotations` the record annotations of one step of a multi-step write (a create marker, a recorded ID):
/// each given value is set, and one given as `None` that the live Secret carries is emptied, not dropped, because a
/// replaced Secret keeps the annotations it has (others' included). So a spent marker or a stale ID never outlives
/// its step, and an empty annotation proves nothing.
pub fn step_annotations<'a>(
    annotations: &mut BTreeMap<String, String>,
    live: Option<&Secret>,
    step: impl IntoIterator<Item = (&'a str, Option<String>)>,
) {
    for (name, value) in step {
        let carried = live.is_some_and(|s| s.annotations().get(name).is_some_and(|v| !v.is_empty()));
        match value {
            Some(value) => drop(annotations.insert(name.to_owned(), value)),
            None if carried => drop(annotations.insert(name.to_owned(), String::new())),
            None => {}
        }
    }
}

/// What goes into an owned Secret besides the owner.
pub struct OwnedSecret<'a> {
    pub name: &'a str,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub key: &'a str,
    pub value: &'a [u8],
}

impl OwnedSecret<'_> {
    /// Writes the Secret of `owner` over `live` (the Secret as last read, see [`write`]) and records what was
    /// stored in the Secret cache; `None` when the name is taken by a Secret the owner does not control (nothing is
    /// written).
    pub async fn store<O: Resource<DynamicType = ()>>(
        self,
        ctx: &Context,
        owner: &O,
        live: Option<&Secret>,
    ) -> Result<Option<Secret>> {
        let desired = self.build(owner).ok_or(Error::MissingMetadata)?;
        match write(ctx, desired, live).await? {
            Written::Stored(stored) => {
                ctx.k8s.caches.secrets.wrote((*stored).clone());
                Ok(Some(*stored))
            }
            Written::Foreign => Ok(None),
        }
    }

    /// The Secret, owned by `owner` in its namespace; `None` when the owner is not stored yet (no UID).
    pub fn build<O: Resource<DynamicType = ()>>(self, owner: &O) -> Option<Secret> {
        let owner_reference = owner.controller_owner_ref(&())?;
        Some(Secret {
            metadata: ObjectMeta {
                name: Some(self.name.to_owned()),
                namespace: owner.namespace(),
                labels: Some(self.labels),
                annotations: (!self.annotations.is_empty()).then_some(self.annotations),
                owner_references: Some(vec![owner_reference]),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_owned()),
            data: Some(BTreeMap::from([(
                self.key.to_owned(),
                ByteString(self.value.to_vec()),
            )])),
            ..Secret::default()
        })
    }
}

/// How an owned Secret is written, decided from what the operator last saw of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WritePlan {
    /// Not seen: create it; if it exists by then, it is someone else's.
    Create,
    /// Controlled by the owner: replace it, but only while it is still at this resourceVersion.
    Replace { resource_version: String },
    /// Someone else's (or nothing tells which version was checked): leave it alone.
    Refuse,
}

/// Decides how to write the Secret whose live metadata is `live` (`None`: not seen) for the owner with `owner_uid`.
pub fn write_plan(live: Option<&ObjectMeta>, owner_uid: &str) -> WritePlan {
    match live {
        None => WritePlan::Create,
        Some(meta) if controlled_by(meta, owner_uid) => match &meta.resource_version {
            Some(version) => WritePlan::Replace {
                resource_version: version.clone(),
            },
            None => WritePlan::Refuse,
        },
        Some(_) => WritePlan::Refuse,
    }
}

/// What writing an owned Secret did.
#[derive(Debug)]
pub enum Written {
    /// The Secret as the API server stored it.
    Stored(Box<Secret>),
    /// The name belongs to a Secret this owner does not control; nothing was written.
    Foreign,
}

/// Writes `desired` (from [`OwnedSecret::build`]) over `live`, the Secret as last read: created when absent,
/// replaced at the read resourceVersion when owned (labels and annotations others added are kept), never written
/// when foreign. A Secret created by someone else between the read and the write is reported as foreign, and a
/// change between them fails with 409 Conflict (the next reconcile reads it again).
pub async fn write(
    ctx: &Context,
    mut desired: Secret,
    live: Option<&Secret>,
) -> Result<Written, kube::Error> {
    let owner_uid = controller_uid(&desired.metadata).unwrap_or_default().to_owned();
    let namespace = desired.namespace().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(ctx.k8s.client.clone(), &namespace);
    let params = PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    };
    let result = match write_plan(live.map(|s| &s.metadata), &owner_uid) {
        WritePlan::Refuse => return Ok(Written::Foreign),
        WritePlan::Create => api.create(&params, &desired).await,
        WritePlan::Replace { resource_version } => {
            if let Some(live) = live {
                keep_others_metadata(&mut desired.metadata, &live.metadata);
            }
            desired.metadata.resource_version = Some(resource_version);
            api.replace(&desired.name_any(), &params, &desired).await
        }
    };
    match result {
        Ok(stored) => Ok(Written::Stored(Box::new(stored))),
        Err(kube::Error::Api(status)) if status.code == 409 && status.reason == "AlreadyExists" => {
            Ok(Written::Foreign)
        }
        Err(error) => Err(error),
    }
}

/// Labels, annotations and further owner references that others put on an owned Secret survive its replacement.
fn keep_others_metadata(desired: &mut ObjectMeta, live: &ObjectMeta) {
    for (field, live_values) in [
        (&mut desired.labels, &live.labels),
        (&mut desired.annotations, &live.annotations),
    ] {
        let mut merged = live_values.clone().unwrap_or_default();
        merged.extend(field.take().unwrap_or_default());
        *field = (!merged.is_empty()).then_some(merged);
    }
    let ours = desired.owner_references.take().unwrap_or_default();
    let mut owners: Vec<_> = live
        .owner_references
        .iter()
        .flatten()
        .filter(|o| !ours.iter().any(|our| our.uid == o.uid))
        .cloned()
        .collect();
    owners.extend(ours);
    desired.owner_references = Some(owners);
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn owned_by_its_owner_with_one_key() {
        let mut owner = ConfigMap::default();
        owner.metadata.name = Some("owner".to_owned());
        owner.metadata.namespace = Some("team".to_owned());
        let secret = |owner: &ConfigMap| {
            OwnedSecret {
                name: "owner-token",
                labels: BTreeMap::from([("a".to_owned(), "b".to_owned())]),
                annotations: BTreeMap::new(),
                key: "token",
                value: b"s3cret",
            }
            .build(owner)
        };
        assert!(secret(&owner).is_none(), "no UID yet, no owner reference");
        owner.metadata.uid = Some("uid-1".to_owned());
        let built = secret(&owner).unwrap();
        assert_eq!(built.metadata.namespace.as_deref(), Some("team"));
        let reference = &built.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (reference.uid.as_str(), reference.controller),
            ("uid-1", Some(true))
        );
        assert_eq!(built.data.unwrap()["token"].0, b"s3cret");
        assert!(built.metadata.annotations.is_none());
    }

    fn meta(owner: Option<(&str, bool)>, version: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            resource_version: version.map(str::to_owned),
            owner_references: owner.map(|(uid, controller)| {
                vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    uid: uid.to_owned(),
                    controller: Some(controller),
                    ..Default::default()
                }]
            }),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn an_unseen_secret_is_created_and_an_owned_one_replaced_at_its_version() {
        assert_eq!(write_plan(None, "u1"), WritePlan::Create);
        assert_eq!(
            write_plan(Some(&meta(Some(("u1", true)), Some("7"))), "u1"),
            WritePlan::Replace {
                resource_version: "7".to_owned()
            }
        );
    }

    #[test]
    fn a_foreign_secret_is_never_written() {
        assert_eq!(write_plan(Some(&meta(None, Some("7"))), "u1"), WritePlan::Refuse);
        assert_eq!(
            write_plan(Some(&meta(Some(("u2", true)), Some("7"))), "u1"),
            WritePlan::Refuse
        );
        assert_eq!(
            write_plan(Some(&meta(Some(("u1", false)), Some("7"))), "u1"),
            WritePlan::Refuse,
            "an owner that is not the controller"
        );
        assert_eq!(
            write_plan(Some(&meta(Some(("u1", true)), None)), "u1"),
            WritePlan::Refuse,
            "no version to hold the replacement to"
        );
    }

    #[test]
    fn a_replacement_keeps_what_others_added() {
        let mut desired = ObjectMeta {
            labels: Some(BTreeMap::from([("ours".to_owned(), "1".to_owned())])),
            owner_references: meta(Some(("u1", true)), None).owner_references,
            ..ObjectMeta::default()
        };
        let mut live = meta(Some(("u1", true)), Some("7"));
        live.labels = Some(BTreeMap::from([
            ("ours".to_owned(), "0".to_owned()),
            ("theirs".to_owned(), "x".to_owned()),
        ]));
        live.owner_references.get_or_insert_default().push(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                uid: "other".to_owned(),
                ..Default::default()
            },
        );
        keep_others_metadata(&mut desired, &live);
        let labels = desired.labels.unwrap();
        assert_eq!((labels["ours"].as_str(), labels["theirs"].as_str()), ("1", "x"));
        let owners: Vec<&str> = desired
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.as_str())
            .collect();
        assert_eq!(owners, ["other", "u1"]);
        assert!(desired.annotations.is_none());
    }

    #[test]
    fn a_step_sets_its_values_and_empties_spent_ones_it_does_not_give() {
        let live = Secret {
            metadata: ObjectMeta {
                annotations: Some(BTreeMap::from([
                    ("marker".to_owned(), "2026-12-06T07:00:00Z".to_owned()),
                    ("spent".to_owned(), String::new()),
                    ("theirs".to_owned(), "x".to_owned()),
                ])),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        };
        let mut annotations = BTreeMap::from([("origin".to_owned(), "https://c".to_owned())]);
        let step = [
            ("id", Some("k1".to_owned())),
            ("marker", None),
            ("spent", None),
            ("never", None),
        ];
        step_annotations(&mut annotations, Some(&live), step);
        assert_eq!(
            annotations,
            BTreeMap::from([
                ("id".to_owned(), "k1".to_owned()),
                ("marker".to_owned(), String::new()),
                ("origin".to_owned(), "https://c".to_owned()),
            ])
        );
    }
}
