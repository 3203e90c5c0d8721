//! The CoderTemplateTest controller on the real kube-apiserver, PostgreSQL and the Coder API test server: a run from
//! the create to the deleted workspace, its failure families, the uncertain create, cleanup while Coder is down,
//! retain, the TTL, operator restarts and a foreign workspace ID written into the status. Every test checks Coder's
//! whole request log for the creates it made.

use std::time::Duration;

use bytes::Bytes;
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::template_test::{CoderTemplateTest, CoderTemplateTestStatus, TemplateTestPhase};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition};
use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::template_versions::CreateTemplateVersionRequest;
use coder_k8s_coder_client::types::templates::CreateTemplateRequest;
use coder_k8s_coder_client::types::workspaces::CreateWorkspaceRequest;
use coder_k8s_coder_testserver::{AgentSpec, BuildOutcome, Fault, FaultRule};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::control_plane::{Harness, harness};
use crate::provisioner::ready_control_plane;
use crate::support::wait_for;
use crate::support::{argocd_health, flux_health};

const CP: &str = "codercontrolplane-sample";

/// A ready control plane, a template `docker` in the default organization, and a plain member `tester` named as
/// the owner of test workspaces. Returns the operator's client, the organization name and the tester's ID.
struct Setup {
    coder: CoderClient,
    organization: String,
    tester: String,
}

async fn setup(h: &Harness) -> Setup {
    let token = ready_control_plane(h).await;
    let coder = h.coder(&token);
    let organization = coder.default_organization().await.unwrap().name;
    create_template(&coder, &organization, "docker").await;
    h.server.mint_token("tester", &[]).await.unwrap();
    let tester = coder.user("tester").await.unwrap().id.to_string();
    set_template_tests(h, json!({"ownerUserID": tester})).await;
    Setup {
        coder,
        organization,
        tester,
    }
}

async fn set_template_tests(h: &Harness, settings: serde_json::Value) {
    h.api::<CoderControlPlane>()
        .patch(
            CP,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"templateTests": settings}})),
        )
        .await
        .unwrap();
}

/// A template `name` whose first version imported; returns the version ID.
async fn create_template(coder: &CoderClient, organization: &str, name: &str) -> uuid::Uuid {
    let version = import_version(coder, organization, None).await;
    let request = CreateTemplateRequest {
        name: name.to_owned(),
        template_version_id: version,
        ..CreateTemplateRequest::default()
    };
    coder.create_template(organization, &request).await.unwrap();
    version
}

async fn import_version(coder: &CoderClient, organization: &str, template: Option<uuid::Uuid>) -> uuid::Uuid {
    let tar = coder_k8s_testenv::archive::one_file_tar("main.tf", b"terraform {}\n");
    let file = coder
        .upload_file(ArchiveKind::Tar, Bytes::from(tar))
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.template_id = template;
    let version = coder
        .create_template_version(organization, &request)
        .await
        .unwrap();
    for _ in 0..100 {
        if coder
            .template_version(version.id)
            .await
            .unwrap()
            .job
            .status
            .is_terminal()
        {
            return version.id;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the template version did not import");
}

fn spec(template: &str) -> serde_json::Value {
    json!({"controlPlaneRef": {"name": CP}, "template": template, "version": {"active": true}, "timeoutSeconds": 60})
}

async fn create_test(h: &Harness, name: &str, spec: serde_json::Value) -> CoderTemplateTest {
    let object = CoderTemplateTest::new(name, serde_json::from_value(spec).unwrap());
    h.api::<CoderTemplateTest>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

async fn status_of(h: &Harness, name: &str) -> CoderTemplateTestStatus {
    h.api::<CoderTemplateTest>()
        .get(name)
        .await
        .unwrap()
        .status
        .unwrap_or_default()
}

fn condition(status: &CoderTemplateTestStatus, type_: &str) -> Option<(String, String)> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// Waits until the test's `status.reason` is `reason` (up to 90 s); returns the status.
async fn wait_reason(h: &Harness, name: &str, reason: &str) -> CoderTemplateTestStatus {
    let mut last = CoderTemplateTestStatus::default();
    for _ in 0..450 {
        last = status_of(h, name).await;
        if last.reason.as_deref() == Some(reason) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{name} never reached reason {reason}; last status {last:?}");
}

/// Waits until `WorkspaceDeleted` has `state`/`reason`; returns the status.
async fn wait_deleted(h: &Harness, name: &str, state: &str, reason: &str) -> CoderTemplateTestStatus {
    let mut last = CoderTemplateTestStatus::default();
    for _ in 0..450 {
        last = status_of(h, name).await;
        if condition(&last, "WorkspaceDeleted") == Some((state.to_owned(), reason.to_owned())) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{name}: WorkspaceDeleted never became {state}/{reason}; last status {last:?}");
}

/// The workspace creates Coder received (every request in the log).
fn creates(h: &Harness) -> usize {
    h.server
        .requests()
        .iter()
        .filter(|r| {
            r.method == "POST" && r.path.starts_with("/api/v2/users/") && r.path.ends_with("/workspaces")
        })
        .count()
}

/// The delete builds Coder received.
fn builds_posted(h: &Harness) -> usize {
    h.server
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/builds"))
        .count()
}

fn workspace_name(test: &CoderTemplateTest) -> String {
    let uid = test.metadata.uid.clone().unwrap().replace('-', "");
    format!("ktt-{}", &uid[..28])
}

#[tokio::test]
async fn a_passing_run_creates_one_workspace_waits_for_its_agents_deletes_it_and_succeeds() {
    let h = harness("ktt-pass").await;
    let s = setup(&h).await;
    let test = create_test(&h, "pass", spec(&format!("{}.docker", s.organization))).await;
    let status = wait_reason(&h, "pass", "Succeeded").await;
    assert_eq!(status.phase, Some(TemplateTestPhase::Succeeded));
    assert_eq!(
        condition(&status, "Ready"),
        Some(("True".into(), "Succeeded".into()))
    );
    assert_eq!(condition(&status, "Stalled").map(|c| c.0), Some("False".into()));
    assert_eq!(
        condition(&status, "Reconciling").map(|c| c.0),
        Some("False".into())
    );
    assert_eq!(
        condition(&status, "WorkspaceDeleted"),
        Some(("True".into(), "Deleted".into()))
    );
    let name = workspace_name(&test);
    assert_eq!(status.workspace_name.as_deref(), Some(name.as_str()));
    assert_eq!(status.owner_id.as_deref(), Some(s.tester.as_str()));
    let template = s.coder.template_by_name(&s.organization, "docker").await.unwrap();
    assert_eq!(
        status.template_version_id.as_deref(),
        Some(template.active_version_id.to_string().as_str()),
        "the active version is pinned"
    );
    assert!(status.template_version_name.is_some());
    for field in [
        &status.start_time,
        &status.completion_time,
        &status.create_attempt_time,
        &status.agents_ready_time,
    ] {
        assert!(field.is_some(), "{status:?}");
    }
    assert!(status.start_build_id.is_some() && status.delete_build_id.is_some());
    assert_eq!(status.delete_attempts, None);
    assert!(status.message.as_deref().unwrap().len() <= 256);
    assert!(status.duration.is_some());
    assert_eq!(creates(&h), 1);
    assert_eq!(h.server.workspaces(), vec![(name, true)]);
    let out = crate::support::kubectl(h.cp, &["get", "codertemplatetests", "-n", &h.ns], None);
    crate::support::assert_success(&out, "get codertemplatetests");
    let text = crate::support::stdout(&out);
    let mut lines = text.lines();
    let columns: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(
        columns,
        [
            "NAME", "PHASE", "TEMPLATE", "VERSION", "REASON", "DURATION", "AGE"
        ],
        "{text}"
    );
    let row: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(&row[..2], ["pass", "Succeeded"], "{text}");
    assert_eq!(row[4], "Succeeded", "{text}");
    assert_eq!(Some(row[5]), status.duration.as_deref(), "{text}");
    // Each phase change was published as an Event.
    let events = h
        .api::<k8s_openapi::api::events::v1::Event>()
        .list(&Default::default())
        .await
        .unwrap();
    let reasons: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("pass"))
        .filter_map(|e| e.reason.clone())
        .collect();
    // At least: into Pending or Running, then into Succeeded (events.k8s.io may merge repeats, never drop one).
    assert!(reasons.len() >= 2, "{reasons:?}");
    assert_eq!(
        reasons.iter().filter(|r| *r == "Succeeded").count(),
        1,
        "{reasons:?}"
    );
    // The finished run has no finalizer work left: deleting the object needs no Coder call.
    h.server.clear_requests();
    h.api::<CoderTemplateTest>()
        .delete("pass", &DeleteParams::default())
        .await
        .unwrap();
    let tests = h.api::<CoderTemplateTest>();
    wait_for(
        || async { tests.get_opt("pass").await.unwrap().is_none() },
        "the test to go",
    )
    .await;
    assert_eq!(builds_posted(&h) + creates(&h), 0);
    assert_eq!(h.metrics.template_tests_finished("Succeeded"), 1);
}

#[tokio::test]
async fn a_failed_build_fails_the_run_and_the_workspace_is_still_deleted() {
    let h = harness("ktt-buildfail").await;
    let s = setup(&h).await;
    h.server.set_build_outcome(BuildOutcome::Fail);
    create_test(&h, "fails", spec(&format!("{}.docker", s.organization))).await;
    let status = wait_reason(&h, "fails", "BuildFailed").await;
    assert_eq!(status.phase, Some(TemplateTestPhase::Failed));
    assert_eq!(
        condition(&status, "Stalled"),
        Some(("True".into(), "BuildFailed".into()))
    );
    assert_eq!(condition(&status, "Ready").map(|c| c.0), Some("False".into()));
    // The delete build fails too while every job fails: cleanup keeps trying.
    wait_deleted(&h, "fails", "False", "DeleteRetrying").await;
    h.server.set_build_outcome(BuildOutcome::Succeed);
    let status = wait_deleted(&h, "fails", "True", "Deleted").await;
    assert_eq!(
        status.reason.as_deref(),
        Some("BuildFailed"),
        "the outcome does not change"
    );
    assert!(status.delete_attempts.unwrap_or(0) >= 1);
    assert_eq!(creates(&h), 1);
    assert!(h.server.workspaces().iter().all(|(_, deleted)| *deleted));
    assert_eq!(h.server.workspaces().len(), 1);
}

#[tokio::test]
async fn a_workspace_without_agents_fails_with_no_agents() {
    let h = harness("ktt-noagents").await;
    let s = setup(&h).await;
    h.server.set_agents(Vec::new());
    create_test(&h, "none", spec(&format!("{}.docker", s.organization))).await;
    let status = wait_reason(&h, "none", "NoAgents").await;
    assert_eq!(status.phase, Some(TemplateTestPhase::Failed));
    wait_deleted(&h, "none", "True", "Deleted").await;
    assert_eq!(creates(&h), 1);
}

#[tokio::test]
async fn agent_failures_have_their_reasons_and_sub_agents_do_not_count() {
    let h = harness("ktt-agents").await;
    let s = setup(&h).await;
    let template = format!("{}.docker", s.organization);
    let mut sub = AgentSpec::new("connecting", "created");
    sub.sub_agent = true;
    h.server.set_agents(vec![AgentSpec::ready(), sub]);
    create_test(&h, "sub", spec(&template)).await;
    wait_reason(&h, "sub", "Succeeded").await;
    for (name, agent, reason) in [
        (
            "timeout",
            AgentSpec::new("timeout", "created"),
            "AgentConnectionTimeout",
        ),
        (
            "starterr",
            AgentSpec::new("connected", "start_error"),
            "AgentStartError",
        ),
    ] {
        h.server.set_agents(vec![agent]);
        create_test(&h, name, spec(&template)).await;
        let status = wait_reason(&h, name, reason).await;
        assert_eq!(status.phase, Some(TemplateTestPhase::Failed));
        wait_deleted(&h, name, "True", "Deleted").await;
    }
    assert_eq!(creates(&h), 3);
}

#[tokio::test]
async fn agents_that_never_get_ready_end_at_the_deadline_naming_the_last_wait() {
    let h = harness("ktt-deadline").await;
    let s = setup(&h).await;
    h.server.set_agents(vec![AgentSpec::new("connecting", "created")]);
    create_test(&h, "slow", spec(&format!("{}.docker", s.organization))).await;
    wait_reason(&h, "slow", "WaitingForAgents").await;
    let status = wait_reason(&h, "slow", "DeadlineExceeded").await;
    let message = status.message.unwrap();
    assert!(
        message.contains("within 60s") && message.contains("WaitingForAgents"),
        "{message}"
    );
    // Cleanup continues after the deadline.
    wait_deleted(&h, "slow", "True", "Deleted").await;
    assert_eq!(creates(&h), 1);
}

#[tokio::test]
async fn an_uncertain_create_is_proven_from_coders_builds_and_never_sent_again() {
    let h = harness("ktt-uncertain").await;
    let s = setup(&h).await;
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: format!("/api/v2/users/{}/workspaces", s.tester),
        fault: Fault::DropAfterHandling,
        times: Some(1),
    });
    create_test(&h, "lost", spec(&format!("{}.docker", s.organization))).await;
    let status = wait_reason(&h, "lost", "Succeeded").await;
    assert_eq!(
        condition(&status, "WorkspaceDeleted"),
        Some(("True".into(), "Deleted".into()))
    );
    assert_eq!(creates(&h), 1, "the create is never resent");
    assert_eq!(h.server.workspaces().len(), 1);
}

#[tokio::test]
async fn a_name_taken_by_someone_else_fails_and_that_workspace_is_never_touched() {
    let h = harness("ktt-conflict").await;
    let s = setup(&h).await;
    // The owner is not configured yet, so the test waits while the name is taken.
    set_template_tests(&h, json!({"ownerUserID": null})).await;
    let test = create_test(&h, "taken", spec(&format!("{}.docker", s.organization))).await;
    wait_reason(&h, "taken", "OwnerNotConfigured").await;
    let name = workspace_name(&test);
    let tester = h.coder(&h.server.mint_token("tester", &[]).await.unwrap());
    let template = s.coder.template_by_name(&s.organization, "docker").await.unwrap();
    let request = CreateWorkspaceRequest {
        template_id: Some(template.id),
        name: name.clone(),
        ..CreateWorkspaceRequest::default()
    };
    tester.create_workspace("me", &request).await.unwrap();
    h.server.clear_requests();
    set_template_tests(&h, json!({"ownerUserID": s.tester})).await;
    let status = wait_reason(&h, "taken", "WorkspaceNameConflict").await;
    assert_eq!(
        condition(&status, "WorkspaceDeleted"),
        Some(("True".into(), "NotCreated".into()))
    );
    assert_eq!(creates(&h) + builds_posted(&h), 0);
    assert_eq!(h.server.workspaces(), vec![(name, false)]);
}

#[tokio::test]
async fn a_foreign_workspace_id_written_into_the_status_is_never_canceled_or_deleted() {
    let h = harness("ktt-forged").await;
    let s = setup(&h).await;
    h.server.set_agents(vec![AgentSpec::new("connecting", "created")]);
    // Someone's own workspace, with a start build the test would cancel and a delete build it would send.
    let tester = h.coder(&h.server.mint_token("tester", &[]).await.unwrap());
    let template = s.coder.template_by_name(&s.organization, "docker").await.unwrap();
    let request = CreateWorkspaceRequest {
        template_id: Some(template.id),
        name: "precious".to_owned(),
        ..CreateWorkspaceRequest::default()
    };
    let precious = tester.create_workspace("me", &request).await.unwrap();
    let test = create_test(&h, "forged", spec(&format!("{}.docker", s.organization))).await;
    wait_reason(&h, "forged", "WaitingForAgents").await;

    // A subject with status write access points the test at that workspace, then the test is deleted.
    h.server.clear_requests();
    let forged = json!({"status": {"workspaceID": precious.id.to_string()}});
    h.api::<CoderTemplateTest>()
        .patch_status("forged", &PatchParams::default(), &Patch::Merge(&forged))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    h.api::<CoderTemplateTest>()
        .delete("forged", &DeleteParams::default())
        .await
        .unwrap();
    let tests = h.api::<CoderTemplateTest>();
    wait_for(
        || async { tests.get_opt("forged").await.unwrap().is_none() },
        "the test to go",
    )
    .await;
    let aimed: Vec<String> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .filter(|r| {
            r.path.contains(&precious.id.to_string())
                || r.path.contains(&precious.latest_build.id.to_string())
        })
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(aimed, Vec::<String>::new(), "the whole request log");
    let mut workspaces = h.server.workspaces();
    workspaces.sort();
    let mut expected = vec![("precious".to_owned(), false), (workspace_name(&test), true)];
    expected.sort();
    assert_eq!(workspaces, expected, "only the test's own workspace is deleted");
    assert_eq!(creates(&h), 0, "nothing created after the forge");
}

#[tokio::test]
async fn an_owner_with_more_than_member_rights_is_refused() {
    let h = harness("ktt-owner").await;
    let s = setup(&h).await;
    h.server.mint_token("tester", &["owner"]).await.unwrap();
    create_test(&h, "admin", spec(&format!("{}.docker", s.organization))).await;
    let status = wait_reason(&h, "admin", "OwnerNotEligible").await;
    assert_eq!(status.phase, Some(TemplateTestPhase::Pending));
    assert!(status.message.unwrap().contains("site role \"owner\""));
    h.server.mint_token("tester", &[]).await.unwrap();
    // The control plane changes nothing here: the test polls and resumes on its own.
    wait_reason(&h, "admin", "Succeeded").await;
    assert_eq!(creates(&h), 1);
}

#[tokio::test]
async fn an_archived_version_and_a_missing_template_have_their_reasons() {
    let h = harness("ktt-version").await;
    let s = setup(&h).await;
    let template = s.coder.template_by_name(&s.organization, "docker").await.unwrap();
    let old = import_version(&s.coder, &s.organization, Some(template.id)).await;
    s.coder.archive_template_version(old).await.unwrap();
    let mut by_id = spec(&format!("{}.docker", s.organization));
    by_id["version"] = json!({"id": old.to_string()});
    create_test(&h, "archived", by_id).await;
    let status = wait_reason(&h, "archived", "TemplateVersionArchived").await;
    assert_eq!(
        status.template_version_id.as_deref(),
        Some(old.to_string().as_str()),
        "pinned"
    );
    assert_eq!(
        condition(&status, "WorkspaceDeleted"),
        Some(("True".into(), "NotCreated".into()))
    );
    create_test(&h, "missing", spec(&format!("{}.nothere", s.organization))).await;
    let status = wait_reason(&h, "missing", "TemplateNotFound").await;
    assert_eq!(status.phase, Some(TemplateTestPhase::Pending));
    assert_eq!(creates(&h), 0);
}

#[tokio::test]
async fn a_delete_build_failure_is_counted_and_retried_with_backoff() {
    let h = harness("ktt-delfail").await;
    let s = setup(&h).await;
    h.server.set_build_outcome(BuildOutcome::FailDeletes);
    create_test(&h, "undeletable", spec(&format!("{}.docker", s.organization))).await;
    let status = wait_reason(&h, "undeletable", "DeleteBuildFailed").await;
    assert_eq!(status.phase, Some(TemplateTestPhase::Failed));
    assert_eq!(status.delete_attempts, Some(1));
    assert_eq!(
        condition(&status, "WorkspaceDeleted"),
        Some(("False".into(), "DeleteRetrying".into()))
    );
    h.server.set_build_outcome(BuildOutcome::Succeed);
    let status = wait_deleted(&h, "undeletable", "True", "Deleted").await;
    assert_eq!(status.delete_attempts, Some(1), "each failure is counted once");
    assert_eq!(creates(&h), 1);
}

#[tokio::test]
async fn coder_down_during_cleanup_keeps_the_finalizer_until_the_workspace_is_deleted() {
    let h = harness("ktt-down").await;
    let s = setup(&h).await;
    h.server.set_agents(vec![AgentSpec::new("connecting", "created")]);
    create_test(&h, "interrupted", spec(&format!("{}.docker", s.organization))).await;
    wait_reason(&h, "interrupted", "WaitingForAgents").await;
    h.server.add_fault(FaultRule {
        method: None,
        path_prefix: "/api/v2/workspace".to_owned(),
        fault: Fault::ServerError(503),
        times: None,
    });
    h.api::<CoderTemplateTest>()
        .delete("interrupted", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&h, "interrupted", "False", "ControlPlaneUnavailable").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        h.api::<CoderTemplateTest>()
            .get_opt("interrupted")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(h.server.workspaces().iter().filter(|(_, d)| !d).count(), 1);
    h.server.clear_faults();
    let tests = h.api::<CoderTemplateTest>();
    wait_for(
        || async { tests.get_opt("interrupted").await.unwrap().is_none() },
        "the test to go",
    )
    .await;
    assert!(h.server.workspaces().iter().all(|(_, deleted)| *deleted));
    assert_eq!(creates(&h), 1);
}

#[tokio::test]
async fn retain_keeps_a_failed_runs_workspace_only_when_the_control_plane_allows_it() {
    let h = harness("ktt-retain").await;
    let s = setup(&h).await;
    h.server.set_agents(Vec::new());
    let template = format!("{}.docker", s.organization);
    let retained = |name: &str| {
        let mut object = CoderTemplateTest::new(name, serde_json::from_value(spec(&template)).unwrap());
        object.metadata.annotations =
            Some([("coder.com/deletion-policy".to_owned(), "retain".to_owned())].into());
        object
    };
    // Not allowed: deleted anyway.
    h.api::<CoderTemplateTest>()
        .create(&PostParams::default(), &retained("refused"))
        .await
        .unwrap();
    wait_reason(&h, "refused", "NoAgents").await;
    wait_deleted(&h, "refused", "True", "Deleted").await;
    set_template_tests(&h, json!({"ownerUserID": s.tester, "allowRetain": true})).await;
    h.api::<CoderTemplateTest>()
        .create(&PostParams::default(), &retained("kept"))
        .await
        .unwrap();
    wait_reason(&h, "kept", "NoAgents").await;
    let status = wait_deleted(&h, "kept", "False", "Retained").await;
    let name = status.workspace_name.unwrap();
    assert!(h.server.workspaces().contains(&(name.clone(), false)));
    // Deleting the object keeps the workspace.
    h.api::<CoderTemplateTest>()
        .delete("kept", &DeleteParams::default())
        .await
        .unwrap();
    let tests = h.api::<CoderTemplateTest>();
    wait_for(
        || async { tests.get_opt("kept").await.unwrap().is_none() },
        "the test to go",
    )
    .await;
    assert!(h.server.workspaces().contains(&(name, false)));
}

#[tokio::test]
async fn the_ttl_deletes_a_finished_test() {
    let h = harness("ktt-ttl").await;
    let s = setup(&h).await;
    let mut with_ttl = spec(&format!("{}.docker", s.organization));
    with_ttl["ttlSecondsAfterFinished"] = json!(2);
    create_test(&h, "short", with_ttl).await;
    wait_reason(&h, "short", "Succeeded").await;
    let tests = h.api::<CoderTemplateTest>();
    wait_for(
        || async { tests.get_opt("short").await.unwrap().is_none() },
        "the TTL",
    )
    .await;
}

/// A second operator on the harness's cluster and Coder; it stops when the returned sender drops.
fn start_operator(h: &Harness) -> tokio::sync::watch::Sender<bool> {
    let requests = coder_k8s::kube_requests::KubeRequests::default();
    let client = requests.client(h.cp.config().unwrap()).unwrap();
    let metrics = coder_k8s_controllers::metrics::ReconcileMetrics::register(
        &mut prometheus_client::registry::Registry::default(),
    );
    let ctx = std::sync::Arc::new(coder_k8s_controllers::context::Context::new(
        client,
        crate::control_plane::settings(&h.ns),
        metrics,
    ));
    crate::control_plane::spawn_controllers(&ctx)
}

#[tokio::test]
async fn an_operator_killed_at_each_step_converges_with_one_workspace_created_and_deleted() {
    let h = harness("ktt-restart").await;
    let s = setup(&h).await;
    h.server.set_agents(vec![AgentSpec::new("connecting", "created")]);
    create_test(&h, "restarted", spec(&format!("{}.docker", s.organization))).await;
    // Killed while waiting for the agents.
    wait_reason(&h, "restarted", "WaitingForAgents").await;
    h.stop.send(true).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.server.set_agents(vec![AgentSpec::ready()]);
    let second = start_operator(&h);
    // Killed again right after the agents were ready, before or during the delete.
    wait_for(
        || async { status_of(&h, "restarted").await.agents_ready_time.is_some() },
        "the agents to be ready",
    )
    .await;
    drop(second);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _third = start_operator(&h);
    let status = wait_reason(&h, "restarted", "Succeeded").await;
    assert_eq!(
        condition(&status, "WorkspaceDeleted"),
        Some(("True".into(), "Deleted".into()))
    );
    assert_eq!(creates(&h), 1);
    assert_eq!(h.server.workspaces().len(), 1);
    assert!(h.server.workspaces()[0].1);
}

/// `PATCH /api/v2/templates/{id}` with a raw body (the client has no call for the deprecation).
async fn patch_template(h: &Harness, token: &str, template: uuid::Uuid, body: serde_json::Value) {
    let url = h
        .server
        .url()
        .join(&format!("api/v2/templates/{template}"))
        .unwrap();
    let answer = reqwest::Client::new()
        .patch(url)
        .header("Coder-Session-Token", token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
}

#[tokio::test]
async fn a_deprecated_template_and_a_failed_import_fail_before_any_create() {
    let h = harness("ktt-deprecated").await;
    let s = setup(&h).await;
    let token = h.token_of("codercontrolplane-sample-operator-token").await;
    create_template(&s.coder, &s.organization, "old").await;
    let old = s.coder.template_by_name(&s.organization, "old").await.unwrap();
    // Coder deprecates a template only with access control licensed.
    h.server.set_entitlement(
        "access_control",
        coder_k8s_coder_testserver::Entitlement::Entitled,
    );
    patch_template(&h, &token, old.id, json!({"deprecation_message": "use docker"})).await;
    create_test(&h, "deprecated", spec(&format!("{}.old", s.organization))).await;
    let status = wait_reason(&h, "deprecated", "TemplateDeprecated").await;
    assert_eq!(status.phase, Some(TemplateTestPhase::Failed));
    assert!(
        !status.message.as_deref().unwrap().contains("use docker"),
        "Coder's text stays out"
    );
    assert_eq!(
        condition(&status, "WorkspaceDeleted"),
        Some(("True".into(), "NotCreated".into()))
    );
    // A version whose import failed, named by its name.
    let docker = s.coder.template_by_name(&s.organization, "docker").await.unwrap();
    h.server.set_build_outcome(BuildOutcome::Fail);
    let broken = import_version(&s.coder, &s.organization, Some(docker.id)).await;
    h.server.set_build_outcome(BuildOutcome::Succeed);
    let broken_name = s.coder.template_version(broken).await.unwrap().name;
    let mut by_name = spec(&format!("{}.docker", s.organization));
    by_name["version"] = json!({"name": broken_name});
    create_test(&h, "broken", by_name).await;
    let status = wait_reason(&h, "broken", "TemplateVersionImportFailed").await;
    assert_eq!(
        status.template_version_name.as_deref(),
        Some(broken_name.as_str())
    );
    assert_eq!(creates(&h), 0);
}

#[tokio::test]
async fn a_rejected_create_fails_and_is_not_sent_again() {
    let h = harness("ktt-rejected").await;
    let s = setup(&h).await;
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: format!("/api/v2/users/{}/workspaces", s.tester),
        fault: Fault::Answer {
            status: 400,
            headers: Vec::new(),
            body: json!({"message": "Parameter \"secret\" is invalid: hunter2"}),
        },
        times: None,
    });
    create_test(&h, "rejected", spec(&format!("{}.docker", s.organization))).await;
    let status = wait_reason(&h, "rejected", "CreateRejected").await;
    assert!(!status.message.as_deref().unwrap().contains("hunter2"));
    assert_eq!(
        condition(&status, "WorkspaceDeleted"),
        Some(("True".into(), "NotCreated".into()))
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(creates(&h), 1);
}

#[tokio::test]
async fn builds_by_someone_else_fail_the_run_and_are_cleaned_up() {
    let h = harness("ktt-external").await;
    let s = setup(&h).await;
    h.server.set_agents(vec![AgentSpec::new("connecting", "created")]);
    let tester = h.coder(&h.server.mint_token("tester", &[]).await.unwrap());
    let template = format!("{}.docker", s.organization);
    for (name, transition, reason, deleted) in [
        (
            "stopped",
            Transition::Stop,
            "WorkspaceChangedExternally",
            "Deleted",
        ),
        ("removed", Transition::Delete, "", "DeletedExternally"),
    ] {
        create_test(&h, name, spec(&template)).await;
        let status = wait_reason(&h, name, "WaitingForAgents").await;
        let workspace = uuid::Uuid::parse_str(status.workspace_id.as_deref().unwrap()).unwrap();
        tester
            .create_workspace_build(workspace, &CreateWorkspaceBuildRequest::transition(transition))
            .await
            .unwrap();
        let status = wait_deleted(&h, name, "True", deleted).await;
        assert_eq!(status.phase, Some(TemplateTestPhase::Failed));
        let outcome = status.reason.unwrap();
        if reason.is_empty() {
            // Seen while the delete build runs, or once it finished.
            assert!(
                ["WorkspaceChangedExternally", "WorkspaceDeletedExternally"].contains(&outcome.as_str()),
                "{outcome}"
            );
        } else {
            assert_eq!(outcome, reason);
        }
    }
    assert_eq!(creates(&h), 2);
}

#[tokio::test]
async fn an_answer_about_another_template_waits_as_a_mismatch() {
    let h = harness("ktt-mismatch").await;
    let s = setup(&h).await;
    let docker = s.coder.template_by_name(&s.organization, "docker").await.unwrap();
    let mut other = serde_json::to_value(&docker).unwrap();
    other["name"] = json!("other");
    h.server.add_fault(FaultRule {
        method: Some("GET".to_owned()),
        path_prefix: format!(
            "/api/v2/organizations/{}/templates/docker",
            docker.organization_id
        ),
        fault: Fault::Answer {
            status: 200,
            headers: Vec::new(),
            body: other,
        },
        times: None,
    });
    create_test(&h, "confused", spec(&format!("{}.docker", s.organization))).await;
    let status = wait_reason(&h, "confused", "CoderAnswerMismatch").await;
    assert_eq!(status.phase, Some(TemplateTestPhase::Pending));
    assert_eq!(creates(&h), 0);
    h.server.clear_faults();
    wait_reason(&h, "confused", "Succeeded").await;
    assert_eq!(creates(&h), 1);
}

#[tokio::test]
async fn a_control_plane_that_goes_away_ends_the_run_and_releases_the_finalizer() {
    let h = harness("ktt-cpgone").await;
    let s = setup(&h).await;
    h.server.set_agents(vec![AgentSpec::new("connecting", "created")]);
    create_test(&h, "orphaned", spec(&format!("{}.docker", s.organization))).await;
    wait_reason(&h, "orphaned", "WaitingForAgents").await;
    h.api::<CoderControlPlane>()
        .delete(CP, &DeleteParams::default())
        .await
        .unwrap();
    let status = wait_reason(&h, "orphaned", "ControlPlaneGone").await;
    assert_eq!(status.phase, Some(TemplateTestPhase::Failed));
    assert_eq!(
        condition(&status, "WorkspaceDeleted"),
        Some(("Unknown".into(), "ControlPlaneGone".into()))
    );
    h.api::<CoderTemplateTest>()
        .delete("orphaned", &DeleteParams::default())
        .await
        .unwrap();
    let tests = h.api::<CoderTemplateTest>();
    wait_for(
        || async { tests.get_opt("orphaned").await.unwrap().is_none() },
        "the finalizer",
    )
    .await;
}

/// The Argo CD rule's `(status, message)` and the status Flux gives `object`.
fn health(object: &serde_json::Value) -> (String, String, String) {
    let (status, message) = argocd_health("config/gitops/argocd-health-codertemplatetest.lua", object);
    let flux = flux_health(
        "config/gitops/flux-healthcheck-codertemplatetest.yaml",
        "CoderTemplateTest",
        object,
    );
    (status, message, flux)
}

async fn object_json(h: &Harness, name: &str) -> serde_json::Value {
    serde_json::to_value(h.api::<CoderTemplateTest>().get(name).await.unwrap()).unwrap()
}

#[tokio::test]
async fn the_gitops_health_rules_read_the_controllers_objects_in_every_phase() {
    const PROGRESSING: &str = "InProgress";
    let h = harness("ktt-gitops").await;
    let s = setup(&h).await;
    let template = format!("{}.docker", s.organization);
    // Pending: no owner yet.
    set_template_tests(&h, json!({"ownerUserID": null})).await;
    create_test(&h, "pending", spec(&template)).await;
    wait_reason(&h, "pending", "OwnerNotConfigured").await;
    let pending = object_json(&h, "pending").await;
    let (status, message, flux) = health(&pending);
    assert_eq!((status.as_str(), flux.as_str()), ("Progressing", PROGRESSING));
    assert!(message.contains("spec.templateTests.ownerUserID"), "{message}");
    set_template_tests(&h, json!({"ownerUserID": s.tester})).await;
    // Running: the agents are not ready.
    h.server.set_agents(vec![AgentSpec::new("connecting", "created")]);
    create_test(&h, "running", spec(&template)).await;
    wait_reason(&h, "running", "WaitingForAgents").await;
    let (status, _, flux) = health(&object_json(&h, "running").await);
    assert_eq!((status.as_str(), flux.as_str()), ("Progressing", PROGRESSING));
    // Deleting (the run is interrupted): the finalizer waits while Coder is down.
    h.server.add_fault(FaultRule {
        method: None,
        path_prefix: "/api/v2/workspace".to_owned(),
        fault: Fault::ServerError(503),
        times: None,
    });
    h.api::<CoderTemplateTest>()
        .delete("running", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&h, "running", "False", "ControlPlaneUnavailable").await;
    let (status, message, flux) = health(&object_json(&h, "running").await);
    assert_eq!(
        (status.as_str(), message.as_str()),
        ("Progressing", "Deleting the test workspace")
    );
    assert_eq!(flux, PROGRESSING);
    h.server.clear_faults();
    // Failed.
    h.server.set_agents(Vec::new());
    create_test(&h, "failed", spec(&template)).await;
    wait_deleted(&h, "failed", "True", "Deleted").await;
    let (status, message, flux) = health(&object_json(&h, "failed").await);
    assert_eq!((status.as_str(), flux.as_str()), ("Degraded", "Failed"));
    assert!(message.contains("no agents"), "{message}");
    // Succeeded.
    h.server.set_agents(vec![AgentSpec::ready()]);
    create_test(&h, "passed", spec(&template)).await;
    wait_reason(&h, "passed", "Succeeded").await;
    let passed = object_json(&h, "passed").await;
    let (status, _, flux) = health(&passed);
    assert_eq!((status.as_str(), flux.as_str()), ("Healthy", "Current"));
    // A spec the controller has not seen yet (the same object one generation later) is in progress again.
    let mut unseen = passed.clone();
    unseen["metadata"]["generation"] = json!(passed["metadata"]["generation"].as_i64().unwrap() + 1);
    let (status, _, flux) = health(&unseen);
    assert_eq!((status.as_str(), flux.as_str()), ("Progressing", "InProgress"));
}

#[tokio::test]
async fn an_operator_restarted_while_confirming_a_create_never_sends_it_again() {
    let h = harness("ktt-restart-create").await;
    let s = setup(&h).await;
    let create_path = format!("/api/v2/users/{}/workspaces", s.tester);
    let template = format!("{}.docker", s.organization);
    // Applied, but the answer is a gateway's 502: the workspace exists and is proven from its builds.
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: create_path.clone(),
        fault: Fault::FailAfterHandling(502),
        times: Some(1),
    });
    h.server.set_agents(vec![AgentSpec::new("connecting", "created")]);
    create_test(&h, "applied", spec(&template)).await;
    wait_for(
        || async { status_of(&h, "applied").await.create_attempt_time.is_some() },
        "the create marker",
    )
    .await;
    h.stop.send(true).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.server.set_agents(vec![AgentSpec::ready()]);
    let second = start_operator(&h);
    wait_reason(&h, "applied", "Succeeded").await;
    assert_eq!(creates(&h), 1);
    // Not applied, and the answer says nothing (503): nothing shows up, so after the settle window the outcome is
    // unknown, and the create was still sent only once, across a restart.
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: create_path,
        fault: Fault::ServerError(503),
        times: Some(1),
    });
    create_test(&h, "lost", spec(&template)).await;
    wait_reason(&h, "lost", "ConfirmingCreate").await;
    drop(second);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _third = start_operator(&h);
    let status = wait_reason(&h, "lost", "CreateOutcomeUnknown").await;
    assert_eq!(status.phase, Some(TemplateTestPhase::Failed));
    assert_eq!(
        condition(&status, "WorkspaceDeleted"),
        Some(("True".into(), "NotCreated".into()))
    );
    assert_eq!(creates(&h), 2, "one create per test");
    assert_eq!(h.server.workspaces().len(), 1);
}

#[tokio::test]
async fn a_rate_limited_test_backs_off_then_goes_on() {
    let h = harness("ktt-429").await;
    let s = setup(&h).await;
    h.server.add_fault(FaultRule {
        method: Some("GET".to_owned()),
        path_prefix: format!("/api/v2/users/{}", s.tester),
        fault: Fault::RateLimited { retry_after_secs: 3 },
        times: Some(1),
    });
    create_test(&h, "limited", spec(&format!("{}.docker", s.organization))).await;
    let status = wait_reason(&h, "limited", "CoderUnavailable").await;
    assert_eq!(status.message.as_deref(), Some("get owner: Coder answered 429."));
    let test = h.api::<CoderTemplateTest>().get("limited").await.unwrap();
    assert!(
        test.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"coder.com/template-test-cleanup".to_owned())
    );
    // Retry-After holds the test for 3 s although it polls every fraction of a second.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        status_of(&h, "limited").await.reason.as_deref(),
        Some("CoderUnavailable")
    );
    wait_reason(&h, "limited", "Succeeded").await;
    assert_eq!(creates(&h), 1);
}

#[tokio::test]
async fn a_control_plane_change_resumes_a_waiting_test_at_once() {
    // A long poll (Pending: 15 s) so only the control plane watch can wake the test within a few seconds.
    let h =
        crate::control_plane::harness_with("ktt-watch", |s| s.retry_interval = Duration::from_secs(30)).await;
    let s = setup(&h).await;
    set_template_tests(&h, json!({"ownerUserID": null})).await;
    create_test(&h, "waiting", spec(&format!("{}.docker", s.organization))).await;
    wait_reason(&h, "waiting", "OwnerNotConfigured").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    set_template_tests(&h, json!({"ownerUserID": s.tester})).await;
    let started = std::time::Instant::now();
    wait_for(
        || async { status_of(&h, "waiting").await.create_attempt_time.is_some() },
        "the test to resume",
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(creates(&h), 1);
}

/// A harness whose simulated builds take `build` each, so a test can stop the operator while one runs.
async fn slow_build_harness(tag: &str, build: Duration) -> Harness {
    coder_k8s::telemetry::init(coder_k8s::cli::LogFormat::Text);
    let cp = crate::support::control_plane_with_crds().await;
    let ns = cp.namespace(tag).await.unwrap().name().to_owned();
    let db_name = format!("ktt_{}_{}", tag.replace('-', "_"), uuid::Uuid::new_v4().simple());
    let db_url = coder_k8s_testenv::postgres::shared()
        .await
        .unwrap()
        .create_coder_database(&db_name)
        .await
        .unwrap();
    let mut config = coder_k8s_coder_testserver::Config::new(&db_url);
    config.build_duration = build;
    let server = coder_k8s_coder_testserver::TestServer::start(config)
        .await
        .unwrap();
    Harness::start(cp, ns, db_url, server, |_| {})
}

/// Stops the operator once `reason` shows, then starts a new one; returns the new operator's stop handle.
async fn restart_at(
    h: &Harness,
    name: &str,
    reason: &str,
    running: Option<tokio::sync::watch::Sender<bool>>,
) -> tokio::sync::watch::Sender<bool> {
    wait_reason(h, name, reason).await;
    match running {
        Some(operator) => drop(operator),
        None => h.stop.send(true).unwrap(),
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    start_operator(h)
}

#[tokio::test]
async fn an_operator_restarted_while_the_start_and_the_delete_build_run_sends_each_once() {
    let h = slow_build_harness("ktt-slow", Duration::from_secs(3)).await;
    let s = setup(&h).await;
    create_test(&h, "slow", spec(&format!("{}.docker", s.organization))).await;
    let second = restart_at(&h, "slow", "WaitingForBuild", None).await;
    let _third = restart_at(&h, "slow", "DeletingWorkspace", Some(second)).await;
    let status = wait_reason(&h, "slow", "Succeeded").await;
    assert_eq!(
        condition(&status, "WorkspaceDeleted"),
        Some(("True".into(), "Deleted".into()))
    );
    assert_eq!(creates(&h), 1);
    assert_eq!(builds_posted(&h), 1, "one delete build");
    assert_eq!(status.delete_attempts, None);
    assert_eq!(h.server.workspaces().len(), 1);
}

#[tokio::test]
async fn a_test_deleted_while_its_create_is_unconfirmed_waits_until_the_create_cannot_land() {
    let h = harness("ktt-unconfirmed").await;
    let s = setup(&h).await;
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: format!("/api/v2/users/{}/workspaces", s.tester),
        fault: Fault::ServerError(503),
        times: Some(1),
    });
    create_test(&h, "unsure", spec(&format!("{}.docker", s.organization))).await;
    wait_reason(&h, "unsure", "ConfirmingCreate").await;
    h.api::<CoderTemplateTest>()
        .delete("unsure", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&h, "unsure", "Unknown", "CreateOutcomeUnknown").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        h.api::<CoderTemplateTest>()
            .get_opt("unsure")
            .await
            .unwrap()
            .is_some()
    );
    // After the settle window (30 s here) nothing can land any more: the finalizer goes.
    let tests = h.api::<CoderTemplateTest>();
    wait_for(
        || async { tests.get_opt("unsure").await.unwrap().is_none() },
        "the finalizer",
    )
    .await;
    assert_eq!(creates(&h), 1);
    assert!(h.server.workspaces().is_empty());
}

async fn get_text(url: &str) -> Option<String> {
    let answer = reqwest::get(url).await.ok()?;
    answer.status().is_success().then_some(())?;
    answer.text().await.ok()
}

#[tokio::test]
async fn the_operator_binary_logs_answer_mismatches_and_counts_finished_runs() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Secret;

    let cp = crate::support::control_plane_with_crds().await;
    let ns = cp.namespace("ktt-binary").await.unwrap().name().to_owned();
    let db_url = coder_k8s_testenv::postgres::shared()
        .await
        .unwrap()
        .create_coder_database(&format!("ktt_binary_{}", uuid::Uuid::new_v4().simple()))
        .await
        .unwrap();
    let server =
        coder_k8s_coder_testserver::TestServer::start(coder_k8s_coder_testserver::Config::new(&db_url))
            .await
            .unwrap();
    let admin = cp.client().unwrap();
    let api = |client: &kube::Client| kube::Api::<CoderControlPlane>::namespaced(client.clone(), &ns);
    crate::control_plane::put_secret(
        &kube::Api::<Secret>::namespaced(admin.clone(), &ns),
        "coder-db-app",
        &[("uri", &db_url)],
    )
    .await;
    let cp_spec = json!({
        "database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}},
        "service": {"port": server.url().port().unwrap()},
    });
    api(&admin)
        .create(
            &PostParams::default(),
            &CoderControlPlane::new("coder", serde_json::from_value(cp_spec).unwrap()),
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("operator.log");
    let [port] = coder_k8s_testenv::free_ports().unwrap();
    let _operator = crate::support::Process(
        std::process::Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
            .args([
                "--app=controller",
                "--leader-elect=false",
                "--service-address-override=127.0.0.1",
                "--requeue-interval=1s",
                "--entitlements-interval=1s",
            ])
            .arg(format!("--watch-namespace={ns}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{port}"))
            .env("KUBECONFIG", cp.kubeconfig_path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    // Play kubelet for the Coder Deployment.
    let deployments = kube::Api::<Deployment>::namespaced(admin.clone(), &ns);
    let mut name = None;
    for _ in 0..300 {
        name = deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .next()
            .and_then(|d| d.metadata.name);
        if name.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ready = json!({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}});
    deployments
        .patch_status(
            &name.expect("the Coder Deployment"),
            &PatchParams::default(),
            &Patch::Merge(&ready),
        )
        .await
        .unwrap();
    let control_planes = api(&admin);
    wait_for(
        || async {
            control_planes
                .get("coder")
                .await
                .unwrap()
                .status
                .is_some_and(|s| s.operator_access_ready == Some(true))
        },
        "operator access",
    )
    .await;
    let secret = kube::Api::<Secret>::namespaced(admin.clone(), &ns)
        .get("coder-operator-token")
        .await
        .unwrap();
    let token = String::from_utf8(secret.data.unwrap()["token"].0.clone()).unwrap();
    let coder = CoderClient::new(server.url(), coder_k8s_coder_client::SessionToken::new(token)).unwrap();
    let organization = coder.default_organization().await.unwrap().name;
    create_template(&coder, &organization, "docker").await;
    server.mint_token("tester", &[]).await.unwrap();
    let tester = coder.user("tester").await.unwrap().id.to_string();
    control_planes
        .patch(
            "coder",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"templateTests": {"ownerUserID": tester}}})),
        )
        .await
        .unwrap();
    let docker = coder.template_by_name(&organization, "docker").await.unwrap();
    let mut other = serde_json::to_value(&docker).unwrap();
    other["name"] = json!("other");
    server.add_fault(FaultRule {
        method: Some("GET".to_owned()),
        path_prefix: format!(
            "/api/v2/organizations/{}/templates/docker",
            docker.organization_id
        ),
        fault: Fault::Answer {
            status: 200,
            headers: Vec::new(),
            body: other,
        },
        times: Some(2),
    });
    let mut test_spec = spec(&format!("{organization}.docker"));
    test_spec["controlPlaneRef"]["name"] = json!("coder");
    let tests = kube::Api::<CoderTemplateTest>::namespaced(admin.clone(), &ns);
    tests
        .create(
            &PostParams::default(),
            &CoderTemplateTest::new("binary", serde_json::from_value(test_spec).unwrap()),
        )
        .await
        .unwrap();
    wait_for(
        || async {
            tests
                .get("binary")
                .await
                .unwrap()
                .status
                .and_then(|s| s.reason)
                .as_deref()
                == Some("Succeeded")
        },
        "the run to succeed",
    )
    .await;
    let metrics = format!("http://127.0.0.1:{port}/metrics");
    let mut exposed = String::new();
    for _ in 0..40 {
        exposed = get_text(&metrics).await.unwrap_or_default();
        if exposed.contains("coder_k8s_template_test_runs_total{reason=\"Succeeded\"} 1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        exposed.contains("coder_k8s_template_test_runs_total{reason=\"Succeeded\"} 1"),
        "{exposed}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("Coder answered something other than the controller asked for"),
        "{text}"
    );
}
