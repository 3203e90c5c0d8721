//! The request log: every request, in arrival order, with its final status.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::auth::session_token;
use crate::state::{App, lock};

/// One request the server received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// The session token as sent (cookie, query parameter or header).
    pub session_token: Option<String>,
    /// `X-Coder-Bypass-Ratelimit: true` was sent.
    pub bypass_ratelimit: bool,
    /// The response status; 0 while in flight or when the connection was dropped (`Fault::DropConnection`).
    pub status: u16,
}

/// Marks a response whose connection is dropped instead of answered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dropped;

pub(crate) async fn record(State(app): State<App>, request: Request, next: Next) -> Response {
    let entry = RecordedRequest {
        method: request.method().to_string(),
        path: request.uri().path().to_owned(),
        query: request.uri().query().map(str::to_owned),
        session_token: session_token(request.headers(), request.uri()),
        bypass_ratelimit: request
            .headers()
            .get("X-Coder-Bypass-Ratelimit")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("true")),
        status: 0,
    };
    let index = {
        let mut requests = lock(&app.requests);
        requests.push(entry.clone());
        requests.len() - 1
    };
    let response = next.run(request).await;
    if response.extensions().get::<Dropped>().is_none() {
        let mut requests = lock(&app.requests);
        // clear_requests may have run meanwhile: only update the same entry.
        if let Some(slot) = requests.get_mut(index).filter(|r| **r == entry) {
            slot.status = response.status().as_u16();
        }
    }
    response
}
