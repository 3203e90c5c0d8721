//! The CoderMCPServer reconcile (docs/controllers/mcp-server.md): dereference the control plane → its opt-in (else
//! the kill switch) → the credential Secrets (else the kill switch) → the organization → find the object's own config
//! (or write the create marker and create it) → patch when it differs → access → status. Cleanup deletes the
//! object's own config.

use std::sync::Arc;

use coder_k8s_api::mcp_server::{CoderMCPServer, CoderMCPServerStatus, reasons};
use coder_k8s_coder_client::CoderClient;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::config::{self, Deleted, Found, Pass};
use super::inputs::{Reach, credential_values, upstream};
use super::names;
use super::status as decide;
use crate::controller::cleanup_records;
use crate::controller::cleanup_records::record::{Created, Record, RecordKind};
use crate::controller::context::Context;
use crate::controller::error::{Error, Result};
use crate::controller::runner::Cleanup;
use crate::controller::status_writer::{
    cleanup_waiting_out_rate_limit, deletion_waits, waiting_out_rate_limit, write_outcome,
};
use crate::controller::sync_status::{Outcome, SyncPhase, outcomes};

type Status = CoderMCPServerStatus;

/// What the operator's own records say about the object's config.
struct RecordProof {
    /// The object's signed cleanup record.
    record: Option<Record>,
    /// When that record was written, while it names no config yet (a create was sent, its answer may be lost), if
    /// its signed time can be trusted.
    written: Option<Timestamp>,
    /// The object has no record and is older than this operator's signing key: the Go operator (v0.1.5), which wrote
    /// no records for MCP server configs, made it.
    predates_records: bool,
}

impl RecordProof {
    async fn read(ctx: &Context, server: &CoderMCPServer, uid: &str) -> Self {
        let Some((record, written)) = cleanup_records::cached_with_time(ctx, uid).await else {
            let key_created = cleanup_records::signing::key(ctx)
                .await
                .ok()
                .and_then(|key| key.created());
            let object_created = server.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let predates_records = matches!((object_created, key_created), (Some(o), Some(k)) if o < k);
            return Self {
                record: None,
                written: None,
                predates_records,
            };
        };
        let names_no_config = matches!(&record.created, Created::McpServer { id: None, .. });
        Self {
            written: written.filter(|_| names_no_config).map(|t| t.0),
            record: Some(record),
            predates_records: false,
        }
    }
}

/// One reconcile of a live object.
pub async fn apply_spec(server: Arc<CoderMCPServer>, ctx: Arc<Context>) -> Result<Action> {
    let (server, ctx) = (server.as_ref(), ctx.as_ref());
    let uid = server.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    if let Some(wait) = waiting_out_rate_limit(ctx, &uid) {
        return Ok(wait);
    }
    let shown = ctx.statuses.effective(&uid, server.status.as_ref());
    let mut status = shown.clone().unwrap_or_default();
    let proof = RecordProof::read(ctx, server, &uid).await;
    let mut pass = Pass {
        server,
        ctx,
        uid,
        shown,
        record: proof.record,
        record_written: proof.written,
        predates_records: proof.predates_records,
    };
    let outcome = run(&mut pass, &mut status).await?;
    finish(&pass, status, outcome).await
}

/// The outcome of this pass.
async fn run(pass: &mut Pass<'_>, status: &mut Status) -> Result<Outcome> {
    let (server, ctx) = (pass.server, pass.ctx);
    let up = match upstream(ctx, server).await? {
        Reach::Ready(up) => *up,
        Reach::Gone => {
            let name = &server.spec.control_plane_ref.name;
            return Ok(outcomes::control_plane_not_ready(name, "does not exist"));
        }
        Reach::NotYet(outcome) => return Ok(outcome),
    };
    let organization = organization_ref(server, status);
    let may_exist = pass.may_have_config(status);
    if !names::organization_allowed(&up.control_plane, &server.spec.organization) {
        let stall = Outcome::stalled(
            reasons::MCP_SERVERS_NOT_ALLOWED,
            format!(
                "CoderControlPlane {} does not list organization {:?} in spec.mcpServers.organizations.",
                up.control_plane.name_any(),
                server.spec.organization
            ),
        );
        // An object that never created a config makes no Coder call.
        return Ok(match may_exist {
            true => config::disable(pass, &up.coder, &organization, status, stall).await,
            false => stall,
        });
    }
    let credentials = match credential_values(ctx, server).await? {
        Ok(credentials) => credentials,
        Err(stall) if may_exist => {
            return Ok(config::disable(pass, &up.coder, &organization, status, stall).await);
        }
        Err(stall) => return Ok(stall),
    };
    converge(pass, &up.coder, status, names::desired(server, &credentials)).await
}

/// `status.organizationID` once known, else the organization's name (Coder accepts both in paths).
fn organization_ref(server: &CoderMCPServer, status: &Status) -> String {
    status
        .organization_id
        .clone()
        .unwrap_or_else(|| server.spec.organization.clone())
}

/// The organization, the object's own config (created when missing), its fields and its access.
async fn converge(
    pass: &mut Pass<'_>,
    coder: &CoderClient,
    status: &mut Status,
    desired: coder_k8s_coder_client::ai::McpServerConfigRequest,
) -> Result<Outcome> {
    let server = pass.server;
    let organization = match coder.organization(&server.spec.organization).await {
        Ok(organization) => organization.id.to_string(),
        Err(error) if error.is_not_found() => {
            return Ok(Outcome::stalled(
                reasons::ORGANIZATION_NOT_FOUND,
                format!("Coder has no organization {:?}.", server.spec.organization),
            ));
        }
        Err(error) => return Ok(decide::coder_failed("get organization", &error)),
    };
    status.organization_id = Some(organization.clone());
    let configs = match config::list(coder, &organization).await {
        Ok(configs) => configs,
        Err(error) => return Ok(decide::coder_failed("list MCP server configs", &error)),
    };
    let own = match config::find(pass, &configs, status) {
        Found::Own(config) => *config,
        Found::Foreign => {
            return Ok(Outcome::stalled(
                reasons::SLUG_CONFLICT,
                format!(
                    "An MCP server config that this object did not create uses the slug {:?}.",
                    server.coder_slug()
                ),
            ));
        }
        Found::Nothing => match config::create(pass, coder, &organization, &desired, status).await? {
            Ok(config) => config,
            Err(outcome) => return Ok(outcome),
        },
    };
    if let Err(outcome) = config::record_config(pass, coder, &organization, &own).await? {
        return Ok(outcome);
    }
    status.server_id = Some(own.id.to_string());
    if let Some(outcome) = config::sync(pass, coder, &organization, &own, desired).await {
        return Ok(outcome);
    }
    if let Some(outcome) = config::access(pass, coder, &organization, own.id).await {
        return Ok(outcome);
    }
    Ok(decide::synced("The MCP server config in Coder matches the spec."))
}

/// Writes the status (its message cut to 256 bytes) when it changed, with an Event for a change of phase or reason.
/// Ready and stalled objects are looked at again at the slower interval that notices a disable in the dashboard.
async fn finish(pass: &Pass<'_>, status: Status, mut outcome: Outcome) -> Result<Action> {
    outcome.message = decide::bounded(&outcome.message);
    if outcome.phase != SyncPhase::Pending && outcome.requeue.is_none() {
        outcome = outcome.requeue(pass.ctx.settings.entitlements_interval);
    }
    Ok(write_outcome(pass.ctx, pass.server, pass.shown.as_ref(), status, &outcome).await?)
}

/// The finalizer: the object's own config is deleted in Coder before the object goes. An object that never sent a
/// create, or whose control plane is gone, has nothing to delete that the operator can reach.
pub async fn cleanup(server: Arc<CoderMCPServer>, ctx: Arc<Context>) -> Result<Cleanup> {
    let (server, ctx) = (server.as_ref(), ctx.as_ref());
    let uid = server.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    let status = ctx
        .statuses
        .effective(&uid, server.status.as_ref())
        .unwrap_or_default();
    let proof = RecordProof::read(ctx, server, &uid).await;
    let pass = Pass {
        server,
        ctx,
        uid: uid.clone(),
        shown: Some(status.clone()),
        record: proof.record,
        record_written: proof.written,
        predates_records: proof.predates_records,
    };
    if !pass.may_have_config(&status) {
        return Ok(Cleanup::Done);
    }
    if let Some(wait) = cleanup_waiting_out_rate_limit(ctx, &uid) {
        return Ok(wait);
    }
    let up = match upstream(ctx, server).await? {
        Reach::Ready(up) => *up,
        Reach::Gone => {
            let object = format!("{}/{}", server.namespace().unwrap_or_default(), server.name_any());
            let stays = format!(
                "the MCP server config {:?} can stay in Coder (CoderControlPlane {} is gone); the cleanup record stays for the sweep",
                server.coder_slug(),
                server.spec.control_plane_ref.name
            );
            cleanup_records::released_without_delete(ctx, RecordKind::MCPServer, &object, &stays);
            return Ok(Cleanup::Done);
        }
        Reach::NotYet(why) => return waits(&pass, why).await,
    };
    if let Some(recorded) = pass.record.as_ref().map(|r| r.deployment_id.clone()) {
        // A config in another deployment than the one the control plane now reaches cannot be deleted from here.
        let deployment = match cleanup_records::deployment_id(&up.coder).await {
            Ok(deployment) => deployment,
            Err(error) => return waits(&pass, outcomes::buildinfo_failed(&error)).await,
        };
        if recorded != deployment {
            let object = format!("{}/{}", server.namespace().unwrap_or_default(), server.name_any());
            let stays = format!(
                "the MCP server config {:?} stays in Coder deployment {recorded}; the control plane now reaches {deployment}",
                server.coder_slug()
            );
            cleanup_records::released_without_delete(ctx, RecordKind::MCPServer, &object, &stays);
            return Ok(Cleanup::Done);
        }
    }
    let organization = organization_ref(server, &status);
    Ok(
        match config::delete(&pass, &up.coder, &organization, &status).await {
            Deleted::Gone => {
                cleanup_records::remove(ctx, &uid).await?;
                Cleanup::Done
            }
            Deleted::Retry(why) => waits(&pass, why).await?,
        },
    )
}

/// The finalizer waits: the object shows `Deleting` and why (cut to 256 bytes).
async fn waits(pass: &Pass<'_>, why: Outcome) -> Result<Cleanup> {
    let what = format!("the MCP server config {:?}", pass.server.coder_slug());
    let mut outcome = outcomes::deleting(&what, &why);
    outcome.message = decide::bounded(&outcome.message);
    Ok(deletion_waits(pass.ctx, pass.server, pass.shown.as_ref(), outcome).await?)
}
