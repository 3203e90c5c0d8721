//! CoderControlPlane (docs/controllers/control-plane.md): the pure core — names and labels (`names`), the desired
//! objects (`desired`), the condition decisions (`status`) — and the I/O shell: `reconcile` (objects) and `coder`
//! (operator access, licence, entitlements). `run` wires the controller.

pub mod coder;
pub mod desired;
pub mod names;
pub mod reconcile;
pub mod status;

use std::future::Future;
use std::sync::Arc;

use coder_k8s_api::control_plane::{CoderControlPlane, FINALIZER};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Resource;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::controller::cache::{Fingerprint, every_change, hash_only};
use crate::controller::context::Context;
use crate::controller::runner::{self, Kind, Steps};
use crate::controller::triggers::{self, owner, readers};

impl Kind for CoderControlPlane {
    const KIND: &'static str = "CoderControlPlane";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
}

/// Whether the control plane reads the Secret `name` (database, licence, envFrom, extraEnv, operator token).
fn reads_secret(cp: &CoderControlPlane, name: &str) -> bool {
    let spec = &cp.spec;
    let token = names::ControlPlaneId::of(cp).map(|id| {
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

fn secret_targets(
    store: &Store<CoderControlPlane>,
    secret: &PartialObjectMeta<Secret>,
) -> Vec<ObjectRef<CoderControlPlane>> {
    let mut targets = owner(store, secret);
    targets.extend(readers(store, secret, reads_secret));
    targets
}

fn config_map_targets(
    store: &Store<CoderControlPlane>,
    map: &PartialObjectMeta<ConfigMap>,
) -> Vec<ObjectRef<CoderControlPlane>> {
    readers(store, map, reads_config_map)
}

/// Workspace RBAC may live in other namespaces (no owner reference there): found by the owner-UID annotation.
fn rbac_targets<C: Resource>(
    store: &Store<CoderControlPlane>,
    object: &C,
) -> Vec<ObjectRef<CoderControlPlane>> {
    let Some(uid) = object
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::WORKSPACE_RBAC_OWNER_UID_ANNOTATION))
    else {
        return owner(store, object);
    };
    store
        .find(|cp| cp.metadata.uid.as_ref() == Some(uid))
        .map(|cp| ObjectRef::from_obj(cp.as_ref()))
        .into_iter()
        .collect()
}

/// A Deployment matters for its desired hash and its ready replicas.
pub fn deployment_fingerprint(deployment: &Deployment) -> Fingerprint {
    let ready = deployment
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    Fingerprint {
        other: u64::from(ready.unsigned_abs()),
        ..hash_only(deployment)
    }
}

/// Runs the CoderControlPlane controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let caches = &ctx.caches;
    let store = caches.control_planes.store().clone();
    let echoes = &ctx.echoes;
    let triggers = vec![
        triggers::from(
            &caches.deployments,
            echoes,
            "Deployment",
            deployment_fingerprint,
            store.clone(),
            owner,
        ),
        triggers::owned(&caches.services, echoes, &store),
        triggers::owned(&caches.service_accounts, echoes, &store),
        triggers::owned(&caches.ingresses, echoes, &store),
        triggers::owned(&caches.http_route_changes, echoes, &store),
        triggers::from(
            &caches.roles,
            echoes,
            "Role",
            hash_only,
            store.clone(),
            rbac_targets,
        ),
        triggers::from(
            &caches.role_bindings,
            echoes,
            "RoleBinding",
            hash_only,
            store.clone(),
            rbac_targets,
        ),
        triggers::from(
            caches.secrets.metadata(),
            echoes,
            "Secret",
            every_change,
            store.clone(),
            secret_targets,
        ),
        triggers::from(
            caches.config_maps.metadata(),
            echoes,
            "ConfigMap",
            every_change,
            store,
            config_map_targets,
        ),
    ];

    let steps = Steps {
        apply: |cp, ctx| Box::pin(reconcile::apply_spec(cp, ctx)),
        cleanup: |cp, ctx| Box::pin(reconcile::cleanup(cp, ctx)),
    };
    runner::run(
        ctx.clone(),
        ctx.caches.control_planes.clone(),
        triggers,
        steps,
        shutdown,
    )
    .await;
}
