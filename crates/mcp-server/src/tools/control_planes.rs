//! Control-plane tools: the CoderControlPlane objects, their status, pods and Deployment.

use coder_k8s_api::control_plane::CoderControlPlane;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ConditionSummary, McpServer, ObjectRef, Required, format_optional_time, kube_error};
use crate::limits;
use crate::names::{self, Rule};

const KIND: &str = "CoderControlPlane";

/// `app.kubernetes.io/name` of the objects a control plane owns.
const CONTROL_PLANE_APP: &str = "coder-control-plane";

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListControlPlanesInput {
    /// Namespace to list; every namespace when absent.
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneSummary {
    pub name: String,
    pub namespace: String,
    pub phase: String,
    pub ready_replicas: i32,
    pub url: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ListControlPlanesOutput {
    pub items: Vec<ControlPlaneSummary>,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct GetControlPlaneStatusInput(pub ObjectRef);

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetControlPlaneStatusOutput {
    pub observed_generation: i64,
    pub ready_replicas: i32,
    pub url: String,
    pub phase: String,
    pub conditions: Vec<ConditionSummary>,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = Required(&["namespace", "name"]))]
pub struct ListControlPlanePodsInput {
    /// Namespace of the CoderControlPlane (required).
    #[serde(default)]
    pub namespace: String,
    /// Name of the CoderControlPlane (required).
    #[serde(default)]
    pub name: String,
    /// Most pods returned, 1 to 500 (default 100).
    #[serde(default)]
    pub limit: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSummary {
    pub name: String,
    pub namespace: String,
    pub phase: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    pub ready_containers: i32,
    pub total_containers: i32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub start_time: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ListControlPlanePodsOutput {
    pub items: Vec<PodSummary>,
    /// True when more pods matched than `limit`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct GetControlPlaneDeploymentStatusInput(pub ObjectRef);

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentConditionSummary {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub last_update_time: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub last_transition_time: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetControlPlaneDeploymentStatusOutput {
    pub name: String,
    pub namespace: String,
    pub replicas: i32,
    pub ready_replicas: i32,
    pub updated_replicas: i32,
    pub available_replicas: i32,
    pub unavailable_replicas: i32,
    pub observed_generation: i64,
    pub conditions: Vec<DeploymentConditionSummary>,
}

/// The list entry of a control plane.
pub fn control_plane_summary(cp: &CoderControlPlane) -> ControlPlaneSummary {
    let status = cp.status.clone().unwrap_or_default();
    ControlPlaneSummary {
        name: cp.metadata.name.clone().unwrap_or_default(),
        namespace: cp.metadata.namespace.clone().unwrap_or_default(),
        phase: phase_text(status.phase.as_ref()),
        ready_replicas: status.ready_replicas.unwrap_or_default(),
        url: status.url.unwrap_or_default(),
    }
}

/// A phase as its JSON string (empty when unset).
pub(crate) fn phase_text<T: Serialize>(phase: Option<&T>) -> String {
    phase
        .and_then(|p| serde_json::to_value(p).ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The status of one control plane.
pub fn control_plane_status(cp: &CoderControlPlane) -> GetControlPlaneStatusOutput {
    let status = cp.status.clone().unwrap_or_default();
    GetControlPlaneStatusOutput {
        observed_generation: status.observed_generation.unwrap_or_default(),
        ready_replicas: status.ready_replicas.unwrap_or_default(),
        url: status.url.clone().unwrap_or_default(),
        phase: phase_text(status.phase.as_ref()),
        conditions: status.conditions.iter().map(ConditionSummary::from).collect(),
    }
}

/// The label selector of a control plane's pods (the labels of every object it owns).
pub fn pod_selector(name: &str) -> String {
    format!(
        "app.kubernetes.io/name={CONTROL_PLANE_APP},app.kubernetes.io/instance={name},app.kubernetes.io/managed-by=coder-k8s"
    )
}

/// The first `limit` pods by name, and whether more matched.
pub fn pod_summaries(mut pods: Vec<Pod>, limit: usize) -> ListControlPlanePodsOutput {
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let truncated = pods.len() > limit;
    let items = pods.iter().take(limit).map(pod_summary).collect();
    ListControlPlanePodsOutput { items, truncated }
}

fn pod_summary(pod: &Pod) -> PodSummary {
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let statuses = status.container_statuses.unwrap_or_default();
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let total = if spec.containers.is_empty() {
        statuses.len()
    } else {
        spec.containers.len()
    };
    PodSummary {
        name: pod.metadata.name.clone().unwrap_or_default(),
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        phase: status.phase.unwrap_or_default(),
        node_name: spec.node_name.unwrap_or_default(),
        ready_containers: count(statuses.iter().filter(|s| s.ready).count()),
        total_containers: count(total),
        start_time: format_optional_time(status.start_time.as_ref()),
    }
}

/// The replica counts and conditions of a Deployment, conditions sorted by type.
pub fn deployment_status(deployment: &Deployment) -> GetControlPlaneDeploymentStatusOutput {
    let status = deployment.status.clone().unwrap_or_default();
    let mut conditions: Vec<DeploymentConditionSummary> = status
        .conditions
        .iter()
        .flatten()
        .map(deployment_condition)
        .collect();
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    GetControlPlaneDeploymentStatusOutput {
        name: deployment.metadata.name.clone().unwrap_or_default(),
        namespace: deployment.metadata.namespace.clone().unwrap_or_default(),
        replicas: deployment
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or_default(),
        ready_replicas: status.ready_replicas.unwrap_or_default(),
        updated_replicas: status.updated_replicas.unwrap_or_default(),
        available_replicas: status.available_replicas.unwrap_or_default(),
        unavailable_replicas: status.unavailable_replicas.unwrap_or_default(),
        observed_generation: status.observed_generation.unwrap_or_default(),
        conditions,
    }
}

fn deployment_condition(c: &DeploymentCondition) -> DeploymentConditionSummary {
    DeploymentConditionSummary {
        type_: c.type_.clone(),
        status: c.status.clone(),
        reason: c.reason.clone().unwrap_or_default(),
        message: c.message.clone().unwrap_or_default(),
        last_update_time: format_optional_time(c.last_update_time.as_ref()),
        last_transition_time: format_optional_time(c.last_transition_time.as_ref()),
    }
}

#[tool_router(router = control_plane_tools, vis = "pub(crate)")]
impl McpServer {
    #[tool(
        description = "List CoderControlPlane resources.",
        annotations(read_only_hint = true)
    )]
    async fn list_control_planes(
        &self,
        Parameters(input): Parameters<ListControlPlanesInput>,
    ) -> Result<Json<ListControlPlanesOutput>, String> {
        let api: Api<CoderControlPlane> =
            match names::optional("namespace", input.namespace.as_deref(), Rule::Namespace)? {
                Some(namespace) => Api::namespaced(self.kube.clone(), namespace),
                None => Api::all(self.kube.clone()),
            };
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| kube_error("list CoderControlPlane resources", &e))?;
        Ok(Json(ListControlPlanesOutput {
            items: list.items.iter().map(control_plane_summary).collect(),
        }))
    }

    #[tool(
        description = "Get status for a CoderControlPlane resource.",
        annotations(read_only_hint = true)
    )]
    async fn get_control_plane_status(
        &self,
        Parameters(GetControlPlaneStatusInput(input)): Parameters<GetControlPlaneStatusInput>,
    ) -> Result<Json<GetControlPlaneStatusOutput>, String> {
        let (namespace, name) = input.checked(Rule::Object(KIND))?;
        let cp = Api::<CoderControlPlane>::namespaced(self.kube.clone(), namespace)
            .get(name)
            .await
            .map_err(|e| kube_error(&format!("get CoderControlPlane {namespace}/{name}"), &e))?;
        Ok(Json(control_plane_status(&cp)))
    }

    #[tool(
        description = "List pods for a CoderControlPlane by namespace and name (limit 1-500, default 100).",
        annotations(read_only_hint = true)
    )]
    async fn list_control_plane_pods(
        &self,
        Parameters(input): Parameters<ListControlPlanePodsInput>,
    ) -> Result<Json<ListControlPlanePodsOutput>, String> {
        let namespace = names::required("namespace", &input.namespace, Rule::Namespace)?;
        // A DNS subdomain also keeps the label selector below from being extended (no ',' or '=').
        let name = names::required("name", &input.name, Rule::Object(KIND))?;
        let limit = limits::bounded(
            "limit",
            input.limit,
            limits::DEFAULT_POD_LIMIT,
            1,
            limits::MAX_POD_LIMIT,
        )?;
        let pods = Api::<Pod>::namespaced(self.kube.clone(), namespace)
            .list(&ListParams::default().labels(&pod_selector(name)))
            .await
            .map_err(|e| kube_error(&format!("list control plane pods for {namespace}/{name}"), &e))?;
        Ok(Json(pod_summaries(
            pods.items,
            usize::try_from(limit).unwrap_or(0),
        )))
    }

    #[tool(
        description = "Get Deployment status for a CoderControlPlane by namespace and name.",
        annotations(read_only_hint = true)
    )]
    async fn get_control_plane_deployment_status(
        &self,
        Parameters(GetControlPlaneDeploymentStatusInput(input)): Parameters<
            GetControlPlaneDeploymentStatusInput,
        >,
    ) -> Result<Json<GetControlPlaneDeploymentStatusOutput>, String> {
        // The Deployment has the control plane's name.
        let (namespace, name) = input.checked(Rule::Object(KIND))?;
        let deployment = Api::<Deployment>::namespaced(self.kube.clone(), namespace)
            .get(name)
            .await
            .map_err(|e| kube_error(&format!("get deployment {namespace}/{name}"), &e))?;
        Ok(Json(deployment_status(&deployment)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pods_are_sorted_cut_at_the_limit_and_counted() {
        let pod = |name: &str, ready: bool| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
                "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                           "containerStatuses": [{"name": "a", "ready": ready, "restartCount": 0, "image": "i", "imageID": ""}]},
            }))
            .unwrap()
        };
        let out = pod_summaries(vec![pod("c", true), pod("a", false), pod("b", true)], 2);
        assert!(out.truncated);
        assert_eq!(
            out.items.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(out.items[0].ready_containers, 0);
        assert_eq!(out.items[1].ready_containers, 1);
        assert_eq!(out.items[1].total_containers, 2);
        assert_eq!(out.items[1].start_time, "2026-01-01T00:00:00Z");
        assert!(!pod_summaries(vec![pod("a", true)], 1).truncated);
    }

    #[test]
    fn deployment_conditions_are_sorted_by_type() {
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "coder", "namespace": "ns"},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"readyReplicas": 1, "conditions": [
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                {"type": "Available", "status": "False", "lastUpdateTime": "2026-01-01T00:00:00Z"},
            ]},
        }))
        .unwrap();
        let out = deployment_status(&deployment);
        assert_eq!(out.replicas, 2);
        assert_eq!(out.ready_replicas, 1);
        assert_eq!(out.conditions[0].type_, "Available");
        assert_eq!(out.conditions[0].last_update_time, "2026-01-01T00:00:00Z");
        assert_eq!(out.conditions[1].reason, "NewReplicaSetAvailable");
    }

    #[test]
    fn the_pod_selector_is_the_owned_object_labels() {
        assert_eq!(
            pod_selector("coder"),
            "app.kubernetes.io/name=coder-control-plane,app.kubernetes.io/instance=coder,app.kubernetes.io/managed-by=coder-k8s"
        );
    }
}
