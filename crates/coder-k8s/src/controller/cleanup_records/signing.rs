//! Signed cleanup records: each record carries an HMAC-SHA256 of its contents, made with a key only the operator
//! reads (the Secret `coder-k8s-cleanup-records-key` in the operator namespace, created with 32 random bytes when
//! missing). A record someone else wrote or changed — anyone with ConfigMap write access in that namespace — fails
//! the check, so it can neither aim the sweep at other Coder resources nor point an object at them.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ObjectMeta, PostParams};
use sha2::{Digest, Sha256};

use super::record::Record;
use crate::controller::apply::FIELD_MANAGER;
use crate::controller::context::Context;
use crate::controller::labels::MANAGED_BY;

/// The Secret that holds the signing key, in the operator namespace.
pub const KEY_SECRET: &str = "coder-k8s-cleanup-records-key";
/// Its data key.
pub const KEY_DATA: &str = "key";
/// The record's data key that holds the signature.
pub const SIGNATURE: &str = "signature";

const BLOCK: usize = 64;

/// The operator's record-signing key. Never logged (no `Debug`).
pub struct SigningKey([u8; 32]);

impl SigningKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The signature of `record`, as lowercase hex.
    pub fn sign(&self, record: &Record) -> String {
        hmac_sha256(&self.0, record.canonical().as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `signature` is this key's signature of `record` (compared in constant time).
    pub fn verify(&self, record: &Record, signature: &str) -> bool {
        let expected = self.sign(record);
        expected.len() == signature.len()
            && expected
                .bytes()
                .zip(signature.bytes())
                .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                == 0
    }

    /// The record in `config_map` when it parses and its signature checks out.
    pub fn verified(&self, config_map: &ConfigMap) -> Option<Record> {
        let record = Record::from_config_map(config_map).ok()?;
        let signature = config_map.data.as_ref()?.get(SIGNATURE)?;
        self.verify(&record, signature).then_some(record)
    }

    /// The record's ConfigMap, signed.
    pub fn signed_config_map(&self, record: &Record, namespace: &str) -> ConfigMap {
        let mut config_map = record.to_config_map(namespace);
        config_map
            .data
            .get_or_insert_with(BTreeMap::new)
            .insert(SIGNATURE.to_owned(), self.sign(record));
        config_map
    }
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

/// The signing key: read from its Secret, or created there with 32 random bytes when missing. Loaded once per
/// process. A Secret of that name without a 32-byte key is an error (it is never overwritten).
pub async fn key(ctx: &Context) -> Result<Arc<SigningKey>, kube::Error> {
    ctx.record_key
        .get_or_try_init(|| async {
            let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.settings.operator_namespace);
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

fn parse(secret: &Secret) -> Option<SigningKey> {
    let bytes = &secret.data.as_ref()?.get(KEY_DATA)?.0;
    let key: [u8; 32] = bytes.as_slice().try_into().ok()?;
    Some(SigningKey(key))
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

    #[test]
    fn a_signed_record_verifies_and_any_change_breaks_it() {
        let key = SigningKey::new([7; 32]);
        let config_map = key.signed_config_map(&record(), "coder-system");
        assert_eq!(key.verified(&config_map), Some(record()));
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
}
