//! Waiting for a template version's import job: the `CODER_K8S_TEMPLATE_BUILD_*` settings (read and checked per
//! request, after the upload and the version exist), the polling with back-off, and the Kubernetes errors of a
//! wait that fails (400 for a failed import or the configured timeout, 504 for the request's own deadline).

use std::sync::Arc;
use std::time::Duration;

use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::{CoderClient, redact};
use tokio::time::Instant;
use uuid::Uuid;

use super::errors::{Subject, map_coder_error};
use crate::generic::ApiError;
use crate::generic::handlers::parse_go_duration;

pub const WAIT_TIMEOUT_ENV: &str = "CODER_K8S_TEMPLATE_BUILD_WAIT_TIMEOUT";
pub const BACKOFF_AFTER_ENV: &str = "CODER_K8S_TEMPLATE_BUILD_BACKOFF_AFTER";
pub const INITIAL_POLL_ENV: &str = "CODER_K8S_TEMPLATE_BUILD_INITIAL_POLL_INTERVAL";
pub const MAX_POLL_ENV: &str = "CODER_K8S_TEMPLATE_BUILD_MAX_POLL_INTERVAL";

/// The longest wait the settings may ask for (the aggregated server's longest request).
pub const MAX_WAIT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Reads one setting by name (the process environment in production; a map in tests).
pub type SettingsSource = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The process environment.
pub fn process_environment() -> SettingsSource {
    Arc::new(|name| std::env::var(name).ok())
}

/// How an import is waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitSettings {
    pub wait_timeout: Duration,
    /// Poll at `initial_poll` this long, then double the interval up to `max_poll`; zero: never back off.
    pub backoff_after: Duration,
    pub initial_poll: Duration,
    pub max_poll: Duration,
}

impl Default for WaitSettings {
    fn default() -> Self {
        Self {
            wait_timeout: Duration::from_secs(25 * 60),
            backoff_after: Duration::from_secs(2 * 60),
            initial_poll: Duration::from_secs(2),
            max_poll: Duration::from_secs(10),
        }
    }
}

/// A duration as Go prints one (`2m0s`, `1.5s`, `300ms`), as the settings are written.
pub fn go_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_owned();
    }
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    let total = d.as_secs();
    let (hours, minutes, seconds) = (total / 3600, (total % 3600) / 60, total % 60);
    let millis = d.subsec_millis();
    let seconds = if millis == 0 {
        format!("{seconds}s")
    } else {
        let fraction = format!("{millis:03}");
        format!("{seconds}.{}s", fraction.trim_end_matches('0'))
    };
    match (hours, minutes) {
        (0, 0) => seconds,
        (0, m) => format!("{m}m{seconds}"),
        (h, m) => format!("{h}h{m}m{seconds}"),
    }
}

/// One setting: the default when unset or blank; a negative value is reported as such (Go parses it).
enum Setting {
    Value(Duration),
    Negative(String),
}

fn read(source: &SettingsSource, name: &str, default: Duration) -> Result<Setting, String> {
    let Some(raw) = source(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
    else {
        return Ok(Setting::Value(default));
    };
    if let Some(positive) = raw.strip_prefix('-')
        && parse_go_duration(positive).is_some()
    {
        return Ok(Setting::Negative(raw));
    }
    parse_go_duration(&raw)
        .map(Setting::Value)
        .ok_or_else(|| format!("parse {name}={raw:?}: invalid duration {raw:?}"))
}

fn positive(source: &SettingsSource, name: &str, default: Duration) -> Result<Duration, String> {
    match read(source, name, default)? {
        Setting::Value(d) if !d.is_zero() => Ok(d),
        Setting::Value(d) => Err(format!("{name} must be > 0, got {}", go_duration(d))),
        Setting::Negative(raw) => Err(format!("{name} must be > 0, got {raw}")),
    }
}

impl WaitSettings {
    /// Reads and checks the four settings; the message names the variable at fault.
    pub fn from_source(source: &SettingsSource) -> Result<Self, String> {
        let defaults = Self::default();
        let wait_timeout = positive(source, WAIT_TIMEOUT_ENV, defaults.wait_timeout)?;
        if wait_timeout > MAX_WAIT_TIMEOUT {
            return Err(format!(
                "{WAIT_TIMEOUT_ENV} ({}) must be <= aggregated API request timeout ({})",
                go_duration(wait_timeout),
                go_duration(MAX_WAIT_TIMEOUT)
            ));
        }
        let backoff_after = match read(source, BACKOFF_AFTER_ENV, defaults.backoff_after)? {
            Setting::Value(d) => d,
            Setting::Negative(raw) => return Err(format!("{BACKOFF_AFTER_ENV} must be >= 0, got {raw}")),
        };
        if backoff_after > wait_timeout {
            return Err(format!(
                "{BACKOFF_AFTER_ENV} ({}) must be <= {WAIT_TIMEOUT_ENV} ({})",
                go_duration(backoff_after),
                go_duration(wait_timeout)
            ));
        }
        let initial_poll = positive(source, INITIAL_POLL_ENV, defaults.initial_poll)?;
        let max_poll = positive(source, MAX_POLL_ENV, defaults.max_poll)?;
        if max_poll < initial_poll {
            return Err(format!(
                "{MAX_POLL_ENV} ({}) must be >= {INITIAL_POLL_ENV} ({})",
                go_duration(max_poll),
                go_duration(initial_poll)
            ));
        }
        Ok(Self {
            wait_timeout,
            backoff_after,
            initial_poll,
            max_poll,
        })
    }

    /// The interval after a poll made `elapsed` into the wait, given the interval used so far.
    pub fn next_interval(&self, current: Duration, elapsed: Duration) -> Duration {
        if self.backoff_after.is_zero() || elapsed < self.backoff_after || current >= self.max_poll {
            return current;
        }
        current.saturating_mul(2).min(self.max_poll)
    }
}

/// How a wait ended without success.
#[derive(Debug)]
enum Failure {
    /// The import failed or was canceled.
    Ended { status: JobStatus, detail: String },
    /// The configured wait ran out (`true`) or the request's deadline came first (`false`).
    OutOfTime {
        configured: bool,
        waited: Duration,
        last: JobStatus,
        last_error: String,
    },
}

fn status_name(status: JobStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

impl Failure {
    fn into_api_error(self, version: Uuid) -> ApiError {
        match self {
            Self::Ended { status, detail } => ApiError::bad_request(format!(
                "template version {:?} build ended with status {:?}: {detail}",
                version.to_string(),
                status_name(status)
            )),
            Self::OutOfTime {
                configured,
                waited,
                last,
                last_error,
            } => {
                let last_error = if last_error.is_empty() {
                    String::new()
                } else {
                    format!(", last error: {last_error}")
                };
                let cause = if configured {
                    "template version build wait timeout exceeded"
                } else {
                    "the request deadline was reached"
                };
                let message = format!(
                    "template version {:?} did not succeed within {} (last status: {:?}{last_error}): {cause}",
                    version.to_string(),
                    go_duration(waited),
                    status_name(last)
                );
                if configured {
                    ApiError::bad_request(message)
                } else {
                    ApiError::timeout(message)
                }
            }
        }
    }
}

/// `error` with every one of `secrets` (the values a request read from Secrets) removed from its message and causes,
/// in every form Coder quotes a value in: Coder's text (an import's Terraform error above all) can quote a variable.
pub fn scrubbed(mut error: ApiError, secrets: &[&str]) -> ApiError {
    let scrub = |text: &mut String| *text = redact::scrub_values(text, secrets);
    scrub(&mut error.message);
    if let Some(details) = error.details.as_mut() {
        for cause in &mut details.causes {
            scrub(&mut cause.message);
        }
    }
    error
}

/// Polls template version `version` until its import succeeds. A failed or canceled import is a 400, the
/// configured timeout a 400, the request's `deadline` a 504; a failing poll is mapped as any Coder error.
pub async fn wait_for_import(
    client: &CoderClient,
    settings: &WaitSettings,
    version: Uuid,
    deadline: Instant,
    subject: Subject<'_>,
) -> Result<(), ApiError> {
    let started = Instant::now();
    let configured_end = started + settings.wait_timeout;
    let (end, configured) = if configured_end <= deadline {
        (configured_end, true)
    } else {
        (deadline, false)
    };
    let mut interval = settings.initial_poll;
    let mut last = JobStatus::Unknown;
    let mut last_error = String::new();
    let out_of_time = |last: JobStatus, last_error: String| Failure::OutOfTime {
        configured,
        waited: end.saturating_duration_since(started),
        last,
        last_error,
    };
    loop {
        let polled = match tokio::time::timeout_at(end, client.template_version(version)).await {
            Err(_) => return Err(out_of_time(last, last_error).into_api_error(version)),
            Ok(result) => result.map_err(|e| map_coder_error(&e, subject))?,
        };
        last = polled.job.status;
        last_error = polled.job.error.clone().unwrap_or_default();
        match last {
            JobStatus::Succeeded => return Ok(()),
            JobStatus::Failed | JobStatus::Canceled => {
                let detail = if last_error.is_empty() {
                    "template version build did not succeed".to_owned()
                } else {
                    last_error
                };
                return Err(Failure::Ended { status: last, detail }.into_api_error(version));
            }
            JobStatus::Pending | JobStatus::Running | JobStatus::Canceling | JobStatus::Unknown => {}
        }
        interval = settings.next_interval(interval, started.elapsed());
        if Instant::now() + interval >= end {
            tokio::time::sleep_until(end).await;
            return Err(out_of_time(last, last_error).into_api_error(version));
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn source(pairs: &[(&str, &str)]) -> SettingsSource {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Arc::new(move |name| map.get(name).cloned())
    }

    fn error(pairs: &[(&str, &str)]) -> String {
        WaitSettings::from_source(&source(pairs)).unwrap_err()
    }

    #[test]
    fn unset_or_blank_settings_are_the_defaults() {
        assert_eq!(
            WaitSettings::from_source(&source(&[])).unwrap(),
            WaitSettings::default()
        );
        assert_eq!(
            WaitSettings::from_source(&source(&[(WAIT_TIMEOUT_ENV, "  ")])).unwrap(),
            WaitSettings::default()
        );
        let custom = WaitSettings::from_source(&source(&[
            (WAIT_TIMEOUT_ENV, "30m"),
            (BACKOFF_AFTER_ENV, "0"),
            (INITIAL_POLL_ENV, "10ms"),
            (MAX_POLL_ENV, "10ms"),
        ]))
        .unwrap();
        assert_eq!(custom.wait_timeout, MAX_WAIT_TIMEOUT);
        assert_eq!(custom.backoff_after, Duration::ZERO);
        assert_eq!(custom.max_poll, Duration::from_millis(10));
    }

    #[test]
    fn each_rule_names_the_variable() {
        assert_eq!(
            error(&[(WAIT_TIMEOUT_ENV, "0s")]),
            format!("{WAIT_TIMEOUT_ENV} must be > 0, got 0s")
        );
        assert_eq!(
            error(&[(WAIT_TIMEOUT_ENV, "-1s")]),
            format!("{WAIT_TIMEOUT_ENV} must be > 0, got -1s")
        );
        assert_eq!(
            error(&[(WAIT_TIMEOUT_ENV, "31m")]),
            format!("{WAIT_TIMEOUT_ENV} (31m0s) must be <= aggregated API request timeout (30m0s)")
        );
        assert_eq!(
            error(&[(WAIT_TIMEOUT_ENV, "soon")]),
            format!("parse {WAIT_TIMEOUT_ENV}=\"soon\": invalid duration \"soon\"")
        );
        assert_eq!(
            error(&[(BACKOFF_AFTER_ENV, "-2s")]),
            format!("{BACKOFF_AFTER_ENV} must be >= 0, got -2s")
        );
        assert_eq!(
            error(&[(WAIT_TIMEOUT_ENV, "1m"), (BACKOFF_AFTER_ENV, "2m")]),
            format!("{BACKOFF_AFTER_ENV} (2m0s) must be <= {WAIT_TIMEOUT_ENV} (1m0s)")
        );
        assert_eq!(
            error(&[(INITIAL_POLL_ENV, "0")]),
            format!("{INITIAL_POLL_ENV} must be > 0, got 0s")
        );
        assert_eq!(
            error(&[(INITIAL_POLL_ENV, "3s"), (MAX_POLL_ENV, "1.5s")]),
            format!("{MAX_POLL_ENV} (1.5s) must be >= {INITIAL_POLL_ENV} (3s)")
        );
    }

    #[test]
    fn polling_backs_off_only_after_the_backoff_time() {
        let settings = WaitSettings::default();
        let two = Duration::from_secs(2);
        assert_eq!(settings.next_interval(two, Duration::from_secs(119)), two);
        assert_eq!(
            settings.next_interval(two, Duration::from_secs(120)),
            Duration::from_secs(4)
        );
        assert_eq!(
            settings.next_interval(Duration::from_secs(8), Duration::from_secs(200)),
            Duration::from_secs(10)
        );
        assert_eq!(
            settings.next_interval(Duration::from_secs(10), Duration::from_secs(200)),
            Duration::from_secs(10)
        );
        let never = WaitSettings {
            backoff_after: Duration::ZERO,
            ..settings
        };
        assert_eq!(never.next_interval(two, Duration::from_secs(1000)), two);
    }

    #[test]
    fn durations_print_as_go_prints_them() {
        assert_eq!(go_duration(Duration::from_secs(25 * 60)), "25m0s");
        assert_eq!(go_duration(Duration::from_millis(120)), "120ms");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_secs(3600 + 61)), "1h1m1s");
        assert_eq!(go_duration(Duration::ZERO), "0s");
    }

    #[test]
    fn secret_values_are_scrubbed_from_coder_text_in_every_quoted_form() {
        let secrets = ["hunter2\n", "a\"b\\c\u{1}"];
        let job_error = "variable \"db\": value \"hunter2\\n\" is invalid; raw hunter2\n and trimmed hunter2; \
                         go \"a\\\"b\\\\c\\x01\" json \"a\\\"b\\\\c\\u0001\"";
        let error = Failure::Ended {
            status: JobStatus::Failed,
            detail: job_error.into(),
        }
        .into_api_error(Uuid::from_u128(5));
        let out = scrubbed(error, &secrets).message;
        for leak in ["hunter2", "a\\\"b", "b\\\\c"] {
            assert!(!out.contains(leak), "{leak:?} in {out}");
        }
        assert!(
            out.ends_with(
                "variable \"db\": value \"[redacted]\" is invalid; raw [redacted] and trimmed [redacted]; go \"[redacted]\" json \"[redacted]\""
            ),
            "{out}"
        );
        assert_eq!(
            scrubbed(ApiError::bad_request("boom"), &[""]).message,
            "boom",
            "an empty value redacts nothing"
        );
    }

    #[test]
    fn wait_failures_become_400_or_504() {
        let id = Uuid::from_u128(5);
        let failed = Failure::Ended {
            status: JobStatus::Failed,
            detail: "boom".into(),
        }
        .into_api_error(id);
        assert_eq!(failed.code, 400);
        assert_eq!(
            failed.message,
            format!("template version \"{id}\" build ended with status \"failed\": boom")
        );
        let configured = Failure::OutOfTime {
            configured: true,
            waited: Duration::from_millis(120),
            last: JobStatus::Pending,
            last_error: String::new(),
        }
        .into_api_error(id);
        assert_eq!(configured.code, 400);
        assert!(
            configured
                .message
                .contains("did not succeed within 120ms (last status: \"pending\")")
        );
        let deadline = Failure::OutOfTime {
            configured: false,
            waited: Duration::from_secs(30),
            last: JobStatus::Running,
            last_error: "slow".into(),
        }
        .into_api_error(id);
        assert_eq!(deadline.code, 504);
        assert!(
            deadline
                .message
                .contains("(last status: \"running\", last error: slow)")
        );
    }
}
