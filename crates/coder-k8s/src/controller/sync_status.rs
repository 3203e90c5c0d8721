//! The status shape the AI kinds share (CoderAIProvider, CoderAIGatewayKey, CoderMCPServer): one outcome per pass,
//! shown as a phase (`Pending`, `Ready`, `Stalled`) and the three conditions `Ready`, `Reconciling` and `Stalled`
//! that kstatus-style tools read. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::runtime::events::EventType;

use super::conditions::{ConditionStatus, Decided, set_condition};
use super::status_writer::Transition;
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
        }
    }

    /// The same outcome, looked at again after `after`.
    pub fn requeue(mut self, after: std::time::Duration) -> Self {
        self.requeue = Some(after);
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
