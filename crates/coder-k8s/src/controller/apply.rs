//! Server-side apply under one field manager, skipped when the cached object already carries the hash of the
//! desired state: a reconcile that finds nothing to change sends no request at all. An existing object without that
//! hash is first taken over from the Go operator's update manager (see `takeover`). Also the one ownership check (an
//! object under a name the operator writes that its custom resource does not control is reported, never written or
//! adopted) and the one owned-object delete.

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::context::Context;

/// The field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "coder-k8s";
/// Label with the hash of the desired state last applied. A label, not an annotation: any annotation change bumps a
/// Deployment's generation, so an annotation would move the generation of every object taken over from the Go
/// operator.
pub const DESIRED_HASH_LABEL: &str = "coder.com/desired-hash";

/// A namespaced kind with a static type, as every kind the operator writes is.
pub trait Namespaced:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope> + Clone + DeserializeOwned + Debug
{
}

impl<K> Namespaced for K where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
{
}

/// What [`apply`] did.
#[derive(Debug)]
pub enum Applied<K> {
    /// The cached object already matched; nothing was sent.
    Unchanged,
    /// The desired state was applied; the server's answer.
    Changed(K),
}

/// 16 hex characters of SHA-256 over the JSON of `desired`.
pub fn desired_hash<K: Serialize>(desired: &K) -> String {
    let bytes = serde_json::to_vec(desired).unwrap_or_default();
    super::digest::sha256_hex(&bytes, Some(8))
}

/// The desired hash an object carries.
pub fn hash_of(meta: &ObjectMeta) -> Option<&str> {
    meta.labels.as_ref()?.get(DESIRED_HASH_LABEL).map(String::as_str)
}

/// Applies `desired` (which must carry name, namespace, apiVersion and kind) unless `cached`, the object as the
/// watch cache shows it, already carries the same desired hash.
pub async fn apply<K>(
    ctx: &Context,
    desired: K,
    cached: Option<&ObjectMeta>,
) -> Result<Applied<K>, kube::Error>
where
    K: Namespaced + Serialize,
{
    let hash = desired_hash(&desired);
    if let Some(meta) = cached {
        if hash_of(meta) == Some(hash.as_str()) {
            return Ok(Applied::Unchanged);
        }
        // Fields recorded under an update manager of ours (the Go operator's writes, or our own create) move to the
        // apply manager first, so this apply can remove what the desired state dropped.
        if super::takeover::takeover_due(meta) {
            super::takeover::take_over(ctx, &desired).await?;
        }
    }
    send_apply(ctx, desired, hash).await.map(Applied::Changed)
}

/// Creates `desired` with the desired-hash label; `None` when an object of that name already exists (nothing is
/// written then). Create-only: unlike an apply, it can never change an object someone else made meanwhile.
async fn send_create<K>(ctx: &Context, mut desired: K) -> Result<Option<K>, kube::Error>
where
    K: Namespaced + Serialize,
{
    let hash = desired_hash(&desired);
    let (name, namespace) = (desired.name_any(), desired.namespace().unwrap_or_default());
    ctx.echoes.record(&K::kind(&()), &namespace, &name, &hash);
    desired.labels_mut().insert(DESIRED_HASH_LABEL.to_owned(), hash);
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api.create(&params, &desired).await {
        Ok(created) => Ok(Some(created)),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
        Err(error) => Err(error),
    }
}

async fn send_apply<K>(ctx: &Context, mut desired: K, hash: String) -> Result<K, kube::Error>
where
    K: Namespaced + Serialize,
{
    let (name, namespace) = (desired.name_any(), desired.namespace().unwrap_or_default());
    ctx.echoes.record(&K::kind(&()), &namespace, &name, &hash);
    desired.labels_mut().insert(DESIRED_HASH_LABEL.to_owned(), hash);
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&desired),
    )
    .await
}

/// An object under a name the operator writes that the custom resource does not control: it is never written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotOwned {
    pub kind: String,
    pub name: String,
}

/// Who holds the name of an object the operator is about to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    /// No such object: it is created.
    Nobody,
    /// The custom resource is its controller owner: it is applied.
    Owner,
    /// Someone else's object (another owner, or none): left alone and reported.
    Other,
}

/// Decides who holds an object whose live metadata is `live` (`None`: it does not exist), for the owner `owner_uid`.
pub fn holder(live: Option<&ObjectMeta>, owner_uid: &str) -> Holder {
    match live {
        None => Holder::Nobody,
        Some(meta) if held_by(meta, owner_uid) => Holder::Owner,
        Some(_) => Holder::Other,
    }
}

/// Annotation with the owner's UID on objects an owner reference cannot point from (workspace RBAC in other
/// namespaces): the claim such an object carries instead of a controller reference.
pub const OWNER_UID_ANNOTATION: &str = "coder.com/workspace-rbac-owner-uid";

/// The owner the desired object claims: its controller reference's UID, else its owner-UID annotation.
pub fn claimed_owner(desired: &ObjectMeta) -> Option<&str> {
    controller_uid(desired).or_else(|| {
        desired
            .annotations
            .as_ref()?
            .get(OWNER_UID_ANNOTATION)
            .map(String::as_str)
    })
}

/// Whether `owner_uid` holds the object with `live` metadata: as its controller, or through the owner-UID
/// annotation.
pub fn held_by(live: &ObjectMeta, owner_uid: &str) -> bool {
    controlled_by(live, owner_uid)
        || live
            .annotations
            .as_ref()
            .and_then(|a| a.get(OWNER_UID_ANNOTATION))
            .is_some_and(|claimed| claimed == owner_uid)
}

/// The UID of the controller owner that `meta` names (the one owner reference with `controller: true`).
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// [`apply`] for an object its custom resource holds (`desired` carries the controller owner reference or the
/// owner-UID annotation): when the watch cache (which sees only objects with the operator's label) does not show
/// it, it is created (POST, create-only); only when that finds an object of the name is its metadata read, so an
/// existing object the custom resource does not hold is reported instead of overwritten or adopted.
pub async fn apply_owned<K>(
    ctx: &Context,
    desired: K,
    cached: Option<&ObjectMeta>,
) -> Result<Result<Applied<K>, NotOwned>, kube::Error>
where
    K: Namespaced + Serialize,
{
    let owner_uid = claimed_owner(desired.meta()).unwrap_or_default().to_owned();
    let live = match cached {
        Some(meta) => Some(meta.clone()),
        None => {
            if let Some(created) = send_create(ctx, desired.clone()).await? {
                return Ok(Ok(Applied::Changed(created)));
            }
            let api: Api<K> = Api::namespaced(ctx.client.clone(), &desired.namespace().unwrap_or_default());
            api.get_metadata_opt(&desired.name_any())
                .await?
                .map(|object| object.metadata)
        }
    };
    match holder(live.as_ref(), &owner_uid) {
        Holder::Other => Ok(Err(NotOwned {
            kind: K::kind(&()).into_owned(),
            name: desired.name_any(),
        })),
        // With the live metadata, so an object with fields of an update manager of ours is taken over first.
        Holder::Nobody | Holder::Owner => apply(ctx, desired, live.as_ref()).await.map(Ok),
    }
}

/// Applies a Deployment its custom resource controls (skipped when unchanged) and returns its ready replicas: from
/// the server's answer when it was applied, else from the watch cache. A Deployment of that name that the custom
/// resource does not control is not written ([`apply_owned`]).
pub async fn apply_deployment(
    ctx: &Context,
    desired: Deployment,
) -> Result<Result<i32, NotOwned>, kube::Error> {
    let cached = ctx
        .caches
        .deployments
        .get(&desired.namespace().unwrap_or_default(), &desired.name_any());
    Ok(
        match apply_owned(ctx, desired, cached.as_deref().map(|d| &d.metadata)).await? {
            Ok(Applied::Changed(live)) => Ok(ready_replicas(&live)),
            Ok(Applied::Unchanged) => Ok(cached.as_deref().map(ready_replicas).unwrap_or(0)),
            Err(not_owned) => Err(not_owned),
        },
    )
}

/// `ResourcesOwned=False/ResourceNotOwned` naming every object that is not the custom resource's, or `None` (the
/// condition is then removed: it is shown only while there is a conflict).
pub fn ownership_condition(not_owned: &[NotOwned]) -> Option<super::conditions::Decided> {
    use coder_k8s_api::shared::ownership::{RESOURCE_NOT_OWNED, RESOURCES_OWNED};
    if not_owned.is_empty() {
        return None;
    }
    let listed: Vec<String> = not_owned
        .iter()
        .map(|o| format!("{} {:?}", o.kind, o.name))
        .collect();
    Some(super::conditions::Decided::new(
        RESOURCES_OWNED,
        super::conditions::ConditionStatus::False,
        RESOURCE_NOT_OWNED,
        format!(
            "{} already exist(s) and this object is not the controller owner; the operator does not change or adopt them. Delete them, or give them an owner reference to this object with controller=true.",
            listed.join(", ")
        ),
    ))
}

/// Sets or removes `ResourcesOwned` on a status being built.
pub fn report_ownership<S: super::conditions::WithConditions>(
    draft: &mut super::conditions::Draft<S>,
    not_owned: &[NotOwned],
) {
    match ownership_condition(not_owned) {
        Some(condition) => draft.set(condition),
        None => super::conditions::remove_condition(
            draft.status.conditions_mut(),
            coder_k8s_api::shared::ownership::RESOURCES_OWNED,
        ),
    }
}

/// The ready replicas a Deployment reports.
pub fn ready_replicas(deployment: &Deployment) -> i32 {
    deployment
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

/// Deletes `namespace/name` of kind `K` when `cached` shows it exists and is controlled by `uid`; returns whether a
/// delete was sent.
pub async fn delete_owned<K>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    cached: Option<&ObjectMeta>,
    uid: &str,
) -> Result<bool, kube::Error>
where
    K: Namespaced,
{
    if !cached.is_some_and(|meta| controlled_by(meta, uid)) {
        return Ok(false);
    }
    delete::<K>(ctx, namespace, name).await
}

/// Deletes `namespace/name`; a missing object is not an error. Returns whether it existed.
pub async fn delete<K>(ctx: &Context, namespace: &str, name: &str) -> Result<bool, kube::Error>
where
    K: Namespaced,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

/// Whether `uid` is the controller owner of the object with `meta`.
pub fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|owner| owner.controller == Some(true) && owner.uid == uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use std::collections::BTreeMap;

    #[test]
    fn hash_follows_content() {
        let a = ConfigMap {
            data: Some(BTreeMap::from([("k".to_owned(), "v".to_owned())])),
            ..ConfigMap::default()
        };
        let mut b = a.clone();
        assert_eq!(desired_hash(&a), desired_hash(&b));
        b.data = Some(BTreeMap::from([("k".to_owned(), "w".to_owned())]));
        assert_ne!(desired_hash(&a), desired_hash(&b));
        assert_eq!(desired_hash(&a).len(), 16);
    }

    #[test]
    fn an_object_held_by_someone_else_is_never_written() {
        let owned_by = |uid: &str, controller| ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                uid: uid.to_owned(),
                controller: Some(controller),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        };
        assert_eq!(holder(None, "u1"), Holder::Nobody);
        assert_eq!(holder(Some(&owned_by("u1", true)), "u1"), Holder::Owner);
        assert_eq!(holder(Some(&owned_by("u2", true)), "u1"), Holder::Other);
        assert_eq!(holder(Some(&owned_by("u1", false)), "u1"), Holder::Other);
        assert_eq!(holder(Some(&ObjectMeta::default()), "u1"), Holder::Other);
        assert_eq!(controller_uid(&owned_by("u1", true)), Some("u1"));
        assert_eq!(controller_uid(&owned_by("u1", false)), None);
    }

    #[test]
    fn foreign_objects_are_named_in_the_condition() {
        assert!(ownership_condition(&[]).is_none());
        let condition = ownership_condition(&[
            NotOwned {
                kind: "Deployment".to_owned(),
                name: "coder".to_owned(),
            },
            NotOwned {
                kind: "Service".to_owned(),
                name: "coder".to_owned(),
            },
        ])
        .unwrap();
        assert_eq!(
            (condition.type_, condition.reason),
            ("ResourcesOwned", "ResourceNotOwned")
        );
        assert!(
            condition.message.contains("Deployment \"coder\"")
                && condition.message.contains("Service \"coder\""),
            "{}",
            condition.message
        );
    }

    #[test]
    fn only_the_controller_owner_controls() {
        let owner = |uid: &str, controller| OwnerReference {
            uid: uid.to_owned(),
            controller,
            ..OwnerReference::default()
        };
        let meta = ObjectMeta {
            owner_references: Some(vec![owner("a", None), owner("b", Some(true))]),
            ..ObjectMeta::default()
        };
        assert!(controlled_by(&meta, "b"));
        assert!(!controlled_by(&meta, "a"), "an owner that is not the controller");
        assert!(!controlled_by(&ObjectMeta::default(), "b"));
    }
}
