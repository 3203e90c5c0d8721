//! What the benchmark reads about the operator: the `/metrics` counters, and CPU time and memory from /proc.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};

/// Every verb of `coder_k8s_kube_requests_total`, in report order.
pub const VERBS: [&str; 7] = ["get", "list", "watch", "create", "patch", "update", "delete"];
const READ_VERBS: [&str; 2] = ["get", "list"];
const WRITE_VERBS: [&str; 4] = ["create", "update", "patch", "delete"];

/// The counters this benchmark reads from `/metrics`; the reconcile series by `kind`.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    pub reconciles: BTreeMap<String, u64>,
    pub failures: BTreeMap<String, u64>,
    pub duration_sum: BTreeMap<String, f64>,
    pub duration_count: BTreeMap<String, u64>,
    pub requests: BTreeMap<String, u64>,
}

/// The value of label `key` in `kind="X",verb="y"}`.
fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels
        .trim_end_matches('}')
        .split(',')
        .find_map(|l| l.strip_prefix(key)?.strip_prefix("=\"")?.strip_suffix('"'))
}

fn add<V: std::ops::AddAssign + Default>(map: &mut BTreeMap<String, V>, key: Option<&str>, value: V) {
    if let Some(key) = key {
        *map.entry(key.to_owned()).or_default() += value;
    }
}

fn minus(later: &BTreeMap<String, u64>, earlier: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut out = later.clone();
    for (key, count) in &mut out {
        *count = count.saturating_sub(earlier.get(key).copied().unwrap_or(0));
    }
    out.retain(|_, count| *count > 0);
    out
}

impl Metrics {
    pub fn parse(text: &str) -> Self {
        let mut metrics = Self::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let kind = label(labels, "kind");
            match name {
                "coder_k8s_reconcile_runs_total" => add(&mut metrics.reconciles, kind, value as u64),
                "coder_k8s_reconcile_failures_total" => add(&mut metrics.failures, kind, value as u64),
                "coder_k8s_reconcile_duration_seconds_sum" => add(&mut metrics.duration_sum, kind, value),
                "coder_k8s_reconcile_duration_seconds_count" => {
                    add(&mut metrics.duration_count, kind, value as u64);
                }
                "coder_k8s_kube_requests_total" => {
                    add(&mut metrics.requests, label(labels, "verb"), value as u64)
                }
                _ => {}
            }
        }
        metrics
    }

    /// `self - earlier`.
    pub fn since(&self, earlier: &Self) -> Self {
        let mut duration_sum = self.duration_sum.clone();
        for (kind, sum) in &mut duration_sum {
            *sum -= earlier.duration_sum.get(kind).copied().unwrap_or(0.0);
        }
        Self {
            reconciles: minus(&self.reconciles, &earlier.reconciles),
            failures: minus(&self.failures, &earlier.failures),
            duration_sum,
            duration_count: minus(&self.duration_count, &earlier.duration_count),
            requests: minus(&self.requests, &earlier.requests),
        }
    }

    pub fn verb(&self, verb: &str) -> u64 {
        self.requests.get(verb).copied().unwrap_or(0)
    }

    /// get + list.
    pub fn reads(&self) -> u64 {
        READ_VERBS.iter().map(|v| self.verb(v)).sum()
    }

    /// create + update + patch + delete.
    pub fn writes(&self) -> u64 {
        WRITE_VERBS.iter().map(|v| self.verb(v)).sum()
    }

    pub fn reconciles_of(&self, kind: &str) -> u64 {
        self.reconciles.get(kind).copied().unwrap_or(0)
    }

    pub fn all_reconciles(&self) -> u64 {
        self.reconciles.values().sum()
    }

    /// Mean reconcile duration of `kind` in seconds.
    pub fn mean_duration(&self, kind: &str) -> Option<f64> {
        let count = self.duration_count.get(kind).copied().unwrap_or(0);
        (count > 0).then(|| self.duration_sum.get(kind).copied().unwrap_or(0.0).max(0.0) / count as f64)
    }
}

/// Clock ticks per second of /proc/<pid>/stat: `getconf CLK_TCK`, or 100 (Linux's USER_HZ) when that fails.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub ticks_per_second: f64,
    pub assumed: bool,
}

impl Clock {
    pub fn detect() -> Self {
        let measured = Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().ok())
            .filter(|ticks| *ticks > 0.0);
        match measured {
            Some(ticks_per_second) => Self {
                ticks_per_second,
                assumed: false,
            },
            None => Self {
                ticks_per_second: 100.0,
                assumed: true,
            },
        }
    }

    /// utime + stime of `pid` in seconds.
    pub fn cpu_seconds(&self, pid: u32) -> Result<f64> {
        let stat =
            std::fs::read_to_string(format!("/proc/{pid}/stat")).context("reading /proc/<pid>/stat")?;
        // The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
        let rest = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .ok_or_else(|| anyhow!("malformed /proc/{pid}/stat"))?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // Field 3 (state) is fields[0]: utime (14) and stime (15) are fields[11] and fields[12].
        let tick = |index: usize| -> Result<u64> {
            fields
                .get(index)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| anyhow!("no field {} in /proc/{pid}/stat", index + 3))
        };
        Ok((tick(11)? + tick(12)?) as f64 / self.ticks_per_second)
    }
}

/// Peak (VmHWM) and current (VmRSS) resident memory in KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub peak_kib: u64,
    pub current_kib: u64,
}

impl Memory {
    pub fn of(pid: u32) -> Result<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .context("reading the operator's /proc status")?;
        let field = |name: &str| -> Result<u64> {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
                .ok_or_else(|| anyhow!("no {name} in /proc/{pid}/status"))
        };
        Ok(Self {
            peak_kib: field("VmHWM:")?,
            current_kib: field("VmRSS:")?,
        })
    }
}

/// p50, p99 and max of `latencies` (zero when empty).
pub fn percentiles(latencies: &[Duration]) -> (Duration, Duration, Duration) {
    let mut sorted = latencies.to_vec();
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

pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
