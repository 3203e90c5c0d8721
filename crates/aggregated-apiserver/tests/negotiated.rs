//! The handlers' use of content negotiation: patch types, YAML, Table and PartialObjectMetadata answers, 406 and
//! 415.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use support::{Collected, Harness};

const THINGS: &str = "/apis/test.example.com/v1/namespaces/team-a/things";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

async fn send(h: &Harness, method: Method, path: &str, headers: &[(&str, &str)], body: &str) -> Collected {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("x-test-user", "alice");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    support::collect(
        h.request(builder.body(Body::from(body.to_owned())).unwrap())
            .await,
    )
    .await
}

async fn patch(h: &Harness, name: &str, content_type: &str, body: &str) -> Collected {
    send(
        h,
        Method::PATCH,
        &format!("{THINGS}/{name}"),
        &[("content-type", content_type)],
        body,
    )
    .await
}

#[tokio::test]
async fn merge_and_json_patches_change_the_stored_object() {
    let h = Harness::new();
    let created = h.create(THINGS, "a").await;
    let merged = patch(
        &h,
        "a",
        "application/merge-patch+json",
        r#"{"spec":{"n":5,"extra":"x"}}"#,
    )
    .await;
    assert_eq!(merged.status, StatusCode::OK, "{}", merged.text());
    assert_eq!(merged.json()["spec"], json!({"n": 5, "extra": "x"}));
    let patched = patch(
        &h,
        "a",
        "application/json-patch+json",
        r#"[{"op":"replace","path":"/spec/n","value":6},{"op":"remove","path":"/spec/extra"}]"#,
    )
    .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text());
    assert_eq!(patched.json()["spec"], json!({"n": 6}));
    assert_eq!(patched.json()["metadata"]["uid"], created["metadata"]["uid"]);
    let stored = h
        .send(Method::GET, &format!("{THINGS}/a"), Some("alice"))
        .await
        .json();
    assert_eq!(stored["spec"], json!({"n": 6}));

    let failed = patch(
        &h,
        "a",
        "application/json-patch+json",
        r#"[{"op":"test","path":"/spec/n","value":1}]"#,
    )
    .await;
    assert_eq!(failed.status, 422);
    let renamed = patch(
        &h,
        "a",
        "application/merge-patch+json",
        r#"{"metadata":{"name":"b"}}"#,
    )
    .await;
    assert_eq!(renamed.status, 400);
    assert_eq!(
        renamed.json()["message"],
        "the name of the object (b) does not match the name on the URL (a)"
    );
    let missing = patch(&h, "zz", "application/merge-patch+json", r#"{"spec":{}}"#).await;
    assert_eq!(missing.status, 404);
    // A JSON patch can replace the whole document with something that is not an object.
    for replacement in ["[1]", "\"text\"", "null"] {
        let body = format!(r#"[{{"op":"replace","path":"","value":{replacement}}}]"#);
        let replaced = patch(&h, "a", "application/json-patch+json", &body).await;
        assert_eq!(replaced.status, 422, "{replacement}: {}", replaced.text());
    }
    let stored = h
        .send(Method::GET, &format!("{THINGS}/a"), Some("alice"))
        .await
        .json();
    assert_eq!(stored["spec"], json!({"n": 6}), "a refused patch changes nothing");
}

#[tokio::test]
async fn strategic_merge_patch_is_415_as_for_custom_resources() {
    let h = Harness::new();
    h.create(THINGS, "a").await;
    let response = patch(
        &h,
        "a",
        "application/strategic-merge-patch+json",
        r#"{"spec":{"n":2}}"#,
    )
    .await;
    assert_eq!(response.status, 415);
    assert_eq!(response.json()["reason"], "UnsupportedMediaType");
    let stored = h
        .send(Method::GET, &format!("{THINGS}/a"), Some("alice"))
        .await
        .json();
    assert_eq!(stored["spec"]["n"], 1, "nothing was written");
}

#[tokio::test]
async fn server_side_apply_creates_then_merges() {
    let h = Harness::new();
    let yaml = "apiVersion: test.example.com/v1\nkind: Thing\nmetadata:\n  name: a\n  labels:\n    app: web\nspec:\n  n: 3\n";
    let no_manager = patch(&h, "a", "application/apply-patch+yaml", yaml).await;
    assert_eq!(no_manager.status, 422);
    assert!(
        no_manager.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("fieldManager: Required value"))
    );
    let apply = |body: &'static str| {
        let h = &h;
        async move {
            send(
                h,
                Method::PATCH,
                &format!("{THINGS}/a?fieldManager=kubectl&force=true"),
                &[("content-type", "application/apply-patch+yaml")],
                body,
            )
            .await
        }
    };
    let created = apply(yaml).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let uid = created.json()["metadata"]["uid"].clone();
    assert!(uid.is_string());
    let updated =
        apply("apiVersion: test.example.com/v1\nkind: Thing\nmetadata:\n  name: a\nspec:\n  other: true\n")
            .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text());
    let updated = updated.json();
    assert_eq!(
        updated["spec"],
        json!({"n": 3, "other": true}),
        "applied fields merge over the current ones"
    );
    assert_eq!(updated["metadata"]["labels"]["app"], "web");
    assert_eq!(updated["metadata"]["uid"], uid);
}

async fn apply_as(h: &Harness, user: &str, collection: &str, name: &str, yaml: &str) -> Collected {
    let request = Request::builder()
        .method(Method::PATCH)
        .uri(format!("{collection}/{name}?fieldManager=kubectl"))
        .header("x-test-user", user)
        .header("content-type", "application/apply-patch+yaml")
        .body(Body::from(yaml.to_owned()))
        .unwrap();
    support::collect(h.request(request).await).await
}

/// The verbs the authorizer was asked about for `name`, in order.
fn verbs_reviewed(h: &Harness, user: &str, name: &str) -> Vec<String> {
    h.authorizer_log()
        .iter()
        .filter(|a| a.user.name == user && a.resource.as_ref().is_some_and(|r| r.name == name))
        .map(|a| a.verb.clone())
        .collect()
}

#[tokio::test]
async fn an_apply_that_creates_needs_create_and_one_that_changes_does_not() {
    let h = Harness::new();
    let yaml = "apiVersion: test.example.com/v1\nkind: Thing\nmetadata:\n  name: new\nspec:\n  n: 3\n";
    let refused = apply_as(&h, "patcher", THINGS, "new", yaml).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text());
    assert_eq!(
        refused.json()["message"],
        "things.test.example.com \"new\" is forbidden: User \"patcher\" cannot create resource \"things\" in API group \"test.example.com\" in the namespace \"team-a\""
    );
    assert_eq!(verbs_reviewed(&h, "patcher", "new"), ["patch", "create"]);
    let missing = h.send(Method::GET, &format!("{THINGS}/new"), Some("alice")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "nothing was created");

    h.create(THINGS, "old").await;
    let yaml = "apiVersion: test.example.com/v1\nkind: Thing\nmetadata:\n  name: old\nspec:\n  n: 4\n";
    let changed = apply_as(&h, "patcher", THINGS, "old", yaml).await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.text());
    assert_eq!(changed.json()["spec"]["n"], 4);
    assert_eq!(
        verbs_reviewed(&h, "patcher", "old"),
        ["patch"],
        "a change of an existing object needs only patch"
    );
}

#[tokio::test]
async fn an_apply_whose_object_vanishes_before_the_write_is_authorized_as_a_create() {
    const VANISHING: &str = "/apis/test.example.com/v1/namespaces/team-a/vanishingthings";
    let yaml = "apiVersion: test.example.com/v1\nkind: VanishingThing\nmetadata:\n  name: v\nspec:\n  n: 3\n";
    let h = Harness::new();
    let refused = apply_as(&h, "patcher", VANISHING, "v", yaml).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text());
    assert_eq!(verbs_reviewed(&h, "patcher", "v"), ["patch", "create"]);
    let missing = h
        .send(Method::GET, &format!("{VANISHING}/v"), Some("alice"))
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "nothing was created");

    let h = Harness::new();
    let created = apply_as(&h, "alice", VANISHING, "v", yaml).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    assert_eq!(verbs_reviewed(&h, "alice", "v"), ["patch", "create"]);
}

#[tokio::test]
async fn yaml_bodies_and_answers() {
    let h = Harness::new();
    let yaml = "apiVersion: test.example.com/v1\nkind: Thing\nmetadata:\n  name: yy\nspec:\n  n: 9\n";
    let created = send(
        &h,
        Method::POST,
        THINGS,
        &[("content-type", "application/yaml")],
        yaml,
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let got = send(
        &h,
        Method::GET,
        &format!("{THINGS}/yy"),
        &[("accept", "application/yaml")],
        "",
    )
    .await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.headers["content-type"], "application/yaml");
    let parsed: Value = serde_saphyr::from_str(&got.text()).unwrap();
    assert_eq!(parsed["spec"]["n"], 9);
    let broken = send(
        &h,
        Method::POST,
        THINGS,
        &[("content-type", "application/yaml")],
        "metadata: [unclosed",
    )
    .await;
    assert_eq!(broken.status, 400);
    assert!(
        broken.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("not valid YAML"))
    );
}

#[tokio::test]
async fn unknown_body_types_are_415() {
    let h = Harness::new();
    let response = send(&h, Method::POST, THINGS, &[("content-type", "text/plain")], "{}").await;
    assert_eq!(response.status, 415);
    assert_eq!(
        h.send(Method::GET, THINGS, Some("alice")).await.json()["items"],
        json!([])
    );
}

#[tokio::test]
async fn tables_and_partial_object_metadata() {
    let h = Harness::new();
    h.create(THINGS, "a").await;
    h.create(THINGS, "b").await;
    let table = send(&h, Method::GET, THINGS, &[("accept", TABLE)], "").await;
    assert_eq!(table.status, StatusCode::OK, "{}", table.text());
    assert_eq!(table.headers["content-type"], TABLE);
    let table = table.json();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"].as_array().map(Vec::len), Some(2));
    assert!(table["metadata"]["resourceVersion"].is_string());
    let one = send(&h, Method::GET, &format!("{THINGS}/a"), &[("accept", TABLE)], "")
        .await
        .json();
    assert_eq!(one["rows"].as_array().map(Vec::len), Some(1));
    let accept = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
    let partial = send(&h, Method::GET, THINGS, &[("accept", accept)], "")
        .await
        .json();
    assert_eq!(partial["kind"], "PartialObjectMetadataList");
    assert_eq!(partial["items"][0]["metadata"]["name"], "a");
    assert!(partial["items"][0].get("spec").is_none());
}

#[tokio::test]
async fn not_acceptable_is_answered_before_the_storage_is_called() {
    let h = Harness::new();
    let started = std::time::Instant::now();
    let slow = "/apis/test.example.com/v1/namespaces/team-a/slowthings";
    let response = send(
        &h,
        Method::GET,
        slow,
        &[("accept", "application/vnd.kubernetes.protobuf")],
        "",
    )
    .await;
    assert_eq!(response.status, 406);
    assert_eq!(response.json()["reason"], "NotAcceptable");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "no storage call (it would take 2 s to time out)"
    );
}

#[tokio::test]
async fn table_watches_carry_tables() {
    let h = Harness::new();
    let request = Request::builder()
        .uri(format!("{THINGS}?watch=true&resourceVersion=1&timeoutSeconds=1"))
        .header("x-test-user", "alice")
        .header("accept", TABLE)
        .body(Body::empty())
        .unwrap();
    let watch = h.request(request).await;
    assert_eq!(watch.status(), StatusCode::OK);
    assert_eq!(watch.headers()["content-type"], format!("{TABLE};stream=watch"));
    h.create(THINGS, "a").await;
    let events = support::read_watch(watch, Duration::from_secs(4))
        .await
        .expect("ends");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["kind"], "Table");
    assert_eq!(events[0]["object"]["rows"].as_array().map(Vec::len), Some(1));
}
