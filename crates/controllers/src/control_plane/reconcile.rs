//! The CoderControlPlane reconcile (docs/controllers/control-plane.md): the I/O shell around the pure core
//! (`desired`, `status`). A reconcile reads as: dereference the Secrets and ConfigMaps the spec names → validate the
//! database Secret → build the desired objects → apply them (skipped when unchanged) → operator access, licence and
//! entitlements (`coder`) → one status write, only when the status changed.

use std::time::Duration;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::shared::WorkloadPhase;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::desired::{self, ControlPlaneId, DesiredState, Inputs};
use super::status::{self, Outcome, Referrer, entitlements_unknown_until_read, transitions};
use super::{coder, inputs};
use crate::apply::{Owned, cached_ready_replicas, delete, delete_owned, desired_hash};
use crate::cache::Object;
use crate::error::{Error, Result};
use crate::halt::Halt;
use crate::k8s::OptionalWatch;
use crate::kind::Cleanup;
use crate::labels::{DESIRED_HASH_LABEL, FIELD_MANAGER};
use crate::ownership::controlled_by;
use crate::pass::Pass;
use crate::slim::Live;
use crate::status_writer;

/// Log line while a deleted control plane waits for its referrers (v0.1.5 text).
pub const WAITING_FOR_REFERRERS: &str = "Waiting for the objects that use this control plane";

type ControlPlanePass<'p> = Pass<'p, CoderControlPlane>;

/// One pass over a live control plane.
pub async fn reconcile(pass: &mut ControlPlanePass<'_>) -> Result<Outcome, Halt<Outcome>> {
    let id = ControlPlaneId::of(pass.object).ok_or(Error::MissingMetadata)?;
    let database_url = inputs::database_url(pass, &id).await?;
    let inputs = Inputs {
        env_from_defines_access_url: inputs::env_from_defines_access_url(pass, &id.namespace).await?,
    };
    let desired = desired::desired_state(pass.object, &inputs).ok_or(Error::MissingMetadata)?;
    let ready_replicas = apply_children(pass, &id, desired).await?;
    set_phase(pass, &id, ready_replicas);
    coder::reconcile(pass, &id, database_url.as_deref()).await?;
    let access = pass.status.operator_access_ready == Some(true);
    Ok(status::next_pass(
        pass.next,
        access,
        pass.ctx.settings.entitlements_interval,
    ))
}

fn set_phase(pass: &mut ControlPlanePass<'_>, id: &ControlPlaneId, ready_replicas: i32) {
    let (url, generation) = (desired::status_url(id, &pass.object.spec), pass.generation());
    let status = &mut pass.status;
    status.url = Some(url);
    status.ready_replicas = Some(ready_replicas);
    status.phase = Some(match ready_replicas > 0 {
        true => WorkloadPhase::Ready,
        false => WorkloadPhase::Pending,
    });
    status.observed_generation = generation;
    entitlements_unknown_until_read(status);
}

/// Writes the status when it changed, with an Event for each transition, and requeues when a time is due.
pub async fn settle(pass: &mut ControlPlanePass<'_>, outcome: Outcome) -> Result<Action> {
    let old = pass.shown.clone().unwrap_or_default();
    let events = transitions(&old, &pass.status);
    status_writer::write(pass, events).await?;
    Ok(outcome.action())
}

/// Applies every owned object and removes what a turned-off feature left; returns the Deployment's ready replicas.
async fn apply_children(
    pass: &mut ControlPlanePass<'_>,
    id: &ControlPlaneId,
    desired: DesiredState,
) -> Result<i32> {
    let (ctx, uid) = (pass.ctx, pass.uid.clone());
    let caches = &ctx.k8s.caches;
    let mut owned = Owned::default();
    if let Some(service_account) = desired.service_account {
        owned
            .apply(ctx, &caches.service_accounts, service_account)
            .await?;
    }
    let workspace_rbac = match inputs::workspace_rbac_allowed(pass, id).await? {
        true => desired.workspace_rbac,
        // Refused as a whole: nothing is applied and the clean-up removes what exists.
        false => Vec::new(),
    };
    let mut kept_rbac = Vec::new();
    for (role, binding) in workspace_rbac {
        kept_rbac.push((
            role.namespace().unwrap_or_default(),
            role.name_any(),
            binding.name_any(),
        ));
        // Claimed by the owner-UID annotation (no owner reference across namespaces): a Role or RoleBinding of that
        // name that is not this control plane's is reported, never overwritten.
        owned.apply(ctx, &caches.roles, role).await?;
        owned.apply(ctx, &caches.role_bindings, binding).await?;
    }
    delete_workspace_rbac(pass, &kept_rbac).await?;
    if pass.object.spec.service_account.disable_create {
        detach_service_account(pass, id).await?;
    }
    owned.apply(ctx, &caches.services, desired.service).await?;
    let ready = apply_deployment(pass, id, &mut owned, desired.deployment).await?;
    apply_ingress(pass, id, &mut owned, desired.ingress, &uid).await?;
    apply_http_route(pass, id, desired.http_route).await?;
    let ns = id.namespace.as_str();
    let budget = desired.pod_disruption_budget;
    owned
        .apply_or_remove(ctx, &caches.pod_disruption_budgets, ns, &id.name, budget, &uid)
        .await?;
    let metrics = desired::metrics_service_name(id);
    owned
        .apply_or_remove(ctx, &caches.services, ns, &metrics, desired.metrics_service, &uid)
        .await?;
    apply_service_monitor(pass, id, desired.service_monitor).await?;
    owned.report(pass);
    if !owned.not_owned.is_empty() {
        pass.soon(pass.retry());
    }
    Ok(ready)
}

/// Applies the Deployment (left exactly as it is under ConflictingConfiguration); returns its ready replicas, 0 for
/// a Deployment of that name that the control plane does not control.
async fn apply_deployment(
    pass: &ControlPlanePass<'_>,
    id: &ControlPlaneId,
    owned: &mut Owned,
    deployment: k8s_openapi::api::apps::v1::Deployment,
) -> Result<i32> {
    if desired::database_conflict(&pass.object.spec) {
        let cached = pass.ctx.k8s.caches.deployments.get(&id.namespace, &id.name);
        return Ok(cached.as_deref().map(cached_ready_replicas).unwrap_or(0));
    }
    Ok(owned.deployment(pass.ctx, deployment).await?)
}

/// Applies the Ingress, or removes the one the control plane controls when the spec no longer asks for one.
async fn apply_ingress(
    pass: &ControlPlanePass<'_>,
    id: &ControlPlaneId,
    owned: &mut Owned,
    ingress: Option<Ingress>,
    uid: &str,
) -> Result<()> {
    let (ctx, ns) = (pass.ctx, id.namespace.as_str());
    match ingress {
        Some(ingress) => owned.apply(ctx, &ctx.k8s.caches.ingresses, ingress).await?,
        None => {
            let cached = ctx.k8s.caches.ingresses.live(ns, &id.name);
            delete_owned::<Ingress>(ctx, ns, &id.name, cached.as_ref().map(|c| &c.metadata), uid).await?;
        }
    }
    Ok(())
}

/// Applies or removes the HTTPRoute (see [`apply_optional`]).
async fn apply_http_route(
    pass: &mut ControlPlanePass<'_>,
    id: &ControlPlaneId,
    route: Option<serde_json::Value>,
) -> Result<()> {
    let routes = &pass.ctx.k8s.caches.http_routes;
    apply_optional(pass, id, routes, &id.name, route, "the Gateway API (HTTPRoute)").await
}

/// Applies or removes the ServiceMonitor of the metrics Service (see [`apply_optional`]).
async fn apply_service_monitor(
    pass: &mut ControlPlanePass<'_>,
    id: &ControlPlaneId,
    monitor: Option<serde_json::Value>,
) -> Result<()> {
    let monitors = &pass.ctx.k8s.caches.service_monitors;
    let name = desired::metrics_service_name(id);
    apply_optional(
        pass,
        id,
        monitors,
        &name,
        monitor,
        "the Prometheus Operator (ServiceMonitor)",
    )
    .await
}

/// Applies or removes an object of a kind whose API is optional, read from its watch cache once the API is found
/// (else with a GET). Without such an object, nothing is sent unless the spec changed (it may have been turned off)
/// and the API is served. Without the API's CRDs a wanted object is logged (`api` names it) and looked for again
/// every 2 minutes; the rest of the control plane works on.
async fn apply_optional<K>(
    pass: &mut ControlPlanePass<'_>,
    id: &ControlPlaneId,
    watch: &OptionalWatch<K>,
    name: &str,
    object: Option<serde_json::Value>,
    api: &str,
) -> Result<()>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    PartialObjectMeta<K>: Object + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    let (ctx, cp) = (pass.ctx, pass.object);
    let wanted = object.is_some();
    let spec_changed = cp.status.as_ref().and_then(|s| s.observed_generation) != cp.metadata.generation;
    match optional_step(wanted, spec_changed, watch.found()) {
        OptionalStep::Nothing => return Ok(()),
        OptionalStep::DiscoverThenWrite => ctx.k8s.caches.discover(watch).await,
        OptionalStep::Write => {}
    }
    match write_optional(pass, id, watch, name, object).await {
        Err(kube::Error::Api(status)) if status.code == 404 => {
            if wanted {
                tracing::warn!(name = %id.name, namespace = %id.namespace, "{api} is not installed; retrying in 2 minutes");
                pass.soon(Duration::from_secs(120));
            }
            Ok(())
        }
        other => other.map_err(Error::from),
    }
}

/// What a pass does about an object whose API is optional.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OptionalStep {
    /// Nothing to write: nothing is wanted and the spec did not change, or the API was never found (so no object of
    /// ours can exist).
    Nothing,
    /// Look for the API first (it may have been installed since), then write.
    DiscoverThenWrite,
    /// Apply the wanted object or remove ours (from the watch cache once it is ready, else after a GET).
    Write,
}

/// The step for an optional object. `api_found` means the API was discovered and its watch started, not that the
/// watch's first list has arrived: a removal right after the watch started must still happen (found by a GET), or the
/// object would stay for good, since the next passes see an unchanged spec.
fn optional_step(wanted: bool, spec_changed: bool, api_found: bool) -> OptionalStep {
    match (wanted, spec_changed, api_found) {
        (false, false, _) | (false, true, false) => OptionalStep::Nothing,
        (true, _, false) => OptionalStep::DiscoverThenWrite,
        (_, _, true) => OptionalStep::Write,
    }
}

/// Applies `object`, or deletes the object `name` the control plane controls when there is none.
async fn write_optional<K>(
    pass: &ControlPlanePass<'_>,
    id: &ControlPlaneId,
    watch: &OptionalWatch<K>,
    name: &str,
    object: Option<serde_json::Value>,
) -> std::result::Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    PartialObjectMeta<K>: Object + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    let ctx = pass.ctx;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&K::group(&()), &K::version(&()), &K::kind(&())),
        &K::plural(&()),
    );
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.k8s.client.clone(), &id.namespace, &resource);
    let live = match watch.cache() {
        Some(cache) => cache.live(&id.namespace, name),
        None => api.get_opt(name).await?.map(|o| Live::of(o.metadata)),
    };
    match object.map(serde_json::from_value::<DynamicObject>) {
        Some(Ok(object)) => apply_dynamic(pass, &api, &K::kind(&()), object, live.as_ref()).await,
        Some(Err(_)) => Ok(()),
        None => match live {
            Some(live) if controlled_by(&live.metadata, &pass.uid) => {
                api.delete(name, &Default::default()).await.map(|_| ())
            }
            _ => Ok(()),
        },
    }
}

/// Server-side apply of a dynamic object, skipped when the live one carries the same desired hash.
async fn apply_dynamic(
    pass: &ControlPlanePass<'_>,
    api: &Api<DynamicObject>,
    kind: &str,
    mut desired: DynamicObject,
    live: Option<&Live>,
) -> std::result::Result<(), kube::Error> {
    let hash = desired_hash(&desired);
    if live.and_then(Live::desired_hash) == Some(hash.as_str()) {
        return Ok(());
    }
    let name = desired.name_any();
    let namespace = desired.namespace().unwrap_or_default();
    pass.ctx.k8s.echoes.record(kind, &namespace, &name, &hash);
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
/// binding), found in the watch caches' index of the owner-UID annotation (no cluster-wide list, no scan).
async fn delete_workspace_rbac(pass: &ControlPlanePass<'_>, keep: &[(String, String, String)]) -> Result<()> {
    let (ctx, uid) = (pass.ctx, pass.uid.as_str());
    let key = |meta: &ObjectMeta| {
        (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        )
    };
    for role in ctx.k8s.caches.roles.annotated_owned_by(uid) {
        let (ns, name) = key(&role.live.metadata);
        if !keep.iter().any(|(n, r, _)| *n == ns && *r == name) {
            delete::<Role>(ctx, &ns, &name).await?;
        }
    }
    for binding in ctx.k8s.caches.role_bindings.annotated_owned_by(uid) {
        let (ns, name) = key(&binding.live.metadata);
        if !keep.iter().any(|(n, _, b)| *n == ns && *b == name) {
            delete::<RoleBinding>(ctx, &ns, &name).await?;
        }
    }
    Ok(())
}

/// `serviceAccount.disableCreate`: every ServiceAccount the control plane controls (under any name it ever had, as
/// the Go operator did) stays, without its owner reference, so that turning creation off never deletes an account
/// pods may still use.
async fn detach_service_account(pass: &ControlPlanePass<'_>, id: &ControlPlaneId) -> Result<()> {
    let (ctx, uid) = (pass.ctx, pass.uid.as_str());
    let owned: Vec<_> = ctx
        .k8s
        .caches
        .service_accounts
        .store()
        .state()
        .into_iter()
        .filter(|sa| sa.live.metadata.namespace.as_deref() == Some(id.namespace.as_str()))
        .filter(|sa| controlled_by(&sa.live.metadata, uid))
        .collect();
    let api: Api<ServiceAccount> = Api::namespaced(ctx.k8s.client.clone(), &id.namespace);
    for live in owned {
        let owners: Vec<_> = live
            .live
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
pub async fn cleanup(pass: &mut ControlPlanePass<'_>) -> Result<Cleanup> {
    let (ctx, cp) = (pass.ctx, pass.object);
    let id = ControlPlaneId::of(cp).ok_or(Error::MissingMetadata)?;
    delete_workspace_rbac(pass, &[]).await?;
    let foreground = cp.finalizers().iter().any(|f| f == "foregroundDeletion");
    let namespace_terminating = Api::<Namespace>::all(ctx.k8s.client.clone())
        .get_opt(&id.namespace)
        .await?
        .is_some_and(|ns| ns.metadata.deletion_timestamp.is_some());
    if foreground || namespace_terminating {
        return Ok(Cleanup::Done);
    }
    let referrers = list_referrers(pass, &id).await?;
    let elapsed = cp
        .metadata
        .deletion_timestamp
        .as_ref()
        .and_then(|t| Duration::try_from(Timestamp::now().duration_since(t.0)).ok())
        .unwrap_or_default();
    let Some(remaining) = status::referrer_wait(&referrers, elapsed, &ctx.settings) else {
        return Ok(Cleanup::Done);
    };
    let labels = |deleting: bool| -> Vec<&str> {
        referrers
            .iter()
            .filter(|r| r.deleting == deleting)
            .map(|r| r.label.as_str())
            .collect()
    };
    let (deleting, kept) = (labels(true), labels(false));
    tracing::info!(name = %id.name, namespace = %id.namespace, deleting = ?deleting, not_deleting = ?kept, "{WAITING_FOR_REFERRERS}");
    Ok(Cleanup::WaitFor(remaining.min(Duration::from_secs(5))))
}

/// CoderAIGatewayKey, CoderAIProvider, CoderMCPServer and CoderTemplateTest objects in the namespace whose
/// `spec.controlPlaneRef.name` names this control plane (read only while the control plane is being deleted). A
/// template test being deleted needs the control plane to delete its workspace in Coder (beyond v0.1.5, which
/// waited for the AI kinds only).
async fn list_referrers(pass: &ControlPlanePass<'_>, id: &ControlPlaneId) -> Result<Vec<Referrer>> {
    let mut out = Vec::new();
    for (kind, plural) in [
        ("CoderAIGatewayKey", "coderaigatewaykeys"),
        ("CoderAIProvider", "coderaiproviders"),
        ("CoderMCPServer", "codermcpservers"),
        ("CoderTemplateTest", "codertemplatetests"),
    ] {
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("coder.com", "v1alpha1", kind), plural);
        let api: Api<DynamicObject> =
            Api::namespaced_with(pass.ctx.k8s.client.clone(), &id.namespace, &resource);
        let list = match api.list(&ListParams::default()).await {
            Ok(list) => list,
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            Err(error) => return Err(error.into()),
        };
        let references = |object: &DynamicObject| {
            object
                .data
                .pointer("/spec/controlPlaneRef/name")
                .and_then(|v| v.as_str())
                == Some(id.name.as_str())
        };
        out.extend(list.into_iter().filter(references).map(|object| Referrer {
            label: format!("{kind}/{}", object.name_any()),
            deleting: object.metadata.deletion_timestamp.is_some(),
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{OptionalStep, optional_step};

    #[test]
    fn an_optional_object_is_removed_while_its_watch_is_still_starting() {
        // Turned off in the spec, the API found, the watch's first list not in yet: remove (found by a GET).
        assert_eq!(optional_step(false, true, true), OptionalStep::Write);
    }

    #[test]
    fn an_optional_object_is_left_alone_when_nothing_asks_for_a_write() {
        assert_eq!(optional_step(false, false, true), OptionalStep::Nothing);
        assert_eq!(optional_step(false, false, false), OptionalStep::Nothing);
        // Never found: no object of ours can exist.
        assert_eq!(optional_step(false, true, false), OptionalStep::Nothing);
    }

    #[test]
    fn a_wanted_optional_object_looks_for_its_api_until_found() {
        assert_eq!(optional_step(true, false, false), OptionalStep::DiscoverThenWrite);
        assert_eq!(optional_step(true, true, false), OptionalStep::DiscoverThenWrite);
        assert_eq!(optional_step(true, false, true), OptionalStep::Write);
        assert_eq!(optional_step(true, true, true), OptionalStep::Write);
    }
}
