//! What a CoderAIProvider pass reads (docs/controllers/ai-provider.md): its control plane (missing or being
//! deleted: nothing is sent to Coder), the values of the Secrets the spec names, and the operator's own records of
//! the object — its signed cleanup record, or for an object of the Go operator (v0.1.5) the unsigned one it left —
//! plus what earlier passes remember.

use coder_k8s_api::ai_provider::CoderAIProvider;
use coder_k8s_coder_client::ai::AiProvider;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::desired::{self, Desired, Proof, owned};
use super::status::{self, Outcome};
use crate::cleanup_records;
use crate::cleanup_records::record::{Created, Record, RecordKind};
use crate::halt::{Halt, settle};
use crate::pass::Pass;
use crate::secrets;

/// What a pass remembers of an object for the next ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// The generation and the digest of the Secret values last synced to Coder.
    pub synced: Option<Synced>,
}

/// What was last synced to Coder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Synced {
    pub generation: i64,
    pub secrets_digest: String,
}

/// The provider the spec asks for and the records that can prove which provider in Coder is the object's.
pub struct Inputs {
    pub desired: Desired,
    /// The object's verified cleanup record and the time it was written, if trusted.
    pub record: Option<(Record, Option<Time>)>,
    /// Without one, the unsigned record the Go operator (v0.1.5) left.
    pub unsigned: Option<Record>,
}

impl Inputs {
    /// The records of `pass`'s object and the provider its spec asks for, with the Secret values `values`.
    pub async fn read(pass: &Pass<'_, CoderAIProvider>, values: Vec<String>) -> Self {
        let desired = desired::desired(&pass.object.spec, pass.object.coder_name(), values);
        let record = cleanup_records::cached_with_time(pass.ctx, &pass.uid).await;
        let unsigned = record
            .is_none()
            .then(|| cleanup_records::cached_unsigned(pass.ctx, &pass.uid))
            .flatten();
        Self {
            desired,
            record,
            unsigned,
        }
    }

    /// Whether Coder's provider is this object's (see [`owned`]); `status_id` is `status.providerID`.
    pub fn owns(&self, live: &AiProvider, status_id: Option<&str>) -> bool {
        let proof = Proof {
            record: self.record.as_ref().map(|(r, w)| (r, w.as_ref())),
            unsigned: self.unsigned.as_ref(),
            status_id,
        };
        owned(live, &self.desired.name, proof)
    }

    /// The provider ID the signed record names.
    pub fn recorded_id(&self) -> Option<String> {
        match &self.record.as_ref()?.0.created {
            Created::Provider { id, .. } => id.clone(),
            _ => None,
        }
    }

    /// The object's cleanup record: its provider in `deployment`, with the provider's ID once known.
    pub fn record(&self, pass: &Pass<'_, CoderAIProvider>, deployment: &str, id: Option<String>) -> Record {
        Record {
            kind: RecordKind::AIProvider,
            namespace: pass.namespace(),
            name: pass.name(),
            uid: pass.uid.clone(),
            deployment_id: deployment.to_owned(),
            created: Created::Provider {
                name: self.desired.name.clone(),
                id,
            },
        }
    }
}

/// The control plane is missing or being deleted: nothing is sent to Coder.
pub fn control_plane_ready(pass: &Pass<'_, CoderAIProvider>) -> Result<(), Halt<Outcome>> {
    let cp_name = &pass.object.spec.control_plane_ref.name;
    match pass.ctx.k8s.caches.control_planes.get(&pass.namespace(), cp_name) {
        None => settle(status::control_plane_not_ready(cp_name, "does not exist")),
        Some(cp) if cp.metadata.deletion_timestamp.is_some() => {
            settle(status::control_plane_not_ready(cp_name, "is being deleted"))
        }
        Some(_) => Ok(()),
    }
}

/// The values of the Secret keys the spec names, in `secret_refs` order; a missing or blank one halts the pass.
pub async fn secret_values(pass: &Pass<'_, CoderAIProvider>) -> Result<Vec<String>, Halt<Outcome>> {
    let mut values = Vec::new();
    for (secret_name, key) in desired::secret_refs(&pass.object.spec) {
        let secret = pass.ctx.k8s.secret(&pass.namespace(), &secret_name).await?;
        match secrets::value(secret.as_deref(), &key).filter(|v| !v.trim().is_empty()) {
            Some(value) => values.push(value),
            None => return settle(status::secret_not_ready(&secret_name, &key)),
        }
    }
    Ok(values)
}
