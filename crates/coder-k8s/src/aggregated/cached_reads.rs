//! `all` mode's reads of the control planes and their token Secrets for the aggregated API server: the controllers'
//! watch caches (every replica runs them, leader or not), so a request costs no Kubernetes read. A namespace the
//! controllers do not watch (`--watch-namespace` names another) is read from kube-apiserver, as is everything while
//! the caches have not listed yet. A control plane the controllers cannot decode (reported with a `DecodeFailed`
//! Event) is not in the cache, so it serves nothing.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_aggregated_apiserver::coder::{ApiReads, ControlPlaneReads};
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_controllers::cache::Informer;
use coder_k8s_controllers::context::Context as ControllerContext;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use serde::de::DeserializeOwned;

/// How long a request waits for the control-plane cache's first list before it reads kube-apiserver itself.
const FIRST_LIST_WAIT: Duration = Duration::from_secs(5);

pub struct CachedReads {
    ctx: Arc<ControllerContext>,
    api: ApiReads,
}

impl CachedReads {
    pub fn new(ctx: Arc<ControllerContext>) -> Self {
        let api = ApiReads(ctx.k8s.client.clone());
        Self { ctx, api }
    }

    /// Whether the controllers' caches hold `namespace` (`None`: every namespace).
    fn cached(&self, namespace: Option<&str>) -> bool {
        match self.ctx.settings.watch_namespace.as_deref() {
            None => true,
            Some(watched) => namespace == Some(watched),
        }
    }

    /// Whether `cache` holds its first list, waiting for it a little.
    async fn listed<K>(cache: &Informer<K>) -> bool
    where
        K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        if !cache.is_ready() {
            // `ready` also returns when the watch stopped before its first list: `is_ready` tells which.
            let _ = tokio::time::timeout(FIRST_LIST_WAIT, cache.ready()).await;
        }
        cache.is_ready()
    }
}

#[async_trait]
impl ControlPlaneReads for CachedReads {
    async fn control_planes(&self, namespace: Option<&str>) -> Result<Vec<Arc<CoderControlPlane>>, String> {
        if !self.cached(namespace) || !Self::listed(&self.ctx.k8s.caches.control_planes).await {
            return self.api.control_planes(namespace).await;
        }
        let all = self.ctx.k8s.caches.control_planes.store().state();
        Ok(all
            .into_iter()
            .filter(|cp| namespace.is_none_or(|ns| cp.namespace().as_deref() == Some(ns)))
            .collect())
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Arc<Secret>>, String> {
        if !self.cached(Some(namespace)) || !Self::listed(self.ctx.k8s.caches.secrets.metadata()).await {
            return self.api.secret(namespace, name).await;
        }
        // The value is read once per resourceVersion of the Secret; the metadata cache tells when it changed.
        self.ctx
            .k8s
            .secret(namespace, name)
            .await
            .map_err(|e| e.to_string())
    }
}
