//! `DelegatedAuthenticator` on the real kube-apiserver: start-up, TokenReview, front-proxy and client-CA
//! certificates through real TLS connections to `serve`, and the watched ConfigMap.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, header};
use coder_k8s_aggregated_apiserver::generic::Authenticator;
use coder_k8s_aggregated_apiserver::generic::authn::DelegatedAuthenticator;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::{
    TestCa, TestServer, config_as, echo_router, front_proxy_identity, recording_client, unique_user,
};

const REMOTE_HEADERS: &[(&str, &str)] = &[
    ("X-Remote-User", "alice"),
    ("X-Remote-Uid", "uid-alice"),
    ("X-Remote-Group", "devs"),
    ("X-Remote-Group", "system:authenticated"),
    ("X-Remote-Extra-Acme.com%2fProject", "p1"),
];

async fn started() -> (
    &'static coder_k8s_testenv::ControlPlane,
    Arc<DelegatedAuthenticator>,
) {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let authenticator = DelegatedAuthenticator::start(cp.client().unwrap()).await.unwrap();
    (cp, authenticator)
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn bearer(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    headers
}

#[tokio::test]
async fn front_proxy_certificate_asserts_the_identity_in_the_remote_headers() {
    let (cp, authenticator) = started().await;
    let server = TestServer::start(
        echo_router(authenticator.clone()),
        authenticator.client_cert_verifier(),
    )
    .await;
    let answer = server
        .client()
        .with_identity(&front_proxy_identity(cp))
        .get("/whoami", REMOTE_HEADERS)
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        json(&answer.body),
        json!({
            "name": "alice",
            "uid": "uid-alice",
            "groups": ["devs", "system:authenticated"],
            "extra": {"acme.com/project": ["p1"]},
        })
    );
    // Without a username header the proxy's certificate is no identity of its own.
    let answer = server
        .client()
        .with_identity(&front_proxy_identity(cp))
        .get("/whoami", &[("X-Remote-Group", "devs")])
        .await
        .unwrap();
    assert_eq!(answer.status, 401, "{}", answer.body);
}

#[tokio::test]
async fn remote_headers_are_ignored_without_a_front_proxy_certificate() {
    let (cp, authenticator) = started().await;
    let server = TestServer::start(
        echo_router(authenticator.clone()),
        authenticator.client_cert_verifier(),
    )
    .await;

    // No client certificate: the headers are no credential.
    let answer = server.client().get("/whoami", REMOTE_HEADERS).await.unwrap();
    assert_eq!(answer.status, 401, "{}", answer.body);

    // A certificate of the cluster client CA: its own CN/O, never the headers.
    let cluster_ca = TestCa::from_files(&cp.pki().ca_cert, &cp.pki().ca_key);
    let carol = cluster_ca.client("carol", Some("team-a"));
    let answer = server
        .client()
        .with_identity(&carol)
        .get("/whoami", REMOTE_HEADERS)
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        json(&answer.body),
        json!({"name": "carol", "uid": "", "groups": ["team-a", "system:authenticated"], "extra": {}})
    );

    // Even with the front proxy's CN, a cluster-CA certificate is no front proxy.
    let lookalike = cluster_ca.client("front-proxy-client", None);
    let answer = server
        .client()
        .with_identity(&lookalike)
        .get("/whoami", REMOTE_HEADERS)
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        json(&answer.body),
        json!({"name": "front-proxy-client", "uid": "", "groups": ["system:authenticated"], "extra": {}})
    );

    // A bearer token: the token's user, never the headers.
    let mut headers = REMOTE_HEADERS.to_vec();
    let authorization = format!("Bearer {}", cp.admin_token());
    headers.push(("Authorization", &authorization));
    let answer = server.client().get("/whoami", &headers).await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(json(&answer.body)["name"], "admin");

    // A front-proxy CA certificate whose CN is not in requestheader-allowed-names.
    let front_proxy_ca = TestCa::from_files(&cp.pki().front_proxy_ca_cert, &cp.pki().front_proxy_ca_key);
    let impostor = front_proxy_ca.client("not-the-proxy", None);
    let answer = server
        .client()
        .with_identity(&impostor)
        .get("/whoami", REMOTE_HEADERS)
        .await
        .unwrap();
    assert_eq!(answer.status, 401, "{}", answer.body);

    // A certificate of an unknown CA does not get through the handshake.
    let stranger = TestCa::new("stranger").client("alice", None);
    let refused = server
        .client()
        .with_identity(&stranger)
        .get("/whoami", REMOTE_HEADERS)
        .await;
    assert!(refused.is_err(), "{refused:?}");
}

#[tokio::test]
async fn start_fails_with_the_documented_message_without_permission_to_read_the_configmap() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let user = unique_user("no-rbac");
    let error = DelegatedAuthenticator::start(cp.client_as(&user, &[]).unwrap())
        .await
        .unwrap_err();
    let expected = format!(
        "configure delegated authentication: configmaps \"extension-apiserver-authentication\" is forbidden: User \
         \"{user}\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"kube-system\""
    );
    assert_eq!(error.to_string(), expected);
}

/// A ServiceAccount in a fresh namespace and a token for it from the TokenRequest API.
async fn service_account_token(cp: &coder_k8s_testenv::ControlPlane) -> (String, String) {
    let ns = cp.namespace("authn-sa").await.unwrap();
    let client = cp.client().unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(client, &ns);
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("caller".into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    accounts.create(&PostParams::default(), &account).await.unwrap();
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answer: TokenRequest = accounts
        .create_subresource("token", "caller", &PostParams::default(), &request)
        .await
        .unwrap();
    (ns.name().to_owned(), answer.status.unwrap().token)
}

#[tokio::test]
async fn service_account_tokens_authenticate_through_token_review_and_answers_are_cached() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let (ns, token) = service_account_token(cp).await;
    let (client, log) = recording_client(cp.config().unwrap());
    let authenticator = DelegatedAuthenticator::start(client).await.unwrap();
    let user = authenticator
        .authenticate(None, &bearer(&token))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(user.name, format!("system:serviceaccount:{ns}:caller"));
    assert!(!user.uid.is_empty());
    for group in [
        "system:serviceaccounts",
        &format!("system:serviceaccounts:{ns}"),
        "system:authenticated",
    ] {
        assert!(
            user.groups.iter().any(|g| g == group),
            "{group} missing from {:?}",
            user.groups
        );
    }
    let garbage = bearer("not-a-real-token");
    assert_eq!(authenticator.authenticate(None, &garbage).await.unwrap(), None);
    assert_eq!(log.count("POST", "/tokenreviews"), 2, "{:?}", log.entries());

    // Within 10 s both answers come from the cache.
    assert_eq!(
        authenticator.authenticate(None, &bearer(&token)).await.unwrap(),
        Some(user)
    );
    assert_eq!(authenticator.authenticate(None, &garbage).await.unwrap(), None);
    assert_eq!(log.count("POST", "/tokenreviews"), 2, "{:?}", log.entries());
    // No credential: nothing is asked.
    assert_eq!(
        authenticator.authenticate(None, &HeaderMap::new()).await.unwrap(),
        None
    );
    assert_eq!(log.count("POST", "/tokenreviews"), 2, "{:?}", log.entries());
}

/// A user bound only to the `extension-apiserver-authentication-reader` Role (what the shipped
/// authentication-reader binding grants): it may read and watch the ConfigMap, but not create TokenReviews.
async fn reader_only_user(cp: &coder_k8s_testenv::ControlPlane) -> String {
    let user = unique_user("reader-only");
    let bindings: Api<RoleBinding> = Api::namespaced(cp.client().unwrap(), "kube-system");
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some(user.clone()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "extension-apiserver-authentication-reader".into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: user.clone(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            ..Subject::default()
        }]),
    };
    bindings.create(&PostParams::default(), &binding).await.unwrap();
    cp.wait_until_allowed(
        &user,
        ResourceAttributes {
            verb: Some("get".into()),
            resource: Some("configmaps".into()),
            namespace: Some("kube-system".into()),
            name: Some("extension-apiserver-authentication".into()),
            ..ResourceAttributes::default()
        },
    )
    .await
    .unwrap();
    user
}

#[tokio::test]
async fn token_review_failure_fails_closed_with_a_500() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let user = reader_only_user(cp).await;
    let authenticator = DelegatedAuthenticator::start(kube::Client::try_from(config_as(cp, &user)).unwrap())
        .await
        .unwrap();
    let error = authenticator
        .authenticate(None, &bearer("some-token"))
        .await
        .unwrap_err();
    assert_eq!(error.code, 500);
    assert!(error.message.contains("tokenreviews"), "{}", error.message);
    assert!(!error.message.contains("some-token"), "{}", error.message);
}

#[tokio::test]
async fn the_authentication_reader_role_is_enough_to_start_and_watch() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let user = reader_only_user(cp).await;
    let (client, log) = recording_client(config_as(cp, &user));
    let _authenticator = DelegatedAuthenticator::start(client).await.unwrap();
    let is_list = |entry: &str| {
        entry.starts_with("GET /api/v1/namespaces/kube-system/configmaps?") && !entry.contains("watch=true")
    };
    let is_watch = |entry: &str| {
        entry.starts_with("GET /api/v1/namespaces/kube-system/configmaps?") && entry.contains("watch=true")
    };
    // The watcher lists, and only after a successful list does it watch.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while log.count_matching(is_watch) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no watch started: {:?}",
            log.entries()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A refused watch would make the watcher list again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(log.count_matching(is_list), 1, "{:?}", log.entries());
    assert_eq!(log.count_matching(is_watch), 1, "{:?}", log.entries());
    let watch = log.entries().into_iter().find(|entry| is_watch(entry)).unwrap();
    assert!(
        watch.contains("fieldSelector=metadata.name%3Dextension-apiserver-authentication"),
        "{watch}"
    );
}

#[tokio::test]
async fn the_configmap_is_watched_and_a_deleted_one_keeps_the_last_settings() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let client = cp.client().unwrap();
    let real: ConfigMap = Api::namespaced(client.clone(), "kube-system")
        .get("extension-apiserver-authentication")
        .await
        .unwrap();
    let real_data = real.data.unwrap();
    let ns = cp.namespace("authn-watch").await.unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    // Start with the cluster client CA only: no front proxy is trusted.
    let client_only: BTreeMap<String, String> = real_data
        .iter()
        .filter(|(key, _)| *key == "client-ca-file")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let copy = ConfigMap {
        metadata: ObjectMeta {
            name: Some("auth".into()),
            ..ObjectMeta::default()
        },
        data: Some(client_only),
        ..ConfigMap::default()
    };
    configmaps.create(&PostParams::default(), &copy).await.unwrap();
    let authenticator = DelegatedAuthenticator::start_from(client, &ns, "auth")
        .await
        .unwrap();
    let server = TestServer::start(
        echo_router(authenticator.clone()),
        authenticator.client_cert_verifier(),
    )
    .await;
    let proxy = server.client().with_identity(&front_proxy_identity(cp));
    let refused = proxy.get("/whoami", REMOTE_HEADERS).await;
    assert!(
        refused.is_err(),
        "the front-proxy CA is not trusted yet: {refused:?}"
    );

    // The requestheader settings appear: the next handshake and request use them.
    let patch = json!({"data": real_data});
    configmaps
        .patch("auth", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let last = match proxy.get("/whoami", REMOTE_HEADERS).await {
            Ok(answer) if answer.status == 200 => {
                assert_eq!(json(&answer.body)["name"], "alice");
                break;
            }
            other => format!("{other:?}"),
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "the change never applied: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Deleted: the last settings stay.
    configmaps.delete("auth", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let answer = proxy.get("/whoami", REMOTE_HEADERS).await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(json(&answer.body)["name"], "alice");
}
