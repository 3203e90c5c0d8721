//! Coder client errors as Kubernetes `Status` errors: the status code of Coder's answer decides the reason, and a
//! Coder call that runs out of time is a 504 on every resource. Messages carry Coder's own text (already cleaned of
//! credentials by the client), never the Coder URL.

use std::future::Future;

use coder_k8s_coder_client::{Error as CoderError, UnavailableReason};

use crate::generic::ApiError;

/// Retry-After of a Coder 429 that did not say how long to wait.
const DEFAULT_RETRY_AFTER_SECONDS: u32 = 1;

/// What a Coder call was about: the API group, the resource (plural) and the object name (empty for lists).
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub name: &'a str,
}

impl Subject<'_> {
    /// `<resource>.<group> "<name>"`, or `<resource>.<group>` for a list.
    fn describe(&self) -> String {
        if self.name.is_empty() {
            format!("{}.{}", self.resource, self.group)
        } else {
            format!("{}.{} {:?}", self.resource, self.group, self.name)
        }
    }
}

/// Maps a Coder error: 404 → NotFound, 403 → Forbidden, 409 → AlreadyExists when Coder says the object already
/// exists else Conflict, 400/422 → BadRequest, 401 → Unauthorized, 429 → TooManyRequests, any other 4xx →
/// BadRequest, a timeout (the client's or Coder's own 504) → 504, everything else → InternalError.
pub fn map_coder_error(error: &CoderError, subject: Subject<'_>) -> ApiError {
    let message = error.message().trim();
    match error {
        CoderError::NotFound { .. } => ApiError::not_found(subject.group, subject.resource, subject.name),
        CoderError::Forbidden { .. } => ApiError::forbidden(format!(
            "{} is forbidden: {message}",
            subject.describe()
        ))
        .with_details(subject.name, subject.group, subject.resource),
        CoderError::Conflict { .. } if message.to_lowercase().contains("already exists") => {
            ApiError::already_exists(subject.group, subject.resource, subject.name)
        }
        CoderError::Conflict { .. } => ApiError::conflict(format!(
            "Operation cannot be fulfilled on {}: {message}",
            subject.describe()
        ))
        .with_details(subject.name, subject.group, subject.resource),
        CoderError::Unauthorized { .. } => ApiError::new(401, "Unauthorized", message),
        CoderError::RateLimited { retry_after, .. } => {
            let seconds = retry_after
                .map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX).max(1))
                .unwrap_or(DEFAULT_RETRY_AFTER_SECONDS);
            ApiError::too_many_requests(message, seconds)
        }
        CoderError::Rejected { status, .. } if (400..500).contains(status) => ApiError::bad_request(message),
        CoderError::Unavailable {
            reason: UnavailableReason::Timeout,
            ..
        }
        | CoderError::Unavailable {
            status: Some(504), ..
        } => timed_out(subject),
        // Transport failures may quote the URL: only the kind of failure is passed on.
        CoderError::Unavailable { reason, status, .. } => {
            let status = status.map(|s| format!(", status {s}")).unwrap_or_default();
            ApiError::internal(format!(
                "Internal error occurred: Coder is unavailable ({reason}{status})"
            ))
        }
        CoderError::Rejected { status, .. } => ApiError::internal(format!(
            "Internal error occurred: Coder answered with status {status}: {message}"
        )),
        CoderError::RedirectRefused { .. } => ApiError::internal(
            "Internal error occurred: refusing redirect to a different origin than the coder URL",
        ),
        other => ApiError::internal(format!("Internal error occurred: {other}")),
    }
}

/// The 504 of a Coder call that ran out of time (the message never names the Coder URL).
pub fn timed_out(subject: Subject<'_>) -> ApiError {
    ApiError::timeout(format!(
        "the Coder API did not answer in time for {}; if this was a write, read the object again before retrying",
        subject.describe()
    ))
}

/// Runs a Coder call within the request's deadline: the call's own error is mapped, and a deadline that passes first
/// is a 504.
pub async fn within<T>(
    deadline: tokio::time::Instant,
    subject: Subject<'_>,
    call: impl Future<Output = Result<T, CoderError>>,
) -> Result<T, ApiError> {
    match tokio::time::timeout_at(deadline, call).await {
        Ok(result) => result.map_err(|e| map_coder_error(&e, subject)),
        Err(_) => Err(timed_out(subject)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const WORKSPACE: Subject<'static> = Subject {
        group: "aggregation.coder.com",
        resource: "coderworkspaces",
        name: "acme.alice.dev",
    };

    fn map(error: CoderError) -> ApiError {
        map_coder_error(&error, WORKSPACE)
    }

    fn rejected(status: u16, message: &str) -> CoderError {
        CoderError::Rejected {
            status,
            message: message.to_owned(),
        }
    }

    #[test]
    fn not_found_names_the_object() {
        let error = map(CoderError::NotFound {
            message: "Resource not found".into(),
        });
        assert_eq!((error.code, error.reason), (404, "NotFound"));
        assert_eq!(
            error.message,
            r#"coderworkspaces.aggregation.coder.com "acme.alice.dev" not found"#
        );
    }

    #[test]
    fn forbidden_keeps_coders_reason() {
        let error = map(CoderError::Forbidden {
            message: "Forbidden.".into(),
        });
        assert_eq!((error.code, error.reason), (403, "Forbidden"));
        assert!(
            error.message.ends_with("is forbidden: Forbidden."),
            "{}",
            error.message
        );
    }

    #[test]
    fn conflict_is_already_exists_only_when_coder_says_so() {
        let exists = map(CoderError::Conflict {
            message: "Workspace \"dev\" Already Exists.".into(),
        });
        assert_eq!((exists.code, exists.reason), (409, "AlreadyExists"));
        let busy = map(CoderError::Conflict {
            message: "A build is active.".into(),
        });
        assert_eq!((busy.code, busy.reason), (409, "Conflict"));
        assert!(busy.message.contains("A build is active."));
    }

    #[test]
    fn bad_input_and_other_client_errors_are_bad_requests() {
        for status in [400, 422, 405, 410] {
            let error = map(rejected(status, "Validation failed."));
            assert_eq!((error.code, error.reason), (400, "BadRequest"), "{status}");
            assert_eq!(error.message, "Validation failed.");
        }
    }

    #[test]
    fn unauthorized_and_rate_limits_keep_their_status() {
        let error = map(CoderError::Unauthorized {
            message: "Invalid session token.".into(),
        });
        assert_eq!(
            (error.code, error.reason, error.message.as_str()),
            (401, "Unauthorized", "Invalid session token.")
        );
        let limited = map(CoderError::RateLimited {
            retry_after: Some(Duration::from_secs(7)),
            message: "Too many requests.".into(),
        });
        assert_eq!((limited.code, limited.reason), (429, "TooManyRequests"));
        assert_eq!(limited.retry_after_seconds, Some(7));
        let unspecified = map(CoderError::RateLimited {
            retry_after: None,
            message: String::new(),
        });
        assert_eq!(unspecified.retry_after_seconds, Some(1));
    }

    #[test]
    fn timeouts_are_504_without_the_url() {
        for error in [
            CoderError::Unavailable {
                reason: UnavailableReason::Timeout,
                status: None,
                message: "operation timed out calling http://coder.example.com/api/v2/workspaces".into(),
            },
            CoderError::Unavailable {
                reason: UnavailableReason::ServerError,
                status: Some(504),
                message: "Gateway Timeout".into(),
            },
        ] {
            let mapped = map(error);
            assert_eq!((mapped.code, mapped.reason), (504, "Timeout"));
            assert!(!mapped.message.contains("http"), "{}", mapped.message);
        }
    }

    #[test]
    fn everything_else_is_an_internal_error_without_transport_text() {
        let mapped = map(CoderError::Unavailable {
            reason: UnavailableReason::Connect,
            status: None,
            message: "error sending request for url (http://coder.example.com/api/v2)".into(),
        });
        assert_eq!((mapped.code, mapped.reason), (500, "InternalError"));
        assert!(
            !mapped.message.contains("coder.example.com"),
            "{}",
            mapped.message
        );
        let server_error = map(CoderError::Unavailable {
            reason: UnavailableReason::ServerError,
            status: Some(500),
            message: "boom".into(),
        });
        assert_eq!(server_error.code, 500);
        assert_eq!(map(rejected(302, "moved")).code, 500);
        assert_eq!(
            map(CoderError::Decode {
                message: "expected value".into()
            })
            .code,
            500
        );
    }

    #[tokio::test]
    async fn a_call_past_the_deadline_is_a_504() {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(20);
        let slow = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, CoderError>(())
        };
        let error = within(deadline, WORKSPACE, slow).await.unwrap_err();
        assert_eq!(error.code, 504);
        let fast = within(deadline, WORKSPACE, async { Ok::<_, CoderError>(3) }).await;
        assert_eq!(fast.unwrap(), 3);
    }
}
