//! A faithful Coder API test server (it behaves like Coder's `coderd`): users, organizations and API tokens are
//! read from Coder's PostgreSQL tables on every request; everything else (licenses, provisioner keys,
//! workspace proxies, files, templates, workspaces, builds, AI configuration) lives in memory. A
//! simulated provisioner runs template imports and workspace builds, and faults can be injected.
//!
//! Middleware, outermost first: request recording -> fault injection -> standard headers
//! (`X-Coder-Build-Version`, `X-Content-Type-Options`) -> routes. Handlers check, in Coder's middleware
//! order, the session token (+ the rate-limit bypass header), `{organization}`, the feature gate, the
//! caller's role, and only then parse the JSON body.
//!
//! Choices the spec does not fix (test-server behaviour, not verified Coder behaviour):
//! * authorization is simplified: site role `owner` may do everything; `organization-admin` may manage
//!   its org's provisioner keys, templates, versions and MCP servers; licenses, proxies and AI providers
//!   are owner-only (403 `Forbidden.`); workspaces are visible to their owner and to owners; organization and
//!   group writes follow Coder's RBAC (organizations: owners, and for update and delete the organization's admin;
//!   groups: owners, `user-admin`, `organization-admin`, `organization-user-admin`) and refuse anyone else with
//!   the answer Coder's failed authorization gives on that route; so do the user writes (profile, status, site
//!   roles; creating and deleting users) and organization member writes, with Coder's built-in roles and who may assign which (`rbac.rs`; no
//!   custom roles);
//! * `has_license` is true when a license was uploaded or any feature is entitled/grace; uploaded
//!   licenses do not change entitlements (use `Config::entitlements` / [`TestServer::set_entitlement`]);
//! * no real rate limiter (use [`Fault::RateLimited`]); `Fault::ServerError` with a non-5xx code sends 500;
//! * a dropped connection is recorded with status 0; a 405 for a known path uses JSON
//!   `{"message":"Method not allowed."}`;
//! * texts marked unverified in the spec are best guesses: unsupported file content type (400), AI provider/MCP
//!   duplicates (409), AI Gateway key format (`cgk_` + 40 chars, prefix = first 12 chars), MCP secrets rendered as
//!   `has_<field>` booleans.
//!
//! The contract tests of the client (`crates/coder-client/tests/contract.rs`) hold the open-source calls to real
//! Coder's answers; `docs/reference/coder-test-server.md` lists what stays different.

mod auth;
mod config;
mod conn;
mod db;
mod errors;
mod faults;
mod parameters;
mod password;
mod provisioner;
mod rbac;
mod recording;
mod routes;
mod state;
mod util;
mod variables;

use std::net::SocketAddr;

use anyhow::Context as _;
use tokio::task::JoinHandle;

pub use config::{
    AgentSpec, BuildOutcome, Config, DEFAULT_BUILD_VERSION, Entitlement, FEATURE_NAMES, humanize_feature,
};
pub use faults::{Fault, FaultRule};
pub use recording::RecordedRequest;

use crate::state::{App, lock};

/// Lifetime of tokens from [`TestServer::mint_token`]: 30 days.
const MINTED_TOKEN_LIFETIME_SECONDS: i64 = 30 * 24 * 60 * 60;

/// A running test server; stops when dropped.
pub struct TestServer {
    app: App,
    url: url::Url,
    task: JoinHandle<()>,
}

impl TestServer {
    /// Binds `127.0.0.1:0` and serves until dropped.
    pub async fn start(config: Config) -> anyhow::Result<TestServer> {
        Self::start_at(config, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Binds `addr` and serves until dropped.
    pub async fn start_at(config: Config, addr: SocketAddr) -> anyhow::Result<TestServer> {
        uuid::Uuid::parse_str(&config.deployment_id).context("deployment_id must be a UUID")?;
        let db = db::Db::connect(&config.database_url)
            .await
            .context("connecting to the Coder PostgreSQL database")?;
        let app = App::new(&config, db);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let addr = listener.local_addr()?;
        *lock(&app.base_url) = format!("http://{addr}");
        let url = url::Url::parse(&format!("http://{addr}/")).context("forming the server URL")?;
        let service = routes::router(app.clone()).into_make_service_with_connect_info::<conn::ConnHandle>();
        let serve = axum::serve(conn::KillableListener(listener), service);
        let task = tokio::spawn(async move {
            if let Err(err) = serve.await {
                tracing::error!(error = %err, "coder test server stopped");
            }
        });
        Ok(TestServer { app, url, task })
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> url::Url {
        self.url.clone()
    }

    pub fn add_fault(&self, rule: FaultRule) {
        lock(&self.app.faults).push(rule);
    }

    pub fn clear_faults(&self) {
        lock(&self.app.faults).clear();
    }

    /// Every request, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.app.requests).clone()
    }

    pub fn clear_requests(&self) {
        lock(&self.app.requests).clear();
    }

    pub fn set_entitlement(&self, feature: &str, value: Entitlement) {
        lock(&self.app.entitlements).insert(feature.to_owned(), value);
    }

    /// Leaves `feature` out of `/entitlements` from now on.
    pub fn hide_feature(&self, feature: &str) {
        lock(&self.app.hidden_features).insert(feature.to_owned());
    }

    /// From now on no simulated daemon takes a job tagged `key=value`: such jobs stay pending, as in a Coder with no
    /// daemon for the tag, until [`TestServer::release_held_jobs`].
    pub fn hold_jobs_tagged(&self, key: &str, value: &str) {
        lock(&self.app.held_tags).push((key.to_owned(), value.to_owned()));
    }

    /// Lets the simulated daemons take the held jobs (they run and succeed as any other).
    pub fn release_held_jobs(&self) {
        lock(&self.app.held_tags).clear();
    }

    /// Changes the outcome of jobs started from now on.
    pub fn set_build_outcome(&self, outcome: BuildOutcome) {
        *lock(&self.app.build_outcome) = outcome;
    }

    /// The agents every successful start build reports from now on (default: one connected, ready agent).
    pub fn set_agents(&self, agents: Vec<AgentSpec>) {
        self.app.mem().agents = Some(agents);
    }

    /// The workspaces, also deleted ones, as `(name, deleted)`.
    pub fn workspaces(&self) -> Vec<(String, bool)> {
        self.app
            .mem()
            .workspaces
            .iter()
            .map(|w| (w.name.clone(), w.deleted))
            .collect()
    }

    /// Inserts an active user named `username` if missing (an existing user gets `site_roles`), makes it a
    /// member of every organization and inserts an API token (30 days); returns `<id>-<secret>`.
    pub async fn mint_token(&self, username: &str, site_roles: &[&str]) -> anyhow::Result<String> {
        self.app
            .db
            .mint_token(username, site_roles, MINTED_TOKEN_LIFETIME_SECONDS)
            .await
    }

    /// Every provisioner key in memory (all organizations), as the API renders it.
    pub fn provisioner_keys(&self) -> Vec<serde_json::Value> {
        let mem = self.app.mem();
        mem.provisioner_keys
            .iter()
            .map(routes::render_provisioner_key)
            .collect()
    }

    // --- Build logs for the aggregated API server's coderworkspaces/log tests ---

    /// Appends one log entry per `outputs` item (source `provisioner`, level `level`, stage `stage`) to the job of
    /// workspace build `build_id`, as a provisioner would, and wakes log followers. Returns `false` when there is no
    /// such build.
    pub fn append_build_logs(
        &self,
        build_id: uuid::Uuid,
        level: &'static str,
        stage: &str,
        outputs: &[String],
    ) -> bool {
        {
            let mut mem = self.app.mem();
            let Some(job_id) = mem.build(build_id).map(|b| b.job_id) else {
                return false;
            };
            for output in outputs {
                mem.push_log(job_id, "provisioner", level, stage, output);
            }
        }
        self.app.notify();
        true
    }

    /// Adds a group `name` without members to organization `organization` (listed by
    /// `GET /organizations/{org}/groups`, usable in template and MCP server access lists), as
    /// `POST /organizations/{org}/groups` would but without its checks; returns its ID.
    pub fn add_group(&self, organization: uuid::Uuid, name: &str) -> uuid::Uuid {
        let group = state::Group::new(organization, name);
        let id = group.id;
        self.app.mem().groups.push(group);
        id
    }

    /// Inserts organization `name` (no members; site owners reach it); returns its ID.
    pub async fn add_organization(&self, name: &str) -> anyhow::Result<uuid::Uuid> {
        Ok(self.app.db.insert_organization(name, name, "", "").await?)
    }

    /// Deletes organization `id` as Coder does (soft delete): it answers 404 from then on.
    pub async fn delete_organization(&self, id: uuid::Uuid) -> anyhow::Result<()> {
        self.app.db.delete_organization(id).await?;
        Ok(())
    }

    /// Every MCP server config in memory (all organizations), as the API renders it, plus its access list as
    /// `acl: {users: {id: role}, groups: {id: role}}`.
    pub fn mcp_servers(&self) -> Vec<serde_json::Value> {
        let mem = self.app.mem();
        mem.mcp_servers.iter().map(routes::render_mcp_with_acl).collect()
    }

    /// Every AI provider as stored (soft-deleted ones too), with the write-only AWS keys of its settings that the
    /// API never returns, so a test can check they were kept.
    pub fn ai_providers(&self) -> Vec<serde_json::Value> {
        self.app.mem().ai_providers.clone()
    }

    pub fn deployment_id(&self) -> String {
        self.app.deployment_id()
    }

    /// Every AI Gateway key as stored: `(id, name)`, in creation order.
    pub fn ai_gateway_keys(&self) -> Vec<(String, String)> {
        let mem = self.app.mem();
        mem.ai_gateway_keys
            .iter()
            .map(|k| {
                let text = |field: &str| k[field].as_str().unwrap_or_default().to_owned();
                (text("id"), text("name"))
            })
            .collect()
    }

    /// Changes the deployment ID `buildinfo` reports, as a new Coder database behind the same URL would.
    pub fn set_deployment_id(&self, id: &str) {
        *crate::state::lock(&self.app.deployment_id) = id.to_owned();
    }

    // Uploaded files (aggregated API, codertemplates tests).
    /// Every uploaded file, in upload order, with the content type it was sent with.
    pub fn uploaded_files(&self) -> Vec<UploadedFile> {
        let mem = self.app.mem();
        mem.files
            .iter()
            .map(|f| UploadedFile {
                id: f.id,
                content_type: f.content_type.clone(),
                data: f.data.clone(),
            })
            .collect()
    }
}

/// A file uploaded with `POST /files` (see [`TestServer::uploaded_files`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadedFile {
    pub id: uuid::Uuid,
    pub content_type: String,
    pub data: bytes::Bytes,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
