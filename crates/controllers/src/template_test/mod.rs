//! CoderTemplateTest (docs/controllers/template-test.md), wired: `inputs` (the control plane and its operator token,
//! the workspace name and intervals) → `desired` (the workspace name, deadline, policy, intervals and the delete
//! step; pure) → `status` (the status from each step, pure) → `reconcile` (the pass, its status write, the TTL, the
//! finalizer) with `coder` (owner, template and version lookups), `workspace` (create, confirm, readiness, delete,
//! cleanup in Coder) and `answers` (what Coder's answers mean for the run, pure). A change of the control plane
//! reconciles its tests, so a cleanup that waits for Coder resumes at once.

pub mod answers;
pub mod coder;
pub mod desired;
pub mod inputs;
pub mod reconcile;
pub mod status;
pub mod workspace;

use std::sync::Arc;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::template_test::{CoderTemplateTest, FINALIZER};

use crate::cache::{Fingerprint, Informer};
use crate::k8s::Caches;
use crate::kind::Kind;
use crate::runner::{Controller, steps};
use crate::triggers::{RefersToControlPlane, TriggerSet, access_fingerprint};

impl Kind for CoderTemplateTest {
    const KIND: &'static str = "CoderTemplateTest";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    type Memory = ();

    fn cache(caches: &Caches) -> &Arc<Informer<Self>> {
        &caches.template_tests
    }
}

impl Controller for CoderTemplateTest {
    type Outcome = status::Outcome;

    fn triggers(triggers: TriggerSet<Self>, _: &Caches) -> TriggerSet<Self> {
        triggers.control_planes(control_plane_fingerprint)
    }

    steps!(reconcile: reconcile::reconcile, settle: reconcile::settle_step, cleanup: reconcile::cleanup);
}

impl RefersToControlPlane for CoderTemplateTest {
    fn control_plane_name(&self) -> &str {
        &self.spec.control_plane_ref.name
    }
}

/// What of a control plane its tests read: where it is, its operator access, its template-test settings, whether
/// it is being deleted.
fn control_plane_fingerprint(cp: &CoderControlPlane) -> Fingerprint {
    access_fingerprint(cp, &cp.spec.template_tests)
}
