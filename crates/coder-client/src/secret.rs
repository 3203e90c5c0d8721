//! Credential newtypes whose `Debug`/`Display` never show the value.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What every redacted value prints as.
pub const REDACTED: &str = "[redacted]";

/// A Coder session/API token (`<id>-<secret>`), sent in the `Coder-Session-Token` header.
///
/// `Debug` and `Display` are redacted; use [`SessionToken::expose`] only where the value is sent.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionToken(String);

impl SessionToken {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The raw token, for the request header only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The parts that must never appear in text: the whole token and, for `<id>-<secret>` tokens, the
    /// secret part alone.
    pub(crate) fn sensitive_parts(&self) -> Vec<&str> {
        let mut parts = vec![self.0.as_str()];
        if let Some((_, secret)) = self.0.split_once('-')
            && secret.len() >= 8
        {
            parts.push(secret);
        }
        parts
    }
}

impl fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionToken({REDACTED})")
    }
}

impl fmt::Display for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl From<String> for SessionToken {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for SessionToken {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// A secret carried in a request or response body (provisioner key, proxy token, AI Gateway key,
/// upstream API keys, license JWTs).
///
/// `Debug` and `Display` are redacted. Serialization writes the real value (it has to reach Coder);
/// deserialization reads it transparently.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The raw value, for writing it into a Kubernetes Secret or a request body.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Consumes the wrapper and returns the raw value.
    pub fn into_inner(self) -> String {
        self.0
    }

    /// `true` for an empty value (e.g. `proxy_token` when no token was regenerated).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({REDACTED})")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Self(String::deserialize(deserializer)?))
    }
}

/// Replaces every occurrence of each sensitive string in `text` with [`REDACTED`]: the value itself (also without
/// trailing whitespace, as a value read from a file often ends in a newline), and the forms
/// Coder and its Terraform provider write it in, Go's `%q` and JSON string escaping (without the quotes), so a
/// value with a newline, quote or tab is removed from a message that quotes it too.
pub(crate) fn scrub(text: &str, sensitive: &[&str]) -> String {
    let mut forms: Vec<String> = sensitive
        .iter()
        .filter(|s| !s.is_empty())
        .flat_map(|s| {
            [
                (*s).to_owned(),
                s.trim_end().to_owned(),
                go_quoted(s),
                json_escaped(s, true),
                json_escaped(s, false),
            ]
        })
        .filter(|form| !form.is_empty())
        .collect();
    // Longest first, so no form is half-replaced by a shorter one it contains.
    forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    forms.dedup();
    let mut out = text.to_owned();
    for form in &forms {
        if out.contains(form.as_str()) {
            out = out.replace(form.as_str(), REDACTED);
        }
    }
    out
}

/// `value` as Go's `strconv.Quote` writes it, without the surrounding quotes. Go's printable set is approximated
/// by "not a control character".
fn go_quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// `value` as Go's `encoding/json` writes a string, without the surrounding quotes; `html` adds the escapes of
/// `<`, `>` and `&` that Go writes by default.
fn json_escaped(value: &str, html: bool) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' if html => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c if u32::from(c) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)))
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "abcdefghij-0123456789abcdefghijkl";

    #[test]
    fn session_token_debug_and_display_are_redacted() {
        let t = SessionToken::new(TOKEN);
        assert_eq!(format!("{t}"), REDACTED);
        assert_eq!(format!("{t:?}"), "SessionToken([redacted])");
        assert!(!format!("{t:#?}").contains("abcdefghij"));
        assert_eq!(t.expose(), TOKEN);
    }

    #[test]
    fn secret_debug_and_display_are_redacted() {
        let s = Secret::new("s3cr3t-value");
        assert_eq!(format!("{s}"), REDACTED);
        assert_eq!(format!("{s:?}"), "Secret([redacted])");
        assert_eq!(s.expose(), "s3cr3t-value");
    }

    #[test]
    fn secret_inside_a_struct_debug_is_redacted() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Created {
            key: Secret,
        }
        let c: Created = serde_json::from_str(r#"{"key":"topsecretvalue"}"#).unwrap();
        assert!(!format!("{c:?}").contains("topsecretvalue"));
        assert_eq!(c.key.expose(), "topsecretvalue");
    }

    #[test]
    fn secret_serializes_to_the_raw_value() {
        let s = Secret::new("v");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"v\"");
    }

    #[test]
    fn scrub_removes_the_token_and_its_secret_part() {
        let t = SessionToken::new(TOKEN);
        let text = format!("bad key {TOKEN} and secret 0123456789abcdefghijkl");
        let out = scrub(&text, &t.sensitive_parts());
        assert!(!out.contains(TOKEN));
        assert!(!out.contains("0123456789abcdefghijkl"));
    }

    /// Each form a value can take in Coder's messages, for a value that needs escaping.
    fn assert_scrubbed(value: &str, quoted: &str) {
        for text in [
            format!("parameter \"region\": value \"{quoted}\" does not match"),
            format!("plain {value} end"),
        ] {
            let out = scrub(&text, &[value]);
            assert!(!out.contains(quoted) && !out.contains(value), "{out}");
            assert!(out.contains(REDACTED), "{out}");
        }
    }

    #[test]
    fn scrub_removes_a_value_ending_in_a_newline_as_go_and_json_quote_it() {
        assert_scrubbed("hunter2\n", r"hunter2\n");
    }

    #[test]
    fn scrub_removes_a_value_with_a_quote_as_go_and_json_quote_it() {
        assert_scrubbed(r#"pa"ss"#, r#"pa\"ss"#);
    }

    #[test]
    fn scrub_removes_a_value_with_a_tab_as_go_and_json_quote_it() {
        assert_scrubbed("pa\tss", r"pa\tss");
    }

    #[test]
    fn scrub_removes_the_forms_only_go_or_only_json_write() {
        let value = "a<b\u{1}\u{7f}";
        let go = r"a<b\x01\x7f";
        let json = "a\\u003cb\\u0001\u{7f}";
        for text in [format!("value \"{go}\""), format!(r#"{{"value":"{json}"}}"#)] {
            let out = scrub(&text, &[value]);
            assert!(!out.contains("a<b") && !out.contains(r"a\u003cb"), "{out}");
            assert!(out.contains(REDACTED), "{out}");
        }
    }

    #[test]
    fn scrub_removes_a_value_quoted_inside_a_longer_form_whole() {
        let out = scrub(r#"bad "a\\" here"#, &[r"a\"]);
        assert_eq!(out, format!(r#"bad "{REDACTED}" here"#));
    }
}
