//! Adding and releasing a kind's finalizer with JSON patches that test the list first, so a concurrent change of
//! the finalizers is never overwritten. Unlike kube's finalizer helper, adding returns the patched object so the
//! same reconcile goes on to apply the spec (one reconcile for a new object, not two).

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::apply::Namespaced;
use super::context::Context;

/// Whether `object` carries `finalizer`.
pub fn has<K: Resource>(object: &K, finalizer: &str) -> bool {
    object.finalizers().iter().any(|f| f == finalizer)
}

fn api<K>(ctx: &Context, object: &K) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    Api::namespaced(ctx.k8s.client.clone(), &object.namespace().unwrap_or_default())
}

fn add_patch<K: Resource>(object: &K, finalizer: &str) -> serde_json::Value {
    if object.finalizers().is_empty() {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ])
    } else {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": object.finalizers()},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ])
    }
}

fn remove_patch<K: Resource>(object: &K, finalizer: &str) -> Option<serde_json::Value> {
    let index = object.finalizers().iter().position(|f| f == finalizer)?;
    let path = format!("/metadata/finalizers/{index}");
    Some(json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]))
}

async fn json_patch<K: Namespaced>(
    api: &Api<K>,
    name: &str,
    patch: serde_json::Value,
) -> Result<K, kube::Error> {
    let patch = Patch::Json::<()>(serde_json::from_value(patch).map_err(kube::Error::SerdeError)?);
    api.patch(name, &PatchParams::default(), &patch).await
}

/// Adds `finalizer` and returns the patched object. A cached object that was stale (the test failed) is read again
/// once.
pub async fn add<K>(ctx: &Context, object: Arc<K>, finalizer: &str) -> Result<Arc<K>, kube::Error>
where
    K: Namespaced,
{
    let api = api(ctx, object.as_ref());
    let name = object.name_any();
    let send = |patch| json_patch(&api, &name, patch);
    match send(add_patch(object.as_ref(), finalizer)).await {
        Ok(patched) => Ok(Arc::new(patched)),
        Err(kube::Error::Api(status)) if status.code == 422 => {
            let fresh = api.get(&name).await?;
            // Deleted meanwhile: no finalizer may be added any more; the caller sees the deletion.
            if has(&fresh, finalizer) || fresh.meta().deletion_timestamp.is_some() {
                return Ok(Arc::new(fresh));
            }
            send(add_patch(&fresh, finalizer)).await.map(Arc::new)
        }
        Err(error) => Err(error),
    }
}

/// Removes `finalizer`; an object that is already gone is fine. A stale cached object is read again once.
pub async fn release<K>(ctx: &Context, object: &K, finalizer: &str) -> Result<(), kube::Error>
where
    K: Namespaced,
{
    let api = api(ctx, object);
    let name = object.name_any();
    let send = |patch| async {
        match json_patch(&api, &name, patch).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error),
        }
    };
    let Some(patch) = remove_patch(object, finalizer) else {
        return Ok(());
    };
    match send(patch).await {
        Err(kube::Error::Api(status)) if status.code == 422 => match api.get_opt(&name).await? {
            Some(fresh) => match remove_patch(&fresh, finalizer) {
                Some(patch) => send(patch).await,
                None => Ok(()),
            },
            None => Ok(()),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn patches_test_before_they_change() {
        let mut object = ConfigMap::default();
        assert_eq!(add_patch(&object, "f")[0]["value"], serde_json::Value::Null);
        assert_eq!(add_patch(&object, "f")[1]["value"], json!(["f"]));
        assert!(remove_patch(&object, "f").is_none());
        object.metadata.finalizers = Some(vec!["other".to_owned(), "f".to_owned()]);
        assert!(has(&object, "f"));
        assert_eq!(add_patch(&object, "g")[0]["value"], json!(["other", "f"]));
        let remove = remove_patch(&object, "f").unwrap();
        assert_eq!(
            remove[0],
            json!({"op": "test", "path": "/metadata/finalizers/1", "value": "f"})
        );
        assert_eq!(remove[1]["op"], "remove");
    }
}
