//! The MCP server of the `coder-k8s` binary (`--app=mcp-http`) on a real kube-apiserver with the aggregated API
//! registered (a standalone aggregated server of the same binary, backed by the Coder API test server): every
//! workspace and template tool through two independent MCP clients (rmcp in-process, the official Python SDK from
//! PyPI), the auth rules and token rotation on the binary, Kubernetes RBAC as the only authorization, and no Secret
//! data in any output.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::template_versions::CreateTemplateVersionRequest;
use coder_k8s_coder_client::types::templates::CreateTemplateRequest;
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Config, TestServer};
use coder_k8s_testenv::ControlPlane;
use coder_k8s_testenv::mcp::{McpClient, ToolOutcome, call, connect, python_mcp, seed_kubernetes_objects};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::support::{Process, assert_success, install_crds, kubectl, path};

const SERVER_NAMESPACE: &str = "coder-system";
const TOKEN: &str = "binary-mcp-token-0123456789abcdefghij";

/// A control plane of its own: the APIService is cluster-wide.
async fn own_control_plane() -> &'static ControlPlane {
    static CP: OnceCell<ControlPlane> = OnceCell::const_new();
    CP.get_or_init(|| async {
        let cp = ControlPlane::builder().start().await.unwrap();
        install_crds(&cp);
        let out = kubectl(&cp, &["create", "namespace", SERVER_NAMESPACE], None);
        assert_success(&out, "create the server namespace");
        cp
    })
    .await
}

async fn wait_until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The Coder API test server with an operator token and an imported template named `docker`; returns the server,
/// its token and the organization.
async fn coder_with_template() -> (TestServer, String, String) {
    coder_k8s_coder_client::install_ring_provider();
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    let db_url = pg
        .create_coder_database(&format!("mcp_{}", std::process::id()))
        .await
        .unwrap();
    let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let server = TestServer::start(Config::new(&db_url)).await.unwrap();
    // A user for the people tools (the operator's own user is a system user, which user lists leave out).
    server.mint_token("alice", &["owner"]).await.unwrap();
    let client = CoderClient::new(server.url(), SessionToken::new(token.clone())).unwrap();
    let organization = client.default_organization().await.unwrap().name;
    let tar = coder_k8s_testenv::one_file_tar("main.tf", b"terraform {}\n");
    let file = client
        .upload_file(ArchiveKind::Tar, bytes::Bytes::from(tar))
        .await
        .unwrap();
    let version = client
        .create_template_version(&organization, &CreateTemplateVersionRequest::terraform(file.id))
        .await
        .unwrap();
    wait_until("the template import ends", async || {
        client
            .template_version(version.id)
            .await
            .unwrap()
            .job
            .status
            .is_terminal()
    })
    .await;
    let request = CreateTemplateRequest {
        name: "docker".to_owned(),
        template_version_id: version.id,
        ..CreateTemplateRequest::default()
    };
    client.create_template(&organization, &request).await.unwrap();
    (server, token, organization)
}

/// Whether the workspace's latest build has ended.
async fn settled(server: &TestServer, token: &str, leaf: &str) -> bool {
    let client = CoderClient::new(server.url(), SessionToken::new(token.to_owned())).unwrap();
    let workspace = client
        .workspace_by_owner_and_name(coder_k8s_operator_access::OPERATOR_USERNAME, leaf)
        .await
        .unwrap();
    workspace.latest_build.job.status.is_terminal()
}

fn mcp_server(kubeconfig: &Path, token_file: &Path, port: u16) -> Process {
    let [health] = coder_k8s_testenv::free_ports::<1>().unwrap();
    Process(
        Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
            .arg("--app=mcp-http")
            .arg(format!("--mcp-token-file={}", token_file.display()))
            .arg(format!("--mcp-bind-address=127.0.0.1:{port}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{health}"))
            .env("KUBECONFIG", kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

async fn wait_listening(port: u16) {
    wait_until("the MCP server answers /readyz", async || {
        reqwest::get(format!("http://127.0.0.1:{port}/readyz"))
            .await
            .is_ok_and(|r| r.status() == 200)
    })
    .await;
}

/// The official Python SDK: initialize, list the tools, call three of them; prints one JSON document.
const PYTHON_CLIENT: &str = r#"
import asyncio, json, sys
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

async def main(url, token, namespace, workspace):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                init = await session.initialize()
                tools = await session.list_tools()
                calls = {}
                for name, args in [
                    ("list_workspaces", {"namespace": namespace}),
                    ("get_workspace", {"namespace": namespace, "name": workspace}),
                    ("get_workspace", {"namespace": namespace}),
                ]:
                    result = await session.call_tool(name, args)
                    calls.setdefault(name, []).append(result.model_dump(mode="json", by_alias=True))
                print(json.dumps({
                    "server": init.model_dump(mode="json", by_alias=True)["serverInfo"],
                    "tools": sorted(t.name for t in tools.tools),
                    "calls": calls,
                }))

asyncio.run(main(*sys.argv[1:]))
"#;

fn run_python_client(url: &str, namespace: &str, workspace: &str) -> Value {
    let python = python_mcp().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("client.py");
    std::fs::write(&script, PYTHON_CLIENT).unwrap();
    let out = Command::new(python)
        .arg(&script)
        .args([url, TOKEN, namespace, workspace])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

// The Coder test server runs on this test's runtime while blocking child processes run: worker threads of its own.
/// The aggregated API served from the Coder test server, one workspace built, and a Secret whose data must never
/// appear in a tool output.
struct Stack {
    cp: &'static ControlPlane,
    namespace: String,
    coder: TestServer,
    coder_token: String,
    organization: String,
    workspace: String,
    aggregated: Process,
}

const SECRET_MARKER: &str = "binary-secret-marker-51e2";

impl Stack {
    async fn start() -> Stack {
        let cp = own_control_plane().await;
        let kube = cp.client().unwrap();
        let namespace = cp.namespace("mcp-bin").await.unwrap().name().to_owned();
        let (coder, coder_token, organization) = coder_with_template().await;
        let [api_port, api_health] = coder_k8s_testenv::free_ports::<2>().unwrap();
        let aggregated = Process(
            Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
                .arg("--app=aggregated-apiserver")
                .arg(format!("--coder-url={}", coder.url()))
                .arg(format!("--coder-namespace={namespace}"))
                .arg(format!("--apiserver-bind-address=127.0.0.1:{api_port}"))
                .arg(format!("--health-probe-bind-address=127.0.0.1:{api_health}"))
                .env("CODER_SESSION_TOKEN", &coder_token)
                .env("KUBECONFIG", cp.kubeconfig_path())
                .env("POD_NAMESPACE", SERVER_NAMESPACE)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        coder_k8s_testenv::apiservice::register(&kube, SERVER_NAMESPACE, api_port)
            .await
            .unwrap();
        wait_until("the aggregated API answers through kube-apiserver", async || {
            kubectl(cp, &["get", "coderworkspaces", "-n", &namespace], None)
                .status
                .success()
        })
        .await;
        let workspace = format!(
            "{organization}.{}.mcp",
            coder_k8s_operator_access::OPERATOR_USERNAME
        );
        let manifest = json!({
            "apiVersion": "aggregation.coder.com/v1alpha1", "kind": "CoderWorkspace",
            "metadata": {"name": workspace, "namespace": namespace},
            "spec": {"organization": organization, "templateName": "docker", "running": true},
        });
        assert_success(
            &kubectl(cp, &["create", "-f", "-"], Some(&manifest.to_string())),
            "create the workspace",
        );
        let secret: Secret = serde_json::from_value(
            json!({"metadata": {"name": "coder"}, "stringData": {"token": SECRET_MARKER}}),
        )
        .unwrap();
        Api::<Secret>::namespaced(kube, &namespace)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        let stack = Stack {
            cp,
            namespace,
            coder,
            coder_token,
            organization,
            workspace,
            aggregated,
        };
        stack.wait_settled("the first build ends").await;
        stack
    }

    async fn wait_settled(&self, what: &str) {
        wait_until(what, async || {
            settled(&self.coder, &self.coder_token, "mcp").await
        })
        .await;
    }

    fn workspace_ref(&self) -> Value {
        json!({"namespace": self.namespace, "name": self.workspace})
    }

    fn template(&self) -> String {
        format!("{}.docker", self.organization)
    }

    /// A kubeconfig of the control plane's admin impersonating `user`.
    fn kubeconfig_as(&self, dir: &Path, user: &str) -> std::path::PathBuf {
        let text = std::fs::read_to_string(self.cp.kubeconfig_path()).unwrap();
        let token_line = format!("    token: {}\n", self.cp.admin_token());
        let impersonating = text.replace(&token_line, &format!("{token_line}    as: {user}\n"));
        assert_ne!(impersonating, text);
        let path = dir.join(format!("kubeconfig-{}", user.replace(':', "-")));
        std::fs::write(&path, impersonating).unwrap();
        path
    }
}

/// Calls tools and keeps every outcome, to search them all for Secret data at the end.
struct Recorder<'a> {
    client: &'a McpClient,
    outcomes: Vec<ToolOutcome>,
}

impl Recorder<'_> {
    async fn run(&mut self, tool: &str, args: Value) -> ToolOutcome {
        let outcome = call(self.client, tool, args).await.unwrap();
        self.outcomes.push(outcome.clone());
        outcome
    }
}

/// list/get/set of workspaces, the bounded build log and start/stop with their outcomes.
async fn workspace_tools(stack: &Stack, tools: &mut Recorder<'_>) {
    let (ns, object) = (stack.namespace.as_str(), stack.workspace_ref());
    let listed = tools.run("list_workspaces", json!({"namespace": ns})).await;
    assert_eq!(
        listed.ok()["items"],
        json!([{"name": stack.workspace, "namespace": ns, "running": true}])
    );
    let everywhere = tools.run("list_workspaces", json!({})).await;
    assert_eq!(everywhere.ok()["items"].as_array().unwrap().len(), 1);
    let got = tools.run("get_workspace", object.clone()).await;
    assert_eq!(got.ok()["workspace"]["running"], true);
    let missing_name = format!("{}.nobody.x", stack.organization);
    let missing = tools
        .run("get_workspace", json!({"namespace": ns, "name": missing_name}))
        .await;
    assert!(
        missing.err().starts_with(&format!("get CoderWorkspace {ns}/")),
        "{}",
        missing.text
    );

    // Build logs: bounded, marked when cut.
    let logs = tools.run("get_workspace_build_logs", object.clone()).await;
    let full = logs.ok()["logs"].as_str().unwrap().to_owned();
    assert!(full.len() > 20, "{full}");
    assert!(!full.ends_with("(truncated)"), "{full}");
    let mut cut_args = object.clone();
    cut_args["limitBytes"] = json!(10);
    let cut = tools.run("get_workspace_build_logs", cut_args).await;
    assert_eq!(
        cut.ok()["logs"].as_str().unwrap(),
        format!("{}\n(truncated)", &full[..10])
    );
    let mut bad = object.clone();
    bad["limitBytes"] = json!(0);
    assert_eq!(
        tools.run("get_workspace_build_logs", bad).await.err(),
        "limitBytes must be between 1 and 1048576 (got 0)"
    );

    // Start while started: Unchanged; stop dry run: WouldQueue; set running false: a stop build.
    let unchanged = tools.run("start_workspace", object.clone()).await;
    assert_eq!(unchanged.ok()["outcome"], "Unchanged", "{}", unchanged.raw);
    assert_eq!(unchanged.ok()["transition"], "start");
    let mut dry = object.clone();
    dry["dryRun"] = json!(true);
    let would = tools.run("stop_workspace", dry).await;
    assert_eq!(would.ok()["outcome"], "WouldQueue");
    assert_eq!(would.ok()["dryRun"], true);
    let mut stop = object.clone();
    stop["running"] = json!(false);
    let stopped = tools.run("set_workspace_running", stop.clone()).await;
    assert_eq!(stopped.ok()["updated"], true, "{}", stopped.raw);
    assert_eq!(stopped.ok()["workspace"]["running"], false);
    let again = tools.run("set_workspace_running", stop).await;
    assert_eq!(again.ok()["updated"], false);
    stack.wait_settled("the stop build ends").await;
    let queued = tools.run("start_workspace", object.clone()).await;
    assert_eq!(queued.ok()["outcome"], "Queued", "{}", queued.raw);
    assert!(!queued.ok()["buildID"].as_str().unwrap().is_empty());
    stack.wait_settled("the start build ends").await;
    let running = tools.run("get_workspace", object).await;
    assert_eq!(running.ok()["workspace"]["running"], true);
}

/// The Kubernetes tools on seeded objects (a control plane with its Deployment, pods and Service, a provisioner, a
/// workspace proxy, events).
async fn kubernetes_tools(stack: &Stack, tools: &mut Recorder<'_>) {
    let ns = stack.namespace.as_str();
    seed_kubernetes_objects(&stack.cp.client().unwrap(), ns)
        .await
        .unwrap();
    let coder = json!({"namespace": ns, "name": "coder"});
    let listed = tools.run("list_control_planes", json!({"namespace": ns})).await;
    assert_eq!(listed.ok()["items"][0]["phase"], "Ready");
    let status = tools.run("get_control_plane_status", coder.clone()).await;
    assert_eq!(status.ok()["conditions"][0]["reason"], "Ready");
    let pods = tools
        .run(
            "list_control_plane_pods",
            json!({"namespace": ns, "name": "coder", "limit": 1}),
        )
        .await;
    assert_eq!(
        (
            pods.ok()["items"][0]["name"].as_str(),
            pods.ok()["truncated"].as_bool()
        ),
        (Some("coder-a"), Some(true))
    );
    let deployment = tools
        .run("get_control_plane_deployment_status", coder.clone())
        .await;
    assert_eq!(deployment.ok()["replicas"], 2);
    let service = tools.run("get_service_status", coder).await;
    assert_eq!(service.ok()["ports"][0]["targetPort"], "http");
    let provisioner = tools
        .run("get_provisioner_status", json!({"namespace": ns, "name": "prov"}))
        .await;
    assert_eq!(provisioner.ok()["provisionerKeyName"], "prov-key");
    let proxy = tools
        .run(
            "get_workspace_proxy_status",
            json!({"namespace": ns, "name": "proxy"}),
        )
        .await;
    assert_eq!(proxy.ok()["registered"], true);
    let events = tools
        .run(
            "get_events",
            json!({"namespace": ns, "kind": "CoderControlPlane", "limit": 2}),
        )
        .await;
    assert_eq!(events.ok()["items"].as_array().unwrap().len(), 2);
    assert!(events.ok()["continue"].is_string(), "{}", events.raw);
    let health = tools.run("check_health", json!({})).await;
    assert_eq!(health.ok()["version"], env!("CARGO_PKG_VERSION"));
}

/// list/get/set of templates.
async fn template_tools(stack: &Stack, tools: &mut Recorder<'_>) {
    let (ns, template) = (stack.namespace.as_str(), stack.template());
    let templates = tools.run("list_templates", json!({"namespace": ns})).await;
    assert_eq!(
        templates.ok()["items"],
        json!([{"name": template, "namespace": ns, "running": false}])
    );
    let one = tools
        .run("get_template", json!({"namespace": ns, "name": template}))
        .await;
    assert_eq!(one.ok()["template"]["name"], template.as_str());
    let same = tools
        .run(
            "set_template_running",
            json!({"namespace": ns, "name": template, "running": false}),
        )
        .await;
    assert_eq!(same.ok()["updated"], false);
    let legacy = tools
        .run(
            "set_template_running",
            json!({"namespace": ns, "name": template, "running": true}),
        )
        .await;
    assert_eq!(legacy.ok()["updated"], true, "{}", legacy.raw);
    assert_eq!(legacy.ok()["template"]["name"], template.as_str());
    let absent_name = format!("{}.absent", stack.organization);
    let absent = tools
        .run("get_template", json!({"namespace": ns, "name": absent_name}))
        .await;
    assert!(
        absent.err().starts_with(&format!("get CoderTemplate {ns}/")),
        "{}",
        absent.text
    );
}

/// The read tools of organizations, groups and users: each get equals its list item, and a hostile name is refused
/// before any request.
async fn people_tools(stack: &Stack, tools: &mut Recorder<'_>) {
    let ns = stack.namespace.as_str();
    let organizations = tools.run("list_organizations", json!({"namespace": ns})).await;
    let items = organizations.ok()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1, "{}", organizations.raw);
    assert_eq!(items[0]["name"], stack.organization.as_str());
    assert_eq!(items[0]["isDefault"], true);
    let one = tools
        .run(
            "get_organization",
            json!({"namespace": ns, "name": stack.organization}),
        )
        .await;
    assert_eq!(one.ok()["organization"], items[0]);

    let everyone = format!("{}.Everyone", stack.organization);
    let groups = tools.run("list_groups", json!({"namespace": ns})).await;
    let listed = groups.ok()["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == everyone.as_str())
        .unwrap_or_else(|| panic!("no {everyone}: {}", groups.raw))
        .clone();
    let one = tools
        .run("get_group", json!({"namespace": ns, "name": everyone}))
        .await;
    assert_eq!(one.ok()["group"], listed);

    let users = tools.run("list_users", json!({"namespace": ns})).await;
    let alice = users.ok()["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "alice")
        .unwrap_or_else(|| panic!("no alice: {}", users.raw))
        .clone();
    assert_eq!(alice["roles"], json!(["owner"]));
    let one = tools
        .run("get_user", json!({"namespace": ns, "name": "alice"}))
        .await;
    assert_eq!(one.ok()["user"], alice);
    let hostile = tools
        .run("get_user", json!({"namespace": ns, "name": "../secrets"}))
        .await;
    assert!(
        hostile
            .err()
            .starts_with("name \"../secrets\" is not a valid CoderUser name"),
        "{}",
        hostile.text
    );
}

/// The official Python SDK: the same server, tools, answers and tool errors.
async fn python_client_sees_the_same_server(stack: &Stack, url: &str) {
    let (url, ns, workspace) = (url.to_owned(), stack.namespace.clone(), stack.workspace.clone());
    // A blocking child process: off the runtime that serves the Coder test server.
    let python = tokio::task::spawn_blocking(move || run_python_client(&url, &ns, &workspace))
        .await
        .unwrap();
    assert_eq!(python["server"]["name"], "coder-k8s");
    let tools = python["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 25);
    assert!(tools.contains(&json!("set_workspace_running")));
    let listed = &python["calls"]["list_workspaces"][0];
    assert_eq!(
        listed["structuredContent"]["items"][0]["name"],
        stack.workspace.as_str(),
        "{listed}"
    );
    assert_eq!(
        python["calls"]["get_workspace"][0]["structuredContent"]["workspace"]["running"],
        true
    );
    let failed = &python["calls"]["get_workspace"][1];
    assert_eq!(failed["isError"], true);
    assert_eq!(failed["content"][0]["text"], "name is required");
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// An `initialize` POST with an optional token and session id.
async fn post_initialize(
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    content_type: &str,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", content_type)
        .header("accept", "application/json, text/event-stream")
        .body(INITIALIZE);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.unwrap()
}

/// No token, a wrong token on an open session, Content-Type and Host, then a rotated token file; returns the new
/// token.
async fn auth_rules_on_the_binary(url: &str, token_file: &Path) -> &'static str {
    let json = "application/json";
    let opened = post_initialize(url, Some(TOKEN), None, json).await;
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert_eq!(post_initialize(url, None, None, json).await.status(), 401);
    let wrong = post_initialize(url, Some(&"x".repeat(40)), Some(&session), json).await;
    assert_eq!(wrong.status(), 401);
    assert_eq!(wrong.headers()["www-authenticate"], "Bearer");
    assert_eq!(
        post_initialize(url, Some(TOKEN), None, "text/plain")
            .await
            .status(),
        415
    );
    let evil_host = reqwest::Client::new()
        .post(url)
        .header("host", "evil.example")
        .bearer_auth(TOKEN)
        .header("content-type", json)
        .body(INITIALIZE)
        .send()
        .await
        .unwrap();
    assert_eq!(evil_host.status(), 403);
    let rotated = "rotated-binary-token-abcdefghijklmnopqrstuv";
    let staged = token_file.with_extension("new");
    std::fs::write(&staged, rotated).unwrap();
    std::fs::rename(&staged, token_file).unwrap();
    assert_eq!(post_initialize(url, Some(TOKEN), None, json).await.status(), 401);
    assert_eq!(
        post_initialize(url, Some(rotated), None, json).await.status(),
        200
    );
    rotated
}

/// Kubernetes RBAC is the only authorization: an identity without rights gets Forbidden tool errors, the operator's
/// ServiceAccount with the shipped config/rbac (the chart's MCP sidecar runs as it) may use every tool.
async fn rbac_decides(stack: &Stack, dir: &Path, token_file: &Path, token: &str) {
    let ns = stack.namespace.as_str();
    let [denied_port, operator_port] = coder_k8s_testenv::free_ports::<2>().unwrap();
    let denied_server = mcp_server(&stack.kubeconfig_as(dir, "nobody"), token_file, denied_port);
    wait_listening(denied_port).await;
    let denied = connect(&format!("http://127.0.0.1:{denied_port}/mcp"), token)
        .await
        .unwrap();
    let stop = json!({"namespace": ns, "name": stack.workspace, "running": false});
    for (tool, args) in [
        ("list_workspaces", json!({"namespace": ns})),
        ("set_workspace_running", stop),
    ] {
        let forbidden = call(&denied, tool, args).await.unwrap();
        assert!(
            forbidden.err().contains("forbidden"),
            "{tool}: {}",
            forbidden.text
        );
    }
    assert!(settled(&stack.coder, &stack.coder_token, "mcp").await);

    assert_success(
        &kubectl(stack.cp, &["apply", "-f", &path("config/rbac")], None),
        "apply config/rbac",
    );
    let operator_config = stack.kubeconfig_as(dir, "system:serviceaccount:coder-system:coder-k8s");
    let operator_server = mcp_server(&operator_config, token_file, operator_port);
    wait_listening(operator_port).await;
    let allowed = connect(&format!("http://127.0.0.1:{operator_port}/mcp"), token)
        .await
        .unwrap();
    let mut dry = stack.workspace_ref();
    dry["dryRun"] = json!(true);
    for (tool, args) in [
        ("list_workspaces", json!({"namespace": ns})),
        ("get_workspace_build_logs", stack.workspace_ref()),
        ("start_workspace", dry.clone()),
        ("stop_workspace", dry),
        (
            "set_workspace_running",
            json!({"namespace": ns, "name": stack.workspace, "running": true}),
        ),
        ("list_templates", json!({})),
        (
            "set_template_running",
            json!({"namespace": ns, "name": stack.template(), "running": false}),
        ),
        ("get_events", json!({"namespace": ns})),
        (
            "list_control_plane_pods",
            json!({"namespace": ns, "name": "coder"}),
        ),
        (
            "get_service_status",
            json!({"namespace": SERVER_NAMESPACE, "name": "coder-k8s-apiserver"}),
        ),
        ("check_health", json!({})),
    ] {
        let outcome = call(&allowed, tool, args).await.unwrap();
        assert!(
            !outcome.is_error,
            "{tool} as the operator ServiceAccount: {}",
            outcome.text
        );
    }
    assert!(operator_server.stop().success());
    assert!(denied_server.stop().success());
}

// The Coder test server runs on this test's runtime while blocking child processes run: worker threads of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_every_tool_to_two_clients_through_the_aggregated_api() {
    let stack = Stack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let [mcp_port] = coder_k8s_testenv::free_ports::<1>().unwrap();
    let server = mcp_server(stack.cp.kubeconfig_path(), &token_file, mcp_port);
    wait_listening(mcp_port).await;
    let url = format!("http://127.0.0.1:{mcp_port}/mcp");
    let client = connect(&url, TOKEN).await.unwrap();

    let mut tools = Recorder {
        client: &client,
        outcomes: Vec::new(),
    };
    workspace_tools(&stack, &mut tools).await;
    template_tools(&stack, &mut tools).await;
    kubernetes_tools(&stack, &mut tools).await;
    people_tools(&stack, &mut tools).await;
    assert_eq!(tools.outcomes.len(), 34);
    for outcome in &tools.outcomes {
        assert!(
            !outcome.raw.contains(SECRET_MARKER),
            "Secret data in a tool output: {}",
            outcome.raw
        );
    }

    python_client_sees_the_same_server(&stack, &url).await;
    let rotated = auth_rules_on_the_binary(&url, &token_file).await;
    rbac_decides(&stack, dir.path(), &token_file, rotated).await;

    assert!(server.stop().success(), "SIGTERM ends the MCP server with 0");
    assert!(stack.aggregated.stop().success());
}
