//! Workspace and workspace build calls of [`CoderClient`]: list, get, create, and start builds.
//! Build logs are in `logs`.

use reqwest::Method;
use uuid::Uuid;

use super::{CoderClient, Result};
use crate::types::builds::{CreateWorkspaceBuildRequest, WorkspaceBuild};
use crate::types::workspaces::{CreateWorkspaceRequest, Workspace, WorkspacesPage};

impl CoderClient {
    /// `GET /api/v2/workspaces?q=…` (one page: `limit`/`offset` when non-zero).
    pub async fn workspaces(&self, q: &str, limit: u32, offset: u32) -> Result<WorkspacesPage> {
        let limit = limit.to_string();
        let offset = offset.to_string();
        let mut query: Vec<(&str, &str)> = Vec::new();
        if !q.is_empty() {
            query.push(("q", q));
        }
        if limit != "0" {
            query.push(("limit", &limit));
        }
        if offset != "0" {
            query.push(("offset", &offset));
        }
        self.get_json(&["workspaces"], &query).await
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
        self.send_json(Method::POST, &["users", owner, "workspaces"], request)
            .await
    }

    /// `POST /api/v2/workspaces/{id}/builds` (201). 409 while a build is active.
    pub async fn create_workspace_build(
        &self,
        workspace: Uuid,
        request: &CreateWorkspaceBuildRequest,
    ) -> Result<WorkspaceBuild> {
        self.send_json(
            Method::POST,
            &["workspaces", &workspace.to_string(), "builds"],
            request,
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
