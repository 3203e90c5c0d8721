//! Leader election on the Lease `coder-k8s-controller.coder.com`: only the holder runs the controllers (the
//! writers); every replica keeps serving health and, in `all` mode, the aggregated API. A shutdown releases the
//! Lease, so the next replica takes over at once.

use std::path::Path;
use std::time::Duration;

use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Name of the leader-election Lease (the v0.1.5 ID).
pub const LEASE_NAME: &str = "coder-k8s-controller.coder.com";
/// Field manager of the Lease writes.
pub const LEASE_FIELD_MANAGER: &str = "coder-k8s-leader-election";
const SERVICE_ACCOUNT_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Namespace of the Lease: `POD_NAMESPACE`, then the ServiceAccount namespace file, then `kube-system`.
pub fn lease_namespace(pod_namespace: Option<String>, service_account_file: &Path) -> String {
    known_namespace(pod_namespace, service_account_file).unwrap_or_else(|| "kube-system".to_owned())
}

/// The namespace this process runs in, when it knows one: `POD_NAMESPACE`, then the ServiceAccount namespace file.
pub fn known_namespace(pod_namespace: Option<String>, service_account_file: &Path) -> Option<String> {
    pod_namespace.filter(|ns| !ns.trim().is_empty()).or_else(|| {
        std::fs::read_to_string(service_account_file)
            .ok()
            .map(|ns| ns.trim().to_owned())
            .filter(|ns| !ns.is_empty())
    })
}

/// [`known_namespace`] of this process.
pub fn current_namespace() -> Option<String> {
    known_namespace(
        std::env::var("POD_NAMESPACE").ok(),
        Path::new(SERVICE_ACCOUNT_NAMESPACE_FILE),
    )
}

/// The Lease namespace of this process.
pub fn current_lease_namespace() -> String {
    lease_namespace(
        std::env::var("POD_NAMESPACE").ok(),
        Path::new(SERVICE_ACCOUNT_NAMESPACE_FILE),
    )
}

/// Identity of this replica: the pod name when known, else host name and process ID.
pub fn identity() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| {
            let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
            format!("{}-{}", host.trim(), std::process::id())
        })
}

/// How long a shutdown waits for the Lease to be released.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// A running election: `leading` turns `true` while this replica holds the Lease.
pub struct Leadership {
    pub leading: watch::Receiver<bool>,
    task: JoinHandle<Result<LeaseManager, LeaseManagerError>>,
}

impl Leadership {
    /// Gives the Lease up (when held) and waits until that is written, so a successor need not wait for the Lease to
    /// expire. Bounded by [`RELEASE_TIMEOUT`].
    pub async fn release(self) {
        let Self { leading, task } = self;
        // The election task releases the Lease once every receiver is gone.
        drop(leading);
        match tokio::time::timeout(RELEASE_TIMEOUT, task).await {
            Ok(Ok(Ok(_))) => tracing::info!(lease = LEASE_NAME, "leader Lease released"),
            Ok(Ok(Err(error))) => tracing::warn!(%error, "releasing the leader Lease failed"),
            Ok(Err(error)) => tracing::warn!(%error, "the leader election task failed"),
            Err(_) => tracing::warn!("releasing the leader Lease timed out"),
        }
    }
}

/// Starts the election.
pub async fn elect(client: kube::Client, namespace: &str) -> Result<Leadership, LeaseManagerError> {
    let manager = LeaseManagerBuilder::new(client, LEASE_NAME)
        .with_namespace(namespace)
        .with_identity(identity())
        .with_duration(15)
        .with_grace(5)
        .with_field_manager(LEASE_FIELD_MANAGER)
        .build()
        .await?;
    let (leading, task) = manager.watch().await;
    Ok(Leadership { leading, task })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_fallbacks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("namespace");
        assert_eq!(lease_namespace(Some("ops".into()), &file), "ops");
        assert_eq!(lease_namespace(None, &file), "kube-system");
        std::fs::write(&file, "coder-system\n").unwrap();
        assert_eq!(lease_namespace(None, &file), "coder-system");
        assert_eq!(lease_namespace(Some(" ".into()), &file), "coder-system");
    }
}
