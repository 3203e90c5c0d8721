//! The sweep (docs/cleanup-records.md): a record whose object is gone names leftovers in one Coder
//! deployment. When a control plane in the record's namespace reaches that deployment (same deployment ID, never
//! the same URL or name), the sweep deletes what the record names — after checking it against what Coder reports —
//! and then the record. A record no ready control plane matches is counted in `coder_k8s_cleanup_records_unmatched`
//! and gets a `NoMatchingDeployment` Warning Event every interval. Nothing is read from Coder while no record is
//! orphaned.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use coder_k8s_coder_client::{CoderClient, Error as CoderError, found};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use tokio::sync::mpsc::UnboundedReceiver;

use super::record::{Created, Record, RecordKind, created_since};
use super::signing::{SigningKey, Verified};
use super::{deployment_id, remove};
use futures::future::BoxFuture;

use crate::cache::Change;
use crate::context::Context;
use crate::runner::Shutdown;
use crate::upstream::{Upstream, operator_client};

/// Reason of the Warning Event on a record that no ready control plane matches.
pub const NO_MATCHING_DEPLOYMENT: &str = "NoMatchingDeployment";

/// Log line of a record whose leftovers Coder does not show to be the operator's: the record stays, nothing is
/// deleted.
pub const NOT_PROVEN_LOG: &str = "cleanup sweep: Coder holds something under the record's name that was not created after the record was written (or the record's signed time does not match when it was stored); nothing is deleted and the record stays";

/// Log line of a record that is not signed by this operator: it is never swept.
pub const UNVERIFIED_LOG: &str = "cleanup sweep: the record is not signed by this operator (written or changed by someone else); it is left alone";

/// What the sweep remembers between passes: when each unmatched record last got its Event.
#[derive(Default)]
struct Memory {
    warned: HashMap<String, Instant>,
}

/// The sweep as a task of the process.
pub fn task(ctx: Arc<Context>, shutdown: Shutdown) -> BoxFuture<'static, ()> {
    Box::pin(run(ctx, shutdown))
}

/// Runs the sweep until `shutdown` completes: at each change of a record or a control plane, and every
/// `unmatched_record_event_interval`.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let mut records = ctx.k8s.caches.cleanup_records.subscribe();
    let mut control_planes = ctx.k8s.caches.control_planes.subscribe();
    let mut shutdown = std::pin::pin!(shutdown);
    // Caches that cannot fill (a CRD missing) must not hold up a shutdown.
    tokio::select! {
        () = &mut shutdown => return,
        () = ctx.k8s.caches.ready() => {}
    }
    let mut memory = Memory::default();
    loop {
        sweep_once(&ctx, &mut memory).await;
        let tick = tokio::time::sleep(ctx.settings.unmatched_record_event_interval);
        tokio::select! {
            () = &mut shutdown => return,
            () = tick => {}
            () = next_change(&mut records) => {}
            () = next_change(&mut control_planes) => {}
        }
        // A burst of changes is one pass.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        drain(&mut records);
        drain(&mut control_planes);
    }
}

async fn next_change<K>(receiver: &mut UnboundedReceiver<Change<K>>) {
    if receiver.recv().await.is_none() {
        std::future::pending::<()>().await;
    }
}

fn drain<K>(receiver: &mut UnboundedReceiver<Change<K>>) {
    while receiver.try_recv().is_ok() {}
}

/// One pass over every record in scope.
async fn sweep_once(ctx: &Context, memory: &mut Memory) {
    let key = match super::key(ctx).await {
        Ok(key) => key,
        Err(error) => {
            tracing::warn!(%error, "cleanup sweep: the record-signing key cannot be read; no record is swept");
            return;
        }
    };
    let orphans = orphaned_records(ctx, &key);
    let mut unmatched: BTreeMap<RecordKind, i64> = RecordKind::ALL.into_iter().map(|k| (k, 0)).collect();
    let mut reached: HashMap<String, Vec<(Upstream, String)>> = HashMap::new();
    for (config_map, verified) in &orphans {
        let record = &verified.record;
        if !reached.contains_key(&record.namespace) {
            let deployments = deployments_in(ctx, &record.namespace).await;
            reached.insert(record.namespace.clone(), deployments);
        }
        let matching = reached[&record.namespace]
            .iter()
            .find(|(_, deployment)| *deployment == record.deployment_id)
            .map(|(upstream, _)| upstream);
        match matching {
            Some(upstream) => sweep_record(ctx, &upstream.coder, config_map, verified).await,
            None => {
                *unmatched.entry(record.kind).or_default() += 1;
                warn_unmatched(ctx, memory, config_map, record).await;
            }
        }
    }
    memory
        .warned
        .retain(|uid, _| orphans.iter().any(|(_, verified)| &verified.record.uid == uid));
    for (kind, count) in unmatched {
        ctx.metrics.set_cleanup_records_unmatched(kind.as_str(), count);
    }
}

/// Records in scope, signed by this operator, whose object the caches do not hold (by UID). A record that is not
/// signed by this operator is left alone, and logged.
fn orphaned_records(ctx: &Context, key: &SigningKey) -> Vec<(Arc<ConfigMap>, Verified)> {
    let watched = ctx.settings.watch_namespace.as_deref();
    ctx.k8s
        .caches
        .cleanup_records
        .store()
        .state()
        .into_iter()
        .filter_map(|cm| match key.verified(&cm) {
            Some(verified) => Some((cm, verified)),
            None => {
                tracing::debug!(record = %cm.name_any(), "{UNVERIFIED_LOG}");
                None
            }
        })
        .filter(|(_, verified)| watched.is_none_or(|ns| ns == verified.record.namespace))
        .filter(|(_, verified)| !object_cached(ctx, &verified.record))
        .collect()
}

fn object_cached(ctx: &Context, record: &Record) -> bool {
    let caches = &ctx.k8s.caches;
    let uid = Some(record.uid.as_str());
    match record.kind {
        RecordKind::AIProvider => caches
            .ai_providers
            .store()
            .state()
            .iter()
            .any(|o| o.meta().uid.as_deref() == uid),
        RecordKind::AIGatewayKey => caches
            .ai_gateway_keys
            .store()
            .state()
            .iter()
            .any(|o| o.meta().uid.as_deref() == uid),
        RecordKind::MCPServer => caches
            .mcp_servers
            .store()
            .state()
            .iter()
            .any(|o| o.meta().uid.as_deref() == uid),
    }
}

/// The Coder deployments the ready control planes of `namespace` reach, with their clients.
async fn deployments_in(ctx: &Context, namespace: &str) -> Vec<(Upstream, String)> {
    let mut out = Vec::new();
    let names: Vec<String> = ctx
        .k8s
        .caches
        .control_planes
        .store()
        .state()
        .iter()
        .filter(|cp| cp.namespace().as_deref() == Some(namespace) && cp.metadata.deletion_timestamp.is_none())
        .map(|cp| cp.name_any())
        .collect();
    for name in names {
        let Ok(upstream) = operator_client(ctx, namespace, &name).await else {
            continue;
        };
        if let Ok(deployment) = deployment_id(&upstream.coder).await {
            out.push((upstream, deployment));
        }
    }
    out
}

/// Deletes what the record names (checked against Coder), then the record; leaves both when the object turns out to
/// exist or a delete fails.
async fn sweep_record(ctx: &Context, coder: &CoderClient, config_map: &ConfigMap, verified: &Verified) {
    let record = &verified.record;
    // The caches may lag behind a just-created object: the API server has the last word.
    match object_exists(ctx, record).await {
        Ok(false) => {}
        Ok(true) => return,
        Err(error) => {
            tracing::warn!(%error, record = %config_map.name_any(), "cleanup sweep: could not check the record's object");
            return;
        }
    }
    // The signed time, and only when the ConfigMap was stored then: a copy re-created later proves nothing.
    let written = verified.trusted_written(config_map.metadata.creation_timestamp.as_ref());
    match delete_leftovers(coder, record, written.as_ref()).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(record = %config_map.name_any(), "{NOT_PROVEN_LOG}");
            return;
        }
        Err(error) => {
            tracing::warn!(%error, record = %config_map.name_any(), "cleanup sweep: a delete in Coder failed; retried later");
            return;
        }
    }
    match remove(ctx, &record.uid).await {
        Ok(()) => {
            ctx.metrics.cleanup_record_swept(record.kind.as_str());
            tracing::info!(record = %config_map.name_any(), kind = record.kind.as_str(), object = %format!("{}/{}", record.namespace, record.name), "cleanup sweep: deleted the leftovers in Coder and the record");
        }
        Err(error) => {
            tracing::warn!(%error, record = %config_map.name_any(), "cleanup sweep: could not delete the record")
        }
    }
}

async fn object_exists(ctx: &Context, record: &Record) -> Result<bool, kube::Error> {
    let (kind, plural) = match record.kind {
        RecordKind::AIProvider => ("CoderAIProvider", "coderaiproviders"),
        RecordKind::AIGatewayKey => ("CoderAIGatewayKey", "coderaigatewaykeys"),
        RecordKind::MCPServer => ("CoderMCPServer", "codermcpservers"),
    };
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("coder.com", "v1alpha1", kind), plural);
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.k8s.client.clone(), &record.namespace, &resource);
    let found = api.get_opt(&record.name).await?;
    Ok(found.is_some_and(|o| o.metadata.uid.as_deref() == Some(record.uid.as_str())))
}

/// Deletes in Coder only what this operator can have created for the record: keys named `ck8s-<uid>-<serial>`;
/// a provider or MCP server config with the recorded name (and ID, when recorded) that Coder created after the
/// record was written (`written`: its trusted signed time; `None` proves nothing). `Ok(false)`: Coder holds something under the record's name that it does not prove to be
/// the operator's; nothing was deleted.
async fn delete_leftovers(
    coder: &CoderClient,
    record: &Record,
    written: Option<&Time>,
) -> Result<bool, CoderError> {
    match &record.created {
        Created::KeyPrefix(_) => {
            crate::ai_gateway_key::coder::delete_every_key(coder, &record.uid).await?;
            Ok(true)
        }
        Created::Provider { name, id } => {
            let Some(live) = found(coder.ai_provider(id.as_deref().unwrap_or(name)).await)? else {
                return Ok(true);
            };
            if live.name != *name || !created_since(&live.created_at, written) {
                return Ok(false);
            }
            found(coder.delete_ai_provider(&live.id.to_string()).await)?;
            Ok(true)
        }
        Created::McpServer {
            organization_id,
            slug,
            id,
        } => {
            let configs = found(coder.mcp_server_configs(organization_id).await)?.unwrap_or_default();
            let named = configs
                .iter()
                .find(|c| c.slug == *slug && id.as_ref().is_none_or(|id| c.id.to_string() == *id));
            let Some(config) = named else { return Ok(true) };
            if !created_since(&config.created_at, written) {
                return Ok(false);
            }
            found(coder.delete_mcp_server_config(organization_id, config.id).await)?;
            Ok(true)
        }
    }
}

/// A `NoMatchingDeployment` Warning Event on the record, at most once per interval.
async fn warn_unmatched(ctx: &Context, memory: &mut Memory, config_map: &ConfigMap, record: &Record) {
    let due = memory
        .warned
        .get(&record.uid)
        .is_none_or(|last| last.elapsed() >= ctx.settings.unmatched_record_event_interval);
    if !due {
        return;
    }
    memory.warned.insert(record.uid.clone(), Instant::now());
    let note = format!(
        "No ready CoderControlPlane in namespace {} reaches Coder deployment {}, where {} {}/{} left what this record names. Bring back a control plane on that Coder database, or delete the leftovers in Coder by hand and then this ConfigMap.",
        record.namespace,
        record.deployment_id,
        record.kind.as_str(),
        record.namespace,
        record.name
    );
    let event = Event {
        type_: EventType::Warning,
        reason: NO_MATCHING_DEPLOYMENT.to_owned(),
        note: Some(note),
        action: "Sweep".to_owned(),
        secondary: None,
    };
    if let Err(error) = ctx
        .k8s
        .recorder
        .publish(&event, &config_map.object_ref(&()))
        .await
    {
        tracing::debug!(%error, "publishing an Event failed");
    }
}
