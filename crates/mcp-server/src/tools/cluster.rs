//! Kubernetes tools: a Service's status, a namespace's events (paged), a pod's logs (bounded) and the health check.

use std::collections::BTreeMap;

use futures::AsyncReadExt as _;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ListParams, LogParams};
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{McpServer, ObjectRef, Required, format_optional_time, format_timestamp, kube_error};
use crate::limits;
use crate::names::{self, Rule};

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct GetServiceStatusInput(pub ObjectRef);

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServicePortSummary {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub port: i32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target_port: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_port: Option<i32>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub protocol: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetServiceStatusOutput {
    pub name: String,
    pub namespace: String,
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(rename = "clusterIP", skip_serializing_if = "String::is_empty")]
    pub cluster_ip: String,
    pub ports: Vec<ServicePortSummary>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = Required(&["namespace"]))]
pub struct GetEventsInput {
    /// Namespace of the events (required).
    #[serde(default)]
    pub namespace: String,
    /// Only events about the object of this name.
    #[serde(default)]
    pub name: Option<String>,
    /// Only events about objects of this kind (for example Pod).
    #[serde(default)]
    pub kind: Option<String>,
    /// Events per page, 1 to 1000 (default 200).
    #[serde(default)]
    pub limit: Option<i64>,
    /// The continue token of the previous page.
    #[serde(default, rename = "continue")]
    pub continue_token: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventSummary {
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub last_timestamp: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GetEventsOutput {
    pub items: Vec<EventSummary>,
    /// Pass as `continue` to get the next page; absent on the last page.
    #[serde(rename = "continue", skip_serializing_if = "String::is_empty")]
    pub continue_token: String,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = Required(&["namespace", "name"]))]
pub struct GetPodLogsInput {
    /// Namespace of the pod (required).
    #[serde(default)]
    pub namespace: String,
    /// Name of the pod (required).
    #[serde(default)]
    pub name: String,
    /// Lines from the end of the log, at least 0 (default 2000).
    #[serde(default)]
    pub tail_lines: Option<i64>,
    /// Most bytes returned, 1 to 1048576 (default 1048576); a cut log ends with a (truncated) line.
    #[serde(default)]
    pub limit_bytes: Option<i64>,
    /// Container name; needed when the pod has several.
    #[serde(default)]
    pub container: Option<String>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GetPodLogsOutput {
    pub logs: String,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckHealthInput {}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct CheckHealthOutput {
    pub status: String,
    pub version: String,
}

/// A Service's type, addresses, ports and annotations.
pub fn service_status(service: &Service) -> GetServiceStatusOutput {
    let spec = service.spec.clone().unwrap_or_default();
    GetServiceStatusOutput {
        name: service.metadata.name.clone().unwrap_or_default(),
        namespace: service.metadata.namespace.clone().unwrap_or_default(),
        type_: spec.type_.unwrap_or_else(|| "ClusterIP".to_owned()),
        cluster_ip: spec.cluster_ip.unwrap_or_default(),
        ports: spec
            .ports
            .iter()
            .flatten()
            .map(|port| ServicePortSummary {
                name: port.name.clone().unwrap_or_default(),
                port: port.port,
                target_port: match &port.target_port {
                    Some(IntOrString::Int(n)) => n.to_string(),
                    Some(IntOrString::String(s)) => s.clone(),
                    None => String::new(),
                },
                node_port: port.node_port.filter(|p| *p != 0),
                protocol: port.protocol.clone().unwrap_or_default(),
            })
            .collect(),
        annotations: service.metadata.annotations.clone().unwrap_or_default(),
    }
}

/// The field selector of `get_events`: the object's name and kind, when given. Both are checked by
/// [`Rule::EventObject`] and [`Rule::EventKind`], which leave out the selector's own separators.
pub fn event_field_selector(name: Option<&str>, kind: Option<&str>) -> Option<String> {
    let parts: Vec<String> = [("involvedObject.name", name), ("involvedObject.kind", kind)]
        .into_iter()
        .filter_map(|(field, value)| value.filter(|v| !v.is_empty()).map(|v| format!("{field}={v}")))
        .collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

/// One event; its time is the event time, else the last, else the first timestamp.
pub fn event_summary(event: &Event) -> EventSummary {
    let last_timestamp = event
        .event_time
        .as_ref()
        .map(|t| format_timestamp(t.0))
        .or_else(|| event.last_timestamp.as_ref().map(super::format_time))
        .unwrap_or_else(|| format_optional_time(event.first_timestamp.as_ref()));
    EventSummary {
        type_: event.type_.clone().unwrap_or_default(),
        reason: event.reason.clone().unwrap_or_default(),
        message: event.message.clone().unwrap_or_default(),
        count: event.count.unwrap_or_default(),
        last_timestamp,
    }
}

#[tool_router(router = cluster_tools, vis = "pub(crate)")]
impl McpServer {
    #[tool(
        description = "Get Kubernetes Service status by namespace and name.",
        annotations(read_only_hint = true)
    )]
    async fn get_service_status(
        &self,
        Parameters(GetServiceStatusInput(input)): Parameters<GetServiceStatusInput>,
    ) -> Result<Json<GetServiceStatusOutput>, String> {
        let (namespace, name) = input.checked(Rule::Object("Service"))?;
        let service = Api::<Service>::namespaced(self.kube.clone(), namespace)
            .get(name)
            .await
            .map_err(|e| kube_error(&format!("get service {namespace}/{name}"), &e))?;
        Ok(Json(service_status(&service)))
    }

    #[tool(
        description = "Get Kubernetes events of a namespace, optionally of one object (name, kind); paged with limit \
                       (1-1000, default 200) and continue.",
        annotations(read_only_hint = true)
    )]
    async fn get_events(
        &self,
        Parameters(input): Parameters<GetEventsInput>,
    ) -> Result<Json<GetEventsOutput>, String> {
        let namespace = names::required("namespace", &input.namespace, Rule::Namespace)?;
        let object = names::optional("name", input.name.as_deref(), Rule::EventObject)?;
        let kind = names::optional("kind", input.kind.as_deref(), Rule::EventKind)?;
        let limit = limits::bounded(
            "limit",
            input.limit,
            limits::DEFAULT_EVENT_LIMIT,
            1,
            limits::MAX_EVENT_LIMIT,
        )?;
        let mut params = ListParams::default().limit(u32::try_from(limit).unwrap_or(1));
        if let Some(selector) = event_field_selector(object, kind) {
            params = params.fields(&selector);
        }
        if let Some(token) = input.continue_token.filter(|t| !t.is_empty()) {
            params = params.continue_token(&token);
        }
        let events = Api::<Event>::namespaced(self.kube.clone(), namespace)
            .list(&params)
            .await
            .map_err(|e| kube_error(&format!("list events in namespace {namespace:?}"), &e))?;
        Ok(Json(GetEventsOutput {
            items: events.items.iter().map(event_summary).collect(),
            continue_token: events.metadata.continue_.unwrap_or_default(),
        }))
    }

    #[tool(
        description = "Get logs from a pod: the last tailLines lines (default 2000), at most limitBytes bytes (default \
                       and most 1 MiB).",
        annotations(read_only_hint = true)
    )]
    async fn get_pod_logs(
        &self,
        Parameters(input): Parameters<GetPodLogsInput>,
    ) -> Result<Json<GetPodLogsOutput>, String> {
        let namespace = names::required("namespace", &input.namespace, Rule::Namespace)?;
        let name = names::required("name", &input.name, Rule::Object("Pod"))?;
        let container = names::optional("container", input.container.as_deref(), Rule::Container)?;
        let tail_lines = limits::at_least(
            "tailLines",
            input.tail_lines,
            limits::DEFAULT_POD_LOG_TAIL_LINES,
            0,
        )?;
        let limit_bytes = limits::bounded(
            "limitBytes",
            input.limit_bytes,
            limits::MAX_LOG_BYTES,
            1,
            limits::MAX_LOG_BYTES,
        )?;
        let params = LogParams {
            container: container.map(str::to_owned),
            tail_lines: Some(tail_lines),
            // One byte more than returned, to know whether the log was cut.
            limit_bytes: Some(limit_bytes + 1),
            ..LogParams::default()
        };
        let what = format!("stream logs for pod {namespace}/{name}");
        let stream = Api::<Pod>::namespaced(self.kube.clone(), namespace)
            .log_stream(name, &params)
            .await
            .map_err(|e| kube_error(&what, &e))?;
        let mut bytes = Vec::new();
        let limit = usize::try_from(limit_bytes).unwrap_or(0);
        stream
            .take(u64::try_from(limit_bytes + 1).unwrap_or(0))
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| format!("read logs for pod {namespace}/{name}: {e}"))?;
        Ok(Json(GetPodLogsOutput {
            logs: limits::truncate_log(&bytes, limit),
        }))
    }

    #[tool(
        description = "Check MCP server health and Kubernetes API connectivity.",
        annotations(read_only_hint = true)
    )]
    async fn check_health(
        &self,
        Parameters(_): Parameters<CheckHealthInput>,
    ) -> Result<Json<CheckHealthOutput>, String> {
        Api::<Namespace>::all(self.kube.clone())
            .list_metadata(&ListParams::default().limit(1))
            .await
            .map_err(|e| kube_error("list namespaces for connectivity check", &e))?;
        Ok(Json(CheckHealthOutput {
            status: "ok".to_owned(),
            version: self.version.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_selectors() {
        assert_eq!(event_field_selector(None, None), None);
        assert_eq!(event_field_selector(Some(""), Some("")), None);
        assert_eq!(
            event_field_selector(Some("a"), None).as_deref(),
            Some("involvedObject.name=a")
        );
        assert_eq!(
            event_field_selector(Some("a"), Some("Pod")).as_deref(),
            Some("involvedObject.name=a,involvedObject.kind=Pod")
        );
    }

    #[test]
    fn event_time_prefers_event_time_then_last_then_first() {
        let event = |extra: serde_json::Value| -> Event {
            let mut base = json!({"metadata": {}, "involvedObject": {}, "type": "Normal", "reason": "R", "message": "m", "count": 3});
            base.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            serde_json::from_value(base).unwrap()
        };
        let first = json!({"firstTimestamp": "2026-01-01T00:00:01Z"});
        assert_eq!(
            event_summary(&event(first)).last_timestamp,
            "2026-01-01T00:00:01Z"
        );
        let last = json!({"firstTimestamp": "2026-01-01T00:00:01Z", "lastTimestamp": "2026-01-01T00:00:02Z"});
        assert_eq!(event_summary(&event(last)).last_timestamp, "2026-01-01T00:00:02Z");
        let micro =
            json!({"lastTimestamp": "2026-01-01T00:00:02Z", "eventTime": "2026-01-01T00:00:03.123456Z"});
        let summary = event_summary(&event(micro));
        assert_eq!(summary.last_timestamp, "2026-01-01T00:00:03Z");
        assert_eq!((summary.count, summary.reason.as_str()), (3, "R"));
        assert_eq!(event_summary(&event(json!({}))).last_timestamp, "");
    }

    #[test]
    fn service_ports_and_annotations() {
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "coder", "namespace": "ns", "annotations": {"a": "b"}},
            "spec": {"clusterIP": "10.0.0.1", "ports": [
                {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                {"port": 443, "targetPort": 8443, "nodePort": 30443},
            ]},
        }))
        .unwrap();
        let out = service_status(&service);
        assert_eq!(out.type_, "ClusterIP");
        assert_eq!(out.ports[0].target_port, "http");
        assert_eq!(out.ports[1].target_port, "8443");
        assert_eq!(out.ports[1].node_port, Some(30443));
        assert_eq!(out.annotations["a"], "b");
    }
}
