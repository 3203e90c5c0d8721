//! The Coder calls of a CoderWorkspaceProxy in bootstrap mode (docs/controllers/workspace-proxy.md): get the proxy
//! by name; create it on Coder's own 404, else regenerate its token when this object created it, else change
//! nothing. Only a proxy whose ID this object recorded is taken over.

use coder_k8s_api::workspace_proxy::ProxyBootstrapSpec;
use coder_k8s_coder_client::types::{CreateWorkspaceProxyRequest, PatchWorkspaceProxy};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};

use super::desired;

/// What registering the proxy gave.
pub enum Registration {
    /// The proxy (created, or this object's own) and its new token.
    Token { token: String, proxy_id: String },
    /// Coder holds a proxy of this name that this object did not create: nothing was changed.
    NotOwned { proxy_name: String },
    /// The registration failed, for the reason given (never a credential).
    Failed(String),
}

/// Registers the proxy of the object named `name`; `recorded` is the ID of the proxy this object created.
pub async fn register(
    coder: &CoderClient,
    name: &str,
    bootstrap: &ProxyBootstrapSpec,
    recorded: Option<&str>,
) -> Result<Registration, CoderError> {
    let (proxy_name, display_name, icon) = desired::proxy_names(name, bootstrap);
    let response = match coder.workspace_proxy(&proxy_name).await {
        Err(CoderError::NotFound { .. }) => {
            let request = CreateWorkspaceProxyRequest {
                name: proxy_name,
                display_name,
                icon,
            };
            coder.create_workspace_proxy(&request).await?
        }
        Err(error) => return Err(error),
        Ok(existing) if !desired::proxy_owned(&existing.id.to_string(), recorded) => {
            return Ok(Registration::NotOwned { proxy_name });
        }
        Ok(existing) => {
            let (display_name, icon) =
                desired::kept_display(name, bootstrap, &existing.display_name, &existing.icon_url);
            let request = PatchWorkspaceProxy {
                id: existing.id,
                name: existing.name,
                display_name,
                icon,
                regenerate_token: true,
            };
            coder.patch_workspace_proxy(&request).await?
        }
    };
    Ok(Registration::Token {
        token: response.proxy_token.expose().to_owned(),
        proxy_id: response.proxy.id.to_string(),
    })
}
