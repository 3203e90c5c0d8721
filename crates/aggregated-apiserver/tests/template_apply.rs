//! The Argo-CD-like loop through the real kube-apiserver and the real kubectl: the `codertemplates` resource of
//! this crate, backed by the Coder API test server, is registered behind kube-apiserver; the same CoderTemplate
//! manifest applied a second time (client-side and server-side apply) sends no write to Coder, a changed file
//! sends exactly one new version and its activation, and `kubectl diff` is refused without a Coder call.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cluster::{assert_success, kubectl, kubectl_json, serve_alone, static_provider, stdout};
use coder_k8s_aggregated_apiserver::coder::template_import::{
    BACKOFF_AFTER_ENV, INITIAL_POLL_ENV, MAX_POLL_ENV, SettingsSource, WAIT_TIMEOUT_ENV,
};
use coder_k8s_aggregated_apiserver::coder::{template_versions, templates};
use coder_k8s_aggregated_apiserver::generic::Registry;
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Config, TestServer};
use coder_k8s_testenv::ControlPlane;

const NAMESPACE: &str = "team-a";

async fn fresh_db() -> String {
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    pg.unique_coder_database("tplapply").await.unwrap()
}

fn fast_waits() -> SettingsSource {
    let map: BTreeMap<&str, &str> = BTreeMap::from([
        (WAIT_TIMEOUT_ENV, "20s"),
        (BACKOFF_AFTER_ENV, "0s"),
        (INITIAL_POLL_ENV, "50ms"),
        (MAX_POLL_ENV, "50ms"),
    ]);
    Arc::new(move |name| map.get(name).map(|v| (*v).to_owned()))
}

fn registry(server: &TestServer, token: &str) -> Registry {
    let provider = static_provider(server.url(), token, NAMESPACE, Duration::from_secs(10));
    Registry {
        group: "aggregation.coder.com",
        version: "v1alpha1",
        resources: vec![
            templates::resource_with(provider.clone(), fast_waits()),
            template_versions::resource(provider),
        ],
    }
}

fn manifest(org: &str, main_tf: &str) -> String {
    format!(
        r#"apiVersion: aggregation.coder.com/v1alpha1
kind: CoderTemplate
metadata:
  name: {org}.gitops
  namespace: {NAMESPACE}
spec:
  organization: {org}
  displayName: GitOps
  description: Applied from Git
  files:
    main.tf: |
      {main_tf}
    modules/app/variables.tf: |
      variable "size" {{}}
"#
    )
}

/// Every request the test server received that is not a GET.
fn writes(server: &TestServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

fn apply(cp: &ControlPlane, args: &[&str], manifest: &str) -> String {
    let mut all = vec!["apply", "-f", "-"];
    all.extend_from_slice(args);
    let out = kubectl(cp, &all, Some(manifest));
    assert_success(&out, &format!("kubectl {}", all.join(" ")));
    stdout(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applying_the_same_template_manifest_twice_changes_nothing_in_coder() {
    coder_k8s_coder_client::install_ring_provider();
    let db_url = fresh_db().await;
    let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let mut config = Config::new(&db_url);
    config.build_duration = Duration::from_millis(200);
    let server = TestServer::start(config).await.unwrap();
    let client = CoderClient::new(server.url(), SessionToken::new(token.clone())).unwrap();
    let org = client.default_organization().await.unwrap().name;

    let registry = registry(&server, &token);
    let cp = serve_alone(NAMESPACE, "codertemplates", move |_| registry).await;
    let name = format!("{org}.gitops");
    let first = manifest(&org, "resource \"null_resource\" \"a\" {}");

    let created = apply(cp, &[], &first);
    assert!(created.contains("created"), "{created}");
    let after_create = writes(&server);
    assert!(
        after_create.contains(&format!("POST /api/v2/organizations/{org}/templates")),
        "{after_create:#?}"
    );
    let object = kubectl_json(
        cp,
        &["get", "codertemplate", &name, "-n", NAMESPACE, "-o", "json"],
    );
    assert_eq!(
        object["spec"]["files"]["modules/app/variables.tf"],
        "variable \"size\" {}\n"
    );
    assert_eq!(object["spec"]["displayName"], "GitOps");

    // The second apply of the same manifest, as a GitOps tool repeats it: nothing may be written in Coder.
    server.clear_requests();
    apply(cp, &[], &first);
    apply(
        cp,
        &["--server-side", "--field-manager", "argocd-controller"],
        &first,
    );
    assert!(
        !server.requests().is_empty(),
        "the applies read the template from Coder"
    );
    assert_eq!(writes(&server), Vec::<String>::new(), "{:#?}", server.requests());

    // kubectl diff asks for a server-side dry run: refused, nothing sent to Coder.
    server.clear_requests();
    let changed = manifest(&org, "resource \"null_resource\" \"b\" {}");
    let diff = kubectl(cp, &["diff", "-f", "-"], Some(&changed));
    let stderr = String::from_utf8_lossy(&diff.stderr);
    assert!(
        stderr.contains("server-side dry-run is not supported for codertemplates; nothing was changed"),
        "{stderr}"
    );
    assert_eq!(writes(&server), Vec::<String>::new());

    // A changed file: one new version, activated; the metadata is unchanged so it is not written.
    let template_id = object["metadata"]["uid"].as_str().unwrap().to_owned();
    server.clear_requests();
    apply(cp, &[], &changed);
    assert_eq!(
        writes(&server),
        [
            "POST /api/v2/files".to_owned(),
            format!("POST /api/v2/organizations/{org}/templateversions"),
            format!("PATCH /api/v2/templates/{template_id}/versions"),
        ]
    );
    let object = kubectl_json(
        cp,
        &["get", "codertemplate", &name, "-n", NAMESPACE, "-o", "json"],
    );
    assert_eq!(
        object["spec"]["files"]["main.tf"],
        "resource \"null_resource\" \"b\" {}\n"
    );
    let versions = kubectl_json(
        cp,
        &["get", "codertemplateversions", "-n", NAMESPACE, "-o", "json"],
    );
    assert_eq!(versions["items"].as_array().unwrap().len(), 2);

    // And applied once more: again nothing.
    server.clear_requests();
    apply(cp, &[], &changed);
    assert_eq!(writes(&server), Vec::<String>::new());

    // Template version lists are never paged, whatever kubectl asks for.
    let path = format!("/apis/aggregation.coder.com/v1alpha1/namespaces/{NAMESPACE}/codertemplateversions");
    let paged = kubectl(
        cp,
        &["get", "--raw", &format!("{path}?limit=1&continue=abc")],
        None,
    );
    assert!(!paged.status.success());
    assert!(
        String::from_utf8_lossy(&paged.stderr).contains("BadRequest"),
        "{}",
        String::from_utf8_lossy(&paged.stderr)
    );
    let limited = kubectl_json(cp, &["get", "--raw", &format!("{path}?limit=1")]);
    assert_eq!(limited["items"].as_array().unwrap().len(), 2, "limit is ignored");

    // A server-side dry-run create and a delete through kubectl.
    server.clear_requests();
    let other = manifest(&org, "x").replace(".gitops", ".other");
    let dry = kubectl(cp, &["create", "--dry-run=server", "-f", "-"], Some(&other));
    assert!(!dry.status.success());
    assert!(
        String::from_utf8_lossy(&dry.stderr)
            .contains("server-side dry-run is not supported for codertemplates"),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(
        server.requests().is_empty(),
        "a dry run reaches no Coder endpoint"
    );
    // A watch from the list's resourceVersion sees the delete as DELETED.
    let templates_path =
        format!("/apis/aggregation.coder.com/v1alpha1/namespaces/{NAMESPACE}/codertemplates");
    let list = kubectl_json(cp, &["get", "--raw", &templates_path]);
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    let mut watch = cp.kubectl();
    watch
        .args([
            "get",
            "--raw",
            &format!("{templates_path}?watch=1&resourceVersion={rv}&timeoutSeconds=6"),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let watch = watch.spawn().unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let deleted = kubectl(cp, &["delete", "codertemplate", &name, "-n", NAMESPACE], None);
    assert_success(&deleted, "kubectl delete codertemplate");
    assert_eq!(
        writes(&server),
        [format!("DELETE /api/v2/templates/{template_id}")]
    );
    let events = String::from_utf8(watch.wait_with_output().unwrap().stdout).unwrap();
    let deleted_event = events
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|event| event["type"] == "DELETED")
        .unwrap_or_else(|| panic!("no DELETED event in {events:?}"));
    assert_eq!(deleted_event["object"]["metadata"]["name"], name.as_str());
    let gone = kubectl(cp, &["get", "codertemplate", &name, "-n", NAMESPACE], None);
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("NotFound"),
        "{}",
        String::from_utf8_lossy(&gone.stderr)
    );
}
