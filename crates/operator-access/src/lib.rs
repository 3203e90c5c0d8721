//! Operator-access bootstrap (see docs/controllers/control-plane.md): a Coder system user
//! `coder-k8s-operator` with the `owner` role, `organization-admin` in every organization, and a long-lived
//! API token, written directly into Coder's PostgreSQL database in one transaction.
//!
//! TLS to PostgreSQL follows libpq's `sslmode` (`disable`, `allow`, `prefer` (default), `require`, `verify-ca`,
//! `verify-full`) and `sslrootcert` (a PEM file in the operator's file system, or `system`); see `tls`.

mod bootstrap;
mod tls;
mod token;
mod url;

pub use bootstrap::{
    BootstrapError, OPERATOR_EMAIL, OPERATOR_ORGANIZATION_ROLE, OPERATOR_SITE_ROLE, OPERATOR_USERNAME,
    SourcedBootstrapError, TOKEN_LIFETIME_SECONDS, ensure_operator_access, revoke_operator_access,
};
pub use tls::{RootCerts, SslMode, TlsFailure, TlsSettings, Verification};
pub use token::{OperatorToken, TokenError, token_name};
pub use url::{ConnectionSettings, UrlError, UrlProblem, parse_connection_settings, parse_database_url};
