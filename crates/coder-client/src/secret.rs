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

/// Replaces every occurrence of each sensitive string in `text` with [`REDACTED`].
pub(crate) fn scrub(text: &str, sensitive: &[&str]) -> String {
    let mut out = text.to_owned();
    for s in sensitive {
        if !s.is_empty() && out.contains(s) {
            out = out.replace(s, REDACTED);
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
}
