//! `CoderTemplate` settings as code through kube-apiserver and the real kubectl: every setting applied from YAML
//! (server-side apply) reads back from Coder; a change made in Coder shows on the next get, in the spec and the
//! status; the same YAML applied again sets it back; a template applied from one YAML equals one configured by hand
//! through Coder's API. Premium settings against the Coder API test server with the features licensed, their
//! refusals against an unlicensed test server and the real open-source Coder; `kubectl explain` describes every field.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;
mod templates_as_code;

use std::collections::BTreeMap;
use std::time::Duration;

use cluster::{assert_success, kubectl, stdout, wait_until};
use coder_k8s_coder_client::types::template_acl::{TemplateAcl, UpdateTemplateAcl};
use coder_k8s_coder_client::types::{
    CreateTemplateRequest, Template, TemplateAutostartRequirement, TemplateAutostopRequirement,
    UpdateTemplateMeta,
};
use serde_json::{Value, json};
use templates_as_code::{ALL_FEATURES, Coder, Served, assert_refused, unique};
use uuid::Uuid;

/// The settings every licensed test applies, as YAML lines under `spec:`.
const EVERY_SETTING: &str = r#"  defaultTTL: 8h
  activityBump: 30m
  autostopRequirement:
    daysOfWeek: [monday, saturday]
    weeks: 2
  autostartRequirement:
    daysOfWeek: [monday, tuesday, wednesday]
  allowUserAutostart: false
  allowUserAutostop: false
  allowUserCancelWorkspaceJobs: true
  failureTTL: 1h
  timeTilDormant: 168h
  timeTilDormantAutoDelete: 720h
  requireActiveVersion: true
  deprecationMessage: use the v2 template
  maxPortShareLevel: authenticated
"#;

/// A CoderTemplate manifest: `spec_lines` go under `spec:` after the organization.
fn manifest(coder: &Coder, namespace: &str, template: &str, spec_lines: &str) -> String {
    format!(
        "apiVersion: aggregation.coder.com/v1alpha1\nkind: CoderTemplate\nmetadata:\n  name: {org}.{template}\n  namespace: {namespace}\nspec:\n  organization: {org}\n{spec_lines}",
        org = coder.organization
    )
}

/// The files of a template created from YAML on the test server (any source imports there).
const FILES: &str = "  files:\n    main.tf: |\n      terraform {}\n";

/// What Coder holds after [`EVERY_SETTING`].
fn assert_every_setting(t: &Template) {
    assert_eq!(
        (t.default_ttl_ms, t.activity_bump_ms),
        (28_800_000, 1_800_000),
        "{t:#?}"
    );
    assert_eq!(
        t.autostop_requirement,
        TemplateAutostopRequirement {
            days_of_week: vec!["monday".into(), "saturday".into()],
            weeks: 2
        }
    );
    assert_eq!(
        t.autostart_requirement.days_of_week,
        ["monday", "tuesday", "wednesday"]
    );
    assert_eq!(
        (
            t.allow_user_autostart,
            t.allow_user_autostop,
            t.allow_user_cancel_workspace_jobs
        ),
        (false, false, true)
    );
    assert_eq!(
        (
            t.failure_ttl_ms,
            t.time_til_dormant_ms,
            t.time_til_dormant_autodelete_ms
        ),
        (3_600_000, 604_800_000, 2_592_000_000)
    );
    assert!(t.require_active_version);
    assert_eq!(t.deprecation_message, "use the v2 template");
    assert_eq!(t.max_port_share_level, "authenticated");
}

/// `(name, role)` pairs, sorted.
type Entries = Vec<(String, String)>;

/// The access list by name and role: users, then groups.
fn names(acl: &TemplateAcl) -> (Entries, Entries) {
    let mut users: Vec<_> = acl
        .users
        .iter()
        .map(|u| (u.username.clone(), u.role.clone()))
        .collect();
    let mut groups: Vec<_> = acl
        .groups
        .iter()
        .map(|g| (g.name.clone(), g.role.clone()))
        .collect();
    users.sort();
    groups.sort();
    (users, groups)
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// The spec fields of [`EVERY_SETTING`] as a read shows them.
fn shown_every_setting() -> Value {
    json!({
        "defaultTTL": "8h",
        "activityBump": "30m",
        "autostopRequirement": {"daysOfWeek": ["monday", "saturday"], "weeks": 2},
        "autostartRequirement": {"daysOfWeek": ["monday", "tuesday", "wednesday"]},
        "allowUserAutostart": false,
        "allowUserAutostop": false,
        "allowUserCancelWorkspaceJobs": true,
        "failureTTL": "1h",
        "timeTilDormant": "168h",
        "timeTilDormantAutoDelete": "720h",
        "requireActiveVersion": true,
        "deprecationMessage": "use the v2 template",
        "maxPortShareLevel": "authenticated",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_setting_applies_reads_back_drifts_and_is_set_back_on_a_licensed_coder() {
    let served = Served::shared().await;
    let coder = Coder::test_server(&ALL_FEATURES).await;
    let ns = served.namespace("tpl-every", &coder).await;
    let (alice, bob) = (unique("alice"), unique("bob"));
    coder.user(&alice).await;
    coder.user(&bob).await;
    coder.test_server_ref().add_group(coder.organization_id, "devs");
    let acl = format!(
        "  acl:\n    groups:\n    - {{name: Everyone, role: use}}\n    - {{name: devs, role: admin}}\n    users:\n    - {{name: {alice}, role: admin}}\n"
    );
    let yaml = manifest(&coder, &ns, "every", &format!("{FILES}{EVERY_SETTING}{acl}"));
    assert_success(&served.apply(&yaml, &[]), "apply every setting");

    let template = coder
        .client
        .template_by_name(&coder.organization, "every")
        .await
        .unwrap();
    assert_every_setting(&template);
    let (users, groups) = names(&coder.client.template_acl(template.id).await.unwrap());
    assert_eq!(users, pairs(&[(&alice, "admin")]));
    assert_eq!(groups, pairs(&[("Everyone", "use"), ("devs", "admin")]));
    let name = format!("{}.every", coder.organization);
    let object = served.get(&ns, &name);
    for (key, value) in shown_every_setting().as_object().unwrap() {
        assert_eq!(&object["spec"][key], value, "spec.{key}");
        assert_eq!(&object["status"][key], value, "status.{key}");
    }
    let shown_acl = json!({
        "groups": [{"name": "Everyone", "role": "use"}, {"name": "devs", "role": "admin"}],
        "users": [{"name": alice, "role": "admin"}],
    });
    assert_eq!(object["spec"]["acl"], shown_acl);
    assert_eq!(object["status"]["acl"], shown_acl);

    // Changed in Coder, as its UI does (the whole metadata body, an access-list update).
    let changed = UpdateTemplateMeta {
        default_ttl_ms: 3_600_000,
        failure_ttl_ms: 0,
        allow_user_autostop: true,
        autostart_requirement: Some(TemplateAutostartRequirement {
            days_of_week: vec!["sunday".into()],
        }),
        deprecation_message: Some(String::new()),
        max_port_share_level: Some("public".into()),
        require_active_version: false,
        ..UpdateTemplateMeta::from_template(&template)
    };
    coder
        .client
        .update_template_meta(template.id, &changed)
        .await
        .unwrap();
    let bob_id = coder.client.user(&bob).await.unwrap().id;
    let alice_id = coder.client.user(&alice).await.unwrap().id;
    coder
        .client
        .update_template_acl(
            template.id,
            &UpdateTemplateAcl {
                user_perms: BTreeMap::from([(bob_id, "use".to_owned()), (alice_id, String::new())]),
                group_perms: BTreeMap::new(),
            },
        )
        .await
        .unwrap();
    let object = served.get(&ns, &name);
    let drifted = [
        ("defaultTTL", json!("1h")),
        ("failureTTL", json!("0s")),
        ("allowUserAutostop", json!(true)),
        ("autostartRequirement", json!({"daysOfWeek": ["sunday"]})),
        ("deprecationMessage", json!("")),
        ("maxPortShareLevel", json!("public")),
        ("requireActiveVersion", json!(false)),
    ];
    for (key, value) in &drifted {
        assert_eq!(&object["spec"][key], value, "spec.{key} shows Coder's change");
        assert_eq!(&object["status"][key], value, "status.{key} shows Coder's change");
    }
    assert_eq!(
        object["spec"]["acl"]["users"],
        json!([{"name": bob, "role": "use"}])
    );
    assert_eq!(
        object["status"]["acl"]["users"],
        json!([{"name": bob, "role": "use"}])
    );

    // The Git file again sets every value back.
    assert_success(&served.apply(&yaml, &[]), "apply the YAML again");
    assert_every_setting(&coder.read(template.id).await);
    let (users, groups) = names(&coder.client.template_acl(template.id).await.unwrap());
    assert_eq!(users, pairs(&[(&alice, "admin")]), "bob removed, alice back");
    assert_eq!(groups, pairs(&[("Everyone", "use"), ("devs", "admin")]));

    // And once more: nothing to write.
    coder.test_server_ref().clear_requests();
    assert_success(&served.apply(&yaml, &[]), "apply unchanged");
    assert_eq!(coder.writes(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_then_replace_round_trip_writes_nothing() {
    let served = Served::shared().await;
    let coder = Coder::test_server(&ALL_FEATURES).await;
    let ns = served.namespace("tpl-round", &coder).await;
    let yaml = manifest(&coder, &ns, "round", &format!("{FILES}{EVERY_SETTING}"));
    assert_success(&served.apply(&yaml, &[]), "apply");
    let name = format!("{}.round", coder.organization);
    let object = served.get(&ns, &name);
    assert!(object["spec"]["acl"]["groups"].is_array(), "{object}");
    coder.test_server_ref().clear_requests();
    let out = kubectl(served.cp, &["replace", "-f", "-"], Some(&object.to_string()));
    assert_success(&out, "kubectl replace of the object as read");
    assert_eq!(coder.writes(), Vec::<String>::new());
    let out = kubectl(
        served.cp,
        &[
            "patch",
            "codertemplate",
            &name,
            "-n",
            &ns,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"description":"x"}}"#,
        ],
        None,
    );
    assert_success(&out, "kubectl patch of the description");
    assert_eq!(
        coder.writes(),
        [format!(
            "PATCH /api/v2/templates/{}",
            object["status"]["id"].as_str().unwrap()
        )],
        "only the metadata is written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_settings_apply_read_back_drift_and_are_set_back_on_the_real_coder() {
    let served = Served::shared().await;
    let coder = Coder::real().await;
    let ns = served.namespace("tpl-real", &coder).await;
    let template = coder.template(&unique("open")).await;
    let lines = "  defaultTTL: 2h\n  activityBump: 15m\n  allowUserCancelWorkspaceJobs: true\n  deprecationMessage: \"\"\n  maxPortShareLevel: public\n";
    let yaml = manifest(&coder, &ns, &template.name, lines);
    assert_success(&served.apply(&yaml, &[]), "apply the open-source settings");
    let read = coder.read(template.id).await;
    assert_eq!(
        (
            read.default_ttl_ms,
            read.activity_bump_ms,
            read.allow_user_cancel_workspace_jobs,
            read.deprecation_message.as_str(),
            read.max_port_share_level.as_str()
        ),
        (7_200_000, 900_000, true, "", "public")
    );
    let name = format!("{}.{}", coder.organization, template.name);
    let body = UpdateTemplateMeta {
        default_ttl_ms: 600_000,
        activity_bump_ms: 0,
        allow_user_cancel_workspace_jobs: false,
        ..UpdateTemplateMeta::from_template(&read)
    };
    coder
        .client
        .update_template_meta(template.id, &body)
        .await
        .unwrap();
    let object = served.get(&ns, &name);
    for (key, value) in [
        ("defaultTTL", json!("10m")),
        ("activityBump", json!("0s")),
        ("allowUserCancelWorkspaceJobs", json!(false)),
    ] {
        assert_eq!(object["spec"][key], value, "spec.{key}");
        assert_eq!(object["status"][key], value, "status.{key}");
    }
    assert!(
        object["spec"].get("acl").is_none(),
        "open-source Coder has no access lists: {object}"
    );
    assert_success(&served.apply(&yaml, &[]), "apply again");
    let again = coder.read(template.id).await;
    assert_eq!(
        (
            again.default_ttl_ms,
            again.activity_bump_ms,
            again.allow_user_cancel_workspace_jobs
        ),
        (7_200_000, 900_000, true)
    );
}

/// One premium setting each, as YAML under `spec:`, with the field a refusal names.
const PREMIUM: [(&str, &str); 8] = [
    ("  failureTTL: 1h\n", "spec.failureTTL"),
    ("  timeTilDormant: 24h\n", "spec.timeTilDormant"),
    (
        "  timeTilDormantAutoDelete: 48h\n",
        "spec.timeTilDormantAutoDelete",
    ),
    ("  allowUserAutostart: false\n", "spec.allowUserAutostart"),
    ("  allowUserAutostop: false\n", "spec.allowUserAutostop"),
    (
        "  autostopRequirement: {daysOfWeek: [sunday]}\n",
        "spec.autostopRequirement",
    ),
    ("  requireActiveVersion: true\n", "spec.requireActiveVersion"),
    ("  deprecationMessage: gone\n", "spec.deprecationMessage"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn premium_settings_are_refused_before_any_write_on_an_unlicensed_coder() {
    let served = Served::shared().await;
    let coder = Coder::test_server(&[]).await;
    let ns = served.namespace("tpl-unlic", &coder).await;
    let template = coder.template("unlicensed").await;
    let before = coder.read(template.id).await;
    let features = [
        "Advanced Template Scheduling (advanced_template_scheduling), which this Coder deployment is not licensed for",
        "Access Control (access_control), which this Coder deployment is not licensed for",
    ];
    for (lines, field) in PREMIUM {
        coder.test_server_ref().clear_requests();
        let out = served.apply(&manifest(&coder, &ns, "unlicensed", lines), &[]);
        let feature = if field.contains("Active") || field.contains("deprecation") {
            features[1]
        } else {
            features[0]
        };
        assert_refused(
            &out,
            &format!("is invalid: {field}: Forbidden: needs Coder's premium feature {feature}"),
        );
        assert_eq!(
            coder.writes(),
            Vec::<String>::new(),
            "{field}: nothing is written"
        );
    }
    // Coder answers these itself: its message is passed on, nothing else is written first.
    coder.test_server_ref().clear_requests();
    let out = served.apply(
        &manifest(
            &coder,
            &ns,
            "unlicensed",
            "  maxPortShareLevel: authenticated\n  defaultTTL: 1h\n",
        ),
        &[],
    );
    assert_refused(
        &out,
        "Restricting port sharing level is an enterprise feature that is not enabled.",
    );
    assert_eq!(
        coder.writes(),
        [format!("PATCH /api/v2/templates/{}", template.id)],
        "the refused metadata update only"
    );
    coder.test_server_ref().clear_requests();
    let out = served.apply(
        &manifest(&coder, &ns, "unlicensed", "  acl:\n    users: []\n"),
        &[],
    );
    // Coder's own refusal: the same status and words for a create (below).
    let acl_refusal = "Error from server (Forbidden)";
    let acl_message = "is forbidden: Template RBAC is a Premium feature. Contact sales!";
    assert_refused(&out, acl_refusal);
    assert_refused(&out, acl_message);
    assert_eq!(coder.writes(), Vec::<String>::new());
    // A create is refused before its upload.
    coder.test_server_ref().clear_requests();
    let out = served.apply(
        &manifest(&coder, &ns, "fresh", &format!("{FILES}  failureTTL: 2h\n")),
        &[],
    );
    assert_refused(
        &out,
        "spec.failureTTL: Forbidden: needs Coder's premium feature Advanced Template Scheduling",
    );
    let out = served.apply(
        &manifest(&coder, &ns, "fresh", &format!("{FILES}  acl:\n    users: []\n")),
        &[],
    );
    assert_refused(&out, acl_refusal);
    assert_refused(&out, acl_message);
    assert_eq!(coder.writes(), Vec::<String>::new());
    assert_eq!(coder.read(template.id).await, before, "the template is as it was");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn premium_settings_are_refused_on_the_real_coder() {
    let served = Served::shared().await;
    let coder = Coder::real().await;
    let ns = served.namespace("tpl-oss", &coder).await;
    let template = coder.template(&unique("oss")).await;
    let before = coder.read(template.id).await;
    let open_source = "which open-source Coder does not have";
    for (lines, field) in PREMIUM {
        let out = served.apply(&manifest(&coder, &ns, &template.name, lines), &[]);
        assert_refused(
            &out,
            &format!("is invalid: {field}: Forbidden: needs Coder's premium feature"),
        );
        assert_refused(&out, open_source);
    }
    let out = served.apply(
        &manifest(
            &coder,
            &ns,
            &template.name,
            "  maxPortShareLevel: authenticated\n",
        ),
        &[],
    );
    assert_refused(
        &out,
        "Restricting port sharing level is an enterprise feature that is not enabled.",
    );
    let out = served.apply(
        &manifest(&coder, &ns, &template.name, "  acl:\n    users: []\n"),
        &[],
    );
    let not_served = "spec.acl: Forbidden: needs Coder's premium feature Template RBAC (template_rbac), which open-source Coder does not have; nothing was changed";
    assert_refused(&out, not_served);
    // A create gets the same refusal, before its upload.
    let out = served.apply(
        &manifest(
            &coder,
            &ns,
            &unique("oss-acl"),
            &format!("{FILES}  acl:\n    users: []\n"),
        ),
        &[],
    );
    assert_refused(&out, not_served);
    assert_eq!(coder.read(template.id).await, before, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_and_unknown_names_are_422s_naming_the_field() {
    let served = Served::shared().await;
    let coder = Coder::test_server(&ALL_FEATURES).await;
    let ns = served.namespace("tpl-bad", &coder).await;
    coder.template("bad").await;
    coder.test_server_ref().clear_requests();
    let out = served.apply(
        &manifest(
            &coder,
            &ns,
            "bad",
            "  defaultTTL: 2x\n  failureTTL: 30s\n  autostopRequirement: {weeks: 17}\n  maxPortShareLevel: everyone\n",
        ),
        &[],
    );
    for expected in [
        "spec.defaultTTL: Invalid value: \"2x\": must be a duration such as \"8h\", \"30m\" or \"1h30m\"",
        "spec.failureTTL: Invalid value: \"30s\": must be 0s or at least 1m",
        "spec.autostopRequirement.weeks: Invalid value: \"17\": must be between 1 and 16",
        "spec.maxPortShareLevel: Unsupported value: \"everyone\"",
    ] {
        assert_refused(&out, expected);
    }
    let alice = unique("alice");
    coder.user(&alice).await;
    let out = served.apply(
        &manifest(
            &coder,
            &ns,
            "bad",
            &format!(
                "  acl:\n    users:\n    - {{name: {alice}, role: use}}\n    - {{name: nobody-here, role: use}}\n    - {{name: {}, role: use}}\n    groups:\n    - {{name: ops, role: admin}}\n",
                alice.to_uppercase()
            ),
        ),
        &[],
    );
    assert_refused(
        &out,
        "spec.acl.users[1].name: Not found: \"nobody-here\": Coder has no user of this name",
    );
    assert_refused(
        &out,
        &format!(
            "spec.acl.users[2].name: Invalid value: {:?}: Coder's user is named {alice:?}: use that name",
            alice.to_uppercase()
        ),
    );
    assert_refused(&out, "spec.acl.groups[0].name: Not found: \"ops\": organization");
    assert_eq!(coder.writes(), Vec::<String>::new(), "nothing is written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_describes_every_template_setting() {
    let served = Served::shared().await;
    wait_until(
        "kubectl explain knows the kind",
        Duration::from_secs(60),
        || async {
            kubectl(served.cp, &["explain", "codertemplates.spec.defaultTTL"], None)
                .status
                .success()
        },
    )
    .await;
    let fields = [
        ("defaultTTL", "stops on its own"),
        ("activityBump", "pushes its automatic stop back"),
        ("autostopRequirement", "must restart"),
        ("autostopRequirement.daysOfWeek", "Lower-case weekday names"),
        ("autostopRequirement.weeks", "1 to 16"),
        ("autostartRequirement.daysOfWeek", "Lower-case weekday names"),
        ("allowUserAutostart", "their own autostart schedule"),
        ("allowUserAutostop", "their own automatic stop"),
        ("allowUserCancelWorkspaceJobs", "cancel their workspaces' builds"),
        ("failureTTL", "failed build"),
        ("timeTilDormant", "turns dormant"),
        (
            "timeTilDormantAutoDelete",
            "dormant workspace stays before it is deleted",
        ),
        ("requireActiveVersion", "built from the active version"),
        ("deprecationMessage", "deprecated"),
        ("maxPortShareLevel", "port"),
        ("acl", "Who may use or administer"),
        ("acl.users.role", "`use`"),
        ("acl.groups.name", "group name"),
        ("provisionerTags", "Provisioner tags"),
        ("variables", "Terraform variables"),
        ("variables.valueFrom.secretKeyRef.key", "key in the Secret"),
        ("versionName", "Name of the version"),
        ("versionMessage", "Message of the version"),
    ];
    for (field, words) in fields {
        let out = kubectl(
            served.cp,
            &["explain", &format!("codertemplates.spec.{field}")],
            None,
        );
        assert_success(&out, field);
        let text = stdout(&out).split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains(words), "{field}: {words:?} not in:\n{text}");
    }
    // Both OpenAPI documents kube-apiserver serves carry the descriptions.
    let v2 = cluster::kubectl_json(served.cp, &["get", "--raw", "/openapi/v2"]);
    let v2_text = v2.to_string();
    let v3 = cluster::kubectl_json(
        served.cp,
        &["get", "--raw", "/openapi/v3/apis/aggregation.coder.com/v1alpha1"],
    );
    let v3_text = v3.to_string();
    for text in [v2_text, v3_text] {
        assert!(
            text.contains("timeTilDormantAutoDelete"),
            "a document without the field"
        );
        assert!(text.contains("How long a dormant workspace stays before it is deleted"));
    }
}

/// The template fields compared between a template applied from YAML and one configured by hand: every field of
/// `GET /api/v2/templates/{id}` but these, which identify the object or record when it was written.
const IDENTITY_AND_TIME: [&str; 5] = ["id", "name", "created_at", "updated_at", "active_version_id"];

async fn template_json(coder: &Coder, id: Uuid) -> Value {
    let response = reqwest::Client::new()
        .get(coder.url.join(&format!("api/v2/templates/{id}")).unwrap())
        .header("Coder-Session-Token", &coder.token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut value: Value = response.json().await.unwrap();
    for field in IDENTITY_AND_TIME {
        value.as_object_mut().unwrap().remove(field);
    }
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_applied_from_one_yaml_equals_one_configured_by_hand() {
    let served = Served::shared().await;
    let coder = Coder::test_server(&ALL_FEATURES).await;
    let ns = served.namespace("tpl-same", &coder).await;
    let alice = unique("alice");
    let alice_id = coder.user(&alice).await;
    let devs = coder.test_server_ref().add_group(coder.organization_id, "devs");

    served
        .secret(&ns, "tokens", &[("token", "t0ken-from-a-secret")])
        .await;
    // By hand, as Coder's UI does: a version with tags and variables, the template, the whole metadata body, the
    // access list.
    let source = coder
        .version(|request| {
            request.name = "v1".into();
            request.message = "first".into();
            request.tags = BTreeMap::from([("env".to_owned(), "prod".to_owned())]);
            request.user_variable_values = vec![
                templates_as_code::variable("region", "us-east"),
                templates_as_code::variable("token", "t0ken-from-a-secret"),
            ];
        })
        .await;
    let created = coder
        .client
        .create_template(
            &coder.organization,
            &CreateTemplateRequest {
                name: "by-hand".into(),
                template_version_id: source,
                display_name: "Same".into(),
                description: "configured twice".into(),
                icon: "/icon/same.png".into(),
                ..CreateTemplateRequest::default()
            },
        )
        .await
        .unwrap();
    let body = UpdateTemplateMeta {
        default_ttl_ms: 28_800_000,
        activity_bump_ms: 1_800_000,
        autostop_requirement: Some(TemplateAutostopRequirement {
            days_of_week: vec!["monday".into(), "saturday".into()],
            weeks: 2,
        }),
        autostart_requirement: Some(TemplateAutostartRequirement {
            days_of_week: vec!["monday".into(), "tuesday".into(), "wednesday".into()],
        }),
        allow_user_autostart: false,
        allow_user_autostop: false,
        allow_user_cancel_workspace_jobs: true,
        failure_ttl_ms: 3_600_000,
        time_til_dormant_ms: 604_800_000,
        time_til_dormant_autodelete_ms: 2_592_000_000,
        require_active_version: true,
        deprecation_message: Some("use the v2 template".into()),
        max_port_share_level: Some("authenticated".into()),
        ..UpdateTemplateMeta::from_template(&created)
    };
    coder
        .client
        .update_template_meta(created.id, &body)
        .await
        .unwrap();
    coder
        .client
        .update_template_acl(
            created.id,
            &UpdateTemplateAcl {
                user_perms: BTreeMap::from([(alice_id, "admin".to_owned())]),
                group_perms: BTreeMap::from([(devs, "use".to_owned())]),
            },
        )
        .await
        .unwrap();

    // From one YAML file.
    let acl = format!(
        "  acl:\n    groups:\n    - {{name: Everyone, role: use}}\n    - {{name: devs, role: use}}\n    users:\n    - {{name: {alice}, role: admin}}\n"
    );
    let texts = "  displayName: Same\n  description: configured twice\n  icon: /icon/same.png\n";
    let main_tf = coder_k8s_testenv::archive::terraform_variables(&templates_as_code::VARIABLES)
        .lines()
        .map(|l| format!("      {l}\n"))
        .collect::<String>();
    let inputs = format!(
        "  files:\n    README.md: |\n      # template\n    main.tf: |\n{main_tf}  provisionerTags: {{env: prod}}\n  variables:\n  - {{name: region, value: us-east}}\n  - name: token\n    valueFrom: {{secretKeyRef: {{name: tokens, key: token}}}}\n  versionName: v1\n  versionMessage: first\n"
    );
    let yaml = manifest(
        &coder,
        &ns,
        "from-yaml",
        &format!("{inputs}{texts}{EVERY_SETTING}{acl}"),
    );
    assert_success(&served.apply(&yaml, &[]), "apply");
    let applied = coder
        .client
        .template_by_name(&coder.organization, "from-yaml")
        .await
        .unwrap();

    assert_eq!(
        template_json(&coder, applied.id).await,
        template_json(&coder, created.id).await
    );
    assert_eq!(
        names(&coder.client.template_acl(applied.id).await.unwrap()),
        names(&coder.client.template_acl(created.id).await.unwrap())
    );
    // The active versions: the same name, tags, variables and source text; the message differs only by the line
    // that records where the token came from.
    let version = |id| coder.client.template_version(id);
    let (yaml_version, hand_version) = (
        version(applied.active_version_id).await.unwrap(),
        version(created.active_version_id).await.unwrap(),
    );
    assert_eq!(yaml_version.name, hand_version.name);
    assert_eq!(yaml_version.job.tags, hand_version.job.tags);
    assert_eq!(
        yaml_version.message,
        format!(
            "{}\n\ncoder-k8s-variable-from: token=tokens/token",
            hand_version.message
        )
    );
    let variables = |id| coder.client.template_version_variables(id);
    assert_eq!(
        variables(applied.active_version_id).await.unwrap(),
        variables(created.active_version_id).await.unwrap()
    );
    let object = served.get(&ns, &format!("{}.from-yaml", coder.organization));
    assert!(!object.to_string().contains("t0ken-from-a-secret"), "{object}");
}
