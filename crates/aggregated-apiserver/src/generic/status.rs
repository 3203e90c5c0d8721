//! Kubernetes `Status` errors: every failure a client sees is a `meta.k8s.io/v1` Status with the right code and
//! reason, so `kubectl` prints the message and controllers can classify it.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An API error, answered as a `Status` object. Messages must never contain a credential or a Coder URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// The Kubernetes `StatusReason` (`NotFound`, `BadRequest`, ...).
    pub reason: &'static str,
    pub message: String,
    /// `details` of the Status: the object's name, group and kind when the error is about one object.
    pub details: Option<Box<StatusDetails>>,
    /// Seconds a client should wait before retrying (`Retry-After` and `details.retryAfterSeconds`).
    pub retry_after_seconds: Option<u32>,
}

/// The `details` of a Status.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StatusDetails {
    pub name: String,
    pub group: String,
    pub kind: String,
    /// The field errors of a 422 (kubectl prints them after "is invalid").
    pub causes: Vec<StatusCause>,
}

/// One `details.causes` entry: `reason` is kube-apiserver's cause type (`FieldValueInvalid`, ...), `message` the
/// error without its field, `field` the path.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StatusCause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after_seconds: None,
        }
    }

    pub fn with_details(mut self, name: &str, group: &str, kind: &str) -> Self {
        self.details = Some(Box::new(StatusDetails {
            name: name.to_owned(),
            group: group.to_owned(),
            kind: kind.to_owned(),
            causes: Vec::new(),
        }));
        self
    }

    /// The field errors of a 422, in `details.causes` (after [`ApiError::with_details`]).
    pub fn with_causes(mut self, causes: Vec<StatusCause>) -> Self {
        self.details.get_or_insert_with(Default::default).causes = causes;
        self
    }

    pub fn with_retry_after(mut self, seconds: u32) -> Self {
        self.retry_after_seconds = Some(seconds);
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// `<resource>.<group> "<name>" not found`, as kube-apiserver words it.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{resource}.{group} {name:?} not found"))
            .with_details(name, group, resource)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource}.{group} {name:?} already exists"),
        )
        .with_details(name, group, resource)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(409, "Conflict", message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 422: the object is invalid.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        Self::new(429, "TooManyRequests", message).with_retry_after(retry_after_seconds)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// 504: an upstream call (Coder) did not answer in time.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> serde_json::Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = serde_json::Map::new();
        if let Some(d) = &self.details {
            details.insert("name".into(), d.name.clone().into());
            details.insert("group".into(), d.group.clone().into());
            details.insert("kind".into(), d.kind.clone().into());
            if !d.causes.is_empty() {
                let causes: Vec<serde_json::Value> = d
                    .causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
                details.insert("causes".into(), causes.into());
            }
        }
        if let Some(seconds) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), seconds.into());
        }
        if !details.is_empty() {
            status["details"] = details.into();
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.to_status().to_string();
        let mut response = (code, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        if let Some(seconds) = self.retry_after_seconds {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_reads_as_kube_apiserver_words_it() {
        let status = ApiError::not_found("aggregation.coder.com", "coderworkspaces", "a.b.c").to_status();
        assert_eq!(
            status["message"],
            "coderworkspaces.aggregation.coder.com \"a.b.c\" not found"
        );
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["code"], 404);
        assert_eq!(status["details"]["name"], "a.b.c");
    }

    #[test]
    fn field_errors_are_details_causes() {
        let status = ApiError::invalid("x is invalid")
            .with_details("a.b", "aggregation.coder.com", "CoderTemplate")
            .with_causes(vec![StatusCause {
                reason: "FieldValueInvalid",
                message: "Invalid value: \"2x\": bad".into(),
                field: "spec.defaultTTL".into(),
            }])
            .to_status();
        assert_eq!(status["details"]["kind"], "CoderTemplate");
        assert_eq!(
            status["details"]["causes"],
            json!([{"reason": "FieldValueInvalid", "message": "Invalid value: \"2x\": bad", "field": "spec.defaultTTL"}])
        );
        let plain = ApiError::not_found("g", "r", "n").to_status();
        assert!(plain["details"].get("causes").is_none(), "{plain}");
    }

    #[test]
    fn retry_after_is_a_header_and_a_detail() {
        let response = ApiError::too_many_requests("slow down", 5).into_response();
        assert_eq!(response.status(), 429);
        assert_eq!(response.headers()[header::RETRY_AFTER], "5");
        assert_eq!(
            ApiError::too_many_requests("x", 5).to_status()["details"]["retryAfterSeconds"],
            5
        );
    }
}
