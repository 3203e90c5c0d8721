//! CoderWorkspaceProxy (docs/controllers/workspace-proxy.md): the pure core — names, labels and URLs (`names`), the
//! desired objects (`desired`), the registration and condition decisions (`status`) — and the I/O shell
//! (`reconcile`). `run` wires the controller. A workspace proxy has no finalizer.

pub mod desired;
pub mod names;
pub mod reconcile;
pub mod status;

use std::future::Future;
use std::sync::Arc;

use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;

use crate::controller::context::Context;
use crate::controller::runner::{self, Cleanup, Kind, Steps};
use crate::controller::triggers::TriggerSet;

impl Kind for CoderWorkspaceProxy {
    const KIND: &'static str = "CoderWorkspaceProxy";
    const FINALIZER: Option<&'static str> = None;
}

/// Runs the CoderWorkspaceProxy controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let caches = &ctx.caches;
    let triggers = TriggerSet::new(&ctx, caches.workspace_proxies.store())
        .deployments()
        .owned(&caches.services)
        .secrets(reconcile::reads_secret)
        .build();
    let steps = Steps {
        apply: |proxy, ctx| Box::pin(reconcile::apply_spec(proxy, ctx)),
        cleanup: |_, _| Box::pin(async { Ok(Cleanup::Done) }),
    };
    runner::run(
        ctx.clone(),
        caches.workspace_proxies.clone(),
        triggers,
        steps,
        shutdown,
    )
    .await;
}
