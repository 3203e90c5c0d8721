//! The credential-Secret rule (docs/controllers/README.md) for CoderProvisioner and CoderWorkspaceProxy: a
//! Secret whose value goes into a pod or to Coder is used only when it carries the label `coder.com/credential=true`
//! and its annotation `coder.com/credential-destinations` lists the origin the value is sent to. Pure functions.

use coder_k8s_api::shared::{CREDENTIAL_DESTINATIONS_ANNOTATION, CREDENTIAL_LABEL};
use coder_k8s_api::workload::{PodSettings, WorkloadOptions};
use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Reasons of `CredentialsReady` (the same for every kind that uses credential Secrets).
pub mod reasons {
    pub use coder_k8s_api::shared::credential_reasons::{
        CREDENTIAL_DESTINATION_NOT_LISTED as DESTINATION_NOT_LISTED,
        CREDENTIAL_SECRET_NOT_FOUND as SECRET_NOT_FOUND, CREDENTIAL_SECRET_NOT_MARKED as SECRET_NOT_MARKED,
        CREDENTIALS_VERIFIED as VERIFIED,
    };
}

/// The origin of a URL: `scheme://host[:port]`, lowercase, with the scheme's default port left out.
pub fn origin_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let host = parsed.host_str()?.to_ascii_lowercase();
    let origin = match parsed.port() {
        Some(port) => format!("{}://{host}:{port}", parsed.scheme()),
        None => format!("{}://{host}", parsed.scheme()),
    };
    Some(origin)
}

/// Why a Secret may not be used for `destination_origin`, or `None` when it may.
pub fn refusal(secret: Option<&ObjectMeta>, destination_origin: &str) -> Option<&'static str> {
    let Some(secret) = secret else {
        return Some(reasons::SECRET_NOT_FOUND);
    };
    let marked = secret
        .labels
        .as_ref()
        .and_then(|labels| labels.get(CREDENTIAL_LABEL))
        .is_some_and(|value| value == "true");
    if !marked {
        return Some(reasons::SECRET_NOT_MARKED);
    }
    let listed = secret
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(CREDENTIAL_DESTINATIONS_ANNOTATION))
        .is_some_and(|list| {
            list.split(|c: char| c == ',' || c.is_whitespace())
                .filter(|entry| !entry.is_empty())
                .filter_map(origin_of)
                .any(|origin| origin == destination_origin)
        });
    if listed {
        None
    } else {
        Some(reasons::DESTINATION_NOT_LISTED)
    }
}

/// Names of the Secrets that `env` reads through `secretKeyRef`, in order, without duplicates.
pub fn secret_refs(env: &[EnvVar]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in env
        .iter()
        .filter_map(|e| e.value_from.as_ref()?.secret_key_ref.as_ref())
        .map(|r| r.name.clone())
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Every Secret the pods of a provisioner or workspace proxy would receive through the spec, each once: the
/// `secretKeyRef`s of `extra_env`, and from the shared settings the `secretKeyRef`s and `envFrom` Secrets of the
/// operator's container and of the init and sidecar containers, and the Secret volumes (also inside projected
/// volumes). CA certificate Secrets are not among them: they hold public certificates.
pub fn pod_secret_refs(
    extra_env: &[EnvVar],
    workload: Option<&WorkloadOptions>,
    pod: Option<&PodSettings>,
) -> Vec<String> {
    let mut names = secret_refs(extra_env);
    let mut add = |name: &str| {
        if !name.is_empty() && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    };
    let env_from_secrets = |env_from: &[EnvFromSource]| -> Vec<String> {
        env_from
            .iter()
            .filter_map(|e| Some(e.secret_ref.as_ref()?.name.clone()))
            .collect()
    };
    if let Some(pod) = pod {
        env_from_secrets(&pod.env_from).iter().for_each(|n| add(n));
        for volume in &pod.volumes {
            if let Some(name) = volume.secret.as_ref().and_then(|s| s.secret_name.as_deref()) {
                add(name);
            }
            let projected = volume.projected.as_ref().and_then(|p| p.sources.as_ref());
            for source in projected.into_iter().flatten() {
                if let Some(secret) = &source.secret {
                    add(&secret.name);
                }
            }
        }
    }
    if let Some(workload) = workload {
        for container in workload.init_containers.iter().chain(&workload.extra_containers) {
            secret_refs(container.env.as_deref().unwrap_or_default())
                .iter()
                .for_each(|n| add(n));
            env_from_secrets(container.env_from.as_deref().unwrap_or_default())
                .iter()
                .for_each(|n| add(n));
        }
    }
    names
}

/// `CredentialsReady` (the condition type every kind uses): the first refusal (reason, message), or verified with
/// `verified` as the message.
pub fn condition(refusal: Option<(&'static str, String)>, verified: &str) -> crate::conditions::Decided {
    use crate::conditions::{ConditionStatus, Decided};
    let (status, reason, message) = match refusal {
        Some((reason, message)) => (ConditionStatus::False, reason, message),
        None => (ConditionStatus::True, reasons::VERIFIED, verified.to_owned()),
    };
    Decided {
        type_: "CredentialsReady",
        status,
        reason,
        message,
    }
}

/// A human message for a refusal; names the Secret and the origin, never a value.
pub fn refusal_message(secret_name: &str, reason: &str, destination_origin: &str) -> String {
    match reason {
        reasons::SECRET_NOT_FOUND => format!("Secret {secret_name:?} does not exist"),
        reasons::SECRET_NOT_MARKED => format!(
            "Secret {secret_name:?} is not a credential Secret: add the label {CREDENTIAL_LABEL}=true and list {destination_origin} in the annotation {CREDENTIAL_DESTINATIONS_ANNOTATION}; the Deployment is not changed"
        ),
        _ => format!(
            "Secret {secret_name:?} does not list {destination_origin} in its annotation {CREDENTIAL_DESTINATIONS_ANNOTATION}; the Deployment is not changed"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{EnvVarSource, SecretKeySelector};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn secret_meta(label: Option<&str>, destinations: Option<&str>) -> ObjectMeta {
        secret(label, destinations).metadata
    }

    fn secret(label: Option<&str>, destinations: Option<&str>) -> k8s_openapi::api::core::v1::Secret {
        k8s_openapi::api::core::v1::Secret {
            metadata: ObjectMeta {
                labels: label.map(|v| BTreeMap::from([(CREDENTIAL_LABEL.to_owned(), v.to_owned())])),
                annotations: destinations
                    .map(|v| BTreeMap::from([(CREDENTIAL_DESTINATIONS_ANNOTATION.to_owned(), v.to_owned())])),
                ..ObjectMeta::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn origins_are_normalised() {
        assert_eq!(
            origin_of("https://Coder.Example.com/api?x=1").as_deref(),
            Some("https://coder.example.com")
        );
        assert_eq!(
            origin_of("https://coder.example.com:443/").as_deref(),
            Some("https://coder.example.com")
        );
        assert_eq!(
            origin_of("http://coder.ns.svc.cluster.local:8080").as_deref(),
            Some("http://coder.ns.svc.cluster.local:8080")
        );
        assert_eq!(origin_of("not a url"), None);
    }

    #[test]
    fn only_marked_secrets_for_the_listed_origin_are_used() {
        let origin = "http://coder.coder.svc.cluster.local:80";
        let origin = origin_of(origin).unwrap();
        assert_eq!(refusal(None, &origin), Some(reasons::SECRET_NOT_FOUND));
        assert_eq!(
            refusal(Some(&secret_meta(None, Some(&origin))), &origin),
            Some(reasons::SECRET_NOT_MARKED)
        );
        assert_eq!(
            refusal(Some(&secret_meta(Some("false"), Some(&origin))), &origin),
            Some(reasons::SECRET_NOT_MARKED)
        );
        assert_eq!(
            refusal(Some(&secret_meta(Some("true"), None)), &origin),
            Some(reasons::DESTINATION_NOT_LISTED)
        );
        assert_eq!(
            refusal(
                Some(&secret_meta(Some("true"), Some("https://other.example.com"))),
                &origin
            ),
            Some(reasons::DESTINATION_NOT_LISTED)
        );
        assert_eq!(
            refusal(
                Some(&secret_meta(
                    Some("true"),
                    Some("https://other.example.com, http://coder.coder.svc.cluster.local")
                )),
                &origin
            ),
            None
        );
        let message = refusal_message("db", reasons::SECRET_NOT_MARKED, &origin);
        assert!(message.contains("coder.com/credential=true") && message.contains("\"db\""));
    }

    #[test]
    fn secret_refs_are_collected_once() {
        let reference = |secret: &str| EnvVar {
            name: "X".to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: secret.to_owned(),
                    key: "k".to_owned(),
                    optional: None,
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        };
        let plain = EnvVar {
            name: "Y".to_owned(),
            value: Some("v".to_owned()),
            ..EnvVar::default()
        };
        assert_eq!(
            secret_refs(&[reference("a"), plain, reference("b"), reference("a")]),
            ["a", "b"]
        );
    }
}
