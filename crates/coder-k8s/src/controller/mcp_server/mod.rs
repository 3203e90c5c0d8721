//! CoderMCPServer (docs/controllers/mcp-server.md): the pure core — the opt-in, credentials, desired config,
//! difference, ownership proof and access change (`names`) and the status from each pass (`status`) — and the I/O
//! shell: `reconcile` (the pass, the status write, the finalizer), `inputs` (the control plane, its operator token,
//! the credential Secrets) and `config` (find, create, patch, kill switch, access, delete in Coder). `run` wires the
//! controller; a change of the control plane or of a credential Secret reconciles the objects that read it.

mod config;
mod inputs;
pub mod names;
pub mod reconcile;
pub mod status;

use std::future::Future;
use std::sync::Arc;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::mcp_server::{CoderMCPServer, FINALIZER};

use crate::controller::cache::Fingerprint;
use crate::controller::context::Context;
use crate::controller::runner::{self, Kind, Steps};
use crate::controller::triggers::{TriggerSet, access_fingerprint};

impl Kind for CoderMCPServer {
    const KIND: &'static str = "CoderMCPServer";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
}

/// What of a control plane its MCP servers read: where it is, its operator access, its opt-in, whether it is being
/// deleted.
fn control_plane_fingerprint(cp: &CoderControlPlane) -> Fingerprint {
    access_fingerprint(cp, &cp.spec.mcp_servers)
}

/// Whether the object reads Secret `name` (a credential of its auth type).
fn reads_secret(server: &CoderMCPServer, name: &str) -> bool {
    names::credential_refs(&server.spec)
        .iter()
        .any(|reference| reference.secret == name)
}

/// Runs the CoderMCPServer controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let caches = &ctx.caches;
    let triggers = TriggerSet::new(&ctx, caches.mcp_servers.store())
        .control_planes(control_plane_fingerprint)
        .secrets(reads_secret)
        .build();
    let steps = Steps {
        apply: |server, ctx| Box::pin(reconcile::apply_spec(server, ctx)),
        cleanup: |server, ctx| Box::pin(reconcile::cleanup(server, ctx)),
    };
    runner::run(ctx.clone(), caches.mcp_servers.clone(), triggers, steps, shutdown).await;
}
