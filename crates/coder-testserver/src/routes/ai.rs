//! AI-related routes. All three route sets are UNSTABLE in Coder: they exist only on 2026 `main`
//! (post-v2.30.0) and have moved between paths over time:
//! * AI Gateway keys: `/api/v2/ai-gateway/keys` (auth + feature `aibridge`);
//! * AI providers: `/api/v2/ai/providers` (gate unverified: owner-only here, no feature gate);
//! * MCP server configs: `/api/v2/organizations/{org}/mcp-servers` (+ `/{id}/acl`): site owners only (Coder
//!   v0.1.5 of the operator needs a site owner); an unknown organization or config is Coder's 404.
//!
//! Stored as JSON objects; fields starting with `_` are internal and never rendered.

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::JsonBody;
use crate::auth::{self, Auth, require_feature};
use crate::errors::{ApiError, ApiResult, created, no_content, ok, parse_uuid};
use crate::state::App;
use crate::util::{now, random_alphanumeric, valid_lower_slug};

const PROVIDER_TYPES: [&str; 9] = [
    "openai",
    "anthropic",
    "azure",
    "google",
    "openai-compat",
    "openrouter",
    "vercel",
    "bedrock",
    "copilot",
];

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/ai-gateway/keys", get(list_keys).post(create_key))
        .route("/ai-gateway/keys/{id}", axum::routing::delete(delete_key))
        .route("/ai/providers", get(list_providers).post(create_provider))
        .route(
            "/ai/providers/{provider}",
            get(get_provider).patch(patch_provider).delete(delete_provider),
        )
        .route(
            "/organizations/{organization}/mcp-servers",
            get(list_mcp).post(create_mcp),
        )
        .route(
            "/organizations/{organization}/mcp-servers/{id}",
            get(get_mcp).patch(patch_mcp).delete(delete_mcp),
        )
        .route(
            "/organizations/{organization}/mcp-servers/{id}/acl",
            get(get_mcp_acl).patch(patch_mcp_acl),
        )
}

/// Drops internal `_` fields.
fn public(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('_'))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn str_field<'a>(body: &'a Map<String, Value>, key: &str) -> &'a str {
    body.get(key).and_then(Value::as_str).unwrap_or_default()
}

// --- AI Gateway keys -------------------------------------------------------------------------------

async fn list_keys(State(app): State<App>, auth: Auth) -> ApiResult {
    require_feature(&app, "aibridge")?;
    auth.require_owner()?;
    let owner = json!(auth.user.id);
    let mem = app.mem();
    ok(mem
        .ai_gateway_keys
        .iter()
        .filter(|k| k["_user_id"] == owner)
        .map(public)
        .collect())
}

async fn create_key(State(app): State<App>, auth: Auth, body: JsonBody<Map<String, Value>>) -> ApiResult {
    require_feature(&app, "aibridge")?;
    auth.require_owner()?;
    let body = body.parse()?;
    let name = str_field(&body, "name").to_owned();
    if name.is_empty() {
        return Err(ApiError::required("name"));
    }
    if !valid_lower_slug(&name, 64) {
        return Err(ApiError::bad_request("Validation failed.").validation(
            "name",
            "Name must be at most 64 lowercase letters, digits or non-consecutive hyphens.",
        ));
    }
    let owner = json!(auth.user.id);
    let secret = random_alphanumeric(40).map_err(ApiError::internal)?;
    let key = format!("cgk_{secret}");
    let key_prefix: String = key.chars().take(12).collect();
    let mut mem = app.mem();
    if mem
        .ai_gateway_keys
        .iter()
        .any(|k| k["_user_id"] == owner && k["name"] == json!(name))
    {
        return Err(ApiError::bad_request("Key name must be unique."));
    }
    let id = Uuid::new_v4();
    let created_at = now();
    mem.ai_gateway_keys.push(json!({
        "id": id, "name": name, "key_prefix": key_prefix, "created_at": created_at, "_user_id": owner,
    }));
    created(json!({ "id": id, "name": name, "key": key, "key_prefix": key_prefix, "created_at": created_at }))
}

async fn delete_key(State(app): State<App>, auth: Auth, Path(id): Path<String>) -> ApiResult {
    require_feature(&app, "aibridge")?;
    auth.require_owner()?;
    let id = json!(parse_uuid(&id)?);
    let owner = json!(auth.user.id);
    let mut mem = app.mem();
    let before = mem.ai_gateway_keys.len();
    mem.ai_gateway_keys
        .retain(|k| !(k["id"] == id && (k["_user_id"] == owner || auth.is_owner())));
    if mem.ai_gateway_keys.len() == before {
        return Err(ApiError::not_found());
    }
    no_content()
}

// --- AI providers ----------------------------------------------------------------------------------

/// `api_keys` as rendered: `[{id, masked, created_at}]`.
fn masked_key(api_key: &str) -> Value {
    let tail: String = api_key
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    json!({ "id": Uuid::new_v4(), "masked": format!("****{tail}"), "created_at": now() })
}

/// The write-only fields of a provider's settings: Coder stores them and never returns them.
const SETTINGS_SECRETS: [&str; 2] = ["access_key", "access_key_secret"];

/// A provider as Coder returns it: without internal fields and without the AWS keys of its settings.
fn render_provider(provider: &Value) -> Value {
    let mut out = public(provider);
    if let Some(settings) = out.get_mut("settings").and_then(Value::as_object_mut) {
        for key in SETTINGS_SECRETS {
            settings.remove(key);
        }
    }
    out
}

/// Coder's merge of a PATCH's `settings` into the stored ones: the sent block replaces the stored block whole,
/// except that the AWS keys left out (or `null`) keep their stored values and the server-owned `external_id` is
/// carried over. Settings without the `_type` discriminator do not decode (400).
fn merge_settings(stored: &Value, sent: &Value) -> Result<Value, ApiError> {
    let Some(sent) = sent.as_object().filter(|s| s.contains_key("_type")) else {
        return Err(ApiError::bad_request("Request body must be valid JSON.")
            .detail("decode settings header: settings missing _type discriminator"));
    };
    let mut merged = sent.clone();
    if let Some(stored) = stored.as_object().filter(|s| s.get("_type") == sent.get("_type")) {
        for key in SETTINGS_SECRETS.into_iter().chain(["external_id"]) {
            let kept = key == "external_id" || merged.get(key).is_none_or(Value::is_null);
            if kept && let Some(value) = stored.get(key) {
                merged.insert(key.to_owned(), value.clone());
            }
        }
    }
    Ok(Value::Object(merged))
}

fn provider_index(mem: &crate::state::Mem, param: &str) -> Result<usize, ApiError> {
    let id = Uuid::parse_str(param).ok().map(|id| json!(id));
    mem.ai_providers
        .iter()
        .position(|p| {
            p["_deleted"] != json!(true) && (Some(&p["id"]) == id.as_ref() || p["name"] == json!(param))
        })
        .ok_or_else(ApiError::not_found)
}

fn check_api_keys(kind: &str, body: &Map<String, Value>) -> Result<(), ApiError> {
    let has_keys = body
        .get("api_keys")
        .and_then(Value::as_array)
        .is_some_and(|k| !k.is_empty());
    if has_keys && (kind == "bedrock" || kind == "copilot") {
        return Err(ApiError::bad_request(format!(
            "Provider type {kind:?} does not accept api_keys."
        )));
    }
    Ok(())
}

async fn list_providers(State(app): State<App>, auth: Auth) -> ApiResult {
    auth.require_owner()?;
    let mem = app.mem();
    ok(mem
        .ai_providers
        .iter()
        .filter(|p| p["_deleted"] != json!(true))
        .map(render_provider)
        .collect())
}

async fn create_provider(
    State(app): State<App>,
    auth: Auth,
    body: JsonBody<Map<String, Value>>,
) -> ApiResult {
    auth.require_owner()?;
    let body = body.parse()?;
    let kind = str_field(&body, "type");
    let name = str_field(&body, "name");
    for (field, value) in [("type", kind), ("name", name)] {
        if value.is_empty() {
            return Err(ApiError::required(field));
        }
    }
    if !PROVIDER_TYPES.contains(&kind) {
        return Err(ApiError::bad_request("Validation failed.").validation(
            "type",
            format!("Validation failed for tag \"oneof\" with value: {kind:?}"),
        ));
    }
    if !valid_lower_slug(name, 64) {
        return Err(ApiError::bad_request("Validation failed.")
            .validation("name", "Name must match ^[a-z0-9]+(-[a-z0-9]+)*$"));
    }
    check_api_keys(kind, &body)?;
    let mut mem = app.mem();
    if mem
        .ai_providers
        .iter()
        .any(|p| p["_deleted"] != json!(true) && p["name"] == json!(name))
    {
        return Err(ApiError::conflict(format!(
            "AI provider with name {name:?} already exists."
        )));
    }
    let api_keys: Vec<Value> = body
        .get("api_keys")
        .and_then(Value::as_array)
        .map(|keys| keys.iter().filter_map(Value::as_str).map(masked_key).collect())
        .unwrap_or_default();
    let stamp = now();
    let provider = json!({
        "id": Uuid::new_v4(),
        "type": kind,
        "name": name,
        "display_name": body.get("display_name").cloned().unwrap_or_else(|| json!(name)),
        "enabled": body.get("enabled").and_then(Value::as_bool).unwrap_or(false),
        "base_url": str_field(&body, "base_url"),
        "api_keys": api_keys,
        // Coder answers `null` for a provider without type-specific settings.
        "settings": body.get("settings").cloned().unwrap_or(Value::Null),
        "created_at": stamp,
        "updated_at": stamp,
    });
    mem.ai_providers.push(provider.clone());
    created(render_provider(&provider))
}

async fn get_provider(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    auth.require_owner()?;
    let mem = app.mem();
    let index = provider_index(&mem, &param)?;
    ok(render_provider(&mem.ai_providers[index]))
}

async fn patch_provider(
    State(app): State<App>,
    auth: Auth,
    Path(param): Path<String>,
    body: JsonBody<Map<String, Value>>,
) -> ApiResult {
    auth.require_owner()?;
    let body = body.parse()?;
    let mut mem = app.mem();
    let index = provider_index(&mem, &param)?;
    let kind = mem.ai_providers[index]["type"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    check_api_keys(&kind, &body)?;
    // Coder's update request has pointer fields: a field left out (or `null`) keeps the stored value.
    let sent = |key: &str| body.get(key).filter(|v| !v.is_null());
    let settings = match sent("settings") {
        Some(settings) => Some(merge_settings(&mem.ai_providers[index]["settings"], settings)?),
        None => None,
    };
    let provider = &mut mem.ai_providers[index];
    for key in ["display_name", "enabled", "base_url"] {
        if let Some(value) = sent(key) {
            provider[key] = value.clone();
        }
    }
    if let Some(settings) = settings {
        provider["settings"] = settings;
    }
    if let Some(entries) = sent("api_keys").and_then(Value::as_array) {
        // `[{id}]` keeps an existing key, `[{api_key}]` adds one; unlisted keys are removed.
        let existing = provider["api_keys"].as_array().cloned().unwrap_or_default();
        let mut keys = Vec::new();
        for entry in entries {
            if let Some(id) = entry.get("id") {
                keys.extend(existing.iter().filter(|k| &k["id"] == id).cloned());
            } else if let Some(secret) = entry.get("api_key").and_then(Value::as_str) {
                keys.push(masked_key(secret));
            }
        }
        provider["api_keys"] = Value::Array(keys);
    }
    provider["updated_at"] = json!(now());
    ok(render_provider(provider))
}

async fn delete_provider(State(app): State<App>, auth: Auth, Path(param): Path<String>) -> ApiResult {
    auth.require_owner()?;
    let mut mem = app.mem();
    let index = provider_index(&mem, &param)?;
    mem.ai_providers[index]["_deleted"] = json!(true);
    no_content()
}

// --- MCP server configs ----------------------------------------------------------------------------

const MCP_SECRET_FIELDS: [&str; 4] = [
    "api_key_value",
    "oauth2_client_secret",
    "signing_secret",
    "custom_headers",
];

/// Secrets are write-only: rendered as `has_<field>` booleans.
fn render_mcp(config: &Value) -> Value {
    let mut out = public(config);
    if let Some(map) = out.as_object_mut() {
        for field in MCP_SECRET_FIELDS {
            let present = map
                .remove(field)
                .is_some_and(|v| !v.is_null() && v != json!("") && v != json!({}));
            map.insert(format!("has_{field}"), json!(present));
        }
    }
    out
}

fn validate_mcp(body: &Map<String, Value>, partial: bool) -> Result<(), ApiError> {
    let transport = str_field(body, "transport");
    let auth_type = str_field(body, "auth_type");
    if !partial {
        for field in ["display_name", "slug", "transport", "url"] {
            if str_field(body, field).is_empty() {
                return Err(ApiError::required(field));
            }
        }
    }
    if !transport.is_empty() && transport != "streamable_http" && transport != "sse" {
        return Err(ApiError::bad_request("Validation failed.").validation(
            "transport",
            format!("Validation failed for tag \"oneof\" with value: {transport:?}"),
        ));
    }
    if !auth_type.is_empty()
        && !["none", "oauth2", "api_key", "custom_headers", "user_oidc"].contains(&auth_type)
    {
        return Err(ApiError::bad_request("Validation failed.").validation(
            "auth_type",
            format!("Validation failed for tag \"oneof\" with value: {auth_type:?}"),
        ));
    }
    Ok(())
}

/// The organization of an MCP route: Coder's 404 when unknown, then 403 `Forbidden.` unless the caller is a site
/// owner.
async fn mcp_org(app: &App, auth: &Auth, param: &str) -> Result<Uuid, ApiError> {
    let org = auth::organization(app, auth, param).await?;
    auth.require_owner()?;
    Ok(org.id)
}

/// Internal fields of a config's access list: roles by user ID and by group ID.
const USER_ACL: &str = "_user_acl";
const GROUP_ACL: &str = "_group_acl";

/// A config as [`render_mcp`] renders it, plus `acl: {users: {id: role}, groups: {id: role}}` (for tests).
pub(crate) fn render_mcp_with_acl(config: &Value) -> Value {
    let mut out = render_mcp(config);
    out["acl"] = json!({
        "users": config.get(USER_ACL).cloned().unwrap_or_else(|| json!({})),
        "groups": config.get(GROUP_ACL).cloned().unwrap_or_else(|| json!({})),
    });
    out
}

/// The groups of `org` by ID: its `Everyone` group (ID = organization ID) and the added ones.
fn group_names(mem: &crate::state::Mem, org: Uuid) -> BTreeMap<String, String> {
    let mut names = BTreeMap::from([(org.to_string(), "Everyone".to_owned())]);
    for group in mem.groups.iter().filter(|g| g.organization_id == org) {
        names.insert(group.id.to_string(), group.name.clone());
    }
    names
}

fn str_field_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

async fn get_mcp_acl(
    State(app): State<App>,
    auth: Auth,
    Path((org, id)): Path<(String, String)>,
) -> ApiResult {
    let org = mcp_org(&app, &auth, &org).await?;
    let mem = app.mem();
    let config = &mem.mcp_servers[mcp_index(&mem, org, &id)?];
    let names = group_names(&mem, org);
    let entries = |field: &str| {
        config
            .get(field)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let users: Vec<Value> = entries(USER_ACL)
        .iter()
        .map(|(id, role)| json!({"id": id, "username": "", "role": role}))
        .collect();
    let groups: Vec<Value> = entries(GROUP_ACL)
        .iter()
        .map(|(id, role)| {
            let name = names.get(id).cloned().unwrap_or_default();
            json!({"id": id, "name": name, "organization_id": org, "role": role})
        })
        .collect();
    ok(json!({"users": users, "groups": groups}))
}

/// `{user_roles, group_roles}`: role `read` grants, `""` removes; entries not named stay. Groups must belong to the
/// organization and roles must be known, else 400 with validations (nothing changes).
async fn patch_mcp_acl(
    State(app): State<App>,
    auth: Auth,
    Path((org, id)): Path<(String, String)>,
    body: JsonBody<Map<String, Value>>,
) -> ApiResult {
    let org = mcp_org(&app, &auth, &org).await?;
    let body = body.parse()?;
    let mut mem = app.mem();
    let index = mcp_index(&mem, org, &id)?;
    let names = group_names(&mem, org);
    let roles = |field: &str| {
        body.get(field)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let (user_roles, group_roles) = (roles("user_roles"), roles("group_roles"));
    let invalid = |field: &str, detail: String| {
        ApiError::bad_request("Invalid request to update MCP server config ACL.").validation(field, detail)
    };
    for (field, entries) in [("user_roles", &user_roles), ("group_roles", &group_roles)] {
        for (id, role) in entries {
            if Uuid::parse_str(id).is_err() {
                return Err(invalid(field, format!("{id:?} is not a valid UUID")));
            }
            if role != "read" && role != "" {
                return Err(invalid(
                    field,
                    format!("role {role} is not a valid MCP server config role"),
                ));
            }
            if field == "group_roles" && role == "read" && !names.contains_key(id) {
                return Err(invalid(
                    field,
                    format!("group {id} does not belong to organization {org}"),
                ));
            }
        }
    }
    let config = &mut mem.mcp_servers[index];
    for (field, entries) in [(USER_ACL, user_roles), (GROUP_ACL, group_roles)] {
        let mut acl = config
            .get(field)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (id, role) in entries {
            if role == "" {
                acl.remove(&id);
            } else {
                acl.insert(id, role);
            }
        }
        config[field] = Value::Object(acl);
    }
    config["updated_at"] = json!(now());
    no_content()
}

async fn list_mcp(State(app): State<App>, auth: Auth, Path(org): Path<String>) -> ApiResult {
    let org = json!(mcp_org(&app, &auth, &org).await?);
    let mem = app.mem();
    ok(mem
        .mcp_servers
        .iter()
        .filter(|c| c["organization_id"] == org)
        .map(render_mcp)
        .collect())
}

async fn create_mcp(
    State(app): State<App>,
    auth: Auth,
    Path(org): Path<String>,
    body: JsonBody<Map<String, Value>>,
) -> ApiResult {
    let org = mcp_org(&app, &auth, &org).await?;
    let body = body.parse()?;
    validate_mcp(&body, false)?;
    let slug = str_field(&body, "slug").to_owned();
    let mut mem = app.mem();
    if mem.mcp_servers.iter().any(|c| c["slug"] == json!(slug)) {
        return Err(ApiError::conflict(format!(
            "MCP server with slug {slug:?} already exists."
        )));
    }
    let mut config = Value::Object(body);
    let stamp = now();
    config["id"] = json!(Uuid::new_v4());
    config["organization_id"] = json!(org);
    config["created_at"] = json!(stamp);
    config["updated_at"] = json!(stamp);
    if config.get("auth_type").is_none() {
        config["auth_type"] = json!("none");
    }
    if config.get("enabled").is_none() {
        config["enabled"] = json!(false);
    }
    mem.mcp_servers.push(config.clone());
    created(render_mcp(&config))
}

fn mcp_index(mem: &crate::state::Mem, org: Uuid, id: &str) -> Result<usize, ApiError> {
    let id = json!(parse_uuid(id)?);
    let org = json!(org);
    mem.mcp_servers
        .iter()
        .position(|c| c["id"] == id && c["organization_id"] == org)
        .ok_or_else(ApiError::not_found)
}

async fn get_mcp(State(app): State<App>, auth: Auth, Path((org, id)): Path<(String, String)>) -> ApiResult {
    let org = mcp_org(&app, &auth, &org).await?;
    let mem = app.mem();
    let index = mcp_index(&mem, org, &id)?;
    ok(render_mcp(&mem.mcp_servers[index]))
}

async fn patch_mcp(
    State(app): State<App>,
    auth: Auth,
    Path((org, id)): Path<(String, String)>,
    body: JsonBody<Map<String, Value>>,
) -> ApiResult {
    let org = mcp_org(&app, &auth, &org).await?;
    let body = body.parse()?;
    validate_mcp(&body, true)?;
    let mut mem = app.mem();
    let index = mcp_index(&mem, org, &id)?;
    if let Some(slug) = body.get("slug")
        && mem
            .mcp_servers
            .iter()
            .enumerate()
            .any(|(i, c)| i != index && &c["slug"] == slug)
    {
        return Err(ApiError::conflict(format!(
            "MCP server with slug {slug} already exists."
        )));
    }
    let config = &mut mem.mcp_servers[index];
    let previous_auth = config.get("auth_type").cloned();
    // Coder's update request has pointer fields: a field left out (or `null`) keeps the stored value.
    for (key, value) in body {
        if !value.is_null() && !["id", "organization_id", "created_at", "updated_at"].contains(&key.as_str())
        {
            config[key.as_str()] = value;
        }
    }
    if config.get("auth_type") != previous_auth.as_ref() {
        clear_other_auth_fields(config);
    }
    config["updated_at"] = json!(now());
    ok(render_mcp(config))
}

const OAUTH2_FIELDS: [&str; 5] = [
    "oauth2_client_id",
    "oauth2_client_secret",
    "oauth2_auth_url",
    "oauth2_token_url",
    "oauth2_scopes",
];
const API_KEY_FIELDS: [&str; 2] = ["api_key_header", "api_key_value"];
const CUSTOM_HEADER_FIELDS: [&str; 3] = [
    "custom_headers",
    "custom_headers_user_keys",
    "custom_headers_user_key_descriptions",
];

/// What Coder does when a PATCH changes `auth_type`: the fields of the other auth types are cleared (also when the
/// same request sent them), so no stale secret stays behind.
fn clear_other_auth_fields(config: &mut Value) {
    let auth_type = str_field_of(config, "auth_type").to_owned();
    let (oauth2, api_key, headers) = match auth_type.as_str() {
        "oauth2" => (false, true, true),
        "api_key" => (true, false, true),
        "custom_headers" => (true, true, false),
        _ => (true, true, true),
    };
    let Some(map) = config.as_object_mut() else {
        return;
    };
    let cleared = [
        (oauth2, &OAUTH2_FIELDS[..]),
        (api_key, &API_KEY_FIELDS[..]),
        (headers, &CUSTOM_HEADER_FIELDS[..]),
    ];
    for field in cleared
        .into_iter()
        .filter(|(clear, _)| *clear)
        .flat_map(|(_, f)| f)
    {
        map.remove(*field);
    }
}

async fn delete_mcp(
    State(app): State<App>,
    auth: Auth,
    Path((org, id)): Path<(String, String)>,
) -> ApiResult {
    let org = mcp_org(&app, &auth, &org).await?;
    let mut mem = app.mem();
    let index = mcp_index(&mem, org, &id)?;
    mem.mcp_servers.remove(index);
    no_content()
}
