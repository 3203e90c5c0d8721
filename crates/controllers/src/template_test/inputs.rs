//! What a CoderTemplateTest pass reads (docs/controllers/template-test.md): the control plane and a Coder client
//! with its operator token (a gone control plane ends a run that may have a workspace), and what the pass derives
//! from the object: its workspace name and the controller's intervals.

use std::sync::Arc;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::template_test::{CoderTemplateTest, CoderTemplateTestStatus, reasons};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_control_plane_access::AccessError;

use super::desired::{self, Timings};
use super::status::{self as decide, Outcome};
use crate::conditions::ConditionStatus;
use crate::error::Error;
use crate::pass::Pass;
use crate::refusal::Refusal;
use crate::upstream::{Unreachable, operator_client};

pub type TestPass<'p> = Pass<'p, CoderTemplateTest>;
pub type Status = CoderTemplateTestStatus;

/// The test's workspace: `ktt-` and 28 hex characters of the object's UID (checked when the pass began).
pub fn workspace(pass: &TestPass<'_>) -> String {
    desired::workspace_name(&pass.uid).unwrap_or_default()
}

/// The controller's intervals, from the shared retry interval.
pub fn timings(pass: &TestPass<'_>) -> Timings {
    Timings::from_retry_interval(pass.retry())
}

/// Whether the test's Coder can be reached through its control plane.
pub enum Reach {
    /// A Coder client with the operator token, and the control plane.
    Ready(CoderClient, Arc<CoderControlPlane>),
    /// Not now (or, for a run that may have a workspace, `ControlPlaneGone`): the outcome says why.
    Waits(Outcome),
}

/// The control plane and a Coder client with its operator token, or the wait (or `ControlPlaneGone`) that says
/// why not.
pub async fn upstream(pass: &TestPass<'_>) -> Result<Reach, Error> {
    let (namespace, cp_name) = (pass.namespace(), pass.object.spec.control_plane_ref.name.as_str());
    let not_ready = |message: String| {
        Ok(Reach::Waits(Outcome::wait(
            reasons::CONTROL_PLANE_NOT_READY,
            message,
        )))
    };
    let Some(control_plane) = pass.ctx.k8s.caches.control_planes.get(&namespace, cp_name) else {
        if decide::may_have_workspace(&pass.status) {
            let gone =
                format!("CoderControlPlane {cp_name} is gone, so the workspace can no longer be reached.");
            let step = Outcome::fail(reasons::CONTROL_PLANE_GONE, gone);
            return Ok(Reach::Waits(
                step.with_deleted(ConditionStatus::Unknown, reasons::CONTROL_PLANE_GONE),
            ));
        }
        return not_ready(format!("CoderControlPlane {cp_name} does not exist."));
    };
    if control_plane.metadata.deletion_timestamp.is_some() {
        return not_ready(format!("CoderControlPlane {cp_name} is being deleted."));
    }
    match operator_client(pass.ctx, &namespace, cp_name).await {
        Ok(upstream) => Ok(Reach::Ready(upstream.coder, upstream.control_plane)),
        Err(Unreachable::Failed(error)) => Err(error),
        Err(Unreachable::Refused(refusal)) => Ok(Reach::Waits(refused(cp_name, &refusal))),
    }
}

/// The wait of a control plane whose operator access refuses the test.
fn refused(cp_name: &str, refusal: &Refusal) -> Outcome {
    let not_ready = |message: String| Outcome::wait(reasons::CONTROL_PLANE_NOT_READY, message);
    let no_access = |message: String| Outcome::wait(reasons::OPERATOR_ACCESS_NOT_READY, message);
    match refusal {
        refusal if refusal.is_control_plane_missing() => {
            not_ready(format!("CoderControlPlane {cp_name} has no status.url yet."))
        }
        Refusal::Access(AccessError::ClientUnusable) => {
            not_ready(format!("CoderControlPlane {cp_name} has no usable Coder URL."))
        }
        Refusal::Access(AccessError::TokenSecretUnavailable { .. }) | Refusal::TokenSecretNotOwned { .. } => {
            no_access(format!(
                "The operator token Secret of CoderControlPlane {cp_name} has no token yet."
            ))
        }
        Refusal::Access(_) => no_access(format!("CoderControlPlane {cp_name} has no operator access yet.")),
    }
}
