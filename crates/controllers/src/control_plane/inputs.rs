//! What a CoderControlPlane pass reads (docs/controllers/control-plane.md): the database Secret
//! (`DatabaseSecretResolved` and the PostgreSQL URL for operator access), the ConfigMaps and Secrets of `envFrom`
//! (whether they define `CODER_ACCESS_URL`), the opt-in labels of the workspace namespaces under
//! `--restrict-workspace-rbac`, and what earlier passes remember. Everything is read from the watch caches; the only
//! reads sent are for Secret and ConfigMap values that changed since they were last read.

use std::time::SystemTime;

use coder_k8s_api::control_plane::{
    CoderControlPlane, CoderControlPlaneSpec, PG_CONNECTION_URL_ENV, conditions,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;

use super::desired::{self, ACCESS_URL_ENV, ControlPlaneId};
use super::status::check_database_secret;
use super::workspace_rbac;
use crate::conditions::remove_condition;
use crate::error::Result;
use crate::pass::Pass;
use crate::secrets;

type ControlPlanePass<'p> = Pass<'p, CoderControlPlane>;

/// What a pass remembers of a control plane for the next ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// The token Secret version (and database URL digest) whose token `GET /api/v2/users/me` accepted, for a user
    /// that kept what the bootstrap grants, and when.
    pub verified_token: Option<(String, SystemTime)>,
    /// The licence hash Coder was seen to hold since the operator started.
    pub confirmed_license: Option<String>,
}

/// `DatabaseSecretResolved` and the PostgreSQL URL for operator access (from `spec.database`, else from
/// `spec.extraEnv`).
pub async fn database_url(pass: &mut ControlPlanePass<'_>, id: &ControlPlaneId) -> Result<Option<String>> {
    let spec = &pass.object.spec;
    let Some(database) = &spec.database else {
        remove_condition(&mut pass.status.conditions, conditions::DATABASE_SECRET_RESOLVED);
        return extra_env_database_url(pass, &id.namespace).await;
    };
    let reference = &database.connection_secret_ref;
    let secret = pass.ctx.k8s.secret(&id.namespace, &reference.name).await?;
    let check = check_database_secret(
        reference,
        secret.as_ref().and_then(|s| s.data.as_ref()),
        desired::database_conflict(spec),
    );
    // An unresolved database Secret needs no retry: its creation or change reconciles the control plane.
    pass.set(check.condition);
    Ok(check.url)
}

/// `CODER_PG_CONNECTION_URL` from `spec.extraEnv` when `spec.database` is unset: exactly one entry, a literal value or
/// a `secretKeyRef`. `envFrom` is never consulted.
async fn extra_env_database_url(pass: &ControlPlanePass<'_>, namespace: &str) -> Result<Option<String>> {
    let mut entries = pass
        .object
        .spec
        .extra_env
        .iter()
        .filter(|e| e.name == PG_CONNECTION_URL_ENV);
    let (Some(entry), None) = (entries.next(), entries.next()) else {
        return Ok(None);
    };
    if let Some(value) = entry.value.as_ref().filter(|v| !v.is_empty()) {
        return Ok(Some(value.clone()));
    }
    let Some(reference) = entry.value_from.as_ref().and_then(|v| v.secret_key_ref.as_ref()) else {
        return Ok(None);
    };
    let secret = pass.ctx.k8s.secret(namespace, &reference.name).await?;
    Ok(secrets::value(secret.as_deref(), &reference.key))
}

/// Whether a ConfigMap or Secret in `spec.envFrom` defines `CODER_ACCESS_URL` (with its prefix).
pub async fn env_from_defines_access_url(pass: &ControlPlanePass<'_>, namespace: &str) -> Result<bool> {
    let spec: &CoderControlPlaneSpec = &pass.object.spec;
    if !spec.env_use_cluster_access_url.unwrap_or(true) {
        return Ok(false);
    }
    let k8s = &pass.ctx.k8s;
    for source in &spec.env_from {
        let prefix = source.prefix.clone().unwrap_or_default();
        let Some(key) = ACCESS_URL_ENV.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let defines = if let Some(reference) = &source.config_map_ref {
            let map = k8s.config_map(namespace, &reference.name).await?;
            map.is_some_and(|c| c.data.as_ref().is_some_and(|d| d.contains_key(key)))
        } else if let Some(reference) = &source.secret_ref {
            let secret = k8s.secret(namespace, &reference.name).await?;
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

/// `--restrict-workspace-rbac`: whether the spec's workspace RBAC passes the hardening rules (sets
/// `WorkspaceRBACAllowed`; without the flag the condition is absent and everything passes, as in v0.1.5). The
/// workspace namespaces' opt-in labels are read only when every rule passed.
pub async fn workspace_rbac_allowed(pass: &mut ControlPlanePass<'_>, id: &ControlPlaneId) -> Result<bool> {
    if !pass.ctx.settings.restrict_workspace_rbac {
        remove_condition(&mut pass.status.conditions, conditions::WORKSPACE_RBAC_ALLOWED);
        return Ok(true);
    }
    let rbac = &pass.object.spec.rbac;
    let mut opted_in = Vec::new();
    if workspace_rbac::refusal(rbac, &id.namespace, |_| true).is_none() {
        let namespaces: Api<Namespace> = Api::all(pass.ctx.k8s.client.clone());
        for name in workspace_rbac::namespaces_to_check(rbac, &id.namespace) {
            let namespace = namespaces.get_metadata_opt(name).await?;
            if workspace_rbac::labels_opt_in(namespace.and_then(|n| n.metadata.labels).as_ref()) {
                opted_in.push(name);
            }
        }
    }
    let refusal = workspace_rbac::refusal(rbac, &id.namespace, |ns| opted_in.contains(&ns));
    pass.set(workspace_rbac::condition(refusal.as_ref()));
    if refusal.is_some() {
        pass.soon(pass.retry());
    }
    Ok(refusal.is_none())
}
