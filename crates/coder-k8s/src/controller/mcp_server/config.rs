//! The Coder side of a CoderMCPServer (docs/controllers/mcp-server.md): find the object's own config (the ownership
//! proof), create it after the create marker, patch it only when it differs, the kill switch, the access list and
//! the delete.

use std::collections::BTreeSet;

use coder_k8s_api::mcp_server::{CoderMCPServer, CoderMCPServerStatus, reasons};
use coder_k8s_coder_client::ai::{McpServerConfig, McpServerConfigRequest};
use coder_k8s_coder_client::{CoderClient, Error as CoderError, UnavailableReason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use uuid::Uuid;

use super::names::{self, Proof};
use super::status::{coder_failed, was_in_sync};
use crate::controller::cleanup_records::record::{Created, Record, RecordKind};
use crate::controller::cleanup_records::{self, deployment_id};
use crate::controller::context::Context;
use crate::controller::error::Result;
use crate::controller::status_writer::write_status;
use crate::controller::sync_status::{Outcome, outcomes};

/// Fact: the ID of the config this operator process created (or confirmed) for the object.
const CREATED_ID: &str = "mcp-server-created-id";
/// Fact: the digest of the secret values last sent to Coder.
const SECRETS_SENT: &str = "mcp-server-secrets";

/// One pass over one object.
pub(super) struct Pass<'a> {
    pub server: &'a CoderMCPServer,
    pub ctx: &'a Context,
    pub uid: String,
    /// The status the object has before this pass (or after the marker write, once written).
    pub shown: Option<CoderMCPServerStatus>,
    /// The object's signed cleanup record, if any.
    pub record: Option<Record>,
    /// When that record was written, while it names no config yet and its signed time can be trusted.
    pub record_written: Option<Timestamp>,
    /// The object is older than this operator's signed records (the Go operator's, which wrote none for MCP).
    pub predates_records: bool,
}

impl Pass<'_> {
    fn proof(&self, status: &CoderMCPServerStatus) -> Proof {
        Proof {
            recorded_id: self
                .ctx
                .fact(&self.uid, CREATED_ID)
                .and_then(|id| Uuid::parse_str(&id).ok())
                .or(self.record_id()),
            marker: status.create_marker.as_ref().map(|t| t.0),
            object_created: self.server.metadata.creation_timestamp.as_ref().map(|t| t.0),
            create_timeout: self.ctx.settings.coder_request_timeout,
            record_written: self.record_written,
            legacy_server_id: status
                .server_id
                .as_deref()
                .and_then(|id| Uuid::parse_str(id).ok())
                .filter(|_| self.predates_records),
        }
    }

    /// Whether a config of the object may exist in Coder: a create was recorded in status or seen by this process
    /// (a status wiped by someone else does not hide the latter).
    pub fn may_have_config(&self, status: &CoderMCPServerStatus) -> bool {
        status.server_id.is_some()
            || status.create_marker.is_some()
            || self.record.is_some()
            || self.ctx.fact(&self.uid, CREATED_ID).is_some()
    }

    /// The config ID the object's signed cleanup record names.
    fn record_id(&self) -> Option<Uuid> {
        match &self.record.as_ref()?.created {
            Created::McpServer { id, .. } => id.as_deref().and_then(|id| Uuid::parse_str(id).ok()),
            _ => None,
        }
    }

    /// `CoderDeploymentChanged` when the record's config is in another deployment than `deployment`: nothing is
    /// created there, and the record is not overwritten.
    fn deployment_changed(&self, deployment: &str) -> Option<Outcome> {
        let recorded = self.record.as_ref().map(|r| r.deployment_id.as_str());
        outcomes::deployment_changed(recorded, deployment)
    }

    /// The object's cleanup record for a config in `organization` (an ID), with the config's ID once known.
    fn cleanup_record(&self, deployment: &str, organization: &str, id: Option<Uuid>) -> Record {
        Record {
            kind: RecordKind::MCPServer,
            namespace: self.server.namespace().unwrap_or_default(),
            name: self.server.name_any(),
            uid: self.uid.clone(),
            deployment_id: deployment.to_owned(),
            created: Created::McpServer {
                organization_id: organization.to_owned(),
                slug: self.server.coder_slug().to_owned(),
                id: id.map(|id| id.to_string()),
            },
        }
    }

    fn record(&self, config: &McpServerConfig) {
        self.ctx
            .set_fact(&self.uid, CREATED_ID, Some(config.id.to_string()));
    }
}

/// The configs of the organization as Coder lists them.
pub(super) async fn list(
    coder: &CoderClient,
    organization: &str,
) -> std::result::Result<Vec<McpServerConfig>, CoderError> {
    coder.mcp_server_configs(organization).await
}

/// What Coder holds under the object's slug.
pub(super) enum Found {
    /// The object's own config (proven).
    Own(Box<McpServerConfig>),
    /// A config under the slug that this object cannot prove it created.
    Foreign,
    /// No config of the object and none under its slug.
    Nothing,
}

/// The object's config among `configs`: the one this process recorded, else the one under its slug when the
/// ownership proof holds. An ID in `status.serverID` alone proves nothing (status can be written by others).
pub(super) fn find(pass: &Pass<'_>, configs: &[McpServerConfig], status: &CoderMCPServerStatus) -> Found {
    let proof = pass.proof(status);
    if let Some(recorded) = configs.iter().find(|c| proof.recorded_id == Some(c.id)) {
        return Found::Own(Box::new(recorded.clone()));
    }
    let slug = pass.server.coder_slug();
    match configs.iter().find(|c| c.slug == slug) {
        Some(config) if names::owned(config, &proof) => {
            pass.record(config);
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

/// Writes the create marker (a status write), then sends one create. A create whose answer is lost waits: the next
/// pass looks the slug up instead of sending another.
pub(super) async fn create(
    pass: &mut Pass<'_>,
    coder: &CoderClient,
    organization: &str,
    request: &McpServerConfigRequest,
    status: &mut CoderMCPServerStatus,
) -> Result<std::result::Result<McpServerConfig, Outcome>> {
    // The cleanup record comes first, naming the deployment: without it, nothing is created.
    let deployment = match deployment_id(coder).await {
        Ok(deployment) => deployment,
        Err(error) => return Ok(Err(outcomes::buildinfo_failed(&error))),
    };
    if let Some(changed) = pass.deployment_changed(&deployment) {
        return Ok(Err(changed));
    }
    let record = pass.cleanup_record(&deployment, organization, None);
    if let Err(error) = cleanup_records::write(pass.ctx, &record).await {
        let namespace = &pass.ctx.settings.operator_namespace;
        return Ok(Err(outcomes::record_failed(namespace, &error)));
    }
    status.create_marker = Some(Time(Timestamp::now()));
    status.server_id = None;
    write_status(pass.ctx, pass.server, pass.shown.as_ref(), status, Vec::new()).await?;
    pass.shown = Some(status.clone());
    Ok(
        match coder.create_mcp_server_config(organization, request).await {
            Ok(config) => {
                pass.record(&config);
                remember_secrets(pass, request);
                let named = pass.cleanup_record(&deployment, organization, Some(config.id));
                cleanup_records::write(pass.ctx, &named).await?;
                Ok(config)
            }
            Err(CoderError::Conflict { .. }) => Err(Outcome::stalled(
                reasons::SLUG_CONFLICT,
                format!(
                    "Another MCP server config in Coder uses the slug {:?}.",
                    pass.server.coder_slug()
                ),
            )),
            Err(error) if uncertain(&error) => Err(Outcome::pending(
                reasons::CODER_UNAVAILABLE,
                "The create's answer was lost; the next pass looks the slug up in the organization.",
            )),
            Err(error) => Err(coder_failed("create MCP server config", &error)),
        },
    )
}

/// Makes sure the object's signed cleanup record names its config (a config from before cleanup records, or one
/// whose create answer came back after the record's last write).
pub(super) async fn record_config(
    pass: &Pass<'_>,
    coder: &CoderClient,
    organization: &str,
    config: &McpServerConfig,
) -> Result<std::result::Result<(), Outcome>> {
    if pass.record_id() == Some(config.id) {
        return Ok(Ok(()));
    }
    let deployment = match deployment_id(coder).await {
        Ok(deployment) => deployment,
        Err(error) => return Ok(Err(outcomes::buildinfo_failed(&error))),
    };
    if let Some(changed) = pass.deployment_changed(&deployment) {
        return Ok(Err(changed));
    }
    cleanup_records::write(
        pass.ctx,
        &pass.cleanup_record(&deployment, organization, Some(config.id)),
    )
    .await?;
    Ok(Ok(()))
}

fn remember_secrets(pass: &Pass<'_>, request: &McpServerConfigRequest) {
    pass.ctx
        .set_fact(&pass.uid, SECRETS_SENT, Some(names::secrets_digest(request)));
}

/// Keeps Coder's config in line with `desired`: a dashboard disable of an unchanged spec stalls with
/// `DisabledExternally`; otherwise one patch when a field or a secret value differs, and none at rest.
pub(super) async fn sync(
    pass: &Pass<'_>,
    coder: &CoderClient,
    organization: &str,
    config: &McpServerConfig,
    desired: McpServerConfigRequest,
) -> Option<Outcome> {
    let server = pass.server;
    let shown = pass.shown.clone().unwrap_or_default();
    let spec_unchanged = server.metadata.generation == shown.observed_generation;
    if server.spec.is_enabled() && !config.enabled && spec_unchanged && was_in_sync(&shown) {
        return Some(Outcome::stalled(
            reasons::DISABLED_EXTERNALLY,
            "The server was disabled in Coder; the operator leaves it disabled until the next spec edit.",
        ));
    }
    let digest = names::secrets_digest(&desired);
    let has_secrets = names::secrets_digest(&names::without_secrets(desired.clone())) != digest;
    let secrets_changed =
        has_secrets && pass.ctx.fact(&pass.uid, SECRETS_SENT).as_deref() != Some(digest.as_str());
    if !names::differs(config, &desired) && !secrets_changed {
        return None;
    }
    // Every field of Coder's update request is a pointer: a field left out keeps Coder's value. So the body carries
    // the spec's fields (all of them, each time) and leaves out the secrets Coder already has and the fields the CRD
    // does not know (`model_intent`, user-set header keys), which Coder then keeps. A changed `auth_type` makes
    // Coder clear the other auth types' fields, which the spec no longer sets either.
    let body = if secrets_changed {
        desired.clone()
    } else {
        names::without_secrets(desired.clone())
    };
    match coder
        .patch_mcp_server_config(organization, config.id, &body)
        .await
    {
        Ok(_) => {
            remember_secrets(pass, &desired);
            None
        }
        Err(CoderError::Conflict { .. }) => Some(Outcome::stalled(
            reasons::SLUG_CONFLICT,
            format!(
                "Another MCP server config in Coder uses the slug {:?}.",
                server.coder_slug()
            ),
        )),
        Err(error) => Some(coder_failed("patch MCP server config", &error)),
    }
}

/// A kill switch: disables the object's own config when Coder has it enabled, then `stall`. A failed call waits
/// and retries, so the disable is not lost.
pub(super) async fn disable(
    pass: &Pass<'_>,
    coder: &CoderClient,
    organization: &str,
    status: &CoderMCPServerStatus,
    stall: Outcome,
) -> Outcome {
    let configs = match list(coder, organization).await {
        Ok(configs) => configs,
        Err(error) if error.is_not_found() => return stall,
        Err(error) => return coder_failed("list MCP server configs", &error),
    };
    let Found::Own(config) = find(pass, &configs, status) else {
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
pub(super) async fn access(
    pass: &Pass<'_>,
    coder: &CoderClient,
    organization: &str,
    id: Uuid,
) -> Option<Outcome> {
    let listed = &pass.server.spec.access.as_ref()?.groups;
    let groups = match coder.groups(organization).await {
        Ok(groups) => groups,
        Err(error) => return Some(coder_failed("list groups", &error)),
    };
    let wanted: BTreeSet<Uuid> = groups
        .iter()
        .filter(|g| listed.contains(&g.name))
        .map(|g| g.id)
        .collect();
    let missing: Vec<&String> = listed
        .iter()
        .filter(|name| !groups.iter().any(|g| &g.name == *name))
        .collect();
    let current = match coder.mcp_server_acl(organization, id).await {
        Ok(acl) => acl,
        Err(error) => return Some(coder_failed("get MCP server access", &error)),
    };
    // Coder's access-list update changes only the entries it names (`""` removes one), so the change names exactly
    // what differs from the list just read, and an entry that stays is not sent.
    if let Some(change) = names::acl_change(&current, &wanted, missing.is_empty())
        && let Err(error) = coder.patch_mcp_server_acl(organization, id, &change).await
    {
        return Some(coder_failed("patch MCP server access", &error));
    }
    (!missing.is_empty()).then(|| {
        Outcome::stalled(
            reasons::GROUP_NOT_FOUND,
            format!(
                "Coder has no group {:?} in the organization; no group was given access.",
                missing[0]
            ),
        )
    })
}

/// What the delete found.
pub(super) enum Deleted {
    /// Nothing of the object is left in Coder.
    Gone,
    /// Try again later, for the reason the outcome gives.
    Retry(Outcome),
}

/// Deletes the object's own config. Only Coder's own 404 (of the organization or the config) counts as gone; a
/// config under the slug that the object cannot prove it created is left alone.
pub(super) async fn delete(
    pass: &Pass<'_>,
    coder: &CoderClient,
    organization: &str,
    status: &CoderMCPServerStatus,
) -> Deleted {
    let configs = match list(coder, organization).await {
        Ok(configs) => configs,
        Err(error) if error.is_not_found() => return Deleted::Gone,
        Err(error) => {
            tracing::info!(name = %pass.server.name_any(), category = error.category(), "listing MCP server configs for the delete failed; retrying");
            return Deleted::Retry(coder_failed("list MCP server configs", &error));
        }
    };
    let config = match find(pass, &configs, status) {
        Found::Own(config) => *config,
        Found::Foreign => {
            tracing::warn!(name = %pass.server.name_any(), namespace = ?pass.server.namespace(), "the config under the slug is not this object's; it is left in Coder");
            return Deleted::Gone;
        }
        Found::Nothing => return Deleted::Gone,
    };
    match coder.delete_mcp_server_config(organization, config.id).await {
        Ok(()) => Deleted::Gone,
        Err(error) if error.is_not_found() => Deleted::Gone,
        Err(error) => {
            tracing::info!(name = %pass.server.name_any(), category = error.category(), "deleting the MCP server config failed; retrying");
            Deleted::Retry(coder_failed("delete MCP server config", &error))
        }
    }
}
