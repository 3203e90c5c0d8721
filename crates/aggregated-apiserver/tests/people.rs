//! `coderorganizations`, `codergroups` and `coderusers` read from Coder: the same checks against the Coder API test
//! server (which can also play a licensed server with more groups) and a real open-source Coder v2.30.0, plus
//! hostile names that must be refused before any Coder call.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use coder_k8s_aggregated_apiserver::generic::Registry;
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::Entitlement;
use coder_k8s_testenv::coder::{OWNER_USERNAME, RealCoder};
use serde_json::{Value, json};

mod coder_fixture;
mod people_support;

use coder_fixture::{OPERATOR, coder};
use people_support::{NAMESPACE, ctx, get, registry_over};

async fn list(registry: &Registry, plural: &str) -> Vec<Value> {
    registry
        .resource(plural)
        .unwrap()
        .storage
        .list(&ctx())
        .await
        .unwrap()
}

fn named<'a>(objects: &'a [Value], name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not listed: {objects:?}"))
}

/// What every Coder answers the same way: the default organization, its `Everyone` group with the owner in it, and
/// the owner user with the `owner` site role and a membership of the default organization; each get equals its list
/// item, and other spellings are 400s that name the name to use.
async fn the_people_read_the_same_everywhere(registry: &Registry, client: &CoderClient, owner: &str) {
    let org = client.default_organization().await.unwrap();
    let organizations = list(registry, "coderorganizations").await;
    let listed = named(&organizations, &org.name);
    assert_eq!(listed["kind"], "CoderOrganization");
    assert_eq!(listed["metadata"]["namespace"], NAMESPACE);
    assert_eq!(listed["metadata"]["uid"], org.id.to_string());
    assert_eq!(listed["status"]["isDefault"], true);
    assert_eq!(listed["spec"]["displayName"], org.display_name.as_str());
    assert_eq!(
        &get(registry, "coderorganizations", &org.name).await.unwrap(),
        listed
    );
    if org.name != "default" {
        let alias = get(registry, "coderorganizations", "default").await.unwrap_err();
        assert_eq!(alias.code, 400, "{alias}");
        assert!(alias.message.contains(&format!("use {:?}", org.name)), "{alias}");
    }

    let everyone_name = format!("{}.Everyone", org.name);
    let groups = list(registry, "codergroups").await;
    let everyone = named(&groups, &everyone_name);
    assert_eq!(
        everyone["status"]["id"],
        org.id.to_string(),
        "Everyone has the organization's ID"
    );
    assert_eq!(everyone["spec"]["organization"], org.name.as_str());
    let members: Vec<&str> = everyone["spec"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert!(members.contains(&owner), "{members:?}");
    assert_eq!(everyone["status"]["memberCount"], json!(members.len()));
    assert_eq!(
        &get(registry, "codergroups", &everyone_name).await.unwrap(),
        everyone
    );

    let users = list(registry, "coderusers").await;
    let user = named(&users, owner);
    assert_eq!(user["kind"], "CoderUser");
    assert!(
        user["spec"]["roles"]
            .as_array()
            .unwrap()
            .contains(&json!("owner")),
        "{user}"
    );
    assert!(user["spec"]["organizations"].get(&org.name).is_some(), "{user}");
    assert_eq!(user["spec"]["suspended"], false);
    let mut fields: Vec<&String> = user["spec"].as_object().unwrap().keys().collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "deletionPolicy",
            "email",
            "loginType",
            "name",
            "organizations",
            "roles",
            "suspended"
        ],
        "never a password or token: {user}"
    );
    assert_eq!(&get(registry, "coderusers", owner).await.unwrap(), user);
    let cased = get(registry, "coderusers", &owner.to_uppercase())
        .await
        .unwrap_err();
    assert_eq!(cased.code, 400, "{cased}");
    assert!(cased.message.contains(&format!("use {owner:?}")), "{cased}");
    let me = get(registry, "coderusers", "me").await.unwrap_err();
    assert_eq!(me.code, 400, "`me` is an alias: {me}");
    let missing = get(registry, "coderusers", "nobody-here").await.unwrap_err();
    assert_eq!((missing.code, missing.reason), (404, "NotFound"), "{missing}");
}

/// Names that could change the path of a Coder call, or are not Coder names at all: each a 400.
const HOSTILE: &[(&str, &str)] = &[
    ("coderusers", ".."),
    ("coderusers", "a/b"),
    ("coderusers", "a%2F..%2Fb"),
    ("coderusers", "alice?x=1"),
    ("coderorganizations", ".."),
    ("coderorganizations", "default/members"),
    ("codergroups", "default"),
    ("codergroups", "default.a.b"),
];

#[tokio::test]
async fn the_test_server_serves_organizations_groups_and_users() {
    let coder = coder("people").await;
    let registry = registry_over(coder.server.url(), &coder.token);
    // The operator's own user is a system user, which Coder's user list leaves out: an owner of flesh and blood.
    coder.server.mint_token("alice", &["owner"]).await.unwrap();
    the_people_read_the_same_everywhere(&registry, &coder.client, "alice").await;
    let operator = get(&registry, "coderusers", OPERATOR).await.unwrap();
    assert_eq!(operator["spec"]["loginType"], "none");

    // Refused before Coder is asked: the whole request log stays empty.
    coder.server.clear_requests();
    for (plural, name) in HOSTILE {
        let error = get(&registry, plural, name).await.unwrap_err();
        assert_eq!(error.code, 400, "{plural}/{name}: {error}");
    }
    let asked: Vec<String> = coder.server.requests().iter().map(|r| r.path.clone()).collect();
    assert!(asked.is_empty(), "hostile names reached Coder: {asked:?}");

    // Unlicensed, another group is Coder's own refusal; licensed, every group is listed and readable.
    let org = coder.client.default_organization().await.unwrap();
    let engineers = coder.server.add_group(org.id, "engineers");
    let name = format!("{}.engineers", org.name);
    let refused = get(&registry, "codergroups", &name).await.unwrap_err();
    assert_eq!(refused.code, 403, "{refused}");
    assert!(
        refused.message.contains("Template RBAC is a Premium feature"),
        "{refused}"
    );
    coder
        .server
        .set_entitlement("template_rbac", Entitlement::Entitled);
    let groups = list(&registry, "codergroups").await;
    let listed = named(&groups, &name);
    assert_eq!(listed["status"]["id"], engineers.to_string());
    assert_eq!(listed["spec"]["members"], json!([]));
    assert_eq!(&get(&registry, "codergroups", &name).await.unwrap(), listed);
    named(&groups, &format!("{}.Everyone", org.name));
    let missing = get(&registry, "codergroups", &format!("{}.nobody", org.name))
        .await
        .unwrap_err();
    assert_eq!(missing.code, 404, "{missing}");
}

#[tokio::test]
async fn a_real_open_source_coder_serves_organizations_groups_and_users() {
    coder_k8s_coder_client::install_ring_provider();
    let real = RealCoder::shared().await.unwrap();
    let url: url::Url = real.url().parse().unwrap();
    let client = CoderClient::new(url.clone(), SessionToken::new(real.owner_token())).unwrap();
    let registry = registry_over(url, real.owner_token());
    the_people_read_the_same_everywhere(&registry, &client, OWNER_USERNAME).await;

    // Open-source Coder has no group routes: only each organization's Everyone exists, any other group is a 404.
    let org = client.default_organization().await.unwrap();
    let groups = list(&registry, "codergroups").await;
    let names: Vec<&str> = groups
        .iter()
        .map(|g| g["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [format!("{}.Everyone", org.name)]);
    let other = get(&registry, "codergroups", &format!("{}.engineers", org.name))
        .await
        .unwrap_err();
    assert_eq!(other.code, 404, "{other}");
    for (plural, name) in HOSTILE {
        let error = get(&registry, plural, name).await.unwrap_err();
        assert_eq!(error.code, 400, "{plural}/{name}: {error}");
    }
}
