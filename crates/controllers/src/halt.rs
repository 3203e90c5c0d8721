//! The one way a reconcile step stops before the end of its pass. Every step of every kind returns
//! `Result<T, Halt<Outcome>>` (its kind's `Outcome`), so one `?` is enough: the runner sends a [`Halt::Settled`]
//! outcome to the kind's status writer, a [`Halt::Failed`] error to the error policy, and a [`Halt::Wait`] nowhere
//! (nothing more is written; the object is looked at again as it says).

use kube::runtime::controller::Action;

use crate::error::Error;

/// Why a pass stopped early.
#[derive(Debug)]
pub enum Halt<O> {
    /// Kubernetes failed (or the object lacks metadata): counted, logged and retried after the retry interval.
    Failed(Error),
    /// The pass ends here with this outcome; the kind's status writer records it and says when to look again.
    Settled(O),
    /// Nothing more is recorded: a rate limit still lasts, the pass decided on a status older than the object's, or
    /// a finished run wrote its cleanup itself and waits for its TTL. The runner schedules the next pass as said.
    Wait(Action),
}

impl<O> From<Error> for Halt<O> {
    fn from(error: Error) -> Self {
        Self::Failed(error)
    }
}

impl<O> From<kube::Error> for Halt<O> {
    fn from(error: kube::Error) -> Self {
        Self::Failed(Error::Kube(error))
    }
}

/// A pass that settled early ends with that outcome like one that ran to its end: `Err(Settled(o))` becomes
/// `Ok(o)`, so a step that wraps others (to finish their outcome) still needs one `?`.
pub fn settled<O>(result: Result<O, Halt<O>>) -> Result<O, Halt<O>> {
    match result {
        Err(Halt::Settled(outcome)) => Ok(outcome),
        other => other,
    }
}

/// `Err(Settled(outcome))`, for a step that stops the pass with an outcome.
pub fn settle<T, O>(outcome: O) -> Result<T, Halt<O>> {
    Err(Halt::Settled(outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settled_halt_becomes_the_outcome_and_the_others_stay_halts() {
        assert!(matches!(settled::<u8>(settle(7)), Ok(7)));
        assert!(matches!(settled::<u8>(Ok(3)), Ok(3)));
        let wait = Action::requeue(std::time::Duration::from_secs(2));
        let waits = settled::<u8>(Err(Halt::Wait(wait.clone())));
        assert!(matches!(waits, Err(Halt::Wait(action)) if action == wait));
        let failed = settled::<u8>(Err(Error::MissingMetadata.into()));
        assert!(matches!(failed, Err(Halt::Failed(Error::MissingMetadata))));
    }
}
