//! The standalone-mode flag rules (`--coder-url`, `--coder-session-token`, `--coder-namespace`), checked at
//! startup before anything listens.

use crate::cli::StartupError;

/// The static Coder backend of standalone mode, from `--coder-url`, `--coder-session-token`, `--coder-namespace`.
pub use coder_k8s_aggregated_apiserver::coder::provider::StaticBackend;

/// Standalone configuration: none (every request will answer 503), or a complete static backend.
pub fn standalone_backend(
    url: Option<&url::Url>,
    token: &str,
    namespace: &str,
) -> Result<Option<StaticBackend>, StartupError> {
    match (url, token.is_empty()) {
        (None, true) => Ok(None),
        (Some(_), true) => Err(StartupError(
            "coder client provider is partially configured: --coder-url is set but --coder-session-token is empty; configure both".to_owned(),
        )),
        (None, false) => Err(StartupError(
            "coder client provider is partially configured: --coder-session-token is set but --coder-url is empty; configure both".to_owned(),
        )),
        (Some(_), false) if namespace.is_empty() => Err(StartupError(
            "coder client provider namespace is not configured: configure --coder-namespace".to_owned(),
        )),
        (Some(url), false) => Ok(Some(StaticBackend {
            url: url.clone(),
            token: token.to_owned(),
            namespace: namespace.to_owned(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standalone_flag_combinations() {
        let url = url::Url::parse("https://coder.example.com").unwrap();
        assert_eq!(standalone_backend(None, "", ""), Ok(None));
        assert!(
            standalone_backend(Some(&url), "", "ns")
                .unwrap_err()
                .0
                .starts_with("coder client provider is partially configured: ")
        );
        assert!(
            standalone_backend(None, "tok", "ns")
                .unwrap_err()
                .0
                .starts_with("coder client provider is partially configured: ")
        );
        assert_eq!(
            standalone_backend(Some(&url), "tok", "").unwrap_err().0,
            "coder client provider namespace is not configured: configure --coder-namespace"
        );
        let backend = standalone_backend(Some(&url), "tok-secret", "coder")
            .unwrap()
            .unwrap();
        assert_eq!(backend.namespace, "coder");
        assert!(!format!("{backend:?}").contains("tok-secret"));
    }
}
