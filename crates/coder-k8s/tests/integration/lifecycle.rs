//! The lifecycle pages walked as a user would: the shell blocks of docs/ marked `<!-- walked: NAME -->` run as they
//! are, with bash and the real kubectl and helm, on control planes of their own (the commands act cluster-wide).

use std::path::Path;
use std::process::{Command, Output};

use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_testenv::ControlPlane;
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::control_plane::harness_on;
use crate::provisioner::{create_provisioner, ready_control_plane, sample_spec};
use crate::support::wait_for;
use crate::support::{
    assert_success, install_crds, kubectl, kwok_control_plane, path, repo_root, stderr, stdout,
};

/// The shell block that follows `<!-- walked: NAME -->` in `doc` (a path under the repository root); a block
/// indented inside a list item keeps its indentation, which bash does not mind.
fn walked_block(doc: &str, name: &str) -> String {
    let text = std::fs::read_to_string(repo_root().join(doc)).expect("read the doc");
    let marker = format!("<!-- walked: {name} -->");
    let mut lines = text.lines().skip_while(|line| line.trim() != marker).skip(1);
    assert_eq!(
        lines.next().map(str::trim),
        Some("```sh"),
        "{doc}: {marker} must exist and be followed by a ```sh block"
    );
    let body: Vec<&str> = lines.take_while(|line| line.trim() != "```").collect();
    assert!(!body.is_empty(), "{doc}: {name} is empty");
    body.join("\n") + "\n"
}

/// The example output a page shows after the block `name`: the lines of the ```text block right after it, less
/// the `...` lines that stand for lines left out.
fn example_output(doc: &str, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join(doc)).expect("read the doc");
    let marker = format!("<!-- walked: {name} -->");
    let mut lines = text
        .lines()
        .skip_while(|line| line.trim() != marker)
        .skip(2)
        .skip_while(|line| line.trim() != "```")
        .skip(1)
        .skip_while(|line| line.trim().is_empty());
    assert_eq!(
        lines.next().map(str::trim),
        Some("```text"),
        "{doc}: {name} shows no example output"
    );
    lines
        .take_while(|line| line.trim() != "```")
        .filter(|line| line.trim() != "...")
        .map(|line| line.trim().to_owned())
        .collect()
}

/// Every line of the page's example output for `name` is among what the walk printed (stdout and stderr).
pub(crate) fn assert_example_output(doc: &str, name: &str, out: &Output) {
    let printed = format!("{}{}", stdout(out), stderr(out));
    let printed: Vec<&str> = printed.lines().map(str::trim).collect();
    let expected = example_output(doc, name);
    assert!(!expected.is_empty(), "{doc}: {name}");
    for line in expected {
        assert!(
            printed.contains(&line.as_str()),
            "{doc}: {name} shows {line:?}, the walk printed {printed:#?}"
        );
    }
}

/// Runs the block `name` of `doc` with bash (`-euo pipefail`) from the repository root, with `cp`'s kubeconfig and
/// helm on the PATH.
pub(crate) fn walk(cp: &ControlPlane, doc: &str, name: &str) -> Output {
    walk_with(cp, doc, name, &[])
}

/// [`walk`] with extra environment variables (the values a page tells the reader to set).
fn walk_with(cp: &ControlPlane, doc: &str, name: &str, env: &[(&str, &str)]) -> Output {
    let helm_dir = crate::packaging::helm_binary()
        .parent()
        .expect("helm's directory")
        .to_owned();
    let path_var = format!(
        "{}:{}",
        helm_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &walked_block(doc, name)])
        .current_dir(repo_root())
        .env("KUBECONFIG", cp.kubeconfig_path())
        .env("PATH", path_var)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run bash");
    // Shown when a test fails (and with --nocapture): what a reader of the page would have seen.
    eprintln!("walked {doc} {name}:\n{}{}", stdout(&out), stderr(&out));
    out
}

/// [`walk`] off the async runtime, so that the operator tasks of the same test keep running meanwhile.
async fn walk_async(cp: &'static ControlPlane, doc: &'static str, name: &'static str) -> Output {
    tokio::task::spawn_blocking(move || walk(cp, doc, name))
        .await
        .expect("the walk's thread")
}

async fn bare_control_plane(cell: &'static OnceCell<ControlPlane>) -> &'static ControlPlane {
    cell.get_or_init(|| async {
        let cp = ControlPlane::builder()
            .controller_manager(true)
            .start()
            .await
            .expect("start a control plane");
        install_crds(&cp);
        cp
    })
    .await
}

pub(crate) fn json_of(out: &Output, what: &str) -> Value {
    assert_success(out, what);
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[tokio::test]
async fn stuck_finalizers_are_released_by_the_documented_loop() {
    static CP: OnceCell<ControlPlane> = OnceCell::const_new();
    let cp = bare_control_plane(&CP).await;
    assert_success(&kubectl(cp, &["create", "namespace", "coder"], None), "namespace");
    // One object of each kind with a finalizer (the samples), no operator running: deleting them leaves them
    // Terminating, as after an operator removed too early.
    let out = kubectl(
        cp,
        &["apply", "--server-side", "-f", &path("config/samples")],
        None,
    );
    assert_success(&out, "apply the samples");
    let kinds = [
        "coderaigatewaykeys",
        "coderaiproviders",
        "codermcpservers",
        "codertemplatetests",
        "coderprovisioners",
        "codercontrolplanes",
    ];
    let hold = r#"{"metadata":{"finalizers":["coder.com/held-by-a-gone-operator"]}}"#;
    let mut deleted = Vec::new();
    for kind in kinds {
        let names = stdout(&kubectl(cp, &["-n", "coder", "get", kind, "-o", "name"], None));
        let name = names
            .lines()
            .next()
            .unwrap_or_else(|| panic!("a sample of {kind}"));
        let out = kubectl(
            cp,
            &["-n", "coder", "patch", name, "--type=merge", "-p", hold],
            None,
        );
        assert_success(&out, "add a finalizer");
        let out = kubectl(cp, &["-n", "coder", "delete", name, "--wait=false"], None);
        assert_success(&out, "delete");
        deleted.push(name.to_owned());
    }
    // An object with a finalizer that nobody deletes: the loop must leave it alone.
    let kept = "coderworkspaceproxies";
    let proxy = stdout(&kubectl(cp, &["-n", "coder", "get", kept, "-o", "name"], None));
    let proxy = proxy.lines().next().expect("the proxy sample").to_owned();
    assert_success(
        &kubectl(
            cp,
            &["-n", "coder", "patch", &proxy, "--type=merge", "-p", hold],
            None,
        ),
        "hold the proxy",
    );
    for name in &deleted {
        let object = json_of(
            &kubectl(cp, &["-n", "coder", "get", name, "-o", "json"], None),
            name,
        );
        assert!(
            object["metadata"]["deletionTimestamp"].is_string(),
            "{name} is Terminating"
        );
    }

    let out = walk(cp, "docs/uninstall.md", "stuck-finalizers");
    assert_success(&out, "the stuck-finalizers loop");
    assert_example_output("docs/uninstall.md", "stuck-finalizers", &out);
    for name in &deleted {
        let out = kubectl(
            cp,
            &["-n", "coder", "get", name, "--ignore-not-found", "-o", "name"],
            None,
        );
        assert_success(&out, "get");
        assert_eq!(stdout(&out).trim(), "", "{name} is gone");
    }
    let proxy = json_of(
        &kubectl(cp, &["-n", "coder", "get", &proxy, "-o", "json"], None),
        "proxy",
    );
    assert_eq!(
        proxy["metadata"]["finalizers"],
        serde_json::json!(["coder.com/held-by-a-gone-operator"]),
        "an object that is not being deleted keeps its finalizers"
    );
    assert!(proxy["metadata"].get("deletionTimestamp").is_none());
}

#[tokio::test]
async fn helm_crd_upgrade_needs_force_conflicts_and_works_with_it() {
    static CP: OnceCell<ControlPlane> = OnceCell::const_new();
    // A node for the operator's pod, so that `helm --wait` sees it Ready.
    let cp = kwok_control_plane(&CP, &[coder_k8s_testenv::kwok::FAKE_NODE_NAME]).await;
    // The previous release: this chart with one CRD description changed, as a release's CRD change would.
    let previous = tempfile::tempdir().expect("temp dir");
    copy_dir(&repo_root().join("charts/coder-k8s"), previous.path());
    let crd = previous.path().join("crds/coder.com_codercontrolplanes.yaml");
    let text = std::fs::read_to_string(&crd).expect("read the CRD");
    let changed = text.replacen("description:", "description: (previous release)", 1);
    assert_ne!(text, changed);
    std::fs::write(&crd, changed).expect("write");
    let helm = crate::packaging::helm_binary();
    let out = Command::new(&helm)
        .args(["install", "coder-k8s"])
        .arg(previous.path())
        .args([
            "-n",
            "coder-system",
            "--create-namespace",
            "--wait",
            "--timeout=3m",
        ])
        .env("KUBECONFIG", cp.kubeconfig_path())
        .output()
        .expect("helm install");
    assert_success(&out, "helm install of the previous release");

    let out = kubectl(
        cp,
        &["apply", "--server-side", "-f", &path("charts/coder-k8s/crds/")],
        None,
    );
    assert!(
        !out.status.success(),
        "without --force-conflicts the apply conflicts"
    );
    assert!(
        stderr(&out).contains("conflict") && stderr(&out).contains("helm"),
        "{}",
        stderr(&out)
    );

    let out = walk(cp, "docs/install.md", "helm-upgrade");
    assert_success(&out, "the documented Helm upgrade");
    assert_example_output("docs/install.md", "helm-upgrade", &out);
    let live = json_of(
        &kubectl(
            cp,
            &["get", "crd", "codercontrolplanes.coder.com", "-o", "json"],
            None,
        ),
        "the CRD",
    );
    assert!(
        !live.to_string().contains("(previous release)"),
        "the CRD is this release's"
    );
    let out = Command::new(&helm)
        .args(["status", "coder-k8s", "-n", "coder-system", "-o", "json"])
        .env("KUBECONFIG", cp.kubeconfig_path())
        .output()
        .expect("helm status");
    let status = json_of(&out, "helm status");
    assert_eq!(status["version"], 2, "one upgrade");
    assert_eq!(status["info"]["status"], "deployed");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_in_the_documented_order_leaves_nothing_in_coder() {
    static CP: OnceCell<ControlPlane> = OnceCell::const_new();
    let cp = bare_control_plane(&CP).await;
    let h = harness_on(cp, "uninstall").await;
    ready_control_plane(&h).await;
    create_provisioner(&h, "builds", sample_spec()).await;
    wait_for(
        || async { !h.server.provisioner_keys().is_empty() },
        "the provisioner key in Coder",
    )
    .await;
    let provisioners = h.api::<CoderProvisioner>();
    assert!(provisioners.get_opt("builds").await.unwrap().is_some());

    let out = walk_async(cp, "docs/uninstall.md", "uninstall-objects").await;
    assert_success(&out, "delete the custom objects");
    assert_example_output("docs/uninstall.md", "uninstall-objects", &out);
    assert_eq!(
        h.server.provisioner_keys(),
        Vec::<Value>::new(),
        "the operator deleted the key in Coder before it released the object"
    );
    let out = walk_async(cp, "docs/uninstall.md", "uninstall-check").await;
    assert_success(&out, "the check");
    assert_example_output("docs/uninstall.md", "uninstall-check", &out);
    let printed = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        printed.matches("No resources found").count(),
        2,
        "nothing left, no cleanup record: {printed}"
    );

    let out = walk_async(cp, "docs/uninstall.md", "uninstall-operator").await;
    assert_success(&out, "remove the APIService, the operator and the CRDs");
    assert_example_output("docs/uninstall.md", "uninstall-operator", &out);
    let crds = stdout(&kubectl(cp, &["get", "crd", "-o", "name"], None));
    assert!(
        !crds.lines().any(|crd| crd.ends_with(".coder.com")),
        "the CRDs are gone: {crds}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_restored_with_new_uids_are_taken_back_by_the_documented_owner_rewrite() {
    let h = crate::control_plane::harness("restore").await;
    ready_control_plane(&h).await;
    create_provisioner(&h, "builds", sample_spec()).await;
    crate::provisioner::wait_reason(&h, "builds", "ProvisionerKeyReady", "ProvisionerKeyReady").await;
    let provisioners = h.api::<CoderProvisioner>();
    let key_id = |p: CoderProvisioner| p.status.and_then(|s| s.provisioner_key_id);
    let key = key_id(provisioners.get("builds").await.unwrap()).expect("a key ID");
    let old_uid = provisioners.get("builds").await.unwrap().metadata.uid.unwrap();

    // The loss: the operator stops, the custom objects vanish without their finalizers running (no garbage
    // collector here, so what they made stays, as when a backup tool restores it with its owner references).
    h.stop.send(true).unwrap();
    let release = r#"{"metadata":{"finalizers":null}}"#;
    for object in [
        "coderprovisioner/builds",
        "codercontrolplane/codercontrolplane-sample",
    ] {
        let out = kubectl(
            h.cp,
            &["-n", &h.ns, "patch", object, "--type=merge", "-p", release],
            None,
        );
        assert_success(&out, "release the finalizers");
        let out = kubectl(h.cp, &["-n", &h.ns, "delete", object], None);
        assert_success(&out, "delete");
    }
    // The restore: the same objects from Git, with new UIDs, and the operator back.
    h.create(
        "codercontrolplane-sample",
        serde_json::json!({"database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}}),
    )
    .await;
    create_provisioner(&h, "builds", sample_spec()).await;
    let new_uid = provisioners.get("builds").await.unwrap().metadata.uid.unwrap();
    assert_ne!(new_uid, old_uid);
    let _operator = crate::high_availability::replica(&h, "restored");
    // The control plane finds its Deployment, Service and token Secret held by the old UID (and the provisioner
    // waits for it).
    h.wait_reason("codercontrolplane-sample", "ResourcesOwned", "ResourceNotOwned")
        .await;

    let out = walk_with(
        h.cp,
        "docs/backup.md",
        "restore-takeback",
        &[("NAMESPACE", &h.ns)],
    );
    assert_success(&out, "the documented takeback");
    assert_example_output("docs/backup.md", "restore-takeback", &out);
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> = h.api();
    let owner = |d: k8s_openapi::api::apps::v1::Deployment| {
        d.metadata.owner_references.unwrap_or_default()[0].uid.clone()
    };
    assert_eq!(
        owner(deployments.get("provisioner-builds").await.unwrap()),
        new_uid
    );
    wait_for(
        || async {
            let object = provisioners.get("builds").await.unwrap();
            let conditions = object.status.clone().map(|s| s.conditions).unwrap_or_default();
            let key_ready = conditions
                .iter()
                .any(|c| c.type_ == "ProvisionerKeySecretReady" && c.status == "True");
            let owned = !conditions.iter().any(|c| c.type_ == "ResourcesOwned");
            let plane_owns = h
                .condition("codercontrolplane-sample", "ResourcesOwned")
                .await
                .is_none();
            key_ready && owned && plane_owns
        },
        "the restored objects owning what they made, the key Secret the provisioner's",
    )
    .await;
    assert_eq!(
        key_id(provisioners.get("builds").await.unwrap()).as_deref(),
        Some(key.as_str()),
        "the provisioner keeps its key"
    );
    let keys: Vec<Value> = h.server.provisioner_keys();
    assert_eq!(keys.len(), 1, "no second key in Coder: {keys:?}");
    assert_eq!(keys[0]["id"], key.as_str());
}

#[test]
fn every_walked_block_of_the_docs_is_run_by_a_test() {
    let tests = [include_str!("lifecycle.rs"), include_str!("high_availability.rs")]
        .concat()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mut walked = Vec::new();
    for entry in std::fs::read_dir(repo_root().join("docs")).expect("docs/") {
        let file = entry.expect("entry").path();
        let Some(text) = std::fs::read_to_string(&file).ok() else {
            continue;
        };
        for line in text.lines() {
            if let Some(name) = line
                .trim()
                .strip_prefix("<!-- walked: ")
                .and_then(|n| n.strip_suffix(" -->"))
            {
                let doc = format!("docs/{}", file.file_name().unwrap().to_string_lossy());
                assert!(
                    tests.contains(&format!("\"{doc}\", \"{name}\"")),
                    "{doc} marks {name} as walked, but no test walks it"
                );
                // Each walkthrough shows what it prints.
                example_output(&doc, name);
                walked.push(name.to_owned());
            }
        }
    }
    assert!(walked.len() >= 9, "the walked blocks: {walked:?}");
}

#[tokio::test]
async fn the_go_operators_all_mode_install_upgrades_without_a_mode_switch() {
    static CP: OnceCell<ControlPlane> = OnceCell::const_new();
    let cp = kwok_control_plane(&CP, &[coder_k8s_testenv::kwok::FAKE_NODE_NAME]).await;
    // The v0.1.5 install as its documents say, with client-side apply: CRDs, RBAC, the Deployment in all mode
    // (the Go image) and the aggregated API's Service and APIService.
    assert_success(
        &kubectl(cp, &["create", "namespace", "coder-system"], None),
        "namespace",
    );
    let out = kubectl(
        cp,
        &[
            "apply",
            "-f",
            &path("config/rbac/"),
            "-f",
            &path("deploy/apiserver-service.yaml"),
            "-f",
            &path("deploy/apiserver-apiservice.yaml"),
        ],
        None,
    );
    assert_success(&out, "the v0.1.5 RBAC and aggregated API objects");
    let out = kubectl(cp, &["create", "-f", &path("config/crd/bases/")], None);
    assert_success(&out, "the CRDs");
    let go_deployment = std::fs::read_to_string(repo_root().join("deploy/deployment.yaml"))
        .unwrap()
        .replace(
            &format!("ghcr.io/coder/coder-k8s:{}", env!("CARGO_PKG_VERSION")),
            "ghcr.io/coder/coder-k8s:v0.1.5",
        );
    assert!(go_deployment.contains(":v0.1.5"));
    assert_success(
        &kubectl(cp, &["apply", "-f", "-"], Some(&go_deployment)),
        "the Go Deployment",
    );

    let out = walk(cp, "docs/upgrade-from-go.md", "upgrade-all-mode");
    assert_success(&out, "the documented upgrade in all mode");
    assert_example_output("docs/upgrade-from-go.md", "upgrade-all-mode", &out);
    assert!(
        stdout(&out)
            .lines()
            .next()
            .is_some_and(|first| first.trim().is_empty()),
        "the check prints no args (all mode): {}",
        stdout(&out)
    );
    let deployment = json_of(
        &kubectl(
            cp,
            &[
                "-n",
                "coder-system",
                "get",
                "deployment",
                "coder-k8s",
                "-o",
                "json",
            ],
            None,
        ),
        "the Deployment",
    );
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert!(container.get("args").is_none(), "still all mode: {container}");
    assert_eq!(
        container["image"],
        format!("ghcr.io/coder/coder-k8s:{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(deployment["spec"]["replicas"], 2);
    let apiservice = json_of(
        &kubectl(
            cp,
            &[
                "get",
                "apiservice",
                "v1alpha1.aggregation.coder.com",
                "-o",
                "json",
            ],
            None,
        ),
        "the APIService",
    );
    assert_eq!(apiservice["spec"]["service"]["name"], "coder-k8s-apiserver");
}
