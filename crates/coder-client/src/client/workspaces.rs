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
