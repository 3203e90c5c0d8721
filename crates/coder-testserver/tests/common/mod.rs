//! Shared test helpers: a fresh Coder database, a started server, an owner token, an HTTP client.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use coder_k8s_coder_testserver::{Config, TestServer};
use coder_k8s_testenv::postgres;
use serde_json::Value;

pub const BUILD_VERSION: &str = "v2.30.0+testsrv";

/// A fresh database with Coder's schema.
pub async fn fresh_db(tag: &str) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let pg = postgres::shared().await.unwrap();
    let name = format!(
        "ts_{tag}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    pg.create_coder_database(&name).await.unwrap()
}

pub struct Env {
    pub server: TestServer,
    pub db_url: String,
    /// The operator token minted by coder-k8s's own bootstrap (owner).
    pub token: String,
    pub http: reqwest::Client,
}

impl Env {
    pub async fn start(tag: &str, configure: impl FnOnce(&mut Config)) -> Env {
        let db_url = fresh_db(tag).await;
        let mut config = Config::new(&db_url);
        configure(&mut config);
        let server = TestServer::start(config).await.unwrap();
        let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "coder", "my-coder", None)
            .await
            .unwrap()
            .expose();
        // reqwest is built with `rustls-no-provider`; plain HTTP still needs a provider installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Env {
            server,
            db_url,
            token,
            http,
        }
    }

    pub fn url(&self, path: &str) -> String {
        self.server
            .url()
            .join(path.trim_start_matches('/'))
            .unwrap()
            .to_string()
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .get(self.url(path))
            .header("Coder-Session-Token", &self.token)
    }

    pub fn post(&self, path: &str, body: Value) -> reqwest::RequestBuilder {
        self.http
            .post(self.url(path))
            .header("Coder-Session-Token", &self.token)
            .json(&body)
    }

    pub fn patch(&self, path: &str, body: Value) -> reqwest::RequestBuilder {
        self.http
            .patch(self.url(path))
            .header("Coder-Session-Token", &self.token)
            .json(&body)
    }

    pub fn delete(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .delete(self.url(path))
            .header("Coder-Session-Token", &self.token)
    }

    pub async fn db(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.db_url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
    }

    /// Uploads a tar archive, creates a template version in the default org and returns it.
    pub async fn import_version(&self, content: &[u8], extra: Value) -> Value {
        let file = self
            .http
            .post(self.url("/api/v2/files"))
            .header("Coder-Session-Token", &self.token)
            .header("Content-Type", "application/x-tar")
            .body(content.to_vec())
            .send()
            .await
            .unwrap();
        assert!(file.status() == 201 || file.status() == 200, "{}", file.status());
        let file_id = file.json::<Value>().await.unwrap()["hash"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut body = serde_json::json!({
            "storage_method": "file", "file_id": file_id, "provisioner": "terraform", "tags": {}
        });
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            body[k] = v;
        }
        let response = self
            .post("/api/v2/organizations/default/templateversions", body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        response.json().await.unwrap()
    }

    /// Polls a template version until its job completes; returns the version.
    pub async fn wait_version(&self, id: &str) -> Value {
        for _ in 0..300 {
            let version: Value = self
                .get(&format!("/api/v2/templateversions/{id}"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let status = version["job"]["status"].as_str().unwrap().to_owned();
            if status != "pending" && status != "running" {
                return version;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("template version {id} did not complete");
    }

    pub async fn wait_build(&self, id: &str) -> Value {
        for _ in 0..300 {
            let build: Value = self
                .get(&format!("/api/v2/workspacebuilds/{id}"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let status = build["job"]["status"].as_str().unwrap().to_owned();
            if status != "pending" && status != "running" {
                return build;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("build {id} did not complete");
    }
}

pub fn version_header(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get("X-Coder-Build-Version")
        .map(|v| v.to_str().unwrap().to_owned())
}

pub fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("Content-Type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}
