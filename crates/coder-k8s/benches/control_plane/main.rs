//! Operator benchmark: the real `coder-k8s` binary (`--app=all`: the controllers and the aggregated API server)
//! against a dedicated etcd + kube-apiserver, PostgreSQL and the Coder API test server.
//!
//! `cargo bench -p coder-k8s --bench control_plane -- --bench` runs a round of 100 CoderProvisioner objects (using
//! one Ready CoderControlPlane with operator access and an entitled Coder), a round of 100 CoderAIGatewayKey objects
//! on the same control plane, then rounds of 1, 100, 1,000 and 10,000 CoderControlPlane objects, each control plane
//! round in a fresh namespace. Per round it reports the latency from a create call returning to the object's
//! Deployment (a key's Secret) existing (p50 / p99 / max); the Kubernetes API requests by verb, the
//! reconciles of the round's kind and the Coder calls per new object (from the round's start until the operator is
//! idle); the operator's CPU seconds while busy and in a quiet window after; and its memory. A final rest window,
//! longer than every requeue interval of the operator, reports reads, writes, reconciles and Coder calls per minute
//! with nothing changing. After the provisioner round, list requests straight to the aggregated API server (as
//! kube-apiserver forwards `kubectl get codertemplates`) report their latency and their cost in Kubernetes requests
//! and Coder calls.
//!
//! Without `--bench` (what `cargo test --all-targets` runs) it does one round of each kind with N=1, with the
//! operator's requeue intervals shortened to a few seconds, and asserts that the Deployments (the key's Secret)
//! appear, that a quiet window longer than those intervals holds no read or write request and at least one
//! reconcile (for a key: no AI Gateway key call), and that the aggregated API answers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod aggregated;
mod coder;
mod direct;
mod measure;
mod operator;
mod report;
mod round;
mod setup;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};

use crate::coder::Coder;
use crate::operator::Operator;
use crate::round::{Env, Round};

/// The kinds a round creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ControlPlane,
    Provisioner,
    AIGatewayKey,
}

impl Kind {
    /// The `kind` label of the reconcile metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::ControlPlane => "CoderControlPlane",
            Self::Provisioner => "CoderProvisioner",
            Self::AIGatewayKey => "CoderAIGatewayKey",
        }
    }
}

/// Sizes and timings of one run mode.
#[derive(Debug, Clone)]
pub struct Mode {
    pub bench: bool,
    /// N of the CoderControlPlane rounds.
    pub control_planes: &'static [usize],
    /// N of the CoderProvisioner round (0: none).
    pub provisioners: usize,
    /// N of the CoderAIGatewayKey round, on the provisioners' Ready control plane (0: none).
    pub ai_gateway_keys: usize,
    /// The operator is idle once its signal (see `round::wait_idle`) has not grown for this long.
    pub idle_stable: Duration,
    /// Give up waiting for idle after this long (requeues of earlier rounds can keep it busy).
    pub idle_max: Duration,
    /// After each round, nothing changes for this long.
    pub quiet: Duration,
    /// Time for all Deployments of a round to appear.
    pub deployments_timeout: Duration,
    /// The final window with nothing changing, longer than every requeue interval.
    pub rest: Option<Duration>,
    /// Requests of the aggregated API round (0: none).
    pub api_requests: usize,
    /// Operator flags besides `--app=all --leader-elect=false` and the listen addresses.
    pub operator_args: &'static [&'static str],
    /// The longest requeue interval of the operator, for the report.
    pub longest_requeue: Duration,
}

impl Mode {
    fn from_args() -> Self {
        if std::env::args().skip(1).any(|a| a == "--bench") {
            Self {
                bench: true,
                // The 10,000 round measures memory per object at scale (and that it grows linearly).
                control_planes: &[1, 100, 1000, 10_000],
                provisioners: 100,
                ai_gateway_keys: 100,
                api_requests: 500,
                idle_stable: Duration::from_secs(3),
                idle_max: Duration::from_secs(120),
                quiet: Duration::from_secs(10),
                deployments_timeout: Duration::from_secs(1800),
                rest: Some(Duration::from_secs(150)),
                operator_args: &["--service-address-override=127.0.0.1"],
                longest_requeue: Duration::from_secs(120),
            }
        } else {
            Self {
                bench: false,
                control_planes: &[1],
                provisioners: 1,
                ai_gateway_keys: 1,
                api_requests: 10,
                idle_stable: Duration::from_millis(1500),
                idle_max: Duration::from_secs(20),
                quiet: Duration::from_secs(6),
                deployments_timeout: Duration::from_secs(60),
                rest: None,
                operator_args: &[
                    "--service-address-override=127.0.0.1",
                    "--requeue-interval=2s",
                    "--entitlements-interval=4s",
                ],
                longest_requeue: Duration::from_secs(4),
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
    eprintln!("starting a dedicated etcd + kube-apiserver, PostgreSQL and the Coder API test server ...");
    // The harness's Service range (a /16) holds enough ClusterIPs for every control plane, each with a Service.
    let cp = coder_k8s_testenv::ControlPlane::builder()
        .start()
        .await
        .context("starting the control plane")?;
    setup::install_crds(&cp)?;
    let client = cp.client()?;
    setup::create_namespace(&client, aggregated::SERVER_NAMESPACE).await?;
    let coder = Coder::start().await?;

    let log_path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(if mode.bench {
        "control_plane-bench-operator.log"
    } else {
        "control_plane-smoke-operator.log"
    });
    let args: Vec<String> = mode.operator_args.iter().map(|a| (*a).to_owned()).collect();
    let operator = Operator::start(
        cp.kubeconfig_path(),
        &log_path,
        aggregated::SERVER_NAMESPACE,
        &args,
    )
    .await?;
    eprintln!(
        "operator pid {} ready after {:.1?} (flags {:?}; log: {})",
        operator.pid(),
        started.elapsed(),
        mode.operator_args,
        log_path.display()
    );
    let env = Env {
        client: &client,
        operator: &operator,
        coder: &coder,
        mode: &mode,
    };

    let mut rounds: Vec<Round> = Vec::new();
    let mut api_round = None;
    // Provisioners first: later rounds' requests include the requeues of earlier rounds' objects, and 1000 control
    // planes requeueing would dwarf the 100 provisioners.
    if mode.provisioners > 0 {
        let namespace = cp.namespace("bench-prov").await?.name().to_owned();
        eprintln!(
            "making control plane {}/{} Ready ...",
            namespace,
            coder::CONTROL_PLANE
        );
        coder.ready_control_plane(&client, &namespace).await?;
        round::wait_idle(&env, Kind::ControlPlane).await?;
        let round = round::run(&env, Kind::Provisioner, mode.provisioners, &namespace).await?;
        eprintln!("{}", round.summary());
        rounds.push(round);
        if mode.api_requests > 0 {
            let api = aggregated::run(&env, cp.admin_token(), &namespace, mode.api_requests).await?;
            eprintln!(
                "aggregated API: {} list requests in {:.2?}",
                api.n, api.busy.duration
            );
            api_round = Some(api);
        }
        if mode.ai_gateway_keys > 0 {
            coder.allow_keys(&client, &namespace).await?;
            // The control plane's own reconcile of the opt-in is not the keys' cost, and keys created before the
            // watch cache shows it would be refused first.
            round::wait_idle(&env, Kind::ControlPlane).await?;
            let round = round::run(&env, Kind::AIGatewayKey, mode.ai_gateway_keys, &namespace).await?;
            eprintln!("{}", round.summary());
            rounds.push(round);
        }
    }
    for &n in mode.control_planes {
        let namespace = cp.namespace(&format!("bench-n{n}")).await?.name().to_owned();
        let round = round::run(&env, Kind::ControlPlane, n, &namespace).await?;
        eprintln!("{}", round.summary());
        rounds.push(round);
    }
    let rest = match mode.rest {
        Some(window) => {
            eprintln!("rest window: {window:?} without changes ...");
            Some(env.quiet(window).await?)
        }
        None => None,
    };
    let memory = operator.memory()?;
    operator.ensure_running()?;

    report::print(
        &mode,
        &rounds,
        api_round.as_ref(),
        rest.as_ref(),
        &memory,
        operator.clock(),
        &log_path,
    );

    if !mode.bench {
        let answered = api_round.as_ref().map_or(0, |api| api.latencies.len());
        ensure!(
            answered == mode.api_requests,
            "the aggregated API answered {answered} of {} list requests with 200",
            mode.api_requests
        );
        for round in &rounds {
            let what = format!("{} N={}", round.kind.name(), round.n);
            ensure!(
                round.latencies.len() == round.n,
                "{what}: only {} of {} Deployments appeared",
                round.latencies.len(),
                round.n
            );
            let quiet = &round.quiet.metrics;
            ensure!(
                quiet.writes() == 0,
                "{what}: the operator sent {} write requests while nothing changed ({:?}); see {}",
                quiet.writes(),
                quiet.requests,
                log_path.display()
            );
            ensure!(
                quiet.reads() == 0,
                "{what}: the operator sent {} read requests while nothing changed ({:?}); reconciles must read from the watch caches; see {}",
                quiet.reads(),
                quiet.requests,
                log_path.display()
            );
            ensure!(
                round.quiet_key_calls == 0,
                "{what}: {} AI Gateway key calls while nothing changed; see {}",
                round.quiet_key_calls,
                log_path.display()
            );
            let runs = quiet.reconciles_of(round.kind.name());
            match round.kind {
                // The round's control planes have no database: they wait for an input and are not reconciled. The
                // window (longer than the entitlements interval) holds the polls of the one Ready control plane
                // only, so the "no reads or writes" above covered at least one pass.
                Kind::ControlPlane => ensure!(
                    (1..=3).contains(&runs),
                    "{what}: {runs} control plane reconciles in the {:?} quiet window, expected the one Ready control plane's 1 to 3 ({:?})",
                    round.quiet.duration,
                    quiet.reconciles
                ),
                // A Ready provisioner and a key that holds its Secret are not looked at again.
                Kind::Provisioner | Kind::AIGatewayKey => ensure!(
                    runs == 0,
                    "{what}: {runs} reconciles in the {:?} quiet window with nothing changing ({:?})",
                    round.quiet.duration,
                    quiet.reconciles
                ),
            }
        }
    }
    drop(operator);
    drop(coder);
    drop(cp);
    Ok(())
}
