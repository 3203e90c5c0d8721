//! File calls of [`CoderClient`]: uploading a template archive (tar or zip).

use bytes::Bytes;
use reqwest::{Method, StatusCode};

use super::transport::Body;
use super::{CoderClient, Result};
use crate::types::files::{ArchiveKind, UploadResponse, UploadedFile};

impl CoderClient {
    /// `POST /api/v2/files` with a tar or zip archive; 201 new, 200 already uploaded.
    pub async fn upload_file(&self, kind: ArchiveKind, archive: Bytes) -> Result<UploadedFile> {
        let url = self.endpoint(&["files"])?;
        let body = Body::Raw {
            bytes: archive,
            content_type: kind.content_type(),
        };
        let answer = self.execute(Method::POST, url, body).await?;
        let parsed: UploadResponse = Self::decode(&answer.body)?;
        Ok(UploadedFile {
            id: parsed.hash,
            created: answer.status == StatusCode::CREATED,
        })
    }
}
