//! The simulated provisioner: every job waits briefly as `pending`, runs for `build_duration` while
//! appending log lines, then succeeds or fails according to the configured [`BuildOutcome`]. Also renders
//! `ProvisionerJob` JSON.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use uuid::Uuid;

use crate::config::BuildOutcome;
use crate::state::{App, Job, JobKind, Mem, lock};
use crate::util::rfc3339;

/// How long a new job stays `pending` before a simulated daemon picks it up.
const PICKUP_DELAY: Duration = Duration::from_millis(20);
/// Id of the simulated built-in provisioner daemon.
pub(crate) const DAEMON_ID: Uuid = Uuid::from_u128(0x0c0d_e500_0000_4000_8000_0000_0000_0001);
pub(crate) const DAEMON_NAME: &str = "testserver-provisioner";
pub(crate) const FAILURE_MESSAGE: &str = "simulated provisioner failure: terraform exited with status 1";

/// Stages logged while a job runs (the last one is logged on completion).
fn stages(kind: JobKind, mem: &Mem) -> Vec<&'static str> {
    match kind {
        JobKind::TemplateVersionImport { .. } => vec![
            "Setting up",
            "Parsing template parameters",
            "Detecting persistent resources",
            "Detecting ephemeral resources",
            "Cleaning Up",
        ],
        JobKind::WorkspaceBuild { build_id } => {
            let transition = mem
                .build(build_id)
                .map(|b| b.transition.as_str())
                .unwrap_or("start");
            let action = match transition {
                "stop" => "Stopping workspace",
                "delete" => "Destroying workspace",
                _ => "Starting workspace",
            };
            vec!["Setting up", "Planning infrastructure", action, "Cleaning Up"]
        }
    }
}

/// How often a held job looks again whether its tag was released.
const HELD_RECHECK: Duration = Duration::from_millis(50);

/// Whether job `job_id` carries a tag no simulated daemon has (and has not been canceled meanwhile).
fn held(app: &App, job_id: Uuid) -> bool {
    let held_tags = lock(&app.held_tags).clone();
    let mem = app.mem();
    mem.jobs.get(&job_id).is_some_and(|job| {
        job.canceled_at.is_none()
            && held_tags
                .iter()
                .any(|(key, value)| job.tags.get(key) == Some(value))
    })
}

/// Starts simulating job `job_id`.
pub(crate) fn spawn(app: &App, job_id: Uuid) {
    let app = app.clone();
    tokio::spawn(async move { run(app, job_id).await });
}

async fn run(app: App, job_id: Uuid) {
    tokio::time::sleep(PICKUP_DELAY).await;
    // A job whose tags no simulated daemon has waits, pending, until its tag is released.
    while held(&app, job_id) {
        tokio::time::sleep(HELD_RECHECK).await;
    }
    let stages = {
        let mut mem = app.mem();
        let Some(job) = mem.jobs.get_mut(&job_id) else {
            return;
        };
        if job.canceled_at.is_some() {
            job.completed_at = Some(SystemTime::now());
            drop(mem);
            app.notify();
            return;
        }
        job.started_at = Some(SystemTime::now());
        job.worker_id = Some(DAEMON_ID);
        let kind = job.kind;
        let stages = stages(kind, &mem);
        mem.push_log(job_id, "provisioner_daemon", "info", stages[0], "");
        stages
    };
    app.notify();
    let running = stages.len() - 1;
    let step = app.build_duration / u32::try_from(running).unwrap_or(1);
    let mut canceled = false;
    for stage in &stages[1..running] {
        tokio::time::sleep(step).await;
        {
            let mut mem = app.mem();
            canceled = mem.jobs.get(&job_id).is_some_and(|j| j.canceled_at.is_some());
            if canceled {
                break;
            }
            mem.push_log(job_id, "provisioner_daemon", "info", stage, "");
            mem.push_log(job_id, "provisioner", "info", stage, &format!("{stage}: done"));
        }
        app.notify();
    }
    if !canceled {
        tokio::time::sleep(step).await;
    }
    let outcome = *lock(&app.build_outcome);
    {
        let mut mem = app.mem();
        let Some(job) = mem.jobs.get_mut(&job_id) else {
            return;
        };
        canceled = canceled || job.canceled_at.is_some();
        job.completed_at = Some(SystemTime::now());
        let kind = job.kind;
        if canceled {
            mem.push_log(
                job_id,
                "provisioner_daemon",
                "info",
                stages[running],
                "Job canceled",
            );
        } else if fails(outcome, kind, &mem) {
            if let Some(job) = mem.jobs.get_mut(&job_id) {
                job.error = Some(FAILURE_MESSAGE.to_owned());
            }
            mem.push_log(
                job_id,
                "provisioner",
                "error",
                stages[running - 1],
                FAILURE_MESSAGE,
            );
        } else if let Err(message) = finish_import(&mut mem, job_id, kind) {
            if let Some(job) = mem.jobs.get_mut(&job_id) {
                job.error = Some(message.clone());
                job.error_code = Some(crate::variables::REQUIRED_VARIABLES_CODE.to_owned());
            }
            mem.push_log(job_id, "provisioner", "error", stages[1], &message);
        } else {
            mem.push_log(job_id, "provisioner_daemon", "info", stages[running], "");
            if let JobKind::WorkspaceBuild { build_id } = kind {
                finish_build(&mut mem, build_id);
            }
        }
    }
    app.notify();
}

/// Whether the configured outcome fails this job.
fn fails(outcome: BuildOutcome, kind: JobKind, mem: &Mem) -> bool {
    match (outcome, kind) {
        (BuildOutcome::Fail, _) => true,
        (BuildOutcome::FailDeletes, JobKind::WorkspaceBuild { build_id }) => {
            mem.build(build_id).is_some_and(|b| b.transition == "delete")
        }
        _ => false,
    }
}

/// An import stores the variables its source declares with the values it used, or fails (as Coder's job does)
/// when a required variable has no value. Other jobs have nothing to finish here.
fn finish_import(mem: &mut Mem, job_id: Uuid, kind: JobKind) -> Result<(), String> {
    let JobKind::TemplateVersionImport { version_id } = kind else {
        return Ok(());
    };
    let Some(file_id) = mem.jobs.get(&job_id).map(|j| j.file_id) else {
        return Ok(());
    };
    let Some((content_type, data)) = mem
        .files
        .iter()
        .find(|f| f.id == file_id)
        .map(|f| (f.content_type.clone(), f.data.clone()))
    else {
        return Ok(());
    };
    let Some(version) = mem.template_versions.iter_mut().find(|v| v.id == version_id) else {
        return Ok(());
    };
    version.variables = crate::variables::import(&content_type, &data, &version.user_variable_values)?;
    Ok(())
}

/// A successful delete build marks its workspace deleted.
fn finish_build(mem: &mut Mem, build_id: Uuid) {
    let Some(build) = mem.build(build_id) else { return };
    if build.transition != "delete" {
        return;
    }
    let workspace_id = build.workspace_id;
    if let Some(ws) = mem.workspaces.iter_mut().find(|w| w.id == workspace_id) {
        ws.deleted = true;
    }
}

fn time(t: Option<SystemTime>) -> Value {
    t.map_or(Value::Null, |t| json!(rfc3339(t)))
}

/// `ProvisionerJob` JSON (`codersdk.ProvisionerJob`).
pub(crate) fn render_job(job: &Job, mem: &Mem) -> Value {
    let (kind, input, version_id, workspace) = match job.kind {
        JobKind::TemplateVersionImport { version_id } => (
            "template_version_import",
            json!({ "template_version_id": version_id }),
            Some(version_id),
            None,
        ),
        JobKind::WorkspaceBuild { build_id } => {
            let build = mem.build(build_id);
            let workspace = build.and_then(|b| mem.workspace(b.workspace_id));
            (
                "workspace_build",
                json!({ "workspace_build_id": build_id }),
                build.map(|b| b.template_version_id),
                workspace,
            )
        }
    };
    let version = version_id.and_then(|id| mem.version(id));
    let template = version
        .and_then(|v| v.template_id)
        .and_then(|id| mem.templates.iter().find(|t| t.id == id));
    let queued: Vec<&Job> = mem
        .jobs
        .values()
        .filter(|j| j.started_at.is_none() && j.completed_at.is_none())
        .collect();
    let queue_position = queued.iter().position(|j| j.id == job.id).map_or(0, |p| p + 1);
    let mut metadata = json!({
        "template_version_name": version.map(|v| v.name.clone()).unwrap_or_default(),
        "template_id": template.map_or(Value::String(Uuid::nil().to_string()), |t| json!(t.id)),
        "template_name": template.map(|t| t.name.clone()).unwrap_or_default(),
        "template_display_name": template.map(|t| t.display_name.clone()).unwrap_or_default(),
        "template_icon": template.map(|t| t.icon.clone()).unwrap_or_default(),
    });
    if let Some(ws) = workspace {
        metadata["workspace_id"] = json!(ws.id);
        metadata["workspace_name"] = json!(ws.name);
    }
    let mut body = json!({
        "id": job.id,
        "created_at": rfc3339(job.created_at),
        "started_at": time(job.started_at),
        "completed_at": time(job.completed_at),
        "canceled_at": time(job.canceled_at),
        "status": job.status(),
        "file_id": job.file_id,
        "tags": job.tags,
        "queue_position": queue_position,
        "queue_size": queued.len(),
        "organization_id": job.organization_id,
        "initiator_id": job.initiator_id,
        "input": input,
        "type": kind,
        "metadata": metadata,
        "logs_overflowed": false,
    });
    for key in ["started_at", "completed_at", "canceled_at"] {
        if body[key].is_null()
            && let Some(map) = body.as_object_mut()
        {
            map.remove(key);
        }
    }
    if let Some(error) = &job.error {
        body["error"] = json!(error);
    }
    if let Some(code) = &job.error_code {
        body["error_code"] = json!(code);
    }
    if job.worker_id.is_some() {
        body["worker_id"] = json!(DAEMON_ID);
        body["worker_name"] = json!(DAEMON_NAME);
    }
    body
}

/// Provisioner tags with Coder's `provisionersdk.MutateTags` applied: empty values are dropped, `scope=user` sets
/// `owner` to the user; otherwise `scope` becomes `organization` with an empty `owner`.
pub(crate) fn mutate_tags(
    user_id: Uuid,
    tags: &std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    // Coder's merge skips empty values: a tag sent as "" is not set.
    let mut out: std::collections::BTreeMap<String, String> = tags
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    match out.get("scope").map(String::as_str) {
        Some("user") => {
            out.insert("owner".to_owned(), user_id.to_string());
        }
        _ => {
            out.insert("scope".to_owned(), "organization".to_owned());
            out.insert("owner".to_owned(), String::new());
        }
    }
    out
}

/// `matched_provisioners`: the simulated built-in daemon serves untagged organization jobs.
pub(crate) fn matched_provisioners(tags: &std::collections::BTreeMap<String, String>) -> Value {
    let untagged = tags.len() == 2
        && tags.get("scope").map(String::as_str) == Some("organization")
        && tags.get("owner").map(String::as_str) == Some("");
    let count = i32::from(untagged);
    json!({ "count": count, "available": count, "most_recently_seen": crate::util::now() })
}
