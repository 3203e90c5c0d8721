//! The CoderWorkspaceProxy reconcile (docs/controllers/workspace-proxy.md): dereference the Secrets the spec names →
//! validate the spec and the credential Secrets → in bootstrap mode register the proxy in Coder (only while its owned
//! token Secret holds no token) → build and apply the Service and Deployment → status. Direct mode uses the given
//! token Secret.

use std::collections::BTreeMap;

use coder_k8s_api::shared::{
    CREDENTIAL_DESTINATIONS_ANNOTATION, CREDENTIAL_LABEL, DEFAULT_TOKEN_SECRET_KEY, SecretKeySelector,
    WorkloadPhase,
};
use coder_k8s_api::workspace_proxy::{
    CoderWorkspaceProxy, PROXY_CREATE_STARTED_ANNOTATION, PROXY_ID_ANNOTATION, ProxyBootstrapSpec,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;

use super::coder::{self, Lookup, Registration};
use super::desired::{self, ProxyProof, RegistrationPlan};
use super::inputs::{self, TokenSecret};
use super::status::{self, Outcome};
use crate::apply::Owned;
use crate::conditions::deployment_ready;
use crate::credentials;
use crate::error::{Error, Result};
use crate::halt::Halt;
use crate::owned_secret::{OwnedSecret, step_annotations};
use crate::ownership::controlled_by;
use crate::pass::Pass;
use crate::status_writer;

type ProxyPass<'p> = Pass<'p, CoderWorkspaceProxy>;

/// One pass over a workspace proxy.
pub async fn reconcile(pass: &mut ProxyPass<'_>) -> Result<Outcome, Halt<Outcome>> {
    pass.status.phase = Some(WorkloadPhase::Pending);
    let (name, spec) = (pass.name(), &pass.object.spec);
    let (primary_url, token_ref) = match (
        desired::primary_access_url(spec),
        desired::token_reference(&name, spec),
    ) {
        (Ok(url), Ok(token)) => (url, token),
        (Err(message), _) | (_, Err(message)) => return Err(pass.stop(status::invalid_spec(message))),
    };
    let primary_origin = credentials::origin_of(&primary_url).unwrap_or_default();
    inputs::credentials_ready(pass, &primary_origin)?;
    register(pass, &primary_origin).await?;
    pass.status.proxy_token_secret_ref = Some(SecretKeySelector {
        name: token_ref.name.clone(),
        key: Some(token_ref.key_or(DEFAULT_TOKEN_SECRET_KEY).to_owned()),
    });
    let (ready, when_ready) = apply_objects(pass, &primary_url, &token_ref).await?;
    pass.status.ready_replicas = Some(ready);
    pass.set(deployment_ready(ready, "the proxy Deployment"));
    if ready > 0 {
        // Nothing of a Ready proxy is polled: its Deployment, Service and Secrets are watched, and a bootstrap
        // registration is made again only when the token Secret loses its token.
        pass.status.phase = Some(WorkloadPhase::Ready);
        return Ok(when_ready);
    }
    Ok(Outcome::after(pass.retry()))
}

/// Bootstrap mode: registers the proxy when its owned token Secret holds no token (`ProxyRegistered`); a refusal or
/// failure stops the pass. Direct mode has nothing to do.
async fn register(pass: &mut ProxyPass<'_>, primary_origin: &str) -> Result<(), Halt<Outcome>> {
    let name = pass.name();
    let (Some(bootstrap), Some(generated)) = (
        pass.object.spec.bootstrap.as_ref(),
        desired::generated_token_secret(&name, &pass.object.spec),
    ) else {
        return Ok(());
    };
    let token_secret = TokenSecret::read(pass, generated).await?;
    let owned = token_secret
        .live
        .as_ref()
        .map(|s| controlled_by(&s.metadata, &pass.uid));
    match desired::registration_plan(owned.map(|owned| (owned, token_secret.token().is_some()))) {
        RegistrationPlan::Refuse => return Err(pass.stop(status::token_secret_not_owned(&token_secret.name))),
        RegistrationPlan::Register => {
            register_in_coder(pass, bootstrap, &token_secret, primary_origin).await?
        }
        RegistrationPlan::Keep => {
            // A proxy token is `<proxy ID>:<secret>`: the owned Secret proves which proxy is this object's.
            let token = token_secret.token().unwrap_or_default();
            if let Some((proxy_id, _)) = token.split_once(':') {
                pass.remember(|memory| memory.proxy_id = Some(proxy_id.to_owned()));
            }
        }
    }
    pass.status.registered = Some(true);
    pass.set(status::registered());
    Ok(())
}

/// Registers the proxy with the bootstrap credential and stores its token; a refusal or failure stops the pass with
/// `registered: false`.
async fn register_in_coder(
    pass: &mut ProxyPass<'_>,
    bootstrap: &ProxyBootstrapSpec,
    token_secret: &TokenSecret,
    origin: &str,
) -> Result<(), Halt<Outcome>> {
    let refusal = match registration(pass, bootstrap, token_secret, origin).await? {
        (Registration::Token { token, proxy_id }, written) => {
            // Created or regenerated for this object: its own, even if the Secret write below fails.
            pass.remember(|memory| memory.proxy_id = Some(proxy_id.clone()));
            let live = written.as_ref().or(token_secret.live.as_deref());
            let record = TokenRecord {
                token: &token,
                proxy_id: Some(&proxy_id),
                create_started_at: None,
            };
            let stored = write_token_secret(pass, &token_secret.name, record, origin, live).await?;
            stored
                .is_none()
                .then(|| status::token_secret_not_owned(&token_secret.name))
        }
        (Registration::NotOwned { proxy_name }, _) => Some(status::proxy_not_owned(&proxy_name)),
        (Registration::SecretTaken, _) => Some(status::token_secret_not_owned(&token_secret.name)),
        (Registration::Failed(message), _) => Some(status::registration_failed(message)),
    };
    match refusal {
        Some(refusal) => {
            pass.status.registered = Some(false);
            Err(pass.stop(refusal))
        }
        None => Ok(()),
    }
}

/// Reads the bootstrap credential, looks the proxy up and registers it; with the token Secret as written by the
/// create marker step, when there was one.
async fn registration(
    pass: &ProxyPass<'_>,
    bootstrap: &ProxyBootstrapSpec,
    token_secret: &TokenSecret,
    origin: &str,
) -> Result<(Registration, Option<Secret>), Error> {
    let Some(credential) = inputs::bootstrap_credential(pass, bootstrap).await? else {
        let secret = &bootstrap.credentials_secret_ref.name;
        let failed = Registration::Failed(format!("Secret {secret:?} has no credential"));
        return Ok((failed, None));
    };
    let Ok(url) = url::Url::parse(&bootstrap.coder_url) else {
        let failed = Registration::Failed("bootstrap.coderURL is not a URL".to_owned());
        return Ok((failed, None));
    };
    let client = match pass.ctx.uncached_coder_client(&url, &credential) {
        Ok(client) => client,
        Err(error) => return Ok((Registration::Failed(error.to_string()), None)),
    };
    // The record on the Secret, else what this operator saw earlier (the Secret may have been deleted).
    let recorded = token_secret
        .recorded_proxy_id()
        .or_else(|| pass.memory().proxy_id);
    let marker = token_secret.create_started_at();
    let proof = ProxyProof {
        recorded_id: recorded.as_deref(),
        create_started_at: marker.as_deref(),
    };
    let failed = |error: coder_k8s_coder_client::Error| Registration::Failed(error.to_string());
    Ok(
        match coder::look_up(&client, &pass.name(), bootstrap, proof).await {
            Err(error) => (failed(error), None),
            Ok(Lookup::NotOwned { proxy_name }) => (Registration::NotOwned { proxy_name }, None),
            Ok(Lookup::Owned(request)) => {
                let registration = coder::regenerate(&client, &request).await;
                (registration.unwrap_or_else(failed), None)
            }
            Ok(Lookup::Absent(request)) => {
                // Coder has no proxy of that name: mark the Secret before the create, whose answer is the only copy of
                // the token, so a proxy left by a create cut off here is known as this object's on the next pass.
                let record = TokenRecord {
                    token: "",
                    proxy_id: None,
                    create_started_at: Some(Timestamp::now().to_string()),
                };
                let live = token_secret.live.as_deref();
                let Some(marked) = write_token_secret(pass, &token_secret.name, record, origin, live).await?
                else {
                    return Ok((Registration::SecretTaken, None));
                };
                let registration = coder::create(&client, &request).await;
                (registration.unwrap_or_else(failed), Some(marked))
            }
        },
    )
}

/// What goes into the generated token Secret at each step of a registration.
struct TokenRecord<'a> {
    /// The proxy token (empty while the create is under way).
    token: &'a str,
    /// The ID of the proxy the token is of.
    proxy_id: Option<&'a str>,
    /// When the create began (only while it is under way).
    create_started_at: Option<String>,
}

/// The generated token Secret: owned, itself a credential Secret for the primary access URL's origin, and the
/// record of which proxy in Coder this object created (or, during a create, of when it began). `None` when the name
/// is taken by a Secret this proxy does not control (nothing is written). An annotation of ours the record leaves out
/// is emptied rather than dropped (a replaced Secret keeps the annotations it has), so neither a stale ID nor a spent
/// marker outlives its step.
async fn write_token_secret(
    pass: &ProxyPass<'_>,
    name: &str,
    record: TokenRecord<'_>,
    origin: &str,
    live: Option<&Secret>,
) -> Result<Option<Secret>, Error> {
    let mut labels = desired::labels(&pass.name());
    labels.insert(CREDENTIAL_LABEL.to_owned(), "true".to_owned());
    let mut annotations =
        BTreeMap::from([(CREDENTIAL_DESTINATIONS_ANNOTATION.to_owned(), origin.to_owned())]);
    let step = [
        (PROXY_ID_ANNOTATION, record.proxy_id.map(str::to_owned)),
        (PROXY_CREATE_STARTED_ANNOTATION, record.create_started_at),
    ];
    step_annotations(&mut annotations, live, step);
    let secret = OwnedSecret {
        name,
        labels,
        annotations,
        key: DEFAULT_TOKEN_SECRET_KEY,
        value: record.token.as_bytes(),
    };
    secret.store(pass.ctx, pass.object, live).await
}

/// Applies the ServiceAccount (when asked for), the Service, the Deployment and the PodDisruptionBudget (or removes
/// the proxy's budget that the spec no longer asks for), except objects of the same names the proxy does not control
/// (`ResourcesOwned`); returns the Deployment's ready replicas and when a Ready proxy is looked at again
/// ([`Owned::when_ready`]).
async fn apply_objects(
    pass: &mut ProxyPass<'_>,
    primary_url: &str,
    token_ref: &SecretKeySelector,
) -> Result<(i32, Outcome), Error> {
    let desired =
        desired::desired_state(pass.object, primary_url, token_ref).ok_or(Error::MissingMetadata)?;
    let (ctx, mut owned) = (pass.ctx, Owned::default());
    let caches = &ctx.k8s.caches;
    if let Some(service_account) = desired.service_account {
        owned
            .apply(ctx, &caches.service_accounts, service_account)
            .await?;
    }
    owned.apply(ctx, &caches.services, desired.service).await?;
    let ready = owned.deployment(ctx, desired.deployment).await?;
    let (namespace, workload) = (pass.namespace(), desired::workload_name(&pass.name()));
    let budget = desired.pod_disruption_budget;
    owned
        .apply_or_remove(
            ctx,
            &caches.pod_disruption_budgets,
            &namespace,
            &workload,
            budget,
            &pass.uid,
        )
        .await?;
    owned.report(pass);
    Ok((ready, owned.when_ready(pass.retry())))
}

/// Writes the status the pass built (when it changed) and requeues.
pub async fn settle(pass: &mut ProxyPass<'_>, outcome: Outcome) -> Result<Action> {
    pass.status.observed_generation = pass.generation();
    status_writer::write(pass, Vec::new()).await?;
    Ok(outcome.action())
}
