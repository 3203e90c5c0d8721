//! Coder calls at rest with watches open: a growing number of watchers of one namespace (10, 100, 1,000), then
//! watchers of several namespaces, each served by its own control plane and so its own token. Every case waits for
//! the pollers to settle into their at-rest pace first, then counts the Coder requests of a window by token.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Result, ensure};
use futures::{StreamExt as _, TryStreamExt as _};

use crate::coder::Coder;
use crate::measure::Memory;
use crate::operator::Operator;
use crate::watches::Watch;

/// The resources a watcher watches, in turn: every watchable kind, as kube-controller-manager's garbage collector
/// and quota controllers watch them all.
const RESOURCES: [&str; 5] = [
    "coderworkspaces",
    "codertemplates",
    "coderorganizations",
    "codergroups",
    "coderusers",
];
/// Watches opened at once (each lists first, as a reflector does).
const OPENING_AT_ONCE: usize = 16;

/// What one case measured.
pub struct RestCase {
    pub watchers: usize,
    pub namespaces: usize,
    pub window: Duration,
    pub calls: usize,
    /// The most requests sent with one token (one control plane's) in the window.
    pub most_by_one_token: usize,
    /// The tokens that sent requests in the window.
    pub tokens: usize,
    pub memory: Memory,
}

impl RestCase {
    pub fn per_minute(&self) -> f64 {
        per_minute(self.calls, self.window)
    }

    pub fn most_per_token_per_minute(&self) -> f64 {
        per_minute(self.most_by_one_token, self.window)
    }
}

pub fn per_minute(calls: usize, window: Duration) -> f64 {
    calls as f64 * 60.0 / window.as_secs_f64()
}

/// How a case waits and measures.
pub struct Window {
    /// Time for the pollers to slow down to their pace at rest before counting.
    pub settle: Duration,
    pub rest: Duration,
}

/// Watches held open across cases.
#[derive(Default)]
pub struct Watchers {
    open: Vec<Watch>,
}

impl Watchers {
    /// Opens watches of `namespaces` (the resources in turn, spread over the namespaces) until `total` are open.
    pub async fn grow_to(&mut self, kube: &kube::Client, namespaces: &[String], total: usize) -> Result<()> {
        let start = self.open.len();
        let paths: Vec<String> = (start..total)
            .map(|i| {
                let namespace = &namespaces[(i / RESOURCES.len()) % namespaces.len()];
                let resource = RESOURCES[i % RESOURCES.len()];
                format!("/apis/aggregation.coder.com/v1alpha1/namespaces/{namespace}/{resource}")
            })
            .collect();
        // The first watch of a namespace and resource starts its poller from that watch's list; a watch from an
        // older list would get 410 Expired (and a reflector would list again), so those open one by one.
        let firsts = (RESOURCES.len() * namespaces.len()).min(paths.len());
        for path in &paths[..firsts] {
            self.open.push(Watch::open(kube, path).await?);
        }
        let opened: Vec<Watch> = futures::stream::iter(&paths[firsts..])
            .map(|path| Watch::open(kube, path))
            .buffered(OPENING_AT_ONCE)
            .try_collect()
            .await?;
        self.open.extend(opened);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn close(&mut self) {
        self.open.clear();
    }

    fn ensure_open(&self) -> Result<()> {
        for watch in &self.open {
            ensure!(
                watch.is_open(),
                "the watch of {} ended during the rest window",
                watch.path
            );
        }
        Ok(())
    }
}

/// Waits for the pollers to settle, then counts the Coder requests of one window with `watchers` open.
pub async fn measure(
    coder: &Coder,
    operator: &Operator,
    watchers: &Watchers,
    namespaces: usize,
    window: &Window,
) -> Result<RestCase> {
    eprintln!(
        "{} watches of {namespaces} namespace(s) open; {:?} to settle, then {:?} without changes ...",
        watchers.len(),
        window.settle,
        window.rest
    );
    tokio::time::sleep(window.settle).await;
    let before = coder.server.requests().len();
    tokio::time::sleep(window.rest).await;
    let requests = coder.server.requests();
    let mut by_token: HashMap<Option<String>, usize> = HashMap::new();
    for request in &requests[before.min(requests.len())..] {
        *by_token.entry(request.session_token.clone()).or_default() += 1;
    }
    watchers.ensure_open()?;
    Ok(RestCase {
        watchers: watchers.len(),
        namespaces,
        window: window.rest,
        calls: by_token.values().sum(),
        most_by_one_token: by_token.values().copied().max().unwrap_or(0),
        tokens: by_token.keys().filter(|token| token.is_some()).count(),
        memory: operator.memory()?,
    })
}
