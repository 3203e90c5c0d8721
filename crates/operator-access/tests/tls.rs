//! TLS to a real PostgreSQL (`ssl=on`, certificate for `localhost` signed by a fresh self-signed CA) with every
//! libpq `sslmode`. The server's `pg_hba.conf` admits role `tls_only` over TCP only with TLS and `plain_only` only
//! without, so a successful bootstrap shows which transport was used.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};

use coder_k8s_operator_access::{BootstrapError, ensure_operator_access, revoke_operator_access};
use coder_k8s_testenv::Postgres;
use coder_k8s_testenv::postgres::{self, PLAIN_ONLY_ROLE, TLS_HOST_NAME, TLS_ONLY_ROLE};

const NS: &str = "coder";
const CP: &str = "my-coder";
const PASSWORD: &str = "Pa55w0rdInTheUrl";

/// The shared TLS server and a fresh database with the Coder schema on it.
async fn tls_db(tag: &str) -> (&'static Postgres, String) {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let pg = postgres::shared_tls().await.unwrap();
    let name = format!(
        "tls_{tag}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    pg.create_coder_database(&name).await.unwrap();
    (pg, name)
}

/// `postgres://ROLE:PASSWORD@HOST:PORT/DB?QUERY` (trust authentication ignores the password).
fn url(pg: &Postgres, role: &str, host: &str, db: &str, query: &str) -> String {
    pg.url_for(&format!("{role}:{PASSWORD}"), host, db, query)
}

fn ca(pg: &Postgres) -> String {
    pg.tls().unwrap().ca_cert.display().to_string()
}

fn unrelated_ca(pg: &Postgres) -> String {
    pg.tls().unwrap().unrelated_ca_cert.display().to_string()
}

/// Runs the bootstrap with `url` and checks that an error never shows the URL or its password.
async fn bootstrap(url: &str) -> Result<(), BootstrapError> {
    let result = ensure_operator_access(url, NS, CP, None).await.map(|_| ());
    if let Err(err) = &result {
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains(PASSWORD), "{shown}");
        assert!(!shown.contains(url), "{shown}");
    }
    result
}

async fn tls_failure(url: &str) -> String {
    match bootstrap(url).await {
        Err(BootstrapError::Tls(message)) => message,
        other => panic!("expected a TLS error, got {other:?}"),
    }
}

#[tokio::test]
async fn disable_is_refused_by_a_tls_only_server_and_works_where_plain_is_allowed() {
    let (pg, db) = tls_db("disable").await;
    let err = bootstrap(&url(pg, TLS_ONLY_ROLE, "127.0.0.1", &db, "sslmode=disable"))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "authentication", "{err}");
    assert!(err.to_string().contains("no encryption"), "{err}");
    bootstrap(&url(pg, PLAIN_ONLY_ROLE, "127.0.0.1", &db, "sslmode=disable"))
        .await
        .unwrap();
}

#[tokio::test]
async fn allow_tries_plain_first_and_then_tls() {
    let (pg, db) = tls_db("allow").await;
    bootstrap(&url(pg, PLAIN_ONLY_ROLE, "127.0.0.1", &db, "sslmode=allow"))
        .await
        .unwrap();
    bootstrap(&url(pg, TLS_ONLY_ROLE, "127.0.0.1", &db, "sslmode=allow"))
        .await
        .unwrap();
}

#[tokio::test]
async fn prefer_tries_tls_first_and_then_plain_and_is_the_default() {
    let (pg, db) = tls_db("prefer").await;
    for query in ["sslmode=prefer", ""] {
        bootstrap(&url(pg, TLS_ONLY_ROLE, "127.0.0.1", &db, query))
            .await
            .unwrap();
        bootstrap(&url(pg, PLAIN_ONLY_ROLE, "127.0.0.1", &db, query))
            .await
            .unwrap();
    }
    // A server without TLS: plain.
    let plain = postgres::shared().await.unwrap();
    let plain_db = format!("tls_prefer_plain_{}", std::process::id());
    plain.create_coder_database(&plain_db).await.unwrap();
    bootstrap(&plain.url_for("postgres", "127.0.0.1", &plain_db, "sslmode=prefer"))
        .await
        .unwrap();
    // require against it fails clearly.
    let message = tls_failure(&plain.url_for("postgres", "127.0.0.1", &plain_db, "sslmode=require")).await;
    assert_eq!(
        message,
        "the server does not offer TLS, and the sslmode of the URL requires it"
    );
}

#[tokio::test]
async fn require_encrypts_without_checking_unless_a_ca_file_is_given() {
    let (pg, db) = tls_db("require").await;
    // No CA: any certificate, any host name.
    bootstrap(&url(pg, TLS_ONLY_ROLE, "127.0.0.1", &db, "sslmode=require"))
        .await
        .unwrap();
    // TLS only: the hostnossl role is refused over TLS.
    let err = bootstrap(&url(pg, PLAIN_ONLY_ROLE, "127.0.0.1", &db, "sslmode=require"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("SSL encryption"), "{err}");
    // With a CA file, require checks the chain (like verify-ca), not the host name.
    let with_ca = format!("sslmode=require&sslrootcert={}", ca(pg));
    bootstrap(&url(pg, TLS_ONLY_ROLE, "127.0.0.1", &db, &with_ca))
        .await
        .unwrap();
    let wrong_ca = format!("sslmode=require&sslrootcert={}", unrelated_ca(pg));
    let message = tls_failure(&url(pg, TLS_ONLY_ROLE, "127.0.0.1", &db, &wrong_ca)).await;
    assert!(
        message.starts_with("the server certificate is not signed by a CA in the CA file sslrootcert="),
        "{message}"
    );
}

#[tokio::test]
async fn verify_ca_checks_the_chain_but_not_the_host_name() {
    let (pg, db) = tls_db("verifyca").await;
    let query = format!("sslmode=verify-ca&sslrootcert={}", ca(pg));
    // The certificate names only localhost.
    bootstrap(&url(pg, TLS_ONLY_ROLE, "127.0.0.1", &db, &query))
        .await
        .unwrap();
    let wrong_ca = format!("sslmode=verify-ca&sslrootcert={}", unrelated_ca(pg));
    let message = tls_failure(&url(pg, TLS_ONLY_ROLE, "127.0.0.1", &db, &wrong_ca)).await;
    assert!(message.contains("(sslmode=verify-ca)"), "{message}");
    assert!(message.contains("not signed by a CA"), "{message}");
}

#[tokio::test]
async fn verify_full_checks_the_chain_and_the_host_name() {
    let (pg, db) = tls_db("verifyfull").await;
    let query = format!("sslmode=verify-full&sslrootcert={}", ca(pg));
    bootstrap(&url(pg, TLS_ONLY_ROLE, TLS_HOST_NAME, &db, &query))
        .await
        .unwrap();
    let message = tls_failure(&url(pg, TLS_ONLY_ROLE, "127.0.0.1", &db, &query)).await;
    assert!(
        message.starts_with(
            "the server certificate does not match the host name in the URL (sslmode=verify-full checks it"
        ),
        "{message}"
    );
    assert!(message.contains("127.0.0.1"), "{message}");
    // No fallback to plain, even for a role that plain would admit.
    let err = bootstrap(&url(pg, PLAIN_ONLY_ROLE, "127.0.0.1", &db, &query))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "tls", "{err}");
    // The token can be revoked over TLS too.
    assert_eq!(
        revoke_operator_access(&url(pg, TLS_ONLY_ROLE, TLS_HOST_NAME, &db, &query), NS, CP)
            .await
            .unwrap(),
        1
    );
}

#[tokio::test]
async fn without_a_ca_file_verification_uses_the_system_store() {
    let (pg, db) = tls_db("system").await;
    // The self-signed test CA is not in the system store.
    for query in ["sslmode=verify-full", "sslrootcert=system"] {
        let message = tls_failure(&url(pg, TLS_ONLY_ROLE, TLS_HOST_NAME, &db, query)).await;
        assert!(
            message.contains("the system CA certificates")
                || message.starts_with("no system CA certificates"),
            "{query}: {message}"
        );
    }
    let err = bootstrap(&url(
        pg,
        TLS_ONLY_ROLE,
        TLS_HOST_NAME,
        &db,
        "sslmode=require&sslrootcert=system",
    ))
    .await
    .unwrap_err();
    assert_eq!(err.category(), "invalid_url", "{err}");
    assert!(
        err.to_string()
            .contains("sslrootcert=system needs sslmode=verify-full"),
        "{err}"
    );
    // verify-ca checks no host name, so against the system CAs any public certificate would pass: refused.
    let err = bootstrap(&url(pg, TLS_ONLY_ROLE, TLS_HOST_NAME, &db, "sslmode=verify-ca"))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "invalid_url", "{err}");
    assert!(
        err.to_string().contains("sslmode=verify-ca needs sslrootcert="),
        "{err}"
    );
}

#[tokio::test]
async fn a_missing_ca_file_is_named() {
    let (pg, db) = tls_db("missingca").await;
    let message = tls_failure(&url(
        pg,
        TLS_ONLY_ROLE,
        TLS_HOST_NAME,
        &db,
        "sslmode=verify-full&sslrootcert=/nonexistent/ca.crt",
    ))
    .await;
    assert!(
        message.starts_with("cannot read the CA file sslrootcert=\"/nonexistent/ca.crt\""),
        "{message}"
    );
}
