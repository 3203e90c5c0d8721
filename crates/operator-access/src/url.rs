//! Validation and parsing of the PostgreSQL connection URL. Errors never contain the URL (it usually holds
//! a password); they name where it came from only when the caller supplies that as context.

use std::fmt;
use std::str::FromStr as _;

use crate::tls::{RootCerts, SslMode, TlsSettings};

/// What is wrong with a connection URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlProblem {
    /// Empty value.
    Empty,
    /// Does not start with lowercase `postgres://` or `postgresql://`.
    Scheme,
    /// Leading/trailing whitespace or a control character (e.g. a trailing newline from `echo`).
    Whitespace,
    /// Asks for a TLS feature the operator does not implement: client certificates (`sslcert`, `sslkey`,
    /// `sslpassword`) or revocation lists (`sslcrl`, `sslcrldir`). Coder itself may still use such a URL.
    TlsUnsupported,
    /// `sslmode` is not one of libpq's six values.
    SslMode,
    /// `sslrootcert=system` with an `sslmode` weaker than `verify-full` (refused, as libpq does).
    WeakSslModeWithSystemRoots,
    /// `sslmode=verify-ca` without a CA file: checking the chain against the system CAs but not the host name
    /// would accept any publicly trusted certificate (libpq refuses it too: it needs a root certificate file).
    VerifyCaWithoutCaFile,
    /// Not parseable as a PostgreSQL URL.
    Unparseable,
}

impl fmt::Display for UrlProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Empty => "it is empty",
            Self::Scheme => "it must start with postgres:// or postgresql://",
            Self::Whitespace => {
                "it contains whitespace or control characters (for example a trailing newline)"
            }
            Self::TlsUnsupported => {
                "it asks for TLS client certificates (sslcert/sslkey/sslpassword) or revocation lists (sslcrl/sslcrldir), which the coder-k8s operator does not support"
            }
            Self::SslMode => "sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full",
            Self::WeakSslModeWithSystemRoots => {
                "sslrootcert=system needs sslmode=verify-full (a weaker sslmode would not check the host name)"
            }
            Self::VerifyCaWithoutCaFile => {
                "sslmode=verify-ca needs sslrootcert=<path of a CA file> (against the system CAs, use sslmode=verify-full, which also checks the host name)"
            }
            Self::Unparseable => "it is not a valid PostgreSQL connection URL",
        })
    }
}

/// An invalid connection URL. Its message never contains the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct UrlError {
    problem: UrlProblem,
    source_description: Option<String>,
}

impl UrlError {
    pub fn problem(&self) -> UrlProblem {
        self.problem
    }

    /// Names where the URL came from in the message, e.g. `Secret coder/db key url`. Must not be the URL.
    pub fn with_source_description(mut self, description: impl Into<String>) -> Self {
        self.source_description = Some(description.into());
        self
    }
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid PostgreSQL connection URL")?;
        if let Some(source) = &self.source_description {
            write!(f, " in {source}")?;
        }
        write!(f, ": {}", self.problem)
    }
}

fn fail(problem: UrlProblem) -> UrlError {
    UrlError {
        problem,
        source_description: None,
    }
}

/// A parsed connection URL: tokio-postgres's settings and the TLS settings it leaves to the operator.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// Everything but TLS; its `sslmode` is set per connection attempt.
    pub config: tokio_postgres::Config,
    pub tls: TlsSettings,
}

/// Validates `url` and turns it into a connection config (TLS settings validated but not returned).
pub fn parse_database_url(url: &str) -> Result<tokio_postgres::Config, UrlError> {
    parse_connection_settings(url).map(|settings| settings.config)
}

/// Validates `url` and splits it into tokio-postgres's settings and libpq's TLS settings (`sslmode`,
/// `sslrootcert`), which tokio-postgres does not fully understand.
pub fn parse_connection_settings(url: &str) -> Result<ConnectionSettings, UrlError> {
    if url.is_empty() {
        return Err(fail(UrlProblem::Empty));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(fail(UrlProblem::Whitespace));
    }
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(fail(UrlProblem::Scheme));
    }
    let (rest, query) = match url.split_once('?') {
        Some((rest, query)) => (rest, query),
        None => (url, ""),
    };
    let mut mode = None;
    let mut root_certs = RootCerts::Default;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => {
                let value = percent_decode(raw).ok_or_else(|| fail(UrlProblem::Unparseable))?;
                mode = Some(SslMode::parse(&value).ok_or_else(|| fail(UrlProblem::SslMode))?);
            }
            "sslrootcert" => {
                let value = percent_decode(raw).ok_or_else(|| fail(UrlProblem::Unparseable))?;
                root_certs = RootCerts::parse(&value);
            }
            "sslcert" | "sslkey" | "sslpassword" | "sslcrl" | "sslcrldir" => {
                return Err(fail(UrlProblem::TlsUnsupported));
            }
            _ => kept.push(pair),
        }
    }
    if mode == Some(SslMode::VerifyCa) && root_certs == RootCerts::Default {
        return Err(fail(UrlProblem::VerifyCaWithoutCaFile));
    }
    let tls = TlsSettings::new(mode, root_certs).map_err(|_| fail(UrlProblem::WeakSslModeWithSystemRoots))?;
    let remaining = if kept.is_empty() {
        rest.to_owned()
    } else {
        format!("{rest}?{}", kept.join("&"))
    };
    let config = tokio_postgres::Config::from_str(&remaining).map_err(|_| fail(UrlProblem::Unparseable))?;
    Ok(ConnectionSettings { config, tls })
}

/// Decodes `%XX` escapes (a `+` stays a `+`, as in libpq); `None` for a bad escape or invalid UTF-8.
fn percent_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cr3t-pa55";

    #[test]
    fn accepts_both_schemes() {
        for url in [
            "postgres://coder:pw@db.example:5432/coder?sslmode=disable",
            "postgresql://coder@localhost/coder",
            "postgres://u:p@h/d?sslmode=prefer",
            "postgres://u:p@h/d?sslmode=allow",
            "postgres://u:p@h/d?sslmode=require",
            "postgres://u:p@h/d?sslmode=verify-ca&sslrootcert=/etc/ca.crt",
            "postgres://u:p@h/d?sslmode=verify-full&sslrootcert=system",
            "postgres://u:p@h/d?sslrootcert=system",
        ] {
            assert!(parse_database_url(url).is_ok(), "{url}");
        }
        let config = parse_database_url("postgres://coder:pw@db:6543/mydb").unwrap();
        assert_eq!(config.get_user(), Some("coder"));
        assert_eq!(config.get_dbname(), Some("mydb"));
        assert_eq!(config.get_ports(), &[6543]);
    }

    #[test]
    fn rejects_without_leaking() {
        let cases = [
            (format!("Postgres://u:{SECRET}@h/d"), UrlProblem::Scheme),
            (format!("POSTGRESQL://u:{SECRET}@h/d"), UrlProblem::Scheme),
            (format!("mysql://u:{SECRET}@h/d"), UrlProblem::Scheme),
            (format!("u:{SECRET}@h/d"), UrlProblem::Scheme),
            (format!("postgres://u:{SECRET}@h/d\n"), UrlProblem::Whitespace),
            (format!(" postgres://u:{SECRET}@h/d"), UrlProblem::Whitespace),
            (
                format!("postgres://u:{SECRET}@h/d?sslmode=verify-fulll"),
                UrlProblem::SslMode,
            ),
            (
                format!("postgres://u:{SECRET}@h/d?sslmode=require&sslcert=/c.crt"),
                UrlProblem::TlsUnsupported,
            ),
            (
                format!("postgres://u:{SECRET}@h/d?sslkey=/c.key"),
                UrlProblem::TlsUnsupported,
            ),
            (
                format!("postgres://u:{SECRET}@h/d?sslmode=verify-ca&sslrootcert=system"),
                UrlProblem::WeakSslModeWithSystemRoots,
            ),
            (
                format!("postgres://u:{SECRET}@h/d?sslmode=verify-ca"),
                UrlProblem::VerifyCaWithoutCaFile,
            ),
            (
                format!("postgres://u:{SECRET}@h/d?sslrootcert=%zz"),
                UrlProblem::Unparseable,
            ),
            (
                format!("postgres://u:{SECRET}@h/d?unknown_option=1"),
                UrlProblem::Unparseable,
            ),
            (
                format!("postgres://u:{SECRET}@h:notaport/d"),
                UrlProblem::Unparseable,
            ),
            (String::new(), UrlProblem::Empty),
        ];
        for (url, problem) in cases {
            let err = parse_database_url(&url).unwrap_err();
            assert_eq!(err.problem(), problem, "{url:?}");
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains(SECRET), "{shown}");
            assert!(!shown.contains("@h"), "{shown}");
        }
    }

    #[test]
    fn names_the_source_only_when_given() {
        let err = parse_database_url("mysql://x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid PostgreSQL connection URL: it must start with postgres:// or postgresql://"
        );
        let err = err.with_source_description("Secret coder/db key url");
        assert!(
            err.to_string()
                .starts_with("invalid PostgreSQL connection URL in Secret coder/db key url: ")
        );
    }

    #[test]
    fn splits_the_tls_settings_from_the_rest() {
        let settings = parse_connection_settings(
            "postgres://u:p@db:6543/mydb?application_name=x&sslmode=verify-ca&sslrootcert=%2Fetc%2Fpg%20ca%2Bx.crt",
        )
        .unwrap();
        assert_eq!(settings.tls.mode(), SslMode::VerifyCa);
        assert_eq!(
            settings.tls.root_certs(),
            &RootCerts::File("/etc/pg ca+x.crt".into())
        );
        assert_eq!(settings.config.get_application_name(), Some("x"));
        assert_eq!(settings.config.get_ports(), &[6543]);

        let settings = parse_connection_settings("postgres://u@db/d").unwrap();
        assert_eq!(settings.tls.mode(), SslMode::Prefer, "libpq's default");
        assert_eq!(settings.tls.root_certs(), &RootCerts::Default);

        let settings = parse_connection_settings("postgres://u@db/d?sslrootcert=system").unwrap();
        assert_eq!(
            settings.tls.mode(),
            SslMode::VerifyFull,
            "sslrootcert=system defaults to verify-full"
        );
        assert_eq!(settings.tls.root_certs(), &RootCerts::System);

        let settings = parse_connection_settings("postgres://u@db/d?sslrootcert=&sslmode=allow").unwrap();
        assert_eq!(settings.tls.mode(), SslMode::Allow);
        assert_eq!(
            settings.tls.root_certs(),
            &RootCerts::Default,
            "empty means unset"
        );
    }

    #[test]
    fn percent_decoding_is_strict() {
        assert_eq!(percent_decode("a%2Fb+c").as_deref(), Some("a/b+c"));
        assert_eq!(percent_decode("%"), None);
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%ff"), None, "not UTF-8");
        assert_eq!(percent_decode("%e2%82%ac").as_deref(), Some("\u{20ac}"));
    }
}
