//! Pure builders of the parts of a workload that the control plane, the provisioner and the workspace proxy build
//! alike: a container's environment variables (a plain value, a Secret key) and the Service in front of the pods.

use std::collections::BTreeMap;

use coder_k8s_api::shared::ServiceSpec;
use k8s_openapi::api::core::v1::{
    EnvVar, EnvVarSource, SecretKeySelector, Service, ServicePort, ServiceSpec as K8sServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// A variable with a plain value.
pub fn value_env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

/// A variable read from key `key` of Secret `secret`. `optional` is written as given: `None` where the Go operator
/// wrote no `optional` (any difference in the pod template rolls the pods on an upgrade from it).
pub fn secret_env(name: &str, secret: &str, key: &str, optional: Option<bool>) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional,
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// A TCP Service port `port` named `name` that forwards to container port `target`.
pub fn service_port(name: &str, port: i32, target: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_owned()),
        port,
        target_port: Some(IntOrString::Int(target)),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    }
}

/// The Service of `spec` (its type and annotations) selecting the pods labelled `selector`, with `ports`.
pub fn service(
    mut metadata: ObjectMeta,
    spec: &ServiceSpec,
    selector: BTreeMap<String, String>,
    ports: Vec<ServicePort>,
) -> Service {
    if !spec.annotations.is_empty() {
        metadata.annotations = Some(spec.annotations.clone());
    }
    Service {
        metadata,
        spec: Some(K8sServiceSpec {
            type_: Some(spec.type_.as_str().to_owned()),
            selector: Some(selector),
            ports: Some(ports),
            ..K8sServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The Secret key a variable reads (tests of the kinds' pod templates).
#[cfg(test)]
pub fn secret_key_of(env: &EnvVar) -> &SecretKeySelector {
    let source = env.value_from.as_ref().expect("the variable reads a Secret");
    source
        .secret_key_ref
        .as_ref()
        .expect("the variable reads a Secret key")
}
