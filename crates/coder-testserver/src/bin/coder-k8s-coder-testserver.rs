//! `coder-k8s-coder-testserver --database-url URL [--listen 127.0.0.1:PORT] [--entitle feature ...]
//! [--oidc-configured]`: prints its URL and serves until SIGTERM or Ctrl-C.

use std::net::SocketAddr;

use clap::Parser;
use coder_k8s_coder_testserver::{Config, Entitlement, TestServer};

#[derive(Parser)]
#[command(about = "A Coder API test server backed by Coder's PostgreSQL tables")]
struct Args {
    /// Coder's PostgreSQL URL (users, organizations, organization_members, api_keys).
    #[arg(long, env = "CODER_PG_CONNECTION_URL")]
    database_url: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Features to mark as entitled (repeatable, or several values).
    #[arg(long = "entitle", num_args = 1..)]
    entitle: Vec<String>,
    /// Licenses (JWTs) POST /licenses accepts.
    #[arg(long = "accept-license")]
    accept_license: Vec<String>,
    /// Act as a Coder with OIDC configured: POST /users creates users of login type oidc (otherwise Coder's 400).
    #[arg(long, env = "CODER_TESTSERVER_OIDC_CONFIGURED")]
    oidc_configured: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut config = Config::new(args.database_url);
    for feature in args.entitle {
        config.entitlements.insert(feature, Entitlement::Entitled);
    }
    config.accepted_licenses = args.accept_license;
    config.oidc_configured = args.oidc_configured;
    let server = TestServer::start_at(config, args.listen).await?;
    println!("{}", server.url());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        result = tokio::signal::ctrl_c() => result?,
    }
    drop(server);
    Ok(())
}
