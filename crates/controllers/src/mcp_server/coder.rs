//! The Coder side of a CoderMCPServer (docs/controllers/mcp-server.md): find the object's own config (the ownership
//! proof), create it after the create marker, patch it only when it differs, the kill switch, the access list and
//! the delete.

use std::collections::BTreeSet;

use coder_k8s_api::mcp_server::CoderMCPServer;
use coder_k8s_coder_client::ai::{McpServerConfig, McpServerConfigRequest};
use coder_k8s_coder_client::{CoderClient, Error as CoderError, UnavailableReason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use uuid::Uuid;

use super::desired::{self, Proof};
use super::inputs::Records;
use super::status::{self, Outcome, coder_failed, was_in_sync};
use crate::cleanup_records::record::{Created, Record, RecordKind};
use crate::cleanup_records::{self, reached_deployment, write_before_create};
use crate::halt::{Halt, settle};
use crate::pass::Pass;
use crate::status_writer;

type ServerPass<'p> = Pass<'p, CoderMCPServer>;

/// What proves that a config under the object's slug is its own.
fn proof(pass: &ServerPass<'_>, records: &Records) -> Proof {
    let status = &pass.status;
    Proof {
        recorded_id: pass.memory().created_id.or(records.record_id()),
        marker: status.create_marker.as_ref().map(|t| t.0),
        object_created: pass.object.metadata.creation_timestamp.as_ref().map(|t| t.0),
        create_timeout: pass.ctx.settings.coder_request_timeout,
        record_written: records.written,
        legacy_server_id: status
            .server_id
            .as_deref()
            .and_then(|id| Uuid::parse_str(id).ok())
            .filter(|_| records.predates_records),
    }
}

/// Whether a config of the object may exist in Coder: a create was recorded in status or seen by this process
/// (a status wiped by someone else does not hide the latter).
pub fn may_have_config(pass: &ServerPass<'_>, records: &Records) -> bool {
    let status = &pass.status;
    status.server_id.is_some()
        || status.create_marker.is_some()
        || records.record.is_some()
        || pass.memory().created_id.is_some()
}

/// The object's cleanup record for a config in `organization` (an ID), with the config's ID once known.
fn cleanup_record(pass: &ServerPass<'_>, deployment: &str, organization: &str, id: Option<Uuid>) -> Record {
    Record {
        kind: RecordKind::MCPServer,
        namespace: pass.namespace(),
        name: pass.name(),
        uid: pass.uid.clone(),
        deployment_id: deployment.to_owned(),
        created: Created::McpServer {
            organization_id: organization.to_owned(),
            slug: pass.object.coder_slug().to_owned(),
            id: id.map(|id| id.to_string()),
        },
    }
}

/// The deployment the control plane reaches, unless the record's config is in another one (`CoderDeploymentChanged`:
/// nothing is created there, and the record is not overwritten).
async fn deployment(coder: &CoderClient, records: &Records) -> Result<String, Halt<Outcome>> {
    let recorded = records.record.as_ref().map(|r| r.deployment_id.as_str());
    reached_deployment(coder, recorded).await
}

/// The configs of `organization` as Coder lists them.
pub async fn list(coder: &CoderClient, organization: &str) -> Result<Vec<McpServerConfig>, CoderError> {
    coder.mcp_server_configs(organization).await
}

/// What Coder holds under the object's slug.
pub enum Found {
    /// The object's own config (proven).
    Own(Box<McpServerConfig>),
    /// A config under the slug that this object cannot prove it created.
    Foreign,
    /// No config of the object and none under its slug.
    Nothing,
}

/// The object's config among `configs`: the one this process recorded, else the one under its slug when the
/// ownership proof holds. An ID in `status.serverID` alone proves nothing (status can be written by others).
pub fn find(pass: &ServerPass<'_>, records: &Records, configs: &[McpServerConfig]) -> Found {
    let proof = proof(pass, records);
    if let Some(recorded) = configs.iter().find(|c| proof.recorded_id == Some(c.id)) {
        return Found::Own(Box::new(recorded.clone()));
    }
    let slug = pass.object.coder_slug();
    match configs.iter().find(|c| c.slug == slug) {
        Some(config) if desired::owned(config, &proof) => {
            pass.remember(|memory| memory.created_id = Some(config.id));
            Found::Own(Box::new(config.clone()))
        }
        Some(_) => Found::Foreign,
        None => Found::Nothing,
    }
}

/// Whether an error leaves the outcome of a write unknown (it may have been applied).
fn uncertain(error: &CoderError) -> bool {
    matches!(
        error,
        CoderError::Unavailable {
            reason: UnavailableReason::Timeout
                | UnavailableReason::ConnectionDropped
                | UnavailableReason::ServerError
                | UnavailableReason::Transport,
            ..
        }
    )
}

/// Writes the cleanup record and the create marker (a status write), then sends one create. A create whose answer
/// is lost waits: the next pass looks the slug up instead of sending another.
pub async fn create(
    pass: &mut ServerPass<'_>,
    (coder, records): (&CoderClient, &Records),
    organization: &str,
    request: &McpServerConfigRequest,
) -> Result<McpServerConfig, Halt<Outcome>> {
    // The cleanup record comes first, naming the deployment: without it, nothing is created.
    let deployment = deployment(coder, records).await?;
    write_before_create(pass.ctx, &cleanup_record(pass, &deployment, organization, None)).await?;
    pass.status.create_marker = Some(Time(Timestamp::now()));
    pass.status.server_id = None;
    status_writer::write(pass, Vec::new()).await?;
    match coder.create_mcp_server_config(organization, request).await {
        Ok(config) => {
            pass.remember(|memory| {
                memory.created_id = Some(config.id);
                memory.secrets_sent = Some(desired::secrets_digest(request));
            });
            let named = cleanup_record(pass, &deployment, organization, Some(config.id));
            cleanup_records::write(pass.ctx, &named).await?;
            Ok(config)
        }
        Err(CoderError::Conflict { .. }) => settle(status::slug_conflict(pass.object.coder_slug())),
        Err(error) if uncertain(&error) => settle(status::create_answer_lost()),
        Err(error) => settle(coder_failed("create MCP server config", &error)),
    }
}

/// Makes sure the object's signed cleanup record names its config (a config from before cleanup records, or one
/// whose create answer came back after the record's last write).
pub async fn record_config(
    pass: &ServerPass<'_>,
    (coder, records): (&CoderClient, &Records),
    organization: &str,
    config: &McpServerConfig,
) -> Result<(), Halt<Outcome>> {
    if records.record_id() == Some(config.id) {
        return Ok(());
    }
    let deployment = deployment(coder, records).await?;
    let record = cleanup_record(pass, &deployment, organization, Some(config.id));
    cleanup_records::write(pass.ctx, &record).await?;
    Ok(())
}

/// Keeps Coder's config in line with `desired`: a dashboard disable of an unchanged spec stalls with
/// `DisabledExternally`; otherwise one patch when a field or a secret value differs, and none at rest.
pub async fn sync(
    pass: &ServerPass<'_>,
    coder: &CoderClient,
    organization: &str,
    config: &McpServerConfig,
    desired: McpServerConfigRequest,
) -> Result<(), Halt<Outcome>> {
    let server = pass.object;
    let shown = pass.shown.clone().unwrap_or_default();
    let spec_unchanged = server.metadata.generation == shown.observed_generation;
    if server.spec.is_enabled() && !config.enabled && spec_unchanged && was_in_sync(&shown) {
        return settle(status::disabled_externally());
    }
    let digest = desired::secrets_digest(&desired);
    let has_secrets = desired::secrets_digest(&desired::without_secrets(desired.clone())) != digest;
    let secrets_changed = has_secrets && pass.memory().secrets_sent.as_deref() != Some(digest.as_str());
    if !desired::differs(config, &desired) && !secrets_changed {
        return Ok(());
    }
    // Every field of Coder's update request is a pointer: a field left out keeps Coder's value. So the body carries
    // the spec's fields (all of them, each time) and leaves out the secrets Coder already has and the fields the CRD
    // does not know (`model_intent`, user-set header keys), which Coder then keeps. A changed `auth_type` makes
    // Coder clear the other auth types' fields, which the spec no longer sets either.
    let body = match secrets_changed {
        true => desired.clone(),
        false => desired::without_secrets(desired.clone()),
    };
    match coder
        .patch_mcp_server_config(organization, config.id, &body)
        .await
    {
        Ok(_) => {
            pass.remember(|memory| memory.secrets_sent = Some(digest));
            Ok(())
        }
        Err(CoderError::Conflict { .. }) => settle(status::slug_conflict(server.coder_slug())),
        Err(error) => settle(coder_failed("patch MCP server config", &error)),
    }
}

/// A kill switch: disables the object's own config when Coder has it enabled, then `stall`. A failed call waits
/// and retries, so the disable is not lost.
pub async fn disable(
    pass: &ServerPass<'_>,
    (coder, records): (&CoderClient, &Records),
    organization: &str,
    stall: Outcome,
) -> Outcome {
    let configs = match list(coder, organization).await {
        Ok(configs) => configs,
        Err(error) if error.is_not_found() => return stall,
        Err(error) => return coder_failed("list MCP server configs", &error),
    };
    let Found::Own(config) = find(pass, records, &configs) else {
        return stall;
    };
    if !config.enabled {
        return stall;
    }
    // Only `enabled` is sent: Coder keeps every field an update leaves out.
    let request = McpServerConfigRequest {
        enabled: Some(false),
        ..McpServerConfigRequest::default()
    };
    match coder
        .patch_mcp_server_config(organization, config.id, &request)
        .await
    {
        Ok(_) => stall,
        Err(error) => coder_failed("disable MCP server config", &error),
    }
}

/// Sets the access list from `spec.access.groups`; `GroupNotFound` when a listed group does not exist (unlisted
/// groups and users still lose access, and no group is added). Unset `access` leaves Coder's list alone.
pub async fn access(
    pass: &ServerPass<'_>,
    coder: &CoderClient,
    organization: &str,
    id: Uuid,
) -> Result<(), Halt<Outcome>> {
    let Some(access) = pass.object.spec.access.as_ref() else {
        return Ok(());
    };
    let listed = &access.groups;
    let failed = |action: &str, error: CoderError| Halt::Settled(coder_failed(action, &error));
    let groups = coder
        .groups(organization)
        .await
        .map_err(|error| failed("list groups", error))?;
    let wanted: BTreeSet<Uuid> = groups
        .iter()
        .filter(|g| listed.contains(&g.name))
        .map(|g| g.id)
        .collect();
    let missing = listed
        .iter()
        .find(|name| !groups.iter().any(|g| &g.name == *name));
    let current = coder
        .mcp_server_acl(organization, id)
        .await
        .map_err(|error| failed("get MCP server access", error))?;
    // Coder's access-list update changes only the entries it names (`""` removes one), so the change names exactly
    // what differs from the list just read, and an entry that stays is not sent.
    if let Some(change) = desired::acl_change(&current, &wanted, missing.is_none()) {
        coder
            .patch_mcp_server_acl(organization, id, &change)
            .await
            .map_err(|error| failed("patch MCP server access", error))?;
    }
    match missing {
        Some(group) => settle(status::group_not_found(group)),
        None => Ok(()),
    }
}

/// What the delete found.
pub enum Deleted {
    /// Nothing of the object is left in Coder.
    Gone,
    /// Try again later, for the reason the outcome gives.
    Retry(Outcome),
}

/// Deletes the object's own config. Only Coder's own 404 (of the organization or the config) counts as gone; a
/// config under the slug that the object cannot prove it created is left alone.
pub async fn delete(
    pass: &ServerPass<'_>,
    (coder, records): (&CoderClient, &Records),
    organization: &str,
) -> Deleted {
    let name = pass.name();
    let configs = match list(coder, organization).await {
        Ok(configs) => configs,
        Err(error) if error.is_not_found() => return Deleted::Gone,
        Err(error) => {
            tracing::info!(%name, category = error.category(), "listing MCP server configs for the delete failed; retrying");
            return Deleted::Retry(coder_failed("list MCP server configs", &error));
        }
    };
    let config = match find(pass, records, &configs) {
        Found::Own(config) => *config,
        Found::Foreign => {
            tracing::warn!(%name, namespace = ?pass.object.metadata.namespace, "the config under the slug is not this object's; it is left in Coder");
            return Deleted::Gone;
        }
        Found::Nothing => return Deleted::Gone,
    };
    match coder.delete_mcp_server_config(organization, config.id).await {
        Ok(()) => Deleted::Gone,
        Err(error) if error.is_not_found() => Deleted::Gone,
        Err(error) => {
            tracing::info!(%name, category = error.category(), "deleting the MCP server config failed; retrying");
            Deleted::Retry(coder_failed("delete MCP server config", &error))
        }
    }
}
