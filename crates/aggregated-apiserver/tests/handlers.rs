//! The generic API server's request handling, driven in-process through its router with a test authenticator and
//! authorizer and the in-memory storage: health paths, 401/403, every verb, selectors, watch and timeouts.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use support::{Harness, thing};

const THINGS: &str = "/apis/test.example.com/v1/namespaces/team-a/things";

#[tokio::test]
async fn health_paths_are_open_and_everything_else_needs_a_credential() {
    let h = Harness::new();
    for path in ["/healthz", "/livez"] {
        assert_eq!(
            h.send(Method::GET, path, None).await.status,
            StatusCode::OK,
            "{path}"
        );
    }
    assert_eq!(h.send(Method::GET, "/readyz", None).await.status, 500);
    h.set_ready(true);
    let ready = h.send(Method::GET, "/readyz", None).await;
    assert_eq!((ready.status, ready.text().as_str()), (StatusCode::OK, "ok"));
    for path in ["/healthz/ping", "/readyz/", "/apis", "/openapi/v2", THINGS] {
        let response = h.send(Method::GET, path, None).await;
        assert_eq!(response.status, 401, "{path}");
        assert_eq!(response.json()["reason"], "Unauthorized", "{path}");
    }
    assert!(
        h.authorizer_log().is_empty(),
        "nothing unauthenticated reaches the authorizer"
    );
}

#[tokio::test]
async fn authenticator_errors_fail_closed() {
    let h = Harness::new();
    let response = h.send(Method::GET, THINGS, Some("authn-broken")).await;
    assert_eq!(response.status, 503);
    assert!(h.authorizer_log().is_empty());
}

#[tokio::test]
async fn forbidden_is_worded_like_kube_apiserver() {
    let h = Harness::new();
    let response = h.send(Method::GET, THINGS, Some("mallory")).await;
    assert_eq!(response.status, 403);
    let status = response.json();
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        "things.test.example.com is forbidden: User \"mallory\" cannot list resource \"things\" in API group \"test.example.com\" in the namespace \"team-a\": no RBAC rule allows it"
    );
    let response = h
        .send(Method::GET, &format!("{THINGS}/a.b"), Some("mallory"))
        .await;
    assert!(
        response.json()["message"]
            .as_str()
            .is_some_and(|m| m
                .starts_with("things.test.example.com \"a.b\" is forbidden: User \"mallory\" cannot get")),
        "{}",
        response.text()
    );
    let response = h.send(Method::GET, "/openapi/v2", Some("mallory")).await;
    assert_eq!(
        response.json()["message"],
        "forbidden: User \"mallory\" cannot get path \"/openapi/v2\": no RBAC rule allows it"
    );
}

#[tokio::test]
async fn authorizer_errors_fail_closed_before_any_write() {
    let h = Harness::new();
    let response = h
        .send_json(Method::POST, THINGS, Some("authz-broken"), &thing("a", json!({})))
        .await;
    assert_eq!(response.status, 500);
    assert_eq!(response.json()["reason"], "InternalError");
    assert_eq!(
        h.send(Method::GET, &format!("{THINGS}/a"), Some("alice"))
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn authorizer_sees_subresource_name_and_namespace() {
    let h = Harness::new();
    h.send_json(
        Method::POST,
        &format!("{THINGS}/a/poke"),
        Some("alice"),
        &json!({}),
    )
    .await;
    let log = h.authorizer_log();
    let attributes = log.last().expect("one authorization");
    let resource = attributes.resource.as_ref().expect("a resource request");
    assert_eq!(attributes.verb, "create");
    assert_eq!(
        (
            resource.group.as_str(),
            resource.version.as_str(),
            resource.resource.as_str(),
            resource.subresource.as_str(),
            resource.namespace.as_str(),
            resource.name.as_str()
        ),
        ("test.example.com", "v1", "things", "poke", "team-a", "a")
    );
}

#[tokio::test]
async fn create_get_update_delete() {
    let h = Harness::new();
    let created = h
        .send_json(
            Method::POST,
            THINGS,
            Some("alice"),
            &thing("a", json!({"app": "web"})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let created = created.json();
    assert_eq!(created["metadata"]["namespace"], "team-a");
    assert!(created["metadata"]["uid"].is_string());
    let again = h
        .send_json(Method::POST, THINGS, Some("alice"), &thing("a", json!({})))
        .await;
    assert_eq!(
        (again.status.as_u16(), again.json()["reason"].clone()),
        (409, json!("AlreadyExists"))
    );

    let got = h.send(Method::GET, &format!("{THINGS}/a"), Some("alice")).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.json(), created);

    let mut changed = created.clone();
    changed["spec"]["n"] = 2.into();
    let updated = h
        .send_json(Method::PUT, &format!("{THINGS}/a"), Some("alice"), &changed)
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text());
    assert_eq!(updated.json()["spec"]["n"], 2);
    let stale = h
        .send_json(Method::PUT, &format!("{THINGS}/a"), Some("alice"), &changed)
        .await;
    assert_eq!(
        stale.status, 409,
        "the resourceVersion of the first read is stale now"
    );

    let deleted = h
        .send(Method::DELETE, &format!("{THINGS}/a"), Some("alice"))
        .await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.json()["metadata"]["name"], "a");
    let missing = h.send(Method::GET, &format!("{THINGS}/a"), Some("alice")).await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.json()["message"],
        "things.test.example.com \"a\" not found"
    );
}

#[tokio::test]
async fn names_and_namespaces_must_match_the_url() {
    let h = Harness::new();
    h.create(THINGS, "a").await;
    let mut renamed = thing("b", json!({}));
    let response = h
        .send_json(Method::PUT, &format!("{THINGS}/a"), Some("alice"), &renamed)
        .await;
    assert_eq!(response.status, 400);
    assert_eq!(
        response.json()["message"],
        "the name of the object (b) does not match the name on the URL (a)"
    );
    renamed["metadata"]["namespace"] = "team-b".into();
    let response = h.send_json(Method::POST, THINGS, Some("alice"), &renamed).await;
    assert_eq!(response.status, 400);
    assert_eq!(
        response.json()["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let mut wrong_kind = thing("c", json!({}));
    wrong_kind["kind"] = "Other".into();
    let response = h
        .send_json(Method::POST, THINGS, Some("alice"), &wrong_kind)
        .await;
    assert_eq!(response.status, 400, "{}", response.text());
}

#[tokio::test]
async fn malformed_and_oversized_bodies() {
    let h = Harness::new();
    let response = h
        .send_raw(Method::POST, THINGS, "application/json", b"{not json".to_vec())
        .await;
    assert_eq!(response.status, 400);
    assert!(
        response.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("not valid JSON"))
    );
    let response = h
        .send_raw(Method::POST, THINGS, "application/json", b"[1, 2]".to_vec())
        .await;
    assert_eq!(response.status, 400);
    let huge = vec![b' '; 3 * 1024 * 1024 + 1];
    let response = h.send_raw(Method::POST, THINGS, "application/json", huge).await;
    assert_eq!(response.status, 413);
    assert_eq!(response.json()["reason"], "RequestEntityTooLarge");
}

#[tokio::test]
async fn dry_run_changes_nothing_and_only_all_is_accepted() {
    let h = Harness::new();
    let response = h
        .send_json(
            Method::POST,
            &format!("{THINGS}?dryRun=All"),
            Some("alice"),
            &thing("a", json!({})),
        )
        .await;
    assert_eq!(response.status, StatusCode::CREATED);
    assert_eq!(
        h.send(Method::GET, &format!("{THINGS}/a"), Some("alice"))
            .await
            .status,
        404
    );
    let response = h
        .send_json(
            Method::POST,
            &format!("{THINGS}?dryRun=Some"),
            Some("alice"),
            &thing("a", json!({})),
        )
        .await;
    assert_eq!(
        response.status, 422,
        "kube-apiserver's answer to an unsupported dryRun value"
    );
    let poke = h
        .send_json(
            Method::POST,
            &format!("{THINGS}/a/poke?dryRun=All"),
            Some("alice"),
            &json!({}),
        )
        .await;
    assert_eq!(
        poke.json()["dryRun"],
        true,
        "the subresource sees the dry-run flag"
    );
}

#[tokio::test]
async fn delete_options_from_the_body_are_honoured() {
    let h = Harness::new();
    h.create(THINGS, "a").await;
    let options =
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "not-the-uid"}});
    let response = h
        .send_json(Method::DELETE, &format!("{THINGS}/a"), Some("alice"), &options)
        .await;
    assert_eq!(response.status, 409, "{}", response.text());
    let options = json!({"dryRun": ["All"]});
    let response = h
        .send_json(Method::DELETE, &format!("{THINGS}/a"), Some("alice"), &options)
        .await;
    assert_eq!(response.status, 200);
    assert_eq!(
        h.send(Method::GET, &format!("{THINGS}/a"), Some("alice"))
            .await
            .status,
        200,
        "a dry run keeps it"
    );
}

#[tokio::test]
async fn delete_accepted_by_the_storage_answers_a_success_status() {
    let h = Harness::new();
    let path = "/apis/test.example.com/v1/namespaces/team-a/lazythings";
    h.create(path, "a").await;
    let response = h.send(Method::DELETE, &format!("{path}/a"), Some("alice")).await;
    assert_eq!(response.status, StatusCode::OK);
    let status = response.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Success");
    assert_eq!(status["details"]["name"], "a");
    assert_eq!(status["details"]["kind"], "lazythings");
    assert!(status["details"]["uid"].is_string());
}

#[tokio::test]
async fn list_applies_label_and_field_selectors() {
    let h = Harness::new();
    for (name, app) in [("a", "web"), ("b", "db"), ("c", "web")] {
        let response = h
            .send_json(
                Method::POST,
                THINGS,
                Some("alice"),
                &thing(name, json!({"app": app})),
            )
            .await;
        assert_eq!(response.status, StatusCode::CREATED);
    }
    let other = "/apis/test.example.com/v1/namespaces/team-b/things";
    h.create(other, "d").await;
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
            .collect()
    };
    let list = h.send(Method::GET, THINGS, Some("alice")).await.json();
    assert_eq!(list["kind"], "ThingList");
    assert_eq!(list["apiVersion"], "test.example.com/v1");
    assert!(
        list["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| rv.parse::<u64>().is_ok())
    );
    assert_eq!(names(&list), ["a", "b", "c"]);
    let web = h
        .send(
            Method::GET,
            &format!("{THINGS}?labelSelector=app%3Dweb"),
            Some("alice"),
        )
        .await
        .json();
    assert_eq!(names(&web), ["a", "c"]);
    let not_a = h
        .send(
            Method::GET,
            &format!("{THINGS}?labelSelector=app%20in%20(web)&fieldSelector=metadata.name!%3Da"),
            Some("alice"),
        )
        .await
        .json();
    assert_eq!(names(&not_a), ["c"]);
    let everywhere = h
        .send(
            Method::GET,
            "/apis/test.example.com/v1/things?fieldSelector=metadata.namespace%3Dteam-b",
            Some("alice"),
        )
        .await
        .json();
    assert_eq!(names(&everywhere), ["d"]);
    let bad = h
        .send(
            Method::GET,
            &format!("{THINGS}?fieldSelector=spec.x%3D1"),
            Some("alice"),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(
        bad.json()["message"],
        "\"spec.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
    let bad = h
        .send(
            Method::GET,
            &format!("{THINGS}?labelSelector=app%20in%20web"),
            Some("alice"),
        )
        .await;
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn the_list_resource_version_follows_writes() {
    let h = Harness::new();
    let rv = |list: Value| {
        list["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse::<u64>().ok())
            .expect("numeric rv")
    };
    let before = rv(h.send(Method::GET, THINGS, Some("alice")).await.json());
    h.create(THINGS, "a").await;
    let after = rv(h.send(Method::GET, THINGS, Some("alice")).await.json());
    // The counter is a clock: at least one step per write, and time moves it too.
    assert!(after > before, "{before} -> {after}");
    let now_micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_micros();
    assert!(u128::from(after) <= now_micros + 1_000, "{after} vs {now_micros}");
}

#[tokio::test]
async fn unknown_paths_resources_and_scopes_are_404() {
    let h = Harness::new();
    for path in [
        "/apis/test.example.com/v1/namespaces/team-a/unknown",
        "/apis/other.example.com/v1/namespaces/team-a/things",
        "/apis/test.example.com/v2/namespaces/team-a/things",
        "/apis/test.example.com/v1/namespaces/team-a",
        "/apis/test.example.com/v1/things/a",
        "/apis/test.example.com/v1/namespaces/team-a/things/a/unknown",
        "/apis/test.example.com/v1/namespaces/team-a/things/a%2Fb",
        "/nothing-here",
    ] {
        let response = h.send(Method::GET, path, Some("alice")).await;
        assert_eq!(response.status, 404, "{path}");
        assert_eq!(response.json()["reason"], "NotFound", "{path}");
    }
}

#[tokio::test]
async fn verbs_a_resource_does_not_serve_are_405() {
    let h = Harness::new();
    let readonly = "/apis/test.example.com/v1/namespaces/team-a/readonlythings";
    let response = h
        .send_json(Method::POST, readonly, Some("alice"), &thing("a", json!({})))
        .await;
    assert_eq!(response.status, 405);
    assert_eq!(response.json()["reason"], "MethodNotAllowed");
    let watch = h
        .send(
            Method::GET,
            &format!("{readonly}?watch=true&resourceVersion=5"),
            Some("alice"),
        )
        .await;
    assert_eq!(watch.status, 405);
    assert_eq!(
        h.send(Method::DELETE, THINGS, Some("alice")).await.status,
        405,
        "no deletecollection"
    );
    assert_eq!(
        h.send(Method::GET, &format!("{THINGS}/a/poke"), Some("alice"))
            .await
            .status,
        405,
        "poke is create only"
    );
    assert_eq!(h.send(Method::OPTIONS, THINGS, Some("alice")).await.status, 405);
    assert_eq!(
        h.send_json(
            Method::POST,
            &format!("{THINGS}/a"),
            Some("alice"),
            &thing("a", json!({}))
        )
        .await
        .status,
        405
    );
}

#[tokio::test]
async fn a_slow_storage_call_is_a_504() {
    let h = Harness::new();
    let started = std::time::Instant::now();
    let response = h
        .send(
            Method::GET,
            "/apis/test.example.com/v1/namespaces/team-a/slowthings/a?timeout=200ms",
            Some("alice"),
        )
        .await;
    assert_eq!(response.status, 504);
    assert_eq!(response.json()["reason"], "Timeout");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let response = h
        .send(
            Method::GET,
            "/apis/test.example.com/v1/namespaces/team-a/slowthings",
            Some("alice"),
        )
        .await;
    assert_eq!(
        response.status, 504,
        "the server's default timeout (2 s in the harness) applies too"
    );
    let response = h
        .send(
            Method::GET,
            "/apis/test.example.com/v1/namespaces/team-a/slowthings?timeout=soon",
            Some("alice"),
        )
        .await;
    assert_eq!(response.status, 400);
}

#[tokio::test]
async fn audit_ids_are_echoed_or_generated() {
    let h = Harness::new();
    let response = h
        .send_with(Method::GET, "/healthz", &[("Audit-Id", "0f9b2c1e-aaaa")])
        .await;
    assert_eq!(response.headers["Audit-Id"], "0f9b2c1e-aaaa");
    let response = h.send(Method::GET, THINGS, None).await;
    let generated = response.headers["Audit-Id"].to_str().expect("ascii");
    assert!(uuid::Uuid::parse_str(generated).is_ok(), "{generated}");
}

#[tokio::test]
async fn watch_streams_writes_with_bookmarks_and_ends_at_the_timeout() {
    let h = Harness::new();
    let list = h.send(Method::GET, THINGS, Some("alice")).await.json();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    let started = std::time::Instant::now();
    let watch = h
        .open(
            Method::GET,
            &format!("{THINGS}?watch=true&resourceVersion={rv}&timeoutSeconds=2&allowWatchBookmarks=true"),
            Some("alice"),
        )
        .await;
    assert_eq!(watch.status(), StatusCode::OK);
    assert_eq!(watch.headers()["content-type"], "application/json;stream=watch");
    let created = h.create(THINGS, "a").await;
    h.create("/apis/test.example.com/v1/namespaces/team-b/things", "elsewhere")
        .await;
    let mut changed = created.clone();
    changed["spec"]["n"] = 7.into();
    assert_eq!(
        h.send_json(Method::PUT, &format!("{THINGS}/a"), Some("alice"), &changed)
            .await
            .status,
        200
    );
    assert_eq!(
        h.send(Method::DELETE, &format!("{THINGS}/a"), Some("alice"))
            .await
            .status,
        200
    );

    let events = support::read_watch(watch, Duration::from_secs(5))
        .await
        .expect("the watch ends by itself");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1900) && elapsed < Duration::from_secs(4),
        "{elapsed:?}"
    );
    let changes: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["type"] != "BOOKMARK")
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_owned(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    let expected =
        [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")].map(|(t, n)| (t.to_owned(), n.to_owned()));
    assert_eq!(changes, expected);
    let bookmarks: Vec<&Value> = events.iter().filter(|e| e["type"] == "BOOKMARK").collect();
    assert!(
        bookmarks.len() >= 3,
        "a bookmark every 200 ms for 2 s: {bookmarks:?}"
    );
    let bookmark_rv = bookmarks[bookmarks.len() - 1]["object"]["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse::<u64>().ok());
    assert!(
        bookmark_rv.is_some_and(|b| b > rv.parse::<u64>().unwrap_or(u64::MAX)),
        "{bookmarks:?}"
    );
    assert_eq!(bookmarks[0]["object"]["kind"], "Thing");
}

#[tokio::test]
async fn watch_filters_by_name_and_labels() {
    let h = Harness::new();
    let watch = h
        .open(Method::GET, &format!("{THINGS}?watch=1&resourceVersion=1&timeoutSeconds=1&labelSelector=app%3Dweb&fieldSelector=metadata.name%3Db"), Some("alice"))
        .await;
    assert_eq!(watch.status(), StatusCode::OK);
    for (name, app) in [("a", "web"), ("b", "db"), ("b2", "web")] {
        h.send_json(
            Method::POST,
            THINGS,
            Some("alice"),
            &thing(name, json!({"app": app})),
        )
        .await;
    }
    let mut b = h
        .send(Method::GET, &format!("{THINGS}/b"), Some("alice"))
        .await
        .json();
    b["metadata"]["labels"]["app"] = "web".into();
    assert_eq!(
        h.send_json(Method::PUT, &format!("{THINGS}/b"), Some("alice"), &b)
            .await
            .status,
        200
    );
    let events = support::read_watch(watch, Duration::from_secs(4))
        .await
        .expect("ends");
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default(),
                e["object"]["metadata"]["name"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(seen, [("MODIFIED", "b")]);
}

#[tokio::test]
async fn a_lagging_watcher_gets_410_expired_and_its_stream_ends() {
    let h = Harness::new();
    let watch = h
        .open(
            Method::GET,
            &format!("{THINGS}?watch=true&resourceVersion=1&timeoutSeconds=30"),
            Some("alice"),
        )
        .await;
    for i in 0..150 {
        h.create(THINGS, &format!("t{i}")).await;
    }
    let events = support::read_watch(watch, Duration::from_secs(5))
        .await
        .expect("the stream ends after the error, long before 30 s");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
}

#[tokio::test]
async fn watch_options_are_checked_before_streaming() {
    let h = Harness::new();
    for (query, code) in [
        ("watch=true", 400),
        ("watch=true&resourceVersion=0", 400),
        ("watch=true&resourceVersion=5&sendInitialEvents=true", 422),
        (
            "watch=true&resourceVersion=5&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            400,
        ),
        ("watch=true&resourceVersion=5&timeoutSeconds=soon", 400),
        ("watch=true&resourceVersion=5&labelSelector=a%20in%20b", 400),
        ("sendInitialEvents=true", 422),
    ] {
        let response = h
            .send(Method::GET, &format!("{THINGS}?{query}"), Some("alice"))
            .await;
        assert_eq!(response.status.as_u16(), code, "{query}: {}", response.text());
    }
    let response = h
        .send(Method::GET, &format!("{THINGS}?watch=true"), Some("alice"))
        .await;
    assert!(
        response.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("no watch cache"))
    );
}

#[tokio::test]
async fn watch_events_reach_a_socket_client_while_the_watch_runs() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let h = Harness::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = h.router();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "GET {THINGS}?watch=true&resourceVersion=1&timeoutSeconds=60 HTTP/1.1\r\nHost: test\r\nx-test-user: alice\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let head = async {
        while !String::from_utf8_lossy(&received).contains("\r\n\r\n") {
            let n = socket.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the connection closed before the response head");
            received.extend_from_slice(&buffer[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(5), head)
        .await
        .expect("the response head arrives at once");
    assert!(
        String::from_utf8_lossy(&received).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&received)
    );
    h.create(THINGS, "a").await;
    let event = async {
        while !String::from_utf8_lossy(&received).contains(r#""type":"ADDED""#) {
            let n = socket.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the connection closed before the event");
            received.extend_from_slice(&buffer[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(5), event)
        .await
        .expect("the event is flushed long before the 60 s watch ends");
}

#[tokio::test]
async fn openapi_v3_documents_named_by_their_hash_are_served_as_immutable() {
    let h = Harness::new();
    let index = h.send(Method::GET, "/openapi/v3", Some("alice")).await;
    assert_eq!(index.status, StatusCode::OK, "{}", index.text());
    let url = index.json()["paths"]["apis/test.example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap_or_else(|| panic!("no serverRelativeURL in {}", index.text()))
        .to_owned();
    assert!(url.contains("?hash="), "{url}");
    let document = h.send(Method::GET, &url, Some("alice")).await;
    assert_eq!(document.status, StatusCode::OK, "{}", document.text());
    let cache = document
        .headers
        .get("cache-control")
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    assert!(
        cache.as_deref().is_some_and(|c| c.contains("immutable")),
        "the hash in the URL reached the OpenAPI handler: {cache:?}"
    );
    let stale = h
        .send(
            Method::GET,
            "/openapi/v3/apis/test.example.com/v1?hash=0000",
            Some("alice"),
        )
        .await;
    assert_eq!(stale.status, StatusCode::OK);
    let cache = stale
        .headers
        .get("cache-control")
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    assert!(
        !cache.as_deref().unwrap_or_default().contains("immutable"),
        "{cache:?}"
    );
}

/// `(type, name)` of each event that is not a bookmark.
fn changes_of(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"] != "BOOKMARK")
        .map(|e| {
            let name = e["object"]["metadata"]["name"].as_str().unwrap_or_default();
            (e["type"].as_str().unwrap_or_default().to_owned(), name.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn a_watch_resumes_after_a_lists_or_an_events_resource_version() {
    let h = Harness::new();
    let list = h.send(Method::GET, THINGS, Some("alice")).await.json();
    let listed = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    h.create(THINGS, "a").await;
    h.create(THINGS, "b").await;
    assert_eq!(
        h.send(Method::DELETE, &format!("{THINGS}/a"), Some("alice"))
            .await
            .status,
        200
    );

    // Opened after the writes: they are replayed from the list's resourceVersion.
    let watch = h
        .open(
            Method::GET,
            &format!("{THINGS}?watch=true&resourceVersion={listed}&timeoutSeconds=1"),
            Some("alice"),
        )
        .await;
    let events = support::read_watch(watch, Duration::from_secs(5))
        .await
        .expect("the watch ends by itself");
    let expected =
        [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")].map(|(t, n)| (t.to_owned(), n.to_owned()));
    assert_eq!(changes_of(&events), expected);

    // From the resourceVersion of the second event's object: only what followed it.
    let after_b = events[1]["object"]["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv");
    let watch = h
        .open(
            Method::GET,
            &format!("{THINGS}?watch=true&resourceVersion={after_b}&timeoutSeconds=1"),
            Some("alice"),
        )
        .await;
    let events = support::read_watch(watch, Duration::from_secs(5))
        .await
        .expect("the watch ends by itself");
    assert_eq!(changes_of(&events), [("DELETED".to_owned(), "a".to_owned())]);
    let deleted_rv = events[0]["object"]["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv");
    assert!(
        deleted_rv.parse::<u64>().expect("a counter") > listed.parse::<u64>().expect("a counter"),
        "a deletion carries the counter of its event: {deleted_rv}"
    );
}

#[tokio::test]
async fn answered_requests_are_counted_by_verb_resource_and_code() {
    let h = Harness::new();
    h.create(THINGS, "a").await;
    assert_eq!(
        h.send(Method::GET, THINGS, Some("alice")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        h.send(Method::GET, &format!("{THINGS}/missing"), Some("alice"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        h.send(Method::GET, THINGS, None).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(h.send(Method::GET, "/healthz", None).await.status, StatusCode::OK);
    assert_eq!(h.metrics.count("create", "things", 201), 1);
    assert_eq!(h.metrics.count("list", "things", 200), 1);
    assert_eq!(h.metrics.count("get", "things", 404), 1);
    assert_eq!(
        h.metrics.count("list", "things", 401),
        1,
        "refused requests are counted too"
    );
    assert_eq!(
        h.metrics.count("get", "", 200),
        0,
        "health checks are not counted"
    );
}

#[tokio::test]
async fn a_watch_ends_cleanly_when_the_server_begins_to_shut_down() {
    use coder_k8s_aggregated_apiserver::generic::tls::ServerStopping;
    let h = Harness::new();
    let (stopping_tx, stopping_rx) = tokio::sync::watch::channel(false);
    let mut request = support::build(
        Method::GET,
        &format!("{THINGS}?watch=true&resourceVersion=1&timeoutSeconds=60"),
        Some("alice"),
        &[],
        axum::body::Body::empty(),
    );
    request.extensions_mut().insert(ServerStopping(stopping_rx));
    let watch = h.request(request).await;
    assert_eq!(watch.status(), StatusCode::OK);
    h.create(THINGS, "before-shutdown").await;
    stopping_tx.send(true).unwrap();
    let events = support::read_watch(watch, Duration::from_secs(5))
        .await
        .expect("the stream ends at shutdown, long before its 60 s");
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        ["before-shutdown"],
        "the events before shutdown, then a clean end: {events:?}"
    );
}
