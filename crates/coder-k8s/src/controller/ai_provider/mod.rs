//! CoderAIProvider (docs/controllers/ai-provider.md): the pure core — the provider the spec asks for and how Coder's
//! differs (`desired`), the outcomes (`status`) — and the I/O shell (`reconcile`). `run` wires the controller: a
//! change of the control plane or of a Secret the spec reads reconciles the object.

pub mod desired;
pub mod reconcile;
pub mod status;

use std::future::Future;
use std::sync::Arc;

use coder_k8s_api::ai_provider::{CoderAIProvider, FINALIZER};
use coder_k8s_api::control_plane::CoderControlPlane;

use crate::controller::cache::Fingerprint;
use crate::controller::context::Context;
use crate::controller::runner::{self, Kind, Steps};
use crate::controller::triggers::{TriggerSet, access_fingerprint};

impl Kind for CoderAIProvider {
    const KIND: &'static str = "CoderAIProvider";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
}

/// What of a control plane its providers read: where it is, its operator access, whether it is deleted.
fn control_plane_fingerprint(cp: &CoderControlPlane) -> Fingerprint {
    access_fingerprint(cp, &())
}

/// Whether the provider reads the Secret `name`: an API key, the AWS keys, or the control plane's operator token.
fn reads_secret(provider: &CoderAIProvider, name: &str) -> bool {
    desired::secret_refs(&provider.spec)
        .iter()
        .any(|(secret, _)| secret == name)
        || name.ends_with("-operator-token")
}

/// Runs the CoderAIProvider controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let caches = &ctx.caches;
    let triggers = TriggerSet::new(&ctx, caches.ai_providers.store())
        .secrets(reads_secret)
        .control_planes(control_plane_fingerprint)
        .build();
    let steps = Steps {
        apply: |provider, ctx| Box::pin(reconcile::apply_spec(provider, ctx)),
        cleanup: |provider, ctx| Box::pin(reconcile::cleanup(provider, ctx)),
    };
    runner::run(
        ctx.clone(),
        caches.ai_providers.clone(),
        triggers,
        steps,
        shutdown,
    )
    .await;
}
