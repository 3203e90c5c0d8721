//! Test support: a Coder API test server (with its own PostgreSQL database) holding one imported template
//! (`docker`, version `v1.0.0` with the message `first`) and one running workspace (`dev`), and a client to change
//! it directly.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use bytes::Bytes;
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition, WorkspaceBuildStatus};
use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::template_versions::CreateTemplateVersionRequest;
use coder_k8s_coder_client::types::templates::{CreateTemplateRequest, Template};
use coder_k8s_coder_client::types::workspaces::{CreateWorkspaceRequest, Workspace};
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Config, TestServer};
use coder_k8s_control_plane_access::ClientSettings;

/// The user the operator token belongs to.
pub const OPERATOR: &str = "coder-k8s-operator";

pub struct Coder {
    pub server: TestServer,
    pub token: String,
    pub client: CoderClient,
    pub organization: String,
    pub template: Template,
    pub workspace: Workspace,
}

pub async fn eventually<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..300 {
        if let Some(value) = probe().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// A one-file ustar archive (the test support's, as `Bytes`).
fn tar_with(name: &str, content: &[u8]) -> Bytes {
    Bytes::from(coder_k8s_testenv::one_file_tar(name, content))
}

async fn fresh_db(tag: &str) -> String {
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    pg.unique_coder_database(&format!("aggw_{tag}")).await.unwrap()
}

pub async fn coder(tag: &str) -> Coder {
    coder_k8s_coder_client::install_ring_provider();
    let db_url = fresh_db(tag).await;
    let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let mut config = Config::new(&db_url);
    config.build_duration = Duration::from_millis(200);
    let server = TestServer::start(config).await.unwrap();
    let client = CoderClient::new(server.url(), SessionToken::new(token.clone())).unwrap();
    let organization = client.default_organization().await.unwrap().name;
    let file = client
        .upload_file(ArchiveKind::Tar, tar_with("main.tf", b"terraform {}\n"))
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.name = "v1.0.0".to_owned();
    request.message = "first".to_owned();
    let version = client
        .create_template_version(&organization, &request)
        .await
        .unwrap();
    eventually("the template import", async || {
        let v = client.template_version(version.id).await.unwrap();
        (v.job.status == JobStatus::Succeeded).then_some(())
    })
    .await;
    let template = client
        .create_template(
            &organization,
            &CreateTemplateRequest {
                name: "docker".to_owned(),
                display_name: "Docker".to_owned(),
                template_version_id: version.id,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap();
    let template = client.template(template.id).await.unwrap();
    let mut coder = Coder {
        server,
        token,
        client,
        organization,
        workspace: Workspace::default(),
        template,
    };
    coder.workspace = coder.create_workspace("dev").await;
    coder
}

impl Coder {
    /// Creates a workspace from the template, as the operator, and waits for its first build.
    pub async fn create_workspace(&self, name: &str) -> Workspace {
        let created = self
            .client
            .create_workspace(
                "me",
                &CreateWorkspaceRequest {
                    template_id: Some(self.template.id),
                    name: name.to_owned(),
                    ..CreateWorkspaceRequest::default()
                },
            )
            .await
            .unwrap();
        eventually("the first build", async || {
            let w = self.client.workspace(created.id).await.unwrap();
            (w.latest_build.status == WorkspaceBuildStatus::Running).then_some(w)
        })
        .await
    }

    /// Starts a delete build of `workspace`.
    pub async fn delete_workspace(&self, workspace: &Workspace) {
        self.client
            .create_workspace_build(
                workspace.id,
                &CreateWorkspaceBuildRequest {
                    transition: Transition::Delete,
                    ..CreateWorkspaceBuildRequest::default()
                },
            )
            .await
            .unwrap();
    }

    /// Changes the template's display name, as Coder's UI does.
    pub async fn rename_template(&self, display_name: &str) {
        let url = self
            .server
            .url()
            .join(&format!("api/v2/templates/{}", self.template.id))
            .unwrap();
        let response = reqwest::Client::new()
            .patch(url)
            .header("Coder-Session-Token", &self.token)
            .json(&serde_json::json!({"display_name": display_name}))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{}", response.status());
    }

    /// `<organization>.<operator>.<workspace>`.
    pub fn workspace_name(&self, workspace: &str) -> String {
        format!("{}.{OPERATOR}.{workspace}", self.organization)
    }
}

/// Client settings that reach in-cluster URLs on localhost.
pub fn settings() -> ClientSettings {
    ClientSettings {
        timeout: Duration::from_secs(10),
        service_address_override: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
    }
}
