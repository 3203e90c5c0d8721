//! Template versions (imports, their variables) and templates. The access lists are in `template_acl`.

use std::collections::BTreeMap;
use std::time::SystemTime;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::template_settings::{self, CreateSettings, Licensed, Patched};
use super::{JsonBody, flag, query_params};
use crate::auth::{self, Auth};
use crate::errors::{ApiError, ApiResult, IN_USE, created, ok, parse_uuid};
use crate::provisioner::{matched_provisioners, mutate_tags, render_job};
use crate::state::{App, Job, JobKind, Mem, Template, TemplateVersion};
use crate::util::{now, valid_template_name, valid_version_name};

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route(
            "/organizations/{organization}/templateversions",
            post(create_version),
        )
        .route("/templateversions/{id}", get(get_version).patch(patch_version))
        .route("/templateversions/{id}/cancel", patch(cancel_version))
        .route("/templateversions/{id}/variables", get(version_variables))
        .route("/templateversions/{id}/archive", post(archive_version))
        .route("/templateversions/{id}/unarchive", post(unarchive_version))
        .route(
            "/organizations/{organization}/templates",
            get(org_templates).post(create_template),
        )
        .route(
            "/organizations/{organization}/templates/{name}",
            get(org_template),
        )
        .route(
            "/organizations/{organization}/templates/{name}/versions/{version}",
            get(org_template_version),
        )
        .route("/templates", get(list_templates))
        .route(
            "/templates/{id}",
            get(get_template).patch(patch_template).delete(delete_template),
        )
        .route("/templates/{id}/versions", get(list_versions).patch(promote))
        .route("/templates/{id}/versions/archive", post(archive_versions))
        .route("/templates/{id}/versions/{name}", get(version_by_name))
}

pub(super) fn render_version(version: &TemplateVersion, mem: &Mem) -> Value {
    let job = mem.jobs.get(&version.job_id);
    let body = json!({
        "id": version.id,
        "organization_id": version.organization_id,
        "created_at": version.created_at,
        "updated_at": version.updated_at,
        "name": version.name,
        "message": version.message,
        "job": job.map_or(Value::Null, |j| render_job(j, mem)),
        "readme": "",
        "created_by": { "id": version.created_by.0, "username": version.created_by.1 },
        "archived": version.archived,
        "matched_provisioners": job.map_or(Value::Null, |j| matched_provisioners(&j.tags)),
        "has_external_agent": false,
        // Coder renders a version without a template with the nil UUID, not without the field.
        "template_id": version.template_id.unwrap_or(Uuid::nil()),
    });
    body
}

pub(super) fn render_template(template: &Template, licensed: Licensed) -> Value {
    let mut body = json!({
        "id": template.id,
        "created_at": template.created_at,
        "updated_at": template.updated_at,
        "organization_id": template.organization.id,
        "organization_name": template.organization.name,
        "organization_display_name": template.organization.display_name,
        "organization_icon": template.organization.icon,
        "name": template.name,
        "display_name": template.display_name,
        "provisioner": template.provisioner,
        "active_version_id": template.active_version_id,
        // Coder's count does not follow new workspaces (0 right after the first one); kept at 0 here.
        "active_user_count": 0,
        "build_time_stats": { "start": {}, "stop": {}, "delete": {} },
        "description": template.description,
        "icon": template.icon,
        "created_by_id": template.created_by.0,
        "created_by_name": template.created_by.1,
    });
    if let (Some(body), Value::Object(settings)) = (
        body.as_object_mut(),
        template_settings::render(&template.settings, licensed),
    ) {
        body.extend(settings);
    }
    body
}

#[derive(Deserialize)]
struct CreateVersion {
    #[serde(default)]
    name: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    template_id: Option<Uuid>,
    #[serde(default)]
    storage_method: String,
    #[serde(default)]
    file_id: Option<Uuid>,
    #[serde(default)]
    example_id: String,
    #[serde(default)]
    provisioner: String,
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
    #[serde(default)]
    user_variable_values: Option<Vec<VariableValue>>,
}

/// `codersdk.VariableValue`.
#[derive(Deserialize)]
struct VariableValue {
    #[serde(default)]
    name: String,
    #[serde(default)]
    value: String,
}

fn invalid(field: &str, value: &str, tag: &str) -> ApiError {
    ApiError::bad_request("Validation failed.").validation(
        field,
        format!("Validation failed for tag {tag:?} with value: {value:?}"),
    )
}

async fn create_version(
    State(app): State<App>,
    auth: Auth,
    Path(org): Path<String>,
    body: JsonBody<CreateVersion>,
) -> ApiResult {
    let org = auth::organization(&app, &auth, &org).await?;
    // Coder's handler has no permission check of its own: the database layer refuses the insert, which
    // reaches the caller as a 500.
    auth.require_org_admin(&app, org.id).await.map_err(|_| {
        ApiError::internal("insert template version: unauthorized: rbac: forbidden")
            .retitle("Internal error creating template version.")
    })?;
    let body = body.parse()?;
    if body.storage_method.is_empty() {
        return Err(ApiError::required("storage_method"));
    }
    if body.storage_method != "file" {
        return Err(invalid("storage_method", &body.storage_method, "oneof"));
    }
    if body.provisioner.is_empty() {
        return Err(ApiError::required("provisioner"));
    }
    if body.provisioner != "terraform" && body.provisioner != "echo" {
        return Err(invalid("provisioner", &body.provisioner, "oneof"));
    }
    if !body.name.is_empty() && !valid_version_name(&body.name) {
        return Err(invalid("name", &body.name, "template_version_name"));
    }
    if !body.example_id.is_empty() && body.file_id.is_some() {
        return Err(ApiError::bad_request(
            "You cannot specify both an example_id and a file_id.",
        ));
    }
    let name = if body.name.is_empty() {
        format!(
            "testsrv_{}",
            crate::util::random_hex(4).map_err(ApiError::internal)?
        )
    } else {
        body.name
    };
    let mut mem = app.mem();
    if let Some(template_id) = body.template_id
        && mem
            .template(template_id)
            .is_none_or(|t| t.organization.id != org.id)
    {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "Template does not exist."));
    }
    let file_id = body
        .file_id
        .filter(|id| mem.files.iter().any(|f| f.id == *id))
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "File not found."))?;
    if let Some(template_id) = body.template_id
        && mem
            .template_versions
            .iter()
            .any(|v| v.template_id == Some(template_id) && v.name == name)
    {
        return Err(ApiError::conflict(format!(
            "A template version with name {name:?} already exists for this template."
        ))
        .validation("name", IN_USE));
    }
    let version_id = Uuid::new_v4();
    let job = Job::pending(
        JobKind::TemplateVersionImport { version_id },
        org.id,
        auth.user.id,
        file_id,
        mutate_tags(auth.user.id, &body.tags.unwrap_or_default()),
    );
    let job_id = job.id;
    mem.jobs.insert(job_id, job);
    let stamp = now();
    let version = TemplateVersion {
        id: version_id,
        template_id: body.template_id,
        organization_id: org.id,
        created_at: stamp.clone(),
        updated_at: stamp,
        name,
        message: body.message,
        job_id,
        created_by: (auth.user.id, auth.user.username.clone()),
        archived: false,
        provisioner: body.provisioner,
        user_variable_values: body
            .user_variable_values
            .unwrap_or_default()
            .into_iter()
            .map(|v| (v.name, v.value))
            .collect(),
        variables: Vec::new(),
    };
    let rendered = render_version(&version, &mem);
    mem.template_versions.push(version);
    drop(mem);
    crate::provisioner::spawn(&app, job_id);
    app.notify();
    created(rendered)
}

fn version_index(mem: &Mem, id: &str) -> Result<usize, ApiError> {
    let id = parse_uuid(id)?;
    mem.template_versions
        .iter()
        .position(|v| v.id == id)
        .ok_or_else(ApiError::not_found)
}

async fn get_version(State(app): State<App>, _auth: Auth, Path(id): Path<String>) -> ApiResult {
    let mem = app.mem();
    let index = version_index(&mem, &id)?;
    ok(render_version(&mem.template_versions[index], &mem))
}

/// What Coder answers in place of a sensitive variable's value and default.
const REDACTED: &str = "*redacted*";

/// `GET /templateversions/{id}/variables`: the variables the import stored, sensitive values redacted; 403 while the
/// import job has not completed.
async fn version_variables(State(app): State<App>, _auth: Auth, Path(id): Path<String>) -> ApiResult {
    let mem = app.mem();
    let version = &mem.template_versions[version_index(&mem, &id)?];
    if mem
        .jobs
        .get(&version.job_id)
        .is_none_or(|job| job.completed_at.is_none())
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "Template version job has not finished",
        ));
    }
    ok(version
        .variables
        .iter()
        .map(|v| {
            let (value, default) = if v.sensitive {
                (REDACTED, REDACTED)
            } else {
                (v.value.as_str(), v.default_value.as_str())
            };
            json!({
                "name": v.name, "description": v.description, "type": v.type_, "value": value,
                "default_value": default, "required": v.required, "sensitive": v.sensitive,
            })
        })
        .collect())
}

#[derive(Deserialize)]
struct PatchVersion {
    #[serde(default)]
    name: String,
    #[serde(default)]
    message: Option<String>,
}

async fn patch_version(
    State(app): State<App>,
    _auth: Auth,
    Path(id): Path<String>,
    body: JsonBody<PatchVersion>,
) -> ApiResult {
    let body = body.parse()?;
    let mut mem = app.mem();
    let index = version_index(&mem, &id)?;
    let version = &mem.template_versions[index];
    if !body.name.is_empty() {
        if !valid_version_name(&body.name) {
            return Err(invalid("name", &body.name, "template_version_name"));
        }
        if version.template_id.is_some()
            && mem
                .template_versions
                .iter()
                .any(|v| v.id != version.id && v.template_id == version.template_id && v.name == body.name)
        {
            return Err(ApiError::conflict(format!(
                "A template version with name {:?} already exists for this template.",
                body.name
            )));
        }
    }
    let version = &mut mem.template_versions[index];
    if !body.name.is_empty() {
        version.name = body.name;
    }
    if let Some(message) = body.message {
        version.message = message;
    }
    version.updated_at = now();
    let version = version.clone();
    ok(render_version(&version, &mem))
}

/// Marks a job canceled (shared with workspace builds).
pub(super) fn cancel_job(app: &App, job_id: Uuid) -> ApiResult {
    {
        let mut mem = app.mem();
        let job = mem.jobs.get_mut(&job_id).ok_or_else(ApiError::not_found)?;
        if job.completed_at.is_some() {
            return Err(ApiError::bad_request("Job has already completed!"));
        }
        if job.canceled_at.is_some() {
            return Err(ApiError::bad_request("Job has already been marked as canceled!"));
        }
        job.canceled_at = Some(SystemTime::now());
    }
    app.notify();
    ok(json!({ "message": "Job has been marked as canceled..." }))
}

async fn cancel_version(State(app): State<App>, _auth: Auth, Path(id): Path<String>) -> ApiResult {
    let job_id = {
        let mem = app.mem();
        mem.template_versions[version_index(&mem, &id)?].job_id
    };
    cancel_job(&app, job_id)
}

fn version_in_use(mem: &Mem, version: &TemplateVersion) -> bool {
    mem.templates
        .iter()
        .any(|t| !t.deleted && t.active_version_id == version.id)
        || mem.builds.iter().any(|b| {
            b.template_version_id == version.id
                && mem.workspace(b.workspace_id).is_some_and(|w| !w.deleted)
                && mem.latest_build(b.workspace_id).is_some_and(|l| l.id == b.id)
        })
}

/// The single-version archive routes answer with a JSON string, not a Response object.
fn json_string(text: String) -> Response {
    crate::errors::json_response(StatusCode::OK, &Value::String(text)).into_response()
}

async fn archive_version(State(app): State<App>, _auth: Auth, Path(id): Path<String>) -> ApiResult {
    let mut mem = app.mem();
    let index = version_index(&mem, &id)?;
    let version = mem.template_versions[index].clone();
    if version.archived {
        return Err(ApiError::bad_request("Template version already archived"));
    }
    if version.template_id.is_none() {
        return Err(ApiError::bad_request(
            "Cannot archive template versions not associate with a template.",
        ));
    }
    if version_in_use(&mem, &version) {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error fetching template version.",
        )
        .detail(
            "Unable to archive specified version, the version is likely in use by a workspace or currently set to the active version",
        ));
    }
    mem.template_versions[index].archived = true;
    Ok(json_string(format!(
        "template version {:?} archived",
        version.id.to_string()
    )))
}

async fn unarchive_version(State(app): State<App>, _auth: Auth, Path(id): Path<String>) -> ApiResult {
    let mut mem = app.mem();
    let index = version_index(&mem, &id)?;
    let version = &mut mem.template_versions[index];
    if !version.archived {
        return Err(ApiError::bad_request("Template version is not archived"));
    }
    version.archived = false;
    Ok(json_string(format!(
        "template version {:?} unarchived",
        version.id.to_string()
    )))
}

#[derive(Deserialize)]
struct CreateTemplate {
    #[serde(default)]
    name: String,
    #[serde(default)]
    template_version_id: Option<Uuid>,
    #[serde(default)]
    display_name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    icon: String,
}

async fn create_template(
    State(app): State<App>,
    auth: Auth,
    Path(org): Path<String>,
    raw: JsonBody<Value>,
) -> ApiResult {
    let org = auth::organization(&app, &auth, &org).await?;
    auth.require_org_admin(&app, org.id).await?;
    let raw = raw.parse()?;
    let invalid_json = |e: serde_json::Error| {
        ApiError::bad_request("Request body must be valid JSON.").detail(e.to_string())
    };
    let body: CreateTemplate = serde_json::from_value(raw.clone()).map_err(invalid_json)?;
    let requested: CreateSettings = serde_json::from_value(raw).map_err(invalid_json)?;
    if body.name.is_empty() {
        return Err(ApiError::required("name"));
    }
    if !valid_template_name(&body.name) {
        return Err(invalid("name", &body.name, "template_name"));
    }
    let Some(version_id) = body.template_version_id.filter(|id| !id.is_nil()) else {
        return Err(ApiError::required("template_version_id"));
    };
    if body.description.len() >= 128 {
        return Err(ApiError::bad_request("Invalid create template request.")
            .validation("description", "Must be less than 128 characters"));
    }
    let mut mem = app.mem();
    if mem
        .templates
        .iter()
        .any(|t| !t.deleted && t.organization.id == org.id && t.name.eq_ignore_ascii_case(&body.name))
    {
        return Err(
            ApiError::conflict(format!("Template with name {:?} already exists.", body.name))
                .validation("name", IN_USE),
        );
    }
    let version_index = mem
        .template_versions
        .iter()
        .position(|v| v.id == version_id && v.organization_id == org.id)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("Template version {:?} does not exist.", version_id.to_string()),
            )
            .validation("template_version_id", "Template version does not exist")
        })?;
    let version = &mem.template_versions[version_index];
    if version.archived {
        return Err(ApiError::bad_request(format!(
            "Template version {version_id} is archived."
        )));
    }
    if version.template_id.is_some() {
        return Err(ApiError::bad_request(format!(
            "Template version {version_id} is already part of a template"
        )));
    }
    let provisioner = version.provisioner.clone();
    let licensed = Licensed::of(&app);
    let settings = template_settings::create(&requested, licensed)?;
    let stamp = now();
    // Unless asked not to, Coder gives the organization's Everyone group (its ID is the organization's) `use`.
    let group_acl = if requested.disable_everyone_group_access {
        BTreeMap::new()
    } else {
        BTreeMap::from([(org.id, "use".to_owned())])
    };
    let template = Template {
        id: Uuid::new_v4(),
        created_at: stamp.clone(),
        updated_at: stamp,
        organization: org,
        display_name: body.display_name,
        name: body.name,
        description: body.description,
        icon: body.icon,
        provisioner,
        active_version_id: version_id,
        created_by: (auth.user.id, auth.user.username.clone()),
        settings,
        user_acl: BTreeMap::new(),
        group_acl,
        deleted: false,
    };
    mem.template_versions[version_index].template_id = Some(template.id);
    let rendered = render_template(&template, licensed);
    mem.templates.push(template);
    created(rendered)
}

async fn org_templates(State(app): State<App>, auth: Auth, Path(org): Path<String>) -> ApiResult {
    let org = auth::organization(&app, &auth, &org).await?;
    let licensed = Licensed::of(&app);
    let mem = app.mem();
    ok(mem
        .templates
        .iter()
        .filter(|t| !t.deleted && t.organization.id == org.id)
        .map(|t| render_template(t, licensed))
        .collect())
}

fn template_by_name<'a>(mem: &'a Mem, org: Uuid, name: &str) -> Result<&'a Template, ApiError> {
    mem.templates
        .iter()
        .find(|t| !t.deleted && t.organization.id == org && t.name.eq_ignore_ascii_case(name))
        .ok_or_else(ApiError::not_found)
}

async fn org_template(
    State(app): State<App>,
    auth: Auth,
    Path((org, name)): Path<(String, String)>,
) -> ApiResult {
    let org = auth::organization(&app, &auth, &org).await?;
    let licensed = Licensed::of(&app);
    let mem = app.mem();
    let template = template_by_name(&mem, org.id, &name)?;
    ok(render_template(template, licensed))
}

async fn org_template_version(
    State(app): State<App>,
    auth: Auth,
    Path((org, name, version)): Path<(String, String, String)>,
) -> ApiResult {
    let org = auth::organization(&app, &auth, &org).await?;
    let mem = app.mem();
    let template = template_by_name(&mem, org.id, &name)?;
    let version = mem
        .template_versions
        .iter()
        .find(|v| v.template_id == Some(template.id) && v.name == version)
        .ok_or_else(ApiError::not_found)?;
    ok(render_version(version, &mem))
}

/// Parses `key:"value" key:value` search queries.
pub(super) fn parse_search(q: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = q.trim();
    while !rest.is_empty() {
        let (token, remainder) = match rest.find(':') {
            Some(colon) if rest[colon + 1..].starts_with('"') => {
                let value_start = colon + 2;
                let end = rest[value_start..]
                    .find('"')
                    .map_or(rest.len(), |e| value_start + e);
                out.insert(rest[..colon].to_owned(), rest[value_start..end].to_owned());
                ("", rest.get(end + 1..).unwrap_or(""))
            }
            _ => {
                let end = rest.find(' ').unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        if let Some((key, value)) = token.split_once(':') {
            out.insert(key.to_owned(), value.to_owned());
        } else if !token.is_empty() {
            out.insert("name".to_owned(), token.to_owned());
        }
        rest = remainder.trim_start();
    }
    out
}

async fn list_templates(State(app): State<App>, auth: Auth, uri: Uri) -> ApiResult {
    let params = query_params(&uri);
    let filters = parse_search(params.get("q").map(String::as_str).unwrap_or_default());
    let memberships = app.db.memberships(auth.user.id).await?;
    let orgs = app.db.organizations().await?;
    let licensed = Licensed::of(&app);
    let mem = app.mem();
    let templates = mem
        .templates
        .iter()
        .filter(|t| !t.deleted)
        .filter(|t| auth.is_owner() || memberships.iter().any(|(id, _)| *id == t.organization.id))
        .filter(|t| {
            filters.iter().all(|(key, value)| match key.as_str() {
                "organization" => {
                    t.organization.id.to_string() == *value
                        || orgs
                            .iter()
                            .any(|o| o.id == t.organization.id && o.name.eq_ignore_ascii_case(value))
                }
                "exact_name" => t.name.eq_ignore_ascii_case(value),
                "name" => t.name.to_lowercase().contains(&value.to_lowercase()),
                "author" => t.created_by.1.eq_ignore_ascii_case(value),
                "deprecated" => value == "false",
                _ => true,
            })
        })
        .map(|t| render_template(t, licensed))
        .collect();
    ok(templates)
}

fn template_index(mem: &Mem, id: &str) -> Result<usize, ApiError> {
    let id = parse_uuid(id)?;
    mem.templates
        .iter()
        .position(|t| t.id == id && !t.deleted)
        .ok_or_else(ApiError::not_found)
}

async fn get_template(State(app): State<App>, _auth: Auth, Path(id): Path<String>) -> ApiResult {
    let licensed = Licensed::of(&app);
    let mem = app.mem();
    let index = template_index(&mem, &id)?;
    ok(render_template(&mem.templates[index], licensed))
}

/// `UpdateTemplateMeta` as Coder v2.30.0 applies it (see [`template_settings`]): a plain field left out is
/// written as zero; 304 when nothing changes and the request names the template by its current name.
async fn patch_template(
    State(app): State<App>,
    auth: Auth,
    Path(id): Path<String>,
    body: JsonBody<template_settings::Patch>,
) -> ApiResult {
    let body = body.parse()?;
    let org_id = {
        let mem = app.mem();
        mem.templates[template_index(&mem, &id)?].organization.id
    };
    auth.require_org_admin(&app, org_id).await?;
    if !body.name.is_empty() && !valid_template_name(&body.name) {
        return Err(invalid("name", &body.name, "template_name"));
    }
    let licensed = Licensed::of(&app);
    let mut mem = app.mem();
    let index = template_index(&mem, &id)?;
    let settings = match template_settings::patch(&mem.templates[index], &body, licensed)? {
        Patched::Unchanged => return Ok(StatusCode::NOT_MODIFIED.into_response()),
        Patched::Changed(settings) => settings,
    };
    let name = &body.name;
    if !name.is_empty()
        && mem.templates.iter().enumerate().any(|(i, t)| {
            i != index && !t.deleted && t.organization.id == org_id && t.name.eq_ignore_ascii_case(name)
        })
    {
        return Err(
            ApiError::conflict(format!("Template with name {name:?} already exists."))
                .validation("name", IN_USE),
        );
    }
    let template = &mut mem.templates[index];
    if !name.is_empty() {
        template.name.clone_from(name);
    }
    for (field, wanted) in [
        (&mut template.display_name, &body.display_name),
        (&mut template.description, &body.description),
        (&mut template.icon, &body.icon),
    ] {
        if let Some(value) = wanted {
            field.clone_from(value);
        }
    }
    template.settings = settings;
    if body.disable_everyone_group_access {
        template.group_acl.remove(&org_id);
    }
    template.updated_at = now();
    ok(render_template(template, licensed))
}

async fn delete_template(State(app): State<App>, auth: Auth, Path(id): Path<String>) -> ApiResult {
    let org_id = {
        let mem = app.mem();
        mem.templates[template_index(&mem, &id)?].organization.id
    };
    auth.require_org_admin(&app, org_id).await?;
    let mut mem = app.mem();
    let index = template_index(&mem, &id)?;
    let template_id = mem.templates[index].id;
    if mem
        .workspaces
        .iter()
        .any(|w| w.template_id == template_id && !w.deleted)
    {
        return Err(ApiError::bad_request(
            "All workspaces must be deleted before a template can be removed.",
        ));
    }
    mem.templates[index].deleted = true;
    ok(json!({ "message": "Template has been deleted!" }))
}

async fn list_versions(State(app): State<App>, _auth: Auth, Path(id): Path<String>, uri: Uri) -> ApiResult {
    let params = query_params(&uri);
    let include_archived = flag(&params, "include_archived");
    let mem = app.mem();
    let template_id = mem.templates[template_index(&mem, &id)?].id;
    let mut versions: Vec<&TemplateVersion> = mem
        .template_versions
        .iter()
        .filter(|v| v.template_id == Some(template_id) && (include_archived || !v.archived))
        .collect();
    if let Some(after) = params.get("after_id").and_then(|a| Uuid::parse_str(a).ok())
        && let Some(pos) = versions.iter().position(|v| v.id == after)
    {
        versions.drain(..=pos);
    }
    let offset = params
        .get("offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0usize);
    let limit = params
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    ok(versions
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|v| render_version(v, &mem))
        .collect())
}

#[derive(Deserialize)]
struct Promote {
    #[serde(default)]
    id: Option<Uuid>,
}

async fn promote(
    State(app): State<App>,
    auth: Auth,
    Path(id): Path<String>,
    body: JsonBody<Promote>,
) -> ApiResult {
    let org_id = {
        let mem = app.mem();
        mem.templates[template_index(&mem, &id)?].organization.id
    };
    auth.require_org_admin(&app, org_id).await?;
    let body = body.parse()?;
    let Some(version_id) = body.id else {
        return Err(ApiError::required("id"));
    };
    let mut mem = app.mem();
    let index = template_index(&mem, &id)?;
    let template_id = mem.templates[index].id;
    let version = mem
        .version(version_id)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "Template version not found."))?;
    if version.template_id != Some(template_id) {
        return Err(ApiError::bad_request(
            "The provided template version doesn't belong to the specified template.",
        ));
    }
    let status = mem.jobs.get(&version.job_id).map_or("unknown", Job::status);
    if status != "succeeded" {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "Only versions that have been built successfully can be promoted.",
        )
        .detail(format!("Attempted to promote a version with a {status} build")));
    }
    if version.archived {
        return Err(ApiError::bad_request(
            "The provided template version is archived.",
        ));
    }
    let template = &mut mem.templates[index];
    template.active_version_id = version_id;
    template.updated_at = now();
    ok(json!({ "message": "Updated the active template version!" }))
}

#[derive(Deserialize)]
struct ArchiveVersions {
    #[serde(default)]
    all: bool,
}

async fn archive_versions(
    State(app): State<App>,
    auth: Auth,
    Path(id): Path<String>,
    body: JsonBody<ArchiveVersions>,
) -> ApiResult {
    let org_id = {
        let mem = app.mem();
        mem.templates[template_index(&mem, &id)?].organization.id
    };
    auth.require_org_admin(&app, org_id).await?;
    let body = body.parse()?;
    let mut mem = app.mem();
    let template_id = mem.templates[template_index(&mem, &id)?].id;
    let candidates: Vec<Uuid> = mem
        .template_versions
        .iter()
        .filter(|v| v.template_id == Some(template_id) && !v.archived && !version_in_use(&mem, v))
        .filter(|v| body.all || mem.jobs.get(&v.job_id).is_some_and(|j| j.status() == "failed"))
        .map(|v| v.id)
        .collect();
    for version in mem
        .template_versions
        .iter_mut()
        .filter(|v| candidates.contains(&v.id))
    {
        version.archived = true;
    }
    ok(json!({ "template_id": template_id, "archived_ids": candidates }))
}

async fn version_by_name(
    State(app): State<App>,
    _auth: Auth,
    Path((id, name)): Path<(String, String)>,
) -> ApiResult {
    let mem = app.mem();
    let template_id = mem.templates[template_index(&mem, &id)?].id;
    let version = mem
        .template_versions
        .iter()
        .find(|v| v.template_id == Some(template_id) && v.name == name)
        .ok_or_else(ApiError::not_found)?;
    ok(render_version(version, &mem))
}

#[cfg(test)]
mod tests {
    use super::parse_search;

    #[test]
    fn parses_search_queries() {
        let q = parse_search("organization:\"abc\" exact_name:\"my tpl\" owner:me plain");
        assert_eq!(q.get("organization").map(String::as_str), Some("abc"));
        assert_eq!(q.get("exact_name").map(String::as_str), Some("my tpl"));
        assert_eq!(q.get("owner").map(String::as_str), Some("me"));
        assert_eq!(q.get("name").map(String::as_str), Some("plain"));
    }
}
