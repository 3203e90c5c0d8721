//! `CoderWorkspace` writes and the `start`/`stop` subresources through a real kube-apiserver with the real kubectl:
//! the Coder-backed registry of this crate is registered behind a control plane of this test binary, and each test
//! serves its own namespace from a Coder of its own: the Coder API test server, or a real Coder server (open-source
//! v2.30 with the echo provisioner) where one can run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;

use std::time::Duration;

use bytes::Bytes;
use cluster::{ServedByNamespace, assert_success, kubectl, stdout};
use coder_k8s_aggregated_apiserver::coder::{registry, transitions};
use coder_k8s_coder_client::types::builds::{Transition, WorkspaceBuildStatus};
use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::template_versions::CreateTemplateVersionRequest;
use coder_k8s_coder_client::types::templates::CreateTemplateRequest;
use coder_k8s_coder_client::types::workspaces::Workspace;
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Config, TestServer};
use coder_k8s_testenv::{ControlPlane, RealCoder};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

/// One control plane per test process with the Coder-backed registry (and `start`/`stop`) registered behind it.
async fn served() -> &'static ServedByNamespace {
    static SERVED: OnceCell<ServedByNamespace> = OnceCell::const_new();
    SERVED
        .get_or_init(|| {
            ServedByNamespace::start(|_, provider| {
                let mut registry = registry(provider.clone());
                let workspaces = registry
                    .resources
                    .iter_mut()
                    .find(|r| r.plural == "coderworkspaces")
                    .unwrap();
                workspaces.subresources =
                    vec![transitions::start(provider.clone()), transitions::stop(provider)];
                registry
            })
        })
        .await
}

fn manifest(name: &str, namespace: &str, organization: &str, template: &str, running: bool) -> String {
    json!({
        "apiVersion": "aggregation.coder.com/v1alpha1",
        "kind": "CoderWorkspace",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"organization": organization, "templateName": template, "running": running},
    })
    .to_string()
}

fn run(cp: &ControlPlane, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(cp, args, stdin);
    assert_success(&out, &args.join(" "));
    stdout(&out)
}

fn fails(cp: &ControlPlane, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(cp, args, stdin);
    assert!(!out.status.success(), "{args:?} succeeded: {}", stdout(&out));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The workspace once its latest build has ended.
async fn settled(client: &CoderClient, owner: &str, leaf: &str) -> Workspace {
    let mut last = None;
    for _ in 0..300 {
        let workspace = client.workspace_by_owner_and_name(owner, leaf).await.unwrap();
        if workspace.latest_build.job.status.is_terminal() {
            return workspace;
        }
        last = Some(workspace.latest_build.status);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the latest build of {leaf} did not end: {last:?}");
}

fn transition_path(namespace: &str, name: &str, action: &str) -> String {
    format!("/apis/aggregation.coder.com/v1alpha1/namespaces/{namespace}/coderworkspaces/{name}/{action}")
}

/// The flow every Coder must support: create, stop through the subresource, start through a patch, apply, delete.
async fn create_stop_start_delete(
    cp: &ControlPlane,
    client: &CoderClient,
    namespace: &str,
    organization: &str,
    owner: &str,
    template: &str,
) {
    let name = format!("{organization}.{owner}.kube");
    let body = manifest(&name, namespace, organization, template, true);
    let created = run(cp, &["create", "-f", "-"], Some(&body));
    assert!(
        created.contains(&format!("coderworkspace.aggregation.coder.com/{name} created")),
        "{created}"
    );
    let workspace = settled(client, owner, "kube").await;
    assert_eq!(workspace.latest_build.status, WorkspaceBuildStatus::Running);
    let table = run(cp, &["get", "coderworkspaces", "-n", namespace], None);
    assert!(table.contains(&name) && table.contains("running"), "{table}");

    // stop through the subresource: Queued, then Unchanged once stopped.
    let path = transition_path(namespace, &name, "stop");
    let queued: Value =
        serde_json::from_str(&run(cp, &["create", "--raw", &path, "-f", "-"], Some("{}"))).unwrap();
    assert_eq!(queued["kind"], "CoderWorkspaceTransition");
    assert_eq!(queued["metadata"]["name"], name);
    assert_eq!(queued["status"]["transition"], "stop");
    assert_eq!(queued["status"]["outcome"], "Queued", "{queued}");
    let stopped = settled(client, owner, "kube").await;
    assert_eq!(stopped.latest_build.transition, Transition::Stop);
    assert_eq!(queued["status"]["buildID"], stopped.latest_build.id.to_string());
    assert_eq!(stopped.latest_build.job.status, JobStatus::Succeeded);
    let again: Value =
        serde_json::from_str(&run(cp, &["create", "--raw", &path, "-f", "-"], Some("{}"))).unwrap();
    assert_eq!(again["status"]["outcome"], "Unchanged", "{again}");
    let running = run(
        cp,
        &[
            "get",
            "coderworkspace",
            &name,
            "-n",
            namespace,
            "-o",
            "jsonpath={.spec.running}",
        ],
        None,
    );
    assert_eq!(running, "false");
    // A dry run of start only evaluates.
    let would: Value = serde_json::from_str(&run(
        cp,
        &[
            "create",
            "--raw",
            &format!("{}?dryRun=All", transition_path(namespace, &name, "start")),
            "-f",
            "-",
        ],
        Some("{}"),
    ))
    .unwrap();
    assert_eq!(
        would["status"],
        json!({"transition": "start", "outcome": "WouldQueue", "dryRun": true})
    );

    // start through a merge patch of spec.running.
    let patched = run(
        cp,
        &[
            "patch",
            "coderworkspace",
            &name,
            "-n",
            namespace,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"running":true}}"#,
        ],
        None,
    );
    assert!(patched.contains("patched"), "{patched}");
    let started = settled(client, owner, "kube").await;
    assert_eq!(started.latest_build.transition, Transition::Start);
    assert_eq!(started.latest_build.status, WorkspaceBuildStatus::Running);

    // Server-side dry-run is refused, and nothing changes.
    let message = "server-side dry-run is not supported for coderworkspaces; nothing was changed";
    let stopped_body = manifest(&name, namespace, organization, template, false);
    let refused = fails(cp, &["apply", "--dry-run=server", "-f", "-"], Some(&stopped_body));
    assert!(refused.contains(message), "{refused}");
    let refused = fails(
        cp,
        &[
            "delete",
            "coderworkspace",
            &name,
            "-n",
            namespace,
            "--dry-run=server",
        ],
        None,
    );
    assert!(refused.contains(message), "{refused}");
    let unchanged = client.workspace_by_owner_and_name(owner, "kube").await.unwrap();
    assert_eq!(unchanged.latest_build.id, started.latest_build.id);

    // Client-side apply of the same desired state changes nothing; of running: false stops it.
    let same = manifest(&name, namespace, organization, template, true);
    run(cp, &["apply", "-f", "-"], Some(&same));
    assert_eq!(
        client
            .workspace_by_owner_and_name(owner, "kube")
            .await
            .unwrap()
            .latest_build
            .id,
        started.latest_build.id
    );
    run(cp, &["apply", "-f", "-"], Some(&stopped_body));
    let applied = settled(client, owner, "kube").await;
    assert_eq!(applied.latest_build.transition, Transition::Stop);

    // Server-side apply creates a missing workspace; a second apply changes nothing.
    let ssa_name = format!("{organization}.{owner}.ssa");
    let ssa = manifest(&ssa_name, namespace, organization, template, true);
    let first = run(
        cp,
        &["apply", "--server-side", "--field-manager=tests", "-f", "-"],
        Some(&ssa),
    );
    assert!(first.contains("serverside-applied"), "{first}");
    let ssa_workspace = settled(client, owner, "ssa").await;
    run(
        cp,
        &["apply", "--server-side", "--field-manager=tests", "-f", "-"],
        Some(&ssa),
    );
    assert_eq!(
        client
            .workspace_by_owner_and_name(owner, "ssa")
            .await
            .unwrap()
            .latest_build
            .id,
        ssa_workspace.latest_build.id
    );

    // delete queues a delete build; the workspace then disappears.
    for (leaf, object) in [("kube", &name), ("ssa", &ssa_name)] {
        let deleted = run(
            cp,
            &[
                "delete",
                "coderworkspace",
                object,
                "-n",
                namespace,
                "--wait=false",
            ],
            None,
        );
        assert!(
            deleted.contains(&format!(
                "coderworkspace.aggregation.coder.com \"{object}\" deleted"
            )),
            "{deleted}"
        );
        let mut gone = false;
        for _ in 0..300 {
            let out = kubectl(cp, &["get", "coderworkspace", object, "-n", namespace], None);
            if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound") {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(gone, "{leaf} was not deleted");
    }
}

/// A one-file ustar archive (the test support's, as `Bytes`).
fn tar_with(name: &str, content: &[u8]) -> Bytes {
    Bytes::from(coder_k8s_testenv::one_file_tar(name, content))
}

/// Imports `archive` as a template named `name` (with `provisioner`) and returns the organization's name.
async fn import_template(client: &CoderClient, name: &str, archive: Bytes, provisioner: &str) -> String {
    let organization = client.default_organization().await.unwrap().name;
    let file = client.upload_file(ArchiveKind::Tar, archive).await.unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = provisioner.to_owned();
    let version = client
        .create_template_version(&organization, &request)
        .await
        .unwrap();
    for _ in 0..300 {
        let job = client.template_version(version.id).await.unwrap().job;
        if job.status.is_terminal() {
            assert_eq!(job.status, JobStatus::Succeeded, "{job:?}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let request = CreateTemplateRequest {
        name: name.to_owned(),
        template_version_id: version.id,
        ..CreateTemplateRequest::default()
    };
    client.create_template(&organization, &request).await.unwrap();
    organization
}

// kubectl runs as a blocking child process: the test server needs worker threads of its own meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_stops_starts_applies_and_deletes_workspaces_of_the_test_server() {
    let served = served().await;
    coder_k8s_coder_client::install_ring_provider();
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    let db_url = pg
        .create_coder_database(&format!("wsk_{}", std::process::id()))
        .await
        .unwrap();
    let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let server = TestServer::start(Config::new(&db_url)).await.unwrap();
    let client = CoderClient::new(server.url(), SessionToken::new(token.clone())).unwrap();
    let organization = import_template(
        &client,
        "docker",
        tar_with("main.tf", b"terraform {}\n"),
        "terraform",
    )
    .await;
    let namespace = served.namespace("kc-testserver", &server.url(), &token).await;

    // Discovery lists both subresources with their kind and verb.
    let resources: Value = serde_json::from_str(&run(
        served.cp,
        &["get", "--raw", "/apis/aggregation.coder.com/v1alpha1"],
        None,
    ))
    .unwrap();
    for action in ["start", "stop"] {
        let entry = resources["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == format!("coderworkspaces/{action}"))
            .unwrap_or_else(|| panic!("no coderworkspaces/{action} in {resources}"));
        assert_eq!(entry["kind"], "CoderWorkspaceTransition");
        assert_eq!(entry["verbs"], json!(["create"]));
    }
    // Access to coderworkspaces is not access to its start and stop.
    cluster::grant(
        served.cp,
        &namespace,
        "bob",
        &["get", "list", "create", "update", "patch"],
    )
    .await;
    let denied = fails(
        served.cp,
        &[
            "--as=bob",
            "create",
            "--raw",
            &transition_path(
                &namespace,
                &format!("{organization}.coder-k8s-operator.kube"),
                "stop",
            ),
            "-f",
            "-",
        ],
        Some("{}"),
    );
    assert!(
        denied.contains("Forbidden") && denied.contains("cannot create resource \"coderworkspaces/stop\""),
        "{denied}"
    );

    create_stop_start_delete(
        served.cp,
        &client,
        &namespace,
        &organization,
        "coder-k8s-operator",
        "docker",
    )
    .await;
}

// kubectl runs as a blocking child process: the test server needs worker threads of its own meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_stops_starts_applies_and_deletes_workspaces_of_a_real_coder() {
    let served = served().await;
    let coder = RealCoder::shared().await.unwrap();
    coder_k8s_coder_client::install_ring_provider();
    let url = url::Url::parse(coder.url()).unwrap();
    let client = CoderClient::new(url.clone(), SessionToken::new(coder.owner_token())).unwrap();
    let archive = Bytes::from(
        coder
            .echo_template(coder_k8s_testenv::coder::EchoTemplate::Success)
            .unwrap(),
    );
    let organization = import_template(&client, "kube-echo", archive, "echo").await;
    let owner = client.me().await.unwrap().username;
    let namespace = served.namespace("kc-real", &url, coder.owner_token()).await;
    create_stop_start_delete(served.cp, &client, &namespace, &organization, &owner, "kube-echo").await;
}
