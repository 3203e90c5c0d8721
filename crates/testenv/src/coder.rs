//! A real open-source Coder server (`coder server`, built by `hack/build-testenv.sh coder`) for tests: its own
//! database on the shared PostgreSQL, built-in echo provisioner daemons, an owner user and its session token.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use coder_k8s_testenv::coder::{EchoTemplate, RealCoder};
//! let coder = RealCoder::shared().await?;
//! let tar = coder.echo_template(EchoTemplate::Success)?;
//! let file_id = coder.upload_file(&tar).await?;
//! # let _ = file_id;
//! # Ok(())
//! # }
//! ```
//!
//! The server runs under the same watchdog as etcd and stops once the test process is gone. Nothing it runs
//! contacts the internet: telemetry, the update check and STUN are off, and the built-in provisioner daemons
//! serve only the echo provisioner (so Terraform is never needed).

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::OnceCell;

use crate::binaries::CoderBinaries;
use crate::process::{ManagedProcess, spawn_reaper};

/// Time the server gets to answer `/api/v2/buildinfo`: migrating an empty database takes 4–15 s on 2 busy cores.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(90);
/// Time any one API request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const LOG_TAIL_LINES: usize = 40;
/// The owner user created at start-up.
pub const OWNER_EMAIL: &str = "owner@coder-k8s.test";
pub const OWNER_USERNAME: &str = "owner";

/// An echo-provisioner template written by `echotar`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchoTemplate {
    /// Parse, plan and apply complete, each with log lines.
    Success,
    /// The import succeeds; every workspace build fails at apply.
    FailingApply,
    /// One resource with one agent (token auth, random token).
    WithAgent,
    /// Like `Success`, with four rich parameters, each with a default: `region` (mutable, options `eu-west` and
    /// `us-east`), `cpus` (mutable number, 1 to 8), `disk` (immutable) and `api_key` (mutable). They are in the
    /// archive's `main.tf` too, which Coder's dynamic parameters evaluate.
    WithParameters,
}

impl EchoTemplate {
    /// The `echotar` argument.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::FailingApply => "failing-apply",
            Self::WithAgent => "with-agent",
            Self::WithParameters => "with-parameters",
        }
    }
}

/// The rich parameters of [`EchoTemplate::WithParameters`] as the `main.tf` of a Terraform template, for the Coder
/// API test server (it reads a template version's parameters from its Terraform files).
pub const WITH_PARAMETERS_MAIN_TF: &str = r#"terraform {
  required_providers {
    coder = {
      source = "coder/coder"
    }
  }
}

data "coder_parameter" "region" {
  name         = "region"
  display_name = "Region"
  mutable      = true
  order        = 1
  default      = "eu-west"
  type         = "string"
  form_type    = "dropdown"
  option {
    name  = "EU West"
    value = "eu-west"
  }
  option {
    name  = "US East"
    value = "us-east"
  }
}

data "coder_parameter" "cpus" {
  name         = "cpus"
  display_name = "CPUs"
  mutable      = true
  order        = 2
  default      = 2
  type         = "number"
  validation {
    min = 1
    max = 8
  }
}

data "coder_parameter" "disk" {
  name         = "disk"
  display_name = "Disk"
  mutable      = false
  order        = 3
  default      = "small"
  type         = "string"
}

data "coder_parameter" "api_key" {
  name         = "api_key"
  display_name = "API key"
  mutable      = true
  order        = 4
  default      = "none"
  type         = "string"
}
"#;

/// An answer of the Coder API: status code and body.
#[derive(Debug, Clone)]
pub struct ApiResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

impl ApiResponse {
    /// The body as JSON.
    pub fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.body).with_context(|| {
            format!(
                "status {} with a body that is not JSON: {}",
                self.status,
                self.text()
            )
        })
    }

    /// The body as (lossy) UTF-8 text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A running real Coder server with an owner user.
pub struct RealCoder {
    process: ManagedProcess,
    port: u16,
    url: String,
    database_url: String,
    organization_id: String,
    owner_token: SecretString,
    echotar: PathBuf,
    root: PathBuf,
    reaper: Mutex<Option<Child>>,
}

impl fmt::Debug for RealCoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealCoder")
            .field("url", &self.url)
            .field("organization_id", &self.organization_id)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl RealCoder {
    /// The Coder server shared by every test in this process, started on first use (building Coder first if
    /// it is not in the cache). Each `#[tokio::test]` can use it: nothing in it is tied to a runtime.
    pub async fn shared() -> Result<&'static RealCoder> {
        static SHARED: OnceCell<RealCoder> = OnceCell::const_new();
        // If the starting test is cancelled or fails, the next caller tries again.
        SHARED.get_or_try_init(Self::start).await
    }

    /// Starts a new server with its own database on the shared PostgreSQL; retried on a port conflict.
    pub async fn start() -> Result<Self> {
        let binaries = tokio::task::spawn_blocking(CoderBinaries::locate)
            .await
            .context("locating the Coder binaries")??;
        let postgres = crate::postgres::shared().await?;
        static DATABASES: AtomicUsize = AtomicUsize::new(0);
        let database = format!("coder_real_{}", DATABASES.fetch_add(1, Ordering::Relaxed));
        let database_url = postgres.create_database(&database).await?;
        let mut attempt = 1;
        loop {
            match Self::start_once(&binaries, &database_url).await {
                Err(e) if attempt < 3 && format!("{e:#}").contains("address already in use") => attempt += 1,
                result => return result,
            }
        }
    }

    async fn start_once(binaries: &CoderBinaries, database_url: &str) -> Result<Self> {
        let temp = tempfile::Builder::new()
            .prefix("coder-k8s-coder-")
            .tempdir()
            .context("creating temp dir")?;
        // Removed by the reaper after this process exits (a shared server is never dropped).
        let root = temp.keep();
        let reaper = spawn_reaper(&root)?;
        let home = root.join("home");
        fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
        let [port] = crate::free_ports()?;
        let url = format!("http://127.0.0.1:{port}");
        let args: Vec<String> = [
            "server",
            "--global-config",
            &root.join("config").display().to_string(),
            "--cache-dir",
            &root.join("cache").display().to_string(),
            "--http-address",
            &format!("127.0.0.1:{port}"),
            "--access-url",
            &url,
            "--telemetry=false",
            "--update-check=false",
            "--derp-server-stun-addresses",
            "disable",
            "--block-direct-connections",
            "--provisioner-daemons",
            "2",
            // The tests of one binary share this server and together pass Coder's 512 API requests per minute
            // and user; how the clients meet a 429 is tested against the Coder API test server's faults.
            "--dangerous-disable-rate-limits",
        ]
        .map(String::from)
        .to_vec();
        // No CODER_* setting of the caller's environment (say, inside a Coder workspace) reaches the server;
        // the database URL goes in the environment, not on the command line.
        let mut envs: Vec<(OsString, Option<OsString>)> = std::env::vars_os()
            .filter(|(key, _)| key.to_string_lossy().starts_with("CODER_"))
            .map(|(key, _)| (key, None))
            .collect();
        envs.extend([
            ("HOME".into(), Some(home.into_os_string())),
            ("CODER_PROVISIONER_TYPES".into(), Some("echo".into())),
            ("CODER_PG_CONNECTION_URL".into(), Some(database_url.into())),
        ]);
        let process = ManagedProcess::spawn_with_env(
            "coder",
            &binaries.coder,
            &args,
            &envs,
            &root.join("coder.log"),
            &root.join("coder.pid"),
        )?;
        let mut coder = Self {
            process,
            port,
            url,
            database_url: database_url.to_owned(),
            organization_id: String::new(),
            owner_token: SecretString::from(String::new()),
            echotar: binaries.echotar.clone(),
            root,
            reaper: Mutex::new(Some(reaper)),
        };
        coder.wait_ready().await?;
        coder.create_owner().await?;
        Ok(coder)
    }

    async fn wait_ready(&self) -> Result<()> {
        let started = Instant::now();
        let mut last_error = anyhow!("not checked yet");
        loop {
            if let Some(status) = self.process.exit_status() {
                bail!(
                    "coder server exited with {status} during start-up; last lines of {}:\n{}",
                    self.log_path().display(),
                    self.process.log_tail(LOG_TAIL_LINES)
                );
            }
            match self.request_as(None, "GET", "/api/v2/buildinfo", None).await {
                Ok(response) if response.status == 200 => {
                    tracing::debug!(elapsed = ?started.elapsed(), url = %self.url, "real Coder is ready");
                    return Ok(());
                }
                Ok(response) => last_error = anyhow!("status {}: {}", response.status, response.text()),
                Err(e) => last_error = e,
            }
            if started.elapsed() >= STARTUP_TIMEOUT {
                bail!(
                    "timed out after {STARTUP_TIMEOUT:?} waiting for coder server to answer /api/v2/buildinfo \
                     (last error: {last_error:#}); last lines of {}:\n{}",
                    self.log_path().display(),
                    self.process.log_tail(LOG_TAIL_LINES)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `POST /users/first`, then `POST /users/login` for the owner's session token.
    async fn create_owner(&mut self) -> Result<()> {
        let password = random_password()?;
        let first = self
            .send_json_as(
                None,
                "POST",
                "/api/v2/users/first",
                &json!({
                    "email": OWNER_EMAIL,
                    "username": OWNER_USERNAME,
                    "name": "Owner",
                    "password": password.expose_secret(),
                }),
            )
            .await?;
        if first.status != 201 {
            bail!(
                "POST /api/v2/users/first answered {}: {}",
                first.status,
                first.text()
            );
        }
        self.organization_id = first.json()?["organization_id"]
            .as_str()
            .ok_or_else(|| {
                anyhow!(
                    "POST /api/v2/users/first answered without organization_id: {}",
                    first.text()
                )
            })?
            .to_owned();
        let login = self
            .send_json_as(
                None,
                "POST",
                "/api/v2/users/login",
                &json!({
                    "email": OWNER_EMAIL,
                    "password": password.expose_secret(),
                }),
            )
            .await?;
        if login.status != 201 {
            // An error answer holds no token.
            bail!(
                "POST /api/v2/users/login answered {}: {}",
                login.status,
                login.text()
            );
        }
        let token = serde_json::from_slice::<Value>(&login.body)
            .ok()
            .and_then(|body| body["session_token"].as_str().map(str::to_owned))
            .ok_or_else(|| {
                anyhow!(
                    "POST /api/v2/users/login answered {} without a session_token",
                    login.status
                )
            })?;
        self.owner_token = SecretString::from(token);
        Ok(())
    }

    /// `http://127.0.0.1:PORT`, the server's access URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The session token of the owner user (`Coder-Session-Token` header).
    pub fn owner_token(&self) -> &str {
        self.owner_token.expose_secret()
    }

    /// ID of the default organization.
    pub fn organization_id(&self) -> &str {
        &self.organization_id
    }

    /// The PostgreSQL URL of this server's database (on [`crate::postgres::shared`]).
    pub fn database_url(&self) -> &str {
        &self.database_url
    }

    /// The server's log (stdout and stderr).
    pub fn log_path(&self) -> &Path {
        self.process.log_path()
    }

    /// The last `lines` lines of the server's log, for assertion messages.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// Directory holding the server's HOME, config, cache and log.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// A tar archive of an echo-provisioner template (runs `echotar`).
    pub fn echo_template(&self, kind: EchoTemplate) -> Result<Vec<u8>> {
        let output = Command::new(&self.echotar)
            .arg(kind.as_str())
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {}", self.echotar.display()))?;
        if !output.status.success() || output.stdout.is_empty() {
            bail!(
                "{} {} failed with {}: {}",
                self.echotar.display(),
                kind.as_str(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(output.stdout)
    }

    /// Uploads a tar archive as the owner (`POST /api/v2/files`) and returns the file's ID.
    pub async fn upload_file(&self, tar: &[u8]) -> Result<String> {
        let response = self
            .request("POST", "/api/v2/files", Some(("application/x-tar", tar)))
            .await?;
        if response.status != 201 {
            bail!(
                "POST /api/v2/files answered {}: {}",
                response.status,
                response.text()
            );
        }
        response.json()?["hash"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("POST /api/v2/files answered without hash: {}", response.text()))
    }

    /// A request as the owner; `body` is `(content type, bytes)`.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<(&str, &[u8])>,
    ) -> Result<ApiResponse> {
        self.request_as(Some(self.owner_token()), method, path, body)
            .await
    }

    /// `GET path` as the owner.
    pub async fn get(&self, path: &str) -> Result<ApiResponse> {
        self.request("GET", path, None).await
    }

    /// `method path` as the owner with a JSON body.
    pub async fn send_json(&self, method: &str, path: &str, body: &Value) -> Result<ApiResponse> {
        self.send_json_as(Some(self.owner_token()), method, path, body)
            .await
    }

    /// `method path` with a JSON body and an optional session token.
    pub async fn send_json_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: &Value,
    ) -> Result<ApiResponse> {
        let bytes = serde_json::to_vec(body).context("encoding a JSON body")?;
        self.request_as(token, method, path, Some(("application/json", &bytes)))
            .await
    }

    /// A request with an optional session token. Plain HTTP/1.0 (the server then neither chunks the answer nor
    /// keeps the connection), which avoids another client dependency.
    pub async fn request_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<(&str, &[u8])>,
    ) -> Result<ApiResponse> {
        let what = format!("{method} {path}");
        tokio::time::timeout(REQUEST_TIMEOUT, http10(self.port, token, method, path, body))
            .await
            .map_err(|_| anyhow!("{what}: no answer within {REQUEST_TIMEOUT:?}"))?
            .with_context(|| what.clone())
    }

    /// Stops the server and removes its directory (not its database). Idempotent.
    pub fn stop(&self) {
        self.process.stop();
        crate::process::reap_now(&self.reaper, &self.root);
    }
}

impl Drop for RealCoder {
    fn drop(&mut self) {
        self.stop();
    }
}

/// 32 random hex digits: plenty for Coder's password strength check.
fn random_password() -> Result<SecretString> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow!("getrandom: {e}"))?;
    Ok(SecretString::from(
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
    ))
}

async fn http10(
    port: u16,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<(&str, &[u8])>,
) -> Result<ApiResponse> {
    let mut head =
        format!("{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Coder-Session-Token: {token}\r\n"));
    }
    let body = body.unwrap_or(("", &[]));
    if !body.0.is_empty() {
        head.push_str(&format!("Content-Type: {}\r\n", body.0));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.1.len()));
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .context("connecting")?;
    // One write for head and body: a server that answers from the head alone (e.g. `Route not found.`) and closes
    // with part of the request unread resets the connection, which can discard its answer.
    let mut request = head.into_bytes();
    request.extend_from_slice(body.1);
    stream.write_all(&request).await.context("sending the request")?;
    let mut response = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) => break,
            Ok(n) => response.extend_from_slice(&chunk[..n]),
            // A reset after a complete answer (the server closed with request bytes unread) still is that answer.
            Err(error) if is_complete_http10(&response) => {
                tracing::debug!(%error, "connection reset after a complete answer");
                break;
            }
            Err(error) => return Err(error).context("reading the answer"),
        }
    }
    parse_http10(&response)
}

/// Whether `response` holds a whole head and as many body bytes as its `Content-Length` announces.
fn is_complete_http10(response: &[u8]) -> bool {
    let Some(split) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&response[..split]);
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())
                .flatten()
        })
        .is_some_and(|length| response.len() >= split + 4 + length)
}

fn parse_http10(response: &[u8]) -> Result<ApiResponse> {
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("incomplete HTTP answer ({} bytes)", response.len()))?;
    let head = String::from_utf8_lossy(&response[..split]);
    let status_line = head.lines().next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| anyhow!("malformed HTTP status line {status_line:?}"))?;
    if head
        .lines()
        .any(|line| line.to_ascii_lowercase().starts_with("transfer-encoding:"))
    {
        bail!("unexpected Transfer-Encoding in an HTTP/1.0 answer");
    }
    Ok(ApiResponse {
        status,
        body: response[split + 4..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_complete_answer_is_known_by_its_content_length() {
        assert!(is_complete_http10(
            b"HTTP/1.0 404 Not Found\r\nContent-Length: 3\r\n\r\n{}\n"
        ));
        assert!(!is_complete_http10(
            b"HTTP/1.0 404 Not Found\r\nContent-Length: 3\r\n\r\n{}"
        ));
        assert!(!is_complete_http10(
            b"HTTP/1.0 404 Not Found\r\nContent-Length: 3\r\n"
        ));
        assert!(!is_complete_http10(b"HTTP/1.0 200 OK\r\n\r\nno length"));
    }

    #[test]
    fn parses_an_http10_answer() {
        let answer = parse_http10(b"HTTP/1.0 404 Not Found\r\nContent-Length: 3\r\n\r\n{}\n").unwrap();
        assert_eq!(answer.status, 404);
        assert_eq!(answer.body, b"{}\n");
        assert!(parse_http10(b"HTTP/1.0 200 OK\r\n").is_err());
        assert!(parse_http10(b"garbage\r\n\r\n").is_err());
        let chunked = parse_http10(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
        assert!(chunked.is_err());
    }

    #[test]
    fn passwords_differ() {
        let a = random_password().unwrap();
        let b = random_password().unwrap();
        assert_eq!(a.expose_secret().len(), 32);
        assert_ne!(a.expose_secret(), b.expose_secret());
    }
}
