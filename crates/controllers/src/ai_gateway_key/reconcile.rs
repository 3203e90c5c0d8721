//! The CoderAIGatewayKey reconcile (docs/controllers/ai-gateway-key.md): dereference the control plane (its
//! `allowKeys` opt-in first, so a refused object makes no Coder call) and the output Secret → validate the settings
//! → decide whether a key is needed → the operator client → resolve a key whose create answer was lost, delete
//! replaced keys past their grace period → when a key is needed: read the deployment ID, write the cleanup record,
//! mark the key pending, create it, store it in the Secret → status. At rest nothing is read from or written to
//! Coder; the next pass is due at the rotation or a grace end.

use coder_k8s_api::ai_gateway_key::{CoderAIGatewayKey, key_name_prefix, reasons};
use coder_k8s_api::shared::SecretKeySelector;
use coder_k8s_coder_client::CoderClient;
use k8s_openapi::api::core::v1::Secret;

use super::desired::{self, KeySettings};
use super::status::{self, Outcome, secret_not_owned};
use super::{coder, inputs};
use crate::cleanup_records::record::{Created, Record, RecordKind};
use crate::cleanup_records::{self, reached_deployment, write_before_create};
use crate::error::Result;
use crate::halt::{Halt, settle};
use crate::kind::Cleanup;
use crate::owned_secret::OwnedSecret;
use crate::pass::Pass;
use crate::refusal::Refusal;
use crate::secrets;
use crate::status_writer::{self, deletion_waits};
use crate::sync_status::outcomes;
use crate::upstream::{Unreachable, operator_client};

type KeyPass<'p> = Pass<'p, CoderAIGatewayKey>;

/// One pass over a live object.
pub async fn reconcile(pass: &mut KeyPass<'_>) -> Result<Outcome, Halt<Outcome>> {
    pass.ctx.rate_limits.gate(&pass.uid)?;
    let settings = desired::settings(&pass.name(), &pass.object.spec)
        .or_else(|message| settle(Outcome::stalled(reasons::REJECTED, message)))?;
    inputs::control_plane_allows_keys(pass)?;
    let secret = inputs::output_secret(pass, &settings).await?;
    let holds_key = secrets::value(secret.as_deref(), &settings.secret_key).is_some_and(|v| !v.is_empty());
    let needs_key = desired::needs_key(&pass.status, holds_key, settings.rotation_interval, pass.now);
    let housekeeping =
        pass.status.pending_key.is_some() || !desired::expired(&pass.status, pass.now).is_empty();
    if needs_key || housekeeping {
        let upstream = inputs::upstream(pass).await?;
        // A serial is never used twice, also not the one of a lost create that tidying forgets.
        let serial = desired::next_serial(&pass.status);
        coder::tidy(pass, &upstream.coder).await?;
        if needs_key {
            create_key(pass, &upstream.coder, serial, &settings, secret.as_deref()).await?;
        }
    }
    let next_wake = desired::next_wake(&pass.status, settings.rotation_interval, pass.now);
    Ok(status::at_rest(&pass.status, &settings.secret_name, next_wake))
}

/// Creates a new key and stores it: deployment check, cleanup record, pending marker (written before the create),
/// create, Secret, status.
async fn create_key(
    pass: &mut KeyPass<'_>,
    client: &CoderClient,
    serial: i64,
    settings: &KeySettings,
    live_secret: Option<&Secret>,
) -> Result<(), Halt<Outcome>> {
    let deployment = reached_deployment(client, pass.status.coder_deployment_id.as_deref()).await?;
    write_before_create(pass.ctx, &record(pass, &deployment)).await?;
    let pending = desired::pending(&pass.uid, serial, pass.now);
    let name = pending.name.clone();
    pass.status.pending_key = Some(pending);
    pass.status.coder_deployment_id = Some(deployment);
    pass.status.observed_generation = pass.generation();
    // The marker is stored before the create: a lost answer leaves a name the next pass finds and deletes.
    status_writer::write(pass, Vec::new()).await?;
    let (created, key) = coder::create(client, &name, serial, pass.now).await?;
    let secret = OwnedSecret {
        name: &settings.secret_name,
        labels: crate::labels::labels(desired::APP, &pass.name()),
        annotations: Default::default(),
        key: &settings.secret_key,
        value: key.expose().as_bytes(),
    };
    if secret.store(pass.ctx, pass.object, live_secret).await?.is_none() {
        // The new key stays pending: the next pass deletes it.
        return settle(secret_not_owned(&settings.secret_name));
    }
    desired::rotate(&mut pass.status, created, settings.grace_period, pass.now);
    pass.status.secret_ref = Some(SecretKeySelector {
        name: settings.secret_name.clone(),
        key: Some(settings.secret_key.clone()),
    });
    Ok(())
}

/// The cleanup record written before a create: the keys named with this object's prefix, in `deployment`.
fn record(pass: &KeyPass<'_>, deployment: &str) -> Record {
    Record {
        kind: RecordKind::AIGatewayKey,
        namespace: pass.namespace(),
        name: pass.name(),
        uid: pass.uid.clone(),
        deployment_id: deployment.to_owned(),
        created: Created::KeyPrefix(key_name_prefix(&pass.uid)),
    }
}

/// The finalizer: every key of the object is deleted in Coder, then its cleanup record; without a reachable
/// deployment the finalizer goes without a delete and the record stays for the sweep.
pub async fn cleanup(pass: &mut KeyPass<'_>) -> Result<Cleanup> {
    let (ctx, uid) = (pass.ctx, pass.uid.clone());
    if desired::never_created(&pass.status) && cleanup_records::cached(ctx, &uid).await.is_none() {
        return Ok(Cleanup::Done);
    }
    if let Some(wait) = ctx.rate_limits.cleanup_gate(&uid) {
        return Ok(wait);
    }
    let keys = format!("the AI Gateway keys named {}*", key_name_prefix(&uid));
    let cp_name = pass.object.spec.control_plane_ref.name.clone();
    let upstream = match operator_client(ctx, &pass.namespace(), &cp_name).await {
        Ok(upstream) => upstream,
        Err(Unreachable::Refused(refusal)) => return refused(pass, &keys, &cp_name, &refusal).await,
        Err(Unreachable::Failed(error)) => return Err(error),
    };
    let deployment = match cleanup_records::deployment_id(&upstream.coder).await {
        Ok(deployment) => deployment,
        Err(error) => return waits(pass, &keys, outcomes::buildinfo_failed(&error)).await,
    };
    let recorded = pass.status.coder_deployment_id.clone();
    if outcomes::deployment_changed(recorded.as_deref(), &deployment).is_some() {
        let recorded = recorded.unwrap_or_default();
        let stays =
            format!("{keys} stay in Coder deployment {recorded}; the control plane now reaches {deployment}");
        return Ok(released(pass, &stays));
    }
    if let Err(error) = coder::delete_every_key(&upstream.coder, &uid).await {
        return waits(
            pass,
            &keys,
            status::coder_failed("delete the AI Gateway keys", &error),
        )
        .await;
    }
    cleanup_records::remove(ctx, &uid).await?;
    Ok(Cleanup::Done)
}

/// The control plane refuses: gone, the keys can stay in Coder (the record stays for the sweep); else the finalizer
/// waits.
async fn refused(pass: &mut KeyPass<'_>, keys: &str, cp_name: &str, refusal: &Refusal) -> Result<Cleanup> {
    if refusal.is_control_plane_missing() {
        let stays = format!(
            "{keys} can stay in Coder (CoderControlPlane {cp_name} is gone); the cleanup record stays for the sweep"
        );
        return Ok(released(pass, &stays));
    }
    waits(pass, keys, outcomes::refused(cp_name, refusal)).await
}

fn released(pass: &KeyPass<'_>, stays: &str) -> Cleanup {
    let object = format!("{}/{}", pass.namespace(), pass.name());
    cleanup_records::released_without_delete(pass.ctx, RecordKind::AIGatewayKey, &object, stays);
    Cleanup::Done
}

async fn waits(pass: &mut KeyPass<'_>, keys: &str, why: Outcome) -> Result<Cleanup> {
    deletion_waits(pass, outcomes::deleting(keys, &why)).await
}
