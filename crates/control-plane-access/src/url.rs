//! The URLs of a control plane's Service. Every operator component calls Coder over plain HTTP on the Service,
//! because certificates issued for an external host rarely cover the Service name.

use coder_k8s_api::control_plane::CoderControlPlaneSpec;

/// Whether the control plane serves TLS (any `spec.tls.secretNames`).
pub fn tls_enabled(spec: &CoderControlPlaneSpec) -> bool {
    !spec.tls.secret_names.is_empty()
}

/// In-cluster DNS name of the control plane Service (named like the control plane).
pub fn service_host(name: &str, namespace: &str) -> String {
    format!("{name}.{namespace}.svc.cluster.local")
}

/// The Service port that reaches Coder's plain HTTP listener: the spec port, or 80 when TLS takes 443.
pub fn http_service_port(spec: &CoderControlPlaneSpec) -> i32 {
    if tls_enabled(spec) && spec.service.port == 443 {
        80
    } else {
        spec.service.port
    }
}

/// The URL every operator component uses for Coder API calls: `http://<name>.<namespace>.svc.cluster.local:<port>`.
pub fn internal_url(name: &str, namespace: &str, spec: &CoderControlPlaneSpec) -> String {
    format!(
        "http://{}:{}",
        service_host(name, namespace),
        http_service_port(spec)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_on_the_service_even_with_tls() {
        let mut spec = CoderControlPlaneSpec::default();
        spec.service.port = 8080;
        assert_eq!(
            internal_url("coder", "team", &spec),
            "http://coder.team.svc.cluster.local:8080"
        );
        spec.service.port = 443;
        spec.tls.secret_names = vec!["tls".to_owned()];
        assert_eq!(
            internal_url("coder", "team", &spec),
            "http://coder.team.svc.cluster.local:80"
        );
    }
}
