//! What a CoderAIGatewayKey pass reads (docs/controllers/ai-gateway-key.md): its control plane (missing, being
//! deleted, or without the `allowKeys` opt-in: refused before any Coder call), its output Secret (one this object
//! does not own is never written) and the control plane's operator client.

use std::sync::Arc;

use coder_k8s_api::ai_gateway_key::{CoderAIGatewayKey, reasons};
use k8s_openapi::api::core::v1::Secret;

use super::desired::KeySettings;
use super::status::{Outcome, secret_not_owned};
use crate::halt::{Halt, settle};
use crate::ownership::controlled_by;
use crate::pass::Pass;
use crate::sync_status::outcomes;
use crate::upstream::{Upstream, operator_client};

/// The control plane's refusal, before any Coder call: missing, being deleted, or without `allowKeys`.
pub fn control_plane_allows_keys(pass: &Pass<'_, CoderAIGatewayKey>) -> Result<(), Halt<Outcome>> {
    let cp_name = &pass.object.spec.control_plane_ref.name;
    let Some(cp) = pass.ctx.k8s.caches.control_planes.get(&pass.namespace(), cp_name) else {
        return settle(outcomes::control_plane_not_ready(cp_name, "does not exist"));
    };
    if cp.metadata.deletion_timestamp.is_some() {
        return settle(outcomes::control_plane_not_ready(cp_name, "is being deleted"));
    }
    if cp.spec.ai_gateway.as_ref().is_some_and(|g| g.allow_keys) {
        return Ok(());
    }
    settle(Outcome::stalled(
        reasons::NOT_ALLOWED,
        format!(
            "CoderControlPlane {cp_name} does not allow AI Gateway keys: set spec.aiGateway.allowKeys: true on it."
        ),
    ))
}

/// The output Secret, if it exists; one this object does not control stalls the pass.
pub async fn output_secret(
    pass: &Pass<'_, CoderAIGatewayKey>,
    settings: &KeySettings,
) -> Result<Option<Arc<Secret>>, Halt<Outcome>> {
    let secret = pass
        .ctx
        .k8s
        .secret(&pass.namespace(), &settings.secret_name)
        .await?;
    if secret
        .as_deref()
        .is_some_and(|s| !controlled_by(&s.metadata, &pass.uid))
    {
        return settle(secret_not_owned(&settings.secret_name));
    }
    Ok(secret)
}

/// The operator client of the control plane, or the outcome that says why not.
pub async fn upstream(pass: &Pass<'_, CoderAIGatewayKey>) -> Result<Upstream, Halt<Outcome>> {
    let cp_name = &pass.object.spec.control_plane_ref.name;
    let retry = pass.retry();
    operator_client(pass.ctx, &pass.namespace(), cp_name)
        .await
        .map_err(|unreachable| {
            unreachable.settle(|refusal| outcomes::refused(cp_name, &refusal).requeue(retry))
        })
}
