//! Template calls of [`CoderClient`]: list, get by ID or name, create, update the metadata, delete, and the access
//! list (premium: Template RBAC).

use reqwest::Method;
use uuid::Uuid;

use super::transport::JsonAnswer;
use super::{CoderClient, Result};
use crate::error::Error;
use crate::types::template_acl::{TemplateAcl, UpdateTemplateAcl};
use crate::types::templates::{CreateTemplateRequest, Template, UpdateTemplateMeta};

impl CoderClient {
    /// `GET /api/v2/organizations/{organization}/templates`.
    pub async fn templates(&self, organization: &str) -> Result<Vec<Template>> {
        self.get_json(&["organizations", organization, "templates"], &[])
            .await
    }

    /// [`CoderClient::templates`], undecoded: for a caller that skips decoding an answer equal to the last one.
    pub async fn templates_answer(&self, organization: &str) -> Result<JsonAnswer<Vec<Template>>> {
        self.get_answer(&["organizations", organization, "templates"], &[])
            .await
    }

    /// `GET /api/v2/organizations/{organization}/templates/{name}`.
    pub async fn template_by_name(&self, organization: &str, name: &str) -> Result<Template> {
        self.get_json(&["organizations", organization, "templates", name], &[])
            .await
    }

    /// `GET /api/v2/templates/{id}`.
    pub async fn template(&self, id: Uuid) -> Result<Template> {
        self.get_json(&["templates", &id.to_string()], &[]).await
    }

    /// `POST /api/v2/organizations/{organization}/templates` (201).
    pub async fn create_template(
        &self,
        organization: &str,
        request: &CreateTemplateRequest,
    ) -> Result<Template> {
        self.send_json(
            Method::POST,
            &["organizations", organization, "templates"],
            request,
        )
        .await
    }

    /// `DELETE /api/v2/templates/{id}` (200).
    pub async fn delete_template(&self, id: Uuid) -> Result<()> {
        self.send_no_content::<()>(Method::DELETE, &["templates", &id.to_string()], None)
            .await
    }

    // Template metadata updates (aggregated API, codertemplates).
    /// `PATCH /api/v2/templates/{id}` with the whole settings body (build it with
    /// [`UpdateTemplateMeta::from_template`]: Coder resets what a body leaves out): the updated template, or
    /// `None` when Coder answers 304 (nothing changed).
    pub async fn update_template_meta(
        &self,
        id: Uuid,
        request: &UpdateTemplateMeta,
    ) -> Result<Option<Template>> {
        match self
            .send_json(Method::PATCH, &["templates", &id.to_string()], request)
            .await
        {
            Ok(template) => Ok(Some(template)),
            Err(Error::Rejected { status: 304, .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    // Template access lists (aggregated API, codertemplates `spec.acl`).
    /// `GET /api/v2/templates/{id}/acl`. Unlicensed, Coder answers 403 (enterprise) or `Route not found.`
    /// (open source).
    pub async fn template_acl(&self, id: Uuid) -> Result<TemplateAcl> {
        self.get_json(&["templates", &id.to_string(), "acl"], &[]).await
    }

    /// `PATCH /api/v2/templates/{id}/acl` (200, a message): merges `update` into the stored list (see
    /// [`UpdateTemplateAcl`]).
    pub async fn update_template_acl(&self, id: Uuid, update: &UpdateTemplateAcl) -> Result<()> {
        self.send_no_content(
            Method::PATCH,
            &["templates", &id.to_string(), "acl"],
            Some(update),
        )
        .await
    }
}
