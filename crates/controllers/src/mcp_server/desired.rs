//! What a CoderMCPServer asks for, pure (docs/controllers/mcp-server.md): the control plane's opt-in, the credential
//! Secrets and the origins they must consent to, the config Coder should hold, whether Coder's config differs from
//! it, the ownership proof of a config, and the access-list change.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::mcp_server::{
    CoderMCPServer, CoderMCPServerSpec, DEFAULT_API_KEY_SECRET_KEY, DEFAULT_CLIENT_SECRET_SECRET_KEY,
    DEFAULT_HEADER_VALUE_SECRET_KEY, MCPAuthType,
};
use coder_k8s_coder_client::Secret;
use coder_k8s_coder_client::ai::{
    MCP_SERVER_ROLE_DELETED, MCP_SERVER_ROLE_READ, McpServerAcl, McpServerConfig, McpServerConfigRequest,
    UpdateMcpServerAclRequest,
};
use k8s_openapi::jiff::Timestamp;
use uuid::Uuid;

use crate::credentials::origin_of;

/// How long before the create marker Coder's `created_at` may lie (clocks of Coder and the operator differ, and
/// the marker is stored to the second).
pub const MARKER_TOLERANCE_BEFORE: Duration = Duration::from_secs(60);
/// How long after the create marker Coder's `created_at` may lie, on top of the create's request timeout.
pub const MARKER_TOLERANCE_AFTER: Duration = Duration::from_secs(60);

/// Whether the control plane lists `organization` in `spec.mcpServers.organizations` (names, ignoring case, as
/// Coder resolves them).
pub fn organization_allowed(control_plane: &CoderControlPlane, organization: &str) -> bool {
    control_plane.spec.mcp_servers.as_ref().is_some_and(|opt_in| {
        opt_in
            .organizations
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(organization))
    })
}

/// Which request field a credential fills.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialField {
    OAuth2ClientSecret,
    APIKeyValue,
    Header(String),
}

/// A Secret key the spec reads, and the origin its value is sent to (which the Secret must list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialRef {
    pub secret: String,
    pub key: String,
    pub destination: String,
    pub field: CredentialField,
}

/// The credential Secrets of the spec's `authType`, in spec order. An unparsable URL gives an empty origin, which
/// no Secret lists.
pub fn credential_refs(spec: &CoderMCPServerSpec) -> Vec<CredentialRef> {
    let url_origin = origin_of(&spec.url).unwrap_or_default();
    let reference =
        |selector: &coder_k8s_api::shared::SecretKeySelector, default, destination: &str, field| {
            CredentialRef {
                secret: selector.name.clone(),
                key: selector.key_or(default).to_owned(),
                destination: destination.to_owned(),
                field,
            }
        };
    match spec.auth_type {
        MCPAuthType::OAuth2 => {
            let Some(oauth2) = spec.oauth2.as_ref() else {
                return Vec::new();
            };
            let token_origin = oauth2
                .token_url
                .as_deref()
                .map_or_else(|| url_origin.clone(), |u| origin_of(u).unwrap_or_default());
            oauth2
                .client_secret_secret_ref
                .iter()
                .map(|s| {
                    reference(
                        s,
                        DEFAULT_CLIENT_SECRET_SECRET_KEY,
                        &token_origin,
                        CredentialField::OAuth2ClientSecret,
                    )
                })
                .collect()
        }
        MCPAuthType::APIKey => spec
            .api_key
            .iter()
            .map(|k| {
                reference(
                    &k.value_secret_ref,
                    DEFAULT_API_KEY_SECRET_KEY,
                    &url_origin,
                    CredentialField::APIKeyValue,
                )
            })
            .collect(),
        MCPAuthType::CustomHeaders => spec
            .custom_headers
            .iter()
            .map(|h| {
                reference(
                    &h.value_secret_ref,
                    DEFAULT_HEADER_VALUE_SECRET_KEY,
                    &url_origin,
                    CredentialField::Header(h.name.clone()),
                )
            })
            .collect(),
        MCPAuthType::None | MCPAuthType::UserOIDC => Vec::new(),
    }
}

/// The full config for Coder's create (and, without the secrets, for a patch): every field the spec sets.
/// `credentials` holds the value of each of [`credential_refs`], in the same order.
pub fn desired(server: &CoderMCPServer, credentials: &[(CredentialRef, String)]) -> McpServerConfigRequest {
    let spec = &server.spec;
    let oauth2 = spec
        .oauth2
        .as_ref()
        .filter(|_| spec.auth_type == MCPAuthType::OAuth2);
    let api_key = spec
        .api_key
        .as_ref()
        .filter(|_| spec.auth_type == MCPAuthType::APIKey);
    let mut request = McpServerConfigRequest {
        display_name: Some(server.coder_display_name().to_owned()),
        slug: Some(server.coder_slug().to_owned()),
        description: Some(spec.description.clone().unwrap_or_default()),
        icon_url: Some(spec.icon_url.clone().unwrap_or_default()),
        transport: Some(spec.transport.as_str().to_owned()),
        url: Some(spec.url.clone()),
        auth_type: Some(spec.auth_type.as_str().to_owned()),
        oauth2_client_id: oauth2.map(|o| o.client_id.clone()),
        oauth2_auth_url: oauth2.map(|o| o.auth_url.clone().unwrap_or_default()),
        oauth2_token_url: oauth2.map(|o| o.token_url.clone().unwrap_or_default()),
        oauth2_scopes: oauth2.map(|o| o.scopes.clone().unwrap_or_default()),
        api_key_header: api_key.map(|k| k.header.clone()),
        tool_allow_list: Some(spec.tool_allow_list.clone()),
        tool_deny_list: Some(spec.tool_deny_list.clone()),
        availability: Some(spec.availability.as_str().to_owned()),
        enabled: Some(spec.is_enabled()),
        allow_in_plan_mode: Some(spec.allow_in_plan_mode),
        forward_coder_headers: Some(spec.forward_coder_headers),
        ..McpServerConfigRequest::default()
    };
    let mut headers = BTreeMap::new();
    for (reference, value) in credentials {
        let value = Secret::new(value.clone());
        match &reference.field {
            CredentialField::OAuth2ClientSecret => request.oauth2_client_secret = Some(value),
            CredentialField::APIKeyValue => request.api_key_value = Some(value),
            CredentialField::Header(name) => {
                headers.insert(name.clone(), value);
            }
        }
    }
    if spec.auth_type == MCPAuthType::CustomHeaders {
        request.custom_headers = Some(headers);
    }
    request
}

/// The request without its secret values (a patch that leaves Coder's stored secrets alone).
pub fn without_secrets(mut request: McpServerConfigRequest) -> McpServerConfigRequest {
    request.oauth2_client_secret = None;
    request.api_key_value = None;
    request.custom_headers = None;
    request
}

/// A digest of the secret values of `request` (kept in memory only, to notice a changed Secret value).
pub fn secrets_digest(request: &McpServerConfigRequest) -> String {
    let mut text = String::new();
    for value in [&request.oauth2_client_secret, &request.api_key_value]
        .into_iter()
        .flatten()
    {
        text.push_str(&format!("{}:{}\n", value.expose().len(), value.expose()));
    }
    for (name, value) in request.custom_headers.iter().flatten() {
        text.push_str(&format!("{name}={}:{}\n", value.expose().len(), value.expose()));
    }
    crate::digest::sha256_hex(text.as_bytes(), None)
}

/// Whether Coder's config differs from the non-secret fields of `desired`.
pub fn differs(current: &McpServerConfig, desired: &McpServerConfigRequest) -> bool {
    let text = |wanted: &Option<String>, have: &str| wanted.as_deref().is_some_and(|w| w != have);
    let list = |wanted: &Option<Vec<String>>, have: &[String]| wanted.as_deref().is_some_and(|w| w != have);
    let flag = |wanted: Option<bool>, have: bool| wanted.is_some_and(|w| w != have);
    text(&desired.display_name, &current.display_name)
        || text(&desired.slug, &current.slug)
        || text(&desired.description, &current.description)
        || text(&desired.icon_url, &current.icon_url)
        || text(&desired.transport, &current.transport)
        || text(&desired.url, &current.url)
        || text(&desired.auth_type, &current.auth_type)
        || text(&desired.oauth2_client_id, &current.oauth2_client_id)
        || text(&desired.oauth2_auth_url, &current.oauth2_auth_url)
        || text(&desired.oauth2_token_url, &current.oauth2_token_url)
        || text(&desired.oauth2_scopes, &current.oauth2_scopes)
        || text(&desired.api_key_header, &current.api_key_header)
        || list(&desired.tool_allow_list, &current.tool_allow_list)
        || list(&desired.tool_deny_list, &current.tool_deny_list)
        || text(&desired.availability, &current.availability)
        || flag(desired.enabled, current.enabled)
        || flag(desired.allow_in_plan_mode, current.allow_in_plan_mode)
        || flag(desired.forward_coder_headers, current.forward_coder_headers)
}

/// What proves that a config Coder lists under the object's slug was created by this object.
#[derive(Clone, Debug, Default)]
pub struct Proof {
    /// The ID this operator process saw its own create return (or confirmed) for the object, or that its signed
    /// cleanup record names.
    pub recorded_id: Option<Uuid>,
    /// `status.createMarker` (anyone with status write access can set it: it only narrows the window).
    pub marker: Option<Timestamp>,
    /// `metadata.creationTimestamp`, which no one can change.
    pub object_created: Option<Timestamp>,
    /// The create's request timeout: Coder stores the config within it after the marker.
    pub create_timeout: Duration,
    /// When the object's signed cleanup record, naming no config yet, was written (before the create), if that time
    /// can be trusted: the proof that this operator sent a create and the config came after it.
    pub record_written: Option<Timestamp>,
    /// `status.serverID` of an object created before this operator first signed cleanup records (the Go operator
    /// v0.1.5 wrote none for MCP server configs): the v0.1.5 proof, marker and ID together.
    pub legacy_server_id: Option<Uuid>,
}

/// Whether `config` is the object's own: the ID recorded for it; or a config created by Coder within the create
/// window after the marker (a marker that cannot be older than the object) and after the signed record written
/// before the create. Without that record, only an object older than signed records (v0.1.5's) may prove it, with
/// `status.serverID` naming the same config. The marker and `status.serverID` alone prove nothing.
pub fn owned(config: &McpServerConfig, proof: &Proof) -> bool {
    if proof.recorded_id == Some(config.id) {
        return true;
    }
    let Ok(created) = config.created_at.parse::<Timestamp>() else {
        return false;
    };
    if !in_marker_window(created, proof) {
        return false;
    }
    match proof.record_written {
        Some(written) => {
            created
                >= written
                    .checked_sub(signed(MARKER_TOLERANCE_BEFORE))
                    .unwrap_or(written)
        }
        None => proof.legacy_server_id == Some(config.id),
    }
}

/// Whether Coder's `created` lies within the create window after the marker, a marker not older than the object.
fn in_marker_window(created: Timestamp, proof: &Proof) -> bool {
    let (Some(marker), Some(object_created)) = (proof.marker, proof.object_created) else {
        return false;
    };
    // A marker before the object existed is not the operator's: it writes the marker after it saw the object.
    if marker < object_created {
        return false;
    }
    let earliest = marker
        .checked_sub(signed(MARKER_TOLERANCE_BEFORE))
        .unwrap_or(marker)
        .max(
            object_created
                .checked_sub(signed(MARKER_TOLERANCE_BEFORE))
                .unwrap_or(object_created),
        );
    let latest = marker
        .checked_add(signed(proof.create_timeout + MARKER_TOLERANCE_AFTER))
        .unwrap_or(marker);
    earliest <= created && created <= latest
}

fn signed(duration: Duration) -> k8s_openapi::jiff::SignedDuration {
    k8s_openapi::jiff::SignedDuration::try_from(duration).unwrap_or_default()
}

/// The access-list change: with every listed group found, exactly the listed groups may use the server (and no
/// user); with a group missing (`all_found` false), unlisted groups and users lose access and no group is added.
/// `None` when Coder's list already matches.
pub fn acl_change(
    current: &McpServerAcl,
    wanted: &BTreeSet<Uuid>,
    all_found: bool,
) -> Option<UpdateMcpServerAclRequest> {
    let mut change = UpdateMcpServerAclRequest::default();
    let have: BTreeSet<Uuid> = current.groups.iter().map(|g| g.id).collect();
    for group in &current.groups {
        if !wanted.contains(&group.id) {
            change
                .group_roles
                .insert(group.id.to_string(), MCP_SERVER_ROLE_DELETED.to_owned());
        }
    }
    if all_found {
        for group in wanted.iter().filter(|g| !have.contains(g)) {
            change
                .group_roles
                .insert(group.to_string(), MCP_SERVER_ROLE_READ.to_owned());
        }
    }
    for user in &current.users {
        change
            .user_roles
            .insert(user.id.to_string(), MCP_SERVER_ROLE_DELETED.to_owned());
    }
    let unchanged = change.group_roles.is_empty() && change.user_roles.is_empty();
    (!unchanged).then_some(change)
}

#[cfg(test)]
mod tests {
    use super::*;
    use coder_k8s_api::mcp_server::{CoderMCPServerSpec, MCPAPIKeySpec, MCPCustomHeader, MCPOAuth2Spec};
    use coder_k8s_api::shared::SecretKeySelector;
    use coder_k8s_coder_client::ai::McpServerAclEntry;

    fn server(spec: serde_json::Value) -> CoderMCPServer {
        let spec: CoderMCPServerSpec = serde_json::from_value(spec).unwrap();
        CoderMCPServer::new("deepwiki", spec)
    }

    fn base() -> serde_json::Value {
        serde_json::json!({"controlPlaneRef": {"name": "cp"}, "organization": "coder", "url": "https://mcp.example.com/mcp"})
    }

    #[test]
    fn the_opt_in_lists_the_organization() {
        let mut cp: CoderControlPlane = serde_json::from_value(serde_json::json!({
            "apiVersion": "coder.com/v1alpha1", "kind": "CoderControlPlane", "metadata": {"name": "cp"}, "spec": {}
        }))
        .unwrap();
        assert!(!organization_allowed(&cp, "coder"));
        cp.spec.mcp_servers =
            serde_json::from_value(serde_json::json!({"organizations": ["Coder"]})).unwrap();
        assert!(organization_allowed(&cp, "coder"));
        assert!(!organization_allowed(&cp, "other"));
    }

    #[test]
    fn credentials_go_to_the_origin_that_receives_them() {
        let mut spec = server(base()).spec;
        assert!(credential_refs(&spec).is_empty());
        spec.auth_type = MCPAuthType::APIKey;
        spec.api_key = Some(MCPAPIKeySpec {
            header: "X-Key".into(),
            value_secret_ref: SecretKeySelector {
                name: "k".into(),
                key: None,
            },
        });
        let refs = credential_refs(&spec);
        assert_eq!(refs[0].destination, "https://mcp.example.com");
        assert_eq!(refs[0].key, "api-key");
        spec.auth_type = MCPAuthType::OAuth2;
        spec.oauth2 = Some(MCPOAuth2Spec {
            client_id: "c".into(),
            client_secret_secret_ref: Some(SecretKeySelector {
                name: "o".into(),
                key: Some("s".into()),
            }),
            token_url: Some("https://auth.example.com:8443/token".into()),
            ..MCPOAuth2Spec::default()
        });
        let refs = credential_refs(&spec);
        assert_eq!((refs[0].secret.as_str(), refs[0].key.as_str()), ("o", "s"));
        assert_eq!(refs[0].destination, "https://auth.example.com:8443");
        spec.auth_type = MCPAuthType::CustomHeaders;
        spec.custom_headers = vec![MCPCustomHeader {
            name: "X-A".into(),
            value_secret_ref: SecretKeySelector {
                name: "h".into(),
                key: None,
            },
        }];
        let refs = credential_refs(&spec);
        assert_eq!(refs[0].field, CredentialField::Header("X-A".into()));
        assert_eq!(refs[0].key, "value");
    }

    #[test]
    fn the_desired_config_carries_every_field_and_secrets_only_when_asked() {
        let mut object = server(base());
        object.spec.auth_type = MCPAuthType::APIKey;
        object.spec.api_key = Some(MCPAPIKeySpec {
            header: "Authorization".into(),
            value_secret_ref: SecretKeySelector {
                name: "k".into(),
                key: None,
            },
        });
        let refs = credential_refs(&object.spec);
        let request = desired(&object, &[(refs[0].clone(), "Bearer s3cret".into())]);
        assert_eq!(request.slug.as_deref(), Some("deepwiki"));
        assert_eq!(request.display_name.as_deref(), Some("deepwiki"));
        assert_eq!(request.enabled, Some(true));
        assert_eq!(
            request.api_key_value.as_ref().map(Secret::expose),
            Some("Bearer s3cret")
        );
        assert!(!format!("{request:?}").contains("s3cret"));
        let digest = secrets_digest(&request);
        assert_ne!(digest, secrets_digest(&without_secrets(request.clone())));
        assert!(without_secrets(request).api_key_value.is_none());
    }

    #[test]
    fn only_a_real_difference_counts() {
        let object = server(base());
        let request = desired(&object, &[]);
        let mut config = McpServerConfig {
            display_name: "deepwiki".into(),
            slug: "deepwiki".into(),
            transport: "streamable_http".into(),
            url: "https://mcp.example.com/mcp".into(),
            auth_type: "none".into(),
            availability: "default_off".into(),
            enabled: true,
            ..McpServerConfig::default()
        };
        assert!(!differs(&config, &request));
        config.enabled = false;
        assert!(differs(&config, &request));
        config.enabled = true;
        config.tool_deny_list = vec!["x".into()];
        assert!(differs(&config, &request));
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn ownership_needs_the_recorded_id_or_a_create_inside_the_window_after_the_marker() {
        let id = Uuid::new_v4();
        let config = |created: i64| McpServerConfig {
            id,
            created_at: at(created).to_string(),
            ..McpServerConfig::default()
        };
        let proof = Proof {
            recorded_id: None,
            marker: Some(at(10_000)),
            object_created: Some(at(9_000)),
            create_timeout: Duration::from_secs(30),
            record_written: Some(at(9_999)),
            legacy_server_id: None,
        };
        assert!(owned(&config(10_001), &proof));
        assert!(
            owned(&config(9_990), &proof),
            "the marker is stored to the second"
        );
        assert!(!owned(&config(10_200), &proof), "created long after the marker");
        assert!(
            !owned(&config(5_000), &proof),
            "created before the object existed"
        );
        let forged = Proof {
            marker: Some(at(8_000)),
            ..proof.clone()
        };
        assert!(
            !owned(&config(8_001), &forged),
            "a marker older than the object is forged"
        );
        let none = Proof {
            marker: None,
            ..proof.clone()
        };
        assert!(!owned(&config(10_001), &none));
        let recorded = Proof {
            recorded_id: Some(id),
            ..none
        };
        assert!(owned(&config(1), &recorded));
        let garbage = McpServerConfig {
            created_at: "yesterday".into(),
            ..config(0)
        };
        assert!(!owned(&garbage, &proof));
    }

    #[test]
    fn a_marker_and_server_id_in_status_alone_prove_nothing() {
        let id = Uuid::new_v4();
        let config = McpServerConfig {
            id,
            created_at: at(20_000).to_string(),
            ..McpServerConfig::default()
        };
        // Someone else's config, made after the object; the forger writes the marker to match it.
        let forged = Proof {
            recorded_id: None,
            marker: Some(at(20_000)),
            object_created: Some(at(9_000)),
            create_timeout: Duration::from_secs(30),
            record_written: None,
            legacy_server_id: None,
        };
        assert!(!owned(&config, &forged), "no signed record");
        let older_record = Proof {
            record_written: Some(at(19_000)),
            ..forged.clone()
        };
        assert!(
            owned(&config, &older_record),
            "the signed record's create came before it (the operator's own lost answer)"
        );
        let later_record = Proof {
            record_written: Some(at(20_100)),
            ..forged.clone()
        };
        assert!(
            !owned(&config, &later_record),
            "made before the operator's create"
        );
        let legacy = Proof {
            legacy_server_id: Some(id),
            ..forged.clone()
        };
        assert!(
            owned(&config, &legacy),
            "an object of the Go operator: marker and server ID together"
        );
        let legacy_elsewhere = Proof {
            legacy_server_id: Some(Uuid::new_v4()),
            ..forged
        };
        assert!(!owned(&config, &legacy_elsewhere));
    }

    #[test]
    fn the_access_list_matches_the_listed_groups_or_only_shrinks() {
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let entry = |id| McpServerAclEntry {
            id,
            name: String::new(),
            role: "read".into(),
        };
        let current = McpServerAcl {
            users: vec![entry(c)],
            groups: vec![entry(a), entry(b)],
        };
        let wanted = BTreeSet::from([a]);
        let change = acl_change(&current, &wanted, true).unwrap();
        assert_eq!(
            change.group_roles,
            BTreeMap::from([(b.to_string(), String::new())])
        );
        assert_eq!(
            change.user_roles,
            BTreeMap::from([(c.to_string(), String::new())])
        );
        let new_group = Uuid::new_v4();
        let change = acl_change(&current, &BTreeSet::from([a, new_group]), false).unwrap();
        assert!(
            !change.group_roles.contains_key(&new_group.to_string()),
            "no group is added"
        );
        assert_eq!(
            change.group_roles.get(&b.to_string()).map(String::as_str),
            Some("")
        );
        let settled = McpServerAcl {
            users: vec![],
            groups: vec![entry(a)],
        };
        assert_eq!(acl_change(&settled, &wanted, true), None);
        let change = acl_change(&McpServerAcl::default(), &wanted, true).unwrap();
        assert_eq!(
            change.group_roles,
            BTreeMap::from([(a.to_string(), "read".to_owned())])
        );
    }
}
