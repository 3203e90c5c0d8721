//! The request core of [`CoderClient`]: the token header, the rate-limit bypass header and its single
//! retry on 428, same-origin redirects, timeouts, the body-size cap, error mapping, the generic JSON
//! calls used by every typed call, and the websocket handshake of followed logs.

use std::marker::PhantomData;

use bytes::{Bytes, BytesMut};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use url::Url;

use super::{ClientOptions, CoderClient, Result};
use crate::error::{Error, UnavailableReason, error_from_response};
use crate::redirect::{self, RedirectRefusal};
use crate::secret::{SessionToken, scrub};

/// The header carrying the session token.
pub const SESSION_TOKEN_HEADER: &str = "Coder-Session-Token";
/// The rate-limit bypass header sent (value `true`) on mutating calls.
pub const BYPASS_RATELIMIT_HEADER: &str = "X-Coder-Bypass-Ratelimit";

/// A successful JSON answer as Coder sent it, decoded on demand. A caller that remembers the last answer compares
/// the bytes first and decodes only an answer that changed: decoding a few hundred templates costs more than
/// Coder takes to send them.
pub struct JsonAnswer<T> {
    body: Bytes,
    decoded_as: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> JsonAnswer<T> {
    /// The answer decoded; a body that is not the expected JSON is [`Error::Decode`], as for a decoded call.
    pub fn decode(&self) -> Result<T> {
        CoderClient::decode(&self.body)
    }
}

impl<T> JsonAnswer<T> {
    /// The body exactly as Coder sent it.
    pub fn bytes(&self) -> &[u8] {
        &self.body
    }
}

impl<T> Clone for JsonAnswer<T> {
    fn clone(&self) -> Self {
        Self {
            body: self.body.clone(),
            decoded_as: PhantomData,
        }
    }
}

/// Two answers are equal when Coder sent the same bytes.
impl<T> PartialEq for JsonAnswer<T> {
    fn eq(&self, other: &Self) -> bool {
        self.body == other.body
    }
}

impl<T> std::fmt::Debug for JsonAnswer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonAnswer")
            .field("bytes", &self.body.len())
            .finish()
    }
}

/// A websocket upgraded from a reqwest connection.
pub(super) type Ws = WebSocketStream<reqwest::Upgraded>;

/// Body of a request.
pub(super) enum Body {
    Empty,
    Json(Bytes),
    Raw {
        bytes: Bytes,
        content_type: &'static str,
    },
}

impl Body {
    /// Sets the body and its `Content-Type` on `rb`.
    fn attach(&self, rb: RequestBuilder) -> RequestBuilder {
        match self {
            Body::Empty => rb,
            Body::Json(bytes) => rb
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(bytes.clone()),
            Body::Raw { bytes, content_type } => rb
                .header(CONTENT_TYPE, HeaderValue::from_static(content_type))
                .body(bytes.clone()),
        }
    }
}

/// A complete successful answer.
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) body: Bytes,
}

/// The reqwest client behind a [`CoderClient`]: rustls, same-origin redirects only, no `Referer`,
/// the call timeout (also for connecting), HTTP/1.1 only, optional resolve overrides and extra roots.
pub(super) fn http_client(options: &ClientOptions) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .tls_backend_rustls()
        .redirect(redirect::policy())
        .referer(false)
        .timeout(options.timeout)
        .connect_timeout(options.timeout)
        .http1_only()
        .user_agent(options.user_agent.clone());
    for (host, address) in &options.resolve_overrides {
        // reqwest takes the port from the URL; the 0 here is ignored.
        builder = builder.resolve(host, std::net::SocketAddr::new(*address, 0));
    }
    if !options.extra_root_certificates.is_empty() {
        builder = builder.tls_certs_merge(options.extra_root_certificates.clone());
    }
    builder
        .build()
        .map_err(|e| Error::invalid(format!("building the HTTP client: {}", chain(&e))))
}

impl CoderClient {
    /// The parts of the token that must never appear in an error or a log line.
    fn sensitive(&self) -> Vec<&str> {
        self.inner
            .token
            .as_ref()
            .map(SessionToken::sensitive_parts)
            .unwrap_or_default()
    }

    /// The URL of `/api/v2/<segments…>`; each segment is percent-encoded (a `/` in a name cannot
    /// change the path).
    pub(super) fn endpoint(&self, segments: &[&str]) -> Result<Url> {
        let mut url = self.inner.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|()| Error::invalid("the coder URL cannot be a base URL"))?;
            path.pop_if_empty();
            path.extend(["api", "v2"]);
            path.extend(segments);
        }
        Ok(url)
    }

    /// Maps a reqwest failure (no answer, or a broken one) to a typed error without the token.
    fn map_transport(&self, err: &reqwest::Error) -> Error {
        if let Some(refusal) = redirect_refusal(err) {
            return Error::RedirectRefused {
                message: refusal.to_string(),
            };
        }
        let text = scrub(&chain(err), &self.sensitive());
        if err.is_timeout() {
            return Error::unavailable(
                UnavailableReason::Timeout,
                format!("no answer within {:?}", self.inner.options.timeout),
            );
        }
        if err.is_connect() {
            return Error::unavailable(UnavailableReason::Connect, text);
        }
        if err.is_builder() {
            return Error::invalid(text);
        }
        if is_dropped_connection(&text) {
            return Error::unavailable(UnavailableReason::ConnectionDropped, text);
        }
        Error::unavailable(UnavailableReason::Transport, text)
    }

    /// Sends `rb` (a request to `url` made by [`Self::request`]) and reports how it ended to the process's observer
    /// ([`crate::observe`]).
    async fn send(&self, rb: RequestBuilder, method: &Method, url: &Url) -> Result<reqwest::Response> {
        let sent = rb.send().await;
        let status = sent.as_ref().ok().map(|response| response.status().as_u16());
        crate::observe::report(method.as_str(), url.path(), status);
        sent.map_err(|e| self.map_transport(&e))
    }

    /// A request carrying the token and, when `bypass`, the rate-limit bypass header.
    fn request(&self, method: Method, url: Url, bypass: bool) -> RequestBuilder {
        crate::calls::note_request();
        let mut rb = self.inner.http.request(method, url);
        if let Some(token) = &self.inner.token
            && let Ok(mut value) = HeaderValue::from_str(token.expose())
        {
            value.set_sensitive(true);
            rb = rb.header(SESSION_TOKEN_HEADER, value);
        }
        if bypass {
            rb = rb.header(BYPASS_RATELIMIT_HEADER, HeaderValue::from_static("true"));
        }
        rb
    }

    /// Sends one request and reads the whole answer; an error status becomes a typed error whose text holds neither
    /// the token nor any of `redact` (values the request carried that must not come back in an error).
    async fn execute_once(
        &self,
        method: &Method,
        url: &Url,
        body: &Body,
        bypass: bool,
        redact: &[&str],
    ) -> Result<Answer> {
        let rb = body.attach(self.request(method.clone(), url.clone(), bypass));
        let response = self.send(rb, method, url).await?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = self.read_body(response).await?;
        if status.is_success() {
            Ok(Answer { status, body })
        } else {
            let mut sensitive = self.sensitive();
            sensitive.extend(redact.iter().copied().filter(|value| !value.is_empty()));
            Err(error_from_response(status.as_u16(), &headers, &body, &sensitive))
        }
    }

    /// Reads an answer body up to the cap. A larger successful body fails with
    /// [`Error::BodyTooLarge`]; an error answer is only described, so it keeps what fits.
    async fn read_body(&self, mut response: reqwest::Response) -> Result<Bytes> {
        let limit = self.inner.options.max_body_bytes;
        let success = response.status().is_success();
        if success && response.content_length().is_some_and(|len| len > limit as u64) {
            return Err(Error::BodyTooLarge { limit });
        }
        // A successful answer is sized once from its announced length (checked against the cap above) instead of
        // growing by copies: a page of a hundred workspaces is hundreds of KiB. An error answer only grows with what
        // arrives, so an announced length alone reserves nothing.
        let announced = response
            .content_length()
            .filter(|_| success)
            .map_or(0, |len| usize::try_from(len).unwrap_or(limit));
        let mut buf = BytesMut::with_capacity(announced.min(limit));
        while let Some(chunk) = response.chunk().await.map_err(|e| self.map_transport(&e))? {
            if buf.len() + chunk.len() > limit {
                if success {
                    return Err(Error::BodyTooLarge { limit });
                }
                buf.extend_from_slice(&chunk[..limit - buf.len()]);
                break;
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf.freeze())
    }

    /// Sends one call. Mutating calls carry the bypass header first and are retried once without it
    /// when Coder answers 428 (the caller is not an owner).
    pub(super) async fn execute(&self, method: Method, url: Url, body: Body) -> Result<Answer> {
        self.execute_redacting(method, url, body, &[]).await
    }

    /// [`Self::execute`], removing `redact` from the text of an error answer as well as the token.
    async fn execute_redacting(
        &self,
        method: Method,
        url: Url,
        body: Body,
        redact: &[&str],
    ) -> Result<Answer> {
        let mutating = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS);
        let bypass = mutating && self.inner.options.bypass_ratelimit;
        match self.execute_once(&method, &url, &body, bypass, redact).await {
            Err(Error::Rejected { status: 428, .. }) if bypass => {
                tracing::debug!(
                    method = %method,
                    path = url.path(),
                    "coder refused the rate-limit bypass (428); retrying without it"
                );
                self.execute_once(&method, &url, &body, false, redact).await
            }
            other => other,
        }
    }

    /// Decodes a JSON answer body. JSON is UTF-8, so the body is checked once as a whole and parsed as text: parsed
    /// as bytes, every string and key is checked again on its own (about a tenth of decoding a page of
    /// workspaces). A body that is not UTF-8 is parsed as bytes, as before, which accepts invalid bytes in the fields
    /// a type skips.
    pub(super) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
        let decoded = match std::str::from_utf8(body) {
            Ok(text) => serde_json::from_str(text),
            Err(_) => serde_json::from_slice(body),
        };
        decoded.map_err(|e| Error::decode(e.to_string()))
    }

    fn json_body<B: Serialize>(body: &B) -> Result<Body> {
        serde_json::to_vec(body)
            .map(|v| Body::Json(Bytes::from(v)))
            .map_err(|e| Error::invalid(format!("encoding the request: {e}")))
    }

    /// `GET /api/v2/<segments…>?<query>`, decoding the JSON answer.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Result<T> {
        let mut url = self.endpoint(segments)?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let answer = self.execute(Method::GET, url, Body::Empty).await?;
        Self::decode(&answer.body)
    }

    /// `GET /api/v2/<segments…>?<query>`, keeping the JSON answer undecoded.
    pub(crate) async fn get_answer<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Result<JsonAnswer<T>> {
        let mut url = self.endpoint(segments)?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let answer = self.execute(Method::GET, url, Body::Empty).await?;
        Ok(JsonAnswer {
            body: answer.body,
            decoded_as: PhantomData,
        })
    }

    /// A call with a JSON body, decoding the JSON answer.
    pub(crate) async fn send_json<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        body: &B,
    ) -> Result<T> {
        let url = self.endpoint(segments)?;
        let answer = self.execute(method, url, Self::json_body(body)?).await?;
        Self::decode(&answer.body)
    }

    /// [`Self::send_json`] for a body that carries values (`redact`) which an error answer must not repeat: they are
    /// removed from its text before it is cut short, so no part of them survives.
    pub(crate) async fn send_json_redacting<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        body: &B,
        redact: &[&str],
    ) -> Result<T> {
        let url = self.endpoint(segments)?;
        let answer = self
            .execute_redacting(method, url, Self::json_body(body)?, redact)
            .await?;
        Self::decode(&answer.body)
    }

    /// A mutating call with a query whose answer body is not needed.
    pub(crate) async fn send_no_content_with_query<B: Serialize>(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<&B>,
    ) -> Result<()> {
        let mut url = self.endpoint(segments)?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let body = match body {
            Some(b) => Self::json_body(b)?,
            None => Body::Empty,
        };
        self.execute(method, url, body).await.map(|_| ())
    }

    /// A mutating call whose answer body is not needed (204, empty 200, a message).
    pub(crate) async fn send_no_content<B: Serialize>(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<&B>,
    ) -> Result<()> {
        let url = self.endpoint(segments)?;
        let body = match body {
            Some(b) => Self::json_body(b)?,
            None => Body::Empty,
        };
        self.execute(method, url, body).await.map(|_| ())
    }

    /// Opens a websocket on `url`. The handshake goes through the same reqwest client (same token,
    /// redirect policy, TLS and timeout); messages are capped like answer bodies.
    pub(super) async fn open_websocket(&self, url: Url) -> Result<Ws> {
        let key = generate_key();
        let rb = self
            .request(Method::GET, url.clone(), false)
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", key.as_str());
        let response = self.send(rb, &Method::GET, &url).await?;
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            return Err(self.upgrade_refused(response).await);
        }
        check_accept_key(response.headers(), &key)?;
        let upgraded = response.upgrade().await.map_err(|e| self.map_transport(&e))?;
        let limit = self.inner.options.max_body_bytes;
        let config = WebSocketConfig::default()
            .max_message_size(Some(limit))
            .max_frame_size(Some(limit));
        Ok(WebSocketStream::from_raw_socket(upgraded, Role::Client, Some(config)).await)
    }

    /// The error for a handshake answered with anything but 101: a success status is a protocol
    /// error, any other status is mapped like an error answer.
    async fn upgrade_refused(&self, response: reqwest::Response) -> Error {
        let status = response.status();
        let headers: HeaderMap = response.headers().clone();
        let body = read_capped(response, self.inner.options.max_body_bytes).await;
        if status.is_success() {
            return Error::invalid(format!(
                "coder answered {status} instead of switching to a websocket"
            ));
        }
        error_from_response(status.as_u16(), &headers, &body, &self.sensitive())
    }
}

// --- Capped raw reads (the aggregated API server's coderworkspaces/log) ---

/// How much of an error answer a capped read looks at: only Coder's message is needed.
const CAPPED_ERROR_BODY_BYTES: usize = 64 * 1024;

impl CoderClient {
    /// `GET url`, reading at most `limit` bytes of a successful answer: a longer body is cut there and reported with
    /// `true` instead of failing. An error status is mapped like every other call (its body read up to 64 KiB).
    pub(super) async fn get_capped(&self, url: Url, limit: usize) -> Result<(Bytes, bool)> {
        let rb = self.request(Method::GET, url.clone(), false);
        let mut response = self.send(rb, &Method::GET, &url).await?;
        let status = response.status();
        if !status.is_success() {
            let headers = response.headers().clone();
            let body = read_capped(response, CAPPED_ERROR_BODY_BYTES).await;
            return Err(error_from_response(
                status.as_u16(),
                &headers,
                &body,
                &self.sensitive(),
            ));
        }
        let mut buf = BytesMut::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.map_transport(&e))? {
            let room = limit.saturating_sub(buf.len());
            if chunk.len() > room {
                buf.extend_from_slice(&chunk[..room]);
                return Ok((buf.freeze(), true));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok((buf.freeze(), false))
    }
}

/// The server must echo the accept key derived from our `Sec-WebSocket-Key`.
fn check_accept_key(headers: &HeaderMap, key: &str) -> Result<()> {
    let expected = derive_accept_key(key.as_bytes());
    let accepted = headers
        .get("Sec-WebSocket-Accept")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == expected);
    if accepted {
        Ok(())
    } else {
        Err(Error::invalid("websocket handshake: bad Sec-WebSocket-Accept"))
    }
}

/// The redirect refusal somewhere in the error's source chain, if any.
fn redirect_refusal(err: &reqwest::Error) -> Option<&RedirectRefusal> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(s) = source {
        if let Some(refusal) = s.downcast_ref::<RedirectRefusal>() {
            return Some(refusal);
        }
        source = s.source();
    }
    None
}

/// Whether a transport error's text describes a connection closed or reset mid-call.
fn is_dropped_connection(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    ["closed", "reset", "incomplete", "eof", "broken pipe"]
        .iter()
        .any(|word| lower.contains(word))
}

/// Reads a body up to `limit` bytes, ignoring read errors (for describing an error answer).
async fn read_capped(mut response: reqwest::Response, limit: usize) -> Bytes {
    let mut buf = BytesMut::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = limit.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if buf.len() >= limit {
            break;
        }
    }
    buf.freeze()
}

/// The error and its sources, joined; reqwest's URL is left out.
fn chain(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    if let Some(at) = text.find(" for url (") {
        text.truncate(at);
    }
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

// Template source downloads (aggregated API, codertemplates): an answer larger than the client's default cap.
impl CoderClient {
    /// `GET url` answering raw bytes, read up to `limit` bytes (a larger successful answer is
    /// [`Error::BodyTooLarge`]); an error answer is read up to the client's usual cap and mapped as any other.
    pub(super) async fn get_bytes_capped(&self, url: Url, limit: usize) -> Result<Bytes> {
        let rb = self.request(Method::GET, url.clone(), false);
        let mut response = self.send(rb, &Method::GET, &url).await?;
        let status = response.status();
        if !status.is_success() {
            let headers = response.headers().clone();
            let body = read_capped(response, self.inner.options.max_body_bytes).await;
            return Err(error_from_response(
                status.as_u16(),
                &headers,
                &body,
                &self.sensitive(),
            ));
        }
        if response.content_length().is_some_and(|len| len > limit as u64) {
            return Err(Error::BodyTooLarge { limit });
        }
        let mut buf = BytesMut::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.map_transport(&e))? {
            if buf.len() + chunk.len() > limit {
                return Err(Error::BodyTooLarge { limit });
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf.freeze())
    }
}

#[cfg(test)]
mod tests {
    //! The request core against a minimal scripted HTTP/1.1 server (raw TCP), so redirects, the 428
    //! retry, timeouts, the body cap and dropped connections are exercised without the test server
    //! crate. Typed calls serve only as vehicles for the core.

    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::super::test_support::{CODER, JSON, ME, TOKEN, client, has_header, response, serve};
    use super::*;

    #[test]
    fn a_body_is_decoded_alike_as_text_and_as_bytes() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Named {
            name: String,
        }
        let named = |body: &[u8]| CoderClient::decode::<Named>(body);
        let text = "{\"name\":\"caf\\u00e9 \u{e9}\",\"x\":[1]}";
        assert_eq!(named(text.as_bytes()).unwrap().name, "caf\u{e9} \u{e9}");
        // Not UTF-8 in a skipped field: decoded as bytes, as before.
        assert_eq!(named(b"{\"x\":\"\xff\",\"name\":\"a\"}").unwrap().name, "a");
        // Not UTF-8 in a field that is read, or not JSON: a decode error either way.
        assert!(matches!(named(b"{\"name\":\"\xff\"}"), Err(Error::Decode { .. })));
        assert!(matches!(named(b"{\"name\":"), Err(Error::Decode { .. })));
    }

    #[tokio::test]
    async fn sends_the_token_and_decodes() {
        let (url, log) = serve(|_, _| Some(response("200 OK", &[JSON, CODER], ME))).await;
        let me = client(&url).me().await.unwrap();
        assert_eq!(me.username, "coder-k8s-operator");
        assert!(me.has_role("owner"));
        let head = log.lock().unwrap()[0].clone();
        assert!(head.starts_with("GET /api/v2/users/me HTTP/1.1"), "{head}");
        assert!(head.contains(&format!("coder-session-token: {TOKEN}")), "{head}");
        assert!(
            !has_header(&head, BYPASS_RATELIMIT_HEADER),
            "GET must not carry the bypass"
        );
    }

    #[tokio::test]
    async fn path_segments_are_encoded() {
        let (url, log) = serve(|_, _| Some(response("200 OK", &[JSON, CODER], "{}"))).await;
        let base = url.join("/prefix/").unwrap();
        let _ = client(&base).organization("a/../b c").await.unwrap();
        let head = log.lock().unwrap()[0].clone();
        assert!(
            head.starts_with("GET /prefix/api/v2/organizations/a%2F..%2Fb%20c HTTP/1.1"),
            "{head}"
        );
    }

    #[tokio::test]
    async fn cross_origin_redirect_is_refused_and_the_token_stays_home() {
        let (other, other_log) = serve(|_, _| Some(response("200 OK", &[JSON, CODER], ME))).await;
        let target = other
            .join("/api/v2/users/me?coder_session_token=leak")
            .unwrap()
            .to_string();
        let (url, log) =
            serve(move |_, _| Some(response("307 Temporary Redirect", &[("Location", &target)], ""))).await;
        let err = client(&url).me().await.unwrap_err();
        assert!(matches!(err, Error::RedirectRefused { .. }), "{err:?}");
        assert_eq!(err.category(), "redirect_refused");
        assert!(!err.to_string().contains("leak"));
        assert_eq!(log.lock().unwrap().len(), 1);
        assert!(
            other_log.lock().unwrap().is_empty(),
            "the other origin was contacted"
        );
    }

    #[tokio::test]
    async fn same_origin_redirect_is_followed_with_the_token() {
        let (url, log) = serve(|i, _| {
            Some(if i == 0 {
                response("302 Found", &[("Location", "/api/v2/users/me2")], "")
            } else {
                response("200 OK", &[JSON, CODER], ME)
            })
        })
        .await;
        let me = client(&url).me().await.unwrap();
        assert_eq!(me.username, "coder-k8s-operator");
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 2);
        assert!(log[1].starts_with("GET /api/v2/users/me2 "));
        assert!(log[1].contains(TOKEN));
    }

    #[tokio::test]
    async fn bypass_refused_with_428_is_retried_once_without_it() {
        let (url, log) = serve(|_, head| {
            Some(if has_header(head, BYPASS_RATELIMIT_HEADER) {
                response(
                    "428 Precondition Required",
                    &[("Content-Type", "text/plain; charset=utf-8"), CODER],
                    "\"X-Coder-Bypass-Ratelimit\" provided but user is not owner\n",
                )
            } else {
                response("201 Created", &[JSON, CODER], r#"{"key":"k3y"}"#)
            })
        })
        .await;
        let secret = client(&url)
            .create_provisioner_key("default", "k", &BTreeMap::new())
            .await
            .unwrap();
        assert_eq!(secret.expose(), "k3y");
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 2);
        assert!(has_header(&log[0], BYPASS_RATELIMIT_HEADER));
        assert!(!has_header(&log[1], BYPASS_RATELIMIT_HEADER));
    }

    #[tokio::test]
    async fn rate_limit_is_typed() {
        let (url, _) = serve(|_, _| {
            Some(response(
                "429 Too Many Requests",
                &[JSON, CODER, ("Retry-After", "17")],
                r#"{"message":"You've been rate limited for sending more than 512 requests in 1m0s."}"#,
            ))
        })
        .await;
        let err = client(&url).organizations().await.unwrap_err();
        assert_eq!(err.retry_after(), Some(Duration::from_secs(17)));
        assert!(err.is_retryable());
    }

    #[tokio::test]
    async fn timeout_is_unavailable_within_the_configured_time() {
        let (url, _) = serve(|_, _| Some("SLEEP".to_owned())).await;
        let options = ClientOptions {
            timeout: Duration::from_millis(300),
            ..ClientOptions::default()
        };
        let c = CoderClient::with_options(url, Some(SessionToken::new(TOKEN)), options).unwrap();
        let start = Instant::now();
        let err = c.buildinfo().await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Unavailable {
                    reason: UnavailableReason::Timeout,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn dropped_connection_is_unavailable() {
        let (url, _) = serve(|_, _| None).await;
        let err = client(&url).buildinfo().await.unwrap_err();
        assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
        assert!(!format!("{err:?}").contains(TOKEN));
    }

    #[tokio::test]
    async fn connect_refused_is_unavailable() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        drop(listener);
        let err = client(&url).buildinfo().await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Unavailable {
                    reason: UnavailableReason::Connect,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn oversized_body_is_an_error() {
        let big = format!(r#"{{"version":"{}"}}"#, "x".repeat(5000));
        let (url, _) = serve(move |_, _| Some(response("200 OK", &[JSON, CODER], &big))).await;
        let options = ClientOptions {
            max_body_bytes: 1000,
            ..ClientOptions::default()
        };
        let c = CoderClient::with_options(url, None, options).unwrap();
        let err = c.buildinfo().await.unwrap_err();
        assert!(matches!(err, Error::BodyTooLarge { limit: 1000 }), "{err:?}");
    }

    #[tokio::test]
    async fn not_found_mapping_through_http() {
        let (url, _) = serve(|i, _| {
            Some(match i {
                0 => response(
                    "404 Not Found",
                    &[("Content-Type", "text/html")],
                    "<html>nginx</html>",
                ),
                1 => response(
                    "404 Not Found",
                    &[JSON, CODER],
                    r#"{"message":"Route not found."}"#,
                ),
                _ => response(
                    "404 Not Found",
                    &[JSON, CODER],
                    r#"{"message":"Resource not found or you do not have access to this resource"}"#,
                ),
            })
        })
        .await;
        let c = client(&url);
        let e = c.workspace_proxy("p").await.unwrap_err();
        assert!(!e.is_not_found() && e.is_retryable(), "{e:?}");
        let e = c.entitlements().await.unwrap_err();
        assert!(e.is_route_not_found(), "{e:?}");
        let e = c.workspace_proxy("p").await.unwrap_err();
        assert!(e.is_not_found(), "{e:?}");
        assert_eq!(crate::found(c.workspace_proxy("p").await).unwrap(), None);
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn refusal_is_logged_without_the_target_query_or_token() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let (other, _) = serve(|_, _| Some(response("200 OK", &[], ""))).await;
        let target = other.join("/login?redirect_secret=qqq").unwrap().to_string();
        let (url, _) =
            serve(move |_, _| Some(response("307 Temporary Redirect", &[("Location", &target)], ""))).await;
        let _ = client(&url).me().await.unwrap_err();
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(text.contains("WARN"), "{text}");
        assert!(text.contains(crate::redirect::REFUSAL_LOG), "{text}");
        assert!(
            !text.contains("redirect_secret") && !text.contains("qqq"),
            "{text}"
        );
        assert!(!text.contains(TOKEN), "{text}");
    }

    #[tokio::test]
    async fn https_uses_the_ring_provider_and_fails_cleanly_against_plain_http() {
        // A plain-HTTP peer that answers at once and closes: the TLS handshake must fail, not hang.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            }
        });
        let https = Url::parse(&format!("https://127.0.0.1:{port}")).unwrap();
        let c = CoderClient::anonymous(https).unwrap();
        let err = c.buildinfo().await.unwrap_err();
        assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
