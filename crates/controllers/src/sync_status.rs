//! The status shape the AI kinds share (CoderAIProvider, CoderAIGatewayKey, CoderMCPServer): one outcome per pass,
//! shown as a phase (`Pending`, `Ready`, `Stalled`) and the three conditions `Ready`, `Reconciling` and `Stalled`
//! that kstatus-style tools read. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::runtime::events::EventType;

use crate::conditions::{ConditionStatus, Decided, Transition, set_condition};
use coder_k8s_api::shared::sync_status::conditions::{READY, RECONCILING, STALLED};

/// Where a pass left the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPhase {
    /// The operator works towards the spec; the reason says what it waits for.
    Pending,
    /// The object in Coder matches the spec.
    Ready,
    /// The operator cannot go on without a change by a person.
    Stalled,
}

/// The outcome of one pass: phase, reason and message, and when to look again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub phase: SyncPhase,
    pub reason: &'static str,
    pub message: String,
    /// The next pass (`None`: only a change of the object or what it reads wakes it).
    pub requeue: Option<std::time::Duration>,
    /// Coder answered 429 (with its `Retry-After`, if any): the object's next Coder call waits out a backoff.
    pub rate_limited: Option<Option<std::time::Duration>>,
}

impl Outcome {
    pub fn ready(reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(SyncPhase::Ready, reason, message)
    }

    pub fn pending(reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(SyncPhase::Pending, reason, message)
    }

    pub fn stalled(reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(SyncPhase::Stalled, reason, message)
    }

    fn new(phase: SyncPhase, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            phase,
            reason,
            message: message.into(),
            requeue: None,
            rate_limited: None,
        }
    }

    /// The same outcome, looked at again after `after`.
    pub fn requeue(mut self, after: std::time::Duration) -> Self {
        self.requeue = Some(after);
        self
    }

    /// The same outcome, after Coder asked to slow down (`retry_after`: its `Retry-After`).
    pub fn rate_limited(mut self, retry_after: Option<std::time::Duration>) -> Self {
        self.rate_limited = Some(retry_after);
        self
    }

    /// The three conditions of this outcome.
    pub fn decided(&self) -> [Decided; 3] {
        let status = |phase| {
            if self.phase == phase {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            }
        };
        let message = self.message.clone();
        [
            Decided::new(READY, status(SyncPhase::Ready), self.reason, message.clone()),
            Decided::new(
                RECONCILING,
                status(SyncPhase::Pending),
                self.reason,
                message.clone(),
            ),
            Decided::new(STALLED, status(SyncPhase::Stalled), self.reason, message),
        ]
    }

    /// Sets the three conditions in `conditions` (unchanged ones keep their transition time).
    pub fn set_conditions(&self, conditions: &mut Vec<Condition>, generation: Option<i64>, now: &Time) {
        for decided in self.decided() {
            set_condition(conditions, decided, generation, now.clone());
        }
    }

    /// An Event when the phase or reason changed: Warning for `Stalled`, Normal otherwise.
    pub fn transition(&self, before: Option<(SyncPhase, &str)>) -> Vec<Transition> {
        if before == Some((self.phase, self.reason)) {
            return Vec::new();
        }
        let type_ = match self.phase {
            SyncPhase::Stalled => EventType::Warning,
            SyncPhase::Pending | SyncPhase::Ready => EventType::Normal,
        };
        vec![(type_, self.reason.to_owned(), self.message.clone())]
    }
}

/// Each AI kind has its own phase type with the same three values.
macro_rules! kind_phase {
    ($($phase:ty),*) => {
        $(impl From<SyncPhase> for $phase {
            fn from(phase: SyncPhase) -> Self {
                match phase {
                    SyncPhase::Pending => Self::Pending,
                    SyncPhase::Ready => Self::Ready,
                    SyncPhase::Stalled => Self::Stalled,
                }
            }
        }

        impl From<$phase> for SyncPhase {
            fn from(phase: $phase) -> Self {
                match phase {
                    <$phase>::Pending => Self::Pending,
                    <$phase>::Ready => Self::Ready,
                    <$phase>::Stalled => Self::Stalled,
                }
            }
        })*
    };
}

/// The status of an AI kind: phase, conditions and observed generation, set from an outcome.
pub trait SyncedStatus {
    fn shown(&self) -> Option<(SyncPhase, &str)>;
    fn record(&mut self, outcome: &Outcome, generation: Option<i64>, now: &Time);
}

macro_rules! synced_status {
    ($($status:ty),*) => {
        $(impl SyncedStatus for $status {
            fn shown(&self) -> Option<(SyncPhase, &str)> {
                shown(self.phase, &self.conditions)
            }

            fn record(&mut self, outcome: &Outcome, generation: Option<i64>, now: &Time) {
                self.phase = Some(outcome.phase.into());
                self.observed_generation = generation;
                outcome.set_conditions(&mut self.conditions, generation, now);
            }
        })*
    };
}

synced_status!(
    coder_k8s_api::ai_provider::CoderAIProviderStatus,
    coder_k8s_api::ai_gateway_key::CoderAIGatewayKeyStatus,
    coder_k8s_api::mcp_server::CoderMCPServerStatus
);

kind_phase!(
    coder_k8s_api::ai_provider::AIProviderPhase,
    coder_k8s_api::ai_gateway_key::AIGatewayKeyPhase,
    coder_k8s_api::mcp_server::MCPServerPhase
);

/// The phase and `Ready` reason a status shows, to compare a new outcome with.
pub fn shown<P: Copy + Into<SyncPhase>>(
    phase: Option<P>,
    conditions: &[Condition],
) -> Option<(SyncPhase, &str)> {
    Some((phase?.into(), ready_reason(conditions)?))
}

/// Outcomes every AI kind shares, with the shared reasons.
pub mod outcomes {
    use coder_k8s_api::shared::sync_status::reasons;
    use coder_k8s_coder_client::Error as CoderError;

    use crate::refusal::Refusal;
    use crate::sync_status::Outcome;

    /// The control plane is missing or being deleted (`why`): nothing is sent to Coder.
    pub fn control_plane_not_ready(cp_name: &str, why: &str) -> Outcome {
        Outcome::pending(
            reasons::CONTROL_PLANE_NOT_READY,
            format!("CoderControlPlane {cp_name} {why}."),
        )
    }

    /// The control plane's operator access refused the call.
    pub fn refused(cp_name: &str, refusal: &Refusal) -> Outcome {
        let reason = if refusal.is_control_plane_missing() {
            reasons::CONTROL_PLANE_NOT_READY
        } else {
            reasons::OPERATOR_ACCESS_NOT_READY
        };
        Outcome::pending(reason, refusal.message(cp_name))
    }

    /// `GET /api/v2/buildinfo` failed before a create: the create waits.
    pub fn buildinfo_failed(error: &CoderError) -> Outcome {
        Outcome::pending(
            reasons::CODER_UNAVAILABLE,
            format!("read the Coder deployment ID (GET /api/v2/buildinfo): {error}"),
        )
    }

    /// `CoderDeploymentChanged` when the object's things are in `recorded` and the control plane now reaches
    /// `reached`.
    pub fn deployment_changed(recorded: Option<&str>, reached: &str) -> Option<Outcome> {
        let recorded = recorded.filter(|id| !id.is_empty())?;
        (recorded != reached).then(|| {
            Outcome::stalled(
                reasons::CODER_DEPLOYMENT_CHANGED,
                format!(
                    "The control plane now reaches Coder deployment {reached}, not {recorded} where this object's resources are; nothing is created there. Delete them in the old deployment by hand, then delete this object."
                ),
            )
        })
    }

    /// The finalizer cannot delete `what` in Coder yet, for the reason `why` gives (a 429 in `why` still holds the
    /// next attempt).
    pub fn deleting(what: &str, why: &Outcome) -> Outcome {
        Outcome {
            rate_limited: why.rate_limited,
            ..Outcome::pending(
                reasons::DELETING,
                format!("Deleting {what} in Coder; waiting: {}", why.message),
            )
        }
    }

    /// The cleanup record could not be written in `namespace`: no create is sent.
    pub fn record_failed(namespace: &str, error: &kube::Error) -> Outcome {
        let detail = match error {
            kube::Error::Api(status) => format!("{} ({})", status.reason, status.code),
            _ => "the Kubernetes API could not be reached".to_owned(),
        };
        Outcome::pending(
            reasons::CLEANUP_RECORD_FAILED,
            format!(
                "The cleanup record could not be written in namespace {namespace}: {detail}; nothing is created in Coder until it can be."
            ),
        )
    }

    /// A failed Coder call during `action`: a retry, or a stall that needs a person. `needs` says what this
    /// kind needs from Coder (licence, role, version) when Coder refuses or lacks the route.
    pub fn coder_failed(action: &str, error: &CoderError, needs: &str) -> Outcome {
        let message = format!("{action}: {error}");
        match error {
            CoderError::Forbidden { .. } => {
                Outcome::stalled(reasons::NOT_SUPPORTED, format!("{message} ({needs})"))
            }
            e if e.is_route_not_found() => Outcome::stalled(
                reasons::NOT_SUPPORTED,
                format!("{message} (this Coder version does not have this API; {needs})"),
            ),
            CoderError::Rejected { .. } | CoderError::Conflict { .. } | CoderError::Invalid { .. } => {
                Outcome::stalled(reasons::REJECTED, message)
            }
            // Coder asked to slow down: the object's next call waits at least as long as it said (the client caps
            // the wait), and longer after each 429 in a row.
            CoderError::RateLimited { retry_after, .. } => {
                Outcome::pending(reasons::CODER_UNAVAILABLE, message).rate_limited(*retry_after)
            }
            _ => Outcome::pending(reasons::CODER_UNAVAILABLE, message),
        }
    }
}

/// The reason of the `Ready` condition in `conditions`, if any.
pub fn ready_reason(conditions: &[Condition]) -> Option<&str> {
    conditions
        .iter()
        .find(|c| c.type_ == READY)
        .map(|c| c.reason.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use coder_k8s_coder_client::Error as CoderError;

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn each_phase_sets_exactly_its_condition_true() {
        for (outcome, true_type) in [
            (Outcome::ready("Synced", "ok"), READY),
            (Outcome::pending("CoderUnavailable", "down"), RECONCILING),
            (Outcome::stalled("NotAllowed", "opt in"), STALLED),
        ] {
            let mut conditions = Vec::new();
            outcome.set_conditions(&mut conditions, Some(3), &now());
            assert_eq!(conditions.len(), 3);
            for condition in &conditions {
                let expected = if condition.type_ == true_type {
                    "True"
                } else {
                    "False"
                };
                assert_eq!(condition.status, expected, "{}", condition.type_);
                assert_eq!(condition.reason, outcome.reason);
                assert_eq!(condition.observed_generation, Some(3));
            }
            assert_eq!(ready_reason(&conditions), Some(outcome.reason));
        }
    }

    #[test]
    fn coder_errors_are_a_retry_a_wait_as_asked_or_a_stall() {
        let limited = CoderError::RateLimited {
            retry_after: Some(std::time::Duration::from_secs(90)),
            message: "slow down".to_owned(),
        };
        let outcome = outcomes::coder_failed("create", &limited, "needs");
        assert_eq!(
            (outcome.phase, outcome.rate_limited),
            (SyncPhase::Pending, Some(Some(std::time::Duration::from_secs(90))))
        );
        let unannounced = CoderError::RateLimited {
            retry_after: None,
            message: "slow down".to_owned(),
        };
        assert_eq!(
            outcomes::coder_failed("create", &unannounced, "needs").rate_limited,
            Some(None),
            "a 429 without Retry-After still backs off"
        );
        let forbidden = CoderError::Forbidden {
            message: "Forbidden.".to_owned(),
        };
        let outcome = outcomes::coder_failed("create", &forbidden, "a site owner");
        assert_eq!(
            (outcome.phase, outcome.reason),
            (SyncPhase::Stalled, "NotSupported")
        );
        assert!(outcome.message.contains("a site owner"));
    }

    #[test]
    fn a_waiting_finalizer_says_what_it_deletes_and_why_it_waits() {
        let why = outcomes::coder_failed(
            "delete the AI provider",
            &CoderError::Unavailable {
                reason: coder_k8s_coder_client::UnavailableReason::ServerError,
                status: Some(503),
                message: "down".to_owned(),
            },
            "needs",
        );
        let deleting = outcomes::deleting("the AI provider \"openai\"", &why);
        assert_eq!(
            (deleting.phase, deleting.reason),
            (SyncPhase::Pending, "Deleting")
        );
        assert_eq!(
            deleting.message,
            format!(
                "Deleting the AI provider \"openai\" in Coder; waiting: {}",
                why.message
            )
        );
        assert_eq!(deleting.rate_limited, None);
        let limited = outcomes::coder_failed(
            "delete the AI provider",
            &CoderError::RateLimited {
                retry_after: Some(std::time::Duration::from_secs(7)),
                message: "slow down".to_owned(),
            },
            "needs",
        );
        assert_eq!(
            outcomes::deleting("the AI provider", &limited).rate_limited,
            Some(Some(std::time::Duration::from_secs(7))),
            "a 429 on the delete holds the next attempt"
        );
    }

    #[test]
    fn an_event_marks_a_change_of_phase_or_reason_only() {
        let stalled = Outcome::stalled("NotAllowed", "opt in");
        let events = stalled.transition(None);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].0, EventType::Warning);
        assert_eq!(events[0].1, "NotAllowed");
        assert!(
            stalled
                .transition(Some((SyncPhase::Stalled, "NotAllowed")))
                .is_empty()
        );
        let ready = Outcome::ready("KeyReady", "ok").transition(Some((SyncPhase::Pending, "KeyReady")));
        assert_eq!(ready[0].0, EventType::Normal);
    }
}
