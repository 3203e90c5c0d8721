//! The CoderAIGatewayKey reconcile (docs/controllers/ai-gateway-key.md): dereference the control plane (its
//! `allowKeys` opt-in first, so a refused object makes no Coder call) and the output Secret → the operator client →
//! resolve a key whose create answer was lost, delete replaced keys past their grace period → when a key is needed:
//! read the deployment ID, write the cleanup record, mark the key pending, create it, store it in the Secret →
//! status. At rest nothing is read from or written to Coder; the next pass is due at the rotation or a grace end.

use std::sync::Arc;
use std::time::Duration;

use coder_k8s_api::ai_gateway_key::{CoderAIGatewayKey, key_name_prefix, key_serial, reasons};
use coder_k8s_api::shared::SecretKeySelector;
use coder_k8s_coder_client::{CoderClient, found};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::names::{self, KeySettings};
use super::status::{self as decide, NewKey, Status};
use crate::controller::apply::controlled_by;
use crate::controller::cleanup_records::record::{Created, Record, RecordKind};
use crate::controller::cleanup_records::{self, deployment_id};
use crate::controller::context::Context;
use crate::controller::error::{Error, Result};
use crate::controller::owned_secret::{self, OwnedSecret, Written};
use crate::controller::runner::Cleanup;
use crate::controller::secrets;
use crate::controller::status_writer::{
    cleanup_waiting_out_rate_limit, deletion_waits, waiting_out_rate_limit, write_outcome, write_status,
};
use crate::controller::sync_status::{Outcome, outcomes};
use crate::controller::upstream::{Upstream, operator_client};

/// One pass: the object, its settings and the time.
struct Pass<'a> {
    key: &'a CoderAIGatewayKey,
    ctx: &'a Context,
    uid: String,
    settings: KeySettings,
    now: Timestamp,
}

/// One reconcile of a live object.
pub async fn apply_spec(object: Arc<CoderAIGatewayKey>, ctx: Arc<Context>) -> Result<Action> {
    let (key, ctx) = (object.as_ref(), ctx.as_ref());
    let uid = key.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    if let Some(wait) = waiting_out_rate_limit(ctx, &uid) {
        return Ok(wait);
    }
    let before = ctx.statuses.effective(&uid, key.status.as_ref());
    let mut status = before.clone().unwrap_or_default();
    let outcome = match names::settings(&key.name_any(), &key.spec) {
        Ok(settings) => {
            let pass = Pass {
                key,
                ctx,
                uid,
                settings,
                now: Timestamp::now(),
            };
            run(&pass, before.as_ref(), &mut status).await?
        }
        Err(message) => Outcome::stalled(reasons::REJECTED, message),
    };
    Ok(write_outcome(ctx, key, before.as_ref(), status, &outcome).await?)
}

/// The steps of a pass; the outcome says where it stopped.
async fn run(pass: &Pass<'_>, before: Option<&Status>, status: &mut Status) -> Result<Outcome> {
    if let Some(refused) = control_plane_refusal(pass) {
        return Ok(refused);
    }
    let secret = pass
        .ctx
        .caches
        .secrets
        .get(
            &pass.ctx.client,
            &pass.key.namespace().unwrap_or_default(),
            &pass.settings.secret_name,
        )
        .await?;
    if secret
        .as_deref()
        .is_some_and(|s| !controlled_by(&s.metadata, &pass.uid))
    {
        return Ok(secret_not_owned(&pass.settings.secret_name));
    }
    let holds_key =
        secrets::value(secret.as_deref(), &pass.settings.secret_key).is_some_and(|v| !v.is_empty());
    let needs_key = decide::needs_key(status, holds_key, pass.settings.rotation_interval, pass.now);
    let housekeeping = status.pending_key.is_some() || !decide::expired(status, pass.now).is_empty();
    if !needs_key && !housekeeping {
        return Ok(at_rest(pass, status));
    }
    let upstream = match reach(pass).await? {
        Ok(upstream) => upstream,
        Err(outcome) => return Ok(outcome),
    };
    // A serial is never used twice, also not the one of a lost create that tidying forgets.
    let serial = decide::next_serial(status);
    if let Err(outcome) = tidy(pass, &upstream.coder, status).await {
        return Ok(outcome);
    }
    if needs_key
        && let Err(outcome) =
            create_key(pass, &upstream.coder, (before, serial), status, secret.as_deref()).await?
    {
        return Ok(outcome);
    }
    Ok(at_rest(pass, status))
}

/// The control plane's refusal, before any Coder call: missing, being deleted, or without `allowKeys`.
fn control_plane_refusal(pass: &Pass<'_>) -> Option<Outcome> {
    let cp_name = &pass.key.spec.control_plane_ref.name;
    let namespace = pass.key.namespace().unwrap_or_default();
    let Some(cp) = pass.ctx.caches.control_planes.get(&namespace, cp_name) else {
        return Some(outcomes::control_plane_not_ready(cp_name, "does not exist"));
    };
    if cp.metadata.deletion_timestamp.is_some() {
        return Some(outcomes::control_plane_not_ready(cp_name, "is being deleted"));
    }
    let allowed = cp.spec.ai_gateway.as_ref().is_some_and(|g| g.allow_keys);
    (!allowed).then(|| {
        Outcome::stalled(
            reasons::NOT_ALLOWED,
            format!("CoderControlPlane {cp_name} does not allow AI Gateway keys: set spec.aiGateway.allowKeys: true on it."),
        )
    })
}

fn secret_not_owned(secret_name: &str) -> Outcome {
    Outcome::stalled(
        reasons::SECRET_NOT_OWNED,
        format!(
            "Secret {secret_name} exists and this object does not own it; name a Secret that does not exist in spec.secretName."
        ),
    )
}

/// The operator client of the control plane, or the outcome that says why not.
async fn reach(pass: &Pass<'_>) -> Result<std::result::Result<Upstream, Outcome>> {
    let cp_name = &pass.key.spec.control_plane_ref.name;
    let namespace = pass.key.namespace().unwrap_or_default();
    Ok(operator_client(pass.ctx, &namespace, cp_name)
        .await?
        .map_err(|refusal| outcomes::refused(cp_name, &refusal).requeue(pass.ctx.settings.retry_interval)))
}

/// Deletes the key of a lost create answer and the replaced keys past their grace period. Keys are found in
/// Coder's list by the names this object derives from its UID, never by an ID read from the status.
async fn tidy(pass: &Pass<'_>, coder: &CoderClient, status: &mut Status) -> std::result::Result<(), Outcome> {
    let expired = decide::expired(status, pass.now);
    if status.pending_key.is_none() && expired.is_empty() {
        return Ok(());
    }
    let listed = coder
        .ai_gateway_keys()
        .await
        .map_err(|e| decide::coder_failed("list the AI Gateway keys", &e))?;
    let mut doomed: Vec<i64> = expired.iter().map(|k| k.serial).collect();
    doomed.extend(status.pending_key.iter().map(|k| k.serial));
    for listed_key in &listed {
        let serial = key_serial(&pass.uid, &listed_key.name);
        if serial.is_some_and(|s| doomed.contains(&s)) {
            found(coder.delete_ai_gateway_key(listed_key.id).await).map_err(|e| {
                decide::coder_failed(&format!("delete the AI Gateway key {}", listed_key.name), &e)
            })?;
        }
    }
    status.previous_keys.retain(|k| !doomed.contains(&k.serial));
    status.pending_key = None;
    Ok(())
}

/// Creates a new key and stores it: deployment check, cleanup record, pending marker (written before the create),
/// create, Secret, status.
async fn create_key(
    pass: &Pass<'_>,
    coder: &CoderClient,
    (before, serial): (Option<&Status>, i64),
    status: &mut Status,
    live_secret: Option<&k8s_openapi::api::core::v1::Secret>,
) -> Result<std::result::Result<(), Outcome>> {
    let deployment = match deployment_id(coder).await {
        Ok(id) => id,
        Err(e) => {
            return Ok(Err(
                outcomes::buildinfo_failed(&e).requeue(pass.ctx.settings.retry_interval)
            ));
        }
    };
    if let Some(changed) = outcomes::deployment_changed(status.coder_deployment_id.as_deref(), &deployment) {
        return Ok(Err(changed));
    }
    let record = Record {
        kind: RecordKind::AIGatewayKey,
        namespace: pass.key.namespace().unwrap_or_default(),
        name: pass.key.name_any(),
        uid: pass.uid.clone(),
        deployment_id: deployment.clone(),
        created: Created::KeyPrefix(key_name_prefix(&pass.uid)),
    };
    if let Err(error) = cleanup_records::write(pass.ctx, &record).await {
        let namespace = &pass.ctx.settings.operator_namespace;
        return Ok(Err(
            outcomes::record_failed(namespace, &error).requeue(pass.ctx.settings.retry_interval)
        ));
    }
    status.pending_key = Some(decide::pending(&pass.uid, serial, pass.now));
    status.coder_deployment_id = Some(deployment);
    status.observed_generation = pass.key.metadata.generation;
    // The marker is stored before the create: a lost answer leaves a name the next pass finds and deletes.
    write_status(pass.ctx, pass.key, before, status, Vec::new()).await?;
    let name = decide::pending(&pass.uid, serial, pass.now).name;
    let created = match coder.create_ai_gateway_key(&name).await {
        Ok(created) => created,
        Err(e) => return Ok(Err(decide::coder_failed("create the AI Gateway key", &e))),
    };
    let secret = OwnedSecret {
        name: &pass.settings.secret_name,
        labels: crate::controller::labels::labels(names::APP, &pass.key.name_any()),
        annotations: Default::default(),
        key: &pass.settings.secret_key,
        value: created.key.expose().as_bytes(),
    }
    .build(pass.key)
    .ok_or(Error::MissingMetadata)?;
    match owned_secret::write(pass.ctx, secret, live_secret).await? {
        Written::Stored(stored) => pass.ctx.caches.secrets.wrote(*stored),
        // The new key stays pending: the next pass deletes it.
        Written::Foreign => return Ok(Err(secret_not_owned(&pass.settings.secret_name))),
    }
    let created_at = created.created_at.parse::<Timestamp>().unwrap_or(pass.now);
    let new_key = NewKey {
        id: created.id.to_string(),
        name: created.name,
        serial,
        key_prefix: created.key_prefix,
        created_at,
    };
    decide::rotate(status, new_key, pass.settings.grace_period, pass.now);
    status.secret_ref = Some(SecretKeySelector {
        name: pass.settings.secret_name.clone(),
        key: Some(pass.settings.secret_key.clone()),
    });
    Ok(Ok(()))
}

/// Ready, with the next pass at the rotation or the end of a grace period.
fn at_rest(pass: &Pass<'_>, status: &Status) -> Outcome {
    let outcome = decide::ready(status, &pass.settings.secret_name);
    match decide::next_wake(status, pass.settings.rotation_interval, pass.now) {
        Some(wait) => outcome.requeue(wait.max(Duration::from_secs(1))),
        None => outcome,
    }
}

/// The finalizer: every key of the object is deleted in Coder, then its cleanup record; without a reachable
/// deployment the finalizer goes without a delete and the record stays for the sweep.
pub async fn cleanup(object: Arc<CoderAIGatewayKey>, ctx: Arc<Context>) -> Result<Cleanup> {
    let (key, ctx) = (object.as_ref(), ctx.as_ref());
    let uid = key.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    let status = ctx
        .statuses
        .effective(&uid, key.status.as_ref())
        .unwrap_or_default();
    if decide::never_created(&status) && cleanup_records::cached(ctx, &uid).await.is_none() {
        return Ok(Cleanup::Done);
    }
    if let Some(wait) = cleanup_waiting_out_rate_limit(ctx, &uid) {
        return Ok(wait);
    }
    let waits = |why: Outcome| {
        let outcome = outcomes::deleting(
            &format!("the AI Gateway keys named {}*", key_name_prefix(&uid)),
            &why,
        );
        deletion_waits(ctx, key, Some(&status), outcome)
    };
    let namespace = key.namespace().unwrap_or_default();
    let cp_name = &key.spec.control_plane_ref.name;
    let object_name = format!("{namespace}/{}", key.name_any());
    let upstream = match operator_client(ctx, &namespace, cp_name).await? {
        Ok(upstream) => upstream,
        Err(refusal) if refusal.is_control_plane_missing() => {
            let stays = format!(
                "the AI Gateway keys named {}* can stay in Coder (CoderControlPlane {cp_name} is gone); the cleanup record stays for the sweep",
                key_name_prefix(&uid)
            );
            cleanup_records::released_without_delete(ctx, RecordKind::AIGatewayKey, &object_name, &stays);
            return Ok(Cleanup::Done);
        }
        Err(refusal) => return Ok(waits(outcomes::refused(cp_name, &refusal)).await?),
    };
    let deployment = match deployment_id(&upstream.coder).await {
        Ok(deployment) => deployment,
        Err(error) => return Ok(waits(outcomes::buildinfo_failed(&error)).await?),
    };
    if outcomes::deployment_changed(status.coder_deployment_id.as_deref(), &deployment).is_some() {
        let stays = format!(
            "the AI Gateway keys named {}* stay in Coder deployment {}; the control plane now reaches {deployment}",
            key_name_prefix(&uid),
            status.coder_deployment_id.clone().unwrap_or_default()
        );
        cleanup_records::released_without_delete(ctx, RecordKind::AIGatewayKey, &object_name, &stays);
        return Ok(Cleanup::Done);
    }
    if let Err(error) = delete_every_key(&upstream.coder, &uid).await {
        return Ok(waits(decide::coder_failed("delete the AI Gateway keys", &error)).await?);
    }
    cleanup_records::remove(ctx, &uid).await?;
    Ok(Cleanup::Done)
}

/// Deletes every key in Coder whose name is one of this UID's (`ck8s-<uid>-<serial>`). Only Coder's own 404 counts
/// as already gone.
pub async fn delete_every_key(
    coder: &CoderClient,
    uid: &str,
) -> std::result::Result<usize, coder_k8s_coder_client::Error> {
    let mut deleted = 0;
    for listed in coder.ai_gateway_keys().await? {
        if key_serial(uid, &listed.name).is_some() {
            found(coder.delete_ai_gateway_key(listed.id).await)?;
            deleted += 1;
        }
    }
    Ok(deleted)
}
