//! CoderAIGatewayKey (docs/controllers/ai-gateway-key.md): the pure core — the spec's settings (`names`) and the
//! key decisions (`status`: serials, rotation, grace periods, outcomes) — and the I/O shell (`reconcile`). `run`
//! wires the controller: a change of the control plane (its opt-in, its operator access) or of the output Secret
//! reconciles the object.

pub mod names;
pub mod reconcile;
pub mod status;

use std::future::Future;
use std::sync::Arc;

use coder_k8s_api::ai_gateway_key::{CoderAIGatewayKey, FINALIZER};
use coder_k8s_api::control_plane::CoderControlPlane;

use crate::controller::cache::Fingerprint;
use crate::controller::context::Context;
use crate::controller::runner::{self, Kind, Steps};
use crate::controller::triggers::{TriggerSet, access_fingerprint};

impl Kind for CoderAIGatewayKey {
    const KIND: &'static str = "CoderAIGatewayKey";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
}

/// What of a control plane its keys read: the opt-in, where it is, its operator access, whether it is deleted.
fn control_plane_fingerprint(cp: &CoderControlPlane) -> Fingerprint {
    access_fingerprint(cp, &cp.spec.ai_gateway.as_ref().is_some_and(|g| g.allow_keys))
}

/// Whether the object reads the Secret `name`: the control plane's operator token (every key of the namespace is
/// offered the change; the ones that do not use it find nothing to do). Its own output Secret reaches it as owner.
fn reads_secret(_: &CoderAIGatewayKey, name: &str) -> bool {
    name.ends_with("-operator-token")
}

/// Runs the CoderAIGatewayKey controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let caches = &ctx.caches;
    let triggers = TriggerSet::new(&ctx, caches.ai_gateway_keys.store())
        .secrets(reads_secret)
        .control_planes(control_plane_fingerprint)
        .build();
    let steps = Steps {
        apply: |key, ctx| Box::pin(reconcile::apply_spec(key, ctx)),
        cleanup: |key, ctx| Box::pin(reconcile::cleanup(key, ctx)),
    };
    runner::run(
        ctx.clone(),
        caches.ai_gateway_keys.clone(),
        triggers,
        steps,
        shutdown,
    )
    .await;
}
