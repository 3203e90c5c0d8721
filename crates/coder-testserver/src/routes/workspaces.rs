//! Workspaces and workspace builds, the workspace's time to live, autostart schedule and automatic updates, and rich
//! parameters (a template version's, and the values of a build; see [`crate::parameters`]).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::routing::{get, patch, post, put};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::templates::{cancel_job, parse_search};
use super::{JsonBody, flag, query_params};
use crate::auth::{self, Auth};
use crate::errors::{ApiError, ApiResult, IN_USE, created, no_content, ok, parse_uuid};
use crate::provisioner::{matched_provisioners, render_job};
use crate::state::{App, Build, Job, JobKind, Mem, Workspace};
use crate::util::{now, valid_template_name};

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/users/{user}/workspaces", post(create_workspace))
        .route("/users/{user}/workspace/{name}", get(workspace_by_name))
        .route("/workspaces", get(list_workspaces))
        .route("/workspaces/{id}", get(get_workspace))
        .route("/workspaces/{id}/builds", get(list_builds).post(create_build))
        .route("/workspaces/{id}/ttl", put(put_ttl))
        .route("/workspaces/{id}/autostart", put(put_autostart))
        .route("/workspaces/{id}/autoupdates", put(put_automatic_updates))
        .route("/workspacebuilds/{id}", get(get_build))
        .route("/workspacebuilds/{id}/cancel", patch(cancel_build))
        .route("/workspacebuilds/{id}/parameters", get(build_parameters))
        .route("/templateversions/{id}/rich-parameters", get(version_parameters))
}

/// Build `status` from job status + transition.
fn build_status(job: Option<&Job>, transition: &str) -> &'static str {
    match (job.map_or("pending", Job::status), transition) {
        ("running", "stop") => "stopping",
        ("running", "delete") => "deleting",
        ("running", _) => "starting",
        ("succeeded", "stop") => "stopped",
        ("succeeded", "delete") => "deleted",
        ("succeeded", _) => "running",
        (other, _) => other,
    }
}

/// The resources of a build: a successful start build reports the configured agents (sub-agents name the first
/// agent as parent); other builds report none.
fn render_resources(mem: &Mem, build: &Build, job: Option<&Job>) -> Value {
    let started = build.transition == "start" && job.is_some_and(|j| j.status() == "succeeded");
    if !started {
        return json!([]);
    }
    let agents = mem
        .agents
        .clone()
        .unwrap_or_else(|| vec![crate::config::AgentSpec::ready()]);
    let agent_id = |index: usize| Uuid::from_u128(build.id.as_u128() ^ (index as u128 + 1));
    let rendered: Vec<Value> = agents
        .iter()
        .enumerate()
        .map(|(index, agent)| {
            json!({
                "id": agent_id(index),
                "name": format!("agent{index}"),
                "status": agent.status,
                "lifecycle_state": agent.lifecycle_state,
                "parent_id": agent.sub_agent.then(|| agent_id(0)),
            })
        })
        .collect();
    json!([{ "id": Uuid::from_u128(build.id.as_u128() ^ 0xffff), "name": "main", "type": "docker_container", "agents": rendered }])
}

pub(super) fn render_build(build: &Build, mem: &Mem) -> Value {
    let job = mem.jobs.get(&build.job_id);
    let workspace = mem.workspace(build.workspace_id);
    let version = mem.version(build.template_version_id);
    json!({
        "id": build.id,
        "created_at": build.created_at,
        "updated_at": build.created_at,
        "workspace_id": build.workspace_id,
        "workspace_name": workspace.map(|w| w.name.clone()).unwrap_or_default(),
        "workspace_owner_id": workspace.map(|w| w.owner.0),
        "workspace_owner_name": workspace.map(|w| w.owner.1.clone()).unwrap_or_default(),
        "workspace_owner_avatar_url": "",
        "template_version_id": build.template_version_id,
        "template_version_name": version.map(|v| v.name.clone()).unwrap_or_default(),
        "build_number": build.build_number,
        "transition": build.transition,
        "initiator_id": build.initiator.0,
        "initiator_name": build.initiator.1,
        "job": job.map_or(Value::Null, |j| render_job(j, mem)),
        "reason": build.reason,
        "resources": render_resources(mem, build, job),
        "deadline": null,
        "max_deadline": null,
        "status": build_status(job, &build.transition),
        "daily_cost": 0,
        "matched_provisioners": job.map_or(Value::Null, |j| matched_provisioners(&j.tags)),
        "template_version_preset_id": null,
        "has_ai_task": false,
        "has_external_agent": false,
    })
}

fn render_workspace(ws: &Workspace, mem: &Mem) -> Value {
    let template = mem.templates.iter().find(|t| t.id == ws.template_id);
    let latest = mem.latest_build(ws.id);
    let active_version = template.map(|t| t.active_version_id);
    json!({
        "id": ws.id,
        "created_at": ws.created_at,
        "updated_at": ws.updated_at,
        "owner_id": ws.owner.0,
        "owner_name": ws.owner.1,
        "owner_avatar_url": "",
        "organization_id": ws.organization.0,
        "organization_name": ws.organization.1,
        "template_id": ws.template_id,
        "template_name": template.map(|t| t.name.clone()).unwrap_or_default(),
        "template_display_name": template.map(|t| t.display_name.clone()).unwrap_or_default(),
        "template_icon": template.map(|t| t.icon.clone()).unwrap_or_default(),
        // The template's stored settings, as Coder renders them on every workspace of the template.
        "template_allow_user_cancel_workspace_jobs": template
            .is_some_and(|t| t.settings.allow_user_cancel_workspace_jobs),
        "template_active_version_id": active_version,
        "template_require_active_version": template.is_some_and(|t| t.settings.require_active_version),
        "template_use_classic_parameter_flow": template.is_some_and(|t| t.settings.use_classic_parameter_flow),
        "latest_build": latest.map_or(Value::Null, |b| render_build(b, mem)),
        "latest_app_status": null,
        "outdated": latest.is_some_and(|b| Some(b.template_version_id) != active_version),
        "name": ws.name,
        "autostart_schedule": ws.autostart_schedule,
        "ttl_ms": ws.ttl_ms,
        "last_used_at": ws.updated_at,
        "deleting_at": null,
        "dormant_at": null,
        "health": { "healthy": true, "failing_agents": [] },
        "automatic_updates": ws.automatic_updates,
        "allow_renames": false,
        "favorite": false,
        "next_start_at": null,
    })
}

/// A version usable for a build: its import must have succeeded.
fn check_version_ready(mem: &Mem, version_id: Uuid) -> Result<(), ApiError> {
    let version = mem
        .version(version_id)
        .ok_or_else(|| ApiError::bad_request(format!("Template version {version_id} not found.")))?;
    let job = mem.jobs.get(&version.job_id);
    match job.map_or("pending", Job::status) {
        "pending" | "running" => Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "The provided template version is pending. Wait for it to complete importing!",
        )),
        "succeeded" => Ok(()),
        _ => Err(ApiError::bad_request(format!(
            "The provided template version {:?} has failed to import: {}",
            version.name,
            job.and_then(|j| j.error.clone())
                .unwrap_or_else(|| "canceled".to_owned())
        ))),
    }
}

/// What a new build is: its version, transition, initiator, reason and parameter values.
struct NewBuild<'a> {
    version_id: Uuid,
    transition: &'a str,
    initiator: (Uuid, String),
    reason: &'a str,
    parameters: Vec<(String, String)>,
}

/// Queues a build and its job; the caller spawns the provisioner.
fn queue_build(mem: &mut Mem, ws: &Workspace, new: NewBuild<'_>) -> (Uuid, Uuid) {
    let NewBuild {
        version_id,
        transition,
        initiator,
        reason,
        parameters,
    } = new;
    let build_number = mem.latest_build(ws.id).map_or(1, |b| b.build_number + 1);
    let tags = mem
        .version(version_id)
        .and_then(|v| mem.jobs.get(&v.job_id))
        .map(|j| j.tags.clone())
        .unwrap_or_default();
    let file_id = mem
        .version(version_id)
        .and_then(|v| mem.jobs.get(&v.job_id))
        .map_or(Uuid::nil(), |j| j.file_id);
    let build_id = Uuid::new_v4();
    let job = Job::pending(
        JobKind::WorkspaceBuild { build_id },
        ws.organization.0,
        initiator.0,
        file_id,
        tags,
    );
    let job_id = job.id;
    mem.jobs.insert(job_id, job);
    mem.builds.push(Build {
        id: build_id,
        created_at: now(),
        workspace_id: ws.id,
        template_version_id: version_id,
        build_number,
        transition: transition.to_owned(),
        initiator,
        job_id,
        reason: reason.to_owned(),
        parameters,
    });
    (build_id, job_id)
}

#[derive(Deserialize)]
struct CreateWorkspace {
    #[serde(default)]
    template_id: Option<Uuid>,
    #[serde(default)]
    template_version_id: Option<Uuid>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    autostart_schedule: Option<String>,
    #[serde(default)]
    ttl_ms: Option<i64>,
    #[serde(default)]
    automatic_updates: Option<String>,
    #[serde(default)]
    rich_parameter_values: Vec<ParameterValue>,
}

/// `{name, value}` of `rich_parameter_values`.
#[derive(Deserialize)]
struct ParameterValue {
    #[serde(default)]
    name: String,
    #[serde(default)]
    value: String,
}

fn pairs(values: &[ParameterValue]) -> Vec<(String, String)> {
    values.iter().map(|v| (v.name.clone(), v.value.clone())).collect()
}

/// Whether the IANA zone `name` exists (Coder carries the zone database; the test server reads the system's).
fn zone_known(name: &str) -> bool {
    std::path::Path::new("/usr/share/zoneinfo").join(name).is_file()
}

/// Coder's autostart check: `None` for no (or an empty) schedule.
fn checked_schedule(schedule: Option<&str>, message: &str) -> Result<Option<String>, ApiError> {
    let Some(schedule) = schedule.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    coder_k8s_coder_client::schedule::check_weekly_schedule(schedule, zone_known)
        .map_err(|e| ApiError::bad_request(message).validation("schedule", e.0))?;
    Ok(Some(schedule.to_owned()))
}

/// The schedule settings of a new workspace, checked as Coder checks them on create: the autostart schedule, the
/// time to live (none or 0 takes the template's default, unchecked) and automatic updates (`never` when absent).
fn create_settings(
    body: &CreateWorkspace,
    template: &crate::state::Template,
) -> Result<(Option<String>, Option<i64>, String), ApiError> {
    let schedule = checked_schedule(body.autostart_schedule.as_deref(), "Invalid Autostart Schedule.")?;
    let ttl_ms = match body.ttl_ms.filter(|ms| *ms != 0) {
        None => Some(template.settings.default_ttl_ms).filter(|ms| *ms != 0),
        given => coder_k8s_coder_client::schedule::stored_ttl_ms(given).map_err(|e| {
            ApiError::bad_request("Invalid Workspace Time to Shutdown.").validation("ttl_ms", e.to_string())
        })?,
    };
    let automatic_updates = match body.automatic_updates.as_deref().unwrap_or_default() {
        "" => "never".to_owned(),
        valid @ ("always" | "never") => valid.to_owned(),
        _ => {
            return Err(
                ApiError::bad_request("Invalid Workspace Automatic Updates setting.")
                    .validation("automatic_updates", "Automatic updates must be always or never"),
            );
        }
    };
    Ok((schedule, ttl_ms, automatic_updates))
}

async fn create_workspace(
    State(app): State<App>,
    auth: Auth,
    Path(param): Path<String>,
    body: JsonBody<CreateWorkspace>,
) -> ApiResult {
    let owner = auth::user_for_write(&app, &auth, &param).await?;
    let body = body.parse()?;
    if body.name.is_empty() {
        return Err(ApiError::required("name"));
    }
    if !valid_template_name(&body.name) {
        return Err(ApiError::bad_request("Validation failed.").validation(
            "name",
            format!(
                "Validation failed for tag \"workspace_name\" with value: {:?}",
                body.name
            ),
        ));
    }
    let memberships = app.db.memberships(owner.id).await?;
    let mut mem = app.mem();
    let (template, version_id) = match (body.template_id, body.template_version_id) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "You cannot specify both template_id and template_version_id.",
            ));
        }
        (None, None) => {
            return Err(ApiError::bad_request(
                "You must specify either template_id or template_version_id.",
            ));
        }
        (Some(id), None) => {
            let template = mem.template(id).ok_or_else(|| {
                ApiError::bad_request(format!("Template {:?} doesn't exist.", id.to_string()))
                    .validation("template_id", "template not found")
            })?;
            (template.clone(), template.active_version_id)
        }
        (None, Some(version_id)) => {
            let template = mem
                .version(version_id)
                .and_then(|v| v.template_id)
                .and_then(|id| mem.template(id))
                .ok_or_else(|| ApiError::bad_request(format!("Template version {version_id} not found.")))?;
            (template.clone(), version_id)
        }
    };
    if !memberships.iter().any(|(id, _)| *id == template.organization.id) {
        return Err(ApiError::forbidden());
    }
    check_version_ready(&mem, version_id)?;
    let (autostart_schedule, ttl_ms, automatic_updates) = create_settings(&body, &template)?;
    if mem
        .workspaces
        .iter()
        .any(|w| !w.deleted && w.owner.0 == owner.id && w.name.eq_ignore_ascii_case(&body.name))
    {
        return Err(
            ApiError::conflict(format!("Workspace {:?} already exists.", body.name))
                .validation("name", IN_USE),
        );
    }
    let stamp = now();
    let ws = Workspace {
        id: Uuid::new_v4(),
        created_at: stamp.clone(),
        updated_at: stamp,
        owner: (owner.id, owner.username.clone()),
        organization: (template.organization.id, template.organization.name.clone()),
        template_id: template.id,
        name: body.name.clone(),
        autostart_schedule,
        ttl_ms,
        automatic_updates,
        deleted: false,
    };
    let parameters = crate::parameters::resolve(
        &crate::parameters::of_version(&mem, version_id),
        None,
        &pairs(&body.rich_parameter_values),
    )?;
    let first = NewBuild {
        version_id,
        transition: "start",
        initiator: (auth.user.id, auth.user.username.clone()),
        reason: "initiator",
        parameters,
    };
    let (_, job_id) = queue_build(&mut mem, &ws, first);
    mem.workspaces.push(ws.clone());
    let mut rendered = render_workspace(&ws, &mem);
    // Coder's create answer leaves the first build's template version name empty.
    rendered["latest_build"]["template_version_name"] = json!("");
    drop(mem);
    crate::provisioner::spawn(&app, job_id);
    app.notify();
    created(rendered)
}

/// A deleted workspace answers 410 unless `include_deleted=true`.
fn visible_workspace(ws: &Workspace, uri: &Uri) -> Result<(), ApiError> {
    if ws.deleted && !flag(&query_params(uri), "include_deleted") {
        return Err(ApiError::new(
            StatusCode::GONE,
            format!(
                "Workspace {:?} was deleted, you can view this workspace by specifying '?deleted=true' and trying again.",
                ws.id.to_string()
            ),
        ));
    }
    Ok(())
}

fn can_read(auth: &Auth, ws: &Workspace) -> bool {
    auth.is_owner() || ws.owner.0 == auth.user.id
}

async fn get_workspace(State(app): State<App>, auth: Auth, Path(id): Path<String>, uri: Uri) -> ApiResult {
    let id = parse_uuid(&id)?;
    let mem = app.mem();
    let ws = mem
        .workspace(id)
        .filter(|w| can_read(&auth, w))
        .ok_or_else(ApiError::not_found)?;
    visible_workspace(ws, &uri)?;
    ok(render_workspace(ws, &mem))
}

async fn workspace_by_name(
    State(app): State<App>,
    auth: Auth,
    Path((user, name)): Path<(String, String)>,
    uri: Uri,
) -> ApiResult {
    let owner = auth::user(&app, &auth, &user).await?;
    let include_deleted = flag(&query_params(&uri), "include_deleted");
    let mem = app.mem();
    let ws = mem
        .workspaces
        .iter()
        .rev()
        .filter(|w| w.owner.0 == owner.id && w.name.eq_ignore_ascii_case(&name) && can_read(&auth, w))
        .find(|w| include_deleted || !w.deleted)
        .ok_or_else(ApiError::not_found)?;
    ok(render_workspace(ws, &mem))
}

async fn list_workspaces(State(app): State<App>, auth: Auth, uri: Uri) -> ApiResult {
    let params = query_params(&uri);
    let filters = parse_search(params.get("q").map(String::as_str).unwrap_or_default());
    let mem = app.mem();
    let mut matching: Vec<&Workspace> = mem
        .workspaces
        .iter()
        .filter(|w| !w.deleted && can_read(&auth, w))
        .filter(|w| {
            filters.iter().all(|(key, value)| match key.as_str() {
                "owner" if value == "me" => w.owner.0 == auth.user.id,
                "owner" => w.owner.1.eq_ignore_ascii_case(value),
                "name" => w.name.to_lowercase().contains(&value.to_lowercase()),
                "template" => mem
                    .templates
                    .iter()
                    .any(|t| t.id == w.template_id && t.name.eq_ignore_ascii_case(value)),
                "status" => mem
                    .latest_build(w.id)
                    .is_some_and(|b| build_status(mem.jobs.get(&b.job_id), &b.transition) == value.as_str()),
                _ => true,
            })
        })
        .collect();
    // Coder's order: workspaces whose latest build started successfully first, then by owner and name
    // (case-insensitive). Favourites, which come first for their owner in Coder, are not simulated.
    matching.sort_by_cached_key(|w| {
        let started = mem.latest_build(w.id).is_some_and(|b| {
            b.transition == "start" && mem.jobs.get(&b.job_id).is_some_and(|j| j.status() == "succeeded")
        });
        (!started, w.owner.1.to_lowercase(), w.name.to_lowercase())
    });
    let count = matching.len();
    let offset = params
        .get("offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0usize);
    let limit = params
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let workspaces: Vec<Value> = matching
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|w| render_workspace(w, &mem))
        .collect();
    ok(json!({ "workspaces": workspaces, "count": count }))
}

/// Newest first; `limit` (0 or absent: all) and `offset` page the list as Coder does.
async fn list_builds(State(app): State<App>, auth: Auth, Path(id): Path<String>, uri: Uri) -> ApiResult {
    let id = parse_uuid(&id)?;
    let params = query_params(&uri);
    let number = |key: &str| params.get(key).and_then(|v| v.parse::<usize>().ok());
    let limit = number("limit").filter(|l| *l > 0).unwrap_or(usize::MAX);
    let offset = number("offset").unwrap_or(0);
    let mem = app.mem();
    mem.workspace(id)
        .filter(|w| can_read(&auth, w))
        .ok_or_else(ApiError::not_found)?;
    let mut builds: Vec<&Build> = mem.builds.iter().filter(|b| b.workspace_id == id).collect();
    builds.sort_by_key(|b| std::cmp::Reverse(b.build_number));
    ok(builds
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|b| render_build(b, &mem))
        .collect())
}

#[derive(Deserialize)]
struct CreateBuild {
    #[serde(default)]
    template_version_id: Option<Uuid>,
    #[serde(default)]
    transition: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    rich_parameter_values: Vec<ParameterValue>,
}

async fn create_build(
    State(app): State<App>,
    auth: Auth,
    Path(id): Path<String>,
    body: JsonBody<CreateBuild>,
) -> ApiResult {
    let body = body.parse()?;
    let id = parse_uuid(&id)?;
    if body.transition.is_empty() {
        return Err(ApiError::required("transition"));
    }
    if !["start", "stop", "delete"].contains(&body.transition.as_str()) {
        return Err(ApiError::bad_request("Validation failed.").validation(
            "transition",
            format!(
                "Validation failed for tag \"oneof\" with value: {:?}",
                body.transition
            ),
        ));
    }
    let mut mem = app.mem();
    let ws = mem
        .workspace(id)
        .filter(|w| can_read(&auth, w) && !w.deleted)
        .ok_or_else(ApiError::not_found)?
        .clone();
    let latest = mem.latest_build(ws.id).cloned();
    if latest
        .as_ref()
        .and_then(|b| mem.jobs.get(&b.job_id))
        .is_some_and(Job::is_active)
    {
        return Err(ApiError::conflict("A workspace build is already active."));
    }
    let version_id = match (body.template_version_id, &latest) {
        (Some(v), _) => v,
        (None, Some(b)) => b.template_version_id,
        (None, None) => mem
            .template(ws.template_id)
            .map_or(Uuid::nil(), |t| t.active_version_id),
    };
    check_version_ready(&mem, version_id)?;
    let parameters = crate::parameters::resolve(
        &crate::parameters::of_version(&mem, version_id),
        latest.as_ref().map(|b| b.parameters.as_slice()),
        &pairs(&body.rich_parameter_values),
    )?;
    let reason = body.reason.clone().unwrap_or_else(|| "initiator".to_owned());
    let new = NewBuild {
        version_id,
        transition: &body.transition,
        initiator: (auth.user.id, auth.user.username.clone()),
        reason: &reason,
        parameters,
    };
    let (build_id, job_id) = queue_build(&mut mem, &ws, new);
    let mut rendered = mem
        .build(build_id)
        .map(|b| render_build(b, &mem))
        .unwrap_or(Value::Null);
    // Coder's create answer leaves the template version name empty.
    rendered["template_version_name"] = json!("");
    drop(mem);
    crate::provisioner::spawn(&app, job_id);
    app.notify();
    created(rendered)
}

fn build_for(mem: &Mem, auth: &Auth, id: &str) -> Result<Build, ApiError> {
    let id = parse_uuid(id)?;
    let build = mem.build(id).ok_or_else(ApiError::not_found)?;
    mem.workspace(build.workspace_id)
        .filter(|w| can_read(auth, w))
        .ok_or_else(ApiError::not_found)?;
    Ok(build.clone())
}

async fn get_build(State(app): State<App>, auth: Auth, Path(id): Path<String>) -> ApiResult {
    let mem = app.mem();
    let build = build_for(&mem, &auth, &id)?;
    ok(render_build(&build, &mem))
}

async fn cancel_build(State(app): State<App>, auth: Auth, Path(id): Path<String>) -> ApiResult {
    let job_id = build_for(&app.mem(), &auth, &id)?.job_id;
    cancel_job(&app, job_id)
}

/// `GET /workspacebuilds/{id}/parameters`: the build's values.
async fn build_parameters(State(app): State<App>, auth: Auth, Path(id): Path<String>) -> ApiResult {
    let mem = app.mem();
    let build = build_for(&mem, &auth, &id)?;
    let values: Vec<Value> = build
        .parameters
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    ok(Value::Array(values))
}

/// `GET /templateversions/{id}/rich-parameters`: 425 until the import has finished.
async fn version_parameters(State(app): State<App>, _auth: Auth, Path(id): Path<String>) -> ApiResult {
    let id = parse_uuid(&id)?;
    let mem = app.mem();
    let version = mem.version(id).ok_or_else(ApiError::not_found)?;
    let finished = mem
        .jobs
        .get(&version.job_id)
        .is_some_and(|job| job.completed_at.is_some());
    if !finished {
        return Err(ApiError::new(
            StatusCode::TOO_EARLY,
            "Template version job has not finished",
        ));
    }
    let parameters: Vec<Value> = crate::parameters::of_version(&mem, id)
        .iter()
        .map(crate::parameters::render)
        .collect();
    ok(Value::Array(parameters))
}

/// The workspace a settings write changes: visible to the caller (else 404) and not deleted (else 410).
fn settings_target(mem: &Mem, auth: &Auth, id: &str, uri: &Uri) -> Result<Workspace, ApiError> {
    let id = parse_uuid(id)?;
    let ws = mem
        .workspace(id)
        .filter(|w| can_read(auth, w))
        .ok_or_else(ApiError::not_found)?;
    visible_workspace(ws, uri)?;
    Ok(ws.clone())
}

/// Whether the template lets users set autostart (`autostart`) or the time to live (`autostop`): only a Coder
/// licensed for advanced template scheduling reads the template's setting; otherwise both are always allowed.
fn user_may(
    app: &App,
    mem: &Mem,
    ws: &Workspace,
    setting: fn(&crate::state::TemplateSettings) -> bool,
) -> bool {
    !app.entitlement("advanced_template_scheduling").is_entitled()
        || mem
            .templates
            .iter()
            .find(|t| t.id == ws.template_id)
            .is_none_or(|t| setting(&t.settings))
}

fn store(mem: &mut Mem, id: Uuid, change: impl FnOnce(&mut Workspace)) {
    if let Some(ws) = mem.workspaces.iter_mut().find(|w| w.id == id) {
        change(ws);
    }
}

#[derive(Deserialize)]
struct TtlBody {
    #[serde(default)]
    ttl_ms: Option<i64>,
}

/// `PUT /workspaces/{id}/ttl` (204): whole minutes, at least one and at most 30 days; none or 0 turns autostop off.
async fn put_ttl(
    State(app): State<App>,
    auth: Auth,
    Path(id): Path<String>,
    uri: Uri,
    body: JsonBody<TtlBody>,
) -> ApiResult {
    let mut mem = app.mem();
    let ws = settings_target(&mem, &auth, &id, &uri)?;
    let body = body.parse()?;
    let refused = |detail: String| {
        ApiError::bad_request("Error updating workspace time until shutdown.").validation("ttl_ms", detail)
    };
    if !user_may(&app, &mem, &ws, |s| s.allow_user_autostop) {
        return Err(refused(
            "Custom autostop TTL is not allowed for workspaces using this template.".to_owned(),
        ));
    }
    let ttl_ms =
        coder_k8s_coder_client::schedule::stored_ttl_ms(body.ttl_ms).map_err(|e| refused(e.to_string()))?;
    store(&mut mem, ws.id, |w| w.ttl_ms = ttl_ms);
    drop(mem);
    app.notify();
    no_content()
}

#[derive(Deserialize)]
struct AutostartBody {
    #[serde(default)]
    schedule: Option<String>,
}

/// `PUT /workspaces/{id}/autostart` (204): the schedule is checked, then the template's permission.
async fn put_autostart(
    State(app): State<App>,
    auth: Auth,
    Path(id): Path<String>,
    uri: Uri,
    body: JsonBody<AutostartBody>,
) -> ApiResult {
    let mut mem = app.mem();
    let ws = settings_target(&mem, &auth, &id, &uri)?;
    let body = body.parse()?;
    let schedule = checked_schedule(body.schedule.as_deref(), "Invalid autostart schedule.")?;
    if !user_may(&app, &mem, &ws, |s| s.allow_user_autostart) {
        let reason = "Autostart is not allowed for workspaces using this template.";
        return Err(ApiError::bad_request(reason).validation("schedule", reason));
    }
    store(&mut mem, ws.id, |w| w.autostart_schedule = schedule);
    drop(mem);
    app.notify();
    no_content()
}

#[derive(Deserialize)]
struct AutomaticUpdatesBody {
    #[serde(default)]
    automatic_updates: String,
}

/// `PUT /workspaces/{id}/autoupdates` (204): `always` or `never`.
async fn put_automatic_updates(
    State(app): State<App>,
    auth: Auth,
    Path(id): Path<String>,
    uri: Uri,
    body: JsonBody<AutomaticUpdatesBody>,
) -> ApiResult {
    let mut mem = app.mem();
    let ws = settings_target(&mem, &auth, &id, &uri)?;
    let body = body.parse()?;
    if !["always", "never"].contains(&body.automatic_updates.as_str()) {
        return Err(ApiError::bad_request("Invalid request")
            .validation("automatic_updates", "must be always or never"));
    }
    store(&mut mem, ws.id, |w| w.automatic_updates = body.automatic_updates);
    drop(mem);
    app.notify();
    no_content()
}
