//! What a CoderWorkspaceProxy should have (docs/controllers/workspace-proxy.md, "What it creates"), pure: the names,
//! labels and URLs it uses and creates, the Deployment and Service, which Secrets must consent to which origin, the
//! registration plan of bootstrap mode and the names sent to Coder.

use std::collections::BTreeMap;

use coder_k8s_api::shared::{
    DEFAULT_CODER_IMAGE, DEFAULT_TOKEN_SECRET_KEY, DNS_LABEL_MAX, SecretKeySelector,
};
use coder_k8s_api::workload::ServiceAccountMetadata;
use coder_k8s_api::workspace_proxy::{
    CONTAINER_NAME, CoderWorkspaceProxy, ProxyBootstrapSpec, WorkspaceProxySpec,
};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, PodSpec, PodTemplateSpec, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Resource;

use crate::credentials;
use crate::digest::hashed_object_name;
use crate::ownership::created_after;
use crate::workload::{self, secret_env, service_port, value_env};

/// Container port of the proxy.
pub const PROXY_PORT: i32 = 3001;

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
    crate::labels::labels(APP_NAME, name)
}

/// The objects a proxy owns, in apply order.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredState {
    /// `spec.serviceAccount`: the pods' own ServiceAccount; without it they run as the namespace's `default`.
    pub service_account: Option<ServiceAccount>,
    pub deployment: Deployment,
    pub service: Service,
    /// `spec.podDisruptionBudget`.
    pub pod_disruption_budget: Option<PodDisruptionBudget>,
}

/// The objects of a proxy; `None` without name, namespace or UID.
pub fn desired_state(
    proxy: &CoderWorkspaceProxy,
    primary_url: &str,
    token: &SecretKeySelector,
) -> Option<DesiredState> {
    let name = proxy.metadata.name.clone()?;
    let owner = proxy.controller_owner_ref(&())?;
    let metadata = ObjectMeta {
        name: Some(workload_name(&name)),
        namespace: proxy.metadata.namespace.clone(),
        labels: Some(labels(&name)),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    };
    let spec = &proxy.spec;
    let service_account = spec
        .service_account
        .as_ref()
        .map(|wanted| service_account(metadata.clone(), wanted));
    let deployment = Deployment {
        metadata: metadata.clone(),
        spec: Some(DeploymentSpec {
            replicas: Some(spec.replicas.unwrap_or(1)),
            selector: LabelSelector {
                match_labels: Some(labels(&name)),
                ..LabelSelector::default()
            },
            template: pod_template(&name, spec, primary_url, token),
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    };
    let deployment = workload::with_pod_settings(deployment, spec.pod.get(), CONTAINER_NAME);
    let deployment = workload::with_workload_options(deployment, spec.workload.get(), CONTAINER_NAME);
    Some(DesiredState {
        service_account,
        deployment,
        service: service(&name, spec, metadata.clone()),
        pod_disruption_budget: workload::pod_disruption_budget(metadata, spec.workload.get(), labels(&name)),
    })
}

/// The pods' ServiceAccount, named like the Deployment, with the spec's annotations and labels (the operator's
/// labels win a clash).
fn service_account(mut metadata: ObjectMeta, wanted: &ServiceAccountMetadata) -> ServiceAccount {
    if !wanted.annotations.is_empty() {
        metadata.annotations = Some(wanted.annotations.clone());
    }
    let mut labels = wanted.labels.clone();
    labels.extend(metadata.labels.take().unwrap_or_default());
    metadata.labels = Some(labels);
    ServiceAccount {
        metadata,
        ..ServiceAccount::default()
    }
}

/// The proxy's pods: `wsproxy server` on [`PROXY_PORT`], told the primary access URL and given the proxy token.
fn pod_template(
    name: &str,
    spec: &WorkspaceProxySpec,
    primary_url: &str,
    token: &SecretKeySelector,
) -> PodTemplateSpec {
    let mut args = vec![
        "wsproxy".to_owned(),
        "server".to_owned(),
        format!("--http-address=0.0.0.0:{PROXY_PORT}"),
    ];
    if spec.derp_only {
        args.push("--derp-only".to_owned());
    }
    args.extend(spec.extra_args.iter().cloned());
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(name)),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            // Only a proxy that asks for its own ServiceAccount names one: the pod template of every other proxy
            // stays as it was.
            service_account_name: spec.service_account.as_ref().map(|_| workload_name(name)),
            image_pull_secrets: (!spec.image_pull_secrets.is_empty())
                .then(|| spec.image_pull_secrets.clone()),
            containers: vec![Container {
                name: CONTAINER_NAME.to_owned(),
                resources: spec.resources.as_deref().cloned(),
                image: Some(image(spec).to_owned()),
                args: Some(args),
                env: Some(env(spec, primary_url, token)),
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
    }
}

/// The primary access URL, the proxy token from its Secret, then the spec's own variables.
fn env(spec: &WorkspaceProxySpec, primary_url: &str, token: &SecretKeySelector) -> Vec<EnvVar> {
    let key = token.key_or(DEFAULT_TOKEN_SECRET_KEY);
    let mut env = vec![
        value_env("CODER_PRIMARY_ACCESS_URL", primary_url),
        secret_env("CODER_PROXY_SESSION_TOKEN", &token.name, key, Some(false)),
    ];
    env.extend(spec.extra_env.iter().cloned());
    env
}

/// The Service in front of the pods, with the spec's annotations.
fn service(name: &str, spec: &WorkspaceProxySpec, metadata: ObjectMeta) -> Service {
    let ports = vec![service_port("http", spec.service.port, PROXY_PORT)];
    workload::service(metadata, &spec.service, labels(name), ports)
}

/// Icon sent when the spec names none: Coder requires a non-empty icon on PATCH.
pub const DEFAULT_ICON: &str = "/emojis/1f310.png";

/// Every Secret whose value leaves the cluster, with the origin it goes to: the Secrets the spec hands to the pods
/// (extraEnv, envFrom, volumes, init and sidecar containers) and a given token Secret go to the primary access URL's
/// origin, the bootstrap credentials to `coderURL`'s origin.
pub fn credential_checks(
    spec: &WorkspaceProxySpec,
    token_secret: Option<&str>,
    primary_origin: &str,
) -> Vec<(String, String)> {
    let mut checks: Vec<(String, String)> =
        credentials::pod_secret_refs(&spec.extra_env, spec.workload.get(), spec.pod.get())
            .into_iter()
            .map(|secret| (secret, primary_origin.to_owned()))
            .collect();
    if let Some(token_secret) = token_secret {
        checks.push((token_secret.to_owned(), primary_origin.to_owned()));
    }
    if let Some(bootstrap) = &spec.bootstrap {
        let coder_origin = credentials::origin_of(&bootstrap.coder_url).unwrap_or_default();
        checks.push((bootstrap.credentials_secret_ref.name.clone(), coder_origin));
    }
    checks
}

/// What bootstrap mode does with the generated token Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistrationPlan {
    /// Someone else's Secret has the name: refuse, touch nothing.
    Refuse,
    /// No token yet: register the proxy in Coder (create, or regenerate the token of an existing one).
    Register,
    /// The owned Secret holds a token: nothing to ask of Coder.
    Keep,
}

/// Decides from the generated Secret: `None` when absent, else (owned by this proxy, holds a token).
pub fn registration_plan(secret: Option<(bool, bool)>) -> RegistrationPlan {
    match secret {
        Some((false, _)) => RegistrationPlan::Refuse,
        Some((true, true)) => RegistrationPlan::Keep,
        Some((true, false)) | None => RegistrationPlan::Register,
    }
}

/// What proves that a proxy Coder holds under the bootstrap name is the one this object created.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProxyProof<'a> {
    /// The proxy ID recorded on the owned token Secret, else remembered by this process.
    pub recorded_id: Option<&'a str>,
    /// The create marker on the owned token Secret (`coder.com/workspace-proxy-create-started-at`).
    pub create_started_at: Option<&'a str>,
}

/// Whether the proxy Coder holds under the bootstrap name, with `existing_id`, created at `existing_created_at`, is
/// the one this object created: its ID is the recorded one, or Coder created it after the owned token Secret's create
/// marker (the create's answer was lost before the token was stored). Anyone else's proxy is never taken over.
pub fn proxy_owned(existing_id: &str, existing_created_at: &str, proof: ProxyProof<'_>) -> bool {
    proof.recorded_id == Some(existing_id)
        || proof
            .create_started_at
            .is_some_and(|started| created_after(existing_created_at, started))
}

/// The proxy name, display name and icon sent to Coder when it creates the proxy (each defaulted when empty).
pub fn proxy_names(name: &str, bootstrap: &ProxyBootstrapSpec) -> (String, String, String) {
    let proxy_name = given(&bootstrap.proxy_name).unwrap_or_else(|| name.to_owned());
    let display_name = given(&bootstrap.display_name).unwrap_or_else(|| proxy_name.clone());
    let icon = given(&bootstrap.icon).unwrap_or_else(|| DEFAULT_ICON.to_owned());
    (proxy_name, display_name, icon)
}

/// The display name and icon sent when an existing proxy is registered again: the spec's when given, else the ones
/// Coder already has (as the Go operator did), so a re-registration never resets what an admin set in Coder.
pub fn kept_display(
    name: &str,
    bootstrap: &ProxyBootstrapSpec,
    existing_display_name: &str,
    existing_icon: &str,
) -> (String, String) {
    let (_, default_display, default_icon) = proxy_names(name, bootstrap);
    let display_name = given(&bootstrap.display_name)
        .or_else(|| Some(existing_display_name.to_owned()).filter(|v| !v.is_empty()))
        .unwrap_or(default_display);
    // Coder refuses an empty icon on PATCH, so a proxy without one gets the default.
    let icon = given(&bootstrap.icon)
        .or_else(|| Some(existing_icon.to_owned()).filter(|v| !v.is_empty()))
        .unwrap_or(default_icon);
    (display_name, icon)
}

fn given(value: &Option<String>) -> Option<String> {
    value.clone().filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

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
        let DesiredState {
            deployment,
            service,
            service_account,
            pod_disruption_budget,
        } = desired_state(&p, &url, &token).unwrap();
        assert_eq!((service_account, pod_disruption_budget), (None, None));
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
        let reference = crate::workload::secret_key_of(&env[1]);
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

    #[test]
    fn registration_plans() {
        assert_eq!(registration_plan(None), RegistrationPlan::Register);
        assert_eq!(registration_plan(Some((true, false))), RegistrationPlan::Register);
        assert_eq!(registration_plan(Some((true, true))), RegistrationPlan::Keep);
        assert_eq!(registration_plan(Some((false, true))), RegistrationPlan::Refuse);
    }

    #[test]
    fn names_default_to_the_object_name_and_a_globe() {
        let bootstrap = ProxyBootstrapSpec::default();
        assert_eq!(
            proxy_names("eu", &bootstrap),
            ("eu".to_owned(), "eu".to_owned(), DEFAULT_ICON.to_owned())
        );
        let named = ProxyBootstrapSpec {
            proxy_name: Some("europe".to_owned()),
            display_name: Some(String::new()),
            ..ProxyBootstrapSpec::default()
        };
        assert_eq!(
            proxy_names("eu", &named).1,
            "europe",
            "an empty display name falls back to the proxy name"
        );
    }

    #[test]
    fn registering_again_keeps_what_coder_has() {
        let bootstrap: ProxyBootstrapSpec = serde_json::from_value(serde_json::json!({
            "coderURL": "https://coder.example.com",
            "credentialsSecretRef": {"name": "admin"},
        }))
        .unwrap();
        assert_eq!(
            kept_display("eu", &bootstrap, "Europe", "/emojis/1f1ea-1f1fa.png"),
            ("Europe".to_owned(), "/emojis/1f1ea-1f1fa.png".to_owned())
        );
        assert_eq!(
            kept_display("eu", &bootstrap, "", ""),
            ("eu".to_owned(), DEFAULT_ICON.to_owned())
        );
        let mut named = bootstrap.clone();
        named.display_name = Some("EU West".to_owned());
        named.icon = Some("/icon/eu.svg".to_owned());
        assert_eq!(
            kept_display("eu", &named, "Europe", "/emojis/1f1ea-1f1fa.png"),
            ("EU West".to_owned(), "/icon/eu.svg".to_owned())
        );
    }

    #[test]
    fn bootstrap_credentials_consent_to_the_coder_origin() {
        let spec = WorkspaceProxySpec {
            bootstrap: Some(ProxyBootstrapSpec {
                coder_url: "https://coder.example.com/".to_owned(),
                credentials_secret_ref: SecretKeySelector {
                    name: "admin".to_owned(),
                    key: None,
                },
                ..ProxyBootstrapSpec::default()
            }),
            ..WorkspaceProxySpec::default()
        };
        let checks = credential_checks(&spec, Some("token"), "https://primary.example.com");
        assert_eq!(
            checks,
            vec![
                ("token".to_owned(), "https://primary.example.com".to_owned()),
                ("admin".to_owned(), "https://coder.example.com".to_owned()),
            ]
        );
    }
}
