//! AI routes of Coder — **unstable**.
//!
//! These routes exist only in 2026 `main` builds of Coder (not in v2.30.0) and have moved before
//! (AI Gateway keys were under `/api/v2/aibridge/keys`; MCP server configs under
//! `/api/experimental/mcp/servers`). Every path used for them is one of the constants below: when
//! Coder moves a route, change it here and nowhere else. A Coder version without a route answers
//! `Route not found.`, which the client reports as [`crate::Error::is_route_not_found`].
//!
//! * AI Gateway keys: [`AI_GATEWAY_KEYS`] — list, create (the key is shown once, as a [`Secret`]),
//!   delete by UUID (204). Gated by the `aibridge` feature.
//! * AI providers: [`AI_PROVIDERS`] — list, get, create (201), patch, delete (204, soft delete).
//! * MCP server configs: [`ORGANIZATIONS`]`/{org}/`[`MCP_SERVERS`] — list, create (201), patch,
//!   delete (204), and the access list [`MCP_SERVER_ACL`] — get, patch (204).

use std::collections::BTreeMap;

use reqwest::Method;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::client::{CoderClient, Result};
use crate::secret::Secret;

/// Path segments of the AI Gateway keys collection, under `/api/v2`.
pub const AI_GATEWAY_KEYS: &[&str] = &["ai-gateway", "keys"];
/// Path segments of the AI providers collection, under `/api/v2`.
pub const AI_PROVIDERS: &[&str] = &["ai", "providers"];
/// First segment of organization routes, under `/api/v2`.
pub const ORGANIZATIONS: &str = "organizations";
/// Segment of the MCP server configs collection below an organization.
pub const MCP_SERVERS: &str = "mcp-servers";
/// Segment of a config's access list below `…/mcp-servers/{id}`.
pub const MCP_SERVER_ACL: &str = "acl";
/// Role of a user or group in an MCP server config's access list: may use the server.
pub const MCP_SERVER_ROLE_READ: &str = "read";
/// Role that removes a user or group from an MCP server config's access list (in a patch).
pub const MCP_SERVER_ROLE_DELETED: &str = "";

fn path<'a>(base: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(rest.iter()).copied().collect()
}

fn mcp_path<'a>(organization: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    path(&[ORGANIZATIONS, organization, MCP_SERVERS], rest)
}

/// A field Coder may send as `null` (a Go nil slice or pointer) read as its default.
fn null_is_default<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

// -------------------------------------------------------------------- AI Gateway keys

/// An AI Gateway key as listed (no secret).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AiGatewayKey {
    /// ID.
    pub id: Uuid,
    /// Name.
    pub name: String,
    /// First characters of the key.
    pub key_prefix: String,
    /// Created.
    pub created_at: String,
    /// Last used.
    pub last_used_at: Option<String>,
}

/// A created AI Gateway key: `key` is shown once.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CreatedAiGatewayKey {
    /// ID.
    pub id: Uuid,
    /// Name.
    pub name: String,
    /// The key (secret).
    pub key: Secret,
    /// First characters of the key.
    pub key_prefix: String,
    /// Created.
    pub created_at: String,
}

// -------------------------------------------------------------------- AI providers

/// A masked upstream API key of a provider.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AiProviderKey {
    /// ID.
    pub id: Uuid,
    /// Masked value.
    pub masked: String,
    /// Created.
    pub created_at: String,
}

/// `AIProvider`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AiProvider {
    /// ID.
    pub id: Uuid,
    /// `openai`, `anthropic`, `azure`, `google`, `openai-compat`, `openrouter`, `vercel`, `bedrock`,
    /// `copilot`.
    #[serde(rename = "type")]
    pub provider_type: String,
    /// Name (`^[a-z0-9]+(-[a-z0-9]+)*$`).
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// Enabled.
    pub enabled: bool,
    /// Base URL.
    pub base_url: String,
    /// Masked keys.
    pub api_keys: Vec<AiProviderKey>,
    /// Provider-specific settings.
    pub settings: serde_json::Value,
    /// Created.
    pub created_at: String,
    /// Updated.
    pub updated_at: String,
}

/// Create body of an AI provider.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateAiProviderRequest {
    /// Provider type.
    #[serde(rename = "type")]
    pub provider_type: String,
    /// Name.
    pub name: String,
    /// Display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Enabled.
    pub enabled: bool,
    /// Base URL.
    pub base_url: String,
    /// Upstream API keys (not for `bedrock`/`copilot`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_keys: Option<Vec<Secret>>,
    /// Settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<serde_json::Value>,
}

/// A key entry of a provider patch: keep an existing key by `id`, or add a new `api_key`.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum AiProviderKeyPatch {
    /// Keep this existing key.
    Keep {
        /// ID.
        id: Uuid,
    },
    /// Add this key.
    Add {
        /// The key.
        api_key: Secret,
    },
}

/// Patch body of an AI provider. Coder's fields are pointers: an absent field is unchanged. Two replace what they
/// name: `api_keys` is the provider's whole key list afterwards, and `settings` replaces the whole settings block
/// (only the write-only AWS keys, when left out, and the server-owned `external_id` are kept), so a caller sends
/// the block it read with its own changes over it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PatchAiProviderRequest {
    /// Display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Base URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The complete key list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_keys: Option<Vec<AiProviderKeyPatch>>,
    /// Settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<serde_json::Value>,
}

// -------------------------------------------------------------------- MCP server configs

/// An MCP server config as Coder returns it (secret fields are not read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpServerConfig {
    /// ID.
    pub id: Uuid,
    /// Organization.
    pub organization_id: Option<Uuid>,
    /// Display name.
    #[serde(deserialize_with = "null_is_default")]
    pub display_name: String,
    /// Unique slug.
    #[serde(deserialize_with = "null_is_default")]
    pub slug: String,
    /// Description.
    #[serde(deserialize_with = "null_is_default")]
    pub description: String,
    /// Icon URL.
    #[serde(deserialize_with = "null_is_default")]
    pub icon_url: String,
    /// `streamable_http` or `sse`.
    #[serde(deserialize_with = "null_is_default")]
    pub transport: String,
    /// Server URL.
    #[serde(deserialize_with = "null_is_default")]
    pub url: String,
    /// `none`, `oauth2`, `api_key`, `custom_headers`, `user_oidc`.
    #[serde(deserialize_with = "null_is_default")]
    pub auth_type: String,
    /// Header name for `api_key` auth.
    #[serde(deserialize_with = "null_is_default")]
    pub api_key_header: String,
    /// Allowed tools.
    #[serde(deserialize_with = "null_is_default")]
    pub tool_allow_list: Vec<String>,
    /// Denied tools.
    #[serde(deserialize_with = "null_is_default")]
    pub tool_deny_list: Vec<String>,
    /// `force_on`, `default_on`, `default_off`.
    #[serde(deserialize_with = "null_is_default")]
    pub availability: String,
    /// Enabled.
    pub enabled: bool,
    /// Tools offered in plan mode too.
    pub allow_in_plan_mode: bool,
    /// Coder identity headers are sent to the server.
    pub forward_coder_headers: bool,
    /// OAuth2 client ID.
    #[serde(deserialize_with = "null_is_default")]
    pub oauth2_client_id: String,
    /// OAuth2 auth URL.
    #[serde(deserialize_with = "null_is_default")]
    pub oauth2_auth_url: String,
    /// OAuth2 token URL.
    #[serde(deserialize_with = "null_is_default")]
    pub oauth2_token_url: String,
    /// OAuth2 scopes.
    #[serde(deserialize_with = "null_is_default")]
    pub oauth2_scopes: String,
    /// Created.
    #[serde(deserialize_with = "null_is_default")]
    pub created_at: String,
    /// Updated.
    #[serde(deserialize_with = "null_is_default")]
    pub updated_at: String,
}

/// One entry of an MCP server config's access list (a user or a group) as Coder returns it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpServerAclEntry {
    /// User or group ID.
    pub id: Uuid,
    /// Group name (users carry `username` instead, which is not read).
    pub name: String,
    /// Role ([`MCP_SERVER_ROLE_READ`]).
    pub role: String,
}

/// `GET …/mcp-servers/{id}/acl`: who may use the config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpServerAcl {
    /// Users.
    #[serde(deserialize_with = "null_is_default")]
    pub users: Vec<McpServerAclEntry>,
    /// Groups.
    #[serde(deserialize_with = "null_is_default")]
    pub groups: Vec<McpServerAclEntry>,
}

/// `PATCH …/mcp-servers/{id}/acl`: roles by user or group ID; the role [`MCP_SERVER_ROLE_DELETED`] removes the
/// entry, unnamed entries stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateMcpServerAclRequest {
    /// Roles by user ID.
    pub user_roles: BTreeMap<String, String>,
    /// Roles by group ID.
    pub group_roles: BTreeMap<String, String>,
}

/// Create/patch body of an MCP server config; absent fields are not sent, and a patch leaves them as Coder has them
/// (Coder's update fields are pointers), except that a changed `auth_type` clears the other auth types' fields.
/// Secret values are [`Secret`]s.
#[derive(Debug, Clone, Default, Serialize)]
pub struct McpServerConfigRequest {
    /// Display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Slug.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slug: Option<String>,
    /// Description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Icon URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icon_url: Option<String>,
    /// Transport.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Auth type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_type: Option<String>,
    /// OAuth2 client ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth2_client_id: Option<String>,
    /// OAuth2 client secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth2_client_secret: Option<Secret>,
    /// OAuth2 auth URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth2_auth_url: Option<String>,
    /// OAuth2 token URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth2_token_url: Option<String>,
    /// OAuth2 scopes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth2_scopes: Option<String>,
    /// API key header name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_header: Option<String>,
    /// API key value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_value: Option<Secret>,
    /// Custom headers (values are secrets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_headers: Option<BTreeMap<String, Secret>>,
    /// Allowed tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_allow_list: Option<Vec<String>>,
    /// Denied tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_deny_list: Option<Vec<String>>,
    /// Availability.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub availability: Option<String>,
    /// Enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Tools offered in plan mode too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_in_plan_mode: Option<bool>,
    /// Send Coder identity headers to the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forward_coder_headers: Option<bool>,
}

impl CoderClient {
    /// `GET /api/v2/ai-gateway/keys`.
    pub async fn ai_gateway_keys(&self) -> Result<Vec<AiGatewayKey>> {
        self.get_json(AI_GATEWAY_KEYS, &[]).await
    }

    /// `POST /api/v2/ai-gateway/keys` `{"name"}` (201; duplicate name → 400 `Key name must be unique.`).
    pub async fn create_ai_gateway_key(&self, name: &str) -> Result<CreatedAiGatewayKey> {
        #[derive(Serialize)]
        struct Create<'a> {
            name: &'a str,
        }
        self.send_json(Method::POST, AI_GATEWAY_KEYS, &Create { name })
            .await
    }

    /// `DELETE /api/v2/ai-gateway/keys/{id}` (204).
    pub async fn delete_ai_gateway_key(&self, id: Uuid) -> Result<()> {
        let id = id.to_string();
        self.send_no_content::<()>(Method::DELETE, &path(AI_GATEWAY_KEYS, &[&id]), None)
            .await
    }

    /// `GET /api/v2/ai/providers`.
    pub async fn ai_providers(&self) -> Result<Vec<AiProvider>> {
        self.get_json(AI_PROVIDERS, &[]).await
    }

    /// `GET /api/v2/ai/providers/{idOrName}`.
    pub async fn ai_provider(&self, id_or_name: &str) -> Result<AiProvider> {
        self.get_json(&path(AI_PROVIDERS, &[id_or_name]), &[]).await
    }

    /// `POST /api/v2/ai/providers` (201).
    pub async fn create_ai_provider(&self, request: &CreateAiProviderRequest) -> Result<AiProvider> {
        self.send_json(Method::POST, AI_PROVIDERS, request).await
    }

    /// `PATCH /api/v2/ai/providers/{idOrName}`.
    pub async fn patch_ai_provider(
        &self,
        id_or_name: &str,
        request: &PatchAiProviderRequest,
    ) -> Result<AiProvider> {
        self.send_json(Method::PATCH, &path(AI_PROVIDERS, &[id_or_name]), request)
            .await
    }

    /// `DELETE /api/v2/ai/providers/{idOrName}` (204, soft delete).
    pub async fn delete_ai_provider(&self, id_or_name: &str) -> Result<()> {
        self.send_no_content::<()>(Method::DELETE, &path(AI_PROVIDERS, &[id_or_name]), None)
            .await
    }

    /// `GET /api/v2/organizations/{org}/mcp-servers`.
    pub async fn mcp_server_configs(&self, organization: &str) -> Result<Vec<McpServerConfig>> {
        self.get_json(&mcp_path(organization, &[]), &[]).await
    }

    /// `POST /api/v2/organizations/{org}/mcp-servers` (201).
    pub async fn create_mcp_server_config(
        &self,
        organization: &str,
        request: &McpServerConfigRequest,
    ) -> Result<McpServerConfig> {
        self.send_json(Method::POST, &mcp_path(organization, &[]), request)
            .await
    }

    /// `PATCH /api/v2/organizations/{org}/mcp-servers/{id}`.
    pub async fn patch_mcp_server_config(
        &self,
        organization: &str,
        id: Uuid,
        request: &McpServerConfigRequest,
    ) -> Result<McpServerConfig> {
        let id = id.to_string();
        self.send_json(Method::PATCH, &mcp_path(organization, &[&id]), request)
            .await
    }

    /// `DELETE /api/v2/organizations/{org}/mcp-servers/{id}` (204).
    pub async fn delete_mcp_server_config(&self, organization: &str, id: Uuid) -> Result<()> {
        let id = id.to_string();
        self.send_no_content::<()>(Method::DELETE, &mcp_path(organization, &[&id]), None)
            .await
    }

    /// `GET /api/v2/organizations/{org}/mcp-servers/{id}/acl`.
    pub async fn mcp_server_acl(&self, organization: &str, id: Uuid) -> Result<McpServerAcl> {
        let id = id.to_string();
        self.get_json(&mcp_path(organization, &[&id, MCP_SERVER_ACL]), &[])
            .await
    }

    /// `PATCH /api/v2/organizations/{org}/mcp-servers/{id}/acl` (204).
    pub async fn patch_mcp_server_acl(
        &self,
        organization: &str,
        id: Uuid,
        request: &UpdateMcpServerAclRequest,
    ) -> Result<()> {
        let id = id.to_string();
        self.send_no_content(
            Method::PATCH,
            &mcp_path(organization, &[&id, MCP_SERVER_ACL]),
            Some(request),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_key_debug_is_redacted() {
        let k: CreatedAiGatewayKey =
            serde_json::from_str(r#"{"id":"00000000-0000-0000-0000-000000000001","name":"a","key":"cgk_supersecret","key_prefix":"cgk_"}"#)
                .unwrap();
        assert!(!format!("{k:?}").contains("supersecret"));
        assert_eq!(k.key.expose(), "cgk_supersecret");
    }

    #[test]
    fn request_debug_is_redacted_but_serialized_value_is_sent() {
        let r = CreateAiProviderRequest {
            provider_type: "openai".into(),
            name: "oa".into(),
            api_keys: Some(vec![Secret::new("sk-upstream")]),
            ..Default::default()
        };
        assert!(!format!("{r:?}").contains("sk-upstream"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["api_keys"][0], "sk-upstream");
        assert_eq!(json["type"], "openai");
    }

    #[test]
    fn null_lists_and_texts_of_an_mcp_config_read_as_empty() {
        let config: McpServerConfig = serde_json::from_str(
            r#"{"id":"00000000-0000-0000-0000-000000000001","slug":"x","tool_allow_list":null,"description":null,"enabled":true}"#,
        )
        .unwrap();
        assert!(config.tool_allow_list.is_empty());
        assert_eq!(config.description, "");
        assert!(config.enabled);
        let acl: McpServerAcl = serde_json::from_str(r#"{"users":null,"groups":[]}"#).unwrap();
        assert!(acl.users.is_empty());
    }

    #[test]
    fn paths_are_assembled_from_the_constants() {
        assert_eq!(path(AI_GATEWAY_KEYS, &["x"]), vec!["ai-gateway", "keys", "x"]);
        assert_eq!(
            mcp_path("default", &[]),
            vec!["organizations", "default", "mcp-servers"]
        );
    }
}
