//! Provisioner key calls of [`CoderClient`]: list, create, delete, and ensure (reuse or create, then
//! learn the ID); and the organization's provisioner jobs (the build queue).

use std::collections::BTreeMap;

use reqwest::Method;

use super::{CoderClient, Result};
use crate::error::{Error, UnavailableReason};
use crate::secret::Secret;
use crate::types::jobs::{JobStatus, ProvisionerJob};
use crate::types::provisioner_keys::{
    CreateProvisionerKeyRequest, CreateProvisionerKeyResponse, EnsuredProvisionerKey, ProvisionerKey,
};

impl CoderClient {
    /// `GET /api/v2/organizations/{organization}/provisionerjobs?status=<statuses>&limit=<limit>`: the organization's
    /// jobs in these states, newest first (Coder's default limit is 50; ask for as many as a queue can hold).
    pub async fn provisioner_jobs(
        &self,
        organization: &str,
        statuses: &[JobStatus],
        limit: u32,
    ) -> Result<Vec<ProvisionerJob>> {
        let statuses: Vec<String> = statuses
            .iter()
            .filter_map(|s| serde_json::to_value(s).ok()?.as_str().map(str::to_owned))
            .collect();
        let statuses = statuses.join(",");
        let limit = limit.max(1).to_string();
        self.get_json(
            &["organizations", organization, "provisionerjobs"],
            &[("status", statuses.as_str()), ("limit", limit.as_str())],
        )
        .await
    }

    /// `GET /api/v2/organizations/{organization}/provisionerkeys` (reserved keys excluded).
    pub async fn provisioner_keys(&self, organization: &str) -> Result<Vec<ProvisionerKey>> {
        self.get_json(&["organizations", organization, "provisionerkeys"], &[])
            .await
    }

    /// `POST /api/v2/organizations/{organization}/provisionerkeys` (201 `{"key"}`, no ID: list the keys
    /// to learn it, or use [`CoderClient::ensure_provisioner_key`]).
    pub async fn create_provisioner_key(
        &self,
        organization: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<Secret> {
        let body = CreateProvisionerKeyRequest {
            name: name.to_owned(),
            tags: tags.clone(),
        };
        let created: CreateProvisionerKeyResponse = self
            .send_json(
                Method::POST,
                &["organizations", organization, "provisionerkeys"],
                &body,
            )
            .await?;
        Ok(created.key)
    }

    /// `DELETE /api/v2/organizations/{organization}/provisionerkeys/{name}` (204). An unknown key is
    /// [`Error::NotFound`]; see [`crate::found`].
    pub async fn delete_provisioner_key(&self, organization: &str, name: &str) -> Result<()> {
        self.send_no_content::<()>(
            Method::DELETE,
            &["organizations", organization, "provisionerkeys", name],
            None,
        )
        .await
    }

    /// Reuses the key named `name` (case-insensitive, as Coder's unique index) or creates it with
    /// `tags`, then lists the keys to learn its ID. A reused key keeps its tags (the caller decides
    /// about drift) and has no secret. A 409 from a concurrent create is resolved by listing again.
    pub async fn ensure_provisioner_key(
        &self,
        organization: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<EnsuredProvisionerKey> {
        let find = |keys: Vec<ProvisionerKey>| keys.into_iter().find(|k| k.name.eq_ignore_ascii_case(name));
        if let Some(key) = find(self.provisioner_keys(organization).await?) {
            return Ok(EnsuredProvisionerKey { key, secret: None });
        }
        let secret = match self.create_provisioner_key(organization, name, tags).await {
            Ok(secret) => Some(secret),
            Err(Error::Conflict { .. }) => None,
            Err(e) => return Err(e),
        };
        match find(self.provisioner_keys(organization).await?) {
            Some(key) => Ok(EnsuredProvisionerKey { key, secret }),
            None => Err(Error::unavailable(
                UnavailableReason::Transport,
                "the provisioner key was created but is not listed",
            )),
        }
    }
}
