//! A small in-memory [`Storage`]: objects in a map, a resourceVersion counter, uid and creationTimestamp set on
//! create, optimistic concurrency on update and delete preconditions. For tests and local experiments; nothing is
//! persisted.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;

use super::status::ApiError;
use super::storage::{Deleted, EventType, RequestContext, Storage, Written};

/// Objects of one resource, keyed by (namespace, name). Cluster-scoped objects use the empty namespace.
pub struct MemoryStorage {
    group: &'static str,
    plural: &'static str,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    objects: BTreeMap<(String, String), Value>,
    /// The last resourceVersion handed out; every write takes the next one.
    resource_version: u64,
}

impl MemoryStorage {
    /// An empty storage; `group` and `plural` word its errors (`<plural>.<group> "<name>" not found`).
    pub fn new(group: &'static str, plural: &'static str) -> Self {
        Self {
            group,
            plural,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> Result<std::sync::MutexGuard<'_, State>, ApiError> {
        self.state
            .lock()
            .map_err(|_| ApiError::internal("the in-memory storage is poisoned"))
    }

    fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(self.group, self.plural, name)
    }

    fn conflict(&self, name: &str, why: &str) -> ApiError {
        ApiError::conflict(format!(
            "Operation cannot be fulfilled on {}.{} {name:?}: {why}",
            self.plural, self.group
        ))
        .with_details(name, self.group, self.plural)
    }
}

fn key(ctx: &RequestContext, name: &str) -> (String, String) {
    (ctx.namespace.clone().unwrap_or_default(), name.to_owned())
}

fn metadata_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object["metadata"][field].as_str().filter(|s| !s.is_empty())
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

impl State {
    fn next_resource_version(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    /// Stores `object` as a new object with fresh server-set metadata.
    fn insert_new(&mut self, key: (String, String), mut object: Value, dry_run: bool) -> Written {
        let metadata = &mut object["metadata"];
        metadata["uid"] = uuid::Uuid::new_v4().to_string().into();
        metadata["creationTimestamp"] = now_rfc3339().into();
        if !key.0.is_empty() {
            metadata["namespace"] = key.0.clone().into();
        }
        if let Some(fields) = metadata.as_object_mut() {
            fields.remove("managedFields");
        }
        self.store(key, object, dry_run, true)
    }

    fn store(&mut self, key: (String, String), mut object: Value, dry_run: bool, created: bool) -> Written {
        if dry_run {
            return Written {
                object,
                created,
                event: None,
            };
        }
        object["metadata"]["resourceVersion"] = self.next_resource_version().into();
        self.objects.insert(key, object.clone());
        let event = if created {
            EventType::Added
        } else {
            EventType::Modified
        };
        Written {
            object,
            created,
            event: Some(event),
        }
    }
}

#[async_trait]
impl Storage for MemoryStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let state = self.state()?;
        state
            .objects
            .get(&key(ctx, name))
            .cloned()
            .ok_or_else(|| self.not_found(name))
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        let state = self.state()?;
        let in_scope = |(ns, _): &(String, String)| ctx.namespace.as_ref().is_none_or(|want| want == ns);
        Ok(state
            .objects
            .iter()
            .filter(|(k, _)| in_scope(k))
            .map(|(_, v)| v.clone())
            .collect())
    }

    async fn create(&self, ctx: &RequestContext, object: Value) -> Result<Written, ApiError> {
        let name = metadata_str(&object, "name")
            .ok_or_else(|| ApiError::invalid("metadata.name: Required value: name is required"))?
            .to_owned();
        let mut state = self.state()?;
        let key = key(ctx, &name);
        if state.objects.contains_key(&key) {
            return Err(ApiError::already_exists(self.group, self.plural, &name));
        }
        Ok(state.insert_new(key, object, ctx.dry_run))
    }

    async fn update(
        &self,
        ctx: &RequestContext,
        name: &str,
        mut object: Value,
        allow_create: bool,
    ) -> Result<Written, ApiError> {
        let mut state = self.state()?;
        let key = key(ctx, name);
        let Some(current) = state.objects.get(&key) else {
            if allow_create {
                return Ok(state.insert_new(key, object, ctx.dry_run));
            }
            return Err(self.not_found(name));
        };
        let current_rv = metadata_str(current, "resourceVersion");
        if let Some(given) = metadata_str(&object, "resourceVersion")
            && Some(given) != current_rv
        {
            return Err(self.conflict(
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        for kept in ["uid", "creationTimestamp", "namespace"] {
            object["metadata"][kept] = current["metadata"][kept].clone();
        }
        if let Some(fields) = object["metadata"].as_object_mut() {
            fields.remove("managedFields");
        }
        Ok(state.store(key, object, ctx.dry_run, false))
    }

    async fn delete(
        &self,
        ctx: &RequestContext,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let mut state = self.state()?;
        let key = key(ctx, name);
        let current = state.objects.get(&key).ok_or_else(|| self.not_found(name))?;
        self.check_preconditions(name, current, options)?;
        let object = if ctx.dry_run {
            current.clone()
        } else {
            state.objects.remove(&key).unwrap_or_default()
        };
        let event = (!ctx.dry_run).then_some(EventType::Deleted);
        Ok(Deleted::Object { object, event })
    }
}

impl MemoryStorage {
    /// `preconditions.uid` and `preconditions.resourceVersion`, worded as kube-apiserver does.
    fn check_preconditions(
        &self,
        name: &str,
        current: &Value,
        options: &DeleteOptions,
    ) -> Result<(), ApiError> {
        let Some(preconditions) = &options.preconditions else {
            return Ok(());
        };
        let actual_uid = current["metadata"]["uid"].as_str().unwrap_or_default();
        if let Some(uid) = &preconditions.uid
            && uid != actual_uid
        {
            return Err(self.conflict(
                name,
                &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual_uid}"),
            ));
        }
        let actual_rv = current["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        if let Some(rv) = &preconditions.resource_version
            && rv != actual_rv
        {
            return Err(self.conflict(
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual_rv}"
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generic::UserInfo;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
    use serde_json::json;

    fn ctx(namespace: Option<&str>) -> RequestContext {
        RequestContext {
            user: UserInfo::default(),
            namespace: namespace.map(str::to_owned),
            deadline: tokio::time::Instant::now() + std::time::Duration::from_secs(5),
            dry_run: false,
            query: BTreeMap::new(),
        }
    }

    fn thing(name: &str) -> Value {
        json!({"apiVersion": "g/v1", "kind": "Thing", "metadata": {"name": name}, "spec": {"n": 1}})
    }

    #[tokio::test]
    async fn create_sets_server_metadata_and_refuses_duplicates() {
        let storage = MemoryStorage::new("g", "things");
        let written = storage
            .create(&ctx(Some("ns")), thing("a"))
            .await
            .expect("create");
        assert!(written.created);
        assert_eq!(written.event, Some(EventType::Added));
        let meta = &written.object["metadata"];
        assert_eq!(meta["namespace"], "ns");
        assert_eq!(meta["resourceVersion"], "1");
        assert_eq!(meta["uid"].as_str().map(str::len), Some(36));
        assert!(
            meta["creationTimestamp"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z'))
        );
        let err = storage
            .create(&ctx(Some("ns")), thing("a"))
            .await
            .expect_err("duplicate");
        assert_eq!((err.code, err.reason), (409, "AlreadyExists"));
        storage
            .create(&ctx(Some("other")), thing("a"))
            .await
            .expect("same name elsewhere");
        assert_eq!(storage.list(&ctx(None)).await.expect("list").len(), 2);
        assert_eq!(storage.list(&ctx(Some("ns"))).await.expect("list").len(), 1);
    }

    #[tokio::test]
    async fn update_checks_the_resource_version_and_keeps_identity() {
        let storage = MemoryStorage::new("g", "things");
        let created = storage
            .create(&ctx(Some("ns")), thing("a"))
            .await
            .expect("create")
            .object;
        let mut stale = created.clone();
        stale["metadata"]["resourceVersion"] = "0".into();
        let err = storage
            .update(&ctx(Some("ns")), "a", stale, false)
            .await
            .expect_err("stale");
        assert_eq!(err.code, 409);
        assert!(
            err.message.contains("the object has been modified"),
            "{}",
            err.message
        );
        let mut fresh = created.clone();
        fresh["metadata"]["uid"] = "forged".into();
        let updated = storage
            .update(&ctx(Some("ns")), "a", fresh, false)
            .await
            .expect("update");
        assert_eq!(updated.event, Some(EventType::Modified));
        assert!(!updated.created);
        assert_eq!(updated.object["metadata"]["uid"], created["metadata"]["uid"]);
        assert_eq!(updated.object["metadata"]["resourceVersion"], "2");
    }

    #[tokio::test]
    async fn update_creates_only_when_allowed() {
        let storage = MemoryStorage::new("g", "things");
        let err = storage
            .update(&ctx(Some("ns")), "a", thing("a"), false)
            .await
            .expect_err("missing");
        assert_eq!(err.code, 404);
        let written = storage
            .update(&ctx(Some("ns")), "a", thing("a"), true)
            .await
            .expect("apply");
        assert!(written.created);
    }

    #[tokio::test]
    async fn delete_honours_preconditions_and_dry_run() {
        let storage = MemoryStorage::new("g", "things");
        storage
            .create(&ctx(Some("ns")), thing("a"))
            .await
            .expect("create");
        let wrong_uid = DeleteOptions {
            preconditions: Some(Preconditions {
                uid: Some("nope".into()),
                resource_version: None,
            }),
            ..Default::default()
        };
        let err = storage
            .delete(&ctx(Some("ns")), "a", &wrong_uid)
            .await
            .expect_err("uid");
        assert_eq!(err.code, 409);
        assert!(
            err.message.contains("UID in precondition: nope"),
            "{}",
            err.message
        );
        let mut dry = ctx(Some("ns"));
        dry.dry_run = true;
        storage
            .delete(&dry, "a", &DeleteOptions::default())
            .await
            .expect("dry run");
        storage
            .get(&ctx(Some("ns")), "a")
            .await
            .expect("still there after a dry run");
        let gone = storage
            .delete(&ctx(Some("ns")), "a", &DeleteOptions::default())
            .await
            .expect("delete");
        assert!(matches!(
            gone,
            Deleted::Object {
                event: Some(EventType::Deleted),
                ..
            }
        ));
        assert_eq!(
            storage.get(&ctx(Some("ns")), "a").await.expect_err("gone").code,
            404
        );
    }
}
