//! The real `kubectl` reads this crate's discovery, OpenAPI and Table documents: a plain HTTP server on 127.0.0.1
//! answers with `generic::{discovery, openapi, table}` and kubectl runs `api-resources`, `explain` and `get` against
//! it. This proves kubectl parses the documents; the verb handlers and kube-apiserver's aggregation are tested
//! elsewhere.

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
        Ok(ResponseFormat::Table { include_object }) => {
            table::table(def, &widgets(), list_metadata, include_object)
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

impl Server {
    async fn start() -> Self {
        let registry = Arc::new(registry());
        let log = RequestLog::default();
        let app_log = log.clone();
        let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
            serve_logged(registry.clone(), app_log.clone(), uri, headers)
        });
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
