//! The CoderAIProvider reconcile (docs/controllers/ai-provider.md): dereference the control plane and the Secret
//! values → at rest (same generation and Secret values as last synced) no Coder call → the operator client and the
//! deployment ID → find this object's provider (proved: the recorded ID, or Coder's provider with this name created
//! after the object) → create it after writing the cleanup record, or patch only what differs → status.

use std::sync::Arc;

use coder_k8s_api::ai_provider::{CoderAIProvider, CoderAIProviderStatus};
use coder_k8s_coder_client::ai::AiProvider;
use coder_k8s_coder_client::{CoderClient, Error as CoderError, found};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::desired::{self, Desired};
use super::status as decide;
use crate::controller::cleanup_records::record::{Created, Record, RecordKind};
use crate::controller::cleanup_records::sweep::created_since;
use crate::controller::cleanup_records::{self, deployment_id};
use crate::controller::context::Context;
use crate::controller::error::{Error, Result};
use crate::controller::runner::Cleanup;
use crate::controller::secrets;
use crate::controller::status_writer::{
    cleanup_waiting_out_rate_limit, deletion_waits, waiting_out_rate_limit, write_outcome,
};
use crate::controller::sync_status::{Outcome, outcomes};
use crate::controller::upstream::operator_client;

type Status = CoderAIProviderStatus;

/// Fact kept per object: `<generation> <digest of the Secret values>` last synced to Coder.
const SYNCED: &str = "synced";

/// One pass: the object, its UID, the provider it asks for and its verified cleanup record (with the time the API
/// server stored it).
struct Pass<'a> {
    provider: &'a CoderAIProvider,
    ctx: &'a Context,
    uid: String,
    desired: Desired,
    record: Option<(Record, Option<Time>)>,
}

impl Pass<'_> {
    fn synced_mark(&self) -> String {
        format!(
            "{} {}",
            self.provider.metadata.generation.unwrap_or_default(),
            self.desired.secrets_digest()
        )
    }

    /// Whether Coder's provider is this object's. It must have the object's name, and: the cleanup record names its
    /// ID; or the record was written before an unanswered create and the provider came after it; or, for an object
    /// from before cleanup records, the status names it and Coder created it after the object. An ID read from the
    /// status alone proves nothing, and neither does the name.
    fn owns(&self, live: &AiProvider, status: &Status) -> bool {
        if live.name != self.desired.name {
            return false;
        }
        let id = live.id.to_string();
        match &self.record {
            Some((record, written)) => match &record.created {
                Created::Provider {
                    id: Some(recorded), ..
                } => *recorded == id,
                Created::Provider { id: None, .. } => created_since(&live.created_at, written.as_ref()),
                _ => false,
            },
            None => {
                status.provider_id.as_deref() == Some(id.as_str())
                    && created_since(
                        &live.created_at,
                        self.provider.metadata.creation_timestamp.as_ref(),
                    )
            }
        }
    }

    fn record(&self, deployment: &str, id: Option<String>) -> Record {
        Record {
            kind: RecordKind::AIProvider,
            namespace: self.provider.namespace().unwrap_or_default(),
            name: self.provider.name_any(),
            uid: self.uid.clone(),
            deployment_id: deployment.to_owned(),
            created: Created::Provider {
                name: self.desired.name.clone(),
                id,
            },
        }
    }
}

/// One reconcile of a live object.
pub async fn apply_spec(object: Arc<CoderAIProvider>, ctx: Arc<Context>) -> Result<Action> {
    let (provider, ctx) = (object.as_ref(), ctx.as_ref());
    let uid = provider.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    if let Some(wait) = waiting_out_rate_limit(ctx, &uid) {
        return Ok(wait);
    }
    let before = ctx.statuses.effective(&uid, provider.status.as_ref());
    let mut status = before.clone().unwrap_or_default();
    let outcome = match prepare(provider, ctx, uid).await? {
        Ok(pass) => run(&pass, &mut status).await?,
        Err(outcome) => outcome,
    };
    Ok(write_outcome(ctx, provider, before.as_ref(), status, &outcome).await?)
}

/// The control plane's refusal, or the pass with the Secret values read.
async fn prepare<'a>(
    provider: &'a CoderAIProvider,
    ctx: &'a Context,
    uid: String,
) -> Result<std::result::Result<Pass<'a>, Outcome>> {
    let namespace = provider.namespace().unwrap_or_default();
    let cp_name = &provider.spec.control_plane_ref.name;
    match ctx.caches.control_planes.get(&namespace, cp_name) {
        None => return Ok(Err(decide::control_plane_not_ready(cp_name, "does not exist"))),
        Some(cp) if cp.metadata.deletion_timestamp.is_some() => {
            return Ok(Err(decide::control_plane_not_ready(cp_name, "is being deleted")));
        }
        Some(_) => {}
    }
    let mut values = Vec::new();
    for (secret_name, key) in desired::secret_refs(&provider.spec) {
        let secret = ctx
            .caches
            .secrets
            .get(&ctx.client, &namespace, &secret_name)
            .await?;
        match secrets::value(secret.as_deref(), &key).filter(|v| !v.trim().is_empty()) {
            Some(value) => values.push(value),
            None => return Ok(Err(decide::secret_not_ready(&secret_name, &key))),
        }
    }
    let desired = desired::desired(&provider.spec, provider.coder_name(), values);
    let record = cleanup_records::cached_with_time(ctx, &uid).await;
    Ok(Ok(Pass {
        provider,
        ctx,
        uid,
        desired,
        record,
    }))
}

async fn run(pass: &Pass<'_>, status: &mut Status) -> Result<Outcome> {
    let at_rest = status.provider_id.is_some()
        && pass.ctx.fact(&pass.uid, SYNCED).as_deref() == Some(pass.synced_mark().as_str());
    if at_rest {
        return Ok(decide::synced(&pass.desired.name));
    }
    let cp_name = &pass.provider.spec.control_plane_ref.name;
    let namespace = pass.provider.namespace().unwrap_or_default();
    let upstream = match operator_client(pass.ctx, &namespace, cp_name).await? {
        Ok(upstream) => upstream,
        Err(refusal) => {
            return Ok(decide::refused(cp_name, &refusal).requeue(pass.ctx.settings.retry_interval));
        }
    };
    let coder = &upstream.coder;
    let deployment = match deployment_id(coder).await {
        Ok(id) => id,
        Err(error) => return Ok(decide::buildinfo_failed(&error).requeue(pass.ctx.settings.retry_interval)),
    };
    if let Some(changed) = decide::deployment_changed(status.coder_deployment_id.as_deref(), &deployment) {
        return Ok(changed);
    }
    let live = match find(pass, coder, status).await {
        Ok(Found::Ours(live)) => Some(live),
        Ok(Found::Nothing) => None,
        Ok(Found::Foreign) => return Ok(decide::name_conflict(&pass.desired.name)),
        Err(error) => return Ok(decide::coder_failed("look up the provider", &error)),
    };
    let outcome = match live {
        Some(live) => update(pass, coder, &deployment, &live, status).await?,
        None => create(pass, coder, &deployment, status).await?,
    };
    match outcome {
        Ok(id) => {
            status.provider_id = Some(id);
            status.coder_deployment_id = Some(deployment);
            pass.ctx.set_fact(&pass.uid, SYNCED, Some(pass.synced_mark()));
            Ok(decide::synced(&pass.desired.name))
        }
        Err(outcome) => Ok(outcome),
    }
}

/// What Coder holds for the object.
enum Found {
    Ours(Box<AiProvider>),
    Nothing,
    /// A provider with the object's name that this object did not create.
    Foreign,
}

/// The object's provider: by the recorded or shown ID when it proves to be ours, else by name.
async fn find(
    pass: &Pass<'_>,
    coder: &CoderClient,
    status: &Status,
) -> std::result::Result<Found, CoderError> {
    let recorded = pass.record.as_ref().and_then(|(r, _)| match &r.created {
        Created::Provider { id, .. } => id.clone(),
        _ => None,
    });
    for id in recorded.iter().chain(status.provider_id.iter()) {
        if let Some(live) = found(coder.ai_provider(id).await)?
            && pass.owns(&live, status)
        {
            return Ok(Found::Ours(Box::new(live)));
        }
    }
    Ok(match found(coder.ai_provider(&pass.desired.name).await)? {
        Some(live) if pass.owns(&live, status) => Found::Ours(Box::new(live)),
        Some(_) => Found::Foreign,
        None => Found::Nothing,
    })
}

/// The cleanup record first (no create without it), then the create; `Ok(id)` or the outcome that says why not.
async fn create(
    pass: &Pass<'_>,
    coder: &CoderClient,
    deployment: &str,
    status: &mut Status,
) -> Result<std::result::Result<String, Outcome>> {
    if let Err(error) = cleanup_records::write(pass.ctx, &pass.record(deployment, None)).await {
        let namespace = &pass.ctx.settings.operator_namespace;
        return Ok(Err(
            decide::record_failed(namespace, &error).requeue(pass.ctx.settings.retry_interval)
        ));
    }
    // The deployment is recorded with the first create: a later change of deployment stalls the object.
    status.coder_deployment_id = Some(deployment.to_owned());
    let created = match coder.create_ai_provider(&pass.desired.create_request()).await {
        Ok(created) => created,
        Err(error) => return Ok(Err(decide::coder_failed("create the provider", &error))),
    };
    let id = created.id.to_string();
    record_id(pass, deployment, &id).await?;
    Ok(Ok(id))
}

/// Patches what differs (the Secret values when they changed since the last sync); `Ok(id)`.
async fn update(
    pass: &Pass<'_>,
    coder: &CoderClient,
    deployment: &str,
    live: &AiProvider,
    status: &Status,
) -> Result<std::result::Result<String, Outcome>> {
    let id = live.id.to_string();
    // A provider from before cleanup records existed gets its record now.
    record_id(
        pass,
        status.coder_deployment_id.as_deref().unwrap_or(deployment),
        &id,
    )
    .await?;
    let last = pass.ctx.fact(&pass.uid, SYNCED);
    let digest = pass.desired.secrets_digest();
    let send_secrets = last.is_none_or(|mark| !mark.ends_with(&digest));
    if let Some(patch) = pass.desired.patch(live, send_secrets)
        && let Err(error) = coder.patch_ai_provider(&id, &patch).await
    {
        return Ok(Err(decide::coder_failed("update the provider", &error)));
    }
    Ok(Ok(id))
}

async fn record_id(pass: &Pass<'_>, deployment: &str, id: &str) -> Result<()> {
    cleanup_records::write(pass.ctx, &pass.record(deployment, Some(id.to_owned())))
        .await
        .map_err(Error::from)
}

/// The finalizer: the provider is deleted in Coder, then its cleanup record; without a reachable deployment the
/// finalizer goes without a delete and the record stays for the sweep.
pub async fn cleanup(object: Arc<CoderAIProvider>, ctx: Arc<Context>) -> Result<Cleanup> {
    let (provider, ctx) = (object.as_ref(), ctx.as_ref());
    let uid = provider.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    let status = ctx
        .statuses
        .effective(&uid, provider.status.as_ref())
        .unwrap_or_default();
    let record = cleanup_records::cached_with_time(ctx, &uid).await;
    if status.provider_id.is_none() && status.coder_deployment_id.is_none() && record.is_none() {
        return Ok(Cleanup::Done);
    }
    if let Some(wait) = cleanup_waiting_out_rate_limit(ctx, &uid) {
        return Ok(wait);
    }
    let namespace = provider.namespace().unwrap_or_default();
    let cp_name = &provider.spec.control_plane_ref.name;
    let object_name = format!("{namespace}/{}", provider.name_any());
    let stays = |why: String| {
        let id = status.provider_id.clone().unwrap_or_else(|| "unknown".to_owned());
        cleanup_records::released_without_delete(
            ctx,
            RecordKind::AIProvider,
            &object_name,
            &format!("the provider can stay in the Coder database, provider ID {id} ({why})"),
        );
        Ok(Cleanup::Done)
    };
    let waits = |why: Outcome| {
        let what = format!("the AI provider {:?}", provider.coder_name());
        deletion_waits(ctx, provider, Some(&status), outcomes::deleting(&what, &why))
    };
    let upstream = match operator_client(ctx, &namespace, cp_name).await? {
        Ok(upstream) => upstream,
        Err(refusal) if refusal.is_control_plane_missing() => {
            return stays(format!("CoderControlPlane {cp_name} is gone"));
        }
        Err(refusal) => return Ok(waits(outcomes::refused(cp_name, &refusal)).await?),
    };
    let deployment = match deployment_id(&upstream.coder).await {
        Ok(deployment) => deployment,
        Err(error) => return Ok(waits(outcomes::buildinfo_failed(&error)).await?),
    };
    let held = status
        .coder_deployment_id
        .clone()
        .or(record.as_ref().map(|(r, _)| r.deployment_id.clone()));
    if decide::deployment_changed(held.as_deref(), &deployment).is_some() {
        return stays(format!(
            "the control plane now reaches Coder deployment {deployment}"
        ));
    }
    let desired = desired::desired(&provider.spec, provider.coder_name(), Vec::new());
    let pass = Pass {
        provider,
        ctx,
        uid: uid.clone(),
        desired,
        record,
    };
    let deleted = match find(&pass, &upstream.coder, &status).await {
        Ok(Found::Ours(live)) => {
            found(upstream.coder.delete_ai_provider(&live.id.to_string()).await).map(|_| ())
        }
        Ok(Found::Nothing | Found::Foreign) => Ok(()),
        Err(error) => Err(error),
    };
    if let Err(error) = deleted {
        return Ok(waits(decide::coder_failed("delete the AI provider", &error)).await?);
    }
    cleanup_records::remove(ctx, &uid).await?;
    ctx.set_fact(&uid, SYNCED, None);
    Ok(Cleanup::Done)
}
