//! Operator-access bootstrap against a real PostgreSQL (Debian packages, crates/testenv) with a Coder
//! schema fixture that reproduces the Coder tables the bootstrap touches.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};

use coder_k8s_operator_access::{
    BootstrapError, OPERATOR_EMAIL, OPERATOR_USERNAME, OperatorToken, TOKEN_LIFETIME_SECONDS,
    ensure_operator_access, revoke_operator_access, token_name,
};
use coder_k8s_testenv::postgres;
use sha2::{Digest as _, Sha256};
use tokio_postgres::Client;
use uuid::Uuid;

const NS: &str = "coder";
const CP: &str = "my-coder";

/// A fresh database with the Coder schema: its URL and a client for assertions.
async fn fresh_db(tag: &str) -> (String, Client) {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let pg = postgres::shared().await.unwrap();
    let name = format!(
        "t_{tag}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let url = pg.create_coder_database(&name).await.unwrap();
    let client = pg.connect(&name).await.unwrap();
    (url, client)
}

struct KeyRow {
    id: String,
    hashed_secret: Vec<u8>,
    user_id: Uuid,
    login_type: String,
    lifetime_seconds: i64,
    ip_address: String,
    scopes: String,
    allow_list: Vec<String>,
    seconds_to_expiry: f64,
}

async fn token_rows(client: &Client) -> Vec<KeyRow> {
    client
        .query(
            "SELECT id, hashed_secret, user_id, login_type::text, lifetime_seconds, host(ip_address), \
             scopes::text, allow_list, extract(epoch FROM expires_at - now())::float8 \
             FROM api_keys WHERE token_name = $1 ORDER BY id",
            &[&token_name(NS, CP)],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|r| KeyRow {
            id: r.get(0),
            hashed_secret: r.get(1),
            user_id: r.get(2),
            login_type: r.get(3),
            lifetime_seconds: r.get(4),
            ip_address: r.get(5),
            scopes: r.get(6),
            allow_list: r.get(7),
            seconds_to_expiry: r.get(8),
        })
        .collect()
}

async fn operator_user_id(client: &Client) -> Uuid {
    client
        .query_one("SELECT id FROM users WHERE username = $1", &[&OPERATOR_USERNAME])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn creates_user_membership_and_token() {
    let (url, db) = fresh_db("create").await;
    let token = ensure_operator_access(&url, NS, CP, None).await.unwrap();

    let user = db
        .query_one(
            "SELECT id, email, name, hashed_password, rbac_roles, login_type::text, status::text, is_system, deleted \
             FROM users WHERE username = $1",
            &[&OPERATOR_USERNAME],
        )
        .await
        .unwrap();
    let user_id: Uuid = user.get(0);
    assert_eq!(user.get::<_, String>(1), OPERATOR_EMAIL);
    assert_eq!(user.get::<_, String>(2), OPERATOR_USERNAME);
    assert_eq!(user.get::<_, Vec<u8>>(3), b"none");
    assert_eq!(user.get::<_, Vec<String>>(4), vec!["owner".to_owned()]);
    assert_eq!(user.get::<_, String>(5), "none");
    assert_eq!(user.get::<_, String>(6), "active");
    assert!(user.get::<_, bool>(7));
    assert!(!user.get::<_, bool>(8));

    let members = db
        .query("SELECT user_id, roles FROM organization_members", &[])
        .await
        .unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].get::<_, Uuid>(0), user_id);
    assert_eq!(
        members[0].get::<_, Vec<String>>(1),
        vec!["organization-admin".to_owned()]
    );

    let rows = token_rows(&db).await;
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.id, token.id());
    let exposed = token.expose();
    let (id, secret) = exposed.split_once('-').unwrap();
    assert_eq!(id, row.id);
    assert_eq!(row.hashed_secret, Sha256::digest(secret.as_bytes()).to_vec());
    assert_eq!(row.user_id, user_id);
    assert_eq!(row.login_type, "token");
    assert_eq!(row.lifetime_seconds, TOKEN_LIFETIME_SECONDS);
    assert_eq!(row.ip_address, "0.0.0.0");
    assert_eq!(row.scopes, "{coder:all}");
    assert_eq!(row.allow_list, vec!["*:*".to_owned()]);
    let expected = TOKEN_LIFETIME_SECONDS as f64;
    assert!(
        (row.seconds_to_expiry - expected).abs() < 120.0,
        "expires in {} s",
        row.seconds_to_expiry
    );
}

#[tokio::test]
async fn rerun_with_the_returned_token_reuses_it() {
    let (url, db) = fresh_db("reuse").await;
    let first = ensure_operator_access(&url, NS, CP, None).await.unwrap();
    let second = ensure_operator_access(&url, NS, CP, Some(&first)).await.unwrap();
    assert_eq!(first, second);
    let third = ensure_operator_access(&url, NS, CP, Some(&second)).await.unwrap();
    assert_eq!(first, third);
    assert_eq!(token_rows(&db).await.len(), 1);
    let users: i64 = db
        .query_one("SELECT count(*) FROM users", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(users, 1);
}

#[tokio::test]
async fn expired_token_is_rotated() {
    let (url, db) = fresh_db("expiry").await;
    let first = ensure_operator_access(&url, NS, CP, None).await.unwrap();
    db.execute(
        "UPDATE api_keys SET expires_at = now() - interval '1 minute' WHERE id = $1",
        &[&first.id()],
    )
    .await
    .unwrap();
    let second = ensure_operator_access(&url, NS, CP, Some(&first)).await.unwrap();
    assert_ne!(first, second);
    let rows = token_rows(&db).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].id, second.id());
    assert!(rows[0].seconds_to_expiry > 0.0);
}

#[tokio::test]
async fn unknown_or_mismatched_token_is_rotated() {
    let (url, db) = fresh_db("unknown").await;
    let first = ensure_operator_access(&url, NS, CP, None).await.unwrap();

    // Well-formed but unknown to the database.
    let unknown = OperatorToken::generate().unwrap();
    let second = ensure_operator_access(&url, NS, CP, Some(&unknown))
        .await
        .unwrap();
    assert_ne!(second, first);
    assert_ne!(second, unknown);

    // Right id, wrong secret.
    let forged = OperatorToken::parse(&format!("{}-{}", second.id(), "A".repeat(22))).unwrap();
    let third = ensure_operator_access(&url, NS, CP, Some(&forged)).await.unwrap();
    assert_ne!(third, second);

    // Garbage in the Secret does not parse; the caller passes None and gets a new token.
    assert!(OperatorToken::parse("not-a-token\n").is_err());
    let fourth = ensure_operator_access(&url, NS, CP, None).await.unwrap();
    assert_ne!(fourth, third);

    let rows = token_rows(&db).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].id, fourth.id());
}

#[tokio::test]
async fn tokens_of_other_control_planes_are_independent() {
    let (url, db) = fresh_db("multi").await;
    let a = ensure_operator_access(&url, NS, CP, None).await.unwrap();
    let b = ensure_operator_access(&url, NS, "other", None).await.unwrap();
    assert_ne!(a, b);
    // Reusing a's token for the other control plane does not match its token name.
    let b2 = ensure_operator_access(&url, NS, "other", Some(&a)).await.unwrap();
    assert_ne!(b2, a);
    let count: i64 = db
        .query_one("SELECT count(*) FROM api_keys", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 2);
    assert_eq!(token_rows(&db).await[0].id, a.id());
}

#[tokio::test]
async fn revoke_deletes_the_token_row() {
    let (url, db) = fresh_db("revoke").await;
    ensure_operator_access(&url, NS, CP, None).await.unwrap();
    let other = ensure_operator_access(&url, NS, "other", None).await.unwrap();
    assert_eq!(revoke_operator_access(&url, NS, CP).await.unwrap(), 1);
    assert!(token_rows(&db).await.is_empty());
    assert_eq!(revoke_operator_access(&url, NS, CP).await.unwrap(), 0);
    let remaining: Vec<String> = db
        .query("SELECT id FROM api_keys", &[])
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(remaining, vec![other.id().to_owned()]);
    // The user stays.
    operator_user_id(&db).await;
}

#[tokio::test]
async fn every_organization_gets_a_membership() {
    let (url, db) = fresh_db("orgs").await;
    db.batch_execute(
        "INSERT INTO organizations (id, name, description, created_at, updated_at, display_name) VALUES \
         ('6d3b2a4e-0000-4000-8000-000000000002', 'second', '', now(), now(), 'Second'); \
         INSERT INTO organizations (id, name, description, created_at, updated_at, display_name, deleted) VALUES \
         ('6d3b2a4e-0000-4000-8000-000000000003', 'gone', '', now(), now(), 'Gone', true);",
    )
    .await
    .unwrap();
    ensure_operator_access(&url, NS, CP, None).await.unwrap();
    let user_id = operator_user_id(&db).await;
    // A stale role is reset on the next run.
    db.execute(
        "UPDATE organization_members SET roles = ARRAY['organization-auditor'] WHERE user_id = $1",
        &[&user_id],
    )
    .await
    .unwrap();
    ensure_operator_access(&url, NS, CP, None).await.unwrap();
    let orgs: Vec<(Uuid, Vec<String>)> = db
        .query(
            "SELECT organization_id, roles FROM organization_members WHERE user_id = $1 ORDER BY organization_id",
            &[&user_id],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let admin = vec!["organization-admin".to_owned()];
    assert_eq!(
        orgs,
        vec![
            (
                Uuid::parse_str("6d3b2a4e-0000-4000-8000-000000000001").unwrap(),
                admin.clone()
            ),
            (
                Uuid::parse_str("6d3b2a4e-0000-4000-8000-000000000002").unwrap(),
                admin
            ),
        ]
    );
}

#[tokio::test]
async fn user_columns_are_re_enforced() {
    let (url, db) = fresh_db("enforce").await;
    ensure_operator_access(&url, NS, CP, None).await.unwrap();
    db.batch_execute(
        "UPDATE users SET rbac_roles = '{}', login_type = 'password', status = 'suspended', is_system = false, \
         username = 'Coder-K8s-Operator'",
    )
    .await
    .unwrap();
    ensure_operator_access(&url, NS, CP, None).await.unwrap();
    let row = db
        .query_one(
            "SELECT username, rbac_roles, login_type::text, status::text, is_system, (SELECT count(*) FROM users) FROM users",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), OPERATOR_USERNAME);
    assert_eq!(row.get::<_, Vec<String>>(1), vec!["owner".to_owned()]);
    assert_eq!(row.get::<_, String>(2), "none");
    assert_eq!(row.get::<_, String>(3), "active");
    assert!(row.get::<_, bool>(4));
    assert_eq!(row.get::<_, i64>(5), 1);
}

#[tokio::test]
async fn no_organizations_is_an_error_and_rolls_back() {
    let (url, db) = fresh_db("noorg").await;
    db.batch_execute("DELETE FROM organizations").await.unwrap();
    let err = ensure_operator_access(&url, NS, CP, None).await.unwrap_err();
    assert!(matches!(err, BootstrapError::NoOrganizations), "{err}");
    assert_eq!(err.category(), "no_organizations");
    let users: i64 = db
        .query_one("SELECT count(*) FROM users", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(users, 0, "the transaction must roll back");
}

#[tokio::test]
async fn missing_schema_is_a_schema_error() {
    let pg = postgres::shared().await.unwrap();
    let url = pg
        .create_database(&format!("t_empty_{}", std::process::id()))
        .await
        .unwrap();
    let err = ensure_operator_access(&url, NS, CP, None).await.unwrap_err();
    assert_eq!(err.category(), "schema", "{err}");
}

#[tokio::test]
async fn unreachable_database_error_hides_url_and_password() {
    // A port that was free a moment ago: nothing listens there.
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let password = "Sup3rS3cretPassw0rd";
    let url = format!("postgres://coder:{password}@127.0.0.1:{port}/coder?sslmode=disable");
    let existing = OperatorToken::generate().unwrap();
    let err = ensure_operator_access(&url, NS, CP, Some(&existing))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "unreachable", "{err}");
    assert!(err.to_string().contains("refused"), "the cause is shown: {err}");
    for shown in [err.to_string(), format!("{err:?}")] {
        assert!(!shown.contains(password), "{shown}");
        assert!(!shown.contains(&url), "{shown}");
        assert!(!shown.contains(existing.expose_secret()), "{shown}");
    }
    // The controller names the Secret and key the URL came from; the URL itself still never shows.
    let sourced = err.with_source(r#"Secret "coder-db-app" key "uri""#).to_string();
    assert!(
        sourced.contains("coder-db-app") && sourced.contains("uri") && sourced.contains("cannot connect"),
        "{sourced}"
    );
    assert!(
        !sourced.contains(password) && !sourced.contains(&url),
        "{sourced}"
    );
    let err = revoke_operator_access(&url, NS, CP).await.unwrap_err();
    assert_eq!(err.category(), "unreachable");
    assert!(!err.to_string().contains(password));
}

#[tokio::test]
async fn wrong_password_error_hides_it() {
    // The test server trusts everyone, so use an unknown database to get a server-side connect error.
    let pg = postgres::shared().await.unwrap();
    let password = "An0therS3cret";
    let url = format!(
        "postgres://postgres:{password}@127.0.0.1:{}/does_not_exist?sslmode=disable",
        pg.port()
    );
    let err = ensure_operator_access(&url, NS, CP, None).await.unwrap_err();
    assert_eq!(err.category(), "database", "{err}");
    assert!(err.to_string().contains("3D000"), "{err}");
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(password), "{shown}");
    assert!(!shown.contains(&url), "{shown}");
}

#[tokio::test]
async fn bad_urls_are_rejected_without_connecting() {
    let (good, db) = fresh_db("badurl").await;
    let rest = good.strip_prefix("postgres://").unwrap();
    for url in [
        format!("Postgres://{rest}"),
        format!("POSTGRES://{rest}"),
        format!("mysql://{rest}"),
        format!("postgres://{rest}\n"),
        format!("postgres://{rest}").replace("sslmode=disable", "sslmode=verify-fulll"),
        format!("postgres://{rest}&sslcert=/tls.crt"),
    ] {
        let err = ensure_operator_access(&url, NS, CP, None).await.unwrap_err();
        assert_eq!(err.category(), "invalid_url", "{err}");
        assert!(!err.to_string().contains(rest), "{err}");
        let err = revoke_operator_access(&url, NS, CP).await.unwrap_err();
        assert_eq!(err.category(), "invalid_url", "{err}");
    }
    let users: i64 = db
        .query_one("SELECT count(*) FROM users", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(users, 0);
    // postgresql:// works too.
    let alt = format!("postgresql://{rest}");
    ensure_operator_access(&alt, NS, CP, None).await.unwrap();
}

#[tokio::test]
async fn errors_never_show_the_token() {
    let (url, db) = fresh_db("notoken").await;
    let token = ensure_operator_access(&url, NS, CP, None).await.unwrap();
    // Break the schema so later runs fail in different steps.
    let mut errors: Vec<BootstrapError> = Vec::new();
    db.batch_execute(
        "ALTER TABLE api_keys DROP CONSTRAINT api_keys_allow_list_not_empty; \
                      ALTER TABLE api_keys ADD CONSTRAINT no_new_keys CHECK (false) NOT VALID",
    )
    .await
    .unwrap();
    db.execute("DELETE FROM api_keys", &[]).await.unwrap();
    errors.push(
        ensure_operator_access(&url, NS, CP, Some(&token))
            .await
            .unwrap_err(),
    );
    db.batch_execute("DELETE FROM organizations").await.unwrap();
    errors.push(
        ensure_operator_access(&url, NS, CP, Some(&token))
            .await
            .unwrap_err(),
    );
    db.batch_execute("DROP TABLE api_keys").await.unwrap();
    errors.push(revoke_operator_access(&url, NS, CP).await.unwrap_err());
    assert_eq!(
        errors.iter().map(BootstrapError::category).collect::<Vec<_>>(),
        ["database", "no_organizations", "schema"]
    );
    for err in &errors {
        for shown in [err.to_string(), format!("{err:?}")] {
            assert!(!shown.contains(&token.expose()), "{shown}");
            assert!(!shown.contains(token.expose_secret()), "{shown}");
        }
    }
}
