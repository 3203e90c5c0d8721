//! Provisioner and workspace-proxy tools: the status of a CoderProvisioner or CoderWorkspaceProxy (phase, replicas,
//! conditions). Secret references and keys are left out.

use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use kube::api::Api;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::control_planes::phase_text;
use super::{ConditionSummary, McpServer, ObjectRef, kube_error};
use crate::names::Rule;

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct GetProvisionerStatusInput(pub ObjectRef);

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetProvisionerStatusOutput {
    pub name: String,
    pub namespace: String,
    pub phase: String,
    pub ready_replicas: i32,
    pub observed_generation: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub organization_name: String,
    /// Name of the provisioner key in Coder (never the key itself).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub provisioner_key_name: String,
    pub conditions: Vec<ConditionSummary>,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct GetWorkspaceProxyStatusInput(pub ObjectRef);

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetWorkspaceProxyStatusOutput {
    pub name: String,
    pub namespace: String,
    pub phase: String,
    pub ready_replicas: i32,
    pub observed_generation: i64,
    /// Whether the proxy is registered in Coder (bootstrap mode).
    pub registered: bool,
    pub conditions: Vec<ConditionSummary>,
}

/// The status of a provisioner.
pub fn provisioner_status(provisioner: &CoderProvisioner) -> GetProvisionerStatusOutput {
    let status = provisioner.status.clone().unwrap_or_default();
    GetProvisionerStatusOutput {
        name: provisioner.metadata.name.clone().unwrap_or_default(),
        namespace: provisioner.metadata.namespace.clone().unwrap_or_default(),
        phase: phase_text(status.phase.as_ref()),
        ready_replicas: status.ready_replicas.unwrap_or_default(),
        observed_generation: status.observed_generation.unwrap_or_default(),
        organization_name: status.organization_name.unwrap_or_default(),
        provisioner_key_name: status.provisioner_key_name.unwrap_or_default(),
        conditions: status.conditions.iter().map(ConditionSummary::from).collect(),
    }
}

/// The status of a workspace proxy.
pub fn workspace_proxy_status(proxy: &CoderWorkspaceProxy) -> GetWorkspaceProxyStatusOutput {
    let status = proxy.status.clone().unwrap_or_default();
    GetWorkspaceProxyStatusOutput {
        name: proxy.metadata.name.clone().unwrap_or_default(),
        namespace: proxy.metadata.namespace.clone().unwrap_or_default(),
        phase: phase_text(status.phase.as_ref()),
        ready_replicas: status.ready_replicas.unwrap_or_default(),
        observed_generation: status.observed_generation.unwrap_or_default(),
        registered: status.registered.unwrap_or_default(),
        conditions: status.conditions.iter().map(ConditionSummary::from).collect(),
    }
}

#[tool_router(router = fleet_tools, vis = "pub(crate)")]
impl McpServer {
    #[tool(
        description = "Get status for a CoderProvisioner resource.",
        annotations(read_only_hint = true)
    )]
    async fn get_provisioner_status(
        &self,
        Parameters(GetProvisionerStatusInput(input)): Parameters<GetProvisionerStatusInput>,
    ) -> Result<Json<GetProvisionerStatusOutput>, String> {
        let (namespace, name) = input.checked(Rule::Object("CoderProvisioner"))?;
        let provisioner = Api::<CoderProvisioner>::namespaced(self.kube.clone(), namespace)
            .get(name)
            .await
            .map_err(|e| kube_error(&format!("get CoderProvisioner {namespace}/{name}"), &e))?;
        Ok(Json(provisioner_status(&provisioner)))
    }

    #[tool(
        description = "Get status for a CoderWorkspaceProxy resource.",
        annotations(read_only_hint = true)
    )]
    async fn get_workspace_proxy_status(
        &self,
        Parameters(GetWorkspaceProxyStatusInput(input)): Parameters<GetWorkspaceProxyStatusInput>,
    ) -> Result<Json<GetWorkspaceProxyStatusOutput>, String> {
        let (namespace, name) = input.checked(Rule::Object("CoderWorkspaceProxy"))?;
        let proxy = Api::<CoderWorkspaceProxy>::namespaced(self.kube.clone(), namespace)
            .get(name)
            .await
            .map_err(|e| kube_error(&format!("get CoderWorkspaceProxy {namespace}/{name}"), &e))?;
        Ok(Json(workspace_proxy_status(&proxy)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn provisioner_status_leaves_out_the_key_secret() {
        let provisioner: CoderProvisioner = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"controlPlaneRef": {"name": "coder"}},
            "status": {"phase": "Ready", "readyReplicas": 2, "observedGeneration": 3, "organizationName": "acme",
                       "provisionerKeyName": "p-key", "secretRef": {"name": "p-key-secret", "key": "key"}},
        }))
        .unwrap();
        let out = serde_json::to_value(provisioner_status(&provisioner)).unwrap();
        assert_eq!(
            out,
            json!({"name": "p", "namespace": "ns", "phase": "Ready", "readyReplicas": 2, "observedGeneration": 3,
                   "organizationName": "acme", "provisionerKeyName": "p-key", "conditions": []})
        );
    }

    #[test]
    fn workspace_proxy_status_without_status_is_empty_not_an_error() {
        let proxy: CoderWorkspaceProxy =
            serde_json::from_value(json!({"metadata": {"name": "w", "namespace": "ns"}, "spec": {}}))
                .unwrap();
        let out = workspace_proxy_status(&proxy);
        assert_eq!(
            (out.phase.as_str(), out.ready_replicas, out.registered),
            ("", 0, false)
        );
    }
}
