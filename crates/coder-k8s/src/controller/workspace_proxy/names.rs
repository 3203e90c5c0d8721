//! Names, labels and URLs of what a CoderWorkspaceProxy uses and creates (docs/controllers/workspace-proxy.md,
//! "What it creates"). Pure functions.

use std::collections::BTreeMap;

use coder_k8s_api::shared::{
    DEFAULT_CODER_IMAGE, DEFAULT_TOKEN_SECRET_KEY, DNS_LABEL_MAX, SecretKeySelector,
};
use coder_k8s_api::workspace_proxy::WorkspaceProxySpec;

use crate::controller::digest::hashed_object_name;

/// `app.kubernetes.io/name` of proxy objects.
pub const APP_NAME: &str = "coder-workspace-proxy";
/// Why a spec cannot run (v0.1.5 texts).
pub const MISSING_URL: &str =
    "workspace proxy primaryAccessURL must be provided directly or via bootstrap.coderURL";
pub const MISSING_TOKEN: &str =
    "workspace proxy session token reference must be provided directly or via bootstrap";

/// Deployment and Service name: `wsproxy-<name>`; over 63 bytes (names over 55), `wsproxy-`, the first 46 bytes of
/// the name, `-` and the FNV-32a of the name (the Go operator's name).
pub fn workload_name(name: &str) -> String {
    hashed_object_name("wsproxy-", name, "", DNS_LABEL_MAX)
}

/// The proxy image: `spec.image`, the default Coder image when empty.
pub fn image(spec: &WorkspaceProxySpec) -> &str {
    match spec.image.as_str() {
        "" => DEFAULT_CODER_IMAGE,
        _ => spec.image.as_str(),
    }
}

/// Generated token Secret in bootstrap mode: `<name>-proxy-token` unless named.
pub fn generated_token_secret(name: &str, spec: &WorkspaceProxySpec) -> Option<String> {
    let bootstrap = spec.bootstrap.as_ref()?;
    Some(
        bootstrap
            .generated_token_secret_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("{name}-proxy-token")),
    )
}

/// The primary access URL: the spec's, else `bootstrap.coderURL`.
pub fn primary_access_url(spec: &WorkspaceProxySpec) -> Result<String, &'static str> {
    spec.primary_access_url
        .clone()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            spec.bootstrap
                .as_ref()
                .map(|b| b.coder_url.clone())
                .filter(|u| !u.is_empty())
        })
        .ok_or(MISSING_URL)
}

/// The Secret key the pods read the proxy token from.
pub fn token_reference(name: &str, spec: &WorkspaceProxySpec) -> Result<SecretKeySelector, &'static str> {
    if let Some(secret) = generated_token_secret(name, spec) {
        return Ok(SecretKeySelector {
            name: secret,
            key: Some(DEFAULT_TOKEN_SECRET_KEY.to_owned()),
        });
    }
    spec.proxy_session_token_secret_ref
        .clone()
        .filter(|r| !r.name.is_empty())
        .ok_or(MISSING_TOKEN)
}

/// Labels of the proxy's objects.
pub fn labels(name: &str) -> BTreeMap<String, String> {
    crate::controller::labels::labels(APP_NAME, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_the_go_operators() {
        assert_eq!(workload_name("proxy"), "wsproxy-proxy");
        let fits = "a".repeat(55);
        assert_eq!(workload_name(&fits), format!("wsproxy-{fits}"));
        // 60 p's: FNV-32a 73896435 (python3); 63 - 8 - 9 = 46 bytes of the name are kept.
        assert_eq!(
            workload_name(&"p".repeat(60)),
            format!("wsproxy-{}-73896435", "p".repeat(46))
        );
    }

    #[test]
    fn an_empty_image_is_the_default_image() {
        let spec = |image: &str| -> WorkspaceProxySpec {
            serde_json::from_value(serde_json::json!({"image": image})).unwrap()
        };
        assert_eq!(image(&spec("")), DEFAULT_CODER_IMAGE);
        assert_eq!(
            image(&spec("ghcr.io/coder/coder:v2.30.0")),
            "ghcr.io/coder/coder:v2.30.0"
        );
    }
}
