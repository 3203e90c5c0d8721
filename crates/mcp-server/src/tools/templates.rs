//! Template tools, through the aggregated `aggregation.coder.com/v1alpha1` CoderTemplate objects: list, get and set
//! the legacy `spec.running`. Template files are never returned.

use coder_k8s_api::aggregation::CoderTemplate;
use kube::api::{DynamicObject, PostParams};
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::workspaces::{aggregated_api, list_typed, typed};
use super::{McpServer, ObjectRef, Required, format_optional_time, kube_error};
use crate::names::{self, Rule};

const KIND: &str = "CoderTemplate";
const PLURAL: &str = "codertemplates";

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListTemplatesInput {
    /// Namespace to list; every namespace when absent.
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSummary {
    pub name: String,
    pub namespace: String,
    pub running: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub auto_shutdown: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ListTemplatesOutput {
    pub items: Vec<TemplateSummary>,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct GetTemplateInput(pub ObjectRef);

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GetTemplateOutput {
    pub template: TemplateSummary,
}

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = Required(&["namespace", "name"]))]
pub struct SetTemplateRunningInput {
    /// Namespace of the CoderTemplate (required).
    #[serde(default)]
    pub namespace: String,
    /// Name of the CoderTemplate, organization.template (required).
    #[serde(default)]
    pub name: String,
    /// The desired spec.running (required).
    pub running: bool,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SetTemplateRunningOutput {
    /// The template as the server answered the update.
    pub template: TemplateSummary,
    /// False when spec.running already had the requested value (nothing was written).
    pub updated: bool,
}

/// The summary of a template.
pub fn template_summary(template: &CoderTemplate) -> TemplateSummary {
    TemplateSummary {
        name: template.metadata.name.clone().unwrap_or_default(),
        namespace: template.metadata.namespace.clone().unwrap_or_default(),
        running: template.spec.running,
        auto_shutdown: format_optional_time(template.status.auto_shutdown.as_ref()),
    }
}

impl McpServer {
    async fn get_template_object(&self, namespace: &str, name: &str) -> Result<DynamicObject, String> {
        aggregated_api(&self.kube, Some(namespace), KIND, PLURAL)
            .get(name)
            .await
            .map_err(|e| kube_error(&format!("get CoderTemplate {namespace}/{name}"), &e))
    }
}

#[tool_router(router = template_tools, vis = "pub(crate)")]
impl McpServer {
    #[tool(
        description = "List CoderTemplate resources.",
        annotations(read_only_hint = true)
    )]
    async fn list_templates(
        &self,
        Parameters(input): Parameters<ListTemplatesInput>,
    ) -> Result<Json<ListTemplatesOutput>, String> {
        let templates: Vec<CoderTemplate> =
            list_typed(&self.kube, input.namespace.as_deref(), KIND, PLURAL).await?;
        let items = templates.iter().map(template_summary).collect();
        Ok(Json(ListTemplatesOutput { items }))
    }

    #[tool(
        description = "Get a CoderTemplate resource by namespace and name.",
        annotations(read_only_hint = true)
    )]
    async fn get_template(
        &self,
        Parameters(GetTemplateInput(input)): Parameters<GetTemplateInput>,
    ) -> Result<Json<GetTemplateOutput>, String> {
        let (namespace, name) = input.checked(Rule::Template)?;
        let template: CoderTemplate = typed(&self.get_template_object(namespace, name).await?, KIND)?;
        Ok(Json(GetTemplateOutput {
            template: template_summary(&template),
        }))
    }

    #[tool(
        description = "Set spec.running for a CoderTemplate resource (a legacy field: the server may keep its own value; \
                       the output shows the template as the server answered).",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true)
    )]
    async fn set_template_running(
        &self,
        Parameters(input): Parameters<SetTemplateRunningInput>,
    ) -> Result<Json<SetTemplateRunningOutput>, String> {
        let namespace = names::required("namespace", &input.namespace, Rule::Namespace)?;
        let name = names::required("name", &input.name, Rule::Template)?;
        let mut object = self.get_template_object(namespace, name).await?;
        let current: CoderTemplate = typed(&object, KIND)?;
        if current.spec.running == input.running {
            return Ok(Json(SetTemplateRunningOutput {
                template: template_summary(&current),
                updated: false,
            }));
        }
        object.data["spec"]["running"] = serde_json::Value::Bool(input.running);
        let replaced = aggregated_api(&self.kube, Some(namespace), KIND, PLURAL)
            .replace(name, &PostParams::default(), &object)
            .await
            .map_err(|e| kube_error(&format!("update CoderTemplate {namespace}/{name}"), &e))?;
        let template: CoderTemplate = typed(&replaced, KIND)?;
        Ok(Json(SetTemplateRunningOutput {
            template: template_summary(&template),
            updated: true,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn template_summaries_leave_out_the_files() {
        let template: CoderTemplate = serde_json::from_value(json!({
            "metadata": {"name": "acme.docker", "namespace": "ns"},
            "spec": {"organization": "acme", "files": {"main.tf": "secret-ish content"}},
            "status": {"autoShutdown": "2026-01-01T00:00:00Z"},
        }))
        .unwrap();
        let out = serde_json::to_value(template_summary(&template)).unwrap();
        assert_eq!(
            out,
            json!({"name": "acme.docker", "namespace": "ns", "running": false, "autoShutdown": "2026-01-01T00:00:00Z"})
        );
    }
}
