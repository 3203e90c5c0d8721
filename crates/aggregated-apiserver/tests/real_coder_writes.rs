//! The aggregated API's writes to Coder change only what the request means, on a real open-source Coder (v2.30.0,
//! echo provisioner): a `stop` and a `spec.running` update queue builds that keep the workspace's template version
//! and schedule, and a `promote` changes the template's active version and nothing else of the template.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use bytes::Bytes;
use coder_k8s_aggregated_apiserver::coder::{Provider, StaticBackend, StaticProvider, registry};
use coder_k8s_aggregated_apiserver::generic::server::ServerSettings;
use coder_k8s_aggregated_apiserver::generic::{
    ApiError, ApiServer, Attributes, Authenticator, Authorizer, Decision, PeerCertificates, UserInfo,
};
use coder_k8s_coder_client::types::builds::Transition;
use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::template_versions::CreateTemplateVersionRequest;
use coder_k8s_coder_client::types::workspaces::{CreateWorkspaceRequest, Workspace};
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_control_plane_access::ClientSettings;
use coder_k8s_testenv::coder::{EchoTemplate, OWNER_USERNAME, RealCoder};
use serde_json::{Value, json};
use tower::ServiceExt;
use uuid::Uuid;

const NAMESPACE: &str = "coder-ns";
const API: &str = "/apis/aggregation.coder.com/v1alpha1/namespaces/coder-ns";

struct Anyone;

#[async_trait]
impl Authenticator for Anyone {
    async fn authenticate(
        &self,
        _peer: Option<&PeerCertificates>,
        _headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, ApiError> {
        Ok(Some(UserInfo {
            name: "alice".into(),
            ..Default::default()
        }))
    }
}

struct AllowAll;

#[async_trait]
impl Authorizer for AllowAll {
    async fn authorize(&self, _attributes: &Attributes) -> Result<Decision, ApiError> {
        Ok(Decision::Allow)
    }
}

/// The real Coder, a client of its owner, the default organization's name and the aggregated API's router over it
/// (every resource and subresource, as served).
struct Env {
    real: &'static RealCoder,
    client: CoderClient,
    organization: String,
    router: axum::Router,
}

async fn env() -> Env {
    coder_k8s_coder_client::install_ring_provider();
    let real = RealCoder::shared().await.unwrap();
    let url: url::Url = real.url().parse().unwrap();
    let client = CoderClient::new(url.clone(), SessionToken::new(real.owner_token())).unwrap();
    let organization = client.default_organization().await.unwrap().name;
    let backend = StaticBackend {
        url,
        token: real.owner_token().to_owned(),
        namespace: NAMESPACE.to_owned(),
    };
    let settings = ClientSettings {
        timeout: Duration::from_secs(20),
        service_address_override: None,
    };
    let provider: Arc<dyn Provider> = Arc::new(StaticProvider::new(&backend, &settings).unwrap());
    let server = ApiServer {
        registry: Arc::new(registry(provider)),
        authenticator: Arc::new(Anyone),
        authorizer: Arc::new(AllowAll),
        ready: Arc::new(true.into()),
        settings: ServerSettings {
            request_timeout: Duration::from_secs(40),
            ..ServerSettings::default()
        },
    };
    Env {
        real,
        client,
        organization,
        router: server.router(),
    }
}

async fn eventually<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..600 {
        if let Some(value) = probe().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// A short unique suffix for names in the shared real Coder.
fn suffix() -> String {
    Uuid::new_v4().simple().to_string()[..10].to_owned()
}

impl Env {
    /// An echo version, of `template` when given, imported successfully.
    async fn echo_version(&self, template: Option<Uuid>) -> Uuid {
        let tar = Bytes::from(self.real.echo_template(EchoTemplate::Success).unwrap());
        let file = self.client.upload_file(ArchiveKind::Tar, tar).await.unwrap();
        let mut request = CreateTemplateVersionRequest::terraform(file.id);
        request.provisioner = "echo".to_owned();
        request.template_id = template;
        let version = self
            .client
            .create_template_version(&self.organization, &request)
            .await
            .unwrap();
        let imported = eventually("the echo import", async || {
            let v = self.client.template_version(version.id).await.unwrap();
            v.job.status.is_terminal().then_some(v)
        })
        .await;
        assert_eq!(imported.job.status, JobStatus::Succeeded);
        version.id
    }

    /// A template from `version`, created with Coder's API as an admin would, with every `settings` field given.
    async fn template(&self, name: &str, version: Uuid, settings: Value) -> Uuid {
        let mut body = json!({"name": name, "template_version_id": version});
        for (key, value) in settings.as_object().unwrap() {
            body[key] = value.clone();
        }
        let path = format!("/api/v2/organizations/{}/templates", self.organization);
        let created = self.real.send_json("POST", &path, &body).await.unwrap();
        assert_eq!(created.status, 201, "{}", created.text());
        created.json().unwrap()["id"].as_str().unwrap().parse().unwrap()
    }

    /// The template as Coder's API returns it.
    async fn template_json(&self, id: Uuid) -> Value {
        let answer = self.real.get(&format!("/api/v2/templates/{id}")).await.unwrap();
        assert_eq!(answer.status, 200, "{}", answer.text());
        answer.json().unwrap()
    }

    /// The workspace once its latest build has ended.
    async fn settled(&self, id: Uuid) -> Workspace {
        eventually("the latest build to end", async || {
            let w = self.client.workspace(id).await.unwrap();
            w.latest_build.job.status.is_terminal().then_some(w)
        })
        .await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: String,
    ) -> (StatusCode, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }
}

#[tokio::test]
async fn stop_and_start_on_real_coder_keep_the_workspaces_version_and_schedule() {
    let env = env().await;
    let v1 = env.echo_version(None).await;
    let template = env.template(&format!("pinned-{}", suffix()), v1, json!({})).await;
    let leaf = format!("ws-{}", suffix());
    let schedule = "CRON_TZ=UTC 30 9 * * 1-5";
    let created = env
        .client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template),
                name: leaf.clone(),
                autostart_schedule: Some(schedule.to_owned()),
                ttl_ms: Some(3_600_000),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap();
    let before = env.settled(created.id).await;
    assert_eq!(before.latest_build.template_version_id, v1);
    // The template moves on; the workspace (automatic updates off, no active version required) stays on v1.
    let v2 = env.echo_version(Some(template)).await;
    env.client.promote_template_version(template, v2).await.unwrap();
    let name = format!("{}.{OWNER_USERNAME}.{leaf}", env.organization);
    let kept = |w: &Workspace| {
        (
            w.latest_build.template_version_id,
            w.autostart_schedule.clone(),
            w.ttl_ms,
            w.automatic_updates.clone(),
        )
    };

    let (status, stopped) = env
        .send(
            Method::POST,
            &format!("{API}/coderworkspaces/{name}/stop"),
            "application/json",
            String::new(),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{stopped}");
    assert_eq!(stopped["status"]["outcome"], "Queued");
    let after_stop = env.settled(created.id).await;
    assert_eq!(after_stop.latest_build.transition, Transition::Stop);
    assert_eq!(after_stop.latest_build.job.status, JobStatus::Succeeded);
    assert_eq!(kept(&after_stop), kept(&before), "the stop build kept them");

    let (status, started) = env
        .send(
            Method::PATCH,
            &format!("{API}/coderworkspaces/{name}"),
            "application/merge-patch+json",
            json!({"spec": {"running": true}}).to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let after_start = env.settled(created.id).await;
    assert_eq!(after_start.latest_build.transition, Transition::Start);
    assert_eq!(after_start.latest_build.job.status, JobStatus::Succeeded);
    assert_eq!(kept(&after_start), kept(&before), "the start build kept them");
    assert!(after_start.outdated, "still on v1 while v2 is active");
}

#[tokio::test]
async fn promote_on_real_coder_changes_only_the_active_version() {
    let env = env().await;
    let v1 = env.echo_version(None).await;
    let leaf = format!("meta-{}", suffix());
    let template = env
        .template(
            &leaf,
            v1,
            json!({"display_name": "Kept Name", "description": "kept description", "icon": "/icon/kept.svg",
                   "default_ttl_ms": 7_200_000, "activity_bump_ms": 1_800_000,
                   "allow_user_cancel_workspace_jobs": false, "allow_user_autostart": false,
                   "allow_user_autostop": false}),
        )
        .await;
    let v2 = env.echo_version(Some(template)).await;
    let before = env.template_json(template).await;
    assert_eq!(before["active_version_id"], v1.to_string());

    let promotion = json!({"apiVersion": "aggregation.coder.com/v1alpha1", "kind": "CoderTemplateVersionPromotion",
                           "spec": {"versionID": v2.to_string()}});
    let (status, promoted) = env
        .send(
            Method::POST,
            &format!("{API}/codertemplates/{}.{leaf}/promote", env.organization),
            "application/json",
            promotion.to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{promoted}");
    assert_eq!(promoted["status"]["result"], "Promoted");

    let after = env.template_json(template).await;
    assert_eq!(after["active_version_id"], v2.to_string());
    let without_changes = |template: &Value| {
        let mut template = template.clone();
        let fields = template.as_object_mut().unwrap();
        fields.remove("active_version_id");
        fields.remove("updated_at");
        template
    };
    assert_eq!(
        without_changes(&after),
        without_changes(&before),
        "every other field of the template is as it was"
    );
    assert_eq!(after["description"], "kept description");
    assert_eq!(after["default_ttl_ms"], 7_200_000);
}
