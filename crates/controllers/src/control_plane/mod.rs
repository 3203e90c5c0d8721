//! CoderControlPlane (docs/controllers/control-plane.md), wired: `inputs` (the database Secret, `envFrom`, the
//! workspace namespaces' opt-in, its memory) → `desired` (names, labels, URLs and the owned objects; pure) →
//! `status` (the condition decisions, pure) → `reconcile` (the pass, its status write, the finalizer) with `coder`
//! (operator access, licence, entitlements) and `workspace_rbac` (the hardening rules of workspace RBAC, pure).

pub mod coder;
pub mod desired;
pub mod inputs;
pub mod reconcile;
pub mod status;
pub mod workspace_rbac;

use std::sync::Arc;

use coder_k8s_api::control_plane::{CoderControlPlane, FINALIZER};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Resource;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::cache::{Informer, every_change, hash_only};
use crate::k8s::Caches;
use crate::kind::Kind;
use crate::runner::{Controller, steps};
use crate::slim::Slim;
use crate::triggers::{TriggerSet, owner, readers};

impl Kind for CoderControlPlane {
    const KIND: &'static str = "CoderControlPlane";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    type Memory = inputs::Memory;

    fn cache(caches: &Caches) -> &Arc<Informer<Self>> {
        &caches.control_planes
    }
}

impl Controller for CoderControlPlane {
    type Outcome = status::Outcome;

    fn triggers(triggers: TriggerSet<Self>, caches: &Caches) -> TriggerSet<Self> {
        triggers
            .deployments()
            .owned(&caches.services)
            .owned(&caches.service_accounts)
            .owned(&caches.ingresses)
            .owned(&caches.pod_disruption_budgets)
            .owned(&caches.service_monitors.changes)
            .owned(&caches.http_routes.changes)
            .with(&caches.roles, hash_only, rbac_targets)
            .with(&caches.role_bindings, hash_only, rbac_targets)
            .secrets(reads_secret)
            .with(caches.config_maps.metadata(), every_change, config_map_targets)
    }

    steps!(reconcile: reconcile::reconcile, settle: reconcile::settle, cleanup: reconcile::cleanup);
}

/// Whether the control plane reads the Secret `name` (database, licence, envFrom, extraEnv, operator token).
fn reads_secret(cp: &CoderControlPlane, name: &str) -> bool {
    let spec = &cp.spec;
    let token = desired::ControlPlaneId::of(cp).map(|id| {
        spec.operator_access
            .generated_token_secret_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| id.default_operator_token_secret())
    });
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
        || token.as_deref() == Some(name)
}

fn reads_config_map(cp: &CoderControlPlane, name: &str) -> bool {
    cp.spec
        .env_from
        .iter()
        .any(|e| e.config_map_ref.as_ref().is_some_and(|r| r.name == name))
}

fn config_map_targets(
    store: &Store<CoderControlPlane>,
    map: &PartialObjectMeta<ConfigMap>,
) -> Vec<ObjectRef<CoderControlPlane>> {
    readers(store, map, reads_config_map)
}

/// Workspace RBAC may live in other namespaces (no owner reference there): found by the owner-UID annotation.
fn rbac_targets<C: Resource<DynamicType = ()>>(
    store: &Store<CoderControlPlane>,
    object: &Slim<C>,
) -> Vec<ObjectRef<CoderControlPlane>> {
    let Some(uid) = object.claimed_by() else {
        return owner(store, object);
    };
    store
        .find(|cp| cp.metadata.uid.as_deref() == Some(uid))
        .map(|cp| ObjectRef::from_obj(cp.as_ref()))
        .into_iter()
        .collect()
}
