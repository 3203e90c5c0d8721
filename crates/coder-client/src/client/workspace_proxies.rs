//! Workspace proxy calls of [`CoderClient`]: get, create, patch (including token regeneration) and
//! delete.

use reqwest::Method;

use super::{CoderClient, Result};
use crate::types::workspace_proxies::{
    CreateWorkspaceProxyRequest, PatchWorkspaceProxy, UpdateWorkspaceProxyResponse, WorkspaceProxy,
};

impl CoderClient {
    /// `GET /api/v2/workspaceproxies/{idOrName}`.
    pub async fn workspace_proxy(&self, id_or_name: &str) -> Result<WorkspaceProxy> {
        self.get_json(&["workspaceproxies", id_or_name], &[]).await
    }

    /// `POST /api/v2/workspaceproxies` (201 with the proxy token).
    pub async fn create_workspace_proxy(
        &self,
        request: &CreateWorkspaceProxyRequest,
    ) -> Result<UpdateWorkspaceProxyResponse> {
        self.send_json(Method::POST, &["workspaceproxies"], request).await
    }

    /// `PATCH /api/v2/workspaceproxies/{id}`; `regenerate_token: true` returns a new proxy token.
    pub async fn patch_workspace_proxy(
        &self,
        request: &PatchWorkspaceProxy,
    ) -> Result<UpdateWorkspaceProxyResponse> {
        let id = request.id.to_string();
        self.send_json(Method::PATCH, &["workspaceproxies", &id], request)
            .await
    }

    /// `DELETE /api/v2/workspaceproxies/{idOrName}` (200).
    pub async fn delete_workspace_proxy(&self, id_or_name: &str) -> Result<()> {
        self.send_no_content::<()>(Method::DELETE, &["workspaceproxies", id_or_name], None)
            .await
    }
}
