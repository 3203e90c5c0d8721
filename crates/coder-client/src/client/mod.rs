//! [`CoderClient`] and its [`ClientOptions`]: construction and accessors. The request core lives in
//! `transport`; the typed calls live in one file per Coder resource family.

mod deployment;
mod files;
mod logs;
mod organizations;
mod provisioner_keys;
mod template_versions;
mod templates;
#[cfg(test)]
mod test_support;
mod transport;
mod users;
mod workspace_proxies;
mod workspaces;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderValue;
use url::Url;

use crate::error::Error;
use crate::redirect;
use crate::secret::SessionToken;

pub use logs::LogStream;
pub use transport::{BYPASS_RATELIMIT_HEADER, JsonAnswer, SESSION_TOKEN_HEADER};

/// Result of a Coder call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Default timeout of one call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap of a response body.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Default idle timeout of a followed log stream.
pub const DEFAULT_LOG_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Options of a [`CoderClient`].
#[derive(Clone)]
pub struct ClientOptions {
    /// Timeout of one call (connect + answer + body). Default 30 s.
    pub timeout: Duration,
    /// Largest accepted response body; a larger successful body fails with
    /// [`Error::BodyTooLarge`]. Default 4 MiB. Also the largest websocket message.
    pub max_body_bytes: usize,
    /// Send `X-Coder-Bypass-Ratelimit: true` on mutating calls (retried without it on 428). Default on.
    pub bypass_ratelimit: bool,
    /// Extra trusted root certificates (e.g. an in-cluster CA), added to the platform roots.
    pub extra_root_certificates: Vec<reqwest::Certificate>,
    /// `User-Agent`.
    pub user_agent: String,
    /// A followed log stream fails with [`Error::Unavailable`] (`Timeout`) when neither a message nor
    /// a heartbeat ping arrives for this long. Default 2 min (Coder pings every 15 s). The client
    /// `timeout` applies only to the websocket handshake, not to the stream.
    pub log_idle_timeout: Duration,
    /// Host names resolved to a fixed address instead of DNS (the port always comes from the URL). The operator
    /// uses it when it runs outside the cluster: `*.svc.cluster.local` hosts resolve to a local address, while the
    /// URL, the `Host` header and the same-origin rule stay exactly as in the cluster.
    pub resolve_overrides: Vec<(String, std::net::IpAddr)>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            bypass_ratelimit: true,
            extra_root_certificates: Vec::new(),
            user_agent: concat!("coder-k8s/", env!("CARGO_PKG_VERSION")).to_owned(),
            log_idle_timeout: DEFAULT_LOG_IDLE_TIMEOUT,
            resolve_overrides: Vec::new(),
        }
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("timeout", &self.timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("bypass_ratelimit", &self.bypass_ratelimit)
            .field("extra_root_certificates", &self.extra_root_certificates.len())
            .field("user_agent", &self.user_agent)
            .field("log_idle_timeout", &self.log_idle_timeout)
            .field("resolve_overrides", &self.resolve_overrides)
            .finish()
    }
}

/// The one Coder API client. Cheap to clone.
#[derive(Clone)]
pub struct CoderClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    base: Url,
    token: Option<SessionToken>,
    options: ClientOptions,
}

impl fmt::Debug for CoderClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoderClient")
            .field("origin", &redirect::origin_of(&self.inner.base))
            .field(
                "token",
                &self.inner.token.as_ref().map(|_| crate::secret::REDACTED),
            )
            .field("options", &self.inner.options)
            .finish()
    }
}

/// Installs rustls' ring provider as the process default when none is installed yet (reqwest is built
/// with `rustls-no-provider`; aws-lc-rs is not compiled in).
pub fn install_ring_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

impl CoderClient {
    /// A client for `base` (e.g. `http://coder.ns.svc.cluster.local:80`) sending `token`.
    pub fn new(base: Url, token: SessionToken) -> Result<Self> {
        Self::with_options(base, Some(token), ClientOptions::default())
    }

    /// A client without a token (for `buildinfo` and `entitlements`).
    pub fn anonymous(base: Url) -> Result<Self> {
        Self::with_options(base, None, ClientOptions::default())
    }

    /// A client with explicit options.
    pub fn with_options(base: Url, token: Option<SessionToken>, options: ClientOptions) -> Result<Self> {
        check_base(&base)?;
        check_token(token.as_ref())?;
        install_ring_provider();
        let http = transport::http_client(&options)?;
        let mut base = base;
        base.set_query(None);
        base.set_fragment(None);
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                base,
                token,
                options,
            }),
        })
    }

    /// The Coder URL.
    pub fn base_url(&self) -> &Url {
        &self.inner.base
    }

    /// The options.
    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }
}

/// The Coder URL must be an absolute http(s) URL that can carry a path.
fn check_base(base: &Url) -> Result<()> {
    if !matches!(base.scheme(), "http" | "https") || base.host().is_none() {
        return Err(Error::invalid(
            "the coder URL must be an absolute http or https URL",
        ));
    }
    if base.cannot_be_a_base() {
        return Err(Error::invalid("the coder URL cannot be a base URL"));
    }
    Ok(())
}

/// The token must be sendable as a header value.
fn check_token(token: Option<&SessionToken>) -> Result<()> {
    match token {
        Some(t) if HeaderValue::from_str(t.expose()).is_err() => Err(Error::invalid(
            "the session token contains characters not allowed in a header",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    //! Construction: URL checks and a `Debug` that hides the token.

    use super::test_support::TOKEN;
    use super::*;

    #[test]
    fn debug_of_the_client_hides_the_token() {
        let c = CoderClient::new(
            Url::parse("http://coder.example").unwrap(),
            SessionToken::new(TOKEN),
        )
        .unwrap();
        let d = format!("{c:?}");
        assert!(!d.contains(TOKEN) && !d.contains("0123456789abcdefghijkl"), "{d}");
    }

    #[test]
    fn rejects_non_http_urls() {
        assert!(CoderClient::anonymous(Url::parse("ftp://x").unwrap()).is_err());
        assert!(CoderClient::anonymous(Url::parse("mailto:a@b").unwrap()).is_err());
    }
}
