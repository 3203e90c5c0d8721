//! CoderProvisioner (docs/controllers/provisioner.md), wired: `inputs` (control-plane access, the entitlement, the
//! credential Secrets, its memory) → `desired` (names, the owned objects, the tags hash, the key plan; pure) →
//! `status` (the conditions, pure) → `reconcile` (the pass, its status write, the finalizer) with `coder` (the
//! provisioner key and the entitlement read), and `autoscale` (replicas from Coder's job queue, pure, with the queue
//! read shared per control plane and organization).

pub mod autoscale;
pub mod coder;
pub mod desired;
pub mod inputs;
pub mod reconcile;
pub mod status;

use std::sync::Arc;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::provisioner::{CoderProvisioner, FINALIZER};

use crate::cache::{Fingerprint, Informer};
use crate::k8s::Caches;
use crate::kind::Kind;
use crate::runner::{Controller, steps};
use crate::triggers::{RefersToControlPlane, TriggerSet, access_fingerprint};

impl Kind for CoderProvisioner {
    const KIND: &'static str = "CoderProvisioner";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    type Memory = inputs::Memory;

    fn cache(caches: &Caches) -> &Arc<Informer<Self>> {
        &caches.provisioners
    }
}

impl Controller for CoderProvisioner {
    type Outcome = status::Outcome;

    fn triggers(triggers: TriggerSet<Self>, caches: &Caches) -> TriggerSet<Self> {
        triggers
            .deployments()
            .owned(&caches.service_accounts)
            .owned(&caches.roles)
            .owned(&caches.role_bindings)
            .owned(&caches.pod_disruption_budgets)
            .secrets(reads_secret)
            .control_planes(control_plane_fingerprint)
    }

    steps!(reconcile: reconcile::reconcile, settle: reconcile::settle, cleanup: reconcile::cleanup);
}

impl RefersToControlPlane for CoderProvisioner {
    fn control_plane_name(&self) -> &str {
        &self.spec.control_plane_ref.name
    }
}

/// What of a control plane its provisioners read: where it is, its operator access, its entitlement, its image.
fn control_plane_fingerprint(cp: &CoderControlPlane) -> Fingerprint {
    let entitlement = cp
        .status
        .as_ref()
        .and_then(|s| s.external_provisioner_daemons_entitlement);
    access_fingerprint(cp, &(&entitlement, &cp.spec.image))
}

/// Whether the provisioner reads the Secret `name`: its extraEnv credentials, or the control plane's operator token
/// (every provisioner of the namespace is offered the change; the ones that do not use it find nothing to do).
fn reads_secret(p: &CoderProvisioner, name: &str) -> bool {
    inputs::spec_secret_refs(&p.spec).iter().any(|s| s == name) || name.ends_with("-operator-token")
}
