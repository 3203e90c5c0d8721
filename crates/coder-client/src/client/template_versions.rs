//! Template version calls of [`CoderClient`]: create, get, list, the variables, archive and promote. Their
//! import logs are in `logs`.

use reqwest::Method;
use serde::Serialize;
use uuid::Uuid;

use super::{CoderClient, Result};
use crate::types::template_versions::{
    ArchiveTemplateVersionsResponse, CreateTemplateVersionRequest, TemplateVersion, TemplateVersionVariable,
};

impl CoderClient {
    /// `POST /api/v2/organizations/{organization}/templateversions` (201, job pending).
    pub async fn create_template_version(
        &self,
        organization: &str,
        request: &CreateTemplateVersionRequest,
    ) -> Result<TemplateVersion> {
        self.send_json(
            Method::POST,
            &["organizations", organization, "templateversions"],
            request,
        )
        .await
    }

    /// `GET /api/v2/templates/{template}/versions/{name}`.
    pub async fn template_version_by_name(&self, template: Uuid, name: &str) -> Result<TemplateVersion> {
        self.get_json(&["templates", &template.to_string(), "versions", name], &[])
            .await
    }

    /// `GET /api/v2/templateversions/{id}`.
    pub async fn template_version(&self, id: Uuid) -> Result<TemplateVersion> {
        self.get_json(&["templateversions", &id.to_string()], &[]).await
    }

    /// `GET /api/v2/templateversions/{id}/variables`: the Terraform variables the version declares and the values
    /// its import used (sensitive ones redacted). Coder answers 403 `Template version job has not finished` while
    /// the import runs.
    pub async fn template_version_variables(&self, id: Uuid) -> Result<Vec<TemplateVersionVariable>> {
        self.get_json(&["templateversions", &id.to_string(), "variables"], &[])
            .await
    }

    /// `GET /api/v2/templates/{template}/versions`, with archived versions when asked.
    pub async fn template_versions(
        &self,
        template: Uuid,
        include_archived: bool,
    ) -> Result<Vec<TemplateVersion>> {
        let query: &[(&str, &str)] = if include_archived {
            &[("include_archived", "true")]
        } else {
            &[]
        };
        self.get_json(&["templates", &template.to_string(), "versions"], query)
            .await
    }

    /// `POST /api/v2/templateversions/{id}/archive` (200, a JSON string).
    pub async fn archive_template_version(&self, id: Uuid) -> Result<()> {
        self.send_no_content::<()>(
            Method::POST,
            &["templateversions", &id.to_string(), "archive"],
            None,
        )
        .await
    }

    /// `POST /api/v2/templates/{template}/versions/archive` (`all: false` archives only failed unused
    /// versions).
    pub async fn archive_unused_template_versions(
        &self,
        template: Uuid,
        all: bool,
    ) -> Result<ArchiveTemplateVersionsResponse> {
        #[derive(Serialize)]
        struct Archive {
            all: bool,
        }
        self.send_json(
            Method::POST,
            &["templates", &template.to_string(), "versions", "archive"],
            &Archive { all },
        )
        .await
    }

    /// Promote: `PATCH /api/v2/templates/{template}/versions` `{"id": version}` (200). Only successfully
    /// built versions can be promoted (403 otherwise).
    pub async fn promote_template_version(&self, template: Uuid, version: Uuid) -> Result<()> {
        #[derive(Serialize)]
        struct Promote {
            id: Uuid,
        }
        self.send_no_content(
            Method::PATCH,
            &["templates", &template.to_string(), "versions"],
            Some(&Promote { id: version }),
        )
        .await
    }
}
