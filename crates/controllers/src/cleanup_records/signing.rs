//! Signed cleanup records: each record carries an HMAC-SHA256 of its contents and of the time the operator first
//! wrote it (`writtenAt`), made with a key only the operator reads (the Secret `coder-k8s-cleanup-records-key` in the
//! operator namespace, created with 32 random bytes when missing). A record someone else wrote or changed — anyone
//! with ConfigMap write access in that namespace — fails the check, so it can neither aim the sweep at other Coder
//! resources nor point an object at them; a signed record saved and re-created later keeps its old signed time, which
//! no longer matches the time the API server stored it, so it is not taken for a recent one.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ObjectMeta, PostParams};
use sha2::{Digest, Sha256};

use super::record::Record;
use crate::labels::{FIELD_MANAGER, MANAGED_BY};

/// The Secret that holds the signing key, in the operator namespace.
pub const KEY_SECRET: &str = "coder-k8s-cleanup-records-key";
/// Its data key.
pub const KEY_DATA: &str = "key";
/// The record's data key that holds the signature.
pub const SIGNATURE: &str = "signature";
/// The record's data key that holds when the operator first wrote it (RFC 3339, covered by the signature).
pub const WRITTEN_AT: &str = "writtenAt";
/// How far the signed `writtenAt` and the ConfigMap's `creationTimestamp` may lie apart (the operator's and the API
/// server's clocks, and a write before the watch cache showed the first one) for the record to count as written then.
pub const WRITTEN_AT_BOUND: SignedDuration = SignedDuration::from_secs(60);

/// A record whose signature checks out, with the signed time it was first written. `written_at` is `None` for a
/// record signed before records carried that time: its contents are the operator's, but not when it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    pub record: Record,
    pub written_at: Option<Timestamp>,
}

impl Verified {
    /// The time the record was written, when the ConfigMap holding it was stored then (`stored`, its
    /// `creationTimestamp`): a signed time far from it means the ConfigMap was re-created from a saved copy, and
    /// such a record proves nothing about what Coder created after it. `None` also without a signed time.
    pub fn trusted_written(&self, stored: Option<&Time>) -> Option<Time> {
        let (written, stored) = (self.written_at?, stored?.0);
        let apart = written.duration_since(stored).abs();
        (apart <= WRITTEN_AT_BOUND).then_some(Time(written))
    }
}

const BLOCK: usize = 64;

/// The operator's record-signing key, and when its Secret was created (the operator's first start: no object
/// older than that can have a signed record). Never logged (no `Debug`).
pub struct SigningKey {
    bytes: [u8; 32],
    created: Option<Timestamp>,
}

impl SigningKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        Self { bytes, created: None }
    }

    /// When the key's Secret was created, as the API server recorded it.
    pub fn created(&self) -> Option<Timestamp> {
        self.created
    }

    /// The signature of `record` written at `written_at`, as lowercase hex. Without a time it is the signature
    /// records had before they carried one (still read, never written).
    pub fn sign(&self, record: &Record, written_at: Option<Timestamp>) -> String {
        hmac_sha256(&self.bytes, signed_text(record, written_at).as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `signature` is this key's signature of `record` and `written_at` (compared in constant time).
    pub fn verify(&self, record: &Record, written_at: Option<Timestamp>, signature: &str) -> bool {
        let expected = self.sign(record, written_at);
        expected.len() == signature.len()
            && expected
                .bytes()
                .zip(signature.bytes())
                .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                == 0
    }

    /// The record in `config_map` when it parses and its signature checks out. A `writtenAt` that is not a time
    /// fails the check.
    pub fn verified(&self, config_map: &ConfigMap) -> Option<Verified> {
        let record = Record::from_config_map(config_map).ok()?;
        let data = config_map.data.as_ref()?;
        let written_at = match data.get(WRITTEN_AT) {
            Some(text) => Some(text.trim().parse::<Timestamp>().ok()?),
            None => None,
        };
        let signature = data.get(SIGNATURE)?;
        self.verify(&record, written_at, signature)
            .then_some(Verified { record, written_at })
    }

    /// The record's ConfigMap, signed together with `written_at` (kept to the second, as it is stored).
    pub fn signed_config_map(&self, record: &Record, written_at: Timestamp, namespace: &str) -> ConfigMap {
        let written_at = to_the_second(written_at);
        let mut config_map = record.to_config_map(namespace);
        let data = config_map.data.get_or_insert_with(BTreeMap::new);
        data.insert(WRITTEN_AT.to_owned(), written_at.to_string());
        data.insert(SIGNATURE.to_owned(), self.sign(record, Some(written_at)));
        config_map
    }
}

/// What the signature covers: the record's fields, then its time when it has one.
fn signed_text(record: &Record, written_at: Option<Timestamp>) -> String {
    match written_at {
        Some(time) => format!("{}\n{WRITTEN_AT}\n{time}", record.canonical()),
        None => record.canonical(),
    }
}

fn to_the_second(time: Timestamp) -> Timestamp {
    Timestamp::from_second(time.as_second()).unwrap_or(time)
}

/// HMAC-SHA256 (RFC 2104) of `message` with a key shorter than the block size.
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut padded = [0u8; BLOCK];
    padded[..key.len()].copy_from_slice(key);
    let inner_key: Vec<u8> = padded.iter().map(|b| b ^ 0x36).collect();
    let outer_key: Vec<u8> = padded.iter().map(|b| b ^ 0x5c).collect();
    let inner = Sha256::new()
        .chain_update(&inner_key)
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(&outer_key)
        .chain_update(inner)
        .finalize()
        .into()
}

/// The signing key of the process, loaded once.
#[derive(Default)]
pub struct RecordKey {
    cell: tokio::sync::OnceCell<Arc<SigningKey>>,
}

impl RecordKey {
    /// The signing key: read from its Secret in `namespace`, or created there with 32 random bytes when missing.
    /// Loaded once per process. A Secret of that name without a 32-byte key is an error (it is never overwritten).
    pub async fn get(&self, client: &kube::Client, namespace: &str) -> Result<Arc<SigningKey>, kube::Error> {
        self.cell
            .get_or_try_init(|| async {
                let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
                let secret = match api.get_opt(KEY_SECRET).await? {
                    Some(secret) => secret,
                    None => create(&api).await?,
                };
                parse(&secret).map(Arc::new).ok_or_else(|| {
                    kube::Error::Service(
                        format!(
                            "Secret {KEY_SECRET} has no 32-byte {KEY_DATA:?}; cleanup records cannot be signed"
                        )
                        .into(),
                    )
                })
            })
            .await
            .cloned()
    }
}

fn parse(secret: &Secret) -> Option<SigningKey> {
    let bytes = &secret.data.as_ref()?.get(KEY_DATA)?.0;
    let bytes: [u8; 32] = bytes.as_slice().try_into().ok()?;
    let created = secret.metadata.creation_timestamp.as_ref().map(|t| t.0);
    Some(SigningKey { bytes, created })
}

async fn create(api: &Api<Secret>) -> Result<Secret, kube::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| kube::Error::Service(format!("no random bytes: {e}").into()))?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(KEY_SECRET.to_owned()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                MANAGED_BY.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(
            KEY_DATA.to_owned(),
            ByteString(bytes.to_vec()),
        )])),
        ..Secret::default()
    };
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api.create(&params, &secret).await {
        Ok(created) => Ok(created),
        // Another replica created it first: use theirs.
        Err(kube::Error::Api(status)) if status.code == 409 => api.get(KEY_SECRET).await,
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::{Created, RecordKind};
    use super::*;

    fn record() -> Record {
        Record {
            kind: RecordKind::AIProvider,
            namespace: "team".to_owned(),
            name: "openai".to_owned(),
            uid: "3f2c1a9e-1b2c-4d5e-8f90-0123456789ab".to_owned(),
            deployment_id: "d-1".to_owned(),
            created: Created::Provider {
                name: "openai".to_owned(),
                id: Some("p-1".to_owned()),
            },
        }
    }

    #[test]
    fn hmac_matches_the_rfc_4231_vector() {
        // RFC 4231 test case 2 uses a 4-byte key; padded with zeros to 32 bytes it is the same HMAC key.
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let mac = hmac_sha256(&key, b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_signed_record_verifies_and_any_change_breaks_it() {
        let key = SigningKey::new([7; 32]);
        let written = at("2026-01-01T12:00:00Z");
        let config_map = key.signed_config_map(&record(), written, "coder-system");
        let verified = Verified {
            record: record(),
            written_at: Some(written),
        };
        assert_eq!(key.verified(&config_map), Some(verified));
        let mut retargeted = config_map.clone();
        retargeted
            .data
            .as_mut()
            .unwrap()
            .insert("providerID".to_owned(), "p-2".to_owned());
        assert_eq!(key.verified(&retargeted), None);
        let mut unsigned = config_map.clone();
        unsigned.data.as_mut().unwrap().remove(SIGNATURE);
        assert_eq!(key.verified(&unsigned), None);
        assert_eq!(
            SigningKey::new([8; 32]).verified(&config_map),
            None,
            "another key"
        );
    }

    #[test]
    fn the_signature_covers_when_the_record_was_written() {
        let key = SigningKey::new([7; 32]);
        let config_map = key.signed_config_map(&record(), at("2026-01-01T12:00:00.750Z"), "coder-system");
        assert_eq!(
            config_map.data.as_ref().unwrap()[WRITTEN_AT],
            "2026-01-01T12:00:00Z",
            "stored to the second"
        );
        let mut moved = config_map.clone();
        moved
            .data
            .as_mut()
            .unwrap()
            .insert(WRITTEN_AT.to_owned(), "2026-06-01T12:00:00Z".to_owned());
        assert_eq!(key.verified(&moved), None, "a newer time is not signed");
        let mut dropped = config_map.clone();
        dropped.data.as_mut().unwrap().remove(WRITTEN_AT);
        assert_eq!(key.verified(&dropped), None, "the time cannot be dropped");
        let mut garbage = config_map;
        garbage
            .data
            .as_mut()
            .unwrap()
            .insert(WRITTEN_AT.to_owned(), "yesterday".to_owned());
        assert_eq!(key.verified(&garbage), None);
    }

    #[test]
    fn a_record_signed_before_records_carried_a_time_verifies_without_one() {
        let key = SigningKey::new([7; 32]);
        let mut config_map = record().to_config_map("coder-system");
        config_map
            .data
            .as_mut()
            .unwrap()
            .insert(SIGNATURE.to_owned(), key.sign(&record(), None));
        let verified = key.verified(&config_map).unwrap();
        assert_eq!((verified.record, verified.written_at), (record(), None));
        let stored = Time(at("2026-01-01T12:00:00Z"));
        let legacy = Verified {
            record: record(),
            written_at: None,
        };
        assert_eq!(legacy.trusted_written(Some(&stored)), None, "no signed time");
    }

    #[test]
    fn a_record_re_created_from_a_saved_copy_is_not_recent() {
        let verified = Verified {
            record: record(),
            written_at: Some(at("2026-01-01T12:00:00Z")),
        };
        let stored = |text: &str| Time(at(text));
        assert_eq!(
            verified.trusted_written(Some(&stored("2026-01-01T12:00:01Z"))),
            Some(stored("2026-01-01T12:00:00Z")),
            "stored when it was signed"
        );
        assert!(
            verified
                .trusted_written(Some(&stored("2026-01-01T11:59:20Z")))
                .is_some(),
            "clocks a little apart"
        );
        assert_eq!(
            verified.trusted_written(Some(&stored("2026-01-01T14:00:00Z"))),
            None,
            "re-created two hours later"
        );
        assert_eq!(
            verified.trusted_written(Some(&stored("2026-01-01T11:00:00Z"))),
            None,
            "a signed time after the ConfigMap existed is not the first write"
        );
        assert_eq!(verified.trusted_written(None), None);
    }
}
