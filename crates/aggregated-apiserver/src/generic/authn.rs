//! Delegated authentication: front-proxy client certificates (identity from the configured request headers),
//! bearer tokens through TokenReview, and client certificates of the cluster client CA.
//!
//! The CAs and header names come from `kube-system/extension-apiserver-authentication`, read at start (an error
//! there stops start-up) and then watched: changes apply to the next handshake and request; a deleted ConfigMap
//! keeps the last settings.

mod config;
mod headers;
mod trust;

use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::http::HeaderMap;
use futures::StreamExt as _;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo as KubeUserInfo};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use rustls::server::danger::ClientCertVerifier;
use sha2::{Digest, Sha256};

use self::config::AuthConfig;
use self::trust::{DynamicClientVerifier, SharedTrust, Trust};
use super::StartupError;
use super::auth::{Authenticator, PeerCertificates, UserInfo};
use super::kube_call::{create_review, kube_message};
use super::status::ApiError;
use super::ttl_cache::TtlCache;

/// Where kube-apiserver publishes the settings extension API servers authenticate with.
pub const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";
pub const AUTHENTICATION_CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

/// How long a TokenReview answer (authenticated or not) is reused.
pub const TOKEN_CACHE_TTL: Duration = Duration::from_secs(10);
const TOKEN_CACHE_CAPACITY: usize = 4096;

/// Authenticates requests the way a Kubernetes extension API server does (see the module documentation).
pub struct DelegatedAuthenticator {
    client: kube::Client,
    trust: SharedTrust,
    /// Keyed by the SHA-256 of the token, so no token is kept in memory beyond its request.
    tokens: TtlCache<[u8; 32], Option<UserInfo>>,
    watch: tokio::task::AbortHandle,
}

impl std::fmt::Debug for DelegatedAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuthenticator").finish_non_exhaustive()
    }
}

impl DelegatedAuthenticator {
    /// Reads the authentication ConfigMap and starts watching it. Fails with `configure delegated authentication:
    /// <reason>`, e.g. `configmaps "extension-apiserver-authentication" is forbidden: ...` when the server may not
    /// read it. A ConfigMap that does not exist is not an error (only bearer tokens work until it appears), as in
    /// Kubernetes' own extension servers.
    pub async fn start(client: kube::Client) -> Result<Arc<Self>, StartupError> {
        Self::start_from(
            client,
            AUTHENTICATION_CONFIGMAP_NAMESPACE,
            AUTHENTICATION_CONFIGMAP_NAME,
        )
        .await
    }

    /// As [`Self::start`], with the settings in another ConfigMap (tests use their own copy to change it freely).
    pub async fn start_from(
        client: kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Self>, StartupError> {
        let source = Source {
            api: Api::namespaced(client.clone(), namespace),
            name: name.to_owned(),
            described: format!("ConfigMap {namespace}/{name}"),
        };
        let found = source
            .api
            .get_opt(name)
            .await
            .map_err(|error| startup_error(&kube_message(&error)))?;
        let config = match &found {
            Some(configmap) => source.parse(configmap).map_err(|reason| startup_error(&reason))?,
            None => {
                tracing::warn!(
                    "{} not found; only bearer tokens authenticate until it exists",
                    source.described
                );
                AuthConfig::default()
            }
        };
        tracing::info!(settings = %config.summary(), "delegated authentication configured");
        let trust = Trust::build(config).map_err(|reason| startup_error(&reason))?;
        let trust: SharedTrust = Arc::new(RwLock::new(Arc::new(trust)));
        let watch = tokio::spawn(watch_configmap(source, Arc::downgrade(&trust))).abort_handle();
        Ok(Arc::new(Self {
            client,
            trust,
            tokens: TtlCache::new(TOKEN_CACHE_TTL, TOKEN_CACHE_CAPACITY),
            watch,
        }))
    }

    /// The TLS client-certificate verifier to serve with: optional certificates, which must chain to the front
    /// proxy CA or the cluster client CA as the watched ConfigMap has them at handshake time.
    pub fn client_cert_verifier(self: &Arc<Self>) -> Arc<dyn ClientCertVerifier> {
        Arc::new(DynamicClientVerifier::new(self.trust.clone()))
    }

    /// (a) A front proxy's certificate: identity from the configured headers only.
    fn front_proxy_identity(
        &self,
        trust: &Trust,
        peer: &PeerCertificates,
        headers: &HeaderMap,
    ) -> Option<UserInfo> {
        let request_header = trust.config.request_header.as_ref()?;
        if !trust.is_request_header_chain(&peer.0) {
            return None;
        }
        let leaf = peer.0.first()?;
        if !request_header.allowed_names.is_empty() {
            let cn = headers::common_name(leaf)?;
            if !request_header.allowed_names.contains(&cn) {
                tracing::debug!(common_name = %cn, "front proxy certificate not in requestheader-allowed-names");
                return None;
            }
        }
        headers::identity_from_headers(request_header, headers)
    }

    /// (b) A bearer token, through TokenReview (cached for [`TOKEN_CACHE_TTL`]).
    async fn token_identity(&self, token: &str) -> Result<Option<UserInfo>, ApiError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(answer) = self.tokens.get(&key, Instant::now()) {
            return Ok(answer);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer = create_review(&api, &review).await.map_err(|message| {
            ApiError::internal(format!(
                "authenticate the bearer token: create tokenreviews.authentication.k8s.io: {message}"
            ))
        })?;
        let user = answer
            .status
            .filter(|status| status.authenticated == Some(true))
            .and_then(|status| status.user)
            .map(user_from_review)
            .filter(|user| !user.name.is_empty());
        self.tokens.insert(key, user.clone(), Instant::now());
        Ok(user)
    }
}

impl Drop for DelegatedAuthenticator {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

#[async_trait]
impl Authenticator for DelegatedAuthenticator {
    async fn authenticate(
        &self,
        peer: Option<&PeerCertificates>,
        headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, ApiError> {
        let trust = trust::current(&self.trust);
        if let Some(user) = peer.and_then(|peer| self.front_proxy_identity(&trust, peer, headers)) {
            return Ok(Some(headers::with_authenticated_group(user)));
        }
        if let Some(token) = headers::bearer_token(headers)
            && let Some(user) = self.token_identity(token).await?
        {
            return Ok(Some(headers::with_authenticated_group(user)));
        }
        let client_cert_user = peer
            .filter(|peer| trust.is_client_ca_chain(&peer.0))
            .and_then(|peer| peer.0.first())
            .and_then(headers::certificate_identity);
        Ok(client_cert_user.map(headers::with_authenticated_group))
    }
}

fn user_from_review(user: KubeUserInfo) -> UserInfo {
    UserInfo {
        name: user.username.unwrap_or_default(),
        uid: user.uid.unwrap_or_default(),
        groups: user.groups.unwrap_or_default(),
        extra: user.extra.unwrap_or_default().into_iter().collect(),
    }
}

/// The ConfigMap the settings come from.
struct Source {
    api: Api<ConfigMap>,
    name: String,
    /// `ConfigMap <namespace>/<name>`, for messages.
    described: String,
}

impl Source {
    fn parse(&self, configmap: &ConfigMap) -> Result<AuthConfig, String> {
        let data = configmap.data.clone().unwrap_or_default();
        AuthConfig::parse(&data.into_iter().collect())
            .map_err(|reason| format!("{}: {reason}", self.described))
    }
}

fn startup_error(reason: &str) -> StartupError {
    StartupError(format!("configure delegated authentication: {reason}"))
}

/// Keeps the shared trust in step with the ConfigMap until the authenticator is dropped.
async fn watch_configmap(source: Source, trust: Weak<RwLock<Arc<Trust>>>) {
    let selector = format!("metadata.name={}", source.name);
    let events =
        watcher::watcher(source.api.clone(), watcher::Config::default().fields(&selector)).default_backoff();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let Some(trust) = trust.upgrade() else { return };
        match event {
            Ok(Event::Apply(configmap) | Event::InitApply(configmap)) => {
                apply_configmap(&source, &trust, &configmap);
            }
            Ok(Event::Delete(_)) => tracing::warn!(
                "{} was deleted; keeping the last authentication settings",
                source.described
            ),
            Ok(Event::Init | Event::InitDone) => {}
            Err(error) => tracing::warn!(%error, "watching {} failed; retrying", source.described),
        }
    }
}

fn apply_configmap(source: &Source, shared: &SharedTrust, configmap: &ConfigMap) {
    let config = match source.parse(configmap) {
        Ok(config) => config,
        Err(reason) => {
            tracing::warn!(%reason, "ignoring an unusable authentication ConfigMap; keeping the last settings");
            return;
        }
    };
    if trust::current(shared).config == config {
        return;
    }
    let summary = config.summary();
    match Trust::build(config) {
        Ok(next) => {
            trust::replace(shared, next);
            tracing::info!(settings = %summary, "delegated authentication settings changed");
        }
        Err(reason) => {
            tracing::warn!(%reason, "ignoring an unusable authentication ConfigMap; keeping the last settings");
        }
    }
}
