//! The `coder-k8s` operator as a child process: start, readiness, `/metrics`, CPU and memory.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::measure::{Clock, Memory, Metrics};

/// The operator child process; killed when dropped (also while unwinding from a panic).
pub struct Operator {
    child: Mutex<Child>,
    pid: u32,
    metrics: SocketAddr,
    /// The aggregated API server's listener.
    api: SocketAddr,
    log_path: PathBuf,
    clock: Clock,
}

/// The environment variable that names a `coder-k8s` binary to measure instead of the one built with the benchmark.
pub const BINARY_OVERRIDE: &str = "CODER_K8S_BENCH_BINARY";

impl Operator {
    /// Starts `coder-k8s --app=all --leader-elect=false` (the controllers and the aggregated API server, with its
    /// serving-CA Secret in `server_namespace`) with `extra_args` and waits for `/readyz`.
    pub async fn start(
        kubeconfig: &Path,
        log_path: &Path,
        server_namespace: &str,
        extra_args: &[String],
    ) -> Result<Self> {
        let [port, api_port] = coder_k8s_testenv::free_ports::<2>()?;
        let metrics = SocketAddr::from(([127, 0, 0, 1], port));
        let api = SocketAddr::from(([127, 0, 0, 1], api_port));
        let log = File::create(log_path).with_context(|| format!("creating {}", log_path.display()))?;
        // Another build (an earlier commit, for a before-and-after on one machine) when the variable names one.
        let binary =
            std::env::var_os(BINARY_OVERRIDE).unwrap_or_else(|| env!("CARGO_BIN_EXE_coder-k8s").into());
        let child = Command::new(binary)
            .args([
                "--app=all".to_owned(),
                "--leader-elect=false".to_owned(),
                format!("--health-probe-bind-address={metrics}"),
                format!("--apiserver-bind-address={api}"),
            ])
            .args(extra_args)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAMESPACE", server_namespace)
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
            api,
            log_path: log_path.to_owned(),
            clock: Clock::detect(),
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

    pub fn api_address(&self) -> SocketAddr {
        self.api
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    pub fn ensure_running(&self) -> Result<()> {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(status) = child.try_wait().context("checking coder-k8s")? {
            bail!("coder-k8s exited with {status}; log:\n{}", self.log_tail(40));
        }
        Ok(())
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    pub async fn scrape(&self) -> Result<Metrics> {
        let response = http_get(self.metrics, "/metrics").await?;
        ensure!(
            response.starts_with("HTTP/1.0 200"),
            "GET /metrics: {}",
            response.lines().next().unwrap_or_default()
        );
        Ok(Metrics::parse(&response))
    }

    /// utime + stime so far, in seconds.
    pub fn cpu_seconds(&self) -> Result<f64> {
        self.clock.cpu_seconds(self.pid)
    }

    pub fn memory(&self) -> Result<Memory> {
        Memory::of(self.pid)
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
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
