//! The aggregated API part of the benchmark: list requests sent straight to the operator's aggregated API server
//! (`--app=all`), as kube-apiserver forwards `kubectl get codertemplates`, with the admin's bearer token. Reports
//! their latency and what one request costs in Kubernetes requests (TokenReview and SubjectAccessReview are cached
//! for 10 s; the control plane list and its token Secret are read per request) and in Coder calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use rustls_pki_types::pem::PemObject as _;

use crate::round::{Env, Window};

/// The namespace the operator keeps its serving-CA Secret in (`POD_NAMESPACE`).
pub const SERVER_NAMESPACE: &str = "coder-system";

/// The results of the aggregated API round.
pub struct ApiRound {
    pub n: usize,
    pub latencies: Vec<Duration>,
    /// The whole round: Kubernetes requests, Coder calls, CPU.
    pub busy: Window,
}

impl ApiRound {
    pub fn percentiles(&self) -> (Duration, Duration, Duration) {
        crate::round::percentiles(&self.latencies)
    }
}

/// `n` sequential `GET .../namespaces/<namespace>/codertemplates` (Table, as kubectl asks) of a namespace with a
/// Ready control plane.
pub async fn run(env: &Env<'_>, admin_token: &str, namespace: &str, n: usize) -> Result<ApiRound> {
    let (client, url) = direct_client(env).await?;
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

/// A client that trusts the serving CA from the operator's Secret and reaches the Service name the certificate was
/// issued for at the operator's local listener.
async fn direct_client(env: &Env<'_>) -> Result<(reqwest::Client, String)> {
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), SERVER_NAMESPACE);
    let secret = secrets
        .get("coder-k8s-apiserver-tls")
        .await
        .context("reading the serving-CA Secret")?;
    let ca = secret
        .data
        .and_then(|data| data.get("ca.crt").map(|value| value.0.clone()))
        .context("the serving-CA Secret has no ca.crt")?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&ca) {
        roots
            .add(cert.context("parsing ca.crt")?)
            .context("trusting ca.crt")?;
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
    let host = format!("coder-k8s-apiserver.{SERVER_NAMESPACE}.svc");
    let address = env.operator.api_address();
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .resolve(&host, address)
        .build()?;
    Ok((client, format!("https://{host}:{}", address.port())))
}
