//! The bootstrap transaction: the operator's Coder user, its organization memberships and its API token,
//! written into Coder's own tables (`users`, `organization_members`, `api_keys`) in one transaction.
//! Operator access as a whole: docs/controllers/control-plane.md.

use std::time::Duration;

use tokio_postgres::config::SslMode as WireSslMode;
use tokio_postgres::{Client, Config, NoTls};
use uuid::Uuid;

use crate::tls::{SslMode, TlsFailure, TlsSettings, connector};
use crate::token::{OperatorToken, token_name};
use crate::url::{ConnectionSettings, UrlError, parse_connection_settings, parse_database_url};

/// Username of the operator's Coder system user.
pub const OPERATOR_USERNAME: &str = "coder-k8s-operator";
/// Email of the operator's Coder system user.
pub const OPERATOR_EMAIL: &str = "coder-k8s-operator@coder-k8s.invalid";
/// The site role the bootstrap grants the operator user.
pub const OPERATOR_SITE_ROLE: &str = "owner";
/// The role the bootstrap grants the operator user in every organization.
pub const OPERATOR_ORGANIZATION_ROLE: &str = "organization-admin";
/// Lifetime of a new operator token: 365 days.
pub const TOKEN_LIFETIME_SECONDS: i64 = 365 * 24 * 60 * 60;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const OPERATION_TIMEOUT: Duration = Duration::from_secs(60);

/// A failed bootstrap or revoke. Messages never contain the URL, the database password or a token.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error(transparent)]
    InvalidUrl(#[from] UrlError),
    #[error("cannot connect to PostgreSQL: {0}")]
    Unreachable(String),
    #[error("PostgreSQL rejected the credentials: {0}")]
    Authentication(String),
    #[error("TLS to PostgreSQL failed: {0}")]
    Tls(String),
    #[error("PostgreSQL operation timed out after {0:?}")]
    Timeout(Duration),
    #[error("the database does not have the expected Coder schema ({step}): {message}")]
    Schema { step: &'static str, message: String },
    #[error("no organizations found in the Coder database (is Coder initialized?)")]
    NoOrganizations,
    #[error("PostgreSQL error ({step}): {message}")]
    Database { step: &'static str, message: String },
    #[error("generating the operator token failed: {0}")]
    Token(#[from] crate::token::TokenError),
}

/// A bootstrap error that names where the database URL came from (for example `Secret "coder-db-app" key "uri"`),
/// for conditions, Events and logs. Like [`BootstrapError`], it never shows the URL.
#[derive(Debug, thiserror::Error)]
#[error("operator access bootstrap with the PostgreSQL URL from {source_description}: {error}")]
pub struct SourcedBootstrapError {
    pub source_description: String,
    #[source]
    pub error: BootstrapError,
}

impl BootstrapError {
    /// Names the origin of the URL; the description must not be the URL itself.
    pub fn with_source(self, source_description: impl Into<String>) -> SourcedBootstrapError {
        SourcedBootstrapError {
            source_description: source_description.into(),
            error: self,
        }
    }

    /// A short, bounded category for metrics, Events and conditions.
    pub fn category(&self) -> &'static str {
        match self {
            Self::InvalidUrl(_) => "invalid_url",
            Self::Unreachable(_) => "unreachable",
            Self::Authentication(_) => "authentication",
            Self::Tls(_) => "tls",
            Self::Timeout(_) => "timeout",
            Self::Schema { .. } => "schema",
            Self::NoOrganizations => "no_organizations",
            Self::Database { .. } => "database",
            Self::Token(_) => "token",
        }
    }
}

/// Text of a tokio-postgres error without anything row-specific: for server errors only SQLSTATE and
/// the primary message (the DETAIL can contain row values, e.g. the hashed secret).
/// Other errors show their cause too (tokio-postgres's own text omits it, e.g. "Connection refused").
fn describe(err: &tokio_postgres::Error) -> String {
    match (err.as_db_error(), std::error::Error::source(err)) {
        (Some(db), _) => format!("{} {}: {}", db.severity(), db.code().code(), db.message()),
        (None, Some(cause)) => format!("{err}: {cause}"),
        (None, None) => err.to_string(),
    }
}

fn query_error(step: &'static str, err: &tokio_postgres::Error) -> BootstrapError {
    let message = describe(err);
    let schema = err.as_db_error().is_some_and(|db| {
        matches!(
            db.code().code(),
            // undefined_table, undefined_column, undefined_object (enum type), undefined_function,
            // invalid_text_representation (unknown enum value, e.g. a missing api_key_scope).
            "42P01" | "42703" | "42704" | "42883" | "22P02"
        )
    });
    if schema {
        BootstrapError::Schema { step, message }
    } else {
        BootstrapError::Database { step, message }
    }
}

/// Removes any accidental occurrence of the secrets from an error (defence in depth).
fn scrub(err: BootstrapError, secrets: &[&str]) -> BootstrapError {
    let clean = |mut text: String| {
        for secret in secrets.iter().filter(|s| s.len() >= 4) {
            text = text.replace(secret, "<redacted>");
        }
        text
    };
    match err {
        BootstrapError::Unreachable(m) => BootstrapError::Unreachable(clean(m)),
        BootstrapError::Authentication(m) => BootstrapError::Authentication(clean(m)),
        BootstrapError::Tls(m) => BootstrapError::Tls(clean(m)),
        BootstrapError::Schema { step, message } => BootstrapError::Schema {
            step,
            message: clean(message),
        },
        BootstrapError::Database { step, message } => BootstrapError::Database {
            step,
            message: clean(message),
        },
        other => other,
    }
}

/// Connects with libpq's `sslmode` strategy: `allow` tries plain first and TLS when the server refuses;
/// `prefer` tries TLS first and plain when the handshake fails or the server refuses the TLS connection;
/// `require`, `verify-ca` and `verify-full` use TLS only.
async fn connect(url: &str) -> Result<Client, BootstrapError> {
    let ConnectionSettings { mut config, tls } = parse_connection_settings(url)?;
    config.connect_timeout(CONNECT_TIMEOUT);
    match tls.mode() {
        SslMode::Disable => connect_plain(config).await,
        SslMode::Allow => match connect_plain(config.clone()).await {
            Err(refused) if refused_by_server(&refused) => {
                connect_tls(config, &tls, WireSslMode::Require).await.0
            }
            plain => plain,
        },
        SslMode::Prefer => match connect_tls(config.clone(), &tls, WireSslMode::Prefer).await {
            (Err(error), true) if refused_by_server(&error) || matches!(error, BootstrapError::Tls(_)) => {
                connect_plain(config).await
            }
            (result, _) => result,
        },
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
            connect_tls(config, &tls, WireSslMode::Require).await.0
        }
    }
}

/// Whether the server answered and said no (so another attempt with or without TLS may be accepted).
fn refused_by_server(error: &BootstrapError) -> bool {
    matches!(
        error,
        BootstrapError::Authentication(_) | BootstrapError::Database { step: "connect", .. }
    )
}

async fn connect_plain(mut config: Config) -> Result<Client, BootstrapError> {
    config.ssl_mode(WireSslMode::Disable);
    let (client, connection) = config.connect(NoTls).await.map_err(|e| connect_error(&e))?;
    tokio::spawn(async move {
        // Ends when the client is dropped; a broken connection surfaces as a query error.
        let _ = connection.await;
    });
    Ok(client)
}

/// A TLS connection attempt; also returns whether a TLS handshake was started (`prefer` falls back to plain
/// only then: a server without TLS is already handled by tokio-postgres).
async fn connect_tls(
    mut config: Config,
    tls: &TlsSettings,
    mode: WireSslMode,
) -> (Result<Client, BootstrapError>, bool) {
    let tls_connector = match connector(tls).await {
        Ok(connector) => connector,
        Err(failure) => return (Err(BootstrapError::Tls(failure.message().to_owned())), false),
    };
    config.ssl_mode(mode);
    let result = config.connect(tls_connector.clone()).await;
    let attempted = tls_connector.attempted();
    match result {
        Ok((client, connection)) => {
            tokio::spawn(async move {
                let _ = connection.await;
            });
            (Ok(client), attempted)
        }
        Err(error) => (Err(connect_error(&error)), attempted),
    }
}

/// A failed connection: TLS, a server-side refusal (credentials, pg_hba, unknown database) or unreachable.
fn connect_error(err: &tokio_postgres::Error) -> BootstrapError {
    let tls_failure = std::error::Error::source(err).and_then(|source| source.downcast_ref::<TlsFailure>());
    if let Some(failure) = tls_failure {
        return BootstrapError::Tls(failure.message().to_owned());
    }
    let message = describe(err);
    match err.as_db_error().map(|db| db.code().code()) {
        Some(code) if code.starts_with("28") => BootstrapError::Authentication(message),
        // A server-side refusal (e.g. unknown database) reached the server: not "unreachable".
        Some(_) => BootstrapError::Database {
            step: "connect",
            message,
        },
        None if message.contains("server does not support TLS") => BootstrapError::Tls(
            "the server does not offer TLS, and the sslmode of the URL requires it".to_owned(),
        ),
        None if message.starts_with("error performing TLS handshake") => BootstrapError::Tls(message),
        None => BootstrapError::Unreachable(message),
    }
}

fn password_of(url: &str) -> Option<String> {
    parse_database_url(url)
        .ok()
        .and_then(|c| c.get_password().map(|p| String::from_utf8_lossy(p).into_owned()))
}

/// Ensures the operator user, its memberships and its token exist, in one transaction, and returns the
/// token to store: `existing` when it is still valid for this control plane, otherwise a new one (older
/// tokens with the same name are deleted).
pub async fn ensure_operator_access(
    url: &str,
    namespace: &str,
    name: &str,
    existing: Option<&OperatorToken>,
) -> Result<OperatorToken, BootstrapError> {
    let token_name = token_name(namespace, name);
    let result = match tokio::time::timeout(OPERATION_TIMEOUT, ensure_inner(url, &token_name, existing)).await
    {
        Ok(result) => result,
        Err(_) => Err(BootstrapError::Timeout(OPERATION_TIMEOUT)),
    };
    result.map_err(|err| {
        let password = password_of(url).unwrap_or_default();
        let existing = existing.map(OperatorToken::expose_secret).unwrap_or_default();
        scrub(err, &[url, &password, existing])
    })
}

async fn ensure_inner(
    url: &str,
    token_name: &str,
    existing: Option<&OperatorToken>,
) -> Result<OperatorToken, BootstrapError> {
    let mut client = connect(url).await?;
    let tx = client
        .transaction()
        .await
        .map_err(|e| query_error("begin transaction", &e))?;

    // 1. The system user.
    let found = tx
        .query_opt(
            "SELECT id FROM users WHERE deleted = false AND lower(username) = lower($1) LIMIT 1",
            &[&OPERATOR_USERNAME],
        )
        .await
        .map_err(|e| query_error("find operator user", &e))?;
    let user_id: Uuid = match found {
        Some(row) => row
            .try_get(0)
            .map_err(|e| query_error("find operator user", &e))?,
        None => {
            let id = Uuid::new_v4();
            tx.execute(
                "INSERT INTO users (id, email, username, name, hashed_password, created_at, updated_at, \
                 rbac_roles, login_type, status, is_system) \
                 VALUES ($1, $2, $3, $3, $4, now(), now(), ARRAY['owner']::text[], 'none'::login_type, \
                 'active'::user_status, true)",
                &[&id, &OPERATOR_EMAIL, &OPERATOR_USERNAME, &b"none".as_slice()],
            )
            .await
            .map_err(|e| query_error("insert operator user", &e))?;
            id
        }
    };
    let updated = tx
        .execute(
            "UPDATE users SET email = $2, username = $3, name = $3, hashed_password = $4, updated_at = now(), \
             rbac_roles = ARRAY['owner']::text[], login_type = 'none'::login_type, \
             status = 'active'::user_status, is_system = true \
             WHERE id = $1 AND deleted = false",
            &[&user_id, &OPERATOR_EMAIL, &OPERATOR_USERNAME, &b"none".as_slice()],
        )
        .await
        .map_err(|e| query_error("update operator user", &e))?;
    if updated != 1 {
        return Err(BootstrapError::Database {
            step: "update operator user",
            message: format!("expected to update exactly 1 user row, updated {updated}"),
        });
    }

    // 2. organization-admin in every organization.
    let organizations = tx
        .query(
            "SELECT id FROM organizations WHERE deleted = false ORDER BY created_at, id",
            &[],
        )
        .await
        .map_err(|e| query_error("list organizations", &e))?;
    if organizations.is_empty() {
        return Err(BootstrapError::NoOrganizations);
    }
    for row in &organizations {
        let organization_id: Uuid = row
            .try_get(0)
            .map_err(|e| query_error("list organizations", &e))?;
        tx.execute(
            "INSERT INTO organization_members (organization_id, user_id, created_at, updated_at, roles) \
             VALUES ($1, $2, now(), now(), ARRAY['organization-admin']::text[]) \
             ON CONFLICT (organization_id, user_id) \
             DO UPDATE SET updated_at = EXCLUDED.updated_at, roles = EXCLUDED.roles",
            &[&organization_id, &user_id],
        )
        .await
        .map_err(|e| query_error("upsert organization membership", &e))?;
    }

    // 3. The token: keep a valid existing one, else replace.
    if let Some(token) = existing {
        let hashed = token.hashed_secret();
        let valid = tx
            .query_opt(
                "SELECT 1 FROM api_keys WHERE id = $1 AND user_id = $2 AND login_type = 'token'::login_type \
                 AND token_name = $3 AND hashed_secret = $4 AND expires_at > now()",
                &[&token.id(), &user_id, &token_name, &hashed.as_slice()],
            )
            .await
            .map_err(|e| query_error("check existing token", &e))?;
        if valid.is_some() {
            tx.commit().await.map_err(|e| query_error("commit", &e))?;
            return Ok(token.clone());
        }
    }
    tx.execute(
        "DELETE FROM api_keys WHERE user_id = $1 AND login_type = 'token'::login_type AND token_name = $2",
        &[&user_id, &token_name],
    )
    .await
    .map_err(|e| query_error("delete old tokens", &e))?;
    let token = OperatorToken::generate()?;
    let hashed = token.hashed_secret();
    tx.execute(
        "INSERT INTO api_keys (id, hashed_secret, user_id, last_used, expires_at, created_at, updated_at, \
         login_type, lifetime_seconds, ip_address, token_name, scopes, allow_list) \
         VALUES ($1, $2, $3, now(), now() + make_interval(secs => $4::bigint), now(), now(), \
         'token'::login_type, $4::bigint, '0.0.0.0'::inet, $5, ARRAY['coder:all']::api_key_scope[], \
         ARRAY['*:*']::text[])",
        &[
            &token.id(),
            &hashed.as_slice(),
            &user_id,
            &TOKEN_LIFETIME_SECONDS,
            &token_name,
        ],
    )
    .await
    .map_err(|e| query_error("insert token", &e))?;
    tx.commit().await.map_err(|e| query_error("commit", &e))?;
    Ok(token)
}

/// Deletes the operator token of control plane `namespace/name` (when `operatorAccess.disabled`).
/// Returns the number of deleted rows. The user and memberships stay.
pub async fn revoke_operator_access(url: &str, namespace: &str, name: &str) -> Result<u64, BootstrapError> {
    let token_name = token_name(namespace, name);
    let run = async {
        let client = connect(url).await?;
        client
            .execute(
                "DELETE FROM api_keys WHERE login_type = 'token'::login_type AND token_name = $2 \
                 AND user_id IN (SELECT id FROM users WHERE deleted = false AND lower(username) = lower($1))",
                &[&OPERATOR_USERNAME, &token_name],
            )
            .await
            .map_err(|e| query_error("revoke token", &e))
    };
    let result = match tokio::time::timeout(OPERATION_TIMEOUT, run).await {
        Ok(result) => result,
        Err(_) => Err(BootstrapError::Timeout(OPERATION_TIMEOUT)),
    };
    result.map_err(|err| {
        let password = password_of(url).unwrap_or_default();
        scrub(err, &[url, &password])
    })
}
