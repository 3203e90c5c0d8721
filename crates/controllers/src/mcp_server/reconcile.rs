//! The CoderMCPServer reconcile (docs/controllers/mcp-server.md): dereference the control plane → its opt-in (else
//! the kill switch) → the credential Secrets (else the kill switch) → the organization → find the object's own config
//! (or write the create marker and create it) → patch when it differs → access → status. Cleanup deletes the
//! object's own config.

use coder_k8s_api::mcp_server::{CoderMCPServer, CoderMCPServerStatus, reasons};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::ai::McpServerConfigRequest;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::coder::{self, Deleted, Found};
use super::desired;
use super::inputs::{self, Reach, Records};
use super::status::{self as decide, Outcome};
use crate::cleanup_records::{self, record::RecordKind};
use crate::error::Result;
use crate::halt::{Halt, settle};
use crate::kind::Cleanup;
use crate::pass::Pass;
use crate::status_writer::{deletion_waits, write_outcome};
use crate::sync_status::{SyncPhase, outcomes};

type ServerPass<'p> = Pass<'p, CoderMCPServer>;

/// One pass over a live object.
pub async fn reconcile(pass: &mut ServerPass<'_>) -> Result<Outcome, Halt<Outcome>> {
    pass.ctx.rate_limits.gate(&pass.uid)?;
    let records = Records::read(pass).await;
    let up = match inputs::upstream(pass).await? {
        Reach::Ready(up) => *up,
        Reach::Gone => {
            let name = &pass.object.spec.control_plane_ref.name;
            return Ok(outcomes::control_plane_not_ready(name, "does not exist"));
        }
        Reach::NotYet(outcome) => return Ok(outcome),
    };
    let reach = (&up.coder, &records);
    let organization = organization_ref(pass.object, &pass.status);
    let may_exist = coder::may_have_config(pass, &records);
    let spec_organization = &pass.object.spec.organization;
    if !desired::organization_allowed(&up.control_plane, spec_organization) {
        let stall = decide::organization_not_allowed(&up.control_plane.name_any(), spec_organization);
        // An object that never created a config makes no Coder call.
        return Ok(match may_exist {
            true => coder::disable(pass, reach, &organization, stall).await,
            false => stall,
        });
    }
    let credentials = match inputs::credential_values(pass).await {
        Err(Halt::Settled(stall)) if may_exist => {
            return Ok(coder::disable(pass, reach, &organization, stall).await);
        }
        other => other?,
    };
    let desired = desired::desired(pass.object, &credentials);
    converge(pass, reach, desired).await
}

/// `status.organizationID` once known, else the organization's name (Coder accepts both in paths).
fn organization_ref(server: &CoderMCPServer, status: &CoderMCPServerStatus) -> String {
    status
        .organization_id
        .clone()
        .unwrap_or_else(|| server.spec.organization.clone())
}

/// The organization, the object's own config (created when missing), its fields and its access.
async fn converge(
    pass: &mut ServerPass<'_>,
    (client, records): (&CoderClient, &Records),
    desired: McpServerConfigRequest,
) -> Result<Outcome, Halt<Outcome>> {
    let spec_organization = &pass.object.spec.organization;
    let organization = match client.organization(spec_organization).await {
        Ok(organization) => organization.id.to_string(),
        Err(error) if error.is_not_found() => {
            return settle(decide::organization_not_found(spec_organization));
        }
        Err(error) => return settle(decide::coder_failed("get organization", &error)),
    };
    pass.status.organization_id = Some(organization.clone());
    let configs = coder::list(client, &organization)
        .await
        .map_err(|error| Halt::Settled(decide::coder_failed("list MCP server configs", &error)))?;
    let own = match coder::find(pass, records, &configs) {
        Found::Own(config) => *config,
        Found::Foreign => return settle(decide::slug_taken(pass.object.coder_slug())),
        Found::Nothing => coder::create(pass, (client, records), &organization, &desired).await?,
    };
    coder::record_config(pass, (client, records), &organization, &own).await?;
    pass.status.server_id = Some(own.id.to_string());
    coder::sync(pass, client, &organization, &own, desired).await?;
    coder::access(pass, client, &organization, own.id).await?;
    Ok(decide::synced("The MCP server config in Coder matches the spec."))
}

/// Writes the status (its message cut to 256 bytes) when it changed, with an Event for a change of phase or reason.
/// A settled object is looked at again on a change of what it reads, or of what it waits on in Coder (the shared
/// `poll`); only the stalls on a failure that neither shows (an unsupported deployment, a token Coder refuses, a
/// rejected request) are tried again after the poll interval.
pub async fn settle_outcome(pass: &mut ServerPass<'_>, mut outcome: Outcome) -> Result<Action> {
    outcome.message = decide::bounded(&outcome.message);
    let retried = [
        reasons::NOT_SUPPORTED,
        reasons::OPERATOR_ACCESS_NOT_READY,
        reasons::REJECTED,
    ];
    if outcome.phase != SyncPhase::Pending && outcome.requeue.is_none() && retried.contains(&outcome.reason) {
        outcome = outcome.requeue(pass.ctx.settings.entitlements_interval);
    }
    write_outcome(pass, outcome).await
}

/// The finalizer: the object's own config is deleted in Coder before the object goes. An object that never sent a
/// create, or whose control plane is gone, has nothing to delete that the operator can reach.
pub async fn cleanup(pass: &mut ServerPass<'_>) -> Result<Cleanup> {
    let records = Records::read(pass).await;
    if !coder::may_have_config(pass, &records) {
        return Ok(Cleanup::Done);
    }
    if let Some(wait) = pass.ctx.rate_limits.cleanup_gate(&pass.uid) {
        return Ok(wait);
    }
    let slug = pass.object.coder_slug().to_owned();
    let up = match inputs::upstream(pass).await? {
        Reach::Ready(up) => *up,
        Reach::Gone => {
            let cp_name = &pass.object.spec.control_plane_ref.name;
            let stays = format!(
                "the MCP server config {slug:?} can stay in Coder (CoderControlPlane {cp_name} is gone); the cleanup record stays for the sweep"
            );
            return Ok(released(pass, &stays));
        }
        Reach::NotYet(why) => return waits(pass, why).await,
    };
    if let Some(recorded) = records.record.as_ref().map(|r| r.deployment_id.clone()) {
        // A config in another deployment than the one the control plane now reaches cannot be deleted from here.
        let deployment = match cleanup_records::deployment_id(&up.coder).await {
            Ok(deployment) => deployment,
            Err(error) => return waits(pass, outcomes::buildinfo_failed(&error)).await,
        };
        if recorded != deployment {
            let stays = format!(
                "the MCP server config {slug:?} stays in Coder deployment {recorded}; the control plane now reaches {deployment}"
            );
            return Ok(released(pass, &stays));
        }
    }
    let organization = organization_ref(pass.object, &pass.status);
    match coder::delete(pass, (&up.coder, &records), &organization).await {
        Deleted::Gone => {
            cleanup_records::remove(pass.ctx, &pass.uid).await?;
            Ok(Cleanup::Done)
        }
        Deleted::Retry(why) => waits(pass, why).await,
    }
}

fn released(pass: &ServerPass<'_>, stays: &str) -> Cleanup {
    let object = format!("{}/{}", pass.namespace(), pass.name());
    cleanup_records::released_without_delete(pass.ctx, RecordKind::MCPServer, &object, stays);
    Cleanup::Done
}

/// The finalizer waits: the object shows `Deleting` and why (cut to 256 bytes).
async fn waits(pass: &mut ServerPass<'_>, why: Outcome) -> Result<Cleanup> {
    let what = format!("the MCP server config {:?}", pass.object.coder_slug());
    let mut outcome = outcomes::deleting(&what, &why);
    outcome.message = decide::bounded(&outcome.message);
    deletion_waits(pass, outcome).await
}
