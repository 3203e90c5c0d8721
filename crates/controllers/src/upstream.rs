//! The one way a controller reaches Coder for an object: find the `CoderControlPlane` it refers to (from the watch
//! cache), read its operator token from a Secret that control plane controls, and take the per-control-plane Coder
//! client. Every kind that calls Coder (provisioner, template test, AI kinds) uses this and maps a [`Refusal`] to its
//! own condition.

use std::sync::Arc;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_coder_client::CoderClient;
use coder_k8s_control_plane_access::{AccessError, Target, resolve, token_source};

use crate::context::Context;
use crate::error::Error;
use crate::halt::Halt;
use crate::ownership::controlled_by;
use crate::refusal::Refusal;
use crate::secrets;

/// The control plane, where it is reached, and the Coder client with its operator token.
#[derive(Clone)]
pub struct Upstream {
    pub control_plane: Arc<CoderControlPlane>,
    pub target: Target,
    pub coder: CoderClient,
}

/// Why a pass cannot reach Coder through the control plane.
#[derive(Debug)]
pub enum Unreachable {
    /// Kubernetes failed while the token was read.
    Failed(Error),
    /// The control plane or its operator access refuses (see [`Refusal`]).
    Refused(Refusal),
}

impl Unreachable {
    /// The halt of a pass that ends a refusal with the outcome `settle` makes of it.
    pub fn settle<O>(self, settle: impl FnOnce(Refusal) -> O) -> Halt<O> {
        match self {
            Self::Failed(error) => Halt::Failed(error),
            Self::Refused(refusal) => Halt::Settled(settle(refusal)),
        }
    }
}

impl From<kube::Error> for Unreachable {
    fn from(error: kube::Error) -> Self {
        Self::Failed(error.into())
    }
}

/// The control plane `cp_name` in `namespace` and a Coder client with its operator token, or why not.
pub async fn operator_client(ctx: &Context, namespace: &str, cp_name: &str) -> Result<Upstream, Unreachable> {
    let refused = |refusal| Err(Unreachable::Refused(refusal));
    let control_plane = ctx.k8s.caches.control_planes.get(namespace, cp_name);
    let source = match token_source(cp_name, control_plane.as_deref()) {
        Ok(source) => source,
        Err(error) => return refused(Refusal::Access(error)),
    };
    let Some(control_plane) = control_plane else {
        return refused(Refusal::Access(AccessError::ControlPlaneUnavailable {
            control_plane: cp_name.to_owned(),
        }));
    };
    let secret = ctx.k8s.secret(namespace, &source.secret).await?;
    let cp_uid = control_plane.metadata.uid.as_deref().unwrap_or_default();
    if secret
        .as_deref()
        .is_some_and(|s| !controlled_by(&s.metadata, cp_uid))
    {
        // Only a Secret the control plane controls holds its operator token; any other is not read.
        return refused(Refusal::TokenSecretNotOwned {
            secret: source.secret,
        });
    }
    let token = secrets::value(secret.as_deref(), &source.key);
    let target = match resolve(&control_plane, &source, token.as_deref()) {
        Ok(target) => target,
        Err(error) => return refused(Refusal::Access(error)),
    };
    let token = token.unwrap_or_default();
    match ctx.clients.client(&target.uid, &target.api_url, &token) {
        Ok(coder) => Ok(Upstream {
            control_plane,
            target,
            coder,
        }),
        Err(_) => refused(Refusal::Access(AccessError::ClientUnusable)),
    }
}
