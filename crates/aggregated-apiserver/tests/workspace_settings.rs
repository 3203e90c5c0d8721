//! The settings and rich parameters of `CoderWorkspace` through a real kube-apiserver with the real kubectl, each
//! flow against the Coder API test server and a real Coder v2.30.0 (echo provisioner): the time to live, the
//! autostart schedule, automatic updates and parameter values are set by create and apply and read back from Coder
//! with the client; a change made in Coder shows on the next get and the next apply sets it back; a setting the
//! manifest leaves out is never reset; a get written back changes nothing. Parameter values from Secrets need the
//! caller's `get` of the Secret (a denial writes nothing to Coder) and never show in the object. `kubectl explain`
//! describes every field.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cluster::{SERVER_NAMESPACE, ServedByNamespace, assert_success, kubectl, stdout, wait_until};
use coder_k8s_aggregated_apiserver::coder::registry_with;
use coder_k8s_aggregated_apiserver::coder::workspace_secrets::{
    KubeParameterSecrets, ParameterSecrets, RECORD_LABEL, record_name,
};
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition};
use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::template_versions::CreateTemplateVersionRequest;
use coder_k8s_coder_client::types::templates::CreateTemplateRequest;
use coder_k8s_coder_client::types::workspaces::{
    RichParameterValue, UpdateWorkspaceAutomaticUpdatesRequest, UpdateWorkspaceAutostartRequest,
    UpdateWorkspaceTtlRequest, Workspace,
};
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Config, TestServer};
use coder_k8s_testenv::ControlPlane;
use coder_k8s_testenv::coder::{EchoTemplate, RealCoder, WITH_PARAMETERS_MAIN_TF};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;
use uuid::Uuid;

/// One control plane per test process with the Coder-backed registry registered behind it, parameter references
/// recorded in the server's namespace.
async fn served() -> &'static ServedByNamespace {
    static SERVED: OnceCell<ServedByNamespace> = OnceCell::const_new();
    SERVED
        .get_or_init(|| {
            ServedByNamespace::start(|kube, provider| {
                let secrets: Arc<dyn ParameterSecrets> =
                    Arc::new(KubeParameterSecrets::new(kube, SERVER_NAMESPACE));
                registry_with(provider, Some(secrets), None)
            })
        })
        .await
}

/// Where a flow runs: the Coder, its owner, organization and a template with the rich parameters of
/// `EchoTemplate::WithParameters`, and the namespace that Coder serves.
struct Flow {
    cp: &'static ControlPlane,
    kube: kube::Client,
    client: CoderClient,
    /// The test server, whose request log shows what reached Coder; `None` for a real Coder.
    server: Option<TestServer>,
    namespace: String,
    organization: String,
    owner: String,
    template: String,
}

impl Flow {
    async fn test_server(tag: &str) -> Flow {
        let served = served().await;
        coder_k8s_coder_client::install_ring_provider();
        let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
        let db_url = pg.unique_coder_database(&format!("wss_{tag}")).await.unwrap();
        let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
            .await
            .unwrap()
            .expose();
        let server = TestServer::start(Config::new(&db_url)).await.unwrap();
        let client = CoderClient::new(server.url(), SessionToken::new(token.clone())).unwrap();
        let archive = Bytes::from(coder_k8s_testenv::one_file_tar(
            "main.tf",
            WITH_PARAMETERS_MAIN_TF.as_bytes(),
        ));
        let template = format!("params-{tag}");
        let organization = import_template(&client, &template, archive, "terraform").await;
        let owner = client.me().await.unwrap().username;
        let namespace = served
            .namespace(&format!("wss-{tag}"), &server.url(), &token)
            .await;
        Flow {
            cp: served.cp,
            // A client of the test's own runtime.
            kube: served.cp.client().unwrap(),
            client,
            server: Some(server),
            namespace,
            organization,
            owner,
            template,
        }
    }

    async fn real_coder(tag: &str) -> Flow {
        let served = served().await;
        let coder = RealCoder::shared().await.unwrap();
        coder_k8s_coder_client::install_ring_provider();
        let url = url::Url::parse(coder.url()).unwrap();
        let client = CoderClient::new(url.clone(), SessionToken::new(coder.owner_token())).unwrap();
        let archive = Bytes::from(coder.echo_template(EchoTemplate::WithParameters).unwrap());
        let template = format!("params-{tag}-{}", &Uuid::new_v4().simple().to_string()[..8]);
        let organization = import_template(&client, &template, archive, "echo").await;
        let owner = client.me().await.unwrap().username;
        let namespace = served
            .namespace(&format!("wsr-{tag}"), &url, coder.owner_token())
            .await;
        Flow {
            cp: served.cp,
            // A client of the test's own runtime.
            kube: served.cp.client().unwrap(),
            client,
            server: None,
            namespace,
            organization,
            owner,
            template,
        }
    }

    fn name(&self, leaf: &str) -> String {
        format!("{}.{}.{leaf}", self.organization, self.owner)
    }

    /// A manifest of workspace `leaf` with `spec` over the organization, template and `running: true`.
    fn manifest(&self, leaf: &str, spec: Value) -> String {
        let mut full =
            json!({"organization": self.organization, "templateName": self.template, "running": true});
        for (key, value) in spec.as_object().unwrap() {
            full[key] = value.clone();
        }
        json!({
            "apiVersion": "aggregation.coder.com/v1alpha1",
            "kind": "CoderWorkspace",
            "metadata": {"name": self.name(leaf), "namespace": self.namespace},
            "spec": full,
        })
        .to_string()
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut all = vec!["-n", self.namespace.as_str()];
        all.extend_from_slice(args);
        let out = kubectl(self.cp, &all, stdin);
        assert_success(&out, &all.join(" "));
        stdout(&out)
    }

    /// kubectl's error output of a command that must fail.
    fn fails(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut all = vec!["-n", self.namespace.as_str()];
        all.extend_from_slice(args);
        let out = kubectl(self.cp, &all, stdin);
        assert!(!out.status.success(), "{all:?} succeeded: {}", stdout(&out));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn object(&self, leaf: &str) -> Value {
        let name = self.name(leaf);
        serde_json::from_str(&self.run(&["get", "coderworkspace", &name, "-o", "json"], None)).unwrap()
    }

    /// The workspace once its latest build has ended (successfully).
    async fn settled(&self, leaf: &str) -> Workspace {
        for _ in 0..300 {
            let workspace = self
                .client
                .workspace_by_owner_and_name(&self.owner, leaf)
                .await
                .unwrap();
            if workspace.latest_build.job.status.is_terminal() {
                assert_eq!(
                    workspace.latest_build.job.status,
                    JobStatus::Succeeded,
                    "{:?}",
                    workspace.latest_build.job
                );
                return workspace;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("the latest build of {leaf} did not end");
    }

    /// The latest build's parameter values, by name.
    async fn values(&self, workspace: &Workspace) -> BTreeMap<String, String> {
        self.client
            .workspace_build_parameters(workspace.latest_build.id)
            .await
            .unwrap()
            .into_iter()
            .map(|p| (p.name, p.value))
            .collect()
    }

    /// The methods and paths of the requests that wrote to the test server since `clear` (none for a real Coder).
    fn writes(&self) -> Vec<String> {
        self.server
            .iter()
            .flat_map(|s| s.requests())
            .filter(|r| r.method != "GET")
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    fn clear(&self) {
        if let Some(server) = &self.server {
            server.clear_requests();
        }
    }
}

/// Imports `archive` as a template named `name` (with `provisioner`); returns the organization's name.
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

fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

const BERLIN: &str = "CRON_TZ=Europe/Berlin 30 8 * * 1-5";

/// The settings of the flow's manifest.
fn settings_spec() -> Value {
    json!({
        "ttl": "8h",
        "autostartSchedule": BERLIN,
        "automaticUpdates": "always",
        "parameters": [{"name": "region", "value": "us-east"}, {"name": "cpus", "value": "4"}],
    })
}

/// Every setting the flow's manifest sets, as Coder has it.
async fn assert_manifest_settings_in_coder(flow: &Flow, workspace: &Workspace) {
    assert_eq!(workspace.ttl_ms, Some(28_800_000));
    assert_eq!(workspace.autostart_schedule.as_deref(), Some(BERLIN));
    assert_eq!(workspace.automatic_updates, "always");
    assert_eq!(
        flow.values(workspace).await,
        values(&[
            ("api_key", "none"),
            ("cpus", "4"),
            ("disk", "small"),
            ("region", "us-east")
        ])
    );
}

/// Set by create and apply, read back, changed in Coder, set back, left out and kept, round-tripped.
async fn settings_flow(flow: &Flow) {
    let leaf = "settings";
    let manifest = flow.manifest(leaf, settings_spec());
    flow.run(&["create", "-f", "-"], Some(&manifest));
    let created = flow.settled(leaf).await;
    assert_manifest_settings_in_coder(flow, &created).await;

    // A get shows Coder's values: ttlMillis (never ttl), every parameter sorted by name, the build's reason.
    let object = flow.object(leaf);
    assert_eq!(object["spec"]["ttlMillis"], 28_800_000);
    assert!(object["spec"].get("ttl").is_none(), "{object}");
    assert_eq!(object["spec"]["autostartSchedule"], BERLIN);
    assert_eq!(object["spec"]["automaticUpdates"], "always");
    assert_eq!(
        object["spec"]["parameters"],
        json!([
            {"name": "api_key", "value": "none"},
            {"name": "cpus", "value": "4"},
            {"name": "disk", "value": "small"},
            {"name": "region", "value": "us-east"},
        ])
    );
    assert_eq!(object["status"]["latestBuildReason"], "initiator");
    // Lists leave the parameters out, with the same resourceVersion.
    let list: Value =
        serde_json::from_str(&flow.run(&["get", "coderworkspaces", "-o", "json"], None)).unwrap();
    let listed = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["metadata"]["name"] == flow.name(leaf))
        .unwrap();
    assert!(listed["spec"].get("parameters").is_none(), "{listed}");
    assert_eq!(
        listed["metadata"]["resourceVersion"],
        object["metadata"]["resourceVersion"]
    );

    // A get written back, and the same manifest applied again, change nothing.
    flow.clear();
    flow.run(&["replace", "-f", "-"], Some(&object.to_string()));
    flow.run(&["apply", "-f", "-"], Some(&manifest));
    assert_eq!(flow.writes(), Vec::<String>::new());
    let unchanged = flow.settled(leaf).await;
    assert_eq!(unchanged.latest_build.id, created.latest_build.id);
    assert_manifest_settings_in_coder(flow, &unchanged).await;

    // Changed in Coder: the next get shows it, and the next apply sets it back.
    change_in_coder(
        flow,
        &unchanged,
        Some(3_600_000),
        "0 9 * * 1",
        "never",
        ("cpus", "6"),
    )
    .await;
    let changed = flow.object(leaf);
    assert_eq!(changed["spec"]["ttlMillis"], 3_600_000);
    assert_eq!(changed["spec"]["autostartSchedule"], "0 9 * * 1");
    assert_eq!(changed["spec"]["automaticUpdates"], "never");
    assert_eq!(
        changed["spec"]["parameters"][1],
        json!({"name": "cpus", "value": "6"})
    );
    flow.run(&["apply", "-f", "-"], Some(&manifest));
    let set_back = flow.settled(leaf).await;
    assert_manifest_settings_in_coder(flow, &set_back).await;
    assert_eq!(set_back.latest_build.transition, Transition::Start);
    assert_eq!(flow.object(leaf)["status"]["latestBuildReason"], "initiator");

    // Left out of the manifest: set in Coder, applied without them (client-side and server-side), kept.
    change_in_coder(
        flow,
        &set_back,
        Some(7_200_000),
        "0 10 * * 2",
        "never",
        ("region", "eu-west"),
    )
    .await;
    let before = flow.settled(leaf).await;
    let bare = flow.manifest(leaf, json!({}));
    flow.run(&["apply", "-f", "-"], Some(&bare));
    flow.run(
        &["apply", "--server-side", "--field-manager=tests", "-f", "-"],
        Some(&bare),
    );
    let kept = flow.settled(leaf).await;
    assert_eq!(kept.latest_build.id, before.latest_build.id);
    assert_eq!(kept.ttl_ms, Some(7_200_000));
    assert_eq!(kept.autostart_schedule.as_deref(), Some("0 10 * * 2"));
    assert_eq!(kept.automatic_updates, "never");
    assert_eq!(
        flow.values(&kept).await,
        values(&[
            ("api_key", "none"),
            ("cpus", "4"),
            ("disk", "small"),
            ("region", "eu-west")
        ])
    );

    // Turned off through the manifest: ttlMillis 0 and an empty schedule.
    let off = flow.manifest(leaf, json!({"ttlMillis": 0, "autostartSchedule": ""}));
    flow.run(&["apply", "-f", "-"], Some(&off));
    let turned_off = flow.settled(leaf).await;
    assert_eq!((turned_off.ttl_ms, turned_off.autostart_schedule), (None, None));
    let object = flow.object(leaf);
    assert!(object["spec"].get("ttlMillis").is_none(), "{object}");
    assert!(object["spec"].get("autostartSchedule").is_none(), "{object}");

    // A parameter change of a stopped workspace is recorded by a stop build and used by the next start.
    let stopped = flow.manifest(leaf, json!({"running": false}));
    flow.run(&["apply", "-f", "-"], Some(&stopped));
    flow.settled(leaf).await;
    let smaller = flow.manifest(
        leaf,
        json!({"running": false, "parameters": [{"name": "cpus", "value": "2"}]}),
    );
    flow.run(&["apply", "-f", "-"], Some(&smaller));
    let recorded = flow.settled(leaf).await;
    assert_eq!(recorded.latest_build.transition, Transition::Stop);
    assert_eq!(flow.values(&recorded).await["cpus"], "2");
    flow.run(&["apply", "-f", "-"], Some(&flow.manifest(leaf, json!({}))));
    let started = flow.settled(leaf).await;
    assert_eq!(started.latest_build.transition, Transition::Start);
    assert_eq!(flow.values(&started).await["cpus"], "2");
}

/// Changes the time to live, the schedule, automatic updates and one parameter value in Coder directly.
async fn change_in_coder(
    flow: &Flow,
    workspace: &Workspace,
    ttl_ms: Option<i64>,
    schedule: &str,
    automatic_updates: &str,
    (parameter, value): (&str, &str),
) {
    let client = &flow.client;
    client
        .update_workspace_ttl(workspace.id, &UpdateWorkspaceTtlRequest { ttl_ms })
        .await
        .unwrap();
    client
        .update_workspace_autostart(
            workspace.id,
            &UpdateWorkspaceAutostartRequest {
                schedule: Some(schedule.to_owned()),
            },
        )
        .await
        .unwrap();
    client
        .update_workspace_automatic_updates(
            workspace.id,
            &UpdateWorkspaceAutomaticUpdatesRequest {
                automatic_updates: automatic_updates.to_owned(),
            },
        )
        .await
        .unwrap();
    let build = CreateWorkspaceBuildRequest {
        rich_parameter_values: vec![RichParameterValue {
            name: parameter.to_owned(),
            value: value.to_owned(),
        }],
        ..CreateWorkspaceBuildRequest::transition(Transition::Start)
    };
    client.create_workspace_build(workspace.id, &build).await.unwrap();
    flow.settled(&workspace.name).await;
}

/// Refusals: each bad value is a 422 naming the field, and nothing is written to Coder.
async fn refusals_flow(flow: &Flow) {
    let leaf = "refused";
    flow.run(&["create", "-f", "-"], Some(&flow.manifest(leaf, json!({}))));
    let workspace = flow.settled(leaf).await;
    let name = flow.name(leaf);
    // kubectl prints the 422's causes after the kind and name.
    let invalid = format!("The CoderWorkspace \"{name}\" is invalid: ");
    let cases = [
        (
            json!({"ttl": "30s"}),
            "spec.ttl: Invalid value: \"30s\": must be 0 (autostop off) or between 1 and 43200 minutes",
        ),
        (
            json!({"ttl": "8h", "ttlMillis": 60_000}),
            "spec.ttl: Invalid value: \"8h\": conflicts with spec.ttlMillis 60000; set one of them",
        ),
        (
            json!({"autostartSchedule": "0 9 1 * 1"}),
            "spec.autostartSchedule: Invalid value: \"0 9 1 * 1\": validate weekly schedule: expected day-of-month and month to be *",
        ),
        (
            json!({"autostartSchedule": "CRON_TZ=Mars/Olympus 0 9 * * 1"}),
            "spec.autostartSchedule: Invalid value: \"CRON_TZ=Mars/Olympus 0 9 * * 1\": Invalid autostart schedule. [schedule: parse schedule: provided bad location Mars/Olympus: unknown time zone Mars/Olympus]",
        ),
        (
            json!({"automaticUpdates": "sometimes"}),
            "spec.automaticUpdates: Unsupported value: \"sometimes\": supported values: \"always\", \"never\"",
        ),
        (
            json!({"parameters": [{"name": "regoin", "value": "eu-west"}]}),
            "spec.parameters[0].name: Invalid value: \"regoin\": the template version has no such parameter (it has region, cpus, disk, api_key)",
        ),
        (
            json!({"parameters": [{"name": "disk", "value": "large"}]}),
            "spec.parameters[0]: Forbidden: Parameter \"disk\" is not mutable, so it can't be updated after creating a workspace.",
        ),
    ];
    for (spec, error) in cases {
        flow.clear();
        let refused = flow.fails(&["apply", "-f", "-"], Some(&flow.manifest(leaf, spec.clone())));
        assert!(
            refused.contains(&format!("{invalid}{error}")),
            "{spec}: {refused}"
        );
        // Only Coder knows the zones: its refused schedule write is the one write, and the first.
        let expected = match error.contains("Mars/Olympus") && flow.server.is_some() {
            true => vec![format!("PUT /api/v2/workspaces/{}/autostart", workspace.id)],
            false => Vec::new(),
        };
        assert_eq!(flow.writes(), expected, "{spec}");
    }
    let after = flow.settled(leaf).await;
    assert_eq!(after.latest_build.id, workspace.latest_build.id);
    assert_eq!(
        (
            after.ttl_ms,
            &after.autostart_schedule,
            after.automatic_updates.as_str()
        ),
        (
            workspace.ttl_ms,
            &workspace.autostart_schedule,
            workspace.automatic_updates.as_str()
        )
    );
    assert_eq!(flow.values(&after).await["disk"], "small");
}

// kubectl runs as a blocking child process: the test server needs worker threads of its own meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sets_reads_and_resets_workspace_settings_on_the_test_server() {
    let flow = Flow::test_server("settings").await;
    settings_flow(&flow).await;
    refusals_flow(&flow).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sets_reads_and_resets_workspace_settings_on_a_real_coder() {
    let flow = Flow::real_coder("settings").await;
    settings_flow(&flow).await;
    refusals_flow(&flow).await;
}

/// A Role and binding that let `user` do `verbs` on `resources` (of `group`) in `namespace`, optionally only on
/// `names`.
async fn allow(flow: &Flow, user: &str, group: &str, resources: &[&str], names: &[&str], verbs: &[&str]) {
    let role_name = format!("{user}-{}", resources.join("-").replace('/', "-"));
    let mut rule = json!({"apiGroups": [group], "resources": resources, "verbs": verbs});
    if !names.is_empty() {
        rule["resourceNames"] = json!(names);
    }
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": role_name, "namespace": flow.namespace},
        "rules": [rule],
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": role_name, "namespace": flow.namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))
    .unwrap();
    Api::<Role>::namespaced(flow.kube.clone(), &flow.namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(flow.kube.clone(), &flow.namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// Sets `key` of Secret `name` (created when missing) to `value`, keeping its other keys.
async fn put_secret(flow: &Flow, name: &str, key: &str, value: &str) {
    let api = Api::<Secret>::namespaced(flow.kube.clone(), &flow.namespace);
    match api.get_opt(name).await.unwrap() {
        Some(mut existing) => {
            existing
                .data
                .get_or_insert_with(Default::default)
                .insert(key.to_owned(), k8s_openapi::ByteString(value.as_bytes().to_vec()));
            api.replace(name, &PostParams::default(), &existing)
                .await
                .unwrap();
        }
        None => {
            let secret: Secret = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": flow.namespace},
                "stringData": {key: value},
            }))
            .unwrap();
            api.create(&PostParams::default(), &secret).await.unwrap();
        }
    }
}

/// The record of workspace `name` in the server's namespace.
async fn record_of(flow: &Flow, name: &str) -> Option<ConfigMap> {
    Api::<ConfigMap>::namespaced(flow.kube.clone(), SERVER_NAMESPACE)
        .get_opt(&record_name(&flow.namespace, name))
        .await
        .unwrap()
}

const FIRST_KEY: &str = "first-api-key-3f9c2a";
const ROTATED_KEY: &str = "rotated-api-key-8e41d7";

/// Values from Secrets: refused (403, nothing reaches Coder) without `get` on the Secret; with it set in Coder,
/// shown as the reference, recorded without the value, and set again after the Secret changed.
async fn secrets_flow(flow: &Flow) {
    let leaf = "secret";
    put_secret(flow, "api", "key", FIRST_KEY).await;
    let workspace_verbs = ["get", "list", "create", "update", "patch"];
    allow(
        flow,
        "eve",
        "aggregation.coder.com",
        &["coderworkspaces"],
        &[],
        &workspace_verbs,
    )
    .await;
    allow(
        flow,
        "fred",
        "aggregation.coder.com",
        &["coderworkspaces"],
        &[],
        &workspace_verbs,
    )
    .await;
    allow(flow, "fred", "", &["secrets"], &["api"], &["get"]).await;
    let from_secret = json!({"parameters": [
        {"name": "region", "value": "us-east"},
        {"name": "api_key", "valueFrom": {"secretKeyRef": {"name": "api", "key": "key"}}},
    ]});
    let manifest = flow.manifest(leaf, from_secret);

    // Without get on the Secret: kube-apiserver's 403, and not one request reaches Coder.
    if let Some(server) = &flow.server {
        server.clear_requests();
    }
    let denied = flow.fails(&["--as=eve", "create", "-f", "-"], Some(&manifest));
    assert!(
        denied.contains(&format!(
            "secrets \"api\" is forbidden: User \"eve\" cannot get resource \"secrets\" in API group \"\" in the namespace \"{}\"",
            flow.namespace
        )),
        "{denied}"
    );
    if let Some(server) = &flow.server {
        let requests: Vec<String> = server
            .requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert_eq!(requests, Vec::<String>::new(), "Coder was asked");
    }
    let missing = flow.client.workspace_by_owner_and_name(&flow.owner, leaf).await;
    assert!(
        missing.is_err_and(|e| e.is_not_found()),
        "the workspace was created"
    );

    // With it: Coder gets the value; the object, the record and every answer show only the reference.
    let created_out = flow.run(&["--as=fred", "create", "-f", "-", "-o", "json"], Some(&manifest));
    assert!(!created_out.contains(FIRST_KEY), "{created_out}");
    let created = flow.settled(leaf).await;
    assert_eq!(flow.values(&created).await["api_key"], FIRST_KEY);
    let object = flow.object(leaf);
    assert!(!object.to_string().contains(FIRST_KEY), "{object}");
    assert_eq!(
        object["spec"]["parameters"][0],
        json!({"name": "api_key", "valueFrom": {"secretKeyRef": {"name": "api", "key": "key"}}})
    );
    let name = flow.name(leaf);
    let record = record_of(flow, &name).await.expect("a reference record");
    assert_eq!(record.metadata.labels.unwrap_or_default()[RECORD_LABEL], "true");
    let data = record.data.unwrap_or_default();
    assert_eq!(data["workspaceID"], created.id.to_string());
    assert_eq!(data["references"], r#"{"api_key":{"name":"api","key":"key"}}"#);
    assert!(!format!("{data:?}").contains(FIRST_KEY));

    // A get written back changes nothing; after the Secret changed, the same manifest sets the new value.
    flow.clear();
    flow.run(&["--as=fred", "replace", "-f", "-"], Some(&object.to_string()));
    assert_eq!(flow.writes(), Vec::<String>::new());
    assert_eq!(flow.settled(leaf).await.latest_build.id, created.latest_build.id);
    put_secret(flow, "api", "key", ROTATED_KEY).await;
    let applied = flow.run(&["--as=fred", "apply", "-f", "-", "-o", "json"], Some(&manifest));
    assert!(!applied.contains(ROTATED_KEY), "{applied}");
    let rotated = flow.settled(leaf).await;
    assert_ne!(rotated.latest_build.id, created.latest_build.id);
    assert_eq!(flow.values(&rotated).await["api_key"], ROTATED_KEY);

    // A write of the object, which names the Secret, needs get on it too.
    flow.clear();
    let refused = flow.fails(
        &[
            "--as=eve",
            "patch",
            "coderworkspace",
            &name,
            "--type=merge",
            "-p",
            r#"{"spec":{"running":false}}"#,
        ],
        None,
    );
    assert!(refused.contains("secrets \"api\" is forbidden"), "{refused}");
    assert_eq!(flow.writes(), Vec::<String>::new());

    // Coder's refusal of a value from a Secret never repeats it.
    put_secret(flow, "api", "region", "secret-region-5b7e").await;
    let bad_region = flow.manifest(
        leaf,
        json!({"parameters": [{"name": "region", "valueFrom": {"secretKeyRef": {"name": "api", "key": "region"}}}]}),
    );
    let refused = flow.fails(&["--as=fred", "apply", "-f", "-"], Some(&bad_region));
    assert!(
        refused.contains("Unable to validate parameters [region: Value must be a valid option"),
        "{refused}"
    );
    assert!(!refused.contains("secret-region-5b7e"), "{refused}");

    // A plain value again ends the reference; deleting the workspace removes the record.
    let plain = flow.manifest(
        leaf,
        json!({"parameters": [{"name": "api_key", "value": "none"}]}),
    );
    flow.run(&["--as=fred", "apply", "-f", "-"], Some(&plain));
    let plain_again = flow.settled(leaf).await;
    assert_eq!(flow.values(&plain_again).await["api_key"], "none");
    assert!(
        record_of(flow, &name).await.is_none(),
        "the record outlived its last reference"
    );
    flow.run(&["apply", "-f", "-"], Some(&manifest));
    let referenced_again = flow.settled(leaf).await;
    assert_eq!(flow.values(&referenced_again).await["api_key"], ROTATED_KEY);
    let again = record_of(flow, &name)
        .await
        .expect("the reference is recorded again");
    let data = again.data.unwrap_or_default();
    assert_eq!(data["references"], r#"{"api_key":{"name":"api","key":"key"}}"#);
    assert!(
        !format!("{data:?}").contains(ROTATED_KEY),
        "a record holds a value"
    );
    flow.run(&["delete", "coderworkspace", &name, "--wait=false"], None);
    assert!(
        record_of(flow, &name).await.is_none(),
        "the record outlived its workspace"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameter_values_from_secrets_need_the_callers_get_and_never_show_on_the_test_server() {
    let flow = Flow::test_server("secrets").await;
    secrets_flow(&flow).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameter_values_from_secrets_need_the_callers_get_and_never_show_on_a_real_coder() {
    let flow = Flow::real_coder("secrets").await;
    secrets_flow(&flow).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_describes_every_new_workspace_field() {
    let served = served().await;
    let explain = |field: &str| {
        let out = kubectl(served.cp, &["explain", &format!("coderworkspaces.{field}")], None);
        assert_success(&out, field);
        stdout(&out)
    };
    wait_until(
        "kubectl explain knows the kind",
        Duration::from_secs(60),
        || async {
            kubectl(served.cp, &["explain", "coderworkspaces.spec.ttl"], None)
                .status
                .success()
        },
    )
    .await;
    for (field, says) in [
        ("spec.ttl", "The same time to live as a duration"),
        (
            "spec.ttlMillis",
            "How long a started workspace runs before Coder stops it",
        ),
        ("spec.autostartSchedule", "CRON_TZ=<IANA zone>"),
        (
            "spec.automaticUpdates",
            "every start uses the template's active version",
        ),
        ("spec.parameters", "Rich parameter values of the template"),
        (
            "spec.parameters.name",
            "The parameter's name in the template version",
        ),
        ("spec.parameters.value", "The value as text"),
        ("spec.parameters.valueFrom", "Where a sensitive value comes from"),
        (
            "spec.parameters.valueFrom.secretKeyRef",
            "A key of a Secret in the workspace's namespace",
        ),
        ("spec.parameters.valueFrom.secretKeyRef.name", "The Secret's name"),
        (
            "spec.parameters.valueFrom.secretKeyRef.key",
            "The key in the Secret's data",
        ),
        ("status.latestBuildReason", "Why Coder ran the latest build"),
    ] {
        let text = explain(field);
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(says), "{field}: {text}");
    }
    let updates = explain("spec.automaticUpdates");
    assert!(
        updates.contains("always") && updates.contains("never"),
        "{updates}"
    );
}
