//! The desired objects of a CoderWorkspaceProxy (docs/controllers/workspace-proxy.md, "What it creates"). Pure
//! functions.

use coder_k8s_api::shared::{DEFAULT_TOKEN_SECRET_KEY, SecretKeySelector};
use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EnvVarSource, PodSpec, PodTemplateSpec,
    SecretKeySelector as K8sSecretKeySelector, Service, ServicePort, ServiceSpec as K8sServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;

use super::names::{labels, workload_name};

/// Container port of the proxy.
pub const PROXY_PORT: i32 = 3001;

/// The Deployment and Service of a proxy; `None` without name, namespace or UID.
pub fn desired_state(
    proxy: &CoderWorkspaceProxy,
    primary_url: &str,
    token: &SecretKeySelector,
) -> Option<(Deployment, Service)> {
    let name = proxy.metadata.name.clone()?;
    let owner = proxy.controller_owner_ref(&())?;
    let spec = &proxy.spec;
    let workload = workload_name(&name);
    let metadata = ObjectMeta {
        name: Some(workload.clone()),
        namespace: proxy.metadata.namespace.clone(),
        labels: Some(labels(&name)),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    };
    let mut args = vec![
        "wsproxy".to_owned(),
        "server".to_owned(),
        format!("--http-address=0.0.0.0:{PROXY_PORT}"),
    ];
    if spec.derp_only {
        args.push("--derp-only".to_owned());
    }
    args.extend(spec.extra_args.iter().cloned());
    let mut env = vec![
        EnvVar {
            name: "CODER_PRIMARY_ACCESS_URL".to_owned(),
            value: Some(primary_url.to_owned()),
            ..EnvVar::default()
        },
        EnvVar {
            name: "CODER_PROXY_SESSION_TOKEN".to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(K8sSecretKeySelector {
                    name: token.name.clone(),
                    key: token.key_or(DEFAULT_TOKEN_SECRET_KEY).to_owned(),
                    optional: Some(false),
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        },
    ];
    env.extend(spec.extra_env.iter().cloned());
    let deployment = Deployment {
        metadata: metadata.clone(),
        spec: Some(DeploymentSpec {
            replicas: Some(spec.replicas.unwrap_or(1)),
            selector: LabelSelector {
                match_labels: Some(labels(&name)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(&name)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    image_pull_secrets: (!spec.image_pull_secrets.is_empty())
                        .then(|| spec.image_pull_secrets.clone()),
                    containers: vec![Container {
                        name: "workspace-proxy".to_owned(),
                        image: Some(super::names::image(spec).to_owned()),
                        args: Some(args),
                        env: Some(env),
                        ports: Some(vec![ContainerPort {
                            name: Some("http".to_owned()),
                            container_port: PROXY_PORT,
                            protocol: Some("TCP".to_owned()),
                            ..ContainerPort::default()
                        }]),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    };
    let mut service_meta = metadata;
    if !spec.service.annotations.is_empty() {
        service_meta.annotations = Some(spec.service.annotations.clone());
    }
    let service = Service {
        metadata: service_meta,
        spec: Some(K8sServiceSpec {
            type_: Some(spec.service.type_.as_str().to_owned()),
            selector: Some(labels(&name)),
            ports: Some(vec![ServicePort {
                name: Some("http".to_owned()),
                port: spec.service.port,
                target_port: Some(IntOrString::Int(PROXY_PORT)),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..K8sServiceSpec::default()
        }),
        ..Service::default()
    };
    Some((deployment, service))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::workspace_proxy::names::{
        MISSING_TOKEN, MISSING_URL, primary_access_url, token_reference,
    };

    fn proxy(spec: serde_json::Value) -> CoderWorkspaceProxy {
        let mut p = CoderWorkspaceProxy::new(
            "coderworkspaceproxy-sample",
            serde_json::from_value(spec).unwrap(),
        );
        p.metadata.namespace = Some("coder".to_owned());
        p.metadata.uid = Some("uid".to_owned());
        p
    }

    #[test]
    fn direct_mode_objects() {
        let p = proxy(serde_json::json!({
            "primaryAccessURL": "https://coder.example.com",
            "proxySessionTokenSecretRef": {"name": "coderworkspaceproxy-token"},
            "derpOnly": true,
        }));
        let url = primary_access_url(&p.spec).unwrap();
        let token = token_reference("coderworkspaceproxy-sample", &p.spec).unwrap();
        let (deployment, service) = desired_state(&p, &url, &token).unwrap();
        assert_eq!(
            deployment.metadata.name.as_deref(),
            Some("wsproxy-coderworkspaceproxy-sample")
        );
        let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
        assert_eq!(container.name, "workspace-proxy");
        assert_eq!(
            container.args.as_ref().unwrap(),
            &["wsproxy", "server", "--http-address=0.0.0.0:3001", "--derp-only"]
        );
        let env = container.env.as_ref().unwrap();
        assert_eq!(env[0].value.as_deref(), Some("https://coder.example.com"));
        let reference = env[1]
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (reference.name.as_str(), reference.key.as_str()),
            ("coderworkspaceproxy-token", "token")
        );
        let port = &service.spec.unwrap().ports.unwrap()[0];
        assert_eq!(
            (port.port, port.target_port.clone()),
            (80, Some(IntOrString::Int(3001)))
        );
    }

    #[test]
    fn bootstrap_defaults_and_missing_fields() {
        let p = proxy(serde_json::json!({
            "bootstrap": {"coderURL": "https://coder.example.com", "credentialsSecretRef": {"name": "admin"}},
        }));
        assert_eq!(primary_access_url(&p.spec).unwrap(), "https://coder.example.com");
        assert_eq!(token_reference("x", &p.spec).unwrap().name, "x-proxy-token");
        let empty = proxy(serde_json::json!({}));
        assert_eq!(primary_access_url(&empty.spec), Err(MISSING_URL));
        assert_eq!(token_reference("x", &empty.spec), Err(MISSING_TOKEN));
        assert!(workload_name(&"p".repeat(80)).len() <= 63);
    }
}
