//! Workspace proxies (feature `workspace_proxy`, gated before auth).

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::JsonBody;
use crate::auth::{Auth, require_feature};
use crate::errors::{ApiError, ApiResult, created, ok};
use crate::state::{App, Mem, Proxy};
use crate::util::{random_hex, sha256};

const FEATURE: &str = "workspace_proxy";

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/workspaceproxies", get(list).post(create))
        .route(
            "/workspaceproxies/{proxy}",
            get(get_one).patch(update).delete(remove),
        )
        .route("/regions", get(regions))
}

/// The gate precedes authentication: an unlicensed server answers 403 even without a token.
fn gate(app: &App, auth: Result<Auth, ApiError>) -> Result<Auth, ApiError> {
    require_feature(app, FEATURE)?;
    auth
}

fn status(status: &str) -> Value {
    json!({ "status": status, "report": { "errors": [], "warnings": [] }, "checked_at": crate::util::now() })
}

fn render_primary(app: &App, mem: &Mem) -> Value {
    let (display_name, icon) = mem
        .primary_proxy
        .clone()
        .unwrap_or_else(|| ("Default".to_owned(), "/emojis/1f3e1.png".to_owned()));
    json!({
        "id": app.deployment_id(),
        "name": "primary",
        "display_name": display_name,
        "icon_url": icon,
        "healthy": true,
        "path_app_url": app.base_url(),
        "wildcard_hostname": "",
        "derp_enabled": true,
        "derp_only": false,
        "status": status("ok"),
        "created_at": "0001-01-01T00:00:00Z",
        "updated_at": "0001-01-01T00:00:00Z",
        "deleted": false,
        "version": app.build_version,
    })
}

fn render_proxy(proxy: &Proxy) -> Value {
    json!({
        "id": proxy.id,
        "name": proxy.name,
        "display_name": proxy.display_name,
        "icon_url": proxy.icon,
        "healthy": false,
        "path_app_url": "",
        "wildcard_hostname": "",
        "derp_enabled": true,
        "derp_only": false,
        "status": status("unregistered"),
        "created_at": proxy.created_at,
        "updated_at": proxy.updated_at,
        "deleted": proxy.deleted,
        "version": "",
    })
}

enum Target {
    Primary,
    Proxy(usize),
}

fn find(app: &App, mem: &Mem, param: &str) -> Result<Target, ApiError> {
    if param.eq_ignore_ascii_case("primary") || param == app.deployment_id() {
        return Ok(Target::Primary);
    }
    let id = Uuid::parse_str(param).ok();
    mem.proxies
        .iter()
        .position(|p| !p.deleted && (Some(p.id) == id || p.name.eq_ignore_ascii_case(param)))
        .map(Target::Proxy)
        .ok_or_else(ApiError::not_found)
}

async fn list(State(app): State<App>, auth: Result<Auth, ApiError>) -> ApiResult {
    gate(&app, auth)?.require_owner()?;
    let mem = app.mem();
    let mut regions = vec![render_primary(&app, &mem)];
    regions.extend(mem.proxies.iter().filter(|p| !p.deleted).map(render_proxy));
    ok(json!({ "regions": regions }))
}

async fn regions(State(app): State<App>, _auth: Auth) -> ApiResult {
    let mem = app.mem();
    let region = |v: Value| {
        json!({
            "id": v["id"], "name": v["name"], "display_name": v["display_name"], "icon_url": v["icon_url"],
            "healthy": v["healthy"], "path_app_url": v["path_app_url"], "wildcard_hostname": v["wildcard_hostname"],
        })
    };
    let mut regions = vec![region(render_primary(&app, &mem))];
    if app.entitlement(FEATURE).is_entitled() {
        regions.extend(
            mem.proxies
                .iter()
                .filter(|p| !p.deleted)
                .map(|p| region(render_proxy(p))),
        );
    }
    ok(json!({ "regions": regions }))
}

async fn get_one(
    State(app): State<App>,
    auth: Result<Auth, ApiError>,
    Path(param): Path<String>,
) -> ApiResult {
    gate(&app, auth)?.require_owner()?;
    let mem = app.mem();
    match find(&app, &mem, &param)? {
        Target::Primary => ok(render_primary(&app, &mem)),
        Target::Proxy(i) => ok(render_proxy(&mem.proxies[i])),
    }
}

#[derive(Deserialize)]
struct CreateProxy {
    #[serde(default)]
    name: String,
    #[serde(default)]
    display_name: String,
    #[serde(default)]
    icon: String,
}

/// `<proxy id>:<64 lowercase hex>`, stored as sha256 of the secret.
fn new_token(id: Uuid) -> Result<(String, [u8; 32]), ApiError> {
    let secret = random_hex(32).map_err(ApiError::internal)?;
    Ok((format!("{id}:{secret}"), sha256(secret.as_bytes())))
}

async fn create(
    State(app): State<App>,
    auth: Result<Auth, ApiError>,
    body: JsonBody<CreateProxy>,
) -> ApiResult {
    gate(&app, auth)?.require_owner()?;
    let body = body.parse()?;
    if body.name.is_empty() {
        return Err(ApiError::required("name"));
    }
    if body.name.eq_ignore_ascii_case("primary") {
        return Err(ApiError::bad_request(
            "The name \"primary\" is reserved for the primary region.",
        ));
    }
    let mut mem = app.mem();
    if mem
        .proxies
        .iter()
        .any(|p| !p.deleted && p.name.eq_ignore_ascii_case(&body.name))
    {
        return Err(ApiError::conflict(format!(
            "Workspace proxy with name {:?} already exists.",
            body.name
        )));
    }
    let id = Uuid::new_v4();
    let (token, hashed_secret) = new_token(id)?;
    let now = crate::util::now();
    let proxy = Proxy {
        id,
        display_name: if body.display_name.is_empty() {
            body.name.clone()
        } else {
            body.display_name
        },
        name: body.name,
        icon: body.icon,
        hashed_secret,
        created_at: now.clone(),
        updated_at: now,
        deleted: false,
    };
    let rendered = render_proxy(&proxy);
    mem.proxies.push(proxy);
    created(json!({ "proxy": rendered, "proxy_token": token }))
}

#[derive(Deserialize)]
struct PatchProxy {
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    display_name: String,
    #[serde(default)]
    icon: String,
    #[serde(default)]
    regenerate_token: bool,
}

async fn update(
    State(app): State<App>,
    auth: Result<Auth, ApiError>,
    Path(param): Path<String>,
    body: JsonBody<PatchProxy>,
) -> ApiResult {
    gate(&app, auth)?.require_owner()?;
    let body = body.parse()?;
    // In Coder's `PatchWorkspaceProxy` all four fields carry validate:"required": a PATCH that leaves the display
    // name or icon empty is refused, although they look optional.
    let mut error: Option<ApiError> = None;
    for (field, value) in [
        ("id", &body.id),
        ("name", &body.name),
        ("display_name", &body.display_name),
        ("icon", &body.icon),
    ] {
        if value.is_empty() {
            let e = error
                .take()
                .unwrap_or_else(|| ApiError::bad_request("Validation failed."));
            error = Some(e.validation(field, "Validation failed for tag \"required\" with value: \"\""));
        }
    }
    if let Some(error) = error {
        return Err(error);
    }
    let mut mem = app.mem();
    match find(&app, &mem, &param)? {
        Target::Primary => {
            if body.name != "primary" {
                return Err(ApiError::bad_request(
                    "Cannot update name of default primary proxy, did you mean to update the 'display name'?",
                ));
            }
            mem.primary_proxy = Some((body.display_name, body.icon));
            let proxy = render_primary(&app, &mem);
            ok(json!({ "proxy": proxy, "proxy_token": "" }))
        }
        Target::Proxy(index) => {
            let id = mem.proxies[index].id;
            if mem
                .proxies
                .iter()
                .any(|p| !p.deleted && p.id != id && p.name.eq_ignore_ascii_case(&body.name))
            {
                return Err(ApiError::conflict(format!(
                    "Workspace proxy with name {:?} already exists.",
                    body.name
                )));
            }
            let token = if body.regenerate_token {
                Some(new_token(id)?)
            } else {
                None
            };
            let proxy = &mut mem.proxies[index];
            proxy.name = body.name;
            proxy.display_name = body.display_name;
            proxy.icon = body.icon;
            proxy.updated_at = crate::util::now();
            let proxy_token = match token {
                Some((token, hashed)) => {
                    proxy.hashed_secret = hashed;
                    token
                }
                None => String::new(),
            };
            ok(json!({ "proxy": render_proxy(proxy), "proxy_token": proxy_token }))
        }
    }
}

async fn remove(
    State(app): State<App>,
    auth: Result<Auth, ApiError>,
    Path(param): Path<String>,
) -> ApiResult {
    gate(&app, auth)?.require_owner()?;
    let mut mem = app.mem();
    match find(&app, &mem, &param)? {
        Target::Primary => Err(ApiError::bad_request("Cannot delete primary proxy")),
        Target::Proxy(index) => {
            let proxy = &mut mem.proxies[index];
            proxy.deleted = true;
            proxy.updated_at = crate::util::now();
            ok(json!({ "message": "Proxy has been deleted!" }))
        }
    }
}
