//! Contract tests: the same assertions, through `CoderClient`, against both the Coder API test server
//! (`coder-k8s-coder-testserver`) and a real open-source Coder server (`coder_k8s_testenv::coder`), for every
//! call the operator makes on the open-source feature set. Each contract is one async fn taking a [`Target`];
//! `contracts!` generates `<contract>::test_server` and `<contract>::real_coder` tests, so a failure names the
//! server. What the test server simulates beyond open-source Coder is listed in [`PREMIUM_ONLY`] and in
//! `docs/reference/coder-test-server.md`.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use coder_k8s_coder_client::types::jobs::{daemon_takes_job, effective_tags};
use coder_k8s_coder_client::types::users::{
    CreateUserRequest, LoginWithPasswordRequest, UpdateRoles, UpdateUserProfileRequest,
};
use coder_k8s_coder_client::types::{
    ArchiveKind, BuildReason, CreateTemplateRequest, CreateTemplateVersionRequest,
    CreateWorkspaceBuildRequest, CreateWorkspaceRequest, JobStatus, ProvisionerJob, ProvisionerJobLog,
    Template, TemplateAutostartRequirement, TemplateAutostopRequirement, TemplateVersion, Transition,
    UpdateTemplateMeta, Workspace, WorkspaceBuild, WorkspaceBuildStatus,
};
use coder_k8s_coder_client::types::{
    RichParameterValue, UpdateWorkspaceAutomaticUpdatesRequest, UpdateWorkspaceAutostartRequest,
    UpdateWorkspaceTtlRequest,
};
use coder_k8s_coder_client::types::{
    TemplateAcl, TemplateAclGroup, TemplateAclUser, UpdateTemplateAcl, VariableValue,
};
use coder_k8s_coder_client::{CoderClient, Error, Secret, SessionToken, UnavailableReason, found};
use coder_k8s_coder_testserver::{BuildOutcome, Config, Entitlement, TestServer};
use coder_k8s_operator_access::ensure_operator_access;
use coder_k8s_testenv::RealCoder;
use coder_k8s_testenv::coder::EchoTemplate;
use coder_k8s_testenv::postgres;
use coder_k8s_testenv::{EchoVariable, echo_with_variables};
use futures::StreamExt;
use serde_json::json;
use url::Url;
use uuid::Uuid;

/// How long a followed log stream may take to end (an import or a build).
const JOB_TIMEOUT: Duration = Duration::from_secs(60);
/// A well-formed session token (`<10>-<22>`) that no server issued.
const UNKNOWN_TOKEN: &str = "abcdefghij-0123456789abcdefghijkl";
/// Coder's 404 message for a missing or invisible object.
const NOT_FOUND_MESSAGE: &str = "Resource not found or you do not have access to this resource";
/// Coder's 401 message for a bad token (the client appends `: <detail>`).
const SIGNED_OUT: &str = "You are signed out or your session has expired. Please sign in again to continue.";

/// Premium (licensed) routes the test server simulates and open-source Coder lacks (it answers 404
/// `Route not found.`): the one deliberate difference between the two servers. `contract_premium_routes`
/// checks every entry on both.
pub const PREMIUM_ONLY: &[(&str, &str)] = &[
    ("GET", "/api/v2/entitlements"),
    ("GET", "/api/v2/licenses"),
    ("GET", "/api/v2/organizations/{organization}/provisionerkeys"),
    ("GET", "/api/v2/workspaceproxies/{proxy}"),
    ("GET", "/api/v2/organizations/{organization}/groups"),
    ("GET", "/api/v2/organizations/{organization}/groups/{group}"),
    ("GET", "/api/v2/templates/{template}/acl"),
    ("GET", "/api/v2/ai-gateway/keys"),
    ("GET", "/api/v2/ai/providers"),
];

/// Where a contract runs.
enum Backend {
    TestServer(TestServer),
    Real(&'static RealCoder),
}

/// A server under contract: its URL, an owner's token, the default organization and the owner's username.
struct Target {
    url: Url,
    token: String,
    organization_id: Uuid,
    owner: String,
    backend: Backend,
}

impl Target {
    /// A fresh test server on a fresh Coder database, with the operator's bootstrapped owner token and the
    /// premium features the operator uses entitled.
    async fn test_server() -> Target {
        let pg = postgres::shared().await.unwrap();
        let db_url = pg
            .create_coder_database(&format!("contract_{}", Uuid::new_v4().simple()))
            .await
            .unwrap();
        let token = ensure_operator_access(&db_url, "ns", "cp", None)
            .await
            .unwrap()
            .expose();
        let mut config = Config::new(&db_url);
        for feature in [
            "external_provisioner_daemons",
            "workspace_proxy",
            "aibridge",
            "template_rbac",
        ] {
            config
                .entitlements
                .insert(feature.to_owned(), Entitlement::Entitled);
        }
        let server = TestServer::start(config).await.unwrap();
        let url = server.url();
        let client = CoderClient::new(url.clone(), SessionToken::new(token.clone())).unwrap();
        let organization_id = client.default_organization().await.unwrap().id;
        let owner = client.me().await.unwrap().username;
        Target {
            url,
            token,
            organization_id,
            owner,
            backend: Backend::TestServer(server),
        }
    }

    /// The shared real Coder server of this test process.
    async fn real() -> Target {
        let coder = RealCoder::shared().await.unwrap();
        Target {
            url: coder.url().parse().unwrap(),
            token: coder.owner_token().to_owned(),
            organization_id: coder.organization_id().parse().unwrap(),
            owner: coder_k8s_testenv::coder::OWNER_USERNAME.to_owned(),
            backend: Backend::Real(coder),
        }
    }

    fn client(&self) -> CoderClient {
        self.client_as(&self.token)
    }

    fn client_as(&self, token: &str) -> CoderClient {
        CoderClient::new(self.url.clone(), SessionToken::new(token)).unwrap()
    }

    /// Whether the server simulates the premium routes of [`PREMIUM_ONLY`].
    fn simulates_premium(&self) -> bool {
        matches!(self.backend, Backend::TestServer(_))
    }

    /// A template archive the server imports with the echo provisioner. Real Coder needs `echotar`'s
    /// replayed responses; the test server simulates every import and accepts any archive.
    fn echo_template(&self) -> Bytes {
        match &self.backend {
            Backend::Real(coder) => Bytes::from(coder.echo_template(EchoTemplate::Success).unwrap()),
            Backend::TestServer(_) => tar_with("main.tf", b"terraform {}\n"),
        }
    }

    /// A template version attached to `template` whose import failed: real Coder's echo provisioner fails
    /// an archive without recorded responses; the test server fails the jobs it runs meanwhile.
    async fn failing_import(&self, client: &CoderClient, template: Uuid) -> TemplateVersion {
        if let Backend::TestServer(server) = &self.backend {
            server.set_build_outcome(BuildOutcome::Fail);
        }
        let file = client
            .upload_file(
                ArchiveKind::Tar,
                tar_with("main.tf", unique("no-echo").as_bytes()),
            )
            .await
            .unwrap();
        let mut request = CreateTemplateVersionRequest::terraform(file.id);
        request.provisioner = "echo".to_owned();
        request.template_id = Some(template);
        let version = client.create_template_version("default", &request).await.unwrap();
        let _ = drain(client.follow_template_version_logs(version.id, 0).await.unwrap()).await;
        let version = wait_version(client, version.id).await;
        if let Backend::TestServer(server) = &self.backend {
            server.set_build_outcome(BuildOutcome::Succeed);
        }
        version
    }

    /// A new member (no site role) of the default organization; returns the session token.
    async fn member_token(&self) -> String {
        let username = unique("member");
        match &self.backend {
            Backend::TestServer(server) => server.mint_token(&username, &[]).await.unwrap(),
            Backend::Real(coder) => {
                let email = format!("{username}@coder-k8s.test");
                let password = format!("Pw-{}", Uuid::new_v4().simple());
                let created = coder
                    .send_json(
                        "POST",
                        "/api/v2/users",
                        &json!({
                            "email": email,
                            "username": username,
                            "password": password,
                            "login_type": "password",
                            "organization_ids": [self.organization_id],
                        }),
                    )
                    .await
                    .unwrap();
                assert_eq!(created.status, 201, "{}", created.text());
                let login = coder
                    .send_json_as(
                        None,
                        "POST",
                        "/api/v2/users/login",
                        &json!({ "email": email, "password": password }),
                    )
                    .await
                    .unwrap();
                assert_eq!(login.status, 201, "{}", login.text());
                login.json().unwrap()["session_token"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            }
        }
    }
}

/// A name unique across tests and runs, valid as a Coder template, workspace and user name (≤ 32 chars).
fn unique(prefix: &str) -> String {
    let id = Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &id[..12])
}

/// A one-file ustar archive (the test support's, as `Bytes`).
fn tar_with(name: &str, content: &[u8]) -> Bytes {
    Bytes::from(coder_k8s_testenv::one_file_tar(name, content))
}

/// Every message of a followed log stream, which must end (close 1000) within [`JOB_TIMEOUT`].
async fn drain(stream: coder_k8s_coder_client::LogStream) -> Vec<ProvisionerJobLog> {
    let all: Vec<_> = tokio::time::timeout(JOB_TIMEOUT, stream.collect::<Vec<_>>())
        .await
        .expect("the log stream did not end");
    all.into_iter().map(|r| r.expect("log stream error")).collect()
}

fn ids(logs: &[ProvisionerJobLog]) -> Vec<i64> {
    logs.iter().map(|l| l.id).collect()
}

/// An echo import of the target's template (attached to `template` when given), followed to its end.
async fn import(t: &Target, client: &CoderClient, template: Option<Uuid>) -> TemplateVersion {
    let file = client
        .upload_file(ArchiveKind::Tar, t.echo_template())
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    request.template_id = template;
    let version = client.create_template_version("default", &request).await.unwrap();
    let _ = drain(client.follow_template_version_logs(version.id, 0).await.unwrap()).await;
    let version = wait_version(client, version.id).await;
    assert_eq!(version.job.status, JobStatus::Succeeded, "{version:?}");
    version
}

/// The template version once its import job is terminal.
async fn wait_version(client: &CoderClient, id: Uuid) -> TemplateVersion {
    let deadline = Instant::now() + JOB_TIMEOUT;
    loop {
        let version = client.template_version(id).await.unwrap();
        if version.job.status.is_terminal() {
            return version;
        }
        assert!(Instant::now() < deadline, "import still {:?}", version.job.status);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The build once its job is terminal (its logs followed to the end first).
async fn wait_build(client: &CoderClient, id: Uuid) -> WorkspaceBuild {
    let _ = drain(client.follow_workspace_build_logs(id, 0).await.unwrap()).await;
    let deadline = Instant::now() + JOB_TIMEOUT;
    loop {
        let build = client.workspace_build(id).await.unwrap();
        if build.job.status.is_terminal() {
            return build;
        }
        assert!(Instant::now() < deadline, "build still {:?}", build.job.status);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The fields of a job that succeeded, started by the owner in the default organization on an untagged
/// (organization-scoped) provisioner.
async fn assert_job_succeeded(job: &ProvisionerJob, t: &Target, client: &CoderClient) {
    assert_eq!(job.status, JobStatus::Succeeded, "{job:?}");
    assert!(job.started_at.is_some(), "{job:?}");
    assert!(job.completed_at.is_some(), "{job:?}");
    assert_eq!(job.canceled_at, None, "{job:?}");
    assert_eq!((&job.error, &job.error_code), (&None, &None), "{job:?}");
    assert!(job.worker_id.is_some(), "{job:?}");
    assert_eq!(job.organization_id, t.organization_id);
    assert_eq!(job.initiator_id, client.me().await.unwrap().id);
    assert_eq!(job.queue_position, 0, "{job:?}");
    let tags = BTreeMap::from([
        ("owner".to_owned(), String::new()),
        ("scope".to_owned(), "organization".to_owned()),
    ]);
    assert_eq!(job.tags, tags, "{job:?}");
    assert!(!job.logs_overflowed);
}

/// The fields every log line has.
fn assert_log_fields(logs: &[ProvisionerJobLog]) {
    for log in logs {
        assert!(!log.created_at.is_empty(), "{log:?}");
        assert!(
            ["provisioner_daemon", "provisioner"].contains(&log.log_source.as_str()),
            "{log:?}"
        );
        assert!(
            ["trace", "debug", "info", "warn", "error"].contains(&log.log_level.as_str()),
            "{log:?}"
        );
        assert!(!log.stage.is_empty(), "{log:?}");
    }
}

/// A new template named `name` from a fresh echo import.
async fn template(t: &Target, client: &CoderClient, name: &str) -> Template {
    let version = import(t, client, None).await;
    client
        .create_template(
            "default",
            &CreateTemplateRequest {
                name: name.to_owned(),
                template_version_id: version.id,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap()
}

/// A new workspace of the owner on a new template; its first build has finished.
async fn workspace(t: &Target, client: &CoderClient) -> (Template, Workspace) {
    let template = template(t, client, &unique("tpl")).await;
    let workspace = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: unique("ws"),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap();
    let build = wait_build(client, workspace.latest_build.id).await;
    assert_eq!(build.status, WorkspaceBuildStatus::Running, "{build:?}");
    (template, workspace)
}

// ---------------------------------------------------------------------------------------------------------
// Contracts
// ---------------------------------------------------------------------------------------------------------

/// `GET /buildinfo`, with and without a token.
async fn contract_buildinfo(t: &Target) {
    let info = t.client().buildinfo().await.unwrap();
    assert!(info.version.starts_with("v2.30.0"), "{info:?}");
    Uuid::parse_str(&info.deployment_id).unwrap();
    assert!(!info.agent_api_version.is_empty(), "{info:?}");
    assert!(!info.provisioner_api_version.is_empty(), "{info:?}");
    assert!(!info.workspace_proxy, "{info:?}");
    assert!(!info.telemetry, "{info:?}");
    let anonymous = CoderClient::anonymous(t.url.clone())
        .unwrap()
        .buildinfo()
        .await
        .unwrap();
    assert_eq!(anonymous.deployment_id, info.deployment_id);
    assert_eq!(anonymous.version, info.version);
}

/// `GET /users/me`, `GET /users/{name|id}`, `GET /users` and `GET /users/{user}/roles`; an unknown user is Coder's
/// 400.
async fn contract_users(t: &Target) {
    let client = t.client();
    let me = client.me().await.unwrap();
    assert_eq!(me.username, t.owner);
    assert!(me.has_role("owner"), "{:?}", me.roles);
    assert_eq!(me.status, "active");
    assert_eq!(me.organization_ids, vec![t.organization_id]);
    let by_name = client.user(&t.owner).await.unwrap();
    assert_eq!((by_name.id, &by_name.email), (me.id, &me.email));
    let by_id = client.user(&me.id.to_string()).await.unwrap();
    assert_eq!(by_id.username, t.owner);
    // The list leaves out system users (the operator's user, this target's owner on the test server); every user it
    // shows is the one a get by name finds. Other contracts run at the same time against the same Coder and delete
    // their users, so a listed user that a get by name no longer finds must be gone from a fresh list too.
    let listed = client.users().await.unwrap();
    for user in &listed {
        match client.user(&user.username).await {
            Ok(found) => assert_eq!(found.id, user.id, "{user:?}"),
            Err(Error::Rejected { status: 400, .. }) => {
                let now = client.users().await.unwrap();
                assert!(
                    now.iter().all(|u| u.id != user.id),
                    "listed but not found: {user:?}"
                );
            }
            Err(err) => panic!("{user:?}: {err:?}"),
        }
    }
    if matches!(t.backend, Backend::Real(_)) {
        let listed_me = listed
            .iter()
            .find(|u| u.id == me.id)
            .unwrap_or_else(|| panic!("{listed:?}"));
        assert!(listed_me.has_role("owner"), "{:?}", listed_me.roles);
    } else {
        assert!(
            listed.iter().all(|u| u.id != me.id),
            "a system user is listed: {listed:?}"
        );
    }
    // Coder reads a user's organization roles without system users' memberships: the test server's owner (the
    // operator, a system user) has none there; a member of flesh and blood has its organization's.
    let roles = client.user_roles(&t.owner).await.unwrap();
    assert!(roles.roles.contains(&"owner".to_owned()), "{roles:?}");
    let owner_orgs: Vec<Uuid> = roles.organization_roles.keys().copied().collect();
    if matches!(t.backend, Backend::Real(_)) {
        assert_eq!(owner_orgs, vec![t.organization_id], "{roles:?}");
    } else {
        assert!(
            owner_orgs.is_empty(),
            "a system user's organization roles: {roles:?}"
        );
    }
    let member = t.client_as(&t.member_token().await).me().await.unwrap();
    let roles = client.user_roles(&member.username).await.unwrap();
    assert_eq!(
        roles.organization_roles.keys().copied().collect::<Vec<_>>(),
        vec![t.organization_id],
        "{roles:?}"
    );
    // An unknown user is a 400, not a 404: `found` does not apply to users.
    let nobody = unique("nobody");
    let err = client.user(&nobody).await.unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
    assert_eq!(
        err.message(),
        format!("\"user\" must be an existing uuid or username.: queried user={nobody:?}")
    );
    let err = client
        .workspace_by_owner_and_name(&nobody, "ws")
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(400), "{err:?}");
    assert_eq!(
        err.message(),
        format!("\"user\" must be an existing uuid or username.: queried user={nobody:?}")
    );
}

/// `GET /organizations`, `/organizations/default`, by name and by ID; an unknown name is Coder's 404.
async fn contract_organizations(t: &Target) {
    let client = t.client();
    let all = client.organizations().await.unwrap();
    let ids: Vec<Uuid> = all.iter().map(|o| o.id).collect();
    assert_eq!(ids, vec![t.organization_id]);
    let default = client.default_organization().await.unwrap();
    assert_eq!(default, all[0]);
    assert!(default.is_default);
    assert_eq!(default.name, "coder");
    assert_eq!(default.display_name, "Coder");
    assert_eq!(default.description, "Builtin default organization.");
    assert_eq!(default.icon, "");
    assert_eq!(client.organization(&default.name).await.unwrap(), default);
    assert_eq!(client.organization_by_id(default.id).await.unwrap(), default);
    let err = client.organization(&unique("no-org")).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert!(
        found(client.organization_by_id(Uuid::new_v4()).await)
            .unwrap()
            .is_none()
    );
}

/// `POST /files`: 201 for new content, 200 with the same ID for the same content again.
async fn contract_files(t: &Target) {
    let client = t.client();
    let archive = tar_with("README.md", unique("file").as_bytes());
    let first = client
        .upload_file(ArchiveKind::Tar, archive.clone())
        .await
        .unwrap();
    assert!(first.created);
    let again = client.upload_file(ArchiveKind::Tar, archive).await.unwrap();
    assert_eq!(again.id, first.id);
    assert!(!again.created);
}

/// Template sources and metadata (aggregated API, codertemplates): a stored tar downloads as a zip with
/// `?format=zip`; a metadata update answers the template, also when repeated (no 304 without `name`).
async fn contract_template_sources(t: &Target) {
    let client = t.client();
    let archive = tar_with("README.md", unique("zip").as_bytes());
    let file = client.upload_file(ArchiveKind::Tar, archive).await.unwrap();
    let zip = client.download_file_zip(file.id, 1 << 20).await.unwrap();
    assert!(zip.starts_with(b"PK\x03\x04"), "a zip local file header");
    assert!(
        zip.windows(9).any(|w| w == b"README.md"),
        "the file is in the zip"
    );
    let too_small = client.download_file_zip(file.id, 16).await.unwrap_err();
    assert!(
        matches!(too_small, Error::BodyTooLarge { limit: 16 }),
        "{too_small:?}"
    );

    let created = template(t, &client, &unique("meta")).await;
    let meta = UpdateTemplateMeta {
        display_name: Some("Sources".to_owned()),
        description: Some("from the contract".to_owned()),
        icon: Some(String::new()),
        ..UpdateTemplateMeta::from_template(&created)
    };
    let updated = client
        .update_template_meta(created.id, &meta)
        .await
        .unwrap()
        .expect("a changed template");
    assert_eq!(updated.display_name, "Sources");
    assert_eq!(updated.description, "from the contract");
    // Without `name` in the request Coder never answers 304: the same update again answers the template.
    let again = client
        .update_template_meta(created.id, &meta)
        .await
        .unwrap()
        .expect("200, not 304, without a name");
    assert_eq!(
        (again.display_name.as_str(), again.description.as_str()),
        ("Sources", "from the contract")
    );
}

/// A template's settings through a full-body update, as `coder templates edit` sends it: every scheduling and
/// permission setting away from its default. Open-source Coder keeps the premium ones (autostart and autostop
/// rules, failure and dormancy TTLs, required active version, deprecation) as they were, whatever is sent.
async fn set_every_setting(client: &CoderClient, template: &Template) -> Template {
    let body = UpdateTemplateMeta {
        default_ttl_ms: 7_200_000,
        activity_bump_ms: 1_800_000,
        autostop_requirement: Some(TemplateAutostopRequirement {
            days_of_week: vec!["monday".to_owned(), "saturday".to_owned()],
            weeks: 2,
        }),
        autostart_requirement: Some(TemplateAutostartRequirement {
            days_of_week: vec!["tuesday".to_owned(), "sunday".to_owned()],
        }),
        allow_user_autostart: false,
        allow_user_autostop: false,
        allow_user_cancel_workspace_jobs: true,
        failure_ttl_ms: 120_000,
        time_til_dormant_ms: 86_400_000,
        time_til_dormant_autodelete_ms: 172_800_000,
        require_active_version: true,
        deprecation_message: Some("use another template".to_owned()),
        cors_behavior: Some("passthru".to_owned()),
        use_classic_parameter_flow: Some(true),
        ..UpdateTemplateMeta::from_template(template)
    };
    client
        .update_template_meta(template.id, &body)
        .await
        .unwrap()
        .expect("a changed template")
}

/// What [`set_every_setting`] leaves on an open-source Coder: the open settings as sent, the premium ones at
/// their defaults.
fn assert_open_settings_set(template: &Template) {
    assert_eq!(
        (
            template.default_ttl_ms,
            template.activity_bump_ms,
            template.allow_user_cancel_workspace_jobs,
            template.cors_behavior.as_str(),
            template.use_classic_parameter_flow,
        ),
        (7_200_000, 1_800_000, true, "passthru", true),
        "{template:#?}"
    );
    assert_premium_defaults(template);
}

/// The premium settings of a template on open-source Coder: never changed by an update.
fn assert_premium_defaults(template: &Template) {
    let every_day = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    assert_eq!(template.autostop_requirement.days_of_week, Vec::<String>::new());
    assert_eq!(template.autostop_requirement.weeks, 1);
    assert_eq!(template.autostart_requirement.days_of_week, every_day);
    assert_eq!(
        (
            template.allow_user_autostart,
            template.allow_user_autostop,
            template.failure_ttl_ms,
            template.time_til_dormant_ms,
            template.time_til_dormant_autodelete_ms,
            template.require_active_version,
            template.deprecated,
            template.deprecation_message.as_str(),
            template.max_port_share_level.as_str(),
        ),
        (true, true, 0, 0, 0, false, false, "", "public"),
        "{template:#?}"
    );
}

/// `template` with the fields an update may change (the update time and the three metadata texts) taken from
/// `after`, so that what remains must be equal.
fn with_metadata_of(template: &Template, after: &Template) -> Template {
    Template {
        updated_at: after.updated_at.clone(),
        display_name: after.display_name.clone(),
        description: after.description.clone(),
        icon: after.icon.clone(),
        ..template.clone()
    }
}

/// `PATCH /api/v2/templates/{id}` with a raw body (one the client would never build).
async fn patch_template(t: &Target, id: Uuid, body: &serde_json::Value) -> reqwest::Response {
    reqwest::Client::new()
        .patch(t.url.join(&format!("api/v2/templates/{id}")).unwrap())
        .header("Coder-Session-Token", &t.token)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// A metadata PATCH that leaves the settings out resets the plain ones to zero and keeps the rest: Coder writes
/// its whole body over the template. Both servers reset the same settings (the default TTL, the activity bump
/// and the users' permission to cancel builds).
async fn contract_template_patch_resets_left_out_settings(t: &Target) {
    let client = t.client();
    let created = template(t, &client, &unique("reset")).await;
    let set = set_every_setting(&client, &created).await;
    assert_open_settings_set(&set);

    let answer = patch_template(t, created.id, &json!({"description": "only the description"})).await;
    assert_eq!(answer.status(), 200);
    let patched: Template = answer.json().await.unwrap();
    assert_eq!(client.template(created.id).await.unwrap(), patched);
    let expected = Template {
        updated_at: patched.updated_at.clone(),
        description: "only the description".to_owned(),
        default_ttl_ms: 0,
        activity_bump_ms: 0,
        allow_user_cancel_workspace_jobs: false,
        ..set
    };
    assert_eq!(patched, expected);
    assert_ne!(patched.updated_at, set.updated_at);
}

/// The full-body update built from the template read just before changes the display name, description and icon
/// and reads every other field back unchanged.
async fn contract_template_full_body_update_keeps_every_setting(t: &Target) {
    let client = t.client();
    let created = template(t, &client, &unique("keep")).await;
    set_every_setting(&client, &created).await;
    let before = client.template(created.id).await.unwrap();
    assert_open_settings_set(&before);

    let body = UpdateTemplateMeta {
        display_name: Some("Kept Settings".to_owned()),
        description: Some("changed through the full body".to_owned()),
        icon: Some("/icon/k8s.png".to_owned()),
        ..UpdateTemplateMeta::from_template(&before)
    };
    let updated = client
        .update_template_meta(created.id, &body)
        .await
        .unwrap()
        .expect("a changed template");
    let after = client.template(created.id).await.unwrap();
    assert_eq!(updated, after);
    assert_eq!(
        (
            after.display_name.as_str(),
            after.description.as_str(),
            after.icon.as_str()
        ),
        ("Kept Settings", "changed through the full body", "/icon/k8s.png")
    );
    assert_eq!(with_metadata_of(&before, &after), after);

    // The same body again changes nothing and, without `name`, still answers the template.
    let again = client.update_template_meta(created.id, &body).await.unwrap();
    assert_eq!(again.map(|a| with_metadata_of(&a, &after)), Some(after));
}

/// Settings Coder refuses in a metadata PATCH, all named in one 400 in Coder's order (the port-sharing level
/// under a field name of its own; open-source Coder refuses any level but the `public` it renders).
async fn contract_template_patch_validations(t: &Target) {
    let client = t.client();
    let created = template(t, &client, &unique("invalid")).await;
    let body = UpdateTemplateMeta {
        default_ttl_ms: -1,
        autostop_requirement: Some(TemplateAutostopRequirement {
            days_of_week: vec!["monday".to_owned(), "someday".to_owned()],
            weeks: 17,
        }),
        failure_ttl_ms: 1_000,
        max_port_share_level: Some("owner".to_owned()),
        cors_behavior: Some("open".to_owned()),
        ..UpdateTemplateMeta::from_template(&created)
    };
    let answer = patch_template(t, created.id, &serde_json::to_value(&body).unwrap()).await;
    assert_eq!(answer.status(), 400);
    let refusal: serde_json::Value = answer.json().await.unwrap();
    let validation = |field: &str, detail: &str| json!({"field": field, "detail": detail});
    assert_eq!(
        refusal,
        json!({
            "message": "Invalid request to update template metadata!",
            "validations": [
                validation("default_ttl_ms", "Must be a positive integer."),
                validation("autostop_requirement.days_of_week", "invalid weekday \"someday\""),
                validation("autostop_requirement.weeks", "Must be less than 16."),
                validation("failure_ttl_ms", "Value must be at least one minute."),
                validation(
                    "max_port_sharing_level",
                    "Restricting port sharing level is an enterprise feature that is not enabled."
                ),
                validation("cors_behavior", "Invalid CORS behavior \"open\". Must be one of [simple, passthru]"),
            ],
        })
    );
    let err = client.update_template_meta(created.id, &body).await.unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
    assert_eq!(
        client.template(created.id).await.unwrap(),
        created,
        "nothing changed"
    );
}

/// Templates: create (201), list, by name, by ID, delete; a deleted template is Coder's 404.
async fn contract_templates(t: &Target) {
    let client = t.client();
    let name = unique("tpl");
    let version = import(t, &client, None).await;
    assert_eq!(version.template_id, None);
    let created = client
        .create_template(
            "default",
            &CreateTemplateRequest {
                name: name.clone(),
                template_version_id: version.id,
                display_name: "Contract".to_owned(),
                description: "contract test".to_owned(),
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(created.name, name);
    assert_eq!(created.display_name, "Contract");
    assert_eq!(created.description, "contract test");
    assert_eq!(created.organization_id, t.organization_id);
    assert_eq!(created.organization_name, "coder");
    assert_eq!(created.active_version_id, version.id);
    assert_eq!(created.provisioner, "echo");
    assert_eq!(created.created_by_name, t.owner);
    assert_eq!(created.active_user_count, 0);
    assert!(!created.deprecated);
    assert_eq!(created.icon, "");
    assert_eq!(created.default_ttl_ms, 0);
    assert!(!created.require_active_version);
    assert_eq!(
        client.template_version(version.id).await.unwrap().template_id,
        Some(created.id)
    );

    let listed: Vec<Template> = client
        .templates("default")
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.name == name)
        .collect();
    assert_eq!(listed, vec![created.clone()]);
    assert_eq!(client.template_by_name("default", &name).await.unwrap(), created);
    assert_eq!(client.template_by_name("coder", &name).await.unwrap(), created);
    assert_eq!(client.template(created.id).await.unwrap(), created);

    client.delete_template(created.id).await.unwrap();
    let err = client.delete_template(created.id).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let err = client.template(created.id).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let err = client.template_by_name("default", &name).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let names: Vec<String> = client
        .templates("default")
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(!names.contains(&name), "{names:?}");
}

/// Template versions: create (pending import), get, follow the import, list, promote, archive.
async fn contract_template_versions(t: &Target) {
    let client = t.client();
    let file = client
        .upload_file(ArchiveKind::Tar, t.echo_template())
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    let v1 = client.create_template_version("default", &request).await.unwrap();
    assert_eq!(v1.template_id, None);
    assert_eq!(v1.organization_id, t.organization_id);
    assert!(!v1.name.is_empty());
    assert!(!v1.archived);
    assert_eq!(v1.created_by.username, t.owner);
    assert_eq!(v1.job.file_id, file.id);
    assert_eq!(v1.job.job_type, "template_version_import");
    assert_eq!(v1.job.input.template_version_id, Some(v1.id));
    assert!(
        matches!(
            v1.job.status,
            JobStatus::Pending | JobStatus::Running | JobStatus::Succeeded
        ),
        "{v1:?}"
    );
    let got = wait_version(&client, v1.id).await;
    assert_eq!(got.job.status, JobStatus::Succeeded);
    assert_eq!((got.id, &got.name), (v1.id, &v1.name));
    assert_job_succeeded(&got.job, t, &client).await;
    assert_eq!(got.job.input.template_version_id, Some(v1.id));

    let name = unique("tpl");
    let tpl = client
        .create_template(
            "default",
            &CreateTemplateRequest {
                name,
                template_version_id: v1.id,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap();
    let v2 = import(t, &client, Some(tpl.id)).await;
    assert_eq!(v2.template_id, Some(tpl.id));
    let listed: Vec<Uuid> = client
        .template_versions(tpl.id, false)
        .await
        .unwrap()
        .iter()
        .map(|v| v.id)
        .collect();
    assert_eq!(listed, vec![v1.id, v2.id]);

    // Promote v2; the template's active version follows.
    client.promote_template_version(tpl.id, v2.id).await.unwrap();
    assert_eq!(client.template(tpl.id).await.unwrap().active_version_id, v2.id);

    // The active version cannot be archived: Coder answers 500 (retryable to the client, though it is not).
    let err = client.archive_template_version(v2.id).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unavailable {
                reason: UnavailableReason::ServerError,
                status: Some(500),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.message(),
        "Internal error fetching template version.: Unable to archive specified version, the version is likely in use by a workspace or currently set to the active version"
    );

    // The unused v1 can; listing hides it unless archived versions are asked for.
    client.archive_template_version(v1.id).await.unwrap();
    assert!(client.template_version(v1.id).await.unwrap().archived);
    let listed: Vec<Uuid> = client
        .template_versions(tpl.id, false)
        .await
        .unwrap()
        .iter()
        .map(|v| v.id)
        .collect();
    assert_eq!(listed, vec![v2.id]);
    let with_archived: Vec<(Uuid, bool)> = client
        .template_versions(tpl.id, true)
        .await
        .unwrap()
        .iter()
        .map(|v| (v.id, v.archived))
        .collect();
    assert_eq!(with_archived, vec![(v1.id, true), (v2.id, false)]);
    let err = client.archive_template_version(v1.id).await.unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
    assert_eq!(err.message(), "Template version already archived");
    let err = client.promote_template_version(tpl.id, v1.id).await.unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
    assert_eq!(err.message(), "The provided template version is archived.");
}

/// Workspaces: create (201 with a queued start build), get, by owner and name, list with a query.
async fn contract_workspaces(t: &Target) {
    let client = t.client();
    let template = template(t, &client, &unique("tpl")).await;
    let name = unique("ws");
    let created = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: name.clone(),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(created.name, name);
    assert_eq!(created.owner_name, t.owner);
    assert_eq!(created.organization_id, t.organization_id);
    assert_eq!(created.template_id, template.id);
    assert_eq!(created.template_name, template.name);
    assert_eq!(created.template_active_version_id, template.active_version_id);
    assert!(!created.outdated);
    assert_eq!(created.automatic_updates, "never");
    assert_eq!((&created.autostart_schedule, created.ttl_ms), (&None, None));
    assert_eq!((&created.deleting_at, &created.dormant_at), (&None, &None));
    let build = &created.latest_build;
    assert_eq!(build.build_number, 1);
    assert_eq!(build.transition, Transition::Start);
    assert_eq!(build.workspace_id, created.id);
    assert_eq!(build.template_version_id, template.active_version_id);
    assert_eq!(build.initiator_name, t.owner);
    assert_eq!(build.job.job_type, "workspace_build");
    assert_eq!(build.job.input.workspace_build_id, Some(build.id));
    assert_eq!(build.reason, "initiator");
    // The create answer leaves the build's version name empty; reads fill it in.
    assert_eq!(build.template_version_name, "");
    let version_name = client
        .template_version(template.active_version_id)
        .await
        .unwrap()
        .name;
    let done = wait_build(&client, build.id).await;
    assert_job_succeeded(&done.job, t, &client).await;
    assert_eq!(done.template_version_name, version_name);
    // Coder's count lags (0 right after the first workspace).
    assert_eq!(client.template(template.id).await.unwrap().active_user_count, 0);

    // A template with a workspace cannot be deleted.
    let err = client.delete_template(template.id).await.unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
    assert_eq!(
        err.message(),
        "All workspaces must be deleted before a template can be removed."
    );

    // 400: an invalid workspace name.
    let err = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: "Bad Name!".to_owned(),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
    assert_eq!(
        err.message(),
        "Validation failed. [name: Validation failed for tag \"workspace_name\" with value: \"Bad Name!\"]"
    );

    let got = client.workspace(created.id).await.unwrap();
    assert_eq!((got.id, &got.name), (created.id, &name));
    assert_eq!(got.latest_build.status, WorkspaceBuildStatus::Running);
    let by_me = client.workspace_by_owner_and_name("me", &name).await.unwrap();
    assert_eq!(by_me.id, created.id);
    let by_owner = client.workspace_by_owner_and_name(&t.owner, &name).await.unwrap();
    assert_eq!(by_owner.id, created.id);
    for query in [
        format!("owner:me name:{name}"),
        format!("owner:{} name:{name}", t.owner),
        format!("template:{} owner:me", template.name),
    ] {
        let page = client.workspaces(&query, 0, 0).await.unwrap();
        let ids: Vec<Uuid> = page.workspaces.iter().map(|w| w.id).collect();
        assert_eq!(ids, vec![created.id], "{query}");
        assert_eq!(page.count, 1, "{query}");
    }
    let page = client
        .workspaces(&format!("owner:me name:{}", unique("none")), 0, 0)
        .await
        .unwrap();
    assert_eq!((page.workspaces.len(), page.count), (0, 0));
    let err = client
        .workspace_by_owner_and_name("me", &unique("none"))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let err = client.workspace(Uuid::new_v4()).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");

    // A workspace pinned to a template version instead of a template.
    let pinned = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_version_id: Some(template.active_version_id),
                name: unique("ws"),
                ttl_ms: Some(3_600_000),
                autostart_schedule: Some("CRON_TZ=UTC 30 9 * * 1-5".to_owned()),
                automatic_updates: Some("always".to_owned()),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(pinned.template_id, template.id);
    assert_eq!(
        pinned.latest_build.template_version_id,
        template.active_version_id
    );
    assert_eq!(pinned.ttl_ms, Some(3_600_000));
    assert_eq!(
        pinned.autostart_schedule.as_deref(),
        Some("CRON_TZ=UTC 30 9 * * 1-5")
    );
    assert_eq!(pinned.automatic_updates, "always");
    wait_build(&client, pinned.latest_build.id).await;
}

/// The workspace list: one page at a time (`limit`, `offset`) with the total `count`, ordered by name.
async fn contract_workspace_pages(t: &Target) {
    let client = t.client();
    let template = template(t, &client, &unique("tpl")).await;
    let suffix = unique("p");
    let mut created = Vec::new();
    // Created out of name order.
    for prefix in ["c", "a", "b"] {
        let ws = client
            .create_workspace(
                "me",
                &CreateWorkspaceRequest {
                    template_id: Some(template.id),
                    name: format!("{prefix}{suffix}"),
                    ..CreateWorkspaceRequest::default()
                },
            )
            .await
            .unwrap();
        created.push(ws);
    }
    for ws in &created {
        wait_build(&client, ws.latest_build.id).await;
    }
    let query = format!("owner:me template:{}", template.name);
    let names = |page: &coder_k8s_coder_client::types::WorkspacesPage| -> Vec<String> {
        page.workspaces.iter().map(|w| w.name.clone()).collect()
    };
    let all = client.workspaces(&query, 0, 0).await.unwrap();
    let expected: Vec<String> = ["a", "b", "c"].iter().map(|p| format!("{p}{suffix}")).collect();
    assert_eq!(names(&all), expected);
    assert_eq!(all.count, 3);
    let first = client.workspaces(&query, 2, 0).await.unwrap();
    assert_eq!(names(&first), expected[..2].to_vec());
    assert_eq!(first.count, 3);
    let second = client.workspaces(&query, 2, 2).await.unwrap();
    assert_eq!(names(&second), expected[2..].to_vec());
    assert_eq!(second.count, 3);
    let beyond = client.workspaces(&query, 2, 4).await.unwrap();
    assert!(beyond.workspaces.is_empty(), "{beyond:?}");

    // Started workspaces come first: stopping `a` moves it last.
    let a = created.iter().find(|w| w.name == expected[0]).unwrap();
    let stop = client
        .create_workspace_build(a.id, &CreateWorkspaceBuildRequest::transition(Transition::Stop))
        .await
        .unwrap();
    wait_build(&client, stop.id).await;
    let all = client.workspaces(&query, 0, 0).await.unwrap();
    assert_eq!(
        names(&all),
        vec![expected[1].clone(), expected[2].clone(), expected[0].clone()]
    );
}

/// Builds: start, stop and delete builds (201), get, list (newest first); a deleted workspace is 410.
async fn contract_builds(t: &Target) {
    let client = t.client();
    let (_, ws) = workspace(t, &client).await;
    let start = client.workspace_build(ws.latest_build.id).await.unwrap();
    assert_eq!(start.status, WorkspaceBuildStatus::Running);
    assert_eq!(start.job.status, JobStatus::Succeeded);
    assert_eq!(start.workspace_name, ws.name);
    assert_eq!(start.workspace_owner_name, t.owner);

    let stop = client
        .create_workspace_build(ws.id, &CreateWorkspaceBuildRequest::transition(Transition::Stop))
        .await
        .unwrap();
    assert_eq!(stop.build_number, 2);
    assert_eq!(stop.transition, Transition::Stop);
    assert_eq!(stop.template_version_id, start.template_version_id);
    // As on create, the answer leaves the version name empty; reads fill it in.
    assert_eq!(stop.template_version_name, "");
    assert_eq!(stop.reason, "initiator");
    assert_eq!(stop.workspace_owner_name, t.owner);
    let stop = wait_build(&client, stop.id).await;
    assert_eq!(stop.template_version_name, start.template_version_name);
    assert!(!stop.template_version_name.is_empty());
    assert_eq!(stop.status, WorkspaceBuildStatus::Stopped);
    assert_eq!(stop.job.status, JobStatus::Succeeded);

    let request = CreateWorkspaceBuildRequest {
        reason: Some(BuildReason::Cli),
        ..CreateWorkspaceBuildRequest::transition(Transition::Start)
    };
    let again = client.create_workspace_build(ws.id, &request).await.unwrap();
    assert_eq!(again.build_number, 3);
    assert_eq!(again.reason, "cli");
    assert_eq!(
        wait_build(&client, again.id).await.status,
        WorkspaceBuildStatus::Running
    );

    let builds: Vec<(i64, Transition, WorkspaceBuildStatus)> = client
        .workspace_builds(ws.id)
        .await
        .unwrap()
        .iter()
        .map(|b| (b.build_number, b.transition, b.status))
        .collect();
    assert_eq!(
        builds,
        vec![
            (3, Transition::Start, WorkspaceBuildStatus::Running),
            (2, Transition::Stop, WorkspaceBuildStatus::Stopped),
            (1, Transition::Start, WorkspaceBuildStatus::Running),
        ]
    );

    let delete = client
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest::transition(Transition::Delete),
        )
        .await
        .unwrap();
    assert_eq!(delete.build_number, 4);
    assert_eq!(delete.transition, Transition::Delete);
    let delete = wait_build(&client, delete.id).await;
    assert_eq!(delete.status, WorkspaceBuildStatus::Deleted);

    let err = client.workspace(ws.id).await.unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 410, .. }), "{err:?}");
    assert_eq!(
        err.message(),
        format!(
            "Workspace {:?} was deleted, you can view this workspace by specifying '?deleted=true' and trying again.",
            ws.id.to_string()
        )
    );
    let err = client
        .workspace_by_owner_and_name("me", &ws.name)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let page = client
        .workspaces(&format!("owner:me name:{}", ws.name), 0, 0)
        .await
        .unwrap();
    assert_eq!((page.workspaces.len(), page.count), (0, 0));
    let err = client.workspace_build(Uuid::new_v4()).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

/// Import and build logs: followed over the websocket until the job ends, then the same logs as a snapshot;
/// `after` skips what was seen.
async fn contract_logs(t: &Target) {
    let client = t.client();
    let file = client
        .upload_file(ArchiveKind::Tar, t.echo_template())
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    let version = client.create_template_version("default", &request).await.unwrap();
    let followed = drain(client.follow_template_version_logs(version.id, 0).await.unwrap()).await;
    assert!(!followed.is_empty());
    assert_log_fields(&followed);
    assert!(ids(&followed).windows(2).all(|w| w[0] < w[1]), "{followed:?}");
    assert!(
        client
            .template_version(version.id)
            .await
            .unwrap()
            .job
            .status
            .is_terminal()
    );
    let snapshot = client.template_version_logs(version.id, None).await.unwrap();
    assert_eq!(snapshot, followed);
    let last = followed.last().unwrap().id;
    let after_last = client
        .template_version_logs(version.id, Some(last))
        .await
        .unwrap();
    assert!(after_last.is_empty(), "{after_last:?}");
    let replay = drain(client.follow_template_version_logs(version.id, 0).await.unwrap()).await;
    assert_eq!(replay, followed);

    let tpl = client
        .create_template(
            "default",
            &CreateTemplateRequest {
                name: unique("tpl"),
                template_version_id: version.id,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap();
    let ws = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(tpl.id),
                name: unique("ws"),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap();
    let build = ws.latest_build.id;
    let followed = drain(client.follow_workspace_build_logs(build, 0).await.unwrap()).await;
    assert!(!followed.is_empty());
    assert_log_fields(&followed);
    assert!(ids(&followed).windows(2).all(|w| w[0] < w[1]), "{followed:?}");
    assert!(
        client
            .workspace_build(build)
            .await
            .unwrap()
            .job
            .status
            .is_terminal()
    );
    let snapshot = client.workspace_build_logs(build, None).await.unwrap();
    assert_eq!(snapshot, followed);
    let first = followed[0].id;
    assert_eq!(
        ids(&client.workspace_build_logs(build, Some(first)).await.unwrap()),
        ids(&followed[1..])
    );
    let last = followed.last().unwrap().id;
    let after_last = client.workspace_build_logs(build, Some(last)).await.unwrap();
    assert!(after_last.is_empty(), "{after_last:?}");
    let tail = drain(client.follow_workspace_build_logs(build, first).await.unwrap()).await;
    assert_eq!(tail, followed[1..].to_vec());
    let none = drain(client.follow_workspace_build_logs(build, last).await.unwrap()).await;
    assert!(none.is_empty(), "{none:?}");
}

/// 400: a validation error on a create.
async fn contract_error_400(t: &Target) {
    let client = t.client();
    let version = import(t, &client, None).await;
    let err = client
        .create_template(
            "default",
            &CreateTemplateRequest {
                name: "Not A Valid Name!".to_owned(),
                template_version_id: version.id,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
    assert_eq!(
        err.message(),
        "Validation failed. [name: Validation failed for tag \"template_name\" with value: \"Not A Valid Name!\"]"
    );
}

/// 401: a well-formed token no server issued.
async fn contract_error_401(t: &Target) {
    let err = t.client_as(UNKNOWN_TOKEN).me().await.unwrap_err();
    assert!(matches!(err, Error::Unauthorized { .. }), "{err:?}");
    assert_eq!(err.message(), format!("{SIGNED_OUT}: API key is invalid."));
    assert!(!err.is_retryable());
    let err = t.client_as("not-a-token").me().await.unwrap_err();
    assert!(matches!(err, Error::Unauthorized { .. }), "{err:?}");
    assert_eq!(
        err.message(),
        format!("{SIGNED_OUT}: Invalid API key format: incorrect amount of API key parts, expected 2 got 3")
    );
    let err = t
        .client_as("short-0123456789abcdefghijkl")
        .me()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unauthorized { .. }), "{err:?}");
    assert_eq!(
        err.message(),
        format!("{SIGNED_OUT}: Invalid API key format: invalid API key ID length, expected 10 got 5")
    );
    let err = t.client_as("abcdefghij-short").me().await.unwrap_err();
    assert!(matches!(err, Error::Unauthorized { .. }), "{err:?}");
    assert_eq!(
        err.message(),
        format!("{SIGNED_OUT}: Invalid API key format: invalid API key secret length, expected 22 got 5")
    );
    let err = CoderClient::anonymous(t.url.clone())
        .unwrap()
        .me()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unauthorized { .. }), "{err:?}");
    assert_eq!(
        err.message(),
        format!("{SIGNED_OUT}: Cookie \"coder_session_token\" or query parameter must be provided.")
    );
}

/// 403: only a version whose import succeeded can be promoted.
async fn contract_error_403(t: &Target) {
    let client = t.client();
    let tpl = template(t, &client, &unique("tpl")).await;
    let failed = t.failing_import(&client, tpl.id).await;
    assert_eq!(failed.job.status, JobStatus::Failed, "{failed:?}");
    assert!(
        failed.job.error.as_deref().is_some_and(|e| !e.is_empty()),
        "{failed:?}"
    );
    let err = client
        .promote_template_version(tpl.id, failed.id)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Forbidden { .. }), "{err:?}");
    assert_eq!(
        err.message(),
        "Only versions that have been built successfully can be promoted.: Attempted to promote a version with a failed build"
    );
    assert_eq!(
        client.template(tpl.id).await.unwrap().active_version_id,
        tpl.active_version_id
    );
}

/// A member (no site role) may not create a template version: Coder's database layer refuses the insert and the
/// caller sees a 500 (retryable to the client), not a 403.
async fn contract_member_creates_version(t: &Target) {
    let member = t.client_as(&t.member_token().await);
    assert!(!member.me().await.unwrap().has_role("owner"));
    let file = member
        .upload_file(ArchiveKind::Tar, tar_with("main.tf", unique("m").as_bytes()))
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    let err = member
        .create_template_version("default", &request)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unavailable {
                reason: UnavailableReason::ServerError,
                status: Some(500),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.message(),
        "Internal error creating template version.: insert template version: unauthorized: rbac: forbidden"
    );
}

/// 404: Coder's own JSON 404 for a missing template is `Error::NotFound`.
async fn contract_error_404(t: &Target) {
    let client = t.client();
    let err = client.template(Uuid::new_v4()).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(err.message(), NOT_FOUND_MESSAGE);
    assert!(!err.is_route_not_found());
    let err = client
        .template_by_name("default", &unique("none"))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert!(found(client.template(Uuid::new_v4()).await).unwrap().is_none());
    let err = client.template_version(Uuid::new_v4()).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");

    // Creates that name a missing object.
    let missing = Uuid::new_v4();
    let mut request = CreateTemplateVersionRequest::terraform(missing);
    request.provisioner = "echo".to_owned();
    let err = client
        .create_template_version("default", &request)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(err.message(), "File not found.");
    let err = client
        .create_template(
            "default",
            &CreateTemplateRequest {
                name: unique("tpl"),
                template_version_id: missing,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(
        err.message(),
        format!(
            "Template version {:?} does not exist. [template_version_id: Template version does not exist]",
            missing.to_string()
        )
    );
    let err = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(missing),
                name: unique("ws"),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(400), "{err:?}");
    assert_eq!(
        err.message(),
        format!(
            "Template {:?} doesn't exist. [template_id: template not found]",
            missing.to_string()
        )
    );
}

/// A build that fails (the echo template's apply fails; the test server fails the jobs it runs meanwhile):
/// the log stream still ends normally, the build is `failed` with the job's error, and the next start works.
async fn contract_failed_build(t: &Target) {
    let client = t.client();
    let (_, ws) = workspace(t, &client).await;
    let stop = client
        .create_workspace_build(ws.id, &CreateWorkspaceBuildRequest::transition(Transition::Stop))
        .await
        .unwrap();
    wait_build(&client, stop.id).await;
    let failing = match &t.backend {
        Backend::Real(coder) => {
            let tar = Bytes::from(coder.echo_template(EchoTemplate::FailingApply).unwrap());
            let file = client.upload_file(ArchiveKind::Tar, tar).await.unwrap();
            let mut request = CreateTemplateVersionRequest::terraform(file.id);
            request.provisioner = "echo".to_owned();
            request.template_id = Some(ws.template_id);
            let version = client.create_template_version("default", &request).await.unwrap();
            let _ = drain(client.follow_template_version_logs(version.id, 0).await.unwrap()).await;
            wait_version(&client, version.id).await
        }
        Backend::TestServer(server) => {
            let version = import(t, &client, Some(ws.template_id)).await;
            server.set_build_outcome(BuildOutcome::Fail);
            version
        }
    };
    assert_eq!(failing.job.status, JobStatus::Succeeded, "{failing:?}");
    let request = CreateWorkspaceBuildRequest {
        template_version_id: Some(failing.id),
        ..CreateWorkspaceBuildRequest::transition(Transition::Start)
    };
    let build = client.create_workspace_build(ws.id, &request).await.unwrap();
    let build = wait_build(&client, build.id).await;
    if let Backend::TestServer(server) = &t.backend {
        server.set_build_outcome(BuildOutcome::Succeed);
    }
    assert_eq!(build.status, WorkspaceBuildStatus::Failed, "{build:?}");
    assert_eq!(build.job.status, JobStatus::Failed, "{build:?}");
    assert!(
        build.job.error.as_deref().is_some_and(|e| !e.is_empty()),
        "{build:?}"
    );
    assert!(build.job.completed_at.is_some(), "{build:?}");
    assert_eq!(build.template_version_id, failing.id);
    let got = client.workspace(ws.id).await.unwrap();
    assert_eq!(got.latest_build.id, build.id);
    assert_eq!(got.latest_build.status, WorkspaceBuildStatus::Failed);

    // The previous version still builds.
    let request = CreateWorkspaceBuildRequest {
        template_version_id: Some(ws.latest_build.template_version_id),
        ..CreateWorkspaceBuildRequest::transition(Transition::Start)
    };
    let retry = client.create_workspace_build(ws.id, &request).await.unwrap();
    assert_eq!(
        wait_build(&client, retry.id).await.status,
        WorkspaceBuildStatus::Running
    );
}

/// Bulk archive: by default only failed, unused versions; `all` every unused one.
async fn contract_archive_unused(t: &Target) {
    let client = t.client();
    let tpl = template(t, &client, &unique("tpl")).await;
    let failed = t.failing_import(&client, tpl.id).await;
    let unused = import(t, &client, Some(tpl.id)).await;
    let archived = client
        .archive_unused_template_versions(tpl.id, false)
        .await
        .unwrap();
    assert_eq!(archived.template_id, tpl.id);
    assert_eq!(archived.archived_ids, vec![failed.id]);
    let archived = client
        .archive_unused_template_versions(tpl.id, true)
        .await
        .unwrap();
    assert_eq!(archived.archived_ids, vec![unused.id]);
    let listed: Vec<(Uuid, bool)> = client
        .template_versions(tpl.id, true)
        .await
        .unwrap()
        .iter()
        .map(|v| (v.id, v.archived))
        .collect();
    assert_eq!(
        listed,
        vec![
            (tpl.active_version_id, false),
            (failed.id, true),
            (unused.id, true)
        ]
    );
}

/// 409: a template or a workspace with an existing name.
async fn contract_error_409(t: &Target) {
    let client = t.client();
    let name = unique("tpl");
    let existing = template(t, &client, &name).await;
    let version = import(t, &client, None).await;
    let err = client
        .create_template(
            "default",
            &CreateTemplateRequest {
                name: name.clone(),
                template_version_id: version.id,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert_eq!(
        err.message(),
        format!(
            "Template with name {name:?} already exists. [name: This value is already in use and should be unique.]"
        )
    );

    let ws_name = unique("ws");
    let request = CreateWorkspaceRequest {
        template_id: Some(existing.id),
        name: ws_name.clone(),
        ..CreateWorkspaceRequest::default()
    };
    let ws = client.create_workspace("me", &request).await.unwrap();
    let err = client.create_workspace("me", &request).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert_eq!(
        err.message(),
        format!(
            "Workspace {ws_name:?} already exists. [name: This value is already in use and should be unique.]"
        )
    );
    wait_build(&client, ws.latest_build.id).await;

    // A version name is unique within its template.
    let file = client
        .upload_file(ArchiveKind::Tar, t.echo_template())
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    request.template_id = Some(existing.id);
    request.name = unique("v");
    let named = client.create_template_version("default", &request).await.unwrap();
    assert_eq!(named.name, request.name);
    let err = client
        .create_template_version("default", &request)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert_eq!(
        err.message(),
        format!(
            "A template version with name {:?} already exists for this template. [name: This value is already in use and should be unique.]",
            request.name
        )
    );
    wait_version(&client, named.id).await;
}

/// The premium routes of [`PREMIUM_ONLY`]: simulated by the test server, `Route not found.` on open-source
/// Coder (which the client reports as "not supported", never as a missing object).
async fn contract_premium_routes(t: &Target) {
    let client = t.client();
    let acl_template = template(t, &client, &unique("prem")).await;
    let results: Vec<(&str, Result<(), Error>)> = vec![
        ("entitlements", client.entitlements().await.map(drop)),
        ("licenses", client.licenses().await.map(drop)),
        (
            "provisionerkeys",
            client.provisioner_keys("default").await.map(drop),
        ),
        (
            "workspaceproxies",
            client.workspace_proxy("primary").await.map(drop),
        ),
        ("groups", client.groups("default").await.map(drop)),
        (
            "groups/{group}",
            client.group_by_name("default", "Everyone").await.map(drop),
        ),
        (
            "templates/{template}/acl",
            client.template_acl(acl_template.id).await.map(drop),
        ),
        ("ai-gateway/keys", client.ai_gateway_keys().await.map(drop)),
        ("ai/providers", client.ai_providers().await.map(drop)),
    ];
    assert_eq!(results.len(), PREMIUM_ONLY.len());
    for (route, result) in results {
        if t.simulates_premium() {
            result.unwrap_or_else(|e| panic!("{route}: {e:?}"));
        } else {
            let err = result.expect_err(route);
            assert!(err.is_route_not_found(), "{route}: {err:?}");
            assert!(!err.is_not_found(), "{route}: {err:?}");
            assert_eq!(err.status(), Some(404), "{route}");
            assert_eq!(err.message(), "Route not found.", "{route}");
        }
    }
}

/// What CoderTemplateTest reads and sends: a version by name, the organization's members, the newest builds, a
/// deleted workspace with `include_deleted` (by ID and by owner and name), and a refused cancel.
async fn contract_template_test_calls(t: &Target) {
    let client = t.client();
    let (template, ws) = workspace(t, &client).await;
    let version = client.template_version(template.active_version_id).await.unwrap();
    let by_name = client
        .template_version_by_name(template.id, &version.name)
        .await
        .unwrap();
    assert_eq!(by_name.id, version.id);
    let err = client
        .template_version_by_name(template.id, &unique("nov"))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let me = client.me().await.unwrap();
    let member = t.client_as(&t.member_token().await).me().await.unwrap();
    let members = client
        .organization_members(&t.organization_id.to_string())
        .await
        .unwrap();
    let listed = members.iter().find(|m| m.user_id == member.id).unwrap();
    assert_eq!(listed.organization_id, t.organization_id);
    // Coder leaves system users out of the list: the test server's owner is one (the operator), real Coder's is not.
    let mine = members.iter().find(|m| m.user_id == me.id);
    if matches!(t.backend, Backend::Real(_)) {
        assert_eq!(mine.unwrap().organization_id, t.organization_id);
    } else {
        assert!(mine.is_none(), "a system user is listed: {members:?}");
    }
    let stop = client
        .create_workspace_build(ws.id, &CreateWorkspaceBuildRequest::transition(Transition::Stop))
        .await
        .unwrap();
    wait_build(&client, stop.id).await;
    let newest: Vec<Uuid> = client
        .newest_workspace_builds(ws.id, 1)
        .await
        .unwrap()
        .iter()
        .map(|b| b.id)
        .collect();
    assert_eq!(newest, vec![stop.id]);
    let delete = client
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest::transition(Transition::Delete),
        )
        .await
        .unwrap();
    let delete = wait_build(&client, delete.id).await;
    let gone = client.workspace_including_deleted(ws.id).await.unwrap();
    assert_eq!(gone.id, ws.id);
    assert_eq!(gone.latest_build.id, delete.id);
    assert_eq!(gone.latest_build.transition, Transition::Delete);
    assert_eq!(gone.latest_build.job.status, JobStatus::Succeeded);
    let by_owner = client
        .workspace_by_owner_and_name_including_deleted("me", &ws.name)
        .await
        .unwrap();
    assert_eq!(by_owner.id, ws.id);
    // The builds of a deleted workspace stay readable (the ownership proof reads them).
    let builds = client.newest_workspace_builds(ws.id, 100).await.unwrap();
    assert_eq!(builds.len(), 3);
    let err = client
        .cancel_workspace_build(delete.id, "running")
        .await
        .unwrap_err();
    assert!(err.status().is_some_and(|s| (400..500).contains(&s)), "{err:?}");
}

// ---------------------------------------------------------------------------------------------------------
// Workspace settings and rich parameters (the aggregated API's `coderworkspaces` writes)
// ---------------------------------------------------------------------------------------------------------

/// A template archive with the rich parameters of `EchoTemplate::WithParameters`: real Coder replays echotar's
/// responses (and evaluates its `main.tf`); the test server reads the parameters from the `main.tf`.
fn parameters_template(t: &Target) -> Bytes {
    match &t.backend {
        Backend::Real(coder) => Bytes::from(coder.echo_template(EchoTemplate::WithParameters).unwrap()),
        Backend::TestServer(_) => tar_with(
            "main.tf",
            coder_k8s_testenv::coder::WITH_PARAMETERS_MAIN_TF.as_bytes(),
        ),
    }
}

/// A new template with the rich parameters of [`parameters_template`].
async fn parameters_template_of(t: &Target, client: &CoderClient) -> Template {
    let file = client
        .upload_file(ArchiveKind::Tar, parameters_template(t))
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    let version = client.create_template_version("default", &request).await.unwrap();
    let version = wait_version(client, version.id).await;
    assert_eq!(version.job.status, JobStatus::Succeeded, "{version:?}");
    client
        .create_template(
            "default",
            &CreateTemplateRequest {
                name: unique("params"),
                template_version_id: version.id,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap()
}

/// The values of a build, sorted by name (Coder keeps no order).
async fn build_values(client: &CoderClient, build: Uuid) -> Vec<(String, String)> {
    let mut values: Vec<(String, String)> = client
        .workspace_build_parameters(build)
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.name, p.value))
        .collect();
    values.sort();
    values
}

fn values(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

fn rich(name: &str, value: &str) -> RichParameterValue {
    RichParameterValue {
        name: name.to_owned(),
        value: value.to_owned(),
    }
}

/// `PUT /workspaces/{id}/ttl`: whole minutes are kept, `null` turns autostop off, and out-of-range values are a 400
/// naming `ttl_ms`.
async fn contract_workspace_ttl(t: &Target) {
    let client = t.client();
    let (_, ws) = workspace(t, &client).await;
    let ttl = |ms: Option<i64>| UpdateWorkspaceTtlRequest { ttl_ms: ms };
    client
        .update_workspace_ttl(ws.id, &ttl(Some(28_800_000)))
        .await
        .unwrap();
    assert_eq!(client.workspace(ws.id).await.unwrap().ttl_ms, Some(28_800_000));
    client
        .update_workspace_ttl(ws.id, &ttl(Some(90_500)))
        .await
        .unwrap();
    assert_eq!(client.workspace(ws.id).await.unwrap().ttl_ms, Some(60_000));
    client.update_workspace_ttl(ws.id, &ttl(None)).await.unwrap();
    assert_eq!(client.workspace(ws.id).await.unwrap().ttl_ms, None);
    client
        .update_workspace_ttl(ws.id, &ttl(Some(3_600_000)))
        .await
        .unwrap();
    client.update_workspace_ttl(ws.id, &ttl(Some(0))).await.unwrap();
    assert_eq!(client.workspace(ws.id).await.unwrap().ttl_ms, None);
    for (ms, detail) in [
        (59_999, "time until shutdown must be at least one minute"),
        (-60_000, "time until shutdown must be at least one minute"),
        (
            30 * 24 * 3_600_000 + 60_000,
            "time until shutdown must be less than 30 days",
        ),
    ] {
        let err = client
            .update_workspace_ttl(ws.id, &ttl(Some(ms)))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
        assert_eq!(
            err.message(),
            format!("Error updating workspace time until shutdown. [ttl_ms: {detail}]")
        );
    }
    assert_eq!(client.workspace(ws.id).await.unwrap().ttl_ms, None);
    let err = client
        .update_workspace_ttl(Uuid::new_v4(), &ttl(None))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

/// `PUT /workspaces/{id}/autostart`: the schedule is stored as sent, no schedule turns autostart off, and a bad
/// schedule is a 400 with the cron parser's reason; a create checks it the same way.
async fn contract_workspace_autostart(t: &Target) {
    let client = t.client();
    let (template, ws) = workspace(t, &client).await;
    let schedule = |s: Option<&str>| UpdateWorkspaceAutostartRequest {
        schedule: s.map(str::to_owned),
    };
    for set in ["CRON_TZ=Europe/Berlin 30 8 * * 1-5", "0 9 * * MON"] {
        client
            .update_workspace_autostart(ws.id, &schedule(Some(set)))
            .await
            .unwrap();
        assert_eq!(
            client
                .workspace(ws.id)
                .await
                .unwrap()
                .autostart_schedule
                .as_deref(),
            Some(set)
        );
    }
    client
        .update_workspace_autostart(ws.id, &schedule(None))
        .await
        .unwrap();
    assert_eq!(client.workspace(ws.id).await.unwrap().autostart_schedule, None);
    client
        .update_workspace_autostart(ws.id, &schedule(Some("0 9 * * 1")))
        .await
        .unwrap();
    client
        .update_workspace_autostart(ws.id, &schedule(Some("")))
        .await
        .unwrap();
    assert_eq!(client.workspace(ws.id).await.unwrap().autostart_schedule, None);
    for (bad, detail) in [
        (
            "0 9 * *",
            "validate weekly schedule: expected schedule to consist of 5 fields with an optional CRON_TZ=<timezone> prefix",
        ),
        (
            "60 9 * * 1",
            "parse schedule: end of range (60) above maximum (59): 60",
        ),
        (
            "CRON_TZ=Mars/Olympus 0 9 * * 1",
            "parse schedule: provided bad location Mars/Olympus: unknown time zone Mars/Olympus",
        ),
        (
            "0 9 1 * 1",
            "validate weekly schedule: expected day-of-month and month to be *",
        ),
    ] {
        let err = client
            .update_workspace_autostart(ws.id, &schedule(Some(bad)))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
        assert_eq!(
            err.message(),
            format!("Invalid autostart schedule. [schedule: {detail}]")
        );
    }
    let err = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: unique("ws"),
                autostart_schedule: Some("0 25 * * 1".to_owned()),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
    assert_eq!(
        err.message(),
        "Invalid Autostart Schedule. [schedule: parse schedule: end of range (25) above maximum (23): 25]"
    );
}

/// `PUT /workspaces/{id}/autoupdates`: `always` or `never`, anything else a 400.
async fn contract_workspace_automatic_updates(t: &Target) {
    let client = t.client();
    let (_, ws) = workspace(t, &client).await;
    assert_eq!(ws.automatic_updates, "never");
    let updates = |value: &str| UpdateWorkspaceAutomaticUpdatesRequest {
        automatic_updates: value.to_owned(),
    };
    client
        .update_workspace_automatic_updates(ws.id, &updates("always"))
        .await
        .unwrap();
    assert_eq!(client.workspace(ws.id).await.unwrap().automatic_updates, "always");
    let err = client
        .update_workspace_automatic_updates(ws.id, &updates("sometimes"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
    assert_eq!(
        err.message(),
        "Invalid request [automatic_updates: must be always or never]"
    );
    client
        .update_workspace_automatic_updates(ws.id, &updates("never"))
        .await
        .unwrap();
    assert_eq!(client.workspace(ws.id).await.unwrap().automatic_updates, "never");
}

/// Rich parameters: a template version lists them; a create stores every value (defaults too); a build keeps the
/// values it does not name; an immutable one cannot change; unknown names are dropped.
async fn contract_rich_parameters(t: &Target) {
    let client = t.client();
    let template = parameters_template_of(t, &client).await;
    let parameters = client
        .template_version_rich_parameters(template.active_version_id)
        .await
        .unwrap();
    let described: Vec<(&str, &str, bool, &str, bool)> = parameters
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.type_.as_str(),
                p.mutable,
                p.default_value.as_str(),
                p.required,
            )
        })
        .collect();
    assert_eq!(
        described,
        vec![
            ("region", "string", true, "eu-west", false),
            ("cpus", "number", true, "2", false),
            ("disk", "string", false, "small", false),
            ("api_key", "string", true, "none", false),
        ]
    );
    let options: Vec<&str> = parameters[0].options.iter().map(|o| o.value.as_str()).collect();
    assert_eq!(options, ["eu-west", "us-east"]);
    assert_eq!(
        (parameters[1].validation_min, parameters[1].validation_max),
        (Some(1), Some(8))
    );

    let ws = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: unique("ws"),
                rich_parameter_values: vec![rich("region", "us-east"), rich("api_key", "s3cr3t-value")],
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap();
    let first = wait_build(&client, ws.latest_build.id).await;
    assert_eq!(first.status, WorkspaceBuildStatus::Running, "{first:?}");
    assert_eq!(
        build_values(&client, first.id).await,
        values(&[
            ("api_key", "s3cr3t-value"),
            ("cpus", "2"),
            ("disk", "small"),
            ("region", "us-east")
        ])
    );

    // A stop build with one new value keeps the others; the next start without values keeps them all.
    let stop = client
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                rich_parameter_values: vec![rich("cpus", "4")],
                ..CreateWorkspaceBuildRequest::transition(Transition::Stop)
            },
        )
        .await
        .unwrap();
    wait_build(&client, stop.id).await;
    let changed = values(&[
        ("api_key", "s3cr3t-value"),
        ("cpus", "4"),
        ("disk", "small"),
        ("region", "us-east"),
    ]);
    assert_eq!(build_values(&client, stop.id).await, changed);
    let start = client
        .create_workspace_build(ws.id, &CreateWorkspaceBuildRequest::transition(Transition::Start))
        .await
        .unwrap();
    wait_build(&client, start.id).await;
    assert_eq!(build_values(&client, start.id).await, changed);

    // The immutable parameter keeps its first value; the same value again is fine.
    let immutable = CreateWorkspaceBuildRequest {
        rich_parameter_values: vec![rich("disk", "large")],
        ..CreateWorkspaceBuildRequest::transition(Transition::Start)
    };
    let err = client
        .create_workspace_build(ws.id, &immutable)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
    assert_eq!(
        err.message(),
        "Unable to validate parameters [disk: Immutable parameter changed; Parameter \"disk\" is not mutable, so it can't be updated after creating a workspace.]"
    );
    // Values that are not parameters of the version are dropped.
    let same = client
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                rich_parameter_values: vec![rich("disk", "small"), rich("nope", "x")],
                ..CreateWorkspaceBuildRequest::transition(Transition::Start)
            },
        )
        .await
        .unwrap();
    wait_build(&client, same.id).await;
    assert_eq!(build_values(&client, same.id).await, changed);

    // A value that is not an option, and a number out of bounds, are refused with the value in the reason.
    let option = "Value must be a valid option";
    let bounds = "Invalid parameter value according to 'validation' block";
    for (name, value, reason) in [
        (
            "region",
            "mars",
            format!("{option}; the value \"mars\" must be defined as one of options"),
        ),
        (
            "region",
            "",
            format!(
                "{option}. The value is empty, did you forget to set it with a default or from user input?; the value \"\" must be defined as one of options"
            ),
        ),
        (
            "cpus",
            "9",
            format!("{bounds}; value 9 is more than the maximum 8"),
        ),
        (
            "cpus",
            "0",
            format!("{bounds}; value 0 is less than the minimum 1"),
        ),
        ("cpus", "2.5", format!("{bounds}; value \"2.5\" is not a number")),
    ] {
        let err = client
            .create_workspace_build(
                ws.id,
                &CreateWorkspaceBuildRequest {
                    rich_parameter_values: vec![rich(name, value)],
                    ..CreateWorkspaceBuildRequest::transition(Transition::Start)
                },
            )
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
        assert_eq!(
            err.message(),
            format!("Unable to validate parameters [{name}: {reason}]")
        );
    }
    // An error never repeats a value the caller asked to keep out of it.
    let err = client
        .create_workspace_build_redacting(
            ws.id,
            &CreateWorkspaceBuildRequest {
                rich_parameter_values: vec![rich("region", "top-secret-region")],
                ..CreateWorkspaceBuildRequest::transition(Transition::Start)
            },
            &["top-secret-region"],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 400, .. }), "{err:?}");
    assert!(
        err.message()
            .starts_with("Unable to validate parameters [region: Value must be a valid option; the value "),
        "{}",
        err.message()
    );
    assert!(!err.message().contains("top-secret"), "{}", err.message());
    assert!(!format!("{err:?}").contains("top-secret"), "{err:?}");
}

// ---------------------------------------------------------------------------------------------------------
// Template access lists, version inputs and user lookups (the aggregated API's `codertemplates` settings)
// ---------------------------------------------------------------------------------------------------------

/// The variables of [`variables_template`]: a plain one with a default, a plain one with another, and a sensitive
/// required one.
const VARIABLES: [EchoVariable; 3] = [
    EchoVariable {
        name: "region",
        default: Some("eu-west"),
        sensitive: false,
    },
    EchoVariable {
        name: "size",
        default: Some("small"),
        sensitive: false,
    },
    EchoVariable {
        name: "token",
        default: None,
        sensitive: true,
    },
];

/// An archive whose source declares [`VARIABLES`]: real Coder's echo provisioner reads them from the replayed parse
/// answer, the test server from the archive's `main.tf`.
fn variables_template(t: &Target) -> Bytes {
    let echo = match &t.backend {
        Backend::Real(coder) => coder.echo_template(EchoTemplate::Success).unwrap(),
        Backend::TestServer(_) => coder_k8s_testenv::one_file_tar("README.md", b"echo\n"),
    };
    Bytes::from(echo_with_variables(&echo, &VARIABLES))
}

/// A version of [`variables_template`] with `values`, `tags` and `message`, its import followed to its end.
async fn version_with(
    t: &Target,
    client: &CoderClient,
    values: &[(&str, &str)],
    tags: &[(&str, &str)],
    message: &str,
) -> TemplateVersion {
    let file = client
        .upload_file(ArchiveKind::Tar, variables_template(t))
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    request.message = message.to_owned();
    request.tags = tags
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    request.user_variable_values = values
        .iter()
        .map(|(name, value)| VariableValue {
            name: (*name).to_owned(),
            value: Secret::new(*value),
        })
        .collect();
    let version = client.create_template_version("default", &request).await.unwrap();
    wait_version(client, version.id).await
}

/// Version create with provisioner tags and variable values: Coder drops tags with an empty value and adds `scope`
/// and `owner`; the import stores each declared variable with the given value or its default, redacts a sensitive
/// one, ignores values for variables the source does not declare, and fails naming a required variable left
/// without a value. The message is kept byte for byte.
async fn contract_template_version_inputs(t: &Target) {
    let client = t.client();
    let message = "release notes\n\ncoder-k8s-variable-from: token=db/key";
    let version = version_with(
        t,
        &client,
        &[
            ("region", "us-east"),
            ("token", "s3cr3t-value"),
            ("undeclared", "x"),
        ],
        &[("scope", "organization"), ("empty", "")],
        message,
    )
    .await;
    assert_eq!(version.job.status, JobStatus::Succeeded, "{version:?}");
    assert_eq!(version.message, message);
    assert_eq!(
        version.job.tags,
        BTreeMap::from([
            ("owner".to_owned(), String::new()),
            ("scope".to_owned(), "organization".to_owned()),
        ])
    );
    let mut variables = client.template_version_variables(version.id).await.unwrap();
    variables.sort_by(|a, b| a.name.cmp(&b.name));
    let shown: Vec<(&str, &str, &str, bool, bool)> = variables
        .iter()
        .map(|v| {
            (
                v.name.as_str(),
                v.value.as_str(),
                v.default_value.as_str(),
                v.required,
                v.sensitive,
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("region", "us-east", "eu-west", false, false),
            ("size", "small", "small", false, false),
            ("token", "*redacted*", "*redacted*", true, true),
        ]
    );
    assert!(variables.iter().all(|v| v.type_ == "string"), "{variables:?}");

    let missing = version_with(t, &client, &[("region", "us-east")], &[], "").await;
    assert_eq!(missing.job.status, JobStatus::Failed, "{missing:?}");
    assert_eq!(
        missing.job.error_code.as_deref(),
        Some("REQUIRED_TEMPLATE_VARIABLES")
    );
    let error = missing.job.error.clone().unwrap_or_default();
    assert!(
        error.contains("required template variables need values: token"),
        "{error}"
    );
}

/// The template access list: premium (Template RBAC), simulated by the test server with the feature licensed,
/// `Route not found.` on open-source Coder. A new template gives the Everyone group `use` (unless the create asks
/// not to); an update merges (a role of `""` removes, entries left out stay); Coder's validation names each bad
/// entry; the group list is Coder's `group` field; a group is found by its exact name only.
async fn contract_template_acl(t: &Target) {
    let client = t.client();
    let tpl = template(t, &client, &unique("acl")).await;
    if !t.simulates_premium() {
        for result in [
            client.template_acl(tpl.id).await.map(drop),
            client
                .update_template_acl(tpl.id, &UpdateTemplateAcl::default())
                .await,
            client.group_by_name("default", "Everyone").await.map(drop),
        ] {
            let err = result.unwrap_err();
            assert!(err.is_route_not_found(), "{err:?}");
        }
        return;
    }
    let acl = client.template_acl(tpl.id).await.unwrap();
    let everyone = client.group_by_name("default", "Everyone").await.unwrap();
    assert_eq!(
        everyone.id, t.organization_id,
        "Everyone's ID is the organization's"
    );
    assert_eq!(acl.users, []);
    assert_eq!(
        acl.groups,
        [TemplateAclGroup {
            id: everyone.id,
            name: "Everyone".to_owned(),
            role: "use".to_owned(),
        }]
    );
    let err = client.group_by_name("default", "everyone").await.unwrap_err();
    assert!(err.is_not_found(), "exact names only: {err:?}");

    let member = t.client_as(&t.member_token().await).me().await.unwrap();
    let grant = UpdateTemplateAcl {
        user_perms: BTreeMap::from([(member.id, "admin".to_owned())]),
        group_perms: BTreeMap::new(),
    };
    client.update_template_acl(tpl.id, &grant).await.unwrap();
    let acl = client.template_acl(tpl.id).await.unwrap();
    assert_eq!(
        acl.users,
        [TemplateAclUser {
            id: member.id,
            username: member.username.clone(),
            role: "admin".to_owned(),
        }]
    );
    assert_eq!(acl.groups.len(), 1, "entries left out stay: {acl:?}");
    let remove = UpdateTemplateAcl {
        user_perms: BTreeMap::new(),
        group_perms: BTreeMap::from([(everyone.id, String::new())]),
    };
    client.update_template_acl(tpl.id, &remove).await.unwrap();
    let acl = client.template_acl(tpl.id).await.unwrap();
    assert_eq!((acl.users.len(), acl.groups.len()), (1, 0), "{acl:?}");

    let answer = patch_acl(
        t,
        tpl.id,
        &json!({"user_perms": {"not-a-uuid": "use", member.id.to_string(): "owner"}}),
    )
    .await;
    assert_eq!(answer.status(), 400);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["message"], "Invalid request to update template ACL");
    let mut details: Vec<String> = body["validations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            format!(
                "{}: {}",
                v["field"].as_str().unwrap(),
                v["detail"].as_str().unwrap()
            )
        })
        .collect();
    details.sort();
    assert_eq!(
        details,
        [
            "user_perms: not-a-uuid is not a valid UUID.",
            "user_perms: role \"owner\" is not a valid template role",
        ]
    );
    let ghost = Uuid::new_v4();
    let err = client
        .update_template_acl(
            tpl.id,
            &UpdateTemplateAcl {
                user_perms: BTreeMap::from([(ghost, "use".to_owned())]),
                group_perms: BTreeMap::new(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(400), "{err:?}");
    assert!(
        err.message()
            .contains(&format!("user with ID {ghost} does not exist")),
        "{err:?}"
    );
    // Removing an entry that does not exist is not checked.
    client
        .update_template_acl(
            tpl.id,
            &UpdateTemplateAcl {
                user_perms: BTreeMap::from([(ghost, String::new())]),
                group_perms: BTreeMap::new(),
            },
        )
        .await
        .unwrap();

    // A create can leave the Everyone group out.
    let version = import(t, &client, None).await;
    let private = client
        .create_template(
            "default",
            &CreateTemplateRequest {
                name: unique("private"),
                template_version_id: version.id,
                disable_everyone_group_access: true,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        client.template_acl(private.id).await.unwrap(),
        TemplateAcl::default()
    );
}

/// `PATCH /api/v2/templates/{id}/acl` with a raw body, answered as sent back.
async fn patch_acl(t: &Target, id: Uuid, body: &serde_json::Value) -> reqwest::Response {
    reqwest::Client::new()
        .patch(t.url.join(&format!("api/v2/templates/{id}/acl")).unwrap())
        .header("Coder-Session-Token", &t.token)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// A user by username, as the access list resolves names: Coder finds a username in any casing (answering its own
/// spelling) and answers 400 for one it does not know.
async fn contract_user_lookups(t: &Target) {
    let client = t.client();
    let member = t.client_as(&t.member_token().await).me().await.unwrap();
    let found = client.user(&member.username).await.unwrap();
    assert_eq!(
        (found.id, found.username.as_str()),
        (member.id, member.username.as_str())
    );
    let upper = client.user(&member.username.to_uppercase()).await.unwrap();
    assert_eq!(upper.username, member.username);
    let err = client.user(&unique("nobody")).await.unwrap_err();
    assert_eq!(err.status(), Some(400), "{err:?}");
    assert!(
        err.message()
            .starts_with("\"user\" must be an existing uuid or username."),
        "{err:?}"
    );
}

/// The start of an error's message (the client appends Coder's detail after `: `).
fn assert_refused(err: &Error, status: u16, message: &str) {
    assert_eq!(err.status(), Some(status), "{err:?}");
    assert!(err.message().starts_with(message), "{err:?}");
}

/// The writes of an existing user the aggregated API sends: profile, site roles, status, organization membership and
/// its roles, each read back; and Coder's refusals of the caller's own roles, status and membership.
async fn contract_user_writes(t: &Target) {
    let client = t.client();
    let member = t.client_as(&t.member_token().await).me().await.unwrap();
    let (id, org) = (member.id.to_string(), t.organization_id.to_string());

    let profile = UpdateUserProfileRequest {
        username: member.username.clone(),
        name: "Carol Contract".to_owned(),
    };
    let updated = client.update_user_profile(&id, &profile).await.unwrap();
    assert_eq!(
        (updated.username.as_str(), updated.name.as_str()),
        (member.username.as_str(), "Carol Contract")
    );
    let roles = UpdateRoles {
        roles: vec!["auditor".to_owned()],
    };
    let updated = client.update_user_roles(&id, &roles).await.unwrap();
    assert!(updated.has_role("auditor"), "{:?}", updated.roles);
    let err = client
        .update_user_roles(
            &id,
            &UpdateRoles {
                roles: vec!["no-such-role".to_owned()],
            },
        )
        .await
        .unwrap_err();
    assert_refused(&err, 400, "\"no-such-role\" is not a supported role");

    assert_eq!(
        client.set_user_suspended(&id, true).await.unwrap().status,
        "suspended"
    );
    assert_eq!(client.user(&id).await.unwrap().status, "suspended");
    assert_eq!(
        client.set_user_suspended(&id, false).await.unwrap().status,
        "active"
    );

    let org_roles = UpdateRoles {
        roles: vec!["organization-auditor".to_owned()],
    };
    client.update_member_roles(&org, &id, &org_roles).await.unwrap();
    let held = client.user_roles(&id).await.unwrap();
    assert_eq!(
        held.organization_roles[&t.organization_id],
        ["organization-auditor"]
    );
    let err = client.add_organization_member(&org, &id).await.unwrap_err();
    assert_refused(&err, 400, "User is already an organization member");
    client.remove_organization_member(&org, &id).await.unwrap();
    let members = client.organization_members(&org).await.unwrap();
    assert!(members.iter().all(|m| m.user_id != member.id), "{members:?}");
    client.add_organization_member(&org, &id).await.unwrap();
    let held = client.user_roles(&id).await.unwrap();
    assert_eq!(
        held.organization_roles[&t.organization_id],
        Vec::<String>::new(),
        "a new membership has no roles"
    );

    // The caller's own roles, status and membership are Coder's to refuse.
    let me = client.me().await.unwrap().id.to_string();
    let err = client.update_user_roles(&me, &roles).await.unwrap_err();
    assert_refused(&err, 400, "You cannot change your own roles.");
    let err = client.set_user_suspended(&me, true).await.unwrap_err();
    assert_refused(&err, 400, "You cannot suspend yourself.");
    let err = client.remove_organization_member(&org, &me).await.unwrap_err();
    assert_refused(&err, 400, "cannot remove self from an organization");
}

/// A user's life as the aggregated API drives it: created with a password in the target's organization (dormant,
/// login type `password`), signed in with that password (the session key works and the user is then active), created
/// without a password and suspended, deleted (a lookup by name is then Coder's 400, one by ID still finds it) and
/// created again under the same name; and Coder's refusals: a taken user name, no organization, a password with login
/// type `none`, `oidc` without OIDC configured, a weak password, a plain member creating a user, deleting oneself.
async fn contract_user_lifecycle(t: &Target) {
    let client = t.client();
    let request = |username: &str, login_type: &str, password: &str| CreateUserRequest {
        email: format!("{username}@coder-k8s.test"),
        username: username.to_owned(),
        name: String::new(),
        password: Secret::new(password),
        login_type: login_type.to_owned(),
        user_status: None,
        organization_ids: vec![t.organization_id],
    };
    let password = format!("Pw-{}", Uuid::new_v4().simple());
    let username = unique("life");
    let created = client
        .create_user(&request(&username, "password", &password))
        .await
        .unwrap();
    assert_eq!(
        (
            created.username.as_str(),
            created.status.as_str(),
            created.login_type.as_str()
        ),
        (username.as_str(), "dormant", "password")
    );
    assert_eq!(created.organization_ids, vec![t.organization_id]);
    assert!(created.roles.is_empty(), "{:?}", created.roles);
    assert_eq!(
        created.last_seen_at, "0001-01-01T00:00:00Z",
        "never seen: Go's zero time"
    );
    let read = client.user(&username).await.unwrap();
    assert_eq!(
        (read.id, read.status.as_str(), read.login_type.as_str()),
        (created.id, "dormant", "password")
    );
    let session = client
        .login_with_password(&LoginWithPasswordRequest {
            email: created.email.to_uppercase(),
            password: Secret::new(password.as_str()),
        })
        .await
        .unwrap();
    let me = t.client_as(session.session_token.expose()).me().await.unwrap();
    assert_eq!(
        (me.id, me.status.as_str()),
        (created.id, "active"),
        "signing in activates"
    );
    let err = client
        .login_with_password(&LoginWithPasswordRequest {
            email: created.email.clone(),
            password: Secret::new("Wrong-password-1!"),
        })
        .await
        .unwrap_err();
    assert_refused(&err, 401, "Incorrect email or password.");

    let err = client
        .create_user(&request(&username.to_uppercase(), "none", ""))
        .await
        .unwrap_err();
    assert_refused(&err, 409, "User already exists.");
    let other = unique("refused");
    let mut no_organization = request(&other, "none", "");
    no_organization.organization_ids.clear();
    let err = client.create_user(&no_organization).await.unwrap_err();
    assert_refused(
        &err,
        400,
        "No organization specified to place the user as a member of. It is required to specify at least one \
         organization id to place the user in.: required at least 1 value for the array 'organization_ids'",
    );
    let err = client
        .create_user(&request(&other, "none", &password))
        .await
        .unwrap_err();
    assert_refused(
        &err,
        400,
        "Password cannot be set for non-password (\"none\") authentication.",
    );
    let err = client
        .create_user(&request(&other, "oidc", ""))
        .await
        .unwrap_err();
    assert_refused(&err, 400, "You must configure OIDC before creating OIDC users.");
    let err = client
        .create_user(&request(&other, "password", "password"))
        .await
        .unwrap_err();
    assert_refused(&err, 400, "Password is invalid");
    let member = t.client_as(&t.member_token().await);
    let err = member
        .create_user(&request(&other, "none", ""))
        .await
        .unwrap_err();
    assert_refused(&err, 403, "You are not authorized to create users.");
    let err = client.user(&other).await.unwrap_err();
    assert_refused(&err, 400, "\"user\" must be an existing uuid or username.");

    let suspended_name = unique("parked");
    let mut suspended = request(&suspended_name, "none", "");
    suspended.user_status = Some("suspended".to_owned());
    let parked = client.create_user(&suspended).await.unwrap();
    assert_eq!(
        (parked.status.as_str(), parked.login_type.as_str()),
        ("suspended", "none")
    );
    assert_eq!(client.user(&suspended_name).await.unwrap().status, "suspended");

    client.delete_user(&parked.id.to_string()).await.unwrap();
    let err = client.user(&suspended_name).await.unwrap_err();
    assert_refused(
        &err,
        400,
        &format!("\"user\" must be an existing uuid or username.: queried user={suspended_name:?}"),
    );
    // Coder's lookup by ID (`GetUserByID`) still finds the deleted row.
    assert_eq!(client.user(&parked.id.to_string()).await.unwrap().id, parked.id);
    assert!(client.users().await.unwrap().iter().all(|u| u.id != parked.id));
    let again = client
        .create_user(&request(&suspended_name, "none", ""))
        .await
        .unwrap();
    assert_ne!(again.id, parked.id);
    assert_eq!(
        (again.status.as_str(), again.login_type.as_str()),
        ("dormant", "none")
    );

    let err = client.delete_user("me").await.unwrap_err();
    assert_refused(&err, 403, "You cannot delete yourself!");
    for id in [created.id, again.id] {
        client.delete_user(&id.to_string()).await.unwrap();
    }
}

/// Two tests per contract: `<contract>::test_server` and `<contract>::real_coder`.
macro_rules! contracts {
    ($($name:ident => $contract:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn test_server() {
                super::$contract(&super::Target::test_server().await).await;
            }

            #[tokio::test]
            async fn real_coder() {
                super::$contract(&super::Target::real().await).await;
            }
        }
    )*};
}

/// The organization's provisioner jobs (the build queue an autoscaler reads): a version tagged with a queue no daemon
/// serves waits, pending, with the tags Coder stored; the status filter, the tag rule a daemon applies, and the 404 a
/// plain member gets are the same on both servers. (The test server's simulated daemon serves every tag, so it is
/// told that none has this one, as on real Coder.)
async fn contract_provisioner_jobs(t: &Target) {
    let client = t.client();
    let queue = unique("queue");
    if let Backend::TestServer(server) = &t.backend {
        server.hold_jobs_tagged("queue", &queue);
    }
    let file = client
        .upload_file(ArchiveKind::Tar, t.echo_template())
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    request.tags = BTreeMap::from([("queue".to_owned(), queue.clone())]);
    let version = client.create_template_version("default", &request).await.unwrap();
    let jobs = client
        .provisioner_jobs("default", &[JobStatus::Pending, JobStatus::Running], 1000)
        .await
        .unwrap();
    let job = jobs
        .iter()
        .find(|j| j.id == version.job.id)
        .expect("the pending import is listed");
    assert_eq!(job.status, JobStatus::Pending);
    assert_eq!(
        job.tags,
        BTreeMap::from([
            ("owner".to_owned(), String::new()),
            ("queue".to_owned(), queue.clone()),
            ("scope".to_owned(), "organization".to_owned()),
        ]),
        "Coder stores the tags with the organization scope"
    );
    let daemon = |tags: &[(&str, &str)]| {
        effective_tags(
            &tags
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    };
    assert!(daemon_takes_job(&daemon(&[("queue", &queue)]), &job.tags));
    assert!(
        !daemon_takes_job(&daemon(&[]), &job.tags),
        "an untagged daemon does not take it"
    );
    assert!(
        jobs.iter()
            .all(|j| matches!(j.status, JobStatus::Pending | JobStatus::Running)),
        "the status filter"
    );
    let done = client
        .provisioner_jobs("default", &[JobStatus::Succeeded], 1000)
        .await
        .unwrap();
    assert!(done.iter().all(|j| j.status == JobStatus::Succeeded));
    assert!(!done.iter().any(|j| j.id == job.id));

    let member = t.client_as(&t.member_token().await);
    let refused = member
        .provisioner_jobs("default", &[JobStatus::Pending], 10)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, Error::NotFound { .. }),
        "only owners and administrators see the queue: {refused:?}"
    );
    // On real Coder the job stays pending: no daemon of the shared server will ever have this queue's tag.
    if let Backend::TestServer(server) = &t.backend {
        server.release_held_jobs();
    }
}

contracts! {
    workspace_ttl => contract_workspace_ttl,
    workspace_autostart => contract_workspace_autostart,
    workspace_automatic_updates => contract_workspace_automatic_updates,
    rich_parameters => contract_rich_parameters,
    buildinfo => contract_buildinfo,
    users => contract_users,
    organizations => contract_organizations,
    files => contract_files,
    template_sources => contract_template_sources,
    templates => contract_templates,
    template_versions => contract_template_versions,
    workspaces => contract_workspaces,
    workspace_pages => contract_workspace_pages,
    builds => contract_builds,
    logs => contract_logs,
    error_400 => contract_error_400,
    error_401 => contract_error_401,
    error_403 => contract_error_403,
    member_creates_version => contract_member_creates_version,
    error_404 => contract_error_404,
    failed_build => contract_failed_build,
    archive_unused => contract_archive_unused,
    error_409 => contract_error_409,
    premium_routes => contract_premium_routes,
    template_test_calls => contract_template_test_calls,
    template_patch_resets_left_out_settings => contract_template_patch_resets_left_out_settings,
    template_full_body_update_keeps_every_setting => contract_template_full_body_update_keeps_every_setting,
    template_patch_validations => contract_template_patch_validations,
    template_version_inputs => contract_template_version_inputs,
    template_acl => contract_template_acl,
    user_lookups => contract_user_lookups,
    user_writes => contract_user_writes,
    user_lifecycle => contract_user_lifecycle,
    provisioner_jobs => contract_provisioner_jobs,
}

/// The premium list and the reference page name the same routes.
#[test]
fn premium_routes_are_documented() {
    let page = include_str!("../../../docs/reference/coder-test-server.md");
    for (method, path) in PREMIUM_ONLY {
        assert!(page.contains(&format!("`{method} {path}`")), "{method} {path}");
    }
}
