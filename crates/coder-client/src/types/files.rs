//! `POST /api/v2/files`.

use serde::Deserialize;
use uuid::Uuid;

/// Archive format of an upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveKind {
    /// `application/x-tar` (ustar).
    Tar,
    /// `application/zip`.
    Zip,
}

impl ArchiveKind {
    /// The content type sent.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Tar => "application/x-tar",
            Self::Zip => "application/zip",
        }
    }
}

/// Upload answer `{"hash": "<file id>"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadedFile {
    /// The file ID (JSON field `hash`).
    pub id: Uuid,
    /// `true` for 201 (new), `false` for 200 (same content already uploaded).
    pub created: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct UploadResponse {
    pub(crate) hash: Uuid,
}
