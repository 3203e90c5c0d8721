//! The CoderAIProvider reconcile (docs/controllers/ai-provider.md): dereference the control plane and the Secret
//! values → at rest (same generation and Secret values as last synced) no Coder call → the operator client and the
//! deployment ID → find this object's provider (proved by its signed cleanup record, or for an object of the Go
//! operator by its unsigned record and status together; never by the status alone) → create it after writing the
//! cleanup record, or patch only what differs (re-signing the record) → status.

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

/// One pass: the object, its UID, the provider it asks for, its verified cleanup record (with the time it was
/// written, when that can be trusted) and, without one, the unsigned record the Go operator (v0.1.5) left.
struct Pass<'a> {
    provider: &'a CoderAIProvider,
    ctx: &'a Context,
    uid: String,
    desired: Desired,
    record: Option<(Record, Option<Time>)>,
    unsigned: Option<Record>,
}

impl Pass<'_> {
    fn synced_mark(&self) -> String {
        format!(
            "{} {}",
            self.provider.metadata.generation.unwrap_or_default(),
            self.desired.secrets_digest()
        )
    }

    /// Whether Coder's provider is this object's (see [`owned`]).
    fn owns(&self, live: &AiProvider, status: &Status) -> bool {
        owned(
            live,
            &self.desired.name,
            Proof {
                record: self.record.as_ref().map(|(r, w)| (r, w.as_ref())),
                unsigned: self.unsigned.as_ref(),
                status_id: status.provider_id.as_deref(),
            },
        )
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

/// What can prove that a provider in Coder is the object's.
struct Proof<'a> {
    /// The object's signed record and the time it was written, if trusted.
    record: Option<(&'a Record, Option<&'a Time>)>,
    /// The Go operator's unsigned record of the object, read only when there is no signed one.
    unsigned: Option<&'a Record>,
    /// `status.providerID`, which anyone with status write access can set.
    status_id: Option<&'a str>,
}

/// Whether `live` is the object's provider. It must have the object's provider name (`name`), and: the signed
/// cleanup record names its ID; or the signed record was written before a create whose answer was lost, at a
/// trusted time, and Coder created the provider after it; or, for an object of the Go operator (no signed record
/// yet), its unsigned record and `status.providerID` both name that ID — two writes (a ConfigMap in the operator
/// namespace and the object's status) that no status writer alone can make. An ID in status alone proves nothing,
/// and neither does the name.
fn owned(live: &AiProvider, name: &str, proof: Proof<'_>) -> bool {
    if live.name != name {
        return false;
    }
    let id = live.id.to_string();
    match proof.record {
        Some((record, written)) => match &record.created {
            Created::Provider {
                id: Some(recorded), ..
            } => *recorded == id,
            Created::Provider { id: None, .. } => created_since(&live.created_at, written),
            _ => false,
        },
        None => proof.unsigned.is_some_and(|record| {
            let recorded = match &record.created {
                Created::Provider {
                    name: recorded_name,
                    id: Some(recorded),
                } => recorded_name == name && *recorded == id,
                _ => false,
            };
            record.kind == RecordKind::AIProvider && recorded && proof.status_id == Some(id.as_str())
        }),
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
    let unsigned = record
        .is_none()
        .then(|| cleanup_records::cached_unsigned(ctx, &uid))
        .flatten();
    Ok(Ok(Pass {
        provider,
        ctx,
        uid,
        desired,
        record,
        unsigned,
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
    let unsigned = record
        .is_none()
        .then(|| cleanup_records::cached_unsigned(ctx, &uid))
        .flatten();
    let pass = Pass {
        provider,
        ctx,
        uid: uid.clone(),
        desired,
        record,
        unsigned,
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

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "3f2c1a9e-1b2c-4d5e-8f90-0123456789ab";

    fn live() -> AiProvider {
        AiProvider {
            id: P.parse().unwrap(),
            name: "openai".to_owned(),
            created_at: "2026-01-01T12:00:10Z".to_owned(),
            ..AiProvider::default()
        }
    }

    fn record(id: Option<&str>) -> Record {
        Record {
            kind: RecordKind::AIProvider,
            namespace: "team".to_owned(),
            name: "openai".to_owned(),
            uid: "u-1".to_owned(),
            deployment_id: "d-1".to_owned(),
            created: Created::Provider {
                name: "openai".to_owned(),
                id: id.map(str::to_owned),
            },
        }
    }

    fn none() -> Proof<'static> {
        Proof {
            record: None,
            unsigned: None,
            status_id: None,
        }
    }

    #[test]
    fn an_id_in_status_alone_proves_nothing() {
        let proof = Proof {
            status_id: Some(P),
            ..none()
        };
        assert!(
            !owned(&live(), "openai", proof),
            "even a provider made after the object"
        );
    }

    #[test]
    fn the_signed_record_proves_its_id_or_a_provider_made_after_it() {
        let signed = record(Some(P));
        let proof = |record| Proof {
            record: Some(record),
            ..none()
        };
        assert!(owned(&live(), "openai", proof((&signed, None))));
        let other = record(Some("00000000-0000-0000-0000-000000000001"));
        let forged = Proof {
            status_id: Some(P),
            ..proof((&other, None))
        };
        assert!(!owned(&live(), "openai", forged), "the record names another ID");
        assert!(!owned(&live(), "other-name", proof((&signed, None))));
        let pending = record(None);
        let before = Time("2026-01-01T12:00:00Z".parse().unwrap());
        let after = Time("2026-01-01T13:00:00Z".parse().unwrap());
        assert!(owned(&live(), "openai", proof((&pending, Some(&before)))));
        assert!(!owned(&live(), "openai", proof((&pending, Some(&after)))));
        assert!(
            !owned(&live(), "openai", proof((&pending, None))),
            "a record whose write time is not trusted"
        );
    }

    #[test]
    fn the_go_operators_unsigned_record_proves_only_with_the_status_naming_the_same_id() {
        let unsigned = record(Some(P));
        let both = Proof {
            unsigned: Some(&unsigned),
            status_id: Some(P),
            ..none()
        };
        assert!(owned(&live(), "openai", both));
        let record_alone = Proof {
            unsigned: Some(&unsigned),
            ..none()
        };
        assert!(!owned(&live(), "openai", record_alone));
        let other = record(Some("00000000-0000-0000-0000-000000000001"));
        let disagreeing = Proof {
            unsigned: Some(&other),
            status_id: Some(P),
            ..none()
        };
        assert!(!owned(&live(), "openai", disagreeing));
        let pending = record(None);
        let without_id = Proof {
            unsigned: Some(&pending),
            status_id: Some(P),
            ..none()
        };
        assert!(
            !owned(&live(), "openai", without_id),
            "an unsigned record's time proves nothing"
        );
    }
}
