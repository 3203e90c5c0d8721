//! Status conditions shared by every controller. Setting a condition that did not change keeps the old
//! `lastTransitionTime`, so an unchanged status serialises byte for byte the same and the reconciler can skip the
//! write (zero API writes at steady state).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

/// An Event to publish with a status write: type, reason, note.
pub type Transition = (EventType, String, String);

/// `True`, `False` or `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

/// A condition as a controller decides it, before times and generations are attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    pub type_: &'static str,
    pub status: ConditionStatus,
    pub reason: &'static str,
    pub message: String,
}

impl Decided {
    pub fn new(
        type_: &'static str,
        status: ConditionStatus,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }
}

/// A status type with a list of conditions.
pub trait WithConditions {
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
}

macro_rules! with_conditions {
    ($($status:ty),*) => {
        $(impl WithConditions for $status {
            fn conditions_mut(&mut self) -> &mut Vec<Condition> {
                &mut self.conditions
            }
        })*
    };
}

with_conditions!(
    coder_k8s_api::control_plane::CoderControlPlaneStatus,
    coder_k8s_api::provisioner::CoderProvisionerStatus,
    coder_k8s_api::workspace_proxy::WorkspaceProxyStatus
);

/// How a pass ends for a kind whose steps set its conditions one by one (control plane, provisioner, workspace
/// proxy): the conditions are in the status it built; the outcome is when to look again without a change (`None`:
/// only when something the kind watches changes: its spec, a Secret it reads, an owned object, its control plane).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requeue(pub Option<Duration>);

impl Requeue {
    /// Nothing is due: the next pass comes with the next change of a watched input.
    pub const ON_CHANGE: Self = Self(None);

    /// The next pass comes after `wait` even without a change.
    pub fn after(wait: Duration) -> Self {
        Self(Some(wait))
    }

    /// This requeue, or `after` when that comes sooner: a pass that asked for a look within some time
    /// ([`crate::pass::Pass::soon`]) gets it even when its outcome alone would wait for a change.
    pub fn at_most(self, after: Option<Duration>) -> Self {
        match (self.0, after) {
            (Some(wait), Some(after)) => Self(Some(wait.min(after))),
            (None, after) => Self(after),
            (wait, None) => Self(wait),
        }
    }

    /// The controller action of this outcome.
    pub fn action(self) -> Action {
        self.0.map_or_else(Action::await_change, Action::requeue)
    }
}

/// Inserts or updates `decided` in `conditions`. The transition time changes only when the status changes.
pub fn set_condition(conditions: &mut Vec<Condition>, decided: Decided, generation: Option<i64>, now: Time) {
    let status = decided.status.as_str();
    match conditions.iter_mut().find(|c| c.type_ == decided.type_) {
        Some(existing) => {
            if existing.status != status {
                existing.last_transition_time = now;
            }
            existing.status = status.to_owned();
            existing.reason = decided.reason.to_owned();
            existing.message = decided.message;
            existing.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: decided.type_.to_owned(),
            status: status.to_owned(),
            reason: decided.reason.to_owned(),
            message: decided.message,
            observed_generation: generation,
            last_transition_time: now,
        }),
    }
}

/// `DeploymentReady` for a Deployment with `ready` ready replicas; `subject` names it ("the proxy Deployment").
pub fn deployment_ready(ready: i32, subject: &str) -> Decided {
    use coder_k8s_api::shared::deployment_reasons::{MINIMUM_REPLICAS_READY, NO_REPLICAS_READY};
    let (status, reason, message) = if ready > 0 {
        (
            ConditionStatus::True,
            MINIMUM_REPLICAS_READY,
            format!("{subject} has ready replicas"),
        )
    } else {
        (
            ConditionStatus::False,
            NO_REPLICAS_READY,
            format!("{subject} has no ready replica"),
        )
    };
    Decided {
        type_: "DeploymentReady",
        status,
        reason,
        message,
    }
}

/// Removes the condition of `type_` (for example `DatabaseSecretResolved` when `spec.database` is unset).
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_requeue_comes_at_most_as_late_as_asked() {
        let (short, long) = (Duration::from_secs(1), Duration::from_secs(30));
        assert_eq!(Requeue::ON_CHANGE.at_most(None), Requeue::ON_CHANGE);
        assert_eq!(Requeue::ON_CHANGE.at_most(Some(long)), Requeue::after(long));
        assert_eq!(Requeue::after(long).at_most(Some(short)), Requeue::after(short));
        assert_eq!(Requeue::after(short).at_most(Some(long)), Requeue::after(short));
        assert_eq!(Requeue::after(long).at_most(None), Requeue::after(long));
    }

    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn decided(status: ConditionStatus, reason: &'static str) -> Decided {
        Decided {
            type_: "Ready",
            status,
            reason,
            message: format!("because {reason}"),
        }
    }

    #[test]
    fn deployment_readiness() {
        let ready = deployment_ready(2, "the proxy Deployment");
        assert_eq!(
            (ready.status, ready.reason),
            (ConditionStatus::True, "MinimumReplicasReady")
        );
        assert_eq!(ready.message, "the proxy Deployment has ready replicas");
        let none = deployment_ready(0, "the proxy Deployment");
        assert_eq!(
            (none.status, none.reason),
            (ConditionStatus::False, "NoReplicasReady")
        );
    }

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            decided(ConditionStatus::False, "Waiting"),
            Some(1),
            at(10),
        );
        set_condition(
            &mut conditions,
            decided(ConditionStatus::False, "StillWaiting"),
            Some(2),
            at(20),
        );
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, at(10));
        assert_eq!(conditions[0].reason, "StillWaiting");
        assert_eq!(conditions[0].observed_generation, Some(2));
        set_condition(
            &mut conditions,
            decided(ConditionStatus::True, "Done"),
            Some(2),
            at(30),
        );
        assert_eq!(conditions[0].last_transition_time, at(30));
        let before = conditions.clone();
        set_condition(
            &mut conditions,
            decided(ConditionStatus::True, "Done"),
            Some(2),
            at(40),
        );
        assert_eq!(
            conditions, before,
            "an unchanged condition leaves the status unchanged"
        );
        remove_condition(&mut conditions, "Ready");
        assert!(conditions.is_empty());
    }
}
