//! The workspace of a CoderTemplateTest in Coder (docs/controllers/template-test.md): the create marker and the one
//! create, the confirmation of an uncertain create from Coder's builds, readiness, the delete step and the cleanup
//! recorded in `WorkspaceDeleted`.

use std::time::Duration;

use coder_k8s_api::template_test::{CoderTemplateTest, reasons};
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition};
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::workspaces::{CreateWorkspaceRequest, RichParameterValue};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use uuid::Uuid;

use super::cleanup::{DeleteAction, delete_action, delete_backoff};
use super::inputs::upstream;
use super::names::{self, DeletionPolicy, OWNERSHIP_BUILDS};
use super::phase::{self, CreateAnswer, Pins, Readiness};
use super::reconcile::{Pass, Status, unavailable};
use super::status::{self as decide, Step};
use crate::controller::conditions::ConditionStatus;
use crate::controller::error::Result;

/// Writes the create marker at the object's resourceVersion, then sends the one create.
pub(super) async fn create(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> Result<Step> {
    status.create_attempt_time = Some(pass.time());
    if !write_marker(pass, status).await? {
        // Someone changed the object since it was read (or the cache was behind): decide again on the fresh
        // object, and write nothing from this pass.
        pass.outdated.store(true, std::sync::atomic::Ordering::Relaxed);
        status.create_attempt_time = None;
        return Ok(Step::wait(
            reasons::CREATING_WORKSPACE,
            "The test changed while the create was prepared; preparing again.",
        ));
    }
    let owner = status.owner_id.clone().unwrap_or_default();
    let request = CreateWorkspaceRequest {
        template_version_id: status
            .template_version_id
            .as_deref()
            .and_then(|id| Uuid::parse_str(id).ok()),
        name: pass.name.clone(),
        rich_parameter_values: pass
            .tt
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
    };
    tracing::info!(name = %pass.tt.name_any(), namespace = ?pass.tt.namespace(), workspace = %pass.name, "creating the test workspace");
    let workspace = match coder.create_workspace(&owner, &request).await {
        Ok(workspace) => workspace,
        Err(error) => {
            return Ok(match phase::create_answer(&error, &owner, &pass.name) {
                CreateAnswer::NoEffect(step) | CreateAnswer::Refused(step) => {
                    status.create_attempt_time = None;
                    step
                }
                CreateAnswer::Uncertain => Step::wait(
                    reasons::CONFIRMING_CREATE,
                    format!(
                        "The answer to the create of workspace {} was lost; reading Coder.",
                        pass.name
                    ),
                ),
            });
        }
    };
    let checked = pass
        .answered("workspace", &pass.name, &workspace.name)
        .and_then(|()| pass.answered("workspace owner", &owner, &workspace.owner_id.to_string()));
    if let Err(step) = checked {
        // The marker stays: the next pass confirms from Coder's builds and never sends the create again.
        return Ok(step);
    }
    status.workspace_id = Some(workspace.id.to_string());
    status.start_build_id = Some(workspace.latest_build.id.to_string());
    Ok(Step::wait(
        reasons::WAITING_FOR_BUILD,
        format!("Workspace {} was created.", pass.name),
    ))
}

/// Replaces the status at the cached resourceVersion; `false` on a conflict (the object changed).
pub(super) async fn write_marker(pass: &Pass<'_>, status: &Status) -> Result<bool> {
    let tt = pass.tt;
    let mut object = tt.clone();
    object.status = Some(status.clone());
    object.metadata.managed_fields = None;
    let api: Api<CoderTemplateTest> =
        Api::namespaced(pass.ctx.client.clone(), &tt.namespace().unwrap_or_default());
    match api
        .replace_status(&tt.name_any(), &PostParams::default(), &object)
        .await
    {
        Ok(_) => {
            *pass.marker.lock().unwrap_or_else(|p| p.into_inner()) = Some(status.clone());
            Ok(true)
        }
        Err(kube::Error::Api(answer)) if answer.code == 409 => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// Reads Coder after an uncertain create; never sends anything that changes Coder.
pub(super) async fn confirm_create(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> Step {
    let operator = take!(coder.me().await.map_err(unavailable("get operator user")));
    let found = take!(find_own_workspace(pass, coder, status, operator.id).await);
    if let Some(Found {
        live: true,
        proven: Some((workspace, build)),
    }) = &found
    {
        status.workspace_id = Some(workspace.to_string());
        status.start_build_id = Some(build.to_string());
    }
    let shown = found.as_ref().map(|f| (f.live, f.proven.is_some()));
    phase::confirm_step(
        shown,
        &pass.name,
        settled(pass, status),
        operator.has_role("owner"),
    )
}

/// Whether the wait for an uncertain create to show up is over.
pub(super) fn settled(pass: &Pass<'_>, status: &Status) -> bool {
    status.create_attempt_time.as_ref().is_none_or(|t| {
        Duration::try_from(pass.now.duration_since(t.0)).unwrap_or_default() >= pass.timings.settle
    })
}

/// What Coder shows under the test's workspace name.
pub(super) struct Found {
    live: bool,
    /// The workspace and the start build that prove it is this test's.
    proven: Option<(Uuid, Uuid)>,
}

pub(super) async fn find_own_workspace(
    pass: &Pass<'_>,
    coder: &CoderClient,
    status: &Status,
    operator: Uuid,
) -> std::result::Result<Option<Found>, Step> {
    let owner = status.owner_id.clone().unwrap_or_default();
    let workspace = match coder
        .workspace_by_owner_and_name_including_deleted(&owner, &pass.name)
        .await
    {
        Err(e) if e.is_not_found() => return Ok(None),
        other => other.map_err(unavailable("get workspace by name"))?,
    };
    pass.answered("workspace", &pass.name, &workspace.name)?;
    pass.answered("workspace owner", &owner, &workspace.owner_id.to_string())?;
    let latest = &workspace.latest_build;
    let live = !(latest.transition == Transition::Delete && latest.job.status == JobStatus::Succeeded);
    let builds = coder
        .newest_workspace_builds(workspace.id, OWNERSHIP_BUILDS)
        .await
        .map_err(unavailable("get workspace builds"))?;
    for build in &builds {
        pass.answered(
            "build workspace",
            &workspace.id.to_string(),
            &build.workspace_id.to_string(),
        )?;
    }
    let pins = Pins {
        organization: status.organization_id.as_deref().unwrap_or_default(),
        template: status.template_id.as_deref().unwrap_or_default(),
        version: status.template_version_id.as_deref().unwrap_or_default(),
    };
    let scope = (
        workspace.organization_id.to_string(),
        workspace.template_id.to_string(),
    );
    let proven = phase::proving_build((&scope.0, &scope.1), &builds, operator, &pins)
        .map(|build| (workspace.id, build.id));
    Ok(Some(Found { live, proven }))
}

/// The start build and the agents of the test's workspace.
pub(super) async fn check_readiness(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> Step {
    let id = take!(workspace_id(status));
    let workspace = match coder.workspace_including_deleted(id).await {
        // Only Coder's own 404 says the workspace is gone.
        Err(e) if e.is_not_found() => return deleted_externally(&pass.name),
        other => take!(other.map_err(unavailable("get workspace"))),
    };
    take!(pass.answered("workspace", &id.to_string(), &workspace.id.to_string()));
    if workspace.name != pass.name {
        let message = forget_foreign_workspace(pass, status, &workspace.name);
        return Step::wait(reasons::CONFIRMING_CREATE, message);
    }
    let latest = &workspace.latest_build;
    take!(pass.answered(
        "latest build workspace",
        &id.to_string(),
        &latest.workspace_id.to_string()
    ));
    if latest.transition == Transition::Delete && latest.job.status == JobStatus::Succeeded {
        return deleted_externally(&pass.name);
    }
    match phase::readiness(
        latest,
        status.start_build_id.as_deref().unwrap_or_default(),
        &pass.name,
    ) {
        Readiness::Step(step) => step,
        Readiness::Ready => {
            status.agents_ready_time = Some(pass.time());
            Step::wait(
                reasons::AGENTS_READY,
                format!(
                    "Every agent of workspace {} is ready; the controller deletes the workspace next.",
                    pass.name
                ),
            )
        }
    }
}

/// `status.workspaceID` names a workspace that is not this test's (its name is not the one derived from the object's
/// UID): anyone with status write access can set that ID, so it proves nothing. The IDs go from the status, that
/// workspace is never read for readiness, canceled or deleted, and the test's own workspace is looked up by its name
/// (and proven by its builds) on the next pass. Returns the message that says so.
fn forget_foreign_workspace(pass: &Pass<'_>, status: &mut Status, foreign: &str) -> String {
    tracing::warn!(name = %pass.tt.name_any(), namespace = ?pass.tt.namespace(), workspace = %foreign,
        "status.workspaceID names a workspace that is not this test's; it is left alone");
    status.workspace_id = None;
    status.start_build_id = None;
    status.delete_build_id = None;
    format!(
        "status.workspaceID named workspace {foreign}, which is not this test's workspace {}; it is left alone, and the test's workspace is looked up by its name.",
        pass.name
    )
}

pub(super) fn deleted_externally(name: &str) -> Step {
    Step::fail(
        reasons::WORKSPACE_DELETED_EXTERNALLY,
        format!("Workspace {name} was deleted by someone else."),
    )
    .with_deleted(ConditionStatus::True, reasons::DELETED_EXTERNALLY)
}

pub(super) fn workspace_id(status: &Status) -> std::result::Result<Uuid, Step> {
    status
        .workspace_id
        .as_deref()
        .and_then(|id| Uuid::parse_str(id).ok())
        .ok_or_else(|| {
            Step::wait(
                reasons::CODER_ANSWER_MISMATCH,
                "status.workspaceID is not a UUID.",
            )
        })
}

/// After the pass: delete the workspace; the test succeeds once the delete build succeeded.
pub(super) async fn delete_after_pass(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> Step {
    match delete_step(pass, coder, status).await {
        Deletion::Gone { externally: false } => Step::succeed(format!(
            "The agents of workspace {} were ready and the workspace was deleted.",
            pass.name
        )),
        Deletion::Gone { externally: true } => deleted_externally(&pass.name),
        Deletion::Progress {
            failed_now: true,
            message,
            requeue,
            ..
        } => {
            let mut step = Step::fail(reasons::DELETE_BUILD_FAILED, message)
                .with_deleted(ConditionStatus::False, reasons::DELETE_RETRYING);
            step.requeue = requeue;
            step
        }
        Deletion::Progress { message, requeue, .. } => {
            let mut step = Step::wait(reasons::DELETING_WORKSPACE, message);
            step.requeue = requeue;
            step
        }
        Deletion::Stopped(step) => step,
    }
}

/// Where the delete of the workspace stands.
pub(super) enum Deletion {
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
    Stopped(Step),
}

/// One step of the delete: read the workspace (also when deleted), then cancel, wait, count, back off or send a
/// delete build.
pub(super) async fn delete_step(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> Deletion {
    let id = match workspace_id(status) {
        Ok(id) => id,
        Err(step) => return Deletion::Stopped(step),
    };
    let workspace = match coder.workspace_including_deleted(id).await {
        Err(e) if e.is_not_found() => {
            return Deletion::Gone {
                externally: status.delete_build_id.is_none(),
            };
        }
        Err(e) => return Deletion::Stopped(decide::coder_unavailable("get workspace", &e)),
        Ok(workspace) => workspace,
    };
    if let Err(step) = pass
        .answered("workspace", &id.to_string(), &workspace.id.to_string())
        .and_then(|()| {
            pass.answered(
                "latest build workspace",
                &id.to_string(),
                &workspace.latest_build.workspace_id.to_string(),
            )
        })
    {
        return Deletion::Stopped(step);
    }
    if workspace.name != pass.name {
        let message = forget_foreign_workspace(pass, status, &workspace.name);
        return progress(reasons::CLEANUP_PENDING, message);
    }
    let failures = status.delete_attempts.unwrap_or(0);
    let latest = &workspace.latest_build;
    let own = status.delete_build_id.clone();
    match delete_action(latest, own.as_deref(), failures, pass.now, &pass.timings) {
        DeleteAction::Gone { externally } => Deletion::Gone { externally },
        DeleteAction::Wait => progress(
            reasons::DELETING,
            format!("A build of workspace {} is still running.", pass.name),
        ),
        DeleteAction::Cancel { build, expect_status } => {
            cancel_active(pass, coder, build, expect_status).await
        }
        DeleteAction::CountFailure { .. } => count_failure(pass, status),
        DeleteAction::Backoff(left) => Deletion::Progress {
            reason: reasons::DELETE_RETRYING,
            message: format!(
                "The delete build of workspace {} failed {failures} times; the next one waits for its backoff.",
                pass.name
            ),
            failed_now: false,
            requeue: Some(left),
        },
        DeleteAction::CreateDelete => send_delete(pass, coder, id, status).await,
    }
}

pub(super) fn progress(reason: &'static str, message: String) -> Deletion {
    Deletion::Progress {
        reason,
        message,
        failed_now: false,
        requeue: None,
    }
}

/// Cancels the active start or stop build; a cancel Coder refuses (the build just ended) is fine.
pub(super) async fn cancel_active(
    pass: &Pass<'_>,
    coder: &CoderClient,
    build: Uuid,
    expect_status: &str,
) -> Deletion {
    match coder.cancel_workspace_build(build, expect_status).await {
        Ok(()) | Err(CoderError::Rejected { status: 400, .. }) => progress(
            reasons::DELETING,
            format!(
                "Canceling the active build of workspace {} before deleting it.",
                pass.name
            ),
        ),
        Err(e) => Deletion::Stopped(decide::coder_unavailable("cancel workspace build", &e)),
    }
}

/// Counts the failed delete build of this test once: the count grows and the build's ID is dropped.
pub(super) fn count_failure(pass: &Pass<'_>, status: &mut Status) -> Deletion {
    let failures = status.delete_attempts.unwrap_or(0).saturating_add(1);
    status.delete_attempts = Some(failures);
    status.delete_build_id = None;
    Deletion::Progress {
        reason: reasons::DELETE_RETRYING,
        message: format!(
            "The delete build of workspace {} failed ({failures} so far); it is retried after a backoff.",
            pass.name
        ),
        failed_now: true,
        requeue: Some(delete_backoff(failures, &pass.timings)),
    }
}

/// Sends a delete build and records its ID.
pub(super) async fn send_delete(
    pass: &Pass<'_>,
    coder: &CoderClient,
    id: Uuid,
    status: &mut Status,
) -> Deletion {
    let request = CreateWorkspaceBuildRequest::transition(Transition::Delete);
    match coder.create_workspace_build(id, &request).await {
        Ok(build) => {
            if let Err(step) = pass.answered(
                "build workspace",
                &id.to_string(),
                &build.workspace_id.to_string(),
            ) {
                return Deletion::Stopped(step);
            }
            status.delete_build_id = Some(build.id.to_string());
            progress(reasons::DELETING, format!("Deleting workspace {}.", pass.name))
        }
        // A build became active in between: the next pass sees it.
        Err(CoderError::Conflict { .. }) => progress(
            reasons::DELETING,
            format!("A build of workspace {} is still running.", pass.name),
        ),
        Err(e) => Deletion::Stopped(decide::coder_unavailable("create delete build", &e)),
    }
}

/// The cleanup of the workspace, recorded in `WorkspaceDeleted`. `None` when it is done (gone, retained on
/// purpose, or out of reach for good), else when to look again.
pub(super) async fn clean_up(pass: &Pass<'_>, status: &mut Status) -> Result<Option<Duration>> {
    if decide::cleanup_done(status) {
        return Ok(None);
    }
    let set = |status: &mut Status, deleted, message: &str| {
        decide::set_workspace_deleted(status, deleted, message, pass.time(), pass.tt.metadata.generation);
    };
    if retain_honoured(pass) {
        set(
            status,
            (ConditionStatus::False, reasons::RETAINED),
            &format!(
                "The workspace {} is kept (coder.com/deletion-policy: retain); delete it in Coder.",
                pass.name
            ),
        );
        return Ok(None);
    }
    let coder = match upstream(pass, status).await? {
        Ok((coder, _)) => coder,
        Err(step) if step.reason == reasons::CONTROL_PLANE_GONE => {
            set(
                status,
                (ConditionStatus::Unknown, reasons::CONTROL_PLANE_GONE),
                &step.message,
            );
            return Ok(None);
        }
        Err(step) => {
            set(
                status,
                (ConditionStatus::False, reasons::CONTROL_PLANE_UNAVAILABLE),
                &step.message,
            );
            return Ok(Some(pass.timings.cleanup_unreachable));
        }
    };
    if status.workspace_id.is_none() && !confirm_for_cleanup(pass, &coder, status).await {
        return Ok(cleanup_requeue(pass, status));
    }
    if decide::cleanup_done(status) {
        return Ok(None);
    }
    let outcome = delete_step(pass, &coder, status).await;
    Ok(record_deletion(pass, status, outcome))
}

/// Records where the delete stands in `WorkspaceDeleted`; `None` once the workspace is gone, else when to look
/// again.
fn record_deletion(pass: &Pass<'_>, status: &mut Status, outcome: Deletion) -> Option<Duration> {
    let mut set = |deleted, message: &str| {
        decide::set_workspace_deleted(status, deleted, message, pass.time(), pass.tt.metadata.generation);
    };
    match outcome {
        Deletion::Gone { externally } => {
            let reason = if externally {
                reasons::DELETED_EXTERNALLY
            } else {
                reasons::DELETED
            };
            set(
                (ConditionStatus::True, reason),
                &format!("Workspace {} is deleted.", pass.name),
            );
            None
        }
        Deletion::Progress {
            reason,
            message,
            requeue,
            ..
        } => {
            set((ConditionStatus::False, reason), &message);
            Some(requeue.unwrap_or(pass.timings.running))
        }
        Deletion::Stopped(step) => {
            let reason = if step.reason == reasons::CODER_ANSWER_MISMATCH {
                reasons::CODER_ANSWER_MISMATCH
            } else {
                reasons::CONTROL_PLANE_UNAVAILABLE
            };
            set((ConditionStatus::False, reason), &step.message);
            Some(pass.timings.cleanup_unreachable)
        }
    }
}

pub(super) fn cleanup_requeue(pass: &Pass<'_>, status: &Status) -> Option<Duration> {
    (!decide::cleanup_done(status)).then_some(pass.timings.cleanup_unreachable)
}

/// A run that ended before its workspace was known: find out from Coder whether a workspace of this test exists.
/// `true` when the workspace is now known (and is deleted next).
pub(super) async fn confirm_for_cleanup(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> bool {
    let set = |status: &mut Status, deleted, message: String| {
        decide::set_workspace_deleted(
            status,
            deleted,
            &message,
            pass.time(),
            pass.tt.metadata.generation,
        );
    };
    let operator = match coder.me().await {
        Ok(operator) => operator,
        Err(e) => {
            let step = decide::coder_unavailable("get operator user", &e);
            set(
                status,
                (ConditionStatus::False, reasons::CONTROL_PLANE_UNAVAILABLE),
                step.message,
            );
            return false;
        }
    };
    match find_own_workspace(pass, coder, status, operator.id).await {
        Ok(Some(Found {
            live: true,
            proven: Some((workspace, build)),
        })) => {
            status.workspace_id = Some(workspace.to_string());
            status.start_build_id = Some(build.to_string());
            true
        }
        Ok(Some(Found {
            live: true,
            proven: None,
        })) => {
            set(
                status,
                (ConditionStatus::Unknown, reasons::OWNERSHIP_UNKNOWN),
                format!(
                    "Workspace {} exists, but nothing proves that this test created it; it is left alone.",
                    pass.name
                ),
            );
            false
        }
        Ok(Some(Found { live: false, .. })) => {
            set(
                status,
                (ConditionStatus::True, reasons::DELETED_EXTERNALLY),
                format!("Workspace {} is deleted.", pass.name),
            );
            false
        }
        Ok(None) => {
            // Until the create could still land (and only a site owner's "not found" proves anything), the
            // outcome stays unknown and the finalizer waits.
            let step = phase::confirm_step(
                None,
                &pass.name,
                settled(pass, status),
                operator.has_role("owner"),
            );
            let deleted = step
                .deleted
                .unwrap_or((ConditionStatus::Unknown, reasons::CREATE_OUTCOME_UNKNOWN));
            set(status, deleted, step.message);
            false
        }
        Err(step) => {
            set(
                status,
                (ConditionStatus::False, reasons::CONTROL_PLANE_UNAVAILABLE),
                step.message,
            );
            false
        }
    }
}

/// `coder.com/deletion-policy: retain`, honoured only when the control plane allows it.
pub(super) fn retain_honoured(pass: &Pass<'_>) -> bool {
    let asked = names::deletion_policy(pass.tt.annotations()) == DeletionPolicy::Retain;
    asked && allows_retain(pass)
}

pub(super) fn allows_retain(pass: &Pass<'_>) -> bool {
    let namespace = pass.tt.namespace().unwrap_or_default();
    pass.ctx
        .caches
        .control_planes
        .get(&namespace, &pass.tt.spec.control_plane_ref.name)
        .and_then(|cp| cp.spec.template_tests.clone())
        .is_some_and(|t| t.allow_retain)
}
