//! The `coder-k8s-coder-testserver` binary: prints its URL, serves, stops on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, BufReader};

#[tokio::test]
async fn binary_serves_until_sigterm() {
    let db_url = common::fresh_db("bin").await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_coder-k8s-coder-testserver"))
        .args([
            "--database-url",
            &db_url,
            "--listen",
            "127.0.0.1:0",
            "--entitle",
            "workspace_proxy",
            "aibridge",
        ])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let entitlements: Value = http
        .get(format!("{url}api/v2/entitlements"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(entitlements["features"]["workspace_proxy"]["enabled"], true);
    assert_eq!(entitlements["features"]["aibridge"]["enabled"], true);
    assert_eq!(entitlements["features"]["audit_log"]["enabled"], false);

    let pid = child.id().unwrap().to_string();
    let status = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "{exit:?}");
}
