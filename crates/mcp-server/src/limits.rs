//! Defaults and bounds of the numeric tool arguments, and their checks (namespaces and names are checked by
//! `crate::names`). An argument out of range is a tool error that names the argument and its range (it is never
//! silently clamped, so a caller learns that it got less than it asked).

/// `get_pod_logs`: lines from the end of the log when `tailLines` is not given.
pub const DEFAULT_POD_LOG_TAIL_LINES: i64 = 2000;
/// `get_pod_logs` and `get_workspace_build_logs`: the most bytes returned (also the default).
pub const MAX_LOG_BYTES: i64 = 1 << 20;
/// Appended to a log that was cut at its byte limit.
pub const LOG_TRUNCATED_SUFFIX: &str = "\n(truncated)";
/// `get_events`: events per page when `limit` is not given.
pub const DEFAULT_EVENT_LIMIT: i64 = 200;
/// `get_events`: the largest page.
pub const MAX_EVENT_LIMIT: i64 = 1000;
/// `list_control_plane_pods`: pods returned when `limit` is not given.
pub const DEFAULT_POD_LIMIT: i64 = 100;
/// `list_control_plane_pods`: the most pods returned.
pub const MAX_POD_LIMIT: i64 = 500;

/// An optional bounded number: `default` when absent, an error naming the range when outside `min..=max`.
pub fn bounded(field: &str, value: Option<i64>, default: i64, min: i64, max: i64) -> Result<i64, String> {
    match value {
        None => Ok(default),
        Some(v) if (min..=max).contains(&v) => Ok(v),
        Some(v) => Err(format!("{field} must be between {min} and {max} (got {v})")),
    }
}

/// An optional number with only a lower bound.
pub fn at_least(field: &str, value: Option<i64>, default: i64, min: i64) -> Result<i64, String> {
    match value {
        None => Ok(default),
        Some(v) if v >= min => Ok(v),
        Some(v) => Err(format!("{field} must be at least {min} (got {v})")),
    }
}

/// Cuts `bytes` to `limit` bytes, marking a cut with [`LOG_TRUNCATED_SUFFIX`]; invalid UTF-8 (also a character cut
/// in half) is replaced, never an error.
pub fn truncate_log(bytes: &[u8], limit: usize) -> String {
    if bytes.len() <= limit {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut text = String::from_utf8_lossy(&bytes[..limit]).into_owned();
    text.push_str(LOG_TRUNCATED_SUFFIX);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_defaults_accepts_the_range_and_names_it_otherwise() {
        assert_eq!(bounded("limit", None, 200, 1, 1000).unwrap(), 200);
        assert_eq!(bounded("limit", Some(1), 200, 1, 1000).unwrap(), 1);
        assert_eq!(bounded("limit", Some(1000), 200, 1, 1000).unwrap(), 1000);
        assert_eq!(
            bounded("limit", Some(1001), 200, 1, 1000).unwrap_err(),
            "limit must be between 1 and 1000 (got 1001)"
        );
        assert_eq!(
            bounded("limit", Some(0), 200, 1, 1000).unwrap_err(),
            "limit must be between 1 and 1000 (got 0)"
        );
        assert_eq!(
            at_least("tailLines", Some(-1), 5, 0).unwrap_err(),
            "tailLines must be at least 0 (got -1)"
        );
        assert_eq!(at_least("tailLines", None, 5, 0).unwrap(), 5);
    }

    #[test]
    fn truncate_log_marks_only_a_cut() {
        assert_eq!(truncate_log(b"abc", 3), "abc");
        assert_eq!(truncate_log(b"abcd", 3), "abc\n(truncated)");
        // A multi-byte character cut in half is replaced, not an error.
        assert_eq!(truncate_log("aé".as_bytes(), 2), "a\u{fffd}\n(truncated)");
    }
}
