//! The real `kubectl` and the real kube-apiserver read this crate's discovery, OpenAPI and Table documents. A small
//! server answers with `generic::{discovery, openapi, table}` (and a fixed list of widgets); kubectl runs
//! `api-resources`, `explain` and `get` against it directly over plain HTTP, and through a real kube-apiserver that
//! aggregates it as an APIService (so kube-apiserver's aggregated discovery, its OpenAPI v2 merge with the protobuf
//! conversion kubectl reads, and its v3 proxy all see the documents). The verb handlers are tested elsewhere.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use axum::Router;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use coder_k8s_aggregated_apiserver::generic::negotiate::{Answering, ResponseFormat, response_format};
use coder_k8s_aggregated_apiserver::generic::{
    ApiError, Column, Registry, RequestContext, ResourceDef, Storage, SubresourceDef, SubresourceHandler,
    SubresourceRequest, Verb, discovery, openapi, table,
};
use schemars::JsonSchema;
use serde_json::{Value, json};

/// What a widget should look like.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
struct WidgetSpec {
    /// The colour of the widget.
    color: String,
    /// How large the widget is, in centimetres.
    size: Option<u32>,
    /// The parts the widget is made of.
    parts: Vec<Part>,
}

/// One part of a widget.
#[allow(dead_code)]
#[derive(JsonSchema)]
struct Part {
    /// The name of the part.
    name: String,
}

/// A toy resource.
#[allow(dead_code)]
#[derive(JsonSchema)]
struct Widget {
    /// The desired widget.
    spec: WidgetSpec,
}

struct NoStorage;

#[async_trait]
impl Storage for NoStorage {
    async fn get(&self, _ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        Err(ApiError::not_found("toys.example.com", "widgets", name))
    }
    async fn list(&self, _ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        Ok(Vec::new())
    }
}

struct NoLog;

#[async_trait]
impl SubresourceHandler for NoLog {
    async fn handle(&self, _request: SubresourceRequest) -> Result<Response, ApiError> {
        Ok("".into_response())
    }
}

fn registry() -> Registry {
    let widgets = ResourceDef {
        plural: "widgets",
        singular: "widget",
        kind: "Widget",
        list_kind: "WidgetList",
        short_names: &["wd"],
        categories: &["toys"],
        namespaced: true,
        verbs: &[
            Verb::Get,
            Verb::List,
            Verb::Watch,
            Verb::Create,
            Verb::Patch,
            Verb::Delete,
        ],
        schema: schemars::schema_for!(Widget).to_value(),
        columns: vec![
            Column {
                name: "Color",
                type_: "string",
                format: "",
                description: "The colour.",
                priority: 0,
                cell: |o| o.pointer("/spec/color").cloned().unwrap_or(Value::Null),
            },
            Column {
                name: "Size",
                type_: "integer",
                format: "",
                description: "The size.",
                priority: 1,
                cell: |o| o.pointer("/spec/size").cloned().unwrap_or(Value::Null),
            },
        ],
        subresources: vec![SubresourceDef {
            name: "log",
            kind: "WidgetLog",
            verbs: &[Verb::Get],
            handler: Arc::new(NoLog),
        }],
        storage: Arc::new(NoStorage),
        watch_feed: None,
    };
    let gadgets = ResourceDef {
        plural: "gadgets",
        singular: "gadget",
        kind: "Gadget",
        list_kind: "GadgetList",
        short_names: &[],
        categories: &[],
        namespaced: false,
        verbs: &[Verb::Get, Verb::List],
        schema: json!({"type": "object", "properties": {"spec": {"type": "object"}}}),
        columns: Vec::new(),
        subresources: Vec::new(),
        storage: Arc::new(NoStorage),
        watch_feed: None,
    };
    Registry {
        group: "toys.example.com",
        version: "v1alpha1",
        resources: vec![widgets, gadgets],
    }
}

/// Two widgets, created an hour ago, so their age reads `60m`.
fn widgets() -> Vec<Value> {
    let an_hour_ago = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() - 3600;
    let created = k8s_openapi::jiff::Timestamp::from_second(an_hour_ago as i64)
        .unwrap()
        .to_string();
    ["red-one", "blue-two"]
        .iter()
        .zip([("red", 3), ("blue", 7)])
        .map(|(name, (color, size))| {
            json!({
                "apiVersion": "toys.example.com/v1alpha1",
                "kind": "Widget",
                "metadata": {"name": name, "namespace": "default", "creationTimestamp": created, "resourceVersion": "5"},
                "spec": {"color": color, "size": size, "parts": []},
            })
        })
        .collect()
}

/// The list endpoint of widgets in `default`, answering a Table or the plain list as negotiated.
fn list_widgets(registry: &Registry, headers: &HeaderMap, query: Option<&str>) -> Response {
    let include = query.and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "includeObject")
            .map(|(_, v)| v.into_owned())
    });
    let def = registry.resource("widgets").unwrap();
    let list_metadata = json!({"resourceVersion": "5"});
    let body = match response_format(headers, Answering::List, include.as_deref()) {
        Ok(ResponseFormat::PartialObjectMetadataList) => {
            table::partial_object_metadata_list(&widgets(), list_metadata).to_value()
        }
        Ok(ResponseFormat::Table { include_object }) => {
            table::table(def, &widgets(), list_metadata, include_object).to_value()
        }
        Ok(_) => {
            json!({"apiVersion": "toys.example.com/v1alpha1", "kind": "WidgetList", "metadata": list_metadata, "items": widgets()})
        }
        Err(error) => return error.into_response(),
    };
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Each request's path and its response's `Content-Type`.
type RequestLog = Arc<Mutex<Vec<(String, String)>>>;

async fn serve_logged(registry: Arc<Registry>, log: RequestLog, uri: Uri, headers: HeaderMap) -> Response {
    let response = serve(registry, uri.clone(), headers).await;
    let content_type = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    log.lock().unwrap().push((uri.path().to_owned(), content_type));
    response
}

async fn serve(registry: Arc<Registry>, uri: Uri, headers: HeaderMap) -> Response {
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    if let Some(response) = discovery::answer(&registry, path, &headers) {
        return response;
    }
    if let Some(response) = openapi::answer(&registry, path, &headers) {
        return response;
    }
    if uri.path() == "/apis/toys.example.com/v1alpha1/namespaces/default/widgets" {
        return list_widgets(&registry, &headers, uri.query());
    }
    let mut response = ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
    .into_response();
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

struct Server {
    url: String,
    home: tempfile::TempDir,
    log: RequestLog,
}

fn app(log: RequestLog) -> Router {
    let registry = Arc::new(registry());
    Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        serve_logged(registry.clone(), log.clone(), uri, headers)
    })
}

impl Server {
    async fn start() -> Self {
        let log = RequestLog::default();
        let app = app(log.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url,
            home: tempfile::tempdir().unwrap(),
            log,
        }
    }

    fn log(&self) -> Vec<(String, String)> {
        self.log.lock().unwrap().clone()
    }

    /// kubectl against this server only: an empty kubeconfig and a fresh discovery cache.
    fn kubectl(&self, args: &[&str]) -> Output {
        let kubeconfig = self.home.path().join("kubeconfig");
        std::fs::write(&kubeconfig, "").unwrap();
        let cache = self.home.path().join("cache");
        let output = Command::new("kubectl")
            .args(["--server", &self.url, "--cache-dir", cache.to_str().unwrap()])
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", self.home.path())
            .output()
            .expect("kubectl is on PATH");
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
        output
    }

    fn kubectl_stdout(&self, args: &[&str]) -> String {
        String::from_utf8(self.kubectl(args).stdout).unwrap()
    }
}

/// The whitespace-separated words of each output line.
fn rows(output: &str) -> Vec<Vec<String>> {
    output
        .lines()
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_resources_reads_aggregated_discovery() {
    let server = Server::start().await;
    let output = server.kubectl_stdout(&["api-resources", "--api-group=toys.example.com", "-o", "wide"]);
    let rows = rows(&output);
    assert_eq!(
        rows[0][..5],
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"],
        "{output}"
    );
    let widgets = rows
        .iter()
        .find(|r| r[0] == "widgets")
        .unwrap_or_else(|| panic!("{output}"));
    assert_eq!(
        widgets[1..5],
        ["wd", "toys.example.com/v1alpha1", "true", "Widget"],
        "{output}"
    );
    assert_eq!(widgets[5], "get,list,watch,create,patch,delete", "{output}");
    assert_eq!(widgets.last().unwrap(), "toys", "categories: {output}");
    let gadgets = rows
        .iter()
        .find(|r| r[0] == "gadgets")
        .unwrap_or_else(|| panic!("{output}"));
    assert_eq!(
        gadgets[1..4],
        ["toys.example.com/v1alpha1", "false", "Gadget"],
        "{output}"
    );
    // kubectl took everything from the aggregated document: no per-version request was needed.
    let log = server.log();
    let apis = log
        .iter()
        .find(|(path, _)| path == "/apis")
        .unwrap_or_else(|| panic!("{log:?}"));
    assert_eq!(
        apis.1, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        "{log:?}"
    );
    assert!(!log.iter().any(|(path, _)| path.starts_with("/apis/")), "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_raw_reads_the_legacy_documents() {
    let server = Server::start().await;
    let list: Value =
        serde_json::from_str(&server.kubectl_stdout(&["get", "--raw", "/apis/toys.example.com/v1alpha1"]))
            .unwrap();
    assert_eq!(list["kind"], "APIResourceList");
    assert_eq!(list["resources"][1]["name"], "widgets/log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reads_the_openapi_v3_document() {
    let server = Server::start().await;
    let spec = server.kubectl_stdout(&["explain", "widgets.spec"]);
    assert!(spec.contains("GROUP:      toys.example.com"), "{spec}");
    assert!(spec.contains("KIND:       Widget"), "{spec}");
    assert!(spec.contains("The colour of the widget."), "{spec}");
    assert!(spec.contains("parts\t<[]Part>"), "{spec}");
    let parts = server.kubectl_stdout(&["explain", "widgets.spec.parts.name"]);
    assert!(parts.contains("The name of the part."), "{parts}");
    let metadata = server.kubectl_stdout(&["explain", "widgets.metadata"]);
    assert!(metadata.contains("ObjectMeta"), "{metadata}");
    assert!(metadata.contains("creationTimestamp"), "{metadata}");
    let log = server.log();
    let document = log
        .iter()
        .find(|(path, _)| path == "/openapi/v3/apis/toys.example.com/v1alpha1");
    assert_eq!(
        document.map(|(_, content_type)| content_type.as_str()),
        Some("application/json"),
        "{log:?}"
    );
    assert!(
        !log.iter().any(|(path, _)| path == "/openapi/v2"),
        "explain used OpenAPI v3: {log:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_the_table_columns() {
    let server = Server::start().await;
    let output = server.kubectl_stdout(&["get", "widgets", "-n", "default"]);
    assert_eq!(
        rows(&output),
        [
            vec!["NAME", "COLOR", "AGE"],
            vec!["red-one", "red", "60m"],
            vec!["blue-two", "blue", "60m"]
        ],
        "{output}"
    );
    let wide = server.kubectl_stdout(&["get", "wd", "-n", "default", "-o", "wide"]);
    assert_eq!(rows(&wide)[0], ["NAME", "COLOR", "SIZE", "AGE"], "{wide}");
    assert_eq!(rows(&wide)[1], ["red-one", "red", "3", "60m"], "{wide}");
    let names = server.kubectl_stdout(&["get", "widgets", "-n", "default", "-o", "name"]);
    assert_eq!(
        names.lines().collect::<Vec<_>>(),
        [
            "widget.toys.example.com/red-one",
            "widget.toys.example.com/blue-two"
        ]
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Behind a real kube-apiserver

/// Serves `app` over TLS with a throwaway self-signed certificate (the APIService skips verification: serving
/// certificates are another test's subject).
async fn serve_tls(listener: tokio::net::TcpListener, app: Router) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                .serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(tls), service)
                .await;
        });
    }
}

/// The first address of this host that is not loopback: kube-apiserver refuses loopback endpoints.
fn routable_address() -> std::net::IpAddr {
    let output = Command::new("hostname").arg("-I").output().expect("hostname -I");
    String::from_utf8(output.stdout)
        .unwrap()
        .split_whitespace()
        .filter_map(|word| word.parse::<std::net::IpAddr>().ok())
        .find(|ip| ip.is_ipv4() && !ip.is_loopback())
        .expect("a non-loopback IPv4 address")
}

/// The Service (no selector), its Endpoints and EndpointSlice at `ip:port`, and the APIService.
fn registration(ip: std::net::IpAddr, port: u16) -> String {
    format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: toys}}
---
apiVersion: v1
kind: Service
metadata: {{name: toys-api, namespace: toys}}
spec:
  ports: [{{port: 443, targetPort: {port}, protocol: TCP}}]
---
apiVersion: v1
kind: Endpoints
metadata: {{name: toys-api, namespace: toys}}
subsets: [{{addresses: [{{ip: "{ip}"}}], ports: [{{port: {port}, protocol: TCP}}]}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: toys-api-1, namespace: toys, labels: {{kubernetes.io/service-name: toys-api}}}}
addressType: IPv4
endpoints: [{{addresses: ["{ip}"], conditions: {{ready: true}}}}]
ports: [{{port: {port}, protocol: TCP}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: v1alpha1.toys.example.com}}
spec:
  group: toys.example.com
  version: v1alpha1
  service: {{name: toys-api, namespace: toys, port: 443}}
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 1000
  versionPriority: 15
"#
    )
}

fn run(mut command: Command, stdin: Option<&str>) -> Output {
    use std::io::Write;
    command.stdin(std::process::Stdio::piped());
    command.stdout(std::process::Stdio::piped());
    command.stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("kubectl is on PATH");
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.unwrap_or_default().as_bytes()).unwrap();
    drop(pipe);
    child.wait_with_output().unwrap()
}

/// Runs kubectl until `accept` takes its output (kube-apiserver picks an APIService up asynchronously).
async fn eventually(
    cp: &coder_k8s_testenv::ControlPlane,
    args: &[&str],
    accept: impl Fn(&str) -> bool,
) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let mut command = cp.kubectl();
        command.args(args);
        let output = run(command, None);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() && accept(&stdout) {
            return stdout;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "kubectl {args:?} never gave the expected output:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_apiserver_aggregates_the_documents_for_kubectl() {
    let cp = coder_k8s_testenv::ControlPlane::builder()
        .apiserver_arg("--enable-aggregator-routing=true")
        .start()
        .await
        .unwrap();
    let ip = routable_address();
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = RequestLog::default();
    tokio::spawn(serve_tls(listener, app(log.clone())));
    let mut apply = cp.kubectl();
    apply.args(["apply", "-f", "-"]);
    let applied = run(apply, Some(&registration(ip, port)));
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );

    let available = r#"jsonpath={.status.conditions[?(@.type=="Available")].status}"#;
    eventually(
        &cp,
        &["get", "apiservice", "v1alpha1.toys.example.com", "-o", available],
        |s| s == "True",
    )
    .await;

    // Aggregated discovery: kube-apiserver took the resources from this server's /apis.
    let resources = eventually(&cp, &["api-resources", "--api-group=toys.example.com"], |s| {
        s.contains("widgets")
    })
    .await;
    let widgets = rows(&resources).into_iter().find(|r| r[0] == "widgets").unwrap();
    assert_eq!(
        widgets[1..],
        ["wd", "toys.example.com/v1alpha1", "true", "Widget"],
        "{resources}"
    );
    let requests = log.lock().unwrap().clone();
    let apis = requests.iter().find(|(path, _)| path == "/apis");
    assert_eq!(
        apis.map(|(_, content_type)| content_type.as_str()),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
        "{requests:?}"
    );

    // OpenAPI v3, proxied by kube-apiserver from its index.
    let v3 = eventually(&cp, &["explain", "widgets.spec"], |s| {
        s.contains("The colour of the widget.")
    })
    .await;
    assert!(v3.contains("parts\t<[]Part>"), "{v3}");
    // OpenAPI v2, merged into the cluster's document and served to kubectl as protobuf.
    let v2_args = ["explain", "widgets.spec.parts", "--output=plaintext-openapiv2"];
    let v2 = eventually(&cp, &v2_args, |s| s.contains("The name of the part.")).await;
    assert!(v2.contains("The parts the widget is made of."), "{v2}");
    let metadata = eventually(
        &cp,
        &["explain", "widgets.metadata", "--output=plaintext-openapiv2"],
        |s| s.contains("creationTimestamp"),
    )
    .await;
    assert!(metadata.contains("ObjectMeta"), "{metadata}");

    // PartialObjectMetadataList, as the garbage collector and namespace controller ask for it.
    let client = cp.client().unwrap();
    let resource = kube::core::ApiResource {
        group: "toys.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "toys.example.com/v1alpha1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let api: kube::Api<kube::core::DynamicObject> = kube::Api::namespaced_with(client, "default", &resource);
    let partial = api.list_metadata(&Default::default()).await.unwrap();
    let names: Vec<_> = partial
        .items
        .iter()
        .map(|i| i.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["red-one", "blue-two"]);
    assert_eq!(partial.metadata.resource_version.as_deref(), Some("5"));
    assert_eq!(
        partial.items[0].types.as_ref().unwrap().kind,
        "PartialObjectMetadata"
    );

    // Table output, proxied.
    let table = eventually(&cp, &["get", "widgets", "-n", "default", "-o", "wide"], |s| {
        s.contains("red-one")
    })
    .await;
    assert_eq!(
        rows(&table)[..2],
        [
            vec!["NAME", "COLOR", "SIZE", "AGE"],
            vec!["red-one", "red", "3", "60m"]
        ],
        "{table}"
    );
}
