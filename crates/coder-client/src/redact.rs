//! Makes text that came from a server safe to copy into conditions, Events and logs: anything that looks like a
//! credential is replaced with [`REDACTED`] and the result is cut to [`MAX_MESSAGE_CHARS`] characters.
//!
//! What counts as a credential (the session token the client holds is removed separately, by value):
//! * a Coder API token, `<10 letters or digits>-<22 letters or digits>`;
//! * the value after `Bearer ` or `Basic ` (any case);
//! * the user information of a URL (`scheme://user:password@host`);
//! * a run of 32 or more letters, digits, `_`, `+` or `=` that mixes letters and digits (hex or base64 keys,
//!   JWT segments). UUIDs and paths stay readable: their pieces are shorter.
//!
//! Redaction runs before the cut, so a credential can never be split by the cut and half survive.

use crate::secret::REDACTED;

/// Longest text (in characters) kept from a server answer.
pub const MAX_MESSAGE_CHARS: usize = 256;
/// The shortest run of key-like characters that is treated as a secret.
const MIN_SECRET_RUN: usize = 32;

/// Removes the `sensitive` values, redacts credential-like text and bounds the length. Pure.
pub fn sanitize(text: &str, sensitive: &[&str]) -> String {
    bounded(&redact_credentials(&crate::secret::scrub(text, sensitive)))
}

/// Removes the `sensitive` values from `text` in every form Coder quotes them in, and nothing else (no cut). Pure.
pub fn scrub_values(text: &str, sensitive: &[&str]) -> String {
    crate::secret::scrub(text, sensitive)
}

/// `text` trimmed and cut to [`MAX_MESSAGE_CHARS`] characters (an ellipsis marks a cut).
pub fn bounded(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// Replaces everything in `text` that looks like a credential with [`REDACTED`]. Pure.
pub fn redact_credentials(text: &str) -> String {
    redact_key_like_runs(&redact_auth_schemes(&redact_userinfo(text)))
}

/// Characters that end the authority part of a URL (or the URL itself, inside prose).
fn ends_authority(c: char) -> bool {
    matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>' | '`') || c.is_whitespace()
}

fn ends_word(c: char) -> bool {
    matches!(c, '"' | '\'' | '<' | '>' | '`') || c.is_whitespace()
}

/// `scheme://user:password@host` → `scheme://[redacted]@host`. A password may contain `/`, `?` or `#`, which end
/// a well-formed authority: an `@` further on in the same word still ends the user information when a `:` comes
/// before it (over-redacting a port and path is the safe side).
fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let authority_start = at + 3;
        out.push_str(&rest[..authority_start]);
        rest = &rest[authority_start..];
        let authority_len = rest.find(ends_authority).unwrap_or(rest.len());
        let word_len = rest.find(ends_word).unwrap_or(rest.len());
        let userinfo_end = rest[..authority_len]
            .rfind('@')
            .or_else(|| rest[..word_len].rfind('@').filter(|&at| rest[..at].contains(':')));
        if let Some(last_at) = userinfo_end {
            out.push_str(REDACTED);
            rest = &rest[last_at..];
        }
    }
    out.push_str(rest);
    out
}

/// The credential after `Bearer ` or `Basic ` (any case) → `Bearer [redacted]`.
fn redact_auth_schemes(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = ["bearer ", "basic "]
        .iter()
        .filter_map(|scheme| lower[search..].find(scheme).map(|at| (search + at, scheme.len())))
        .min()
    {
        let (at, len) = found;
        let value_start = at + len;
        let value_len = text[value_start..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';'))
            .unwrap_or(text.len() - value_start);
        if value_len > 0 {
            out.push_str(&text[copied..value_start]);
            out.push_str(REDACTED);
            copied = value_start + value_len;
        }
        search = value_start + value_len;
    }
    out.push_str(&text[copied..]);
    out
}

/// Characters of a token-like run: letters, digits, and the separators of tokens and base64.
fn in_run(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '=')
}

/// Runs that hold a Coder API token or a long key-like piece → [`REDACTED`].
fn redact_key_like_runs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(in_run) {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let len = rest.find(|c: char| !in_run(c)).unwrap_or(rest.len());
        let run = &rest[..len];
        out.push_str(if is_secret_run(run) { REDACTED } else { run });
        rest = &rest[len..];
    }
    out.push_str(rest);
    out
}

fn is_secret_run(run: &str) -> bool {
    holds_coder_token(run) || run.split('-').any(is_key_like)
}

/// Whether `run` holds `<10 alphanumerics>-<22 alphanumerics>` bounded by anything else (or its ends).
fn holds_coder_token(run: &str) -> bool {
    let pieces: Vec<&str> = run.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    let mut offset = 0;
    pieces.windows(2).any(|pair| {
        let separator = offset + pair[0].len();
        offset = separator + 1;
        pair[0].len() == 10 && pair[1].len() == 22 && run.as_bytes().get(separator) == Some(&b'-')
    })
}

/// A long piece that mixes letters and digits: random key material rather than a word or a name.
fn is_key_like(piece: &str) -> bool {
    piece.len() >= MIN_SECRET_RUN
        && piece.bytes().any(|b| b.is_ascii_digit())
        && piece.bytes().any(|b| b.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "AbCdEf1234-0123456789abcdefGHIJKL";

    #[test]
    fn a_coder_token_anywhere_is_redacted() {
        let text = format!("Invalid API key {TOKEN}, try again; \"{TOKEN}\" and key={TOKEN}.");
        let out = redact_credentials(&text);
        assert!(!out.contains(TOKEN), "{out}");
        assert!(!out.contains("0123456789abcdefGHIJKL"), "{out}");
        assert_eq!(out.matches(REDACTED).count(), 3, "{out}");
        assert!(out.starts_with("Invalid API key [redacted], try again"), "{out}");
    }

    #[test]
    fn bearer_and_basic_values_are_redacted() {
        let out = redact_credentials("got Authorization: Bearer abc.def.ghi; then BASIC dXNlcjpwYXNz, done");
        assert_eq!(
            out,
            "got Authorization: Bearer [redacted]; then BASIC [redacted], done"
        );
    }

    #[test]
    fn url_userinfo_is_redacted_and_the_host_kept() {
        let out = redact_credentials("dial https://admin:hunter2@coder.example.com:8443/api failed");
        assert_eq!(out, "dial https://[redacted]@coder.example.com:8443/api failed");
        let out = redact_credentials("postgres://user@db/x and http://a:b@c@host/ end");
        assert_eq!(out, "postgres://[redacted]@db/x and http://[redacted]@host/ end");
        // An @ after the authority (in a path or prose) is not user information.
        let text = "see https://coder.example.com/users/@me and mail admin@example.com";
        assert_eq!(redact_credentials(text), text);
        // A password with `/`, `#` or `?` ends a well-formed authority early; it is still user information.
        for url in [
            "https://admin:pa/ss@host/x",
            "https://u:p#w@host",
            "https://u:p?w@host",
        ] {
            let out = redact_credentials(&format!("bad {url} here"));
            assert!(out.starts_with("bad https://[redacted]@host"), "{out}");
        }
    }

    #[test]
    fn long_hex_and_base64_runs_are_redacted() {
        let hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let b64 = "eyJhbGciOiJFZERTQSJ9eyJsaWNlbnNlIjoib25lIn0";
        let out = redact_credentials(&format!("key {hex} licence {b64}.sig"));
        assert_eq!(out, "key [redacted] licence [redacted].sig");
    }

    #[test]
    fn uuids_paths_and_words_stay_readable() {
        let text = "organization 3f1c2a9e-8b7d-4c6e-9f00-112233445566 at /api/v2/organizations/default/provisionerkeys: \
                    external_provisioner_daemons_are_not_entitled_here";
        assert_eq!(redact_credentials(text), text);
    }

    #[test]
    fn bounded_cuts_on_a_character_boundary() {
        let long = "é".repeat(1000);
        let out = bounded(&long);
        assert_eq!(out.chars().count(), MAX_MESSAGE_CHARS + 1);
        assert!(out.ends_with('…'));
        assert_eq!(bounded("  short  "), "short");
        let exact = "x".repeat(MAX_MESSAGE_CHARS);
        assert_eq!(bounded(&exact), exact);
    }

    #[test]
    fn sanitize_redacts_before_cutting() {
        // The token straddles the cut: redaction first means no piece of it survives.
        let text = format!("{}{TOKEN}", "x ".repeat((MAX_MESSAGE_CHARS - 10) / 2));
        let out = sanitize(&text, &[]);
        assert!(!out.contains("AbCdEf1234"), "{out}");
        assert!(out.chars().count() <= MAX_MESSAGE_CHARS + 1);
        assert_eq!(sanitize("the s3cr3t value", &["s3cr3t"]), "the [redacted] value");
    }

    proptest::proptest! {
        /// Whatever surrounds it, a Coder-format token never survives and the output stays bounded.
        #[test]
        fn no_token_survives(
            id in "[0-9A-Za-z]{10}",
            secret in "[0-9A-Za-z]{22}",
            before in "\\PC{0,300}",
            after in "[ ,;.:\"'()/]\\PC{0,50}",
        ) {
            let before = before.trim_end_matches(in_run);
            let text = format!("{before} {id}-{secret}{after}");
            let out = sanitize(&text, &[]);
            proptest::prop_assert!(!out.contains(&secret), "{}", out);
            proptest::prop_assert!(out.chars().count() <= MAX_MESSAGE_CHARS + 1);
        }
    }
}
