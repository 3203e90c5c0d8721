//! Workspace tools, through the aggregated `aggregation.coder.com/v1alpha1` CoderWorkspace objects: list, get, set
//! `spec.running`, the latest build's log (the `log` subresource, bounded) and start/stop (the `start`/`stop`
//! subresources, whose outcome says whether a build was queued).

use coder_k8s_api::aggregation::{API_VERSION, CoderWorkspace, CoderWorkspaceTransition, GROUP, VERSION};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{McpServer, ObjectRef, Required, format_optional_time, kube_error};
use crate::limits;
use crate::names::{self, Rule};

/// The Api of an aggregated resource (`kind`, `plural`) in `namespace`, or in every namespace.
pub(super) fn aggregated_api(
    client: &kube::Client,
    namespace: Option<&str>,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind), plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// An aggregated object as its typed form.
pub(super) fn typed<T: DeserializeOwned>(object: &DynamicObject, kind: &str) -> Result<T, String> {
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| format!("read {kind}: {e}"))
}

/// Every aggregated object of `kind` in `namespace` (all namespaces when it is absent or empty), typed.
pub(super) async fn list_typed<T: DeserializeOwned>(
    client: &kube::Client,
    namespace: Option<&str>,
    kind: &str,
    plural: &str,
) -> Result<Vec<T>, String> {
    let namespace = names::optional("namespace", namespace, Rule::Namespace)?;
    let list = aggregated_api(client, namespace, kind, plural)
        .list(&ListParams::default())
        .await
        .map_err(|e| kube_error(&format!("list {kind} resources"), &e))?;
    list.items.iter().map(|o| typed::<T>(o, kind)).collect()
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListWorkspacesInput {
    /// Namespace to list; every namespace when absent.
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSummary {
    pub name: String,
    pub namespace: String,
    pub running: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub auto_shutdown: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ListWorkspacesOutput {
    pub items: Vec<WorkspaceSummary>,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct GetWorkspaceInput(pub ObjectRef);

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GetWorkspaceOutput {
    pub workspace: WorkspaceSummary,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = Required(&["namespace", "name"]))]
pub struct SetWorkspaceRunningInput {
    /// Namespace of the CoderWorkspace (required).
    #[serde(default)]
    pub namespace: String,
    /// Name of the CoderWorkspace, organization.owner.workspace (required).
    #[serde(default)]
    pub name: String,
    /// The desired spec.running (required).
    pub running: bool,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SetWorkspaceRunningOutput {
    pub workspace: WorkspaceSummary,
    /// False when spec.running already had the requested value (nothing was written).
    pub updated: bool,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = Required(&["namespace", "name"]))]
pub struct GetWorkspaceBuildLogsInput {
    /// Namespace of the CoderWorkspace (required).
    #[serde(default)]
    pub namespace: String,
    /// Name of the CoderWorkspace (required).
    #[serde(default)]
    pub name: String,
    /// Most bytes returned, 1 to 1048576 (default 1048576); a cut log ends with a (truncated) line.
    #[serde(default)]
    pub limit_bytes: Option<i64>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GetWorkspaceBuildLogsOutput {
    /// The latest build's log, one line per entry.
    pub logs: String,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = Required(&["namespace", "name"]))]
pub struct WorkspaceTransitionInput {
    /// Namespace of the CoderWorkspace (required).
    #[serde(default)]
    pub namespace: String,
    /// Name of the CoderWorkspace (required).
    #[serde(default)]
    pub name: String,
    /// Only evaluate: the outcome is WouldQueue or Unchanged/InProgress, and nothing is queued.
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct StartWorkspaceInput(pub WorkspaceTransitionInput);

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct StopWorkspaceInput(pub WorkspaceTransitionInput);

/// The answer of the `start`/`stop` subresource.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceTransitionOutput {
    pub name: String,
    pub namespace: String,
    /// start or stop.
    pub transition: String,
    /// Queued (a build was queued), InProgress (one already runs), Unchanged (already there) or WouldQueue (dry run).
    pub outcome: String,
    pub dry_run: bool,
    #[serde(rename = "buildID", skip_serializing_if = "String::is_empty")]
    pub build_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_number: Option<i32>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub job_status: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct StartWorkspaceOutput(pub WorkspaceTransitionOutput);

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct StopWorkspaceOutput(pub WorkspaceTransitionOutput);

/// The summary of a workspace.
pub fn workspace_summary(workspace: &CoderWorkspace) -> WorkspaceSummary {
    WorkspaceSummary {
        name: workspace.metadata.name.clone().unwrap_or_default(),
        namespace: workspace.metadata.namespace.clone().unwrap_or_default(),
        running: workspace.spec.running,
        auto_shutdown: format_optional_time(workspace.status.auto_shutdown.as_ref()),
    }
}

/// The transition answer as the tool shows it.
pub fn transition_output(
    answer: &CoderWorkspaceTransition,
    namespace: &str,
    name: &str,
) -> WorkspaceTransitionOutput {
    let status = &answer.status;
    WorkspaceTransitionOutput {
        name: answer.metadata.name.clone().unwrap_or_else(|| name.to_owned()),
        namespace: answer
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| namespace.to_owned()),
        transition: status.transition.clone(),
        outcome: status.outcome.clone(),
        dry_run: status.dry_run,
        build_id: status.build_id.clone(),
        build_number: (status.build_number != 0).then_some(status.build_number),
        job_status: status.job_status.clone(),
    }
}

const KIND: &str = "CoderWorkspace";
const PLURAL: &str = "coderworkspaces";

/// The namespace and the CoderWorkspace name of a workspace tool, both checked.
fn checked_workspace<'a>(namespace: &'a str, name: &'a str) -> Result<(&'a str, &'a str), String> {
    Ok((
        names::required("namespace", namespace, Rule::Namespace)?,
        names::required("name", name, Rule::Workspace)?,
    ))
}

impl McpServer {
    async fn get_workspace_object(&self, namespace: &str, name: &str) -> Result<DynamicObject, String> {
        aggregated_api(&self.kube, Some(namespace), KIND, PLURAL)
            .get(name)
            .await
            .map_err(|e| kube_error(&format!("get CoderWorkspace {namespace}/{name}"), &e))
    }

    /// POSTs to the workspace's `start` or `stop` subresource.
    async fn transition(
        &self,
        action: &str,
        input: WorkspaceTransitionInput,
    ) -> Result<WorkspaceTransitionOutput, String> {
        let (namespace, name) = checked_workspace(&input.namespace, &input.name)?;
        let dry_run = if input.dry_run { "?dryRun=All" } else { "" };
        let path = format!("/apis/{API_VERSION}/namespaces/{namespace}/{PLURAL}/{name}/{action}{dry_run}");
        let request = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(b"{}".to_vec())
            .map_err(|e| format!("build the {action} request: {e}"))?;
        let answer: CoderWorkspaceTransition = self
            .kube
            .request(request)
            .await
            .map_err(|e| kube_error(&format!("{action} CoderWorkspace {namespace}/{name}"), &e))?;
        Ok(transition_output(&answer, namespace, name))
    }
}

#[tool_router(router = workspace_tools, vis = "pub(crate)")]
impl McpServer {
    #[tool(
        description = "List CoderWorkspace resources.",
        annotations(read_only_hint = true)
    )]
    async fn list_workspaces(
        &self,
        Parameters(input): Parameters<ListWorkspacesInput>,
    ) -> Result<Json<ListWorkspacesOutput>, String> {
        let workspaces: Vec<CoderWorkspace> =
            list_typed(&self.kube, input.namespace.as_deref(), KIND, PLURAL).await?;
        let items = workspaces.iter().map(workspace_summary).collect();
        Ok(Json(ListWorkspacesOutput { items }))
    }

    #[tool(
        description = "Get a CoderWorkspace resource by namespace and name.",
        annotations(read_only_hint = true)
    )]
    async fn get_workspace(
        &self,
        Parameters(GetWorkspaceInput(input)): Parameters<GetWorkspaceInput>,
    ) -> Result<Json<GetWorkspaceOutput>, String> {
        let (namespace, name) = input.checked(Rule::Workspace)?;
        let object = self.get_workspace_object(namespace, name).await?;
        let workspace: CoderWorkspace = typed(&object, KIND)?;
        Ok(Json(GetWorkspaceOutput {
            workspace: workspace_summary(&workspace),
        }))
    }

    #[tool(
        description = "Set spec.running for a CoderWorkspace resource (a change queues a start or stop build).",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true)
    )]
    async fn set_workspace_running(
        &self,
        Parameters(input): Parameters<SetWorkspaceRunningInput>,
    ) -> Result<Json<SetWorkspaceRunningOutput>, String> {
        let (namespace, name) = checked_workspace(&input.namespace, &input.name)?;
        let mut object = self.get_workspace_object(namespace, name).await?;
        let current: CoderWorkspace = typed(&object, KIND)?;
        if current.spec.running == input.running {
            return Ok(Json(SetWorkspaceRunningOutput {
                workspace: workspace_summary(&current),
                updated: false,
            }));
        }
        object.data["spec"]["running"] = serde_json::Value::Bool(input.running);
        let replaced = aggregated_api(&self.kube, Some(namespace), KIND, PLURAL)
            .replace(name, &PostParams::default(), &object)
            .await
            .map_err(|e| kube_error(&format!("update CoderWorkspace {namespace}/{name}"), &e))?;
        let workspace: CoderWorkspace = typed(&replaced, KIND)?;
        Ok(Json(SetWorkspaceRunningOutput {
            workspace: workspace_summary(&workspace),
            updated: true,
        }))
    }

    #[tool(
        description = "Get the latest build log of a CoderWorkspace (at most limitBytes bytes, default and most 1 MiB).",
        annotations(read_only_hint = true)
    )]
    async fn get_workspace_build_logs(
        &self,
        Parameters(input): Parameters<GetWorkspaceBuildLogsInput>,
    ) -> Result<Json<GetWorkspaceBuildLogsOutput>, String> {
        let (namespace, name) = checked_workspace(&input.namespace, &input.name)?;
        let limit_bytes = limits::bounded(
            "limitBytes",
            input.limit_bytes,
            limits::MAX_LOG_BYTES,
            1,
            limits::MAX_LOG_BYTES,
        )?;
        // One byte more than returned, to know whether the log was cut.
        let path = format!(
            "/apis/{API_VERSION}/namespaces/{namespace}/{PLURAL}/{name}/log?limitBytes={}",
            limit_bytes + 1
        );
        let request = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| format!("build the log request: {e}"))?;
        let text = self.kube.request_text(request).await.map_err(|e| {
            kube_error(
                &format!("get the build log of CoderWorkspace {namespace}/{name}"),
                &e,
            )
        })?;
        Ok(Json(GetWorkspaceBuildLogsOutput {
            logs: limits::truncate_log(text.as_bytes(), usize::try_from(limit_bytes).unwrap_or(0)),
        }))
    }

    #[tool(
        description = "Start a CoderWorkspace through its start subresource. Outcome: Queued (a start build was \
                       queued), InProgress (a start already runs), Unchanged (already started) or WouldQueue (dryRun). \
                       A stop or delete in progress is a conflict error.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true)
    )]
    async fn start_workspace(
        &self,
        Parameters(StartWorkspaceInput(input)): Parameters<StartWorkspaceInput>,
    ) -> Result<Json<StartWorkspaceOutput>, String> {
        Ok(Json(StartWorkspaceOutput(self.transition("start", input).await?)))
    }

    #[tool(
        description = "Stop a CoderWorkspace through its stop subresource. Outcome: Queued (a stop build was queued), \
                       InProgress (a stop already runs), Unchanged (already stopped) or WouldQueue (dryRun). A start \
                       or delete in progress is a conflict error.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true)
    )]
    async fn stop_workspace(
        &self,
        Parameters(StopWorkspaceInput(input)): Parameters<StopWorkspaceInput>,
    ) -> Result<Json<StopWorkspaceOutput>, String> {
        Ok(Json(StopWorkspaceOutput(self.transition("stop", input).await?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn workspace_summaries() {
        let workspace: CoderWorkspace = serde_json::from_value(json!({
            "metadata": {"name": "o.u.w", "namespace": "ns"},
            "spec": {"running": true},
            "status": {"autoShutdown": "2026-01-01T10:00:00Z"},
        }))
        .unwrap();
        let summary = workspace_summary(&workspace);
        assert_eq!(summary.name, "o.u.w");
        assert!(summary.running);
        assert_eq!(summary.auto_shutdown, "2026-01-01T10:00:00Z");
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(json["autoShutdown"], "2026-01-01T10:00:00Z");
    }

    #[test]
    fn transition_outputs_leave_out_empty_build_fields() {
        let answer: CoderWorkspaceTransition = serde_json::from_value(json!({
            "metadata": {"name": "o.u.w", "namespace": "ns"},
            "status": {"transition": "start", "outcome": "WouldQueue", "dryRun": true},
        }))
        .unwrap();
        let out = serde_json::to_value(transition_output(&answer, "ns", "o.u.w")).unwrap();
        assert_eq!(
            out,
            json!({"name": "o.u.w", "namespace": "ns", "transition": "start", "outcome": "WouldQueue", "dryRun": true})
        );
    }
}
