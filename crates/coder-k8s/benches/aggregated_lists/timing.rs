//! The latency samples of one list, sent several ways: the Coder calls the aggregated API server makes for it, sent
//! straight to Coder (one after the other, and as the server sends them); the list sent straight to the aggregated API server; the list through kube-apiserver (as
//! client-go sends it); and `kubectl get` as a user runs it. Every answer is checked, so a failure cannot pass as a
//! fast sample. And the operator's CPU time around them, per thread.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, ensure};
use coder_k8s_coder_testserver::RecordedRequest;
use futures::{StreamExt as _, TryStreamExt as _};

/// What kubectl asks for when it prints a table.
pub const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// `n` sequential samples of `once` (for `kubectl`, which the interleaved rounds leave out: a process start
/// each).
pub async fn samples<F, Fut>(n: usize, mut once: F) -> Result<Vec<Duration>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let mut latencies = Vec::with_capacity(n);
    for _ in 0..n {
        let sent = Instant::now();
        once().await?;
        latencies.push(sent.elapsed());
    }
    Ok(latencies)
}

/// The Coder calls of one list, replayable: `path?query`.
pub fn coder_calls(recorded: &[RecordedRequest]) -> Vec<String> {
    recorded
        .iter()
        .map(|r| match &r.query {
            Some(query) => format!("{}?{query}", r.path),
            None => r.path.clone(),
        })
        .collect()
}

/// How many calls [`replay`] sends at once after the first: the aggregated API server reads the pages of a
/// workspace list after the first four at a time.
pub const AT_ONCE: usize = 4;

/// Sends `calls` to Coder at `base`, reading every body: the first alone, then the rest `at_once` at a time (1: one
/// after the other).
pub async fn replay(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    calls: &[String],
    at_once: usize,
) -> Result<()> {
    let Some((first, rest)) = calls.split_first() else {
        return Ok(());
    };
    call(http, base, token, first).await?;
    futures::stream::iter(rest)
        .map(|c| call(http, base, token, c))
        .buffered(at_once.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

async fn call(http: &reqwest::Client, base: &str, token: &str, call: &str) -> Result<()> {
    let response = http
        .get(format!("{base}{call}"))
        .header("Coder-Session-Token", token)
        .send()
        .await
        .with_context(|| format!("GET {call}"))?;
    let status = response.status();
    response.bytes().await?;
    ensure!(status.is_success(), "GET {call}: {status}");
    Ok(())
}

/// The rows of a Table answer; fails unless there are `expected`.
pub fn check_rows(body: &[u8], expected: usize, what: &str) -> Result<()> {
    let table: serde_json::Value =
        serde_json::from_slice(body).with_context(|| format!("{what}: the answer is not JSON"))?;
    let rows = table["rows"].as_array().map_or(0, Vec::len);
    ensure!(rows == expected, "{what}: {rows} rows, expected {expected}");
    Ok(())
}

/// One Table list straight to the aggregated API server (as kube-apiserver forwards it): the answer's bytes, for
/// [`check_rows`].
pub async fn server_list(http: &reqwest::Client, url: &str, token: &str) -> Result<bytes::Bytes> {
    let response = http
        .get(url)
        .bearer_auth(token)
        .header("Accept", TABLE_ACCEPT)
        .send()
        .await
        .context("GET from the aggregated API server")?;
    let status = response.status();
    let body = response.bytes().await?;
    ensure!(status == 200, "GET {url}: {status}");
    Ok(body)
}

/// One JSON list straight to the aggregated API server: the answer's bytes, for [`check_items`].
pub async fn server_list_json(http: &reqwest::Client, url: &str, token: &str) -> Result<bytes::Bytes> {
    let response = http
        .get(url)
        .bearer_auth(token)
        .header("Accept", "application/json")
        .send()
        .await
        .context("GET from the aggregated API server")?;
    let status = response.status();
    let body = response.bytes().await?;
    ensure!(status == 200, "GET {url}: {status}");
    Ok(body)
}

/// One Table list through kube-apiserver: the answer, for [`check_rows`].
pub async fn kube_list(kube: &kube::Client, path: &str) -> Result<String> {
    let request = http::Request::get(path)
        .header("Accept", TABLE_ACCEPT)
        .body(Vec::new())?;
    kube.request_text(request)
        .await
        .with_context(|| format!("GET {path} through kube-apiserver"))
}

/// One small GET through kube-apiserver (the cost of a hop): fails unless it answers 200.
pub async fn kube_get(kube: &kube::Client, path: &str) -> Result<()> {
    let request = http::Request::get(path).body(Vec::new())?;
    kube.request_text(request)
        .await
        .with_context(|| format!("GET {path} through kube-apiserver"))?;
    Ok(())
}

/// One JSON list through kube-apiserver: the answer, for [`check_items`].
pub async fn kube_list_json(kube: &kube::Client, path: &str) -> Result<String> {
    let request = http::Request::get(path)
        .header("Accept", "application/json")
        .body(Vec::new())?;
    kube.request_text(request)
        .await
        .with_context(|| format!("GET {path} as JSON through kube-apiserver"))
}

/// The items of a JSON list; fails unless there are `expected`.
pub fn check_items(body: &[u8], expected: usize, what: &str) -> Result<()> {
    let list: serde_json::Value =
        serde_json::from_slice(body).with_context(|| format!("{what}: the answer is not JSON"))?;
    let items = list["items"].as_array().map_or(0, Vec::len);
    ensure!(items == expected, "{what}: {items} items, expected {expected}");
    Ok(())
}

/// One `kubectl get <resource> -n <namespace> --no-headers`; fails unless it prints `expected` lines.
pub fn kubectl_list(
    cp: &coder_k8s_testenv::ControlPlane,
    resource: &str,
    namespace: &str,
    expected: usize,
) -> Result<()> {
    let out = cp
        .kubectl()
        .args(["get", resource, "-n", namespace, "--no-headers"])
        .output()
        .context("running kubectl")?;
    ensure!(
        out.status.success(),
        "kubectl get {resource}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = String::from_utf8_lossy(&out.stdout).lines().count();
    ensure!(
        lines == expected,
        "kubectl get {resource}: {lines} lines, expected {expected}"
    );
    Ok(())
}

/// The CPU time of each thread of `pid` in nanoseconds, by thread ID, from the scheduler's own accounting
/// (`/proc/<pid>/task/<tid>/schedstat`), which is exact where utime and stime count whole clock ticks.
pub struct ThreadCpu(BTreeMap<u32, u64>);

impl ThreadCpu {
    pub fn of(pid: u32) -> Result<Self> {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).context("reading /proc/<pid>/task")?;
        let mut threads = BTreeMap::new();
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            // A thread that ended since the listing has no file any more: it is simply not counted.
            let Ok(schedstat) = std::fs::read_to_string(task.path().join("schedstat")) else {
                continue;
            };
            let ns = schedstat
                .split_whitespace()
                .next()
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| anyhow!("malformed schedstat of thread {tid}"))?;
            threads.insert(tid, ns);
        }
        Ok(Self(threads))
    }

    /// Seconds of CPU since `before`, over the threads alive at both readings (a thread that ended in between
    /// takes its time with it; one that started counts from zero).
    pub fn since(&self, before: &ThreadCpu) -> f64 {
        let ns: u64 = self
            .0
            .iter()
            .map(|(tid, now)| now.saturating_sub(before.0.get(tid).copied().unwrap_or(0)))
            .sum();
        ns as f64 / 1e9
    }
}
