//! `codertemplates` writes and `spec.files` against the Coder API test server (with its PostgreSQL): create from
//! files or a version, the import wait and its settings, update (merged source, activation, metadata, 409 when
//! the template changes meanwhile), delete, the name rules, dry-run, the source limits and the template-version
//! list rules. Every test checks the test server's whole request log for the writes it expects, and no others.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use coder_k8s_aggregated_apiserver::coder::template_import::{
    BACKOFF_AFTER_ENV, INITIAL_POLL_ENV, MAX_POLL_ENV, SettingsSource, WAIT_TIMEOUT_ENV,
};
use coder_k8s_aggregated_apiserver::coder::{StaticBackend, StaticProvider, template_versions, templates};
use coder_k8s_aggregated_apiserver::generic::{
    ApiError, Deleted, EventType, Registry, RequestContext, Storage, UserInfo,
};
use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::template_versions::CreateTemplateVersionRequest;
use coder_k8s_coder_client::types::templates::{CreateTemplateRequest, Template, UpdateTemplateMeta};
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{BuildOutcome, Config, Fault, FaultRule, RecordedRequest, TestServer};
use coder_k8s_control_plane_access::ClientSettings;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Preconditions};
use serde_json::{Value, json};

const NAMESPACE: &str = "coder-ns";

struct Coder {
    server: TestServer,
    token: String,
    client: CoderClient,
    organization: String,
}

async fn fresh_db(tag: &str) -> String {
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    pg.unique_coder_database(&format!("tplw_{tag}")).await.unwrap()
}

async fn coder(tag: &str, build_duration: Duration) -> Coder {
    coder_k8s_coder_client::install_ring_provider();
    let db_url = fresh_db(tag).await;
    let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let mut config = Config::new(&db_url);
    config.build_duration = build_duration;
    let server = TestServer::start(config).await.unwrap();
    let client = CoderClient::new(server.url(), SessionToken::new(token.clone())).unwrap();
    let organization = client.default_organization().await.unwrap().name;
    // Each test reads the log of what its own requests caused.
    server.clear_requests();
    Coder {
        server,
        token,
        client,
        organization,
    }
}

/// Import-wait settings from a map: fast polling, and whatever the test adds.
fn settings(extra: &[(&str, &str)]) -> SettingsSource {
    let mut map: BTreeMap<String, String> = [
        (WAIT_TIMEOUT_ENV, "20s"),
        (BACKOFF_AFTER_ENV, "0s"),
        (INITIAL_POLL_ENV, "20ms"),
        (MAX_POLL_ENV, "20ms"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    for (k, v) in extra {
        map.insert((*k).to_owned(), (*v).to_owned());
    }
    Arc::new(move |name| map.get(name).cloned())
}

fn registry(coder: &Coder, settings: SettingsSource) -> Registry {
    let backend = StaticBackend {
        url: coder.server.url(),
        token: coder.token.clone(),
        namespace: NAMESPACE.to_owned(),
    };
    let client_settings = ClientSettings {
        timeout: Duration::from_secs(10),
        service_address_override: None,
    };
    let provider = Arc::new(StaticProvider::new(&backend, &client_settings).unwrap());
    Registry {
        group: "aggregation.coder.com",
        version: "v1alpha1",
        resources: vec![
            templates::resource_with(provider.clone(), settings),
            template_versions::resource(provider),
        ],
    }
}

fn storage(registry: &Registry, plural: &str) -> Arc<dyn Storage> {
    registry.resource(plural).unwrap().storage.clone()
}

fn ctx() -> RequestContext {
    ctx_within(Duration::from_secs(30))
}

fn ctx_within(timeout: Duration) -> RequestContext {
    RequestContext {
        user: UserInfo::default(),
        namespace: Some(NAMESPACE.to_owned()),
        deadline: tokio::time::Instant::now() + timeout,
        dry_run: false,
        query: BTreeMap::new(),
    }
}

fn files(entries: &[(&str, &str)]) -> Value {
    json!(
        entries
            .iter()
            .map(|(p, c)| ((*p).to_owned(), (*c).to_owned()))
            .collect::<BTreeMap<_, _>>()
    )
}

fn manifest(org: &str, template: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["organization"] = json!(org);
    json!({
        "apiVersion": "aggregation.coder.com/v1alpha1",
        "kind": "CoderTemplate",
        "metadata": {"name": format!("{org}.{template}"), "namespace": NAMESPACE},
        "spec": spec,
    })
}

/// The request log as `METHOD path`.
fn log(server: &TestServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|r: &RecordedRequest| format!("{} {}", r.method, r.path))
        .collect()
}

fn writes(server: &TestServer) -> Vec<String> {
    log(server)
        .into_iter()
        .filter(|line| !line.starts_with("GET "))
        .collect()
}

fn position(log: &[String], predicate: impl Fn(&str) -> bool) -> usize {
    log.iter()
        .position(|l| predicate(l))
        .unwrap_or_else(|| panic!("no matching request in {log:#?}"))
}

/// A zip with raw entries (binary ones too).
fn zip_of(entries: &[(&str, &[u8])]) -> Bytes {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (path, bytes) in entries {
        writer
            .start_file(*path, zip::write::SimpleFileOptions::default())
            .unwrap();
        writer.write_all(bytes).unwrap();
    }
    Bytes::from(writer.finish().unwrap().into_inner())
}

fn zip_entries(zip: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut archive = zip::ZipArchive::new(Cursor::new(zip)).unwrap();
    (0..archive.len())
        .map(|i| {
            let mut file = archive.by_index(i).unwrap();
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).unwrap();
            (file.name().unwrap().into_owned(), bytes)
        })
        .collect()
}

async fn eventually<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..300 {
        if let Some(value) = probe().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// A template `name` created out of band from `zip`, its import waited for.
async fn template_from_zip(coder: &Coder, name: &str, zip: Bytes) -> Template {
    let version = imported_version(coder, zip, None).await;
    coder
        .client
        .create_template(
            &coder.organization,
            &CreateTemplateRequest {
                name: name.to_owned(),
                display_name: "Original".to_owned(),
                template_version_id: version,
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap()
}

async fn imported_version(coder: &Coder, zip: Bytes, template: Option<uuid::Uuid>) -> uuid::Uuid {
    let file = coder.client.upload_file(ArchiveKind::Zip, zip).await.unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.template_id = template;
    let version = coder
        .client
        .create_template_version(&coder.organization, &request)
        .await
        .unwrap();
    eventually("the import", async || {
        let v = coder.client.template_version(version.id).await.unwrap();
        (v.job.status == JobStatus::Succeeded).then_some(())
    })
    .await;
    version.id
}

fn assert_error(result: Result<impl std::fmt::Debug, ApiError>, code: u16, contains: &str) -> ApiError {
    let error = result.unwrap_err();
    assert_eq!(error.code, code, "{error:?}");
    assert!(
        error.message.contains(contains),
        "{:?} lacks {contains:?}",
        error.message
    );
    error
}

#[tokio::test]
async fn create_from_files_uploads_a_zip_waits_for_the_import_then_creates_the_template() {
    let coder = coder("create", Duration::from_millis(400)).await;
    let registry = registry(&coder, settings(&[]));
    let templates = storage(&registry, "codertemplates");
    let org = coder.organization.clone();
    let source = files(&[("main.tf", "terraform {}\n"), ("modules/app/ü.tf", "# ü\n")]);
    let object = manifest(
        &org,
        "from-files",
        json!({"files": source, "displayName": "From Files", "icon": "/i.png"}),
    );

    let written = templates.create(&ctx(), object).await.unwrap();

    assert!(written.created);
    assert_eq!(written.event, Some(EventType::Added));
    assert_eq!(written.object["metadata"]["name"], format!("{org}.from-files"));
    assert_eq!(written.object["spec"]["displayName"], "From Files");
    let log = log(&coder.server);
    let upload = position(&log, |l| l == "POST /api/v2/files");
    let version = position(&log, |l| {
        l == format!("POST /api/v2/organizations/{org}/templateversions")
    });
    let create = position(&log, |l| {
        l == format!("POST /api/v2/organizations/{org}/templates")
    });
    let polls = log[version..create]
        .iter()
        .filter(|l| l.starts_with("GET /api/v2/templateversions/"))
        .count();
    assert!(upload < version && version < create, "{log:#?}");
    assert!(
        polls >= 2,
        "the import of a 400 ms job is waited for with polls: {log:#?}"
    );
    let uploaded = coder.server.uploaded_files();
    assert_eq!(uploaded.len(), 1);
    assert_eq!(uploaded[0].content_type, "application/zip");
    let entries = zip_entries(&uploaded[0].data);
    assert_eq!(entries["main.tf"], b"terraform {}\n");
    let got = templates.get(&ctx(), &format!("{org}.from-files")).await.unwrap();
    assert_eq!(got["spec"]["files"], source);
    let listed = templates.list(&ctx()).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(
        listed[0]["spec"].get("files").is_none(),
        "lists leave files out: {}",
        listed[0]
    );
}

#[tokio::test]
async fn a_failed_import_creates_no_template() {
    let coder = coder("failed", Duration::from_millis(100)).await;
    coder.server.set_build_outcome(BuildOutcome::Fail);
    let registry = registry(&coder, settings(&[]));
    let object = manifest(
        &coder.organization,
        "broken",
        json!({"files": files(&[("main.tf", "x")])}),
    );
    let error = assert_error(
        storage(&registry, "codertemplates").create(&ctx(), object).await,
        400,
        "build ended with status \"failed\": simulated provisioner failure",
    );
    assert!(
        error.message.starts_with("template version \""),
        "{}",
        error.message
    );
    let writes = writes(&coder.server);
    assert_eq!(writes.len(), 2, "upload and version only: {writes:#?}");
    assert!(!writes.iter().any(|w| w.ends_with("/templates")), "{writes:#?}");
}

#[tokio::test]
async fn the_import_wait_ends_at_the_configured_timeout_or_the_request_deadline() {
    let coder = coder("slow", Duration::from_secs(20)).await;
    let org = coder.organization.clone();
    let configured = registry(&coder, settings(&[(WAIT_TIMEOUT_ENV, "300ms")]));
    let object = manifest(&org, "slow", json!({"files": files(&[("main.tf", "x")])}));
    let started = std::time::Instant::now();
    assert_error(
        storage(&configured, "codertemplates")
            .create(&ctx(), object.clone())
            .await,
        400,
        "did not succeed within 300ms (last status: \"",
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    let patient = registry(&coder, settings(&[(WAIT_TIMEOUT_ENV, "25m")]));
    let error = assert_error(
        storage(&patient, "codertemplates")
            .create(&ctx_within(Duration::from_secs(2)), object)
            .await,
        504,
        "did not succeed within",
    );
    assert!(
        error.message.contains("the request deadline was reached"),
        "{}",
        error.message
    );
    assert!(!error.message.contains("127.0.0.1"), "{}", error.message);
    let writes = writes(&coder.server);
    assert!(
        !writes
            .iter()
            .any(|w| w == &format!("POST /api/v2/organizations/{org}/templates")),
        "{writes:#?}"
    );
}

#[tokio::test]
async fn invalid_wait_settings_fail_the_request_after_the_version_exists() {
    let coder = coder("settings", Duration::from_millis(100)).await;
    let registry = registry(&coder, settings(&[(INITIAL_POLL_ENV, "0s")]));
    let object = manifest(
        &coder.organization,
        "settings",
        json!({"files": files(&[("main.tf", "x")])}),
    );
    assert_error(
        storage(&registry, "codertemplates").create(&ctx(), object).await,
        500,
        "invalid template build wait settings: CODER_K8S_TEMPLATE_BUILD_INITIAL_POLL_INTERVAL must be > 0, got 0s",
    );
    let writes = writes(&coder.server);
    assert_eq!(
        writes,
        [
            "POST /api/v2/files".to_owned(),
            format!(
                "POST /api/v2/organizations/{}/templateversions",
                coder.organization
            )
        ]
    );
}

#[tokio::test]
async fn create_from_a_version_id_does_not_upload_or_wait() {
    let coder = coder("version", Duration::from_millis(100)).await;
    let version = imported_version(&coder, zip_of(&[("main.tf", b"x")]), None).await;
    coder.server.clear_requests();
    let registry = registry(&coder, settings(&[]));
    let object = manifest(
        &coder.organization,
        "pinned",
        json!({"versionID": version.to_string()}),
    );
    let written = storage(&registry, "codertemplates")
        .create(&ctx(), object)
        .await
        .unwrap();
    assert_eq!(written.object["status"]["activeVersionID"], version.to_string());
    let log = log(&coder.server);
    assert!(
        !log.iter().any(|l| l.starts_with("GET /api/v2/templateversions/")),
        "{log:#?}"
    );
    assert_eq!(
        writes(&coder.server),
        [format!(
            "POST /api/v2/organizations/{}/templates",
            coder.organization
        )]
    );

    let bad = manifest(
        &coder.organization,
        "pinned-bad",
        json!({"versionID": "not-a-uuid"}),
    );
    coder.server.clear_requests();
    assert_error(
        storage(&registry, "codertemplates").create(&ctx(), bad).await,
        400,
        "parse template spec.versionID \"not-a-uuid\"",
    );
    assert!(
        coder.server.requests().is_empty(),
        "refused before any Coder call"
    );
}

#[tokio::test]
async fn an_update_of_the_source_keeps_binary_files_activates_the_version_then_updates_the_metadata() {
    let coder = coder("update", Duration::from_millis(300)).await;
    let png: &[u8] = &[0x89, b'P', b'N', b'G', 0xff, 0x00, 0xfe];
    let before = template_from_zip(&coder, "app", zip_of(&[("main.tf", b"old"), ("logo.png", png)])).await;
    let registry = registry(&coder, settings(&[]));
    let templates = storage(&registry, "codertemplates");
    let name = format!("{}.app", coder.organization);
    let current = templates.get(&ctx(), &name).await.unwrap();
    assert_eq!(
        current["spec"]["files"],
        files(&[("main.tf", "old")]),
        "binary files are not shown"
    );
    let mut desired = current.clone();
    desired["spec"]["files"] = files(&[("main.tf", "new"), ("extra.tf", "added")]);
    desired["spec"]["displayName"] = json!("Renamed");
    coder.server.clear_requests();

    let written = templates.update(&ctx(), &name, desired, false).await.unwrap();

    assert!(!written.created);
    assert_eq!(written.event, Some(EventType::Modified));
    assert_eq!(written.object["spec"]["displayName"], "Renamed");
    assert_eq!(
        written.object["spec"]["files"],
        files(&[("extra.tf", "added"), ("main.tf", "new")])
    );
    let id = before.id;
    let writes = writes(&coder.server);
    assert_eq!(
        writes,
        [
            "POST /api/v2/files".to_owned(),
            format!(
                "POST /api/v2/organizations/{}/templateversions",
                coder.organization
            ),
            format!("PATCH /api/v2/templates/{id}/versions"),
            format!("PATCH /api/v2/templates/{id}"),
        ],
        "activation before the metadata"
    );
    let after = coder.client.template(id).await.unwrap();
    assert_ne!(after.active_version_id, before.active_version_id);
    assert_eq!(after.display_name, "Renamed");
    let uploaded = coder.server.uploaded_files();
    let merged = zip_entries(&uploaded.last().unwrap().data);
    assert_eq!(
        merged.keys().collect::<Vec<_>>(),
        ["extra.tf", "logo.png", "main.tf"]
    );
    assert_eq!(merged["logo.png"], png, "the binary file is kept byte for byte");
    let version = coder
        .client
        .template_version(after.active_version_id)
        .await
        .unwrap();
    assert_eq!(version.template_id, Some(id));
}

#[tokio::test]
async fn an_unchanged_update_writes_nothing_and_a_metadata_change_only_patches_the_metadata() {
    let coder = coder("noop", Duration::from_millis(100)).await;
    let template = template_from_zip(&coder, "same", zip_of(&[("main.tf", b"x")])).await;
    let registry = registry(&coder, settings(&[]));
    let templates = storage(&registry, "codertemplates");
    let name = format!("{}.same", coder.organization);
    let current = templates.get(&ctx(), &name).await.unwrap();
    coder.server.clear_requests();
    let written = templates
        .update(&ctx(), &name, current.clone(), false)
        .await
        .unwrap();
    assert_eq!(written.event, None);
    assert_eq!(written.object, current);
    assert!(writes(&coder.server).is_empty(), "{:#?}", log(&coder.server));

    let mut renamed = current;
    renamed["spec"]["description"] = json!("now described");
    coder.server.clear_requests();
    templates.update(&ctx(), &name, renamed, false).await.unwrap();
    assert_eq!(
        writes(&coder.server),
        [format!("PATCH /api/v2/templates/{}", template.id)]
    );
}

#[tokio::test]
async fn update_rules_are_checked_before_any_write() {
    let coder = coder("rules", Duration::from_millis(100)).await;
    template_from_zip(&coder, "ruled", zip_of(&[("main.tf", b"x")])).await;
    let registry = registry(&coder, settings(&[]));
    let templates = storage(&registry, "codertemplates");
    let name = format!("{}.ruled", coder.organization);
    let current = templates.get(&ctx(), &name).await.unwrap();
    coder.server.clear_requests();
    let change = |path: &[&str], value: Value| {
        let mut object = current.clone();
        let mut target = &mut object;
        for key in path {
            target = &mut target[*key];
        }
        *target = value;
        object
    };
    let cases = [
        (
            change(&["metadata", "resourceVersion"], json!("")),
            400,
            "metadata.resourceVersion is required for update",
        ),
        (
            change(&["metadata", "resourceVersion"], json!("1")),
            409,
            "resource version mismatch: got \"1\"",
        ),
        (
            change(&["spec", "organization"], json!("elsewhere")),
            400,
            "spec.organization \"elsewhere\" must match existing organization",
        ),
        (
            change(
                &["spec", "versionID"],
                json!(uuid::Uuid::from_u128(9).to_string()),
            ),
            400,
            "spec.versionID is read-only",
        ),
        (
            change(&["spec", "files"], files(&[("../escape.tf", "x")])),
            400,
            "invalid template spec.files: validate template source path \"../escape.tf\"",
        ),
    ];
    for (object, code, message) in cases {
        assert_error(
            templates.update(&ctx(), &name, object, false).await,
            code,
            message,
        );
    }
    assert!(writes(&coder.server).is_empty(), "{:#?}", log(&coder.server));
}

#[tokio::test]
async fn an_update_conflicts_when_the_template_changes_during_the_import() {
    let coder = coder("conflict", Duration::from_millis(1500)).await;
    let before = template_from_zip(&coder, "busy", zip_of(&[("main.tf", b"x")])).await;
    let registry = registry(&coder, settings(&[]));
    let templates = storage(&registry, "codertemplates");
    let name = format!("{}.busy", coder.organization);
    let mut desired = templates.get(&ctx(), &name).await.unwrap();
    desired["spec"]["files"] = files(&[("main.tf", "y")]);
    desired["spec"]["displayName"] = json!("Mine");
    coder.server.clear_requests();
    let update = tokio::spawn({
        let templates = templates.clone();
        let name = name.clone();
        async move { templates.update(&ctx(), &name, desired, false).await }
    });
    let org = coder.organization.clone();
    eventually("the new version", async || {
        log(&coder.server)
            .iter()
            .any(|l| l == &format!("POST /api/v2/organizations/{org}/templateversions"))
            .then_some(())
    })
    .await;
    let meta = UpdateTemplateMeta {
        display_name: Some("Changed Elsewhere".into()),
        ..UpdateTemplateMeta::from_template(&before)
    };
    coder.client.update_template_meta(before.id, &meta).await.unwrap();

    let error = assert_error(
        update.await.unwrap(),
        409,
        "changed in Coder while the new source was importing",
    );
    assert_eq!(error.reason, "Conflict");
    let writes = writes(&coder.server);
    assert!(
        !writes.iter().any(|w| w.ends_with("/versions")),
        "no activation: {writes:#?}"
    );
    assert_eq!(
        writes
            .iter()
            .filter(|w| *w == &format!("PATCH /api/v2/templates/{}", before.id))
            .count(),
        1,
        "only the out-of-band metadata change: {writes:#?}"
    );
    let after = coder.client.template(before.id).await.unwrap();
    assert_eq!(after.active_version_id, before.active_version_id);
    assert_eq!(after.display_name, "Changed Elsewhere");
}

#[tokio::test]
async fn source_limits_are_enforced_at_their_boundaries_before_any_write() {
    let coder = coder("limits", Duration::from_millis(50)).await;
    let registry = registry(&coder, settings(&[]));
    let templates = storage(&registry, "codertemplates");
    let org = coder.organization.clone();
    let at_limit = "a".repeat(2 << 20);
    let over_limit = "a".repeat((2 << 20) + 1);
    let many = |n: usize| {
        json!(
            (0..n)
                .map(|i| (format!("f{i}.tf"), String::new()))
                .collect::<BTreeMap<_, _>>()
        )
    };

    assert_error(
        templates
            .create(
                &ctx(),
                manifest(&org, "big", json!({"files": files(&[("big.tf", &over_limit)])})),
            )
            .await,
        400,
        "invalid template spec.files: template source file \"big.tf\" exceeds max file size: 2097153 > 2097152",
    );
    assert_error(
        templates
            .create(&ctx(), manifest(&org, "many", json!({"files": many(2001)})))
            .await,
        400,
        "invalid template spec.files: template source file count exceeds limit: 2001 > 2000",
    );
    assert_error(
        templates
            .create(&ctx(), manifest(&org, "bad-utf8", json!({"files": {"": "x"}})))
            .await,
        400,
        "path must not be empty",
    );
    assert!(
        coder.server.requests().is_empty(),
        "refused before any Coder call: {:#?}",
        log(&coder.server)
    );

    let written = templates
        .create(
            &ctx(),
            manifest(&org, "big", json!({"files": files(&[("big.tf", &at_limit)])})),
        )
        .await
        .unwrap();
    assert!(written.created);
    let written = templates
        .create(&ctx(), manifest(&org, "many", json!({"files": many(2000)})))
        .await
        .unwrap();
    assert!(written.created);
    let got = templates.get(&ctx(), &format!("{org}.many")).await.unwrap();
    assert_eq!(got["spec"]["files"].as_object().unwrap().len(), 2000);
}

#[tokio::test]
async fn names_must_be_canonical_and_other_organizations_are_not_found() {
    let coder = coder("names", Duration::from_millis(50)).await;
    template_from_zip(&coder, "starter", zip_of(&[("main.tf", b"x")])).await;
    let registry = registry(&coder, settings(&[]));
    let templates = storage(&registry, "codertemplates");
    let org = coder.organization.clone();
    let canonical = format!("{org}.starter");
    let current = templates.get(&ctx(), &canonical).await.unwrap();
    coder.server.clear_requests();

    let alias = assert_error(
        templates.get(&ctx(), "default.Starter").await,
        400,
        &format!("organization {org:?}"),
    );
    assert!(
        alias.message.contains("template segment is not checked"),
        "{}",
        alias.message
    );
    assert!(
        !alias.message.contains("use the canonical name"),
        "{}",
        alias.message
    );
    assert_error(
        templates.get(&ctx(), &format!("{org}.STARTER")).await,
        400,
        &format!("use the canonical name {canonical:?}"),
    );
    let upper_org = format!("{}.starter", org.to_uppercase());
    assert_error(
        templates.get(&ctx(), &upper_org).await,
        400,
        "template segment is not checked",
    );
    assert_error(templates.get(&ctx(), "nowhere.starter").await, 404, "not found");
    // An organization Coder refuses to show is as absent as a missing one.
    coder.server.add_fault(FaultRule {
        method: Some("GET".to_owned()),
        path_prefix: format!("/api/v2/organizations/{org}"),
        fault: Fault::Forbidden,
        times: Some(1),
    });
    assert_error(templates.get(&ctx(), &canonical).await, 404, "not found");
    let mut object = current.clone();
    object["metadata"]["name"] = json!(format!("{org}.STARTER"));
    object["spec"]["displayName"] = json!("changed");
    assert_error(
        templates
            .update(&ctx(), &format!("{org}.STARTER"), object, false)
            .await,
        400,
        "canonical",
    );
    assert_error(
        templates
            .delete(&ctx(), &format!("{org}.STARTER"), &DeleteOptions::default())
            .await,
        400,
        "canonical",
    );
    assert_error(
        templates
            .create(
                &ctx(),
                manifest("default", "fresh", json!({"files": files(&[("main.tf", "x")])})),
            )
            .await,
        400,
        "template segment is not checked",
    );
    assert!(writes(&coder.server).is_empty(), "{:#?}", log(&coder.server));
}

#[tokio::test]
async fn dry_runs_are_refused_before_any_coder_call() {
    let coder = coder("dryrun", Duration::from_millis(50)).await;
    let registry = registry(&coder, settings(&[]));
    let templates = storage(&registry, "codertemplates");
    let org = coder.organization.clone();
    let mut dry = ctx();
    dry.dry_run = true;
    let object = manifest(&org, "dry", json!({"files": files(&[("main.tf", "x")])}));
    let message = "server-side dry-run is not supported for codertemplates; nothing was changed";
    assert_error(templates.create(&dry, object.clone()).await, 400, message);
    assert_error(
        templates.update(&dry, &format!("{org}.dry"), object, true).await,
        400,
        message,
    );
    assert_error(
        templates
            .delete(&dry, &format!("{org}.dry"), &DeleteOptions::default())
            .await,
        400,
        message,
    );
    assert!(coder.server.requests().is_empty(), "{:#?}", log(&coder.server));
}

#[tokio::test]
async fn delete_honours_preconditions_and_removes_the_template() {
    let coder = coder("delete", Duration::from_millis(50)).await;
    let template = template_from_zip(&coder, "gone", zip_of(&[("main.tf", b"x")])).await;
    let registry = registry(&coder, settings(&[]));
    let templates = storage(&registry, "codertemplates");
    let name = format!("{}.gone", coder.organization);
    coder.server.clear_requests();
    let stale = DeleteOptions {
        preconditions: Some(Preconditions {
            uid: Some(uuid::Uuid::from_u128(1).to_string()),
            resource_version: None,
        }),
        ..DeleteOptions::default()
    };
    assert_error(
        templates.delete(&ctx(), &name, &stale).await,
        409,
        "Precondition failed: UID in precondition",
    );
    let empty_rv = DeleteOptions {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some(String::new()),
        }),
        ..DeleteOptions::default()
    };
    assert_error(
        templates.delete(&ctx(), &name, &empty_rv).await,
        409,
        "ResourceVersion in precondition: ,",
    );
    assert!(writes(&coder.server).is_empty(), "{:#?}", log(&coder.server));

    let matching = DeleteOptions {
        preconditions: Some(Preconditions {
            uid: Some(template.id.to_string()),
            resource_version: None,
        }),
        ..DeleteOptions::default()
    };
    match templates.delete(&ctx(), &name, &matching).await.unwrap() {
        Deleted::Success { object, event } => {
            assert_eq!(event, Some(EventType::Deleted));
            assert_eq!(object.unwrap()["metadata"]["uid"], template.id.to_string());
        }
        other => panic!("expected a Success status, got {other:?}"),
    }
    assert_eq!(
        writes(&coder.server),
        [format!("DELETE /api/v2/templates/{}", template.id)]
    );
    assert_error(templates.get(&ctx(), &name).await, 404, "not found");
}

#[tokio::test]
async fn server_side_apply_creates_a_missing_template_through_update() {
    let coder = coder("apply", Duration::from_millis(50)).await;
    let registry = registry(&coder, settings(&[]));
    let templates = storage(&registry, "codertemplates");
    let org = coder.organization.clone();
    let object = manifest(&org, "applied", json!({"files": files(&[("main.tf", "x")])}));
    let name = format!("{org}.applied");
    assert_error(
        templates.update(&ctx(), &name, object.clone(), false).await,
        404,
        "not found",
    );
    let written = templates.update(&ctx(), &name, object, true).await.unwrap();
    assert!(written.created);
    assert_eq!(written.event, Some(EventType::Added));
    assert_eq!(
        writes(&coder.server).last().unwrap(),
        &format!("POST /api/v2/organizations/{org}/templates")
    );
}

#[tokio::test]
async fn template_version_lists_ignore_limit_and_refuse_paging() {
    let coder = coder("versions", Duration::from_millis(50)).await;
    let template = template_from_zip(&coder, "listed", zip_of(&[("main.tf", b"x")])).await;
    imported_version(&coder, zip_of(&[("main.tf", b"y")]), Some(template.id)).await;
    let registry = registry(&coder, settings(&[]));
    let versions = storage(&registry, "codertemplateversions");
    let with = |pairs: &[(&str, &str)]| {
        let mut c = ctx();
        c.query = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        c
    };
    assert_eq!(versions.list(&with(&[("limit", "1")])).await.unwrap().len(), 2);
    assert_eq!(
        versions
            .list(&with(&[("resourceVersion", "0")]))
            .await
            .unwrap()
            .len(),
        2
    );
    coder.server.clear_requests();
    assert_error(
        versions.list(&with(&[("continue", "token")])).await,
        400,
        "continue is not supported",
    );
    assert_error(
        versions.list(&with(&[("resourceVersion", "42")])).await,
        400,
        "resourceVersion \"42\"",
    );
    assert_error(
        versions
            .list(&with(&[
                ("resourceVersionMatch", "Exact"),
                ("resourceVersion", "0"),
            ]))
            .await,
        422,
        "resourceVersionMatch",
    );
    assert!(coder.server.requests().is_empty(), "refused without a Coder call");
}

/// The real Coder (echo provisioner only): a template created from an echo version through the storage, its source
/// read back through `?format=zip`, then updated with one more text file. The merged archive keeps the echo
/// provisioner's files, the new version imports, becomes active, and the metadata follows.
#[tokio::test]
async fn a_template_round_trips_through_the_real_coder() {
    use coder_k8s_testenv::RealCoder;
    use coder_k8s_testenv::coder::EchoTemplate;
    coder_k8s_coder_client::install_ring_provider();
    let real = RealCoder::shared().await.unwrap();
    let client = CoderClient::new(
        url::Url::parse(real.url()).unwrap(),
        SessionToken::new(real.owner_token().to_owned()),
    )
    .unwrap();
    let organization = client.default_organization().await.unwrap().name;
    let tar = Bytes::from(real.echo_template(EchoTemplate::Success).unwrap());
    let file = client.upload_file(ArchiveKind::Tar, tar).await.unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    let version = client
        .create_template_version(&organization, &request)
        .await
        .unwrap();
    for _ in 0..300 {
        if client.template_version(version.id).await.unwrap().job.status == JobStatus::Succeeded {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let backend = StaticBackend {
        url: url::Url::parse(real.url()).unwrap(),
        token: real.owner_token().to_owned(),
        namespace: NAMESPACE.to_owned(),
    };
    let client_settings = ClientSettings {
        timeout: Duration::from_secs(10),
        service_address_override: None,
    };
    let provider = Arc::new(StaticProvider::new(&backend, &client_settings).unwrap());
    let templates = templates::resource_with(provider, settings(&[])).storage;
    let template = format!("rt-{}", std::process::id());
    let name = format!("{organization}.{template}");
    let created = templates
        .create(
            &ctx(),
            manifest(
                &organization,
                &template,
                json!({"versionID": version.id.to_string(), "displayName": "Round Trip"}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        created.object["status"]["activeVersionID"],
        version.id.to_string()
    );

    let current = templates.get(&ctx(), &name).await.unwrap();
    let mut shown: BTreeMap<String, String> =
        serde_json::from_value(current["spec"].get("files").cloned().unwrap_or(json!({}))).unwrap();
    shown.insert("README.md".to_owned(), "# managed by coder-k8s\n".to_owned());
    let mut desired = current.clone();
    desired["spec"]["files"] = json!(shown);
    desired["spec"]["description"] = json!("round trip");
    let written = templates.update(&ctx(), &name, desired, false).await.unwrap();

    assert_eq!(written.event, Some(EventType::Modified));
    assert_eq!(written.object["spec"]["description"], "round trip");
    assert_eq!(
        written.object["spec"]["files"]["README.md"],
        "# managed by coder-k8s\n"
    );
    let active = written.object["status"]["activeVersionID"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(active, version.id.to_string(), "a new version is active");
    let new_version = client.template_version(active.parse().unwrap()).await.unwrap();
    assert_eq!(
        new_version.job.status,
        JobStatus::Succeeded,
        "the echo files were kept, so the import succeeded"
    );

    let again = templates.get(&ctx(), &name).await.unwrap();
    let unchanged = templates
        .update(&ctx(), &name, again.clone(), false)
        .await
        .unwrap();
    assert_eq!(unchanged.event, None, "the same object again changes nothing");
    assert_eq!(
        client
            .template(
                created.object["metadata"]["uid"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap()
            )
            .await
            .unwrap()
            .active_version_id
            .to_string(),
        active
    );
    match templates
        .delete(&ctx(), &name, &DeleteOptions::default())
        .await
        .unwrap()
    {
        Deleted::Success { event, .. } => assert_eq!(event, Some(EventType::Deleted)),
        other => panic!("expected a Success status, got {other:?}"),
    }
    assert_error(templates.get(&ctx(), &name).await, 404, "not found");
}
