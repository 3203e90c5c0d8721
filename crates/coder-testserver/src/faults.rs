//! Fault injection, applied before routing: the first rule matching method + path prefix fires
//! (`times` counts down; `None` = always).

use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::conn::ConnHandle;
use crate::errors::{error_body, json_response};
use crate::recording::Dropped;
use crate::routes::add_standard_headers;
use crate::state::{App, lock};

/// A fault to inject for matching requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRule {
    /// HTTP method (case-insensitive); `None` = any.
    pub method: Option<String>,
    /// Matches request paths starting with this (e.g. `/api/v2/users/me`).
    pub path_prefix: String,
    pub fault: Fault,
    /// How many times the rule fires; `None` = always.
    pub times: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Wait, then answer normally.
    Latency(Duration),
    /// This status (5xx) with Coder's JSON error body.
    ServerError(u16),
    /// 429 with Coder's JSON body and `Retry-After`.
    RateLimited { retry_after_secs: u64 },
    /// 404 `text/html` as a reverse proxy in front of Coder answers; no `X-Coder-Build-Version`.
    ProxyNotFound,
    /// 404 JSON `{"message":"Route not found."}`.
    RouteNotFound,
    /// 403 `Forbidden.` with Coder's detail, as for a caller that lacks a role.
    Forbidden,
    /// 307 to this URL with the request path and query appended (the URL's own path is a prefix).
    RedirectTo(url::Url),
    /// Close the connection without a response.
    DropConnection,
    /// Handle the request normally (its effects happen), then answer this 5xx with Coder's JSON error body instead:
    /// a gateway in front of Coder that fails after Coder accepted a write.
    FailAfterHandling(u16),
    /// Handle the request normally (its effects happen), then close the connection without an answer: the caller
    /// cannot know whether its write was applied.
    DropAfterHandling,
    /// Hold the request this long, then answer 504 without handling it: the request never takes effect (a caller
    /// that dies while waiting left nothing behind in Coder).
    HoldThenFail(Duration),
    /// Handle the request normally (its effects happen), then hold the answer this long: a caller that dies while
    /// waiting never learns what was created.
    HandleThenHold(Duration),
    /// Exactly this answer: status, extra headers (sent as given, also hostile values) and a JSON body, with
    /// Coder's standard headers.
    Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: serde_json::Value,
    },
}

impl FaultRule {
    fn matches(&self, method: &str, path: &str) -> bool {
        self.times != Some(0)
            && path.starts_with(&self.path_prefix)
            && self
                .method
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case(method))
    }
}

fn take_fault(app: &App, method: &str, path: &str) -> Option<Fault> {
    let mut rules = lock(&app.faults);
    let rule = rules.iter_mut().find(|r| r.matches(method, path))?;
    if let Some(times) = rule.times.as_mut() {
        *times -= 1;
    }
    Some(rule.fault.clone())
}

pub(crate) async fn apply_faults(State(app): State<App>, request: Request, next: Next) -> Response {
    let fault = take_fault(&app, request.method().as_str(), request.uri().path());
    let mut response = match fault {
        None => return next.run(request).await,
        Some(Fault::Latency(delay)) => {
            tokio::time::sleep(delay).await;
            return next.run(request).await;
        }
        Some(Fault::ProxyNotFound) => {
            let mut response = (
                StatusCode::NOT_FOUND,
                "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
            )
                .into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
            return response;
        }
        Some(Fault::ServerError(code)) => {
            let status = StatusCode::from_u16(code)
                .ok()
                .filter(|s| s.is_server_error())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = error_body(
                "An internal server error occurred.",
                Some(&format!("injected fault: status {}", status.as_u16())),
                &[],
            );
            json_response(status, &body)
        }
        Some(Fault::RateLimited { retry_after_secs }) => {
            let body = json!({
                "message": "You've been rate limited for sending more than 512 requests in 1m0s."
            });
            let mut response = json_response(StatusCode::TOO_MANY_REQUESTS, &body);
            let reset = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs()
                .saturating_add(retry_after_secs);
            let headers = response.headers_mut();
            headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
            headers.insert("X-RateLimit-Limit", HeaderValue::from_static("512"));
            headers.insert("X-RateLimit-Remaining", HeaderValue::from_static("0"));
            headers.insert("X-RateLimit-Reset", HeaderValue::from(reset));
            response
        }
        Some(Fault::Forbidden) => {
            let body = error_body("Forbidden.", Some(crate::errors::FORBIDDEN_DETAIL), &[]);
            json_response(StatusCode::FORBIDDEN, &body)
        }
        Some(Fault::RouteNotFound) => {
            json_response(StatusCode::NOT_FOUND, &json!({"message": "Route not found."}))
        }
        Some(Fault::RedirectTo(target)) => {
            let mut location = target.as_str().trim_end_matches('/').to_owned();
            location.push_str(request.uri().path());
            if let Some(query) = request.uri().query() {
                location.push('?');
                location.push_str(query);
            }
            let mut response = StatusCode::TEMPORARY_REDIRECT.into_response();
            if let Ok(value) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            response
        }
        Some(Fault::Answer {
            status,
            headers,
            body,
        }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = json_response(status, &body);
            for (name, value) in headers {
                if let (Ok(name), Ok(value)) = (
                    header::HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(&value),
                ) {
                    response.headers_mut().append(name, value);
                }
            }
            response
        }
        Some(Fault::HoldThenFail(delay)) => {
            tokio::time::sleep(delay).await;
            let body = error_body(
                "Gateway timeout.",
                Some("injected fault: held, never handled"),
                &[],
            );
            return json_response(StatusCode::GATEWAY_TIMEOUT, &body);
        }
        Some(Fault::HandleThenHold(delay)) => {
            let handled = next.run(request).await;
            tokio::time::sleep(delay).await;
            return handled;
        }
        Some(Fault::FailAfterHandling(code)) => {
            // The answer is thrown away: only the status of the gateway reaches the caller.
            let _handled = next.run(request).await;
            let status = StatusCode::from_u16(code)
                .ok()
                .filter(|s| s.is_server_error())
                .unwrap_or(StatusCode::BAD_GATEWAY);
            let body = error_body(
                "An internal server error occurred.",
                Some(&format!(
                    "injected fault after handling: status {}",
                    status.as_u16()
                )),
                &[],
            );
            json_response(status, &body)
        }
        Some(Fault::DropAfterHandling) => {
            let connection = request.extensions().get::<ConnectInfo<ConnHandle>>().cloned();
            let _handled = next.run(request).await;
            if let Some(ConnectInfo(conn)) = connection {
                conn.kill();
            }
            let mut response = StatusCode::INTERNAL_SERVER_ERROR.into_response();
            response.extensions_mut().insert(Dropped);
            return response;
        }
        Some(Fault::DropConnection) => {
            if let Some(ConnectInfo(conn)) = request.extensions().get::<ConnectInfo<ConnHandle>>() {
                conn.kill();
            }
            let mut response = StatusCode::INTERNAL_SERVER_ERROR.into_response();
            response.extensions_mut().insert(Dropped);
            return response;
        }
    };
    add_standard_headers(&app, &mut response);
    response
}
