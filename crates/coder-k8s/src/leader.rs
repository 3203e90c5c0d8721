//! Leader election on the Lease `coder-k8s-controller.coder.com`: only the holder runs the controllers (the
//! writers); every replica keeps serving health and, in `all` mode, the aggregated API.

use std::path::Path;

use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;

/// Name of the leader-election Lease (the v0.1.5 ID).
pub const LEASE_NAME: &str = "coder-k8s-controller.coder.com";
/// Field manager of the Lease writes.
pub const LEASE_FIELD_MANAGER: &str = "coder-k8s-leader-election";
const SERVICE_ACCOUNT_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Namespace of the Lease: `POD_NAMESPACE`, then the ServiceAccount namespace file, then `kube-system`.
pub fn lease_namespace(pod_namespace: Option<String>, service_account_file: &Path) -> String {
    pod_namespace
        .filter(|ns| !ns.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string(service_account_file)
                .ok()
                .map(|ns| ns.trim().to_owned())
                .filter(|ns| !ns.is_empty())
        })
        .unwrap_or_else(|| "kube-system".to_owned())
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

/// Starts the election; the receiver turns `true` while this replica holds the Lease. Dropping every receiver
/// releases the Lease.
pub async fn elect(
    client: kube::Client,
    namespace: &str,
) -> Result<watch::Receiver<bool>, LeaseManagerError> {
    let manager = LeaseManagerBuilder::new(client, LEASE_NAME)
        .with_namespace(namespace)
        .with_identity(identity())
        .with_duration(15)
        .with_grace(5)
        .with_field_manager(LEASE_FIELD_MANAGER)
        .build()
        .await?;
    let (receiver, _task) = manager.watch().await;
    Ok(receiver)
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
