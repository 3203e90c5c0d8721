//! Operator-access bootstrap on the database of a real open-source Coder server (crates/testenv `RealCoder`,
//! migrated by Coder itself): the user, memberships and token written by the bootstrap must be what that Coder's
//! API accepts, and a rotated or revoked token must stop working there.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use coder_k8s_operator_access::{
    OPERATOR_EMAIL, OPERATOR_USERNAME, OperatorToken, TOKEN_LIFETIME_SECONDS, ensure_operator_access,
    revoke_operator_access, token_name,
};
use coder_k8s_testenv::RealCoder;
use tokio::sync::OnceCell;
use tokio_postgres::{Client, NoTls};
use uuid::Uuid;

/// Namespace of every control plane here; each test uses its own control-plane name (and so its own token).
const NS: &str = "real-coder";

/// The shared real Coder, with the operator user in place. The first bootstrap runs once before the tests go on
/// concurrently on the same database: two first inserts of the user at the same time would conflict on Coder's
/// unique username index (a real caller retries; the tests should not depend on that).
async fn coder() -> &'static RealCoder {
    static FIRST: OnceCell<()> = OnceCell::const_new();
    let coder = RealCoder::shared().await.unwrap();
    FIRST
        .get_or_init(|| async {
            let db = sql(coder).await;
            assert_eq!(
                operator_users(&db).await,
                0,
                "Coder's own start-up creates no operator user"
            );
            ensure_operator_access(coder.database_url(), NS, "first", None)
                .await
                .unwrap();
            assert_eq!(operator_users(&db).await, 1);
        })
        .await;
    coder
}

/// A client on the real Coder's database, for assertions and for what the API cannot do.
async fn sql(coder: &RealCoder) -> Client {
    let (client, connection) = tokio_postgres::connect(coder.database_url(), NoTls)
        .await
        .expect("connect to the real Coder's database");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

async fn operator_users(db: &Client) -> i64 {
    db.query_one(
        "SELECT count(*) FROM users WHERE username = $1",
        &[&OPERATOR_USERNAME],
    )
    .await
    .unwrap()
    .get(0)
}

async fn operator_user_id(db: &Client) -> Uuid {
    db.query_one(
        "SELECT id FROM users WHERE username = $1 AND deleted = false",
        &[&OPERATOR_USERNAME],
    )
    .await
    .unwrap()
    .get(0)
}

/// The status of `GET /api/v2/users/me` with `token` on the real Coder.
async fn me_status(coder: &RealCoder, token: &OperatorToken) -> u16 {
    coder
        .request_as(Some(&token.expose()), "GET", "/api/v2/users/me", None)
        .await
        .unwrap()
        .status
}

/// `GET /api/v2/users/me` with `token` must answer 200 for the operator user; returns its ID.
async fn assert_operator(coder: &RealCoder, token: &OperatorToken) -> String {
    let response = coder
        .request_as(Some(&token.expose()), "GET", "/api/v2/users/me", None)
        .await
        .unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    let me = response.json().unwrap();
    assert_eq!(me["username"], OPERATOR_USERNAME);
    assert_eq!(me["email"], OPERATOR_EMAIL);
    assert_eq!(me["login_type"], "none");
    assert_eq!(me["status"], "active");
    let roles: Vec<&str> = me["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|role| role["name"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["owner"], "site roles in {me}");
    let organizations: Vec<&str> = me["organization_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    assert!(
        organizations.contains(&coder.organization_id()),
        "member of the default organization: {organizations:?}"
    );
    me["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn bootstrap_creates_a_token_that_real_coder_accepts_and_reuses_it() {
    let coder = coder().await;
    let db = sql(coder).await;
    let name = "create-and-reuse";
    let token = ensure_operator_access(coder.database_url(), NS, name, None)
        .await
        .unwrap();
    let id = assert_operator(coder, &token).await;
    assert_eq!(id, operator_user_id(&db).await.to_string());

    // The rows as Coder stores them.
    let user = db
        .query_one(
            "SELECT rbac_roles, login_type::text, status::text, is_system, deleted FROM users WHERE id = $1",
            &[&operator_user_id(&db).await],
        )
        .await
        .unwrap();
    assert_eq!(user.get::<_, Vec<String>>(0), ["owner"]);
    assert_eq!(user.get::<_, String>(1), "none");
    assert_eq!(user.get::<_, String>(2), "active");
    assert!(user.get::<_, bool>(3));
    assert!(!user.get::<_, bool>(4));
    let key = db
        .query_one(
            "SELECT id, login_type::text, lifetime_seconds, scopes::text, allow_list \
             FROM api_keys WHERE token_name = $1",
            &[&token_name(NS, name)],
        )
        .await
        .unwrap();
    assert_eq!(key.get::<_, String>(0), token.id());
    assert_eq!(key.get::<_, String>(1), "token");
    assert_eq!(key.get::<_, i64>(2), TOKEN_LIFETIME_SECONDS);
    assert_eq!(key.get::<_, String>(3), "{coder:all}");
    assert_eq!(key.get::<_, Vec<String>>(4), ["*:*"]);

    // A second run with the stored token keeps it; it still works.
    let again = ensure_operator_access(coder.database_url(), NS, name, Some(&token))
        .await
        .unwrap();
    assert_eq!(again, token);
    assert_operator(coder, &again).await;
    let keys: i64 = db
        .query_one(
            "SELECT count(*) FROM api_keys WHERE token_name = $1",
            &[&token_name(NS, name)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(keys, 1);
    assert_eq!(
        operator_users(&db).await,
        1,
        "one operator user for every control plane"
    );

    // Coder lists the token under the operator user, with the bootstrap's name.
    let response = coder
        .request_as(Some(&token.expose()), "GET", "/api/v2/users/me/keys/tokens", None)
        .await
        .unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    let listed = response.json().unwrap();
    let mine: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|key| key["token_name"] == token_name(NS, name).as_str())
        .map(|key| key["id"].as_str().unwrap())
        .collect();
    assert_eq!(mine, [token.id()], "{listed}");
}

#[tokio::test]
async fn an_expired_token_is_rotated_and_the_old_one_stops_working() {
    let coder = coder().await;
    let db = sql(coder).await;
    let name = "rotate";
    let first = ensure_operator_access(coder.database_url(), NS, name, None)
        .await
        .unwrap();
    assert_operator(coder, &first).await;

    // Expired in Coder's database: Coder refuses it, and the next bootstrap replaces it.
    db.execute(
        "UPDATE api_keys SET expires_at = now() - interval '1 minute' WHERE id = $1",
        &[&first.id()],
    )
    .await
    .unwrap();
    assert_eq!(
        me_status(coder, &first).await,
        401,
        "Coder refuses an expired key"
    );
    let second = ensure_operator_access(coder.database_url(), NS, name, Some(&first))
        .await
        .unwrap();
    assert_ne!(second, first);
    assert_operator(coder, &second).await;
    assert_eq!(me_status(coder, &first).await, 401);

    // A token Coder does not know (say, garbage in the Secret, so the caller passes none) is replaced too, and the
    // replaced one stops working at once.
    let third = ensure_operator_access(coder.database_url(), NS, name, None)
        .await
        .unwrap();
    assert_ne!(third, second);
    assert_operator(coder, &third).await;
    assert_eq!(me_status(coder, &second).await, 401);
    let ids: Vec<String> = db
        .query(
            "SELECT id FROM api_keys WHERE token_name = $1",
            &[&token_name(NS, name)],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(ids, [third.id()]);
}

#[tokio::test]
async fn revoke_makes_real_coder_refuse_the_token() {
    let coder = coder().await;
    let name = "revoke";
    let token = ensure_operator_access(coder.database_url(), NS, name, None)
        .await
        .unwrap();
    let other = ensure_operator_access(coder.database_url(), NS, "revoke-other", None)
        .await
        .unwrap();
    assert_operator(coder, &token).await;

    assert_eq!(
        revoke_operator_access(coder.database_url(), NS, name)
            .await
            .unwrap(),
        1
    );
    let refused = coder
        .request_as(Some(&token.expose()), "GET", "/api/v2/users/me", None)
        .await
        .unwrap();
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert_eq!(
        revoke_operator_access(coder.database_url(), NS, name)
            .await
            .unwrap(),
        0
    );
    // Only this control plane's token goes; another one keeps working.
    assert_operator(coder, &other).await;
}

#[tokio::test]
async fn every_live_organization_gets_an_admin_membership() {
    let coder = coder().await;
    let db = sql(coder).await;
    // The open-source API cannot create organizations; a licensed Coder can, into the same table.
    let (second, gone) = (Uuid::new_v4(), Uuid::new_v4());
    let suffix = &second.simple().to_string()[..8];
    db.execute(
        "INSERT INTO organizations (id, name, description, created_at, updated_at, display_name) \
         VALUES ($1, $2, '', now(), now(), 'Second')",
        &[&second, &format!("second-{suffix}")],
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO organizations (id, name, description, created_at, updated_at, display_name, deleted) \
         VALUES ($1, $2, '', now(), now(), 'Gone', true)",
        &[&gone, &format!("gone-{suffix}")],
    )
    .await
    .unwrap();

    let name = "organizations";
    let token = ensure_operator_access(coder.database_url(), NS, name, None)
        .await
        .unwrap();
    let user_id = operator_user_id(&db).await;
    // A stale role is reset on the next run.
    db.execute(
        "UPDATE organization_members SET roles = ARRAY['organization-auditor'] \
         WHERE user_id = $1 AND organization_id = $2",
        &[&user_id, &second],
    )
    .await
    .unwrap();
    let token = ensure_operator_access(coder.database_url(), NS, name, Some(&token))
        .await
        .unwrap();

    let default = Uuid::parse_str(coder.organization_id()).unwrap();
    let memberships: Vec<(Uuid, Vec<String>)> = db
        .query(
            "SELECT organization_id, roles FROM organization_members \
             WHERE user_id = $1 AND organization_id = ANY($2) ORDER BY organization_id = $3 DESC",
            &[&user_id, &vec![default, second, gone], &default],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let admin = vec!["organization-admin".to_owned()];
    assert_eq!(memberships, [(default, admin.clone()), (second, admin)]);

    // Coder sees the operator in both live organizations and not in the deleted one.
    let me = coder
        .request_as(Some(&token.expose()), "GET", "/api/v2/users/me", None)
        .await
        .unwrap();
    assert_eq!(me.status, 200, "{}", me.text());
    let me = me.json().unwrap();
    let organizations: Vec<String> = me["organization_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap().to_owned())
        .collect();
    assert!(
        organizations.contains(&default.to_string()) && organizations.contains(&second.to_string()),
        "{organizations:?}"
    );
    assert!(!organizations.contains(&gone.to_string()), "{organizations:?}");
    let listed = coder
        .request_as(
            Some(&token.expose()),
            "GET",
            "/api/v2/users/me/organizations",
            None,
        )
        .await
        .unwrap();
    assert_eq!(listed.status, 200, "{}", listed.text());
    let mut listed: Vec<String> = listed
        .json()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|organization| organization["id"].as_str().unwrap().to_owned())
        .filter(|id| [default, second, gone].iter().any(|o| o.to_string() == *id))
        .collect();
    listed.sort();
    let mut expected = vec![default.to_string(), second.to_string()];
    expected.sort();
    assert_eq!(listed, expected);
    // Coder leaves system users (`is_system`, like the operator) out of its organization member listings, so the
    // organization roles it reports for the operator are empty: the membership rows above are the check.
    let roles = coder
        .request_as(Some(&token.expose()), "GET", "/api/v2/users/me/roles", None)
        .await
        .unwrap();
    assert_eq!(roles.status, 200, "{}", roles.text());
    assert_eq!(
        roles.text().trim_end(),
        r#"{"roles":["owner"],"organization_roles":{}}"#
    );
}

/// A bootstrap writes the operator user's identity, roles and its own control plane's token, nothing else: a user
/// column it does not manage (the avatar, set in the database as a login through an identity provider would) and
/// another token of the operator user are still there after a bootstrap that rotated the control plane's token.
#[tokio::test]
async fn a_bootstrap_keeps_what_it_does_not_manage_of_the_operator_user() {
    let coder = coder().await;
    let db = sql(coder).await;
    let name = "keeps";
    let first = ensure_operator_access(coder.database_url(), NS, name, None)
        .await
        .unwrap();
    let user_id = operator_user_id(&db).await;
    let avatar = "https://example.com/operator.png";
    db.execute(
        "UPDATE users SET avatar_url = $2 WHERE id = $1",
        &[&user_id, &avatar],
    )
    .await
    .unwrap();
    // Another token of the operator user, stored as Coder stores the tokens it issues.
    let own = OperatorToken::generate().unwrap();
    db.execute(
        "INSERT INTO api_keys (id, hashed_secret, user_id, last_used, expires_at, created_at, updated_at, \
         login_type, lifetime_seconds, ip_address, token_name, scopes, allow_list) \
         VALUES ($1, $2, $3, now(), now() + interval '1 hour', now(), now(), 'token'::login_type, 3600, \
         '0.0.0.0'::inet, 'keeps-own', ARRAY['coder:all']::api_key_scope[], ARRAY['*:*']::text[])",
        &[&own.id(), &own.hashed_secret().as_slice(), &user_id],
    )
    .await
    .unwrap();
    assert_eq!(me_status(coder, &own).await, 200);

    let second = ensure_operator_access(coder.database_url(), NS, name, None)
        .await
        .unwrap();
    assert_ne!(second, first, "the token was rotated");
    assert_eq!(me_status(coder, &first).await, 401);
    assert_operator(coder, &second).await;
    let user = coder.get(&format!("/api/v2/users/{user_id}")).await.unwrap();
    assert_eq!(user.status, 200, "{}", user.text());
    assert_eq!(user.json().unwrap()["avatar_url"], avatar);
    assert_eq!(
        me_status(coder, &own).await,
        200,
        "the operator user's other token survived"
    );
}
