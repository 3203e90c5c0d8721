//! Workspace and workspace build calls of [`CoderClient`]: list, get, create, start builds, the workspace's schedule
//! and update settings, and the rich parameters of builds (with the parameters a template version asks for, which a
//! build's values are checked against). Build logs are in `logs`.

use reqwest::Method;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::{CoderClient, Result};
use crate::types::builds::{CreateWorkspaceBuildRequest, WorkspaceBuild};
use crate::types::parameters::TemplateVersionParameter;
use crate::types::workspaces::{
    CreateWorkspaceRequest, RichParameterValue, UpdateWorkspaceAutomaticUpdatesRequest,
    UpdateWorkspaceAutostartRequest, UpdateWorkspaceTtlRequest, Workspace, WorkspaceListing, WorkspacesPage,
};

impl CoderClient {
    /// `GET /api/v2/workspaces?q=…` (one page: `limit`/`offset` when non-zero).
    pub async fn workspaces(&self, q: &str, limit: u32, offset: u32) -> Result<WorkspacesPage> {
        self.workspace_page(q, limit, offset).await
    }

    /// [`CoderClient::workspaces`], each workspace decoded as the [`WorkspaceListing`] a list shows: the same call,
    /// a fraction of the allocations.
    pub async fn workspace_listings(
        &self,
        q: &str,
        limit: u32,
        offset: u32,
    ) -> Result<WorkspacesPage<WorkspaceListing>> {
        self.workspace_page(q, limit, offset).await
    }

    async fn workspace_page<W: DeserializeOwned + Default>(
        &self,
        q: &str,
        limit: u32,
        offset: u32,
    ) -> Result<WorkspacesPage<W>> {
        self.get_json(
            &["workspaces"],
            &page_query(q, &limit.to_string(), &offset.to_string()),
        )
        .await
    }

    /// `GET /api/v2/workspaces/{id}`.
    pub async fn workspace(&self, id: Uuid) -> Result<Workspace> {
        self.get_json(&["workspaces", &id.to_string()], &[]).await
    }

    /// `GET /api/v2/workspaces/{id}?include_deleted=true`: a deleted workspace is answered too (its latest build is
    /// the delete build).
    pub async fn workspace_including_deleted(&self, id: Uuid) -> Result<Workspace> {
        self.get_json(&["workspaces", &id.to_string()], &[("include_deleted", "true")])
            .await
    }

    /// `GET /api/v2/users/{owner}/workspace/{name}?include_deleted=true`.
    pub async fn workspace_by_owner_and_name_including_deleted(
        &self,
        owner: &str,
        name: &str,
    ) -> Result<Workspace> {
        self.get_json(
            &["users", owner, "workspace", name],
            &[("include_deleted", "true")],
        )
        .await
    }

    /// `PATCH /api/v2/workspacebuilds/{id}/cancel?expect_status=…`: Coder cancels only while the build's job has
    /// that status (`pending` or `running`).
    pub async fn cancel_workspace_build(&self, id: Uuid, expect_status: &str) -> Result<()> {
        self.send_no_content_with_query::<()>(
            Method::PATCH,
            &["workspacebuilds", &id.to_string(), "cancel"],
            &[("expect_status", expect_status)],
            None,
        )
        .await
    }

    /// `GET /api/v2/workspaces/{id}/builds?limit=…`: the newest `limit` builds, newest first.
    pub async fn newest_workspace_builds(&self, workspace: Uuid, limit: u32) -> Result<Vec<WorkspaceBuild>> {
        let limit = limit.to_string();
        self.get_json(
            &["workspaces", &workspace.to_string(), "builds"],
            &[("limit", &limit)],
        )
        .await
    }

    /// `GET /api/v2/users/{owner}/workspace/{name}`.
    pub async fn workspace_by_owner_and_name(&self, owner: &str, name: &str) -> Result<Workspace> {
        self.get_json(&["users", owner, "workspace", name], &[]).await
    }

    /// `POST /api/v2/users/{owner}/workspaces` (201; the first `start` build is queued).
    pub async fn create_workspace(&self, owner: &str, request: &CreateWorkspaceRequest) -> Result<Workspace> {
        self.create_workspace_redacting(owner, request, &[]).await
    }

    /// [`Self::create_workspace`] whose error text never holds any of `redact` (parameter values from Secrets).
    pub async fn create_workspace_redacting(
        &self,
        owner: &str,
        request: &CreateWorkspaceRequest,
        redact: &[&str],
    ) -> Result<Workspace> {
        self.send_json_redacting(Method::POST, &["users", owner, "workspaces"], request, redact)
            .await
    }

    /// `POST /api/v2/workspaces/{id}/builds` (201). 409 while a build is active.
    pub async fn create_workspace_build(
        &self,
        workspace: Uuid,
        request: &CreateWorkspaceBuildRequest,
    ) -> Result<WorkspaceBuild> {
        self.create_workspace_build_redacting(workspace, request, &[])
            .await
    }

    /// [`Self::create_workspace_build`] whose error text never holds any of `redact` (parameter values from
    /// Secrets).
    pub async fn create_workspace_build_redacting(
        &self,
        workspace: Uuid,
        request: &CreateWorkspaceBuildRequest,
        redact: &[&str],
    ) -> Result<WorkspaceBuild> {
        self.send_json_redacting(
            Method::POST,
            &["workspaces", &workspace.to_string(), "builds"],
            request,
            redact,
        )
        .await
    }

    /// `PUT /api/v2/workspaces/{id}/ttl` (204): the time a started workspace runs before Coder stops it.
    pub async fn update_workspace_ttl(
        &self,
        workspace: Uuid,
        request: &UpdateWorkspaceTtlRequest,
    ) -> Result<()> {
        self.send_no_content(
            Method::PUT,
            &["workspaces", &workspace.to_string(), "ttl"],
            Some(request),
        )
        .await
    }

    /// `PUT /api/v2/workspaces/{id}/autostart` (204): the weekly schedule Coder starts the workspace on.
    pub async fn update_workspace_autostart(
        &self,
        workspace: Uuid,
        request: &UpdateWorkspaceAutostartRequest,
    ) -> Result<()> {
        self.send_no_content(
            Method::PUT,
            &["workspaces", &workspace.to_string(), "autostart"],
            Some(request),
        )
        .await
    }

    /// `PUT /api/v2/workspaces/{id}/autoupdates` (204): whether starts use the template's active version.
    pub async fn update_workspace_automatic_updates(
        &self,
        workspace: Uuid,
        request: &UpdateWorkspaceAutomaticUpdatesRequest,
    ) -> Result<()> {
        self.send_no_content(
            Method::PUT,
            &["workspaces", &workspace.to_string(), "autoupdates"],
            Some(request),
        )
        .await
    }

    /// `GET /api/v2/workspacebuilds/{id}/parameters`: every rich parameter value the build used (Coder keeps no
    /// order).
    pub async fn workspace_build_parameters(&self, build: Uuid) -> Result<Vec<RichParameterValue>> {
        self.get_json(&["workspacebuilds", &build.to_string(), "parameters"], &[])
            .await
    }

    /// `GET /api/v2/templateversions/{id}/rich-parameters`: the parameters builds of the version take (425 while
    /// its import runs).
    pub async fn template_version_rich_parameters(
        &self,
        version: Uuid,
    ) -> Result<Vec<TemplateVersionParameter>> {
        self.get_json(
            &["templateversions", &version.to_string(), "rich-parameters"],
            &[],
        )
        .await
    }

    /// `GET /api/v2/workspacebuilds/{id}`.
    pub async fn workspace_build(&self, id: Uuid) -> Result<WorkspaceBuild> {
        self.get_json(&["workspacebuilds", &id.to_string()], &[]).await
    }

    /// `GET /api/v2/workspaces/{id}/builds`.
    pub async fn workspace_builds(&self, workspace: Uuid) -> Result<Vec<WorkspaceBuild>> {
        self.get_json(&["workspaces", &workspace.to_string(), "builds"], &[])
            .await
    }
}

/// The query of one page of `GET /workspaces`: `q`, then `limit` and `offset` unless they are zero.
fn page_query<'a>(q: &'a str, limit: &'a str, offset: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut query = Vec::new();
    if !q.is_empty() {
        query.push(("q", q));
    }
    if limit != "0" {
        query.push(("limit", limit));
    }
    if offset != "0" {
        query.push(("offset", offset));
    }
    query
}
