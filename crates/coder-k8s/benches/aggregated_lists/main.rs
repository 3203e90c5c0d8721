//! Aggregated API list benchmark: the real `coder-k8s` binary (`--app=all`) registered with a dedicated etcd +
//! kube-apiserver, serving a Coder API test server that holds many workspaces and templates.
//!
//! `cargo bench -p coder-k8s --bench aggregated_lists -- --bench` seeds 1,000 workspaces and 200 templates, then
//! measures each list several ways (p50 / p99 / max): the Coder calls the server makes for it sent straight to Coder
//! (recorded from the server's own list, then replayed one after the other and as the server sends them), the list
//! sent straight to the aggregated API server (Table and JSON), the list through kube-apiserver (Table and JSON), and
//! `kubectl get`, with the operator's CPU per list straight and through kube-apiserver; and two small GETs through
//! kube-apiserver, the cost of the extra hop: one kube-apiserver answers itself, and one it proxies to the aggregated
//! API server. The paths are sampled in rounds, one sample of each per round, and the ratios are also taken round by
//! round. Then it opens 10, 100 and 1,000 watches of the namespace
//! through kube-apiserver, and then watches of 10 namespaces (each with its own control plane and token), and
//! reports for each the operator's memory and the Coder calls per minute while nothing changes, in all and with the
//! busiest token. `-- --bench --lists-only` measures the lists alone.
//!
//! Without `--bench` (what `cargo test --all-targets` runs) it does the same with 12 workspaces, 3 templates, a few
//! samples, 10 watches and 2 namespaces (5 watches each, one per kind), and asserts that every answer has the seeded objects, that the watches stay
//! open and that their poll calls Coder, below a fifth of Coder's default limit of 512 requests a minute per token.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// Shared with the operator benchmark; this one uses a part of each.
#[allow(dead_code)]
#[path = "../control_plane/coder.rs"]
mod coder;
#[allow(dead_code)]
#[path = "../control_plane/direct.rs"]
mod direct;
#[allow(dead_code)]
#[path = "../control_plane/measure.rs"]
mod measure;
#[allow(dead_code)]
#[path = "../control_plane/operator.rs"]
mod operator;
#[allow(dead_code)]
#[path = "../control_plane/setup.rs"]
mod setup;

mod rest;
mod seed;
mod timing;
mod watches;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use coder_k8s_coder_client::{CoderClient, SessionToken};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::coder::Coder;
use crate::measure::{Memory, ms, percentiles};
use crate::operator::Operator;
use crate::rest::{RestCase, Watchers, Window};
use crate::timing::{ThreadCpu, samples};

/// Sizes of one run mode.
struct Mode {
    bench: bool,
    workspaces: usize,
    templates: usize,
    /// Samples of each HTTP measurement.
    samples: usize,
    /// Samples of each `kubectl get`.
    kubectl_samples: usize,
    /// The numbers of watches of one namespace measured at rest, in order.
    watcher_steps: &'static [usize],
    /// Namespaces (control planes) of the last case, with `watches_per_namespace` each.
    namespaces: usize,
    watches_per_namespace: usize,
    window: Window,
    /// `--lists-only`: measure the lists, skip the watches at rest.
    lists_only: bool,
}

/// Coder's default rate limit per token and minute, and the share the watches may use of it.
const CODER_LIMIT_PER_MINUTE: f64 = 512.0;
const WATCH_SHARE: f64 = 0.2;

impl Mode {
    fn from_args() -> Self {
        let mode = Self::sized_by_args();
        // `--samples=N` takes more samples of each HTTP measurement (for a profile of one path).
        match std::env::args().find_map(|a| a.strip_prefix("--samples=")?.parse().ok()) {
            Some(samples) => Self { samples, ..mode },
            None => mode,
        }
    }

    fn sized_by_args() -> Self {
        let lists_only = std::env::args().skip(1).any(|a| a == "--lists-only");
        if std::env::args().skip(1).any(|a| a == "--bench") {
            Self {
                lists_only,
                bench: true,
                workspaces: 1000,
                templates: 200,
                samples: 200,
                kubectl_samples: 50,
                watcher_steps: &[10, 100, 1000],
                namespaces: 10,
                watches_per_namespace: 10,
                // The pollers reach their slowest pace (30 s) within about 40 s of their last change.
                window: Window {
                    settle: Duration::from_secs(50),
                    rest: Duration::from_secs(120),
                },
            }
        } else {
            Self {
                lists_only,
                bench: false,
                workspaces: 12,
                templates: 3,
                samples: 3,
                kubectl_samples: 1,
                watcher_steps: &[10],
                namespaces: 2,
                watches_per_namespace: 5,
                // The feed's first polls come 5 and 15 s after its baseline: one of each in the window at least.
                window: Window {
                    settle: Duration::from_secs(6),
                    rest: Duration::from_secs(12),
                },
            }
        }
    }
}

/// The latency samples of one list.
struct ListTimes {
    resource: &'static str,
    items: usize,
    coder_calls: usize,
    /// The Coder calls one after the other.
    direct_sequential: Vec<Duration>,
    /// The Coder calls as the server sends them (the first, then [`timing::AT_ONCE`] at a time).
    direct_coder: Vec<Duration>,
    server: Vec<Duration>,
    /// The same list straight to the server as JSON.
    server_json: Vec<Duration>,
    through_kube: Vec<Duration>,
    /// The same list through kube-apiserver as a JSON `<Kind>List` instead of a Table.
    through_kube_json: Vec<Duration>,
    /// One kube-apiserver hop (a Namespace GET), sampled in the same rounds.
    kube_hop: Vec<Duration>,
    /// A small answer of the aggregated API server through kube-apiserver (its API group's discovery document),
    /// sampled in the same rounds.
    proxied_hop: Vec<Duration>,
    /// The operator's own Kubernetes reads (get and list) per list it answered.
    kube_reads_per_list: f64,
    /// The operator's CPU seconds per list it answered straight, and through kube-apiserver (which forwards it with
    /// its front-proxy client certificate).
    cpu_per_list_straight: f64,
    cpu_per_list_through: f64,
    kubectl: Vec<Duration>,
}

impl ListTimes {
    fn new(resource: &'static str, items: usize, coder_calls: usize, samples: usize) -> Self {
        let series = || Vec::with_capacity(samples);
        Self {
            resource,
            items,
            coder_calls,
            direct_sequential: series(),
            direct_coder: series(),
            server: series(),
            server_json: series(),
            through_kube: series(),
            through_kube_json: series(),
            kube_hop: series(),
            proxied_hop: series(),
            kube_reads_per_list: 0.0,
            cpu_per_list_straight: 0.0,
            cpu_per_list_through: 0.0,
            kubectl: Vec::new(),
        }
    }
}

/// Everything the report prints.
struct Results {
    lists: Vec<ListTimes>,
    memory_before_watches: Memory,
    rest_cases: Vec<RestCase>,
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
    eprintln!(
        "starting etcd + kube-apiserver, PostgreSQL, the Coder API test server and coder-k8s --app=all ..."
    );
    let cp = coder_k8s_testenv::ControlPlane::builder()
        .start()
        .await
        .context("starting the control plane")?;
    setup::install_crds(&cp)?;
    let kube = cp.client()?;
    setup::create_namespace(&kube, direct::SERVER_NAMESPACE).await?;
    let coder = Coder::start().await?;
    let log_path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("aggregated_lists-operator.log");
    let operator = Operator::start(
        cp.kubeconfig_path(),
        &log_path,
        direct::SERVER_NAMESPACE,
        &["--service-address-override=127.0.0.1".to_owned()],
    )
    .await?;
    let namespace = cp.namespace("bench-agg").await?.name().to_owned();
    coder.ready_control_plane(&kube, &namespace).await?;
    coder_k8s_testenv::apiservice::register(&kube, direct::SERVER_NAMESPACE, operator.api_address().port())
        .await?;

    coder_k8s_coder_client::install_ring_provider();
    let token = operator_token(&kube, &namespace).await?;
    let coder_client = CoderClient::new(coder.server.url(), SessionToken::new(token.clone()))?;
    let seeding = Instant::now();
    seed::fill(&coder_client, mode.templates, mode.workspaces).await?;
    eprintln!(
        "seeded {} templates and {} workspaces in {:.1?}",
        mode.templates,
        mode.workspaces,
        seeding.elapsed()
    );
    wait_served(&kube, &namespace).await?;

    let context = Measure {
        mode: &mode,
        cp: &cp,
        kube: &kube,
        coder: &coder,
        operator: &operator,
        namespace: &namespace,
        token: &token,
    };
    let results = context.all().await?;
    operator.ensure_running()?;
    print_report(&mode, &results, &log_path);
    if !mode.bench {
        check_smoke(&mode, &results)?;
    }
    drop(operator);
    drop(coder);
    drop(cp);
    Ok(())
}

/// The operator token the aggregated API server calls Coder with (the control plane's token Secret).
async fn operator_token(kube: &kube::Client, namespace: &str) -> Result<String> {
    let secret = Api::<Secret>::namespaced(kube.clone(), namespace)
        .get(&format!("{}-operator-token", coder::CONTROL_PLANE))
        .await
        .context("reading the operator token Secret")?;
    let bytes = secret
        .data
        .and_then(|data| data.get("token").map(|value| value.0.clone()))
        .context("the operator token Secret has no token")?;
    String::from_utf8(bytes).context("the operator token is not UTF-8")
}

/// Waits until kube-apiserver forwards lists of the namespace to the operator.
async fn wait_served(kube: &kube::Client, namespace: &str) -> Result<()> {
    let path = format!("/apis/aggregation.coder.com/v1alpha1/namespaces/{namespace}/codertemplates");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let request = http::Request::get(&path).body(Vec::new())?;
        match kube.request_text(request).await {
            Ok(_) => return Ok(()),
            Err(error) if Instant::now() >= deadline => {
                return Err(error).context("the aggregated API does not answer through kube-apiserver");
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// What the measurements need.
struct Measure<'a> {
    mode: &'a Mode,
    cp: &'a coder_k8s_testenv::ControlPlane,
    kube: &'a kube::Client,
    coder: &'a Coder,
    operator: &'a Operator,
    namespace: &'a str,
    token: &'a str,
}

impl Measure<'_> {
    async fn all(&self) -> Result<Results> {
        let lists = vec![
            self.list("coderworkspaces", self.mode.workspaces).await?,
            self.list("codertemplates", self.mode.templates).await?,
        ];
        let memory_before_watches = self.operator.memory()?;
        let rest_cases = match self.mode.lists_only {
            true => Vec::new(),
            false => self.rest_cases().await?,
        };
        Ok(Results {
            lists,
            memory_before_watches,
            rest_cases,
        })
    }

    /// The at-rest cases: the watcher steps in the one namespace, then watches spread over several namespaces.
    async fn rest_cases(&self) -> Result<Vec<RestCase>> {
        let mut cases = Vec::new();
        let mut watchers = Watchers::default();
        let first = vec![self.namespace.to_owned()];
        for &step in self.mode.watcher_steps {
            watchers.grow_to(self.kube, &first, step).await?;
            cases.push(rest::measure(self.coder, self.operator, &watchers, 1, &self.mode.window).await?);
        }
        watchers.close();
        let extra = self
            .more_served_namespaces(self.mode.namespaces.saturating_sub(1))
            .await?;
        let mut namespaces = first;
        namespaces.extend(extra.iter().map(|ns| ns.name().to_owned()));
        let total = self.mode.watches_per_namespace * namespaces.len();
        watchers.grow_to(self.kube, &namespaces, total).await?;
        let case = rest::measure(
            self.coder,
            self.operator,
            &watchers,
            namespaces.len(),
            &self.mode.window,
        );
        cases.push(case.await?);
        Ok(cases)
    }

    /// `count` more namespaces, each with a Ready control plane of the same Coder (and its own operator token).
    async fn more_served_namespaces(&self, count: usize) -> Result<Vec<coder_k8s_testenv::TestNamespace>> {
        let mut namespaces = Vec::with_capacity(count);
        for _ in 0..count {
            let namespace = self.cp.namespace("bench-agg").await?;
            self.coder
                .ready_control_plane(self.kube, namespace.name())
                .await?;
            wait_served(self.kube, namespace.name()).await?;
            namespaces.push(namespace);
        }
        Ok(namespaces)
    }

    fn resource_path(&self, resource: &str) -> String {
        format!(
            "/apis/aggregation.coder.com/v1alpha1/namespaces/{}/{resource}",
            self.namespace
        )
    }

    /// Every measurement of one list of `items` objects, interleaved: each round takes one sample of every path in
    /// turn, so a machine that slows down or speeds up during the run weighs on every path alike, and the ratios
    /// are also taken round by round (paired).
    async fn list(&self, resource: &'static str, items: usize) -> Result<ListTimes> {
        eprintln!("measuring {resource} ({items} objects) ...");
        let path = self.resource_path(resource);
        let (server, base) = direct::client(self.kube, self.operator.api_address()).await?;
        let server_url = format!("{base}{path}");
        let admin = self.cp.admin_token();
        // Record the Coder calls of one list, then replay exactly those.
        let rows = |body: &[u8]| timing::check_rows(body, items, &path);
        rows(&timing::server_list(&server, &server_url, admin).await?)?;
        self.coder.server.clear_requests();
        rows(&timing::server_list(&server, &server_url, admin).await?)?;
        let calls = timing::coder_calls(&self.coder.server.requests());
        ensure!(!calls.is_empty(), "a list of {resource} made no Coder call");
        let coder_base = self.coder.server.url().as_str().trim_end_matches('/').to_owned();
        let plain = reqwest::Client::new();
        let hop_path = format!("/api/v1/namespaces/{}", self.namespace);
        let discovery = "/apis/aggregation.coder.com/v1alpha1";

        let mut t = ListTimes::new(resource, items, calls.len(), self.mode.samples);
        let mut kube_reads = 0;
        for _ in 0..self.mode.samples {
            let replay = |at_once| timing::replay(&plain, &coder_base, self.token, &calls, at_once);
            t.direct_sequential.push(timed(replay(1)).await?.0);
            t.direct_coder.push(timed(replay(timing::AT_ONCE)).await?.0);
            // The operator's reads are counted around the four lists it answers, not its background (a watch that
            // lists again after its resource version expired).
            let before = self.operator.scrape().await?;
            let (took, body) = timed(timing::server_list(&server, &server_url, admin)).await?;
            rows(&body)?;
            t.server.push(took);
            let (took, body) = timed(timing::server_list_json(&server, &server_url, admin)).await?;
            timing::check_items(&body, items, &path)?;
            t.server_json.push(took);
            let (took, body) = timed(timing::kube_list(self.kube, &path)).await?;
            rows(body.as_bytes())?;
            t.through_kube.push(took);
            let (took, body) = timed(timing::kube_list_json(self.kube, &path)).await?;
            timing::check_items(body.as_bytes(), items, &path)?;
            t.through_kube_json.push(took);
            kube_reads += self.operator.scrape().await?.since(&before).reads();
            t.kube_hop
                .push(timed(timing::kube_get(self.kube, &hop_path)).await?.0);
            t.proxied_hop
                .push(timed(timing::kube_get(self.kube, discovery)).await?.0);
        }
        // Four lists a round reach the server: Table and JSON, straight and through kube-apiserver.
        t.kube_reads_per_list = kube_reads as f64 / (4 * self.mode.samples).max(1) as f64;
        // The CPU in blocks of its own after the rounds: read within a round, it paused the round at that point and
        // changed the pace the lists above are measured at.
        let lists = self.mode.samples;
        let before = ThreadCpu::of(self.operator.pid())?;
        for _ in 0..lists {
            rows(&timing::server_list(&server, &server_url, admin).await?)?;
            timing::check_items(
                &timing::server_list_json(&server, &server_url, admin).await?,
                items,
                &path,
            )?;
        }
        let straight_end = ThreadCpu::of(self.operator.pid())?;
        for _ in 0..lists {
            rows(timing::kube_list(self.kube, &path).await?.as_bytes())?;
            timing::check_items(
                timing::kube_list_json(self.kube, &path).await?.as_bytes(),
                items,
                &path,
            )?;
        }
        let through_end = ThreadCpu::of(self.operator.pid())?;
        // Two lists each time: Table and JSON.
        let lists_each_way = (2 * lists).max(1) as f64;
        t.cpu_per_list_straight = straight_end.since(&before) / lists_each_way;
        t.cpu_per_list_through = through_end.since(&straight_end) / lists_each_way;
        t.kubectl = samples(self.mode.kubectl_samples, || async {
            timing::kubectl_list(self.cp, resource, self.namespace, items)
        })
        .await?;
        Ok(t)
    }
}

/// How long `future` took, and its answer.
async fn timed<T>(future: impl std::future::Future<Output = Result<T>>) -> Result<(Duration, T)> {
    let sent = Instant::now();
    let answer = future.await?;
    Ok((sent.elapsed(), answer))
}

fn row(what: &str, latencies: &[Duration]) -> String {
    let (p50, p99, max) = percentiles(latencies);
    format!(
        "| {what} | {} | {} | {} | {} |",
        latencies.len(),
        ms(p50),
        ms(p99),
        ms(max)
    )
}

/// The ratios of one representation of a list through kube-apiserver over the Coder calls the server sends for it:
/// of the percentiles, and round by round (the median of each round's own ratio, which a machine that drifts during
/// the run disturbs least).
fn print_ratios(list: &ListTimes, representation: &str, through: &[Duration], direct: &[Duration]) {
    let coder = &list.direct_coder;
    let (coder_p50, coder_p99, _) = percentiles(coder);
    let over = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    let minus = |through: &[Duration], hop: &[Duration]| -> (f64, f64, f64) {
        let (hop_p50, _, _) = percentiles(hop);
        let (p50, p99, _) = percentiles(through);
        let paired = median(
            through
                .iter()
                .zip(hop)
                .zip(coder)
                .map(|((t, h), c)| over(t.saturating_sub(*h), *c)),
        );
        (
            over(p50.saturating_sub(hop_p50), coder_p50),
            over(p99.saturating_sub(hop_p50), coder_p99),
            paired,
        )
    };
    let (kube_p50, kube_p99, kube_paired) = minus(through, &list.kube_hop);
    let (proxied_p50, proxied_p99, proxied_paired) = minus(through, &list.proxied_hop);
    let plus_hop = median(
        through
            .iter()
            .zip(&list.kube_hop)
            .zip(coder)
            .map(|((t, h), c)| over(*t, *c + *h)),
    );
    let (direct_p50, direct_p99, _) = percentiles(direct);
    let direct_paired = median(direct.iter().zip(coder).map(|(d, c)| over(*d, *c)));
    println!(
        "{representation} through kube-apiserver, over the same Coder calls sent as the server sends them (goal <= 1.10x):\n\
         - minus one kube-apiserver hop served by kube-apiserver itself: p50 {kube_p50:.2}x, p99 {kube_p99:.2}x; \
         round by round, median {kube_paired:.2}x\n\
         - minus one hop proxied to the aggregated API server, a small answer: p50 {proxied_p50:.2}x, p99 \
         {proxied_p99:.2}x; round by round, median {proxied_paired:.2}x\n\
         - the whole list over the Coder calls plus one kube-apiserver hop, round by round: median {plus_hop:.2}x\n\
         - the aggregated API server's own answer (straight to it, over TLS): p50 {:.2}x, p99 {:.2}x; round by \
         round, median {direct_paired:.2}x",
        over(direct_p50, coder_p50),
        over(direct_p99, coder_p99),
    );
}

/// The median of `ratios` (0 without any).
fn median(ratios: impl Iterator<Item = f64>) -> f64 {
    let mut sorted: Vec<f64> = ratios.collect();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn print_report(mode: &Mode, results: &Results, log_path: &std::path::Path) {
    println!(
        "\n## Aggregated API lists ({})\n",
        if mode.bench { "benchmark" } else { "smoke run" }
    );
    for list in &results.lists {
        println!(
            "### {} ({} objects; one list = {} Coder calls)\n",
            list.resource, list.items, list.coder_calls
        );
        println!("| path | samples | p50 | p99 | max |\n|---|---|---|---|---|");
        println!(
            "{}",
            row(
                "the same Coder calls straight to Coder, one after the other",
                &list.direct_sequential
            )
        );
        println!(
            "{}",
            row(
                "the same Coder calls straight to Coder, as the server sends them",
                &list.direct_coder
            )
        );
        println!(
            "{}",
            row("straight to the aggregated API server, Table", &list.server)
        );
        println!(
            "{}",
            row("straight to the aggregated API server, JSON", &list.server_json)
        );
        println!(
            "{}",
            row("through kube-apiserver (client-go), Table", &list.through_kube)
        );
        println!(
            "{}",
            row(
                "through kube-apiserver (client-go), JSON",
                &list.through_kube_json
            )
        );
        println!("{}", row("`kubectl get` (process start to exit)", &list.kubectl));
        println!(
            "\nthe operator's own Kubernetes reads per list it answered (straight and through kube-apiserver): {:.2}",
            list.kube_reads_per_list
        );
        println!(
            "the operator's CPU per list it answered: straight {:.2} ms, through kube-apiserver {:.2} ms",
            list.cpu_per_list_straight * 1e3,
            list.cpu_per_list_through * 1e3
        );
        println!();
        for (representation, through, direct) in [
            ("Table", &list.through_kube, &list.server),
            ("JSON", &list.through_kube_json, &list.server_json),
        ] {
            print_ratios(list, representation, through, direct);
        }
        println!(
            "{}",
            row("one kube-apiserver hop: GET a Namespace", &list.kube_hop)
        );
        println!(
            "{}",
            row(
                "one hop proxied to the aggregated API server: GET its API group's discovery",
                &list.proxied_hop
            )
        );
        println!();
    }
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "\noperator memory (RSS) before the watches: {:.1} MiB\n",
        mib(results.memory_before_watches.current_kib)
    );
    println!(
        "| watches | namespaces | Coder calls at rest per minute, all | with the busiest token | tokens | RSS | peak RSS |\n|---|---|---|---|---|---|---|"
    );
    for case in &results.rest_cases {
        println!(
            "| {} | {} | {:.1} | {:.1} ({:.1} % of {CODER_LIMIT_PER_MINUTE}) | {} | {:.1} MiB | {:.1} MiB |",
            case.watchers,
            case.namespaces,
            case.per_minute(),
            case.most_per_token_per_minute(),
            100.0 * case.most_per_token_per_minute() / CODER_LIMIT_PER_MINUTE,
            case.tokens,
            mib(case.memory.current_kib),
            mib(case.memory.peak_kib)
        );
    }
    println!(
        "\n(each case counted over {:?} after {:?} to settle)",
        mode.window.rest, mode.window.settle
    );
    println!("operator log: {}", log_path.display());
}

/// The smoke run's assertions (each answer was already checked for its objects while it was measured).
fn check_smoke(mode: &Mode, results: &Results) -> Result<()> {
    for list in &results.lists {
        for (what, latencies, expected) in [
            ("direct Coder, sequential", &list.direct_sequential, mode.samples),
            ("direct Coder", &list.direct_coder, mode.samples),
            ("server", &list.server, mode.samples),
            ("server, JSON", &list.server_json, mode.samples),
            ("through kube-apiserver", &list.through_kube, mode.samples),
            (
                "through kube-apiserver, JSON",
                &list.through_kube_json,
                mode.samples,
            ),
            ("kube-apiserver hop", &list.kube_hop, mode.samples),
            ("proxied hop", &list.proxied_hop, mode.samples),
            ("kubectl", &list.kubectl, mode.kubectl_samples),
        ] {
            ensure!(
                latencies.len() == expected,
                "{} {what}: {} of {expected} samples",
                list.resource,
                latencies.len()
            );
        }
        // The control planes and the token Secret come from the controllers' caches in `--app=all`.
        ensure!(
            list.kube_reads_per_list == 0.0,
            "{}: {:.2} Kubernetes reads by the operator per list",
            list.resource,
            list.kube_reads_per_list
        );
    }
    let expected: Vec<usize> = mode
        .watcher_steps
        .iter()
        .copied()
        .chain([mode.namespaces * mode.watches_per_namespace])
        .collect();
    let measured: Vec<usize> = results.rest_cases.iter().map(|c| c.watchers).collect();
    ensure!(
        measured == expected,
        "watches measured {measured:?}, expected {expected:?}"
    );
    for case in &results.rest_cases {
        ensure!(
            case.calls > 0,
            "no Coder call in {:?} with {} watches open: the watch feed does not poll",
            case.window,
            case.watchers
        );
        let busiest = case.most_per_token_per_minute();
        ensure!(
            busiest < CODER_LIMIT_PER_MINUTE * WATCH_SHARE,
            "{busiest:.0} Coder calls per minute with one token and {} watches open, above a fifth of Coder's default limit",
            case.watchers
        );
    }
    let spread = results.rest_cases.last().map_or(0, |c| c.tokens);
    ensure!(
        spread == mode.namespaces,
        "{spread} tokens polled for {} namespaces",
        mode.namespaces
    );
    Ok(())
}
