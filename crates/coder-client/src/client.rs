//! [`CoderClient`]: options, the request core (token header, rate-limit bypass with the 428 retry,
//! same-origin redirects, timeouts, body-size cap, error mapping) and the typed calls.

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use url::Url;
use uuid::Uuid;

use crate::error::{Error, UnavailableReason, error_from_response};
use crate::redirect::{self, RedirectRefusal};
use crate::secret::Secret;
use crate::secret::{SessionToken, scrub};
use crate::types::BuildInfo;
use crate::types::builds::{CreateWorkspaceBuildRequest, WorkspaceBuild};
use crate::types::entitlements::Entitlements;
use crate::types::files::{ArchiveKind, UploadResponse, UploadedFile};
use crate::types::groups::Group;
use crate::types::licenses::{AddLicenseRequest, License};
use crate::types::logs::ProvisionerJobLog;
use crate::types::organizations::Organization;
use crate::types::provisioner_keys::{
    CreateProvisionerKeyRequest, CreateProvisionerKeyResponse, EnsuredProvisionerKey, ProvisionerKey,
};
use crate::types::template_versions::{
    ArchiveTemplateVersionsResponse, CreateTemplateVersionRequest, TemplateVersion,
};
use crate::types::templates::{CreateTemplateRequest, Template};
use crate::types::users::User;
use crate::types::workspace_proxies::{
    CreateWorkspaceProxyRequest, PatchWorkspaceProxy, UpdateWorkspaceProxyResponse, WorkspaceProxy,
};
use crate::types::workspaces::{CreateWorkspaceRequest, Workspace, WorkspacesPage};

/// Result of a Coder call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The header carrying the session token.
pub const SESSION_TOKEN_HEADER: &str = "Coder-Session-Token";
/// The rate-limit bypass header sent (value `true`) on mutating calls.
pub const BYPASS_RATELIMIT_HEADER: &str = "X-Coder-Bypass-Ratelimit";
/// Default timeout of one call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap of a response body.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Default idle timeout of a followed log stream.
pub const DEFAULT_LOG_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// A stream of job logs from a `?follow` websocket; it ends after Coder's close 1000.
pub type LogStream = Pin<Box<dyn Stream<Item = Result<ProvisionerJobLog>> + Send>>;

/// Options of a [`CoderClient`].
#[derive(Clone)]
pub struct ClientOptions {
    /// Timeout of one call (connect + answer + body). Default 30 s.
    pub timeout: Duration,
    /// Largest accepted response body; a larger successful body fails with
    /// [`Error::BodyTooLarge`]. Default 4 MiB. Also the largest websocket message.
    pub max_body_bytes: usize,
    /// Send `X-Coder-Bypass-Ratelimit: true` on mutating calls (retried without it on 428). Default on.
    pub bypass_ratelimit: bool,
    /// Extra trusted root certificates (e.g. an in-cluster CA), added to the platform roots.
    pub extra_root_certificates: Vec<reqwest::Certificate>,
    /// `User-Agent`.
    pub user_agent: String,
    /// A followed log stream fails with [`Error::Unavailable`] (`Timeout`) when neither a message nor
    /// a heartbeat ping arrives for this long. Default 2 min (Coder pings every 15 s). The client
    /// `timeout` applies only to the websocket handshake, not to the stream.
    pub log_idle_timeout: Duration,
    /// Host names resolved to a fixed address instead of DNS (the port always comes from the URL). The operator
    /// uses it when it runs outside the cluster: `*.svc.cluster.local` hosts resolve to a local address, while the
    /// URL, the `Host` header and the same-origin rule stay exactly as in the cluster.
    pub resolve_overrides: Vec<(String, std::net::IpAddr)>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            bypass_ratelimit: true,
            extra_root_certificates: Vec::new(),
            user_agent: concat!("coder-k8s/", env!("CARGO_PKG_VERSION")).to_owned(),
            log_idle_timeout: DEFAULT_LOG_IDLE_TIMEOUT,
            resolve_overrides: Vec::new(),
        }
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("timeout", &self.timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("bypass_ratelimit", &self.bypass_ratelimit)
            .field("extra_root_certificates", &self.extra_root_certificates.len())
            .field("user_agent", &self.user_agent)
            .field("log_idle_timeout", &self.log_idle_timeout)
            .field("resolve_overrides", &self.resolve_overrides)
            .finish()
    }
}

/// The one Coder API client. Cheap to clone.
#[derive(Clone)]
pub struct CoderClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    base: Url,
    token: Option<SessionToken>,
    options: ClientOptions,
}

impl fmt::Debug for CoderClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoderClient")
            .field("origin", &redirect::origin_of(&self.inner.base))
            .field(
                "token",
                &self.inner.token.as_ref().map(|_| crate::secret::REDACTED),
            )
            .field("options", &self.inner.options)
            .finish()
    }
}

/// Installs rustls' ring provider as the process default when none is installed yet (reqwest is built
/// with `rustls-no-provider`; aws-lc-rs is not compiled in).
pub fn install_ring_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Body of a request.
enum Body {
    Empty,
    Json(Bytes),
    Raw {
        bytes: Bytes,
        content_type: &'static str,
    },
}

/// A complete answer.
struct Answer {
    status: StatusCode,
    body: Bytes,
}

impl CoderClient {
    /// A client for `base` (e.g. `http://coder.ns.svc.cluster.local:80`) sending `token`.
    pub fn new(base: Url, token: SessionToken) -> Result<Self> {
        Self::with_options(base, Some(token), ClientOptions::default())
    }

    /// A client without a token (for `buildinfo` and `entitlements`).
    pub fn anonymous(base: Url) -> Result<Self> {
        Self::with_options(base, None, ClientOptions::default())
    }

    /// A client with explicit options.
    pub fn with_options(base: Url, token: Option<SessionToken>, options: ClientOptions) -> Result<Self> {
        if !matches!(base.scheme(), "http" | "https") || base.host().is_none() {
            return Err(Error::invalid(
                "the coder URL must be an absolute http or https URL",
            ));
        }
        if base.cannot_be_a_base() {
            return Err(Error::invalid("the coder URL cannot be a base URL"));
        }
        if let Some(t) = &token
            && HeaderValue::from_str(t.expose()).is_err()
        {
            return Err(Error::invalid(
                "the session token contains characters not allowed in a header",
            ));
        }
        install_ring_provider();
        let mut builder = reqwest::Client::builder()
            .tls_backend_rustls()
            .redirect(redirect::policy())
            .referer(false)
            .timeout(options.timeout)
            .connect_timeout(options.timeout)
            .http1_only()
            .user_agent(options.user_agent.clone());
        for (host, address) in &options.resolve_overrides {
            // reqwest takes the port from the URL; the 0 here is ignored.
            builder = builder.resolve(host, std::net::SocketAddr::new(*address, 0));
        }
        if !options.extra_root_certificates.is_empty() {
            builder = builder.tls_certs_merge(options.extra_root_certificates.clone());
        }
        let http = builder
            .build()
            .map_err(|e| Error::invalid(format!("building the HTTP client: {}", chain(&e))))?;
        let mut base = base;
        base.set_query(None);
        base.set_fragment(None);
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                base,
                token,
                options,
            }),
        })
    }

    /// The Coder URL.
    pub fn base_url(&self) -> &Url {
        &self.inner.base
    }

    /// The options.
    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    fn sensitive(&self) -> Vec<&str> {
        self.inner
            .token
            .as_ref()
            .map(SessionToken::sensitive_parts)
            .unwrap_or_default()
    }

    /// The URL of `/api/v2/<segments…>`; each segment is percent-encoded (a `/` in a name cannot
    /// change the path).
    fn endpoint(&self, segments: &[&str]) -> Result<Url> {
        let mut url = self.inner.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|()| Error::invalid("the coder URL cannot be a base URL"))?;
            path.pop_if_empty();
            path.extend(["api", "v2"]);
            path.extend(segments);
        }
        Ok(url)
    }

    fn map_transport(&self, err: &reqwest::Error) -> Error {
        let sensitive = self.sensitive();
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(s) = source {
            if let Some(refusal) = s.downcast_ref::<RedirectRefusal>() {
                return Error::RedirectRefused {
                    message: refusal.to_string(),
                };
            }
            source = s.source();
        }
        let text = scrub(&chain(err), &sensitive);
        if err.is_timeout() {
            return Error::unavailable(
                UnavailableReason::Timeout,
                format!("no answer within {:?}", self.inner.options.timeout),
            );
        }
        if err.is_connect() {
            return Error::unavailable(UnavailableReason::Connect, text);
        }
        if err.is_builder() {
            return Error::invalid(text);
        }
        let lower = text.to_ascii_lowercase();
        if lower.contains("closed")
            || lower.contains("reset")
            || lower.contains("incomplete")
            || lower.contains("eof")
            || lower.contains("broken pipe")
        {
            return Error::unavailable(UnavailableReason::ConnectionDropped, text);
        }
        Error::unavailable(UnavailableReason::Transport, text)
    }

    fn request(&self, method: Method, url: Url, bypass: bool) -> reqwest::RequestBuilder {
        let mut rb = self.inner.http.request(method, url);
        if let Some(token) = &self.inner.token
            && let Ok(mut value) = HeaderValue::from_str(token.expose())
        {
            value.set_sensitive(true);
            rb = rb.header(SESSION_TOKEN_HEADER, value);
        }
        if bypass {
            rb = rb.header(BYPASS_RATELIMIT_HEADER, HeaderValue::from_static("true"));
        }
        rb
    }

    async fn execute_once(&self, method: &Method, url: &Url, body: &Body, bypass: bool) -> Result<Answer> {
        let mut rb = self.request(method.clone(), url.clone(), bypass);
        match body {
            Body::Empty => {}
            Body::Json(bytes) => {
                rb = rb
                    .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                    .body(bytes.clone());
            }
            Body::Raw { bytes, content_type } => {
                rb = rb
                    .header(CONTENT_TYPE, HeaderValue::from_static(content_type))
                    .body(bytes.clone());
            }
        }
        let mut response = rb.send().await.map_err(|e| self.map_transport(&e))?;
        let status = response.status();
        let headers = response.headers().clone();
        let limit = self.inner.options.max_body_bytes;
        let success = status.is_success();
        if success && response.content_length().is_some_and(|len| len > limit as u64) {
            return Err(Error::BodyTooLarge { limit });
        }
        let mut buf = BytesMut::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.map_transport(&e))? {
            if buf.len() + chunk.len() > limit {
                if success {
                    return Err(Error::BodyTooLarge { limit });
                }
                // An error answer is only described: keep what fits.
                buf.extend_from_slice(&chunk[..limit - buf.len()]);
                break;
            }
            buf.extend_from_slice(&chunk);
        }
        let body = buf.freeze();
        if success {
            Ok(Answer { status, body })
        } else {
            Err(error_from_response(
                status.as_u16(),
                &headers,
                &body,
                &self.sensitive(),
            ))
        }
    }

    /// Sends one call. Mutating calls carry the bypass header first and are retried once without it
    /// when Coder answers 428 (the caller is not an owner).
    async fn execute(&self, method: Method, url: Url, body: Body) -> Result<Answer> {
        let mutating = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS);
        let bypass = mutating && self.inner.options.bypass_ratelimit;
        match self.execute_once(&method, &url, &body, bypass).await {
            Err(Error::Rejected { status: 428, .. }) if bypass => {
                tracing::debug!(
                    method = %method,
                    path = url.path(),
                    "coder refused the rate-limit bypass (428); retrying without it"
                );
                self.execute_once(&method, &url, &body, false).await
            }
            other => other,
        }
    }

    fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
        serde_json::from_slice(body).map_err(|e| Error::decode(e.to_string()))
    }

    fn json_body<B: Serialize>(body: &B) -> Result<Body> {
        serde_json::to_vec(body)
            .map(|v| Body::Json(Bytes::from(v)))
            .map_err(|e| Error::invalid(format!("encoding the request: {e}")))
    }

    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Result<T> {
        let mut url = self.endpoint(segments)?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let answer = self.execute(Method::GET, url, Body::Empty).await?;
        Self::decode(&answer.body)
    }

    pub(crate) async fn send_json<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        body: &B,
    ) -> Result<T> {
        let url = self.endpoint(segments)?;
        let answer = self.execute(method, url, Self::json_body(body)?).await?;
        Self::decode(&answer.body)
    }

    /// A mutating call whose answer body is not needed (204, empty 200, a message).
    pub(crate) async fn send_no_content<B: Serialize>(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<&B>,
    ) -> Result<()> {
        let url = self.endpoint(segments)?;
        let body = match body {
            Some(b) => Self::json_body(b)?,
            None => Body::Empty,
        };
        self.execute(method, url, body).await.map(|_| ())
    }

    // ---------------------------------------------------------------- deployment

    /// `GET /api/v2/buildinfo` (no auth); carries `deployment_id`.
    pub async fn buildinfo(&self) -> Result<BuildInfo> {
        self.get_json(&["buildinfo"], &[]).await
    }

    /// `GET /api/v2/entitlements`. An AGPL build answers `Route not found.`
    /// ([`Error::is_route_not_found`]): read that as "not supported".
    pub async fn entitlements(&self) -> Result<Entitlements> {
        self.get_json(&["entitlements"], &[]).await
    }

    /// `GET /api/v2/licenses`.
    pub async fn licenses(&self) -> Result<Vec<License>> {
        self.get_json(&["licenses"], &[]).await
    }

    /// `POST /api/v2/licenses` (201). A duplicate JWT fails with a 500 whose message matches
    /// [`License::is_duplicate_message`].
    pub async fn upload_license(&self, jwt: &Secret) -> Result<License> {
        let body = AddLicenseRequest { license: jwt.clone() };
        self.send_json(Method::POST, &["licenses"], &body).await
    }

    // ---------------------------------------------------------------- users, organizations

    /// `GET /api/v2/users/me`.
    pub async fn me(&self) -> Result<User> {
        self.user("me").await
    }

    /// `GET /api/v2/users/{user}` (UUID, username or `me`).
    pub async fn user(&self, user: &str) -> Result<User> {
        self.get_json(&["users", user], &[]).await
    }

    /// `GET /api/v2/organizations`.
    pub async fn organizations(&self) -> Result<Vec<Organization>> {
        self.get_json(&["organizations"], &[]).await
    }

    /// `GET /api/v2/organizations/{organization}`: a UUID, a name, or `default`.
    pub async fn organization(&self, organization: &str) -> Result<Organization> {
        self.get_json(&["organizations", organization], &[]).await
    }

    /// `GET /api/v2/organizations/{id}`.
    pub async fn organization_by_id(&self, id: Uuid) -> Result<Organization> {
        self.organization(&id.to_string()).await
    }

    /// The default organization (`GET /api/v2/organizations/default`).
    pub async fn default_organization(&self) -> Result<Organization> {
        self.organization("default").await
    }

    /// `GET /api/v2/organizations/{organization}/groups`.
    pub async fn groups(&self, organization: &str) -> Result<Vec<Group>> {
        self.get_json(&["organizations", organization, "groups"], &[])
            .await
    }

    // ---------------------------------------------------------------- provisioner keys

    /// `GET /api/v2/organizations/{organization}/provisionerkeys` (reserved keys excluded).
    pub async fn provisioner_keys(&self, organization: &str) -> Result<Vec<ProvisionerKey>> {
        self.get_json(&["organizations", organization, "provisionerkeys"], &[])
            .await
    }

    /// `POST /api/v2/organizations/{organization}/provisionerkeys` (201 `{"key"}`, no ID: list the keys
    /// to learn it, or use [`CoderClient::ensure_provisioner_key`]).
    pub async fn create_provisioner_key(
        &self,
        organization: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<Secret> {
        let body = CreateProvisionerKeyRequest {
            name: name.to_owned(),
            tags: tags.clone(),
        };
        let created: CreateProvisionerKeyResponse = self
            .send_json(
                Method::POST,
                &["organizations", organization, "provisionerkeys"],
                &body,
            )
            .await?;
        Ok(created.key)
    }

    /// `DELETE /api/v2/organizations/{organization}/provisionerkeys/{name}` (204). An unknown key is
    /// [`Error::NotFound`]; see [`crate::found`].
    pub async fn delete_provisioner_key(&self, organization: &str, name: &str) -> Result<()> {
        self.send_no_content::<()>(
            Method::DELETE,
            &["organizations", organization, "provisionerkeys", name],
            None,
        )
        .await
    }

    /// Reuses the key named `name` (case-insensitive, as Coder's unique index) or creates it with
    /// `tags`, then lists the keys to learn its ID. A reused key keeps its tags (the caller decides
    /// about drift) and has no secret. A 409 from a concurrent create is resolved by listing again.
    pub async fn ensure_provisioner_key(
        &self,
        organization: &str,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<EnsuredProvisionerKey> {
        let find = |keys: Vec<ProvisionerKey>| keys.into_iter().find(|k| k.name.eq_ignore_ascii_case(name));
        if let Some(key) = find(self.provisioner_keys(organization).await?) {
            return Ok(EnsuredProvisionerKey { key, secret: None });
        }
        let secret = match self.create_provisioner_key(organization, name, tags).await {
            Ok(secret) => Some(secret),
            Err(Error::Conflict { .. }) => None,
            Err(e) => return Err(e),
        };
        match find(self.provisioner_keys(organization).await?) {
            Some(key) => Ok(EnsuredProvisionerKey { key, secret }),
            None => Err(Error::unavailable(
                UnavailableReason::Transport,
                "the provisioner key was created but is not listed",
            )),
        }
    }

    // ---------------------------------------------------------------- workspace proxies

    /// `GET /api/v2/workspaceproxies/{idOrName}`.
    pub async fn workspace_proxy(&self, id_or_name: &str) -> Result<WorkspaceProxy> {
        self.get_json(&["workspaceproxies", id_or_name], &[]).await
    }

    /// `POST /api/v2/workspaceproxies` (201 with the proxy token).
    pub async fn create_workspace_proxy(
        &self,
        request: &CreateWorkspaceProxyRequest,
    ) -> Result<UpdateWorkspaceProxyResponse> {
        self.send_json(Method::POST, &["workspaceproxies"], request).await
    }

    /// `PATCH /api/v2/workspaceproxies/{id}`; `regenerate_token: true` returns a new proxy token.
    pub async fn patch_workspace_proxy(
        &self,
        request: &PatchWorkspaceProxy,
    ) -> Result<UpdateWorkspaceProxyResponse> {
        let id = request.id.to_string();
        self.send_json(Method::PATCH, &["workspaceproxies", &id], request)
            .await
    }

    /// `DELETE /api/v2/workspaceproxies/{idOrName}` (200).
    pub async fn delete_workspace_proxy(&self, id_or_name: &str) -> Result<()> {
        self.send_no_content::<()>(Method::DELETE, &["workspaceproxies", id_or_name], None)
            .await
    }

    // ---------------------------------------------------------------- files

    /// `POST /api/v2/files` with a tar or zip archive; 201 new, 200 already uploaded.
    pub async fn upload_file(&self, kind: ArchiveKind, archive: Bytes) -> Result<UploadedFile> {
        let url = self.endpoint(&["files"])?;
        let body = Body::Raw {
            bytes: archive,
            content_type: kind.content_type(),
        };
        let answer = self.execute(Method::POST, url, body).await?;
        let parsed: UploadResponse = Self::decode(&answer.body)?;
        Ok(UploadedFile {
            id: parsed.hash,
            created: answer.status == StatusCode::CREATED,
        })
    }

    // ---------------------------------------------------------------- templates

    /// `GET /api/v2/organizations/{organization}/templates`.
    pub async fn templates(&self, organization: &str) -> Result<Vec<Template>> {
        self.get_json(&["organizations", organization, "templates"], &[])
            .await
    }

    /// `GET /api/v2/organizations/{organization}/templates/{name}`.
    pub async fn template_by_name(&self, organization: &str, name: &str) -> Result<Template> {
        self.get_json(&["organizations", organization, "templates", name], &[])
            .await
    }

    /// `GET /api/v2/templates/{id}`.
    pub async fn template(&self, id: Uuid) -> Result<Template> {
        self.get_json(&["templates", &id.to_string()], &[]).await
    }

    /// `POST /api/v2/organizations/{organization}/templates` (201).
    pub async fn create_template(
        &self,
        organization: &str,
        request: &CreateTemplateRequest,
    ) -> Result<Template> {
        self.send_json(
            Method::POST,
            &["organizations", organization, "templates"],
            request,
        )
        .await
    }

    /// `DELETE /api/v2/templates/{id}` (200).
    pub async fn delete_template(&self, id: Uuid) -> Result<()> {
        self.send_no_content::<()>(Method::DELETE, &["templates", &id.to_string()], None)
            .await
    }

    // ---------------------------------------------------------------- template versions

    /// `POST /api/v2/organizations/{organization}/templateversions` (201, job pending).
    pub async fn create_template_version(
        &self,
        organization: &str,
        request: &CreateTemplateVersionRequest,
    ) -> Result<TemplateVersion> {
        self.send_json(
            Method::POST,
            &["organizations", organization, "templateversions"],
            request,
        )
        .await
    }

    /// `GET /api/v2/templateversions/{id}`.
    pub async fn template_version(&self, id: Uuid) -> Result<TemplateVersion> {
        self.get_json(&["templateversions", &id.to_string()], &[]).await
    }

    /// `GET /api/v2/templates/{template}/versions`, with archived versions when asked.
    pub async fn template_versions(
        &self,
        template: Uuid,
        include_archived: bool,
    ) -> Result<Vec<TemplateVersion>> {
        let query: &[(&str, &str)] = if include_archived {
            &[("include_archived", "true")]
        } else {
            &[]
        };
        self.get_json(&["templates", &template.to_string(), "versions"], query)
            .await
    }

    /// `POST /api/v2/templateversions/{id}/archive` (200, a JSON string).
    pub async fn archive_template_version(&self, id: Uuid) -> Result<()> {
        self.send_no_content::<()>(
            Method::POST,
            &["templateversions", &id.to_string(), "archive"],
            None,
        )
        .await
    }

    /// `POST /api/v2/templates/{template}/versions/archive` (`all: false` archives only failed unused
    /// versions).
    pub async fn archive_unused_template_versions(
        &self,
        template: Uuid,
        all: bool,
    ) -> Result<ArchiveTemplateVersionsResponse> {
        #[derive(Serialize)]
        struct Archive {
            all: bool,
        }
        self.send_json(
            Method::POST,
            &["templates", &template.to_string(), "versions", "archive"],
            &Archive { all },
        )
        .await
    }

    /// Promote: `PATCH /api/v2/templates/{template}/versions` `{"id": version}` (200). Only successfully
    /// built versions can be promoted (403 otherwise).
    pub async fn promote_template_version(&self, template: Uuid, version: Uuid) -> Result<()> {
        #[derive(Serialize)]
        struct Promote {
            id: Uuid,
        }
        self.send_no_content(
            Method::PATCH,
            &["templates", &template.to_string(), "versions"],
            Some(&Promote { id: version }),
        )
        .await
    }

    /// `GET /api/v2/templateversions/{id}/logs[?after=N]`: the logs so far.
    pub async fn template_version_logs(
        &self,
        id: Uuid,
        after: Option<i64>,
    ) -> Result<Vec<ProvisionerJobLog>> {
        self.job_logs("templateversions", id, after).await
    }

    /// Follows the import logs of a template version (`?follow&after=N` websocket).
    pub async fn follow_template_version_logs(&self, id: Uuid, after: i64) -> Result<LogStream> {
        self.follow_logs("templateversions", id, after).await
    }

    // ---------------------------------------------------------------- workspaces, builds

    /// `GET /api/v2/workspaces?q=…` (one page: `limit`/`offset` when non-zero).
    pub async fn workspaces(&self, q: &str, limit: u32, offset: u32) -> Result<WorkspacesPage> {
        let limit = limit.to_string();
        let offset = offset.to_string();
        let mut query: Vec<(&str, &str)> = Vec::new();
        if !q.is_empty() {
            query.push(("q", q));
        }
        if limit != "0" {
            query.push(("limit", &limit));
        }
        if offset != "0" {
            query.push(("offset", &offset));
        }
        self.get_json(&["workspaces"], &query).await
    }

    /// `GET /api/v2/workspaces/{id}`.
    pub async fn workspace(&self, id: Uuid) -> Result<Workspace> {
        self.get_json(&["workspaces", &id.to_string()], &[]).await
    }

    /// `GET /api/v2/users/{owner}/workspace/{name}`.
    pub async fn workspace_by_owner_and_name(&self, owner: &str, name: &str) -> Result<Workspace> {
        self.get_json(&["users", owner, "workspace", name], &[]).await
    }

    /// `POST /api/v2/users/{owner}/workspaces` (201; the first `start` build is queued).
    pub async fn create_workspace(&self, owner: &str, request: &CreateWorkspaceRequest) -> Result<Workspace> {
        self.send_json(Method::POST, &["users", owner, "workspaces"], request)
            .await
    }

    /// `POST /api/v2/workspaces/{id}/builds` (201). 409 while a build is active.
    pub async fn create_workspace_build(
        &self,
        workspace: Uuid,
        request: &CreateWorkspaceBuildRequest,
    ) -> Result<WorkspaceBuild> {
        self.send_json(
            Method::POST,
            &["workspaces", &workspace.to_string(), "builds"],
            request,
        )
        .await
    }

    /// `GET /api/v2/workspacebuilds/{id}`.
    pub async fn workspace_build(&self, id: Uuid) -> Result<WorkspaceBuild> {
        self.get_json(&["workspacebuilds", &id.to_string()], &[]).await
    }

    /// `GET /api/v2/workspaces/{id}/builds`.
    pub async fn workspace_builds(&self, workspace: Uuid) -> Result<Vec<WorkspaceBuild>> {
        self.get_json(&["workspaces", &workspace.to_string(), "builds"], &[])
            .await
    }

    /// `GET /api/v2/workspacebuilds/{id}/logs[?after=N]`: the logs so far.
    pub async fn workspace_build_logs(&self, id: Uuid, after: Option<i64>) -> Result<Vec<ProvisionerJobLog>> {
        self.job_logs("workspacebuilds", id, after).await
    }

    /// Follows the logs of a build (`?follow&after=N` websocket). The stream ends after Coder's close
    /// 1000 (job done); any other end yields one [`Error::Unavailable`] and stops.
    pub async fn follow_workspace_build_logs(&self, id: Uuid, after: i64) -> Result<LogStream> {
        self.follow_logs("workspacebuilds", id, after).await
    }

    async fn job_logs(&self, kind: &str, id: Uuid, after: Option<i64>) -> Result<Vec<ProvisionerJobLog>> {
        let after = after.map(|a| a.to_string());
        let query: Vec<(&str, &str)> = after.iter().map(|a| ("after", a.as_str())).collect();
        self.get_json(&[kind, &id.to_string(), "logs"], &query).await
    }

    /// The websocket handshake goes through the same reqwest client (same redirect policy, TLS and
    /// timeout), then the upgraded connection is used as a websocket.
    async fn follow_logs(&self, kind: &str, id: Uuid, after: i64) -> Result<LogStream> {
        let mut url = self.endpoint(&[kind, &id.to_string(), "logs"])?;
        url.set_query(Some(&format!("follow&after={after}")));
        let key = generate_key();
        let rb = self
            .request(Method::GET, url, false)
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", key.as_str());
        let response = rb.send().await.map_err(|e| self.map_transport(&e))?;
        let status = response.status();
        if status != StatusCode::SWITCHING_PROTOCOLS {
            let headers: HeaderMap = response.headers().clone();
            let body = read_capped(response, self.inner.options.max_body_bytes).await;
            if status.is_success() {
                return Err(Error::invalid(format!(
                    "coder answered {status} instead of switching to a websocket"
                )));
            }
            return Err(error_from_response(
                status.as_u16(),
                &headers,
                &body,
                &self.sensitive(),
            ));
        }
        let expected = derive_accept_key(key.as_bytes());
        let accepted = response
            .headers()
            .get("Sec-WebSocket-Accept")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == expected);
        if !accepted {
            return Err(Error::invalid("websocket handshake: bad Sec-WebSocket-Accept"));
        }
        let upgraded = response.upgrade().await.map_err(|e| self.map_transport(&e))?;
        let config = WebSocketConfig::default()
            .max_message_size(Some(self.inner.options.max_body_bytes))
            .max_frame_size(Some(self.inner.options.max_body_bytes));
        let ws = WebSocketStream::from_raw_socket(upgraded, Role::Client, Some(config)).await;
        let idle = self.inner.options.log_idle_timeout;
        Ok(Box::pin(futures::stream::unfold(Some((ws, idle)), next_log)))
    }
}

type Ws = WebSocketStream<reqwest::Upgraded>;

type FollowState = Option<(Ws, Duration)>;

async fn next_log(state: FollowState) -> Option<(Result<ProvisionerJobLog>, FollowState)> {
    let (mut ws, idle) = state?;
    loop {
        let next = match tokio::time::timeout(idle, ws.next()).await {
            Ok(next) => next,
            Err(_) => {
                return Some((
                    Err(Error::unavailable(
                        UnavailableReason::Timeout,
                        format!("no log message or heartbeat within {idle:?}"),
                    )),
                    None,
                ));
            }
        };
        let message = match next {
            None => {
                return Some((
                    Err(Error::unavailable(
                        UnavailableReason::ConnectionDropped,
                        "the log stream ended without a close frame",
                    )),
                    None,
                ));
            }
            Some(Err(e)) => {
                return Some((
                    Err(Error::unavailable(
                        UnavailableReason::ConnectionDropped,
                        format!("log stream: {e}"),
                    )),
                    None,
                ));
            }
            Some(Ok(m)) => m,
        };
        let data: Bytes = match message {
            Message::Text(t) => Bytes::copy_from_slice(t.as_bytes()),
            Message::Binary(b) => b,
            Message::Close(frame) => {
                return match frame {
                    None => None,
                    Some(f) if f.code == CloseCode::Normal => None,
                    Some(f) => Some((
                        Err(Error::unavailable(
                            UnavailableReason::ConnectionDropped,
                            format!("log stream closed with {}: {}", u16::from(f.code), f.reason),
                        )),
                        None,
                    )),
                };
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
        };
        return match serde_json::from_slice::<ProvisionerJobLog>(&data) {
            Ok(log) => Some((Ok(log), Some((ws, idle)))),
            Err(e) => Some((Err(Error::decode(format!("log message: {e}"))), None)),
        };
    }
}

async fn read_capped(mut response: reqwest::Response, limit: usize) -> Bytes {
    let mut buf = BytesMut::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = limit.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if buf.len() >= limit {
            break;
        }
    }
    buf.freeze()
}

/// The error and its sources, joined; reqwest's URL is left out.
fn chain(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    if let Some(at) = text.find(" for url (") {
        text.truncate(at);
    }
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    //! The request core against a minimal scripted HTTP/1.1 server (raw TCP), so redirects, the 428
    //! retry, timeouts, the body cap, dropped connections and the log websocket are exercised without
    //! the test server crate.

    use std::sync::Mutex;
    use std::time::Instant;

    use futures::SinkExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;

    use super::*;

    const TOKEN: &str = "abcdefghij-0123456789abcdefghijkl";

    type Log = Arc<Mutex<Vec<String>>>;

    /// Reads one request head (and its body, by Content-Length); returns the head.
    async fn read_request(stream: &mut TcpStream) -> Option<String> {
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).await.ok()? == 0 {
                return None;
            }
            buf.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&buf).into_owned();
        let len = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        stream.read_exact(&mut body).await.ok()?;
        Some(head)
    }

    fn response(status: &str, headers: &[(&str, &str)], body: &str) -> String {
        let mut r = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
        for (k, v) in headers {
            r.push_str(&format!("{k}: {v}\r\n"));
        }
        r.push_str("\r\n");
        r.push_str(body);
        r
    }

    /// A server answering each request with `answer(index, head)`; `None` closes the connection.
    async fn serve<F>(answer: F) -> (Url, Log)
    where
        F: Fn(usize, &str) -> Option<String> + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let log: Log = Arc::default();
        let answer = Arc::new(answer);
        let log2 = log.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let log = log2.clone();
                let answer = answer.clone();
                tokio::spawn(async move {
                    while let Some(head) = read_request(&mut stream).await {
                        let index = {
                            let mut l = log.lock().unwrap();
                            l.push(head.clone());
                            l.len() - 1
                        };
                        match answer(index, &head) {
                            Some(r) => {
                                if r.starts_with("SLEEP") {
                                    tokio::time::sleep(Duration::from_secs(3)).await;
                                    return;
                                }
                                if stream.write_all(r.as_bytes()).await.is_err() {
                                    return;
                                }
                            }
                            None => return,
                        }
                    }
                });
            }
        });
        (url, log)
    }

    fn client(url: &Url) -> CoderClient {
        CoderClient::new(url.clone(), SessionToken::new(TOKEN)).unwrap()
    }

    const JSON: (&str, &str) = ("Content-Type", "application/json");
    const CODER: (&str, &str) = ("X-Coder-Build-Version", "v2.30.0");
    const ME: &str = r#"{"id":"00000000-0000-0000-0000-000000000001","username":"coder-k8s-operator","roles":[{"name":"owner","display_name":"Owner"}]}"#;

    fn has_header(head: &str, name: &str) -> bool {
        head.lines().any(|l| {
            l.to_ascii_lowercase()
                .starts_with(&format!("{}:", name.to_ascii_lowercase()))
        })
    }

    #[tokio::test]
    async fn sends_the_token_and_decodes() {
        let (url, log) = serve(|_, _| Some(response("200 OK", &[JSON, CODER], ME))).await;
        let me = client(&url).me().await.unwrap();
        assert_eq!(me.username, "coder-k8s-operator");
        assert!(me.has_role("owner"));
        let head = log.lock().unwrap()[0].clone();
        assert!(head.starts_with("GET /api/v2/users/me HTTP/1.1"), "{head}");
        assert!(head.contains(&format!("coder-session-token: {TOKEN}")), "{head}");
        assert!(
            !has_header(&head, BYPASS_RATELIMIT_HEADER),
            "GET must not carry the bypass"
        );
    }

    #[tokio::test]
    async fn path_segments_are_encoded() {
        let (url, log) = serve(|_, _| Some(response("200 OK", &[JSON, CODER], "{}"))).await;
        let base = url.join("/prefix/").unwrap();
        let _ = client(&base).organization("a/../b c").await.unwrap();
        let head = log.lock().unwrap()[0].clone();
        assert!(
            head.starts_with("GET /prefix/api/v2/organizations/a%2F..%2Fb%20c HTTP/1.1"),
            "{head}"
        );
    }

    #[tokio::test]
    async fn cross_origin_redirect_is_refused_and_the_token_stays_home() {
        let (other, other_log) = serve(|_, _| Some(response("200 OK", &[JSON, CODER], ME))).await;
        let target = other
            .join("/api/v2/users/me?coder_session_token=leak")
            .unwrap()
            .to_string();
        let (url, log) =
            serve(move |_, _| Some(response("307 Temporary Redirect", &[("Location", &target)], ""))).await;
        let err = client(&url).me().await.unwrap_err();
        assert!(matches!(err, Error::RedirectRefused { .. }), "{err:?}");
        assert_eq!(err.category(), "redirect_refused");
        assert!(!err.to_string().contains("leak"));
        assert_eq!(log.lock().unwrap().len(), 1);
        assert!(
            other_log.lock().unwrap().is_empty(),
            "the other origin was contacted"
        );
    }

    #[tokio::test]
    async fn same_origin_redirect_is_followed_with_the_token() {
        let (url, log) = serve(|i, _| {
            Some(if i == 0 {
                response("302 Found", &[("Location", "/api/v2/users/me2")], "")
            } else {
                response("200 OK", &[JSON, CODER], ME)
            })
        })
        .await;
        let me = client(&url).me().await.unwrap();
        assert_eq!(me.username, "coder-k8s-operator");
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 2);
        assert!(log[1].starts_with("GET /api/v2/users/me2 "));
        assert!(log[1].contains(TOKEN));
    }

    #[tokio::test]
    async fn bypass_refused_with_428_is_retried_once_without_it() {
        let (url, log) = serve(|_, head| {
            Some(if has_header(head, BYPASS_RATELIMIT_HEADER) {
                response(
                    "428 Precondition Required",
                    &[("Content-Type", "text/plain; charset=utf-8"), CODER],
                    "\"X-Coder-Bypass-Ratelimit\" provided but user is not owner\n",
                )
            } else {
                response("201 Created", &[JSON, CODER], r#"{"key":"k3y"}"#)
            })
        })
        .await;
        let secret = client(&url)
            .create_provisioner_key("default", "k", &BTreeMap::new())
            .await
            .unwrap();
        assert_eq!(secret.expose(), "k3y");
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 2);
        assert!(has_header(&log[0], BYPASS_RATELIMIT_HEADER));
        assert!(!has_header(&log[1], BYPASS_RATELIMIT_HEADER));
    }

    #[tokio::test]
    async fn rate_limit_is_typed() {
        let (url, _) = serve(|_, _| {
            Some(response(
                "429 Too Many Requests",
                &[JSON, CODER, ("Retry-After", "17")],
                r#"{"message":"You've been rate limited for sending more than 512 requests in 1m0s."}"#,
            ))
        })
        .await;
        let err = client(&url).organizations().await.unwrap_err();
        assert_eq!(err.retry_after(), Some(Duration::from_secs(17)));
        assert!(err.is_retryable());
    }

    #[tokio::test]
    async fn timeout_is_unavailable_within_the_configured_time() {
        let (url, _) = serve(|_, _| Some("SLEEP".to_owned())).await;
        let options = ClientOptions {
            timeout: Duration::from_millis(300),
            ..ClientOptions::default()
        };
        let c = CoderClient::with_options(url, Some(SessionToken::new(TOKEN)), options).unwrap();
        let start = Instant::now();
        let err = c.buildinfo().await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Unavailable {
                    reason: UnavailableReason::Timeout,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn dropped_connection_is_unavailable() {
        let (url, _) = serve(|_, _| None).await;
        let err = client(&url).buildinfo().await.unwrap_err();
        assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
        assert!(!format!("{err:?}").contains(TOKEN));
    }

    #[tokio::test]
    async fn connect_refused_is_unavailable() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        drop(listener);
        let err = client(&url).buildinfo().await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Unavailable {
                    reason: UnavailableReason::Connect,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn oversized_body_is_an_error() {
        let big = format!(r#"{{"version":"{}"}}"#, "x".repeat(5000));
        let (url, _) = serve(move |_, _| Some(response("200 OK", &[JSON, CODER], &big))).await;
        let options = ClientOptions {
            max_body_bytes: 1000,
            ..ClientOptions::default()
        };
        let c = CoderClient::with_options(url, None, options).unwrap();
        let err = c.buildinfo().await.unwrap_err();
        assert!(matches!(err, Error::BodyTooLarge { limit: 1000 }), "{err:?}");
    }

    #[tokio::test]
    async fn not_found_mapping_through_http() {
        let (url, _) = serve(|i, _| {
            Some(match i {
                0 => response(
                    "404 Not Found",
                    &[("Content-Type", "text/html")],
                    "<html>nginx</html>",
                ),
                1 => response(
                    "404 Not Found",
                    &[JSON, CODER],
                    r#"{"message":"Route not found."}"#,
                ),
                _ => response(
                    "404 Not Found",
                    &[JSON, CODER],
                    r#"{"message":"Resource not found or you do not have access to this resource"}"#,
                ),
            })
        })
        .await;
        let c = client(&url);
        let e = c.workspace_proxy("p").await.unwrap_err();
        assert!(!e.is_not_found() && e.is_retryable(), "{e:?}");
        let e = c.entitlements().await.unwrap_err();
        assert!(e.is_route_not_found(), "{e:?}");
        let e = c.workspace_proxy("p").await.unwrap_err();
        assert!(e.is_not_found(), "{e:?}");
        assert_eq!(crate::found(c.workspace_proxy("p").await).unwrap(), None);
    }

    #[test]
    fn debug_of_the_client_hides_the_token() {
        let c = CoderClient::new(
            Url::parse("http://coder.example").unwrap(),
            SessionToken::new(TOKEN),
        )
        .unwrap();
        let d = format!("{c:?}");
        assert!(!d.contains(TOKEN) && !d.contains("0123456789abcdefghijkl"), "{d}");
    }

    #[test]
    fn rejects_non_http_urls() {
        assert!(CoderClient::anonymous(Url::parse("ftp://x").unwrap()).is_err());
        assert!(CoderClient::anonymous(Url::parse("mailto:a@b").unwrap()).is_err());
    }

    async fn ws_server(close: CloseCode) -> (Url, Log) {
        ws_server_paced(close, Duration::ZERO).await
    }

    #[allow(clippy::result_large_err)] // the callback signature is tungstenite's
    async fn ws_server_paced(close: CloseCode, pause: Duration) -> (Url, Log) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let log: Log = Arc::default();
        let log2 = log.clone();
        tokio::spawn(async move {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let log = log2.clone();
            let callback = move |req: &tokio_tungstenite::tungstenite::handshake::server::Request, resp| {
                log.lock().unwrap().push(format!(
                    "{}?{} token={}",
                    req.uri().path(),
                    req.uri().query().unwrap_or(""),
                    req.headers()
                        .get(SESSION_TOKEN_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                ));
                Ok(resp)
            };
            let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
                return;
            };
            for id in 1..=3 {
                tokio::time::sleep(pause).await;
                let log =
                    format!(r#"{{"id":{id},"log_level":"info","stage":"Planning","output":"line {id}"}}"#);
                if ws.send(Message::text(log)).await.is_err() {
                    return;
                }
            }
            let _ = ws
                .send(Message::Close(Some(CloseFrame {
                    code: close,
                    reason: "done".into(),
                })))
                .await;
            let _ = ws.next().await;
        });
        (url, log)
    }

    #[tokio::test]
    async fn follow_logs_streams_until_close_1000() {
        let (url, log) = ws_server(CloseCode::Normal).await;
        let id = Uuid::nil();
        let stream = client(&url).follow_workspace_build_logs(id, 5).await.unwrap();
        let logs: Vec<_> = stream.collect().await;
        assert_eq!(logs.len(), 3, "{logs:?}");
        let ids: Vec<i64> = logs.into_iter().map(|l| l.unwrap().id).collect();
        assert_eq!(ids, vec![1, 2, 3]);
        let seen = log.lock().unwrap()[0].clone();
        assert_eq!(
            seen,
            format!("/api/v2/workspacebuilds/{id}/logs?follow&after=5 token={TOKEN}")
        );
    }

    #[tokio::test]
    async fn follow_logs_abnormal_close_is_an_error() {
        let (url, _) = ws_server(CloseCode::Error).await;
        let stream = client(&url)
            .follow_template_version_logs(Uuid::nil(), 0)
            .await
            .unwrap();
        let logs: Vec<_> = stream.collect().await;
        assert_eq!(logs.len(), 4);
        assert!(matches!(logs[3], Err(Error::Unavailable { .. })), "{:?}", logs[3]);
    }

    #[tokio::test]
    async fn follow_logs_refuses_cross_origin_redirects() {
        let (other, other_log) = serve(|_, _| Some(response("200 OK", &[], ""))).await;
        let target = other.join("/ws").unwrap().to_string();
        let (url, _) =
            serve(move |_, _| Some(response("307 Temporary Redirect", &[("Location", &target)], ""))).await;
        let err = match client(&url).follow_workspace_build_logs(Uuid::nil(), 0).await {
            Err(e) => e,
            Ok(_) => panic!("followed a cross-origin redirect"),
        };
        assert!(matches!(err, Error::RedirectRefused { .. }), "{err:?}");
        assert!(other_log.lock().unwrap().is_empty());
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn refusal_is_logged_without_the_target_query_or_token() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let (other, _) = serve(|_, _| Some(response("200 OK", &[], ""))).await;
        let target = other.join("/login?redirect_secret=qqq").unwrap().to_string();
        let (url, _) =
            serve(move |_, _| Some(response("307 Temporary Redirect", &[("Location", &target)], ""))).await;
        let _ = client(&url).me().await.unwrap_err();
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(text.contains("WARN"), "{text}");
        assert!(text.contains(crate::redirect::REFUSAL_LOG), "{text}");
        assert!(
            !text.contains("redirect_secret") && !text.contains("qqq"),
            "{text}"
        );
        assert!(!text.contains(TOKEN), "{text}");
    }

    #[tokio::test]
    async fn follow_outlives_the_call_timeout_but_not_the_idle_timeout() {
        // Messages 400 ms apart: longer than the 300 ms call timeout (handshake only) ...
        let (url, _) = ws_server_paced(CloseCode::Normal, Duration::from_millis(400)).await;
        let options = ClientOptions {
            timeout: Duration::from_millis(300),
            ..ClientOptions::default()
        };
        let c = CoderClient::with_options(url, Some(SessionToken::new(TOKEN)), options).unwrap();
        let logs: Vec<_> = c
            .follow_workspace_build_logs(Uuid::nil(), 0)
            .await
            .unwrap()
            .collect()
            .await;
        assert_eq!(logs.len(), 3, "{logs:?}");
        assert!(logs.iter().all(Result::is_ok), "{logs:?}");

        // ... but beyond a 150 ms idle timeout.
        let (url, _) = ws_server_paced(CloseCode::Normal, Duration::from_millis(400)).await;
        let options = ClientOptions {
            log_idle_timeout: Duration::from_millis(150),
            ..ClientOptions::default()
        };
        let c = CoderClient::with_options(url, Some(SessionToken::new(TOKEN)), options).unwrap();
        let logs: Vec<_> = c
            .follow_workspace_build_logs(Uuid::nil(), 0)
            .await
            .unwrap()
            .collect()
            .await;
        assert_eq!(logs.len(), 1, "{logs:?}");
        assert!(
            matches!(
                logs[0],
                Err(Error::Unavailable {
                    reason: UnavailableReason::Timeout,
                    ..
                })
            ),
            "{logs:?}"
        );
    }

    #[tokio::test]
    async fn https_uses_the_ring_provider_and_fails_cleanly_against_plain_http() {
        // A plain-HTTP peer that answers at once and closes: the TLS handshake must fail, not hang.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            }
        });
        let https = Url::parse(&format!("https://127.0.0.1:{port}")).unwrap();
        let c = CoderClient::anonymous(https).unwrap();
        let err = c.buildinfo().await.unwrap_err();
        assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
