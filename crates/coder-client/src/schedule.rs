//! What Coder v2.30.0 accepts as a workspace's time to live and autostart schedule, and what it stores, with its own
//! error texts: a caller checks a value before it writes anything, and the Coder API test server answers as Coder
//! does. Pure functions.
//!
//! * Time to live: milliseconds cut to whole minutes; none or 0 turns autostop off; at least one minute and at most
//!   30 days otherwise.
//! * Autostart: a five-field cron expression (`minute hour * * day-of-week`, ranges, lists, steps and the names
//!   `jan`…`dec`, `sun`…`sat`) with an optional `CRON_TZ=<IANA zone> ` prefix; day of month and month must be `*`.
//!   Whether a zone exists is asked of the caller (Coder carries the IANA database; this crate does not).

/// The shortest time to live Coder accepts, in milliseconds.
pub const TTL_MINIMUM_MS: i64 = 60_000;
/// The longest time to live Coder accepts (30 days), in milliseconds.
pub const TTL_MAXIMUM_MS: i64 = 30 * 24 * 60 * 60 * 1000;
const NANOS_PER_MILLI: i64 = 1_000_000;
const NANOS_PER_MINUTE: i64 = 60 * 1_000_000_000;

/// Why Coder refuses a time to live (`Display` is Coder's text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TtlError {
    #[error("time until shutdown must be at least one minute")]
    TooShort,
    #[error("time until shutdown must be less than 30 days")]
    TooLong,
}

/// The time to live Coder stores for `millis` (and answers as `ttl_ms` from then on): `None` for none or 0
/// (autostop off), else `millis` cut down to whole minutes. Coder computes in nanoseconds of a signed 64-bit
/// duration, which wraps for values beyond about 292 years; so does this.
pub fn stored_ttl_ms(millis: Option<i64>) -> Result<Option<i64>, TtlError> {
    let Some(millis) = millis.filter(|m| *m != 0) else {
        return Ok(None);
    };
    let nanos = millis.wrapping_mul(NANOS_PER_MILLI);
    // Go's Duration.Truncate rounds toward zero.
    let truncated = nanos - nanos % NANOS_PER_MINUTE;
    if truncated < TTL_MINIMUM_MS * NANOS_PER_MILLI {
        return Err(TtlError::TooShort);
    }
    if truncated > TTL_MAXIMUM_MS * NANOS_PER_MILLI {
        return Err(TtlError::TooLong);
    }
    Ok(Some(truncated / NANOS_PER_MILLI))
}

/// Why Coder refuses an autostart schedule: Coder's own text, for example
/// `parse schedule: end of range (60) above maximum (59): 60`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub String);

/// Checks `raw` as Coder checks an autostart schedule before it stores it (an empty schedule, which turns autostart
/// off, is not checked). `zone_known` answers whether an IANA zone name other than `UTC` exists.
pub fn check_weekly_schedule(raw: &str, zone_known: impl Fn(&str) -> bool) -> Result<(), ScheduleError> {
    let parts: Vec<&str> = raw.split_whitespace().collect();
    if parts.len() < 5 {
        return Err(weekly(
            "expected schedule to consist of 5 fields with an optional CRON_TZ=<timezone> prefix",
        ));
    }
    let fields = if parts.len() == 6 { &parts[1..] } else { &parts[..] };
    if fields[2] != "*" || fields[3] != "*" {
        return Err(weekly("expected day-of-month and month to be *"));
    }
    // Coder scopes a schedule without a zone to UTC by putting the prefix in front.
    let spec = if raw.starts_with(CRON_TZ) {
        raw.to_owned()
    } else {
        format!("{CRON_TZ}UTC {raw}")
    };
    match parse(&spec, &zone_known) {
        Ok(Zone::Local) => Err(ScheduleError(
            "schedules scoped to time.Local are not supported".to_owned(),
        )),
        Ok(Zone::Named) => Ok(()),
        Err(reason) => Err(ScheduleError(format!("parse schedule: {reason}"))),
    }
}

const CRON_TZ: &str = "CRON_TZ=";

fn weekly(reason: &str) -> ScheduleError {
    ScheduleError(format!("validate weekly schedule: {reason}"))
}

/// The zone a parsed schedule is in, as far as Coder cares.
enum Zone {
    Local,
    Named,
}

/// The bounds and names of one cron field.
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DAYS_OF_MONTH: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DAYS_OF_WEEK: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// The cron parser Coder uses (minute, hour, day of month, month, day of week; no descriptors) on a spec that
/// starts with `CRON_TZ=`.
fn parse(spec: &str, zone_known: &dyn Fn(&str) -> bool) -> Result<Zone, String> {
    let Some(space) = spec.find(' ') else {
        let zone = &spec[CRON_TZ.len()..];
        return Err(format!("provided bad location {zone}: unknown time zone {zone}"));
    };
    let zone_name = &spec[CRON_TZ.len()..space];
    let zone = load_location(zone_name, zone_known)
        .map_err(|reason| format!("provided bad location {zone_name}: {reason}"))?;
    let rest = spec[space..].trim();
    if rest.starts_with('@') {
        return Err(format!("parser does not accept descriptors: {rest}"));
    }
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    for (field, bounds) in fields
        .iter()
        .zip([&MINUTES, &HOURS, &DAYS_OF_MONTH, &MONTHS, &DAYS_OF_WEEK])
    {
        for expr in field.split(',').filter(|e| !e.is_empty()) {
            check_range(expr, bounds)?;
        }
    }
    Ok(zone)
}

/// Go's `time.LoadLocation` for the names that matter here.
fn load_location(name: &str, zone_known: &dyn Fn(&str) -> bool) -> Result<Zone, String> {
    match name {
        "" | "UTC" => Ok(Zone::Named),
        "Local" => Ok(Zone::Local),
        _ if name.contains("..") || name.starts_with('/') || name.starts_with('\\') => {
            Err("time: invalid location name".to_owned())
        }
        _ if zone_known(name) => Ok(Zone::Named),
        _ => Err(format!("unknown time zone {name}")),
    }
}

/// One range of a field: `*`, `?`, `n`, `a-b`, each optionally `/step`.
fn check_range(expr: &str, bounds: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let (start, mut end) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (bounds.min, bounds.max)
    } else {
        let start = int_or_name(low_and_high[0], bounds)?;
        match low_and_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_and_high[1], bounds)?),
            _ => return Err(format!("too many hyphens: {expr}")),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = non_negative_int(range_and_step[1])?;
            if low_and_high.len() == 1 {
                end = bounds.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < bounds.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            bounds.min
        ));
    }
    if end > bounds.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            bounds.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

fn int_or_name(expr: &str, bounds: &Bounds) -> Result<u64, String> {
    let lower = expr.to_lowercase();
    match bounds.names.iter().find(|(name, _)| *name == lower) {
        Some((_, value)) => Ok(*value),
        None => non_negative_int(expr),
    }
}

fn non_negative_int(expr: &str) -> Result<u64, String> {
    let number = atoi(expr).map_err(|reason| {
        format!("failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: {reason}")
    })?;
    u64::try_from(number).map_err(|_| format!("negative number ({number}) not allowed: {expr}"))
}

/// Go's `strconv.Atoi`: an optional sign and decimal digits.
fn atoi(text: &str) -> Result<i64, &'static str> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("invalid syntax");
    }
    text.parse::<i64>().map_err(|_| "value out of range")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: &str) -> Result<(), String> {
        check_weekly_schedule(raw, |zone| zone == "Europe/Berlin").map_err(|e| e.0)
    }

    #[test]
    fn weekly_schedules_coder_accepts() {
        for raw in [
            "30 9 * * 1-5",
            "CRON_TZ=Europe/Berlin 30 9 * * 1-5",
            "CRON_TZ=UTC 0 0 * * *",
            "0 9 * * MON,wed,Fri",
            "*/15 8-18/2 * * sun-sat",
            "  0  9 * * 1 ",
            "0 9 * * ,",
        ] {
            assert_eq!(check(raw), Ok(()), "{raw:?}");
        }
    }

    #[test]
    fn weekly_schedules_coder_refuses_with_its_own_text() {
        let cases = [
            (
                "0 9 * *",
                "validate weekly schedule: expected schedule to consist of 5 fields with an optional CRON_TZ=<timezone> prefix",
            ),
            (
                "0 9 1 * 1",
                "validate weekly schedule: expected day-of-month and month to be *",
            ),
            (
                "CRON_TZ=UTC 0 9 * 1 1",
                "validate weekly schedule: expected day-of-month and month to be *",
            ),
            (
                "60 9 * * 1",
                "parse schedule: end of range (60) above maximum (59): 60",
            ),
            (
                "0 9-7 * * 1",
                "parse schedule: beginning of range (9) beyond end of range (7): 9-7",
            ),
            (
                "0 9 * * 7",
                "parse schedule: end of range (7) above maximum (6): 7",
            ),
            (
                "0 9 * * x",
                r#"parse schedule: failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax"#,
            ),
            (
                "0 9 * * -1",
                r#"parse schedule: failed to parse int from : strconv.Atoi: parsing "": invalid syntax"#,
            ),
            (
                "0 */0 * * 1",
                "parse schedule: step of range should be a positive number: */0",
            ),
            ("0 1-2-3 * * 1", "parse schedule: too many hyphens: 1-2-3"),
            ("0 1/2/3 * * 1", "parse schedule: too many slashes: 1/2/3"),
            (
                "CRON_TZ=Mars/Olympus 0 9 * * 1",
                "parse schedule: provided bad location Mars/Olympus: unknown time zone Mars/Olympus",
            ),
            (
                "CRON_TZ=../etc 0 9 * * 1",
                "parse schedule: provided bad location ../etc: time: invalid location name",
            ),
            (
                "CRON_TZ=Local 0 9 * * 1",
                "schedules scoped to time.Local are not supported",
            ),
            (
                "TZ=UTC 0 9 * * 1",
                "parse schedule: expected exactly 5 fields, found 6: [TZ=UTC 0 9 * * 1]",
            ),
            // Six fields are read as a zone and five fields, so the fourth and fifth are checked.
            (
                "0 9 * * 1 2",
                "validate weekly schedule: expected day-of-month and month to be *",
            ),
            (
                "0 9 * * 1 2 3",
                "parse schedule: expected exactly 5 fields, found 7: [0 9 * * 1 2 3]",
            ),
        ];
        for (raw, message) in cases {
            assert_eq!(check(raw), Err(message.to_owned()), "{raw:?}");
        }
    }

    #[test]
    fn a_ttl_is_cut_to_whole_minutes_within_coders_bounds() {
        assert_eq!(stored_ttl_ms(None), Ok(None));
        assert_eq!(stored_ttl_ms(Some(0)), Ok(None));
        assert_eq!(stored_ttl_ms(Some(60_000)), Ok(Some(60_000)));
        assert_eq!(stored_ttl_ms(Some(90_500)), Ok(Some(60_000)));
        assert_eq!(stored_ttl_ms(Some(28_800_000)), Ok(Some(28_800_000)));
        assert_eq!(stored_ttl_ms(Some(TTL_MAXIMUM_MS)), Ok(Some(TTL_MAXIMUM_MS)));
        assert_eq!(
            stored_ttl_ms(Some(TTL_MAXIMUM_MS + 59_999)),
            Ok(Some(TTL_MAXIMUM_MS))
        );
        assert_eq!(
            stored_ttl_ms(Some(TTL_MAXIMUM_MS + 60_000)),
            Err(TtlError::TooLong)
        );
        assert_eq!(stored_ttl_ms(Some(59_999)), Err(TtlError::TooShort));
        assert_eq!(stored_ttl_ms(Some(-60_000)), Err(TtlError::TooShort));
        assert_eq!(
            TtlError::TooShort.to_string(),
            "time until shutdown must be at least one minute"
        );
        assert_eq!(
            TtlError::TooLong.to_string(),
            "time until shutdown must be less than 30 days"
        );
    }
}
