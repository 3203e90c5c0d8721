//! Validation and parsing of the PostgreSQL connection URL. Errors never contain the URL (it usually holds
//! a password); they name where it came from only when the caller supplies that as context.

use std::fmt;
use std::str::FromStr as _;

/// What is wrong with a connection URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlProblem {
    /// Empty value.
    Empty,
    /// Does not start with lowercase `postgres://` or `postgresql://`.
    Scheme,
    /// Leading/trailing whitespace or a control character (e.g. a trailing newline from `echo`).
    Whitespace,
    /// Asks for TLS (`sslmode=require`, `verify-ca`, `verify-full`), which is not supported yet.
    TlsUnsupported,
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
                "it requires TLS (sslmode require/verify-ca/verify-full), which coder-k8s does not support yet; use sslmode=disable or prefer"
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

/// Validates `url` and turns it into a connection config.
pub fn parse_database_url(url: &str) -> Result<tokio_postgres::Config, UrlError> {
    if url.is_empty() {
        return Err(fail(UrlProblem::Empty));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(fail(UrlProblem::Whitespace));
    }
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(fail(UrlProblem::Scheme));
    }
    if let Some((_, query)) = url.split_once('?') {
        for pair in query.split('&') {
            if let Some(("sslmode", value)) = pair.split_once('=')
                && !matches!(value, "disable" | "allow" | "prefer")
            {
                return Err(fail(UrlProblem::TlsUnsupported));
            }
        }
    }
    // tokio-postgres does not know libpq's `allow`; it is `prefer` without TLS support anyway.
    let normalized = url.replace("sslmode=allow", "sslmode=prefer");
    tokio_postgres::Config::from_str(&normalized).map_err(|_| fail(UrlProblem::Unparseable))
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
                format!("postgres://u:{SECRET}@h/d?sslmode=require"),
                UrlProblem::TlsUnsupported,
            ),
            (
                format!("postgres://u:{SECRET}@h/d?sslmode=verify-full"),
                UrlProblem::TlsUnsupported,
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
}
