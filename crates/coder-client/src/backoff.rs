//! Requeue backoff for rate-limited and failing calls: 2 s doubling up to 2 min, ±20 % jitter,
//! never below 1 s.
//!
//! The cap applies before the jitter, so a capped delay lies in 96 s ..= 144 s. The random source is
//! injected ([`RandomSource`]) so the arithmetic is pure and testable.

use std::time::Duration;

/// First delay.
pub const BASE: Duration = Duration::from_secs(2);
/// Largest delay before jitter.
pub const MAX: Duration = Duration::from_secs(120);
/// Smallest delay after jitter.
pub const FLOOR: Duration = Duration::from_secs(1);
/// Relative jitter (±).
pub const JITTER: f64 = 0.2;

/// A source of uniformly distributed numbers in `[0, 1)`.
pub trait RandomSource {
    /// The next number in `[0, 1)`.
    fn next_unit(&mut self) -> f64;
}

/// A fixed value, for tests.
#[derive(Debug, Clone, Copy)]
pub struct Fixed(pub f64);

impl RandomSource for Fixed {
    fn next_unit(&mut self) -> f64 {
        self.0
    }
}

/// Randomness from the operating system (through a v4 UUID's random bits).
#[derive(Debug, Clone, Copy, Default)]
pub struct OsRandom;

impl RandomSource for OsRandom {
    fn next_unit(&mut self) -> f64 {
        let bits = uuid::Uuid::new_v4().as_u64_pair().0 >> 11; // 53 random bits
        bits as f64 / (1u64 << 53) as f64
    }
}

/// The delay before retry number `attempt` (0-based), with `unit` in `[0, 1)` choosing the jitter:
/// `0` → −20 %, `0.5` → none, towards `1` → +20 %. Pure.
pub fn delay(attempt: u32, unit: f64) -> Duration {
    let unit = if unit.is_finite() {
        unit.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let base = BASE.as_secs_f64() * 2f64.powi(attempt.min(32) as i32);
    let capped = base.min(MAX.as_secs_f64());
    let factor = 1.0 + JITTER * (2.0 * unit - 1.0);
    let secs = (capped * factor).max(FLOOR.as_secs_f64());
    Duration::try_from_secs_f64(secs).unwrap_or(MAX)
}

/// Per-object backoff state: the number of consecutive failures.
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    attempt: u32,
}

impl Backoff {
    /// A fresh state.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next delay; each call doubles the following one (up to the cap).
    pub fn next_delay(&mut self, random: &mut impl RandomSource) -> Duration {
        let d = delay(self.attempt, random.next_unit());
        self.attempt = self.attempt.saturating_add(1);
        d
    }

    /// Back to the first delay (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// Consecutive failures so far.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn doubles_from_two_seconds_without_jitter() {
        let got: Vec<f64> = (0..8).map(|a| secs(delay(a, 0.5))).collect();
        assert_eq!(got, vec![2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 120.0, 120.0]);
    }

    #[test]
    fn caps_at_two_minutes_for_large_attempts() {
        assert_eq!(secs(delay(1000, 0.5)), 120.0);
        assert_eq!(secs(delay(u32::MAX, 0.5)), 120.0);
    }

    #[test]
    fn jitter_range_is_plus_minus_twenty_percent() {
        assert!((secs(delay(0, 0.0)) - 1.6).abs() < 1e-9);
        assert!((secs(delay(0, 1.0)) - 2.4).abs() < 1e-9);
        assert!((secs(delay(10, 0.0)) - 96.0).abs() < 1e-9);
        assert!((secs(delay(10, 1.0)) - 144.0).abs() < 1e-9);
    }

    #[test]
    fn never_below_one_second_and_tolerates_bad_random_values() {
        for a in 0..20 {
            for u in [0.0, 0.1, 0.5, 0.999, -5.0, 7.0, f64::NAN] {
                let d = delay(a, u);
                assert!(d >= FLOOR, "{a} {u} {d:?}");
                assert!(d <= Duration::from_secs(144), "{a} {u} {d:?}");
            }
        }
    }

    #[test]
    fn stateful_backoff_doubles_and_resets() {
        let mut b = Backoff::new();
        let mut r = Fixed(0.5);
        assert_eq!(b.next_delay(&mut r), Duration::from_secs(2));
        assert_eq!(b.next_delay(&mut r), Duration::from_secs(4));
        assert_eq!(b.attempts(), 2);
        b.reset();
        assert_eq!(b.next_delay(&mut r), Duration::from_secs(2));
    }

    #[test]
    fn os_random_is_in_unit_range() {
        let mut r = OsRandom;
        for _ in 0..1000 {
            let v = r.next_unit();
            assert!((0.0..1.0).contains(&v));
        }
    }

    proptest::proptest! {
        #[test]
        fn delay_is_within_bounds(attempt in 0u32..64, unit in 0.0f64..1.0) {
            let d = secs(delay(attempt, unit));
            let nominal = (2.0 * 2f64.powi(attempt as i32)).min(120.0);
            proptest::prop_assert!(d >= nominal * 0.8 - 1e-9 && d <= nominal * 1.2 + 1e-9);
            proptest::prop_assert!(d >= 1.0);
        }
    }
}
