//! Kubeconfig files for kubectl and the Go components.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Context, cluster and user name used in the generated kubeconfig.
pub const CONTEXT_NAME: &str = "coder-k8s-testenv";

/// A kubeconfig with one cluster, one token user and one current context. Every value is either base64,
/// hex or a loopback URL, so none needs YAML quoting.
pub fn render(server_url: &str, ca_pem: &str, token: &str) -> String {
    let ca = STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {CONTEXT_NAME}
  cluster:
    server: {server_url}
    certificate-authority-data: {ca}
users:
- name: {CONTEXT_NAME}
  user:
    token: {token}
contexts:
- name: {CONTEXT_NAME}
  context:
    cluster: {CONTEXT_NAME}
    user: {CONTEXT_NAME}
    namespace: default
current-context: {CONTEXT_NAME}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_parses_rendered_kubeconfig() {
        let text = render(
            "https://127.0.0.1:6443",
            "-----BEGIN CERTIFICATE-----\n",
            "abc123",
        );
        let parsed = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(parsed.current_context.as_deref(), Some(CONTEXT_NAME));
        let cluster = parsed.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(
            cluster.certificate_authority_data.as_deref(),
            Some(STANDARD.encode("-----BEGIN CERTIFICATE-----\n").as_str())
        );
    }
}
