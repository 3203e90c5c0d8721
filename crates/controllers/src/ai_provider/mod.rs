//! CoderAIProvider (docs/controllers/ai-provider.md), wired: `inputs` (the control plane, the Secret values, the
//! operator's records of the object, its memory) → `desired` (the provider the spec asks for, how Coder's differs,
//! what proves it is the object's; pure) → `status` (the outcomes, pure) → `reconcile` (the pass and the
//! finalizer) with `coder` (find, create, patch, delete). A change of the control plane or of a Secret the spec
//! reads reconciles the object.

pub mod coder;
pub mod desired;
pub mod inputs;
pub mod reconcile;
pub mod status;

use std::sync::Arc;

use coder_k8s_api::ai_provider::{CoderAIProvider, FINALIZER};
use coder_k8s_api::control_plane::CoderControlPlane;

use crate::cache::{Fingerprint, Informer};
use crate::k8s::Caches;
use crate::kind::Kind;
use crate::runner::{Controller, steps};
use crate::status_writer::write_outcome;
use crate::triggers::{RefersToControlPlane, TriggerSet, access_fingerprint};

impl Kind for CoderAIProvider {
    const KIND: &'static str = "CoderAIProvider";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    type Memory = inputs::Memory;

    fn cache(caches: &Caches) -> &Arc<Informer<Self>> {
        &caches.ai_providers
    }
}

impl Controller for CoderAIProvider {
    type Outcome = status::Outcome;

    fn triggers(triggers: TriggerSet<Self>, _: &Caches) -> TriggerSet<Self> {
        triggers
            .secrets(reads_secret)
            .control_planes(control_plane_fingerprint)
    }

    steps!(reconcile: reconcile::reconcile, settle: write_outcome, cleanup: reconcile::cleanup);
}

impl RefersToControlPlane for CoderAIProvider {
    fn control_plane_name(&self) -> &str {
        &self.spec.control_plane_ref.name
    }
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
