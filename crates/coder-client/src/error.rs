//! Typed errors of the Coder client and the pure mapping from an HTTP answer to an [`Error`].
//!
//! Mapping rules ([`error_from_response`]):
//! * 401 → [`Error::Unauthorized`], 403 → [`Error::Forbidden`], 409 → [`Error::Conflict`].
//! * 404 → [`Error::NotFound`] **only** when the answer is Coder's own: a JSON body with a `message`, the
//!   `X-Coder-Build-Version` header, and a message other than `Route not found.`. Coder's
//!   `Route not found.` (with the header) → [`Error::Unavailable`] with
//!   [`UnavailableReason::RouteNotFound`] (the route does not exist in this Coder version: callers such
//!   as the entitlements check read it as "not supported", see [`Error::is_route_not_found`]). Any
//!   other 404 (HTML page of a proxy, missing header, non-JSON) → [`Error::Unavailable`] with
//!   [`UnavailableReason::NotCoder404`]. Both are retryable.
//! * 429 → [`Error::RateLimited`] with `Retry-After` (seconds or an HTTP date) when present, capped at
//!   [`MAX_RETRY_AFTER`] (see [`retry_after_from`]).
//! * 5xx → [`Error::Unavailable`] ([`UnavailableReason::ServerError`]).
//! * Other statuses (other 4xx, unexpected 1xx/3xx) → [`Error::Rejected`].
//!
//! Messages carry Coder's `message` and `detail` text, never headers or the token: every text taken
//! from a response is scrubbed of the session token and of anything that looks like a credential, and cut
//! short, before it is stored ([`crate::redact`]), because these texts end up in conditions and Events.

use std::time::{Duration, SystemTime};

use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde::Deserialize;

use crate::redact::sanitize;

/// Header Coder sets on every response.
pub const BUILD_VERSION_HEADER: &str = "X-Coder-Build-Version";
/// The message of Coder's 404 for an unknown route under `/api/v2`.
pub const ROUTE_NOT_FOUND_MESSAGE: &str = "Route not found.";
/// The longest wait a `Retry-After` can ask for; a larger (or hostile) value is cut to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// Why Coder is considered unavailable. Every reason is retryable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnavailableReason {
    /// The call did not finish within the client's timeout.
    Timeout,
    /// No connection could be opened.
    Connect,
    /// The connection was closed before a complete answer arrived.
    ConnectionDropped,
    /// A 5xx answer.
    ServerError,
    /// A 404 that is not Coder's own (proxy page, missing `X-Coder-Build-Version`, non-JSON).
    NotCoder404,
    /// Coder's `Route not found.`: the route does not exist in this Coder version.
    RouteNotFound,
    /// Any other transport failure.
    Transport,
}

impl UnavailableReason {
    /// A short stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Connect => "connect",
            Self::ConnectionDropped => "connection_dropped",
            Self::ServerError => "server_error",
            Self::NotCoder404 => "not_coder_404",
            Self::RouteNotFound => "route_not_found",
            Self::Transport => "transport",
        }
    }
}

impl std::fmt::Display for UnavailableReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error of a Coder API call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// Coder's own 404: the object does not exist (or is not visible to the caller).
    #[error("not found (404): {message}")]
    NotFound {
        /// Coder's `message` (and `detail`).
        message: String,
    },
    /// 401: the token is missing, invalid or expired.
    #[error("unauthorized (401): {message}")]
    Unauthorized {
        /// Coder's `message` (and `detail`).
        message: String,
    },
    /// 403: not allowed, or a Premium feature gate.
    #[error("forbidden (403): {message}")]
    Forbidden {
        /// Coder's `message` (and `detail`).
        message: String,
    },
    /// 409: the object already exists or an operation is in progress.
    #[error("conflict (409): {message}")]
    Conflict {
        /// Coder's `message` (and `detail`).
        message: String,
    },
    /// 429: rate limited.
    #[error("rate limited (429){}: {message}", retry_after_text(.retry_after))]
    RateLimited {
        /// The `Retry-After` header, when it held a number of seconds.
        retry_after: Option<Duration>,
        /// Coder's `message`.
        message: String,
    },
    /// Coder could not be reached or did not answer usefully; retry later.
    #[error("coder unavailable ({reason}{}): {message}", status_text(.status))]
    Unavailable {
        /// Why.
        reason: UnavailableReason,
        /// The HTTP status when there was one.
        status: Option<u16>,
        /// What happened (Coder's `message` for HTTP answers).
        message: String,
    },
    /// Any other non-success status (other 4xx; unexpected 1xx/3xx).
    #[error("rejected ({status}): {message}")]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// Coder's `message` (and `detail`), or the start of a non-JSON body.
        message: String,
    },
    /// A redirect to another origin (scheme, host, port) than the Coder URL was refused, or there were
    /// too many redirects.
    #[error("refused redirect: {message}")]
    RedirectRefused {
        /// What was refused (never the target's query).
        message: String,
    },
    /// The response body exceeded the client's size cap.
    #[error("response body larger than the limit of {limit} bytes")]
    BodyTooLarge {
        /// The cap in bytes.
        limit: usize,
    },
    /// A successful answer could not be decoded.
    #[error("could not decode the coder response: {message}")]
    Decode {
        /// The decoder's error.
        message: String,
    },
    /// The client was configured or called wrongly (bad URL, bad header value, websocket handshake).
    #[error("invalid request: {message}")]
    Invalid {
        /// What is wrong.
        message: String,
    },
}

fn retry_after_text(retry_after: &Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!(", retry after {}s", d.as_secs()),
        None => String::new(),
    }
}

fn status_text(status: &Option<u16>) -> String {
    match status {
        Some(s) => format!(", status {s}"),
        None => String::new(),
    }
}

impl Error {
    /// A short stable name for metrics, conditions and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "not_found",
            Self::Unauthorized { .. } => "unauthorized",
            Self::Forbidden { .. } => "forbidden",
            Self::Conflict { .. } => "conflict",
            Self::RateLimited { .. } => "rate_limited",
            Self::Unavailable { .. } => "unavailable",
            Self::Rejected { .. } => "rejected",
            Self::RedirectRefused { .. } => "redirect_refused",
            Self::BodyTooLarge { .. } => "body_too_large",
            Self::Decode { .. } => "decode",
            Self::Invalid { .. } => "invalid",
        }
    }

    /// Whether retrying the same call later can succeed: rate limits and unavailability.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::RateLimited { .. } | Self::Unavailable { .. })
    }

    /// `true` only for Coder's own 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// `true` for Coder's `Route not found.`: this Coder version lacks the route ("not supported").
    pub fn is_route_not_found(&self) -> bool {
        matches!(
            self,
            Self::Unavailable {
                reason: UnavailableReason::RouteNotFound,
                ..
            }
        )
    }

    /// The HTTP status of the answer, when the error came from one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::NotFound { .. } => Some(404),
            Self::Unauthorized { .. } => Some(401),
            Self::Forbidden { .. } => Some(403),
            Self::Conflict { .. } => Some(409),
            Self::RateLimited { .. } => Some(429),
            Self::Unavailable { status, .. } => *status,
            Self::Rejected { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The `Retry-After` of a rate limit.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The text of the error (Coder's message for HTTP answers).
    pub fn message(&self) -> &str {
        match self {
            Self::NotFound { message }
            | Self::Unauthorized { message }
            | Self::Forbidden { message }
            | Self::Conflict { message }
            | Self::RateLimited { message, .. }
            | Self::Unavailable { message, .. }
            | Self::Rejected { message, .. }
            | Self::RedirectRefused { message }
            | Self::Decode { message }
            | Self::Invalid { message } => message,
            Self::BodyTooLarge { .. } => "",
        }
    }

    // The constructors below take text from transports and decoders, which may quote a URL or a value: it is
    // sanitized like an answer's text.
    pub(crate) fn unavailable(reason: UnavailableReason, message: impl Into<String>) -> Self {
        Self::Unavailable {
            reason,
            status: None,
            message: sanitize(&message.into(), &[]),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid {
            message: sanitize(&message.into(), &[]),
        }
    }

    pub(crate) fn decode(message: impl Into<String>) -> Self {
        Self::Decode {
            message: sanitize(&message.into(), &[]),
        }
    }
}

/// Turns Coder's own 404 into `Ok(None)`; every other error stays an error. For "get or create" and
/// "delete, absent is fine" logic.
pub fn found<T>(result: Result<T, Error>) -> Result<Option<T>, Error> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Coder's error body (`codersdk.Response`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CoderResponse {
    /// Human-readable summary.
    pub message: String,
    /// More detail (often the Go error text).
    #[serde(default)]
    pub detail: String,
    /// Field validation errors.
    #[serde(default)]
    pub validations: Vec<ValidationError>,
}

/// One field validation error.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ValidationError {
    /// The field.
    #[serde(default)]
    pub field: String,
    /// What is wrong with it.
    #[serde(default)]
    pub detail: String,
}

fn parse_coder_body(headers: &HeaderMap, body: &[u8]) -> Option<CoderResponse> {
    if let Some(ct) = headers.get(CONTENT_TYPE) {
        let ct = ct.to_str().unwrap_or_default().to_ascii_lowercase();
        if !ct.contains("json") {
            return None;
        }
    }
    serde_json::from_slice::<CoderResponse>(body).ok()
}

fn describe(parsed: Option<&CoderResponse>, body: &[u8], sensitive: &[&str]) -> String {
    let text = match parsed {
        Some(r) => {
            let mut text = r.message.clone();
            if !r.detail.is_empty() {
                text.push_str(": ");
                text.push_str(&r.detail);
            }
            for v in &r.validations {
                text.push_str(&format!(" [{}: {}]", v.field, v.detail));
            }
            text
        }
        None => {
            let raw = String::from_utf8_lossy(body);
            if raw.trim_start().starts_with('<') {
                "non-JSON (HTML) answer".to_owned()
            } else if raw.trim().is_empty() {
                "empty answer".to_owned()
            } else {
                raw.into_owned()
            }
        }
    };
    sanitize(&text, sensitive)
}

/// The `Retry-After` of an answer received now; see [`retry_after_from`].
pub fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_from(headers.get(RETRY_AFTER)?.to_str().ok()?, SystemTime::now())
}

/// Reads a `Retry-After` value received at `now`: a number of seconds or an HTTP date, never more than
/// [`MAX_RETRY_AFTER`]. A date in the past means "now" (zero). Anything else (negative or fractional numbers,
/// garbage) is `None`, as if the header were absent. Pure, and no value can overflow: a number too large for
/// `u64` is simply "very long" and capped.
pub fn retry_after_from(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        let seconds = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or_default().min(MAX_RETRY_AFTER))
}

/// Maps a non-success answer to an [`Error`]. Pure: no I/O.
///
/// `sensitive` lists strings (the token, its secret part) that are removed from any text kept.
pub fn error_from_response(status: u16, headers: &HeaderMap, body: &[u8], sensitive: &[&str]) -> Error {
    let parsed = parse_coder_body(headers, body);
    let message = describe(parsed.as_ref(), body, sensitive);
    match status {
        401 => Error::Unauthorized { message },
        403 => Error::Forbidden { message },
        404 => {
            let from_coder = headers.contains_key(BUILD_VERSION_HEADER);
            match parsed {
                Some(r) if from_coder && r.message.trim() == ROUTE_NOT_FOUND_MESSAGE => Error::Unavailable {
                    reason: UnavailableReason::RouteNotFound,
                    status: Some(404),
                    message,
                },
                Some(r) if from_coder && !r.message.is_empty() => Error::NotFound { message },
                _ => Error::Unavailable {
                    reason: UnavailableReason::NotCoder404,
                    status: Some(404),
                    message,
                },
            }
        }
        409 => Error::Conflict { message },
        429 => Error::RateLimited {
            retry_after: parse_retry_after(headers),
            message,
        },
        500..=599 => Error::Unavailable {
            reason: UnavailableReason::ServerError,
            status: Some(status),
            message,
        },
        _ => Error::Rejected { status, message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn coder_headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(BUILD_VERSION_HEADER, HeaderValue::from_static("v2.30.0"));
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        h
    }

    const NOT_FOUND_BODY: &[u8] =
        br#"{"message":"Resource not found or you do not have access to this resource"}"#;

    #[test]
    fn coder_404_is_not_found() {
        let e = error_from_response(404, &coder_headers(), NOT_FOUND_BODY, &[]);
        assert!(e.is_not_found(), "{e:?}");
        assert_eq!(e.category(), "not_found");
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("Resource not found"));
    }

    #[test]
    fn route_not_found_is_unavailable_route_not_found() {
        let e = error_from_response(404, &coder_headers(), br#"{"message":"Route not found."}"#, &[]);
        assert!(!e.is_not_found());
        assert!(e.is_route_not_found());
        assert!(e.is_retryable());
        assert_eq!(e.category(), "unavailable");
    }

    #[test]
    fn html_404_of_a_proxy_is_unavailable() {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
        let e = error_from_response(404, &h, b"<html><body>404 Not Found</body></html>", &[]);
        assert!(matches!(
            e,
            Error::Unavailable {
                reason: UnavailableReason::NotCoder404,
                status: Some(404),
                ..
            }
        ));
        assert!(e.is_retryable());
    }

    #[test]
    fn json_404_without_build_version_is_unavailable() {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let e = error_from_response(404, &h, NOT_FOUND_BODY, &[]);
        assert!(!e.is_not_found());
        assert_eq!(e.category(), "unavailable");
    }

    #[test]
    fn header_but_html_body_404_is_unavailable() {
        let mut h = HeaderMap::new();
        h.insert(BUILD_VERSION_HEADER, HeaderValue::from_static("v2.30.0"));
        let e = error_from_response(404, &h, b"<html>nope</html>", &[]);
        assert!(!e.is_not_found());
    }

    #[test]
    fn header_with_json_but_empty_message_is_unavailable() {
        let e = error_from_response(404, &coder_headers(), br#"{"message":""}"#, &[]);
        assert!(!e.is_not_found());
    }

    #[test]
    fn status_mapping() {
        let h = coder_headers();
        let body = br#"{"message":"m","detail":"d"}"#;
        assert_eq!(error_from_response(401, &h, body, &[]).category(), "unauthorized");
        assert_eq!(error_from_response(403, &h, body, &[]).category(), "forbidden");
        assert_eq!(error_from_response(409, &h, body, &[]).category(), "conflict");
        assert_eq!(error_from_response(500, &h, body, &[]).category(), "unavailable");
        assert_eq!(
            error_from_response(503, &HeaderMap::new(), b"", &[]).category(),
            "unavailable"
        );
        let rejected = error_from_response(400, &h, body, &[]);
        assert!(matches!(rejected, Error::Rejected { status: 400, .. }));
        assert!(!rejected.is_retryable());
        assert_eq!(rejected.message(), "m: d");
        assert!(matches!(
            error_from_response(406, &h, body, &[]),
            Error::Rejected { status: 406, .. }
        ));
    }

    #[test]
    fn rate_limited_reads_retry_after() {
        let mut h = coder_headers();
        h.insert(RETRY_AFTER, HeaderValue::from_static("60"));
        let e = error_from_response(429, &h, br#"{"message":"You've been rate limited"}"#, &[]);
        assert_eq!(e.retry_after(), Some(Duration::from_secs(60)));
        assert!(e.is_retryable());
        assert_eq!(e.category(), "rate_limited");
        assert!(e.to_string().contains("retry after 60s"));
        let e = error_from_response(429, &coder_headers(), b"", &[]);
        assert_eq!(e.retry_after(), None);
    }

    #[test]
    fn plain_text_428_is_rejected_with_the_text() {
        let mut h = HeaderMap::new();
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        let e = error_from_response(
            428,
            &h,
            b"\"X-Coder-Bypass-Ratelimit\" provided but user is not owner\n",
            &[],
        );
        assert!(matches!(e, Error::Rejected { status: 428, .. }));
        assert!(e.message().contains("not owner"));
    }

    #[test]
    fn validations_are_included() {
        let body =
            br#"{"message":"Validation failed.","validations":[{"field":"name","detail":"required"}]}"#;
        let e = error_from_response(400, &coder_headers(), body, &[]);
        assert!(e.message().contains("[name: required]"), "{}", e.message());
    }

    #[test]
    fn token_echoed_in_a_body_is_scrubbed() {
        let token = "abcdefghij-0123456789abcdefghijkl";
        let body = format!(r#"{{"message":"bad","detail":"Invalid API key format: {token}"}}"#);
        let e = error_from_response(401, &coder_headers(), body.as_bytes(), &[token]);
        assert!(!e.to_string().contains(token));
        assert!(!format!("{e:?}").contains(token));
    }

    #[test]
    fn long_bodies_are_cut_to_the_message_limit() {
        let body = "x".repeat(10_000);
        let e = error_from_response(502, &HeaderMap::new(), body.as_bytes(), &[]);
        assert_eq!(e.message().chars().count(), crate::redact::MAX_MESSAGE_CHARS + 1);
        assert!(e.message().ends_with('…'));
    }

    #[test]
    fn credentials_in_a_body_never_reach_the_message() {
        let body = r#"{"message":"upstream https://ops:hunter2@coder.internal/api refused","detail":"key AbCdEf1234-0123456789abcdefGHIJKL, Bearer abc.def"}"#;
        let e = error_from_response(400, &coder_headers(), body.as_bytes(), &[]);
        let shown = format!("{e} {e:?}");
        for leaked in ["hunter2", "ops:", "0123456789abcdefGHIJKL", "abc.def"] {
            assert!(!shown.contains(leaked), "{leaked} in {shown}");
        }
        assert!(
            e.message().contains("https://[redacted]@coder.internal/api"),
            "{}",
            e.message()
        );
    }

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[test]
    fn retry_after_seconds_are_capped() {
        let now = at(1_700_000_000);
        assert_eq!(retry_after_from("60", now), Some(Duration::from_secs(60)));
        assert_eq!(retry_after_from(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(retry_after_from("601", now), Some(MAX_RETRY_AFTER));
        assert_eq!(
            retry_after_from("18446744073709551615", now),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(
            retry_after_from("99999999999999999999999999999", now),
            Some(MAX_RETRY_AFTER)
        );
    }

    #[test]
    fn retry_after_dates_are_relative_to_now_and_capped() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            retry_after_from("Sun, 06 Nov 1994 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after_from("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            retry_after_from("Fri, 31 Dec 9999 23:59:59 GMT", now),
            Some(MAX_RETRY_AFTER)
        );
        // "now" at the far end of time: a past date still cannot underflow.
        assert_eq!(
            retry_after_from("Thu, 01 Jan 1970 00:00:00 GMT", at(u64::MAX / 4)),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn hostile_retry_after_values_are_ignored() {
        let now = at(1_700_000_000);
        for value in [
            "-5",
            "-18446744073709551615",
            "1.5",
            "1e9",
            "",
            "soon",
            "Fri, 31 Dec 99999 23:59:59 GMT",
            "\u{0}",
        ] {
            assert_eq!(retry_after_from(value, now), None, "{value:?}");
        }
    }

    #[test]
    fn categories_and_retryability_of_local_errors() {
        let e = Error::RedirectRefused { message: "x".into() };
        assert_eq!(e.category(), "redirect_refused");
        assert!(!e.is_retryable());
        let e = Error::BodyTooLarge { limit: 1 };
        assert_eq!(e.category(), "body_too_large");
        assert!(!e.is_retryable());
        let e = Error::unavailable(UnavailableReason::Timeout, "t");
        assert!(e.is_retryable());
        assert_eq!(e.status(), None);
    }

    proptest::proptest! {
        /// For any Coder-format token and any status/body (including bodies echoing the token), no
        /// error's Display or Debug contains the token or its secret part.
        #[test]
        fn no_error_text_contains_the_token(
            id in "[0-9A-Za-z]{10}",
            secret in "[0-9A-Za-z]{22}",
            status in proptest::sample::select(vec![301u16, 400, 401, 403, 404, 406, 409, 410, 428, 429, 500, 502, 503]),
            prefix in ".{0,40}",
            echo_whole in proptest::bool::ANY,
            json in proptest::bool::ANY,
            coder in proptest::bool::ANY,
        ) {
            let token = crate::SessionToken::new(format!("{id}-{secret}"));
            let echoed = if echo_whole { token.expose().to_owned() } else { secret.clone() };
            let body = if json {
                serde_json::json!({"message": format!("{prefix}{echoed}"), "detail": echoed}).to_string()
            } else {
                format!("{prefix} {echoed}")
            };
            let mut headers = HeaderMap::new();
            if coder {
                headers.insert(BUILD_VERSION_HEADER, HeaderValue::from_static("v2.30.0"));
            }
            let sensitive = token.sensitive_parts();
            let e = error_from_response(status, &headers, body.as_bytes(), &sensitive);
            let display = e.to_string();
            let debug = format!("{e:?}");
            proptest::prop_assert!(!display.contains(token.expose()) && !debug.contains(token.expose()));
            proptest::prop_assert!(!display.contains(&secret) && !debug.contains(&secret));
            let shown = format!("{:?} {}", token, token);
            proptest::prop_assert!(!shown.contains(&secret));
        }
    }
}
