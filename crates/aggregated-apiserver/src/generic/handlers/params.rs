//! Request parameters: the query string, the request deadline (`?timeout=`), `dryRun`, and the body (size cap,
//! JSON or YAML by `Content-Type`).

use std::collections::BTreeMap;
use std::time::Duration;

use axum::body::Body;
use axum::http::HeaderMap;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde_json::Value;

use crate::generic::auth::UserInfo;
use crate::generic::negotiate::{self, BodyType};
use crate::generic::request_info::ResourceRequest;
use crate::generic::server::ServerSettings;
use crate::generic::status::ApiError;
use crate::generic::storage::RequestContext;

/// Largest request body accepted (kube-apiserver's limit, 3 MiB); larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The decoded query string, in order, with repeated keys kept.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    pub fn parse(query: Option<&str>) -> Self {
        let pairs = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
        Self { pairs }
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `watch=true` (any case) or `watch=1`, as kube-apiserver reads it.
    pub fn watch(&self) -> bool {
        self.get("watch")
            .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
    }

    /// A boolean parameter: `true`/`1`, `false`/`0`, else 400.
    pub fn flag(&self, key: &str) -> Result<bool, ApiError> {
        match self.get(key) {
            None | Some("false" | "0" | "") => Ok(false),
            Some("true" | "1") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "invalid value {other:?} for the query parameter {key}: expected true or false"
            ))),
        }
    }

    fn first_values(&self) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        for (key, value) in &self.pairs {
            map.entry(key.clone()).or_insert_with(|| value.clone());
        }
        map
    }
}

/// The storage's view of the request: caller, namespace, deadline and dry-run.
pub fn request_context(
    settings: &ServerSettings,
    query: &Query,
    info: &ResourceRequest,
    user: &UserInfo,
) -> Result<RequestContext, ApiError> {
    Ok(RequestContext {
        user: user.clone(),
        namespace: info.namespace.clone(),
        deadline: tokio::time::Instant::now() + request_timeout(settings, query)?,
        dry_run: dry_run(query)?,
        query: query.first_values(),
    })
}

/// `?timeout=` (a Go duration), capped at the server's request timeout, which is also the default.
fn request_timeout(settings: &ServerSettings, query: &Query) -> Result<Duration, ApiError> {
    let Some(raw) = query.get("timeout").filter(|t| !t.is_empty()) else {
        return Ok(settings.request_timeout);
    };
    let asked = parse_go_duration(raw).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid timeout {raw:?} in the request URL: expected a duration such as 30s or 1m"
        ))
    })?;
    // 0 means "the default", as kube-apiserver reads it.
    if asked.is_zero() {
        return Ok(settings.request_timeout);
    }
    Ok(asked.min(settings.request_timeout))
}

/// `dryRun=All` (the only value kube-apiserver knows) sets dry-run; any other value is a 422, as kube-apiserver's
/// options validation answers.
fn dry_run(query: &Query) -> Result<bool, ApiError> {
    let mut dry_run = false;
    for value in query.all("dryRun") {
        if value != "All" {
            return Err(ApiError::invalid(format!(
                "invalid dryRun value {value:?}: the only supported value is \"All\""
            )));
        }
        dry_run = true;
    }
    Ok(dry_run)
}

/// A Go `time.Duration` string (`300ms`, `1.5h`, `2h45m`); `None` when malformed, negative or absurdly long.
pub fn parse_go_duration(input: &str) -> Option<Duration> {
    if input == "0" {
        return Some(Duration::ZERO);
    }
    if input.is_empty() {
        return None;
    }
    let mut rest = input;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !c.is_ascii_digit() && c != '.')?;
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += number * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    (total.is_finite() && total < 1e9).then(|| Duration::from_secs_f64(total))
}

/// The body, refused with 413 once it passes [`MAX_BODY_BYTES`].
pub async fn read_body(body: Body) -> Result<Bytes, ApiError> {
    let mut stream = body.into_data_stream();
    let mut collected = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("could not read the request body: {e}")))?;
        if collected.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {MAX_BODY_BYTES}"),
            ));
        }
        collected.extend_from_slice(&chunk);
    }
    Ok(collected.freeze())
}

/// A create or update body: JSON or YAML by `Content-Type`, which must be an object.
pub fn object_body(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let body_type = negotiate::body_type(headers, false)?;
    decode(body_type, body)
}

/// Decodes `body` as `body_type` (patches in JSON are JSON; apply patches are YAML, a superset of JSON) into an
/// object.
pub fn decode(body_type: BodyType, body: &[u8]) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body is empty: an object is required",
        ));
    }
    let value: Value = match body_type {
        BodyType::Yaml | BodyType::ApplyPatch => serde_saphyr::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid YAML: {e}")))?,
        _ => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?,
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be an object (a JSON or YAML mapping)",
        ));
    }
    Ok(value)
}

/// kube-apiserver's answer when a request runs out of time.
pub fn timeout_error() -> ApiError {
    ApiError::timeout(
        "Timeout: request did not complete within requested timeout - context deadline exceeded",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        for bad in ["", "30", "s", "-1s", "1x", "1e400s", "9999999999h"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn timeout_is_capped_at_the_server_setting() {
        let settings = ServerSettings {
            request_timeout: Duration::from_secs(60),
            ..Default::default()
        };
        let query = |q: &str| Query::parse(Some(q));
        assert_eq!(
            request_timeout(&settings, &query("timeout=5s")),
            Ok(Duration::from_secs(5))
        );
        assert_eq!(
            request_timeout(&settings, &query("timeout=1h")),
            Ok(Duration::from_secs(60))
        );
        for default in ["", "timeout=0s", "timeout=0"] {
            assert_eq!(
                request_timeout(&settings, &query(default)),
                Ok(Duration::from_secs(60)),
                "{default}"
            );
        }
        assert_eq!(
            request_timeout(&settings, &query("timeout=soon")).map_err(|e| e.code),
            Err(400)
        );
    }

    #[test]
    fn watch_is_read_as_kube_apiserver_reads_it() {
        for on in ["watch=true", "watch=True", "watch=TRUE", "watch=1"] {
            assert!(Query::parse(Some(on)).watch(), "{on}");
        }
        for off in ["watch=false", "watch=0", "watch=yes", ""] {
            assert!(!Query::parse(Some(off)).watch(), "{off}");
        }
    }

    #[test]
    fn dry_run_accepts_only_all() {
        assert_eq!(dry_run(&Query::parse(Some("dryRun=All"))), Ok(true));
        assert_eq!(dry_run(&Query::parse(None)), Ok(false));
        let err = dry_run(&Query::parse(Some("dryRun=All&dryRun=Some"))).expect_err("bad value");
        assert_eq!((err.code, err.reason), (422, "Invalid"));
    }

    #[test]
    fn bodies_must_be_objects() {
        let json_as_apply =
            br#"{"apiVersion":"g/v1","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"n":[1,2]}}"#;
        assert_eq!(
            decode(BodyType::ApplyPatch, json_as_apply),
            Ok(serde_json::from_slice::<Value>(json_as_apply).unwrap_or_default()),
            "kubectl sends apply patches as JSON"
        );
        assert!(decode(BodyType::Json, br#"{"a":1}"#).is_ok());
        assert_eq!(
            decode(BodyType::Yaml, b"a: 1\n").map(|v| v["a"].clone()),
            Ok(1.into())
        );
        for (body_type, body) in [
            (BodyType::Json, &b"[1]"[..]),
            (BodyType::Json, b"{"),
            (BodyType::Yaml, b"- a"),
            (BodyType::Json, b"  "),
        ] {
            assert_eq!(decode(body_type, body).map_err(|e| e.code), Err(400));
        }
    }

    #[tokio::test]
    async fn oversized_bodies_are_413() {
        let body = Body::from(vec![b' '; MAX_BODY_BYTES + 1]);
        assert_eq!(read_body(body).await.map_err(|e| e.code), Err(413));
        let body = Body::from(vec![b' '; MAX_BODY_BYTES]);
        assert_eq!(read_body(body).await.map(|b| b.len()), Ok(MAX_BODY_BYTES));
    }
}
