//! The CoderMCPServer controller on the real kube-apiserver, PostgreSQL and the Coder API test server: the create,
//! patches only on a difference, the opt-in, the kill switches, `DisabledExternally`, access groups, the delete
//! (only Coder's own 404 is gone), the ownership proof of IDs in status, the status admission policy and the GitOps
//! health rules. Checks of "no call" and "no write" read Coder's whole request log.

use std::time::Duration;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::mcp_server::{CoderMCPServer, CoderMCPServerStatus, MCPServerPhase};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::ai::{McpServerConfigRequest, UpdateMcpServerAclRequest};
use coder_k8s_coder_testserver::{Fault, FaultRule, RecordedRequest};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::control_plane::{Harness, harness};
use crate::provisioner::ready_control_plane;
use crate::support::wait_for;
use crate::support::{argocd_health, assert_success, flux_health, kubectl, path};

const CP: &str = "codercontrolplane-sample";
const URL: &str = "https://mcp.example.com/mcp";

/// A ready control plane; `operator` is the operator's token, `coder` a client of a second site owner (so the
/// operator's own requests can be told apart in the log).
pub(crate) struct Setup {
    pub(crate) operator: String,
    pub(crate) coder: CoderClient,
    pub(crate) organization: String,
    pub(crate) organization_id: uuid::Uuid,
}

pub(crate) async fn setup(h: &Harness, allow: bool) -> Setup {
    let operator = ready_control_plane(h).await;
    // Access by group needs Coder's groups, a Premium feature (Template RBAC).
    h.server
        .set_entitlement("template_rbac", coder_k8s_coder_testserver::Entitlement::Entitled);
    let admin = h.server.mint_token("admin", &["owner"]).await.unwrap();
    let coder = h.coder(&admin);
    let organization = coder.default_organization().await.unwrap();
    if allow {
        allow_organizations(h, json!([organization.name])).await;
    }
    Setup {
        operator,
        coder,
        organization: organization.name,
        organization_id: organization.id,
    }
}

pub(crate) async fn allow_organizations(h: &Harness, organizations: Value) {
    h.api::<CoderControlPlane>()
        .patch(
            CP,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"mcpServers": {"organizations": organizations}}})),
        )
        .await
        .unwrap();
}

pub(crate) fn spec(organization: &str) -> Value {
    json!({"controlPlaneRef": {"name": CP}, "organization": organization, "url": URL})
}

pub(crate) async fn create_server(h: &Harness, name: &str, spec: Value) -> CoderMCPServer {
    let object = CoderMCPServer::new(name, serde_json::from_value(spec).unwrap());
    h.api::<CoderMCPServer>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

pub(crate) async fn patch_spec(h: &Harness, name: &str, spec: Value) {
    h.api::<CoderMCPServer>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": spec})),
        )
        .await
        .unwrap();
}

async fn status_of(h: &Harness, name: &str) -> CoderMCPServerStatus {
    h.api::<CoderMCPServer>()
        .get(name)
        .await
        .unwrap()
        .status
        .unwrap_or_default()
}

/// Waits until the `Ready` condition's reason is `reason` for the object's current generation (up to 60 s).
pub(crate) async fn wait_reason(h: &Harness, name: &str, reason: &str) -> CoderMCPServerStatus {
    crate::support::wait_ready_reason::<CoderMCPServer, CoderMCPServerStatus>(&h.api(), name, reason).await
}

/// The config in the test server with `slug`.
pub(crate) fn config(h: &Harness, slug: &str) -> Option<Value> {
    h.server.mcp_servers().into_iter().find(|c| c["slug"] == slug)
}

pub(crate) async fn wait_config(
    h: &Harness,
    slug: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    for _ in 0..300 {
        if let Some(config) = config(h, slug).filter(|c| check(c)) {
            return config;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what}: last config {:?}", config(h, slug));
}

/// The requests the operator sent (by its token).
fn operator_requests(h: &Harness, operator: &str) -> Vec<RecordedRequest> {
    h.server
        .requests()
        .into_iter()
        .filter(|r| r.session_token.as_deref() == Some(operator))
        .collect()
}

fn writes(requests: &[RecordedRequest]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

fn touches_mcp(request: &RecordedRequest, organization: &str) -> bool {
    request.path.contains("/mcp-servers")
        || request.path.ends_with("/groups")
        || request.path == format!("/api/v2/organizations/{organization}")
}

async fn wait_gone(h: &Harness, name: &str) {
    let api = h.api::<CoderMCPServer>();
    wait_for(
        || async { api.get_opt(name).await.unwrap().is_none() },
        "the object to go",
    )
    .await;
}

async fn delete_object(h: &Harness, name: &str) {
    h.api::<CoderMCPServer>()
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

/// Someone disables config `id` in the Coder dashboard (as the second site owner).
async fn disable_in_dashboard(s: &Setup, id: uuid::Uuid) {
    let disable = McpServerConfigRequest {
        enabled: Some(false),
        ..McpServerConfigRequest::default()
    };
    s.coder
        .patch_mcp_server_config(&s.organization, id, &disable)
        .await
        .unwrap();
}

/// Waits longer than the requeue interval (1 s in tests) several times over.
async fn at_rest() {
    tokio::time::sleep(Duration::from_secs(4)).await;
}

#[tokio::test]
async fn a_server_is_created_once_patched_once_per_spec_edit_and_left_alone_at_rest() {
    let h = harness("mcp-create").await;
    let s = setup(&h, true).await;
    let mut spec = spec(&s.organization);
    spec["displayName"] = json!("Deep Wiki");
    spec["description"] = json!("Docs");
    spec["availability"] = json!("force_on");
    spec["toolDenyList"] = json!(["delete_everything"]);
    spec["allowInPlanMode"] = json!(true);
    let object = create_server(&h, "deepwiki", spec).await;
    let status = wait_reason(&h, "deepwiki", "Synced").await;
    assert_eq!(status.phase, Some(MCPServerPhase::Ready));
    let created = config(&h, "deepwiki").unwrap();
    assert_eq!(created["display_name"], "Deep Wiki");
    assert_eq!(created["url"], URL);
    assert_eq!(created["availability"], "force_on");
    assert_eq!(created["tool_deny_list"], json!(["delete_everything"]));
    assert_eq!(created["allow_in_plan_mode"], true);
    assert_eq!(created["forward_coder_headers"], false);
    assert_eq!(created["enabled"], true);
    assert_eq!(status.server_id.as_deref(), created["id"].as_str());
    assert_eq!(status.organization_id, Some(s.organization_id.to_string()));
    assert!(status.create_marker.is_some());
    let posts = operator_requests(&h, &s.operator)
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/mcp-servers"))
        .count();
    assert_eq!(posts, 1);
    // The Event follows the status write (the operator publishes it after the status is stored): wait for it.
    let uid = object.metadata.uid.clone().unwrap();
    let events = h.api::<k8s_openapi::api::events::v1::Event>();
    wait_for(
        async || {
            let events = events.list(&Default::default()).await.unwrap();
            events.items.iter().any(|e| {
                e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid.as_str())
                    && e.reason.as_deref() == Some("Synced")
            })
        },
        "an Event for the phase change to Ready",
    )
    .await;

    // At rest: reads only, over several requeue intervals.
    h.server.clear_requests();
    at_rest().await;
    let rest = operator_requests(&h, &s.operator);
    assert!(
        rest.iter().any(|r| r.path.ends_with("/mcp-servers")),
        "the controller kept looking: {rest:?}"
    );
    assert_eq!(writes(&rest), Vec::<String>::new());

    // A spec edit: exactly one PATCH.
    patch_spec(&h, "deepwiki", json!({"description": "Internal docs"})).await;
    wait_reason(&h, "deepwiki", "Synced").await;
    wait_config(&h, "deepwiki", "the new description", |c| {
        c["description"] == "Internal docs"
    })
    .await;
    at_rest().await;
    let id = created["id"].as_str().unwrap();
    assert_eq!(
        writes(&operator_requests(&h, &s.operator)),
        vec![format!(
            "PATCH /api/v2/organizations/{}/mcp-servers/{id}",
            s.organization_id
        )]
    );
}

#[tokio::test]
async fn settled_servers_share_one_poll_and_cost_no_pass_of_their_own_at_rest() {
    let h = harness("mcp-poll").await;
    let s = setup(&h, true).await;
    let names = ["one", "two", "three"];
    for name in names {
        create_server(&h, name, spec(&s.organization)).await;
    }
    for name in names {
        wait_reason(&h, name, "Synced").await;
    }
    // Each object's first poll reconciles it once; from then on only the poll reads Coder.
    at_rest().await;
    h.server.clear_requests();
    at_rest().await;
    let organization_id = s.organization_id.to_string();
    let touched: Vec<String> = operator_requests(&h, &s.operator)
        .into_iter()
        .filter(|r| touches_mcp(r, &s.organization) || touches_mcp(r, &organization_id))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    let list = format!("GET /api/v2/organizations/{}/mcp-servers", s.organization);
    let lists = touched.iter().filter(|r| **r == list).count();
    // 4 s at the tests' 1 s interval: about four polls, one list each for the three objects together (a pass
    // per object read the organization, the list and the access list each time).
    assert!((2..=6).contains(&lists), "{touched:?}");
    let others: Vec<&String> = touched.iter().filter(|r| **r != list).collect();
    assert_eq!(others, Vec::<&String>::new(), "no pass of their own");
    // A disable in the dashboard is still found, by the shared poll.
    let id = config(&h, "two").unwrap()["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    disable_in_dashboard(&s, id).await;
    wait_reason(&h, "two", "DisabledExternally").await;
    wait_reason(&h, "one", "Synced").await;
}

#[tokio::test]
async fn without_the_opt_in_the_object_stalls_and_makes_no_coder_call() {
    let h = harness("mcp-notallowed").await;
    let s = setup(&h, false).await;
    create_server(&h, "tools", spec(&s.organization)).await;
    let status = wait_reason(&h, "tools", "MCPServersNotAllowed").await;
    assert_eq!(status.phase, Some(MCPServerPhase::Stalled));
    at_rest().await;
    let touched: Vec<_> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| touches_mcp(r, &s.organization) || touches_mcp(r, &s.organization_id.to_string()))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(touched, Vec::<String>::new());
    assert!(status.create_marker.is_none() && status.server_id.is_none());
    // Deleting it makes no call either.
    delete_object(&h, "tools").await;
    wait_gone(&h, "tools").await;
    assert!(
        h.server
            .requests()
            .iter()
            .all(|r| !r.path.contains("/mcp-servers"))
    );
}

#[tokio::test]
async fn a_withdrawn_opt_in_disables_the_server_and_a_renewed_one_enables_it() {
    let h = harness("mcp-optout").await;
    let s = setup(&h, true).await;
    create_server(&h, "tools", spec(&s.organization)).await;
    wait_reason(&h, "tools", "Synced").await;
    allow_organizations(&h, json!([])).await;
    wait_reason(&h, "tools", "MCPServersNotAllowed").await;
    wait_config(&h, "tools", "the kill switch", |c| c["enabled"] == false).await;
    allow_organizations(&h, json!([s.organization])).await;
    wait_reason(&h, "tools", "Synced").await;
    wait_config(&h, "tools", "enabled again", |c| c["enabled"] == true).await;
}

pub(crate) async fn credential_secret(h: &Harness, destinations: Option<&str>) {
    let mut secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "mcp-key", "labels": {"coder.com/credential": "true"}},
        "stringData": {"api-key": "Bearer not-a-real-key"},
    }))
    .unwrap();
    if let Some(destinations) = destinations {
        secret.metadata.annotations = Some(
            [(
                "coder.com/credential-destinations".to_owned(),
                destinations.to_owned(),
            )]
            .into(),
        );
    }
    let api = h.api::<Secret>();
    match api.get_opt("mcp-key").await.unwrap() {
        Some(existing) => {
            secret.metadata.resource_version = existing.metadata.resource_version;
            api.replace("mcp-key", &PostParams::default(), &secret)
                .await
                .unwrap();
        }
        None => {
            api.create(&PostParams::default(), &secret).await.unwrap();
        }
    }
}

#[tokio::test]
async fn a_credential_secret_that_withdraws_consent_disables_the_server() {
    let h = harness("mcp-consent").await;
    let s = setup(&h, true).await;
    credential_secret(&h, Some("https://mcp.example.com")).await;
    let mut spec = spec(&s.organization);
    spec["authType"] = json!("api_key");
    spec["apiKey"] = json!({"valueSecretRef": {"name": "mcp-key"}});
    create_server(&h, "keyed", spec).await;
    wait_reason(&h, "keyed", "Synced").await;
    let created = config(&h, "keyed").unwrap();
    assert_eq!(created["has_api_key_value"], true);
    assert_eq!(created["api_key_header"], "Authorization");
    credential_secret(&h, Some("https://elsewhere.example.com")).await;
    let status = wait_reason(&h, "keyed", "CredentialsNotReady").await;
    assert!(!format!("{status:?}").contains("not-a-real-key"));
    wait_config(&h, "keyed", "the kill switch", |c| c["enabled"] == false).await;
    credential_secret(&h, Some("https://mcp.example.com")).await;
    wait_reason(&h, "keyed", "Synced").await;
    wait_config(&h, "keyed", "enabled again", |c| c["enabled"] == true).await;
}

#[tokio::test]
async fn a_dashboard_disable_stalls_until_a_spec_edit_enables_the_server_again() {
    let h = harness("mcp-external").await;
    let s = setup(&h, true).await;
    create_server(&h, "tools", spec(&s.organization)).await;
    let status = wait_reason(&h, "tools", "Synced").await;
    let id = uuid::Uuid::parse_str(status.server_id.as_deref().unwrap()).unwrap();
    disable_in_dashboard(&s, id).await;
    let status = wait_reason(&h, "tools", "DisabledExternally").await;
    assert_eq!(status.phase, Some(MCPServerPhase::Stalled));
    h.server.clear_requests();
    at_rest().await;
    assert_eq!(writes(&operator_requests(&h, &s.operator)), Vec::<String>::new());
    assert_eq!(config(&h, "tools").unwrap()["enabled"], false);
    patch_spec(&h, "tools", json!({"description": "edited"})).await;
    wait_reason(&h, "tools", "Synced").await;
    wait_config(&h, "tools", "enabled by the spec edit", |c| c["enabled"] == true).await;
}

#[tokio::test]
async fn a_missing_group_removes_unlisted_access_and_adds_no_group() {
    let h = harness("mcp-groups").await;
    let s = setup(&h, true).await;
    let engineers = h.server.add_group(s.organization_id, "engineers");
    let operators = h.server.add_group(s.organization_id, "operators");
    let mut spec = spec(&s.organization);
    spec["access"] = json!({"groups": ["engineers"]});
    create_server(&h, "tools", spec).await;
    wait_reason(&h, "tools", "Synced").await;
    let acl = wait_config(&h, "tools", "engineers have access", |c| {
        c["acl"]["groups"] == json!({engineers.to_string(): "read"})
    })
    .await;
    assert_eq!(acl["acl"]["users"], json!({}));
    // Someone grants a user and another group in Coder; a listed group is missing.
    let id = uuid::Uuid::parse_str(acl["id"].as_str().unwrap()).unwrap();
    let user = s.coder.user("admin").await.unwrap().id;
    let grant = UpdateMcpServerAclRequest {
        user_roles: [(user.to_string(), "read".to_owned())].into(),
        group_roles: [(engineers.to_string(), "read".to_owned())].into(),
    };
    s.coder
        .patch_mcp_server_acl(&s.organization, id, &grant)
        .await
        .unwrap();
    patch_spec(
        &h,
        "tools",
        json!({"access": {"groups": ["operators", "missing"]}}),
    )
    .await;
    let status = wait_reason(&h, "tools", "GroupNotFound").await;
    assert_eq!(status.phase, Some(MCPServerPhase::Stalled));
    let after = wait_config(&h, "tools", "access removed", |c| {
        c["acl"]["groups"] == json!({}) && c["acl"]["users"] == json!({})
    })
    .await;
    assert!(
        after["acl"]["groups"].get(operators.to_string()).is_none(),
        "no group is added"
    );
    // Once the group exists, exactly the listed groups get access.
    h.server.add_group(s.organization_id, "missing");
    wait_reason(&h, "tools", "Synced").await;
    let settled = wait_config(&h, "tools", "the listed groups", |c| {
        c["acl"]["groups"].as_object().is_some_and(|g| g.len() == 2)
    })
    .await;
    assert_eq!(settled["acl"]["groups"][operators.to_string()], "read");
}

#[tokio::test]
async fn unset_access_leaves_coders_access_alone() {
    let h = harness("mcp-noaccess").await;
    let s = setup(&h, true).await;
    create_server(&h, "tools", spec(&s.organization)).await;
    let status = wait_reason(&h, "tools", "Synced").await;
    let id = uuid::Uuid::parse_str(status.server_id.as_deref().unwrap()).unwrap();
    let grant = UpdateMcpServerAclRequest {
        group_roles: [(s.organization_id.to_string(), "read".to_owned())].into(),
        ..UpdateMcpServerAclRequest::default()
    };
    s.coder
        .patch_mcp_server_acl(&s.organization, id, &grant)
        .await
        .unwrap();
    h.server.clear_requests();
    at_rest().await;
    let acl_calls: Vec<_> = operator_requests(&h, &s.operator)
        .into_iter()
        .filter(|r| r.path.ends_with("/acl"))
        .collect();
    assert!(acl_calls.is_empty(), "{acl_calls:?}");
    assert_eq!(
        config(&h, "tools").unwrap()["acl"]["groups"][s.organization_id.to_string()],
        "read"
    );
}

#[tokio::test]
async fn deleting_the_object_deletes_the_config_and_a_proxy_404_is_not_gone() {
    let h = harness("mcp-delete").await;
    let s = setup(&h, true).await;
    create_server(&h, "tools", spec(&s.organization)).await;
    let status = wait_reason(&h, "tools", "Synced").await;
    let id = status.server_id.clone().unwrap();
    let config_path = format!("/api/v2/organizations/{}/mcp-servers/{id}", s.organization_id);
    h.server.add_fault(FaultRule {
        method: Some("DELETE".to_owned()),
        path_prefix: config_path.clone(),
        fault: Fault::ProxyNotFound,
        times: None,
    });
    delete_object(&h, "tools").await;
    let waiting = wait_reason(&h, "tools", "Deleting").await;
    let message = crate::support::ready_message(&waiting.conditions);
    assert_eq!(
        message,
        "Deleting the MCP server config \"tools\" in Coder; waiting: delete MCP server config: Coder answered 404."
    );
    wait_for(
        || async {
            h.server
                .requests()
                .iter()
                .filter(|r| r.method == "DELETE" && r.path == config_path)
                .count()
                >= 2
        },
        "delete attempts through the proxy",
    )
    .await;
    assert!(
        h.api::<CoderMCPServer>()
            .get_opt("tools")
            .await
            .unwrap()
            .is_some(),
        "a proxy 404 is not gone"
    );
    assert!(config(&h, "tools").is_some());
    h.server.clear_faults();
    wait_gone(&h, "tools").await;
    assert!(config(&h, "tools").is_none(), "the config is deleted in Coder");
}

#[tokio::test]
async fn an_uncertain_create_is_resolved_by_the_slug_not_by_a_second_create() {
    let h = harness("mcp-uncertain").await;
    let s = setup(&h, true).await;
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: format!("/api/v2/organizations/{}/mcp-servers", s.organization_id),
        fault: Fault::DropAfterHandling,
        times: Some(1),
    });
    create_server(&h, "tools", spec(&s.organization)).await;
    let status = wait_reason(&h, "tools", "Synced").await;
    let posts = operator_requests(&h, &s.operator)
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/mcp-servers"))
        .count();
    assert_eq!(posts, 1);
    assert_eq!(h.server.mcp_servers().len(), 1);
    assert_eq!(
        status.server_id.as_deref(),
        config(&h, "tools").unwrap()["id"].as_str()
    );
}

#[tokio::test]
async fn a_slug_taken_by_another_config_stalls_and_is_never_touched() {
    let h = harness("mcp-slug").await;
    let s = setup(&h, true).await;
    let request = McpServerConfigRequest {
        display_name: Some("Theirs".into()),
        slug: Some("tools".into()),
        transport: Some("streamable_http".into()),
        url: Some("https://theirs.example.com".into()),
        ..McpServerConfigRequest::default()
    };
    let theirs = s
        .coder
        .create_mcp_server_config(&s.organization, &request)
        .await
        .unwrap();
    create_server(&h, "tools", spec(&s.organization)).await;
    wait_reason(&h, "tools", "SlugConflict").await;
    delete_object(&h, "tools").await;
    wait_gone(&h, "tools").await;
    let touched: Vec<_> = operator_requests(&h, &s.operator)
        .into_iter()
        .filter(|r| r.method != "GET" && r.path.contains("/mcp-servers"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(touched, Vec::<String>::new());
    assert_eq!(config(&h, "tools").unwrap()["id"], theirs.id.to_string());
}

#[tokio::test]
async fn a_marker_only_object_whose_organization_was_deleted_is_released() {
    let h = harness("mcp-orggone").await;
    let s = setup(&h, false).await;
    let org = h.server.add_organization("doomed").await.unwrap();
    allow_organizations(&h, json!(["doomed"])).await;
    // Every create is lost before Coder sees it: only the marker is written.
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: format!("/api/v2/organizations/{org}/mcp-servers"),
        fault: Fault::DropConnection,
        times: None,
    });
    create_server(&h, "tools", spec("doomed")).await;
    wait_for(
        || async { status_of(&h, "tools").await.create_marker.is_some() },
        "the create marker",
    )
    .await;
    let status = status_of(&h, "tools").await;
    assert!(status.server_id.is_none());
    h.server.delete_organization(org).await.unwrap();
    delete_object(&h, "tools").await;
    wait_gone(&h, "tools").await;
    assert!(h.server.mcp_servers().is_empty());
    drop(s);
}

/// A second operator on the test's namespace with a fresh context (it knows nothing this process recorded).
fn restart_operator(h: &Harness) -> tokio::sync::watch::Sender<bool> {
    h.stop.send(true).unwrap();
    let requests = coder_k8s::kube_requests::KubeRequests::default();
    let client = requests.client(h.cp.config().unwrap()).unwrap();
    let metrics = coder_k8s_controllers::metrics::ReconcileMetrics::register(
        &mut prometheus_client::registry::Registry::default(),
    );
    let settings = crate::control_plane::settings(&h.ns);
    let ctx = std::sync::Arc::new(coder_k8s_controllers::context::Context::new(
        client, settings, metrics,
    ));
    crate::control_plane::spawn_controllers(&ctx)
}

async fn forge_status(h: &Harness, name: &str, server_id: &str) {
    let forged = json!({"status": {"serverID": server_id}});
    h.api::<CoderMCPServer>()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&forged))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_foreign_server_id_written_into_status_is_never_patched_or_deleted() {
    let h = harness("mcp-foreign").await;
    let s = setup(&h, true).await;
    create_server(&h, "tools", spec(&s.organization)).await;
    let own = wait_reason(&h, "tools", "Synced").await.server_id.unwrap();
    let request = McpServerConfigRequest {
        display_name: Some("Theirs".into()),
        slug: Some("theirs".into()),
        transport: Some("streamable_http".into()),
        url: Some("https://theirs.example.com".into()),
        enabled: Some(true),
        ..McpServerConfigRequest::default()
    };
    let theirs = s
        .coder
        .create_mcp_server_config(&s.organization, &request)
        .await
        .unwrap();
    // A restarted operator knows its config only by the proof in Coder and status.
    let _second = restart_operator(&h);
    forge_status(&h, "tools", &theirs.id.to_string()).await;
    // A spec edit makes the operator patch its config; a withdrawn opt-in makes it disable it.
    patch_spec(&h, "tools", json!({"description": "edited"})).await;
    let status = wait_reason(&h, "tools", "Synced").await;
    assert_eq!(
        status.server_id.as_deref(),
        Some(own.as_str()),
        "the status names the object's own config again"
    );
    wait_config(&h, "tools", "the spec edit on the own config", |c| {
        c["description"] == "edited"
    })
    .await;
    forge_status(&h, "tools", &theirs.id.to_string()).await;
    allow_organizations(&h, json!([])).await;
    wait_config(&h, "tools", "the kill switch on the own config", |c| {
        c["enabled"] == false
    })
    .await;
    forge_status(&h, "tools", &theirs.id.to_string()).await;
    delete_object(&h, "tools").await;
    wait_gone(&h, "tools").await;
    let aimed: Vec<_> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET" && r.method != "POST" && r.path.contains(&theirs.id.to_string()))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(aimed, Vec::<String>::new());
    let left = config(&h, "theirs").unwrap();
    assert_eq!(
        (left["enabled"].clone(), left["url"].clone()),
        (json!(true), json!("https://theirs.example.com"))
    );
    assert!(config(&h, "tools").is_none(), "the own config is deleted");
}

#[tokio::test]
async fn a_coder_without_mcp_routes_is_not_supported() {
    let h = harness("mcp-oldcoder").await;
    let s = setup(&h, true).await;
    h.server.add_fault(FaultRule {
        method: None,
        path_prefix: format!("/api/v2/organizations/{}/mcp-servers", s.organization_id),
        fault: Fault::RouteNotFound,
        times: None,
    });
    create_server(&h, "tools", spec(&s.organization)).await;
    let status = wait_reason(&h, "tools", "NotSupported").await;
    assert_eq!(status.phase, Some(MCPServerPhase::Stalled));
    assert!(status.create_marker.is_none(), "no create was tried");
}

/// The shipped policy, its binding scoped to `namespace` (the API server is shared by parallel tests) and renamed
/// for this test.
fn scoped_policy(namespace: &str) -> String {
    let text = std::fs::read_to_string(path("config/admission/status-operator-only.yaml")).unwrap();
    let mut documents: Vec<Value> = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect();
    let name = format!("status-operator-only-{namespace}");
    documents[0]["metadata"]["name"] = json!(name);
    documents[1]["metadata"]["name"] = json!(name);
    documents[1]["spec"]["policyName"] = json!(name);
    documents[1]["spec"]["matchResources"] =
        json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}});
    json!({"apiVersion": "v1", "kind": "List", "items": documents}).to_string()
}

#[tokio::test]
async fn the_status_admission_policy_lets_only_the_operator_write_status() {
    let bundle = std::fs::read_to_string(path("dist/install.yaml")).unwrap();
    assert!(
        !bundle.contains("ValidatingAdmissionPolicy"),
        "the policy is opt-in, not in the install bundle"
    );
    let h = harness("mcp-admission").await;
    let object = create_server(&h, "tools", spec("coder")).await;
    // The shipped RBAC gives the operator ServiceAccount its access.
    let out = kubectl(h.cp, &["create", "namespace", "coder-system"], None);
    assert!(out.status.success() || String::from_utf8_lossy(&out.stderr).contains("AlreadyExists"));
    assert_success(
        &kubectl(h.cp, &["apply", "-f", &path("config/rbac")], None),
        "apply the RBAC",
    );
    assert_success(
        &kubectl(h.cp, &["apply", "-f", "-"], Some(&scoped_policy(&h.ns))),
        "apply the policy",
    );
    // Each write changes the status, so none is a no-op.
    let write = |user: Option<&str>, attempt: u32| {
        let forged = format!(r#"{{"status":{{"serverID":"00000000-0000-0000-0000-{attempt:012}"}}}}"#);
        let mut args = vec!["patch", "codermcpservers.coder.com", "tools", "-n", h.ns.as_str()];
        args.extend_from_slice(&["--subresource=status", "--type=merge", "-p", forged.as_str()]);
        if let Some(user) = user {
            args.extend_from_slice(&["--as", user]);
        }
        kubectl(h.cp, &args, None)
    };
    // The policy takes effect once the API server has loaded it.
    let mut denied = None;
    for attempt in 0..100 {
        let out = write(None, attempt);
        if !out.status.success() {
            denied = Some(String::from_utf8_lossy(&out.stderr).into_owned());
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let denied = denied.expect("the cluster admin is denied");
    assert!(denied.contains("Only the coder-k8s operator"), "{denied}");
    let operator = write(Some("system:serviceaccount:coder-system:coder-k8s"), 999);
    assert_success(&operator, "the operator ServiceAccount writes status");
    // Spec writes stay allowed for the admin.
    patch_spec(&h, "tools", json!({"description": "still editable"})).await;
    let name = format!("status-operator-only-{}", h.ns);
    for kind in ["validatingadmissionpolicybinding", "validatingadmissionpolicy"] {
        assert_success(
            &kubectl(h.cp, &["delete", kind, &name], None),
            "remove the policy",
        );
    }
    drop(object);
}

async fn object_json(h: &Harness, name: &str) -> Value {
    serde_json::to_value(h.api::<CoderMCPServer>().get(name).await.unwrap()).unwrap()
}

fn health(object: &Value) -> (String, String, String) {
    let (status, message) = argocd_health("config/gitops/argocd-health-codermcpserver.lua", object);
    let flux = flux_health(
        "config/gitops/flux-healthcheck-codermcpserver.yaml",
        "CoderMCPServer",
        object,
    );
    (status, message, flux)
}

#[tokio::test]
async fn the_gitops_health_rules_read_the_controllers_objects_in_every_phase() {
    const PROGRESSING: &str = "InProgress";
    let h = harness("mcp-gitops").await;
    let s = setup(&h, true).await;
    // Pending: the create's answers are lost while Coder fails.
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: format!("/api/v2/organizations/{}/mcp-servers", s.organization_id),
        fault: Fault::ServerError(503),
        times: None,
    });
    create_server(&h, "pending", spec(&s.organization)).await;
    wait_reason(&h, "pending", "CoderUnavailable").await;
    let (status, _, flux) = health(&object_json(&h, "pending").await);
    assert_eq!((status.as_str(), flux.as_str()), ("Progressing", PROGRESSING));
    h.server.clear_faults();
    // Ready.
    let ready = object_json(&h, "pending").await;
    wait_reason(&h, "pending", "Synced").await;
    let ready_now = object_json(&h, "pending").await;
    let (status, message, flux) = health(&ready_now);
    assert_eq!((status.as_str(), flux.as_str()), ("Healthy", "Current"));
    assert!(message.starts_with("Synced: "), "{message}");
    // A spec the controller has not seen yet is in progress again.
    let mut unseen = ready_now.clone();
    unseen["metadata"]["generation"] = json!(ready_now["metadata"]["generation"].as_i64().unwrap() + 1);
    let (status, _, flux) = health(&unseen);
    assert_eq!((status.as_str(), flux.as_str()), ("Progressing", "InProgress"));
    drop(ready);
    // Stalled.
    let mut other = spec("nowhere");
    other["slug"] = json!("elsewhere");
    create_server(&h, "stalled", other).await;
    wait_reason(&h, "stalled", "MCPServersNotAllowed").await;
    let (status, message, flux) = health(&object_json(&h, "stalled").await);
    assert_eq!((status.as_str(), flux.as_str()), ("Degraded", "Failed"));
    assert!(message.starts_with("MCPServersNotAllowed: "), "{message}");
    // Deleting: the finalizer waits while Coder's answers come from a proxy.
    let id = status_of(&h, "pending").await.server_id.unwrap();
    h.server.add_fault(FaultRule {
        method: Some("DELETE".to_owned()),
        path_prefix: format!("/api/v2/organizations/{}/mcp-servers/{id}", s.organization_id),
        fault: Fault::ProxyNotFound,
        times: None,
    });
    delete_object(&h, "pending").await;
    let (status, message, flux) = health(&object_json(&h, "pending").await);
    assert_eq!(
        (status.as_str(), message.as_str()),
        ("Progressing", "Deleting the MCP server config in Coder")
    );
    assert_ne!(flux, "Failed", "a deleting object is not failed");
    h.server.clear_faults();
    wait_gone(&h, "pending").await;
}

#[tokio::test]
async fn an_operator_user_coder_refuses_stalls_without_a_create() {
    let h = harness("mcp-notowner").await;
    let s = setup(&h, true).await;
    // Coder answers 403 `Forbidden.` to a user that is not a site owner (see the test server's own tests).
    h.server.add_fault(FaultRule {
        method: None,
        path_prefix: format!("/api/v2/organizations/{}/mcp-servers", s.organization_id),
        fault: Fault::Forbidden,
        times: None,
    });
    create_server(&h, "tools", spec(&s.organization)).await;
    let status = wait_reason(&h, "tools", "OperatorAccessNotReady").await;
    assert_eq!(status.phase, Some(MCPServerPhase::Stalled));
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert!(ready.message.contains("site owner"), "{}", ready.message);
    assert!(status.create_marker.is_none(), "no create was tried");
}

#[tokio::test]
async fn a_changed_deployment_creates_nothing_and_the_delete_keeps_the_record() {
    let h = harness("mcp-deployment").await;
    let s = setup(&h, true).await;
    let uid = create_server(&h, "tools", spec(&s.organization))
        .await
        .metadata
        .uid
        .unwrap();
    let id = wait_reason(&h, "tools", "Synced").await.server_id.unwrap();
    // The control plane now reaches another Coder database, which does not have the config.
    h.server.set_deployment_id("00000000-0000-4000-8000-00000000beef");
    s.coder
        .delete_mcp_server_config(
            &s.organization_id.to_string(),
            uuid::Uuid::parse_str(&id).unwrap(),
        )
        .await
        .unwrap();
    h.server.clear_requests();
    patch_spec(&h, "tools", json!({"description": "moved"})).await;
    wait_reason(&h, "tools", "CoderDeploymentChanged").await;
    delete_object(&h, "tools").await;
    wait_gone(&h, "tools").await;
    let writes = writes(&operator_requests(&h, &s.operator));
    assert_eq!(
        writes,
        Vec::<String>::new(),
        "nothing is created or deleted in the new deployment"
    );
    let record = coder_k8s_controllers::cleanup_records::record::record_name(&uid);
    let records = h.api::<k8s_openapi::api::core::v1::ConfigMap>();
    assert!(
        records.get_opt(&record).await.unwrap().is_some(),
        "the record stays for the sweep"
    );
    assert_eq!(h.metrics.cleanup_counts("CoderMCPServer").2, 1);
}

#[tokio::test]
async fn a_marker_and_server_id_forged_into_an_object_that_never_created_a_config_adopt_nothing() {
    let h = harness("mcp-forged-marker").await;
    // Without the opt-in the object makes no Coder call: it never creates a config, and has no cleanup record.
    let s = setup(&h, false).await;
    let secrets = h.api::<Secret>();
    wait_for(
        || async {
            secrets
                .get_opt("coder-k8s-cleanup-records-key")
                .await
                .unwrap()
                .is_some()
        },
        "the operator's signing key (the object is newer than it)",
    )
    .await;
    create_server(&h, "tools", spec(&s.organization)).await;
    wait_reason(&h, "tools", "MCPServersNotAllowed").await;
    // Someone else's config under the object's slug, made after the object; the forger writes its ID and a create
    // marker that matches its creation time.
    let request = McpServerConfigRequest {
        display_name: Some("Theirs".into()),
        slug: Some("tools".into()),
        transport: Some("streamable_http".into()),
        url: Some("https://theirs.example.com".into()),
        enabled: Some(true),
        ..McpServerConfigRequest::default()
    };
    let theirs = s
        .coder
        .create_mcp_server_config(&s.organization, &request)
        .await
        .unwrap();
    let before = config(&h, "tools").unwrap();
    h.server.clear_requests();
    let forged = json!({"status": {"serverID": theirs.id.to_string(), "createMarker": theirs.created_at}});
    h.api::<CoderMCPServer>()
        .patch_status("tools", &PatchParams::default(), &Patch::Merge(&forged))
        .await
        .unwrap();
    crate::support::several_requeues().await;
    allow_organizations(&h, json!([s.organization])).await;
    let status = wait_reason(&h, "tools", "SlugConflict").await;
    assert_eq!(status.phase, Some(MCPServerPhase::Stalled));
    delete_object(&h, "tools").await;
    wait_gone(&h, "tools").await;
    let aimed: Vec<String> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET" && r.path.contains("/mcp-servers"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        aimed,
        Vec::<String>::new(),
        "no patch, disable or delete (the whole request log)"
    );
    assert_eq!(config(&h, "tools").unwrap(), before, "their config is unchanged");
}
