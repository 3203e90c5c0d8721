//! The Coder calls of a CoderWorkspaceProxy in bootstrap mode (docs/controllers/workspace-proxy.md): get the proxy
//! by name; create it on Coder's own 404, else regenerate its token when this object created it, else change
//! nothing. Only a proxy whose ID this object recorded, or that Coder created after this object's create marker, is
//! taken over. The look-up and the create are separate calls so the marker can be written between them: only after
//! Coder said no proxy of that name exists.

use coder_k8s_api::workspace_proxy::ProxyBootstrapSpec;
use coder_k8s_coder_client::types::{
    CreateWorkspaceProxyRequest, PatchWorkspaceProxy, UpdateWorkspaceProxyResponse,
};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};

use super::desired::{self, ProxyProof};

/// What Coder holds under the proxy's name.
pub enum Lookup {
    /// No proxy of that name: create one with this request.
    Absent(CreateWorkspaceProxyRequest),
    /// This object's proxy: regenerate its token with this request (display name and icon kept).
    Owned(PatchWorkspaceProxy),
    /// A proxy this object did not create: nothing may be changed.
    NotOwned { proxy_name: String },
}

/// What registering the proxy gave.
pub enum Registration {
    /// The proxy (created, or this object's own) and its new token.
    Token { token: String, proxy_id: String },
    /// Coder holds a proxy of this name that this object did not create: nothing was changed.
    NotOwned { proxy_name: String },
    /// The token Secret's name was taken by someone else's Secret before the create marker could be written: Coder
    /// was not asked.
    SecretTaken,
    /// The registration failed, for the reason given (never a credential).
    Failed(String),
}

/// Looks up the proxy of the object named `name` in Coder and decides what registering it means.
pub async fn look_up(
    coder: &CoderClient,
    name: &str,
    bootstrap: &ProxyBootstrapSpec,
    proof: ProxyProof<'_>,
) -> Result<Lookup, CoderError> {
    let (proxy_name, display_name, icon) = desired::proxy_names(name, bootstrap);
    match coder.workspace_proxy(&proxy_name).await {
        Err(CoderError::NotFound { .. }) => Ok(Lookup::Absent(CreateWorkspaceProxyRequest {
            name: proxy_name,
            display_name,
            icon,
        })),
        Err(error) => Err(error),
        Ok(existing) if !desired::proxy_owned(&existing.id.to_string(), &existing.created_at, proof) => {
            Ok(Lookup::NotOwned { proxy_name })
        }
        Ok(existing) => {
            let (display_name, icon) =
                desired::kept_display(name, bootstrap, &existing.display_name, &existing.icon_url);
            Ok(Lookup::Owned(PatchWorkspaceProxy {
                id: existing.id,
                name: existing.name,
                display_name,
                icon,
                regenerate_token: true,
            }))
        }
    }
}

/// Creates the proxy; its answer carries the only copy of the token.
pub async fn create(
    coder: &CoderClient,
    request: &CreateWorkspaceProxyRequest,
) -> Result<Registration, CoderError> {
    Ok(token_of(coder.create_workspace_proxy(request).await?))
}

/// Regenerates the token of this object's proxy.
pub async fn regenerate(
    coder: &CoderClient,
    request: &PatchWorkspaceProxy,
) -> Result<Registration, CoderError> {
    Ok(token_of(coder.patch_workspace_proxy(request).await?))
}

fn token_of(response: UpdateWorkspaceProxyResponse) -> Registration {
    Registration::Token {
        token: response.proxy_token.expose().to_owned(),
        proxy_id: response.proxy.id.to_string(),
    }
}
