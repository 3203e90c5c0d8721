//! The rate-limit gates: after Coder answers 429 for an object, its next Coder call waits out a per-object backoff
//! (2 s doubling to 2 min with ±20 % jitter, never before Coder's `Retry-After`), kept in memory like v0.1.5. A pass
//! of an AI kind that wakes inside the wait reads and writes nothing; a finalizer sends nothing to Coder before it
//! ends; a success forgets the backoff.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use coder_k8s_coder_client::Error as CoderError;
use coder_k8s_coder_client::backoff::{Backoff, OsRandom};
use coder_k8s_coder_client::error::MAX_RETRY_AFTER;

use kube::runtime::controller::Action;

use crate::halt::Halt;
use crate::kind::Cleanup;
use crate::sync_status::{Outcome, SyncPhase};

/// The wait after a 429: the backoff, but never before Coder's `Retry-After`, and never longer than the client's
/// cap on `Retry-After` (the client caps it already; this keeps the bound if another caller builds the error).
fn rate_limit_delay(backoff: Duration, retry_after: Option<Duration>) -> Duration {
    backoff.max(retry_after.unwrap_or_default()).min(MAX_RETRY_AFTER)
}

/// `now + delay`, or the latest instant the platform can represent near it: adding to an `Instant` must not panic.
fn deadline_after(now: Instant, delay: Duration) -> Instant {
    now.checked_add(delay)
        .or_else(|| now.checked_add(MAX_RETRY_AFTER))
        .unwrap_or(now)
}

/// Backoff state of one object after Coder's 429.
#[derive(Default)]
struct RateLimit {
    backoff: Backoff,
    until: Option<Instant>,
}

/// Every object's backoff after Coder's 429, by object UID.
#[derive(Default)]
pub struct RateLimits {
    by_uid: Mutex<HashMap<String, RateLimit>>,
}

impl RateLimits {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, RateLimit>> {
        self.by_uid.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The requeue after a 429 for object `uid`: its next backoff step, and never before Coder's `Retry-After`.
    pub fn limited(&self, uid: &str, retry_after: Option<Duration>) -> Duration {
        let mut limits = self.lock();
        let limit = limits.entry(uid.to_owned()).or_default();
        let delay = rate_limit_delay(limit.backoff.next_delay(&mut OsRandom), retry_after);
        limit.until = Some(deadline_after(Instant::now(), delay));
        delay
    }

    /// The requeue after the failed Coder call `error`: the object's backoff after a 429, else `otherwise`.
    pub fn after(&self, uid: &str, error: &CoderError, otherwise: Duration) -> Duration {
        match error {
            CoderError::RateLimited { retry_after, .. } => self.limited(uid, *retry_after),
            _ => otherwise,
        }
    }

    /// How long object `uid` must still wait after a 429, if at all.
    pub fn remaining(&self, uid: &str) -> Option<Duration> {
        let until = self.lock().get(uid)?.until?;
        until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    }

    /// Forgets the backoff of object `uid` after a success (or when the object is gone).
    pub fn passed(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// How many objects wait out a backoff.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The gate of a pass: while Coder's rate limit for object `uid` lasts (after a 429), the pass reads and writes
    /// nothing and looks again when it ends, also when a watch event woke it earlier.
    pub fn gate<O>(&self, uid: &str) -> Result<(), Halt<O>> {
        match self.remaining(uid) {
            Some(left) => {
                tracing::debug!(?left, "waiting out Coder's rate limit");
                Err(Halt::Wait(Action::requeue(left)))
            }
            None => Ok(()),
        }
    }

    /// The gate of a finalizer: while Coder's rate limit for object `uid` lasts, nothing is sent to Coder.
    pub fn cleanup_gate(&self, uid: &str) -> Option<Cleanup> {
        self.remaining(uid).map(Cleanup::WaitFor)
    }

    /// When object `uid` of an AI kind is looked at again after `outcome`: after a 429 its backoff (a pass that was
    /// not pending forgets it), else the outcome's requeue, `retry` while pending, else only a change.
    pub fn next_pass(&self, uid: &str, outcome: &Outcome, retry: Duration) -> Action {
        if let Some(retry_after) = outcome.rate_limited {
            return Action::requeue(self.limited(uid, retry_after));
        }
        if outcome.phase != SyncPhase::Pending {
            self.passed(uid);
        }
        match (outcome.requeue, outcome.phase) {
            (Some(after), _) => Action::requeue(after),
            (None, SyncPhase::Pending) => Action::requeue(retry),
            (None, _) => Action::await_change(),
        }
    }

    /// How long a finalizer that cannot delete yet for the reason `outcome` gives waits: after a 429 the object's
    /// backoff, else `retry`.
    pub fn deletion_wait(&self, uid: &str, outcome: &Outcome, retry: Duration) -> Duration {
        match outcome.rate_limited {
            Some(retry_after) => self.limited(uid, retry_after),
            None => retry,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_waits_for_retry_after_but_never_past_the_cap() {
        let second = Duration::from_secs(1);
        assert_eq!(rate_limit_delay(2 * second, None), 2 * second);
        assert_eq!(rate_limit_delay(2 * second, Some(60 * second)), 60 * second);
        assert_eq!(rate_limit_delay(90 * second, Some(60 * second)), 90 * second);
        assert_eq!(rate_limit_delay(2 * second, Some(Duration::MAX)), MAX_RETRY_AFTER);
    }

    #[test]
    fn a_deadline_never_overflows() {
        let now = Instant::now();
        assert_eq!(
            deadline_after(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        assert!(deadline_after(now, Duration::MAX) >= now);
    }

    #[test]
    fn the_gates_hold_while_a_backoff_lasts_and_open_after_a_success() {
        let limits = RateLimits::default();
        assert!(limits.gate::<()>("u").is_ok());
        let wait = limits.limited("u", Some(Duration::from_secs(60)));
        assert!(wait >= Duration::from_secs(60));
        assert!(matches!(limits.gate::<()>("u"), Err(Halt::Wait(_))));
        assert!(limits.remaining("u").is_some_and(|left| left <= wait));
        assert!(matches!(limits.cleanup_gate("u"), Some(Cleanup::WaitFor(_))));
        limits.passed("u");
        assert!(limits.gate::<()>("u").is_ok());
        assert!(limits.is_empty());
    }
}
