//! `examples/coder-people` applied with the real kubectl (`kubectl apply -k`) through a real kube-apiserver to a
//! fresh Coder API test server playing a licensed Coder (Multiple Organizations, Template RBAC; a real Coder here is
//! the open-source build, which serves neither): Coder's own API then shows exactly the example's organization,
//! groups and their members, users with their roles and login types, and the template with its access list; the
//! generated password signs alice in; applying the directory again writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cluster::{SERVER_NAMESPACE, assert_success, kubectl, serve_alone, static_provider, stdout};
use coder_k8s_aggregated_apiserver::coder::registry_with;
use coder_k8s_aggregated_apiserver::coder::user_records::{KubeUserStore, UserStore};
use coder_k8s_coder_client::types::users::LoginWithPasswordRequest;
use coder_k8s_coder_client::{CoderClient, Secret as Hidden, SessionToken};
use coder_k8s_coder_testserver::{Config, Entitlement, TestServer};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

/// The namespace the example's objects name.
const NAMESPACE: &str = "coder";

fn example_dir() -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/coder-people");
    dir.canonicalize().unwrap().to_string_lossy().into_owned()
}

/// The test server's write requests (everything but reads).
fn writes(server: &TestServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.method != "GET" && r.method != "HEAD")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

fn names<'a>(items: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    items.into_iter().map(str::to_owned).collect()
}

async fn secret_value(kube: &kube::Client, name: &str, key: &str) -> String {
    let secret = Api::<Secret>::namespaced(kube.clone(), NAMESPACE)
        .get(name)
        .await
        .unwrap();
    String::from_utf8(secret.data.unwrap()[key].0.clone()).unwrap()
}

/// What Coder holds after the apply: exactly the example.
async fn assert_coder_holds_the_example(client: &CoderClient, url: &url::Url, kube: &kube::Client) {
    let organizations: BTreeSet<String> = client
        .organizations()
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .collect();
    assert_eq!(organizations, names(["coder", "platform"]));
    let platform = client.organization("platform").await.unwrap();
    assert_eq!(
        (platform.display_name.as_str(), platform.description.as_str()),
        ("Platform", "The platform team's templates and workspaces")
    );

    for (user, login_type, full_name, site_roles) in [
        ("alice", "password", "Alice Liddell", vec![]),
        ("bob", "github", "Bob Builder", vec![]),
        ("carol", "password", "Carol Operator", vec!["template-admin"]),
    ] {
        let found = client.user(user).await.unwrap();
        assert_eq!(found.email, format!("{user}@example.com"));
        assert_eq!(
            (found.login_type.as_str(), found.name.as_str()),
            (login_type, full_name)
        );
        assert_ne!(found.status, "suspended");
        let roles: BTreeSet<String> = found.roles.iter().map(|r| r.name.clone()).collect();
        assert_eq!(roles, names(site_roles), "{user}");
    }
    let members: BTreeMap<String, BTreeSet<String>> = client
        .organization_members("platform")
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.username, m.roles.into_iter().map(|r| r.name).collect()))
        .collect();
    let expected_members: BTreeMap<String, BTreeSet<String>> = [
        ("alice", names([])),
        ("bob", names([])),
        ("carol", names(["organization-admin"])),
    ]
    .into_iter()
    .map(|(user, roles)| (user.to_owned(), roles))
    .collect();
    // The operator's own Coder user made the organization and is a member too.
    let ours: BTreeMap<String, BTreeSet<String>> = members
        .into_iter()
        .filter(|(user, _)| expected_members.contains_key(user))
        .collect();
    assert_eq!(ours, expected_members);

    let groups: BTreeMap<String, (BTreeSet<String>, i64)> = client
        .groups("platform")
        .await
        .unwrap()
        .into_iter()
        .filter(|g| g.name != "Everyone")
        .map(|g| {
            (
                g.name,
                (
                    g.members.into_iter().map(|m| m.username).collect(),
                    g.quota_allowance,
                ),
            )
        })
        .collect();
    let expected_groups = BTreeMap::from([
        ("developers".to_owned(), (names(["alice", "bob"]), 5)),
        ("operators".to_owned(), (names(["carol"]), 0)),
    ]);
    assert_eq!(groups, expected_groups);
    let developers = client.group_by_name("platform", "developers").await.unwrap();
    assert_eq!(developers.display_name, "Developers");

    let template = client.template_by_name("platform", "starter").await.unwrap();
    assert_eq!(template.display_name, "Starter");
    let acl = client.template_acl(template.id).await.unwrap();
    let acl_groups: BTreeSet<(String, String)> = acl.groups.into_iter().map(|g| (g.name, g.role)).collect();
    assert_eq!(
        acl_groups,
        BTreeSet::from([
            ("developers".to_owned(), "use".to_owned()),
            ("operators".to_owned(), "admin".to_owned())
        ])
    );
    assert_eq!(acl.users, Vec::new());

    // alice's generated password signs her in.
    let request = LoginWithPasswordRequest {
        email: "alice@example.com".to_owned(),
        password: Hidden::new(secret_value(kube, "alice-coder-login", "password").await),
    };
    let session = client.login_with_password(&request).await.unwrap();
    let alice = CoderClient::new(
        url.clone(),
        SessionToken::new(session.session_token.expose().to_owned()),
    )
    .unwrap();
    assert_eq!(alice.me().await.unwrap().username, "alice");
}

// kubectl runs as a blocking child process: the test server needs worker threads of its own meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_people_example_sets_up_exactly_its_organization_groups_users_and_template_acl() {
    coder_k8s_coder_client::install_ring_provider();
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    let db_url = pg.unique_coder_database("example_people").await.unwrap();
    let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let server = TestServer::start(Config::new(&db_url)).await.unwrap();
    for feature in ["multiple_organizations", "template_rbac"] {
        server.set_entitlement(feature, Entitlement::Entitled);
    }
    let client = CoderClient::new(server.url(), SessionToken::new(token.clone())).unwrap();

    let (url, server_token) = (server.url(), token.clone());
    let cp = serve_alone(NAMESPACE, "coderusers", move |kube| {
        let provider = static_provider(url, &server_token, NAMESPACE, Duration::from_secs(20));
        let store: Arc<dyn UserStore> = Arc::new(KubeUserStore::new(kube, SERVER_NAMESPACE));
        registry_with(provider, None, Some(store))
    })
    .await;
    let kube = cp.client().unwrap();

    let dir = example_dir();
    let out = kubectl(cp, &["apply", "-k", &dir], None);
    assert_success(&out, "kubectl apply -k examples/coder-people");
    let applied = stdout(&out);
    for object in [
        "coderorganization.aggregation.coder.com/platform created",
        "coderuser.aggregation.coder.com/alice created",
        "codergroup.aggregation.coder.com/platform.developers created",
        "codertemplate.aggregation.coder.com/platform.starter created",
    ] {
        assert!(applied.contains(object), "{applied}");
    }
    assert_coder_holds_the_example(&client, &server.url(), &kube).await;

    server.clear_requests();
    let again = kubectl(cp, &["apply", "-k", &dir], None);
    assert_success(&again, "kubectl apply -k examples/coder-people, again");
    assert_eq!(writes(&server), Vec::<String>::new(), "{}", stdout(&again));
}
