//! CoderMCPServer (docs/controllers/mcp-server.md), wired: `inputs` (the control plane and its operator token, the
//! credential Secrets, the operator's record of the object, its memory) → `desired` (the opt-in, the credentials,
//! the config Coder should hold, the difference, the ownership proof, the access change; pure) → `status` (the
//! outcomes, pure) → `reconcile` (the pass, its status write, the finalizer) with `coder` (find, create, patch, kill
//! switch, access, delete). A change of the control plane or of a credential Secret reconciles the objects that
//! read it; a change in Coder that a settled object waits on is found by the shared `poll`.

pub mod coder;
pub mod desired;
pub mod inputs;
pub mod poll;
pub mod reconcile;
pub mod status;

use std::sync::Arc;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::mcp_server::{CoderMCPServer, FINALIZER};

use crate::cache::{Fingerprint, Informer};
use crate::k8s::Caches;
use crate::kind::Kind;
use crate::runner::{Controller, steps};
use crate::triggers::{RefersToControlPlane, TriggerSet, access_fingerprint};

impl Kind for CoderMCPServer {
    const KIND: &'static str = "CoderMCPServer";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    type Memory = inputs::Memory;

    fn cache(caches: &Caches) -> &Arc<Informer<Self>> {
        &caches.mcp_servers
    }
}

impl Controller for CoderMCPServer {
    type Outcome = status::Outcome;

    fn triggers(triggers: TriggerSet<Self>, _: &Caches) -> TriggerSet<Self> {
        triggers
            .control_planes(control_plane_fingerprint)
            .secrets(reads_secret)
            .polled(poll::triggers)
    }

    steps!(reconcile: reconcile::reconcile, settle: reconcile::settle_outcome, cleanup: reconcile::cleanup);
}

impl RefersToControlPlane for CoderMCPServer {
    fn control_plane_name(&self) -> &str {
        &self.spec.control_plane_ref.name
    }
}

/// What of a control plane its MCP servers read: where it is, its operator access, its opt-in, whether it is being
/// deleted.
fn control_plane_fingerprint(cp: &CoderControlPlane) -> Fingerprint {
    access_fingerprint(cp, &cp.spec.mcp_servers)
}

/// Whether the object reads Secret `name` (a credential of its auth type).
fn reads_secret(server: &CoderMCPServer, name: &str) -> bool {
    desired::credential_refs(&server.spec)
        .iter()
        .any(|reference| reference.secret == name)
}
