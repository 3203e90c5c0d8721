//! CoderAIGatewayKey (docs/controllers/ai-gateway-key.md), wired: `inputs` (the control plane and its opt-in, the
//! output Secret, the operator client) → `desired` (the settings and the key decisions, pure) → `status` (the
//! outcomes, pure) → `reconcile` (the pass and the finalizer) with `coder` (the key calls). A change of the control
//! plane (its opt-in, its operator access) or of the output Secret reconciles the object.

pub mod coder;
pub mod desired;
pub mod inputs;
pub mod reconcile;
pub mod status;

use std::sync::Arc;

use coder_k8s_api::ai_gateway_key::{CoderAIGatewayKey, FINALIZER};
use coder_k8s_api::control_plane::CoderControlPlane;

use crate::cache::{Fingerprint, Informer};
use crate::k8s::Caches;
use crate::kind::Kind;
use crate::runner::{Controller, steps};
use crate::status_writer::write_outcome;
use crate::triggers::{RefersToControlPlane, TriggerSet, access_fingerprint};

impl Kind for CoderAIGatewayKey {
    const KIND: &'static str = "CoderAIGatewayKey";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    type Memory = ();

    fn cache(caches: &Caches) -> &Arc<Informer<Self>> {
        &caches.ai_gateway_keys
    }
}

impl Controller for CoderAIGatewayKey {
    type Outcome = status::Outcome;

    fn triggers(triggers: TriggerSet<Self>, _: &Caches) -> TriggerSet<Self> {
        triggers
            .secrets(reads_secret)
            .control_planes(control_plane_fingerprint)
    }

    steps!(reconcile: reconcile::reconcile, settle: write_outcome, cleanup: reconcile::cleanup);
}

impl RefersToControlPlane for CoderAIGatewayKey {
    fn control_plane_name(&self) -> &str {
        &self.spec.control_plane_ref.name
    }
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
