//! The CoderWorkspaceProxy reconcile (docs/controllers/workspace-proxy.md): dereference the Secrets the spec names →
//! validate the spec and the credential Secrets → in bootstrap mode register the proxy in Coder (only while its owned
//! token Secret holds no token) → build and apply the Service and Deployment → status. Direct mode uses the given
//! token Secret.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use coder_k8s_api::shared::{
    CREDENTIAL_DESTINATIONS_ANNOTATION, CREDENTIAL_LABEL, DEFAULT_TOKEN_SECRET_KEY, SecretKeySelector,
    WorkloadPhase,
};
use coder_k8s_api::workspace_proxy::{
    CoderWorkspaceProxy, PROXY_ID_ANNOTATION, ProxyBootstrapSpec, WorkspaceProxyStatus,
};
use coder_k8s_coder_client::types::{CreateWorkspaceProxyRequest, PatchWorkspaceProxy};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::status::{self as decide, RegistrationPlan};
use super::{desired, names};
use crate::controller::apply::{apply_deployment, apply_owned, controlled_by, report_ownership};
use crate::controller::conditions::{Draft, deployment_ready};
use crate::controller::context::Context;
use crate::controller::credentials;
use crate::controller::error::{Error, Result};
use crate::controller::owned_secret::{self, OwnedSecret, Written};
use crate::controller::secrets;
use crate::controller::status_writer::write_status;

/// The status being built by one reconcile.
type Run = Draft<WorkspaceProxyStatus>;

/// The fact kept per proxy: the ID of the proxy in Coder that this object created or holds the token of.
const PROXY_ID_FACT: &str = "proxy-id";

/// One reconcile of a workspace proxy.
pub async fn apply_spec(proxy: Arc<CoderWorkspaceProxy>, ctx: Arc<Context>) -> Result<Action> {
    let (proxy, ctx) = (proxy.as_ref(), ctx.as_ref());
    let name = proxy.metadata.name.clone().ok_or(Error::MissingMetadata)?;
    let mut run = Run::new(
        proxy.status.clone().unwrap_or_default(),
        proxy.metadata.generation,
    );
    run.status.phase = Some(WorkloadPhase::Pending);
    let retry = ctx.settings.retry_interval;
    let (primary_url, token_ref) = match (
        names::primary_access_url(&proxy.spec),
        names::token_reference(&name, &proxy.spec),
    ) {
        (Ok(url), Ok(token)) => (url, token),
        (Err(message), _) | (_, Err(message)) => {
            run.set(decide::invalid_spec(message));
            return finish(proxy, ctx, run, retry).await;
        }
    };
    let primary_origin = credentials::origin_of(&primary_url).unwrap_or_default();
    if !credentials_ready(proxy, ctx, &name, &primary_origin, &mut run) {
        return finish(proxy, ctx, run, retry).await;
    }
    if !registered(proxy, ctx, &name, &primary_origin, &mut run).await? {
        return finish(proxy, ctx, run, retry).await;
    }
    run.status.proxy_token_secret_ref = Some(SecretKeySelector {
        name: token_ref.name.clone(),
        key: Some(token_ref.key_or(DEFAULT_TOKEN_SECRET_KEY).to_owned()),
    });
    let ready = apply_objects(proxy, ctx, &primary_url, &token_ref, &mut run).await?;
    run.status.ready_replicas = Some(ready);
    run.set(deployment_ready(ready, "the proxy Deployment"));
    if ready > 0 {
        run.status.phase = Some(WorkloadPhase::Ready);
    }
    let requeue = if ready > 0 {
        ctx.settings.entitlements_interval
    } else {
        retry
    };
    finish(proxy, ctx, run, requeue).await
}

/// The credential-Secret rule: every Secret whose value leaves the cluster must consent to its destination
/// (checked on cached metadata).
fn credentials_ready(
    proxy: &CoderWorkspaceProxy,
    ctx: &Context,
    name: &str,
    primary_origin: &str,
    run: &mut Run,
) -> bool {
    let namespace = proxy.namespace().unwrap_or_default();
    let given_token = match names::generated_token_secret(name, &proxy.spec) {
        Some(_) => None,
        None => names::token_reference(name, &proxy.spec).ok().map(|r| r.name),
    };
    let checks = decide::credential_checks(&proxy.spec, given_token.as_deref(), primary_origin);
    let cache = ctx.caches.secrets.metadata();
    let refusal = checks.iter().find_map(|(secret, origin)| {
        let reason = credentials::refusal(cache.meta(&namespace, secret).as_ref(), origin)?;
        Some((reason, credentials::refusal_message(secret, reason, origin)))
    });
    let condition = decide::credentials_condition(refusal);
    let ready = condition.status == crate::controller::conditions::ConditionStatus::True;
    run.set(condition);
    ready
}

/// Bootstrap mode: registers the proxy when its owned token Secret holds no token. `false` when that failed or was
/// refused (the condition says why). Direct mode has nothing to do.
async fn registered(
    proxy: &CoderWorkspaceProxy,
    ctx: &Context,
    name: &str,
    primary_origin: &str,
    run: &mut Run,
) -> Result<bool> {
    let (Some(bootstrap), Some(generated)) = (
        &proxy.spec.bootstrap,
        names::generated_token_secret(name, &proxy.spec),
    ) else {
        return Ok(true);
    };
    let namespace = proxy.namespace().unwrap_or_default();
    let uid = proxy.metadata.uid.clone().unwrap_or_default();
    let live = ctx
        .caches
        .secrets
        .get(&ctx.client, &namespace, &generated)
        .await?;
    let holds_token =
        secrets::value(live.as_deref(), DEFAULT_TOKEN_SECRET_KEY).is_some_and(|t| !t.is_empty());
    match decide::registration_plan(
        live.as_ref()
            .map(|s| (controlled_by(&s.metadata, &uid), holds_token)),
    ) {
        RegistrationPlan::Refuse => {
            run.set(decide::token_secret_not_owned(&generated));
            return Ok(false);
        }
        RegistrationPlan::Register => {
            // The record on the Secret, else what this operator saw earlier (the Secret may have been deleted).
            let recorded = live
                .as_ref()
                .and_then(|s| s.metadata.annotations.as_ref())
                .and_then(|a| a.get(PROXY_ID_ANNOTATION))
                .cloned()
                .or_else(|| ctx.fact(&uid, PROXY_ID_FACT));
            let registration =
                register_in_coder(ctx, &namespace, name, bootstrap, recorded.as_deref()).await?;
            let refusal = match registration {
                Ok(Registration::Token { token, proxy_id }) => {
                    // Created or regenerated for this object: its own, even if the Secret write below fails.
                    ctx.set_fact(&uid, PROXY_ID_FACT, Some(proxy_id.clone()));
                    let written = TokenSecret {
                        name: &generated,
                        token: &token,
                        proxy_id: &proxy_id,
                        origin: primary_origin,
                    };
                    match write_token_secret(proxy, ctx, written, live.as_deref()).await? {
                        true => None,
                        false => Some(decide::token_secret_not_owned(&generated)),
                    }
                }
                Ok(Registration::NotOwned { proxy_name }) => Some(decide::proxy_not_owned(&proxy_name)),
                Err(message) => Some(decide::registration_failed(message)),
            };
            if let Some(refusal) = refusal {
                run.status.registered = Some(false);
                run.set(refusal);
                return Ok(false);
            }
        }
        RegistrationPlan::Keep => {
            // A proxy token is `<proxy ID>:<secret>`: the owned Secret proves which proxy is this object's.
            let token = secrets::value(live.as_deref(), DEFAULT_TOKEN_SECRET_KEY).unwrap_or_default();
            if let Some((proxy_id, _)) = token.split_once(':') {
                ctx.set_fact(&uid, PROXY_ID_FACT, Some(proxy_id.to_owned()));
            }
        }
    }
    run.status.registered = Some(true);
    run.set(decide::registered());
    Ok(true)
}

/// What registering the proxy gave.
enum Registration {
    /// The proxy (created, or this object's own) and its new token.
    Token { token: String, proxy_id: String },
    /// Coder holds a proxy of this name that this object did not create: nothing was changed.
    NotOwned { proxy_name: String },
}

/// Reads the bootstrap credential and registers the proxy; `Err(message)` when that fails (never a credential).
/// `recorded` is the ID of the proxy this object created, as recorded on its token Secret.
async fn register_in_coder(
    ctx: &Context,
    namespace: &str,
    name: &str,
    bootstrap: &ProxyBootstrapSpec,
    recorded: Option<&str>,
) -> Result<std::result::Result<Registration, String>> {
    let reference = &bootstrap.credentials_secret_ref;
    let secret = ctx
        .caches
        .secrets
        .get(&ctx.client, namespace, &reference.name)
        .await?;
    let credential = secrets::value(secret.as_deref(), reference.key_or(DEFAULT_TOKEN_SECRET_KEY))
        .filter(|c| !c.is_empty());
    let Some(credential) = credential else {
        return Ok(Err(format!("Secret {:?} has no credential", reference.name)));
    };
    let Ok(url) = url::Url::parse(&bootstrap.coder_url) else {
        return Ok(Err("bootstrap.coderURL is not a URL".to_owned()));
    };
    Ok(match ctx.uncached_coder_client(&url, &credential) {
        Ok(coder) => register(&coder, name, bootstrap, recorded)
            .await
            .map_err(|e| e.to_string()),
        Err(error) => Err(error.to_string()),
    })
}

/// Get the proxy; create it on Coder's own 404, else regenerate its token when this object created it (its ID is
/// `recorded`), else change nothing.
async fn register(
    coder: &CoderClient,
    name: &str,
    bootstrap: &ProxyBootstrapSpec,
    recorded: Option<&str>,
) -> std::result::Result<Registration, CoderError> {
    let (proxy_name, display_name, icon) = decide::proxy_names(name, bootstrap);
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
        Ok(existing) if !decide::proxy_owned(&existing.id.to_string(), recorded) => {
            return Ok(Registration::NotOwned { proxy_name });
        }
        Ok(existing) => {
            let (display_name, icon) =
                decide::kept_display(name, bootstrap, &existing.display_name, &existing.icon_url);
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

/// What goes into the generated token Secret.
struct TokenSecret<'a> {
    name: &'a str,
    token: &'a str,
    proxy_id: &'a str,
    origin: &'a str,
}

/// The generated token Secret: owned, itself a credential Secret for the primary access URL's origin, and the
/// record of which proxy in Coder this object created. `false` when the name is taken by a Secret this proxy does
/// not control (nothing is written).
async fn write_token_secret(
    proxy: &CoderWorkspaceProxy,
    ctx: &Context,
    written: TokenSecret<'_>,
    live: Option<&Secret>,
) -> Result<bool> {
    let mut labels = names::labels(&proxy.name_any());
    labels.insert(CREDENTIAL_LABEL.to_owned(), "true".to_owned());
    let secret = OwnedSecret {
        name: written.name,
        labels,
        annotations: BTreeMap::from([
            (
                CREDENTIAL_DESTINATIONS_ANNOTATION.to_owned(),
                written.origin.to_owned(),
            ),
            (PROXY_ID_ANNOTATION.to_owned(), written.proxy_id.to_owned()),
        ]),
        key: DEFAULT_TOKEN_SECRET_KEY,
        value: written.token.as_bytes(),
    }
    .build(proxy)
    .ok_or(Error::MissingMetadata)?;
    match owned_secret::write(ctx, secret, live).await? {
        Written::Stored(stored) => {
            ctx.caches.secrets.wrote(*stored);
            Ok(true)
        }
        Written::Foreign => Ok(false),
    }
}

/// Applies the Service and the Deployment, except those of the same names the proxy does not control
/// (`ResourcesOwned`); returns the Deployment's ready replicas.
async fn apply_objects(
    proxy: &CoderWorkspaceProxy,
    ctx: &Context,
    primary_url: &str,
    token_ref: &SecretKeySelector,
    run: &mut Run,
) -> Result<i32> {
    let (deployment, service) =
        desired::desired_state(proxy, primary_url, token_ref).ok_or(Error::MissingMetadata)?;
    let cached = ctx
        .caches
        .services
        .meta(&proxy.namespace().unwrap_or_default(), &service.name_any());
    let mut not_owned: Vec<_> = apply_owned(ctx, service, cached.as_ref())
        .await?
        .err()
        .into_iter()
        .collect();
    let ready = match apply_deployment(ctx, deployment).await? {
        Ok(ready) => ready,
        Err(foreign) => {
            not_owned.push(foreign);
            0
        }
    };
    report_ownership(run, &not_owned);
    Ok(ready)
}

async fn finish(
    proxy: &CoderWorkspaceProxy,
    ctx: &Context,
    mut run: Run,
    requeue: Duration,
) -> Result<Action> {
    run.status.observed_generation = proxy.metadata.generation;
    write_status(ctx, proxy, proxy.status.as_ref(), &run.status, Vec::new()).await?;
    Ok(Action::requeue(requeue))
}

/// Whether the proxy reads the Secret `name`.
pub(super) fn reads_secret(proxy: &CoderWorkspaceProxy, name: &str) -> bool {
    let spec = &proxy.spec;
    spec.proxy_session_token_secret_ref
        .as_ref()
        .is_some_and(|r| r.name == name)
        || spec
            .bootstrap
            .as_ref()
            .is_some_and(|b| b.credentials_secret_ref.name == name)
        || credentials::secret_refs(&spec.extra_env)
            .iter()
            .any(|s| s == name)
}
