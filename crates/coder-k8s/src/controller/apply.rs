//! Server-side apply under one field manager, skipped when the live object already carries the hash of the desired
//! state: a resync that finds nothing to change sends no write request.

use std::fmt::Debug;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

/// The field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "coder-k8s";
/// Annotation with the hash of the desired state last applied.
pub const DESIRED_HASH_ANNOTATION: &str = "coder.com/desired-hash";

/// What [`apply`] did.
#[derive(Debug)]
pub enum Applied<K> {
    /// The live object already matched; nothing was sent.
    Unchanged(K),
    /// The desired state was applied.
    Changed(K),
}

impl<K> Applied<K> {
    pub fn into_inner(self) -> K {
        match self {
            Self::Unchanged(k) | Self::Changed(k) => k,
        }
    }

    pub fn changed(&self) -> bool {
        matches!(self, Self::Changed(_))
    }
}

/// 16 hex characters of SHA-256 over the JSON of `desired`.
pub fn desired_hash<K: Serialize>(desired: &K) -> String {
    let bytes = serde_json::to_vec(desired).unwrap_or_default();
    Sha256::digest(&bytes)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Applies `desired` (which must carry name, apiVersion and kind) unless the live object has the same desired hash.
pub async fn apply<K>(api: &Api<K>, mut desired: K) -> Result<Applied<K>, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    let hash = desired_hash(&desired);
    let name = desired.name_any();
    if let Some(live) = api.get_opt(&name).await?
        && live.annotations().get(DESIRED_HASH_ANNOTATION) == Some(&hash)
    {
        return Ok(Applied::Unchanged(live));
    }
    desired
        .annotations_mut()
        .insert(DESIRED_HASH_ANNOTATION.to_owned(), hash);
    let applied = api
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&desired),
        )
        .await?;
    Ok(Applied::Changed(applied))
}

/// Writes `status` with server-side apply when it differs from `current`; returns whether a write was sent.
pub async fn apply_status<K, S>(
    object: &K,
    api: &Api<K>,
    current: Option<&S>,
    status: &S,
) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + PartialEq,
{
    if current == Some(status) {
        return Ok(false);
    }
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        &object.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(true)
}

/// Deletes `name` when it exists and `owned(live)` holds; returns whether a delete was sent.
pub async fn delete_if<K>(api: &Api<K>, name: &str, owned: impl Fn(&K) -> bool) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match api.get_opt(name).await? {
        Some(live) if owned(&live) => match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(error) => Err(error),
        },
        _ => Ok(false),
    }
}

/// Whether `uid` is the controller owner of `object`.
pub fn controlled_by<K: Resource>(object: &K, uid: &str) -> bool {
    object
        .owner_references()
        .iter()
        .any(|owner| owner.controller == Some(true) && owner.uid == uid)
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
