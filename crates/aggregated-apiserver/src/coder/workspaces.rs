//! `coderworkspaces`: Coder workspaces as `CoderWorkspace` objects named `<organization>.<owner>.<workspace>`.

use std::sync::Arc;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderWorkspace, GROUP};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::workspaces::Workspace;
use serde_json::Value;

use super::convert;
use super::errors::within;
use super::names;
use super::provider::Provider;
use super::resources::{READ_WATCH, WORKSPACES, at, backend_of, column, not_canonical, schema, subject};
use crate::generic::{ApiError, Column, RequestContext, ResourceDef, Storage};

/// The `coderworkspaces` resource.
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
    ResourceDef {
        plural: WORKSPACES,
        singular: "coderworkspace",
        kind: "CoderWorkspace",
        list_kind: "CoderWorkspaceList",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: READ_WATCH,
        schema: schema::<CoderWorkspace>(),
        columns: workspace_columns(),
        subresources: Vec::new(),
        storage: Arc::new(WorkspaceStorage { provider }),
        watch_feed: None,
    }
}

fn workspace_columns() -> Vec<Column> {
    vec![
        column("Organization", "string", "The Coder organization.", 0, |o| {
            at(o, &["spec", "organization"]).clone()
        }),
        column("Owner", "string", "The workspace owner.", 0, |o| {
            at(o, &["status", "ownerName"]).clone()
        }),
        column(
            "Template",
            "string",
            "The template the workspace is built from.",
            0,
            |o| at(o, &["spec", "templateName"]).clone(),
        ),
        column(
            "Running",
            "boolean",
            "Whether the workspace is started.",
            0,
            |o| at(o, &["spec", "running"]).clone(),
        ),
        column(
            "Last Build Status",
            "string",
            "Status of the latest build.",
            0,
            |o| at(o, &["status", "latestBuildStatus"]).clone(),
        ),
        column("Latest Build ID", "string", "ID of the latest build.", 1, |o| {
            at(o, &["status", "latestBuildID"]).clone()
        }),
        column(
            "Auto Shutdown",
            "date",
            "When the workspace stops automatically.",
            1,
            |o| at(o, &["status", "autoShutdown"]).clone(),
        ),
        column("Last Used", "date", "When the workspace was last used.", 1, |o| {
            at(o, &["status", "lastUsedAt"]).clone()
        }),
    ]
}

struct WorkspaceStorage {
    provider: Arc<dyn Provider>,
}

/// Every workspace Coder shows the operator, page by page until Coder's count is reached.
async fn all_workspaces(client: &CoderClient, ctx: &RequestContext) -> Result<Vec<Workspace>, ApiError> {
    const PAGE: u32 = 100;
    let mut workspaces: Vec<Workspace> = Vec::new();
    loop {
        let offset = u32::try_from(workspaces.len()).unwrap_or(u32::MAX);
        let page = within(
            ctx.deadline,
            subject(WORKSPACES, ""),
            client.workspaces("", PAGE, offset),
        )
        .await?;
        let received = page.workspaces.len();
        workspaces.extend(page.workspaces);
        if received == 0 || i64::try_from(workspaces.len()).unwrap_or(i64::MAX) >= page.count {
            return Ok(workspaces);
        }
    }
}

#[async_trait]
impl Storage for WorkspaceStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let parsed = names::parse_workspace_name(name)?;
        let Some(backend) = backend_of(self.provider.as_ref(), ctx).await? else {
            return Err(ApiError::not_found(GROUP, WORKSPACES, name));
        };
        let workspace = within(
            ctx.deadline,
            subject(WORKSPACES, name),
            backend
                .client
                .workspace_by_owner_and_name(&parsed.owner, &parsed.workspace),
        )
        .await?;
        // A workspace of another organization is not found: the answer must not reveal that it exists.
        if workspace.organization_name != parsed.organization {
            return Err(ApiError::not_found(GROUP, WORKSPACES, name));
        }
        let object = convert::workspace(&backend.namespace, &workspace)?;
        match object["metadata"]["name"].as_str() {
            Some(canonical) if canonical == name => Ok(object),
            Some(canonical) => Err(not_canonical("workspace", name, canonical)),
            None => Err(ApiError::internal("a converted workspace has no name")),
        }
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        let mut objects = Vec::new();
        for backend in self.provider.resolve(ctx.namespace.as_deref()).await? {
            for workspace in all_workspaces(&backend.client, ctx).await? {
                objects.push(convert::workspace(&backend.namespace, &workspace)?);
            }
        }
        Ok(objects)
    }
}
