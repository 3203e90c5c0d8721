//! The checks in front of `/mcp`, in this order: the bearer token (401 with `WWW-Authenticate: Bearer`, also for a
//! request that carries an existing `Mcp-Session-Id`), a loopback `Host` (403, against DNS rebinding), no cross-site
//! request (403: an `Origin` that is not loopback, or `Sec-Fetch-Site: cross-site`), `Content-Type:
//! application/json` on POST (415) and a declared body size within the cap (413; rmcp also counts the bytes it
//! reads). The decisions are pure functions; [`guard`] is the axum middleware that applies them.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, WWW_AUTHENTICATE};
use http::{HeaderMap, Method, StatusCode};

use crate::token::TokenFile;

/// What the middleware needs: the token file and the body cap.
#[derive(Debug)]
pub struct Guard {
    pub token: Arc<TokenFile>,
    pub max_body_bytes: usize,
}

/// Why a request is refused; each maps to one status and a short body without details of the credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Unauthorized,
    HostNotLoopback,
    CrossSite,
    NotJson,
    TooLarge,
}

impl Refusal {
    pub fn status(self) -> StatusCode {
        match self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::HostNotLoopback | Self::CrossSite => StatusCode::FORBIDDEN,
            Self::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized: send Authorization: Bearer <the token of --mcp-token-file>",
            Self::HostNotLoopback => "forbidden: the Host header must name a loopback address",
            Self::CrossSite => "forbidden: cross-site requests are refused",
            Self::NotJson => "unsupported media type: POST bodies must be Content-Type: application/json",
            Self::TooLarge => "payload too large",
        }
    }

    fn into_response(self) -> Response {
        let mut response = (self.status(), self.message()).into_response();
        if self == Self::Unauthorized {
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive), if there is exactly one.
pub fn bearer_token(headers: &HeaderMap) -> Option<&[u8]> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let bytes = value.as_bytes();
    let (scheme, rest) = bytes.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// Whether an authority (`host` or `host:port`, IPv6 in brackets) names the loopback: `localhost`, `127.0.0.0/8` or
/// `::1`.
pub fn is_loopback_authority(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        match rest.split_once(']') {
            Some((host, port)) if port.is_empty() || port.strip_prefix(':').is_some_and(is_port) => host,
            _ => return false,
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) if is_port(port) => host,
            Some(_) => return false,
            None => authority,
        }
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn is_port(digits: &str) -> bool {
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && digits.parse::<u16>().is_ok()
}

/// Whether an `Origin` value is an http(s) origin on the loopback (a local tool's page); `null` is not.
pub fn is_loopback_origin(origin: &str) -> bool {
    let Some(authority) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    !authority.contains('/') && is_loopback_authority(authority)
}

/// Whether a `Content-Type` value is `application/json` (parameters such as `charset` allowed).
pub fn is_json_content_type(value: &str) -> bool {
    value
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// The first rule a request breaks, in the documented order; `host` is the Host header (or the URI's authority).
pub fn check(
    method: &Method,
    headers: &HeaderMap,
    host: Option<&str>,
    token: &TokenFile,
    max_body_bytes: usize,
) -> Result<(), Refusal> {
    if !bearer_token(headers).is_some_and(|presented| token.accepts(presented)) {
        return Err(Refusal::Unauthorized);
    }
    if !host.is_some_and(is_loopback_authority) {
        return Err(Refusal::HostNotLoopback);
    }
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if header(ORIGIN.as_str()).is_some_and(|origin| !is_loopback_origin(origin))
        || header("sec-fetch-site").is_some_and(|site| site.eq_ignore_ascii_case("cross-site"))
    {
        return Err(Refusal::CrossSite);
    }
    if method == Method::POST && !header(CONTENT_TYPE.as_str()).is_some_and(is_json_content_type) {
        return Err(Refusal::NotJson);
    }
    let declared = header(CONTENT_LENGTH.as_str()).map(|length| length.parse::<u64>());
    match declared {
        Some(Ok(length)) if length > max_body_bytes as u64 => Err(Refusal::TooLarge),
        _ => Ok(()),
    }
}

/// The axum middleware around the MCP service.
pub async fn guard(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(HOST)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
    match check(
        request.method(),
        request.headers(),
        host.as_deref(),
        &guard.token,
        guard.max_body_bytes,
    ) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::debug!(?refusal, method = %request.method(), "MCP request refused");
            refusal.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    fn token_file() -> (tempfile::TempDir, TokenFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, TOKEN).unwrap();
        let file = TokenFile::open(&path).unwrap();
        (dir, file)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn bearer_token_reads_one_bearer_header() {
        assert_eq!(
            bearer_token(&headers(&[("authorization", "Bearer abc")])),
            Some(&b"abc"[..])
        );
        assert_eq!(
            bearer_token(&headers(&[("authorization", "bearer abc")])),
            Some(&b"abc"[..])
        );
        assert_eq!(bearer_token(&headers(&[("authorization", "Basic abc")])), None);
        assert_eq!(bearer_token(&headers(&[("authorization", "Bearer ")])), None);
        assert_eq!(bearer_token(&headers(&[("authorization", "Bear")])), None);
        assert_eq!(
            bearer_token(&headers(&[
                ("authorization", "Bearer a"),
                ("authorization", "Bearer a")
            ])),
            None
        );
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn loopback_authorities() {
        for good in [
            "localhost",
            "LOCALHOST:8090",
            "127.0.0.1",
            "127.0.0.1:8090",
            "127.1.2.3:1",
            "[::1]",
            "[::1]:8090",
        ] {
            assert!(is_loopback_authority(good), "{good}");
        }
        for bad in [
            "evil.example",
            "evil.example:8090",
            "10.0.0.1:8090",
            "localhost.evil.example",
            "127.0.0.1:",
            "127.0.0.1:99999",
            "[::2]:80",
            "[::1]x",
            "",
            "::1",
            "localhost:80:80",
        ] {
            assert!(!is_loopback_authority(bad), "{bad}");
        }
    }

    #[test]
    fn loopback_origins() {
        assert!(is_loopback_origin("http://localhost:6274"));
        assert!(is_loopback_origin("https://127.0.0.1"));
        assert!(!is_loopback_origin("https://evil.example"));
        assert!(!is_loopback_origin("null"));
        assert!(!is_loopback_origin("http://localhost.evil.example"));
        assert!(!is_loopback_origin("file://localhost"));
    }

    #[test]
    fn json_content_types() {
        assert!(is_json_content_type("application/json"));
        assert!(is_json_content_type("Application/JSON; charset=utf-8"));
        assert!(!is_json_content_type("text/plain"));
        assert!(!is_json_content_type("application/jsonx"));
        assert!(!is_json_content_type(""));
    }

    #[test]
    fn the_rules_apply_in_order() {
        let (_dir, file) = token_file();
        let bearer = format!("Bearer {TOKEN}");
        let json = [
            ("authorization", bearer.as_str()),
            ("content-type", "application/json"),
        ];
        let host = Some("localhost:8090");
        assert_eq!(check(&Method::POST, &headers(&json), host, &file, 10), Ok(()));
        // The token comes first: a wrong Host without a token is 401, not 403.
        assert_eq!(
            check(&Method::POST, &headers(&[]), Some("evil.example"), &file, 10),
            Err(Refusal::Unauthorized)
        );
        let wrong = [("authorization", "Bearer 0123456789abcdef0123456789abcdeX")];
        assert_eq!(
            check(&Method::GET, &headers(&wrong), host, &file, 10),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            check(
                &Method::POST,
                &headers(&json),
                Some("evil.example:8090"),
                &file,
                10
            ),
            Err(Refusal::HostNotLoopback)
        );
        assert_eq!(
            check(&Method::POST, &headers(&json), None, &file, 10),
            Err(Refusal::HostNotLoopback)
        );
        let mut cross = headers(&json);
        cross.insert("origin", "https://evil.example".parse().unwrap());
        assert_eq!(
            check(&Method::POST, &cross, host, &file, 10),
            Err(Refusal::CrossSite)
        );
        let mut fetch = headers(&json);
        fetch.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert_eq!(
            check(&Method::POST, &fetch, host, &file, 10),
            Err(Refusal::CrossSite)
        );
        let mut local = headers(&json);
        local.insert("origin", "http://localhost:3000".parse().unwrap());
        local.insert("sec-fetch-site", "same-site".parse().unwrap());
        assert_eq!(check(&Method::POST, &local, host, &file, 10), Ok(()));
        let text = [("authorization", bearer.as_str()), ("content-type", "text/plain")];
        assert_eq!(
            check(&Method::POST, &headers(&text), host, &file, 10),
            Err(Refusal::NotJson)
        );
        // GET (the SSE stream) and DELETE (end of session) carry no body.
        assert_eq!(check(&Method::GET, &headers(&text[..1]), host, &file, 10), Ok(()));
        let mut big = headers(&json);
        big.insert("content-length", "11".parse().unwrap());
        assert_eq!(
            check(&Method::POST, &big, host, &file, 10),
            Err(Refusal::TooLarge)
        );
    }

    #[test]
    fn refusals_carry_their_status_and_401_asks_for_bearer() {
        let response = Refusal::Unauthorized.into_response();
        assert_eq!(response.status(), 401);
        assert_eq!(response.headers()[WWW_AUTHENTICATE], "Bearer");
        assert_eq!(Refusal::HostNotLoopback.status(), 403);
        assert_eq!(Refusal::CrossSite.status(), 403);
        assert_eq!(Refusal::NotJson.status(), 415);
        assert_eq!(Refusal::TooLarge.status(), 413);
        assert!(
            Refusal::TooLarge
                .into_response()
                .headers()
                .get(WWW_AUTHENTICATE)
                .is_none()
        );
    }
}
