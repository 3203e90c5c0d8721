//! CoderControlPlane controller benchmark against a dedicated etcd + kube-apiserver and the real `coder-k8s` binary.
//!
//! `cargo bench -p coder-k8s --bench control_plane` creates 1, 100 and 1000 CoderControlPlane objects (each round in
//! a fresh namespace) and reports, per round: the latency from a create call returning to the object's Deployment
//! existing (p50 / p99 / max), the reconciles and Kubernetes API requests the operator made (from its `/metrics`),
//! and the write requests it sent during a quiet period in which nothing changed (expected: 0). At the end it
//! reports the operator's peak and current RSS.
//!
//! Without `--bench` (what `cargo test --all-targets` runs) it does one N=1 round with short waits and asserts that
//! the Deployment appears and that the quiet period has no writes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail, ensure};
use coder_k8s_api::control_plane::{CoderControlPlane, CoderControlPlaneSpec};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::PostParams;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt as _};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::watch;

const KIND: &str = "CoderControlPlane";
const WRITE_VERBS: [&str; 4] = ["create", "update", "patch", "delete"];
const CREATE_CONCURRENCY: usize = 32;

/// Timings of one run mode.
#[derive(Debug, Clone)]
struct Mode {
    bench: bool,
    sizes: &'static [usize],
    /// The operator is idle once the reconcile counter has not grown for this long.
    idle_stable: Duration,
    /// Give up waiting for idle after this long (requeues of earlier rounds can keep it busy).
    idle_max: Duration,
    /// Nothing changes for this long; the writes in it are counted.
    quiet: Duration,
    /// Time for all Deployments of a round to appear.
    deployments_timeout: Duration,
    /// A final window, after every round, long enough for every object's 30 s requeue: resyncs must not write.
    resync_window: Option<Duration>,
}

impl Mode {
    fn from_args() -> Self {
        if std::env::args().skip(1).any(|a| a == "--bench") {
            Self {
                bench: true,
                sizes: &[1, 100, 1000],
                idle_stable: Duration::from_secs(3),
                idle_max: Duration::from_secs(120),
                quiet: Duration::from_secs(10),
                deployments_timeout: Duration::from_secs(300),
                resync_window: Some(Duration::from_secs(35)),
            }
        } else {
            Self {
                bench: false,
                sizes: &[1],
                idle_stable: Duration::from_secs(1),
                idle_max: Duration::from_secs(20),
                quiet: Duration::from_secs(3),
                deployments_timeout: Duration::from_secs(60),
                resync_window: None,
            }
        }
    }
}

fn main() -> Result<()> {
    let mode = Mode::from_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    runtime.block_on(run(mode))
}

async fn run(mode: Mode) -> Result<()> {
    let started = Instant::now();
    eprintln!("starting a dedicated etcd + kube-apiserver ...");
    // The harness's Service range (a /16) holds enough ClusterIPs for 1101 control planes, each with a Service.
    let cp = coder_k8s_testenv::ControlPlane::builder()
        .start()
        .await
        .context("starting the control plane")?;
    install_crds(&cp)?;
    let client = cp.client()?;

    let log_path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(if mode.bench {
        "control_plane-bench-operator.log"
    } else {
        "control_plane-smoke-operator.log"
    });
    let operator = Operator::start(cp.kubeconfig_path(), &log_path).await?;
    eprintln!(
        "operator pid {} ready after {:.1?} (log: {})",
        operator.pid(),
        started.elapsed(),
        log_path.display()
    );

    let mut rounds = Vec::new();
    for &n in mode.sizes {
        let round = run_round(&cp, &client, &operator, &mode, n).await?;
        eprintln!("{}", round.summary());
        rounds.push(round);
    }
    let resync = match mode.resync_window {
        Some(window) => {
            eprintln!("resync window: {window:?} without changes ...");
            let before = operator.scrape().await?;
            tokio::time::sleep(window).await;
            Some((window, operator.scrape().await?.since(&before)))
        }
        None => None,
    };
    let memory = operator.memory()?;
    operator.ensure_running()?;

    print_report(&mode, &rounds, resync.as_ref(), &memory, &log_path);

    if !mode.bench {
        for round in &rounds {
            ensure!(
                round.latencies.len() == round.n,
                "only {} of {} Deployments appeared",
                round.latencies.len(),
                round.n
            );
            ensure!(
                round.quiet_writes == 0,
                "the operator sent {} write requests while nothing changed ({:?}); see {}",
                round.quiet_writes,
                round.quiet_verbs,
                log_path.display()
            );
        }
    }
    drop(operator);
    drop(cp);
    Ok(())
}

fn install_crds(cp: &coder_k8s_testenv::ControlPlane) -> Result<()> {
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/crd/bases");
    let crds = crds.display().to_string();
    kubectl(cp, &["apply", "--server-side", "-f", &crds]).context("installing the CRDs")?;
    kubectl(
        cp,
        &[
            "wait",
            "--for=condition=Established",
            "crd",
            "--all",
            "--timeout=60s",
        ],
    )
    .context("waiting for the CRDs")?;
    Ok(())
}

fn kubectl(cp: &coder_k8s_testenv::ControlPlane, args: &[&str]) -> Result<()> {
    let out = cp
        .kubectl()
        .args(args)
        .output()
        .with_context(|| format!("running kubectl {args:?}"))?;
    ensure!(
        out.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// The operator child process; killed when dropped (also while unwinding from a panic).
struct Operator {
    child: Mutex<Child>,
    pid: u32,
    metrics: SocketAddr,
    log_path: PathBuf,
}

impl Operator {
    async fn start(kubeconfig: &Path, log_path: &Path) -> Result<Self> {
        let [port] = coder_k8s_testenv::free_ports::<1>()?;
        let metrics = SocketAddr::from(([127, 0, 0, 1], port));
        let log = File::create(log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let child = Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
            .args([
                "--app=controller",
                "--leader-elect=false",
                &format!("--health-probe-bind-address={metrics}"),
            ])
            .env("KUBECONFIG", kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("duplicating the log file")?)
            .stderr(log)
            .spawn()
            .context("starting coder-k8s")?;
        let operator = Self {
            pid: child.id(),
            child: Mutex::new(child),
            metrics,
            log_path: log_path.to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            operator.ensure_running()?;
            if let Ok(response) = http_get(metrics, "/readyz").await
                && response.starts_with("HTTP/1.0 200")
            {
                return Ok(operator);
            }
            if Instant::now() >= deadline {
                bail!(
                    "coder-k8s is not ready after 30 s; log:\n{}",
                    operator.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn pid(&self) -> u32 {
        self.pid
    }

    fn ensure_running(&self) -> Result<()> {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(status) = child.try_wait().context("checking coder-k8s")? {
            bail!("coder-k8s exited with {status}; log:\n{}", self.log_tail(40));
        }
        Ok(())
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    async fn scrape(&self) -> Result<Metrics> {
        let response = http_get(self.metrics, "/metrics").await?;
        ensure!(
            response.starts_with("HTTP/1.0 200"),
            "GET /metrics: {}",
            response.lines().next().unwrap_or_default()
        );
        Ok(Metrics::parse(&response))
    }

    /// (peak RSS, current RSS) in KiB, from /proc/<pid>/status.
    fn memory(&self) -> Result<Memory> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .context("reading the operator's /proc status")?;
        let field = |name: &str| -> Result<u64> {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
                .ok_or_else(|| anyhow!("no {name} in /proc/{}/status", self.pid))
        };
        Ok(Memory {
            peak_kib: field("VmHWM:")?,
            current_kib: field("VmRSS:")?,
        })
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

struct Memory {
    peak_kib: u64,
    current_kib: u64,
}

/// A plain HTTP/1.0 GET: the server closes the connection after the response.
async fn http_get(addr: SocketAddr, path: &str) -> Result<String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        anyhow::Ok(response)
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .with_context(|| format!("GET {path} timed out"))?
        .with_context(|| format!("GET http://{addr}{path}"))
}

/// The counters this benchmark reads from `/metrics`.
#[derive(Debug, Clone, Default)]
struct Metrics {
    reconciles: u64,
    failures: u64,
    duration_sum: f64,
    duration_count: u64,
    requests: BTreeMap<String, u64>,
}

impl Metrics {
    fn parse(text: &str) -> Self {
        let mut metrics = Self::default();
        let kind = format!("kind=\"{KIND}\"");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            match name {
                "coder_k8s_reconcile_runs_total" if labels.contains(&kind) => {
                    metrics.reconciles += value as u64;
                }
                "coder_k8s_reconcile_failures_total" if labels.contains(&kind) => {
                    metrics.failures += value as u64;
                }
                "coder_k8s_reconcile_duration_seconds_sum" if labels.contains(&kind) => {
                    metrics.duration_sum += value;
                }
                "coder_k8s_reconcile_duration_seconds_count" if labels.contains(&kind) => {
                    metrics.duration_count += value as u64;
                }
                "coder_k8s_kube_requests_total" => {
                    if let Some(verb) = labels
                        .split(',')
                        .find_map(|l| l.trim_end_matches('}').strip_prefix("verb=\""))
                    {
                        *metrics
                            .requests
                            .entry(verb.trim_end_matches('"').to_owned())
                            .or_default() += value as u64;
                    }
                }
                _ => {}
            }
        }
        metrics
    }

    /// `self - earlier`.
    fn since(&self, earlier: &Self) -> Self {
        let mut requests = self.requests.clone();
        for (verb, count) in &mut requests {
            *count = count.saturating_sub(earlier.requests.get(verb).copied().unwrap_or(0));
        }
        requests.retain(|_, count| *count > 0);
        Self {
            reconciles: self.reconciles.saturating_sub(earlier.reconciles),
            failures: self.failures.saturating_sub(earlier.failures),
            duration_sum: self.duration_sum - earlier.duration_sum,
            duration_count: self.duration_count.saturating_sub(earlier.duration_count),
            requests,
        }
    }

    fn total_requests(&self) -> u64 {
        self.requests.values().sum()
    }

    fn writes(&self) -> u64 {
        WRITE_VERBS
            .iter()
            .map(|verb| self.requests.get(*verb).copied().unwrap_or(0))
            .sum()
    }
}

/// The results of one N.
struct Round {
    n: usize,
    namespace: String,
    /// create returned → Deployment observed, one per object whose Deployment appeared.
    latencies: Vec<Duration>,
    create_wall: Duration,
    deployments_wall: Duration,
    /// Until the last reconcile before the operator went idle (or until giving up).
    settle_wall: Duration,
    idle_reached: bool,
    activity: Metrics,
    quiet: Duration,
    quiet_reconciles: u64,
    quiet_writes: u64,
    quiet_verbs: BTreeMap<String, u64>,
}

impl Round {
    fn summary(&self) -> String {
        let (p50, p99, max) = self.percentiles();
        format!(
            "N={}: create {:.2?}, all Deployments {:.2?}, settled {:.2?}{}; latency p50 {} p99 {} max {}; {} reconciles, {} requests; quiet {}s: {} reconciles, {} writes",
            self.n,
            self.create_wall,
            self.deployments_wall,
            self.settle_wall,
            if self.idle_reached { "" } else { " (never idle)" },
            ms(p50),
            ms(p99),
            ms(max),
            self.activity.reconciles,
            self.activity.total_requests(),
            self.quiet.as_secs(),
            self.quiet_reconciles,
            self.quiet_writes,
        )
    }

    fn percentiles(&self) -> (Duration, Duration, Duration) {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let rank = |q: f64| -> Duration {
            if sorted.is_empty() {
                return Duration::ZERO;
            }
            let index = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[index]
        };
        (rank(0.50), rank(0.99), sorted.last().copied().unwrap_or_default())
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}", a as f64 / b as f64)
    }
}

async fn run_round(
    cp: &coder_k8s_testenv::ControlPlane,
    client: &Client,
    operator: &Operator,
    mode: &Mode,
    n: usize,
) -> Result<Round> {
    let namespace = cp.namespace(&format!("bench-n{n}")).await?.name().to_owned();
    eprintln!("N={n}: namespace {namespace}");
    let seen = DeploymentWatch::start(client.clone(), &namespace).await?;

    let before = operator.scrape().await?;
    let spec: CoderControlPlaneSpec =
        serde_json::from_value(serde_json::json!({})).context("an empty CoderControlPlane spec")?;
    let api: Api<CoderControlPlane> = Api::namespaced(client.clone(), &namespace);
    let round_start = Instant::now();
    let created: Vec<(String, Instant)> = futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let object = CoderControlPlane::new(&format!("cp-{i:04}"), spec.clone());
            async move {
                let created = api
                    .create(&PostParams::default(), &object)
                    .await
                    .with_context(|| format!("creating CoderControlPlane {}", object.name_any()))?;
                anyhow::Ok((created.name_any(), Instant::now()))
            }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect()
        .await?;
    let create_wall = round_start.elapsed();

    let all_seen = seen.wait_for(n, mode.deployments_timeout).await;
    let deployments_wall = round_start.elapsed();
    let observed = seen.snapshot();
    seen.stop();
    let latencies: Vec<Duration> = created
        .iter()
        .filter_map(|(name, returned)| {
            observed
                .get(name)
                .map(|appeared| appeared.saturating_duration_since(*returned))
        })
        .collect();
    if !all_seen {
        eprintln!(
            "N={n}: only {} of {n} Deployments appeared within {:?}; operator log tail:\n{}",
            latencies.len(),
            mode.deployments_timeout,
            operator.log_tail(20)
        );
    }

    let (idle_reached, last_change) = wait_idle(operator, mode.idle_stable, mode.idle_max).await?;
    let settle_wall = last_change.saturating_duration_since(round_start);
    let after = operator.scrape().await?;
    let activity = after.since(&before);

    tokio::time::sleep(mode.quiet).await;
    let quiet = operator.scrape().await?.since(&after);
    operator.ensure_running()?;

    Ok(Round {
        n,
        namespace,
        latencies,
        create_wall,
        deployments_wall,
        settle_wall,
        idle_reached,
        activity,
        quiet: mode.quiet,
        quiet_reconciles: quiet.reconciles,
        quiet_writes: quiet.writes(),
        quiet_verbs: quiet.requests,
    })
}

/// Polls the reconcile counter until it has not grown for `stable`. Returns whether that happened within `max`, and
/// when the counter last grew.
async fn wait_idle(operator: &Operator, stable: Duration, max: Duration) -> Result<(bool, Instant)> {
    let start = Instant::now();
    let mut last = operator.scrape().await?.reconciles;
    let mut last_change = start;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now_value = operator.scrape().await?.reconciles;
        let now = Instant::now();
        if now_value != last {
            last = now_value;
            last_change = now;
        } else if now.duration_since(last_change) >= stable {
            return Ok((true, last_change));
        }
        if now.duration_since(start) >= max {
            return Ok((false, last_change));
        }
    }
}

/// One watch on the Deployments of a namespace, recording when each name was first seen.
struct DeploymentWatch {
    first_seen: Arc<Mutex<HashMap<String, Instant>>>,
    count: watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl DeploymentWatch {
    /// Returns once the watch has listed the (empty) namespace, so no creation can be missed.
    async fn start(client: Client, namespace: &str) -> Result<Self> {
        let api: Api<PartialObjectMeta<Deployment>> = Api::namespaced(client, namespace);
        let first_seen = Arc::new(Mutex::new(HashMap::new()));
        let (count_tx, count) = watch::channel(0usize);
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let map = first_seen.clone();
        let task = tokio::spawn(async move {
            let mut ready_tx = Some(ready_tx);
            let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let object = match event {
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready_tx.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) => d,
                    Ok(_) => continue,
                    Err(error) => {
                        eprintln!("Deployment watch error (the watcher retries): {error}");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                };
                let now = Instant::now();
                let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
                map.entry(object.name_any()).or_insert(now);
                let _ = count_tx.send(map.len());
            }
        });
        tokio::time::timeout(Duration::from_secs(30), ready_rx)
            .await
            .context("the Deployment watch did not start within 30 s")?
            .context("the Deployment watch stopped")?;
        Ok(Self {
            first_seen,
            count,
            task,
        })
    }

    /// Waits until `n` Deployments were seen; false on timeout.
    async fn wait_for(&self, n: usize, timeout: Duration) -> bool {
        let mut count = self.count.clone();
        tokio::time::timeout(timeout, count.wait_for(|c| *c >= n))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    fn snapshot(&self) -> HashMap<String, Instant> {
        self.first_seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn stop(self) {
        self.task.abort();
    }
}

fn print_report(
    mode: &Mode,
    rounds: &[Round],
    resync: Option<&(Duration, Metrics)>,
    memory: &Memory,
    log_path: &Path,
) {
    let mut out = String::new();
    let title = if mode.bench {
        "CoderControlPlane controller benchmark"
    } else {
        "CoderControlPlane controller smoke check (run with --bench for N = 1, 100, 1000)"
    };
    let _ = writeln!(out, "\n{title}");
    let _ = writeln!(
        out,
        "latency = create call returned -> Deployment seen by a watch; creates {CREATE_CONCURRENCY} at a time; \
         idle = no reconcile for {:?}",
        mode.idle_stable
    );
    let _ = writeln!(
        out,
        "\n{:>5} | {:>10} | {:>10} | {:>10} | {:>9} | {:>9} | {:>9} | {:>10} | {:>9} | {:>8} | {:>7} | {:>9} | {:>6}",
        "N",
        "p50",
        "p99",
        "max",
        "create s",
        "deploys s",
        "settled s",
        "reconciles",
        "kube reqs",
        "reqs/rec",
        "wr/rec",
        "mean rec",
        "fails"
    );
    let _ = writeln!(out, "{}", "-".repeat(139));
    for round in rounds {
        let (p50, p99, max) = round.percentiles();
        let a = &round.activity;
        let mean = if a.duration_count == 0 {
            "-".to_owned()
        } else {
            ms(Duration::from_secs_f64(
                (a.duration_sum / a.duration_count as f64).max(0.0),
            ))
        };
        let _ = writeln!(
            out,
            "{:>5} | {:>10} | {:>10} | {:>10} | {:>9.2} | {:>9.2} | {:>8.2}{} | {:>10} | {:>9} | {:>8} | {:>7} | {:>9} | {:>6}",
            round.n,
            ms(p50),
            ms(p99),
            ms(max),
            round.create_wall.as_secs_f64(),
            round.deployments_wall.as_secs_f64(),
            round.settle_wall.as_secs_f64(),
            if round.idle_reached { " " } else { "*" },
            a.reconciles,
            a.total_requests(),
            ratio(a.total_requests(), a.reconciles),
            ratio(a.writes(), a.reconciles),
            mean,
            a.failures,
        );
    }
    if rounds.iter().any(|r| !r.idle_reached) {
        let _ = writeln!(
            out,
            "* the reconcile counter never stood still for {:?} within {:?}",
            mode.idle_stable, mode.idle_max
        );
    }
    let _ = writeln!(out, "\nKubernetes API requests per round, by verb (namespace):");
    for round in rounds {
        let _ = writeln!(
            out,
            "  N={:<5} {:?} ({}; {} of {} Deployments seen)",
            round.n,
            round.activity.requests,
            round.namespace,
            round.latencies.len(),
            round.n
        );
    }
    let _ = writeln!(out, "\nQuiet period (nothing changed):");
    for round in rounds {
        let _ = writeln!(
            out,
            "  N={:<5} {} s: {} reconciles, {} write requests (create/update/patch/delete), requests {:?}",
            round.n,
            round.quiet.as_secs(),
            round.quiet_reconciles,
            round.quiet_writes,
            round.quiet_verbs
        );
    }
    if let Some((window, m)) = resync {
        let _ = writeln!(
            out,
            "  all    {} s after the last round (covers the 30 s requeue of every object): {} reconciles, {} failed, \
             {} write requests, requests {:?}",
            window.as_secs(),
            m.reconciles,
            m.failures,
            m.writes(),
            m.requests
        );
    }
    let _ = writeln!(
        out,
        "\nOperator memory: peak RSS (VmHWM) {:.1} MiB, current RSS (VmRSS) {:.1} MiB",
        memory.peak_kib as f64 / 1024.0,
        memory.current_kib as f64 / 1024.0
    );
    let log = std::fs::read_to_string(log_path).unwrap_or_default();
    let notable: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    let _ = writeln!(
        out,
        "Operator log: {} ({} lines, {} WARN/ERROR)",
        log_path.display(),
        log.lines().count(),
        notable.len()
    );
    for line in notable.iter().take(10) {
        let _ = writeln!(out, "  {line}");
    }
    println!("{out}");
}
