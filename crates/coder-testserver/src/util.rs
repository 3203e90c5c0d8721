//! Small helpers: timestamps, randomness, hashing, name rules.

use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest as _, Sha256};

const ALPHANUMERIC: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// RFC 3339 UTC timestamp with microseconds, e.g. `2026-11-29T22:47:26.123456Z`.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_micros()
    )
}

pub(crate) fn now() -> String {
    rfc3339(SystemTime::now())
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `len` random characters from `0-9A-Za-z` (rejection sampling, no modulo bias).
pub(crate) fn random_alphanumeric(len: usize) -> anyhow::Result<String> {
    let mut out = String::with_capacity(len);
    let mut buf = [0u8; 64];
    while out.len() < len {
        getrandom::fill(&mut buf).map_err(|e| anyhow::anyhow!("random source failed: {e}"))?;
        for byte in buf {
            // 248 = 4 * 62: accept only bytes below it.
            if byte < 248 && out.len() < len {
                out.push(char::from(ALPHANUMERIC[usize::from(byte % 62)]));
            }
        }
    }
    Ok(out)
}

/// `len` random bytes rendered as lowercase hex (`2 * len` chars).
pub(crate) fn random_hex(len: usize) -> anyhow::Result<String> {
    let mut buf = vec![0u8; len];
    getrandom::fill(&mut buf).map_err(|e| anyhow::anyhow!("random source failed: {e}"))?;
    Ok(hex(&buf))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Constant-time equality (length leaks, content does not).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `^[a-zA-Z0-9]+(?:<sep>[a-zA-Z0-9]+)*$` where `sep` is any of `separators`.
fn words_separated_by(name: &str, separators: &[char]) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || separators.contains(&c))
        && name
            .split(|c| separators.contains(&c))
            .all(|part| !part.is_empty())
}

/// Template and workspace names: `^[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*$`, 1-32 chars, not `new`/`create`.
pub(crate) fn valid_template_name(name: &str) -> bool {
    name.len() <= 32 && words_separated_by(name, &['-']) && name != "new" && name != "create"
}

/// Coder's `NameValid` (tags `organization_name`, `username`, `template_name`, `workspace_name`): the same rule as
/// [`valid_template_name`].
pub(crate) fn valid_name(name: &str) -> bool {
    valid_template_name(name)
}

/// Coder's `GroupNameValid` (tag `group_name`): `^[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*$`, at most 255 bytes, not
/// `new`/`create`.
pub(crate) fn valid_group_name(name: &str) -> bool {
    name.len() <= 255 && words_separated_by(name, &['-']) && name != "new" && name != "create"
}

/// Coder's `DisplayNameValid` (tags `organization_display_name`, `template_display_name`, `group_display_name`):
/// empty, or at most 64 bytes matching `^[^\s](.*[^\s])?$` (Go's `\s` is `[\t\n\f\r ]` and `.` is anything but
/// `\n`).
pub(crate) fn valid_display_name(name: &str) -> bool {
    let space = |c: char| matches!(c, '\t' | '\n' | '\x0c' | '\r' | ' ');
    if name.is_empty() {
        return true;
    }
    name.len() <= 64 && !name.starts_with(space) && !name.ends_with(space) && !name.contains('\n')
}

/// Coder's `UserRealNameValid` (tag `user_real_name`): at most 128 bytes, without leading or trailing whitespace (Go's
/// `strings.TrimSpace`: Unicode white space).
pub(crate) fn valid_user_real_name(name: &str) -> bool {
    name.len() <= 128 && name.trim() == name
}

/// The characters outside ASCII that the `email` rule's expression allows (`\x{00A0}-\x{D7FF}`,
/// `\x{F900}-\x{FDCF}`, `\x{FDF0}-\x{FFEF}`).
fn email_ucs(c: char) -> bool {
    matches!(c, '\u{a0}'..='\u{d7ff}' | '\u{f900}'..='\u{fdcf}' | '\u{fdf0}'..='\u{ffef}')
}

/// The `validate:"email"` tag of go-playground/validator v10.30.0 as Coder's request types use it: Go's
/// `mail.ParseAddress` must accept the value and the validator's expression must match all of it. Together: a local
/// part of dot-separated atoms (letters, digits, ``!#$%&'*+-/=?^_`{|}~`` and [`email_ucs`]; no leading, trailing or
/// double dot) or a non-empty quoted string (printable ASCII, tabs, backslash pairs, [`email_ucs`]); `@`; a domain of
/// letters, digits, `-`, `~`, `.` and [`email_ucs`] with at least one dot (none leading, trailing or doubled) that
/// starts with a letter, digit or [`email_ucs`], ends with a letter or [`email_ucs`], and has a dot between a letter,
/// digit or [`email_ucs`] and a letter or [`email_ucs`] (the last label may not start with a digit).
pub(crate) fn valid_email(value: &str) -> bool {
    let Some((local, domain)) = value.rsplit_once('@') else {
        return false;
    };
    valid_email_local(local) && valid_email_domain(domain)
}

fn valid_email_local(local: &str) -> bool {
    if let Some(quoted) = local.strip_prefix('"') {
        let Some(content) = quoted.strip_suffix('"') else {
            return false;
        };
        let mut chars = content.chars();
        let mut any = false;
        while let Some(c) = chars.next() {
            any = true;
            let ok = match c {
                '\\' => chars
                    .next()
                    .is_some_and(|next| next == '\t' || matches!(next, ' '..='~') || email_ucs(next)),
                '"' => false,
                '\t' | ' '..='~' => true,
                c => email_ucs(c),
            };
            if !ok {
                return false;
            }
        }
        return any;
    }
    let atext = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || email_ucs(c);
    local
        .split('.')
        .all(|atom| !atom.is_empty() && atom.chars().all(atext))
}

fn valid_email_domain(domain: &str) -> bool {
    let chars: Vec<char> = domain.chars().collect();
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '~' || c == '.' || email_ucs(c);
    let alnum = |c: char| c.is_ascii_alphanumeric() || email_ucs(c);
    let alpha = |c: char| c.is_ascii_alphabetic() || email_ucs(c);
    let (Some(&first), Some(&last)) = (chars.first(), chars.last()) else {
        return false;
    };
    chars.iter().all(|&c| allowed(c))
        && domain.split('.').all(|label| !label.is_empty())
        && alnum(first)
        && alpha(last)
        && chars
            .windows(3)
            .any(|w| w[1] == '.' && alnum(w[0]) && alpha(w[2]))
}

/// Template version names: `^[a-zA-Z0-9]+(?:[_.-]{1}[a-zA-Z0-9]+)*$`, at most 64 chars.
pub(crate) fn valid_version_name(name: &str) -> bool {
    name.len() <= 64 && words_separated_by(name, &['_', '.', '-'])
}

/// Lowercase letters/digits separated by single hyphens (AI Gateway key and AI provider names).
pub(crate) fn valid_lower_slug(name: &str, max: usize) -> bool {
    name.len() <= max
        && words_separated_by(name, &['-'])
        && name
            .chars()
            .all(|c| c == '-' || c.is_ascii_lowercase() || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn user_real_names_follow_coders_rule() {
        assert!(valid_user_real_name(""));
        assert!(valid_user_real_name("Ada Lovelace"));
        assert!(!valid_user_real_name(" Ada"));
        assert!(!valid_user_real_name("Ada\u{a0}"), "Go trims Unicode white space");
        assert!(valid_user_real_name(&"a".repeat(128)));
        assert!(!valid_user_real_name(&"a".repeat(129)));
    }

    #[test]
    fn emails_follow_the_validators_rule() {
        for ok in [
            "a@b.c",
            "pw1@b.c",
            "first.last+tag@example.co.uk",
            "x@1.example",
            "x@a-b.c~d.ef",
            "\"quoted local\"@example.com",
            "ü@exämple.de",
        ] {
            assert!(valid_email(ok), "{ok}");
        }
        for bad in [
            "",
            "bad",
            "a@b",
            "a@b.c.",
            "a@.b.c",
            "a@b..c",
            ".a@b.c",
            "a.@b.c",
            "a..b@c.d",
            "a@b.1",
            "a@-b.c",
            "a@b.c-",
            "a b@c.d",
            "a@b c.d",
            "\"\"@b.c",
            "\"a\"b\"@c.d",
            "Name <a@b.c>",
            "a@[1.2.3.4]",
        ] {
            assert!(!valid_email(bad), "{bad}");
        }
    }

    #[test]
    fn formats_rfc3339() {
        let t = UNIX_EPOCH + Duration::from_micros(1_764_456_446_123_456);
        assert_eq!(rfc3339(t), "2025-11-29T22:47:26.123456Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000000Z");
    }

    #[test]
    fn random_strings() {
        let s = random_alphanumeric(43).unwrap();
        assert_eq!(s.len(), 43);
        assert!(s.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(random_hex(32).unwrap().len(), 64);
    }

    #[test]
    fn names() {
        assert!(valid_template_name("my-template"));
        assert!(!valid_template_name("my--template"));
        assert!(!valid_template_name("-x"));
        assert!(!valid_template_name("new"));
        assert!(valid_version_name("v1.2_3-a"));
        assert!(!valid_version_name("v1..2"));
        assert!(valid_lower_slug("my-key-1", 64));
        assert!(!valid_lower_slug("My-key", 64));
        assert!(!valid_lower_slug("a--b", 64));
        assert!(valid_group_name("Platform-Team-2"));
        assert!(valid_group_name(&"a".repeat(255)));
        assert!(!valid_group_name(&"a".repeat(256)));
        assert!(!valid_group_name("new"));
        assert!(!valid_group_name("has space"));
        assert!(!valid_group_name(""));
        assert!(valid_display_name(""));
        assert!(valid_display_name("Platform team ✓"));
        assert!(valid_display_name("x"));
        assert!(!valid_display_name(" leading"));
        assert!(!valid_display_name("trailing\t"));
        assert!(!valid_display_name("two\nlines"));
        assert!(valid_display_name("vertical\x0btab"));
        assert!(!valid_display_name(&"a".repeat(65)));
    }

    #[test]
    fn compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
