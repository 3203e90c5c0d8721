//! Operator-access bootstrap (see docs/controllers/control-plane.md): a Coder system user
//! `coder-k8s-operator` with the `owner` role, `organization-admin` in every organization, and a long-lived
//! API token, written directly into Coder's PostgreSQL database in one transaction.
//!
//! TLS to PostgreSQL is not supported yet: connections are plain TCP, and a URL asking for TLS
//! (`sslmode=require`, `verify-ca`, `verify-full`) is rejected with an `invalid_url` error rather than
//! silently downgraded.

mod bootstrap;
mod token;
mod url;

pub use bootstrap::{
    BootstrapError, OPERATOR_EMAIL, OPERATOR_USERNAME, SourcedBootstrapError, TOKEN_LIFETIME_SECONDS,
    ensure_operator_access, revoke_operator_access,
};
pub use token::{OperatorToken, TokenError, token_name};
pub use url::{UrlError, UrlProblem, parse_database_url};
