//! The Kubernetes configuration the aggregated API server checks its callers with: `KUBECONFIG` when set (exactly
//! that one file, never a fallback), else the in-cluster ServiceAccount, else `~/.kube/config`, else none. A server
//! that cannot check callers must not start, so each case has its own error.

use std::path::{Path, PathBuf};

/// Where the configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    InCluster,
}

/// Why there is no usable configuration. The messages follow `configure delegated authentication: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DelegationConfigError {
    #[error(
        "no Kubernetes configuration for delegated authentication and authorization: set KUBECONFIG or run in a cluster"
    )]
    Missing,
    #[error("load kubeconfig {path:?}: {reason}")]
    Load { path: PathBuf, reason: String },
    #[error("invalid kubeconfig {path:?}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

/// The pure choice: `kubeconfig_env` is `KUBECONFIG`, `in_cluster` whether the ServiceAccount environment exists,
/// `home_config` the `~/.kube/config` path when that file exists.
pub fn choose(
    kubeconfig_env: Option<&str>,
    in_cluster: bool,
    home_config: Option<PathBuf>,
) -> Result<Source, DelegationConfigError> {
    match kubeconfig_env.filter(|value| !value.is_empty()) {
        Some(value) if value.contains(':') => Err(DelegationConfigError::Load {
            path: PathBuf::from(value),
            reason: "KUBECONFIG must name exactly one file".to_owned(),
        }),
        Some(value) => Ok(Source::File(PathBuf::from(value))),
        None if in_cluster => Ok(Source::InCluster),
        None => home_config
            .map(Source::File)
            .ok_or(DelegationConfigError::Missing),
    }
}

/// Reads the configuration chosen by [`choose`] for this process.
pub async fn delegation_config() -> Result<kube::Config, DelegationConfigError> {
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let home_config = std::env::var_os("HOME")
        .map(|home| Path::new(&home).join(".kube/config"))
        .filter(|path| path.is_file());
    match choose(
        std::env::var("KUBECONFIG").ok().as_deref(),
        in_cluster,
        home_config,
    )? {
        Source::InCluster => kube::Config::incluster().map_err(|error| DelegationConfigError::Invalid {
            path: PathBuf::from("in-cluster ServiceAccount"),
            reason: error.to_string(),
        }),
        Source::File(path) => from_file(path).await,
    }
}

async fn from_file(path: PathBuf) -> Result<kube::Config, DelegationConfigError> {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(&path).map_err(|error| DelegationConfigError::Load {
            path: path.clone(),
            reason: error.to_string(),
        })?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|error| DelegationConfigError::Invalid {
            path,
            reason: error.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_wins_and_is_never_replaced_by_a_fallback() {
        let home = Some(PathBuf::from("/home/u/.kube/config"));
        assert_eq!(
            choose(Some("/k"), true, home.clone()),
            Ok(Source::File("/k".into()))
        );
        assert!(matches!(
            choose(Some("/a:/b"), true, home.clone()),
            Err(DelegationConfigError::Load { .. })
        ));
        assert_eq!(choose(None, true, home.clone()), Ok(Source::InCluster));
        assert_eq!(
            choose(Some(""), false, home.clone()),
            Ok(Source::File("/home/u/.kube/config".into()))
        );
        assert_eq!(choose(None, false, None), Err(DelegationConfigError::Missing));
        assert!(
            DelegationConfigError::Missing
                .to_string()
                .starts_with("no Kubernetes configuration for delegated authentication and authorization")
        );
    }

    #[tokio::test]
    async fn a_missing_or_incomplete_file_is_named() {
        let missing = from_file(PathBuf::from("/nonexistent/kubeconfig"))
            .await
            .unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("load kubeconfig \"/nonexistent/kubeconfig\": "),
            "{missing}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
        )
        .unwrap();
        let invalid = from_file(path).await.unwrap_err();
        assert!(
            invalid.to_string().starts_with("invalid kubeconfig "),
            "{invalid}"
        );
    }
}
