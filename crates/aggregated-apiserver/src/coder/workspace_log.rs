//! `coderworkspaces/<name>/log`: the latest build log of a workspace as `text/plain`, one line per entry in Coder's
//! own text form (`<RFC 3339 time> [<level>] [<source>|<stage>] <output>`), with `limitBytes`, `follow` and the
//! limits that keep one caller from holding the server or Coder: the response size, the JSON read from Coder, the
//! read and write times, and the number of open requests per server and per user.
//!
//! Everything that can fail is checked before the answer starts, so a failure is a `Status`: the options, the name,
//! a slot, the workspace, the log so far and (with `follow`) the opening of Coder's log websocket. After that the
//! body streams and simply ends: at the end of the log, the end of the build, a size or time limit, or when the
//! client goes away.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use coder_k8s_api::aggregation::GROUP;
use coder_k8s_coder_client::types::logs::ProvisionerJobLog;
use coder_k8s_coder_client::{CoderClient, LogStream};
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::time::Instant;
use uuid::Uuid;

use super::errors::{Subject, map_coder_error};
use super::names::{self, WorkspaceName};
use super::provider::Provider;
use super::resources::{WORKSPACES, backend_of, not_canonical, subject};
use crate::generic::negotiate::{self, Answering};
use crate::generic::{ApiError, SubresourceDef, SubresourceHandler, SubresourceRequest, Verb};

/// `Retry-After` of a request refused because every slot is taken.
pub const RETRY_AFTER_SECONDS: u32 = 5;
/// The content type of every log answer.
pub const CONTENT_TYPE: &str = "text/plain; charset=utf-8";
/// Bytes handed to the HTTP layer at a time; with [`CHANNEL_CHUNKS`] this is what a stalled client can hold back
/// before the writer waits.
const CHUNK_BYTES: usize = 16 * 1024;
const CHANNEL_CHUNKS: usize = 2;

/// The limits of log requests. Production uses [`LogLimits::default`]; tests shrink them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLimits {
    /// Open log requests on this server (64).
    pub max_open: usize,
    /// Open log requests of one user (4).
    pub max_open_per_user: usize,
    /// Bytes one answer writes (4 MiB); a log cut here gets a `Warning`.
    pub max_response_bytes: usize,
    /// Bytes of JSON read from Coder (4 MiB); a log cut here gets a `Warning`.
    pub max_read_bytes: usize,
    /// Time to read from Coder without `follow` (60 s), from the arrival of the request.
    pub read_time: Duration,
    /// Time to read from Coder with `follow` (25 min).
    pub follow_read_time: Duration,
    /// Time to write the answer without `follow` (2 min), from the arrival of the request.
    pub write_time: Duration,
    /// Time to write the answer with `follow` (26 min).
    pub follow_write_time: Duration,
}

impl Default for LogLimits {
    fn default() -> Self {
        Self {
            max_open: 64,
            max_open_per_user: 4,
            max_response_bytes: 4 * 1024 * 1024,
            max_read_bytes: 4 * 1024 * 1024,
            read_time: Duration::from_secs(60),
            follow_read_time: Duration::from_secs(25 * 60),
            write_time: Duration::from_secs(2 * 60),
            follow_write_time: Duration::from_secs(26 * 60),
        }
    }
}

impl LogLimits {
    /// Every limit positive, a user's share at most the server's, and each write time at least its read time.
    pub fn validate(&self) -> Result<(), String> {
        let positive = self.max_open > 0
            && self.max_open_per_user > 0
            && self.max_response_bytes > 0
            && self.max_read_bytes > 0
            && !self.read_time.is_zero()
            && !self.follow_read_time.is_zero();
        if !positive || self.max_open_per_user > self.max_open {
            return Err(format!("invalid coderworkspaces/log limits: {self:?}"));
        }
        if self.write_time < self.read_time || self.follow_write_time < self.follow_read_time {
            return Err(format!(
                "invalid coderworkspaces/log limits: a write time is shorter than its read time: {self:?}"
            ));
        }
        Ok(())
    }

    /// The read and write times of a request.
    fn times(&self, follow: bool) -> (Duration, Duration) {
        if follow {
            (self.follow_read_time, self.follow_write_time)
        } else {
            (self.read_time, self.write_time)
        }
    }
}

/// The `log` subresource of `coderworkspaces` with the default limits.
pub fn subresource(provider: Arc<dyn Provider>) -> SubresourceDef {
    definition(provider, LogLimits::default())
}

/// The `log` subresource with other limits (tests use small ones).
pub fn subresource_with(provider: Arc<dyn Provider>, limits: LogLimits) -> Result<SubresourceDef, String> {
    limits.validate()?;
    Ok(definition(provider, limits))
}

fn definition(provider: Arc<dyn Provider>, limits: LogLimits) -> SubresourceDef {
    let slots = Arc::new(Slots::new(limits.max_open, limits.max_open_per_user));
    SubresourceDef {
        name: "log",
        kind: "CoderWorkspace",
        verbs: &[Verb::Get],
        handler: Arc::new(LogHandler {
            provider,
            limits,
            slots,
        }),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Options

/// The query options of a log request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogOptions {
    pub limit_bytes: Option<i64>,
    pub follow: bool,
}

/// Reads `limitBytes` (a whole number of at least 1: malformed → 400, below 1 → 422) and `follow` (a bare `follow`
/// is true). Unknown parameters are ignored.
pub fn parse_options(query: &BTreeMap<String, String>, name: &str) -> Result<LogOptions, ApiError> {
    let limit_bytes = match query.get("limitBytes").map(String::as_str) {
        None | Some("") => None,
        Some(raw) => Some(raw.parse::<i64>().map_err(|_| {
            ApiError::bad_request(format!(
                "invalid limitBytes {raw:?}: expected a whole number of bytes"
            ))
        })?),
    };
    if let Some(limit) = limit_bytes.filter(|limit| *limit < 1) {
        return Err(ApiError::invalid(format!(
            "CoderWorkspaceLogOptions.{GROUP} {name:?} is invalid: limitBytes: Invalid value: {limit}: must be greater than 0"
        )));
    }
    let follow = match query.get("follow").map(String::as_str) {
        None => false,
        Some("" | "1" | "t" | "T" | "true" | "TRUE" | "True") => true,
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => false,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid follow {other:?}: expected true or false"
            )));
        }
    };
    Ok(LogOptions { limit_bytes, follow })
}

/// A websocket or any other upgrade request is refused: the log is plain HTTP.
fn refuse_upgrade(headers: &HeaderMap) -> Result<(), ApiError> {
    let connection_upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
        });
    if connection_upgrade || headers.contains_key(header::UPGRADE) {
        return Err(ApiError::bad_request(
            "coderworkspaces/log does not support websocket or other upgrade requests; send a plain GET",
        ));
    }
    Ok(())
}

/// How many bytes the answer may hold, and whether the caller (not the server) set that.
fn budget(limits: &LogLimits, options: &LogOptions) -> (usize, bool) {
    match options.limit_bytes.and_then(|limit| usize::try_from(limit).ok()) {
        Some(limit) if limit <= limits.max_response_bytes => (limit, true),
        _ => (limits.max_response_bytes, false),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Slots

/// Counts open log requests per server and per user; a [`Slot`] gives its place back when dropped.
struct Slots {
    max_open: usize,
    max_open_per_user: usize,
    counts: Mutex<SlotCounts>,
}

#[derive(Default)]
struct SlotCounts {
    total: usize,
    per_user: HashMap<String, usize>,
}

/// One open log request. Dropped when the answer is written (or abandoned), which frees the slot exactly once.
struct Slot {
    slots: Arc<Slots>,
    user: String,
}

impl Slots {
    fn new(max_open: usize, max_open_per_user: usize) -> Self {
        Self {
            max_open,
            max_open_per_user,
            counts: Mutex::default(),
        }
    }

    fn counts(&self) -> MutexGuard<'_, SlotCounts> {
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes a slot for `user` without waiting: 429 with `Retry-After` when the server or the user is at the limit.
    fn acquire(self: &Arc<Self>, user: &str) -> Result<Slot, ApiError> {
        if user.is_empty() {
            return Err(ApiError::internal(
                "a coderworkspaces/log request reached the server without an authenticated user",
            ));
        }
        let mut counts = self.counts();
        if counts.total >= self.max_open {
            return Err(ApiError::too_many_requests(
                "too many open coderworkspaces/log requests on this server; retry later",
                RETRY_AFTER_SECONDS,
            ));
        }
        let open = counts.per_user.entry(user.to_owned()).or_default();
        if *open >= self.max_open_per_user {
            return Err(ApiError::too_many_requests(
                format!(
                    "too many open coderworkspaces/log requests for this user (limit {}); close one or retry later",
                    self.max_open_per_user
                ),
                RETRY_AFTER_SECONDS,
            ));
        }
        *open += 1;
        counts.total += 1;
        Ok(Slot {
            slots: self.clone(),
            user: user.to_owned(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.slots.counts();
        counts.total = counts.total.saturating_sub(1);
        if let Some(open) = counts.per_user.get_mut(&self.user) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                counts.per_user.remove(&self.user);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Rendering

/// One entry as Coder prints it, without the newline: `<time> [<level>] [<source>|<stage>] <output>`. The time is
/// RFC 3339 to the second, in the offset Coder sent.
pub fn entry_text(entry: &ProvisionerJobLog) -> Option<String> {
    let time = rfc3339_seconds(&entry.created_at)?;
    Some(format!(
        "{time} [{}] [{}|{}] {}",
        entry.log_level, entry.log_source, entry.stage, entry.output
    ))
}

/// `2026-10-02T10:00:00.123456Z` → `2026-10-02T10:00:00Z`; an offset is kept (`+00:00` reads as `Z`). A missing time
/// is Go's zero time; an unparsable one is `None`.
fn rfc3339_seconds(raw: &str) -> Option<String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Some("0001-01-01T00:00:00Z".to_owned());
    }
    raw.parse::<k8s_openapi::jiff::Timestamp>().ok()?;
    let (date, rest) = raw.split_at(raw.find(['T', 't'])?);
    let rest = &rest[1..];
    let (clock, offset) = rest.split_at(rest.find(['Z', 'z', '+', '-'])?);
    let clock = clock.split('.').next()?;
    let offset = if offset.eq_ignore_ascii_case("z") || offset == "+00:00" {
        "Z"
    } else {
        offset
    };
    Some(format!("{date}T{clock}{offset}"))
}

/// The longest prefix of `text` of at most `bytes` bytes that ends on a character boundary.
fn prefix(text: &str, bytes: usize) -> &str {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The answer's text so far, rendered from the JSON Coder sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub text: Vec<u8>,
    /// ID of the last whole entry written (`follow` continues after it).
    pub last_id: i64,
    /// `Warning` headers of the answer (never log content).
    pub warnings: Vec<String>,
    /// A limit ended the snapshot: there is more log than was written.
    pub truncated: bool,
}

/// Renders Coder's JSON build log (`[...]` or `null`), of which `cut` says the read limit kept only a prefix, into at
/// most `budget` bytes. `caller_limited` is set when the budget is the caller's `limitBytes`, which is cut without a
/// warning. Malformed JSON is a 500 that quotes nothing of it.
pub fn render_snapshot(
    json: &[u8],
    cut: bool,
    budget: usize,
    caller_limited: bool,
    limits: &LogLimits,
) -> Result<Snapshot, ApiError> {
    let mut entries = Entries::new(json, cut);
    let mut out = Snapshot::default();
    loop {
        match entries.next()? {
            Next::Entry(entry) => {
                let line = entry_text(&entry).ok_or_else(malformed)? + "\n";
                let room = budget.saturating_sub(out.text.len());
                if line.len() > room {
                    out.text.extend_from_slice(prefix(&line, room).as_bytes());
                    if !caller_limited {
                        out.warnings.push(format!(
                            "build log truncated at the server limit of {} bytes",
                            limits.max_response_bytes
                        ));
                    }
                    out.truncated = true;
                    return Ok(out);
                }
                out.text.extend_from_slice(line.as_bytes());
                out.last_id = entry.id;
            }
            Next::End => return Ok(out),
            Next::Cut => {
                out.warnings.push(format!(
                    "build log truncated: Coder returned more than the server read limit of {} bytes",
                    limits.max_read_bytes
                ));
                out.truncated = true;
                return Ok(out);
            }
        }
    }
}

fn malformed() -> ApiError {
    ApiError::internal("Internal error occurred: coder returned a malformed build log")
}

/// What the JSON holds next.
enum Next {
    Entry(ProvisionerJobLog),
    /// The log ended (and nothing but whitespace follows it).
    End,
    /// The read limit cut the JSON here.
    Cut,
}

/// Reads the entries of a JSON array (or `null`) one at a time, so a prefix cut at the read limit still yields its
/// complete entries.
struct Entries<'a> {
    json: &'a [u8],
    pos: usize,
    cut: bool,
    opened: bool,
}

impl<'a> Entries<'a> {
    fn new(json: &'a [u8], cut: bool) -> Self {
        Self {
            json,
            pos: 0,
            cut,
            opened: false,
        }
    }

    fn rest(&self) -> &'a [u8] {
        &self.json[self.pos.min(self.json.len())..]
    }

    fn skip_whitespace(&mut self) {
        while self.rest().first().is_some_and(u8::is_ascii_whitespace) {
            self.pos += 1;
        }
    }

    fn next(&mut self) -> Result<Next, ApiError> {
        self.skip_whitespace();
        if !self.opened {
            self.opened = true;
            return self.open();
        }
        match self.rest().first() {
            Some(b',') => {
                self.pos += 1;
                self.entry()
            }
            Some(b']') => {
                self.pos += 1;
                self.finish()
            }
            None if self.cut => Ok(Next::Cut),
            _ => Err(malformed()),
        }
    }

    /// `null`, `[]` or the first entry.
    fn open(&mut self) -> Result<Next, ApiError> {
        if self.rest().starts_with(b"null") {
            self.pos += 4;
            return self.finish();
        }
        match self.rest().first() {
            Some(b'[') => self.pos += 1,
            None if self.cut => return Ok(Next::Cut),
            _ => return Err(malformed()),
        }
        self.skip_whitespace();
        if self.rest().first() == Some(&b']') {
            self.pos += 1;
            return self.finish();
        }
        self.entry()
    }

    fn entry(&mut self) -> Result<Next, ApiError> {
        self.skip_whitespace();
        let mut stream = serde_json::Deserializer::from_slice(self.rest()).into_iter::<ProvisionerJobLog>();
        match stream.next() {
            Some(Ok(entry)) => {
                self.pos += stream.byte_offset();
                Ok(Next::Entry(entry))
            }
            Some(Err(e)) if e.is_eof() && self.cut => Ok(Next::Cut),
            None if self.cut => Ok(Next::Cut),
            _ => Err(malformed()),
        }
    }

    /// After the log only whitespace may follow: trailing data is malformed, not silently dropped.
    fn finish(&mut self) -> Result<Next, ApiError> {
        self.skip_whitespace();
        if self.rest().is_empty() {
            Ok(Next::End)
        } else {
            Err(malformed())
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The handler

struct LogHandler {
    provider: Arc<dyn Provider>,
    limits: LogLimits,
    slots: Arc<Slots>,
}

/// What is known before the answer starts.
struct Opened {
    snapshot: Snapshot,
    /// Coder's log websocket, when following.
    live: Option<LogStream>,
    /// Bytes the live part may still write.
    remaining: usize,
}

#[async_trait]
impl SubresourceHandler for LogHandler {
    async fn handle(&self, request: SubresourceRequest) -> Result<Response, ApiError> {
        refuse_upgrade(&request.headers)?;
        // The answer is text, but as in kube-apiserver the Accept header must allow an object encoding.
        negotiate::response_format(&request.headers, Answering::Object, None)?;
        let options = parse_options(&request.ctx.query, &request.name)?;
        let name = names::parse_workspace_name(&request.name)?;
        // The slot comes before any Coder call: a refused request costs Coder nothing.
        let slot = self.slots.acquire(&request.ctx.user.name)?;
        let started = Instant::now();
        let (read_time, write_time) = self.limits.times(options.follow);
        let read_deadline = started + read_time;
        let opened = tokio::time::timeout_at(read_deadline, self.open(&request, &name, options))
            .await
            .map_err(|_| ApiError::timeout("Timeout: reading the build log from Coder timed out"))??;
        Ok(respond(opened, slot, read_deadline, started + write_time))
    }
}

impl LogHandler {
    /// Resolves the workspace, reads and renders its latest build log, and opens the live stream when following.
    async fn open(
        &self,
        request: &SubresourceRequest,
        name: &WorkspaceName,
        options: LogOptions,
    ) -> Result<Opened, ApiError> {
        let requested = request.name.as_str();
        let about = subject(WORKSPACES, requested);
        let Some(backend) = backend_of(self.provider.as_ref(), &request.ctx).await? else {
            return Err(ApiError::not_found(GROUP, WORKSPACES, requested));
        };
        let build = latest_build(&backend.client, requested, name, about).await?;
        let (json, cut) = backend
            .client
            .workspace_build_logs_capped(build, self.limits.max_read_bytes)
            .await
            .map_err(|e| map_coder_error(&e, about))?;
        let (budget, caller_limited) = budget(&self.limits, &options);
        let snapshot = render_snapshot(&json, cut, budget, caller_limited, &self.limits)?;
        let remaining = budget.saturating_sub(snapshot.text.len());
        let live = if options.follow && !snapshot.truncated && remaining > 0 {
            let stream = backend
                .client
                .follow_workspace_build_logs(build, snapshot.last_id)
                .await
                .map_err(|e| map_coder_error(&e, about))?;
            Some(stream)
        } else {
            None
        };
        Ok(Opened {
            snapshot,
            live,
            remaining,
        })
    }
}

/// The latest build of the workspace named exactly `requested`. The organization is looked up first: one Coder does
/// not show is a 404, as is a workspace of another organization; an alias or another casing of any segment is a 400
/// naming the canonical name.
async fn latest_build(
    client: &CoderClient,
    requested: &str,
    name: &WorkspaceName,
    about: Subject<'_>,
) -> Result<Uuid, ApiError> {
    let organization = client
        .organization(&name.organization)
        .await
        .map_err(|e| map_coder_error(&e, about))?;
    let workspace = client
        .workspace_by_owner_and_name(&name.owner, &name.workspace)
        .await
        .map_err(|e| map_coder_error(&e, about))?;
    if workspace.organization_id != organization.id {
        return Err(ApiError::not_found(GROUP, WORKSPACES, requested));
    }
    let canonical = names::workspace_name(
        &workspace.organization_name,
        &workspace.owner_name,
        &workspace.name,
    )?;
    if canonical != requested {
        return Err(not_canonical("workspace", requested, &canonical));
    }
    if workspace.latest_build.id.is_nil() {
        return Err(ApiError::internal(format!(
            "Coder returned workspace {requested:?} without a latest build"
        )));
    }
    Ok(workspace.latest_build.id)
}

/// The 200 answer: warnings as `Warning` headers, the body written by a task that holds the slot until it is done.
fn respond(opened: Opened, slot: Slot, read_deadline: Instant, write_deadline: Instant) -> Response {
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    let warnings = opened.snapshot.warnings.clone();
    let writer = Writer { tx, write_deadline };
    tokio::spawn(write_log(opened, writer, slot, read_deadline));
    let mut response = Body::from_stream(body_stream(rx, write_deadline)).into_response();
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    for warning in warnings {
        if let Ok(value) = HeaderValue::from_str(&format!("299 - {warning:?}")) {
            headers.append(header::WARNING, value);
        }
    }
    response
}

/// The body: the writer's chunks until it is done. A client that has not read everything by the write deadline gets
/// a broken answer, never one that looks complete (the deadline is checked before any buffered chunk).
fn body_stream(
    rx: mpsc::Receiver<Bytes>,
    write_deadline: Instant,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::unfold(Some(rx), move |state| async move {
        let mut rx = state?;
        tokio::select! {
            biased;
            () = tokio::time::sleep_until(write_deadline) => Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the build log was not read within the write time limit",
                )),
                None,
            )),
            chunk = rx.recv() => chunk.map(|chunk| (Ok(chunk), Some(rx))),
        }
    })
}

/// Hands chunks to the body until the write deadline.
struct Writer {
    tx: mpsc::Sender<Bytes>,
    write_deadline: Instant,
}

impl Writer {
    /// `false` once the client is gone or the write deadline passed.
    async fn send(&self, chunk: Bytes) -> bool {
        matches!(
            tokio::time::timeout_at(self.write_deadline, self.tx.send(chunk)).await,
            Ok(Ok(()))
        )
    }
}

/// Writes the snapshot, then (when following) the live entries until the build ends, the budget is spent or the read
/// deadline passes. The slot is freed when this returns.
async fn write_log(opened: Opened, writer: Writer, slot: Slot, read_deadline: Instant) {
    let _slot = slot;
    let text = Bytes::from(opened.snapshot.text);
    let mut offset = 0;
    while offset < text.len() {
        let end = (offset + CHUNK_BYTES).min(text.len());
        if !writer.send(text.slice(offset..end)).await {
            return;
        }
        offset = end;
    }
    if let Some(live) = opened.live {
        follow(live, opened.remaining, &writer, read_deadline).await;
    }
}

/// Streams live entries; the websocket closes when `live` is dropped.
async fn follow(mut live: LogStream, mut remaining: usize, writer: &Writer, read_deadline: Instant) {
    while remaining > 0 {
        let entry = match tokio::time::timeout_at(read_deadline, live.next()).await {
            Ok(Some(Ok(entry))) => entry,
            // The build ended (Coder closed the stream), the stream broke, or the read time is up.
            _ => return,
        };
        let Some(line) = entry_text(&entry).map(|l| l + "\n") else {
            return;
        };
        if line.len() >= remaining {
            let _ = writer
                .send(Bytes::copy_from_slice(prefix(&line, remaining).as_bytes()))
                .await;
            return;
        }
        remaining -= line.len();
        if !writer.send(Bytes::from(line)).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(id: i64, output: &str) -> serde_json::Value {
        json!({"id": id, "created_at": format!("2026-10-02T10:00:{:02}.123456Z", id), "log_source": "provisioner",
               "log_level": "info", "stage": "Planning infrastructure", "output": output})
    }

    fn log_json(n: i64) -> Vec<u8> {
        serde_json::to_vec(
            &(1..=n)
                .map(|i| entry(i, &format!("line {i}")))
                .collect::<Vec<_>>(),
        )
        .unwrap()
    }

    fn rendered(n: i64) -> String {
        (1..=n)
            .map(|i| {
                format!("2026-10-02T10:00:{i:02}Z [info] [provisioner|Planning infrastructure] line {i}\n")
            })
            .collect()
    }

    fn query(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn lines_have_coders_text_form() {
        let entry: ProvisionerJobLog = serde_json::from_value(json!({
            "id": 1, "created_at": "2024-01-28T10:30:00Z", "log_source": "provisioner", "log_level": "info",
            "stage": "Planning", "output": "Terraform init complete"}))
        .unwrap();
        assert_eq!(
            entry_text(&entry).unwrap(),
            "2024-01-28T10:30:00Z [info] [provisioner|Planning] Terraform init complete"
        );
        assert_eq!(
            rfc3339_seconds("2024-01-28T10:30:00.999+02:00").unwrap(),
            "2024-01-28T10:30:00+02:00"
        );
        assert_eq!(
            rfc3339_seconds("2024-01-28T10:30:00.5+00:00").unwrap(),
            "2024-01-28T10:30:00Z"
        );
        assert_eq!(rfc3339_seconds("").unwrap(), "0001-01-01T00:00:00Z");
        assert_eq!(rfc3339_seconds("yesterday"), None);
    }

    #[test]
    fn options_follow_the_contract() {
        let ok = |pairs: &[(&str, &str)]| parse_options(&query(pairs), "a.b.c").unwrap();
        assert_eq!(
            ok(&[]),
            LogOptions {
                limit_bytes: None,
                follow: false
            }
        );
        assert!(ok(&[("follow", "")]).follow, "a bare ?follow is true");
        assert!(ok(&[("follow", "true")]).follow);
        assert!(!ok(&[("follow", "false")]).follow);
        assert_eq!(
            ok(&[("limitBytes", "30"), ("tailLines", "x")]).limit_bytes,
            Some(30)
        );
        let err = |pairs: &[(&str, &str)]| parse_options(&query(pairs), "a.b.c").unwrap_err();
        assert_eq!(err(&[("limitBytes", "x")]).code, 400);
        assert_eq!(err(&[("follow", "maybe")]).code, 400);
        let zero = err(&[("limitBytes", "0")]);
        assert_eq!((zero.code, zero.reason), (422, "Invalid"));
        assert_eq!(
            zero.message,
            "CoderWorkspaceLogOptions.aggregation.coder.com \"a.b.c\" is invalid: limitBytes: Invalid value: 0: must be greater than 0"
        );
        assert_eq!(err(&[("limitBytes", "-5")]).code, 422);
    }

    #[test]
    fn upgrade_requests_are_refused() {
        let mut headers = HeaderMap::new();
        assert!(refuse_upgrade(&headers).is_ok());
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        assert_eq!(refuse_upgrade(&headers).unwrap_err().code, 400);
        let mut headers = HeaderMap::new();
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        assert_eq!(refuse_upgrade(&headers).unwrap_err().code, 400);
    }

    #[test]
    fn a_whole_log_renders_every_entry() {
        let limits = LogLimits::default();
        let snapshot = render_snapshot(&log_json(3), false, 1000, false, &limits).unwrap();
        assert_eq!(String::from_utf8(snapshot.text).unwrap(), rendered(3));
        assert_eq!((snapshot.last_id, snapshot.truncated), (3, false));
        assert!(snapshot.warnings.is_empty());
        for empty in ["[]", "null", " [ ] \n", "null\n"] {
            let snapshot = render_snapshot(empty.as_bytes(), false, 1000, false, &limits).unwrap();
            assert_eq!(snapshot, Snapshot::default(), "{empty}");
        }
    }

    #[test]
    fn the_callers_limit_cuts_without_a_warning_the_servers_with_one() {
        let limits = LogLimits {
            max_response_bytes: 100,
            ..LogLimits::default()
        };
        let caller = render_snapshot(&log_json(3), false, 30, true, &limits).unwrap();
        assert_eq!(caller.text, rendered(3).as_bytes()[..30]);
        assert!(caller.truncated && caller.warnings.is_empty());
        let server = render_snapshot(&log_json(3), false, 100, false, &limits).unwrap();
        assert_eq!(server.text, rendered(3).as_bytes()[..100]);
        assert_eq!(
            server.warnings,
            ["build log truncated at the server limit of 100 bytes"]
        );
        let exact = rendered(3).len();
        let fits = render_snapshot(&log_json(3), false, exact, false, &limits).unwrap();
        assert!(!fits.truncated && fits.warnings.is_empty());
    }

    #[test]
    fn cuts_never_split_a_character() {
        let json = serde_json::to_vec(&[entry(1, "héllo wörld ✓")]).unwrap();
        let full = render_snapshot(&json, false, 1000, true, &LogLimits::default()).unwrap();
        let full = String::from_utf8(full.text).unwrap();
        for limit in 50..full.len() {
            let cut = render_snapshot(&json, false, limit, true, &LogLimits::default()).unwrap();
            let text = String::from_utf8(cut.text).expect("valid UTF-8");
            assert!(full.starts_with(&text) && text.len() <= limit && text.len() + 3 >= limit);
        }
    }

    #[test]
    fn a_read_cut_keeps_the_complete_entries_and_warns() {
        let limits = LogLimits {
            max_read_bytes: 200,
            ..LogLimits::default()
        };
        let json = log_json(5);
        let snapshot = render_snapshot(&json[..200], true, 1000, false, &limits).unwrap();
        let text = String::from_utf8(snapshot.text).unwrap();
        assert!(!text.is_empty() && rendered(5).starts_with(&text) && text.len() < rendered(5).len());
        assert!(text.ends_with('\n'), "only whole entries: {text:?}");
        assert_eq!(
            snapshot.warnings,
            ["build log truncated: Coder returned more than the server read limit of 200 bytes"]
        );
        assert!(snapshot.warnings.iter().all(|w| !w.contains("line ")));
    }

    #[test]
    fn malformed_logs_are_500_without_their_content() {
        let limits = LogLimits::default();
        for body in [
            &br#"{"secret":"x"}"#[..],
            b"null[{\"id\":1}]",
            b"[]x",
            b"[] []",
            b"[{\"id\":1,",
            b"[{\"id\":\"one\"}]",
            b"[{\"id\":1,\"created_at\":\"soon\"}]",
            b"",
        ] {
            let error = render_snapshot(body, false, 1000, false, &limits).unwrap_err();
            assert_eq!(error.code, 500, "{}", String::from_utf8_lossy(body));
            assert!(!error.message.contains("secret") && !error.message.contains("soon"));
        }
    }

    #[test]
    fn slots_count_per_server_and_per_user_and_free_on_drop() {
        let slots = Arc::new(Slots::new(3, 2));
        let a1 = slots.acquire("alice").unwrap();
        let _a2 = slots.acquire("alice").unwrap();
        let user = slots.acquire("alice").err().unwrap();
        assert_eq!((user.code, user.retry_after_seconds), (429, Some(5)));
        assert!(
            user.message.contains("for this user (limit 2)"),
            "{}",
            user.message
        );
        let _b1 = slots.acquire("bob").unwrap();
        let server = slots.acquire("carol").err().unwrap();
        assert!(server.message.contains("on this server"), "{}", server.message);
        drop(a1);
        assert!(slots.acquire("alice").is_ok());
        assert_eq!(slots.acquire("").err().unwrap().code, 500);
    }

    #[test]
    fn the_default_limits_are_the_documented_ones() {
        let limits = LogLimits::default();
        assert_eq!((limits.max_open, limits.max_open_per_user), (64, 4));
        assert_eq!(
            (limits.max_response_bytes, limits.max_read_bytes),
            (4 << 20, 4 << 20)
        );
        assert_eq!(
            (limits.read_time, limits.follow_read_time),
            (Duration::from_secs(60), Duration::from_secs(25 * 60))
        );
        assert_eq!(
            (limits.write_time, limits.follow_write_time),
            (Duration::from_secs(120), Duration::from_secs(26 * 60))
        );
        let caller = |limit| {
            budget(
                &limits,
                &LogOptions {
                    limit_bytes: Some(limit),
                    follow: false,
                },
            )
        };
        assert_eq!(caller(30), (30, true));
        assert_eq!(caller(4 << 20), (4 << 20, true));
        assert_eq!(
            caller((4 << 20) + 1),
            (4 << 20, false),
            "more than the server allows is the server's limit"
        );
    }

    #[test]
    fn limits_are_validated() {
        assert!(LogLimits::default().validate().is_ok());
        let bad = [
            LogLimits {
                max_open_per_user: 65,
                ..LogLimits::default()
            },
            LogLimits {
                max_read_bytes: 0,
                ..LogLimits::default()
            },
            LogLimits {
                write_time: Duration::from_secs(1),
                ..LogLimits::default()
            },
        ];
        for limits in bad {
            assert!(limits.validate().is_err(), "{limits:?}");
        }
    }
}
