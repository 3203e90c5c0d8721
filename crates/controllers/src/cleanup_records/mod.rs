//! Cleanup records (docs/cleanup-records.md): before an AI provider, AI Gateway key or MCP server config
//! is created in Coder, the operator writes a ConfigMap in its own namespace that names the object, the Coder
//! deployment and what is being created (`record`). When the object goes with its delete in Coder, the record goes
//! too; when it goes without one (a namespace deletion), the record stays until the sweep (`sweep`) deletes the
//! leftovers in that same Coder deployment. Writing, reading and removing records is here, once for every kind.

pub mod record;
pub mod signing;
pub mod sweep;

use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use self::record::{Record, record_name};
use self::signing::SigningKey;
use crate::apply::{self, Applied};
use crate::context::Context;
use crate::halt::Halt;
use crate::slim::Live;
use crate::sync_status::{Outcome, outcomes};

/// The log line of a finalizer released without a delete in Coder (v0.1.5 text, followed by what stays).
pub const RELEASED_WITHOUT_DELETE_LOG: &str = "Releasing the finalizer without a delete in Coder";

/// The deployment ID of the Coder a client reaches (`GET /api/v2/buildinfo`): what a record is matched by.
pub async fn deployment_id(coder: &CoderClient) -> Result<String, CoderError> {
    Ok(coder.buildinfo().await?.deployment_id)
}

/// The deployment the control plane reaches now, before anything is created there: `CoderBuildInfoFailed`-style
/// pending when it cannot be read, `CoderDeploymentChanged` when the object's things are in `recorded`, another one.
pub async fn reached_deployment(
    coder: &CoderClient,
    recorded: Option<&str>,
) -> Result<String, Halt<Outcome>> {
    let deployment = deployment_id(coder)
        .await
        .map_err(|error| Halt::Settled(outcomes::buildinfo_failed(&error)))?;
    match outcomes::deployment_changed(recorded, &deployment) {
        Some(changed) => Err(Halt::Settled(changed)),
        None => Ok(deployment),
    }
}

/// [`write`] before a create: when the record cannot be written, nothing is created (`CleanupRecordFailed`).
pub async fn write_before_create(ctx: &Context, record: &Record) -> Result<(), Halt<Outcome>> {
    write(ctx, record)
        .await
        .map_err(|error| Halt::Settled(outcomes::record_failed(&ctx.settings.operator_namespace, &error)))
}

/// The key that signs the records (read or created once per process).
pub async fn key(ctx: &Context) -> Result<std::sync::Arc<SigningKey>, kube::Error> {
    ctx.record_key
        .get(&ctx.k8s.client, &ctx.settings.operator_namespace)
        .await
}

/// The record of the object with this UID, as the watch cache holds it, when its signature checks out.
pub async fn cached(ctx: &Context, uid: &str) -> Option<Record> {
    cached_with_time(ctx, uid).await.map(|(record, _)| record)
}

/// The verified record of the object with this UID and when it was written, if that can be trusted: its signed
/// `writtenAt`, when the API server stored the ConfigMap at that time (a record re-created from a saved copy, or one
/// signed before records carried a time, has `None`). A record that is missing, unreadable or not signed by this
/// operator is `None`.
pub async fn cached_with_time(ctx: &Context, uid: &str) -> Option<(Record, Option<Time>)> {
    let config_map = cached_config_map(ctx, uid)?;
    let verified = key(ctx).await.ok()?.verified(&config_map)?;
    let written = verified.trusted_written(config_map.metadata.creation_timestamp.as_ref());
    Some((verified.record, written))
}

fn cached_config_map(ctx: &Context, uid: &str) -> Option<std::sync::Arc<ConfigMap>> {
    ctx.k8s
        .caches
        .cleanup_records
        .get(&ctx.settings.operator_namespace, &record_name(uid))
}

/// The record the Go operator (v0.1.5) wrote for the object with this UID: a ConfigMap of the record's name in the
/// operator namespace with no signature at all (a record whose signature fails was changed by someone, and is not
/// one). Only the operator's admins can write there; on its own it proves nothing (see the AI provider's `owns`).
pub fn cached_unsigned(ctx: &Context, uid: &str) -> Option<Record> {
    let config_map = cached_config_map(ctx, uid)?;
    let data = config_map.data.as_ref()?;
    if data.contains_key(signing::SIGNATURE) || data.contains_key(signing::WRITTEN_AT) {
        return None;
    }
    Record::from_config_map(&config_map).ok()
}

/// Writes `record`, signed (server-side apply; nothing is sent when the cached record is the same). The signed
/// `writtenAt` is that of the object's record already there, so rewriting it (with the ID after a create) keeps the
/// time of the first write; a new record gets the current time. A failure means no create may follow.
pub async fn write(ctx: &Context, record: &Record) -> Result<(), kube::Error> {
    let namespace = &ctx.settings.operator_namespace;
    let key = key(ctx).await?;
    let cached = cached_config_map(ctx, &record.uid);
    let written_at = cached
        .as_deref()
        .and_then(|config_map| key.verified(config_map))
        .and_then(|verified| verified.written_at)
        .unwrap_or_else(Timestamp::now);
    let desired = key.signed_config_map(record, written_at, namespace);
    let cached = cached.map(|c| Live::of(c.metadata.clone()));
    match apply::apply::<ConfigMap>(ctx, desired, cached.as_ref()).await? {
        Applied::Changed(_) | Applied::Unchanged => Ok(()),
    }
}

/// Removes the record of the object with this UID, once everything it names is deleted in Coder.
pub async fn remove(ctx: &Context, uid: &str) -> Result<(), kube::Error> {
    let namespace = &ctx.settings.operator_namespace;
    let name = record_name(uid);
    if ctx.k8s.caches.cleanup_records.get(namespace, &name).is_none() {
        return Ok(());
    }
    apply::delete::<ConfigMap>(ctx, namespace, &name)
        .await
        .map(|_| ())
}

/// Counts a finalizer released without a delete in Coder, and logs what stays there.
pub fn released_without_delete(ctx: &Context, kind: record::RecordKind, object: &str, what_stays: &str) {
    ctx.metrics.cleanup_released_without_delete(kind.as_str());
    tracing::warn!(
        kind = kind.as_str(),
        object,
        "{RELEASED_WITHOUT_DELETE_LOG}: {what_stays}"
    );
}
