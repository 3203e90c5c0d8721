//! Same-origin redirect rule: a redirect is followed only to the same scheme, host and port as the Coder URL.
//!
//! reqwest strips only `Authorization`, `Cookie`, `Proxy-Authorization` and `WWW-Authenticate` on a
//! cross-host redirect, so `Coder-Session-Token` would be forwarded to any origin. This module decides
//! instead: a redirect is followed only when its target has the same scheme, host and port (default
//! ports filled in) as the URL originally called; anything else fails the call with
//! [`crate::Error::RedirectRefused`] and the log line [`REFUSAL_LOG`]. The target URL (and in particular
//! its query) is never logged.

use std::fmt;

use url::Url;

/// The exact warning logged when a redirect to another origin is refused.
pub const REFUSAL_LOG: &str = "refusing redirect to a different origin than the coder URL";
/// At most this many redirects are followed in one call.
pub const MAX_REDIRECTS: usize = 10;

/// What to do with one redirect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectDecision {
    /// Same origin: follow it.
    Follow,
    /// Another origin: fail the call.
    RefuseCrossOrigin,
    /// More than [`MAX_REDIRECTS`] hops: fail the call.
    RefuseTooMany,
}

/// `true` when both URLs are http(s) and have the same scheme, host and port (default ports filled in).
pub fn same_origin(a: &Url, b: &Url) -> bool {
    let web = |u: &Url| matches!(u.scheme(), "http" | "https");
    web(a)
        && web(b)
        && a.scheme() == b.scheme()
        && a.host() == b.host()
        && a.host().is_some()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// Decides about a redirect from `original` (the URL the client called) to `next`, after `hops`
/// redirects already followed in this call. Pure.
pub fn decide(original: &Url, next: &Url, hops: usize) -> RedirectDecision {
    if !same_origin(original, next) {
        RedirectDecision::RefuseCrossOrigin
    } else if hops >= MAX_REDIRECTS {
        RedirectDecision::RefuseTooMany
    } else {
        RedirectDecision::Follow
    }
}

/// The origin (`scheme://host:port`) of a URL, safe to log: no path, no query, no credentials.
pub fn origin_of(url: &Url) -> String {
    match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => format!("{}://{}:{}", url.scheme(), host, port),
        (Some(host), None) => format!("{}://{}", url.scheme(), host),
        _ => format!("{}:", url.scheme()),
    }
}

/// The error reqwest carries when the policy refuses a redirect; mapped to
/// [`crate::Error::RedirectRefused`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectRefusal {
    pub(crate) decision: RedirectDecision,
    pub(crate) target_origin: String,
}

impl fmt::Display for RedirectRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.decision {
            RedirectDecision::RefuseTooMany => write!(f, "more than {MAX_REDIRECTS} redirects"),
            _ => write!(f, "{REFUSAL_LOG} (target origin {})", self.target_origin),
        }
    }
}

impl std::error::Error for RedirectRefusal {}

/// The reqwest policy applying [`decide`] against the first URL of the call.
pub fn policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let Some(original) = attempt.previous().first().cloned() else {
            return attempt.stop();
        };
        let hops = attempt.previous().len().saturating_sub(1);
        match decide(&original, attempt.url(), hops) {
            RedirectDecision::Follow => attempt.follow(),
            decision => {
                let target_origin = origin_of(attempt.url());
                if decision == RedirectDecision::RefuseCrossOrigin {
                    tracing::warn!(
                        coder_origin = %origin_of(&original),
                        target_origin = %target_origin,
                        "{}",
                        REFUSAL_LOG
                    );
                }
                attempt.error(RedirectRefusal {
                    decision,
                    target_origin,
                })
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn same_origin_needs_scheme_host_and_port() {
        assert!(same_origin(
            &u("http://coder.ns.svc:80/a"),
            &u("http://coder.ns.svc/b?x=1")
        ));
        assert!(same_origin(
            &u("https://c.example/a"),
            &u("https://C.EXAMPLE:443/z")
        ));
        assert!(!same_origin(&u("http://c.example/a"), &u("https://c.example/a")));
        assert!(!same_origin(&u("http://c.example/a"), &u("http://d.example/a")));
        assert!(!same_origin(
            &u("http://c.example:8080/a"),
            &u("http://c.example:8081/a")
        ));
        assert!(!same_origin(
            &u("http://c.example:8080/a"),
            &u("http://c.example/a")
        ));
        assert!(!same_origin(
            &u("http://127.0.0.1:80/"),
            &u("http://localhost:80/")
        ));
        assert!(!same_origin(
            &u("http://c.example/"),
            &u("http://c.example.evil/")
        ));
        assert!(!same_origin(&u("file:///a"), &u("file:///a")));
    }

    #[test]
    fn decide_follows_same_origin_only() {
        let called = u("http://coder.coder.svc.cluster.local:8080/api/v2/entitlements");
        assert_eq!(
            decide(
                &called,
                &u("http://coder.coder.svc.cluster.local:8080/api/v2/x"),
                0
            ),
            RedirectDecision::Follow
        );
        assert_eq!(
            decide(&called, &u("https://coder.example.com/api/v2/entitlements"), 0),
            RedirectDecision::RefuseCrossOrigin
        );
        assert_eq!(
            decide(
                &called,
                &u("http://coder.coder.svc.cluster.local:8080/x"),
                MAX_REDIRECTS
            ),
            RedirectDecision::RefuseTooMany
        );
    }

    #[test]
    fn origin_of_has_no_path_query_or_credentials() {
        let o = origin_of(&u("https://user:pw@host.example/p/a?token=abc#f"));
        assert_eq!(o, "https://host.example:443");
    }

    #[test]
    fn refusal_display_has_no_query() {
        let r = RedirectRefusal {
            decision: RedirectDecision::RefuseCrossOrigin,
            target_origin: origin_of(&u("http://evil.example/x?secret=1")),
        };
        let s = r.to_string();
        assert!(s.contains(REFUSAL_LOG));
        assert!(!s.contains("secret"));
    }
}
