//! The aggregated API part of the benchmark: list requests sent straight to the operator's aggregated API server
//! (`--app=all`), as kube-apiserver forwards `kubectl get codertemplates`, with the admin's bearer token. Reports
//! their latency and what one request costs in Kubernetes requests (TokenReview and SubjectAccessReview are cached
//! for 10 s; the control plane and its token Secret come from the controllers' caches, so no get or list) and in
//! Coder calls.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};

use crate::round::{Env, Window};

pub use crate::direct::SERVER_NAMESPACE;

/// The results of the aggregated API round.
pub struct ApiRound {
    pub n: usize,
    pub latencies: Vec<Duration>,
    /// The whole round: Kubernetes requests, Coder calls, CPU.
    pub busy: Window,
}

impl ApiRound {
    pub fn percentiles(&self) -> (Duration, Duration, Duration) {
        crate::measure::percentiles(&self.latencies)
    }
}

/// `n` sequential `GET .../namespaces/<namespace>/codertemplates` (Table, as kubectl asks) of a namespace with a
/// Ready control plane.
pub async fn run(env: &Env<'_>, admin_token: &str, namespace: &str, n: usize) -> Result<ApiRound> {
    let (client, url) = crate::direct::client(env.client, env.operator.api_address()).await?;
    let url = format!("{url}/apis/aggregation.coder.com/v1alpha1/namespaces/{namespace}/codertemplates");
    let (metrics, calls, cpu) = (
        env.operator.scrape().await?,
        env.coder.calls(),
        env.operator.cpu_seconds()?,
    );
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(n);
    for _ in 0..n {
        let sent = Instant::now();
        let response = client
            .get(&url)
            .bearer_auth(admin_token)
            .header(
                "Accept",
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            )
            .send()
            .await
            .context("GET codertemplates")?;
        let status = response.status();
        let body = response.bytes().await.context("reading the list")?;
        ensure!(
            status == 200,
            "GET codertemplates: {status}: {}",
            String::from_utf8_lossy(&body)
        );
        latencies.push(sent.elapsed());
    }
    let busy = Window {
        duration: started.elapsed(),
        metrics: env.operator.scrape().await?.since(&metrics),
        coder_calls: env.coder.calls().saturating_sub(calls),
        cpu_seconds: env.operator.cpu_seconds()? - cpu,
    };
    Ok(ApiRound { n, latencies, busy })
}
