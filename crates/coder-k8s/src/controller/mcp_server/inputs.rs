//! Dereference and validate for a CoderMCPServer pass (docs/controllers/mcp-server.md): the control plane and a
//! Coder client with its operator token (the shared `upstream::operator_client`), and the credential Secrets with
//! their consent.

use coder_k8s_api::mcp_server::{CoderMCPServer, reasons};
use coder_k8s_api::shared::{CREDENTIAL_DESTINATIONS_ANNOTATION, CREDENTIAL_LABEL};
use kube::ResourceExt;

use super::names::{CredentialRef, credential_refs};
use crate::controller::context::Context;
use crate::controller::credentials;
use crate::controller::error::Result;
use crate::controller::secrets;
use crate::controller::sync_status::{Outcome, outcomes};
use crate::controller::upstream::{Upstream, operator_client};

/// Whether Coder can be reached through the control plane.
pub(super) enum Reach {
    Ready(Box<Upstream>),
    /// The control plane does not exist: nothing can reach its Coder any more.
    Gone,
    /// The control plane exists but cannot be used yet; the outcome says why.
    NotYet(Outcome),
}

/// The control plane named by the spec and a Coder client with its operator token.
pub(super) async fn upstream(ctx: &Context, server: &CoderMCPServer) -> Result<Reach> {
    let namespace = server.namespace().unwrap_or_default();
    let cp_name = server.spec.control_plane_ref.name.as_str();
    if ctx.caches.control_planes.get(&namespace, cp_name).is_none() {
        return Ok(Reach::Gone);
    }
    Ok(match operator_client(ctx, &namespace, cp_name).await? {
        Ok(upstream) => Reach::Ready(Box::new(upstream)),
        Err(refusal) => Reach::NotYet(outcomes::refused(cp_name, &refusal)),
    })
}

/// Every credential of the spec with its value, or the `CredentialsNotReady` stall of the first Secret that is
/// missing, lacks its key, or does not consent to the origin its value goes to.
pub(super) async fn credential_values(
    ctx: &Context,
    server: &CoderMCPServer,
) -> Result<std::result::Result<Vec<(CredentialRef, String)>, Outcome>> {
    let namespace = server.namespace().unwrap_or_default();
    let mut values = Vec::new();
    for reference in credential_refs(&server.spec) {
        let meta = ctx.caches.secrets.metadata().meta(&namespace, &reference.secret);
        if let Some(reason) = credentials::refusal(meta.as_ref(), &reference.destination) {
            return Ok(Err(not_ready(&reference, reason)));
        }
        let secret = ctx
            .caches
            .secrets
            .get(&ctx.client, &namespace, &reference.secret)
            .await?;
        match secrets::value(secret.as_deref(), &reference.key).filter(|v| !v.is_empty()) {
            Some(value) => values.push((reference, value)),
            None => return Ok(Err(not_ready(&reference, "KeyMissing"))),
        }
    }
    Ok(Ok(values))
}

/// The stall of a Secret that cannot be used; it names the Secret, the key and the origin, never a value.
fn not_ready(reference: &CredentialRef, reason: &str) -> Outcome {
    let (secret, origin) = (&reference.secret, &reference.destination);
    let why = match reason {
        credentials::reasons::SECRET_NOT_FOUND => format!("Secret {secret:?} does not exist"),
        credentials::reasons::SECRET_NOT_MARKED => {
            format!("Secret {secret:?} does not carry the label {CREDENTIAL_LABEL}=true")
        }
        "KeyMissing" => format!("Secret {secret:?} has no value under key {:?}", reference.key),
        _ => format!(
            "Secret {secret:?} does not list {origin} in its annotation {CREDENTIAL_DESTINATIONS_ANNOTATION}"
        ),
    };
    Outcome::stalled(
        reasons::CREDENTIALS_NOT_READY,
        format!("{why}; the server is disabled in Coder until the Secret consents."),
    )
}
