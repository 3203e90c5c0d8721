//! CoderWorkspaceProxy (docs/controllers/workspace-proxy.md), wired: `inputs` (the consent of the Secrets, the
//! generated token Secret, the bootstrap credential, its memory) → `desired` (names, URLs, the Deployment and
//! Service, the registration plan; pure) → `status` (the conditions, pure) → `reconcile` (the pass and its status
//! write) with `coder` (the registration). A workspace proxy has no finalizer.

pub mod coder;
pub mod desired;
pub mod inputs;
pub mod reconcile;
pub mod status;

use std::sync::Arc;

use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;

use crate::cache::Informer;
use crate::credentials;
use crate::k8s::Caches;
use crate::kind::Kind;
use crate::runner::{Controller, steps};
use crate::triggers::TriggerSet;

impl Kind for CoderWorkspaceProxy {
    const KIND: &'static str = "CoderWorkspaceProxy";
    const FINALIZER: Option<&'static str> = None;
    type Memory = inputs::Memory;

    fn cache(caches: &Caches) -> &Arc<Informer<Self>> {
        &caches.workspace_proxies
    }
}

impl Controller for CoderWorkspaceProxy {
    type Outcome = status::Outcome;

    fn triggers(triggers: TriggerSet<Self>, caches: &Caches) -> TriggerSet<Self> {
        triggers
            .deployments()
            .owned(&caches.services)
            .owned(&caches.service_accounts)
            .owned(&caches.pod_disruption_budgets)
            .secrets(reads_secret)
    }

    steps!(reconcile: reconcile::reconcile, settle: reconcile::settle);
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
        || credentials::pod_secret_refs(&spec.extra_env, spec.workload.get(), spec.pod.get())
            .iter()
            .any(|s| s == name)
}
