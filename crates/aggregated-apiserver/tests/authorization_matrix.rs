//! The authorization matrix of `aggregation.coder.com` behind a real kube-apiserver, through the real kubectl with
//! `--as` users: for every resource and subresource, a user bound to exactly one verb can do that one thing and
//! nothing else, a server-side apply that creates needs `create` as well as `patch`, and no denied request sends a
//! write to Coder (the Coder API test server's whole request log is checked after each one).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cluster::{
    SERVER_NAMESPACE, assert_success, kubectl, kubectl_json, serve_alone, static_provider, wait_until,
};
use coder_k8s_aggregated_apiserver::coder::template_import::{
    BACKOFF_AFTER_ENV, INITIAL_POLL_ENV, MAX_POLL_ENV, SettingsSource, WAIT_TIMEOUT_ENV,
};
use coder_k8s_aggregated_apiserver::coder::user_records::{KubeUserStore, UserStore};
use coder_k8s_aggregated_apiserver::coder::{
    groups, organizations, promote, template_versions, templates, transitions, users, workspace_log,
    workspaces,
};
use coder_k8s_aggregated_apiserver::generic::Registry;
use coder_k8s_coder_client::types::builds::Transition;
use coder_k8s_coder_client::types::groups::CreateGroupRequest;
use coder_k8s_coder_client::types::organizations::CreateOrganizationRequest;
use coder_k8s_coder_client::{CoderClient, SessionToken};
use coder_k8s_coder_testserver::{Config, Entitlement, TestServer};
use coder_k8s_testenv::ControlPlane;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::json;

const NAMESPACE: &str = "authz";
const API: &str = "/apis/aggregation.coder.com/v1alpha1";
/// The operator user owns the workspaces the aggregated API creates.
const OWNER: &str = "coder-k8s-operator";
/// A member of the default organization who is not a system user (Coder adds only those to groups).
const MEMBER: &str = "alice";

fn fast_waits() -> SettingsSource {
    let map: BTreeMap<&str, &str> = BTreeMap::from([
        (WAIT_TIMEOUT_ENV, "20s"),
        (BACKOFF_AFTER_ENV, "0s"),
        (INITIAL_POLL_ENV, "50ms"),
        (MAX_POLL_ENV, "50ms"),
    ]);
    Arc::new(move |name| map.get(name).map(|v| (*v).to_owned()))
}

/// Every resource and subresource the server has, over the test server.
fn registry(server: &TestServer, token: &str) -> Registry {
    registry_with_store(server.url(), token, None)
}

/// [`registry`] over the Coder at `url` with the user store of the server's namespace, which user creates and
/// deletes need.
fn registry_with_store(url: url::Url, token: &str, store: Option<Arc<dyn UserStore>>) -> Registry {
    let provider = static_provider(url, token, NAMESPACE, Duration::from_secs(10));
    let mut workspace_def = workspaces::resource(provider.clone());
    workspace_def.subresources = vec![
        workspace_log::subresource(provider.clone()),
        transitions::start(provider.clone()),
        transitions::stop(provider.clone()),
    ];
    let mut template_def = templates::resource_with(provider.clone(), fast_waits());
    template_def.subresources = vec![promote::subresource(provider.clone())];
    Registry {
        group: "aggregation.coder.com",
        version: "v1alpha1",
        resources: vec![
            workspace_def,
            template_def,
            template_versions::resource(provider.clone()),
            organizations::resource(provider.clone()),
            groups::resource(provider.clone()),
            users::resource_with(provider, store),
        ],
    }
}

/// One user bound to `verbs` on one resource (or `resource/subresource`) in the namespace.
struct Grant {
    user: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
}

#[rustfmt::skip]
const GRANTS: &[Grant] = &[
    Grant { user: "ws-get", resource: "coderworkspaces", verbs: &["get"] },
    Grant { user: "ws-list", resource: "coderworkspaces", verbs: &["list"] },
    Grant { user: "ws-watch", resource: "coderworkspaces", verbs: &["watch"] },
    Grant { user: "ws-create", resource: "coderworkspaces", verbs: &["create"] },
    Grant { user: "ws-update", resource: "coderworkspaces", verbs: &["update"] },
    Grant { user: "ws-patch", resource: "coderworkspaces", verbs: &["patch"] },
    Grant { user: "ws-delete", resource: "coderworkspaces", verbs: &["delete"] },
    Grant { user: "ws-log", resource: "coderworkspaces/log", verbs: &["get"] },
    Grant { user: "ws-start", resource: "coderworkspaces/start", verbs: &["create"] },
    Grant { user: "ws-stop", resource: "coderworkspaces/stop", verbs: &["create"] },
    Grant { user: "ws-apply", resource: "coderworkspaces", verbs: &["patch", "create"] },
    Grant { user: "tpl-get", resource: "codertemplates", verbs: &["get"] },
    Grant { user: "tpl-list", resource: "codertemplates", verbs: &["list"] },
    Grant { user: "tpl-watch", resource: "codertemplates", verbs: &["watch"] },
    Grant { user: "tpl-create", resource: "codertemplates", verbs: &["create"] },
    Grant { user: "tpl-update", resource: "codertemplates", verbs: &["update"] },
    Grant { user: "tpl-patch", resource: "codertemplates", verbs: &["patch"] },
    Grant { user: "tpl-delete", resource: "codertemplates", verbs: &["delete"] },
    Grant { user: "tpl-promote", resource: "codertemplates/promote", verbs: &["create"] },
    Grant { user: "tpl-apply", resource: "codertemplates", verbs: &["patch", "create"] },
    Grant { user: "ver-get", resource: "codertemplateversions", verbs: &["get"] },
    Grant { user: "ver-list", resource: "codertemplateversions", verbs: &["list"] },
    Grant { user: "ver-watch", resource: "codertemplateversions", verbs: &["watch"] },
    Grant { user: "ver-create", resource: "codertemplateversions", verbs: &["create"] },
    Grant { user: "org-get", resource: "coderorganizations", verbs: &["get"] },
    Grant { user: "org-list", resource: "coderorganizations", verbs: &["list"] },
    Grant { user: "org-watch", resource: "coderorganizations", verbs: &["watch"] },
    Grant { user: "org-create", resource: "coderorganizations", verbs: &["create"] },
    Grant { user: "org-update", resource: "coderorganizations", verbs: &["update"] },
    Grant { user: "org-patch", resource: "coderorganizations", verbs: &["patch"] },
    Grant { user: "org-delete", resource: "coderorganizations", verbs: &["delete"] },
    Grant { user: "org-apply", resource: "coderorganizations", verbs: &["patch", "create"] },
    Grant { user: "grp-get", resource: "codergroups", verbs: &["get"] },
    Grant { user: "grp-list", resource: "codergroups", verbs: &["list"] },
    Grant { user: "grp-watch", resource: "codergroups", verbs: &["watch"] },
    Grant { user: "grp-create", resource: "codergroups", verbs: &["create"] },
    Grant { user: "grp-update", resource: "codergroups", verbs: &["update"] },
    Grant { user: "grp-patch", resource: "codergroups", verbs: &["patch"] },
    Grant { user: "grp-delete", resource: "codergroups", verbs: &["delete"] },
    Grant { user: "grp-apply", resource: "codergroups", verbs: &["patch", "create"] },
    Grant { user: "usr-get", resource: "coderusers", verbs: &["get"] },
    Grant { user: "usr-list", resource: "coderusers", verbs: &["list"] },
    Grant { user: "usr-watch", resource: "coderusers", verbs: &["watch"] },
    Grant { user: "usr-update", resource: "coderusers", verbs: &["update"] },
    Grant { user: "usr-patch", resource: "coderusers", verbs: &["patch"] },
    Grant { user: "usr-create", resource: "coderusers", verbs: &["create"] },
    Grant { user: "usr-apply", resource: "coderusers", verbs: &["patch", "create"] },
    Grant { user: "usr-delete", resource: "coderusers", verbs: &["delete"] },
];

async fn bind(cp: &ControlPlane, grant: &Grant) {
    let client = cp.client().unwrap();
    let (resource, verbs) = (grant.resource, grant.verbs);
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": grant.user, "namespace": NAMESPACE},
        "rules": [{"apiGroups": ["aggregation.coder.com"], "resources": [resource], "verbs": verbs}],
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": grant.user, "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": grant.user},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": grant.user}],
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(client, NAMESPACE)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// Waits until RBAC answers for the last binding (the authorizer's cache fills from kube-apiserver's informers).
async fn wait_for_rbac(cp: &ControlPlane) {
    wait_until(
        "the last binding is in effect",
        Duration::from_secs(30),
        || async {
            kubectl(
                cp,
                &[
                    "auth",
                    "can-i",
                    "get",
                    "codertemplateversions",
                    "-n",
                    NAMESPACE,
                    "--as=ver-get",
                ],
                None,
            )
            .status
            .success()
        },
    )
    .await;
}

/// What a request does once allowed, so the next one starts from a settled workspace.
#[derive(Clone, Copy, PartialEq)]
enum After {
    Nothing,
    SettleWorkspace,
}

/// One request, and the users allowed to make it.
struct Operation {
    what: String,
    allowed: &'static [&'static str],
    args: Vec<String>,
    stdin: Option<String>,
    after: After,
    /// Denied, not even a read reaches Coder (the whole request log stays empty).
    reads_nothing_when_denied: bool,
}

fn op(what: &str, allowed: &'static [&'static str], args: &[&str]) -> Operation {
    Operation {
        what: what.to_owned(),
        allowed,
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        stdin: None,
        after: After::Nothing,
        reads_nothing_when_denied: false,
    }
}

impl Operation {
    fn with_stdin(mut self, stdin: String) -> Self {
        self.stdin = Some(stdin);
        self
    }

    fn settles(mut self) -> Self {
        self.after = After::SettleWorkspace;
        self
    }

    fn reads_nothing_when_denied(mut self) -> Self {
        self.reads_nothing_when_denied = true;
        self
    }
}

fn template_manifest(name: &str, description: &str) -> String {
    let organization = name.split('.').next().unwrap_or_default();
    json!({
        "apiVersion": "aggregation.coder.com/v1alpha1",
        "kind": "CoderTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"organization": organization, "description": description, "files": {"main.tf": "terraform {}\n"}},
    })
    .to_string()
}

fn workspace_manifest(name: &str, org: &str, running: bool) -> String {
    json!({
        "apiVersion": "aggregation.coder.com/v1alpha1",
        "kind": "CoderWorkspace",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"organization": org, "templateName": "base", "running": running},
    })
    .to_string()
}

/// A watch from the resourceVersion of a list the cluster admin just made (this server has no watch cache).
fn raw_watch(cp: &ControlPlane, resource: &str) -> String {
    let path = format!("{API}/namespaces/{NAMESPACE}/{resource}");
    let list = kubectl_json(cp, &["get", "--raw", &path]);
    let version = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("a list resourceVersion");
    format!("{API}/namespaces/{NAMESPACE}/{resource}?watch=true&timeoutSeconds=1&resourceVersion={version}")
}

/// The object as the cluster admin reads it now: a PUT body that changes nothing.
fn current(cp: &ControlPlane, kind: &str, name: &str) -> String {
    kubectl_json(cp, &["get", kind, name, "-n", NAMESPACE, "-o", "json"]).to_string()
}

fn subresource(resource: &str, name: &str, sub: &str) -> String {
    format!("{API}/namespaces/{NAMESPACE}/{resource}/{name}/{sub}")
}

/// The workspace operations, in an order in which each allowed one finds the state it needs: the workspace `ws`
/// runs until the applied change stops it, the start starts it again and the stop stops it. (`kubectl patch` reads
/// the object first, so the `patch` verb is exercised through server-side apply, which is a PATCH.)
fn workspace_operations(cp: &ControlPlane, org: &str) -> Vec<Operation> {
    let ws = format!("{org}.{OWNER}.ws");
    vec![
        op(
            "get a workspace",
            &["ws-get"],
            &["get", "coderworkspaces", ws.as_str(), "-n", NAMESPACE],
        ),
        op(
            "list workspaces",
            &["ws-list"],
            &["get", "coderworkspaces", "-n", NAMESPACE],
        ),
        op(
            "watch workspaces",
            &["ws-watch"],
            &["get", "--raw", &raw_watch(cp, "coderworkspaces")],
        ),
        op(
            "read a build log",
            &["ws-log"],
            &[
                "get",
                "--raw",
                &subresource("coderworkspaces", ws.as_str(), "log"),
            ],
        ),
        op(
            "create a workspace",
            &["ws-create"],
            &["create", "-f", "-", "-n", NAMESPACE],
        )
        .with_stdin(workspace_manifest(&format!("{org}.{OWNER}.created"), org, true))
        .settles(),
        op(
            "update a workspace",
            &["ws-update"],
            &["replace", "-f", "-", "-n", NAMESPACE],
        )
        .with_stdin(current(cp, "coderworkspace", &ws)),
        op(
            "apply a change to a workspace",
            &["ws-patch", "ws-apply"],
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "-f",
                "-",
                "-n",
                NAMESPACE,
            ],
        )
        .with_stdin(workspace_manifest(&ws, org, false))
        .settles(),
        op(
            "apply a new workspace",
            &["ws-apply"],
            &["apply", "--server-side", "-f", "-", "-n", NAMESPACE],
        )
        .with_stdin(workspace_manifest(&format!("{org}.{OWNER}.applied"), org, true))
        .settles(),
        op(
            "start a workspace",
            &["ws-start"],
            &[
                "create",
                "--raw",
                &subresource("coderworkspaces", ws.as_str(), "start"),
                "-f",
                "-",
            ],
        )
        .with_stdin("{}".to_owned())
        .settles(),
        op(
            "stop a workspace",
            &["ws-stop"],
            &[
                "create",
                "--raw",
                &subresource("coderworkspaces", ws.as_str(), "stop"),
                "-f",
                "-",
            ],
        )
        .with_stdin("{}".to_owned())
        .settles(),
        op(
            "delete a workspace",
            &["ws-delete"],
            &[
                "delete",
                "coderworkspace",
                &format!("{org}.{OWNER}.doomed"),
                "--wait=false",
                "-n",
                NAMESPACE,
            ],
        )
        .settles(),
    ]
}

fn template_operations(
    cp: &ControlPlane,
    org: &str,
    active_version: &str,
    version_name: &str,
) -> Vec<Operation> {
    let tpl = format!("{org}.base");
    let promotion = json!({"apiVersion": "aggregation.coder.com/v1alpha1", "kind": "CoderTemplateVersionPromotion",
                           "spec": {"versionID": active_version}});
    vec![
        op(
            "get a template",
            &["tpl-get"],
            &["get", "codertemplates", tpl.as_str(), "-n", NAMESPACE],
        ),
        op(
            "list templates",
            &["tpl-list"],
            &["get", "codertemplates", "-n", NAMESPACE],
        ),
        op(
            "watch templates",
            &["tpl-watch"],
            &["get", "--raw", &raw_watch(cp, "codertemplates")],
        ),
        op(
            "create a template",
            &["tpl-create"],
            &["create", "-f", "-", "-n", NAMESPACE],
        )
        .with_stdin(template_manifest(&format!("{org}.created"), "created")),
        op(
            "update a template",
            &["tpl-update"],
            &["replace", "-f", "-", "-n", NAMESPACE],
        )
        .with_stdin(current(cp, "codertemplate", &tpl)),
        op(
            "apply a change to a template",
            &["tpl-patch", "tpl-apply"],
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "-f",
                "-",
                "-n",
                NAMESPACE,
            ],
        )
        .with_stdin(template_manifest(&tpl, "applied")),
        op(
            "apply a new template",
            &["tpl-apply"],
            &["apply", "--server-side", "-f", "-", "-n", NAMESPACE],
        )
        .with_stdin(template_manifest(&format!("{org}.applied"), "applied")),
        op(
            "promote a version",
            &["tpl-promote"],
            &[
                "create",
                "--raw",
                &subresource("codertemplates", tpl.as_str(), "promote"),
                "-f",
                "-",
            ],
        )
        .with_stdin(promotion.to_string()),
        op(
            "delete a template",
            &["tpl-delete"],
            &[
                "delete",
                "codertemplate",
                &format!("{org}.doomed"),
                "--wait=false",
                "-n",
                NAMESPACE,
            ],
        ),
        op(
            "get a template version",
            &["ver-get"],
            &["get", "codertemplateversions", version_name, "-n", NAMESPACE],
        ),
        op(
            "list template versions",
            &["ver-list"],
            &["get", "codertemplateversions", "-n", NAMESPACE],
        ),
    ]
}

/// The reads of organizations, groups and users. Denied, they must reach Coder not at all (checked on the whole
/// request log, see [`check`]).
fn people_operations(cp: &ControlPlane, org: &str) -> Vec<Operation> {
    let group = format!("{org}.Everyone");
    vec![
        op(
            "get an organization",
            &["org-get"],
            &["get", "coderorganizations", org, "-n", NAMESPACE],
        ),
        op(
            "list organizations",
            &["org-list"],
            &["get", "coderorganizations", "-n", NAMESPACE],
        ),
        op(
            "watch organizations",
            &["org-watch"],
            &["get", "--raw", &raw_watch(cp, "coderorganizations")],
        ),
        op(
            "get a group",
            &["grp-get"],
            &["get", "codergroups", group.as_str(), "-n", NAMESPACE],
        ),
        op(
            "list groups",
            &["grp-list"],
            &["get", "codergroups", "-n", NAMESPACE],
        ),
        op(
            "watch groups",
            &["grp-watch"],
            &["get", "--raw", &raw_watch(cp, "codergroups")],
        ),
        op(
            "get a user",
            &["usr-get"],
            &["get", "coderusers", OWNER, "-n", NAMESPACE],
        ),
        op(
            "list users",
            &["usr-list"],
            &["get", "coderusers", "-n", NAMESPACE],
        ),
        op(
            "watch users",
            &["usr-watch"],
            &["get", "--raw", &raw_watch(cp, "coderusers")],
        ),
    ]
    .into_iter()
    .map(Operation::reads_nothing_when_denied)
    .collect()
}

fn organization_manifest(name: &str, description: &str) -> String {
    json!({
        "apiVersion": "aggregation.coder.com/v1alpha1",
        "kind": "CoderOrganization",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"description": description},
    })
    .to_string()
}

fn group_manifest(org: &str, group: &str, quota_allowance: i64) -> String {
    json!({
        "apiVersion": "aggregation.coder.com/v1alpha1",
        "kind": "CoderGroup",
        "metadata": {"name": format!("{org}.{group}"), "namespace": NAMESPACE},
        "spec": {"organization": org, "quotaAllowance": quota_allowance, "members": [MEMBER]},
    })
    .to_string()
}

const APPLY: &[&str] = &[
    "apply",
    "--server-side",
    "--force-conflicts",
    "-f",
    "-",
    "-n",
    NAMESPACE,
];

/// The writes of organizations, groups and users (the test server plays a licensed Premium server), each kind's in an
/// order in which every allowed one finds what it needs (`seeded` and `doomed` exist).
fn people_writes(cp: &ControlPlane, org: &str) -> Vec<Operation> {
    let create: &[&str] = &["create", "-f", "-", "-n", NAMESPACE];
    let replace: &[&str] = &["replace", "-f", "-", "-n", NAMESPACE];
    let seeded_group = format!("{org}.seeded");
    let delete = |kind: &str, name: &str| -> Vec<String> {
        ["delete", kind, name, "--wait=false", "-n", NAMESPACE]
            .map(str::to_owned)
            .to_vec()
    };
    let mut delete_org = op("delete an organization", &["org-delete"], &[]);
    delete_org.args = delete("coderorganization", "doomed");
    let mut delete_group = op("delete a group", &["grp-delete"], &[]);
    delete_group.args = delete("codergroup", &format!("{org}.doomed"));
    let mut delete_user = op("delete a user", &["usr-delete"], &[]);
    delete_user.args = delete("coderuser", "doomed");
    vec![
        op("create an organization", &["org-create"], create)
            .with_stdin(organization_manifest("made", "made")),
        op("update an organization", &["org-update"], replace).with_stdin(current(
            cp,
            "coderorganization",
            "seeded",
        )),
        op(
            "apply a change to an organization",
            &["org-patch", "org-apply"],
            APPLY,
        )
        .with_stdin(organization_manifest("seeded", "applied")),
        op("apply a new organization", &["org-apply"], APPLY)
            .with_stdin(organization_manifest("applied", "applied")),
        delete_org,
        op("create a group", &["grp-create"], create).with_stdin(group_manifest(org, "made", 1)),
        op("update a group", &["grp-update"], replace).with_stdin(current(cp, "codergroup", &seeded_group)),
        op("apply a change to a group", &["grp-patch", "grp-apply"], APPLY)
            .with_stdin(group_manifest(org, "seeded", 9)),
        op("apply a new group", &["grp-apply"], APPLY).with_stdin(group_manifest(org, "applied", 2)),
        delete_group,
        op("update a user", &["usr-update"], replace).with_stdin(current(cp, "coderuser", MEMBER)),
        op("apply a change to a user", &["usr-patch", "usr-apply"], APPLY)
            .with_stdin(user_manifest(MEMBER, "Alice Applied")),
        op("create a user", &["usr-create"], create).with_stdin(new_user_manifest(org, "made")),
        op("apply a new user", &["usr-apply"], APPLY).with_stdin(new_user_manifest(org, "applied")),
        delete_user,
    ]
}

/// A user who signs in with GitHub (no password, so no Secret is involved) in the default organization.
fn new_user_manifest(org: &str, name: &str) -> String {
    json!({
        "apiVersion": "aggregation.coder.com/v1alpha1",
        "kind": "CoderUser",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"email": format!("{name}@example.com"), "loginType": "github", "organizations": {org: []}},
    })
    .to_string()
}

fn user_manifest(name: &str, full_name: &str) -> String {
    json!({
        "apiVersion": "aggregation.coder.com/v1alpha1",
        "kind": "CoderUser",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"name": full_name},
    })
    .to_string()
}

/// Every request the test server received that is not a read.
fn writes(server: &TestServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.method != "GET" && r.method != "HEAD")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// Waits until the workspace's latest build has ended, or the workspace is gone.
async fn settled(client: &CoderClient, leaf: &str) {
    for _ in 0..150 {
        match client.workspace_by_owner_and_name(OWNER, leaf).await {
            Ok(workspace) if !workspace.latest_build.job.status.is_terminal() => {}
            Ok(_) => return,
            Err(error) if error.is_not_found() => return,
            Err(error) => panic!("read workspace {leaf}: {error}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the latest build of {leaf} did not end");
}

async fn settle_all(client: &CoderClient) {
    for leaf in ["ws", "created", "applied", "doomed"] {
        settled(client, leaf).await;
    }
}

/// Runs `operation` as every single-verb user: the denied ones first (each must be Forbidden and send no write to
/// Coder), then the allowed ones (each must succeed). The users bound to two verbs run only where they are allowed.
async fn check(cp: &ControlPlane, server: &TestServer, client: &CoderClient, operation: &Operation) {
    let allowed: Vec<&Grant> = GRANTS
        .iter()
        .filter(|g| operation.allowed.contains(&g.user))
        .collect();
    assert_eq!(
        allowed.len(),
        operation.allowed.len(),
        "{}: unknown allowed user",
        operation.what
    );
    let denied = GRANTS
        .iter()
        .filter(|g| g.verbs.len() == 1 && !operation.allowed.contains(&g.user));
    for grant in denied {
        server.clear_requests();
        let out = run_as(cp, grant.user, operation);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("Forbidden"),
            "{} as {} (bound to {:?} on {}) was not forbidden ({}):\nstdout: {}\nstderr: {stderr}",
            operation.what,
            grant.user,
            grant.verbs,
            grant.resource,
            out.status,
            String::from_utf8_lossy(&out.stdout),
        );
        let sent = writes(server);
        assert!(
            sent.is_empty(),
            "{} as {}: denied, yet Coder got {sent:?}",
            operation.what,
            grant.user
        );
        if operation.reads_nothing_when_denied {
            let reached: Vec<String> = server
                .requests()
                .iter()
                .map(|r| format!("{} {}", r.method, r.path))
                .collect();
            assert!(
                reached.is_empty(),
                "{} as {}: denied, yet Coder was asked {reached:?}",
                operation.what,
                grant.user
            );
        }
    }
    for grant in allowed {
        let out = run_as(cp, grant.user, operation);
        assert_success(&out, &format!("{} as {}", operation.what, grant.user));
        if operation.after == After::SettleWorkspace {
            settle_all(client).await;
        }
    }
}

fn run_as(cp: &ControlPlane, user: &str, operation: &Operation) -> std::process::Output {
    let mut args = vec![format!("--as={user}")];
    args.extend(operation.args.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    kubectl(cp, &args, operation.stdin.as_deref())
}

/// Creates what the operations work on, as a cluster admin (system:masters, which the server does not review).
async fn seed(cp: &ControlPlane, client: &CoderClient, org: &str) {
    for name in ["base", "doomed"] {
        let out = kubectl(
            cp,
            &["create", "-n", NAMESPACE, "-f", "-"],
            Some(&template_manifest(&format!("{org}.{name}"), name)),
        );
        assert_success(&out, &format!("create template {name}"));
    }
    for leaf in ["ws", "doomed"] {
        let manifest = workspace_manifest(&format!("{org}.{OWNER}.{leaf}"), org, true);
        let out = kubectl(cp, &["create", "-n", NAMESPACE, "-f", "-"], Some(&manifest));
        assert_success(&out, &format!("create workspace {leaf}"));
        settled(client, leaf).await;
    }
}

/// Plays a licensed server (more organizations, groups) with the organizations and groups the writes need.
async fn seed_people(server: &TestServer, client: &CoderClient, org: &str) {
    for feature in ["multiple_organizations", "template_rbac"] {
        server.set_entitlement(feature, Entitlement::Entitled);
    }
    server.mint_token(MEMBER, &[]).await.unwrap();
    server.mint_token("doomed", &[]).await.unwrap();
    for name in ["seeded", "doomed"] {
        let request = CreateOrganizationRequest {
            name: name.to_owned(),
            ..CreateOrganizationRequest::default()
        };
        client.create_organization(&request).await.unwrap();
        let request = CreateGroupRequest {
            name: name.to_owned(),
            ..CreateGroupRequest::default()
        };
        client.create_group(org, &request).await.unwrap();
    }
}

// kubectl runs as a blocking child process: the test server needs worker threads of its own meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_verb_on_each_resource_allows_exactly_its_own_request_and_denied_ones_never_reach_coder() {
    coder_k8s_coder_client::install_ring_provider();
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    let db_url = pg.unique_coder_database("authz").await.unwrap();
    let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let mut config = Config::new(&db_url);
    config.build_duration = Duration::from_millis(100);
    let server = TestServer::start(config).await.unwrap();
    let client = CoderClient::new(server.url(), SessionToken::new(token.clone())).unwrap();
    let org = client.default_organization().await.unwrap().name;

    let (url, server_token) = (server.url(), token.clone());
    let cp = serve_alone(NAMESPACE, "codertemplates", move |kube| {
        let store: Arc<dyn UserStore> = Arc::new(KubeUserStore::new(kube, SERVER_NAMESPACE));
        registry_with_store(url, &server_token, Some(store))
    })
    .await;
    for grant in GRANTS {
        bind(cp, grant).await;
    }
    wait_for_rbac(cp).await;
    seed(cp, &client, &org).await;
    seed_people(&server, &client, &org).await;
    let template = client.template_by_name(&org, "base").await.unwrap();
    let versions = kubectl_json(
        cp,
        &["get", "codertemplateversions", "-n", NAMESPACE, "-o", "json"],
    );
    let version_name = versions["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["metadata"]["uid"] == template.active_version_id.to_string())
        .and_then(|v| v["metadata"]["name"].as_str())
        .expect("the active version of the base template is listed")
        .to_owned();

    let operations = workspace_operations(cp, &org)
        .into_iter()
        .chain(template_operations(
            cp,
            &org,
            &template.active_version_id.to_string(),
            &version_name,
        ))
        .chain(people_operations(cp, &org))
        .chain(people_writes(cp, &org));
    let mut checked = 0;
    for operation in operations {
        check(cp, &server, &client, &operation).await;
        checked += 1;
    }
    assert_eq!(checked, 46, "every operation ran");

    // The allowed writes did reach Coder.
    let ws = client.workspace_by_owner_and_name(OWNER, "ws").await.unwrap();
    assert_eq!(
        ws.latest_build.transition,
        Transition::Stop,
        "the last allowed transition of ws was the stop"
    );
    for leaf in ["created", "applied"] {
        client
            .workspace_by_owner_and_name(OWNER, leaf)
            .await
            .unwrap_or_else(|e| panic!("workspace {leaf}: {e}"));
    }
    for name in ["created", "applied"] {
        client
            .template_by_name(&org, name)
            .await
            .unwrap_or_else(|e| panic!("template {name}: {e}"));
    }
    assert_eq!(
        client.template_by_name(&org, "base").await.unwrap().description,
        "applied"
    );
    assert!(
        client.template_by_name(&org, "doomed").await.is_err(),
        "the allowed delete removed the template"
    );
    for name in ["made", "applied"] {
        client
            .organization(name)
            .await
            .unwrap_or_else(|e| panic!("organization {name}: {e}"));
        client
            .group_by_name(&org, name)
            .await
            .unwrap_or_else(|e| panic!("group {name}: {e}"));
    }
    assert_eq!(
        client.organization("seeded").await.unwrap().description,
        "applied"
    );
    let seeded = client.group_by_name(&org, "seeded").await.unwrap();
    assert_eq!(seeded.quota_allowance, 9);
    let members: Vec<&str> = seeded.members.iter().map(|m| m.username.as_str()).collect();
    assert_eq!(members, [MEMBER]);
    assert_eq!(client.user(MEMBER).await.unwrap().name, "Alice Applied");
    for name in ["made", "applied"] {
        let user = client
            .user(name)
            .await
            .unwrap_or_else(|e| panic!("user {name}: {e}"));
        assert_eq!(user.login_type, "github");
    }
    assert_eq!(
        client.user("doomed").await.unwrap().status,
        "suspended",
        "the allowed delete suspended the user"
    );
    assert!(
        client.organization("doomed").await.is_err(),
        "the allowed delete removed the organization"
    );
    assert!(
        client.group_by_name(&org, "doomed").await.is_err(),
        "the allowed delete removed the group"
    );
}

// A PUT never creates: an update-only user's replace of a missing object is a 404 that sends no write to Coder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_of_a_missing_object_creates_nothing() {
    coder_k8s_coder_client::install_ring_provider();
    let pg = coder_k8s_testenv::postgres::shared().await.unwrap();
    let db_url = pg.unique_coder_database("authzput").await.unwrap();
    let token = coder_k8s_operator_access::ensure_operator_access(&db_url, "ns", "cp", None)
        .await
        .unwrap()
        .expose();
    let server = TestServer::start(Config::new(&db_url)).await.unwrap();
    let client = CoderClient::new(server.url(), SessionToken::new(token.clone())).unwrap();
    let org = client.default_organization().await.unwrap().name;
    let registry = registry(&server, &token);
    let cp = serve_alone(NAMESPACE, "codertemplates", move |_| registry).await;
    for grant in GRANTS
        .iter()
        .filter(|g| g.user == "tpl-update" || g.user == "ws-update" || g.user == "ver-get")
    {
        bind(cp, grant).await;
    }
    wait_for_rbac(cp).await;
    server.clear_requests();
    let cases = [
        ("tpl-update", template_manifest(&format!("{org}.missing"), "x")),
        (
            "ws-update",
            workspace_manifest(&format!("{org}.{OWNER}.missing"), &org, true),
        ),
    ];
    for (user, manifest) in cases {
        let out = kubectl(
            cp,
            &[&format!("--as={user}"), "replace", "-n", NAMESPACE, "-f", "-"],
            Some(&manifest),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("NotFound"),
            "{user}: {stderr}"
        );
    }
    assert_eq!(writes(&server), Vec::<String>::new());
    assert!(
        server.requests().iter().any(|r| r.method == "GET"),
        "the server did look the objects up"
    );
}
