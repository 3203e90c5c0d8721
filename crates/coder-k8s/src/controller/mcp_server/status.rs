//! The status of a CoderMCPServer from the outcome of one pass (docs/controllers/mcp-server.md): `Ready` when Coder
//! matches the spec, `Pending` while the operator works or waits for something outside it, `Stalled` when a person
//! must act. The conditions `Ready`, `Reconciling` and `Stalled` follow; the message is cut to 256 bytes and never
//! holds Coder's own texts or a credential.

use std::time::Duration;

use coder_k8s_api::mcp_server::{CoderMCPServerStatus, reasons};
use coder_k8s_coder_client::Error as CoderError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::controller::status_writer::Transition;
use crate::controller::sync_status::{self, Outcome, SyncPhase};

/// Longest condition message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 256;

/// What a pass decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ready,
    Wait,
    Stall,
}

/// The outcome of one pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub verdict: Verdict,
    pub reason: &'static str,
    pub message: String,
    /// Coder answered 429 (with its `Retry-After`).
    pub rate_limited: Option<Option<Duration>>,
}

impl Step {
    fn new(verdict: Verdict, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            verdict,
            reason,
            message: message.into(),
            rate_limited: None,
        }
    }

    pub fn ready(message: impl Into<String>) -> Self {
        Self::new(Verdict::Ready, reasons::SYNCED, message)
    }

    pub fn wait(reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(Verdict::Wait, reason, message)
    }

    pub fn stall(reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(Verdict::Stall, reason, message)
    }
}

/// A Coder call failed: `NotSupported` for a Coder without the route, `OperatorAccessNotReady` when Coder refuses
/// the operator user (it must be a site owner), `Rejected` for another refusal, else a `CoderUnavailable` wait.
/// The message names the call and the HTTP status, never Coder's text.
pub fn coder_failed(action: &str, error: &CoderError) -> Step {
    if error.is_route_not_found() {
        return Step::stall(
            reasons::NOT_SUPPORTED,
            format!("{action}: this Coder has no MCP server routes; Coder v2.37.2 or later is needed."),
        );
    }
    match error {
        CoderError::Forbidden { .. } | CoderError::Unauthorized { .. } => Step::stall(
            reasons::OPERATOR_ACCESS_NOT_READY,
            format!(
                "{action}: Coder refused the operator user ({}); it must be a site owner.",
                error.category()
            ),
        ),
        CoderError::Rejected { status, .. } => Step::stall(
            reasons::REJECTED,
            format!("{action}: Coder rejected the request ({status}); check the spec."),
        ),
        _ => {
            let summary = match error.status() {
                Some(status) => format!("Coder answered {status}"),
                None => format!("Coder could not be reached ({})", error.category()),
            };
            let mut step = Step::wait(reasons::CODER_UNAVAILABLE, format!("{action}: {summary}."));
            if let CoderError::RateLimited { retry_after, .. } = error {
                step.rate_limited = Some(*retry_after);
            }
            step
        }
    }
}

/// `message` cut to at most 256 bytes at a character boundary.
pub fn bounded(message: &str) -> String {
    crate::controller::digest::byte_prefix(message, MAX_MESSAGE_BYTES).to_owned()
}

/// The reason of the `Ready` condition, if set.
pub fn ready_reason(status: &CoderMCPServerStatus) -> Option<&str> {
    sync_status::ready_reason(&status.conditions)
}

/// Whether the last pass left Coder's config enabled and in line with the spec (a disable seen now came from
/// someone else): `Synced`, `GroupNotFound` (the config was synced before the access step) or `DisabledExternally`.
pub fn was_in_sync(status: &CoderMCPServerStatus) -> bool {
    status.server_id.is_some()
        && matches!(
            ready_reason(status),
            Some(reasons::SYNCED | reasons::GROUP_NOT_FOUND | reasons::DISABLED_EXTERNALLY)
        )
}

/// The step as the outcome the AI kinds share (its message cut to 256 bytes).
fn shared(step: &Step) -> Outcome {
    let message = bounded(&step.message);
    match step.verdict {
        Verdict::Ready => Outcome::ready(step.reason, message),
        Verdict::Wait => Outcome::pending(step.reason, message),
        Verdict::Stall => Outcome::stalled(step.reason, message),
    }
}

/// Applies `step`: phase, the three conditions (with the step's reason and message) and the generation seen.
pub fn apply(status: &mut CoderMCPServerStatus, step: &Step, now: Time, generation: Option<i64>) {
    let outcome = shared(step);
    status.phase = Some(outcome.phase.into());
    outcome.set_conditions(&mut status.conditions, generation, &now);
    status.observed_generation = generation;
}

/// An Event when the phase or the reason changed: Warning when the object stalls, else Normal.
pub fn events(before: Option<&CoderMCPServerStatus>, step: &Step) -> Vec<Transition> {
    let before = before.and_then(|s| Some((SyncPhase::from(s.phase?), ready_reason(s)?)));
    shared(step).transition(before)
}

#[cfg(test)]
mod tests {
    use super::*;
    use coder_k8s_api::mcp_server::MCPServerPhase;
    use k8s_openapi::jiff::Timestamp;

    fn now() -> Time {
        Time(Timestamp::UNIX_EPOCH)
    }

    fn condition(status: &CoderMCPServerStatus, type_: &str) -> (String, String) {
        let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn each_outcome_sets_its_phase_and_conditions() {
        let mut status = CoderMCPServerStatus::default();
        apply(&mut status, &Step::ready("in sync"), now(), Some(3));
        assert_eq!(status.phase, Some(MCPServerPhase::Ready));
        assert_eq!(condition(&status, "Ready"), ("True".into(), "Synced".into()));
        assert_eq!(condition(&status, "Stalled").0, "False");
        assert_eq!(status.observed_generation, Some(3));
        apply(
            &mut status,
            &Step::stall(reasons::DISABLED_EXTERNALLY, "x"),
            now(),
            Some(3),
        );
        assert_eq!(status.phase, Some(MCPServerPhase::Stalled));
        assert_eq!(
            condition(&status, "Stalled"),
            ("True".into(), "DisabledExternally".into())
        );
        assert_eq!(condition(&status, "Ready").0, "False");
        apply(
            &mut status,
            &Step::wait(reasons::CODER_UNAVAILABLE, "y"),
            now(),
            Some(3),
        );
        assert_eq!(status.phase, Some(MCPServerPhase::Pending));
        assert_eq!(condition(&status, "Reconciling").0, "True");
    }

    #[test]
    fn a_phase_change_is_an_event_and_a_stall_a_warning() {
        let ready = Step::ready("ok");
        let mut before = CoderMCPServerStatus::default();
        apply(&mut before, &ready, now(), None);
        assert!(events(Some(&before), &ready).is_empty());
        let stall = Step::stall(reasons::MCP_SERVERS_NOT_ALLOWED, "not listed");
        let events = events(Some(&before), &stall);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].0, kube::runtime::events::EventType::Warning);
        assert_eq!(events[0].1, "MCPServersNotAllowed");
        let mut after = before.clone();
        apply(&mut after, &stall, now(), None);
        assert!(!was_in_sync(&before), "no config yet");
        before.server_id = Some("id".into());
        assert!(was_in_sync(&before));
        after.server_id = Some("id".into());
        assert!(!was_in_sync(&after));
    }

    #[test]
    fn coder_failures_name_the_call_not_coders_text() {
        let route = CoderError::Unavailable {
            reason: coder_k8s_coder_client::UnavailableReason::RouteNotFound,
            status: Some(404),
            message: "Route not found.".into(),
        };
        assert_eq!(coder_failed("list", &route).reason, reasons::NOT_SUPPORTED);
        let forbidden = CoderError::Forbidden {
            message: "secret detail".into(),
        };
        let step = coder_failed("list", &forbidden);
        assert_eq!(step.reason, reasons::OPERATOR_ACCESS_NOT_READY);
        assert!(!step.message.contains("secret detail"));
        let limited = CoderError::RateLimited {
            retry_after: Some(Duration::from_secs(3)),
            message: String::new(),
        };
        assert_eq!(
            coder_failed("list", &limited).rate_limited,
            Some(Some(Duration::from_secs(3)))
        );
        assert_eq!(bounded(&"é".repeat(200)).len(), 256);
    }
}
