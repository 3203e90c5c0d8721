//! CoderProvisioner (docs/controllers/provisioner.md): the pure core — names and labels (`names`), the desired
//! objects (`desired`), the condition and key decisions (`status`) — and the I/O shell (`reconcile`). `run` wires
//! the controller.

pub mod desired;
pub mod names;
pub mod reconcile;
pub mod status;

use std::future::Future;
use std::sync::Arc;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::provisioner::{CoderProvisioner, FINALIZER};

use crate::controller::cache::Fingerprint;
use crate::controller::context::Context;
use crate::controller::runner::{self, Kind, Steps};
use crate::controller::triggers::{TriggerSet, access_fingerprint};

impl Kind for CoderProvisioner {
    const KIND: &'static str = "CoderProvisioner";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
}

/// What of a control plane its provisioners read: where it is, its operator access, its entitlement, its image.
fn control_plane_fingerprint(cp: &CoderControlPlane) -> Fingerprint {
    access_fingerprint(
        cp,
        &(
            &cp.status
                .as_ref()
                .and_then(|s| s.external_provisioner_daemons_entitlement),
            &cp.spec.image,
        ),
    )
}

/// Whether the provisioner reads the Secret `name`: its extraEnv credentials, or the control plane's operator token
/// (every provisioner of the namespace is offered the change; the ones that do not use it find nothing to do).
fn reads_secret(p: &CoderProvisioner, name: &str) -> bool {
    crate::controller::credentials::secret_refs(&p.spec.extra_env)
        .iter()
        .any(|s| s == name)
        || name.ends_with("-operator-token")
}

/// Runs the CoderProvisioner controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let caches = &ctx.caches;
    let triggers = TriggerSet::new(&ctx, caches.provisioners.store())
        .deployments()
        .owned(&caches.service_accounts)
        .owned(&caches.roles)
        .owned(&caches.role_bindings)
        .secrets(reads_secret)
        .control_planes(control_plane_fingerprint)
        .build();
    let steps = Steps {
        apply: |p, ctx| Box::pin(reconcile::apply_spec(p, ctx)),
        cleanup: |p, ctx| Box::pin(reconcile::cleanup(p, ctx)),
    };
    runner::run(
        ctx.clone(),
        caches.provisioners.clone(),
        triggers,
        steps,
        shutdown,
    )
    .await;
}
