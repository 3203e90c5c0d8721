//! The CoderAIProvider reconcile (docs/controllers/ai-provider.md): dereference the control plane and the Secret
//! values → at rest (same generation and Secret values as last synced) no Coder call → the operator client and the
//! deployment ID → find this object's provider (proved by its signed cleanup record, or for an object of the Go
//! operator by its unsigned record and status together; never by the status alone) → create it after writing the
//! cleanup record, or patch only what differs (re-signing the record) → status.

use coder_k8s_api::ai_provider::CoderAIProvider;

use super::coder::{self, Found};
use super::inputs::{self, Inputs, Synced};
use super::status::{self, Outcome};
use crate::cleanup_records::record::RecordKind;
use crate::cleanup_records::{self, reached_deployment};
use crate::error::Result;
use crate::halt::{Halt, settle};
use crate::kind::Cleanup;
use crate::pass::Pass;
use crate::refusal::Refusal;
use crate::status_writer::deletion_waits;
use crate::sync_status::outcomes;
use crate::upstream::{Unreachable, operator_client};

type ProviderPass<'p> = Pass<'p, CoderAIProvider>;

/// One pass over a live object.
pub async fn reconcile(pass: &mut ProviderPass<'_>) -> Result<Outcome, Halt<Outcome>> {
    pass.ctx.rate_limits.gate(&pass.uid)?;
    inputs::control_plane_ready(pass)?;
    let values = inputs::secret_values(pass).await?;
    let inputs = Inputs::read(pass, values).await;
    let synced = Synced {
        generation: pass.generation().unwrap_or_default(),
        secrets_digest: inputs.desired.secrets_digest(),
    };
    let last = pass.memory().synced;
    if pass.status.provider_id.is_some() && last.as_ref() == Some(&synced) {
        return Ok(status::synced(&inputs.desired.name));
    }
    let cp_name = &pass.object.spec.control_plane_ref.name;
    let retry = pass.retry();
    let upstream = operator_client(pass.ctx, &pass.namespace(), cp_name)
        .await
        .map_err(|unreachable| {
            unreachable.settle(|refusal| status::refused(cp_name, &refusal).requeue(retry))
        })?;
    let client = &upstream.coder;
    let deployment = reached_deployment(client, pass.status.coder_deployment_id.as_deref()).await?;
    let status_id = pass.status.provider_id.clone();
    let id = match coder::find(client, &inputs, status_id.as_deref()).await {
        Ok(Found::Ours(live)) => {
            // The Secret values go again unless they are the ones last synced.
            let send_secrets = last.is_none_or(|last| last.secrets_digest != synced.secrets_digest);
            coder::update(pass, client, &inputs, (&live, send_secrets), &deployment).await?
        }
        Ok(Found::Nothing) => coder::create(pass, client, &inputs, &deployment).await?,
        Ok(Found::Foreign) => return settle(status::name_conflict(&inputs.desired.name)),
        Err(error) => return settle(status::coder_failed("look up the provider", &error)),
    };
    pass.status.provider_id = Some(id);
    pass.status.coder_deployment_id = Some(deployment);
    pass.remember(|memory| memory.synced = Some(synced));
    Ok(status::synced(&inputs.desired.name))
}

/// The finalizer: the provider is deleted in Coder, then its cleanup record; without a reachable deployment the
/// finalizer goes without a delete and the record stays for the sweep.
pub async fn cleanup(pass: &mut ProviderPass<'_>) -> Result<Cleanup> {
    let (ctx, uid) = (pass.ctx, pass.uid.clone());
    let inputs = Inputs::read(pass, Vec::new()).await;
    if pass.status.provider_id.is_none()
        && pass.status.coder_deployment_id.is_none()
        && inputs.record.is_none()
    {
        return Ok(Cleanup::Done);
    }
    if let Some(wait) = ctx.rate_limits.cleanup_gate(&uid) {
        return Ok(wait);
    }
    let cp_name = pass.object.spec.control_plane_ref.name.clone();
    let upstream = match operator_client(ctx, &pass.namespace(), &cp_name).await {
        Ok(upstream) => upstream,
        Err(Unreachable::Refused(refusal)) => return refused(pass, &cp_name, &refusal).await,
        Err(Unreachable::Failed(error)) => return Err(error),
    };
    let deployment = match cleanup_records::deployment_id(&upstream.coder).await {
        Ok(deployment) => deployment,
        Err(error) => return waits(pass, outcomes::buildinfo_failed(&error)).await,
    };
    let held = pass
        .status
        .coder_deployment_id
        .clone()
        .or(inputs.record.as_ref().map(|(r, _)| r.deployment_id.clone()));
    if outcomes::deployment_changed(held.as_deref(), &deployment).is_some() {
        return Ok(stays(
            pass,
            &format!("the control plane now reaches Coder deployment {deployment}"),
        ));
    }
    let status_id = pass.status.provider_id.clone();
    if let Err(error) = coder::delete(&upstream.coder, &inputs, status_id.as_deref()).await {
        return waits(pass, status::coder_failed("delete the AI provider", &error)).await;
    }
    cleanup_records::remove(ctx, &uid).await?;
    Ok(Cleanup::Done)
}

/// The control plane refuses: gone, the provider can stay in Coder (the record stays for the sweep); else the
/// finalizer waits.
async fn refused(pass: &mut ProviderPass<'_>, cp_name: &str, refusal: &Refusal) -> Result<Cleanup> {
    if refusal.is_control_plane_missing() {
        return Ok(stays(pass, &format!("CoderControlPlane {cp_name} is gone")));
    }
    waits(pass, outcomes::refused(cp_name, refusal)).await
}

/// The finalizer goes without a delete in Coder, for the reason `why`.
fn stays(pass: &ProviderPass<'_>, why: &str) -> Cleanup {
    let id = pass.status.provider_id.as_deref().unwrap_or("unknown");
    let object = format!("{}/{}", pass.namespace(), pass.name());
    let stays = format!("the provider can stay in the Coder database, provider ID {id} ({why})");
    cleanup_records::released_without_delete(pass.ctx, RecordKind::AIProvider, &object, &stays);
    Cleanup::Done
}

async fn waits(pass: &mut ProviderPass<'_>, why: Outcome) -> Result<Cleanup> {
    let what = format!("the AI provider {:?}", pass.object.coder_name());
    deletion_waits(pass, outcomes::deleting(&what, &why)).await
}
