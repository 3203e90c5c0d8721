//! `/api/v2/organizations/{organization}/provisionerkeys`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::secret::Secret;

/// `ProvisionerKey` (metadata; the secret is returned only by create).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProvisionerKey {
    /// ID.
    pub id: Uuid,
    /// Created (RFC 3339).
    pub created_at: String,
    /// The organization ID (the JSON field is `organization`).
    pub organization: Uuid,
    /// Name.
    pub name: String,
    /// Tags given to daemons using this key.
    pub tags: BTreeMap<String, String>,
}

/// `POST …/provisionerkeys` body.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateProvisionerKeyRequest {
    /// Name (≤ 64 chars, not `built-in`/`user-auth`/`psk`).
    pub name: String,
    /// Tags.
    pub tags: BTreeMap<String, String>,
}

/// `POST …/provisionerkeys` answer: `{"key": "<secret>"}` (no ID).
#[derive(Debug, Clone, Deserialize)]
pub struct CreateProvisionerKeyResponse {
    /// The 43-char secret, shown once.
    pub key: Secret,
}

/// Result of [`crate::CoderClient::ensure_provisioner_key`].
#[derive(Debug, Clone)]
pub struct EnsuredProvisionerKey {
    /// The key's metadata (with its ID).
    pub key: ProvisionerKey,
    /// The secret when the key was created by this call; `None` when an existing key was reused.
    pub secret: Option<Secret>,
}

impl EnsuredProvisionerKey {
    /// Whether this call created the key.
    pub fn created(&self) -> bool {
        self.secret.is_some()
    }
}
