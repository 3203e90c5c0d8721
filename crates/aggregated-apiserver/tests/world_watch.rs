//! Watches that see changes made in Coder directly: the poll-and-diff feed of `coderworkspaces`, `codertemplates`,
//! `coderorganizations`, `codergroups` and `coderusers` against the Coder API test server (in process through the
//! server's router, and through a real kube-apiserver with kube-rs) and against a real Coder.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;
mod coder_fixture;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use coder_fixture::{Coder, coder, settings};
use coder_k8s_aggregated_apiserver::coder::world_watch::{self, WorldWatchSettings};
use coder_k8s_aggregated_apiserver::coder::{StaticBackend, StaticProvider, registry};
use coder_k8s_aggregated_apiserver::generic::server::ServerSettings;
use coder_k8s_aggregated_apiserver::generic::{
    ApiError, ApiServer, Attributes, Authenticator, Authorizer, Decision, PeerCertificates, Registry,
    UserInfo,
};
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition, WorkspaceBuildStatus};
use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::template_versions::CreateTemplateVersionRequest;
use coder_k8s_coder_client::types::templates::{CreateTemplateRequest, Template};
use coder_k8s_coder_client::types::workspaces::CreateWorkspaceRequest;
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Fault, FaultRule};
use coder_k8s_testenv::coder::{EchoTemplate, RealCoder};
use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ListParams, WatchParams};
use kube::core::{ApiResource, GroupVersionKind, WatchEvent};
use serde_json::Value;
use tower::ServiceExt;

const NAMESPACE: &str = "coder-ns";
const WORKSPACES: &str = "/apis/aggregation.coder.com/v1alpha1/namespaces/coder-ns/coderworkspaces";
const TEMPLATES: &str = "/apis/aggregation.coder.com/v1alpha1/namespaces/coder-ns/codertemplates";
const ALL_WORKSPACES: &str = "/apis/aggregation.coder.com/v1alpha1/coderworkspaces";

/// Everyone is alice, and alice may do anything.
struct Alice;

#[async_trait]
impl Authenticator for Alice {
    async fn authenticate(
        &self,
        _peer: Option<&PeerCertificates>,
        _headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, ApiError> {
        Ok(Some(UserInfo {
            name: "alice".into(),
            ..UserInfo::default()
        }))
    }
}

#[async_trait]
impl Authorizer for Alice {
    async fn authorize(&self, _attributes: &Attributes) -> Result<Decision, ApiError> {
        Ok(Decision::Allow)
    }
}

/// The Coder registry of the test server in standalone mode, with feeds polling every `interval` (a steady pace:
/// the tests of what a poll reports do not wait for the cadence).
fn watched_registry(coder: &Coder, interval: Duration) -> Registry {
    watched_registry_with(coder, paced(interval, interval, UNLIMITED))
}

/// A budget no test poll comes near.
const UNLIMITED: u32 = 100_000;

/// Feed settings: `fastest` after a change, doubling up to `slowest`, at most `calls_per_minute`.
fn paced(fastest: Duration, slowest: Duration, calls_per_minute: u32) -> WorldWatchSettings {
    WorldWatchSettings {
        interval: fastest,
        max_interval: slowest,
        calls_per_minute,
        ..WorldWatchSettings::default()
    }
}

fn watched_registry_with(coder: &Coder, feed: WorldWatchSettings) -> Registry {
    let backend = StaticBackend {
        url: coder.server.url(),
        token: coder.token.clone(),
        namespace: NAMESPACE.to_owned(),
    };
    let provider = Arc::new(StaticProvider::new(&backend, &settings()).unwrap());
    let mut registry = registry(provider.clone());
    world_watch::attach(&mut registry, provider, feed);
    registry
}

fn router(registry: Registry) -> axum::Router {
    ApiServer {
        registry: Arc::new(registry),
        authenticator: Arc::new(Alice),
        authorizer: Arc::new(Alice),
        ready: Arc::new(AtomicBool::new(true)),
        settings: ServerSettings::default(),
    }
    .router()
}

async fn get(router: &axum::Router, path: &str) -> (StatusCode, Value) {
    let request = Request::get(path).body(Body::empty()).unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// The resourceVersion of a list of `path`.
async fn list_version(router: &axum::Router, path: &str) -> String {
    let (status, list) = get(router, path).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["metadata"]["resourceVersion"].as_str().unwrap().to_owned()
}

/// An open watch: its events, one JSON value each.
struct Watch {
    lines: std::pin::Pin<Box<dyn Stream<Item = Value> + Send>>,
}

impl Watch {
    async fn open(router: &axum::Router, path: &str, resource_version: &str) -> Watch {
        let uri = format!("{path}?watch=true&resourceVersion={resource_version}&timeoutSeconds=120");
        let request = Request::get(uri).body(Body::empty()).unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let bytes = response
            .into_body()
            .into_data_stream()
            .map_err(std::io::Error::other);
        let reader = json_lines(bytes);
        Watch {
            lines: Box::pin(reader),
        }
    }

    /// The next event, within 20 s.
    async fn next(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(20), self.lines.next())
            .await
            .expect("an event within 20 s")
            .expect("the watch is still open")
    }

    /// The next event of `name`, skipping others (another object's events may come first).
    async fn next_of(&mut self, name: &str) -> Value {
        loop {
            let event = self.next().await;
            if event["object"]["metadata"]["name"] == name || event["type"] == "ERROR" {
                return event;
            }
        }
    }
}

/// Splits a byte stream into JSON lines.
fn json_lines(
    bytes: impl Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static,
) -> impl Stream<Item = Value> + Send {
    futures::stream::unfold(
        (Box::pin(bytes), Vec::<u8>::new()),
        |(mut bytes, mut buffer)| async move {
            loop {
                if let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=end).collect();
                    let value = serde_json::from_slice(&line).expect("one JSON event per line");
                    return Some((value, (bytes, buffer)));
                }
                match bytes.next().await {
                    Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
                    _ => return None,
                }
            }
        },
    )
}

fn summary(event: &Value) -> (String, String) {
    (
        event["type"].as_str().unwrap_or_default().to_owned(),
        event["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[tokio::test]
async fn changes_made_in_coder_directly_reach_a_watch_as_the_right_events() {
    let coder = coder("feed").await;
    let router = router(watched_registry(&coder, Duration::from_millis(300)));
    let from = list_version(&router, WORKSPACES).await;
    let mut watch = Watch::open(&router, WORKSPACES, &from).await;
    let from_all = list_version(&router, ALL_WORKSPACES).await;
    let mut across_namespaces = Watch::open(&router, ALL_WORKSPACES, &from_all).await;

    // Created in Coder, not through the server.
    let web = coder.create_workspace("web").await;
    let name = coder.workspace_name("web");
    let added_everywhere = across_namespaces.next_of(&name).await;
    assert_eq!(summary(&added_everywhere), ("ADDED".to_owned(), name.clone()));
    assert_eq!(added_everywhere["object"]["metadata"]["namespace"], NAMESPACE);
    let added = watch.next_of(&name).await;
    assert_eq!(summary(&added), ("ADDED".to_owned(), name.clone()), "{added}");
    assert_eq!(added["object"]["metadata"]["uid"], web.id.to_string());
    assert_eq!(added["object"]["spec"]["running"], true);
    let added_version = added["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();

    // Deleted in Coder: the delete build shows as a change, then the workspace is gone.
    coder.delete_workspace(&web).await;
    let mut seen = Vec::new();
    let deleted = loop {
        let event = watch.next_of(&name).await;
        seen.push(summary(&event).0);
        if event["type"] != "MODIFIED" {
            break event;
        }
    };
    assert_eq!(
        summary(&deleted),
        ("DELETED".to_owned(), name.clone()),
        "{seen:?}"
    );
    let deleted_version = deleted["object"]["metadata"]["resourceVersion"].as_str().unwrap();
    assert_ne!(
        deleted_version, added_version,
        "a deletion has a resourceVersion of its own"
    );

    // A watch that resumes from the ADDED object's resourceVersion gets what followed, ending with the deletion.
    let mut resumed = Watch::open(&router, WORKSPACES, &added_version).await;
    let mut replayed = Vec::new();
    loop {
        let event = resumed.next_of(&name).await;
        replayed.push(summary(&event).0);
        if event["type"] != "MODIFIED" {
            assert_eq!(event["type"], "DELETED", "{replayed:?}");
            break;
        }
    }
    assert_eq!(replayed, seen, "the same events, replayed");

    // A template changed in Coder's UI.
    let from = list_version(&router, TEMPLATES).await;
    let mut templates = Watch::open(&router, TEMPLATES, &from).await;
    coder.rename_template("Docker, renamed").await;
    let template = format!("{}.docker", coder.organization);
    let modified = templates.next_of(&template).await;
    assert_eq!(
        summary(&modified),
        ("MODIFIED".to_owned(), template),
        "{modified}"
    );
    assert_eq!(modified["object"]["spec"]["displayName"], "Docker, renamed");

    // A resourceVersion the server cannot place: 410 Expired, so the client relists.
    let mut unknown = Watch::open(&router, WORKSPACES, "not-a-version-of-this-server").await;
    let error = unknown.next().await;
    assert_eq!(error["type"], "ERROR", "{error}");
    assert_eq!(
        (&error["object"]["code"], &error["object"]["reason"]),
        (&Value::from(410), &Value::from("Expired")),
        "{error}"
    );
}

/// Requests to the workspace list of the test server.
fn workspace_polls(coder: &Coder) -> usize {
    coder
        .server
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == "/api/v2/workspaces")
        .count()
}

#[tokio::test]
async fn watchers_share_one_poll_that_stops_when_the_last_one_leaves() {
    let coder = coder("share").await;
    let interval = Duration::from_millis(500);
    let router = router(watched_registry(&coder, interval));
    let from = list_version(&router, WORKSPACES).await;
    let first = Watch::open(&router, WORKSPACES, &from).await;
    let second = Watch::open(&router, WORKSPACES, &from).await;

    // Ten intervals with two watchers: one poller, so about ten polls (two pollers would make about twenty).
    coder.server.clear_requests();
    let window = interval * 10;
    tokio::time::sleep(window).await;
    let polls = workspace_polls(&coder);
    let all = coder.server.requests();
    assert!((8..=11).contains(&polls), "{polls} polls in {window:?}: {all:?}");
    assert_eq!(all.len(), polls, "a poll is one list call: {all:?}");

    // The last watcher leaves: the poll stops. Nothing at all reaches Coder over four intervals.
    drop(first);
    tokio::time::sleep(Duration::from_millis(100)).await;
    coder.server.clear_requests();
    tokio::time::sleep(interval * 4).await;
    let polls = workspace_polls(&coder);
    assert!(
        (3..=5).contains(&polls),
        "still polling for the other watcher: {polls}"
    );
    drop(second);
    tokio::time::sleep(Duration::from_millis(100)).await;
    coder.server.clear_requests();
    tokio::time::sleep(interval * 4).await;
    assert!(
        coder.server.requests().is_empty(),
        "{:?}",
        coder.server.requests()
    );
}

/// The number of workspace polls in `window`.
async fn polls_within(coder: &Coder, window: Duration) -> usize {
    let before = workspace_polls(coder);
    tokio::time::sleep(window).await;
    workspace_polls(coder) - before
}

#[tokio::test]
async fn a_quiet_feed_polls_ever_more_slowly_and_a_change_brings_the_fast_pace_back() {
    let coder = coder("cadence").await;
    let (fastest, slowest) = (Duration::from_millis(200), Duration::from_millis(1600));
    let settings = paced(fastest, slowest, UNLIMITED);
    let router = router(watched_registry_with(&coder, settings));
    let from = list_version(&router, WORKSPACES).await;
    let mut watch = Watch::open(&router, WORKSPACES, &from).await;

    // Quiet: waits of 0.2, 0.4, 0.8, 1.6, 1.6, ... s, so polls at 0.2 and 0.6 s in the first second (a steady
    // fastest pace would make 5, a jump to the slowest wait 1) and 5 in the first 6 s (a steady pace: 30).
    let first_second = polls_within(&coder, Duration::from_secs(1)).await;
    assert_eq!(first_second, 2, "polls in the first second");
    let ramp = first_second + polls_within(&coder, Duration::from_secs(5)).await;
    assert!((4..=6).contains(&ramp), "{ramp} polls while slowing down");
    // At the bound: one poll per 1.6 s.
    let at_rest = polls_within(&coder, slowest * 4).await;
    assert!(
        (3..=5).contains(&at_rest),
        "{at_rest} polls in four slowest waits"
    );

    // A change made in Coder directly is seen within the slowest wait, and the next polls come fast again.
    coder.create_workspace("web").await;
    let name = coder.workspace_name("web");
    let seen = std::time::Instant::now();
    assert_eq!(summary(&watch.next_of(&name).await).0, "ADDED");
    assert!(seen.elapsed() < slowest * 2, "seen after {:?}", seen.elapsed());
    let after_change = polls_within(&coder, Duration::from_millis(1500)).await;
    assert!(
        after_change >= 2,
        "{after_change} polls in 1.5 s after a change (the slowest pace makes one)"
    );
}

#[tokio::test]
async fn a_write_through_the_server_brings_the_next_poll_forward() {
    let coder = coder("written").await;
    coder.create_workspace("web").await;
    let name = coder.workspace_name("web");
    let settings = paced(Duration::from_millis(100), Duration::from_secs(5), UNLIMITED);
    let router = router(watched_registry_with(&coder, settings));
    let from = list_version(&router, WORKSPACES).await;
    let _watch = Watch::open(&router, WORKSPACES, &from).await;
    // Quiet for 7 s: the waits have grown to 5 s (polls at about 0.1, 0.3, 0.7, 1.5, 3.1 and 6.3 s), so without a
    // write the next poll comes at about 11.3 s.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let before = workspace_polls(&coder);
    let request = Request::post(format!("{WORKSPACES}/{name}/stop"))
        .header("content-type", "application/json")
        .body(Body::empty())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after_write = workspace_polls(&coder) - before;
    assert!(after_write >= 1, "no poll in the second after a write");
}

#[tokio::test]
async fn an_expensive_poll_is_spaced_by_the_budget() {
    let coder = coder("budget").await;
    // A template poll is two requests (the organizations, then the one organization's templates); the template
    // poller's share of 150 a minute is 60, so the polls are 2 s apart even right after a change, however short the
    // fastest wait. A steady 100 ms pace: without the budget, about 60 polls (120 requests) in the window.
    let settings = paced(Duration::from_millis(100), Duration::from_millis(100), 150);
    let router = router(watched_registry_with(&coder, settings));
    let from = list_version(&router, TEMPLATES).await;
    let _watch = Watch::open(&router, TEMPLATES, &from).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    coder.server.clear_requests();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let requests = coder.server.requests();
    assert!(
        (4..=8).contains(&requests.len()),
        "{} requests in 6 s at 60 a minute: {requests:?}",
        requests.len()
    );
}

#[tokio::test]
async fn a_failing_coder_publishes_nothing_and_the_next_good_poll_catches_up() {
    let coder = coder("outage").await;
    let interval = Duration::from_millis(300);
    let router = router(watched_registry(&coder, interval));
    let from = list_version(&router, WORKSPACES).await;
    let mut watch = Watch::open(&router, WORKSPACES, &from).await;

    // Five polls fail (503), over about five intervals: no event, in particular no deletion of "dev".
    coder.server.clear_requests();
    coder.server.add_fault(FaultRule {
        method: None,
        path_prefix: "/api/v2/workspaces".to_owned(),
        fault: Fault::ServerError(503),
        times: Some(5),
    });
    coder_fixture::eventually("five failed polls", async || {
        let failed = coder.server.requests().iter().filter(|r| r.status == 503).count();
        (failed >= 5).then_some(())
    })
    .await;
    let quiet = tokio::time::timeout(interval * 3, watch.lines.next()).await;
    assert!(quiet.is_err(), "no event during the outage: {quiet:?}");

    // Coder answers again: the first event is the change made meanwhile, not a deletion.
    coder.create_workspace("late").await;
    let first = watch.next().await;
    assert_eq!(
        summary(&first),
        ("ADDED".to_owned(), coder.workspace_name("late")),
        "{first}"
    );
}

fn workspace_api(client: kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("aggregation.coder.com", "v1alpha1", "CoderWorkspace");
    Api::namespaced_with(
        client,
        NAMESPACE,
        &ApiResource::from_gvk_with_plural(&gvk, "coderworkspaces"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_through_kube_apiserver_sees_a_workspace_created_in_coder() {
    let coder = coder("kube").await;
    let cp: &'static coder_k8s_testenv::ControlPlane = Box::leak(Box::new(
        coder_k8s_testenv::ControlPlane::builder().start().await.unwrap(),
    ));
    let client = cp.client().unwrap();
    cluster::create_namespace(&client, cluster::SERVER_NAMESPACE).await;
    cluster::create_namespace(&client, NAMESPACE).await;
    let (addr, _) = cluster::spawn_server(cp, watched_registry(&coder, Duration::from_millis(300)));
    cluster::register(&client, addr.port()).await;
    let api = workspace_api(client);
    let mut answered = None;
    for _ in 0..120 {
        if let Ok(list) = api.list(&ListParams::default()).await {
            answered = Some(list);
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let list = answered.expect("the aggregated API answers through kube-apiserver within 60 s");
    assert_eq!(list.items.len(), 1, "the dev workspace");
    let version = list.metadata.resource_version.unwrap();
    let mut events = api
        .watch(&WatchParams::default().timeout(60), &version)
        .await
        .unwrap()
        .boxed();

    coder.create_workspace("kubewatch").await;
    let name = coder.workspace_name("kubewatch");
    let added = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match events.try_next().await.unwrap() {
                Some(WatchEvent::Added(object)) if object.metadata.name.as_deref() == Some(&name) => {
                    return object;
                }
                Some(WatchEvent::Error(error)) => panic!("watch error: {error:?}"),
                Some(_) => {}
                None => panic!("the watch ended before the workspace was seen"),
            }
        }
    })
    .await
    .expect("the ADDED event within 30 s");
    assert_eq!(added.data["spec"]["running"], true);
}

/// Imports an echo template named `name` into the real Coder's default organization.
async fn real_template(coder: &RealCoder, client: &CoderClient, organization: &str, name: &str) -> Template {
    let tar = coder.echo_template(EchoTemplate::Success).unwrap();
    let file = client
        .upload_file(ArchiveKind::Tar, bytes::Bytes::from(tar))
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    let version = client
        .create_template_version(organization, &request)
        .await
        .unwrap();
    coder_fixture::eventually("the template import", async || {
        let job = client.template_version(version.id).await.unwrap().job;
        job.status.is_terminal().then_some(())
    })
    .await;
    let request = CreateTemplateRequest {
        name: name.to_owned(),
        template_version_id: version.id,
        ..CreateTemplateRequest::default()
    };
    client.create_template(organization, &request).await.unwrap()
}

#[tokio::test]
async fn a_watch_sees_changes_made_in_a_real_coder() {
    coder_k8s_coder_client::install_ring_provider();
    let coder = RealCoder::shared().await.unwrap();
    let url = url::Url::parse(coder.url()).unwrap();
    let client = CoderClient::new(url.clone(), SessionToken::new(coder.owner_token())).unwrap();
    let organization = client.default_organization().await.unwrap().name;
    let owner = client.me().await.unwrap().username;
    let template = real_template(coder, &client, &organization, "watched").await;
    let backend = StaticBackend {
        url,
        token: coder.owner_token().to_owned(),
        namespace: NAMESPACE.to_owned(),
    };
    let provider = Arc::new(StaticProvider::new(&backend, &settings()).unwrap());
    let mut registry = registry(provider.clone());
    // One second: both resources polled stay far below Coder's rate limit.
    let settings = WorldWatchSettings {
        interval: Duration::from_secs(1),
        max_interval: Duration::from_secs(1),
        ..WorldWatchSettings::default()
    };
    world_watch::attach(&mut registry, provider, settings);
    let router = router(registry);

    // A template renamed in Coder.
    let from = list_version(&router, TEMPLATES).await;
    let mut templates = Watch::open(&router, TEMPLATES, &from).await;
    let renamed = coder
        .send_json(
            "PATCH",
            &format!("/api/v2/templates/{}", template.id),
            &serde_json::json!({"display_name": "Watched, renamed"}),
        )
        .await
        .unwrap();
    assert!(renamed.status < 300, "{}", renamed.text());
    let name = format!("{organization}.watched");
    let modified = templates.next_of(&name).await;
    assert_eq!(summary(&modified), ("MODIFIED".to_owned(), name), "{modified}");
    assert_eq!(modified["object"]["spec"]["displayName"], "Watched, renamed");

    // A workspace created and deleted in Coder.
    let from = list_version(&router, WORKSPACES).await;
    let mut workspaces = Watch::open(&router, WORKSPACES, &from).await;
    let created = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: "watched".to_owned(),
                ..CreateWorkspaceRequest::default()
            },
        )
        .await
        .unwrap();
    let name = format!("{organization}.{owner}.watched");
    let added = workspaces.next_of(&name).await;
    assert_eq!(summary(&added), ("ADDED".to_owned(), name.clone()), "{added}");
    assert_eq!(added["object"]["metadata"]["uid"], created.id.to_string());
    coder_fixture::eventually("the first build", async || {
        let build = client.workspace(created.id).await.unwrap().latest_build;
        (build.status == WorkspaceBuildStatus::Running).then_some(())
    })
    .await;
    client
        .create_workspace_build(
            created.id,
            &CreateWorkspaceBuildRequest {
                transition: Transition::Delete,
                ..CreateWorkspaceBuildRequest::default()
            },
        )
        .await
        .unwrap();
    let deleted = loop {
        let event = workspaces.next_of(&name).await;
        if event["type"] != "MODIFIED" {
            break event;
        }
    };
    assert_eq!(summary(&deleted), ("DELETED".to_owned(), name), "{deleted}");
}

#[tokio::test]
async fn watches_of_organizations_groups_and_users_see_changes_made_in_coder() {
    let coder = coder("people-watch").await;
    // Groups are a Premium feature: the test server lists them only when Template RBAC is entitled.
    coder
        .server
        .set_entitlement("template_rbac", coder_k8s_coder_testserver::Entitlement::Entitled);
    let router = router(watched_registry(&coder, Duration::from_millis(300)));
    let path = |plural: &str| format!("/apis/aggregation.coder.com/v1alpha1/namespaces/{NAMESPACE}/{plural}");
    let (organizations, groups, users) = (
        path("coderorganizations"),
        path("codergroups"),
        path("coderusers"),
    );
    let mut organization_watch = Watch::open(
        &router,
        &organizations,
        &list_version(&router, &organizations).await,
    )
    .await;
    let mut group_watch = Watch::open(&router, &groups, &list_version(&router, &groups).await).await;
    let mut user_watch = Watch::open(&router, &users, &list_version(&router, &users).await).await;

    let id = coder.server.add_organization("watched").await.unwrap();
    let added = organization_watch.next_of("watched").await;
    assert_eq!(
        summary(&added),
        ("ADDED".to_owned(), "watched".to_owned()),
        "{added}"
    );
    coder.server.add_group(id, "ops");
    let added = group_watch.next_of("watched.ops").await;
    assert_eq!(
        summary(&added),
        ("ADDED".to_owned(), "watched.ops".to_owned()),
        "{added}"
    );

    coder.server.mint_token("carol", &[]).await.unwrap();
    let added = user_watch.next_of("carol").await;
    assert_eq!(
        summary(&added),
        ("ADDED".to_owned(), "carol".to_owned()),
        "{added}"
    );
    assert_eq!(added["object"]["spec"]["roles"], serde_json::json!([]), "{added}");
    coder
        .server
        .mint_token("carol", &["template-admin"])
        .await
        .unwrap();
    let modified = user_watch.next_of("carol").await;
    assert_eq!(
        summary(&modified),
        ("MODIFIED".to_owned(), "carol".to_owned()),
        "{modified}"
    );
    assert_eq!(
        modified["object"]["spec"]["roles"],
        serde_json::json!(["template-admin"]),
        "{modified}"
    );

    coder.server.delete_organization(id).await.unwrap();
    let deleted = organization_watch.next_of("watched").await;
    assert_eq!(
        summary(&deleted),
        ("DELETED".to_owned(), "watched".to_owned()),
        "{deleted}"
    );
    let deleted = group_watch.next_of("watched.ops").await;
    assert_eq!(
        summary(&deleted),
        ("DELETED".to_owned(), "watched.ops".to_owned()),
        "{deleted}"
    );
}

#[tokio::test]
async fn watches_of_users_and_groups_see_a_user_made_and_suspended_in_a_real_coder() {
    coder_k8s_coder_client::install_ring_provider();
    let coder = RealCoder::shared().await.unwrap();
    let url = url::Url::parse(coder.url()).unwrap();
    let client = CoderClient::new(url.clone(), SessionToken::new(coder.owner_token())).unwrap();
    let organization = client.default_organization().await.unwrap();
    let backend = StaticBackend {
        url,
        token: coder.owner_token().to_owned(),
        namespace: NAMESPACE.to_owned(),
    };
    let provider = Arc::new(StaticProvider::new(&backend, &settings()).unwrap());
    let mut registry = registry(provider.clone());
    // A user poll is three requests (users, organizations, members): at the default budget (7 a minute for users)
    // the polls would be 26 s apart. 600 a minute gives users and groups 42 each: a poll every 3 to 5 s.
    let settings = WorldWatchSettings {
        interval: Duration::from_secs(1),
        max_interval: Duration::from_secs(1),
        calls_per_minute: 600,
        ..WorldWatchSettings::default()
    };
    world_watch::attach(&mut registry, provider, settings);
    let router = router(registry);
    let path = |plural: &str| format!("/apis/aggregation.coder.com/v1alpha1/namespaces/{NAMESPACE}/{plural}");
    let (users_path, groups_path) = (path("coderusers"), path("codergroups"));
    let mut users = Watch::open(&router, &users_path, &list_version(&router, &users_path).await).await;
    let mut groups = Watch::open(&router, &groups_path, &list_version(&router, &groups_path).await).await;

    // A user made in Coder (signing in nowhere), a member of the default organization.
    let username = format!("watched-{}", std::process::id() % 100_000);
    let body = serde_json::json!({
        "email": format!("{username}@example.com"), "username": username, "login_type": "none",
        "organization_ids": [organization.id],
    });
    let created = coder.send_json("POST", "/api/v2/users", &body).await.unwrap();
    assert_eq!(created.status, 201, "{}", created.text());
    let added = users.next_of(&username).await;
    assert_eq!(summary(&added), ("ADDED".to_owned(), username.clone()), "{added}");
    assert_eq!(added["object"]["spec"]["suspended"], false);
    let everyone = format!("{}.Everyone", organization.name);
    let joined = groups.next_of(&everyone).await;
    assert_eq!(summary(&joined), ("MODIFIED".to_owned(), everyone), "{joined}");
    let members = joined["object"]["spec"]["members"].as_array().unwrap();
    assert!(members.contains(&serde_json::json!(username)), "{joined}");

    // Suspended in Coder.
    let id = created.json().unwrap()["id"].as_str().unwrap().to_owned();
    client.set_user_suspended(&id, true).await.unwrap();
    let modified = users.next_of(&username).await;
    assert_eq!(
        summary(&modified),
        ("MODIFIED".to_owned(), username),
        "{modified}"
    );
    assert_eq!(modified["object"]["spec"]["suspended"], true, "{modified}");
}
