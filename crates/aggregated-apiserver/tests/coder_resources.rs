//! The Coder resources against real backends: the storages read a Coder API test server (with its PostgreSQL)
//! through both providers, and the control-plane provider reads `CoderControlPlane` objects from a real
//! kube-apiserver.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use coder_k8s_aggregated_apiserver::coder::{
    ControlPlaneProvider, Provider, StaticBackend, StaticProvider, registry,
};
use coder_k8s_aggregated_apiserver::generic::{ApiError, Registry, RequestContext, UserInfo};
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_coder_client::types::UpdateTemplateMeta;
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition};
use coder_k8s_coder_client::types::workspaces::CreateWorkspaceRequest;
use coder_k8s_coder_testserver::{Fault, FaultRule};
use coder_k8s_control_plane_access::ClientCache;
use coder_k8s_testenv::ControlPlane;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

const NAMESPACE: &str = "coder-ns";

mod coder_fixture;

use coder_fixture::{Coder, OPERATOR, coder, eventually, settings};

fn static_registry(coder: &Coder) -> Registry {
    let backend = StaticBackend {
        url: coder.server.url(),
        token: coder.token.clone(),
        namespace: NAMESPACE.to_owned(),
    };
    registry(Arc::new(StaticProvider::new(&backend, &settings()).unwrap()))
}

fn ctx(namespace: Option<&str>) -> RequestContext {
    RequestContext {
        user: UserInfo::default(),
        namespace: namespace.map(str::to_owned),
        deadline: tokio::time::Instant::now() + Duration::from_secs(30),
        dry_run: false,
        query: BTreeMap::new(),
    }
}

async fn get(registry: &Registry, plural: &str, namespace: &str, name: &str) -> Result<Value, ApiError> {
    let storage = registry.resource(plural).unwrap().storage.clone();
    storage.get(&ctx(Some(namespace)), name).await
}

async fn list(registry: &Registry, plural: &str, namespace: Option<&str>) -> Result<Vec<Value>, ApiError> {
    let storage = registry.resource(plural).unwrap().storage.clone();
    storage.list(&ctx(namespace)).await
}

fn names(objects: &[Value]) -> Vec<&str> {
    objects
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect()
}

fn rfc3339_seconds(coder_time: &str) -> String {
    let parsed: k8s_openapi::jiff::Timestamp = coder_time.parse().unwrap();
    serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(parsed))
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn workspaces_list_and_get_from_coder() {
    let coder = coder("ws").await;
    let registry = static_registry(&coder);
    let name = format!("{}.{OPERATOR}.dev", coder.organization);
    let w = &coder.workspace;

    let items = list(&registry, "coderworkspaces", Some(NAMESPACE)).await.unwrap();
    assert_eq!(names(&items), [name.as_str()]);
    let item = &items[0];
    assert_eq!(item["kind"], "CoderWorkspace");
    assert_eq!(item["metadata"]["namespace"], NAMESPACE);
    assert_eq!(item["metadata"]["uid"], w.id.to_string());
    assert_eq!(
        item["metadata"]["creationTimestamp"],
        rfc3339_seconds(&w.created_at)
    );
    assert_eq!(item["spec"]["organization"], coder.organization);
    assert_eq!(item["spec"]["templateName"], "docker");
    assert_eq!(item["spec"]["running"], true);
    assert_eq!(item["status"]["ownerName"], OPERATOR);
    assert_eq!(item["status"]["latestBuildID"], w.latest_build.id.to_string());
    assert_eq!(item["status"]["latestBuildStatus"], "running");
    let rv = item["metadata"]["resourceVersion"].as_str().unwrap();
    assert!(
        rv.len() == 64 && rv.bytes().all(|b| b.is_ascii_hexdigit()),
        "{rv}"
    );

    let fetched = get(&registry, "coderworkspaces", NAMESPACE, &name).await.unwrap();
    assert_eq!(&fetched, item, "get and list convert alike");
    // All namespaces: the one served namespace.
    assert_eq!(
        names(&list(&registry, "coderworkspaces", None).await.unwrap()),
        [name.as_str()]
    );

    // An alias of the owner resolves in Coder, but only the canonical name is served.
    let alias = get(
        &registry,
        "coderworkspaces",
        NAMESPACE,
        &format!("{}.me.dev", coder.organization),
    )
    .await
    .unwrap_err();
    assert_eq!(alias.code, 400, "{alias}");
    assert!(alias.message.contains(&name), "{alias}");
    let other_org = get(
        &registry,
        "coderworkspaces",
        NAMESPACE,
        &format!("elsewhere.{OPERATOR}.dev"),
    )
    .await
    .unwrap_err();
    assert_eq!((other_org.code, other_org.reason), (404, "NotFound"));
    let missing = get(
        &registry,
        "coderworkspaces",
        NAMESPACE,
        &format!("{}.{OPERATOR}.gone", coder.organization),
    )
    .await
    .unwrap_err();
    assert_eq!((missing.code, missing.reason), (404, "NotFound"), "{missing}");
    let malformed = get(&registry, "coderworkspaces", NAMESPACE, "dev")
        .await
        .unwrap_err();
    assert_eq!(
        (malformed.code, malformed.message.as_str()),
        (
            400,
            r#"invalid workspace name "dev": expected 2 separators (".")"#
        )
    );

    // Another namespace is not served: an empty list, a 404, and no Coder call.
    coder.server.clear_requests();
    assert!(
        list(&registry, "coderworkspaces", Some("elsewhere"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        get(&registry, "coderworkspaces", "elsewhere", &name)
            .await
            .unwrap_err()
            .code,
        404
    );
    assert!(
        coder.server.requests().is_empty(),
        "{:?}",
        coder.server.requests()
    );
}

/// A list of more workspaces than a Coder page holds reads every page once (the first, then the rest together) and
/// shows each workspace once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_list_reads_every_page_once() {
    use futures::{StreamExt as _, TryStreamExt as _};
    let coder = coder("wspages").await;
    let client = &coder.client;
    futures::stream::iter(0..250)
        .map(|i| {
            let request = CreateWorkspaceRequest {
                template_id: Some(coder.template.id),
                name: format!("w{i}"),
                ..CreateWorkspaceRequest::default()
            };
            async move { client.create_workspace("me", &request).await }
        })
        .buffer_unordered(8)
        .try_for_each(|_| async { Ok(()) })
        .await
        .unwrap();
    // Coder lists workspaces whose build succeeded first, so the order (and the pages) settle with the builds.
    eventually("every build ended", async || {
        let page = client.workspaces("", 0, 0).await.unwrap();
        let ended = page
            .workspaces
            .iter()
            .all(|w| w.latest_build.job.status.is_terminal());
        (page.workspaces.len() == 251 && ended).then_some(())
    })
    .await;
    let registry = static_registry(&coder);
    coder.server.clear_requests();
    let items = list(&registry, "coderworkspaces", Some(NAMESPACE)).await.unwrap();
    let listed: std::collections::BTreeSet<&str> = names(&items).into_iter().collect();
    assert_eq!(items.len(), 251);
    assert_eq!(listed.len(), 251, "every workspace once");
    assert!(listed.contains(format!("{}.{OPERATOR}.w249", coder.organization).as_str()));
    let mut pages: Vec<String> = coder
        .server
        .requests()
        .iter()
        .filter(|r| r.path == "/api/v2/workspaces")
        .map(|r| r.query.clone().unwrap_or_default())
        .collect();
    pages.sort();
    assert_eq!(
        pages,
        ["limit=100", "limit=100&offset=100", "limit=100&offset=200"],
        "{:?}",
        coder.server.requests()
    );
}

#[tokio::test]
async fn templates_and_versions_list_and_get_from_coder() {
    let coder = coder("tpl").await;
    let registry = static_registry(&coder);
    let t = &coder.template;
    let name = format!("{}.docker", coder.organization);

    let templates = list(&registry, "codertemplates", Some(NAMESPACE)).await.unwrap();
    assert_eq!(names(&templates), [name.as_str()]);
    let template = &templates[0];
    let updated: k8s_openapi::jiff::Timestamp = t.updated_at.parse().unwrap();
    assert_eq!(
        template["metadata"]["resourceVersion"],
        updated.as_nanosecond().to_string()
    );
    assert_eq!(template["metadata"]["uid"], t.id.to_string());
    assert_eq!(template["spec"]["versionID"], t.active_version_id.to_string());
    assert_eq!(template["spec"]["displayName"], "Docker");
    assert_eq!(
        template["status"]["activeVersionID"],
        t.active_version_id.to_string()
    );
    // A single get also carries the active version's source, tags, variables, name and message; lists leave them
    // out.
    let mut single = get(&registry, "codertemplates", NAMESPACE, &name).await.unwrap();
    assert_eq!(single["spec"]["files"], json!({"main.tf": "terraform {}\n"}));
    assert_eq!(
        single["spec"]["provisionerTags"],
        json!({"owner": "", "scope": "organization"})
    );
    assert_eq!(single["spec"]["variables"], json!([]));
    assert_eq!(single["status"]["activeVersionName"], "v1.0.0");
    for key in ["files", "provisionerTags", "variables"] {
        assert!(template["spec"].get(key).is_none(), "{key}: {template}");
        single["spec"].as_object_mut().unwrap().remove(key);
    }
    for key in ["activeVersionName", "activeVersionMessage"] {
        assert!(template["status"].get(key).is_none(), "{key}: {template}");
        single["status"].as_object_mut().unwrap().remove(key);
    }
    // A single get mirrors the settings in the status; a list shows them once, in the spec.
    let mirrored: Vec<String> = single["status"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|key| template["status"].get(key.as_str()).is_none())
        .cloned()
        .collect();
    assert!(mirrored.contains(&"defaultTTL".to_owned()), "{mirrored:?}");
    for key in mirrored {
        assert_eq!(single["status"][&key], single["spec"][&key], "status.{key}");
        single["status"].as_object_mut().unwrap().remove(&key);
    }
    assert_eq!(&single, template);
    let cased = get(
        &registry,
        "codertemplates",
        NAMESPACE,
        &format!("{}.Docker", coder.organization),
    )
    .await
    .unwrap_err();
    assert_eq!(cased.code, 400, "{cased}");
    assert!(cased.message.contains(&name), "{cased}");

    let version_name = format!("{name}.v1.0.0");
    let versions = list(&registry, "codertemplateversions", Some(NAMESPACE))
        .await
        .unwrap();
    assert_eq!(names(&versions), [version_name.as_str()]);
    let version = &versions[0];
    assert_eq!(version["metadata"]["uid"], t.active_version_id.to_string());
    assert_eq!(
        version["metadata"]["labels"]["aggregation.coder.com/template"],
        "docker"
    );
    assert_eq!(version["spec"]["message"], "first");
    assert_eq!(version["status"]["active"], true);
    assert_eq!(version["status"]["templateID"], t.id.to_string());
    assert_eq!(version["status"]["createdBy"], OPERATOR);
    assert_eq!(version["status"]["job"]["status"], "succeeded");
    assert_eq!(
        &get(&registry, "codertemplateversions", NAMESPACE, &version_name)
            .await
            .unwrap(),
        version
    );
    let wrong_case = get(
        &registry,
        "codertemplateversions",
        NAMESPACE,
        &format!("{name}.V1.0.0"),
    )
    .await
    .unwrap_err();
    assert_eq!((wrong_case.code, wrong_case.reason), (404, "NotFound"));
}

/// A list asks Coder every time; while Coder's templates are unchanged it answers with the objects it built for
/// the last list (shared, not rebuilt), and a change in Coder is in the very next list.
#[tokio::test]
async fn a_template_list_reuses_its_objects_until_coder_answers_differently() {
    let coder = coder("tplmemo").await;
    let registry = static_registry(&coder);
    let storage = registry.resource("codertemplates").unwrap().storage.clone();
    let listed = async || storage.list_shared(&ctx(Some(NAMESPACE))).await.unwrap();
    let first = listed().await;
    let second = listed().await;
    assert_eq!(first.len(), 1);
    assert!(
        Arc::ptr_eq(&first, &second),
        "an unchanged answer shares the last list's objects"
    );
    let copied = storage.list(&ctx(Some(NAMESPACE))).await.unwrap();
    assert_eq!(
        &copied,
        first.as_ref(),
        "a plain list is a copy of the same objects"
    );

    let t = &coder.template;
    let changed = UpdateTemplateMeta {
        display_name: Some("Docker, renamed".into()),
        ..UpdateTemplateMeta::from_template(t)
    };
    let updated = coder
        .client
        .update_template_meta(t.id, &changed)
        .await
        .unwrap()
        .expect("Coder changed the template");
    let third = listed().await;
    assert!(
        !Arc::ptr_eq(&second, &third),
        "a changed answer is converted again"
    );
    assert_eq!(third[0]["spec"]["displayName"], "Docker, renamed");
    let updated_at: k8s_openapi::jiff::Timestamp = updated.updated_at.parse().unwrap();
    assert_eq!(
        third[0]["metadata"]["resourceVersion"],
        updated_at.as_nanosecond().to_string()
    );
    assert_ne!(
        third[0]["metadata"]["resourceVersion"],
        first[0]["metadata"]["resourceVersion"]
    );
    assert!(
        Arc::ptr_eq(&third, &listed().await),
        "the changed answer is the one remembered now"
    );

    // Every namespace at once is the same backend here, so it shares the same objects too.
    let everywhere = storage.list_shared(&ctx(None)).await.unwrap();
    assert!(Arc::ptr_eq(&third, &everywhere));
}

/// A workspace list pages through Coder every time. While every page is the same as last time it answers with the
/// last list's objects; a change on one page of several is in the very next list, with every other workspace.
#[tokio::test]
async fn a_workspace_list_reuses_its_objects_while_coder_sends_the_same_pages() {
    let coder = coder("wsmemo").await;
    let registry = static_registry(&coder);
    let storage = registry.resource("coderworkspaces").unwrap().storage.clone();
    // 150 more than the fixture's one: two pages of Coder's list.
    for i in 0..150 {
        let request = CreateWorkspaceRequest {
            template_id: Some(coder.template.id),
            name: format!("memo-{i}"),
            ..CreateWorkspaceRequest::default()
        };
        coder.client.create_workspace(OPERATOR, &request).await.unwrap();
    }
    let listed = async || storage.list_shared(&ctx(Some(NAMESPACE))).await.unwrap();
    // A build that ends while a list reads its pages can move a workspace onto a page already read (Coder's list
    // has no stable order), so a list may miss one while builds end: wait for a whole one.
    let settled = eventually("every build to end", async || {
        let items = listed().await;
        let ended = items
            .iter()
            .all(|o| o["status"]["latestBuildStatus"] != "starting");
        (ended && items.len() == 151).then_some(items)
    })
    .await;
    assert_eq!(settled.len(), 151);
    coder.server.clear_requests();
    let first = listed().await;
    let second = listed().await;
    assert!(
        Arc::ptr_eq(&first, &second),
        "the same pages share the last list's objects"
    );
    let pages = coder
        .server
        .requests()
        .iter()
        .filter(|r| r.path == "/api/v2/workspaces")
        .count();
    assert_eq!(pages, 4, "each list still reads both pages from Coder");

    // Stop the last workspace: the second page changes, the first does not.
    let last = first.last().unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    coder
        .client
        .create_workspace_build(last, &CreateWorkspaceBuildRequest::transition(Transition::Stop))
        .await
        .unwrap();
    let changed = listed().await;
    assert!(
        !Arc::ptr_eq(&second, &changed),
        "a changed page is converted again"
    );
    assert_eq!(changed.len(), 151);
    assert_eq!(
        names(&changed),
        names(&second),
        "every workspace, in the same order"
    );
    let stopped = changed
        .iter()
        .find(|o| o["metadata"]["uid"] == last.to_string())
        .unwrap();
    assert_eq!(stopped["spec"]["running"], false, "{stopped}");
    assert_eq!(
        &changed[0], &second[0],
        "the unchanged page converts to the same objects"
    );
}

#[tokio::test]
async fn coder_failures_become_status_errors() {
    let coder = coder("err").await;
    let registry = static_registry(&coder);
    coder.server.add_fault(FaultRule {
        method: None,
        path_prefix: "/api/v2/workspaces".to_owned(),
        fault: Fault::RateLimited { retry_after_secs: 3 },
        times: Some(1),
    });
    let limited = list(&registry, "coderworkspaces", Some(NAMESPACE))
        .await
        .unwrap_err();
    assert_eq!((limited.code, limited.retry_after_seconds), (429, Some(3)));

    coder.server.add_fault(FaultRule {
        method: None,
        path_prefix: "/api/v2/organizations".to_owned(),
        fault: Fault::Forbidden,
        times: Some(1),
    });
    let forbidden = list(&registry, "codertemplates", Some(NAMESPACE))
        .await
        .unwrap_err();
    assert_eq!((forbidden.code, forbidden.reason), (403, "Forbidden"));

    coder.server.add_fault(FaultRule {
        method: None,
        path_prefix: "/api/v2/users".to_owned(),
        fault: Fault::Latency(Duration::from_secs(5)),
        times: Some(1),
    });
    let storage = registry.resource("coderworkspaces").unwrap().storage.clone();
    let mut short = ctx(Some(NAMESPACE));
    short.deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    let name = format!("{}.{OPERATOR}.dev", coder.organization);
    let timeout = storage.get(&short, &name).await.unwrap_err();
    assert_eq!((timeout.code, timeout.reason), (504, "Timeout"));
    assert!(!timeout.message.contains("127.0.0.1"), "{timeout}");
}

/// The shared kube-apiserver with the CRDs of this repository installed.
async fn kube_with_crds() -> &'static ControlPlane {
    static INSTALLED: OnceCell<()> = OnceCell::const_new();
    let cp = coder_k8s_testenv::shared().await.unwrap();
    INSTALLED
        .get_or_init(|| async {
            let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/crd/bases");
            for args in [
                vec!["apply", "--server-side", "-f", crds],
                vec![
                    "wait",
                    "--for=condition=Established",
                    "crd",
                    "--all",
                    "--timeout=60s",
                ],
            ] {
                let out = cp.kubectl().args(&args).output().unwrap();
                assert!(
                    out.status.success(),
                    "{args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        })
        .await;
    cp
}

/// Creates a control plane whose Service port is the test server's port, sets its status, and (when `ready`)
/// its operator token Secret.
async fn control_plane(client: &kube::Client, namespace: &str, name: &str, ready: bool, coder: &Coder) {
    let api: Api<CoderControlPlane> = Api::namespaced(client.clone(), namespace);
    let mut object = CoderControlPlane::new(name, Default::default());
    object.spec.service.port = i32::from(coder.server.url().port().unwrap());
    let created = api.create(&PostParams::default(), &object).await.unwrap();
    let status = json!({"status": {
        "url": format!("http://{name}.{namespace}.svc.cluster.local"),
        "operatorAccessReady": ready,
        "operatorTokenSecretRef": {"name": format!("{name}-operator-token"), "key": "token"},
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{name}-operator-token")),
            owner_references: Some(vec![OwnerReference {
                api_version: CoderControlPlane::api_version(&()).into_owned(),
                kind: CoderControlPlane::kind(&()).into_owned(),
                name: name.to_owned(),
                uid: created.uid().unwrap(),
                controller: Some(true),
                ..OwnerReference::default()
            }]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "token".to_owned(),
            ByteString(coder.token.clone().into_bytes()),
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_control_plane_provider_follows_the_eligibility_rules_on_a_real_apiserver() {
    let coder = coder("cp").await;
    let kube = kube_with_crds().await;
    let client = kube.client().unwrap();
    let provider = ControlPlaneProvider::new(client.clone(), Arc::new(ClientCache::new(settings())));
    let registry = registry(Arc::new(ControlPlaneProvider::new(
        client.clone(),
        Arc::new(ClientCache::new(settings())),
    )));

    // No control plane at all: not served, so lists are empty and gets are 404 (a namespace can be deleted).
    let empty = kube.namespace("agg-empty").await.unwrap();
    assert!(provider.resolve(Some(&empty)).await.unwrap().is_empty());
    for plural in [
        "coderworkspaces",
        "codertemplates",
        "codertemplateversions",
        "coderorganizations",
        "codergroups",
        "coderusers",
    ] {
        assert!(
            list(&registry, plural, Some(&empty)).await.unwrap().is_empty(),
            "{plural}"
        );
    }
    let name = format!("{}.docker", coder.organization);
    assert_eq!(
        get(&registry, "codertemplates", &empty, &name)
            .await
            .unwrap_err()
            .code,
        404
    );

    // A control plane that exists but is not ready: 503, for lists too.
    let waiting = kube.namespace("agg-waiting").await.unwrap();
    control_plane(&client, &waiting, "coder", false, &coder).await;
    let error = list(&registry, "codertemplates", Some(&waiting))
        .await
        .unwrap_err();
    assert_eq!((error.code, error.reason), (503, "ServiceUnavailable"));
    assert_eq!(
        error.message,
        format!(
            "no eligible CoderControlPlane instances found in namespace {:?}",
            waiting.name()
        )
    );

    // A dotted name is never eligible.
    let dotted = kube.namespace("agg-dotted").await.unwrap();
    control_plane(&client, &dotted, "co.der", true, &coder).await;
    assert_eq!(provider.resolve(Some(&dotted)).await.unwrap_err().code, 503);

    // One eligible control plane serves its namespace from Coder, through its in-cluster URL.
    let served = kube.namespace("agg-served").await.unwrap();
    control_plane(&client, &served, "coder", true, &coder).await;
    let templates = list(&registry, "codertemplates", Some(&served)).await.unwrap();
    assert_eq!(names(&templates), [name.as_str()]);
    assert_eq!(templates[0]["metadata"]["namespace"], served.name());
    let backends = provider.resolve(None).await.unwrap();
    assert_eq!(
        backends.iter().map(|b| b.namespace.as_str()).collect::<Vec<_>>(),
        [served.name()],
        "all namespaces: one backend per served namespace"
    );

    // Two eligible control planes in one namespace are ambiguous, also for an all-namespaces request.
    let twice = kube.namespace("agg-twice").await.unwrap();
    control_plane(&client, &twice, "coder-a", true, &coder).await;
    control_plane(&client, &twice, "coder-b", true, &coder).await;
    let message = format!(
        "multiple eligible CoderControlPlane instances in namespace {:?}; multi-instance support is planned",
        twice.name()
    );
    let error = list(&registry, "coderworkspaces", Some(&twice))
        .await
        .unwrap_err();
    assert_eq!((error.code, error.message.as_str()), (400, message.as_str()));
    let error = provider.resolve(None).await.unwrap_err();
    assert_eq!((error.code, error.message.as_str()), (400, message.as_str()));

    // The annotation aggregation.coder.com/serve="true" picks one of them: the namespace is served by it.
    let control_planes: Api<CoderControlPlane> = Api::namespaced(client.clone(), &twice);
    let serve = async |name: &str, value: &str| {
        let patch = json!({"metadata": {"annotations": {"aggregation.coder.com/serve": value}}});
        control_planes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    };
    let serving_host = async || -> String {
        let backends = provider.resolve(Some(&twice)).await.unwrap();
        assert_eq!(backends.len(), 1);
        backends[0].client.base_url().host_str().unwrap().to_owned()
    };
    serve("coder-b", "true").await;
    assert!(
        serving_host()
            .await
            .starts_with(&format!("coder-b.{}.", twice.name())),
        "{}",
        serving_host().await
    );
    let templates = list(&registry, "codertemplates", Some(&twice)).await.unwrap();
    assert_eq!(names(&templates), [name.as_str()]);
    // Both selected: ambiguous again, with the v0.1.5 message.
    serve("coder-a", "true").await;
    let error = list(&registry, "coderworkspaces", Some(&twice))
        .await
        .unwrap_err();
    assert_eq!((error.code, error.message.as_str()), (400, message.as_str()));
    // Only "true" selects.
    serve("coder-b", "false").await;
    assert!(
        serving_host()
            .await
            .starts_with(&format!("coder-a.{}.", twice.name())),
        "{}",
        serving_host().await
    );
}
