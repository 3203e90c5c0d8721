//! When a watch poller polls Coder next (pure): soon after a change, slower and slower while nothing changes up to a
//! stated bound, and never faster than the poller's share of Coder's rate limit allows for what one poll costs (so a
//! namespace whose one poll costs more than that share allows in the bound is polled more slowly still: the rate
//! limit is shared with every other call made with the control plane's token).

use std::time::Duration;

/// The pacing rules of every poller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CadenceRules {
    /// The wait after a poll that saw a change (in Coder, or written through this server).
    pub fastest: Duration,
    /// The longest wait: a quiet poll doubles the wait up to this.
    pub slowest: Duration,
    /// Coder requests per minute one poller may spend.
    pub calls_per_minute: u32,
}

/// One poller's pace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cadence {
    rules: CadenceRules,
    wait: Duration,
}

impl Cadence {
    /// A poller that has just taken its baseline waits the shortest time first.
    pub fn new(rules: CadenceRules) -> Self {
        Self {
            wait: rules.fastest,
            rules,
        }
    }

    /// The wait before the next poll, after a poll that sent `calls` requests and did (`changed`) or did not see a
    /// change. A failed poll counts as a quiet one, so an outage or a 429 is met with longer waits.
    pub fn after_poll(&mut self, changed: bool, calls: u64) -> Duration {
        let CadenceRules { fastest, slowest, .. } = self.rules;
        let adaptive = match changed {
            true => fastest,
            false => self.wait.saturating_mul(2),
        };
        self.wait = adaptive
            .clamp(fastest, slowest.max(fastest))
            .max(self.budget_floor(calls));
        self.wait
    }

    /// The soonest the next poll may come after one that sent `calls` requests: the wait after a change.
    pub fn soonest(&self, calls: u64) -> Duration {
        self.rules.fastest.max(self.budget_floor(calls))
    }

    /// The shortest wait that keeps polls that cost `calls` requests within the budget.
    fn budget_floor(&self, calls: u64) -> Duration {
        let budget = u64::from(self.rules.calls_per_minute.max(1));
        Duration::from_millis(calls.saturating_mul(60_000) / budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: CadenceRules = CadenceRules {
        fastest: Duration::from_secs(5),
        slowest: Duration::from_secs(30),
        calls_per_minute: 48,
    };

    fn secs(waits: &[Duration]) -> Vec<f64> {
        waits.iter().map(Duration::as_secs_f64).collect()
    }

    #[test]
    fn quiet_polls_slow_down_to_the_bound_and_a_change_speeds_up_again() {
        let mut cadence = Cadence::new(RULES);
        let quiet: Vec<_> = (0..5).map(|_| cadence.after_poll(false, 1)).collect();
        assert_eq!(secs(&quiet), [10.0, 20.0, 30.0, 30.0, 30.0]);
        assert_eq!(cadence.after_poll(true, 1), Duration::from_secs(5));
        assert_eq!(cadence.after_poll(false, 1), Duration::from_secs(10));
        assert_eq!(
            cadence.soonest(1),
            Duration::from_secs(5),
            "a write may cut a wait to this"
        );
        assert_eq!(
            cadence.soonest(10),
            Duration::from_millis(12_500),
            "but not below the budget"
        );
    }

    #[test]
    fn an_expensive_poll_is_spaced_to_stay_within_the_budget() {
        let mut cadence = Cadence::new(RULES);
        // 10 requests a poll (1,000 workspaces) at 48 a minute: at least 12.5 s apart, even right after a change.
        assert_eq!(cadence.after_poll(true, 10), Duration::from_millis(12_500));
        assert_eq!(cadence.after_poll(false, 10), Duration::from_secs(25));
        assert_eq!(cadence.after_poll(false, 10), Duration::from_secs(30));
        // A poll that costs more than the budget allows in the slowest wait (10,000 workspaces) waits longer still.
        assert_eq!(cadence.after_poll(true, 100), Duration::from_secs(125));
        assert_eq!(
            cadence.after_poll(false, 10),
            Duration::from_secs(30),
            "and the bound holds again"
        );
    }

    #[test]
    fn requests_per_minute_at_rest_stay_within_the_budget_up_to_the_bound() {
        for calls in [1_u64, 2, 10, 24] {
            let mut cadence = Cadence::new(RULES);
            let mut wait = Duration::ZERO;
            for _ in 0..10 {
                wait = cadence.after_poll(false, calls);
            }
            let per_minute = calls as f64 * 60.0 / wait.as_secs_f64();
            assert!(
                per_minute <= f64::from(RULES.calls_per_minute),
                "{calls}: {per_minute}"
            );
            assert_eq!(wait, RULES.slowest, "{calls} requests a poll rest at the bound");
        }
    }

    #[test]
    fn rules_whose_bound_is_below_the_fastest_wait_poll_at_the_fastest() {
        let rules = CadenceRules {
            slowest: Duration::from_secs(1),
            ..RULES
        };
        let mut cadence = Cadence::new(rules);
        assert_eq!(cadence.after_poll(false, 1), Duration::from_secs(5));
    }
}
