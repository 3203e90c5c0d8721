//! Setting up a benchmark's control plane: the CRDs, namespaces, and kubectl with its output on failure.

use std::path::Path;

use anyhow::{Context as _, Result, ensure};

pub async fn create_namespace(client: &kube::Client, name: &str) -> Result<()> {
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?;
    kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&kube::api::PostParams::default(), &namespace)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(())
}

pub fn install_crds(cp: &coder_k8s_testenv::ControlPlane) -> Result<()> {
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/crd/bases");
    let crds = crds.display().to_string();
    kubectl(cp, &["apply", "--server-side", "-f", &crds]).context("installing the CRDs")?;
    kubectl(
        cp,
        &[
            "wait",
            "--for=condition=Established",
            "crd",
            "--all",
            "--timeout=60s",
        ],
    )
    .context("waiting for the CRDs")?;
    Ok(())
}

pub fn kubectl(cp: &coder_k8s_testenv::ControlPlane, args: &[&str]) -> Result<()> {
    let out = cp
        .kubectl()
        .args(args)
        .output()
        .with_context(|| format!("running kubectl {args:?}"))?;
    ensure!(
        out.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
