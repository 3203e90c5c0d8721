//! The CoderTemplateTest reconcile (docs/controllers/template-test.md): one step per pass. Dereference the control
//! plane and its operator token → resolve and pin the owner, template and version → write the create marker (at
//! the object's resourceVersion) → one create → confirm an uncertain create from Coder's builds → wait for the
//! start build and the agents → delete the workspace → status. After the run ended, cleanup goes on until the
//! workspace is gone, then the TTL applies.

use std::sync::Arc;
use std::time::Duration;

use coder_k8s_api::template_test::{CoderTemplateTest, CoderTemplateTestStatus, TemplateTestPhase, reasons};
use coder_k8s_coder_client::Error as CoderError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::inputs::{resolve_inputs, upstream};
use super::names::{self, DeletionPolicy, Timings};
use super::phase::{self, MISMATCH_LOG, Mismatch};
use super::status::{self as decide, Step};
use super::workspace::{check_readiness, clean_up, confirm_create, create, delete_after_pass};
use crate::controller::context::Context;
use crate::controller::error::{Error, Result};
use crate::controller::runner::Cleanup;
use crate::controller::status_writer::{Transition as Event, write_status};

pub(super) type Status = CoderTemplateTestStatus;

/// One pass over a test: the object, the context and the facts every step needs.
pub(super) struct Pass<'a> {
    pub(super) tt: &'a CoderTemplateTest,
    pub(super) ctx: &'a Context,
    pub(super) name: String,
    pub(super) timings: Timings,
    pub(super) now: Timestamp,
    /// The status the create marker wrote in this pass: what the object really has now.
    pub(super) marker: std::sync::Mutex<Option<Status>>,
    /// The marker write found the object changed: this pass decided on an outdated status and writes nothing.
    pub(super) outdated: std::sync::atomic::AtomicBool,
}

impl<'a> Pass<'a> {
    fn new(tt: &'a CoderTemplateTest, ctx: &'a Context, name: String) -> Self {
        Self {
            tt,
            ctx,
            name,
            timings: names::Timings::from_retry_interval(ctx.settings.retry_interval),
            now: Timestamp::now(),
            marker: std::sync::Mutex::new(None),
            outdated: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(super) fn time(&self) -> Time {
        Time(self.now)
    }

    /// A Coder answer about something else: logged as such, and a wait the deadline ends.
    fn mismatch(&self, mismatch: Mismatch) -> Step {
        tracing::error!(name = %self.tt.name_any(), namespace = ?self.tt.namespace(), answer = %mismatch.0, "{MISMATCH_LOG}");
        mismatch.step()
    }

    pub(super) fn answered(&self, kind: &str, asked: &str, answer: &str) -> std::result::Result<(), Step> {
        phase::answered(kind, asked, answer).map_err(|m| self.mismatch(m))
    }
}

pub(super) fn unavailable(action: &'static str) -> impl Fn(CoderError) -> Step {
    move |error| decide::coder_unavailable(action, &error)
}

/// One reconcile of a live test.
pub async fn apply_spec(test: Arc<CoderTemplateTest>, ctx: Arc<Context>) -> Result<Action> {
    let (tt, ctx) = (test.as_ref(), ctx.as_ref());
    let uid = tt.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    let pass = Pass::new(
        tt,
        ctx,
        names::workspace_name(&uid).ok_or(Error::MissingMetadata)?,
    );
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

/// After the run ended: cleanup until the workspace is gone (or retained, or out of reach), then the TTL.
async fn after_the_run(pass: &Pass<'_>, before: Option<Status>, mut status: Status) -> Result<Action> {
    let cleanup_wait = clean_up(pass, &mut status).await?;
    write(pass, before.as_ref(), &status, Vec::new()).await?;
    match cleanup_wait.or_else(|| ttl_left(pass, &status)) {
        Some(Duration::ZERO) if cleanup_wait.is_none() => {
            delete_object(pass).await?;
            Ok(Action::await_change())
        }
        Some(wait) => Ok(Action::requeue(wait)),
        None => Ok(Action::await_change()),
    }
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
    if pass.outdated.load(std::sync::atomic::Ordering::Relaxed) {
        // A status decided on an outdated view must not be written over the newer one.
        return Ok(Action::requeue(pass.timings.running));
    }
    // After the marker write, the object's status is the marker's: the final write is compared with it.
    let marker = pass.marker.lock().unwrap_or_else(|p| p.into_inner()).take();
    let before = marker.or(before);
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
    let pass = Pass::new(tt, ctx, name);
    let before = ctx.statuses.effective(&uid, tt.status.as_ref());
    let mut status = before.clone().unwrap_or_default();
    let outcome = clean_up(&pass, &mut status).await?;
    write(&pass, before.as_ref(), &status, Vec::new()).await?;
    Ok(match outcome {
        None => Cleanup::Done,
        Some(after) => Cleanup::WaitFor(after),
    })
}
