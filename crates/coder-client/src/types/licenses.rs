//! `GET/POST /api/v2/licenses`.

use serde::{Deserialize, Serialize};

use crate::secret::Secret;

/// `License`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct License {
    /// Integer ID.
    pub id: i32,
    /// UUID.
    pub uuid: uuid::Uuid,
    /// Upload time (RFC 3339).
    pub uploaded_at: String,
    /// The JWT claims, verbatim.
    pub claims: serde_json::Value,
}

/// `POST /api/v2/licenses` body. The JWT is a [`Secret`] so it never shows in logs.
#[derive(Debug, Clone, Serialize)]
pub struct AddLicenseRequest {
    /// The license JWT.
    pub license: Secret,
}

impl License {
    /// Whether the message of an upload error means "this license is already applied"
    /// (Coder answers a duplicate JWT with 500 `licenses_jwt_key`).
    pub fn is_duplicate_message(message: &str) -> bool {
        let m = message.to_ascii_lowercase();
        m.contains("licenses_jwt_key") || m.contains("duplicate key") || m.contains("already exists")
    }
}
