//! Which Coder deployment serves a request namespace. In `all` mode the answer comes from the `CoderControlPlane`
//! objects of the cluster ([`ControlPlaneProvider`]); standalone, from the `--coder-*` flags ([`StaticProvider`]).
//!
//! A namespace is served by exactly one eligible control plane. When it has several, the one annotated
//! [`SERVE_ANNOTATION`]` = "true"` serves it; without exactly one such annotation the namespace is ambiguous (400).
//! A namespace without any control plane is not served at all: it resolves to no backend, so lists there are empty
//! and gets are 404, and a namespace holding these resources can be deleted. A namespace whose control plane exists
//! but is not eligible (yet) answers 503, so a short outage never looks like every object was deleted.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_coder_client::CoderClient;
use coder_k8s_control_plane_access::{AccessError, ClientCache, ClientSettings, resolve, token_source};
use k8s_openapi::api::core::v1::Secret;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use crate::generic::ApiError;

/// One Coder deployment and the namespace whose objects it serves.
#[derive(Clone, Debug)]
pub struct Backend {
    pub namespace: String,
    pub client: CoderClient,
}

/// Resolves the Coder backends of a request.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The backends serving `namespace` (`None`: every namespace). `Ok(vec![])` means the namespace is not served:
    /// lists answer empty and gets 404.
    async fn resolve(&self, namespace: Option<&str>) -> Result<Vec<Backend>, ApiError>;

    /// Secret `name` in `namespace`, read with the server's own Kubernetes credentials (`Ok(None)` when there is
    /// none). Callers first make sure the request's caller may read it (`generic::caller`). A provider without a
    /// Kubernetes client refuses.
    async fn read_secret(&self, _namespace: &str, _name: &str) -> Result<Option<Secret>, ApiError> {
        Err(ApiError::internal(NO_SECRETS))
    }
}

/// The refusal of a provider that cannot read Secrets.
pub const NO_SECRETS: &str =
    "this server was started without a Kubernetes client for Secrets, so values from Secrets cannot be read";

/// Reads Secret `name` in `namespace` with `client` (the error names the Secret, never its data).
async fn read_secret_with(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Secret>, ApiError> {
    Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| ApiError::internal(format!("read Secret {namespace}/{name}: {e}")))
}

/// The annotation that picks the control plane serving a namespace with more than one eligible control plane: the
/// one eligible control plane whose value is exactly `"true"`.
pub const SERVE_ANNOTATION: &str = "aggregation.coder.com/serve";

/// Whether a control plane may serve the aggregated API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eligibility {
    Eligible,
    /// A `.` in the name cannot be told apart from the name separators of the served objects.
    DottedName,
    /// Operator access is off or not ready, or the token reference or URL is not recorded yet.
    NotReady,
}

/// The eligibility rule: a name without `.`, operator access enabled and ready, `status.operatorTokenSecretRef`
/// set, and a non-empty `status.url`.
pub fn eligibility(control_plane: &CoderControlPlane) -> Eligibility {
    if control_plane.name_any().contains('.') {
        return Eligibility::DottedName;
    }
    let status = control_plane.status.as_ref();
    let ready = !control_plane.spec.operator_access.disabled
        && status.and_then(|s| s.operator_access_ready) == Some(true)
        && status.is_some_and(|s| s.operator_token_secret_ref.is_some())
        && status
            .and_then(|s| s.url.as_deref())
            .is_some_and(|url| !url.trim().is_empty());
    if ready {
        Eligibility::Eligible
    } else {
        Eligibility::NotReady
    }
}

/// The control planes that serve a request in `namespace` (`None`: all namespaces), one per served namespace in
/// namespace order, from every control plane the caller listed there. Logs each control plane skipped for a dotted
/// name.
pub fn choose<'a, C: Borrow<CoderControlPlane>>(
    namespace: Option<&str>,
    control_planes: &'a [C],
) -> Result<Vec<&'a CoderControlPlane>, ApiError> {
    // Every namespace with a control plane, with its eligible ones.
    let mut by_namespace: BTreeMap<String, Vec<&CoderControlPlane>> = BTreeMap::new();
    for control_plane in control_planes.iter().map(Borrow::borrow) {
        let ns = control_plane.namespace().unwrap_or_default();
        if namespace.is_some_and(|wanted| wanted != ns) {
            continue;
        }
        let eligible = by_namespace.entry(ns.clone()).or_default();
        match eligibility(control_plane) {
            Eligibility::Eligible => eligible.push(control_plane),
            Eligibility::DottedName => tracing::warn!(
                "warning: skipping CoderControlPlane {ns}/{}: names containing '.' are incompatible with aggregated naming",
                control_plane.name_any()
            ),
            Eligibility::NotReady => {}
        }
    }
    let mut chosen = Vec::new();
    for (ns, eligible) in &by_namespace {
        match eligible.as_slice() {
            [] => {}
            [one] => chosen.push(*one),
            several => match selected(several) {
                Some(one) => chosen.push(one),
                None => return Err(ApiError::bad_request(multiple_eligible_message(ns))),
            },
        }
    }
    match namespace {
        // No control plane at all: the namespace is not served.
        Some(_) if by_namespace.is_empty() => Ok(Vec::new()),
        Some(ns) if chosen.is_empty() => Err(ApiError::service_unavailable(format!(
            "no eligible CoderControlPlane instances found in namespace {ns:?}"
        ))),
        None if chosen.is_empty() => Err(ApiError::service_unavailable(
            "no eligible CoderControlPlane instances found across all namespaces",
        )),
        _ => Ok(chosen),
    }
}

/// Among several eligible control planes of one namespace, the one annotated [`SERVE_ANNOTATION`]` = "true"`;
/// `None` when none or more than one is.
pub fn selected<'a>(eligible: &[&'a CoderControlPlane]) -> Option<&'a CoderControlPlane> {
    let mut marked = eligible
        .iter()
        .filter(|cp| cp.annotations().get(SERVE_ANNOTATION).map(String::as_str) == Some("true"));
    match (marked.next(), marked.next()) {
        (Some(one), None) => Some(*one),
        _ => None,
    }
}

fn multiple_eligible_message(namespace: &str) -> String {
    format!(
        "multiple eligible CoderControlPlane instances in namespace {namespace:?}; multi-instance support is planned"
    )
}

/// Where `all` mode reads the control planes and their token Secrets, with the server's own credentials.
#[async_trait]
pub trait ControlPlaneReads: Send + Sync {
    /// The control planes of `namespace` (`None`: every namespace).
    async fn control_planes(&self, namespace: Option<&str>) -> Result<Vec<Arc<CoderControlPlane>>, String>;

    /// Secret `name` in `namespace` (`Ok(None)` when there is none).
    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Arc<Secret>>, String>;
}

/// Reads from kube-apiserver on every request: a list of the control planes and a GET of the token Secret.
pub struct ApiReads(pub kube::Client);

#[async_trait]
impl ControlPlaneReads for ApiReads {
    async fn control_planes(&self, namespace: Option<&str>) -> Result<Vec<Arc<CoderControlPlane>>, String> {
        let api: Api<CoderControlPlane> = match namespace {
            Some(ns) => Api::namespaced(self.0.clone(), ns),
            None => Api::all(self.0.clone()),
        };
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(list.items.into_iter().map(Arc::new).collect())
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Arc<Secret>>, String> {
        let secrets: Api<Secret> = Api::namespaced(self.0.clone(), namespace);
        let secret = secrets.get_opt(name).await.map_err(|e| e.to_string())?;
        Ok(secret.map(Arc::new))
    }
}

/// `all` mode: the backends come from the cluster's `CoderControlPlane` objects.
///
/// Control planes and the token Secret come from [`ControlPlaneReads`]: in `all` mode the controllers' watch caches,
/// so a request costs no Kubernetes read (see `ApiReads` for a server without them). Coder clients are reused per
/// control plane through the [`ClientCache`].
pub struct ControlPlaneProvider {
    kube: kube::Client,
    reads: Arc<dyn ControlPlaneReads>,
    clients: Arc<ClientCache>,
}

impl ControlPlaneProvider {
    /// Reads the control planes and token Secrets from kube-apiserver on every request.
    pub fn new(kube: kube::Client, clients: Arc<ClientCache>) -> Self {
        let reads = Arc::new(ApiReads(kube.clone()));
        Self::with_reads(kube, reads, clients)
    }

    /// Reads the control planes and token Secrets through `reads`; `kube` reads the Secrets a request names.
    pub fn with_reads(
        kube: kube::Client,
        reads: Arc<dyn ControlPlaneReads>,
        clients: Arc<ClientCache>,
    ) -> Self {
        Self { kube, reads, clients }
    }

    async fn list_control_planes(
        &self,
        namespace: Option<&str>,
    ) -> Result<Vec<Arc<CoderControlPlane>>, ApiError> {
        let scope = match namespace {
            Some(ns) => format!("in namespace {ns:?}"),
            None => "across all namespaces".to_owned(),
        };
        self.reads
            .control_planes(namespace)
            .await
            .map_err(|e| ApiError::internal(format!("list CoderControlPlane resources {scope}: {e}")))
    }

    /// The backend of one eligible control plane: its operator token (from a Secret it controls) and a client for
    /// its in-cluster URL.
    async fn backend(&self, control_plane: &CoderControlPlane) -> Result<Backend, ApiError> {
        let name = control_plane.name_any();
        let namespace = control_plane.namespace().unwrap_or_default();
        let source = token_source(&name, Some(control_plane)).map_err(access_error)?;
        let secret = self.reads.secret(&namespace, &source.secret).await.map_err(|e| {
            ApiError::internal(format!(
                "read operator token secret {namespace}/{} for CoderControlPlane {namespace}/{name}: {e}",
                source.secret
            ))
        })?;
        let uid = control_plane.uid().unwrap_or_default();
        // Only a Secret the control plane controls holds its operator token; any other is not read.
        let token = secret
            .as_ref()
            .filter(|s| controlled_by(s, &uid))
            .and_then(|s| s.data.as_ref()?.get(&source.key))
            .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok());
        let target = resolve(control_plane, &source, token.as_deref()).map_err(access_error)?;
        let client = self
            .clients
            .client(&target.uid, &target.api_url, token.as_deref().unwrap_or_default())
            .map_err(|_| access_error(AccessError::ClientUnusable))?;
        Ok(Backend { namespace, client })
    }
}

fn controlled_by(secret: &Secret, uid: &str) -> bool {
    secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.controller == Some(true) && owner.uid == uid)
}

/// An eligible control plane whose token or client is not usable: not ready to serve (503).
fn access_error(error: AccessError) -> ApiError {
    ApiError::service_unavailable(error.message())
}

#[async_trait]
impl Provider for ControlPlaneProvider {
    async fn resolve(&self, namespace: Option<&str>) -> Result<Vec<Backend>, ApiError> {
        let control_planes = self.list_control_planes(namespace).await?;
        let mut backends = Vec::new();
        for control_plane in choose(namespace, &control_planes)? {
            backends.push(self.backend(control_plane).await?);
        }
        Ok(backends)
    }

    async fn read_secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, ApiError> {
        read_secret_with(&self.kube, namespace, name).await
    }
}

/// The standalone backend from `--coder-url`, `--coder-session-token` and `--coder-namespace`.
#[derive(Clone, PartialEq, Eq)]
pub struct StaticBackend {
    pub url: url::Url,
    pub token: String,
    pub namespace: String,
}

impl std::fmt::Debug for StaticBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticBackend")
            .field("url", &self.url.as_str())
            .field("token", &"<redacted>")
            .field("namespace", &self.namespace)
            .finish()
    }
}

/// Standalone mode: one Coder deployment serving one namespace. Other namespaces are not served (empty lists,
/// 404 gets); an all-namespaces request gets the one namespace.
#[derive(Clone)]
pub struct StaticProvider {
    backend: Backend,
    /// Reads Secrets (template variables from Secrets); without one they are refused.
    kube: Option<kube::Client>,
}

impl std::fmt::Debug for StaticProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticProvider")
            .field("backend", &self.backend)
            .field("reads_secrets", &self.kube.is_some())
            .finish()
    }
}

impl StaticProvider {
    pub fn new(
        config: &StaticBackend,
        settings: &ClientSettings,
    ) -> Result<Self, coder_k8s_coder_client::Error> {
        let client = settings.build(&config.url, &config.token)?;
        Ok(Self {
            backend: Backend {
                namespace: config.namespace.clone(),
                client,
            },
            kube: None,
        })
    }

    /// Reads Secrets with `client` (the server's own credentials).
    #[must_use]
    pub fn with_secrets(mut self, client: kube::Client) -> Self {
        self.kube = Some(client);
        self
    }

    /// The served namespace.
    pub fn namespace(&self) -> &str {
        &self.backend.namespace
    }
}

#[async_trait]
impl Provider for StaticProvider {
    async fn resolve(&self, namespace: Option<&str>) -> Result<Vec<Backend>, ApiError> {
        match namespace {
            Some(ns) if ns != self.backend.namespace => Ok(Vec::new()),
            _ => Ok(vec![self.backend.clone()]),
        }
    }

    async fn read_secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, ApiError> {
        match &self.kube {
            Some(client) => read_secret_with(client, namespace, name).await,
            None => Err(ApiError::internal(NO_SECRETS)),
        }
    }
}

/// Standalone mode without `--coder-url` and `--coder-session-token`: the server starts, and every resource request
/// says what is missing.
#[derive(Clone, Copy, Debug, Default)]
pub struct UnconfiguredProvider;

/// The 503 message of [`UnconfiguredProvider`].
pub const NOT_CONFIGURED: &str = "coder client provider is not configured: missing coder URL and coder session token; configure --coder-url and --coder-session-token";

#[async_trait]
impl Provider for UnconfiguredProvider {
    async fn resolve(&self, _namespace: Option<&str>) -> Result<Vec<Backend>, ApiError> {
        Err(ApiError::service_unavailable(NOT_CONFIGURED))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unconfigured_standalone_server_answers_503_naming_the_flags() {
        for namespace in [Some("coder"), None] {
            let error = UnconfiguredProvider.resolve(namespace).await.unwrap_err();
            assert_eq!(error.code, 503);
            assert_eq!(error.message, NOT_CONFIGURED);
        }
    }
    use coder_k8s_api::control_plane::CoderControlPlaneStatus;
    use coder_k8s_api::shared::SecretKeySelector;

    fn control_plane(namespace: &str, name: &str) -> CoderControlPlane {
        let mut cp = CoderControlPlane::new(name, Default::default());
        cp.metadata.namespace = Some(namespace.to_owned());
        cp.status = Some(CoderControlPlaneStatus {
            url: Some(format!("http://{name}.{namespace}.svc.cluster.local")),
            operator_access_ready: Some(true),
            operator_token_secret_ref: Some(SecretKeySelector {
                name: "coder-operator-token".to_owned(),
                key: None,
            }),
            ..Default::default()
        });
        cp
    }

    fn with_status(
        mut cp: CoderControlPlane,
        edit: impl FnOnce(&mut CoderControlPlaneStatus),
    ) -> CoderControlPlane {
        edit(cp.status.get_or_insert_with(Default::default));
        cp
    }

    fn names(chosen: &[&CoderControlPlane]) -> Vec<String> {
        chosen
            .iter()
            .map(|cp| format!("{}/{}", cp.namespace().unwrap_or_default(), cp.name_any()))
            .collect()
    }

    #[test]
    fn every_rule_of_eligibility() {
        assert_eq!(eligibility(&control_plane("a", "coder")), Eligibility::Eligible);
        assert_eq!(
            eligibility(&control_plane("a", "co.der")),
            Eligibility::DottedName
        );
        let mut disabled = control_plane("a", "coder");
        disabled.spec.operator_access.disabled = true;
        assert_eq!(eligibility(&disabled), Eligibility::NotReady);
        let cases = [
            with_status(control_plane("a", "coder"), |s| {
                s.operator_access_ready = Some(false)
            }),
            with_status(control_plane("a", "coder"), |s| s.operator_access_ready = None),
            with_status(control_plane("a", "coder"), |s| {
                s.operator_token_secret_ref = None
            }),
            with_status(control_plane("a", "coder"), |s| s.url = Some("  ".to_owned())),
            with_status(control_plane("a", "coder"), |s| s.url = None),
        ];
        for cp in &cases {
            assert_eq!(eligibility(cp), Eligibility::NotReady, "{:?}", cp.status);
        }
        let mut no_status = control_plane("a", "coder");
        no_status.status = None;
        assert_eq!(eligibility(&no_status), Eligibility::NotReady);
    }

    #[test]
    fn a_namespace_without_control_planes_is_not_served() {
        let cps = [control_plane("other", "coder")];
        assert!(choose(Some("empty"), &cps).unwrap().is_empty());
        assert!(
            choose::<CoderControlPlane>(Some("empty"), &[])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_namespace_whose_control_plane_is_not_ready_is_unavailable() {
        let cps = [with_status(control_plane("team", "coder"), |s| {
            s.operator_access_ready = Some(false)
        })];
        let error = choose(Some("team"), &cps).unwrap_err();
        assert_eq!((error.code, error.reason), (503, "ServiceUnavailable"));
        assert_eq!(
            error.message,
            r#"no eligible CoderControlPlane instances found in namespace "team""#
        );
        let dotted = [control_plane("team", "co.der")];
        assert_eq!(choose(Some("team"), &dotted).unwrap_err().code, 503);
    }

    #[test]
    fn two_eligible_control_planes_in_a_namespace_are_ambiguous() {
        let cps = [
            control_plane("team", "a"),
            control_plane("team", "b"),
            control_plane("solo", "coder"),
        ];
        let error = choose(Some("team"), &cps).unwrap_err();
        assert_eq!((error.code, error.reason), (400, "BadRequest"));
        assert_eq!(
            error.message,
            r#"multiple eligible CoderControlPlane instances in namespace "team"; multi-instance support is planned"#
        );
        assert_eq!(choose(None, &cps).unwrap_err().message, error.message);
        assert_eq!(names(&choose(Some("solo"), &cps).unwrap()), ["solo/coder"]);
    }

    fn serving(mut cp: CoderControlPlane, value: &str) -> CoderControlPlane {
        cp.annotations_mut()
            .insert(SERVE_ANNOTATION.to_owned(), value.to_owned());
        cp
    }

    #[test]
    fn the_serve_annotation_picks_one_of_several_eligible_control_planes() {
        let picked = [
            control_plane("team", "a"),
            serving(control_plane("team", "b"), "true"),
            control_plane("team", "c"),
        ];
        assert_eq!(names(&choose(Some("team"), &picked).unwrap()), ["team/b"]);
        assert_eq!(names(&choose(None, &picked).unwrap()), ["team/b"]);
        let one = [&picked[0], &picked[1]];
        assert_eq!(selected(&one).map(ResourceExt::name_any), Some("b".to_owned()));
    }

    #[test]
    fn without_exactly_one_serve_annotation_several_control_planes_stay_ambiguous() {
        let message = r#"multiple eligible CoderControlPlane instances in namespace "team"; multi-instance support is planned"#;
        let cases = [
            // Two selected.
            vec![
                serving(control_plane("team", "a"), "true"),
                serving(control_plane("team", "b"), "true"),
            ],
            // Only "true" selects.
            vec![
                serving(control_plane("team", "a"), "yes"),
                serving(control_plane("team", "b"), "True"),
            ],
            // A selected control plane that is not eligible breaks no tie.
            vec![
                control_plane("team", "a"),
                control_plane("team", "b"),
                with_status(serving(control_plane("team", "c"), "true"), |s| s.url = None),
            ],
        ];
        for cps in &cases {
            let error = choose(Some("team"), cps).unwrap_err();
            assert_eq!((error.code, error.message.as_str()), (400, message), "{cps:?}");
        }
        // One eligible control plane serves whether or not another, not eligible, is selected.
        let single = [
            control_plane("team", "a"),
            with_status(serving(control_plane("team", "b"), "true"), |s| {
                s.operator_access_ready = Some(false)
            }),
        ];
        assert_eq!(names(&choose(Some("team"), &single).unwrap()), ["team/a"]);
    }

    #[test]
    fn all_namespaces_get_one_backend_per_served_namespace() {
        let cps = [
            control_plane("b", "coder"),
            control_plane("a", "coder"),
            with_status(control_plane("c", "coder"), |s| s.url = None),
            control_plane("a", "co.der"),
        ];
        assert_eq!(names(&choose(None, &cps).unwrap()), ["a/coder", "b/coder"]);
        let error = choose(None, &cps[2..]).unwrap_err();
        assert_eq!((error.code, error.reason), (503, "ServiceUnavailable"));
        assert_eq!(
            error.message,
            "no eligible CoderControlPlane instances found across all namespaces"
        );
        assert_eq!(choose::<CoderControlPlane>(None, &[]).unwrap_err().code, 503);
    }

    #[tokio::test]
    async fn the_static_provider_serves_its_namespace_only() {
        coder_k8s_coder_client::install_ring_provider();
        let config = StaticBackend {
            url: url::Url::parse("http://coder.example.com").unwrap(),
            token: "tok-secret".to_owned(),
            namespace: "coder".to_owned(),
        };
        let settings = ClientSettings {
            timeout: std::time::Duration::from_secs(1),
            service_address_override: None,
        };
        let provider = StaticProvider::new(&config, &settings).unwrap();
        let served = provider.resolve(Some("coder")).await.unwrap();
        assert_eq!(served.len(), 1);
        assert_eq!(served[0].namespace, "coder");
        let all = provider.resolve(None).await.unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].namespace, "coder");
        assert!(provider.resolve(Some("other")).await.unwrap().is_empty());
        assert!(!format!("{config:?} {provider:?}").contains("tok-secret"));
    }
}
