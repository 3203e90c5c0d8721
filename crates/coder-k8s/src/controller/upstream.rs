//! The one way a controller reaches Coder for an object: find the `CoderControlPlane` it refers to (from the watch
//! cache), read its operator token from a Secret that control plane controls, and take the per-control-plane Coder
//! client. Every kind that calls Coder (provisioner, template test, AI kinds) uses this and maps a [`Refusal`] to its
//! own condition.

use std::sync::Arc;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_coder_client::CoderClient;
use coder_k8s_control_plane_access::{AccessError, Target, resolve, token_source};

use crate::controller::apply::controlled_by;
use crate::controller::context::Context;
use crate::controller::error::Result;
use crate::controller::secrets;

/// The control plane, where it is reached, and the Coder client with its operator token.
#[derive(Clone)]
pub struct Upstream {
    pub control_plane: Arc<CoderControlPlane>,
    pub target: Target,
    pub coder: CoderClient,
}

/// Why an object cannot reach Coder through its control plane now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The named Secret holds the token but is not controlled by the control plane: it is not read.
    TokenSecretNotOwned { secret: String },
    /// The control plane is missing or not ready, or its operator access is not.
    Access(AccessError),
}

impl Refusal {
    /// Whether the control plane itself is missing or has no URL (as opposed to its operator access).
    pub fn is_control_plane_missing(&self) -> bool {
        matches!(self, Self::Access(error) if error.is_control_plane_missing())
    }

    /// A message for a condition; it names objects, never the token.
    pub fn message(&self, control_plane: &str) -> String {
        match self {
            Self::TokenSecretNotOwned { secret } => format!(
                "Secret {secret:?} named as the operator token of CoderControlPlane {control_plane:?} is not controlled by that control plane; it is not read"
            ),
            Self::Access(error) => error.message(),
        }
    }
}

/// The control plane `cp_name` in `namespace` and a Coder client with its operator token, or why not.
pub async fn operator_client(
    ctx: &Context,
    namespace: &str,
    cp_name: &str,
) -> Result<std::result::Result<Upstream, Refusal>> {
    let control_plane = ctx.caches.control_planes.get(namespace, cp_name);
    let source = match token_source(cp_name, control_plane.as_deref()) {
        Ok(source) => source,
        Err(error) => return Ok(Err(Refusal::Access(error))),
    };
    let Some(control_plane) = control_plane else {
        return Ok(Err(Refusal::Access(AccessError::ControlPlaneUnavailable {
            control_plane: cp_name.to_owned(),
        })));
    };
    let secret = ctx
        .caches
        .secrets
        .get(&ctx.client, namespace, &source.secret)
        .await?;
    let cp_uid = control_plane.metadata.uid.as_deref().unwrap_or_default();
    if secret
        .as_deref()
        .is_some_and(|s| !controlled_by(&s.metadata, cp_uid))
    {
        // Only a Secret the control plane controls holds its operator token; any other is not read.
        return Ok(Err(Refusal::TokenSecretNotOwned {
            secret: source.secret,
        }));
    }
    let token = secrets::value(secret.as_deref(), &source.key);
    let target = match resolve(&control_plane, &source, token.as_deref()) {
        Ok(target) => target,
        Err(error) => return Ok(Err(Refusal::Access(error))),
    };
    let token = token.unwrap_or_default();
    match ctx.clients.client(&target.uid, &target.api_url, &token) {
        Ok(coder) => Ok(Ok(Upstream {
            control_plane,
            target,
            coder,
        })),
        Err(_) => Ok(Err(Refusal::Access(AccessError::ClientUnusable))),
    }
}
