//! The workspace of a CoderTemplateTest in Coder (docs/controllers/template-test.md): the create marker and the one
//! create, the confirmation of an uncertain create from Coder's builds, readiness, the delete step and the cleanup
//! recorded in `WorkspaceDeleted`.

use std::time::Duration;

use coder_k8s_api::template_test::{CoderTemplateTest, reasons};
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition};
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::workspaces::{CreateWorkspaceRequest, RichParameterValue, Workspace};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use uuid::Uuid;

use super::answers::{self, CreateAnswer, Pins, Readiness};
use super::coder::{answered, mismatch, unavailable};
use super::desired::{self, DeleteAction, DeletionPolicy, OWNERSHIP_BUILDS, delete_action, delete_backoff};
use super::inputs::{Reach, TestPass, timings, upstream, workspace};
use super::status::{self as decide, Outcome};
use crate::conditions::ConditionStatus;
use crate::error::Error;
use crate::halt::{Halt, settle};

/// Writes the create marker at the object's resourceVersion, then sends the one create.
pub async fn create(pass: &mut TestPass<'_>, coder: &CoderClient) -> Result<Outcome, Halt<Outcome>> {
    pass.status.create_attempt_time = Some(pass.time());
    if !write_marker(pass).await? {
        // Someone changed the object since it was read (or the cache was behind): decide again on the fresh
        // object, and write nothing from this pass.
        return Err(Halt::Wait(Action::requeue(timings(pass).running)));
    }
    let (owner, name) = (pass.status.owner_id.clone().unwrap_or_default(), workspace(pass));
    let tt = pass.object;
    tracing::info!(name = %tt.name_any(), namespace = ?tt.namespace(), workspace = %name, "creating the test workspace");
    let created = match coder.create_workspace(&owner, &create_request(pass)).await {
        Ok(created) => created,
        Err(error) => return Ok(create_failed(pass, &error, &owner)),
    };
    // A mismatch leaves the marker: the next pass confirms from Coder's builds and never sends the create again.
    answered(pass, "workspace", &name, &created.name)?;
    answered(pass, "workspace owner", &owner, &created.owner_id.to_string())?;
    pass.status.workspace_id = Some(created.id.to_string());
    pass.status.start_build_id = Some(created.latest_build.id.to_string());
    Ok(Outcome::wait(
        reasons::WAITING_FOR_BUILD,
        format!("Workspace {name} was created."),
    ))
}

/// The create of the test's workspace: the pinned version, the spec's parameters, no automatic updates.
fn create_request(pass: &TestPass<'_>) -> CreateWorkspaceRequest {
    let status = &pass.status;
    CreateWorkspaceRequest {
        template_version_id: status
            .template_version_id
            .as_deref()
            .and_then(|id| Uuid::parse_str(id).ok()),
        name: workspace(pass),
        rich_parameter_values: pass
            .object
            .spec
            .parameters
            .iter()
            .map(|p| RichParameterValue {
                name: p.name.clone(),
                value: p.value.clone(),
            })
            .collect(),
        automatic_updates: Some("never".to_owned()),
        ..CreateWorkspaceRequest::default()
    }
}

/// What a failed create means: no effect or a refusal forgets the attempt; a lost answer is confirmed from Coder.
fn create_failed(pass: &mut TestPass<'_>, error: &CoderError, owner: &str) -> Outcome {
    let name = workspace(pass);
    match answers::create_answer(error, owner, &name) {
        CreateAnswer::NoEffect(step) | CreateAnswer::Refused(step) => {
            pass.status.create_attempt_time = None;
            step
        }
        CreateAnswer::Uncertain => Outcome::wait(
            reasons::CONFIRMING_CREATE,
            format!("The answer to the create of workspace {name} was lost; reading Coder."),
        ),
    }
}

/// Replaces the status at the cached resourceVersion; `false` on a conflict (the object changed). From then on the
/// pass compares with the marker.
async fn write_marker(pass: &mut TestPass<'_>) -> Result<bool, Error> {
    let tt = pass.object;
    let mut object = tt.clone();
    object.status = Some(pass.status.clone());
    object.metadata.managed_fields = None;
    let api: Api<CoderTemplateTest> = Api::namespaced(pass.ctx.k8s.client.clone(), &pass.namespace());
    match api
        .replace_status(&tt.name_any(), &PostParams::default(), &object)
        .await
    {
        Ok(_) => {
            pass.shown = Some(pass.status.clone());
            Ok(true)
        }
        Err(kube::Error::Api(answer)) if answer.code == 409 => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// Reads Coder after an uncertain create; never sends anything that changes Coder.
pub async fn confirm_create(pass: &mut TestPass<'_>, coder: &CoderClient) -> Result<Outcome, Halt<Outcome>> {
    let operator = coder.me().await.map_err(unavailable("get operator user"))?;
    let found = find_own_workspace(pass, coder, operator.id).await?;
    if let Some(Found {
        live: true,
        proven: Some((workspace, build)),
    }) = &found
    {
        pass.status.workspace_id = Some(workspace.to_string());
        pass.status.start_build_id = Some(build.to_string());
    }
    let shown = found.as_ref().map(|f| (f.live, f.proven.is_some()));
    let settled = settled(pass);
    Ok(answers::confirm_step(
        shown,
        &workspace(pass),
        settled,
        operator.has_role("owner"),
    ))
}

/// Whether the wait for an uncertain create to show up is over.
fn settled(pass: &TestPass<'_>) -> bool {
    pass.status.create_attempt_time.as_ref().is_none_or(|t| {
        Duration::try_from(pass.now.duration_since(t.0)).unwrap_or_default() >= timings(pass).settle
    })
}

/// What Coder shows under the test's workspace name.
struct Found {
    live: bool,
    /// The workspace and the start build that prove it is this test's.
    proven: Option<(Uuid, Uuid)>,
}

async fn find_own_workspace(
    pass: &TestPass<'_>,
    coder: &CoderClient,
    operator: Uuid,
) -> Result<Option<Found>, Halt<Outcome>> {
    let (owner, name) = (pass.status.owner_id.clone().unwrap_or_default(), workspace(pass));
    let workspace = match coder
        .workspace_by_owner_and_name_including_deleted(&owner, &name)
        .await
    {
        Err(e) if e.is_not_found() => return Ok(None),
        other => other.map_err(unavailable("get workspace by name"))?,
    };
    answered(pass, "workspace", &name, &workspace.name)?;
    answered(pass, "workspace owner", &owner, &workspace.owner_id.to_string())?;
    let latest = &workspace.latest_build;
    let live = !(latest.transition == Transition::Delete && latest.job.status == JobStatus::Succeeded);
    let builds = coder
        .newest_workspace_builds(workspace.id, OWNERSHIP_BUILDS)
        .await
        .map_err(unavailable("get workspace builds"))?;
    for build in &builds {
        answered(
            pass,
            "build workspace",
            &workspace.id.to_string(),
            &build.workspace_id.to_string(),
        )?;
    }
    let status = &pass.status;
    let pins = Pins {
        organization: status.organization_id.as_deref().unwrap_or_default(),
        template: status.template_id.as_deref().unwrap_or_default(),
        version: status.template_version_id.as_deref().unwrap_or_default(),
    };
    let scope = (
        workspace.organization_id.to_string(),
        workspace.template_id.to_string(),
    );
    let proven = answers::proving_build((&scope.0, &scope.1), &builds, operator, &pins)
        .map(|build| (workspace.id, build.id));
    Ok(Some(Found { live, proven }))
}

/// The test's workspace as Coder has it (also when deleted): `None` when Coder's own 404 says it is gone.
async fn read_workspace(coder: &CoderClient, id: Uuid) -> Result<Option<Workspace>, CoderError> {
    match coder.workspace_including_deleted(id).await {
        Err(e) if e.is_not_found() => Ok(None),
        other => other.map(Some),
    }
}

/// The start build and the agents of the test's workspace.
pub async fn check_readiness(pass: &mut TestPass<'_>, coder: &CoderClient) -> Result<Outcome, Halt<Outcome>> {
    let (id, name) = (
        workspace_id(pass).map_or_else(|| settle(not_a_uuid()), Ok)?,
        workspace(pass),
    );
    // Only Coder's own 404 says the workspace is gone.
    let Some(found) = read_workspace(coder, id)
        .await
        .map_err(unavailable("get workspace"))?
    else {
        return Ok(deleted_externally(&name));
    };
    answered(pass, "workspace", &id.to_string(), &found.id.to_string())?;
    if found.name != name {
        let message = forget_foreign_workspace(pass, &found.name);
        return Ok(Outcome::wait(reasons::CONFIRMING_CREATE, message));
    }
    let latest = &found.latest_build;
    answered(
        pass,
        "latest build workspace",
        &id.to_string(),
        &latest.workspace_id.to_string(),
    )?;
    if latest.transition == Transition::Delete && latest.job.status == JobStatus::Succeeded {
        return Ok(deleted_externally(&name));
    }
    let start_build = pass.status.start_build_id.clone().unwrap_or_default();
    Ok(match answers::readiness(latest, &start_build, &name) {
        Readiness::NotYet(step) => step,
        Readiness::Ready => {
            pass.status.agents_ready_time = Some(pass.time());
            Outcome::wait(
                reasons::AGENTS_READY,
                format!(
                    "Every agent of workspace {name} is ready; the controller deletes the workspace next."
                ),
            )
        }
    })
}

/// `status.workspaceID` names a workspace that is not this test's (its name is not the one derived from the object's
/// UID): anyone with status write access can set that ID, so it proves nothing. The IDs go from the status, that
/// workspace is never read for readiness, canceled or deleted, and the test's own workspace is looked up by its name
/// (and proven by its builds) on the next pass. Returns the message that says so.
fn forget_foreign_workspace(pass: &mut TestPass<'_>, foreign: &str) -> String {
    let tt = pass.object;
    tracing::warn!(name = %tt.name_any(), namespace = ?tt.namespace(), workspace = %foreign,
        "status.workspaceID names a workspace that is not this test's; it is left alone");
    pass.status.workspace_id = None;
    pass.status.start_build_id = None;
    pass.status.delete_build_id = None;
    format!(
        "status.workspaceID named workspace {foreign}, which is not this test's workspace {}; it is left alone, and the test's workspace is looked up by its name.",
        workspace(pass)
    )
}

fn deleted_externally(name: &str) -> Outcome {
    Outcome::fail(
        reasons::WORKSPACE_DELETED_EXTERNALLY,
        format!("Workspace {name} was deleted by someone else."),
    )
    .with_deleted(ConditionStatus::True, reasons::DELETED_EXTERNALLY)
}

fn workspace_id(pass: &TestPass<'_>) -> Option<Uuid> {
    pass.status
        .workspace_id
        .as_deref()
        .and_then(|id| Uuid::parse_str(id).ok())
}

fn not_a_uuid() -> Outcome {
    Outcome::wait(
        reasons::CODER_ANSWER_MISMATCH,
        "status.workspaceID is not a UUID.",
    )
}

/// After the pass: delete the workspace; the test succeeds once the delete build succeeded.
pub async fn delete_after_pass(
    pass: &mut TestPass<'_>,
    coder: &CoderClient,
) -> Result<Outcome, Halt<Outcome>> {
    let name = workspace(pass);
    Ok(match delete_step(pass, coder).await {
        Deletion::Gone { externally: false } => Outcome::succeed(format!(
            "The agents of workspace {name} were ready and the workspace was deleted."
        )),
        Deletion::Gone { externally: true } => deleted_externally(&name),
        Deletion::Progress {
            failed_now: true,
            message,
            requeue,
            ..
        } => {
            let mut step = Outcome::fail(reasons::DELETE_BUILD_FAILED, message)
                .with_deleted(ConditionStatus::False, reasons::DELETE_RETRYING);
            step.requeue = requeue;
            step
        }
        Deletion::Progress { message, requeue, .. } => {
            let mut step = Outcome::wait(reasons::DELETING_WORKSPACE, message);
            step.requeue = requeue;
            step
        }
        Deletion::Stopped(step) => return settle(step),
    })
}

/// Where the delete of the workspace stands.
enum Deletion {
    /// The workspace is deleted.
    Gone { externally: bool },
    /// The delete goes on: `WorkspaceDeleted=False` with `reason`.
    Progress {
        reason: &'static str,
        message: String,
        failed_now: bool,
        requeue: Option<Duration>,
    },
    /// Coder failed or answered about something else.
    Stopped(Outcome),
}

/// One step of the delete: read the workspace (also when deleted), then cancel, wait, count, back off or send a
/// delete build.
async fn delete_step(pass: &mut TestPass<'_>, coder: &CoderClient) -> Deletion {
    let Some(id) = workspace_id(pass) else {
        return Deletion::Stopped(not_a_uuid());
    };
    let found = match read_workspace(coder, id).await {
        Ok(Some(found)) => found,
        Ok(None) => {
            return Deletion::Gone {
                externally: pass.status.delete_build_id.is_none(),
            };
        }
        Err(e) => return Deletion::Stopped(decide::coder_unavailable("get workspace", &e)),
    };
    let (asked, latest) = (id.to_string(), found.latest_build.workspace_id.to_string());
    let checked = answers::answered("workspace", &asked, &found.id.to_string())
        .and_then(|()| answers::answered("latest build workspace", &asked, &latest));
    if let Err(answer) = checked {
        return Deletion::Stopped(mismatch(pass, answer));
    }
    if found.name != workspace(pass) {
        let message = forget_foreign_workspace(pass, &found.name);
        return progress(reasons::CLEANUP_PENDING, message);
    }
    next_delete_action(pass, coder, id, &found).await
}

/// The delete step's action for the workspace's latest build.
async fn next_delete_action(
    pass: &mut TestPass<'_>,
    coder: &CoderClient,
    id: Uuid,
    found: &Workspace,
) -> Deletion {
    let (name, timings) = (workspace(pass), timings(pass));
    let failures = pass.status.delete_attempts.unwrap_or(0);
    let own = pass.status.delete_build_id.clone();
    match delete_action(&found.latest_build, own.as_deref(), failures, pass.now, &timings) {
        DeleteAction::Gone { externally } => Deletion::Gone { externally },
        DeleteAction::Wait => progress(
            reasons::DELETING,
            format!("A build of workspace {name} is still running."),
        ),
        DeleteAction::Cancel { build, expect_status } => {
            cancel_active(&name, coder, build, expect_status).await
        }
        DeleteAction::CountFailure { .. } => count_failure(pass),
        DeleteAction::Backoff(left) => Deletion::Progress {
            reason: reasons::DELETE_RETRYING,
            message: format!(
                "The delete build of workspace {name} failed {failures} times; the next one waits for its backoff."
            ),
            failed_now: false,
            requeue: Some(left),
        },
        DeleteAction::CreateDelete => send_delete(pass, coder, id).await,
    }
}

fn progress(reason: &'static str, message: String) -> Deletion {
    Deletion::Progress {
        reason,
        message,
        failed_now: false,
        requeue: None,
    }
}

/// Cancels the active start or stop build; a cancel Coder refuses (the build just ended) is fine.
async fn cancel_active(name: &str, coder: &CoderClient, build: Uuid, expect_status: &str) -> Deletion {
    match coder.cancel_workspace_build(build, expect_status).await {
        Ok(()) | Err(CoderError::Rejected { status: 400, .. }) => progress(
            reasons::DELETING,
            format!("Canceling the active build of workspace {name} before deleting it."),
        ),
        Err(e) => Deletion::Stopped(decide::coder_unavailable("cancel workspace build", &e)),
    }
}

/// Counts the failed delete build of this test once: the count grows and the build's ID is dropped.
fn count_failure(pass: &mut TestPass<'_>) -> Deletion {
    let failures = pass.status.delete_attempts.unwrap_or(0).saturating_add(1);
    pass.status.delete_attempts = Some(failures);
    pass.status.delete_build_id = None;
    Deletion::Progress {
        reason: reasons::DELETE_RETRYING,
        message: format!(
            "The delete build of workspace {} failed ({failures} so far); it is retried after a backoff.",
            workspace(pass)
        ),
        failed_now: true,
        requeue: Some(delete_backoff(failures, &timings(pass))),
    }
}

/// Sends a delete build and records its ID.
async fn send_delete(pass: &mut TestPass<'_>, coder: &CoderClient, id: Uuid) -> Deletion {
    let name = workspace(pass);
    let request = CreateWorkspaceBuildRequest::transition(Transition::Delete);
    match coder.create_workspace_build(id, &request).await {
        Ok(build) => {
            if let Err(answer) = answers::answered(
                "build workspace",
                &id.to_string(),
                &build.workspace_id.to_string(),
            ) {
                return Deletion::Stopped(mismatch(pass, answer));
            }
            pass.status.delete_build_id = Some(build.id.to_string());
            progress(reasons::DELETING, format!("Deleting workspace {name}."))
        }
        // A build became active in between: the next pass sees it.
        Err(CoderError::Conflict { .. }) => progress(
            reasons::DELETING,
            format!("A build of workspace {name} is still running."),
        ),
        Err(e) => Deletion::Stopped(decide::coder_unavailable("create delete build", &e)),
    }
}

/// Sets `WorkspaceDeleted` alone, with the pass's time and the object's generation.
fn set_deleted(pass: &mut TestPass<'_>, deleted: (ConditionStatus, &'static str), message: &str) {
    let (now, generation) = (pass.time(), pass.generation());
    decide::set_workspace_deleted(&mut pass.status, deleted, message, now, generation);
}

/// The cleanup of the workspace, recorded in `WorkspaceDeleted`. `None` when it is done (gone, retained on
/// purpose, or out of reach for good), else when to look again.
pub async fn clean_up(pass: &mut TestPass<'_>) -> Result<Option<Duration>, Error> {
    if decide::cleanup_done(&pass.status) {
        return Ok(None);
    }
    if retain_honoured(pass) {
        let kept = format!(
            "The workspace {} is kept (coder.com/deletion-policy: retain); delete it in Coder.",
            workspace(pass)
        );
        set_deleted(pass, (ConditionStatus::False, reasons::RETAINED), &kept);
        return Ok(None);
    }
    let coder = match upstream(pass).await? {
        Reach::Ready(coder, _) => coder,
        Reach::Waits(step) if step.reason == reasons::CONTROL_PLANE_GONE => {
            set_deleted(
                pass,
                (ConditionStatus::Unknown, reasons::CONTROL_PLANE_GONE),
                &step.message,
            );
            return Ok(None);
        }
        Reach::Waits(step) => {
            set_deleted(
                pass,
                (ConditionStatus::False, reasons::CONTROL_PLANE_UNAVAILABLE),
                &step.message,
            );
            return Ok(Some(timings(pass).cleanup_unreachable));
        }
    };
    if pass.status.workspace_id.is_none() && !confirm_for_cleanup(pass, &coder).await {
        return Ok((!decide::cleanup_done(&pass.status)).then_some(timings(pass).cleanup_unreachable));
    }
    if decide::cleanup_done(&pass.status) {
        return Ok(None);
    }
    let deletion = delete_step(pass, &coder).await;
    Ok(record_deletion(pass, deletion))
}

/// Records where the delete stands in `WorkspaceDeleted`; `None` once the workspace is gone, else when to look
/// again.
fn record_deletion(pass: &mut TestPass<'_>, deletion: Deletion) -> Option<Duration> {
    let timings = timings(pass);
    match deletion {
        Deletion::Gone { externally } => {
            let reason = match externally {
                true => reasons::DELETED_EXTERNALLY,
                false => reasons::DELETED,
            };
            let deleted = format!("Workspace {} is deleted.", workspace(pass));
            set_deleted(pass, (ConditionStatus::True, reason), &deleted);
            None
        }
        Deletion::Progress {
            reason,
            message,
            requeue,
            ..
        } => {
            set_deleted(pass, (ConditionStatus::False, reason), &message);
            Some(requeue.unwrap_or(timings.running))
        }
        Deletion::Stopped(step) => {
            let reason = match step.reason == reasons::CODER_ANSWER_MISMATCH {
                true => reasons::CODER_ANSWER_MISMATCH,
                false => reasons::CONTROL_PLANE_UNAVAILABLE,
            };
            set_deleted(pass, (ConditionStatus::False, reason), &step.message);
            Some(timings.cleanup_unreachable)
        }
    }
}

/// A run that ended before its workspace was known: find out from Coder whether a workspace of this test exists.
/// `true` when the workspace is now known (and is deleted next).
async fn confirm_for_cleanup(pass: &mut TestPass<'_>, coder: &CoderClient) -> bool {
    let unavailable = (ConditionStatus::False, reasons::CONTROL_PLANE_UNAVAILABLE);
    let operator = match coder.me().await {
        Ok(operator) => operator,
        Err(e) => {
            let step = decide::coder_unavailable("get operator user", &e);
            set_deleted(pass, unavailable, &step.message);
            return false;
        }
    };
    let found = match find_own_workspace(pass, coder, operator.id).await {
        Ok(found) => found,
        Err(Halt::Settled(step)) => {
            set_deleted(pass, unavailable, &step.message);
            return false;
        }
        // It reads only Coder, so no Kubernetes failure or wait comes out of it; the cleanup looks again.
        Err(Halt::Failed(_) | Halt::Wait(_)) => return false,
    };
    let name = workspace(pass);
    let (deleted, message) = match found {
        Some(Found {
            live: true,
            proven: Some((workspace, build)),
        }) => {
            pass.status.workspace_id = Some(workspace.to_string());
            pass.status.start_build_id = Some(build.to_string());
            return true;
        }
        Some(Found {
            live: true,
            proven: None,
        }) => (
            (ConditionStatus::Unknown, reasons::OWNERSHIP_UNKNOWN),
            format!(
                "Workspace {name} exists, but nothing proves that this test created it; it is left alone."
            ),
        ),
        Some(Found { live: false, .. }) => (
            (ConditionStatus::True, reasons::DELETED_EXTERNALLY),
            format!("Workspace {name} is deleted."),
        ),
        None => {
            // Until the create could still land (and only a site owner's "not found" proves anything), the
            // outcome stays unknown and the finalizer waits.
            let step = answers::confirm_step(None, &name, settled(pass), operator.has_role("owner"));
            let deleted = step
                .deleted
                .unwrap_or((ConditionStatus::Unknown, reasons::CREATE_OUTCOME_UNKNOWN));
            (deleted, step.message)
        }
    };
    set_deleted(pass, deleted, &message);
    false
}

/// `coder.com/deletion-policy: retain`, honoured only when the control plane allows it.
fn retain_honoured(pass: &TestPass<'_>) -> bool {
    let asked = desired::deletion_policy(pass.object.annotations()) == DeletionPolicy::Retain;
    asked && allows_retain(pass)
}

fn allows_retain(pass: &TestPass<'_>) -> bool {
    pass.ctx
        .k8s
        .caches
        .control_planes
        .get(&pass.namespace(), &pass.object.spec.control_plane_ref.name)
        .and_then(|cp| cp.spec.template_tests.clone())
        .is_some_and(|t| t.allow_retain)
}
