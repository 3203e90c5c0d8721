//! Local development control plane: `coder-k8s-testenv up --dir DIR [--with-kwok] [--with-postgres]` runs etcd and
//! kube-apiserver (plus KCM, scheduler, kwok and a fake node) in the foreground until SIGTERM/SIGINT;
//! `coder-k8s-testenv down --dir DIR` stops it from another shell.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use coder_k8s_testenv::{ControlPlane, is_alive, kwok, send_signal};
use tokio::signal::unix::{SignalKind, signal};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "A local etcd + kube-apiserver control plane for coder-k8s development"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Start a fresh control plane and keep it running until SIGTERM or SIGINT.
    Up {
        /// State directory: kubeconfig, pids, logs/*.log, pki/, etcd/ (wiped at start).
        #[arg(long)]
        dir: PathBuf,
        /// Also run kube-controller-manager, kube-scheduler and kwok, with the fake node kwok-node-0,
        /// so Deployments become Available.
        #[arg(long)]
        with_kwok: bool,
        /// Also run a PostgreSQL with Coder's tables (database `coder`); its URL goes to DIR/postgres-url.
        #[arg(long)]
        with_postgres: bool,
        /// Seconds each component may take to become ready.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
    },
    /// Stop the control plane that `up --dir DIR` is running.
    Down {
        #[arg(long)]
        dir: PathBuf,
    },
}

/// First line: this process; then one line per component: `<name> <pid>`.
const PIDS_FILE: &str = "pids";

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_client=off")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Cmd::Up {
                dir,
                with_kwok,
                with_postgres,
                timeout,
            } => up(&dir, with_kwok, with_postgres, Duration::from_secs(timeout)).await,
            Cmd::Down { dir } => down(&dir).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn up(dir: &Path, with_kwok: bool, with_postgres: bool, timeout: Duration) -> Result<()> {
    if let Some(pid) = running_pid(dir)? {
        bail!(
            "a control plane is already running for {} (pid {pid}); stop it with `down`",
            dir.display()
        );
    }
    let started = Instant::now();
    let mut builder = ControlPlane::builder().dir(dir).startup_timeout(timeout);
    if with_kwok {
        builder = builder.with_kwok();
    }
    // Listen before starting, so a signal during the (slow) start is not lost.
    let mut sigterm = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let cp = tokio::select! {
        cp = builder.start() => cp?,
        _ = sigterm.recv() => bail!("interrupted by SIGTERM during start-up"),
        _ = sigint.recv() => bail!("interrupted by SIGINT during start-up"),
    };
    let postgres = if with_postgres {
        let postgres = coder_k8s_testenv::Postgres::start().await?;
        let url = postgres.create_coder_database("coder").await?;
        let path = cp.dir().join("postgres-url");
        fs::write(&path, format!("{url}\n")).with_context(|| format!("writing {}", path.display()))?;
        tracing::info!(url_file = %path.display(), "PostgreSQL with Coder's tables is running");
        Some(postgres)
    } else {
        None
    };
    let result = run(&cp, with_kwok, started, &mut sigterm, &mut sigint).await;
    tokio::task::spawn_blocking(move || drop(postgres))
        .await
        .context("stop task failed")?;
    tracing::info!("stopping the control plane");
    let pids = cp.dir().join(PIDS_FILE);
    // Stopping blocks (it waits for each process), so keep it off the async workers.
    tokio::task::spawn_blocking(move || drop(cp))
        .await
        .context("stop task failed")?;
    let _ = fs::remove_file(pids);
    tracing::info!("stopped");
    result
}

async fn run(
    cp: &ControlPlane,
    with_kwok: bool,
    started: Instant,
    sigterm: &mut tokio::signal::unix::Signal,
    sigint: &mut tokio::signal::unix::Signal,
) -> Result<()> {
    if with_kwok {
        cp.create_fake_node(kwok::FAKE_NODE_NAME).await?;
    }
    let mut pids = format!("coder-k8s-testenv {}\n", std::process::id());
    for process in cp.processes() {
        let pid = process.pid().map_or_else(|| "?".to_owned(), |p| p.to_string());
        pids.push_str(&format!("{} {pid}\n", process.name()));
    }
    let pids_path = cp.dir().join(PIDS_FILE);
    fs::write(&pids_path, pids).with_context(|| format!("writing {}", pids_path.display()))?;

    tracing::info!(
        elapsed = ?started.elapsed(),
        server = cp.server_url(),
        logs = %cp.log_dir().display(),
        "control plane ready; stop it with Ctrl-C, SIGTERM or `coder-k8s-testenv down --dir {}`",
        cp.dir().display()
    );
    println!("KUBECONFIG={}", cp.kubeconfig_path().display());

    let mut check = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            biased;
            _ = sigterm.recv() => return Ok(()),
            _ = sigint.recv() => return Ok(()),
            _ = check.tick() => {
                if let Some((name, status)) = cp.exited() {
                    bail!(
                        "{name} exited with {status}; see {}",
                        cp.log_dir().join(format!("{name}.log")).display()
                    );
                }
            }
        }
    }
}

/// The pid of a live `up` for `dir`, from its pids file.
fn running_pid(dir: &Path) -> Result<Option<u32>> {
    let path = dir.join(PIDS_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let pid = text
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("coder-k8s-testenv "))
        .and_then(|pid| pid.trim().parse::<u32>().ok());
    Ok(pid.filter(|&pid| pid != std::process::id() && is_alive(pid)))
}

async fn down(dir: &Path) -> Result<()> {
    let Some(pid) = running_pid(dir)? else {
        eprintln!("no control plane is running for {}", dir.display());
        return Ok(());
    };
    send_signal("TERM", pid);
    let deadline = Instant::now() + Duration::from_secs(60);
    while is_alive(pid) {
        if Instant::now() >= deadline {
            bail!("pid {pid} is still running 60 s after SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("stopped the control plane for {}", dir.display());
    Ok(())
}
