//! One Coder client per control plane, reused across reconciles and requests (its connection pool with it), and
//! the last entitlements read per control plane, so callers that share a control plane share one check.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use coder_k8s_coder_client::types::Entitlements;
use coder_k8s_coder_client::{ClientOptions, CoderClient, SessionToken};
use sha2::{Digest, Sha256};

/// How clients are built.
#[derive(Clone, Debug)]
pub struct ClientSettings {
    /// Timeout of one Coder call.
    pub timeout: Duration,
    /// When set, Service hosts (`*.svc.cluster.local`) resolve to this address: the caller runs outside the
    /// cluster. URLs, `Host` headers and the same-origin rule do not change.
    pub service_address_override: Option<IpAddr>,
}

impl ClientSettings {
    /// A new client for `url` with `token` (not cached).
    pub fn build(&self, url: &url::Url, token: &str) -> Result<CoderClient, coder_k8s_coder_client::Error> {
        let mut options = ClientOptions {
            timeout: self.timeout,
            ..ClientOptions::default()
        };
        if let (Some(address), Some(host)) = (self.service_address_override, url.host_str())
            && host.ends_with(".svc.cluster.local")
        {
            options.resolve_overrides.push((host.to_owned(), address));
        }
        CoderClient::with_options(url.clone(), Some(SessionToken::new(token)), options)
    }
}

struct Cached {
    url: String,
    /// SHA-256 of the token: the token itself is kept only inside the client.
    token_digest: [u8; 32],
    client: CoderClient,
}

/// Clients keyed by control-plane UID; a changed URL or token builds a new one.
pub struct ClientCache {
    settings: ClientSettings,
    clients: Mutex<HashMap<String, Cached>>,
}

impl ClientCache {
    pub fn new(settings: ClientSettings) -> Self {
        Self {
            settings,
            clients: Mutex::default(),
        }
    }

    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// The client of control plane `uid` for `url` and `token`, built only when none matches.
    pub fn client(
        &self,
        uid: &str,
        url: &str,
        token: &str,
    ) -> Result<CoderClient, coder_k8s_coder_client::Error> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cached) = clients.get(uid)
            && cached.url == url
            && cached.token_digest == digest
        {
            return Ok(cached.client.clone());
        }
        let parsed = url::Url::parse(url).map_err(|_| coder_k8s_coder_client::Error::Invalid {
            message: "the control plane URL is not a URL".to_owned(),
        })?;
        let client = self.settings.build(&parsed, token)?;
        clients.insert(
            uid.to_owned(),
            Cached {
                url: url.to_owned(),
                token_digest: digest,
                client: client.clone(),
            },
        );
        Ok(client)
    }

    /// Drops the client of a control plane that is gone.
    pub fn forget(&self, uid: &str) {
        self.clients.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }

    /// How many clients are cached.
    pub fn len(&self) -> usize {
        self.clients.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The last entitlements read per control plane, with the time of the read.
#[derive(Default)]
pub struct EntitlementMemo {
    reads: Mutex<HashMap<String, (Instant, Entitlements)>>,
}

impl EntitlementMemo {
    /// The entitlements of control plane `uid` read less than `max_age` ago.
    pub fn fresh(&self, uid: &str, max_age: Duration) -> Option<Entitlements> {
        let reads = self.reads.lock().unwrap_or_else(|p| p.into_inner());
        let (at, entitlements) = reads.get(uid)?;
        (at.elapsed() < max_age).then(|| entitlements.clone())
    }

    pub fn record(&self, uid: &str, entitlements: Entitlements) {
        self.reads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid.to_owned(), (Instant::now(), entitlements));
    }

    pub fn forget(&self, uid: &str) {
        self.reads.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> ClientCache {
        ClientCache::new(ClientSettings {
            timeout: Duration::from_secs(1),
            service_address_override: None,
        })
    }

    #[test]
    fn a_client_is_reused_until_url_or_token_changes() {
        coder_k8s_coder_client::install_ring_provider();
        let cache = cache();
        let a = cache
            .client("uid", "http://coder.team.svc.cluster.local:80", "t1")
            .unwrap();
        let b = cache
            .client("uid", "http://coder.team.svc.cluster.local:80", "t1")
            .unwrap();
        assert!(
            std::ptr::eq(a.base_url(), b.base_url()),
            "the same client is handed out again"
        );
        let c = cache
            .client("uid", "http://coder.team.svc.cluster.local:80", "t2")
            .unwrap();
        assert!(
            !std::ptr::eq(a.base_url(), c.base_url()),
            "a new token builds a new client"
        );
        let d = cache
            .client("uid", "http://other.team.svc.cluster.local:80", "t2")
            .unwrap();
        assert_eq!(d.base_url().host_str(), Some("other.team.svc.cluster.local"));
        assert_eq!(cache.len(), 1);
        cache.forget("uid");
        assert!(cache.is_empty());
    }

    #[test]
    fn entitlements_expire() {
        let memo = EntitlementMemo::default();
        memo.record("uid", Entitlements::default());
        assert!(memo.fresh("uid", Duration::from_secs(60)).is_some());
        assert!(memo.fresh("uid", Duration::ZERO).is_none());
        assert!(memo.fresh("other", Duration::from_secs(60)).is_none());
        memo.forget("uid");
        assert!(memo.fresh("uid", Duration::from_secs(60)).is_none());
    }
}
