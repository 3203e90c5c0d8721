//! One round: create N objects of one kind, time their Deployments, wait until the operator is idle, then watch a
//! quiet window in which nothing changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use coder_k8s_api::ai_gateway_key::CoderAIGatewayKey;
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::provisioner::CoderProvisioner;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt as _};
use serde_json::json;
use tokio::sync::watch;

use crate::coder::{CONTROL_PLANE, Coder, mark_ready};
use crate::measure::{Memory, Metrics, ms, percentiles};
use crate::operator::Operator;
use crate::{Kind, Mode};

const CREATE_CONCURRENCY: usize = 32;

/// A stretch of time and what the operator did in it.
#[derive(Debug, Clone)]
pub struct Window {
    pub duration: Duration,
    pub metrics: Metrics,
    pub coder_calls: usize,
    pub cpu_seconds: f64,
}

impl Window {
    /// Per minute of the window.
    pub fn per_minute(&self, count: u64) -> f64 {
        count as f64 * 60.0 / self.duration.as_secs_f64().max(f64::EPSILON)
    }
}

/// Everything the benchmark talks to.
pub struct Env<'a> {
    pub client: &'a Client,
    pub operator: &'a Operator,
    pub coder: &'a Coder,
    pub mode: &'a Mode,
}

impl Env<'_> {
    /// Measures a window of `duration` in which the benchmark changes nothing.
    pub async fn quiet(&self, duration: Duration) -> Result<Window> {
        let (metrics, calls, cpu) = (
            self.operator.scrape().await?,
            self.coder.calls(),
            self.operator.cpu_seconds()?,
        );
        tokio::time::sleep(duration).await;
        let window = Window {
            duration,
            metrics: self.operator.scrape().await?.since(&metrics),
            coder_calls: self.coder.calls().saturating_sub(calls),
            cpu_seconds: self.operator.cpu_seconds()? - cpu,
        };
        self.operator.ensure_running()?;
        Ok(window)
    }
}

/// The results of one round.
pub struct Round {
    pub kind: Kind,
    pub n: usize,
    pub namespace: String,
    /// create returned → Deployment observed, one per object whose Deployment appeared.
    pub latencies: Vec<Duration>,
    pub create_wall: Duration,
    pub deployments_wall: Duration,
    /// Until the operator went idle (or until giving up).
    pub settle_wall: Duration,
    pub idle_reached: bool,
    /// From the first create until idle.
    pub busy: Window,
    pub quiet: Window,
    /// Calls to Coder's AI Gateway key routes in the quiet window.
    pub quiet_key_calls: usize,
    /// After the quiet window.
    pub memory: Memory,
}

impl Round {
    pub fn summary(&self) -> String {
        let (p50, p99, max) = self.percentiles();
        format!(
            "{} N={}: create {:.2?}, all Deployments {:.2?}, idle after {:.2?}{}; latency p50 {} p99 {} max {}; \
             {} reconciles, {} requests; quiet {:?}: {} reconciles, {} writes",
            self.kind.name(),
            self.n,
            self.create_wall,
            self.deployments_wall,
            self.settle_wall,
            if self.idle_reached { "" } else { " (never idle)" },
            ms(p50),
            ms(p99),
            ms(max),
            self.busy.metrics.reconciles_of(self.kind.name()),
            self.busy.metrics.requests.values().sum::<u64>(),
            self.quiet.duration,
            self.quiet.metrics.all_reconciles(),
            self.quiet.metrics.writes(),
        )
    }

    pub fn percentiles(&self) -> (Duration, Duration, Duration) {
        percentiles(&self.latencies)
    }
}

/// Name of object `i` of a round, and the name of what the round waits for (its Deployment, or a key's Secret).
fn names(kind: Kind, i: usize) -> (String, String) {
    match kind {
        Kind::ControlPlane => (format!("cp-{i:04}"), format!("cp-{i:04}")),
        Kind::Provisioner => (format!("p-{i:04}"), format!("provisioner-p-{i:04}")),
        Kind::AIGatewayKey => (format!("key-{i:04}"), format!("key-{i:04}-ai-gateway-key")),
    }
}

/// The prefix of every name [`names`] gives the waited-for objects of `kind`.
fn output_prefix(kind: Kind) -> &'static str {
    match kind {
        Kind::ControlPlane => "cp-",
        Kind::Provisioner => "provisioner-p-",
        Kind::AIGatewayKey => "key-",
    }
}

async fn create(client: &Client, namespace: &str, kind: Kind, name: &str) -> Result<()> {
    let params = PostParams::default();
    match kind {
        Kind::ControlPlane => {
            let spec = serde_json::from_value(json!({})).context("an empty CoderControlPlane spec")?;
            Api::<CoderControlPlane>::namespaced(client.clone(), namespace)
                .create(&params, &CoderControlPlane::new(name, spec))
                .await?;
        }
        Kind::Provisioner => {
            let spec = json!({"controlPlaneRef": {"name": CONTROL_PLANE}, "replicas": 1, "tags": {"scope": "organization"}});
            let spec = serde_json::from_value(spec).context("the CoderProvisioner spec")?;
            Api::<CoderProvisioner>::namespaced(client.clone(), namespace)
                .create(&params, &CoderProvisioner::new(name, spec))
                .await?;
        }
        Kind::AIGatewayKey => {
            let spec = json!({"controlPlaneRef": {"name": CONTROL_PLANE}});
            let spec = serde_json::from_value(spec).context("the CoderAIGatewayKey spec")?;
            Api::<CoderAIGatewayKey>::namespaced(client.clone(), namespace)
                .create(&params, &CoderAIGatewayKey::new(name, spec))
                .await?;
        }
    }
    Ok(())
}

/// Creates `n` objects of `kind` in `namespace` and measures the round, timing each object's Deployment (a key's
/// Secret). Provisioner Deployments are marked ready when they appear, as a kubelet would; control plane Deployments
/// are left as created.
pub async fn run(env: &Env<'_>, kind: Kind, n: usize, namespace: &str) -> Result<Round> {
    let mode = env.mode;
    let label = format!("{} N={n}", kind.name());
    eprintln!("{label}: namespace {namespace}");
    let (client, prefix) = (env.client.clone(), output_prefix(kind));
    let seen = match kind {
        Kind::AIGatewayKey => OutputWatch::start::<Secret>(client, namespace, prefix, false).await?,
        _ => OutputWatch::start::<Deployment>(client, namespace, prefix, kind == Kind::Provisioner).await?,
    };

    let (before, calls_before, cpu_before) = (
        env.operator.scrape().await?,
        env.coder.calls(),
        env.operator.cpu_seconds()?,
    );
    let round_start = Instant::now();
    let created: Vec<(String, Instant)> = futures::stream::iter(0..n)
        .map(|i| async move {
            let (name, deployment) = names(kind, i);
            create(env.client, namespace, kind, &name)
                .await
                .with_context(|| format!("creating {} {name}", kind.name()))?;
            anyhow::Ok((deployment, Instant::now()))
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect()
        .await?;
    let create_wall = round_start.elapsed();

    let all_seen = seen.wait_for(n, mode.deployments_timeout).await;
    let deployments_wall = round_start.elapsed();
    let observed = seen.snapshot();
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
            "{label}: only {} of {n} Deployments appeared within {:?}; operator log tail:\n{}",
            latencies.len(),
            mode.deployments_timeout,
            env.operator.log_tail(20)
        );
    }

    let (idle_reached, last_change) = wait_idle(env, kind).await?;
    seen.stop();
    let settle_wall = last_change.saturating_duration_since(round_start);
    let busy = Window {
        duration: round_start.elapsed(),
        metrics: env.operator.scrape().await?.since(&before),
        coder_calls: env.coder.calls().saturating_sub(calls_before),
        cpu_seconds: env.operator.cpu_seconds()? - cpu_before,
    };
    let key_calls = env.coder.key_calls();
    let quiet = env.quiet(mode.quiet).await?;
    let quiet_key_calls = env.coder.key_calls().saturating_sub(key_calls);
    Ok(Round {
        kind,
        n,
        namespace: namespace.to_owned(),
        latencies,
        create_wall,
        deployments_wall,
        settle_wall,
        idle_reached,
        busy,
        quiet,
        quiet_key_calls,
        memory: env.operator.memory()?,
    })
}

/// Waits until the operator is idle: no write request (and, in --bench mode, no reconcile of `kind`) for
/// `mode.idle_stable`. Smoke mode's short requeue intervals keep reconciles going, so there only writes count.
/// Returns whether that happened within `mode.idle_max`, and when the signal last changed.
pub async fn wait_idle(env: &Env<'_>, kind: Kind) -> Result<(bool, Instant)> {
    let signal = |m: &Metrics| {
        m.writes()
            + if env.mode.bench {
                m.reconciles_of(kind.name())
            } else {
                0
            }
    };
    let start = Instant::now();
    let mut last = signal(&env.operator.scrape().await?);
    let mut last_change = start;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let value = signal(&env.operator.scrape().await?);
        let now = Instant::now();
        if value != last {
            last = value;
            last_change = now;
        } else if now.duration_since(last_change) >= env.mode.idle_stable {
            return Ok((true, last_change));
        }
        if now.duration_since(start) >= env.mode.idle_max {
            return Ok((false, last_change));
        }
    }
}

/// One watch on the objects of type `K` (Deployments or Secrets) of a namespace whose names start with a prefix,
/// recording when each was first seen; optionally marking each (Deployment) ready.
struct OutputWatch {
    first_seen: Arc<Mutex<HashMap<String, Instant>>>,
    count: watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl OutputWatch {
    /// Returns once the watch has listed the namespace, so no creation can be missed.
    async fn start<K>(client: Client, namespace: &str, prefix: &str, mark: bool) -> Result<Self>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + Sync
            + 'static,
    {
        let api: Api<PartialObjectMeta<K>> = Api::namespaced(client.clone(), namespace);
        let full: Api<Deployment> = Api::namespaced(client, namespace);
        let prefix = prefix.to_owned();
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
                        eprintln!("{} watch error (the watcher retries): {error}", K::kind(&()));
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                };
                let name = object.name_any();
                if !name.starts_with(&prefix) {
                    continue;
                }
                let now = Instant::now();
                let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
                if map.contains_key(&name) {
                    continue;
                }
                map.insert(name.clone(), now);
                let _ = count_tx.send(map.len());
                if mark {
                    let full = full.clone();
                    tokio::spawn(async move {
                        if let Err(error) = mark_ready(&full, &name).await {
                            eprintln!("{error:#}");
                        }
                    });
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), ready_rx)
            .await
            .with_context(|| format!("the {} watch did not start within 30 s", K::kind(&())))?
            .with_context(|| format!("the {} watch stopped", K::kind(&())))?;
        Ok(Self {
            first_seen,
            count,
            task,
        })
    }

    /// Waits until `n` objects were seen; false on timeout.
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
