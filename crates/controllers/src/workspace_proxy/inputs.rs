//! What a CoderWorkspaceProxy pass reads (docs/controllers/workspace-proxy.md): the consent of every Secret whose
//! value leaves the cluster (checked on cached metadata), the generated token Secret of bootstrap mode and the
//! bootstrap credential, and what earlier passes remember.

use std::sync::Arc;

use coder_k8s_api::shared::DEFAULT_TOKEN_SECRET_KEY;
use coder_k8s_api::workspace_proxy::{
    CoderWorkspaceProxy, PROXY_CREATE_STARTED_ANNOTATION, PROXY_ID_ANNOTATION, ProxyBootstrapSpec,
};
use k8s_openapi::api::core::v1::Secret;

use super::desired;
use super::status::{self, Outcome};
use crate::credentials;
use crate::error::Error;
use crate::halt::Halt;
use crate::pass::Pass;
use crate::secrets;

type ProxyPass<'p> = Pass<'p, CoderWorkspaceProxy>;

/// What a pass remembers of an object for the next ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// The ID of the proxy in Coder that this object created or holds the token of.
    pub proxy_id: Option<String>,
}

/// The credential-Secret rule: every Secret whose value leaves the cluster must consent to its destination
/// (`CredentialsReady`); a refusal stops the pass.
pub fn credentials_ready(pass: &mut ProxyPass<'_>, primary_origin: &str) -> Result<(), Halt<Outcome>> {
    let (name, spec) = (pass.name(), &pass.object.spec);
    let given_token = match desired::generated_token_secret(&name, spec) {
        Some(_) => None,
        None => desired::token_reference(&name, spec).ok().map(|r| r.name),
    };
    let checks = desired::credential_checks(spec, given_token.as_deref(), primary_origin);
    let (namespace, cache) = (pass.namespace(), pass.ctx.k8s.caches.secrets.metadata());
    let refusal = checks.iter().find_map(|(secret, origin)| {
        let reason = credentials::refusal(cache.meta(&namespace, secret).as_ref(), origin)?;
        Some((reason, credentials::refusal_message(secret, reason, origin)))
    });
    let refused = refusal.is_some();
    let condition = status::credentials_condition(refusal);
    if refused {
        return Err(pass.stop(condition));
    }
    pass.set(condition);
    Ok(())
}

/// The generated token Secret of bootstrap mode as last read (`None`: it does not exist).
pub struct TokenSecret {
    pub name: String,
    pub live: Option<Arc<Secret>>,
}

impl TokenSecret {
    pub async fn read(pass: &ProxyPass<'_>, name: String) -> Result<Self, Error> {
        let live = pass.ctx.k8s.secret(&pass.namespace(), &name).await?;
        Ok(Self { name, live })
    }

    /// The proxy token it holds, if any (`<proxy ID>:<secret>`).
    pub fn token(&self) -> Option<String> {
        secrets::value(self.live.as_deref(), DEFAULT_TOKEN_SECRET_KEY).filter(|t| !t.is_empty())
    }

    /// The ID of the proxy this object created, as recorded on the Secret.
    pub fn recorded_proxy_id(&self) -> Option<String> {
        self.annotation(PROXY_ID_ANNOTATION)
    }

    /// When this object began creating its proxy in Coder, while the create's token is not stored yet.
    pub fn create_started_at(&self) -> Option<String> {
        self.annotation(PROXY_CREATE_STARTED_ANNOTATION)
    }

    /// A non-empty annotation of the Secret (only read while the Secret is this proxy's or absent: the registration
    /// plan refuses any other).
    fn annotation(&self, name: &str) -> Option<String> {
        self.live
            .as_ref()?
            .metadata
            .annotations
            .as_ref()?
            .get(name)
            .filter(|value| !value.is_empty())
            .cloned()
    }
}

/// The bootstrap credential (a Coder token that may register proxies), if its Secret holds one.
pub async fn bootstrap_credential(
    pass: &ProxyPass<'_>,
    bootstrap: &ProxyBootstrapSpec,
) -> Result<Option<String>, Error> {
    let reference = &bootstrap.credentials_secret_ref;
    let secret = pass.ctx.k8s.secret(&pass.namespace(), &reference.name).await?;
    Ok(
        secrets::value(secret.as_deref(), reference.key_or(DEFAULT_TOKEN_SECRET_KEY))
            .filter(|c| !c.is_empty()),
    )
}
