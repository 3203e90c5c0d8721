//! The CoderTemplateTest reconcile (docs/controllers/template-test.md): one step per pass. Dereference the control
//! plane and its operator token → resolve and pin the owner, template and version → write the create marker (at
//! the object's resourceVersion) → one create → confirm an uncertain create from Coder's builds → wait for the
//! start build and the agents → delete the workspace → status. After the run ended, cleanup goes on until the
//! workspace is gone, then the TTL applies.

use std::time::Duration;

use coder_k8s_api::template_test::{CoderTemplateTest, TemplateTestPhase, reasons};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::desired::{self, DeletionPolicy};
use super::inputs::{Reach, Status, TestPass, timings, upstream};
use super::status::{self as decide, Outcome};
use super::{coder, workspace};
use crate::conditions::Transition as Event;
use crate::error::{Error, Result};
use crate::halt::{self, Halt, settle};
use crate::kind::Cleanup;
use crate::status_writer;

/// How soon a run that just ended, or passed its deadline, is looked at again.
const AT_ONCE: Duration = Duration::from_millis(100);

/// One pass over a live test: one step of the run, or its cleanup and TTL once it ended.
pub async fn reconcile(pass: &mut TestPass<'_>) -> Result<Outcome, Halt<Outcome>> {
    if desired::workspace_name(&pass.uid).is_none() {
        return Err(Halt::Failed(Error::MissingMetadata));
    }
    if pass.status.phase.is_none() {
        let (now, generation) = (pass.time(), pass.generation());
        decide::initialize(&mut pass.status, now, generation);
    }
    if decide::is_final(&pass.status) {
        return Err(Halt::Wait(after_the_run(pass).await?));
    }
    let step = match remaining(pass) {
        Some(_) => halt::settled(run_step(pass).await)?,
        None => last_wait_exceeded(pass, None),
    };
    // Coder calls take time: the deadline is checked again before the step is recorded.
    Ok(match remaining(pass) {
        None if !step.is_final() => last_wait_exceeded(pass, Some(&step)),
        _ => step,
    })
}

/// How long the run may still take; `None` once its deadline passed.
fn remaining(pass: &TestPass<'_>) -> Option<Duration> {
    let start = pass.status.start_time.as_ref().map_or(pass.now, |t| t.0);
    let elapsed = Duration::try_from(Timestamp::now().duration_since(start)).unwrap_or_default();
    let timeout =
        Duration::from_secs(u64::try_from(desired::timeout_seconds(&pass.object.spec)).unwrap_or(0));
    timeout.checked_sub(elapsed).filter(|left| !left.is_zero())
}

fn last_wait_exceeded(pass: &TestPass<'_>, step: Option<&Outcome>) -> Outcome {
    let status = &pass.status;
    let (reason, message) = match step {
        Some(step) => (step.reason.to_owned(), step.message.clone()),
        None => (
            status.reason.clone().unwrap_or_default(),
            status.message.clone().unwrap_or_default(),
        ),
    };
    decide::deadline_exceeded(desired::timeout_seconds(&pass.object.spec), &reason, &message)
}

/// The step of this pass: readiness or the delete once a workspace is known, the confirmation after an uncertain
/// create, else the inputs and the create.
async fn run_step(pass: &mut TestPass<'_>) -> Result<Outcome, Halt<Outcome>> {
    let (client, control_plane) = match upstream(pass).await? {
        Reach::Ready(client, control_plane) => (client, control_plane),
        Reach::Waits(step) => return settle(step),
    };
    if let Some(left) = pass.ctx.rate_limits.remaining(&pass.uid) {
        // After a 429 the test waits out its backoff, even when a watch event wakes it early.
        let mut step = Outcome::wait(
            reasons::CODER_UNAVAILABLE,
            pass.status.message.clone().unwrap_or_default(),
        );
        step.requeue = Some(left);
        return Ok(step);
    }
    if pass.status.workspace_id.is_some() {
        return match pass.status.agents_ready_time {
            Some(_) => workspace::delete_after_pass(pass, &client).await,
            None => workspace::check_readiness(pass, &client).await,
        };
    }
    if pass.status.create_attempt_time.is_some() {
        return workspace::confirm_create(pass, &client).await;
    }
    coder::resolve_inputs(pass, &client, &control_plane).await?;
    workspace::create(pass, &client).await
}

/// After the run ended: cleanup until the workspace is gone (or retained, or out of reach), then the TTL.
async fn after_the_run(pass: &mut TestPass<'_>) -> Result<Action> {
    let cleanup_wait = workspace::clean_up(pass).await?;
    write(pass, Vec::new()).await?;
    match cleanup_wait.or_else(|| ttl_left(pass)) {
        Some(Duration::ZERO) if cleanup_wait.is_none() => {
            delete_object(pass).await?;
            Ok(Action::await_change())
        }
        Some(wait) => Ok(Action::requeue(wait)),
        None => Ok(Action::await_change()),
    }
}

/// How long until the TTL deletes the object; `None` without a TTL.
fn ttl_left(pass: &TestPass<'_>) -> Option<Duration> {
    let ttl = u64::try_from(pass.object.spec.ttl_seconds_after_finished?).unwrap_or(0);
    let done = pass.status.completion_time.as_ref().map_or(pass.now, |t| t.0);
    let waited = Duration::try_from(pass.now.duration_since(done)).unwrap_or_default();
    Some(Duration::from_secs(ttl).saturating_sub(waited))
}

async fn delete_object(pass: &TestPass<'_>) -> Result<()> {
    let tt = pass.object;
    let api: Api<CoderTemplateTest> = Api::namespaced(pass.ctx.k8s.client.clone(), &pass.namespace());
    tracing::info!(name = %tt.name_any(), namespace = ?tt.namespace(), "ttlSecondsAfterFinished passed; deleting the test");
    match api.delete(&tt.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(answer)) if answer.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Records the step, writes the status when it changed (with an Event for a phase change) and requeues.
pub async fn settle_step(pass: &mut TestPass<'_>, mut step: Outcome) -> Result<Action> {
    if let DeletionPolicy::Ignored(value) = desired::deletion_policy(pass.object.annotations()) {
        step.message = format!(
            "{} (coder.com/deletion-policy {value:?} is ignored: use retain or delete.)",
            step.message
        );
    }
    // After the marker write, the object's status is the marker's: the final write is compared with it.
    let before = pass.shown.clone();
    let (now, generation) = (pass.time(), pass.generation());
    decide::apply(&mut pass.status, &step, now, generation);
    if step.is_final() {
        // The run ended: cleanup (if any) starts at once.
        let requeue = workspace::clean_up(pass).await?;
        let events = events(before.as_ref(), &pass.status);
        write(pass, events).await?;
        return Ok(Action::requeue(requeue.unwrap_or(AT_ONCE)));
    }
    let requeue = next_poll(pass, &step);
    let events = events(before.as_ref(), &pass.status);
    write(pass, events).await?;
    // A requeue is never later than the deadline.
    Ok(Action::requeue(
        remaining(pass).map_or(AT_ONCE, |left| requeue.min(left)),
    ))
}

/// When a running test is looked at again: after a 429 its backoff, else the step's own wait (a step that sets none
/// forgets the backoff), else the poll interval of its phase.
fn next_poll(pass: &TestPass<'_>, step: &Outcome) -> Duration {
    let timings = timings(pass);
    let poll = match decide::may_have_workspace(&pass.status) {
        true => timings.running,
        false => timings.pending,
    };
    match step.rate_limited {
        Some(retry_after) => pass.ctx.rate_limits.limited(&pass.uid, retry_after),
        None => {
            if step.requeue.is_none() {
                pass.ctx.rate_limits.passed(&pass.uid);
            }
            step.requeue.unwrap_or(poll)
        }
    }
}

/// An Event for a phase change, and the metric of a finished run.
fn events(before: Option<&Status>, after: &Status) -> Vec<Event> {
    let (old, new) = (before.and_then(|s| s.phase), after.phase);
    if old == new {
        return Vec::new();
    }
    let Some(new) = new else { return Vec::new() };
    let type_ = match new == TemplateTestPhase::Failed {
        true => EventType::Warning,
        false => EventType::Normal,
    };
    let reason = after.reason.clone().unwrap_or_default();
    vec![(type_, reason, after.message.clone().unwrap_or_default())]
}

/// Writes the status (when it changed) with `events`; a run that finished with this write is counted.
async fn write(pass: &mut TestPass<'_>, events: Vec<Event>) -> Result<()> {
    pass.status.observed_generation = pass.generation();
    let finished_now = decide::is_final(&pass.status) && !pass.shown.as_ref().is_some_and(decide::is_final);
    if status_writer::write(pass, events).await? && finished_now {
        let reason = pass.status.reason.as_deref().unwrap_or_default();
        pass.ctx.metrics.template_test_finished(reason);
    }
    Ok(())
}

/// The finalizer: the workspace is deleted (or retained, or out of reach) before the object goes.
pub async fn cleanup(pass: &mut TestPass<'_>) -> Result<Cleanup> {
    if desired::workspace_name(&pass.uid).is_none() {
        return Ok(Cleanup::Done);
    }
    let wait = workspace::clean_up(pass).await?;
    write(pass, Vec::new()).await?;
    Ok(match wait {
        None => Cleanup::Done,
        Some(after) => Cleanup::WaitFor(after),
    })
}
