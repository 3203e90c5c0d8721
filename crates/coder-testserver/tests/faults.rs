//! Fault injection and the request log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use coder_k8s_coder_testserver::{Fault, FaultRule};
use common::{BUILD_VERSION, Env, content_type, version_header};
use serde_json::{Value, json};

fn rule(method: Option<&str>, prefix: &str, fault: Fault, times: Option<u32>) -> FaultRule {
    FaultRule {
        method: method.map(str::to_owned),
        path_prefix: prefix.to_owned(),
        fault,
        times,
    }
}

#[tokio::test]
async fn every_fault_kind() {
    let env = Env::start("faults", |_| {}).await;
    let me = "/api/v2/users/me";

    // Latency, then a normal answer.
    env.server.add_fault(rule(
        Some("GET"),
        me,
        Fault::Latency(Duration::from_millis(300)),
        Some(1),
    ));
    let start = Instant::now();
    let response = env.get(me).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(start.elapsed() >= Duration::from_millis(300));

    // Server error with Coder's JSON body and the version header.
    env.server
        .add_fault(rule(None, me, Fault::ServerError(503), Some(1)));
    let response = env.get(me).send().await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(version_header(&response).as_deref(), Some(BUILD_VERSION));
    assert_eq!(content_type(&response), "application/json; charset=utf-8");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["message"], "An internal server error occurred.");

    // Rate limited.
    env.server.add_fault(rule(
        None,
        me,
        Fault::RateLimited { retry_after_secs: 7 },
        Some(1),
    ));
    let response = env.get(me).send().await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["Retry-After"], "7");
    assert_eq!(version_header(&response).as_deref(), Some(BUILD_VERSION));
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"message": "You've been rate limited for sending more than 512 requests in 1m0s."})
    );

    // A reverse proxy's 404: HTML, no version header.
    env.server
        .add_fault(rule(None, me, Fault::ProxyNotFound, Some(1)));
    let response = env.get(me).send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert_eq!(version_header(&response), None);
    assert!(content_type(&response).starts_with("text/html"));
    assert!(response.text().await.unwrap().contains("404 Not Found"));

    // Coder's own unknown-route 404.
    env.server
        .add_fault(rule(None, me, Fault::RouteNotFound, Some(1)));
    let response = env.get(me).send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert_eq!(version_header(&response).as_deref(), Some(BUILD_VERSION));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body, json!({"message": "Route not found."}));

    // Redirect: target joined with path and query.
    let target = url::Url::parse("http://other.example:8080/prefix/").unwrap();
    env.server
        .add_fault(rule(None, me, Fault::RedirectTo(target), Some(1)));
    let response = env
        .http
        .get(env.url("/api/v2/users/me?x=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 307);
    assert_eq!(
        response.headers()["Location"],
        "http://other.example:8080/prefix/api/v2/users/me?x=1"
    );

    // Dropped connection: no response at all.
    env.server
        .add_fault(rule(None, me, Fault::DropConnection, Some(1)));
    let err = env.get(me).send().await.unwrap_err();
    assert!(!err.is_status(), "{err:?}");

    // All rules were single-shot: back to normal.
    assert_eq!(env.get(me).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn matching_counts_and_clearing() {
    let env = Env::start("faultmatch", |_| {}).await;
    env.server
        .add_fault(rule(Some("post"), "/api/v2/users", Fault::ServerError(500), None));
    env.server
        .add_fault(rule(None, "/api/v2/buildinfo", Fault::ServerError(502), Some(2)));
    // Method mismatch: GET passes.
    assert_eq!(env.get("/api/v2/users/me").send().await.unwrap().status(), 200);
    let post = env
        .post("/api/v2/users/me/keys/tokens", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 500);
    for expected in [502, 502, 200] {
        let response = env.http.get(env.url("/api/v2/buildinfo")).send().await.unwrap();
        assert_eq!(response.status(), expected);
    }
    env.server.clear_faults();
    // Without the fault the real handler answers: system users (the operator) cannot create tokens (403);
    // a normal user can.
    let post = env
        .post("/api/v2/users/me/keys/tokens", json!({"token_name": "t1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 403);
    let alice = env.server.mint_token("alice", &[]).await.unwrap();
    let post = env
        .http
        .post(env.url("/api/v2/users/me/keys/tokens"))
        .header("Coder-Session-Token", &alice)
        .json(&json!({"token_name": "t1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 201);
    let key: Value = post.json().await.unwrap();
    let me = env
        .http
        .get(env.url("/api/v2/users/me"))
        .header("Coder-Session-Token", key["key"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200);
}

#[tokio::test]
async fn request_log() {
    let env = Env::start("reqlog", |_| {}).await;
    env.server.clear_requests();
    env.get("/api/v2/users/me?a=b")
        .header("X-Coder-Bypass-Ratelimit", "true")
        .send()
        .await
        .unwrap();
    env.http.get(env.url("/api/v2/buildinfo")).send().await.unwrap();
    env.get("/api/v2/nope").send().await.unwrap();
    env.server
        .add_fault(rule(None, "/api/v2/users", Fault::DropConnection, Some(1)));
    let _ = env.get("/api/v2/users/me").send().await;
    let requests = env.server.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    assert_eq!(requests[0].method, "GET");
    assert_eq!(requests[0].path, "/api/v2/users/me");
    assert_eq!(requests[0].query.as_deref(), Some("a=b"));
    assert_eq!(requests[0].session_token.as_deref(), Some(env.token.as_str()));
    assert!(requests[0].bypass_ratelimit);
    assert_eq!(requests[0].status, 200);
    assert_eq!(requests[1].session_token, None);
    assert!(!requests[1].bypass_ratelimit);
    assert_eq!(requests[2].status, 404);
    assert_eq!(requests[3].status, 0);
    env.server.clear_requests();
    assert!(env.server.requests().is_empty());
}
