//! What a CoderMCPServer pass reads (docs/controllers/mcp-server.md): the control plane and a Coder client with its
//! operator token (the shared `upstream::operator_client`), the credential Secrets with their consent, the
//! operator's own record of the object, and what earlier passes remember.

use coder_k8s_api::mcp_server::CoderMCPServer;
use k8s_openapi::jiff::Timestamp;
use uuid::Uuid;

use super::desired::{CredentialRef, credential_refs};
use super::status::{self, Outcome};
use crate::cleanup_records::{self, record::Created, record::Record};
use crate::credentials;
use crate::halt::{Halt, settle};
use crate::pass::Pass;
use crate::secrets;
use crate::sync_status::outcomes;
use crate::upstream::{Upstream, operator_client};

type ServerPass<'p> = Pass<'p, CoderMCPServer>;

/// What a pass remembers of an object for the next ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// The ID of the config this operator process created (or confirmed) for the object.
    pub created_id: Option<Uuid>,
    /// The digest of the secret values last sent to Coder.
    pub secrets_sent: Option<String>,
}

/// Whether Coder can be reached through the control plane.
pub enum Reach {
    Ready(Box<Upstream>),
    /// The control plane does not exist: nothing can reach its Coder any more.
    Gone,
    /// The control plane exists but cannot be used yet; the outcome says why.
    NotYet(Outcome),
}

/// The control plane named by the spec and a Coder client with its operator token.
pub async fn upstream(pass: &ServerPass<'_>) -> Result<Reach, crate::error::Error> {
    let (namespace, cp_name) = (pass.namespace(), pass.object.spec.control_plane_ref.name.as_str());
    if pass
        .ctx
        .k8s
        .caches
        .control_planes
        .get(&namespace, cp_name)
        .is_none()
    {
        return Ok(Reach::Gone);
    }
    match operator_client(pass.ctx, &namespace, cp_name).await {
        Ok(upstream) => Ok(Reach::Ready(Box::new(upstream))),
        Err(crate::upstream::Unreachable::Refused(refusal)) => {
            Ok(Reach::NotYet(outcomes::refused(cp_name, &refusal)))
        }
        Err(crate::upstream::Unreachable::Failed(error)) => Err(error),
    }
}

/// Every credential of the spec with its value; the `CredentialsNotReady` stall of the first Secret that is
/// missing, lacks its key, or does not consent to the origin its value goes to.
pub async fn credential_values(pass: &ServerPass<'_>) -> Result<Vec<(CredentialRef, String)>, Halt<Outcome>> {
    let namespace = pass.namespace();
    let mut values = Vec::new();
    for reference in credential_refs(&pass.object.spec) {
        let meta = pass
            .ctx
            .k8s
            .caches
            .secrets
            .metadata()
            .meta(&namespace, &reference.secret);
        if let Some(reason) = credentials::refusal(meta.as_ref(), &reference.destination) {
            return settle(status::credential_not_ready(&reference, reason));
        }
        let secret = pass.ctx.k8s.secret(&namespace, &reference.secret).await?;
        match secrets::value(secret.as_deref(), &reference.key).filter(|v| !v.is_empty()) {
            Some(value) => values.push((reference, value)),
            None => return settle(status::credential_not_ready(&reference, status::KEY_MISSING)),
        }
    }
    Ok(values)
}

/// What the operator's own records say about the object's config.
pub struct Records {
    /// The object's signed cleanup record.
    pub record: Option<Record>,
    /// When that record was written, while it names no config yet (a create was sent, its answer may be lost), if
    /// its signed time can be trusted.
    pub written: Option<Timestamp>,
    /// The object has no record and is older than this operator's signing key: the Go operator (v0.1.5), which wrote
    /// no records for MCP server configs, made it.
    pub predates_records: bool,
}

impl Records {
    pub async fn read(pass: &ServerPass<'_>) -> Self {
        let Some((record, written)) = cleanup_records::cached_with_time(pass.ctx, &pass.uid).await else {
            let key_created = cleanup_records::key(pass.ctx)
                .await
                .ok()
                .and_then(|key| key.created());
            let object_created = pass.object.metadata.creation_timestamp.as_ref().map(|t| t.0);
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

    /// The config ID the object's signed cleanup record names.
    pub fn record_id(&self) -> Option<Uuid> {
        match &self.record.as_ref()?.created {
            Created::McpServer { id, .. } => id.as_deref().and_then(|id| Uuid::parse_str(id).ok()),
            _ => None,
        }
    }
}
