//! The MCP tools, one module per family, each tool with one input and one output type (their JSON Schemas, in
//! camelCase, are generated from these types). [`McpServer::tool_table`] is the one table that registers them all.
//! A failed call is a tool error (`isError: true`) whose text says what was wrong; outputs carry only the fields
//! their types name, so no tool ever returns a Secret's data.

mod cluster;
mod control_planes;
mod fleet;
mod people;
mod templates;
mod workspaces;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool_handler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::metrics::{Outcome, ToolMetrics};
use crate::names::{self, Rule};

/// The MCP server name announced in `initialize`.
pub const SERVER_NAME: &str = "coder-k8s";

/// One MCP session's handler: the tools and the Kubernetes client they act through.
#[derive(Clone)]
pub struct McpServer {
    kube: kube::Client,
    version: String,
    tool_router: ToolRouter<Self>,
    metrics: ToolMetrics,
}

impl McpServer {
    pub fn new(kube: kube::Client, version: String, metrics: ToolMetrics) -> Self {
        Self {
            kube,
            version,
            tool_router: Self::tool_table(),
            metrics,
        }
    }

    /// Every tool of every family.
    pub fn tool_table() -> ToolRouter<Self> {
        Self::control_plane_tools()
            + Self::cluster_tools()
            + Self::workspace_tools()
            + Self::template_tools()
            + Self::fleet_tools()
            + Self::people_tools()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    /// Runs the tool and counts the call by tool and outcome (`coder_k8s_mcp_tool_calls_total`).
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let tool = match self.tool_router.has_route(&request.name) {
            true => request.name.to_string(),
            false => "unknown".to_owned(),
        };
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        let answer = self.tool_router.call(call).await;
        let outcome = match &answer {
            Ok(rmcp::model::CallToolResponse::Complete(result)) if result.is_error == Some(true) => {
                Outcome::Error
            }
            Ok(_) => Outcome::Ok,
            Err(_) => Outcome::Invalid,
        };
        self.metrics.called(&tool, outcome);
        answer
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(SERVER_NAME, self.version.clone()))
            .with_instructions(
                "Read and operate coder-k8s: control planes, provisioners, workspace proxies, the aggregated \
                 CoderWorkspace and CoderTemplate objects, Coder's organizations, groups and users (read only), \
                 events and logs. Every call runs with the server's \
                 Kubernetes ServiceAccount.",
            )
    }
}

/// Marks `fields` required in an input's JSON Schema (and drops the `default` schemars gives them). They keep
/// `#[serde(default)]`, so that leaving one out is the tool error `<field> is required`, as an empty value is, rather
/// than a deserialization error; the schema still tells clients that the call cannot do without them.
pub(crate) struct Required(pub &'static [&'static str]);

impl schemars::transform::Transform for Required {
    fn transform(&mut self, schema: &mut schemars::Schema) {
        let Some(object) = schema.as_object_mut() else {
            return;
        };
        if let Some(serde_json::Value::Object(properties)) = object.get_mut("properties") {
            for field in self.0 {
                if let Some(serde_json::Value::Object(property)) = properties.get_mut(*field) {
                    property.remove("default");
                }
            }
        }
        let required = object
            .entry("required")
            .or_insert_with(|| serde_json::Value::Array(Vec::new()));
        if let serde_json::Value::Array(list) = required {
            for field in self.0 {
                if !list.iter().any(|listed| listed == field) {
                    list.push(serde_json::Value::from(*field));
                }
            }
        }
    }
}

/// The input of a tool that names one namespaced object.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = Required(&["namespace", "name"]))]
pub struct ObjectRef {
    /// Namespace of the object (required).
    #[serde(default)]
    pub namespace: String,
    /// Name of the object (required).
    #[serde(default)]
    pub name: String,
}

impl ObjectRef {
    /// The namespace and the name, the name held to `name_rule`; or the error naming the argument that is missing
    /// or breaks its rule.
    fn checked(&self, name_rule: Rule) -> Result<(&str, &str), String> {
        Ok((
            names::required("namespace", &self.namespace, Rule::Namespace)?,
            names::required("name", &self.name, name_rule)?,
        ))
    }
}

/// A `metav1.Condition` as the tools show it.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConditionSummary {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub last_transition_time: String,
}

impl From<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> for ConditionSummary {
    fn from(c: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition) -> Self {
        Self {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            observed_generation: c.observed_generation,
            last_transition_time: format_time(&c.last_transition_time),
        }
    }
}

/// RFC 3339 in UTC with whole seconds (`2026-01-02T03:04:05Z`).
pub fn format_time(time: &Time) -> String {
    format_timestamp(time.0)
}

fn format_timestamp(timestamp: k8s_openapi::jiff::Timestamp) -> String {
    timestamp.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// [`format_time`] of an optional time; empty when absent.
pub fn format_optional_time(time: Option<&Time>) -> String {
    time.map(format_time).unwrap_or_default()
}

/// A Kubernetes error as a tool error: `<what>: <the API server's message>`.
pub fn kube_error(what: &str, error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{what}: {}", status.message),
        other => format!("{what}: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_every_tool_once() {
        let names: std::collections::BTreeSet<String> = McpServer::tool_table()
            .list_all()
            .into_iter()
            .map(|tool| tool.name.to_string())
            .collect();
        let expected = [
            "check_health",
            "get_control_plane_deployment_status",
            "get_control_plane_status",
            "get_events",
            "get_group",
            "get_organization",
            "get_pod_logs",
            "get_provisioner_status",
            "get_service_status",
            "get_template",
            "get_user",
            "get_workspace",
            "get_workspace_build_logs",
            "get_workspace_proxy_status",
            "list_control_plane_pods",
            "list_control_planes",
            "list_groups",
            "list_organizations",
            "list_templates",
            "list_users",
            "list_workspaces",
            "set_template_running",
            "set_workspace_running",
            "start_workspace",
            "stop_workspace",
        ];
        assert_eq!(names.iter().map(String::as_str).collect::<Vec<_>>(), expected);
    }

    #[test]
    fn every_tool_has_a_description_and_an_object_output_schema_in_camel_case() {
        for tool in McpServer::tool_table().list_all() {
            assert!(
                tool.description.as_deref().is_some_and(|d| !d.is_empty()),
                "{}",
                tool.name
            );
            let output = tool
                .output_schema
                .as_ref()
                .unwrap_or_else(|| panic!("{} has no output schema", tool.name));
            assert_eq!(
                output.get("type").and_then(|t| t.as_str()),
                Some("object"),
                "{}",
                tool.name
            );
            let input = serde_json::to_string(&tool.input_schema).unwrap();
            assert!(
                !input.contains('_'),
                "{}: snake_case in the input schema: {input}",
                tool.name
            );
        }
    }

    #[test]
    fn input_schemas_require_what_a_call_cannot_do_without() {
        let object = ["name", "namespace"].as_slice();
        let running = ["name", "namespace", "running"].as_slice();
        let nothing: &[&str] = &[];
        let expected: std::collections::BTreeMap<&str, &[&str]> = [
            ("check_health", nothing),
            ("get_control_plane_deployment_status", object),
            ("get_control_plane_status", object),
            ("get_events", &["namespace"]),
            ("get_group", object),
            ("get_organization", object),
            ("get_user", object),
            ("list_groups", nothing),
            ("list_organizations", nothing),
            ("list_users", nothing),
            ("get_pod_logs", object),
            ("get_provisioner_status", object),
            ("get_service_status", object),
            ("get_template", object),
            ("get_workspace", object),
            ("get_workspace_build_logs", object),
            ("get_workspace_proxy_status", object),
            ("list_control_plane_pods", object),
            ("list_control_planes", nothing),
            ("list_templates", nothing),
            ("list_workspaces", nothing),
            ("set_template_running", running),
            ("set_workspace_running", running),
            ("start_workspace", object),
            ("stop_workspace", object),
        ]
        .into();
        let tools = McpServer::tool_table().list_all();
        assert_eq!(tools.len(), expected.len());
        for tool in tools {
            let schema = serde_json::Value::Object((*tool.input_schema).clone());
            let mut required: Vec<&str> = schema
                .get("required")
                .and_then(|r| r.as_array())
                .map(|r| r.iter().filter_map(|f| f.as_str()).collect())
                .unwrap_or_default();
            required.sort_unstable();
            assert_eq!(required, expected[tool.name.as_ref()], "{}: {schema}", tool.name);
            for field in &required {
                let property = &schema["properties"][*field];
                assert!(
                    property.is_object() && property.get("default").is_none(),
                    "{}: required {field} is not a property without a default: {schema}",
                    tool.name
                );
            }
        }
    }

    #[test]
    fn a_missing_required_argument_is_required_like_an_empty_one() {
        let input: workspaces::WorkspaceTransitionInput =
            serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!((input.namespace.as_str(), input.name.as_str()), ("", ""));
        let object: ObjectRef = serde_json::from_value(serde_json::json!({"namespace": "ns"})).unwrap();
        assert_eq!(
            object.checked(Rule::Object("Pod")).unwrap_err(),
            "name is required"
        );
    }

    #[test]
    fn times_are_rfc3339_seconds_in_utc() {
        let time = Time("2026-01-02T03:04:05.678+02:00".parse().unwrap());
        assert_eq!(format_time(&time), "2026-01-02T01:04:05Z");
        assert_eq!(format_optional_time(None), "");
    }
}
