//! Coder's error bodies (`codersdk.Response`: `message`, `detail`, `validations`) and JSON response helpers.

use std::fmt::Display;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub(crate) const JSON_CONTENT_TYPE: &str = "application/json; charset=utf-8";
pub(crate) const NOT_FOUND: &str = "Resource not found or you do not have access to this resource";
/// The validation detail of a 409 for a name that is taken.
pub(crate) const IN_USE: &str = "This value is already in use and should be unique.";
pub(crate) const FORBIDDEN_DETAIL: &str = "You don't have permission to view this content. If you believe this is a mistake, please contact your administrator or try signing in with different credentials.";

/// A JSON response with Coder's content type.
pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON_CONTENT_TYPE));
    response
}

pub(crate) fn ok(body: Value) -> ApiResult {
    Ok(json_response(StatusCode::OK, &body))
}

pub(crate) fn created(body: Value) -> ApiResult {
    Ok(json_response(StatusCode::CREATED, &body))
}

pub(crate) fn no_content() -> ApiResult {
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `{message, detail?, validations?}`.
pub(crate) fn error_body(message: &str, detail: Option<&str>, validations: &[(String, String)]) -> Value {
    let mut body = json!({ "message": message });
    if let Some(detail) = detail.filter(|d| !d.is_empty()) {
        body["detail"] = json!(detail);
    }
    if !validations.is_empty() {
        body["validations"] = validations
            .iter()
            .map(|(field, detail)| json!({ "field": field, "detail": detail }))
            .collect();
    }
    body
}

/// An error answer: a Coder JSON error, or a plain-text body (`http.Error`).
#[derive(Debug)]
pub(crate) enum ApiError {
    Json {
        status: StatusCode,
        message: String,
        detail: Option<String>,
        validations: Vec<(String, String)>,
    },
    Text {
        status: StatusCode,
        text: String,
    },
}

pub(crate) type ApiResult = Result<Response, ApiError>;

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self::Json {
            status,
            message: message.into(),
            detail: None,
            validations: Vec::new(),
        }
    }

    pub(crate) fn detail(mut self, text: impl Into<String>) -> Self {
        if let Self::Json { detail, .. } = &mut self {
            *detail = Some(text.into());
        }
        self
    }

    /// Replaces the message.
    pub(crate) fn retitle(mut self, text: impl Into<String>) -> Self {
        if let Self::Json { message, .. } = &mut self {
            *message = text.into();
        }
        self
    }

    pub(crate) fn validation(mut self, field: &str, text: impl Into<String>) -> Self {
        if let Self::Json { validations, .. } = &mut self {
            validations.push((field.to_owned(), text.into()));
        }
        self
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub(crate) fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, NOT_FOUND)
    }

    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    pub(crate) fn forbidden() -> Self {
        Self::new(StatusCode::FORBIDDEN, "Forbidden.").detail(FORBIDDEN_DETAIL)
    }

    pub(crate) fn internal(err: impl Display) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "An internal server error occurred.",
        )
        .detail(err.to_string())
    }

    /// 400 `Validation failed.` for a `validate:"required"` field that is empty.
    pub(crate) fn required(field: &str) -> Self {
        Self::bad_request("Validation failed.")
            .validation(field, "Validation failed for tag \"required\" with value: \"\"")
    }

    /// 400 `Validation failed.` with one validation per `(field, tag, value)`, as Coder's `httpapi.Read` answers a
    /// body that fails its `validate` tags (every failing field, in the request type's field order).
    pub(crate) fn validation_failed(failures: &[(&str, &str, &str)]) -> Self {
        failures.iter().fold(
            Self::bad_request("Validation failed."),
            |error, (field, tag, value)| error.validation(field, tag_failure(tag, value)),
        )
    }

    pub(crate) fn text(status: StatusCode, text: impl Into<String>) -> Self {
        Self::Text {
            status,
            text: text.into(),
        }
    }

    /// 400 `Invalid UUID "<x>".` as Coder's UUID path parameter parsing answers.
    pub(crate) fn invalid_uuid(value: &str) -> Self {
        Self::bad_request(format!("Invalid UUID {value:?}.")).detail("invalid UUID format")
    }
}

impl From<tokio_postgres::Error> for ApiError {
    fn from(err: tokio_postgres::Error) -> Self {
        Self::internal(err)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            Self::Json {
                status,
                message,
                detail,
                validations,
            } => json_response(status, &error_body(&message, detail.as_deref(), &validations)),
            Self::Text { status, text } => {
                let mut response = (status, text).into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                response
            }
        }
    }
}

/// The detail of a failed `validate` tag: `Validation failed for tag "<tag>" with value: "<value>"` (Go's `%q` for
/// the tag, the value as is).
pub(crate) fn tag_failure(tag: &str, value: &str) -> String {
    format!("Validation failed for tag {tag:?} with value: \"{value}\"")
}

/// Parses a UUID path parameter.
pub(crate) fn parse_uuid(value: &str) -> Result<uuid::Uuid, ApiError> {
    uuid::Uuid::parse_str(value).map_err(|_| ApiError::invalid_uuid(value))
}
