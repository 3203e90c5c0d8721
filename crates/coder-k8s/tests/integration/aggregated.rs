//! The aggregated API server inside the `coder-k8s` binary, on a real kube-apiserver: `--app=all` serves a real
//! Coder's templates through the control plane its own controllers made ready (kubectl through kube-apiserver's
//! APIService, with kube-controller-manager deleting a namespace); a standalone server without a backend answers
//! 503 and keeps its serving certificate in its Secret; and the documented start-up errors stop the process.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_coder_client::types::{
    ArchiveKind, CreateTemplateRequest, CreateTemplateVersionRequest, JobStatus,
};
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Config, TestServer};
use coder_k8s_testenv::{ControlPlane, RealCoder};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use rustls_pki_types::pem::PemObject as _;
use serde_json::json;
use tokio::sync::OnceCell;

use crate::support::{
    Process, assert_success, control_plane_with_crds, install_crds, kubectl, path, stderr, stdout, wait_for,
};

const SERVER_NAMESPACE: &str = "coder-system";

fn free_ports<const N: usize>() -> [u16; N] {
    coder_k8s_testenv::free_ports::<N>().unwrap()
}

/// A control plane of its own, with the CRDs and the server namespace: the APIService is cluster-wide, so it must
/// not lead the shared control plane's clients to a server that stops with this test.
async fn start_control_plane(controller_manager: bool) -> ControlPlane {
    let cp = ControlPlane::builder()
        .controller_manager(controller_manager)
        .start()
        .await
        .unwrap();
    install_crds(&cp);
    let out = kubectl(&cp, &["create", "namespace", SERVER_NAMESPACE], None);
    assert_success(&out, "create the server namespace");
    cp
}

/// The control plane of the real-Coder test, with kube-controller-manager (namespace deletion).
async fn own_control_plane() -> &'static ControlPlane {
    static CP: OnceCell<ControlPlane> = OnceCell::const_new();
    CP.get_or_init(|| start_control_plane(true)).await
}

/// Imports an echo template named `name` into the real Coder's default organization; returns the organization.
async fn seed_template(coder: &RealCoder, name: &str) -> String {
    coder_k8s_coder_client::install_ring_provider();
    let url = url::Url::parse(coder.url()).unwrap();
    let client = CoderClient::new(url, SessionToken::new(coder.owner_token())).unwrap();
    let organization = client.default_organization().await.unwrap().name;
    let tar = coder
        .echo_template(coder_k8s_testenv::coder::EchoTemplate::Success)
        .unwrap();
    let file = client
        .upload_file(ArchiveKind::Tar, bytes::Bytes::from(tar))
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    let version = client
        .create_template_version(&organization, &request)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let job = loop {
        let job = client.template_version(version.id).await.unwrap().job;
        if job.status.is_terminal() {
            break job;
        }
        assert!(
            Instant::now() < deadline,
            "the template import did not finish: {job:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(job.status, JobStatus::Succeeded, "the template import: {job:?}");
    let request = CreateTemplateRequest {
        name: name.to_owned(),
        template_version_id: version.id,
        ..CreateTemplateRequest::default()
    };
    client.create_template(&organization, &request).await.unwrap();
    organization
}

/// A control plane on the port and database of a Coder (real or the test server), made Ready by the operator (the
/// test plays kubelet).
async fn ready_control_plane(client: &kube::Client, port: u16, database_url: &str, namespace: &str) {
    crate::control_plane::put_secret(
        &Api::<Secret>::namespaced(client.clone(), namespace),
        "coder-db",
        &[("uri", database_url)],
    )
    .await;
    let spec = json!({
        "service": {"port": port},
        "database": {"connectionSecretRef": {"name": "coder-db", "key": "uri"}},
    });
    let control_planes = Api::<CoderControlPlane>::namespaced(client.clone(), namespace);
    control_planes
        .create(
            &PostParams::default(),
            &CoderControlPlane::new("coder", serde_json::from_value(spec).unwrap()),
        )
        .await
        .unwrap();
    let deployments = Api::<Deployment>::namespaced(client.clone(), namespace);
    wait_for(
        async || deployments.get_opt("coder").await.unwrap().is_some(),
        "the Deployment exists",
    )
    .await;
    let ready = json!({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}});
    deployments
        .patch_status("coder", &PatchParams::default(), &Patch::Merge(&ready))
        .await
        .unwrap();
    wait_for(
        async || {
            let cp = control_planes.get("coder").await.unwrap();
            cp.status.and_then(|s| s.operator_access_ready) == Some(true)
        },
        "operator access is ready",
    )
    .await;
}

/// `coder-k8s --app=all` serving `namespace`, and the port of its aggregated API server.
fn start_all_mode(cp: &ControlPlane, namespace: &str) -> (Process, u16) {
    let [api_port, health_port] = free_ports::<2>();
    let operator = Process(
        Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
            .args([
                "--app=all",
                "--leader-elect=false",
                "--service-address-override=127.0.0.1",
            ])
            .arg(format!("--watch-namespace={namespace}"))
            .arg(format!("--apiserver-bind-address=127.0.0.1:{api_port}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{health_port}"))
            .env("KUBECONFIG", cp.kubeconfig_path())
            .env("POD_NAMESPACE", SERVER_NAMESPACE)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    (operator, api_port)
}

/// Registers the APIService for the server on `api_port` and waits until kube-apiserver proxies to it.
async fn register_and_wait(cp: &ControlPlane, client: &kube::Client, api_port: u16) {
    coder_k8s_testenv::apiservice::register(client, SERVER_NAMESPACE, api_port)
        .await
        .unwrap();
    coder_k8s_testenv::apiservice::wait_until_served(cp)
        .await
        .unwrap();
}

#[tokio::test]
async fn all_mode_serves_a_real_coders_templates_through_kube_apiserver() {
    let coder = RealCoder::shared().await.unwrap();
    let organization = seed_template(coder, "agg-e2e").await;
    let cp = own_control_plane().await;
    let client = cp.client().unwrap();
    let team = cp.namespace("agg-team").await.unwrap();
    let (operator, api_port) = start_all_mode(cp, &team);
    ready_control_plane(&client, coder.port(), coder.database_url(), &team).await;
    register_and_wait(cp, &client, api_port).await;

    // The template comes from Coder, through the control plane's operator token, named <organization>.<template>.
    let out = kubectl(cp, &["get", "codertemplates", "-n", &team, "-o", "wide"], None);
    assert_success(&out, "get codertemplates");
    let table = stdout(&out);
    let name = format!("{organization}.agg-e2e");
    assert!(
        table.lines().any(|l| l.starts_with(&format!("{name} "))),
        "{table}"
    );
    let object: serde_json::Value = serde_json::from_slice(
        &kubectl(
            cp,
            &["get", "codertemplate", &name, "-n", &team, "-o", "json"],
            None,
        )
        .stdout,
    )
    .unwrap();
    assert_eq!(object["spec"]["organization"], organization.as_str());
    assert!(
        !object["status"]["activeVersionID"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{object}"
    );

    // A namespace whose control plane is not ready yet says so.
    let waiting = cp.namespace("agg-waiting").await.unwrap();
    Api::<CoderControlPlane>::namespaced(client.clone(), &waiting)
        .create(
            &PostParams::default(),
            &CoderControlPlane::new("coder", Default::default()),
        )
        .await
        .unwrap();
    let out = kubectl(cp, &["get", "coderworkspaces", "-n", &waiting], None);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!(
            "no eligible CoderControlPlane instances found in namespace \"{waiting}\""
        )),
        "{}",
        stderr(&out)
    );

    // A namespace without any control plane lists as empty, so kube-controller-manager can delete it.
    let empty = cp.namespace("agg-empty").await.unwrap();
    let out = kubectl(
        cp,
        &[
            "get",
            "codertemplates,coderworkspaces,codertemplateversions,coderorganizations,codergroups,coderusers",
            "-n",
            &empty,
        ],
        None,
    );
    assert_success(&out, "list an unserved namespace");
    assert!(stdout(&out).trim().is_empty(), "{}", stdout(&out));
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces.delete(&empty, &Default::default()).await.unwrap();
    wait_for(
        async || namespaces.get_opt(&empty).await.unwrap().is_none(),
        "the namespace without a control plane is deleted",
    )
    .await;

    assert!(operator.stop().success(), "SIGTERM ends the process with 0");
}

/// Every write request the Coder API test server received, as `METHOD path`.
fn coder_writes(server: &TestServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// `kubectl get` of one field of a sample object.
fn field(cp: &ControlPlane, resource: &str, jsonpath: &str) -> String {
    let out = kubectl(
        cp,
        &[
            "get",
            resource,
            "-n",
            SAMPLE_NAMESPACE,
            "-o",
            &format!("jsonpath={jsonpath}"),
        ],
        None,
    );
    assert_success(&out, &format!("get {resource}"));
    stdout(&out)
}

const SAMPLE_NAMESPACE: &str = "coder";
const SAMPLE_TEMPLATE: &str = "coder.sample";
const SAMPLE_WORKSPACE: &str = "coder.coder-k8s-operator.sample";

/// The shipped samples of config/samples/aggregation, applied with kubectl through the binary's aggregated API server
/// in `--app=all`, reach Coder (the test server): the template is imported and created, the workspace built, then
/// stopped through the subresource, its log read, the template patched and the workspace deleted; every write that
/// Coder received is the one the verb asked for.
// Multi-threaded: the test server runs on this runtime while kubectl blocks the test's thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_mode_applies_the_samples_and_writes_through_to_coder() {
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    let db_url = pg.unique_coder_database("aggsamples").await.unwrap();
    let server = TestServer::start(Config::new(&db_url)).await.unwrap();
    let cp = start_control_plane(false).await;
    let client = cp.client().unwrap();
    let out = kubectl(&cp, &["create", "namespace", SAMPLE_NAMESPACE], None);
    assert_success(&out, "create the sample namespace");
    let (operator, api_port) = start_all_mode(&cp, SAMPLE_NAMESPACE);
    ready_control_plane(&client, server.url().port().unwrap(), &db_url, SAMPLE_NAMESPACE).await;
    register_and_wait(&cp, &client, api_port).await;
    server.clear_requests();

    let samples = path("config/samples/aggregation");
    let template_file = format!("{samples}/aggregation_v1alpha1_codertemplate.yaml");
    let out = kubectl(&cp, &["apply", "-f", &template_file], None);
    assert_success(&out, "apply the sample template");
    assert!(
        stdout(&out).contains(&format!(
            "codertemplate.aggregation.coder.com/{SAMPLE_TEMPLATE} created"
        )),
        "{}",
        stdout(&out)
    );
    let created = coder_writes(&server);
    assert_eq!(
        created.first().map(String::as_str),
        Some("POST /api/v2/files"),
        "{created:?}"
    );
    assert!(
        created
            .iter()
            .any(|w| w.starts_with("POST /api/v2/organizations/") && w.ends_with("/templates")),
        "{created:?}"
    );
    let active = field(
        &cp,
        &format!("codertemplate/{SAMPLE_TEMPLATE}"),
        "{.status.activeVersionID}",
    );
    assert_eq!(active.len(), 36, "a version UUID: {active:?}");
    // Applying the same manifest again sends nothing to Coder.
    server.clear_requests();
    let out = kubectl(&cp, &["apply", "-f", &template_file], None);
    assert_success(&out, "apply the sample template again");
    assert_eq!(coder_writes(&server), Vec::<String>::new());

    let workspace_file = format!("{samples}/aggregation_v1alpha1_coderworkspace.yaml");
    let out = kubectl(&cp, &["apply", "-f", &workspace_file], None);
    assert_success(&out, "apply the sample workspace");
    assert_eq!(
        coder_writes(&server),
        vec!["POST /api/v2/users/coder-k8s-operator/workspaces".to_owned()]
    );
    let resource = format!("coderworkspace/{SAMPLE_WORKSPACE}");
    wait_for(
        async || field(&cp, &resource, "{.status.latestBuildStatus}") == "running",
        "the sample workspace is running",
    )
    .await;
    let out = kubectl(&cp, &["get", "coderworkspaces,codertemplates", "-A"], None);
    assert_success(&out, "get coderworkspaces,codertemplates -A");
    let table = stdout(&out);
    for name in [SAMPLE_WORKSPACE, SAMPLE_TEMPLATE] {
        assert!(
            table
                .lines()
                .any(|l| l.starts_with(&format!("{SAMPLE_NAMESPACE} ")) && l.contains(name)),
            "{name} missing from:\n{table}"
        );
    }

    // stop through the subresource: one stop build.
    let base = format!(
        "/apis/aggregation.coder.com/v1alpha1/namespaces/{SAMPLE_NAMESPACE}/coderworkspaces/{SAMPLE_WORKSPACE}"
    );
    server.clear_requests();
    let out = kubectl(
        &cp,
        &["create", "--raw", &format!("{base}/stop"), "-f", "-"],
        Some("{}"),
    );
    assert_success(&out, "stop the sample workspace");
    let transition: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(transition["status"]["outcome"], "Queued", "{transition}");
    let workspace_id = field(&cp, &resource, "{.status.id}");
    assert_eq!(
        coder_writes(&server),
        vec![format!("POST /api/v2/workspaces/{workspace_id}/builds")]
    );
    wait_for(
        async || field(&cp, &resource, "{.status.latestBuildStatus}") == "stopped",
        "the sample workspace is stopped",
    )
    .await;
    assert_eq!(field(&cp, &resource, "{.spec.running}"), "false");

    // The log of the latest build, in the documented line format.
    let out = kubectl(&cp, &["get", "--raw", &format!("{base}/log")], None);
    assert_success(&out, "read the build log");
    let log = stdout(&out);
    let first = log.lines().next().unwrap_or_default();
    assert!(
        first.contains(" [") && first.split(' ').next().is_some_and(|t| t.contains('T')),
        "<RFC3339> [<level>] [<stage>] <output> lines: {log:?}"
    );

    // A patch of the template's description is one metadata update in Coder.
    server.clear_requests();
    let out = kubectl(
        &cp,
        &[
            "patch",
            "codertemplate",
            SAMPLE_TEMPLATE,
            "-n",
            SAMPLE_NAMESPACE,
            "--type=merge",
            "-p",
            r#"{"spec":{"description":"patched by kubectl"}}"#,
        ],
        None,
    );
    assert_success(&out, "patch the sample template");
    let template_id = field(&cp, &format!("codertemplate/{SAMPLE_TEMPLATE}"), "{.status.id}");
    assert_eq!(
        coder_writes(&server),
        vec![format!("PATCH /api/v2/templates/{template_id}")]
    );
    assert_eq!(
        field(
            &cp,
            &format!("codertemplate/{SAMPLE_TEMPLATE}"),
            "{.spec.description}"
        ),
        "patched by kubectl"
    );

    // delete: one delete build.
    server.clear_requests();
    let out = kubectl(
        &cp,
        &[
            "delete",
            "coderworkspace",
            SAMPLE_WORKSPACE,
            "-n",
            SAMPLE_NAMESPACE,
            "--wait=false",
        ],
        None,
    );
    assert_success(&out, "delete the sample workspace");
    assert_eq!(
        coder_writes(&server),
        vec![format!("POST /api/v2/workspaces/{workspace_id}/builds")]
    );
    wait_for(
        async || {
            !kubectl(&cp, &["get", &resource, "-n", SAMPLE_NAMESPACE], None)
                .status
                .success()
        },
        "the sample workspace is gone",
    )
    .await;
    assert!(operator.stop().success(), "SIGTERM ends the process with 0");
}

/// A client for the server itself (not through kube-apiserver) that trusts `ca_pem` and resolves the Service name the
/// certificate was issued for to `port` on the loopback.
fn direct_client(ca_pem: &[u8], namespace: &str, port: u16) -> (reqwest::Client, String) {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let host = format!("coder-k8s-apiserver.{namespace}.svc");
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .resolve(&host, ([127, 0, 0, 1], port).into())
        .build()
        .unwrap();
    (client, format!("https://{host}:{port}"))
}

#[tokio::test]
async fn a_standalone_server_without_a_backend_keeps_its_certificate_in_its_secret_and_answers_503() {
    let cp = control_plane_with_crds().await;
    let namespace = cp.namespace("agg-standalone").await.unwrap();
    let [api_port, health_port] = free_ports::<2>();
    let server = Process(
        Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
            .arg("--app=aggregated-apiserver")
            .arg(format!("--apiserver-bind-address=127.0.0.1:{api_port}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{health_port}"))
            .env("KUBECONFIG", cp.kubeconfig_path())
            .env("POD_NAMESPACE", namespace.name())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let secrets = Api::<Secret>::namespaced(cp.client().unwrap(), &namespace);
    let mut ca = Vec::new();
    wait_for(
        async || {
            let secret = secrets.get_opt("coder-k8s-apiserver-tls").await.unwrap();
            ca = secret
                .and_then(|s| s.data?.get("ca.crt").map(|b| b.0.clone()))
                .unwrap_or_default();
            !ca.is_empty()
        },
        "the serving-CA Secret is written",
    )
    .await;
    let (direct, base) = direct_client(&ca, &namespace, api_port);
    wait_for(
        async || direct.get(format!("{base}/healthz")).send().await.is_ok(),
        "the server listens",
    )
    .await;

    for path in ["/healthz", "/livez", "/readyz"] {
        let response = direct.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path} needs no credential");
    }
    // The pod's readiness probe (health port) is ready once the start-up checks passed.
    let probe = reqwest::get(format!("http://127.0.0.1:{health_port}/readyz"))
        .await
        .unwrap();
    assert_eq!(probe.status(), 200);
    let resources = format!("{base}/apis/aggregation.coder.com/v1alpha1/namespaces/team/coderworkspaces");
    let anonymous = direct.get(&resources).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let response = direct
        .get(&resources)
        .bearer_auth(cp.admin_token())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let status: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        status["message"],
        "coder client provider is not configured: missing coder URL and coder session token; configure --coder-url and --coder-session-token"
    );
    assert!(server.stop().success(), "SIGTERM ends the process with 0");
}

fn run_to_exit(command: &mut Command) -> std::process::Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[tokio::test]
async fn start_up_errors_name_what_to_fix() {
    let [api_port, health_port] = free_ports::<2>();
    let standalone = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_coder-k8s"));
        command
            .arg("--app=aggregated-apiserver")
            .arg(format!("--apiserver-bind-address=127.0.0.1:{api_port}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{health_port}"));
        command
    };
    let out = run_to_exit(standalone().env("KUBECONFIG", "/nonexistent/kubeconfig"));
    assert!(
        stderr(&out)
            .contains("configure delegated authentication: load kubeconfig \"/nonexistent/kubeconfig\": "),
        "{}",
        stderr(&out)
    );

    // An identity that may not read kube-system/extension-apiserver-authentication.
    let cp = control_plane_with_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let text = std::fs::read_to_string(cp.kubeconfig_path()).unwrap();
    let token_line = format!("    token: {}\n", cp.admin_token());
    let impersonating = text.replace(&token_line, &format!("{token_line}    as: nobody\n"));
    assert_ne!(impersonating, text);
    std::fs::write(&kubeconfig, impersonating).unwrap();
    let out = run_to_exit(standalone().env("KUBECONFIG", &kubeconfig));
    assert!(
        stderr(&out).contains(
            "configure delegated authentication: configmaps \"extension-apiserver-authentication\" is forbidden"
        ),
        "{}",
        stderr(&out)
    );

    // A serving-CA Secret that cannot be used refuses the start, naming the field.
    let namespace = cp.namespace("agg-broken").await.unwrap();
    let broken: Secret = serde_json::from_value(json!({
        "metadata": {"name": "coder-k8s-apiserver-tls"},
        "type": "coder.com/aggregated-apiserver-serving-ca",
        "stringData": {"ca.crt": "not a certificate"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(cp.client().unwrap(), &namespace)
        .create(&PostParams::default(), &broken)
        .await
        .unwrap();
    let out = run_to_exit(
        standalone()
            .env("KUBECONFIG", cp.kubeconfig_path())
            .env("POD_NAMESPACE", namespace.name()),
    );
    let message = stderr(&out);
    assert!(
        message.contains("configure aggregated API server serving certificate: ")
            && message.contains("data[\"ca.key\"] is missing or empty"),
        "{message}"
    );
}
