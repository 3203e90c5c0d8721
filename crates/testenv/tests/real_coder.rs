//! End-to-end checks of the shared real Coder server: version, owner token, echo template imports, and the
//! routes the open-source build lacks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use coder_k8s_testenv::RealCoder;
use coder_k8s_testenv::coder::EchoTemplate;
use serde_json::{Value, json};

#[tokio::test]
async fn buildinfo_reports_the_pinned_version() {
    let coder = RealCoder::shared().await.unwrap();
    let response = coder
        .request_as(None, "GET", "/api/v2/buildinfo", None)
        .await
        .unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    let version = response.json().unwrap()["version"].as_str().unwrap().to_owned();
    assert!(version.starts_with("v2.30.0"), "version {version:?}");
}

#[tokio::test]
async fn owner_token_authenticates() {
    let coder = RealCoder::shared().await.unwrap();
    let me = coder.get("/api/v2/users/me").await.unwrap();
    assert_eq!(me.status, 200, "{}", me.text());
    let me = me.json().unwrap();
    assert_eq!(me["username"], "owner");
    assert_eq!(me["email"], coder_k8s_testenv::coder::OWNER_EMAIL);
    let roles: Vec<&str> = me["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|role| role["name"].as_str().unwrap())
        .collect();
    assert!(roles.contains(&"owner"), "roles {roles:?}");
    assert_eq!(me["organization_ids"], json!([coder.organization_id()]));

    // Without the token (or with a wrong one) the same route refuses.
    let anonymous = coder
        .request_as(None, "GET", "/api/v2/users/me", None)
        .await
        .unwrap();
    assert_eq!(anonymous.status, 401, "{}", anonymous.text());
    let wrong = coder
        .request_as(
            Some("abcdefghij-0123456789abcdefghijkl"),
            "GET",
            "/api/v2/users/me",
            None,
        )
        .await
        .unwrap();
    assert_eq!(wrong.status, 401, "{}", wrong.text());
}

/// Uploads an echo template and creates a template version from it; returns the version once its import job
/// has finished (any final status).
async fn import(coder: &RealCoder, kind: EchoTemplate) -> Value {
    let tar = coder.echo_template(kind).unwrap();
    assert!(
        tar.len() >= 1024 && tar.len().is_multiple_of(512),
        "not a tar: {} bytes",
        tar.len()
    );
    let file_id = coder.upload_file(&tar).await.unwrap();
    let created = coder
        .send_json(
            "POST",
            &format!(
                "/api/v2/organizations/{}/templateversions",
                coder.organization_id()
            ),
            &json!({ "storage_method": "file", "file_id": file_id, "provisioner": "echo" }),
        )
        .await
        .unwrap();
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json().unwrap()["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let version = coder
            .get(&format!("/api/v2/templateversions/{id}"))
            .await
            .unwrap();
        assert_eq!(version.status, 200, "{}", version.text());
        let version = version.json().unwrap();
        let status = version["job"]["status"].as_str().unwrap().to_owned();
        if !["pending", "running"].contains(&status.as_str()) {
            return version;
        }
        assert!(
            Instant::now() < deadline,
            "{kind:?} import still {status} after 30 s; server log:\n{}",
            coder.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn echo_templates_import() {
    let coder = RealCoder::shared().await.unwrap();

    let success = import(coder, EchoTemplate::Success).await;
    assert_eq!(success["job"]["status"], "succeeded", "{success:#}");
    let id = success["id"].as_str().unwrap();
    let logs = coder
        .get(&format!("/api/v2/templateversions/{id}/logs"))
        .await
        .unwrap();
    assert_eq!(logs.status, 200, "{}", logs.text());
    let outputs: Vec<String> = logs
        .json()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|log| log["output"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        outputs.iter().any(|line| line == "echotar: plan"),
        "logs {outputs:?}"
    );

    // Apply is not part of an import, so this one imports too.
    let failing = import(coder, EchoTemplate::FailingApply).await;
    assert_eq!(failing["job"]["status"], "succeeded", "{failing:#}");

    let with_agent = import(coder, EchoTemplate::WithAgent).await;
    assert_eq!(with_agent["job"]["status"], "succeeded", "{with_agent:#}");
    let id = with_agent["id"].as_str().unwrap();
    let resources = coder
        .get(&format!("/api/v2/templateversions/{id}/resources"))
        .await
        .unwrap();
    assert_eq!(resources.status, 200, "{}", resources.text());
    let resources = resources.json().unwrap();
    // The import plans both transitions; each lists the resource with its agent.
    let start: Vec<(&str, Vec<&str>)> = resources
        .as_array()
        .unwrap()
        .iter()
        .filter(|resource| resource["workspace_transition"] == "start")
        .map(|resource| {
            let agents = resource["agents"].as_array().unwrap();
            let names = agents
                .iter()
                .map(|agent| agent["name"].as_str().unwrap())
                .collect();
            (resource["name"].as_str().unwrap(), names)
        })
        .collect();
    assert_eq!(start, [("dev", vec!["main"])], "{resources:#}");
}

#[tokio::test]
async fn open_source_build_has_no_licence_routes() {
    let coder = RealCoder::shared().await.unwrap();
    let response = coder.get("/api/v2/entitlements").await.unwrap();
    assert_eq!(response.status, 404, "{}", response.text());
    assert_eq!(response.json().unwrap(), json!({ "message": "Route not found." }));
}
