//! A `CoderTemplate` edited through kube-apiserver with the real kubectl (`kubectl patch` of the description, of
//! the display name and icon, `kubectl apply` with new files) changes only those in Coder: every scheduling and
//! permission setting set in Coder beforehand reads back unchanged, against the real open-source Coder and against
//! the Coder API test server with the premium template features licensed (where a metadata update can reset the
//! most settings).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cluster::{assert_success, kubectl, kubectl_json, serve_alone, static_provider, wait_until};
use coder_k8s_aggregated_apiserver::coder::template_import::{
    BACKOFF_AFTER_ENV, INITIAL_POLL_ENV, MAX_POLL_ENV, SettingsSource, WAIT_TIMEOUT_ENV,
};
use coder_k8s_aggregated_apiserver::coder::templates;
use coder_k8s_aggregated_apiserver::generic::Registry;
use coder_k8s_coder_client::types::{
    ArchiveKind, CreateTemplateRequest, CreateTemplateVersionRequest, JobStatus, Template,
    TemplateAutostartRequirement, TemplateAutostopRequirement, UpdateTemplateMeta,
};
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Config, Entitlement, TestServer};
use coder_k8s_testenv::coder::EchoTemplate;
use coder_k8s_testenv::{ControlPlane, RealCoder};
use serde_json::{Value, json};
use url::Url;
use uuid::Uuid;

const NAMESPACE: &str = "team-settings";

/// The premium features behind template settings, licensed on the test server.
const TEMPLATE_FEATURES: [&str; 3] = [
    "advanced_template_scheduling",
    "access_control",
    "control_shared_ports",
];

fn fast_waits() -> SettingsSource {
    let map: BTreeMap<&str, &str> = BTreeMap::from([
        (WAIT_TIMEOUT_ENV, "30s"),
        (BACKOFF_AFTER_ENV, "0s"),
        (INITIAL_POLL_ENV, "50ms"),
        (MAX_POLL_ENV, "100ms"),
    ]);
    Arc::new(move |name| map.get(name).map(|v| (*v).to_owned()))
}

/// A control plane of its own (the APIService is cluster-wide) with `codertemplates` served from the Coder at
/// `url` and registered behind kube-apiserver.
async fn serve(url: Url, token: &str) -> &'static ControlPlane {
    let provider = static_provider(url, token, NAMESPACE, Duration::from_secs(20));
    let registry = Registry {
        group: "aggregation.coder.com",
        version: "v1alpha1",
        resources: vec![templates::resource_with(provider, fast_waits())],
    };
    serve_alone(NAMESPACE, "codertemplates", move |_| registry).await
}

/// A template `name` in `organization` from a source archive, its import waited for.
async fn template_from(client: &CoderClient, organization: &str, name: &str, tar: Bytes) -> Template {
    let file = client.upload_file(ArchiveKind::Tar, tar).await.unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.provisioner = "echo".to_owned();
    let version = client
        .create_template_version(organization, &request)
        .await
        .unwrap();
    wait_until("the template import", Duration::from_secs(60), || async {
        client.template_version(version.id).await.unwrap().job.status == JobStatus::Succeeded
    })
    .await;
    let request = CreateTemplateRequest {
        name: name.to_owned(),
        template_version_id: version.id,
        ..CreateTemplateRequest::default()
    };
    client.create_template(organization, &request).await.unwrap()
}

/// Sets every scheduling and permission setting away from its default in Coder, with the full body Coder's CLI
/// sends; `premium` adds the port-sharing level, which open-source Coder refuses. Answers the template as read
/// afterwards.
async fn set_every_setting(client: &CoderClient, template: &Template, premium: bool) -> Template {
    let read = UpdateTemplateMeta::from_template(template);
    let body = UpdateTemplateMeta {
        default_ttl_ms: 7_200_000,
        activity_bump_ms: 1_800_000,
        autostop_requirement: Some(TemplateAutostopRequirement {
            days_of_week: vec!["monday".to_owned(), "saturday".to_owned()],
            weeks: 2,
        }),
        autostart_requirement: Some(TemplateAutostartRequirement {
            days_of_week: vec!["tuesday".to_owned(), "sunday".to_owned()],
        }),
        allow_user_autostart: false,
        allow_user_autostop: false,
        allow_user_cancel_workspace_jobs: true,
        failure_ttl_ms: 120_000,
        time_til_dormant_ms: 86_400_000,
        time_til_dormant_autodelete_ms: 172_800_000,
        require_active_version: true,
        deprecation_message: Some("use another template".to_owned()),
        max_port_share_level: if premium {
            Some("authenticated".to_owned())
        } else {
            read.max_port_share_level.clone()
        },
        cors_behavior: Some("passthru".to_owned()),
        use_classic_parameter_flow: Some(true),
        ..read
    };
    client
        .update_template_meta(template.id, &body)
        .await
        .unwrap()
        .expect("a changed template");
    client.template(template.id).await.unwrap()
}

/// The settings [`set_every_setting`] must have left, so that "unchanged" below means something.
fn assert_settings_set(template: &Template, premium: bool) {
    assert_eq!(
        (
            template.default_ttl_ms,
            template.activity_bump_ms,
            template.allow_user_cancel_workspace_jobs,
            template.cors_behavior.as_str(),
            template.use_classic_parameter_flow,
        ),
        (7_200_000, 1_800_000, true, "passthru", true),
        "{template:#?}"
    );
    if !premium {
        return;
    }
    assert_eq!(template.autostop_requirement.days_of_week, ["monday", "saturday"]);
    assert_eq!(template.autostop_requirement.weeks, 2);
    assert_eq!(template.autostart_requirement.days_of_week, ["tuesday", "sunday"]);
    assert_eq!(
        (
            template.allow_user_autostart,
            template.allow_user_autostop,
            template.failure_ttl_ms,
            template.time_til_dormant_ms,
            template.time_til_dormant_autodelete_ms,
            template.require_active_version,
            template.deprecation_message.as_str(),
            template.max_port_share_level.as_str(),
        ),
        (
            false,
            false,
            120_000,
            86_400_000,
            172_800_000,
            true,
            "use another template",
            "authenticated"
        ),
        "{template:#?}"
    );
}

/// Every field of `before` except what the step changed (the update time, the metadata texts and, after new
/// files, the active version) must read back from Coder as it was.
async fn assert_only_metadata_changed(client: &CoderClient, before: &Template, step: &str) -> Template {
    let after = client.template(before.id).await.unwrap();
    let expected = Template {
        updated_at: after.updated_at.clone(),
        display_name: after.display_name.clone(),
        description: after.description.clone(),
        icon: after.icon.clone(),
        active_version_id: after.active_version_id,
        ..before.clone()
    };
    assert_eq!(after, expected, "after {step}");
    after
}

fn patch(cp: &ControlPlane, name: &str, spec: Value) {
    let body = json!({ "spec": spec }).to_string();
    let out = kubectl(
        cp,
        &[
            "patch",
            "codertemplate",
            name,
            "-n",
            NAMESPACE,
            "--type",
            "merge",
            "-p",
            &body,
        ],
        None,
    );
    assert_success(&out, &format!("kubectl patch {body}"));
}

/// The kubectl edits and, after each, the template in Coder; `new_files` gives the files to apply from the
/// current ones.
async fn kubectl_edits_keep_settings(
    cp: &ControlPlane,
    client: &CoderClient,
    before: &Template,
    new_files: impl Fn(Value) -> Value,
) {
    let name = format!("{}.{}", before.organization_name, before.name);
    patch(cp, &name, json!({"description": "patched by kubectl"}));
    let after = assert_only_metadata_changed(client, before, "kubectl patch of spec.description").await;
    assert_eq!(after.description, "patched by kubectl");

    patch(
        cp,
        &name,
        json!({"displayName": "Kubectl", "icon": "/icon/k8s.png"}),
    );
    let after = assert_only_metadata_changed(client, before, "kubectl patch of displayName and icon").await;
    assert_eq!(
        (after.display_name.as_str(), after.icon.as_str()),
        ("Kubectl", "/icon/k8s.png")
    );
    assert_eq!(after.description, "patched by kubectl");

    let current = kubectl_json(
        cp,
        &["get", "codertemplate", &name, "-n", NAMESPACE, "-o", "json"],
    );
    let manifest = json!({
        "apiVersion": "aggregation.coder.com/v1alpha1",
        "kind": "CoderTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "organization": before.organization_name,
            "displayName": "Applied",
            "description": "applied with new files",
            "icon": "/icon/applied.png",
            "files": new_files(current["spec"]["files"].clone()),
        },
    });
    assert_success(
        &kubectl(cp, &["apply", "-f", "-"], Some(&manifest.to_string())),
        "kubectl apply with new files",
    );
    let after = assert_only_metadata_changed(client, before, "kubectl apply with new files").await;
    assert_ne!(
        after.active_version_id, before.active_version_id,
        "the new files are active"
    );
    assert_eq!(
        (
            after.display_name.as_str(),
            after.description.as_str(),
            after.icon.as_str()
        ),
        ("Applied", "applied with new files", "/icon/applied.png")
    );
}

fn with_readme(mut files: Value) -> Value {
    files["README.md"] = json!("# managed by coder-k8s\n");
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_edits_keep_every_template_setting_in_the_real_coder() {
    coder_k8s_coder_client::install_ring_provider();
    let coder = RealCoder::shared().await.unwrap();
    let url = Url::parse(coder.url()).unwrap();
    let client = CoderClient::new(url.clone(), SessionToken::new(coder.owner_token())).unwrap();
    let organization = client.default_organization().await.unwrap().name;
    let tar = Bytes::from(coder.echo_template(EchoTemplate::Success).unwrap());
    let name = format!("settings-{}", &Uuid::new_v4().simple().to_string()[..8]);
    let created = template_from(&client, &organization, &name, tar).await;
    let before = set_every_setting(&client, &created, false).await;
    assert_settings_set(&before, false);

    let cp = serve(url, coder.owner_token()).await;
    // The echo provisioner's files stay, so that the new version imports.
    kubectl_edits_keep_settings(cp, &client, &before, with_readme).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_edits_keep_every_template_setting_in_a_licensed_coder() {
    coder_k8s_coder_client::install_ring_provider();
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    let db_url = pg.unique_coder_database("tplsettings").await.unwrap();
    let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let mut config = Config::new(&db_url);
    config.build_duration = Duration::from_millis(100);
    for feature in TEMPLATE_FEATURES {
        config
            .entitlements
            .insert(feature.to_owned(), Entitlement::Entitled);
    }
    let server = TestServer::start(config).await.unwrap();
    let client = CoderClient::new(server.url(), SessionToken::new(token.clone())).unwrap();
    let organization = client.default_organization().await.unwrap().name;
    let tar = Bytes::from(coder_k8s_testenv::one_file_tar("main.tf", b"terraform {}\n"));
    let created = template_from(&client, &organization, "settings", tar).await;
    let before = set_every_setting(&client, &created, true).await;
    assert_settings_set(&before, true);

    let cp = serve(server.url(), &token).await;
    kubectl_edits_keep_settings(cp, &client, &before, |files| {
        let mut files = with_readme(files);
        files["main.tf"] = json!("terraform { required_version = \">= 1.0\" }\n");
        files
    })
    .await;
}
