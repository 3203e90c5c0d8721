//! The CoderProvisioner reconcile (docs/controllers/provisioner.md): dereference the control plane and its operator
//! token (control-plane access) → validate the entitlement and the credential Secrets → the provisioner key (from
//! the pure key plan) → build and apply the ServiceAccount, Role, RoleBinding and Deployment → status. A provisioner
//! whose recorded key still matches its inputs and whose key Secret holds the key makes no Coder call.

use std::time::Duration;

use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_api::shared::WorkloadPhase;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;

use super::coder::{self, annotated_key_id, delete_proven_key, unproven_key_stays};
use super::desired::{self, Inputs, ProvisionerNames};
use super::inputs;
use super::status::{self as decide, Outcome};
use crate::apply::Owned;
use crate::conditions::deployment_ready;
use crate::error::{Error, Result};
use crate::halt::Halt;
use crate::kind::Cleanup;
use crate::pass::Pass;
use crate::status_writer;
use crate::upstream::{Upstream, operator_client};

type ProvisionerPass<'p> = Pass<'p, CoderProvisioner>;

/// One pass over a live provisioner.
pub async fn reconcile(pass: &mut ProvisionerPass<'_>) -> Result<Outcome, Halt<Outcome>> {
    pass.status.phase = Some(decide::phase_before_gates(pass.status.phase));
    let names = desired::names(&pass.name(), &pass.object.spec);
    let upstream = inputs::upstream(pass).await?;
    inputs::entitled(pass, &upstream).await?;
    // The Deployment is not changed while a credential is refused.
    inputs::credentials_ready(pass, &names, &upstream.target.pod_url)?;
    let key = coder::key(pass, &upstream, &names).await?;
    let (ready, when_ready) = apply_objects(pass, &upstream, &key).await?;
    pass.status.ready_replicas = Some(ready);
    pass.set(deployment_ready(ready, "the provisioner Deployment"));
    if ready > 0 {
        // Nothing of a Ready provisioner is polled per object: its owned objects and Secrets are watched, and the
        // entitlement is the control plane's, whose own poll changes its status and so wakes its provisioners.
        pass.status.phase = Some(WorkloadPhase::Ready);
        return Ok(when_ready);
    }
    pass.status.phase = Some(WorkloadPhase::Pending);
    Ok(Outcome::after(pass.retry()))
}

/// Applies the ServiceAccount, Role, RoleBinding and Deployment, except those of the same names the provisioner
/// does not control (`ResourcesOwned`); returns the Deployment's ready replicas and when a Ready provisioner is
/// looked at again ([`Owned::when_ready`]).
async fn apply_objects(
    pass: &mut ProvisionerPass<'_>,
    upstream: &Upstream,
    key: &str,
) -> Result<(i32, Outcome), Error> {
    let inputs = Inputs {
        control_plane_url: upstream.target.pod_url.clone(),
        control_plane_image: Some(upstream.control_plane.spec.image.clone()),
        key_checksum: desired::key_checksum(key),
    };
    let desired = desired::desired_state(pass.object, &inputs).ok_or(Error::MissingMetadata)?;
    let (ctx, mut owned) = (pass.ctx, Owned::default());
    let caches = &ctx.k8s.caches;
    owned
        .apply(ctx, &caches.service_accounts, desired.service_account)
        .await?;
    owned.apply(ctx, &caches.roles, desired.role).await?;
    owned
        .apply(ctx, &caches.role_bindings, desired.role_binding)
        .await?;
    let ready = owned.deployment(ctx, desired.deployment).await?;
    owned.report(pass);
    Ok((ready, owned.when_ready(pass.retry())))
}

/// Writes the status when it changed and requeues.
pub async fn settle(pass: &mut ProvisionerPass<'_>, outcome: Outcome) -> Result<Action> {
    pass.status.observed_generation = pass.generation();
    // Compared with what this provisioner really has: a pass that wrote the create marker has already changed it,
    // and the status memo must chain this write to that one, or a wake-up before the cache catches up would start
    // from the marker alone and write the rate-limit condition away.
    status_writer::write(pass, Vec::new()).await?;
    if pass.status.provisioner_key_id.is_some() {
        // The recorded ID is now the proof of ownership; the note of a key created here is no longer needed (the
        // status marker was cleared in this write, see `coder::key`).
        pass.remember(|memory| memory.created_key = None);
    }
    Ok(outcome.action())
}

/// Best-effort key deletion (v0.1.5): by the recorded organization and the key ID the key Secret records (the
/// status's ID alone proves nothing); no Coder call without them; the finalizer is always released in the end, and a
/// failure or a key left in Coder is logged with the fact that the key stays valid. Retryable answers are retried
/// within the cleanup window.
pub async fn cleanup(pass: &mut ProvisionerPass<'_>) -> Result<Cleanup> {
    let p = pass.object;
    let status = p.status.clone().unwrap_or_default();
    if status.provisioner_key_id.is_none() || status.organization_id.is_none() {
        return Ok(Cleanup::Done);
    }
    let names: ProvisionerNames = desired::names(&pass.name(), &p.spec);
    let secret = pass.ctx.k8s.secret(&pass.namespace(), &names.key_secret).await?;
    let Some(key_id) = annotated_key_id(secret.as_deref(), &pass.uid) else {
        unproven_key_stays(p, &status);
        return Ok(Cleanup::Done);
    };
    let failure = match operator_client(pass.ctx, &pass.namespace(), &p.spec.control_plane_ref.name).await {
        Ok(upstream) => match delete_proven_key(&upstream.coder, &status, &key_id).await {
            Ok(()) => None,
            Err(error)
                if error.is_retryable() && deleting_for(p) < pass.ctx.settings.cleanup_retry_window =>
            {
                // Only Coder's own 404 proves the key is gone; a proxy's 404 or an outage is retried for a while.
                tracing::info!(name = %pass.name(), %error, "retrying the provisioner key delete");
                let wait = pass
                    .ctx
                    .rate_limits
                    .after(&pass.uid, &error, Duration::from_secs(2));
                return Ok(Cleanup::WaitFor(wait));
            }
            Err(error) => Some(error.to_string()),
        },
        Err(crate::upstream::Unreachable::Refused(_)) => {
            Some("the control plane or its operator token is not available".to_owned())
        }
        Err(crate::upstream::Unreachable::Failed(error)) => Some(error.to_string()),
    };
    if let Some(reason) = failure {
        tracing::warn!(
            name = %pass.name(),
            namespace = ?p.metadata.namespace,
            organization_id = ?status.organization_id,
            provisioner_key_id = ?status.provisioner_key_id,
            %reason,
            "could not delete the provisioner key in Coder; releasing the finalizer anyway, and the key stays valid in Coder (delete it with `coder provisioner keys delete`)"
        );
    }
    Ok(Cleanup::Done)
}

fn deleting_for(p: &CoderProvisioner) -> Duration {
    p.metadata
        .deletion_timestamp
        .as_ref()
        .and_then(|t| Duration::try_from(Timestamp::now().duration_since(t.0)).ok())
        .unwrap_or_default()
}
