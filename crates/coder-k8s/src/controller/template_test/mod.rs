//! CoderTemplateTest (docs/controllers/template-test.md): the pure core — the workspace name, deadline, policy and
//! intervals (`names`), the status from each step (`status`), the decisions over Coder's answers (`phase`) and the
//! delete step (`cleanup`) — and the I/O shell: `reconcile` (the pass, the status write, the TTL, the finalizer),
//! `inputs` (the control plane, owner, template and version) and `workspace` (create, confirm, readiness, delete,
//! cleanup). `run` wires the controller; a change of the control plane reconciles its tests, so a cleanup that
//! waits for Coder resumes at once.

/// Ends a step function early with the step of a failed lookup.
macro_rules! take {
    ($flow:expr) => {
        match $flow {
            Ok(value) => value,
            Err(step) => return step,
        }
    };
}

pub mod cleanup;
mod inputs;
pub mod names;
pub mod phase;
pub mod reconcile;
pub mod status;
mod workspace;

use std::future::Future;
use std::sync::Arc;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::template_test::{CoderTemplateTest, FINALIZER};

use crate::controller::cache::Fingerprint;
use crate::controller::context::Context;
use crate::controller::runner::{self, Kind, Steps};
use crate::controller::triggers::{TriggerSet, access_fingerprint};

impl Kind for CoderTemplateTest {
    const KIND: &'static str = "CoderTemplateTest";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
}

/// What of a control plane its tests read: where it is, its operator access, its template-test settings, whether
/// it is being deleted.
fn control_plane_fingerprint(cp: &CoderControlPlane) -> Fingerprint {
    access_fingerprint(cp, &cp.spec.template_tests)
}

/// Runs the CoderTemplateTest controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let caches = &ctx.caches;
    let triggers = TriggerSet::new(&ctx, caches.template_tests.store())
        .control_planes(control_plane_fingerprint)
        .build();
    let steps = Steps {
        apply: |test, ctx| Box::pin(reconcile::apply_spec(test, ctx)),
        cleanup: |test, ctx| Box::pin(reconcile::cleanup(test, ctx)),
    };
    runner::run(
        ctx.clone(),
        caches.template_tests.clone(),
        triggers,
        steps,
        shutdown,
    )
    .await;
}
