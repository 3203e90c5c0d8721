//! A real etcd + kube-apiserver (and optionally kube-controller-manager, kube-scheduler and kwok) for
//! integration tests and a local developer environment, plus a real PostgreSQL ([`postgres`]) and a real
//! open-source Coder server ([`coder::RealCoder`]).
//!
//! The binaries are built from published Go modules by `hack/build-testenv.sh` into a cache under
//! `~/.cache/coder-k8s/testenv`; the first start on a machine runs that build (it can take 20+ minutes).
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! let cp = coder_k8s_testenv::shared().await?;
//! let ns = cp.namespace("my-test").await?;
//! let client = cp.client()?;
//! # let _ = (ns, client);
//! # Ok(())
//! # }
//! ```

pub mod apiservice;
pub mod archive;
mod binaries;
pub mod coder;
mod control_plane;
pub mod kubeconfig;
pub mod kwok;
pub mod mcp;
mod namespace;
mod pki;
pub mod postgres;
mod process;

pub use archive::{EchoVariable, echo_with_variables, one_file_tar, tar_entries, tar_of};
pub use binaries::{Binaries, CoderBinaries, build_script};
pub use coder::RealCoder;
pub use control_plane::{ControlPlane, ControlPlaneBuilder, DEFAULT_STARTUP_TIMEOUT};
pub use kubeconfig::CONTEXT_NAME;
pub use namespace::TestNamespace;
pub use pki::{ADMIN_USER, Pki};
pub use postgres::Postgres;
pub use process::{ManagedProcess, is_alive, log_tail, send_signal};

use anyhow::Result;
use tokio::sync::OnceCell;

/// The control plane shared by every test in this process (etcd + kube-apiserver, no KCM), started on
/// first use. Nothing in it is tied to the runtime that started it, so every `#[tokio::test]` can use it;
/// take clients from [`ControlPlane::client`] in each test. Its processes stop and its temp dir is removed
/// shortly after the test process exits. Isolate tests with [`ControlPlane::namespace`].
pub async fn shared() -> Result<&'static ControlPlane> {
    static SHARED: OnceCell<ControlPlane> = OnceCell::const_new();
    // If the starting test is cancelled or fails, the next caller tries again.
    SHARED.get_or_try_init(|| ControlPlane::builder().start()).await
}

/// `N` distinct free loopback ports. Every listener is held until all are chosen, so the ports differ; a process
/// may still take one before the caller binds it, which callers handle by retrying their start. The ports come from
/// below the kernel's ephemeral range when there is room there: a port the kernel may hand to any outgoing
/// connection (hundreds of them while the control planes and servers of a test run talk to each other) can be taken
/// between the choice and a bind that happens much later, as when `hack/local-up.sh` starts the operator.
pub fn free_ports<const N: usize>() -> anyhow::Result<[u16; N]> {
    use anyhow::Context as _;
    let listeners = match below_ephemeral_range() {
        Some(range) => listeners_in(range, N)?,
        None => (0..N)
            .map(|_| {
                std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
                    .context("binding a free loopback port")
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
    };
    let mut ports = [0u16; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr().context("reading a bound port")?.port();
    }
    Ok(ports)
}

/// Ports from 20000 up to the start of the kernel's ephemeral range, when that range starts above 22000.
fn below_ephemeral_range() -> Option<std::ops::Range<u32>> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let start: u32 = range.split_whitespace().next()?.parse().ok()?;
    (start > 22_000).then_some(20_000..start)
}

/// `n` listeners on free ports of `range`, tried in an order that differs per process and per call.
fn listeners_in(range: std::ops::Range<u32>, n: usize) -> anyhow::Result<Vec<std::net::TcpListener>> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = range.end - range.start;
    let offset = std::process::id().wrapping_mul(7_919) % span;
    let mut listeners = Vec::with_capacity(n);
    for _ in 0..span {
        if listeners.len() == n {
            break;
        }
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        // A stride prime to the span visits every port once before repeating.
        let candidate = range.start + (offset + step.wrapping_mul(7_901)) % span;
        let Ok(port) = u16::try_from(candidate) else {
            continue;
        };
        if let Ok(listener) = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)) {
            listeners.push(listener);
        }
    }
    anyhow::ensure!(listeners.len() == n, "no {n} free loopback ports in {range:?}");
    Ok(listeners)
}
