//! Go `time.ParseDuration` syntax (`300ms`, `1h30m`, `-5s`): the flags accept what the v0.1.5 binary accepted, and the
//! duration fields of a spec (`rotationInterval`, `gracePeriod`) are read with it.

use std::time::Duration;

/// A parsed duration with its sign kept apart, because `std::time::Duration` cannot be negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedDuration {
    pub negative: bool,
    pub duration: Duration,
}

/// Parses a Go duration string.
pub fn parse_go_duration(input: &str) -> Result<SignedDuration, String> {
    let (negative, mut rest) = match input.as_bytes().first() {
        Some(b'-') => (true, &input[1..]),
        Some(b'+') => (false, &input[1..]),
        _ => (false, input),
    };
    if rest == "0" {
        return Ok(SignedDuration {
            negative,
            duration: Duration::ZERO,
        });
    }
    if rest.is_empty() {
        return Err("invalid duration".to_owned());
    }
    let mut total_nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| "missing unit in duration".to_owned())?;
        if number_end == 0 {
            return Err("invalid duration".to_owned());
        }
        let number: f64 = rest[..number_end]
            .parse()
            .map_err(|_| "invalid duration".to_owned())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            other => return Err(format!("unknown unit {other:?} in duration")),
        };
        total_nanos += number * scale;
    }
    // Go keeps a duration in an i64 of nanoseconds (about 292 years); a longer one is an error there too.
    if !total_nanos.is_finite() || total_nanos > i64::MAX as f64 {
        return Err("invalid duration: overflow".to_owned());
    }
    Ok(SignedDuration {
        negative,
        duration: Duration::from_nanos(total_nanos as u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let d = |s: &str| parse_go_duration(s).map(|p| (p.negative, p.duration));
        assert_eq!(d("30s"), Ok((false, Duration::from_secs(30))));
        assert_eq!(d("1h30m"), Ok((false, Duration::from_secs(5400))));
        assert_eq!(d("1.5s"), Ok((false, Duration::from_millis(1500))));
        assert_eq!(d("250ms"), Ok((false, Duration::from_millis(250))));
        assert_eq!(d("-5s"), Ok((true, Duration::from_secs(5))));
        assert_eq!(d("0"), Ok((false, Duration::ZERO)));
        assert!(d("").is_err());
        assert!(d("5").is_err());
        assert!(d("5d").is_err());
        assert!(d("s").is_err());
        assert_eq!(d("2562047h"), Ok((false, Duration::from_secs(2_562_047 * 3600))));
        assert!(d("2562048h").is_err(), "beyond Go's range");
        assert!(d("99999999999999999999999h").is_err());
    }
}
