//! The CoderControlPlane reconcile (docs/controllers/control-plane.md): the I/O shell around the pure core
//! (`names`, `desired`, `status`). A reconcile reads as: dereference the Secrets and ConfigMaps the spec names →
//! validate the database Secret → build the desired objects → apply them (skipped when unchanged) → operator access,
//! licence and entitlements (`coder`) → one status write, only when the status changed. Everything is read from the
//! watch caches; the only reads sent are for Secret and ConfigMap values that changed since they were last read.

use std::sync::Arc;
use std::time::Duration;

use coder_k8s_api::control_plane::{
    CoderControlPlane, CoderControlPlaneSpec, CoderControlPlaneStatus, PG_CONNECTION_URL_ENV, conditions,
};
use coder_k8s_api::shared::WorkloadPhase;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::Action;
use serde_json::json;

use super::coder;
use super::desired::{self, ACCESS_URL_ENV, DesiredState, Inputs};
use super::names::{ControlPlaneId, WORKSPACE_RBAC_OWNER_UID_ANNOTATION};
use super::status::{check_database_secret, entitlements_unknown_until_read, transitions};
use super::workspace_rbac;
use crate::controller::apply::{
    NotOwned, apply_owned, controlled_by, delete, delete_owned, ready_replicas, report_ownership,
};
use crate::controller::conditions::{ConditionStatus, Draft, remove_condition};
use crate::controller::context::Context;
use crate::controller::error::{Error, Result};
use crate::controller::runner::Cleanup;
use crate::controller::secrets;
use crate::controller::status_writer::write_status;

/// Log line while a deleted control plane waits for its referrers (v0.1.5 text).
pub const WAITING_FOR_REFERRERS: &str = "Waiting for the objects that use this control plane";

/// The status being built by one reconcile, and how soon to look again.
pub(super) struct Progress {
    pub draft: Draft<CoderControlPlaneStatus>,
    pub requeue: Duration,
}

impl Progress {
    pub fn soon(&mut self, after: Duration) {
        self.requeue = self.requeue.min(after);
    }
}

impl std::ops::Deref for Progress {
    type Target = Draft<CoderControlPlaneStatus>;

    fn deref(&self) -> &Self::Target {
        &self.draft
    }
}

impl std::ops::DerefMut for Progress {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.draft
    }
}

/// One reconcile of a live control plane.
pub async fn apply_spec(cp: Arc<CoderControlPlane>, ctx: Arc<Context>) -> Result<Action> {
    let (cp, ctx) = (cp.as_ref(), ctx.as_ref());
    let id = ControlPlaneId::of(cp).ok_or(Error::MissingMetadata)?;
    let uid = cp.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    let mut progress = Progress {
        draft: Draft::new(cp.status.clone().unwrap_or_default(), cp.metadata.generation),
        requeue: ctx.settings.entitlements_interval,
    };
    let database_url = database(cp, ctx, &id, &mut progress).await?;
    let inputs = Inputs {
        env_from_defines_access_url: env_from_defines_access_url(ctx, &id.namespace, &cp.spec).await?,
    };
    let desired = desired::desired_state(cp, &inputs).ok_or(Error::MissingMetadata)?;
    let ready_replicas = apply_children(cp, ctx, &id, &uid, desired, &mut progress).await?;
    set_phase(&mut progress, &id, cp, ready_replicas);
    coder::reconcile(cp, ctx, database_url.as_deref(), &mut progress).await?;
    let old = cp.status.clone().unwrap_or_default();
    let events = transitions(&old, &progress.status);
    write_status(ctx, cp, cp.status.as_ref(), &progress.status, events).await?;
    Ok(Action::requeue(progress.requeue))
}

fn set_phase(progress: &mut Progress, id: &ControlPlaneId, cp: &CoderControlPlane, ready_replicas: i32) {
    let status = &mut progress.status;
    status.url = Some(desired::status_url(id, &cp.spec));
    status.ready_replicas = Some(ready_replicas);
    status.phase = Some(if ready_replicas > 0 {
        WorkloadPhase::Ready
    } else {
        WorkloadPhase::Pending
    });
    status.observed_generation = cp.metadata.generation;
    entitlements_unknown_until_read(status);
}

/// `DatabaseSecretResolved` and the PostgreSQL URL for operator access (from `spec.database`, else from
/// `spec.extraEnv`).
async fn database(
    cp: &CoderControlPlane,
    ctx: &Context,
    id: &ControlPlaneId,
    progress: &mut Progress,
) -> Result<Option<String>> {
    let spec = &cp.spec;
    let Some(database) = &spec.database else {
        remove_condition(
            &mut progress.status.conditions,
            conditions::DATABASE_SECRET_RESOLVED,
        );
        return extra_env_database_url(ctx, &id.namespace, spec).await;
    };
    let reference = &database.connection_secret_ref;
    let secret = ctx
        .caches
        .secrets
        .get(&ctx.client, &id.namespace, &reference.name)
        .await?;
    let check = check_database_secret(
        reference,
        secret.as_ref().and_then(|s| s.data.as_ref()),
        desired::database_conflict(spec),
    );
    if check.condition.status != ConditionStatus::True {
        progress.soon(ctx.settings.retry_interval);
    }
    progress.set(check.condition);
    Ok(check.url)
}

/// `CODER_PG_CONNECTION_URL` from `spec.extraEnv` when `spec.database` is unset: exactly one entry, a literal value or
/// a `secretKeyRef`. `envFrom` is never consulted.
async fn extra_env_database_url(
    ctx: &Context,
    namespace: &str,
    spec: &CoderControlPlaneSpec,
) -> Result<Option<String>> {
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
    let secret = ctx
        .caches
        .secrets
        .get(&ctx.client, namespace, &reference.name)
        .await?;
    Ok(secrets::value(secret.as_deref(), &reference.key))
}

/// Whether a ConfigMap or Secret in `spec.envFrom` defines `CODER_ACCESS_URL` (with its prefix).
async fn env_from_defines_access_url(
    ctx: &Context,
    namespace: &str,
    spec: &CoderControlPlaneSpec,
) -> Result<bool> {
    if !spec.env_use_cluster_access_url.unwrap_or(true) {
        return Ok(false);
    }
    for source in &spec.env_from {
        let prefix = source.prefix.clone().unwrap_or_default();
        let Some(key) = ACCESS_URL_ENV.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let defines = if let Some(reference) = &source.config_map_ref {
            let map = ctx
                .caches
                .config_maps
                .get(&ctx.client, namespace, &reference.name)
                .await?;
            map.is_some_and(|c| c.data.as_ref().is_some_and(|d| d.contains_key(key)))
        } else if let Some(reference) = &source.secret_ref {
            let secret = ctx
                .caches
                .secrets
                .get(&ctx.client, namespace, &reference.name)
                .await?;
            secret.is_some_and(|s| s.data.as_ref().is_some_and(|d| d.contains_key(key)))
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
    progress: &mut Progress,
) -> Result<i32> {
    let caches = &ctx.caches;
    let ns = id.namespace.as_str();
    let DesiredState {
        service_account,
        workspace_rbac,
        service,
        deployment,
        ingress,
        http_route,
    } = desired;
    let mut not_owned = Vec::new();
    if let Some(service_account) = service_account {
        let cached = caches.service_accounts.meta(ns, &service_account.name_any());
        not_owned.extend(apply_owned(ctx, service_account, cached.as_ref()).await?.err());
    }
    let workspace_rbac = match workspace_rbac_allowed(cp, ctx, id, progress).await? {
        true => workspace_rbac,
        // Refused as a whole: the loop below applies nothing and the clean-up removes what exists.
        false => Vec::new(),
    };
    let mut kept_rbac = Vec::new();
    for (role, binding) in workspace_rbac {
        let role_ns = role.metadata.namespace.clone().unwrap_or_default();
        kept_rbac.push((role_ns.clone(), role.name_any(), binding.name_any()));
        // Claimed by the owner-UID annotation (no owner reference across namespaces): a Role or RoleBinding of that
        // name that is not this control plane's is reported, never overwritten.
        let cached_role = caches.roles.meta(&role_ns, &role.name_any());
        not_owned.extend(apply_owned(ctx, role, cached_role.as_ref()).await?.err());
        let cached_binding = caches.role_bindings.meta(&role_ns, &binding.name_any());
        not_owned.extend(apply_owned(ctx, binding, cached_binding.as_ref()).await?.err());
    }
    delete_workspace_rbac(ctx, uid, &kept_rbac).await?;
    if cp.spec.service_account.disable_create {
        detach_service_account(ctx, id, uid).await?;
    }
    let cached_service = caches.services.meta(ns, &service.name_any());
    not_owned.extend(apply_owned(ctx, service, cached_service.as_ref()).await?.err());
    let ready = match apply_deployment(ctx, id, deployment, desired::database_conflict(&cp.spec)).await? {
        Ok(ready) => ready,
        Err(foreign) => {
            not_owned.push(foreign);
            0
        }
    };
    match ingress {
        Some(ingress) => {
            let cached = caches.ingresses.meta(ns, &ingress.name_any());
            not_owned.extend(apply_owned(ctx, ingress, cached.as_ref()).await?.err());
        }
        None => {
            let cached = caches.ingresses.meta(ns, &id.name);
            delete_owned::<Ingress>(ctx, ns, &id.name, cached.as_ref(), uid).await?;
        }
    }
    let spec_changed = cp.status.as_ref().and_then(|s| s.observed_generation) != cp.metadata.generation;
    apply_http_route(ctx, id, uid, http_route, spec_changed, progress).await?;
    report_ownership(&mut progress.draft, &not_owned);
    if !not_owned.is_empty() {
        progress.soon(ctx.settings.retry_interval);
    }
    Ok(ready)
}

/// `--restrict-workspace-rbac`: whether the spec's workspace RBAC passes the hardening rules (sets
/// `WorkspaceRBACAllowed`; without the flag the condition is absent and everything passes, as in v0.1.5). The
/// workspace namespaces' opt-in labels are read only when every rule passed.
async fn workspace_rbac_allowed(
    cp: &CoderControlPlane,
    ctx: &Context,
    id: &ControlPlaneId,
    progress: &mut Progress,
) -> Result<bool> {
    if !ctx.settings.restrict_workspace_rbac {
        remove_condition(
            &mut progress.status.conditions,
            conditions::WORKSPACE_RBAC_ALLOWED,
        );
        return Ok(true);
    }
    let rbac = &cp.spec.rbac;
    let mut opted_in = Vec::new();
    if workspace_rbac::refusal(rbac, &id.namespace, |_| true).is_none() {
        let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
        for name in workspace_rbac::namespaces_to_check(rbac, &id.namespace) {
            let namespace = namespaces.get_metadata_opt(name).await?;
            if workspace_rbac::labels_opt_in(namespace.and_then(|n| n.metadata.labels).as_ref()) {
                opted_in.push(name);
            }
        }
    }
    let refusal = workspace_rbac::refusal(rbac, &id.namespace, |ns| opted_in.contains(&ns));
    progress.set(workspace_rbac::condition(refusal.as_ref()));
    if refusal.is_some() {
        progress.soon(ctx.settings.retry_interval);
    }
    Ok(refusal.is_none())
}

/// Applies the Deployment (left exactly as it is under ConflictingConfiguration); returns its ready replicas, or
/// the Deployment of that name that the control plane does not control.
async fn apply_deployment(
    ctx: &Context,
    id: &ControlPlaneId,
    deployment: Deployment,
    conflicting: bool,
) -> Result<std::result::Result<i32, NotOwned>> {
    if conflicting {
        let cached = ctx.caches.deployments.get(&id.namespace, &id.name);
        return Ok(Ok(cached.as_deref().map(ready_replicas).unwrap_or(0)));
    }
    Ok(crate::controller::apply::apply_deployment(ctx, deployment).await?)
}

fn http_route_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
        "httproutes",
    )
}

/// Applies or removes the HTTPRoute, read from its watch cache once the Gateway API is found (else with a GET).
/// Without a route, nothing is sent unless the spec changed (the route may have been turned off) and the Gateway API
/// is served. Without the Gateway API CRDs a wanted route logs and retries every 2 minutes.
async fn apply_http_route(
    ctx: &Context,
    id: &ControlPlaneId,
    uid: &str,
    route: Option<serde_json::Value>,
    spec_changed: bool,
    progress: &mut Progress,
) -> Result<()> {
    let wanted = route.is_some();
    if !wanted && !spec_changed {
        return Ok(());
    }
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &id.namespace, &http_route_resource());
    if wanted && ctx.caches.http_routes().is_none() {
        ctx.caches.discover_http_routes().await;
    }
    if !wanted && ctx.caches.http_routes().is_none() {
        // No Gateway API was found, so no route of ours can exist.
        return Ok(());
    }
    let live = match ctx.caches.http_routes() {
        Some(routes) => Ok(routes.meta(&id.namespace, &id.name)),
        None => api.get_opt(&id.name).await.map(|route| route.map(|r| r.metadata)),
    };
    let result = match (live, route.map(serde_json::from_value::<DynamicObject>)) {
        (Err(error), _) => Err(error),
        (Ok(live), Some(Ok(object))) => apply_dynamic(ctx, &api, object, live.as_ref()).await,
        (Ok(_), Some(Err(_))) => Ok(()),
        (Ok(live), None) => match live {
            Some(live) if controlled_by(&live, uid) => {
                api.delete(&id.name, &Default::default()).await.map(|_| ())
            }
            _ => Ok(()),
        },
    };
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => {
            if wanted {
                tracing::warn!(name = %id.name, namespace = %id.namespace, "the Gateway API (HTTPRoute) is not installed; retrying in 2 minutes");
                progress.soon(Duration::from_secs(120));
            }
            Ok(())
        }
        other => other.map_err(Error::from),
    }
}

/// Server-side apply of a dynamic object, skipped when the live one carries the same desired hash.
async fn apply_dynamic(
    ctx: &Context,
    api: &Api<DynamicObject>,
    mut desired: DynamicObject,
    live: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
) -> std::result::Result<(), kube::Error> {
    use crate::controller::apply::{DESIRED_HASH_LABEL, FIELD_MANAGER, desired_hash, hash_of};
    let hash = desired_hash(&desired);
    if live.and_then(hash_of) == Some(hash.as_str()) {
        return Ok(());
    }
    let name = desired.name_any();
    ctx.echoes.record(
        "HTTPRoute",
        &desired.namespace().unwrap_or_default(),
        &name,
        &hash,
    );
    desired.labels_mut().insert(DESIRED_HASH_LABEL.to_owned(), hash);
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&desired),
    )
    .await
    .map(|_| ())
}

/// Deletes the control plane's workspace Roles and RoleBindings everywhere except `keep` (namespace, role,
/// binding), found in the watch caches by the owner-UID annotation (no cluster-wide list).
async fn delete_workspace_rbac(ctx: &Context, uid: &str, keep: &[(String, String, String)]) -> Result<()> {
    let ours = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(WORKSPACE_RBAC_OWNER_UID_ANNOTATION))
            .is_some_and(|owner| owner == uid)
    };
    let key = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        )
    };
    for role in ctx.caches.roles.store().state_filter(|r| ours(&r.metadata)) {
        let (ns, name) = key(&role.metadata);
        if !keep.iter().any(|(n, r, _)| *n == ns && *r == name) {
            delete::<Role>(ctx, &ns, &name).await?;
        }
    }
    for binding in ctx
        .caches
        .role_bindings
        .store()
        .state_filter(|b| ours(&b.metadata))
    {
        let (ns, name) = key(&binding.metadata);
        if !keep.iter().any(|(n, _, b)| *n == ns && *b == name) {
            delete::<RoleBinding>(ctx, &ns, &name).await?;
        }
    }
    Ok(())
}

/// `serviceAccount.disableCreate`: every ServiceAccount the control plane controls (under any name it ever had, as
/// the Go operator did) stays, without its owner reference, so that turning creation off never deletes an account
/// pods may still use.
async fn detach_service_account(ctx: &Context, id: &ControlPlaneId, uid: &str) -> Result<()> {
    let owned: Vec<_> = ctx
        .caches
        .service_accounts
        .store()
        .state()
        .into_iter()
        .filter(|sa| sa.metadata.namespace.as_deref() == Some(id.namespace.as_str()))
        .filter(|sa| controlled_by(&sa.metadata, uid))
        .collect();
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &id.namespace);
    for live in owned {
        let owners: Vec<_> = live
            .metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|o| o.uid != uid)
            .cloned()
            .collect();
        let patch = json!({"metadata": {"ownerReferences": owners}});
        api.patch(&live.name_any(), &PatchParams::default(), &Patch::Merge(patch))
            .await?;
    }
    Ok(())
}

/// Deletion: workspace RBAC first, then the v0.1.5 wait for AI and MCP objects that reference the control plane.
pub async fn cleanup(cp: Arc<CoderControlPlane>, ctx: Arc<Context>) -> Result<Cleanup> {
    let (cp, ctx) = (cp.as_ref(), ctx.as_ref());
    let id = ControlPlaneId::of(cp).ok_or(Error::MissingMetadata)?;
    let uid = cp.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    delete_workspace_rbac(ctx, &uid, &[]).await?;
    let foreground = cp.finalizers().iter().any(|f| f == "foregroundDeletion");
    let namespace_terminating = Api::<Namespace>::all(ctx.client.clone())
        .get_opt(&id.namespace)
        .await?
        .is_some_and(|ns| ns.metadata.deletion_timestamp.is_some());
    if foreground || namespace_terminating {
        return Ok(Cleanup::Done);
    }
    let referrers = list_referrers(ctx, &id).await?;
    let elapsed = cp
        .metadata
        .deletion_timestamp
        .as_ref()
        .and_then(|t| Duration::try_from(Timestamp::now().duration_since(t.0)).ok())
        .unwrap_or_default();
    match super::status::referrer_wait(&referrers, elapsed, &ctx.settings) {
        Some(remaining) => {
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
            tracing::info!(name = %id.name, namespace = %id.namespace, deleting = ?deleting, not_deleting = ?kept, "{WAITING_FOR_REFERRERS}");
            Ok(Cleanup::WaitFor(remaining.min(Duration::from_secs(5))))
        }
        None => Ok(Cleanup::Done),
    }
}

/// CoderAIGatewayKey, CoderAIProvider, CoderMCPServer and CoderTemplateTest objects in the namespace whose
/// `spec.controlPlaneRef.name` names this control plane (read only while the control plane is being deleted). A
/// template test being deleted needs the control plane to delete its workspace in Coder (beyond v0.1.5, which
/// waited for the AI kinds only).
async fn list_referrers(ctx: &Context, id: &ControlPlaneId) -> Result<Vec<super::status::Referrer>> {
    let mut out = Vec::new();
    for (kind, plural) in [
        ("CoderAIGatewayKey", "coderaigatewaykeys"),
        ("CoderAIProvider", "coderaiproviders"),
        ("CoderMCPServer", "codermcpservers"),
        ("CoderTemplateTest", "codertemplatetests"),
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
                out.push(super::status::Referrer {
                    label: format!("{kind}/{}", object.name_any()),
                    deleting: object.metadata.deletion_timestamp.is_some(),
                });
            }
        }
    }
    Ok(out)
}
