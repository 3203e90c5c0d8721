//! Server-side apply under one field manager, skipped when the cached object already carries the hash of the
//! desired state: a reconcile that finds nothing to change sends no request at all. An existing object without that
//! hash is first taken over from the Go operator's update manager (the field sets of `takeover`). Also the apply of
//! owned objects, which never writes or adopts an object under the name that its custom resource does not hold
//! (`ownership`), and the one owned-object delete.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::cache::Informer;
use crate::conditions::{Requeue, WithConditions};
use crate::context::Context;
use crate::kind::Kind;
use crate::labels::{DESIRED_HASH_LABEL, FIELD_MANAGER};
use crate::ownership::{
    Holder, NotOwned, claimed_owner, controlled_by, held_by, holder, ownership_condition,
};
use crate::pass::Pass;
use crate::slim::{Live, Slim};
use crate::takeover::{PROBE_MANAGER, has_legacy_entries, probe_name, taken_over};

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

/// What [`apply_owned`] did.
#[derive(Debug)]
pub enum Claimed<K> {
    /// The custom resource holds the object (or it did not exist): it was applied, or already matched.
    Applied(Applied<K>),
    /// An object of the name that the custom resource does not hold: nothing was written.
    NotOwned(NotOwned),
}

/// 16 hex characters of SHA-256 over the JSON of `desired`.
pub fn desired_hash<K: Serialize>(desired: &K) -> String {
    let bytes = serde_json::to_vec(desired).unwrap_or_default();
    crate::digest::sha256_hex(&bytes, Some(8))
}

/// Applies `desired` (which must carry name, namespace, apiVersion and kind) unless `cached`, the object as the
/// watch cache shows it, already carries the same desired hash.
pub async fn apply<K>(ctx: &Context, desired: K, cached: Option<&Live>) -> Result<Applied<K>, kube::Error>
where
    K: Namespaced + Serialize,
{
    let hash = desired_hash(&desired);
    if let Some(live) = cached {
        if live.desired_hash() == Some(hash.as_str()) {
            return Ok(Applied::Unchanged);
        }
        // Fields recorded under an update manager of ours (the Go operator's writes, or our own create) move to the
        // apply manager first, so this apply can remove what the desired state dropped.
        if live.takeover_due {
            take_over(ctx, &desired).await?;
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
    ctx.k8s.echoes.record(&K::kind(&()), &namespace, &name, &hash);
    desired.labels_mut().insert(DESIRED_HASH_LABEL.to_owned(), hash);
    let api: Api<K> = Api::namespaced(ctx.k8s.client.clone(), &namespace);
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
    ctx.k8s.echoes.record(&K::kind(&()), &namespace, &name, &hash);
    desired.labels_mut().insert(DESIRED_HASH_LABEL.to_owned(), hash);
    let api: Api<K> = Api::namespaced(ctx.k8s.client.clone(), &namespace);
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&desired),
    )
    .await
}

/// Reads the live object (managed fields are not cached), asks the API server with a dry-run apply which fields
/// `desired` sets, and moves those from the legacy manager to ours, guarded by the resourceVersion. Only objects
/// held by the owner the desired state claims (controller reference or owner-UID annotation) are taken over.
/// Returns whether it patched.
async fn take_over<K>(ctx: &Context, desired: &K) -> Result<bool, kube::Error>
where
    K: Namespaced + Serialize,
{
    let Some(owner) = claimed_owner(desired.meta()).map(str::to_owned) else {
        return Ok(false);
    };
    let name = desired.name_any();
    let api: Api<K> = Api::namespaced(ctx.k8s.client.clone(), &desired.namespace().unwrap_or_default());
    let Some(live) = api.get_opt(&name).await? else {
        return Ok(false);
    };
    let entries = live.meta().managed_fields.clone().unwrap_or_default();
    if !held_by(&Live::of(live.meta().clone()), &owner) || !has_legacy_entries(&entries) {
        return Ok(false);
    }
    let ours = probe_fields(&api, desired).await?;
    let Some(entries) = taken_over(&entries, &ours) else {
        return Ok(false);
    };
    // A resourceVersion in a merge patch makes it conditional: a change in between answers 409 and is retried.
    let patch = json!({"metadata": {"resourceVersion": live.resource_version(), "managedFields": entries}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    tracing::info!(kind = %K::kind(&()), namespace = %desired.namespace().unwrap_or_default(), %name,
        "took over the fields the previous operator wrote with update");
    Ok(true)
}

/// The field set our desired state sets, as the API server computes it: a dry-run apply under a probe manager. When
/// the desired state cannot be applied beside the legacy fields (a list item it replaced keeps a unique value, such
/// as a Service port's name), the dry run is made on an object of another name that does not exist, so that the set
/// comes from the desired state alone.
async fn probe_fields<K>(api: &Api<K>, desired: &K) -> Result<Value, kube::Error>
where
    K: Namespaced + Serialize,
{
    let probe = PatchParams::apply(PROBE_MANAGER).force().dry_run();
    let name = desired.name_any();
    let probed = match api.patch(&name, &probe, &Patch::Apply(desired)).await {
        Err(kube::Error::Api(status)) if status.code == 422 => {
            let mut alone = desired.clone();
            let fresh = probe_name(&name);
            alone.meta_mut().name = Some(fresh.clone());
            api.patch(&fresh, &probe, &Patch::Apply(&alone)).await?
        }
        other => other?,
    };
    Ok(probed
        .meta()
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some(PROBE_MANAGER))
        .and_then(|e| e.fields_v1.as_ref())
        .map_or_else(|| json!({}), |f| f.0.clone()))
}

/// [`apply`] for an object its custom resource holds (`desired` carries the controller owner reference or the
/// owner-UID annotation): when the watch cache (which sees only objects with the operator's label) does not show
/// it, it is created (POST, create-only); only when that finds an object of the name is its metadata read, so an
/// existing object the custom resource does not hold is reported instead of overwritten or adopted.
pub async fn apply_owned<K>(
    ctx: &Context,
    desired: K,
    cached: Option<&Live>,
) -> Result<Claimed<K>, kube::Error>
where
    K: Namespaced + Serialize,
{
    let owner_uid = claimed_owner(desired.meta()).unwrap_or_default().to_owned();
    let live = match cached {
        Some(live) => Some(live.clone()),
        None => {
            if let Some(created) = send_create(ctx, desired.clone()).await? {
                return Ok(Claimed::Applied(Applied::Changed(created)));
            }
            let api: Api<K> =
                Api::namespaced(ctx.k8s.client.clone(), &desired.namespace().unwrap_or_default());
            api.get_metadata_opt(&desired.name_any())
                .await?
                .map(|object| Live::of(object.metadata))
        }
    };
    match holder(live.as_ref(), &owner_uid) {
        Holder::Other => Ok(Claimed::NotOwned(NotOwned {
            kind: K::kind(&()).into_owned(),
            name: desired.name_any(),
        })),
        // With the live metadata, so an object with fields of an update manager of ours is taken over first.
        Holder::Nobody | Holder::Owner => apply(ctx, desired, live.as_ref()).await.map(Claimed::Applied),
    }
}

/// The owned objects one pass applies, and those under the same names that the custom resource does not hold.
#[derive(Debug, Default)]
pub struct Owned {
    pub not_owned: Vec<NotOwned>,
}

impl Owned {
    /// Applies `desired` ([`apply_owned`]), looked up by its name in `cache`; a foreign object is noted.
    pub async fn apply<K>(
        &mut self,
        ctx: &Context,
        cache: &Informer<Slim<K>>,
        desired: K,
    ) -> Result<(), kube::Error>
    where
        K: Namespaced + Serialize + Send + Sync + 'static,
    {
        let cached = cache.live(&desired.namespace().unwrap_or_default(), &desired.name_any());
        if let Claimed::NotOwned(foreign) = apply_owned(ctx, desired, cached.as_ref()).await? {
            self.not_owned.push(foreign);
        }
        Ok(())
    }

    /// Applies `desired` when there is one; otherwise deletes the object `name` in the watch cache that the custom
    /// resource (UID `uid`) controls: an optional object the spec no longer asks for (a PodDisruptionBudget, the
    /// metrics Service). An object of that name someone else controls is left alone.
    pub async fn apply_or_remove<K>(
        &mut self,
        ctx: &Context,
        cache: &Informer<Slim<K>>,
        namespace: &str,
        name: &str,
        desired: Option<K>,
        uid: &str,
    ) -> Result<(), kube::Error>
    where
        K: Namespaced + Serialize + Send + Sync + 'static,
    {
        match desired {
            Some(desired) => self.apply(ctx, cache, desired).await,
            None => {
                let cached = cache.live(namespace, name);
                delete_owned::<K>(ctx, namespace, name, cached.as_ref().map(|c| &c.metadata), uid)
                    .await
                    .map(|_| ())
            }
        }
    }

    /// Applies a Deployment its custom resource controls and returns its ready replicas: from the server's answer
    /// when it was applied, else from the watch cache; 0 (and noted) when the Deployment of that name is foreign.
    pub async fn deployment(&mut self, ctx: &Context, desired: Deployment) -> Result<i32, kube::Error> {
        let deployments = &ctx.k8s.caches.deployments;
        let cached = deployments.get(&desired.namespace().unwrap_or_default(), &desired.name_any());
        Ok(
            match apply_owned(ctx, desired, cached.as_deref().map(|d| &d.live)).await? {
                Claimed::Applied(Applied::Changed(live)) => ready_replicas(&live),
                Claimed::Applied(Applied::Unchanged) => {
                    cached.as_deref().map(cached_ready_replicas).unwrap_or(0)
                }
                Claimed::NotOwned(foreign) => {
                    self.not_owned.push(foreign);
                    0
                }
            },
        )
    }
}

impl Owned {
    /// `ResourcesOwned` on the status `pass` builds, shown only while an object under an owned name is someone
    /// else's.
    /// When a workload whose objects were all applied and whose Deployment is ready is looked at again: only on a
    /// change of what it watches, unless one of its names is held by a foreign object, which is not watched (it has
    /// neither the operator's label nor an owner reference to the workload): then after `retry`, so the object is
    /// created once the other one is gone.
    pub fn when_ready(&self, retry: Duration) -> Requeue {
        match self.not_owned.is_empty() {
            true => Requeue::ON_CHANGE,
            false => Requeue::after(retry),
        }
    }

    pub fn report<K>(&self, pass: &mut Pass<'_, K>)
    where
        K: Kind,
        K::Status: WithConditions,
    {
        let condition = ownership_condition(&self.not_owned);
        pass.show(coder_k8s_api::shared::ownership::RESOURCES_OWNED, condition);
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

/// The ready replicas of a Deployment as its watch cache shows it.
pub fn cached_ready_replicas(deployment: &Slim<Deployment>) -> i32 {
    deployment.ready_replicas.unwrap_or(0)
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
    let api: Api<K> = Api::namespaced(ctx.k8s.client.clone(), namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
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
}
