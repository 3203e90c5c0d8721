//! The CoderProvisioner reconciler (contract §2.2, seeds 000/002/003): gates (control plane, operator access,
//! entitlement, credentials), the provisioner key in Coder and its owned Secret, then the Deployment.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use coder_k8s_api::control_plane::{CoderControlPlane, Entitlement};
use coder_k8s_api::provisioner::{
    CoderProvisioner, CoderProvisionerStatus, PROVISIONER_KEY_FINALIZER, conditions,
};
use coder_k8s_api::shared::{DEFAULT_TOKEN_SECRET_KEY, SecretKeySelector, WorkloadPhase};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, Event as FinalizerEvent};
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};

use super::desired::{self, Inputs, ProvisionerNames, tags_hash};
use crate::controller::apply::{apply, apply_status, controlled_by};
use crate::controller::conditions::{ConditionStatus, Decided, set_condition};
use crate::controller::context::Context;
use crate::controller::control_plane::desired::internal_url;
use crate::controller::control_plane::names::ControlPlaneId;
use crate::controller::credentials;
use crate::controller::secrets;

/// Kind label of metrics and logs.
pub const KIND: &str = "CoderProvisioner";
/// Log line when the key's inputs changed (v0.1.5 text).
pub const DRIFT_LOG: &str = "spec drift detected, rotating provisioner key";
/// How fresh the control plane's recorded entitlement must be to be used instead of a query.
const ENTITLEMENT_FRESHNESS: Duration = Duration::from_secs(120);

/// Errors of a CoderProvisioner reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
    #[error("the object has no name, namespace or UID yet")]
    MissingMetadata,
    /// Not a failure: the key delete met a retryable answer (Coder unavailable, rate limited, a proxy's 404) and is
    /// retried within the cleanup window before the finalizer is released anyway.
    #[error("retrying the provisioner key delete")]
    RetryingDelete(Duration),
}

impl Error {
    pub fn category(&self) -> &'static str {
        match self {
            Self::Kube(_) => "kube",
            Self::Finalizer(_) => "finalizer",
            Self::MissingMetadata => "metadata",
            Self::RetryingDelete(_) => "retrying",
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RetryingDelete(after) => Some(*after),
            Self::Finalizer(inner) => match inner.as_ref() {
                finalizer::Error::CleanupFailed(e) => e.retry_after(),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Entry point of the controller for one object.
pub async fn reconcile(provisioner: Arc<CoderProvisioner>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _measure = ctx.metrics.start(KIND);
    let namespace = provisioner.namespace().ok_or(Error::MissingMetadata)?;
    let api: Api<CoderProvisioner> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer::finalizer(&api, PROVISIONER_KEY_FINALIZER, provisioner, |event| async {
        match event {
            FinalizerEvent::Apply(p) => apply_spec(&p, &ctx).await,
            FinalizerEvent::Cleanup(p) => cleanup(&p, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

pub fn error_policy(provisioner: Arc<CoderProvisioner>, error: &Error, ctx: Arc<Context>) -> Action {
    if let Some(after) = error.retry_after() {
        return Action::requeue(after);
    }
    ctx.metrics.failure(KIND, error.category());
    tracing::warn!(name = %provisioner.name_any(), category = error.category(), %error, "reconcile failed");
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

/// The control plane, its in-cluster URL for the pods, and a Coder client with the operator token.
struct Upstream {
    control_plane: CoderControlPlane,
    pod_url: String,
    coder: CoderClient,
}

/// Checks the control plane and operator access; on failure sets the condition and returns `None`.
async fn upstream(
    provisioner: &CoderProvisioner,
    ctx: &Context,
    status: &mut CoderProvisionerStatus,
    now: &Time,
) -> Result<Option<Upstream>, Error> {
    let namespace = provisioner.namespace().unwrap_or_default();
    let generation = provisioner.metadata.generation;
    let cp_name = &provisioner.spec.control_plane_ref.name;
    let cps: Api<CoderControlPlane> = Api::namespaced(ctx.client.clone(), &namespace);
    let control_plane = cps.get_opt(cp_name).await?;
    let pod_url = control_plane
        .as_ref()
        .and_then(|cp| cp.status.as_ref()?.url.clone());
    let (Some(control_plane), Some(pod_url)) = (control_plane, pod_url) else {
        let message = format!("CoderControlPlane {cp_name:?} does not exist or has no status.url yet");
        let condition = decided(
            conditions::CONTROL_PLANE_READY,
            ConditionStatus::False,
            "ControlPlaneUnavailable",
            message,
        );
        set_condition(&mut status.conditions, condition, generation, now.clone());
        return Ok(None);
    };
    let ready = decided(
        conditions::CONTROL_PLANE_READY,
        ConditionStatus::True,
        "ControlPlaneAvailable",
        format!("CoderControlPlane {cp_name:?} is available"),
    );
    set_condition(&mut status.conditions, ready, generation, now.clone());

    let cp_status = control_plane.status.clone().unwrap_or_default();
    let not_ready = |reason: &'static str, message: String, status: &mut CoderProvisionerStatus| {
        let condition = decided(
            conditions::OPERATOR_ACCESS_READY,
            ConditionStatus::False,
            reason,
            message,
        );
        set_condition(&mut status.conditions, condition, generation, now.clone());
    };
    let Some(reference) = cp_status.operator_token_secret_ref.clone() else {
        not_ready(
            "OperatorTokenSecretRefMissing",
            format!("CoderControlPlane {cp_name:?} has no operatorTokenSecretRef"),
            status,
        );
        return Ok(None);
    };
    if cp_status.operator_access_ready != Some(true) {
        not_ready(
            "OperatorAccessNotReady",
            format!("operator access of CoderControlPlane {cp_name:?} is not ready"),
            status,
        );
        return Ok(None);
    }
    if reference.name.is_empty() {
        not_ready(
            "OperatorTokenSecretRefInvalid",
            "operatorTokenSecretRef names no Secret".to_owned(),
            status,
        );
        return Ok(None);
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let token = secrets
        .get_opt(&reference.name)
        .await?
        .and_then(|s| secrets::value(Some(&s), reference.key_or(DEFAULT_TOKEN_SECRET_KEY)))
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        not_ready(
            "OperatorTokenSecretUnavailable",
            format!(
                "the operator token Secret {:?} is missing or empty",
                reference.name
            ),
            status,
        );
        return Ok(None);
    };
    let id = ControlPlaneId::of(&control_plane).ok_or(Error::MissingMetadata)?;
    let coder = url::Url::parse(&internal_url(&id, &control_plane.spec))
        .ok()
        .and_then(|url| ctx.coder_client(&url, &token).ok());
    let Some(coder) = coder else {
        not_ready(
            "OperatorTokenSecretRefInvalid",
            "the control plane URL or token cannot be used".to_owned(),
            status,
        );
        return Ok(None);
    };
    let ok = decided(
        conditions::OPERATOR_ACCESS_READY,
        ConditionStatus::True,
        "OperatorAccessReady",
        "the operator token is available",
    );
    set_condition(&mut status.conditions, ok, generation, now.clone());
    Ok(Some(Upstream {
        control_plane,
        pod_url,
        coder,
    }))
}

/// The entitlement gate: the control plane's recorded value when fresh, else `GET /api/v2/entitlements`.
async fn entitled(
    upstream: &Upstream,
    generation: Option<i64>,
    status: &mut CoderProvisionerStatus,
    now: &Time,
) -> bool {
    let cp_status = upstream.control_plane.status.clone().unwrap_or_default();
    let fresh = cp_status
        .entitlements_last_checked
        .as_ref()
        .and_then(|t| Duration::try_from(Timestamp::now().duration_since(t.0)).ok())
        .is_some_and(|age| age < ENTITLEMENT_FRESHNESS);
    let recorded = cp_status
        .external_provisioner_daemons_entitlement
        .filter(|_| fresh);
    let outcome = match recorded {
        Some(value) => Ok(matches!(value, Entitlement::Entitled | Entitlement::GracePeriod)),
        None => upstream
            .coder
            .entitlements()
            .await
            .map(|e| e.is_entitled("external_provisioner_daemons")),
    };
    let condition = match outcome {
        Ok(true) => decided(
            conditions::EXTERNAL_PROVISIONERS_ENTITLED,
            ConditionStatus::True,
            "Entitled",
            "external provisioner daemons are entitled",
        ),
        Ok(false) => decided(
            conditions::EXTERNAL_PROVISIONERS_ENTITLED,
            ConditionStatus::False,
            "NotEntitled",
            "the Coder licence does not entitle external provisioner daemons",
        ),
        Err(e) if e.is_route_not_found() || matches!(e, CoderError::NotFound { .. }) => decided(
            conditions::EXTERNAL_PROVISIONERS_ENTITLED,
            ConditionStatus::False,
            "NotSupported",
            "this Coder deployment has no entitlements API",
        ),
        Err(e @ (CoderError::Unauthorized { .. } | CoderError::Forbidden { .. })) => decided(
            conditions::EXTERNAL_PROVISIONERS_ENTITLED,
            ConditionStatus::False,
            "Forbidden",
            format!("reading entitlements: {e}"),
        ),
        Err(e) => decided(
            conditions::EXTERNAL_PROVISIONERS_ENTITLED,
            ConditionStatus::False,
            "EntitlementsQueryFailed",
            format!("reading entitlements: {e}"),
        ),
    };
    let entitled = condition.status == ConditionStatus::True;
    set_condition(&mut status.conditions, condition, generation, now.clone());
    entitled
}

/// The credential-Secret contract for every `secretKeyRef` in `spec.extraEnv`, plus the key Secret's ownership.
async fn credentials_ready(
    provisioner: &CoderProvisioner,
    ctx: &Context,
    names: &ProvisionerNames,
    pod_url: &str,
    status: &mut CoderProvisionerStatus,
    now: &Time,
) -> Result<bool, Error> {
    let generation = provisioner.metadata.generation;
    let uid = provisioner.metadata.uid.clone().unwrap_or_default();
    let secrets: Api<Secret> =
        Api::namespaced(ctx.client.clone(), &provisioner.namespace().unwrap_or_default());
    let origin = credentials::origin_of(pod_url).unwrap_or_default();
    let mut refusal = None;
    if let Some(key_secret) = secrets.get_opt(&names.key_secret).await?
        && !controlled_by(&key_secret, &uid)
    {
        refusal = Some((
            credentials::reasons::KEY_SECRET_NOT_OWNED,
            format!(
                "Secret {:?} exists and this provisioner does not own it; name a Secret that does not exist in spec.key.secretName",
                names.key_secret
            ),
        ));
    }
    if refusal.is_none() {
        for name in credentials::secret_refs(&provisioner.spec.extra_env) {
            let secret = secrets.get_opt(&name).await?;
            if let Some(reason) = credentials::refusal(secret.as_ref(), &origin) {
                refusal = Some((reason, credentials::refusal_message(&name, reason, &origin)));
                break;
            }
        }
    }
    let condition = match refusal {
        Some((reason, message)) => decided(
            conditions::CREDENTIALS_READY,
            ConditionStatus::False,
            reason,
            message,
        ),
        None => decided(
            conditions::CREDENTIALS_READY,
            ConditionStatus::True,
            credentials::reasons::VERIFIED,
            "every Secret the pods receive is a credential Secret for the control plane's origin",
        ),
    };
    let ready = condition.status == ConditionStatus::True;
    set_condition(&mut status.conditions, condition, generation, now.clone());
    Ok(ready)
}

/// Deletes the key `status` recorded, found by organization ID and key ID (never by spec names).
async fn delete_recorded_key(coder: &CoderClient, status: &CoderProvisionerStatus) -> Result<(), CoderError> {
    let (Some(org), Some(key_id)) = (&status.organization_id, &status.provisioner_key_id) else {
        return Ok(());
    };
    let keys = coder.provisioner_keys(org).await?;
    match keys.into_iter().find(|k| k.id.to_string() == *key_id) {
        Some(key) => match coder.delete_provisioner_key(org, &key.name).await {
            Ok(()) | Err(CoderError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        },
        None => Ok(()),
    }
}

fn key_checksum(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn apply_spec(provisioner: &CoderProvisioner, ctx: &Context) -> Result<Action, Error> {
    let name = provisioner.metadata.name.clone().ok_or(Error::MissingMetadata)?;
    let namespace = provisioner.namespace().ok_or(Error::MissingMetadata)?;
    let uid = provisioner.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    let generation = provisioner.metadata.generation;
    let now = Time(Timestamp::now());
    let mut status = provisioner.status.clone().unwrap_or_default();
    // Ready only when every step below passes.
    status.phase = Some(WorkloadPhase::Pending);
    let names = desired::names(&name, &provisioner.spec);
    let retry = ctx.settings.retry_interval;

    let Some(upstream) = upstream(provisioner, ctx, &mut status, &now).await? else {
        return finish(provisioner, ctx, status, retry).await;
    };
    if !entitled(&upstream, generation, &mut status, &now).await {
        return finish(provisioner, ctx, status, ctx.settings.entitlements_interval).await;
    }
    if !credentials_ready(provisioner, ctx, &names, &upstream.pod_url, &mut status, &now).await? {
        // The Deployment is not changed while a credential is refused.
        return finish(provisioner, ctx, status, retry).await;
    }

    // Key management.
    let organization = upstream
        .coder
        .organization(&provisioner.spec.organization_name)
        .await;
    let organization = match organization {
        Ok(org) => org,
        Err(error) => {
            let condition = key_condition(&error);
            set_condition(&mut status.conditions, condition, generation, now.clone());
            return finish(provisioner, ctx, status, retry).await;
        }
    };
    let tags_hash = tags_hash(&provisioner.spec.tags);
    let cp_name = provisioner.spec.control_plane_ref.name.clone();
    let drifted = status.provisioner_key_id.is_some()
        && (status.organization_id.as_deref() != Some(organization.id.to_string().as_str())
            || status.provisioner_key_name.as_deref() != Some(names.key_name.as_str())
            || status.tags_hash.as_deref() != Some(tags_hash.as_str())
            || status.control_plane_ref_name.as_deref() != Some(cp_name.as_str())
            || status.control_plane_url.as_deref() != Some(upstream.pod_url.as_str()));
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let stored = secrets
        .get_opt(&names.key_secret)
        .await?
        .and_then(|s| secrets::value(Some(&s), &names.key_secret_key))
        .filter(|k| !k.is_empty());
    if drifted {
        tracing::info!(name = %name, namespace = %namespace, "{DRIFT_LOG}");
        if let Err(error) = delete_recorded_key(&upstream.coder, &status).await {
            tracing::warn!(name = %name, %error, "deleting the old provisioner key failed; it stays valid in Coder");
        }
        status.provisioner_key_id = None;
    }
    // After a 429 the object waits out its backoff, even when a watch event wakes it early.
    if let Some(remaining) = ctx.rate_limit_remaining(&uid) {
        return finish(provisioner, ctx, status, remaining).await;
    }
    // Reuse is decided from Coder and the Secret, not from the status, which may be stale in the cache.
    let org = organization.id.to_string();
    let existing = match upstream.coder.provisioner_keys(&org).await {
        Ok(keys) => keys
            .into_iter()
            .find(|k| k.name.eq_ignore_ascii_case(&names.key_name)),
        Err(error) => {
            set_condition(
                &mut status.conditions,
                key_condition(&error),
                generation,
                now.clone(),
            );
            return finish(provisioner, ctx, status, backoff_for(ctx, &uid, &error, retry)).await;
        }
    };
    let key_secret = match (&stored, existing, drifted) {
        (Some(secret), Some(key), false) => {
            status.provisioner_key_id = Some(key.id.to_string());
            secret.clone()
        }
        (_, existing, _) => {
            // A key of this name without its Secret (for example after a restart mid-create) cannot be used:
            // replace it, so there is never more than one.
            if let Some(old) = existing
                && let Err(error) = upstream.coder.delete_provisioner_key(&org, &old.name).await
            {
                set_condition(
                    &mut status.conditions,
                    key_condition(&error),
                    generation,
                    now.clone(),
                );
                return finish(provisioner, ctx, status, backoff_for(ctx, &uid, &error, retry)).await;
            }
            let created = match upstream
                .coder
                .create_provisioner_key(&org, &names.key_name, &provisioner.spec.tags)
                .await
            {
                Ok(secret) => secret,
                Err(error) => {
                    set_condition(
                        &mut status.conditions,
                        key_condition(&error),
                        generation,
                        now.clone(),
                    );
                    return finish(provisioner, ctx, status, backoff_for(ctx, &uid, &error, retry)).await;
                }
            };
            // Write the Secret first: a key in Coder without its Secret is replaced on the next pass.
            write_key_secret(provisioner, &secrets, &names, created.expose()).await?;
            let listed = upstream.coder.provisioner_keys(&org).await.ok().and_then(|keys| {
                keys.into_iter()
                    .find(|k| k.name.eq_ignore_ascii_case(&names.key_name))
            });
            status.provisioner_key_id = listed.map(|k| k.id.to_string());
            created.expose().to_owned()
        }
    };
    ctx.rate_limit_passed(&uid);
    status.organization_id = Some(organization.id.to_string());
    status.organization_name = Some(organization.name.clone());
    status.provisioner_key_name = Some(names.key_name.clone());
    status.tags_hash = Some(tags_hash);
    status.control_plane_ref_name = Some(cp_name);
    status.control_plane_url = Some(upstream.pod_url.clone());
    status.secret_ref = Some(SecretKeySelector {
        name: names.key_secret.clone(),
        key: Some(names.key_secret_key.clone()),
    });
    set_condition(
        &mut status.conditions,
        decided(
            conditions::PROVISIONER_KEY_READY,
            ConditionStatus::True,
            "ProvisionerKeyReady",
            "the provisioner key exists in Coder",
        ),
        generation,
        now.clone(),
    );
    set_condition(
        &mut status.conditions,
        decided(
            conditions::PROVISIONER_KEY_SECRET_READY,
            ConditionStatus::True,
            "SecretReady",
            format!("Secret {:?} holds the key", names.key_secret),
        ),
        generation,
        now.clone(),
    );

    // Owned objects.
    let inputs = Inputs {
        control_plane_url: upstream.pod_url.clone(),
        control_plane_image: Some(upstream.control_plane.spec.image.clone()),
        key_checksum: key_checksum(&key_secret),
    };
    let desired = desired::desired_state(provisioner, &inputs).ok_or(Error::MissingMetadata)?;
    let client = &ctx.client;
    apply(
        &Api::<ServiceAccount>::namespaced(client.clone(), &namespace),
        desired.service_account,
    )
    .await?;
    apply(&Api::<Role>::namespaced(client.clone(), &namespace), desired.role).await?;
    apply(
        &Api::<RoleBinding>::namespaced(client.clone(), &namespace),
        desired.role_binding,
    )
    .await?;
    let deployment = apply(
        &Api::<Deployment>::namespaced(client.clone(), &namespace),
        desired.deployment,
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
            "the provisioner Deployment has ready replicas",
        )
    } else {
        decided(
            conditions::DEPLOYMENT_READY,
            ConditionStatus::False,
            "NoReplicasReady",
            "the provisioner Deployment has no ready replica",
        )
    };
    set_condition(&mut status.conditions, condition, generation, now);
    status.phase = Some(if ready > 0 {
        WorkloadPhase::Ready
    } else {
        WorkloadPhase::Pending
    });
    let requeue = if ready > 0 {
        ctx.settings.entitlements_interval
    } else {
        retry
    };
    finish(provisioner, ctx, status, requeue).await
}

/// The requeue after a failed Coder call: the per-object rate-limit backoff after a 429, else `retry`.
fn backoff_for(ctx: &Context, uid: &str, error: &CoderError, retry: Duration) -> Duration {
    match error {
        CoderError::RateLimited { retry_after, .. } => ctx.rate_limited(uid, *retry_after),
        _ => retry,
    }
}

fn key_condition(error: &CoderError) -> Decided {
    let reason = if matches!(error, CoderError::RateLimited { .. }) {
        "RateLimited"
    } else {
        "ProvisionerKeyFailed"
    };
    decided(
        conditions::PROVISIONER_KEY_READY,
        ConditionStatus::False,
        reason,
        format!("provisioner key: {error}"),
    )
}

async fn write_key_secret(
    provisioner: &CoderProvisioner,
    secrets: &Api<Secret>,
    names: &ProvisionerNames,
    key: &str,
) -> Result<(), Error> {
    let name = provisioner.name_any();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(names.key_secret.clone()),
            namespace: provisioner.namespace(),
            labels: Some(desired::labels(&name)),
            owner_references: provisioner.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(
            names.key_secret_key.clone(),
            ByteString(key.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    };
    apply(secrets, secret).await?;
    Ok(())
}

/// Writes the status when it changed and requeues.
async fn finish(
    provisioner: &CoderProvisioner,
    ctx: &Context,
    mut status: CoderProvisionerStatus,
    requeue: Duration,
) -> Result<Action, Error> {
    status.observed_generation = provisioner.metadata.generation;
    let api: Api<CoderProvisioner> =
        Api::namespaced(ctx.client.clone(), &provisioner.namespace().unwrap_or_default());
    apply_status(provisioner, &api, provisioner.status.as_ref(), &status).await?;
    Ok(Action::requeue(requeue))
}

/// Best-effort key deletion (v0.1.5): by the recorded organization and key IDs; no Coder call without a recorded
/// key; the finalizer is always released, and a failure is logged with the fact that the key stays valid.
async fn cleanup(provisioner: &CoderProvisioner, ctx: &Context) -> Result<Action, Error> {
    let status = provisioner.status.clone().unwrap_or_default();
    if status.provisioner_key_id.is_none() || status.organization_id.is_none() {
        return Ok(Action::await_change());
    }
    let mut scratch = CoderProvisionerStatus::default();
    let now = Time(Timestamp::now());
    let result = match upstream(provisioner, ctx, &mut scratch, &now).await {
        Ok(Some(upstream)) => match delete_recorded_key(&upstream.coder, &status).await {
            Ok(()) => Ok(()),
            Err(error) => {
                let age = provisioner
                    .metadata
                    .deletion_timestamp
                    .as_ref()
                    .and_then(|t| Duration::try_from(Timestamp::now().duration_since(t.0)).ok())
                    .unwrap_or_default();
                // Only Coder's own 404 proves the key is gone; a proxy's 404 or an outage is retried for a while.
                if error.is_retryable() && age < ctx.settings.cleanup_retry_window {
                    tracing::info!(name = %provisioner.name_any(), %error, "retrying the provisioner key delete");
                    return Err(Error::RetryingDelete(backoff_for(
                        ctx,
                        &provisioner.metadata.uid.clone().unwrap_or_default(),
                        &error,
                        Duration::from_secs(2),
                    )));
                }
                Err(error.to_string())
            }
        },
        Ok(None) => Err("the control plane or its operator token is not available".to_owned()),
        Err(error) => Err(error.to_string()),
    };
    if let Err(reason) = result {
        tracing::warn!(
            name = %provisioner.name_any(),
            namespace = ?provisioner.namespace(),
            organization_id = ?status.organization_id,
            provisioner_key_id = ?status.provisioner_key_id,
            %reason,
            "could not delete the provisioner key in Coder; releasing the finalizer anyway, and the key stays valid in Coder (delete it with `coder provisioner keys delete`)"
        );
    }
    Ok(Action::await_change())
}

/// Runs the CoderProvisioner controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static) {
    use futures::StreamExt;
    use kube::runtime::{Controller, watcher};

    let managed = watcher::Config::default().labels("app.kubernetes.io/managed-by=coder-k8s");
    let controller = Controller::new(ctx.watched_api::<CoderProvisioner>(), watcher::Config::default());
    let by_cp = controller.store();
    controller
        .owns(ctx.watched_api::<Deployment>(), managed.clone())
        .owns(ctx.watched_api::<Secret>(), managed)
        // A control plane's status (URL, operator access, entitlement) gates its provisioners.
        .watches(
            ctx.watched_api::<CoderControlPlane>(),
            watcher::Config::default(),
            move |cp| {
                let (namespace, name) = (cp.namespace(), cp.name_any());
                by_cp
                    .state()
                    .into_iter()
                    .filter(|p| p.namespace() == namespace && p.spec.control_plane_ref.name == name)
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
