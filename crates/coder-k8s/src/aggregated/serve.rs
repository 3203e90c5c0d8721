//! Starts the aggregated API server of this process: binds its address, runs the start-up checks (delegated
//! authentication, serving certificate) and serves until shutdown. Any start-up failure stops the process with
//! the documented message.

use std::sync::Arc;

use anyhow::Context as _;
use coder_k8s_aggregated_apiserver::coder::user_records::{KubeUserStore, UserStore};
use coder_k8s_aggregated_apiserver::coder::workspace_secrets::{KubeParameterSecrets, ParameterSecrets};
use coder_k8s_aggregated_apiserver::coder::world_watch::{self, WorldWatchSettings};
use coder_k8s_aggregated_apiserver::coder::{Provider, registry_with};
use coder_k8s_aggregated_apiserver::generic::metrics::RequestMetrics;
use coder_k8s_aggregated_apiserver::generic::server::ServerSettings;
use coder_k8s_aggregated_apiserver::run::{Options, prepare};
use coder_k8s_aggregated_apiserver::serving::ServingSettings;
use tokio::sync::watch;

use crate::admin;

/// Serves the aggregated API for `provider` on `bind_address` until `shutdown` turns true. `client` is the
/// Kubernetes client callers are checked with (TokenReview, SubjectAccessReview) and the serving Secret is kept in.
/// `ready` runs once every start-up check passed and the server is about to serve.
pub async fn run(
    client: kube::Client,
    provider: Arc<dyn Provider>,
    bind_address: &str,
    metrics: RequestMetrics,
    ready: impl FnOnce(),
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listener = admin::bind(bind_address)
        .await
        .with_context(|| format!("listen on --apiserver-bind-address {bind_address}"))?;
    let own_namespace = crate::leader::current_namespace();
    let serving = own_namespace.clone().map(ServingSettings::new);
    if serving.is_none() {
        tracing::warn!(
            "no namespace known (POD_NAMESPACE, ServiceAccount): serving a self-signed localhost certificate"
        );
    }
    let options = Options {
        serving,
        server: ServerSettings {
            metrics,
            ..ServerSettings::default()
        },
    };
    // Workspace parameters from Secrets and user records need the server's own namespace for their records.
    let parameter_secrets = own_namespace.clone().map(|namespace| {
        Arc::new(KubeParameterSecrets::new(client.clone(), namespace)) as Arc<dyn ParameterSecrets>
    });
    let user_store = own_namespace
        .map(|namespace| Arc::new(KubeUserStore::new(client.clone(), namespace)) as Arc<dyn UserStore>);
    // Watches also see changes made in Coder directly, polled at the default interval.
    let mut registry = registry_with(provider.clone(), parameter_secrets, user_store);
    world_watch::attach(&mut registry, provider, WorldWatchSettings::default());
    let prepared = prepare(client, registry, listener, options).await?;
    ready();
    prepared
        .run(crate::app::wait_for(shutdown))
        .await
        .context("serve the aggregated API")
}
