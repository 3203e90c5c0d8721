//! The CoderTemplateTest reconcile (docs/controllers/template-test.md): one step per pass. Dereference the control
//! plane and its operator token → resolve and pin the owner, template and version → write the create marker (at
//! the object's resourceVersion) → one create → confirm an uncertain create from Coder's builds → wait for the
//! start build and the agents → delete the workspace → status. After the run ended, cleanup goes on until the
//! workspace is gone, then the TTL applies.

use std::sync::Arc;
use std::time::Duration;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::template_test::{CoderTemplateTest, CoderTemplateTestStatus, TemplateTestPhase, reasons};
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition};
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::workspaces::{CreateWorkspaceRequest, RichParameterValue};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use coder_k8s_control_plane_access::{AccessError, resolve, token_source};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use uuid::Uuid;

use super::cleanup::{DeleteAction, delete_action, delete_backoff};
use super::names::{self, DeletionPolicy, OWNERSHIP_BUILDS, Timings};
use super::phase::{self, CreateAnswer, MISMATCH_LOG, Mismatch, Pins, Readiness};
use super::status::{self as decide, Step};
use crate::controller::apply::controlled_by;
use crate::controller::conditions::ConditionStatus;
use crate::controller::context::Context;
use crate::controller::error::{Error, Result};
use crate::controller::runner::Cleanup;
use crate::controller::secrets;
use crate::controller::status_writer::{Transition as Event, write_status};

type Status = CoderTemplateTestStatus;

/// Ends a step function early with the step of a failed lookup.
macro_rules! take {
    ($flow:expr) => {
        match $flow {
            Ok(value) => value,
            Err(step) => return step,
        }
    };
}

/// One pass over a test: the object, the context and the facts every step needs.
struct Pass<'a> {
    tt: &'a CoderTemplateTest,
    ctx: &'a Context,
    name: String,
    timings: Timings,
    now: Timestamp,
}

impl Pass<'_> {
    fn time(&self) -> Time {
        Time(self.now)
    }

    /// A Coder answer about something else: logged as such, and a wait the deadline ends.
    fn mismatch(&self, mismatch: Mismatch) -> Step {
        tracing::error!(name = %self.tt.name_any(), namespace = ?self.tt.namespace(), answer = %mismatch.0, "{MISMATCH_LOG}");
        mismatch.step()
    }

    fn answered(&self, kind: &str, asked: &str, answer: &str) -> std::result::Result<(), Step> {
        phase::answered(kind, asked, answer).map_err(|m| self.mismatch(m))
    }
}

fn unavailable(action: &'static str) -> impl Fn(CoderError) -> Step {
    move |error| decide::coder_unavailable(action, &error)
}

/// One reconcile of a live test.
pub async fn apply_spec(test: Arc<CoderTemplateTest>, ctx: Arc<Context>) -> Result<Action> {
    let (tt, ctx) = (test.as_ref(), ctx.as_ref());
    let uid = tt.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    let pass = Pass {
        tt,
        ctx,
        name: names::workspace_name(&uid).ok_or(Error::MissingMetadata)?,
        timings: names::Timings::from_retry_interval(ctx.settings.retry_interval),
        now: Timestamp::now(),
    };
    let before = ctx.statuses.effective(&uid, tt.status.as_ref());
    let mut status = before.clone().unwrap_or_default();
    if status.phase.is_none() {
        decide::initialize(&mut status, pass.time(), tt.metadata.generation);
    }
    if decide::is_final(&status) {
        return after_the_run(&pass, before, status).await;
    }
    let step = match remaining(&pass, &status) {
        Some(_) => run_step(&pass, &mut status).await?,
        None => last_wait_exceeded(tt, &status, None),
    };
    // Coder calls take time: the deadline is checked again before the step is recorded.
    let step = match remaining(&pass, &status) {
        None if !step.is_final() => last_wait_exceeded(tt, &status, Some(&step)),
        _ => step,
    };
    finish(&pass, before, status, step).await
}

/// How long the run may still take; `None` once its deadline passed.
fn remaining(pass: &Pass<'_>, status: &Status) -> Option<Duration> {
    let start = status.start_time.as_ref().map_or(pass.now, |t| t.0);
    let elapsed = Duration::try_from(Timestamp::now().duration_since(start)).unwrap_or_default();
    let timeout = Duration::from_secs(u64::try_from(names::timeout_seconds(&pass.tt.spec)).unwrap_or(0));
    timeout.checked_sub(elapsed).filter(|left| !left.is_zero())
}

fn last_wait_exceeded(tt: &CoderTemplateTest, status: &Status, step: Option<&Step>) -> Step {
    let (reason, message) = match step {
        Some(step) => (step.reason.to_owned(), step.message.clone()),
        None => (
            status.reason.clone().unwrap_or_default(),
            status.message.clone().unwrap_or_default(),
        ),
    };
    decide::deadline_exceeded(names::timeout_seconds(&tt.spec), &reason, &message)
}

/// The step of this pass: readiness or the delete once a workspace is known, the confirmation after an uncertain
/// create, else the inputs and the create.
async fn run_step(pass: &Pass<'_>, status: &mut Status) -> Result<Step> {
    let (coder, control_plane) = match upstream(pass, status).await? {
        Ok(found) => found,
        Err(step) => return Ok(step),
    };
    let uid = pass.tt.metadata.uid.clone().unwrap_or_default();
    if let Some(left) = pass.ctx.rate_limit_remaining(&uid) {
        // After a 429 the test waits out its backoff, even when a watch event wakes it early.
        let mut step = Step::wait(
            reasons::CODER_UNAVAILABLE,
            status.message.clone().unwrap_or_default(),
        );
        step.requeue = Some(left);
        return Ok(step);
    }
    if status.workspace_id.is_some() {
        return Ok(match status.agents_ready_time {
            Some(_) => delete_after_pass(pass, &coder, status).await,
            None => check_readiness(pass, &coder, status).await,
        });
    }
    if status.create_attempt_time.is_some() {
        return Ok(confirm_create(pass, &coder, status).await);
    }
    match resolve_inputs(pass, &coder, &control_plane, status).await {
        Some(step) => Ok(step),
        None => create(pass, &coder, status).await,
    }
}

/// The control plane and a Coder client with its operator token, or the wait (or `ControlPlaneGone`) that says
/// why not.
async fn upstream(
    pass: &Pass<'_>,
    status: &Status,
) -> Result<std::result::Result<(CoderClient, Arc<CoderControlPlane>), Step>> {
    let (tt, ctx) = (pass.tt, pass.ctx);
    let namespace = tt.namespace().unwrap_or_default();
    let cp_name = tt.spec.control_plane_ref.name.as_str();
    let not_ready = |message: String| Step::wait(reasons::CONTROL_PLANE_NOT_READY, message);
    let no_access = |message: String| Step::wait(reasons::OPERATOR_ACCESS_NOT_READY, message);
    let Some(control_plane) = ctx.caches.control_planes.get(&namespace, cp_name) else {
        if decide::may_have_workspace(status) {
            return Ok(Err(Step::fail(
                reasons::CONTROL_PLANE_GONE,
                format!("CoderControlPlane {cp_name} is gone, so the workspace can no longer be reached."),
            )
            .with_deleted(ConditionStatus::Unknown, reasons::CONTROL_PLANE_GONE)));
        }
        return Ok(Err(not_ready(format!(
            "CoderControlPlane {cp_name} does not exist."
        ))));
    };
    if control_plane.metadata.deletion_timestamp.is_some() {
        return Ok(Err(not_ready(format!(
            "CoderControlPlane {cp_name} is being deleted."
        ))));
    }
    let source = match token_source(cp_name, Some(&control_plane)) {
        Ok(source) => source,
        Err(AccessError::ControlPlaneUnavailable { .. }) => {
            return Ok(Err(not_ready(format!(
                "CoderControlPlane {cp_name} has no status.url yet."
            ))));
        }
        Err(_) => {
            return Ok(Err(no_access(format!(
                "CoderControlPlane {cp_name} has no operator access yet."
            ))));
        }
    };
    let secret = ctx
        .caches
        .secrets
        .get(&ctx.client, &namespace, &source.secret)
        .await?;
    let cp_uid = control_plane.metadata.uid.clone().unwrap_or_default();
    // Only a Secret the control plane controls holds its operator token; any other is not read.
    let token = secret
        .as_deref()
        .filter(|s| controlled_by(&s.metadata, &cp_uid))
        .and_then(|s| secrets::value(Some(s), &source.key))
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        return Ok(Err(no_access(format!(
            "The operator token Secret of CoderControlPlane {cp_name} has no token yet."
        ))));
    };
    let client = resolve(&control_plane, &source, Some(&token))
        .ok()
        .and_then(|target| ctx.clients.client(&target.uid, &target.api_url, &token).ok());
    Ok(match client {
        Some(client) => Ok((client, control_plane)),
        None => Err(not_ready(format!(
            "CoderControlPlane {cp_name} has no usable Coder URL."
        ))),
    })
}

/// Resolves and pins the owner, organization, template and version; `None` when every input is ready and the
/// workspace name is free.
async fn resolve_inputs(
    pass: &Pass<'_>,
    coder: &CoderClient,
    control_plane: &CoderControlPlane,
    status: &mut Status,
) -> Option<Step> {
    let cp_name = control_plane.name_any();
    let configured = control_plane
        .spec
        .template_tests
        .as_ref()
        .and_then(|t| t.owner_user_id.as_deref())
        .filter(|id| !id.is_empty());
    let Some(owner) = configured.and_then(|id| Uuid::parse_str(id).ok()) else {
        return Some(Step::wait(
            reasons::OWNER_NOT_CONFIGURED,
            format!("Set spec.templateTests.ownerUserID (a Coder user UUID) on CoderControlPlane {cp_name}."),
        ));
    };
    resolve_all(pass, coder, owner, status).await.err()
}

async fn resolve_all(
    pass: &Pass<'_>,
    coder: &CoderClient,
    owner: Uuid,
    status: &mut Status,
) -> std::result::Result<(), Step> {
    let organizations = check_owner(pass, coder, owner).await?;
    let spec = &pass.tt.spec;
    let (org_name, template_name) = names::template_parts(&spec.template).ok_or_else(|| {
        Step::wait(
            reasons::TEMPLATE_NOT_FOUND,
            format!("{:?} is not <organization>.<template>.", spec.template),
        )
    })?;
    let organization = match coder.organization(org_name).await {
        Err(e) if e.is_not_found() => {
            return Err(Step::wait(
                reasons::TEMPLATE_NOT_FOUND,
                format!("Coder organization {org_name:?} does not exist."),
            ));
        }
        other => other.map_err(unavailable("get organization"))?,
    };
    pass.answered(
        "organization",
        &org_name.to_lowercase(),
        &organization.name.to_lowercase(),
    )?;
    if !organizations.contains(&organization.id) {
        return Err(Step::wait(
            reasons::OWNER_NOT_ELIGIBLE,
            format!("Coder user {owner} is not a member of organization {org_name:?}."),
        ));
    }
    let template = match coder
        .template_by_name(&organization.id.to_string(), template_name)
        .await
    {
        Err(e) if e.is_not_found() => {
            return Err(Step::wait(
                reasons::TEMPLATE_NOT_FOUND,
                format!("Coder template {:?} does not exist.", spec.template),
            ));
        }
        other => other.map_err(unavailable("get template"))?,
    };
    pass.answered(
        "template",
        &template_name.to_lowercase(),
        &template.name.to_lowercase(),
    )?;
    pass.answered(
        "template organization",
        &organization.id.to_string(),
        &template.organization_id.to_string(),
    )?;
    if template.deprecated {
        return Err(Step::fail(
            reasons::TEMPLATE_DEPRECATED,
            format!(
                "Coder template {:?} is deprecated and accepts no new workspaces.",
                spec.template
            ),
        ));
    }
    resolve_version(pass, coder, template.id, template.active_version_id, status).await?;
    status.organization_id = Some(organization.id.to_string());
    status.template_id = Some(template.id.to_string());
    status.owner_id = Some(owner.to_string());
    status.workspace_name = Some(pass.name.clone());
    match coder
        .workspace_by_owner_and_name(&owner.to_string(), &pass.name)
        .await
    {
        // Nothing of this test exists yet, so the workspace is someone else's: never touched.
        Ok(_) => Err(Step::fail(
            reasons::WORKSPACE_NAME_CONFLICT,
            format!("Coder user {owner} already has a workspace named {}.", pass.name),
        )),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(decide::coder_unavailable("get workspace by name", &e)),
    }
}

/// The owner eligibility rules; returns the owner's organizations.
async fn check_owner(
    pass: &Pass<'_>,
    coder: &CoderClient,
    owner: Uuid,
) -> std::result::Result<Vec<Uuid>, Step> {
    let refuse = |why: String| Step::wait(reasons::OWNER_NOT_ELIGIBLE, format!("Coder user {owner}: {why}"));
    let user = match coder.user(&owner.to_string()).await {
        Err(e) if e.is_not_found() => return Err(refuse("the user does not exist.".to_owned())),
        other => other.map_err(unavailable("get owner"))?,
    };
    pass.answered("user", &owner.to_string(), &user.id.to_string())?;
    if let Some(why) = phase::owner_refusal(&user) {
        return Err(refuse(why));
    }
    for organization in &user.organization_ids {
        let org = coder
            .organization_by_id(*organization)
            .await
            .map_err(unavailable("get owner organization"))?;
        pass.answered("organization", &organization.to_string(), &org.id.to_string())?;
        let members = coder
            .organization_members(&organization.to_string())
            .await
            .map_err(unavailable("get owner membership"))?;
        let member = members.iter().find(|m| m.user_id == owner);
        if let Some(why) = phase::organization_refusal(*organization, &org.default_org_member_roles, member) {
            return Err(refuse(why));
        }
    }
    Ok(user.organization_ids)
}

/// Finds the version under test and pins it as soon as Coder names it (the active version is resolved once).
async fn resolve_version(
    pass: &Pass<'_>,
    coder: &CoderClient,
    template: Uuid,
    active: Uuid,
    status: &mut Status,
) -> std::result::Result<(), Step> {
    let spec = &pass.tt.spec;
    let pinned = status
        .template_version_id
        .clone()
        .or_else(|| spec.version.id.clone());
    let (answer, asked) = match (pinned, spec.version.name.as_deref()) {
        (Some(id), _) => {
            let id = Uuid::parse_str(&id).map_err(|_| {
                Step::wait(
                    reasons::TEMPLATE_VERSION_NOT_FOUND,
                    format!("Version ID {id:?} is not a UUID."),
                )
            })?;
            (coder.template_version(id).await, id.to_string())
        }
        (None, Some(name)) => (
            coder.template_version_by_name(template, name).await,
            name.to_owned(),
        ),
        (None, None) => (coder.template_version(active).await, active.to_string()),
    };
    let version = match answer {
        Err(e) if e.is_not_found() => {
            return Err(Step::wait(
                reasons::TEMPLATE_VERSION_NOT_FOUND,
                format!("The version of template {:?} does not exist.", spec.template),
            ));
        }
        other => other.map_err(unavailable("get template version"))?,
    };
    let answered_as = if spec.version.name.is_some() && status.template_version_id.is_none() {
        version.name.clone()
    } else {
        version.id.to_string()
    };
    pass.answered("version", &asked, &answered_as)?;
    if version.template_id == Some(template) {
        status.template_version_id = Some(version.id.to_string());
        status.template_version_name = Some(version.name.clone());
    }
    match phase::version_step(&version, template, &spec.template) {
        Some(step) => Err(step),
        None => Ok(()),
    }
}

/// Writes the create marker at the object's resourceVersion, then sends the one create.
async fn create(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> Result<Step> {
    status.create_attempt_time = Some(pass.time());
    if !write_marker(pass, status).await? {
        // Someone changed the object since it was read: decide again on the fresh object.
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
async fn write_marker(pass: &Pass<'_>, status: &Status) -> Result<bool> {
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
        Ok(_) => Ok(true),
        Err(kube::Error::Api(answer)) if answer.code == 409 => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// Reads Coder after an uncertain create; never sends anything that changes Coder.
async fn confirm_create(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> Step {
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
fn settled(pass: &Pass<'_>, status: &Status) -> bool {
    status.create_attempt_time.as_ref().is_none_or(|t| {
        Duration::try_from(pass.now.duration_since(t.0)).unwrap_or_default() >= pass.timings.settle
    })
}

/// What Coder shows under the test's workspace name.
struct Found {
    live: bool,
    /// The workspace and the start build that prove it is this test's.
    proven: Option<(Uuid, Uuid)>,
}

async fn find_own_workspace(
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
async fn check_readiness(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> Step {
    let id = take!(workspace_id(status));
    let workspace = match coder.workspace_including_deleted(id).await {
        // Only Coder's own 404 says the workspace is gone.
        Err(e) if e.is_not_found() => return deleted_externally(&pass.name),
        other => take!(other.map_err(unavailable("get workspace"))),
    };
    take!(pass.answered("workspace", &id.to_string(), &workspace.id.to_string()));
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

fn deleted_externally(name: &str) -> Step {
    Step::fail(
        reasons::WORKSPACE_DELETED_EXTERNALLY,
        format!("Workspace {name} was deleted by someone else."),
    )
    .with_deleted(ConditionStatus::True, reasons::DELETED_EXTERNALLY)
}

fn workspace_id(status: &Status) -> std::result::Result<Uuid, Step> {
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
async fn delete_after_pass(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> Step {
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
    Stopped(Step),
}

/// One step of the delete: read the workspace (also when deleted), then cancel, wait, count, back off or send a
/// delete build.
async fn delete_step(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> Deletion {
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

fn progress(reason: &'static str, message: String) -> Deletion {
    Deletion::Progress {
        reason,
        message,
        failed_now: false,
        requeue: None,
    }
}

/// Cancels the active start or stop build; a cancel Coder refuses (the build just ended) is fine.
async fn cancel_active(pass: &Pass<'_>, coder: &CoderClient, build: Uuid, expect_status: &str) -> Deletion {
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
fn count_failure(pass: &Pass<'_>, status: &mut Status) -> Deletion {
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
async fn send_delete(pass: &Pass<'_>, coder: &CoderClient, id: Uuid, status: &mut Status) -> Deletion {
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

/// After the run ended: cleanup until the workspace is gone (or retained, or out of reach), then the TTL.
async fn after_the_run(pass: &Pass<'_>, before: Option<Status>, mut status: Status) -> Result<Action> {
    let requeue = match clean_up(pass, &mut status).await? {
        Some(requeue) => requeue,
        None => match ttl_left(pass, &status) {
            Some(Duration::ZERO) => {
                write(pass, before.as_ref(), &status, Vec::new()).await?;
                delete_object(pass).await?;
                return Ok(Action::await_change());
            }
            Some(left) => left,
            None => {
                write(pass, before.as_ref(), &status, Vec::new()).await?;
                return Ok(Action::await_change());
            }
        },
    };
    write(pass, before.as_ref(), &status, Vec::new()).await?;
    Ok(Action::requeue(requeue))
}

/// How long until the TTL deletes the object; `None` without a TTL.
fn ttl_left(pass: &Pass<'_>, status: &Status) -> Option<Duration> {
    let ttl = u64::try_from(pass.tt.spec.ttl_seconds_after_finished?).unwrap_or(0);
    let done = status.completion_time.as_ref().map_or(pass.now, |t| t.0);
    let waited = Duration::try_from(pass.now.duration_since(done)).unwrap_or_default();
    Some(Duration::from_secs(ttl).saturating_sub(waited))
}

async fn delete_object(pass: &Pass<'_>) -> Result<()> {
    let api: Api<CoderTemplateTest> =
        Api::namespaced(pass.ctx.client.clone(), &pass.tt.namespace().unwrap_or_default());
    tracing::info!(name = %pass.tt.name_any(), namespace = ?pass.tt.namespace(), "ttlSecondsAfterFinished passed; deleting the test");
    match api.delete(&pass.tt.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(answer)) if answer.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// The cleanup of the workspace, recorded in `WorkspaceDeleted`. `None` when it is done (gone, retained on
/// purpose, or out of reach for good), else when to look again.
async fn clean_up(pass: &Pass<'_>, status: &mut Status) -> Result<Option<Duration>> {
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
    Ok(match outcome {
        Deletion::Gone { externally } => {
            let reason = if externally {
                reasons::DELETED_EXTERNALLY
            } else {
                reasons::DELETED
            };
            set(
                status,
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
            set(status, (ConditionStatus::False, reason), &message);
            Some(requeue.unwrap_or(pass.timings.running))
        }
        Deletion::Stopped(step) => {
            let reason = if step.reason == reasons::CODER_ANSWER_MISMATCH {
                reasons::CODER_ANSWER_MISMATCH
            } else {
                reasons::CONTROL_PLANE_UNAVAILABLE
            };
            set(status, (ConditionStatus::False, reason), &step.message);
            Some(pass.timings.cleanup_unreachable)
        }
    })
}

fn cleanup_requeue(pass: &Pass<'_>, status: &Status) -> Option<Duration> {
    (!decide::cleanup_done(status)).then_some(pass.timings.cleanup_unreachable)
}

/// A run that ended before its workspace was known: find out from Coder whether a workspace of this test exists.
/// `true` when the workspace is now known (and is deleted next).
async fn confirm_for_cleanup(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> bool {
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
fn retain_honoured(pass: &Pass<'_>) -> bool {
    let asked = names::deletion_policy(pass.tt.annotations()) == DeletionPolicy::Retain;
    asked && allows_retain(pass)
}

fn allows_retain(pass: &Pass<'_>) -> bool {
    let namespace = pass.tt.namespace().unwrap_or_default();
    pass.ctx
        .caches
        .control_planes
        .get(&namespace, &pass.tt.spec.control_plane_ref.name)
        .and_then(|cp| cp.spec.template_tests.clone())
        .is_some_and(|t| t.allow_retain)
}

/// Records the step, writes the status when it changed (with an Event for a phase change) and requeues.
async fn finish(
    pass: &Pass<'_>,
    before: Option<Status>,
    mut status: Status,
    mut step: Step,
) -> Result<Action> {
    if let DeletionPolicy::Ignored(value) = names::deletion_policy(pass.tt.annotations()) {
        step.message = format!(
            "{} (coder.com/deletion-policy {value:?} is ignored: use retain or delete.)",
            step.message
        );
    }
    decide::apply(&mut status, &step, pass.time(), pass.tt.metadata.generation);
    let uid = pass.tt.metadata.uid.clone().unwrap_or_default();
    if step.is_final() {
        // The run ended: cleanup (if any) starts at once.
        let requeue = clean_up(pass, &mut status).await?;
        write(pass, before.as_ref(), &status, events(before.as_ref(), &status)).await?;
        return Ok(Action::requeue(requeue.unwrap_or(Duration::from_millis(100))));
    }
    let poll = if decide::may_have_workspace(&status) {
        pass.timings.running
    } else {
        pass.timings.pending
    };
    let requeue = match step.rate_limited {
        Some(retry_after) => pass.ctx.rate_limited(&uid, retry_after),
        None => {
            if step.requeue.is_none() {
                pass.ctx.rate_limit_passed(&uid);
            }
            step.requeue.unwrap_or(poll)
        }
    };
    write(pass, before.as_ref(), &status, events(before.as_ref(), &status)).await?;
    // A requeue is never later than the deadline.
    let requeue = remaining(pass, &status).map_or(Duration::from_millis(100), |left| requeue.min(left));
    Ok(Action::requeue(requeue))
}

/// An Event for a phase change, and the metric of a finished run.
fn events(before: Option<&Status>, after: &Status) -> Vec<Event> {
    let (old, new) = (before.and_then(|s| s.phase), after.phase);
    if old == new {
        return Vec::new();
    }
    let Some(new) = new else { return Vec::new() };
    let type_ = if new == TemplateTestPhase::Failed {
        EventType::Warning
    } else {
        EventType::Normal
    };
    let reason = after.reason.clone().unwrap_or_default();
    vec![(type_, reason, after.message.clone().unwrap_or_default())]
}

async fn write(pass: &Pass<'_>, before: Option<&Status>, status: &Status, events: Vec<Event>) -> Result<()> {
    let mut status = status.clone();
    status.observed_generation = pass.tt.metadata.generation;
    let finished_now = decide::is_final(&status) && !before.is_some_and(decide::is_final);
    if write_status(pass.ctx, pass.tt, before, &status, events).await? && finished_now {
        pass.ctx
            .metrics
            .template_test_finished(status.reason.as_deref().unwrap_or_default());
    }
    Ok(())
}

/// The finalizer: the workspace is deleted (or retained, or out of reach) before the object goes.
pub async fn cleanup(test: Arc<CoderTemplateTest>, ctx: Arc<Context>) -> Result<Cleanup> {
    let (tt, ctx) = (test.as_ref(), ctx.as_ref());
    let uid = tt.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    let Some(name) = names::workspace_name(&uid) else {
        return Ok(Cleanup::Done);
    };
    let pass = Pass {
        tt,
        ctx,
        name,
        timings: names::Timings::from_retry_interval(ctx.settings.retry_interval),
        now: Timestamp::now(),
    };
    let before = ctx.statuses.effective(&uid, tt.status.as_ref());
    let mut status = before.clone().unwrap_or_default();
    let outcome = clean_up(&pass, &mut status).await?;
    write(&pass, before.as_ref(), &status, Vec::new()).await?;
    Ok(match outcome {
        None => Cleanup::Done,
        Some(after) => Cleanup::WaitFor(after),
    })
}
