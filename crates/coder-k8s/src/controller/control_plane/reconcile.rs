//! The CoderControlPlane reconciler: the I/O shell around the pure core (`names`, `desired`, `status`).
//! Order of a reconcile: database Secret → owned objects (server-side apply, skipped when unchanged) → phase →
//! operator access → licence → entitlements → one status write, only when the status changed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use coder_k8s_api::control_plane::{
    CONDITION_LICENSE_APPLIED, CoderControlPlane, CoderControlPlaneSpec, CoderControlPlaneStatus,
    Entitlement, LicenseTier, PG_CONNECTION_URL_ENV, WORKSPACE_RBAC_FINALIZER,
};
use coder_k8s_api::shared::{
    DEFAULT_LICENSE_SECRET_KEY, DEFAULT_TOKEN_SECRET_KEY, SecretKeySelector, WorkloadPhase,
};
use coder_k8s_coder_client::Error as CoderError;
use coder_k8s_coder_client::types::License;
use coder_k8s_operator_access::{OperatorToken, ensure_operator_access, revoke_operator_access};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::Action;
use kube::runtime::events::Event as KubeEvent;
use kube::runtime::finalizer::{self, Event as FinalizerEvent};
use kube::{Resource, ResourceExt};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::desired::{self, ACCESS_URL_ENV, DesiredState, Inputs};
use super::names::{ControlPlaneId, WORKSPACE_RBAC_OWNER_UID_ANNOTATION};
use super::status::{
    TokenSecretOwnership, check_database_secret, token_secret_condition, token_secret_ownership,
};
use crate::controller::apply::{apply, apply_status, controlled_by, delete_if};
use crate::controller::conditions::{ConditionStatus, Decided, remove_condition, set_condition};
use crate::controller::context::Context;
use crate::controller::secrets;

/// Kind label of metrics and logs.
pub const KIND: &str = "CoderControlPlane";
/// Log line while a deleted control plane waits for its referrers (v0.1.5 text).
pub const WAITING_FOR_REFERRERS: &str = "Waiting for the objects that use this control plane";

/// Reasons of `LicenseApplied`.
pub mod license_reasons {
    pub const PENDING: &str = "Pending";
    pub const SECRET_MISSING: &str = "SecretMissing";
    pub const ERROR: &str = "Error";
    pub const FORBIDDEN: &str = "Forbidden";
    pub const NOT_SUPPORTED: &str = "NotSupported";
    pub const APPLIED: &str = "Applied";
}

/// Errors of a CoderControlPlane reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
    #[error("the object has no name, namespace or UID yet")]
    MissingMetadata,
    /// Not a failure: a deleted control plane keeps its finalizer while referrers are deleted. (kube's finalizer
    /// helper removes the finalizer after any successful cleanup, so waiting is reported as an error.)
    #[error("waiting for the objects that use this control plane")]
    WaitingForReferrers(Duration),
}

impl Error {
    /// Bounded category for metrics and Events.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Kube(_) => "kube",
            Self::Finalizer(inner) => match inner.as_ref() {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e.category(),
                _ => "finalizer",
            },
            Self::MissingMetadata => "metadata",
            Self::WaitingForReferrers(_) => "waiting",
        }
    }

    fn waiting(&self) -> Option<Duration> {
        match self {
            Self::WaitingForReferrers(after) => Some(*after),
            Self::Finalizer(inner) => match inner.as_ref() {
                finalizer::Error::CleanupFailed(e) => e.waiting(),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Entry point of the controller for one object.
pub async fn reconcile(cp: Arc<CoderControlPlane>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _measure = ctx.metrics.start(KIND);
    let namespace = cp.namespace().ok_or(Error::MissingMetadata)?;
    let api: Api<CoderControlPlane> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer::finalizer(&api, WORKSPACE_RBAC_FINALIZER, cp, |event| async {
        match event {
            FinalizerEvent::Apply(cp) => apply_spec(&cp, &ctx).await,
            FinalizerEvent::Cleanup(cp) => cleanup(&cp, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// Requeue after a failed reconcile; also counts the failure.
pub fn error_policy(cp: Arc<CoderControlPlane>, error: &Error, ctx: Arc<Context>) -> Action {
    if let Some(after) = error.waiting() {
        return Action::requeue(after);
    }
    ctx.metrics.failure(KIND, error.category());
    tracing::warn!(name = %cp.name_any(), namespace = ?cp.namespace(), category = error.category(), %error, "reconcile failed");
    Action::requeue(ctx.settings.retry_interval)
}

/// What a reconcile learned that later steps need.
struct Progress {
    status: CoderControlPlaneStatus,
    requeue: Duration,
}

impl Progress {
    fn soon(&mut self, after: Duration) {
        self.requeue = self.requeue.min(after);
    }
}

async fn apply_spec(cp: &CoderControlPlane, ctx: &Context) -> Result<Action, Error> {
    let id = ControlPlaneId::of(cp).ok_or(Error::MissingMetadata)?;
    let uid = cp.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    let spec = &cp.spec;
    let generation = cp.metadata.generation;
    let now = Time(Timestamp::now());
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let mut progress = Progress {
        status: cp.status.clone().unwrap_or_default(),
        requeue: ctx.settings.entitlements_interval,
    };

    // Database Secret.
    let conflicting = desired::database_conflict(spec);
    let database_url = if let Some(database) = &spec.database {
        let reference = &database.connection_secret_ref;
        let secret = secrets.get_opt(&reference.name).await?;
        let check = check_database_secret(
            reference,
            secret.as_ref().and_then(|s| s.data.as_ref()),
            conflicting,
        );
        if check.condition.status != ConditionStatus::True {
            progress.soon(ctx.settings.retry_interval);
        }
        set_condition(
            &mut progress.status.conditions,
            check.condition,
            generation,
            now.clone(),
        );
        check.url
    } else {
        remove_condition(
            &mut progress.status.conditions,
            coder_k8s_api::control_plane::CONDITION_DATABASE_SECRET_RESOLVED,
        );
        extra_env_database_url(spec, &secrets).await?
    };

    // Owned objects.
    let inputs = Inputs {
        env_from_defines_access_url: env_from_defines_access_url(ctx, &id.namespace, spec).await?,
    };
    let desired = desired::desired_state(cp, &inputs).ok_or(Error::MissingMetadata)?;
    let ready_replicas = apply_children(cp, ctx, &id, &uid, desired, conflicting, &mut progress).await?;

    // Phase and URL.
    let status = &mut progress.status;
    status.url = Some(desired::status_url(&id, spec));
    status.ready_replicas = Some(ready_replicas);
    status.phase = Some(if ready_replicas > 0 {
        WorkloadPhase::Ready
    } else {
        WorkloadPhase::Pending
    });
    status.observed_generation = generation;

    // Operator access, licence, entitlements.
    let token = operator_access(cp, ctx, &id, &uid, database_url.as_deref(), &mut progress, &now).await?;
    let coder = token.as_ref().and_then(|t| coder_client(ctx, &id, spec, t));
    license(cp, ctx, coder.as_ref(), &mut progress, &now).await?;
    entitlements(ctx, coder.as_ref(), &mut progress, &now).await;

    write_status(cp, ctx, progress.status).await?;
    Ok(Action::requeue(progress.requeue))
}

/// `CODER_PG_CONNECTION_URL` from `spec.extraEnv` when `spec.database` is unset: exactly one entry, a literal value or
/// a `secretKeyRef`. `envFrom` is never consulted.
async fn extra_env_database_url(
    spec: &CoderControlPlaneSpec,
    secrets: &Api<Secret>,
) -> Result<Option<String>, Error> {
    let mut entries = spec.extra_env.iter().filter(|e| e.name == PG_CONNECTION_URL_ENV);
    let (Some(entry), None) = (entries.next(), entries.next()) else {
        return Ok(None);
    };
    if let Some(value) = entry.value.as_ref().filter(|v| !v.is_empty()) {
        return Ok(Some(value.clone()));
    }
    let Some(reference) = entry.value_from.as_ref().and_then(|v| v.secret_key_ref.as_ref()) else {
        return Ok(None);
    };
    let secret = secrets.get_opt(&reference.name).await?;
    Ok(secrets::value(secret.as_ref(), &reference.key))
}

/// Whether a ConfigMap or Secret in `spec.envFrom` defines `CODER_ACCESS_URL` (with its prefix).
async fn env_from_defines_access_url(
    ctx: &Context,
    namespace: &str,
    spec: &CoderControlPlaneSpec,
) -> Result<bool, Error> {
    if !spec.env_use_cluster_access_url.unwrap_or(true) {
        return Ok(false);
    }
    for source in &spec.env_from {
        let prefix = source.prefix.clone().unwrap_or_default();
        let Some(key) = ACCESS_URL_ENV.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let defines = if let Some(reference) = &source.config_map_ref {
            let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
            api.get_opt(&reference.name)
                .await?
                .is_some_and(|c| c.data.is_some_and(|d| d.contains_key(key)))
        } else if let Some(reference) = &source.secret_ref {
            let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
            api.get_opt(&reference.name)
                .await?
                .is_some_and(|s| s.data.is_some_and(|d| d.contains_key(key)))
        } else {
            false
        };
        if defines {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Applies every owned object and removes what a turned-off feature left; returns the Deployment's ready replicas.
async fn apply_children(
    cp: &CoderControlPlane,
    ctx: &Context,
    id: &ControlPlaneId,
    uid: &str,
    desired: DesiredState,
    conflicting: bool,
    progress: &mut Progress,
) -> Result<i32, Error> {
    let client = &ctx.client;
    let ns = id.namespace.as_str();
    let DesiredState {
        service_account,
        workspace_rbac,
        service,
        deployment,
        ingress,
        http_route,
    } = desired;
    if let Some(service_account) = service_account {
        apply(
            &Api::<ServiceAccount>::namespaced(client.clone(), ns),
            service_account,
        )
        .await?;
    }
    let spec_changed = cp.status.as_ref().and_then(|s| s.observed_generation) != cp.metadata.generation;
    let mut kept_rbac = Vec::new();
    for (role, binding) in workspace_rbac {
        let role_ns = role.metadata.namespace.clone().unwrap_or_default();
        kept_rbac.push((role_ns.clone(), role.name_any(), binding.name_any()));
        apply(&Api::<Role>::namespaced(client.clone(), &role_ns), role).await?;
        apply(&Api::<RoleBinding>::namespaced(client.clone(), &role_ns), binding).await?;
    }
    if spec_changed {
        // Orphans only appear when the spec changes (a namespace or workspacePerms removed).
        delete_workspace_rbac(ctx, id, uid, &kept_rbac).await?;
        if cp.spec.service_account.disable_create {
            detach_service_account(ctx, id, uid).await?;
        }
    }
    apply(&Api::<Service>::namespaced(client.clone(), ns), service).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let live = if conflicting {
        // ConflictingConfiguration: the Deployment is left exactly as it is.
        deployments.get_opt(&id.name).await?
    } else {
        Some(apply(&deployments, deployment).await?.into_inner())
    };
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), ns);
    match ingress {
        Some(ingress) => {
            apply(&ingresses, ingress).await?;
        }
        None => {
            delete_if(&ingresses, &id.name, |i| controlled_by(i, uid)).await?;
        }
    }
    apply_http_route(ctx, id, uid, http_route, progress).await?;
    Ok(live
        .and_then(|d| d.status)
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0))
}

fn http_route_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
        "httproutes",
    )
}

/// Applies or removes the HTTPRoute. Without the Gateway API CRDs it logs and retries every 2 minutes.
async fn apply_http_route(
    ctx: &Context,
    id: &ControlPlaneId,
    uid: &str,
    route: Option<serde_json::Value>,
    progress: &mut Progress,
) -> Result<(), Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &id.namespace, &http_route_resource());
    let wanted = route.is_some();
    let result = match route {
        Some(route) => match serde_json::from_value::<DynamicObject>(route) {
            Ok(object) => apply(&api, object).await.map(|_| ()),
            Err(_) => Ok(()),
        },
        None => delete_if(&api, &id.name, |r| controlled_by(r, uid))
            .await
            .map(|_| ()),
    };
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => {
            // The Gateway API is not installed: nothing to remove, and a route cannot be created yet.
            if wanted {
                tracing::warn!(name = %id.name, namespace = %id.namespace, "the Gateway API (HTTPRoute) is not installed; retrying in 2 minutes");
                progress.soon(Duration::from_secs(120));
            }
            Ok(())
        }
        other => other.map_err(Error::from),
    }
}

/// Deletes the control plane's workspace Roles and RoleBindings everywhere except `keep` (namespace, role, binding).
async fn delete_workspace_rbac(
    ctx: &Context,
    id: &ControlPlaneId,
    uid: &str,
    keep: &[(String, String, String)],
) -> Result<(), Error> {
    let selector = id
        .workspace_rbac_labels()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let params = ListParams::default().labels(&selector);
    let ours = |meta: &ObjectMeta| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(WORKSPACE_RBAC_OWNER_UID_ANNOTATION))
            .is_some_and(|owner| owner == uid)
    };
    for role in Api::<Role>::all(ctx.client.clone())
        .list_metadata(&params)
        .await?
    {
        let ns = role.metadata.namespace.clone().unwrap_or_default();
        let name = role.metadata.name.clone().unwrap_or_default();
        if ours(&role.metadata) && !keep.iter().any(|(n, r, _)| *n == ns && *r == name) {
            delete_ignoring_missing(&Api::<Role>::namespaced(ctx.client.clone(), &ns), &name).await?;
        }
    }
    for binding in Api::<RoleBinding>::all(ctx.client.clone())
        .list_metadata(&params)
        .await?
    {
        let ns = binding.metadata.namespace.clone().unwrap_or_default();
        let name = binding.metadata.name.clone().unwrap_or_default();
        if ours(&binding.metadata) && !keep.iter().any(|(n, _, b)| *n == ns && *b == name) {
            delete_ignoring_missing(&Api::<RoleBinding>::namespaced(ctx.client.clone(), &ns), &name).await?;
        }
    }
    Ok(())
}

async fn delete_ignoring_missing<K>(api: &Api<K>, name: &str) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// `serviceAccount.disableCreate`: the ServiceAccount the control plane created stays, without its owner reference,
/// so that turning creation off never deletes an account pods may still use.
async fn detach_service_account(ctx: &Context, id: &ControlPlaneId, uid: &str) -> Result<(), Error> {
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &id.namespace);
    if let Some(live) = api.get_opt(&id.name).await?
        && controlled_by(&live, uid)
    {
        let owners: Vec<_> = live
            .owner_references()
            .iter()
            .filter(|o| o.uid != uid)
            .cloned()
            .collect();
        let patch = json!({"metadata": {"ownerReferences": owners}});
        api.patch(&id.name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
    }
    Ok(())
}

fn token_secret_name(id: &ControlPlaneId, spec: &CoderControlPlaneSpec) -> String {
    spec.operator_access
        .generated_token_secret_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| id.default_operator_token_secret())
}

fn coder_client(
    ctx: &Context,
    id: &ControlPlaneId,
    spec: &CoderControlPlaneSpec,
    token: &OperatorToken,
) -> Option<coder_k8s_coder_client::CoderClient> {
    let url = url::Url::parse(&desired::internal_url(id, spec)).ok()?;
    ctx.coder_client(&url, &token.expose()).ok()
}

/// Operator access (contract §6, seed 002): returns the working token, if any.
async fn operator_access(
    cp: &CoderControlPlane,
    ctx: &Context,
    id: &ControlPlaneId,
    uid: &str,
    database_url: Option<&str>,
    progress: &mut Progress,
    now: &Time,
) -> Result<Option<OperatorToken>, Error> {
    let spec = &cp.spec;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let secret_name = token_secret_name(id, spec);
    let status = &mut progress.status;
    if spec.operator_access.disabled {
        remove_condition(
            &mut status.conditions,
            coder_k8s_api::control_plane::CONDITION_OPERATOR_TOKEN_SECRET_OWNED,
        );
        status.operator_access_ready = Some(false);
        let pending = status
            .operator_token_secret_ref
            .as_ref()
            .map(|r| r.name.clone())
            .unwrap_or(secret_name);
        delete_if(&secrets, &pending, |s| controlled_by(s, uid)).await?;
        if let Some(url) = database_url
            && let Err(error) = revoke_operator_access(url, &id.namespace, &id.name).await
        {
            tracing::warn!(name = %id.name, namespace = %id.namespace, category = error.category(), %error, "revoking the operator token failed; retrying");
            status.operator_token_secret_ref = Some(SecretKeySelector {
                name: pending,
                key: Some(DEFAULT_TOKEN_SECRET_KEY.to_owned()),
            });
            progress.soon(ctx.settings.retry_interval);
            return Ok(None);
        }
        status.operator_token_secret_ref = None;
        return Ok(None);
    }

    let live = secrets.get_opt(&secret_name).await?;
    let ownership = token_secret_ownership(live.as_ref(), uid);
    set_condition(
        &mut status.conditions,
        token_secret_condition(ownership, &secret_name),
        cp.metadata.generation,
        now.clone(),
    );
    let not_ready = |progress: &mut Progress| {
        progress.status.operator_access_ready = Some(false);
        progress.status.operator_token_secret_ref = None;
        progress.soon(ctx.settings.retry_interval);
    };
    if ownership == TokenSecretOwnership::NotOwned {
        not_ready(progress);
        return Ok(None);
    }
    let Some(url) = database_url else {
        // No usable PostgreSQL URL (or spec.database unresolved): the bootstrap waits.
        not_ready(progress);
        return Ok(None);
    };
    let existing =
        secrets::value(live.as_ref(), DEFAULT_TOKEN_SECRET_KEY).and_then(|t| OperatorToken::parse(&t).ok());
    let verified = match &existing {
        Some(token) => match coder_client(ctx, id, spec, token) {
            Some(coder) => coder.me().await.is_ok(),
            None => false,
        },
        None => false,
    };
    let token = if verified {
        existing.clone()
    } else {
        match ensure_operator_access(url, &id.namespace, &id.name, existing.as_ref()).await {
            Ok(token) => Some(token),
            Err(error) => {
                let source = database_source(spec);
                let error = error.with_source(source);
                tracing::warn!(name = %id.name, namespace = %id.namespace, %error, "operator access bootstrap failed; retrying");
                not_ready(progress);
                return Ok(None);
            }
        }
    };
    let Some(token) = token else {
        not_ready(progress);
        return Ok(None);
    };
    if existing.as_ref() != Some(&token) || live.is_none() {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(secret_name.clone()),
                namespace: Some(id.namespace.clone()),
                labels: Some(id.labels()),
                owner_references: cp.controller_owner_ref(&()).map(|o| vec![o]),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_owned()),
            data: Some(BTreeMap::from([(
                DEFAULT_TOKEN_SECRET_KEY.to_owned(),
                ByteString(token.expose().into_bytes()),
            )])),
            ..Secret::default()
        };
        apply(&secrets, secret).await?;
    }
    progress.status.operator_access_ready = Some(true);
    progress.status.operator_token_secret_ref = Some(SecretKeySelector {
        name: secret_name,
        key: Some(DEFAULT_TOKEN_SECRET_KEY.to_owned()),
    });
    Ok(Some(token))
}

/// Where the PostgreSQL URL comes from, for messages (never the URL).
fn database_source(spec: &CoderControlPlaneSpec) -> String {
    match &spec.database {
        Some(database) => format!(
            "Secret {:?} key {:?}",
            database.connection_secret_ref.name,
            database.connection_secret_ref.key.as_deref().unwrap_or_default()
        ),
        None => format!("spec.extraEnv {PG_CONNECTION_URL_ENV}"),
    }
}

fn license_condition(status: ConditionStatus, reason: &'static str, message: impl Into<String>) -> Decided {
    Decided {
        type_: CONDITION_LICENSE_APPLIED,
        status,
        reason,
        message: message.into(),
    }
}

/// SHA-256 hex of the trimmed licence JWT (`status.licenseLastAppliedHash`).
pub fn license_hash(jwt: &str) -> String {
    Sha256::digest(jwt.trim().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `LicenseApplied`: uploads only when the hash changed or Coder has no licence.
async fn license(
    cp: &CoderControlPlane,
    ctx: &Context,
    coder: Option<&coder_k8s_coder_client::CoderClient>,
    progress: &mut Progress,
    now: &Time,
) -> Result<(), Error> {
    use license_reasons::*;
    let generation = cp.metadata.generation;
    let Some(reference) = &cp.spec.license_secret_ref else {
        let decided = license_condition(
            ConditionStatus::Unknown,
            PENDING,
            "spec.licenseSecretRef is not set",
        );
        set_condition(&mut progress.status.conditions, decided, generation, now.clone());
        return Ok(());
    };
    let ready = progress.status.phase == Some(WorkloadPhase::Ready);
    let Some(coder) = coder.filter(|_| ready) else {
        let decided = license_condition(
            ConditionStatus::False,
            PENDING,
            "waiting for the control plane to be Ready with operator access",
        );
        set_condition(&mut progress.status.conditions, decided, generation, now.clone());
        return Ok(());
    };
    let key = reference.key_or(DEFAULT_LICENSE_SECRET_KEY);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &cp.namespace().unwrap_or_default());
    let jwt = secrets::value(secrets.get_opt(&reference.name).await?.as_ref(), key)
        .filter(|v| !v.trim().is_empty());
    let Some(jwt) = jwt else {
        let decided = license_condition(
            ConditionStatus::False,
            SECRET_MISSING,
            format!("Secret {:?} with key {key:?} is missing or empty", reference.name),
        );
        set_condition(&mut progress.status.conditions, decided, generation, now.clone());
        progress.soon(ctx.settings.retry_interval);
        return Ok(());
    };
    let hash = license_hash(&jwt);
    let unchanged = progress.status.license_last_applied_hash.as_deref() == Some(hash.as_str());
    if unchanged && matches!(coder.licenses().await, Ok(licenses) if !licenses.is_empty()) {
        let decided = license_condition(ConditionStatus::True, APPLIED, "the licence is applied");
        set_condition(&mut progress.status.conditions, decided, generation, now.clone());
        return Ok(());
    }
    let decided = match coder
        .upload_license(&coder_k8s_coder_client::Secret::new(jwt.trim()))
        .await
    {
        Ok(_) => None,
        Err(error) if License::is_duplicate_message(error.message()) => None,
        Err(error @ (CoderError::Unauthorized { .. } | CoderError::Forbidden { .. })) => {
            Some(license_condition(
                ConditionStatus::False,
                FORBIDDEN,
                format!("Coder refused the licence upload: {error}"),
            ))
        }
        Err(error) if matches!(error, CoderError::NotFound { .. }) || error.is_route_not_found() => {
            Some(license_condition(
                ConditionStatus::False,
                NOT_SUPPORTED,
                "this Coder deployment has no licences API",
            ))
        }
        Err(error) => Some(license_condition(
            ConditionStatus::False,
            ERROR,
            format!("licence upload failed: {error}"),
        )),
    };
    match decided {
        None => {
            progress.status.license_last_applied = Some(now.clone());
            progress.status.license_last_applied_hash = Some(hash);
            let decided = license_condition(ConditionStatus::True, APPLIED, "the licence is applied");
            set_condition(&mut progress.status.conditions, decided, generation, now.clone());
        }
        Some(decided) => {
            set_condition(&mut progress.status.conditions, decided, generation, now.clone());
            progress.soon(ctx.settings.retry_interval);
        }
    }
    Ok(())
}

/// Entitlements once Ready with operator access. The check time is written only when a value changes, so a
/// steady control plane is not rewritten every 2 minutes.
async fn entitlements(
    ctx: &Context,
    coder: Option<&coder_k8s_coder_client::CoderClient>,
    progress: &mut Progress,
    now: &Time,
) {
    let Some(coder) = coder.filter(|_| progress.status.phase == Some(WorkloadPhase::Ready)) else {
        return;
    };
    let (entitlement, tier) = match coder.entitlements().await {
        Ok(e) => {
            let external = match e.entitlement("external_provisioner_daemons") {
                coder_k8s_coder_client::types::Entitlement::Entitled => Entitlement::Entitled,
                coder_k8s_coder_client::types::Entitlement::GracePeriod => Entitlement::GracePeriod,
                coder_k8s_coder_client::types::Entitlement::NotEntitled => Entitlement::NotEntitled,
                coder_k8s_coder_client::types::Entitlement::Unknown => Entitlement::Unknown,
            };
            let tier = if !e.has_license {
                LicenseTier::None
            } else if e.trial {
                LicenseTier::Trial
            } else if e.is_entitled("custom_roles") || e.is_entitled("multiple_organizations") {
                LicenseTier::Premium
            } else {
                LicenseTier::Enterprise
            };
            (external, tier)
        }
        Err(error) if error.is_route_not_found() => (Entitlement::Unknown, LicenseTier::Unknown),
        Err(error) => {
            tracing::debug!(%error, "reading entitlements failed; keeping the last values");
            progress.soon(ctx.settings.retry_interval);
            return;
        }
    };
    let status = &mut progress.status;
    if status.external_provisioner_daemons_entitlement != Some(entitlement)
        || status.license_tier != Some(tier)
    {
        status.external_provisioner_daemons_entitlement = Some(entitlement);
        status.license_tier = Some(tier);
        status.entitlements_last_checked = Some(now.clone());
    }
}

/// Writes the status with server-side apply, only when it changed; publishes Events for transitions.
async fn write_status(
    cp: &CoderControlPlane,
    ctx: &Context,
    status: CoderControlPlaneStatus,
) -> Result<(), Error> {
    let old = cp.status.clone().unwrap_or_default();
    let api: Api<CoderControlPlane> =
        Api::namespaced(ctx.client.clone(), &cp.namespace().unwrap_or_default());
    if !apply_status(cp, &api, Some(&old), &status).await? {
        return Ok(());
    }
    for (type_, reason, note) in super::status::transitions(&old, &status) {
        let event = KubeEvent {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(error) = ctx.recorder.publish(&event, &cp.object_ref(&())).await {
            tracing::debug!(%error, "publishing an Event failed");
        }
    }
    Ok(())
}

/// Deletion: workspace RBAC first, then the v0.1.5 wait for AI and MCP objects that reference the control plane.
async fn cleanup(cp: &CoderControlPlane, ctx: &Context) -> Result<Action, Error> {
    let id = ControlPlaneId::of(cp).ok_or(Error::MissingMetadata)?;
    let uid = cp.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    delete_workspace_rbac(ctx, &id, &uid, &[]).await?;

    let foreground = cp.finalizers().iter().any(|f| f == "foregroundDeletion");
    let namespace_terminating = Api::<Namespace>::all(ctx.client.clone())
        .get_opt(&id.namespace)
        .await?
        .is_some_and(|ns| ns.metadata.deletion_timestamp.is_some());
    if foreground || namespace_terminating {
        return Ok(Action::await_change());
    }
    let referrers = list_referrers(ctx, &id).await?;
    let elapsed = cp
        .metadata
        .deletion_timestamp
        .as_ref()
        .map(|t| Timestamp::now().duration_since(t.0))
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default();
    let deleting: Vec<&str> = referrers
        .iter()
        .filter(|r| r.deleting)
        .map(|r| r.label.as_str())
        .collect();
    let kept: Vec<&str> = referrers
        .iter()
        .filter(|r| !r.deleting)
        .map(|r| r.label.as_str())
        .collect();
    let limit = ctx.settings.deletion_wait + ctx.settings.deletion_last_attempt;
    let wait = if !deleting.is_empty() && elapsed < limit {
        Some(limit - elapsed)
    } else if !kept.is_empty() && elapsed < ctx.settings.referrer_hold {
        Some(ctx.settings.referrer_hold - elapsed)
    } else {
        None
    };
    match wait {
        Some(remaining) => {
            tracing::info!(name = %id.name, namespace = %id.namespace, deleting = ?deleting, not_deleting = ?kept, "{WAITING_FOR_REFERRERS}");
            Err(Error::WaitingForReferrers(remaining.min(Duration::from_secs(5))))
        }
        None => Ok(Action::await_change()),
    }
}

struct Referrer {
    label: String,
    deleting: bool,
}

/// CoderAIGatewayKey, CoderAIProvider and CoderMCPServer objects in the namespace whose `spec.controlPlaneRef.name`
/// names this control plane.
async fn list_referrers(ctx: &Context, id: &ControlPlaneId) -> Result<Vec<Referrer>, Error> {
    let mut out = Vec::new();
    for (kind, plural) in [
        ("CoderAIGatewayKey", "coderaigatewaykeys"),
        ("CoderAIProvider", "coderaiproviders"),
        ("CoderMCPServer", "codermcpservers"),
    ] {
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("coder.com", "v1alpha1", kind), plural);
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &id.namespace, &resource);
        let list = match api.list(&ListParams::default()).await {
            Ok(list) => list,
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            Err(error) => return Err(error.into()),
        };
        for object in list {
            let references = object
                .data
                .pointer("/spec/controlPlaneRef/name")
                .and_then(|v| v.as_str())
                == Some(id.name.as_str());
            if references {
                out.push(Referrer {
                    label: format!("{kind}/{}", object.name_any()),
                    deleting: object.metadata.deletion_timestamp.is_some(),
                });
            }
        }
    }
    Ok(out)
}

/// Whether the control plane reads the Secret `name` (database, licence, envFrom, extraEnv, operator token).
fn reads_secret(cp: &CoderControlPlane, name: &str) -> bool {
    let spec = &cp.spec;
    let id_token = ControlPlaneId::of(cp).map(|id| token_secret_name(&id, spec));
    spec.database
        .as_ref()
        .is_some_and(|d| d.connection_secret_ref.name == name)
        || spec.license_secret_ref.as_ref().is_some_and(|l| l.name == name)
        || spec
            .env_from
            .iter()
            .any(|e| e.secret_ref.as_ref().is_some_and(|r| r.name == name))
        || spec.extra_env.iter().any(|e| {
            e.value_from
                .as_ref()
                .and_then(|v| v.secret_key_ref.as_ref())
                .is_some_and(|r| r.name == name)
        })
        || id_token.as_deref() == Some(name)
}

fn reads_config_map(cp: &CoderControlPlane, name: &str) -> bool {
    cp.spec
        .env_from
        .iter()
        .any(|e| e.config_map_ref.as_ref().is_some_and(|r| r.name == name))
}

/// The control planes in the object's namespace that read it (by name), to reconcile when it changes.
fn readers<K: Resource>(
    store: &kube::runtime::reflector::Store<CoderControlPlane>,
    object: &K,
    reads: fn(&CoderControlPlane, &str) -> bool,
) -> Vec<kube::runtime::reflector::ObjectRef<CoderControlPlane>> {
    let (namespace, name) = (
        object.meta().namespace.clone(),
        object.meta().name.clone().unwrap_or_default(),
    );
    store
        .state()
        .into_iter()
        .filter(|cp| cp.namespace() == namespace && reads(cp, &name))
        .map(|cp| kube::runtime::reflector::ObjectRef::from_obj(cp.as_ref()))
        .collect()
}

/// Runs the CoderControlPlane controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static) {
    use futures::StreamExt;
    use kube::core::PartialObjectMeta;
    use kube::runtime::{Controller, watcher};

    let managed = watcher::Config::default().labels("app.kubernetes.io/managed-by=coder-k8s");
    let controller = Controller::new(ctx.watched_api::<CoderControlPlane>(), watcher::Config::default());
    let by_secret = controller.store();
    let by_config_map = controller.store();
    controller
        .owns(ctx.watched_api::<Deployment>(), managed.clone())
        .owns(ctx.watched_api::<Service>(), managed.clone())
        .owns(ctx.watched_api::<ServiceAccount>(), managed.clone())
        .owns(ctx.watched_api::<Ingress>(), managed.clone())
        .owns(ctx.watched_api::<Role>(), managed.clone())
        .owns(ctx.watched_api::<RoleBinding>(), managed)
        // Secrets and ConfigMaps the spec names (database, licence, envFrom): metadata only, mapped by name.
        .watches(
            ctx.watched_api::<PartialObjectMeta<Secret>>(),
            watcher::Config::default(),
            move |secret| readers(&by_secret, &secret, reads_secret),
        )
        .watches(
            ctx.watched_api::<PartialObjectMeta<ConfigMap>>(),
            watcher::Config::default(),
            move |map| readers(&by_config_map, &map, reads_config_map),
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
