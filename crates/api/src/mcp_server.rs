//! `CoderMCPServer`: one MCP server config in a Coder organization (AI settings > MCP servers), whose tools Coder
//! chats offer to the model.
//!
//! The operator creates the config with `POST /api/v2/organizations/{org}/mcp-servers`, keeps it in line with the spec
//! with `PATCH …/mcp-servers/{id}`, sets its group access through `…/mcp-servers/{id}/acl`, and deletes it when the
//! object goes. It needs Coder v2.37.2 or later. MCP servers have no cleanup records: delete the objects before their
//! namespace.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::shared::{ControlPlaneReference, SecretKeySelector, conditions_schema};

/// Finalizer that deletes the config in Coder before the object goes.
pub const FINALIZER: &str = "coder.com/mcp-server-cleanup";
/// Data key of the API key value when `apiKey.valueSecretRef.key` is empty.
pub const DEFAULT_API_KEY_SECRET_KEY: &str = "api-key";
/// Data key of the OAuth2 client secret when `oauth2.clientSecretSecretRef.key` is empty.
pub const DEFAULT_CLIENT_SECRET_SECRET_KEY: &str = "client-secret";
/// Data key of a custom header value when `customHeaders[].valueSecretRef.key` is empty.
pub const DEFAULT_HEADER_VALUE_SECRET_KEY: &str = "value";
/// Header that carries the API key when `apiKey.header` is unset (Coder's default).
pub const DEFAULT_API_KEY_HEADER: &str = "Authorization";
/// Rule for slugs: lowercase letters and digits, with single hyphens between them.
pub const SLUG_PATTERN: &str = "^[a-z0-9]+(-[a-z0-9]+)*$";

/// Condition types of this kind.
pub mod conditions {
    pub use crate::shared::sync_status::conditions::{READY, RECONCILING, STALLED};
}

/// Condition reasons of this kind.
pub mod reasons {
    pub use crate::shared::sync_status::reasons::{
        CODER_UNAVAILABLE, CONTROL_PLANE_NOT_READY, DELETING, NOT_SUPPORTED, OPERATOR_ACCESS_NOT_READY,
        REJECTED, SYNCED,
    };
    /// Reason (stalled): the control plane does not list `spec.organization` in `spec.mcpServers.organizations`. When the
    /// control plane withdraws its opt-in, the operator disables the server in Coder.
    pub const MCP_SERVERS_NOT_ALLOWED: &str = "MCPServersNotAllowed";
    /// Reason (stalled): someone disabled the server in the Coder dashboard. The next spec edit enables it again.
    pub const DISABLED_EXTERNALLY: &str = "DisabledExternally";
    /// Reason (stalled): a credential Secret is missing, lacks its key, or does not (or no longer) consent to the
    /// destination: the label `coder.com/credential=true` or the origin in `coder.com/credential-destinations` is
    /// missing. The operator disables the server in Coder until the Secret consents again.
    pub const CREDENTIALS_NOT_READY: &str = "CredentialsNotReady";
    /// Reason (stalled): the Coder organization in `spec.organization` does not exist.
    pub const ORGANIZATION_NOT_FOUND: &str = "OrganizationNotFound";
    /// Reason (stalled): another MCP server config in Coder already uses the slug.
    pub const SLUG_CONFLICT: &str = "SlugConflict";
    /// Reason: a group in `spec.access.groups` does not exist in Coder. The operator removed the access of unlisted groups
    /// and of users, and added no group.
    pub const GROUP_NOT_FOUND: &str = "GroupNotFound";
}

/// An MCP server config in a Coder organization, kept in line with this spec by the operator.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "coder.com",
    version = "v1alpha1",
    kind = "CoderMCPServer",
    plural = "codermcpservers",
    namespaced,
    status = "CoderMCPServerStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "CoderMCPServer manages one MCP server config in a Coder organization (AI settings > MCP servers), whose tools Coder chats offer to the model. The control plane must list the organization in spec.mcpServers.organizations.",
    validation = kube::core::Rule::new(
        "has(self.spec.slug) || (size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]+(-[a-z0-9]+)*$'))"
    ).message("spec.slug is required when metadata.name is not a valid slug (at most 63 lowercase letters and digits, single hyphens between them)"),
    printcolumn(name = "Organization", type_ = "string", json_path = ".spec.organization"),
    printcolumn(name = "Enabled", type_ = "boolean", json_path = ".spec.enabled"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason", priority = "1"),
    printcolumn(name = "URL", type_ = "string", json_path = ".spec.url", priority = "1"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(
    validation = kube::core::Rule::new("self.organization == oldSelf.organization")
        .message("organization is immutable; create a new CoderMCPServer"),
    validation = kube::core::Rule::new("(has(self.authType) && self.authType == 'oauth2') == has(self.oauth2)")
        .message("oauth2 must be set when authType is oauth2, and only then"),
    validation = kube::core::Rule::new("(has(self.authType) && self.authType == 'api_key') == has(self.apiKey)")
        .message("apiKey must be set when authType is api_key, and only then"),
    validation = kube::core::Rule::new(
        "(has(self.authType) && self.authType == 'custom_headers') == (has(self.customHeaders) && size(self.customHeaders) > 0)"
    ).message("customHeaders must be set when authType is custom_headers, and only then")
)]
#[serde(rename_all = "camelCase")]
pub struct CoderMCPServerSpec {
    /// The CoderControlPlane (same namespace) whose Coder deployment holds the config. It must list `organization`
    /// in `spec.mcpServers.organizations`, and its operator user must be a site owner.
    pub control_plane_ref: ControlPlaneReference,
    /// Name of the Coder organization that holds the config. Immutable.
    #[schemars(length(min = 1, max = 32), regex(pattern = r"^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$"))]
    pub organization: String,
    /// Slug of the config in Coder, unique in the deployment. When unset, the operator uses `metadata.name`, which
    /// must then follow the same rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = SLUG_PATTERN))]
    pub slug: Option<String>,
    /// Name shown in Coder. Default: the slug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub display_name: Option<String>,
    /// Description shown in Coder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
    /// Icon URL shown in Coder: an absolute URL or a Coder path such as `/icon/github.svg`.
    #[serde(default, rename = "iconURL", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub icon_url: Option<String>,
    /// MCP transport of the server. Default `streamable_http`.
    #[serde(default)]
    pub transport: MCPTransport,
    /// Absolute `http` or `https` URL of the MCP endpoint.
    #[schemars(
        length(min = 1, max = 2048),
        regex(pattern = r"^https?://[^\s/?#]+([/?#]\S*)?$")
    )]
    pub url: String,
    /// How Coder authenticates to the server. Default `none`. `oauth2`, `api_key` and `custom_headers` need the
    /// matching field below; `user_oidc` forwards each user's OIDC token and needs no field.
    #[serde(default)]
    pub auth_type: MCPAuthType,
    /// OAuth2 client that Coder uses for `authType: oauth2`; each user connects their own account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth2: Option<MCPOAuth2Spec>,
    /// API key that Coder sends in a header for `authType: api_key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<MCPAPIKeySpec>,
    /// Headers that Coder sends on every request for `authType: custom_headers`. Names are unique, ignoring case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = kube::core::Rule::new(
        "self.all(h, self.exists_one(o, o.name.lowerAscii() == h.name.lowerAscii()))"
    ).message("customHeaders names must be unique, ignoring case"))]
    pub custom_headers: Vec<MCPCustomHeader>,
    /// Only these tools of the server are offered. Empty: every tool not in `toolDenyList`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 256)))]
    pub tool_allow_list: Vec<String>,
    /// These tools of the server are never offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 256)))]
    pub tool_deny_list: Vec<String>,
    /// Whether chats use the server: `force_on` (always), `default_on` (on unless a user turns it off) or
    /// `default_off` (off unless a user turns it on). Default `default_off`, as in Coder.
    #[serde(default)]
    pub availability: MCPAvailability,
    /// Whether the server is enabled in Coder. Default true. The operator disables the server when a credential Secret
    /// withdraws consent or the control plane withdraws its opt-in; a disable in the dashboard stalls the object with
    /// `DisabledExternally` until the next spec edit.
    #[serde(default = "default_true", skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Offer the tools also in plan mode. Default false.
    #[serde(default)]
    pub allow_in_plan_mode: bool,
    /// Send Coder identity headers (owner, chat and workspace IDs) to the server on every request. Default false, so
    /// that chat identity does not leak to third-party servers.
    #[serde(default)]
    pub forward_coder_headers: bool,
    /// Who may use the server. When unset, the operator leaves access as it is in Coder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<MCPServerAccess>,
}

fn default_true() -> Option<bool> {
    Some(true)
}

impl CoderMCPServerSpec {
    /// Whether the server is enabled (the default when `enabled` is unset).
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

impl CoderMCPServer {
    /// The slug in Coder: `spec.slug`, or `metadata.name` when the spec names none.
    pub fn coder_slug(&self) -> &str {
        match self.spec.slug.as_deref() {
            Some(slug) if !slug.is_empty() => slug,
            _ => self.metadata.name.as_deref().unwrap_or_default(),
        }
    }

    /// The display name in Coder: `spec.displayName`, or the slug.
    pub fn coder_display_name(&self) -> &str {
        match self.spec.display_name.as_deref() {
            Some(name) if !name.is_empty() => name,
            _ => self.coder_slug(),
        }
    }
}

/// MCP transport.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MCPTransport {
    /// Streamable HTTP.
    #[default]
    StreamableHttp,
    /// Server-sent events (the older MCP transport).
    Sse,
}

impl MCPTransport {
    /// The value Coder uses in `transport`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StreamableHttp => "streamable_http",
            Self::Sse => "sse",
        }
    }
}

/// How Coder authenticates to an MCP server.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MCPAuthType {
    /// No authentication.
    #[default]
    #[serde(rename = "none")]
    None,
    /// OAuth2: each user connects their account through the client in `oauth2`.
    #[serde(rename = "oauth2")]
    OAuth2,
    /// A shared API key in a header, from `apiKey`.
    #[serde(rename = "api_key")]
    APIKey,
    /// Shared headers, from `customHeaders`.
    #[serde(rename = "custom_headers")]
    CustomHeaders,
    /// Each user's OIDC token from their Coder login.
    #[serde(rename = "user_oidc")]
    UserOIDC,
}

impl MCPAuthType {
    /// The value Coder uses in `auth_type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::OAuth2 => "oauth2",
            Self::APIKey => "api_key",
            Self::CustomHeaders => "custom_headers",
            Self::UserOIDC => "user_oidc",
        }
    }
}

/// Availability of an MCP server in chats.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MCPAvailability {
    /// Always on; users cannot turn it off.
    ForceOn,
    /// On unless a user turns it off.
    DefaultOn,
    /// Off unless a user turns it on.
    #[default]
    DefaultOff,
}

impl MCPAvailability {
    /// The value Coder uses in `availability`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ForceOn => "force_on",
            Self::DefaultOn => "default_on",
            Self::DefaultOff => "default_off",
        }
    }
}

/// OAuth2 client of an MCP server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MCPOAuth2Spec {
    /// OAuth2 client ID.
    #[serde(rename = "clientID")]
    #[schemars(length(min = 1, max = 512))]
    pub client_id: String,
    /// Secret key (same namespace) with the OAuth2 client secret; omit it for a public client. The key defaults to
    /// `client-secret`. The Secret must carry the label `coder.com/credential=true` and list the origin of
    /// `tokenURL` (or of `url` when `tokenURL` is unset) in the annotation `coder.com/credential-destinations`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_secret_ref: Option<SecretKeySelector>,
    /// Authorization endpoint. When unset, Coder discovers it from the server.
    #[serde(default, rename = "authURL", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = r"^https?://[^\s/?#]+([/?#]\S*)?$"))]
    pub auth_url: Option<String>,
    /// Token endpoint. When unset, Coder discovers it from the server.
    #[serde(default, rename = "tokenURL", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = r"^https?://[^\s/?#]+([/?#]\S*)?$"))]
    pub token_url: Option<String>,
    /// Scopes to request, passed to Coder as written (OAuth2 uses a space-separated list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub scopes: Option<String>,
}

/// A shared API key that Coder sends in a header.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MCPAPIKeySpec {
    /// Header that carries the key. Default `Authorization`; the Secret value then includes the scheme, for example
    /// `Bearer <key>`.
    #[serde(default = "default_api_key_header")]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"))]
    pub header: String,
    /// Secret key (same namespace) with the header value. The key defaults to `api-key`. The Secret must carry the
    /// label `coder.com/credential=true` and list the origin of `url` in the annotation
    /// `coder.com/credential-destinations`.
    pub value_secret_ref: SecretKeySelector,
}

fn default_api_key_header() -> String {
    DEFAULT_API_KEY_HEADER.to_owned()
}

/// A header that Coder sends on every request to an MCP server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MCPCustomHeader {
    /// Header name.
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"))]
    pub name: String,
    /// Secret key (same namespace) with the header value. The key defaults to `value`. The Secret must carry the
    /// label `coder.com/credential=true` and list the origin of `url` in the annotation
    /// `coder.com/credential-destinations`.
    pub value_secret_ref: SecretKeySelector,
}

/// Who may use an MCP server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MCPServerAccess {
    /// Names of the Coder groups (in `organization`) that may use the server. The operator removes the access of
    /// unlisted groups and of users. When a listed group does not exist, it adds no group at all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 255)))]
    #[x_kube(validation = kube::core::Rule::new("self.all(g, self.exists_one(o, o == g))")
        .message("groups must be unique"))]
    pub groups: Vec<String>,
}

/// Observed state of a CoderMCPServer.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CoderMCPServerStatus {
    /// Generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// ID of the config in Coder. Set once Coder confirmed the create; the operator updates and deletes by this ID.
    #[serde(default, rename = "serverID", skip_serializing_if = "Option::is_none")]
    pub server_id: Option<String>,
    /// ID of the Coder organization that holds the config.
    #[serde(default, rename = "organizationID", skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<String>,
    /// Time the operator recorded a create, before it sent it. While set without `serverID`, the operator looks the
    /// slug up in the organization instead of sending another create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_marker: Option<Time>,
    /// `Pending` while the operator works, `Ready` when Coder matches the spec, `Stalled` when a person must act.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<MCPServerPhase>,
    /// Conditions: `Ready`, `Reconciling`, `Stalled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// Phase of the CoderMCPServer: `Pending` while the operator works towards the spec, `Ready` when the config
/// in Coder matches the spec, `Stalled` when the operator cannot go on without a change by a person (the
/// `Stalled` condition says why).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MCPServerPhase {
    /// The operator is working towards the spec; the conditions say what it waits for.
    #[default]
    Pending,
    /// The config in Coder matches the spec.
    Ready,
    /// The operator cannot go on without a change by a person; the `Stalled` condition says why.
    Stalled,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use kube::core::ObjectMeta;

    #[test]
    fn crd_carries_cel_messages_and_acronym_fields() {
        let crd = CoderMCPServer::crd();
        assert_eq!(crd.spec.names.kind, "CoderMCPServer");
        assert_eq!(crd.spec.names.plural, "codermcpservers");
        let json = serde_json::to_string(&crd).expect("serialise the CRD");
        for needle in [
            "organization is immutable; create a new CoderMCPServer",
            "oauth2 must be set when authType is oauth2, and only then",
            "apiKey must be set when authType is api_key, and only then",
            "customHeaders must be set when authType is custom_headers, and only then",
            "customHeaders names must be unique, ignoring case",
            "groups must be unique",
            "spec.slug is required when metadata.name is not a valid slug",
            "\"iconURL\"",
            "\"serverID\"",
            "\"organizationID\"",
            "\"clientID\"",
            "\"tokenURL\"",
            "\"streamable_http\"",
            "\"user_oidc\"",
            "\"default_off\"",
        ] {
            assert!(json.contains(needle), "CRD lacks {needle}");
        }
        assert!(!json.contains("iconUrl"));
        serde_saphyr::to_string(&crd).expect("serialise the CRD as YAML");
    }

    #[test]
    fn spec_defaults_when_parsed() {
        let spec: CoderMCPServerSpec = serde_json::from_value(serde_json::json!({
            "controlPlaneRef": {"name": "cp"},
            "organization": "coder",
            "url": "https://mcp.example.com/mcp",
        }))
        .expect("parse spec");
        assert_eq!(spec.transport, MCPTransport::StreamableHttp);
        assert_eq!(spec.auth_type, MCPAuthType::None);
        assert_eq!(spec.availability, MCPAvailability::DefaultOff);
        assert!(spec.is_enabled());
        assert!(!spec.allow_in_plan_mode);
        assert!(!spec.forward_coder_headers);
        assert_eq!(spec.access, None);
    }

    #[test]
    fn api_key_header_defaults_to_authorization() {
        let api_key: MCPAPIKeySpec =
            serde_json::from_value(serde_json::json!({"valueSecretRef": {"name": "s"}})).expect("parse");
        assert_eq!(api_key.header, "Authorization");
        assert_eq!(
            api_key.value_secret_ref.key_or(DEFAULT_API_KEY_SECRET_KEY),
            "api-key"
        );
    }

    #[test]
    fn enum_strings_match_serde() {
        for t in [MCPTransport::StreamableHttp, MCPTransport::Sse] {
            assert_eq!(serde_json::to_value(t).expect("serialise"), t.as_str());
        }
        for a in [
            MCPAuthType::None,
            MCPAuthType::OAuth2,
            MCPAuthType::APIKey,
            MCPAuthType::CustomHeaders,
            MCPAuthType::UserOIDC,
        ] {
            assert_eq!(serde_json::to_value(a).expect("serialise"), a.as_str());
        }
        for a in [
            MCPAvailability::ForceOn,
            MCPAvailability::DefaultOn,
            MCPAvailability::DefaultOff,
        ] {
            assert_eq!(serde_json::to_value(a).expect("serialise"), a.as_str());
        }
    }

    #[test]
    fn slug_and_display_name_fall_back() {
        let mut server = CoderMCPServer {
            metadata: ObjectMeta {
                name: Some("deepwiki".into()),
                ..ObjectMeta::default()
            },
            spec: CoderMCPServerSpec::default(),
            status: None,
        };
        assert_eq!(server.coder_slug(), "deepwiki");
        assert_eq!(server.coder_display_name(), "deepwiki");
        server.spec.slug = Some("wiki".into());
        server.spec.display_name = Some("DeepWiki".into());
        assert_eq!(server.coder_slug(), "wiki");
        assert_eq!(server.coder_display_name(), "DeepWiki");
    }

    #[test]
    fn status_uses_kubernetes_acronyms() {
        let status = CoderMCPServerStatus {
            server_id: Some("s".into()),
            organization_id: Some("o".into()),
            ..CoderMCPServerStatus::default()
        };
        let value = serde_json::to_value(&status).expect("serialise");
        assert_eq!(value["serverID"], "s");
        assert_eq!(value["organizationID"], "o");
    }
}
