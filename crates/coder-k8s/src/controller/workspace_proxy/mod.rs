//! CoderWorkspaceProxy (docs/controllers/workspace-proxy.md): the pure core — names, URLs and desired objects
//! (`desired`) — and the I/O shell (`reconcile`). `run` wires the controller. A workspace proxy has no finalizer.

pub mod desired;
pub mod reconcile;
pub mod status;

use std::future::Future;
use std::sync::Arc;

use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::controller::cache::every_change;
use crate::controller::context::Context;
use crate::controller::control_plane::deployment_fingerprint;
use crate::controller::runner::{self, Cleanup, Kind, Steps};
use crate::controller::triggers::{self, owner, readers};

impl Kind for CoderWorkspaceProxy {
    const KIND: &'static str = "CoderWorkspaceProxy";
    const FINALIZER: Option<&'static str> = None;
}

fn secret_targets(
    store: &Store<CoderWorkspaceProxy>,
    secret: &PartialObjectMeta<Secret>,
) -> Vec<ObjectRef<CoderWorkspaceProxy>> {
    let mut targets = owner(store, secret);
    targets.extend(readers(store, secret, reconcile::reads_secret));
    targets
}

/// Runs the CoderWorkspaceProxy controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let caches = &ctx.caches;
    let store = caches.workspace_proxies.store().clone();
    let echoes = &ctx.echoes;
    let triggers = vec![
        triggers::from(
            &caches.deployments,
            echoes,
            "Deployment",
            deployment_fingerprint,
            store.clone(),
            owner,
        ),
        triggers::owned(&caches.services, echoes, &store),
        triggers::from(
            caches.secrets.metadata(),
            echoes,
            "Secret",
            every_change,
            store,
            secret_targets,
        ),
    ];
    let steps = Steps {
        apply: |proxy, ctx| Box::pin(reconcile::apply_spec(proxy, ctx)),
        cleanup: |_, _| Box::pin(async { Ok(Cleanup::Done) }),
    };
    runner::run(
        ctx.clone(),
        ctx.caches.workspace_proxies.clone(),
        triggers,
        steps,
        shutdown,
    )
    .await;
}
