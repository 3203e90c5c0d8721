//! The inputs of the version a `CoderTemplate`'s `spec.files` imports, through kube-apiserver and the real kubectl:
//! provisioner tags, variables (plain and from Secrets), the version's name and message. Applied from YAML they
//! read back from Coder; a version made in Coder shows on the next get; the YAML applied again sets the inputs back.
//! A caller who may not read a referenced Secret gets 403 and Coder receives no write; Secret values never show.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;
mod templates_as_code;

use std::collections::BTreeMap;
use std::time::Duration;

use cluster::{assert_success, wait_until};
use coder_k8s_aggregated_apiserver::coder::template_inputs::REFERENCE_PREFIX;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::json;
use templates_as_code::{Coder, Served, assert_refused, unique, variable};
use uuid::Uuid;

const SECRET_VALUE: &str = "s3cr3t-t0ken-value";

/// A manifest of template `template` with `spec_lines` under `spec:`.
fn manifest(coder: &Coder, namespace: &str, template: &str, spec_lines: &str) -> String {
    format!(
        "apiVersion: aggregation.coder.com/v1alpha1\nkind: CoderTemplate\nmetadata:\n  name: {org}.{template}\n  namespace: {namespace}\nspec:\n  organization: {org}\n{spec_lines}",
        org = coder.organization
    )
}

/// `spec.files` as YAML: a README with `readme`, and a `main.tf` declaring the variables of the tests (the test
/// server reads them there; real Coder's echo provisioner from the binary parse answer kept from the active version).
fn files(readme: &str) -> String {
    let main_tf: String = coder_k8s_testenv::archive::terraform_variables(&templates_as_code::VARIABLES)
        .lines()
        .map(|l| format!("      {l}\n"))
        .collect();
    format!("  files:\n    README.md: |\n      {readme}\n    main.tf: |\n{main_tf}")
}

/// The version inputs as YAML: the files, tags, variables (the token from Secret `tokens`), and optionally a version
/// name and message.
fn inputs(readme: &str, tags: &str, region: &str, name: Option<&str>) -> String {
    let mut out = format!(
        "{}  provisionerTags: {tags}\n  variables:\n  - {{name: region, value: {region}}}\n  - name: token\n    valueFrom: {{secretKeyRef: {{name: tokens, key: token}}}}\n",
        files(readme)
    );
    if let Some(name) = name {
        out.push_str(&format!(
            "  versionName: {name}\n  versionMessage: release {name}\n"
        ));
    }
    out
}

/// The active version of template `id` in Coder: its name, message, tags and variables (name → value as shown).
async fn active(
    coder: &Coder,
    id: Uuid,
) -> (String, String, BTreeMap<String, String>, BTreeMap<String, String>) {
    let template = coder.read(id).await;
    let version = coder
        .client
        .template_version(template.active_version_id)
        .await
        .unwrap();
    let variables = coder
        .client
        .template_version_variables(version.id)
        .await
        .unwrap()
        .into_iter()
        .map(|v| (v.name, v.value))
        .collect();
    (version.name, version.message, version.job.tags, variables)
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The walk both servers share: apply, read back, change in Coder, get, apply again; `tags` are tags the server's
/// provisioners serve.
async fn apply_read_back_drift_and_set_back(coder: &Coder, tags_yaml: &str, tags: &[(&str, &str)]) {
    let served = Served::shared().await;
    let ns = served.namespace("tpl-inputs", coder).await;
    served.secret(&ns, "tokens", &[("token", SECRET_VALUE)]).await;
    let template = coder.template(&unique("inputs")).await;
    let name = format!("{}.{}", coder.organization, template.name);
    let yaml = manifest(
        coder,
        &ns,
        &template.name,
        &inputs("v2", tags_yaml, "us-east", Some("v2")),
    );
    let out = served.apply(&yaml, &[]);
    assert_success(&out, "apply the version inputs");
    let (version, message, got_tags, variables) = active(coder, template.id).await;
    assert_eq!(version, "v2");
    assert_eq!(
        message,
        format!("release v2\n\n{REFERENCE_PREFIX}token=tokens/token")
    );
    assert_eq!(got_tags, map(tags));
    assert_eq!(
        variables,
        map(&[("region", "us-east"), ("size", "small"), ("token", "*redacted*")])
    );
    let object = served.get(&ns, &name);
    assert_eq!(object["status"]["activeVersionName"], "v2");
    assert_eq!(object["status"]["activeVersionMessage"], "release v2");
    assert_eq!(object["spec"]["provisionerTags"], json!(map(tags)));
    assert_eq!(
        object["spec"]["variables"],
        json!([
            {"name": "region", "value": "us-east"},
            {"name": "size", "value": "small"},
            {"name": "token", "valueFrom": {"secretKeyRef": {"name": "tokens", "key": "token"}}},
        ])
    );
    assert!(
        object["spec"].get("versionName").is_none(),
        "the name shows in the status only"
    );
    assert!(!object.to_string().contains(SECRET_VALUE), "{object}");
    assert!(!cluster::stdout(&out).contains(SECRET_VALUE));

    // The same YAML again: nothing to import.
    let before = coder.read(template.id).await;
    assert_success(&served.apply(&yaml, &[]), "apply unchanged");
    assert_eq!(
        coder.read(template.id).await.active_version_id,
        before.active_version_id
    );

    // A version made in Coder shows on the next get.
    let by_hand = coder
        .version(|request| {
            request.template_id = Some(template.id);
            request.user_variable_values = vec![variable("region", "ap-south"), variable("token", "other")];
        })
        .await;
    coder
        .client
        .promote_template_version(template.id, by_hand)
        .await
        .unwrap();
    let object = served.get(&ns, &name);
    assert_eq!(
        object["spec"]["variables"][0],
        json!({"name": "region", "value": "ap-south"})
    );
    assert_eq!(
        object["spec"]["variables"][2],
        json!({"name": "token"}),
        "no reference recorded: the name only"
    );

    // The Git file names a version that exists already: a new version needs a new name.
    assert_refused(
        &served.apply(&yaml, &[]),
        "spec.versionName: Invalid value: \"v2\": the template already has a version of this name",
    );
    assert_eq!(coder.read(template.id).await.active_version_id, by_hand);
    // Without the name (Coder picks one), the YAML sets the inputs back.
    let unnamed = manifest(
        coder,
        &ns,
        &template.name,
        &inputs("v2", tags_yaml, "us-east", None),
    );
    assert_success(&served.apply(&unnamed, &[]), "apply without a version name");
    let (_, message, got_tags, variables) = active(coder, template.id).await;
    assert_eq!(message, format!("{REFERENCE_PREFIX}token=tokens/token"));
    assert_eq!(got_tags, map(tags));
    assert_eq!(variables["region"], "us-east");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_inputs_apply_read_back_drift_and_are_set_back_on_the_real_coder() {
    // Open-source Coder's built-in provisioners serve only untagged organization jobs.
    apply_read_back_drift_and_set_back(
        &Coder::real().await,
        "{scope: organization}",
        &[("owner", ""), ("scope", "organization")],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_inputs_apply_read_back_drift_and_are_set_back_on_the_test_server() {
    apply_read_back_drift_and_set_back(
        &Coder::test_server(&[]).await,
        "{env: prod, empty: \"\"}",
        &[("env", "prod"), ("owner", ""), ("scope", "organization")],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_created_from_yaml_gets_its_version_inputs() {
    let served = Served::shared().await;
    let coder = Coder::test_server(&[]).await;
    let ns = served.namespace("tpl-create", &coder).await;
    served.secret(&ns, "tokens", &[("token", SECRET_VALUE)]).await;
    let yaml = manifest(
        &coder,
        &ns,
        "created",
        &inputs("x", "{env: prod}", "us-east", Some("first")),
    );
    assert_success(&served.apply(&yaml, &[]), "create with inputs");
    let template = coder
        .client
        .template_by_name(&coder.organization, "created")
        .await
        .unwrap();
    let (version, _, tags, variables) = active(&coder, template.id).await;
    assert_eq!(version, "first");
    assert_eq!(tags["env"], "prod");
    assert_eq!(variables["region"], "us-east");
    assert_eq!(variables["token"], "*redacted*");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_variables_are_refused_and_leave_the_template_as_it_was() {
    let served = Served::shared().await;
    let coder = Coder::test_server(&[]).await;
    let ns = served.namespace("tpl-badvar", &coder).await;
    served.secret(&ns, "tokens", &[("token", SECRET_VALUE)]).await;
    let template = coder.template("badvars").await;
    let variables = |list: &str| manifest(&coder, &ns, "badvars", &format!("  variables:\n{list}"));

    // Checked before anything is written.
    coder.test_server_ref().clear_requests();
    let out = served.apply(
        &variables("  - name: token\n    valueFrom: {secretKeyRef: {name: missing, key: token}}\n  - name: size\n    valueFrom: {secretKeyRef: {name: tokens, key: nokey}}\n  - {name: region, value: a}\n  - {name: region, value: b}\n"),
        &[],
    );
    assert_refused(&out, "spec.variables[3].name: Duplicate value: \"region\"");
    let out = served.apply(
        &variables("  - name: token\n    valueFrom: {secretKeyRef: {name: missing, key: token}}\n  - name: size\n    valueFrom: {secretKeyRef: {name: tokens, key: nokey}}\n"),
        &[],
    );
    assert_refused(
        &out,
        "spec.variables[0].valueFrom.secretKeyRef.name: Not found: \"missing\"",
    );
    assert_refused(
        &out,
        "spec.variables[1].valueFrom.secretKeyRef.key: Not found: \"nokey\": Secret \"tokens\" has no such key",
    );
    assert_eq!(coder.writes(), Vec::<String>::new());

    // Known only once the source is imported: the new version stays inactive.
    let out = served.apply(
        &variables("  - {name: nowhere, value: x}\n  - {name: token, value: plain-text}\n"),
        &[],
    );
    assert_refused(
        &out,
        "spec.variables[0].name: Not found: \"nowhere\": the template source declares no such variable",
    );
    assert_refused(
        &out,
        "spec.variables[1].value: Forbidden: the source declares this variable sensitive",
    );
    assert!(
        !templates_as_code::stderr(&out).contains("plain-text"),
        "values never appear in errors"
    );
    assert_eq!(
        coder.read(template.id).await.active_version_id,
        template.active_version_id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_needs_the_spec_to_give_secret_and_sensitive_variables() {
    let served = Served::shared().await;
    let coder = Coder::test_server(&[]).await;
    let ns = served.namespace("tpl-planted", &coder).await;
    served.secret(&ns, "other", &[("key", "planted-value")]).await;
    // Someone who may push versions in Coder names a Secret of the namespace in the active version's message.
    let template = coder.template("planted").await;
    let pushed = coder
        .version(|request| {
            request.template_id = Some(template.id);
            request.message = format!("{REFERENCE_PREFIX}token=other/key");
        })
        .await;
    coder
        .client
        .promote_template_version(template.id, pushed)
        .await
        .unwrap();
    let name = format!("{}.planted", coder.organization);
    assert_eq!(
        served.get(&ns, &name)["spec"]["variables"][2],
        json!({"name": "token", "valueFrom": {"secretKeyRef": {"name": "other", "key": "key"}}}),
        "reads show the reference"
    );
    let files_only = manifest(&coder, &ns, "planted", &files("changed"));
    coder.test_server_ref().clear_requests();
    let out = served.apply(&files_only, &[]);
    // The apply is merged into the object without the references reads show, so the variable arrives by name.
    assert_refused(
        &out,
        "spec.variables[2].valueFrom: Required value: the active version takes \"token\" from a Secret; give it with valueFrom.secretKeyRef to import a new version",
    );
    assert_eq!(coder.writes(), Vec::<String>::new(), "Coder received no write");
    assert_eq!(coder.read(template.id).await.active_version_id, pushed);

    // A sensitive value set in Coder (no reference recorded) would fall back to its default just the same.
    let by_hand = coder.template("by-hand").await;
    coder.test_server_ref().clear_requests();
    let out = served.apply(&manifest(&coder, &ns, "by-hand", &files("changed")), &[]);
    assert_refused(
        &out,
        "spec.variables[2].valueFrom: Required value: the active version holds \"token\" as a sensitive value, which Coder does not give back",
    );
    let name_only = format!(
        "{}  variables:\n  - {{name: region, value: eu-west}}\n  - {{name: token}}\n",
        files("changed")
    );
    let out = served.apply(&manifest(&coder, &ns, "by-hand", &name_only), &[]);
    assert_refused(
        &out,
        "spec.variables[1].valueFrom: Required value: the active version holds \"token\" as a sensitive value",
    );
    assert_eq!(coder.writes(), Vec::<String>::new(), "Coder received no write");
    assert_eq!(
        coder.read(by_hand.id).await.active_version_id,
        by_hand.active_version_id
    );
}

/// Gives `user` everything on codertemplates in `namespace`, and nothing on Secrets.
async fn template_editor(served: &Served, namespace: &str, user: &str) {
    let client = served.cp.client().unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "template-editor", "namespace": namespace},
        "rules": [{"apiGroups": ["aggregation.coder.com"], "resources": ["codertemplates"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}],
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "template-editor", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "template-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(client, namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// Lets `user` get the one Secret `name` in `namespace`.
async fn secret_reader(served: &Served, namespace: &str, user: &str, name: &str) {
    let client = served.cp.client().unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "secret-reader", "namespace": namespace},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [name], "verbs": ["get"]}],
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "secret-reader", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "secret-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(client, namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_without_secret_access_gets_403_and_coder_receives_no_write() {
    let served = Served::shared().await;
    let coder = Coder::test_server(&[]).await;
    let ns = served.namespace("tpl-sar", &coder).await;
    served.secret(&ns, "tokens", &[("token", SECRET_VALUE)]).await;
    let template = coder.template("guarded").await;
    let user = "template-editor";
    template_editor(served, &ns, user).await;
    let yaml = manifest(&coder, &ns, "guarded", &inputs("v2", "{}", "us-east", None));
    let create = manifest(&coder, &ns, "fresh", &inputs("v2", "{}", "us-east", None));

    coder.test_server_ref().clear_requests();
    for manifest in [&yaml, &create] {
        let out = served.apply(manifest, &["--as", user]);
        assert_refused(
            &out,
            &format!(
                "secrets \"tokens\" is forbidden: User \"{user}\" cannot get resource \"secrets\" in API group \"\" in the namespace \"{ns}\""
            ),
        );
        assert!(!templates_as_code::stderr(&out).contains(SECRET_VALUE));
    }
    assert_eq!(coder.writes(), Vec::<String>::new(), "Coder received no write");
    assert_eq!(
        coder.read(template.id).await.active_version_id,
        template.active_version_id
    );

    // Allowed to read that Secret (once the denial cached for 10 s has expired), the same apply works.
    secret_reader(served, &ns, user, "tokens").await;
    wait_until("the apply is allowed", Duration::from_secs(40), || async {
        served.apply(&yaml, &["--as", user]).status.success()
    })
    .await;
    let (_, _, _, variables) = active(&coder, template.id).await;
    assert_eq!(variables["region"], "us-east");
}
