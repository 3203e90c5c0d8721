//! The status of a CoderTemplateTest as the outcome of one step (docs/controllers/template-test.md): a wait keeps
//! the test Pending (or Running once a create may have been sent), a failure makes it Failed, a success makes it
//! Succeeded. The conditions `Ready`, `Reconciling`, `Stalled` and `WorkspaceDeleted` follow from the step; the
//! message is cut to 256 bytes and never holds Coder's own texts.

use std::time::Duration;

use coder_k8s_api::template_test::{CoderTemplateTestStatus, TemplateTestPhase, conditions, reasons};
use coder_k8s_coder_client::Error as CoderError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::desired::MAX_MESSAGE_BYTES;
use crate::conditions::{ConditionStatus, Decided, set_condition};

/// What a step decided about the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Keep waiting (Pending or Running).
    Wait,
    /// The test failed.
    Fail,
    /// The agents were ready and the delete build succeeded.
    Succeed,
}

/// The outcome of one reconcile step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: Verdict,
    pub reason: &'static str,
    pub message: String,
    /// Overrides the `WorkspaceDeleted` condition.
    pub deleted: Option<(ConditionStatus, &'static str)>,
    /// Coder answered 429 (with its `Retry-After`): the requeue backs off.
    pub rate_limited: Option<Option<Duration>>,
    /// Look again after this long instead of the phase's poll interval.
    pub requeue: Option<Duration>,
}

impl Outcome {
    fn new(verdict: Verdict, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            verdict,
            reason,
            message: message.into(),
            deleted: None,
            rate_limited: None,
            requeue: None,
        }
    }

    pub fn wait(reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(Verdict::Wait, reason, message)
    }

    pub fn fail(reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(Verdict::Fail, reason, message)
    }

    pub fn succeed(message: impl Into<String>) -> Self {
        let mut step = Self::new(Verdict::Succeed, reasons::SUCCEEDED, message);
        step.deleted = Some((ConditionStatus::True, reasons::DELETED));
        step
    }

    /// The same step with `WorkspaceDeleted` set to `status` / `reason`.
    pub fn with_deleted(mut self, status: ConditionStatus, reason: &'static str) -> Self {
        self.deleted = Some((status, reason));
        self
    }

    /// Whether the step ends the run.
    pub fn is_final(&self) -> bool {
        self.verdict != Verdict::Wait
    }
}

/// A Coder call failed: wait as `CoderUnavailable`. The message names the call and the HTTP status or the kind
/// of failure, never Coder's text (it can hold details of the workspace or template).
pub fn coder_unavailable(action: &str, error: &CoderError) -> Outcome {
    let summary = match error.status() {
        Some(status) => format!("Coder answered {status}"),
        None => format!("Coder could not be reached ({})", error.category()),
    };
    let mut step = Outcome::wait(reasons::CODER_UNAVAILABLE, format!("{action}: {summary}."));
    if let CoderError::RateLimited { retry_after, .. } = error {
        step.rate_limited = Some(*retry_after);
    }
    step
}

/// The run passed `timeoutSeconds`; the message names the last wait.
pub fn deadline_exceeded(timeout_seconds: i32, last_reason: &str, last_message: &str) -> Outcome {
    Outcome::fail(
        reasons::DEADLINE_EXCEEDED,
        format!(
            "The test did not finish within {timeout_seconds}s. Last wait: {last_reason}: {last_message}"
        ),
    )
}

/// `message` cut to at most 256 bytes at a character boundary.
pub fn bounded(message: &str) -> String {
    crate::digest::byte_prefix(message, MAX_MESSAGE_BYTES).to_owned()
}

/// Seconds as `45s`, `2m13s` or `1h0m5s` (the printer column `Duration`).
pub fn duration_text(seconds: i64) -> String {
    let seconds = seconds.max(0);
    let (hours, minutes, rest) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
    match (hours, minutes) {
        (0, 0) => format!("{rest}s"),
        (0, _) => format!("{minutes}m{rest}s"),
        _ => format!("{hours}h{minutes}m{rest}s"),
    }
}

/// Whether a create request may have been sent, so a workspace of this test can exist in Coder.
pub fn may_have_workspace(status: &CoderTemplateTestStatus) -> bool {
    status.create_attempt_time.is_some() || status.workspace_id.is_some()
}

/// Whether the phase is final.
pub fn is_final(status: &CoderTemplateTestStatus) -> bool {
    matches!(
        status.phase,
        Some(TemplateTestPhase::Succeeded | TemplateTestPhase::Failed)
    )
}

/// The `WorkspaceDeleted` condition's status and reason, if set.
pub fn workspace_deleted(status: &CoderTemplateTestStatus) -> Option<(String, String)> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::WORKSPACE_DELETED)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// Whether the finalizer may go: the workspace is gone (`WorkspaceDeleted=True`), retained on purpose, or out of
/// reach for good because the control plane is gone.
pub fn cleanup_done(status: &CoderTemplateTestStatus) -> bool {
    match workspace_deleted(status) {
        Some((s, _)) if s == "True" => true,
        Some((_, reason)) => reason == reasons::RETAINED || reason == reasons::CONTROL_PLANE_GONE,
        None => !may_have_workspace(status),
    }
}

/// The first status of a run: Pending, `Initializing`, with its start time.
pub fn initialize(status: &mut CoderTemplateTestStatus, now: Time, generation: Option<i64>) {
    status.start_time = Some(now.clone());
    apply(
        status,
        &Outcome::wait(reasons::INITIALIZING, "The controller started the test."),
        now,
        generation,
    );
}

/// Sets `WorkspaceDeleted` alone (cleanup progress after the run ended).
pub fn set_workspace_deleted(
    status: &mut CoderTemplateTestStatus,
    (state, reason): (ConditionStatus, &'static str),
    message: &str,
    now: Time,
    generation: Option<i64>,
) {
    let decided = Decided::new(conditions::WORKSPACE_DELETED, state, reason, bounded(message));
    set_condition(&mut status.conditions, decided, generation, now);
}

/// Applies `step` to `status`: phase, reason, message, completion time and the four conditions.
pub fn apply(status: &mut CoderTemplateTestStatus, step: &Outcome, now: Time, generation: Option<i64>) {
    let message = bounded(&step.message);
    status.reason = Some(step.reason.to_owned());
    status.message = Some(message.clone());
    let (phase, ready, reconciling, stalled) = match step.verdict {
        Verdict::Wait if may_have_workspace(status) => (TemplateTestPhase::Running, false, true, false),
        Verdict::Wait => (TemplateTestPhase::Pending, false, true, false),
        Verdict::Fail => (TemplateTestPhase::Failed, false, false, true),
        Verdict::Succeed => (TemplateTestPhase::Succeeded, true, false, false),
    };
    status.phase = Some(phase);
    if step.is_final() && status.completion_time.is_none() {
        status.completion_time = Some(now.clone());
        status.duration = status
            .start_time
            .as_ref()
            .map(|start| duration_text(now.0.duration_since(start.0).as_secs()));
    }
    let flag = |on: bool| {
        if on {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    };
    for (type_, on) in [
        (conditions::READY, ready),
        (conditions::RECONCILING, reconciling),
        (conditions::STALLED, stalled),
    ] {
        let decided = Decided::new(type_, flag(on), step.reason, message.clone());
        set_condition(&mut status.conditions, decided, generation, now.clone());
    }
    let deleted = match (step.deleted, step.verdict) {
        (Some(deleted), _) => Some(deleted),
        (None, Verdict::Wait) => None,
        (None, _) if may_have_workspace(status) => Some((ConditionStatus::False, reasons::CLEANUP_PENDING)),
        (None, _) => Some((ConditionStatus::True, reasons::NOT_CREATED)),
    };
    if let Some(deleted) = deleted {
        let text = match deleted.1 {
            reasons::CLEANUP_PENDING => "The workspace can exist. The controller deletes it.",
            reasons::NOT_CREATED => "The controller never sent a workspace create request.",
            _ => message.as_str(),
        };
        set_workspace_deleted(status, deleted, text, now, generation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn now() -> Time {
        Time(Timestamp::UNIX_EPOCH)
    }

    fn condition(status: &CoderTemplateTestStatus, type_: &str) -> (String, String) {
        let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn the_duration_reads_like_kubectls() {
        assert_eq!(duration_text(45), "45s");
        assert_eq!(duration_text(133), "2m13s");
        assert_eq!(duration_text(3605), "1h0m5s");
        assert_eq!(duration_text(-3), "0s");
    }

    #[test]
    fn a_final_step_records_when_and_how_long() {
        let mut status = CoderTemplateTestStatus::default();
        initialize(&mut status, now(), None);
        let later = Time(Timestamp::from_second(75).unwrap());
        apply(
            &mut status,
            &Outcome::fail(reasons::NO_AGENTS, "x"),
            later.clone(),
            None,
        );
        assert_eq!(status.completion_time, Some(later));
        assert_eq!(status.duration.as_deref(), Some("1m15s"));
    }

    #[test]
    fn a_new_run_is_pending_and_reconciling() {
        let mut status = CoderTemplateTestStatus::default();
        initialize(&mut status, now(), Some(1));
        assert_eq!(status.phase, Some(TemplateTestPhase::Pending));
        assert_eq!(status.reason.as_deref(), Some("Initializing"));
        assert!(status.start_time.is_some());
        assert_eq!(
            condition(&status, "Reconciling"),
            ("True".into(), "Initializing".into())
        );
        assert_eq!(condition(&status, "Ready").0, "False");
        assert_eq!(condition(&status, "Stalled").0, "False");
        assert!(status.conditions.iter().all(|c| c.type_ != "WorkspaceDeleted"));
    }

    #[test]
    fn a_wait_after_the_create_marker_is_running() {
        let mut status = CoderTemplateTestStatus {
            create_attempt_time: Some(now()),
            ..Default::default()
        };
        apply(
            &mut status,
            &Outcome::wait(reasons::WAITING_FOR_BUILD, "x"),
            now(),
            None,
        );
        assert_eq!(status.phase, Some(TemplateTestPhase::Running));
    }

    #[test]
    fn a_failure_before_any_create_says_not_created() {
        let mut status = CoderTemplateTestStatus::default();
        apply(
            &mut status,
            &Outcome::fail(reasons::TEMPLATE_DEPRECATED, "x"),
            now(),
            None,
        );
        assert_eq!(status.phase, Some(TemplateTestPhase::Failed));
        assert!(status.completion_time.is_some());
        assert_eq!(
            condition(&status, "Stalled"),
            ("True".into(), "TemplateDeprecated".into())
        );
        assert_eq!(condition(&status, "Reconciling").0, "False");
        assert_eq!(
            condition(&status, "WorkspaceDeleted"),
            ("True".into(), "NotCreated".into())
        );
        assert!(cleanup_done(&status));
    }

    #[test]
    fn a_failure_with_a_workspace_keeps_cleanup_pending() {
        let mut status = CoderTemplateTestStatus {
            workspace_id: Some("w".into()),
            ..Default::default()
        };
        apply(
            &mut status,
            &Outcome::fail(reasons::BUILD_FAILED, "x"),
            now(),
            None,
        );
        assert_eq!(
            condition(&status, "WorkspaceDeleted"),
            ("False".into(), "CleanupPending".into())
        );
        assert!(!cleanup_done(&status));
    }

    #[test]
    fn success_is_ready_with_the_workspace_deleted() {
        let mut status = CoderTemplateTestStatus {
            workspace_id: Some("w".into()),
            ..Default::default()
        };
        apply(&mut status, &Outcome::succeed("done"), now(), None);
        assert_eq!(status.phase, Some(TemplateTestPhase::Succeeded));
        assert_eq!(condition(&status, "Ready"), ("True".into(), "Succeeded".into()));
        assert_eq!(
            condition(&status, "WorkspaceDeleted"),
            ("True".into(), "Deleted".into())
        );
        assert!(cleanup_done(&status));
    }

    #[test]
    fn retained_and_control_plane_gone_release_the_finalizer_but_deleting_does_not() {
        let mut status = CoderTemplateTestStatus {
            workspace_id: Some("w".into()),
            ..Default::default()
        };
        for (state, reason, done) in [
            (ConditionStatus::False, reasons::DELETING, false),
            (ConditionStatus::False, reasons::RETAINED, true),
            (ConditionStatus::Unknown, reasons::OWNERSHIP_UNKNOWN, false),
            (ConditionStatus::Unknown, reasons::CONTROL_PLANE_GONE, true),
        ] {
            set_workspace_deleted(&mut status, (state, reason), "m", now(), None);
            assert_eq!(cleanup_done(&status), done, "{reason}");
        }
    }

    #[test]
    fn messages_stop_at_256_bytes_on_a_character_boundary() {
        let long = "é".repeat(200);
        let cut = bounded(&long);
        assert!(cut.len() <= 256 && cut.len() >= 255);
        assert!(long.starts_with(&cut));
        assert_eq!(bounded("short"), "short");
    }

    #[test]
    fn coder_failures_never_repeat_coders_text() {
        let error = CoderError::Rejected {
            status: 400,
            message: "secret-parameter-value".into(),
        };
        let step = coder_unavailable("get template", &error);
        assert_eq!(step.message, "get template: Coder answered 400.");
        let limited = CoderError::RateLimited {
            retry_after: Some(Duration::from_secs(3)),
            message: "slow down".into(),
        };
        assert_eq!(
            coder_unavailable("x", &limited).rate_limited,
            Some(Some(Duration::from_secs(3)))
        );
    }

    #[test]
    fn the_deadline_names_the_last_wait() {
        let step = deadline_exceeded(60, "WaitingForAgents", "Agent a is connecting.");
        assert_eq!(step.reason, "DeadlineExceeded");
        assert_eq!(
            step.message,
            "The test did not finish within 60s. Last wait: WaitingForAgents: Agent a is connecting."
        );
    }
}
