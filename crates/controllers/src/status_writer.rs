//! The one status writer: server-side apply of `status` only when it differs from what the object shows, Events for
//! the transitions it records, and the status memo of the last write per object (`memory::StatusMemo`), so a watch
//! cache that has not caught up with that write does not cause a second write (and a second Event). When to look
//! again after a write is the rate-limit gates' business (`rate_limits`).

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::Event;
use kube::{Resource, ResourceExt};
use serde::Serialize;

use crate::apply::Namespaced;
use crate::conditions::Transition;
use crate::context::Context;
use crate::error::Result;
use crate::kind::{Cleanup, Kind};
use crate::labels::FIELD_MANAGER;
use crate::memory::json;
use crate::pass::Pass;
use crate::sync_status::{Outcome, SyncedStatus};

/// Writes `status` for `object` (whose status is `current`) when it changed, then publishes `transitions`.
/// Returns whether a write was sent.
pub async fn write_status<K, S>(
    ctx: &Context,
    object: &K,
    current: Option<&S>,
    status: &S,
    transitions: Vec<Transition>,
) -> Result<bool, kube::Error>
where
    K: Namespaced,
    S: Serialize + PartialEq,
{
    if current == Some(status) {
        return Ok(false);
    }
    let uid = object.meta().uid.clone().unwrap_or_default();
    let shown = json(&current);
    let wanted = json(status);
    if ctx.statuses.already_written(&uid, &shown, &wanted) {
        return Ok(false);
    }
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    let api: Api<K> = Api::namespaced(ctx.k8s.client.clone(), &object.namespace().unwrap_or_default());
    let stored = api
        .patch_status(
            &object.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?;
    ctx.statuses
        .record(&uid, &shown, wanted, stored.meta().resource_version.clone());
    publish(ctx, object, transitions).await;
    Ok(true)
}

/// Writes the status the pass built (when it differs from what the object shows), with `transitions`; from then on
/// the pass compares with what it wrote (a create marker written mid-pass is what the object shows).
pub async fn write<K: Kind>(
    pass: &mut Pass<'_, K>,
    transitions: Vec<Transition>,
) -> Result<bool, kube::Error> {
    let written = write_status(
        pass.ctx,
        pass.object,
        pass.shown.as_ref(),
        &pass.status,
        transitions,
    )
    .await?;
    pass.shown = Some(pass.status.clone());
    Ok(written)
}

/// Records `outcome` in the status the pass built (phase, conditions, observed generation), writes it when it
/// changed (with an Event when the phase or reason changed) and says when to look again (`rate_limits::next_pass`).
pub async fn write_outcome<K>(pass: &mut Pass<'_, K>, outcome: Outcome) -> Result<Action>
where
    K: Kind,
    K::Status: SyncedStatus,
{
    let events = outcome.transition(pass.shown.as_ref().and_then(|s| s.shown()));
    let (generation, now) = (pass.generation(), pass.time());
    pass.status.record(&outcome, generation, &now);
    write(pass, events).await?;
    let retry = pass.retry();
    Ok(pass.ctx.rate_limits.next_pass(&pass.uid, &outcome, retry))
}

/// A finalizer that has to wait for Coder: the object shows `outcome` (reason `Deleting`), and the next attempt
/// comes after the retry interval, or after a 429 after the object's rate-limit backoff.
pub async fn deletion_waits<K>(pass: &mut Pass<'_, K>, outcome: Outcome) -> Result<Cleanup>
where
    K: Kind,
    K::Status: SyncedStatus,
{
    let wait = pass
        .ctx
        .rate_limits
        .deletion_wait(&pass.uid, &outcome, pass.retry());
    let shown = Outcome {
        rate_limited: None,
        ..outcome
    };
    write_outcome(pass, shown).await?;
    Ok(Cleanup::WaitFor(wait))
}

async fn publish<K: Resource<DynamicType = ()>>(ctx: &Context, object: &K, transitions: Vec<Transition>) {
    for (type_, reason, note) in transitions {
        let event = Event {
            type_,
            reason,
            note: Some(note),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(error) = ctx.k8s.recorder.publish(&event, &object.object_ref(&())).await {
            tracing::debug!(%error, "publishing an Event failed");
        }
    }
}
