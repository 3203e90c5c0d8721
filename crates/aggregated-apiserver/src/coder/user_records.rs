//! What the `coderusers` storage keeps outside Coder, and the Secrets a new user's first password is read from or
//! written to. Coder has no place for a user's deletion policy, nor for "this object was deleted by suspending the
//! user", so the server records both: one ConfigMap per user in the server's own namespace,
//! `ck8s-user-<hash of namespace/name>`, with the user's Coder ID and never a secret. A user suspended by a delete is
//! hidden from reads while Coder still holds it exactly as the delete left it (same ID, still suspended, the same
//! `updated_at`): any change made in Coder since, or a create of the object, shows it again. The records are read
//! from a watch of them (started on first use), so a user read or an open watch's poll costs no Kubernetes request;
//! a write waits until the watch has it, so the next read sees it.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_coder_client::types::users::User;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::OnceCell;
use uuid::Uuid;

use super::user_writes::DeletionPolicy;
use super::workspace_secrets::bounded;
use crate::generic::ApiError;

/// The label every user record carries.
pub const USER_RECORD_LABEL: &str = "aggregation.coder.com/user-record";
const RECORD_PREFIX: &str = "ck8s-user-";

/// The server's record of one user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserRecord {
    /// The Coder user the record was written for: a record of an earlier user of the same name does not apply.
    pub user_id: Uuid,
    pub deletion_policy: DeletionPolicy,
    /// Set by a delete that suspended the user: Coder's `updated_at` of the suspended user.
    pub suspended_by_delete: Option<String>,
}

impl UserRecord {
    /// Whether the record is about `user` (and not an earlier user of the same name).
    pub fn applies_to(&self, user: &User) -> bool {
        self.user_id == user.id
    }

    /// Whether `user` was deleted through the API by suspending it and Coder has not changed it since.
    pub fn hides(&self, user: &User) -> bool {
        self.applies_to(user)
            && user.status == "suspended"
            && self.suspended_by_delete.as_deref() == Some(user.updated_at.as_str())
    }

    /// Nothing worth keeping: the default policy and no delete to remember.
    pub fn is_default(&self) -> bool {
        self.deletion_policy == DeletionPolicy::Suspend && self.suspended_by_delete.is_none()
    }
}

/// What the user storage needs of Kubernetes (the caller's permission is the server authorizer's to decide first).
#[async_trait]
pub trait UserStore: Send + Sync {
    /// The data of Secret `name` in `namespace`; `None` when it does not exist.
    async fn read_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ApiError>;
    /// Creates `secret` in `namespace`; a Secret of that name is never replaced (409 AlreadyExists).
    async fn create_secret(&self, namespace: &str, secret: Secret) -> Result<(), ApiError>;
    /// Deletes Secret `name` (absent counts as deleted).
    async fn delete_secret(&self, namespace: &str, name: &str) -> Result<(), ApiError>;
    /// The records of the users served in `namespace`, by user name.
    async fn records(&self, namespace: &str) -> Result<BTreeMap<String, UserRecord>, ApiError>;
    /// Writes the record of user `name`; a record with nothing to keep is removed.
    async fn write_record(&self, namespace: &str, name: &str, record: &UserRecord) -> Result<(), ApiError>;
}

/// The record's ConfigMap name: a hash, so any user name fits.
pub fn record_name(namespace: &str, name: &str) -> String {
    let hash = crate::generic::discovery::hex_sha256(format!("{namespace}/{name}").as_bytes());
    format!("{RECORD_PREFIX}{}", &hash[..40])
}

/// A record from a ConfigMap's data; `None` for one that is not a user record of `namespace`.
fn parse_record(namespace: &str, data: &BTreeMap<String, String>) -> Option<(String, UserRecord)> {
    if data.get("namespace").map(String::as_str) != Some(namespace) {
        return None;
    }
    let name = data.get("name")?.clone();
    let user_id = Uuid::parse_str(data.get("userID")?).ok()?;
    let deletion_policy = match data.get("deletionPolicy").map(String::as_str) {
        Some("Delete") => DeletionPolicy::Delete,
        _ => DeletionPolicy::Suspend,
    };
    let record = UserRecord {
        user_id,
        deletion_policy,
        suspended_by_delete: data.get("suspendedByDelete").cloned(),
    };
    Some((name, record))
}

fn record_data(namespace: &str, name: &str, record: &UserRecord) -> BTreeMap<String, String> {
    let mut data = BTreeMap::from([
        ("namespace".to_owned(), namespace.to_owned()),
        ("name".to_owned(), name.to_owned()),
        ("userID".to_owned(), record.user_id.to_string()),
        (
            "deletionPolicy".to_owned(),
            record.deletion_policy.as_str().to_owned(),
        ),
    ]);
    if let Some(updated_at) = &record.suspended_by_delete {
        data.insert("suspendedByDelete".to_owned(), updated_at.clone());
    }
    data
}

/// How long the first read waits for the records' watch to list them before it lists them itself.
const FIRST_LIST_WAIT: Duration = Duration::from_secs(2);
/// How long a write waits for its record to reach the watch (kube-apiserver sends it within milliseconds).
const WRITE_SEEN_WAIT: Duration = Duration::from_secs(3);

/// The records as a watch of the records namespace keeps them.
struct RecordCache {
    store: Store<ConfigMap>,
    listed: tokio::sync::watch::Receiver<bool>,
}

impl RecordCache {
    /// Starts the watch of the records (label-selected) on the current runtime.
    fn start(api: Api<ConfigMap>) -> Self {
        let (store, mut writer) = reflector::store();
        let (listed_tx, listed) = tokio::sync::watch::channel(false);
        let config = watcher::Config::default().labels(&format!("{USER_RECORD_LABEL}=true"));
        let events = watcher(api, config).default_backoff();
        tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => {
                        writer.apply_watcher_event(&event);
                        if matches!(event, watcher::Event::InitDone) {
                            listed_tx.send_replace(true);
                        }
                    }
                    Err(error) => tracing::warn!(%error, "watch of the user records failed; retrying"),
                }
            }
        });
        Self { store, listed }
    }

    /// Whether the watch has listed, waiting up to `wait` for it.
    async fn ready(&self, wait: Duration) -> bool {
        let mut listed = self.listed.clone();
        matches!(
            tokio::time::timeout(wait, listed.wait_for(|listed| *listed)).await,
            Ok(Ok(_))
        )
    }

    /// Waits until the cached record `name` is at `resource_version` (`None`: gone), or `WRITE_SEEN_WAIT` passed.
    async fn seen(&self, namespace: &str, name: &str, resource_version: Option<&str>) {
        let key = ObjectRef::new(name).within(namespace);
        let deadline = tokio::time::Instant::now() + WRITE_SEEN_WAIT;
        while tokio::time::Instant::now() < deadline {
            let cached = self.store.get(&key);
            let cached_version = cached
                .as_ref()
                .and_then(|c| c.metadata.resource_version.as_deref());
            if cached_version == resource_version {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::warn!(
            record = name,
            "a user record write did not reach the watch in time"
        );
    }
}

/// [`UserStore`] on kube-apiserver with the server's own credentials; records in `records_namespace`.
pub struct KubeUserStore {
    kube: kube::Client,
    records_namespace: String,
    cache: OnceCell<RecordCache>,
}

impl KubeUserStore {
    pub fn new(kube: kube::Client, records_namespace: impl Into<String>) -> Self {
        Self {
            kube,
            records_namespace: records_namespace.into(),
            cache: OnceCell::new(),
        }
    }

    /// The records' watch, started by the first read.
    async fn cache(&self) -> &RecordCache {
        self.cache
            .get_or_init(|| async { RecordCache::start(self.records_api()) })
            .await
    }

    /// The record ConfigMaps: from the watch once it has listed, else one list.
    async fn record_maps(&self) -> Result<Vec<ConfigMap>, ApiError> {
        let cache = self.cache().await;
        if cache.ready(FIRST_LIST_WAIT).await {
            return Ok(cache.store.state().iter().map(|c| (**c).clone()).collect());
        }
        let params = ListParams::default().labels(&format!("{USER_RECORD_LABEL}=true"));
        let list = bounded("read the user records", self.records_api().list(&params)).await?;
        Ok(list.items)
    }

    /// Waits until a started watch has the write of record `name` (no wait before the first read started it).
    async fn write_seen(&self, name: &str, resource_version: Option<&str>) {
        if let Some(cache) = self.cache.get() {
            cache.seen(&self.records_namespace, name, resource_version).await;
        }
    }

    fn records_api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.kube.clone(), &self.records_namespace)
    }

    fn secrets(&self, namespace: &str) -> Api<Secret> {
        Api::namespaced(self.kube.clone(), namespace)
    }
}

/// Deletes `name`, a 404 counting as done.
async fn delete_absent_ok<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map(drop),
    }
}

#[async_trait]
impl UserStore for KubeUserStore {
    async fn read_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ApiError> {
        let what = format!("read secret {namespace}/{name}");
        let found = bounded(&what, self.secrets(namespace).get_opt(name)).await?;
        Ok(found.map(|s| {
            s.data
                .unwrap_or_default()
                .into_iter()
                .map(|(key, bytes)| (key, bytes.0))
                .collect()
        }))
    }

    async fn create_secret(&self, namespace: &str, secret: Secret) -> Result<(), ApiError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let api = self.secrets(namespace);
        let create = async {
            match api.create(&PostParams::default(), &secret).await {
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                other => other.map(|_| true),
            }
        };
        if bounded(&format!("create secret {namespace}/{name}"), create).await? {
            Ok(())
        } else {
            // kube-apiserver's wording for a core object.
            Err(ApiError::new(
                409,
                "AlreadyExists",
                format!("secrets {name:?} already exists"),
            ))
        }
    }

    async fn delete_secret(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let api = self.secrets(namespace);
        bounded(
            &format!("delete secret {namespace}/{name}"),
            delete_absent_ok(&api, name),
        )
        .await
    }

    async fn records(&self, namespace: &str) -> Result<BTreeMap<String, UserRecord>, ApiError> {
        Ok(self
            .record_maps()
            .await?
            .into_iter()
            .filter_map(|c| {
                let config_name = c.metadata.name.clone().unwrap_or_default();
                let (name, record) = parse_record(namespace, c.data.as_ref()?)?;
                // A ConfigMap under another user's name (made by hand) does not apply.
                (record_name(namespace, &name) == config_name).then_some((name, record))
            })
            .collect())
    }

    async fn write_record(&self, namespace: &str, name: &str, record: &UserRecord) -> Result<(), ApiError> {
        let config_name = record_name(namespace, name);
        let what = format!("write the user record {config_name}");
        let api = self.records_api();
        if record.is_default() {
            bounded(&what, delete_absent_ok(&api, &config_name)).await?;
            self.write_seen(&config_name, None).await;
            return Ok(());
        }
        let mut config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(config_name.clone()),
                labels: Some(BTreeMap::from([(
                    USER_RECORD_LABEL.to_owned(),
                    "true".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(record_data(namespace, name, record)),
            ..ConfigMap::default()
        };
        // Read, not taken from the watch: a write must not fail on a version the watch has not caught up with.
        let written = match bounded(&what, api.get_opt(&config_name)).await? {
            Some(existing) => {
                config_map.metadata.resource_version = existing.metadata.resource_version;
                let params = PostParams::default();
                let replace = api.replace(&config_name, &params, &config_map);
                bounded(&what, replace).await?
            }
            None => bounded(&what, api.create(&PostParams::default(), &config_map)).await?,
        };
        self.write_seen(&config_name, written.metadata.resource_version.as_deref())
            .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(status: &str, updated_at: &str) -> User {
        User {
            id: Uuid::from_u128(7),
            username: "alice".to_owned(),
            status: status.to_owned(),
            updated_at: updated_at.to_owned(),
            ..User::default()
        }
    }

    fn deleted_at(updated_at: &str) -> UserRecord {
        UserRecord {
            user_id: Uuid::from_u128(7),
            deletion_policy: DeletionPolicy::Suspend,
            suspended_by_delete: Some(updated_at.to_owned()),
        }
    }

    #[test]
    fn a_user_suspended_by_a_delete_is_hidden_until_coder_changes_it() {
        let record = deleted_at("2026-12-07T01:00:00Z");
        assert!(record.hides(&user("suspended", "2026-12-07T01:00:00Z")));
        // Activated in Coder, or suspended again later, or changed in any other way: shown.
        assert!(!record.hides(&user("active", "2026-12-07T01:05:00Z")));
        assert!(!record.hides(&user("suspended", "2026-12-07T01:09:00Z")));
        // Another user of the same name.
        let mut other = user("suspended", "2026-12-07T01:00:00Z");
        other.id = Uuid::from_u128(8);
        assert!(!record.hides(&other));
        assert!(!UserRecord::default().hides(&user("suspended", "")));
    }

    #[test]
    fn records_round_trip_and_foreign_ones_do_not_apply() {
        let mut record = deleted_at("t");
        record.deletion_policy = DeletionPolicy::Delete;
        let data = record_data("coder", "alice", &record);
        assert_eq!(parse_record("coder", &data), Some(("alice".to_owned(), record)));
        assert_eq!(parse_record("other", &data), None);
        let mut broken = data.clone();
        broken.insert("userID".to_owned(), "not-a-uuid".to_owned());
        assert_eq!(parse_record("coder", &broken), None);
    }

    #[test]
    fn only_a_record_with_something_to_keep_is_kept() {
        assert!(UserRecord::default().is_default());
        assert!(!deleted_at("t").is_default());
        let policy = UserRecord {
            deletion_policy: DeletionPolicy::Delete,
            ..UserRecord::default()
        };
        assert!(!policy.is_default());
    }

    #[test]
    fn record_names_are_short_and_differ_per_user_and_namespace() {
        let name = record_name("coder", "alice");
        assert!(name.starts_with(RECORD_PREFIX) && name.len() <= 63, "{name}");
        assert_ne!(name, record_name("coder", "bob"));
        assert_ne!(name, record_name("other", "alice"));
    }
}
