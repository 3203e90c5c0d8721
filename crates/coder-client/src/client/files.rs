//! File calls of [`CoderClient`]: uploading a template archive (tar or zip) and downloading one as zip.

use bytes::Bytes;
use reqwest::{Method, StatusCode};
use uuid::Uuid;

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

    // Template source downloads (aggregated API, codertemplates).
    /// `GET /api/v2/files/{id}?format=zip`: the archive as zip (Coder converts a stored tar), at most `limit`
    /// bytes ([`crate::Error::BodyTooLarge`] beyond).
    pub async fn download_file_zip(&self, id: Uuid, limit: usize) -> Result<Bytes> {
        let mut url = self.endpoint(&["files", &id.to_string()])?;
        url.query_pairs_mut().append_pair("format", "zip");
        self.get_bytes_capped(url, limit).await
    }
}
