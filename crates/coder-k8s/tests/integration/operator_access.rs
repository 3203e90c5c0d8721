//! Operator access of the CoderControlPlane controller on the real kube-apiserver, a real PostgreSQL with Coder's
//! tables and the Coder API test server: roles re-enforced when they drift while the token still works, nothing
//! written when nothing drifted, revocation retried until the database URL is back, and the bootstrap over TLS.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_coder_testserver::{Config, TestServer};
use coder_k8s_operator_access::token_name;
use coder_k8s_testenv::postgres::{self, PLAIN_ONLY_ROLE, TLS_HOST_NAME, TLS_ONLY_ROLE};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::control_plane::{Harness, harness};
use crate::support::control_plane_with_crds;
use crate::support::wait_for;

const OPERATOR: &str = "coder-k8s-operator";
const DATABASE: &str = "coder-db-app";

fn database_spec() -> serde_json::Value {
    json!({"database": {"connectionSecretRef": {"name": DATABASE, "key": "uri"}}})
}

/// The database name in a `postgres://…/NAME?…` URL.
fn db_name(url: &str) -> String {
    let path = url.rsplit('/').next().unwrap();
    path.split('?').next().unwrap().to_owned()
}

/// A superuser connection (Unix socket) to the harness's database on the shared PostgreSQL.
async fn sql(h: &Harness) -> tokio_postgres::Client {
    postgres::shared()
        .await
        .unwrap()
        .connect(&db_name(&h.db_url))
        .await
        .unwrap()
}

/// A control plane with working operator access; returns its token.
async fn ready_control_plane(h: &Harness) -> String {
    h.put_secret(DATABASE, &[("uri", &h.db_url)]).await;
    h.create("coder", database_spec()).await;
    h.wait_operator_access("coder", true).await;
    h.token_of("coder-operator-token").await
}

/// `(rbac_roles, status, updated_at as text)` of the operator user.
async fn operator_user(db: &tokio_postgres::Client) -> (Vec<String>, String, String) {
    let row = db
        .query_one(
            "SELECT rbac_roles, status::text, updated_at::text FROM users WHERE username = $1",
            &[&OPERATOR],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

/// `(roles, updated_at as text)` of each organization membership of the operator user.
async fn operator_memberships(db: &tokio_postgres::Client) -> Vec<(Vec<String>, String)> {
    db.query(
        "SELECT m.roles, m.updated_at::text FROM organization_members m JOIN users u ON u.id = m.user_id \
         WHERE u.username = $1 ORDER BY m.organization_id",
        &[&OPERATOR],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

async fn token_rows(db: &tokio_postgres::Client, namespace: &str) -> i64 {
    db.query_one(
        "SELECT count(*) FROM api_keys WHERE token_name = $1",
        &[&token_name(namespace, "coder")],
    )
    .await
    .unwrap()
    .get(0)
}

async fn disable(h: &Harness) {
    let patch = json!({"spec": {"operatorAccess": {"disabled": true}}});
    h.api::<CoderControlPlane>()
        .patch("coder", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn drifted_roles_and_status_are_re_enforced_while_the_token_works() {
    let h = harness("oa-drift").await;
    let token = ready_control_plane(&h).await;
    let db = sql(&h).await;
    let coder = h.coder(&token);

    // The site role goes; the token still works, and Coder says the user is no longer owner.
    db.execute(
        "UPDATE users SET rbac_roles = '{}' WHERE username = $1",
        &[&OPERATOR],
    )
    .await
    .unwrap();
    wait_for(
        || async { operator_user(&db).await.0 == ["owner"] },
        "the owner role re-enforced",
    )
    .await;
    assert!(coder.me().await.unwrap().has_role("owner"));

    // The organization membership goes.
    db.execute(
        "DELETE FROM organization_members WHERE user_id = (SELECT id FROM users WHERE username = $1)",
        &[&OPERATOR],
    )
    .await
    .unwrap();
    wait_for(
        || async {
            let memberships = operator_memberships(&db).await;
            !memberships.is_empty()
                && memberships
                    .iter()
                    .all(|(roles, _)| roles == &["organization-admin"])
        },
        "the organization-admin membership re-enforced",
    )
    .await;

    // Suspended: Coder refuses the token, and the bootstrap makes the user active again with the same token.
    db.execute(
        "UPDATE users SET status = 'suspended' WHERE username = $1",
        &[&OPERATOR],
    )
    .await
    .unwrap();
    wait_for(
        || async { operator_user(&db).await.1 == "active" },
        "the active status re-enforced",
    )
    .await;

    assert_eq!(
        h.token_of("coder-operator-token").await,
        token,
        "the working token is kept"
    );
    assert_eq!(token_rows(&db, &h.ns).await, 1);
    assert_eq!(coder.me().await.unwrap().username, OPERATOR);
    assert!(
        h.server
            .requests()
            .iter()
            .any(|r| r.method == "GET" && r.path == "/api/v2/users/me"),
        "the token check asks Coder"
    );
}

#[tokio::test]
async fn nothing_is_re_enforced_when_nothing_drifted() {
    let h = harness("oa-steady").await;
    ready_control_plane(&h).await;
    let db = sql(&h).await;
    // Let the first reconciles settle, then watch for several token checks (one per second in these settings).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let user_before = operator_user(&db).await;
    let memberships_before = operator_memberships(&db).await;
    let requests_before = h.server.requests().len();
    tokio::time::sleep(Duration::from_secs(5)).await;

    assert_eq!(
        operator_user(&db).await,
        user_before,
        "the bootstrap did not run (it always sets updated_at)"
    );
    assert_eq!(operator_memberships(&db).await, memberships_before);
    let checks = h.server.requests()[requests_before..]
        .iter()
        .filter(|r| r.method == "GET" && r.path == "/api/v2/users/me")
        .count();
    assert!(
        checks >= 2,
        "the token was checked during the window ({checks} checks)"
    );
}

#[tokio::test]
async fn disabling_revokes_the_token_once_the_database_url_is_back() {
    let h = harness("oa-revoke").await;
    let token = ready_control_plane(&h).await;
    let db = sql(&h).await;

    // The database Secret is gone when access is disabled: nothing can be revoked yet.
    h.api::<Secret>()
        .delete(DATABASE, &DeleteParams::default())
        .await
        .unwrap();
    h.wait_reason("coder", "DatabaseSecretResolved", "SecretNotFound")
        .await;
    disable(&h).await;
    h.wait_operator_access("coder", false).await;
    wait_for(
        || async {
            h.get("coder")
                .await
                .status
                .unwrap()
                .operator_token_secret_ref
                .is_some_and(|r| r.name == "coder-operator-token")
        },
        "the pending revocation in the status",
    )
    .await;
    // Several retries (one per second in these settings) later, the token and its Secret are still there.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(token_rows(&db, &h.ns).await, 1, "not revoked yet");
    assert_eq!(
        h.token_of("coder-operator-token").await,
        token,
        "the Secret stays while the token is valid"
    );
    let status = h.get("coder").await.status.unwrap();
    assert_eq!(
        status.operator_token_secret_ref.map(|r| r.name).as_deref(),
        Some("coder-operator-token")
    );
    let (_, reason, message) = h.condition("coder", "DatabaseSecretResolved").await.unwrap();
    assert_eq!(reason, "SecretNotFound");
    assert!(message.contains(DATABASE), "{message}");

    // The Secret is back: the token is revoked, then its Secret is deleted.
    h.put_secret(DATABASE, &[("uri", &h.db_url)]).await;
    let secrets = h.api::<Secret>();
    wait_for(
        || async { secrets.get_opt("coder-operator-token").await.unwrap().is_none() },
        "the token Secret to go",
    )
    .await;
    assert_eq!(token_rows(&db, &h.ns).await, 0, "the api key row is gone");
    assert!(h.coder(&token).me().await.is_err(), "Coder refuses the token");
    wait_for(
        || async {
            h.get("coder")
                .await
                .status
                .unwrap()
                .operator_token_secret_ref
                .is_none()
        },
        "the status to forget the token Secret",
    )
    .await;
}

/// Like `control_plane::harness`, but Coder's tables live on the TLS PostgreSQL; the test server reaches them
/// without TLS (role `plain_only`).
async fn tls_harness(tag: &str) -> Harness {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    coder_k8s::telemetry::init(coder_k8s::cli::LogFormat::Text);
    let cp = control_plane_with_crds().await;
    let ns = cp.namespace(tag).await.unwrap().name().to_owned();
    let pg = postgres::shared_tls().await.unwrap();
    let db = format!(
        "oa_tls_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    pg.create_coder_database(&db).await.unwrap();
    let db_url = pg.url_for(PLAIN_ONLY_ROLE, "127.0.0.1", &db, "sslmode=disable");
    let server = TestServer::start(Config::new(&db_url)).await.unwrap();
    Harness::start(cp, ns, db_url, server, |_| {})
}

#[tokio::test]
async fn operator_access_over_tls_to_postgres() {
    let h = tls_harness("oa-tls").await;
    let pg = postgres::shared_tls().await.unwrap();
    let db = db_name(&h.db_url);
    let ca = pg.tls().unwrap().ca_cert.display().to_string();
    // The certificate names only localhost: verify-full against 127.0.0.1 fails, so access is not ready.
    let wrong_host = pg.url_for(
        TLS_ONLY_ROLE,
        "127.0.0.1",
        &db,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    h.put_secret(DATABASE, &[("uri", &wrong_host)]).await;
    h.create("coder", database_spec()).await;
    h.wait_reason("coder", "DatabaseSecretResolved", "Resolved").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.get("coder").await.status.unwrap().operator_access_ready,
        Some(false)
    );
    assert!(
        h.api::<Secret>()
            .get_opt("coder-operator-token")
            .await
            .unwrap()
            .is_none(),
        "no token minted"
    );

    // The right host name: the bootstrap runs over verified TLS (tls_only is admitted only with TLS).
    let verified = pg.url_for(
        TLS_ONLY_ROLE,
        TLS_HOST_NAME,
        &db,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    h.put_secret(DATABASE, &[("uri", &verified)]).await;
    h.wait_operator_access("coder", true).await;
    let token = h.token_of("coder-operator-token").await;
    assert_eq!(h.coder(&token).me().await.unwrap().username, OPERATOR);

    // Disabling revokes over TLS too.
    disable(&h).await;
    let secrets = h.api::<Secret>();
    wait_for(
        || async { secrets.get_opt("coder-operator-token").await.unwrap().is_none() },
        "the token Secret to go",
    )
    .await;
    assert!(h.coder(&token).me().await.is_err(), "the token is revoked");
}
