//! The aggregated API server registered with a real kube-apiserver (an APIService and an ExternalName Service that
//! lead to this test process) and driven with the real `kubectl`: discovery, OpenAPI, Table output, writes, watch,
//! RBAC, the open health paths, namespace deletion and the trust kube-apiserver places in the serving CA. The
//! resources are served from in-memory storages; the Coder-backed storages have tests of their own.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;

use std::time::Duration;

use cluster::{Served, assert_success, kubectl, kubectl_json, stdout, wait_until};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchParams};
use kube::core::{ApiResource, GroupVersionKind, WatchEvent};
use serde_json::{Value, json};

fn workspaces(client: kube::Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("aggregation.coder.com", "v1alpha1", "CoderWorkspace");
    Api::namespaced_with(
        client,
        namespace,
        &ApiResource::from_gvk_with_plural(&gvk, "coderworkspaces"),
    )
}

fn workspace(name: &str, namespace: &str, running: bool) -> Value {
    let organization = name.split('.').next().unwrap_or_default();
    json!({
        "apiVersion": "aggregation.coder.com/v1alpha1",
        "kind": "CoderWorkspace",
        "metadata": {"name": name, "namespace": namespace, "labels": {"team": "a"}},
        "spec": {"organization": organization, "templateName": "docker", "running": running},
    })
}

#[tokio::test]
async fn kubectl_discovers_the_group_and_its_resources() {
    let served = Served::shared().await;
    let out = kubectl(
        served.cp,
        &["api-resources", "--api-group=aggregation.coder.com", "-o", "wide"],
        None,
    );
    assert_success(&out, "api-resources");
    let text = stdout(&out);
    for expected in [
        "coderworkspaces",
        "codertemplates",
        "CoderWorkspace",
        "CoderTemplate",
        "true",
    ] {
        assert!(text.contains(expected), "{expected} missing in:\n{text}");
    }
    let list = kubectl_json(
        served.cp,
        &["get", "--raw", "/apis/aggregation.coder.com/v1alpha1"],
    );
    assert_eq!(list["kind"], "APIResourceList");
    assert_eq!(list["groupVersion"], "aggregation.coder.com/v1alpha1");
    let workspaces = list["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "coderworkspaces"))
        .unwrap_or_else(|| panic!("no coderworkspaces in {list}"));
    assert_eq!(workspaces["namespaced"], true);
    assert!(
        workspaces["verbs"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("watch"))),
        "{workspaces}"
    );
    let groups = kubectl_json(served.cp, &["get", "--raw", "/apis"]);
    assert!(groups.to_string().contains("aggregation.coder.com"), "{groups}");
}

#[tokio::test]
async fn kubectl_explain_reads_the_served_openapi() {
    let served = Served::shared().await;
    // kube-apiserver fetches an aggregated server's OpenAPI in the background after the APIService turns available,
    // so `explain` may not know the kind for a few seconds.
    wait_until(
        "kubectl explain knows the kind",
        Duration::from_secs(60),
        || async {
            kubectl(served.cp, &["explain", "coderworkspaces.spec"], None)
                .status
                .success()
        },
    )
    .await;
    let out = kubectl(served.cp, &["explain", "coderworkspaces.spec"], None);
    assert_success(&out, "explain");
    let text = stdout(&out);
    assert!(
        text.contains("KIND:") && text.contains("CoderWorkspace"),
        "{text}"
    );
    assert!(
        text.contains("running") && text.contains("templateName"),
        "{text}"
    );
}

#[tokio::test]
async fn kubectl_apply_get_and_delete_through_kube_apiserver() {
    let served = Served::shared().await;
    let ns = served.cp.namespace("agg-kubectl").await.expect("namespace");
    let manifest = workspace("acme.alice.dev", &ns, true).to_string();
    let out = kubectl(served.cp, &["apply", "-f", "-"], Some(&manifest));
    assert_success(&out, "client-side apply");
    assert!(
        stdout(&out).contains("coderworkspace.aggregation.coder.com/acme.alice.dev created"),
        "{}",
        stdout(&out)
    );
    let second = workspace("acme.bob.web", &ns, false).to_string();
    let out = kubectl(
        served.cp,
        &["apply", "--server-side", "--field-manager=tests", "-f", "-"],
        Some(&second),
    );
    assert_success(&out, "server-side apply");

    let out = kubectl(served.cp, &["get", "coderworkspaces", "-n", &ns], None);
    assert_success(&out, "get");
    let table = stdout(&out);
    let header = table.lines().next().unwrap_or_default();
    for column in ["NAME", "RUNNING", "AGE"] {
        assert!(header.contains(column), "{column} missing in:\n{table}");
    }
    assert!(
        table.contains("acme.alice.dev") && table.contains("acme.bob.web"),
        "{table}"
    );
    let wide = stdout(&kubectl(
        served.cp,
        &["get", "coderworkspaces", "-n", &ns, "-o", "wide"],
        None,
    ));
    assert!(
        wide.lines().next().unwrap_or_default().contains("TEMPLATE"),
        "{wide}"
    );

    let out = kubectl(
        served.cp,
        &[
            "get",
            "coderworkspaces",
            "-n",
            &ns,
            "-l",
            "team=a",
            "--field-selector",
            "metadata.name=acme.bob.web",
            "-o",
            "name",
        ],
        None,
    );
    assert_success(&out, "selectors");
    assert_eq!(
        stdout(&out).trim(),
        "coderworkspace.aggregation.coder.com/acme.bob.web"
    );

    let object = kubectl_json(
        served.cp,
        &["get", "coderworkspace", "acme.alice.dev", "-n", &ns, "-o", "json"],
    );
    assert_eq!(object["spec"]["running"], true);
    assert!(
        !object["metadata"]["uid"].as_str().unwrap_or_default().is_empty(),
        "{object}"
    );
    let yaml = stdout(&kubectl(
        served.cp,
        &["get", "coderworkspace", "acme.alice.dev", "-n", &ns, "-o", "yaml"],
        None,
    ));
    assert!(yaml.contains("templateName: docker"), "{yaml}");

    let out = kubectl(
        served.cp,
        &["delete", "coderworkspace", "acme.alice.dev", "-n", &ns],
        None,
    );
    assert_success(&out, "delete");
    let out = kubectl(
        served.cp,
        &["get", "coderworkspace", "acme.alice.dev", "-n", &ns],
        None,
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("NotFound") || stderr.contains("not found"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_watch_through_kube_apiserver_sees_writes_and_ends_at_its_timeout() {
    let served = Served::shared().await;
    let ns = served.cp.namespace("agg-watch").await.expect("namespace");
    let api = workspaces(served.cp.client().expect("client"), &ns);
    let listed = api.list(&ListParams::default()).await.expect("list");
    let version = listed.metadata.resource_version.clone().unwrap_or_default();
    assert!(
        !version.is_empty() && version != "0",
        "a list carries the resourceVersion to watch from"
    );
    let mut stream = Box::pin(
        api.watch(&WatchParams::default().timeout(3), &version)
            .await
            .expect("watch"),
    );
    let object: DynamicObject =
        serde_json::from_value(workspace("acme.carol.ml", &ns, true)).expect("object");
    api.create(&PostParams::default(), &object).await.expect("create");
    use futures::TryStreamExt;
    let first = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .expect("an event within 10 s")
        .expect("no stream error")
        .expect("an event before the end");
    match first {
        WatchEvent::Added(object) => assert_eq!(object.metadata.name.as_deref(), Some("acme.carol.ml")),
        other => panic!("expected ADDED, got {other:?}"),
    }
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = stream.try_next().await.expect("no stream error") {
            assert!(
                matches!(event, WatchEvent::Bookmark(_)),
                "only bookmarks may follow: {event:?}"
            );
        }
    })
    .await;
    assert!(end.is_ok(), "the watch ends cleanly at timeoutSeconds=3");
}

#[tokio::test]
async fn rbac_decides_through_kube_apiserver_and_direct_requests_need_a_credential() {
    let served = Served::shared().await;
    let ns = served.cp.namespace("agg-rbac").await.expect("namespace");
    let bob = workspaces(served.cp.client_as("bob", &[]).expect("client"), &ns);
    let error = bob
        .list(&ListParams::default())
        .await
        .expect_err("bob has no RBAC");
    match error {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert!(
                status.message.contains("User \"bob\" cannot list resource \"coderworkspaces\" in API group \"aggregation.coder.com\""),
                "{}",
                status.message
            );
        }
        other => panic!("expected 403, got {other:?}"),
    }
    cluster::grant(served.cp, &ns, "bob", &["list"]).await;
    wait_until(
        "bob may list after the grant",
        Duration::from_secs(30),
        || async { bob.list(&ListParams::default()).await.is_ok() },
    )
    .await;

    let direct = cluster::direct_client(served);
    for path in ["/healthz", "/livez", "/readyz"] {
        let response = direct
            .get(format!("{}{path}", served.url))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 200, "{path} is open");
    }
    for path in [
        "/healthz/ping",
        "/apis",
        "/apis/aggregation.coder.com/v1alpha1",
        "/openapi/v2",
    ] {
        let response = direct
            .get(format!("{}{path}", served.url))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 401, "{path} needs a credential");
        let body: Value = response.json().await.expect("a Status body");
        assert_eq!(body["kind"], "Status", "{body}");
    }
    let with_token = direct
        .get(format!(
            "{}/apis/aggregation.coder.com/v1alpha1/namespaces/{ns}/coderworkspaces",
            served.url
        ))
        .bearer_auth(served.cp.admin_token())
        .send()
        .await
        .expect("request");
    assert_eq!(
        with_token.status(),
        200,
        "a bearer token is checked with a TokenReview"
    );
    let spoofed = direct
        .get(format!(
            "{}/apis/aggregation.coder.com/v1alpha1/namespaces/{ns}/coderworkspaces",
            served.url
        ))
        .header("X-Remote-User", "admin")
        .header("X-Remote-Group", "system:masters")
        .send()
        .await
        .expect("request");
    assert_eq!(
        spoofed.status(),
        401,
        "identity headers count only on front-proxy connections"
    );
}

#[tokio::test]
async fn a_namespace_holding_aggregated_objects_is_deleted_to_completion() {
    let served = Served::shared().await;
    let ns = served.cp.namespace("agg-delete").await.expect("namespace");
    let client = served.cp.client().expect("client");
    let api = workspaces(client.clone(), &ns);
    for name in ["acme.dave.a", "acme.dave.b"] {
        let object: DynamicObject = serde_json::from_value(workspace(name, &ns, true)).expect("object");
        api.create(&PostParams::default(), &object).await.expect("create");
    }
    let namespaces = Api::<Namespace>::all(client);
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .expect("delete namespace");
    wait_until("the namespace is gone", Duration::from_secs(90), || async {
        matches!(namespaces.get_opt(&ns).await, Ok(None))
    })
    .await;
    // kube-apiserver still forwards reads for the deleted namespace; the server must hold nothing there.
    let left = api
        .list(&ListParams::default())
        .await
        .expect("list after the deletion");
    assert!(
        left.items.is_empty(),
        "the namespace controller deleted the aggregated objects through the server: {:?}",
        left.items
    );
}

#[tokio::test]
async fn server_side_apply_patches_an_existing_object() {
    let served = Served::shared().await;
    let ns = served.cp.namespace("agg-ssa").await.expect("namespace");
    let api = workspaces(served.cp.client().expect("client"), &ns);
    let object: DynamicObject = serde_json::from_value(workspace("acme.erin.x", &ns, true)).expect("object");
    api.create(&PostParams::default(), &object).await.expect("create");
    let patch = json!({"apiVersion": "aggregation.coder.com/v1alpha1", "kind": "CoderWorkspace", "metadata": {"name": "acme.erin.x"}, "spec": {"running": false}});
    let patched = api
        .patch("acme.erin.x", &PatchParams::apply("tests"), &Patch::Apply(&patch))
        .await
        .expect("apply");
    assert_eq!(patched.data["spec"]["running"], false);
    assert_eq!(
        patched.data["spec"]["templateName"], "docker",
        "fields the patch does not name stay"
    );
    let merged = api
        .patch(
            "acme.erin.x",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(
        merged
            .metadata
            .labels
            .unwrap_or_default()
            .get("x")
            .map(String::as_str),
        Some("y")
    );
}
