//! The CoderWorkspaceProxy reconciler (contract §2.3 with the v0.1.5 credential-Secret contract): direct mode uses
//! the given token Secret; bootstrap mode registers the proxy in Coder and keeps its token in an owned Secret.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use coder_k8s_api::shared::{
    CREDENTIAL_DESTINATIONS_ANNOTATION, CREDENTIAL_LABEL, DEFAULT_TOKEN_SECRET_KEY, SecretKeySelector,
    WorkloadPhase,
};
use coder_k8s_api::workspace_proxy::{CoderWorkspaceProxy, WorkspaceProxyStatus, conditions};
use coder_k8s_coder_client::types::{CreateWorkspaceProxyRequest, PatchWorkspaceProxy};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::desired;
use crate::controller::apply::{apply, apply_status, controlled_by};
use crate::controller::conditions::{ConditionStatus, Decided, set_condition};
use crate::controller::context::Context;
use crate::controller::credentials;
use crate::controller::secrets;

/// Kind label of metrics and logs.
pub const KIND: &str = "CoderWorkspaceProxy";
/// Icon sent when the spec names none: Coder requires a non-empty icon on PATCH.
const DEFAULT_ICON: &str = "/emojis/1f310.png";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("the object has no name, namespace or UID yet")]
    MissingMetadata,
}

impl Error {
    pub fn category(&self) -> &'static str {
        match self {
            Self::Kube(_) => "kube",
            Self::MissingMetadata => "metadata",
        }
    }
}

pub fn error_policy(proxy: Arc<CoderWorkspaceProxy>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.failure(KIND, error.category());
    tracing::warn!(name = %proxy.name_any(), category = error.category(), %error, "reconcile failed");
    Action::requeue(ctx.settings.retry_interval)
}

fn decided(
    type_: &'static str,
    status: ConditionStatus,
    reason: &'static str,
    message: impl Into<String>,
) -> Decided {
    Decided {
        type_,
        status,
        reason,
        message: message.into(),
    }
}

pub async fn reconcile(proxy: Arc<CoderWorkspaceProxy>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _measure = ctx.metrics.start(KIND);
    let name = proxy.metadata.name.clone().ok_or(Error::MissingMetadata)?;
    let namespace = proxy.namespace().ok_or(Error::MissingMetadata)?;
    let uid = proxy.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    let generation = proxy.metadata.generation;
    let now = Time(Timestamp::now());
    let spec = &proxy.spec;
    let mut status = proxy.status.clone().unwrap_or_default();
    status.phase = Some(WorkloadPhase::Pending);
    let retry = ctx.settings.retry_interval;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);

    let (primary_url, token_ref) = match (
        desired::primary_access_url(spec),
        desired::token_reference(&name, spec),
    ) {
        (Ok(url), Ok(token)) => (url, token),
        (Err(message), _) | (_, Err(message)) => {
            set_condition(
                &mut status.conditions,
                decided(
                    conditions::PROXY_REGISTERED,
                    ConditionStatus::False,
                    "InvalidSpec",
                    message,
                ),
                generation,
                now,
            );
            return finish(&proxy, &ctx, status, retry).await;
        }
    };
    let primary_origin = credentials::origin_of(&primary_url).unwrap_or_default();

    // Credential-Secret contract: every Secret whose value leaves the cluster must consent to its destination.
    let mut checks: Vec<(String, String)> = credentials::secret_refs(&spec.extra_env)
        .into_iter()
        .map(|secret| (secret, primary_origin.clone()))
        .collect();
    let generated = desired::generated_token_secret(&name, spec);
    if generated.is_none() {
        checks.push((token_ref.name.clone(), primary_origin.clone()));
    }
    if let Some(bootstrap) = &spec.bootstrap {
        let coder_origin = credentials::origin_of(&bootstrap.coder_url).unwrap_or_default();
        checks.push((bootstrap.credentials_secret_ref.name.clone(), coder_origin));
    }
    for (secret_name, origin) in &checks {
        let secret = secrets.get_opt(secret_name).await?;
        if let Some(reason) = credentials::refusal(secret.as_ref(), origin) {
            let message = credentials::refusal_message(secret_name, reason, origin);
            set_condition(
                &mut status.conditions,
                decided(
                    conditions::CREDENTIALS_READY,
                    ConditionStatus::False,
                    reason,
                    message,
                ),
                generation,
                now,
            );
            return finish(&proxy, &ctx, status, retry).await;
        }
    }
    set_condition(
        &mut status.conditions,
        decided(
            conditions::CREDENTIALS_READY,
            ConditionStatus::True,
            credentials::reasons::VERIFIED,
            "every Secret used is a credential Secret for its destination",
        ),
        generation,
        now.clone(),
    );

    // Bootstrap mode: register the proxy and keep its token.
    if let (Some(bootstrap), Some(generated)) = (&spec.bootstrap, &generated) {
        let live = secrets.get_opt(generated).await?;
        if live.as_ref().is_some_and(|s| !controlled_by(s, &uid)) {
            let message = format!(
                "Secret {generated:?} exists and this proxy does not own it; set bootstrap.generatedTokenSecretName to a name that does not exist"
            );
            set_condition(
                &mut status.conditions,
                decided(
                    conditions::PROXY_REGISTERED,
                    ConditionStatus::False,
                    "TokenSecretNotOwned",
                    message,
                ),
                generation,
                now,
            );
            return finish(&proxy, &ctx, status, retry).await;
        }
        if secrets::value(live.as_ref(), DEFAULT_TOKEN_SECRET_KEY)
            .filter(|t| !t.is_empty())
            .is_none()
        {
            let credential = secrets
                .get_opt(&bootstrap.credentials_secret_ref.name)
                .await?
                .and_then(|s| {
                    secrets::value(
                        Some(&s),
                        bootstrap.credentials_secret_ref.key_or(DEFAULT_TOKEN_SECRET_KEY),
                    )
                })
                .filter(|c| !c.is_empty());
            let registered = match (credential, url::Url::parse(&bootstrap.coder_url)) {
                (Some(credential), Ok(url)) => match ctx.coder_client(&url, &credential) {
                    Ok(coder) => register(&coder, &name, bootstrap)
                        .await
                        .map_err(|e| e.to_string()),
                    Err(error) => Err(error.to_string()),
                },
                (None, _) => Err(format!(
                    "Secret {:?} has no credential",
                    bootstrap.credentials_secret_ref.name
                )),
                (_, Err(_)) => Err("bootstrap.coderURL is not a URL".to_owned()),
            };
            let token = match registered {
                Ok(token) => token,
                Err(message) => {
                    status.registered = Some(false);
                    set_condition(
                        &mut status.conditions,
                        decided(
                            conditions::PROXY_REGISTERED,
                            ConditionStatus::False,
                            "RegistrationFailed",
                            message,
                        ),
                        generation,
                        now,
                    );
                    return finish(&proxy, &ctx, status, retry).await;
                }
            };
            write_token_secret(&proxy, &secrets, generated, &token, &primary_origin).await?;
        }
        status.registered = Some(true);
        set_condition(
            &mut status.conditions,
            decided(
                conditions::PROXY_REGISTERED,
                ConditionStatus::True,
                "Registered",
                "the proxy is registered in Coder",
            ),
            generation,
            now.clone(),
        );
    }
    status.proxy_token_secret_ref = Some(SecretKeySelector {
        name: token_ref.name.clone(),
        key: Some(token_ref.key_or(DEFAULT_TOKEN_SECRET_KEY).to_owned()),
    });

    let (deployment, service) =
        desired::desired_state(&proxy, &primary_url, &token_ref).ok_or(Error::MissingMetadata)?;
    apply(
        &Api::<Service>::namespaced(ctx.client.clone(), &namespace),
        service,
    )
    .await?;
    let deployment = apply(
        &Api::<Deployment>::namespaced(ctx.client.clone(), &namespace),
        deployment,
    )
    .await?
    .into_inner();
    let ready = deployment.status.and_then(|s| s.ready_replicas).unwrap_or(0);
    status.ready_replicas = Some(ready);
    let condition = if ready > 0 {
        decided(
            conditions::DEPLOYMENT_READY,
            ConditionStatus::True,
            "MinimumReplicasReady",
            "the proxy Deployment has ready replicas",
        )
    } else {
        decided(
            conditions::DEPLOYMENT_READY,
            ConditionStatus::False,
            "NoReplicasReady",
            "the proxy Deployment has no ready replica",
        )
    };
    set_condition(&mut status.conditions, condition, generation, now);
    if ready > 0 {
        status.phase = Some(WorkloadPhase::Ready);
    }
    finish(
        &proxy,
        &ctx,
        status,
        if ready > 0 {
            ctx.settings.entitlements_interval
        } else {
            retry
        },
    )
    .await
}

/// Get the proxy; create it on Coder's own 404, else regenerate its token. Returns the proxy token.
async fn register(
    coder: &CoderClient,
    name: &str,
    bootstrap: &coder_k8s_api::workspace_proxy::ProxyBootstrapSpec,
) -> Result<String, CoderError> {
    let proxy_name = bootstrap
        .proxy_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| name.to_owned());
    let display_name = bootstrap
        .display_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| proxy_name.clone());
    let icon = bootstrap
        .icon
        .clone()
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| DEFAULT_ICON.to_owned());
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
        Ok(existing) => {
            let request = PatchWorkspaceProxy {
                id: existing.id,
                name: proxy_name,
                display_name,
                icon,
                regenerate_token: true,
            };
            coder.patch_workspace_proxy(&request).await?
        }
    };
    Ok(response.proxy_token.expose().to_owned())
}

/// The generated token Secret: owned, and itself a credential Secret for the primary access URL's origin.
async fn write_token_secret(
    proxy: &CoderWorkspaceProxy,
    secrets: &Api<Secret>,
    name: &str,
    token: &str,
    origin: &str,
) -> Result<(), Error> {
    let mut labels = desired::labels(&proxy.name_any());
    labels.insert(CREDENTIAL_LABEL.to_owned(), "true".to_owned());
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: proxy.namespace(),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                CREDENTIAL_DESTINATIONS_ANNOTATION.to_owned(),
                origin.to_owned(),
            )])),
            owner_references: proxy.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(
            DEFAULT_TOKEN_SECRET_KEY.to_owned(),
            ByteString(token.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    };
    apply(secrets, secret).await?;
    Ok(())
}

async fn finish(
    proxy: &CoderWorkspaceProxy,
    ctx: &Context,
    mut status: WorkspaceProxyStatus,
    requeue: Duration,
) -> Result<Action, Error> {
    status.observed_generation = proxy.metadata.generation;
    let api: Api<CoderWorkspaceProxy> =
        Api::namespaced(ctx.client.clone(), &proxy.namespace().unwrap_or_default());
    apply_status(proxy, &api, proxy.status.as_ref(), &status).await?;
    Ok(Action::requeue(requeue))
}

/// Whether the proxy reads the Secret `name`.
fn reads_secret(proxy: &CoderWorkspaceProxy, name: &str) -> bool {
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

/// Runs the CoderWorkspaceProxy controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static) {
    use futures::StreamExt;
    use kube::core::PartialObjectMeta;
    use kube::runtime::{Controller, watcher};

    let managed = watcher::Config::default().labels("app.kubernetes.io/managed-by=coder-k8s");
    let controller = Controller::new(
        ctx.watched_api::<CoderWorkspaceProxy>(),
        watcher::Config::default(),
    );
    let store = controller.store();
    controller
        .owns(ctx.watched_api::<Deployment>(), managed.clone())
        .owns(ctx.watched_api::<Service>(), managed.clone())
        .owns(ctx.watched_api::<Secret>(), managed)
        .watches(
            ctx.watched_api::<PartialObjectMeta<Secret>>(),
            watcher::Config::default(),
            move |secret| {
                let (namespace, name) = (secret.namespace(), secret.name_any());
                store
                    .state()
                    .into_iter()
                    .filter(|p| p.namespace() == namespace && reads_secret(p, &name))
                    .map(|p| kube::runtime::reflector::ObjectRef::from_obj(p.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| {
            if let Err(error) = result {
                tracing::debug!(%error, "controller event");
            }
            std::future::ready(())
        })
        .await;
}
