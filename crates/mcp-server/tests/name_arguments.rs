//! Every namespace and name argument of every tool against hostile values, on the MCP server of this crate whose
//! Kubernetes client talks to the real kube-apiserver through a recording proxy of this test: each hostile value is a
//! tool error naming the argument, and the proxy's whole log of that call is empty (no request reached
//! kube-apiserver). The tools come from `McpServer::tool_table()`, so a new tool fails here until it is listed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::response::Response;
use coder_k8s_mcp_server::tools::McpServer;
use coder_k8s_mcp_server::{ServerSettings, TokenFile, router, serve};
use coder_k8s_testenv::ControlPlane;
use coder_k8s_testenv::mcp::{McpClient, call, connect};
use serde_json::{Value, json};

const TOKEN: &str = "name-arguments-token-0123456789abcdef";
/// A namespace that need not exist: a valid call reaches kube-apiserver and fails there, which is all it must do.
const NS: &str = "mcp-name-rules";

/// A plain-HTTP proxy in front of the shared kube-apiserver: it records the method and target of every request it
/// receives before forwarding it with the admin token, and answers what kube-apiserver answered.
#[derive(Clone)]
struct RecordingProxy {
    upstream: reqwest::Client,
    server_url: String,
    token: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl RecordingProxy {
    async fn start(cp: &ControlPlane) -> (RecordingProxy, String) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = reqwest::Certificate::from_pem(cp.ca_pem().as_bytes()).unwrap();
        let proxy = RecordingProxy {
            upstream: reqwest::Client::builder()
                .tls_backend_rustls()
                .tls_certs_only([ca])
                .build()
                .unwrap(),
            server_url: cp.server_url().to_owned(),
            token: cp.admin_token().to_owned(),
            log: Arc::default(),
        };
        let app = axum::Router::new().fallback(forward).with_state(proxy.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (proxy, url)
    }

    fn len(&self) -> usize {
        self.log.lock().unwrap().len()
    }

    /// The requests received since the log had `start` entries.
    fn since(&self, start: usize) -> Vec<String> {
        self.log.lock().unwrap()[start..].to_vec()
    }
}

async fn forward(State(proxy): State<RecordingProxy>, request: Request) -> Response {
    let target = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    proxy
        .log
        .lock()
        .unwrap()
        .push(format!("{} {target}", request.method()));
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let mut upstream = proxy
        .upstream
        .request(parts.method, format!("{}{target}", proxy.server_url))
        .bearer_auth(&proxy.token)
        .body(body);
    for (name, value) in &parts.headers {
        if name != http::header::HOST && name != http::header::AUTHORIZATION {
            upstream = upstream.header(name, value);
        }
    }
    let answer = upstream.send().await.unwrap();
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        // The body is forwarded whole, with its own length.
        if name != http::header::TRANSFER_ENCODING && name != http::header::CONNECTION {
            response = response.header(name, value);
        }
    }
    response
        .body(axum::body::Body::from(answer.bytes().await.unwrap()))
        .unwrap()
}

/// The MCP server of this crate with a Kubernetes client that talks to `proxy_url`; returns its client.
async fn serve_through(proxy_url: &str) -> (McpClient, tempfile::TempDir) {
    let mut config = kube::Config::new(proxy_url.parse().unwrap());
    config.default_namespace = "default".to_owned();
    let kube = kube::Client::try_from(config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token_path = dir.path().join("token");
    std::fs::write(&token_path, TOKEN).unwrap();
    let token = Arc::new(TokenFile::open(&token_path).unwrap());
    let app = router(kube, token, &ServerSettings::default(), Default::default());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve(listener, app, std::future::pending()));
    (connect(&url, TOKEN).await.unwrap(), dir)
}

/// The rule a namespace or name argument is held to, as far as this test needs to know it.
#[derive(Clone, Copy, Debug)]
enum Rule {
    /// A DNS label: namespaces and container names.
    Label,
    /// A DNS subdomain: Kubernetes object names.
    Subdomain,
    /// `<organization>.<owner>.<workspace>` of Coder names, which may hold capitals.
    Workspace,
    /// `<organization>.<template>` of Coder names, which may hold capitals.
    Template,
    /// `involvedObject.name` of an event: a name of any kind, capitals allowed.
    EventObject,
    /// `involvedObject.kind` of an event: `Pod`, `CoderControlPlane`.
    EventKind,
    /// `<organization>.<group>`.
    Group,
    /// One Coder name (an organization or a user).
    CoderName,
}

impl Rule {
    /// A value just too long for the rule, of characters it allows.
    fn too_long(self) -> String {
        match self {
            Self::Label => "a".repeat(64),
            Self::Subdomain => format!(
                "{}.{}.{}.{}",
                "a".repeat(63),
                "b".repeat(63),
                "c".repeat(63),
                "d".repeat(62)
            ),
            Self::Workspace => format!("acme.alice.{}", "w".repeat(33)),
            Self::Template => format!("acme.{}", "t".repeat(33)),
            Self::Group => format!("acme.{}", "g".repeat(33)),
            Self::CoderName => "u".repeat(33),
            Self::EventObject => "o".repeat(254),
            Self::EventKind => format!("K{}", "a".repeat(63)),
        }
    }

    /// Whether capitals break the rule (Kubernetes names) or not (Coder names and kinds).
    fn lowercase_only(self) -> bool {
        matches!(self, Self::Label | Self::Subdomain)
    }
}

/// One namespace or name argument of a tool, with a valid value.
#[derive(Clone, Copy, Debug)]
struct Argument {
    field: &'static str,
    rule: Rule,
    valid: &'static str,
    /// An optional argument given as `""` counts as left out.
    required: bool,
}

const fn required(field: &'static str, rule: Rule, valid: &'static str) -> Argument {
    Argument {
        field,
        rule,
        valid,
        required: true,
    }
}

const fn optional(field: &'static str, rule: Rule, valid: &'static str) -> Argument {
    Argument {
        field,
        rule,
        valid,
        required: false,
    }
}

const NAMESPACE: Argument = required("namespace", Rule::Label, NS);
const LIST_NAMESPACE: Argument = optional("namespace", Rule::Label, NS);
const OBJECT: Argument = required("name", Rule::Subdomain, "coder");
const WORKSPACE: Argument = required("name", Rule::Workspace, "acme.alice.dev");
const TEMPLATE: Argument = required("name", Rule::Template, "acme.docker");
const GROUP: Argument = required("name", Rule::Group, "acme.Everyone");
const CODER_NAME: Argument = required("name", Rule::CoderName, "alice");

/// Every tool with its namespace and name arguments and the other arguments of a valid call. A tool without
/// namespace or name arguments is listed with none.
fn tool_arguments() -> Vec<(&'static str, Vec<Argument>, Value)> {
    let none = json!({});
    let running = json!({"running": true});
    vec![
        ("check_health", vec![], none.clone()),
        ("list_control_planes", vec![LIST_NAMESPACE], none.clone()),
        ("get_control_plane_status", vec![NAMESPACE, OBJECT], none.clone()),
        ("list_control_plane_pods", vec![NAMESPACE, OBJECT], none.clone()),
        (
            "get_control_plane_deployment_status",
            vec![NAMESPACE, OBJECT],
            none.clone(),
        ),
        ("get_service_status", vec![NAMESPACE, OBJECT], none.clone()),
        ("get_provisioner_status", vec![NAMESPACE, OBJECT], none.clone()),
        (
            "get_workspace_proxy_status",
            vec![NAMESPACE, OBJECT],
            none.clone(),
        ),
        (
            "get_events",
            vec![
                NAMESPACE,
                optional("name", Rule::EventObject, "coder"),
                optional("kind", Rule::EventKind, "Pod"),
            ],
            none.clone(),
        ),
        (
            "get_pod_logs",
            vec![NAMESPACE, OBJECT, optional("container", Rule::Label, "coder")],
            none.clone(),
        ),
        ("list_workspaces", vec![LIST_NAMESPACE], none.clone()),
        ("get_workspace", vec![NAMESPACE, WORKSPACE], none.clone()),
        (
            "set_workspace_running",
            vec![NAMESPACE, WORKSPACE],
            running.clone(),
        ),
        (
            "get_workspace_build_logs",
            vec![NAMESPACE, WORKSPACE],
            none.clone(),
        ),
        ("start_workspace", vec![NAMESPACE, WORKSPACE], none.clone()),
        ("stop_workspace", vec![NAMESPACE, WORKSPACE], none.clone()),
        ("list_templates", vec![LIST_NAMESPACE], none.clone()),
        ("get_template", vec![NAMESPACE, TEMPLATE], none.clone()),
        ("set_template_running", vec![NAMESPACE, TEMPLATE], running),
        ("list_organizations", vec![LIST_NAMESPACE], none.clone()),
        ("get_organization", vec![NAMESPACE, CODER_NAME], none.clone()),
        ("list_groups", vec![LIST_NAMESPACE], none.clone()),
        ("get_group", vec![NAMESPACE, GROUP], none.clone()),
        ("list_users", vec![LIST_NAMESPACE], none.clone()),
        ("get_user", vec![NAMESPACE, CODER_NAME], none),
    ]
}

/// String arguments that are neither a namespace nor a name (they go into query parameters, encoded).
const OTHER_STRING_ARGUMENTS: [(&str, &str); 1] = [("get_events", "continue")];

/// The values `argument` must refuse: path and query separators, an encoded `/`, `..`, whitespace, non-ASCII, a value
/// one character too long, and for a required argument the empty value, for a Kubernetes name capitals.
fn hostile_values(argument: &Argument) -> Vec<String> {
    let valid = argument.valid;
    let mut values = vec![
        format!("{valid}/x"),
        "coder/secrets/coder-db-app#".to_owned(),
        format!("{valid}#"),
        format!("{valid}?x="),
        format!("{valid}%2Fx"),
        "..".to_owned(),
        format!("{valid} "),
        format!("{valid}ü"),
        argument.rule.too_long(),
    ];
    if argument.required {
        values.push(String::new());
    }
    if argument.rule.lowercase_only() {
        values.push(valid.to_uppercase());
    }
    values
}

/// The values `argument` accepts beyond `valid` and that must reach kube-apiserver: capitals where the rule allows
/// them, `""` (left out) for an optional argument.
fn other_valid_values(argument: &Argument) -> Vec<String> {
    let mut values = Vec::new();
    if !argument.rule.lowercase_only() {
        values.push(argument.valid.to_uppercase());
    }
    if !argument.required {
        values.push(String::new());
    }
    values
}

/// The call's arguments: the valid ones, then every namespace and name argument set to its valid value.
fn valid_call(arguments: &[Argument], others: &Value) -> Value {
    let mut call = others.clone();
    for argument in arguments {
        call[argument.field] = json!(argument.valid);
    }
    call
}

/// The string properties of a tool's input schema.
fn string_properties(schema: &Value) -> BTreeSet<String> {
    let is_string = |property: &Value| match &property["type"] {
        Value::String(t) => t == "string",
        Value::Array(types) => types.iter().any(|t| t == "string"),
        _ => false,
    };
    schema["properties"]
        .as_object()
        .map(|properties| {
            properties
                .iter()
                .filter(|(_, property)| is_string(property))
                .map(|(name, _)| name.clone())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_table_lists_every_tool_and_every_string_argument() {
    let table = tool_arguments();
    let listed: BTreeSet<&str> = table.iter().map(|(tool, _, _)| *tool).collect();
    let tools = McpServer::tool_table().list_all();
    let served: BTreeSet<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(listed, served, "every tool is in the table, once");
    assert_eq!(listed.len(), table.len());
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        let (_, arguments, _) = table.iter().find(|(name, _, _)| *name == tool.name).unwrap();
        let mut expected: BTreeSet<String> = arguments.iter().map(|a| a.field.to_owned()).collect();
        expected.extend(
            OTHER_STRING_ARGUMENTS
                .iter()
                .filter(|(name, _)| *name == tool.name)
                .map(|(_, field)| (*field).to_owned()),
        );
        assert_eq!(string_properties(&schema), expected, "{}: {schema}", tool.name);
    }
}

/// Calls `tool` with `arguments` and returns the outcome with the requests kube-apiserver received for it.
async fn call_and_log(
    client: &McpClient,
    proxy: &RecordingProxy,
    tool: &str,
    arguments: Value,
) -> (coder_k8s_testenv::mcp::ToolOutcome, Vec<String>) {
    let start = proxy.len();
    let outcome = call(client, tool, arguments).await.unwrap();
    (outcome, proxy.since(start))
}

#[tokio::test]
async fn every_namespace_and_name_argument_is_checked_before_any_request() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let (proxy, proxy_url) = RecordingProxy::start(cp).await;
    let (client, _dir) = serve_through(&proxy_url).await;
    let mut refused = 0;
    for (tool, arguments, others) in tool_arguments() {
        let valid = valid_call(&arguments, &others);
        let (_, requests) = call_and_log(&client, &proxy, tool, valid.clone()).await;
        assert!(
            !requests.is_empty(),
            "{tool} with valid arguments {valid} sent no request, so the proxy sees nothing"
        );
        for argument in &arguments {
            for value in other_valid_values(argument) {
                let mut args = valid.clone();
                args[argument.field] = json!(value);
                let (_, requests) = call_and_log(&client, &proxy, tool, args).await;
                assert!(
                    !requests.is_empty(),
                    "{tool}: {}={value:?} is valid",
                    argument.field
                );
            }
            for value in hostile_values(argument) {
                let mut args = valid.clone();
                args[argument.field] = json!(value);
                let (outcome, requests) = call_and_log(&client, &proxy, tool, args).await;
                let error = outcome.err();
                let named = if value.is_empty() {
                    format!("{} is required", argument.field)
                } else {
                    format!("{} \"", argument.field)
                };
                assert!(
                    error.starts_with(&named),
                    "{tool}: {}={value:?} gave an error that does not name the argument: {error}",
                    argument.field
                );
                assert!(
                    requests.is_empty(),
                    "{tool}: {}={value:?} reached kube-apiserver: {requests:?}",
                    argument.field
                );
                refused += 1;
            }
        }
    }
    // 18 tools with a namespace and 12 with a name, three more optional filters: far more than nothing.
    assert!(refused > 300, "{refused} hostile calls");
}

#[tokio::test]
async fn the_reported_secret_read_through_pod_logs_is_refused() {
    let cp = coder_k8s_testenv::shared().await.unwrap();
    let (proxy, proxy_url) = RecordingProxy::start(cp).await;
    let (client, _dir) = serve_through(&proxy_url).await;
    for namespace in ["coder/secrets/coder-db-app#", "coder/secrets/coder-db-app?x="] {
        let (outcome, requests) = call_and_log(
            &client,
            &proxy,
            "get_pod_logs",
            json!({"namespace": namespace, "name": "coder"}),
        )
        .await;
        assert_eq!(
            outcome.err(),
            format!(
                "namespace {namespace:?} is not a valid namespace: '/' is not allowed; only lowercase letters, \
                 digits and '-' are"
            )
        );
        assert_eq!(requests, Vec::<String>::new());
    }
    let (_, requests) = call_and_log(
        &client,
        &proxy,
        "get_pod_logs",
        json!({"namespace": NS, "name": "coder", "container": "c"}),
    )
    .await;
    assert_eq!(
        requests,
        [format!(
            "GET /api/v1/namespaces/{NS}/pods/coder/log?&container=c&limitBytes=1048577&tailLines=2000"
        )],
        "the proxy records what the server sends"
    );
}
