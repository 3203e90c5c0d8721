//! The benchmark's report: markdown tables that a release note can quote, then the raw counts.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::Mode;
use crate::aggregated::ApiRound;
use crate::measure::{Clock, Memory, VERBS, ms};
use crate::round::{Round, Window};

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

fn per(count: u64, n: usize) -> String {
    if n == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}", count as f64 / n as f64)
    }
}

/// One row of a rate table: reads, writes, watches, reconciles and Coder calls per minute, CPU seconds.
fn rates(window: &Window) -> String {
    let m = &window.metrics;
    format!(
        "{:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}",
        window.per_minute(m.reads()),
        window.per_minute(m.writes()),
        window.per_minute(m.verb("watch")),
        window.per_minute(m.all_reconciles()),
        window.per_minute(window.coder_calls as u64),
        window.cpu_seconds,
    )
}

const RATE_HEADER: &str = "reads/min (get+list) | writes/min (create+update+patch+delete) | watch/min | \
                           reconciles/min | Coder calls/min | operator CPU s";

pub fn print(
    mode: &Mode,
    rounds: &[Round],
    api: Option<&ApiRound>,
    rest: Option<&Window>,
    memory: &Memory,
    clock: Clock,
    log: &Path,
) {
    let mut out = String::new();
    let title = if mode.bench {
        "Operator benchmark (coder-k8s --app=all: controllers and aggregated API server)"
    } else {
        "Operator smoke check (run with --bench for 100 provisioners, 500 aggregated API requests and 1, 100, 1,000 and 10,000 control planes)"
    };
    let _ = writeln!(out, "\n## {title}\n");
    let _ = writeln!(
        out,
        "Operator flags: `--app=all --leader-elect=false {}` (no leader election, so no Lease traffic). \
         Latency: create call returned -> Deployment seen by a watch; creates 32 at a time. Idle: no write \
         request{} for {:?}. CPU: utime+stime from /proc/<pid>/stat at {} ticks/s ({}).",
        mode.operator_args.join(" "),
        if mode.bench {
            " and no reconcile of the round's kind"
        } else {
            ""
        },
        mode.idle_stable,
        clock.ticks_per_second,
        if clock.assumed {
            "assumed; getconf CLK_TCK failed"
        } else {
            "getconf CLK_TCK"
        },
    );

    let _ = writeln!(
        out,
        "\n### Cost of a new object (from the round's first create until the operator is idle; per object)\n"
    );
    let _ = writeln!(
        out,
        "| Kind | N | p50 | p99 | max | {} | reconciles | Coder calls | CPU s (busy) | CPU s ({:?} quiet) | peak RSS MiB | RSS MiB |",
        VERBS.join(" | "),
        mode.quiet
    );
    let _ = writeln!(out, "|{}", "---|".repeat(17));
    for round in rounds {
        let (p50, p99, max) = round.percentiles();
        let m = &round.busy.metrics;
        let verbs: Vec<String> = VERBS.iter().map(|v| per(m.verb(v), round.n)).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {} | {} |",
            round.kind.name(),
            round.n,
            ms(p50),
            ms(p99),
            ms(max),
            verbs.join(" | "),
            per(m.reconciles_of(round.kind.name()), round.n),
            per(round.busy.coder_calls as u64, round.n),
            round.busy.cpu_seconds,
            round.quiet.cpu_seconds,
            mib(round.memory.peak_kib),
            mib(round.memory.current_kib),
        );
    }

    write_memory_growth(&mut out, rounds);

    if let Some(api) = api {
        write_api(&mut out, api);
    }

    let _ = writeln!(out, "\n### Quiet window after each round (nothing changed)\n");
    let _ = writeln!(out, "| Kind | N | window | {RATE_HEADER} |");
    let _ = writeln!(out, "|{}", "---|".repeat(9));
    for round in rounds {
        let _ = writeln!(
            out,
            "| {} | {} | {:?} | {} |",
            round.kind.name(),
            round.n,
            round.quiet.duration,
            rates(&round.quiet)
        );
    }

    if let Some(window) = rest {
        let objects: usize = rounds.iter().map(|r| r.n).sum::<usize>() + usize::from(mode.provisioners > 0);
        let _ = writeln!(
            out,
            "\n### At rest: {} objects, {:?} with nothing changing (longer than the longest requeue interval, {:?})\n",
            objects, window.duration, mode.longest_requeue
        );
        let _ = writeln!(out, "| {RATE_HEADER} |");
        let _ = writeln!(out, "|{}", "---|".repeat(6));
        let _ = writeln!(out, "| {} |", rates(window));
        let m = &window.metrics;
        let _ = writeln!(
            out,
            "\nrest window raw counts: requests {:?}, reconciles {:?}, failures {:?}, Coder calls {}",
            m.requests, m.reconciles, m.failures, window.coder_calls
        );
    }

    let _ = writeln!(out, "\nNotes:");
    let _ = writeln!(
        out,
        "- reads and writes exclude watch requests; a watch re-established by the client shows as verb `watch`."
    );
    let _ = writeln!(
        out,
        "- a round's counts include what the operator did for objects of earlier rounds meanwhile (requeues), and \
         the control plane round counts include the provisioners' requests; the per-object columns divide by N."
    );
    if mode.provisioners > 0 {
        let _ = writeln!(
            out,
            "- the provisioners use one CoderControlPlane made Ready (database Secret, Deployment marked ready, \
             operator access) before the round; the benchmark marks each provisioner Deployment ready when it \
             appears, as a kubelet would. Control plane round Deployments are left unready (no database)."
        );
    }
    if mode.ai_gateway_keys > 0 {
        let _ = writeln!(
            out,
            "- the CoderAIGatewayKey round uses the same Ready control plane, with `spec.aiGateway.allowKeys: true`; \
             its latency is from the create call to the key's Secret seen by a watch (the key is then created in \
             Coder and stored), and its \"Deployments\" in the raw counts are those Secrets."
        );
    }

    let _ = writeln!(out, "\nRaw counts per round (busy = round start until idle):");
    for round in rounds {
        let b = &round.busy;
        let _ = writeln!(
            out,
            "  {} N={:<5} ns {}: {} of {} Deployments; create {:.2?}, all Deployments {:.2?}, idle after {:.2?}{}; \
             busy {:.1?}: requests {:?}, reconciles {:?}, failures {:?}, mean {} reconcile {}, Coder calls {}; \
             quiet: requests {:?}, reconciles {:?}, Coder calls {}",
            round.kind.name(),
            round.n,
            round.namespace,
            round.latencies.len(),
            round.n,
            round.create_wall,
            round.deployments_wall,
            round.settle_wall,
            if round.idle_reached { "" } else { " (never idle)" },
            b.duration,
            b.metrics.requests,
            b.metrics.reconciles,
            b.metrics.failures,
            round.kind.name(),
            b.metrics
                .mean_duration(round.kind.name())
                .map_or_else(|| "-".to_owned(), |s| ms(Duration::from_secs_f64(s))),
            b.coder_calls,
            round.quiet.metrics.requests,
            round.quiet.metrics.reconciles,
            round.quiet.coder_calls,
        );
    }
    if rounds.iter().any(|r| !r.idle_reached) {
        let _ = writeln!(
            out,
            "  (never idle: the idle signal did not stand still for {:?} within {:?})",
            mode.idle_stable, mode.idle_max
        );
    }
    let _ = writeln!(
        out,
        "\nOperator memory at the end: peak RSS (VmHWM) {} MiB, current RSS (VmRSS) {} MiB",
        mib(memory.peak_kib),
        mib(memory.current_kib)
    );
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let notable: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    let _ = writeln!(
        out,
        "Operator log: {} ({} lines, {} WARN/ERROR)",
        log.display(),
        text.lines().count(),
        notable.len()
    );
    for line in notable.iter().take(10) {
        let _ = writeln!(out, "  {line}");
    }
    println!("{out}");
}

/// The aggregated API table: latency and the cost of one list request.
fn write_api(out: &mut String, api: &ApiRound) {
    let (p50, p99, max) = api.percentiles();
    let m = &api.busy.metrics;
    let _ = writeln!(
        out,
        "\n### Aggregated API: {} sequential `GET .../codertemplates` (Table) with a bearer token, one Ready control plane\n",
        api.n
    );
    let _ = writeln!(
        out,
        "| p50 | p99 | max | requests/s | {} per request | Coder calls per request | CPU ms per request |",
        VERBS.join(" | ")
    );
    let _ = writeln!(out, "|{}", "---|".repeat(12));
    let verbs: Vec<String> = VERBS.iter().map(|v| per(m.verb(v), api.n)).collect();
    let _ = writeln!(
        out,
        "| {} | {} | {} | {:.0} | {} | {} | {:.2} |",
        ms(p50),
        ms(p99),
        ms(max),
        api.n as f64 / api.busy.duration.as_secs_f64().max(f64::EPSILON),
        verbs.join(" | "),
        per(api.busy.coder_calls as u64, api.n),
        api.busy.cpu_seconds * 1000.0 / api.n.max(1) as f64,
    );
    let _ = writeln!(
        out,
        "\n(create = TokenReviews and SubjectAccessReviews, cached 10 s; get/list would be reads of the control plane \
         and its token Secret, which come from the controllers' caches)"
    );
}

/// One control plane round's memory: the control planes that exist after it, the RSS after its quiet window, and
/// the RSS added per control plane since the round before.
struct Growth {
    control_planes: usize,
    current_kib: u64,
    kib_per_added: Option<f64>,
}

/// The RSS growth per control plane between consecutive control plane rounds (every round adds its N; none is
/// deleted). The first round has no figure: what came before it is not only control planes.
fn memory_growth(rounds: &[Round]) -> Vec<Growth> {
    let mut out = Vec::new();
    let mut before: Option<u64> = None;
    let mut control_planes = 0;
    for round in rounds.iter().filter(|r| r.kind == crate::Kind::ControlPlane) {
        control_planes += round.n;
        let now = round.memory.current_kib;
        out.push(Growth {
            control_planes,
            current_kib: now,
            kib_per_added: before.map(|b| (now as f64 - b as f64) / round.n.max(1) as f64),
        });
        before = Some(now);
    }
    out
}

fn write_memory_growth(out: &mut String, rounds: &[Round]) {
    let growth = memory_growth(rounds);
    if growth.len() < 2 {
        return;
    }
    let _ = writeln!(
        out,
        "\n### Memory per control plane (RSS after each round's quiet window; each round adds its N)\n"
    );
    let _ = writeln!(out, "| control planes | RSS MiB | KiB per added control plane |");
    let _ = writeln!(out, "|---|---|---|");
    for g in &growth {
        let per = g
            .kib_per_added
            .map_or_else(|| "-".to_owned(), |k| format!("{k:.1}"));
        let _ = writeln!(out, "| {} | {} | {per} |", g.control_planes, mib(g.current_kib));
    }
}
