//! A client for the operator's aggregated API server itself, not through kube-apiserver: it trusts the serving CA
//! from the operator's Secret and reaches the Service name the certificate was issued for at the local listener.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use rustls_pki_types::pem::PemObject as _;

/// The namespace the operator keeps its serving-CA Secret in (`POD_NAMESPACE`).
pub const SERVER_NAMESPACE: &str = "coder-system";

/// The client and the server's base URL.
pub async fn client(kube: &kube::Client, address: SocketAddr) -> Result<(reqwest::Client, String)> {
    let secrets: Api<Secret> = Api::namespaced(kube.clone(), SERVER_NAMESPACE);
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
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .resolve(&host, address)
        .build()?;
    Ok((client, format!("https://{host}:{}", address.port())))
}
