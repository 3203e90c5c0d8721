//! The CoderProvisioner reconcile (docs/controllers/provisioner.md): dereference the control plane and its operator
//! token (control-plane access) → validate the entitlement and the credential Secrets → the provisioner key (from
//! the pure key plan) → build and apply the ServiceAccount, Role, RoleBinding and Deployment → status. A provisioner
//! whose recorded key still matches its inputs and whose key Secret holds the key makes no Coder call.

use std::time::Duration;

use coder_k8s_api::provisioner::{CoderProvisioner, ProvisionerJobsStatus};
use coder_k8s_api::shared::WorkloadPhase;
use coder_k8s_coder_client::types::jobs::JobStatus;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;

use super::autoscale;
use super::coder::{self, annotated_key_id, delete_proven_key, unproven_key_stays};
use super::desired::{self, Inputs, KeyCleanup, ProvisionerNames};
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
    let replicas = autoscale(pass, &upstream).await;
    let (ready, when_ready) = apply_objects(pass, &upstream, &key, replicas).await?;
    pass.status.ready_replicas = Some(ready);
    pass.status.replicas = Some(replicas.unwrap_or(pass.object.spec.replicas.unwrap_or(1)));
    pass.status.selector = Some(desired::selector(&pass.name()));
    pass.set(deployment_ready(ready, "the provisioner Deployment"));
    if ready > 0 {
        // Nothing of a Ready provisioner is polled per object: its owned objects and Secrets are watched, and the
        // entitlement is the control plane's, whose own poll changes its status and so wakes its provisioners. Only
        // one that asks for it reads Coder's job queue, once per interval (shared with the others of its place).
        pass.status.phase = Some(WorkloadPhase::Ready);
        if pass.object.spec.autoscaling.is_some() {
            pass.soon(pass.ctx.settings.job_queue_interval);
        }
        return Ok(when_ready.at_most(pass.next));
    }
    pass.status.phase = Some(WorkloadPhase::Pending);
    Ok(Outcome::after(pass.retry()))
}

/// Applies the ServiceAccount, Role, RoleBinding, Deployment and PodDisruptionBudget (or removes the budget the spec
/// no longer asks for), except objects of the same names the provisioner does not control (`ResourcesOwned`); returns the Deployment's ready replicas and when a Ready provisioner is
/// looked at again ([`Owned::when_ready`]).
async fn apply_objects(
    pass: &mut ProvisionerPass<'_>,
    upstream: &Upstream,
    key: &str,
    replicas: Option<i32>,
) -> Result<(i32, Outcome), Error> {
    let inputs = Inputs {
        control_plane_url: upstream.target.pod_url.clone(),
        control_plane_image: Some(upstream.control_plane.spec.image.clone()),
        key_checksum: desired::key_checksum(key),
        replicas,
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
    let names = desired::names(&pass.name(), &pass.object.spec);
    let budget = desired.pod_disruption_budget;
    owned
        .apply_or_remove(
            ctx,
            &caches.pod_disruption_budgets,
            &pass.namespace(),
            &names.deployment,
            budget,
            &pass.uid,
        )
        .await?;
    owned.report(pass);
    Ok((ready, owned.when_ready(pass.retry())))
}

/// `spec.autoscaling`: reads Coder's job queue for the provisioner's place (at most once per interval, shared),
/// publishes the jobs its daemons can take in `status.jobs` and the metric, and returns the replicas the queue asks
/// for (`None` when the operator does not set them). A failed read keeps the replicas last set and is retried with the
/// next pass.
async fn autoscale(pass: &mut ProvisionerPass<'_>, upstream: &Upstream) -> Option<i32> {
    let (namespace, name) = (pass.namespace(), pass.name());
    let Some(spec) = pass.object.spec.autoscaling.clone() else {
        pass.status.jobs = None;
        pass.ctx.metrics.forget_provisioner_jobs(&namespace, &name);
        return None;
    };
    let now = std::time::Instant::now();
    let remembered = pass.memory().autoscaled;
    let Some(jobs) = read_queue(pass, upstream, now).await else {
        return spec
            .sets_replicas()
            .then(|| remembered.map(|r| r.replicas))
            .flatten();
    };
    let queue = autoscale::count(&jobs, &pass.object.spec.tags);
    pass.status.jobs = Some(ProvisionerJobsStatus {
        pending: queue.pending,
        running: queue.running,
        observed_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::now(),
        )),
    });
    let (pending, running) = (i64::from(queue.pending), i64::from(queue.running));
    pass.ctx
        .metrics
        .set_provisioner_jobs(&namespace, &name, pending, running);
    if !spec.sets_replicas() {
        pass.remember(|memory| memory.autoscaled = None);
        return None;
    }
    let current = remembered.map_or(pass.object.spec.replicas.unwrap_or(1), |r| r.replicas);
    let scaled = autoscale::replicas(&spec, queue, current, remembered.and_then(|r| r.lower_since), now);
    pass.remember(|memory| memory.autoscaled = Some(scaled));
    if let Some(since) = scaled.lower_since {
        // Looked at again when the delay has passed, not only at the next read.
        let left = autoscale::scale_down_delay(&spec).saturating_sub(now.duration_since(since));
        pass.soon(left.max(Duration::from_secs(1)));
    }
    Some(scaled.replicas)
}

/// The pending and running jobs of the provisioner's place (its control plane and organization): the read another
/// provisioner there made within the interval, or a new one. `None` when Coder could not be read (logged).
async fn read_queue(
    pass: &ProvisionerPass<'_>,
    upstream: &Upstream,
    now: std::time::Instant,
) -> Option<std::sync::Arc<Vec<autoscale::QueuedJob>>> {
    let organization = pass
        .status
        .organization_id
        .clone()
        .unwrap_or_else(|| desired::organization_name(&pass.object.spec).to_owned());
    let place = (
        pass.namespace(),
        pass.object.spec.control_plane_ref.name.clone(),
        organization,
    );
    let interval = pass.ctx.settings.job_queue_interval;
    if let Some(jobs) = pass.ctx.job_queues.fresh(&place, interval, now) {
        return Some(jobs);
    }
    let statuses = [JobStatus::Pending, JobStatus::Running];
    match upstream
        .coder
        .provisioner_jobs(&place.2, &statuses, autoscale::QUEUE_LIMIT)
        .await
    {
        Ok(jobs) => {
            let jobs = jobs.iter().filter_map(autoscale::QueuedJob::of).collect();
            Some(pass.ctx.job_queues.store(place, jobs, interval, now))
        }
        Err(error) => {
            let (name, namespace) = (pass.name(), pass.namespace());
            tracing::warn!(%name, %namespace, error = %error, "reading Coder's provisioner job queue failed; keeping the replicas");
            None
        }
    }
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
///
/// The status is the one this process last wrote when the watch has not shown it yet: a deletion that arrives while
/// a rotation is creating the new key is handled right after that pass, and the cached object may still show the
/// create marker (no key ID). The key ID itself comes from the Secret, so a key recorded there is deleted even when
/// the pass that created it failed before writing the status.
pub async fn cleanup(pass: &mut ProvisionerPass<'_>) -> Result<Cleanup> {
    pass.ctx
        .metrics
        .forget_provisioner_jobs(&pass.namespace(), &pass.name());
    let p = pass.object;
    let status = pass.shown.clone().unwrap_or_default();
    let names: ProvisionerNames = desired::names(&pass.name(), &p.spec);
    let secret = pass.ctx.k8s.secret(&pass.namespace(), &names.key_secret).await?;
    let annotated = annotated_key_id(secret.as_deref(), &pass.uid);
    let (organization_id, key_id) = match desired::key_cleanup(&status, annotated.as_deref()) {
        KeyCleanup::Nothing => return Ok(Cleanup::Done),
        KeyCleanup::Unproven => {
            unproven_key_stays(p, &status);
            return Ok(Cleanup::Done);
        }
        KeyCleanup::Delete {
            organization_id,
            key_id,
        } => (organization_id, key_id),
    };
    let failure = match operator_client(pass.ctx, &pass.namespace(), &p.spec.control_plane_ref.name).await {
        Ok(upstream) => match delete_proven_key(&upstream.coder, organization_id, key_id).await {
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
            %organization_id,
            provisioner_key_id = %key_id,
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
