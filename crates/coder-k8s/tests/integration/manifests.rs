//! Every shipped manifest as a new user applies it. `hack/local-up.sh` (a real kube-apiserver with kwok nodes, the
//! operator in `--app=all` behind it, the Coder API test server or the real Coder v2.30.0) brings every sample of
//! `config/samples/` to its documented state and prints one table; then `config/quickstart/` and `examples/` are
//! applied with the real kubectl and reach theirs. The manifest directories are walked, so a new manifest without a
//! documented state here fails the test; the ones that need what no test here can provide are listed with why.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{assert_success, repo_root, stderr, stdout};

/// The directories whose manifests a user applies.
const MANIFEST_DIRS: [&str; 3] = ["config/samples", "config/quickstart", "examples"];

/// Manifests that need what this test cannot provide, and why.
const NOT_APPLIED: [(&str, &str); 2] = [
    (
        "examples/argocd/applicationset.yaml",
        "an Argo CD ApplicationSet: needs Argo CD's CRDs and controller (its schema is checked by packaging.rs)",
    ),
    (
        "examples/cloudnativepg/cnpg-cluster.yaml",
        "a CloudNativePG Cluster: needs the CloudNativePG operator, which writes the Secret coder-db-app \
         (local-up writes that Secret instead)",
    ),
];

/// The objects of config/samples, in the order of local-up's table.
const SAMPLES: [&str; 9] = [
    "CoderControlPlane/codercontrolplane-sample",
    "CoderProvisioner/coderprovisioner-sample",
    "CoderWorkspaceProxy/coderworkspaceproxy-sample",
    "CoderTemplateTest/codertemplatetest-sample",
    "CoderAIProvider/coderaiprovider-sample",
    "CoderAIGatewayKey/coderaigatewaykey-sample",
    "CoderMCPServer/codermcpserver-sample",
    "CoderTemplate/coder.sample",
    "CoderWorkspace/coder.coder-k8s-operator.sample",
];

/// What the real Coder v2.30.0 cannot serve, and the words local-up's table gives as the reason.
const OPEN_SOURCE_LIMITS: [(&str, &str); 5] = [
    (
        "CoderProvisioner/coderprovisioner-sample",
        "needs a Premium licence",
    ),
    (
        "CoderAIGatewayKey/coderaigatewaykey-sample",
        "needs a Premium licence with the AI Gateway",
    ),
    (
        "CoderAIProvider/coderaiprovider-sample",
        "v2.30.0 has no /api/v2/ai/providers route",
    ),
    (
        "CoderMCPServer/codermcpserver-sample",
        "needs Coder v2.37.2 or later",
    ),
    (
        "CoderTemplateTest/codertemplatetest-sample",
        "needs a workspace agent that connects",
    ),
];

fn yaml_documents(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// Every manifest file (`.yaml`, kustomizations aside) under `dir`, as a repository path.
fn manifest_files(dir: &str) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut pending = vec![repo_root().join(dir)];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml")
                && path.file_name().is_some_and(|n| n != "kustomization.yaml")
            {
                let relative = path.strip_prefix(repo_root()).unwrap().display().to_string();
                files.insert(relative);
            }
        }
    }
    files
}

/// `Kind/name` of every object in `files`.
fn objects_of(files: &BTreeSet<String>) -> BTreeSet<String> {
    files
        .iter()
        .flat_map(|f| yaml_documents(&repo_root().join(f)))
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// The directories of config/quickstart and examples a user applies with `kubectl apply -k`, and for each the
/// files it applies (its kustomization's resources, less the ones this test cannot apply).
fn kustomizations() -> BTreeMap<String, Vec<String>> {
    let mut dirs = BTreeMap::new();
    for top in &MANIFEST_DIRS[1..] {
        for file in manifest_files(top) {
            let dir = Path::new(&file).parent().unwrap().display().to_string();
            let kustomization = repo_root().join(&dir).join("kustomization.yaml");
            assert!(
                kustomization.exists(),
                "{file} is in no kustomization; a user applies {dir} with -k"
            );
            let resources: Vec<String> = yaml_documents(&kustomization)[0]["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| format!("{dir}/{}", r.as_str().unwrap()))
                .collect();
            assert!(
                resources.contains(&file),
                "{file} is not in {dir}/kustomization.yaml"
            );
            dirs.insert(dir, resources);
        }
    }
    dirs
}

/// A local environment of `hack/local-up.sh` in a directory of its own, stopped with `hack/local-down.sh`.
struct LocalEnv {
    state: PathBuf,
    _dir: tempfile::TempDir,
    output: Output,
}

impl LocalEnv {
    /// Runs `hack/local-up.sh ARGS` on free ports with the binaries of this build.
    fn up(args: &[&str]) -> LocalEnv {
        let bin = Path::new(env!("CARGO_BIN_EXE_coder-k8s")).parent().unwrap();
        for binary in ["coder-k8s-testenv", "coder-k8s-coder-testserver"] {
            assert!(
                bin.join(binary).exists(),
                "{} is missing: cargo build -p coder-k8s-testenv -p coder-k8s-coder-testserver \
                 (hack/test.sh builds every binary of the workspace)",
                bin.join(binary).display()
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("coder-k8s-local-")
            .tempdir()
            .unwrap();
        let state = dir.path().join("state");
        let [coder, api, health] = coder_k8s_testenv::free_ports::<3>().unwrap();
        let output = Command::new("bash")
            .arg(repo_root().join("hack/local-up.sh"))
            .args(args)
            .env("CODER_K8S_LOCAL_STATE", &state)
            .env("CODER_K8S_LOCAL_BIN", bin)
            .env("CODER_K8S_LOCAL_CODER_PORT", coder.to_string())
            .env("CODER_K8S_LOCAL_API_PORT", api.to_string())
            .env("CODER_K8S_LOCAL_HEALTH_PORT", health.to_string())
            .env("CODER_K8S_LOCAL_WAIT", "240")
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        LocalEnv {
            state,
            _dir: dir,
            output,
        }
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", self.state.join("testenv/kubeconfig"))
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn get(&self, object: &str) -> Value {
        let out = self.kubectl(&["-n", "coder", "get", object, "-o", "json"]);
        assert_success(&out, &format!("get {object}"));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Waits up to `seconds` until `check` holds for `object`; returns the object.
    fn wait_for(&self, object: &str, seconds: u64, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        loop {
            let value = self.get(object);
            if check(&value) {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "{object} never {what}: {}",
                value["status"]
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.state.join("logs").join(name)).unwrap_or_default()
    }

    /// The closing table: `Kind/name` → the rest of its line.
    fn table(&self) -> BTreeMap<String, String> {
        stdout(&self.output)
            .lines()
            .skip_while(|l| !l.starts_with("OBJECT "))
            .skip(1)
            .filter_map(|l| {
                l.split_once(' ')
                    .map(|(o, rest)| (o.to_owned(), rest.trim().to_owned()))
            })
            .collect()
    }
}

impl Drop for LocalEnv {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo_root().join("hack/local-down.sh"))
            .env("CODER_K8S_LOCAL_STATE", &self.state)
            .stdin(Stdio::null())
            .output();
    }
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The documented ready state of a sample: its phase, every condition met, the current generation observed.
fn assert_sample_ready(env: &LocalEnv, sample: &str) {
    let (kind, name) = sample.split_once('/').unwrap();
    let object = env.get(&format!("{}/{name}", kind.to_lowercase()));
    let status = &object["status"];
    match kind {
        "CoderTemplate" => assert_eq!(
            status["activeVersionID"].as_str().map(str::len),
            Some(36),
            "{sample}: {status}"
        ),
        "CoderWorkspace" => assert_eq!(status["latestBuildStatus"], "running", "{sample}: {status}"),
        _ => {
            assert_eq!(
                status["observedGeneration"], object["metadata"]["generation"],
                "{sample}: {status}"
            );
            let phase = if kind == "CoderTemplateTest" {
                "Succeeded"
            } else {
                "Ready"
            };
            assert_eq!(status["phase"], phase, "{sample}: {status}");
            let conditions = status["conditions"].as_array().unwrap();
            assert!(!conditions.is_empty(), "{sample}: {status}");
            for c in conditions {
                let met = match c["type"].as_str().unwrap() {
                    "Stalled" | "Reconciling" => c["status"] != "True",
                    "Ready" => c["status"] == "True",
                    _ => c["status"] != "False",
                };
                assert!(met, "{sample}: condition {c}");
            }
        }
    }
}

/// config/samples holds exactly the objects local-up applies and its table lists (a new sample must be added to
/// both, or this fails).
fn assert_samples_are_the_listed_ones() {
    let listed: BTreeSet<String> = SAMPLES.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(objects_of(&manifest_files("config/samples")), listed);
}

#[test]
fn every_manifest_is_applied_by_a_test_or_listed_with_the_reason_it_is_not() {
    let mut all = BTreeSet::new();
    for dir in MANIFEST_DIRS {
        all.extend(manifest_files(dir));
    }
    let mut covered: BTreeSet<String> = manifest_files("config/samples");
    for files in kustomizations().values() {
        covered.extend(files.iter().cloned());
    }
    let excluded: BTreeSet<String> = NOT_APPLIED.iter().map(|(f, _)| (*f).to_owned()).collect();
    assert!(
        covered.is_superset(&excluded),
        "{excluded:?} must name shipped manifests"
    );
    assert_eq!(
        covered, all,
        "every manifest under {MANIFEST_DIRS:?} is in a directory this file applies"
    );
    assert!(all.len() > SAMPLES.len(), "{all:?}");
    assert_samples_are_the_listed_ones();
    // Each kustomization is applied below, in part (the files NOT_APPLIED names), or not at all (all of its files).
    for (dir, files) in kustomizations() {
        let applied = [
            "config/quickstart",
            "examples/coder-templates",
            "examples/coder-people",
            "examples/cloudnativepg",
        ]
        .contains(&dir.as_str());
        assert!(
            applied || files.iter().all(|f| excluded.contains(f)),
            "{dir} is applied by no test here"
        );
    }
}

/// The test server variant: every sample of all seven kinds and both aggregated samples Ready, the table saying what
/// each did in Coder; then the quickstart and the examples reach their documented states.
#[test]
fn local_up_brings_every_sample_to_ready_and_the_quickstart_and_examples_apply() {
    assert_samples_are_the_listed_ones();
    let env = LocalEnv::up(&[]);
    assert!(
        env.output.status.success(),
        "hack/local-up.sh failed:\n{}\n{}\noperator log tail:\n{}",
        stdout(&env.output),
        stderr(&env.output),
        tail(&env.log("operator.log"))
    );
    for sample in SAMPLES {
        assert_sample_ready(&env, sample);
    }
    let table = env.table();
    assert_eq!(
        table.keys().cloned().collect::<BTreeSet<_>>(),
        SAMPLES.iter().map(|s| (*s).to_owned()).collect()
    );
    for (expected_in_line, sample) in [
        ("provisioner key coder/coderprovisioner-sample", SAMPLES[1]),
        ("nothing (direct mode)", SAMPLES[2]),
        ("of template coder.sample", SAMPLES[3]),
        ("AI provider copilot", SAMPLES[4]),
        ("AI Gateway key ck8s-", SAMPLES[5]),
        ("MCP server config coder/deepwiki", SAMPLES[6]),
        ("template coder.sample (version ", SAMPLES[7]),
        ("workspace coder-k8s-operator/sample", SAMPLES[8]),
    ] {
        assert!(
            table[sample].contains(expected_in_line),
            "{sample}: {}",
            table[sample]
        );
    }
    assert!(
        !stdout(&env.output).contains("not ready"),
        "{}",
        stdout(&env.output)
    );
    apply_quickstart_and_templates(&env);
    apply_people(&env);
    apply_cloudnativepg(&env);
}

/// The real Coder v2.30.0 variant: what the open-source server can serve is Ready (the control plane with operator
/// access on Coder's real schema, the direct-mode proxy, the aggregated samples imported by Coder's Terraform
/// provisioner), every other sample says why in its row, and the quickstart reaches its documented state.
#[test]
fn local_up_with_the_real_coder_serves_what_it_can_and_says_why_for_the_rest() {
    let env = LocalEnv::up(&["--real-coder"]);
    assert!(
        env.output.status.success(),
        "hack/local-up.sh --real-coder failed:\n{}\n{}",
        stdout(&env.output),
        stderr(&env.output)
    );
    assert_eq!(
        std::fs::read_to_string(env.state.join("coder/provisioners"))
            .unwrap()
            .trim(),
        "echo,terraform",
        "the aggregated samples and the quickstart import with the terraform hack/build-testenv.sh builds"
    );
    let table = env.table();
    assert_eq!(table.len(), SAMPLES.len(), "{table:?}");
    let limited: BTreeMap<&str, &str> = OPEN_SOURCE_LIMITS.into_iter().collect();
    for sample in SAMPLES {
        match limited.get(sample) {
            Some(why) => assert!(table[sample].contains(why), "{sample}: {}", table[sample]),
            None => assert_sample_ready(&env, sample),
        }
    }
    apply_quickstart_and_templates(&env);
}

/// config/quickstart and examples/coder-templates with `kubectl apply -k`: the templates are imported and read back
/// with their files; the quickstart workspace exists and ends up stopped (its documented state) without a second apply.
fn apply_quickstart_and_templates(env: &LocalEnv) {
    for dir in ["config/quickstart", "examples/coder-templates"] {
        let out = env.kubectl(&["apply", "-k", dir]);
        assert_success(&out, &format!("kubectl apply -k {dir}"));
        let files = &kustomizations()[dir];
        for document in files.iter().flat_map(|f| yaml_documents(&repo_root().join(f))) {
            let name = document["metadata"]["name"].as_str().unwrap();
            match document["kind"].as_str().unwrap() {
                "Namespace" => assert_success(&env.kubectl(&["get", "namespace", name]), name),
                "CoderTemplate" => {
                    let read = env.get(&format!("codertemplate/{name}"));
                    assert_eq!(
                        read["status"]["activeVersionID"].as_str().map(str::len),
                        Some(36),
                        "{read}"
                    );
                    assert_eq!(
                        read["spec"]["files"], document["spec"]["files"],
                        "{name} read back from Coder"
                    );
                }
                "CoderWorkspace" => {
                    let object = format!("coderworkspace/{name}");
                    let read = env.get(&object);
                    assert_eq!(read["status"]["templateName"], document["spec"]["templateName"]);
                    assert_eq!(
                        document["spec"]["running"], false,
                        "the documented state below is stopped"
                    );
                    // Coder refuses the stop while the first build runs; the server stops it once that ended,
                    // without a second apply.
                    env.wait_for(&object, 180, "stopped", |w| {
                        w["status"]["latestBuildStatus"] == "stopped"
                    });
                }
                other => panic!("{dir}: no documented state for {other}/{name}; add it to this test"),
            }
        }
    }
}

/// examples/coder-people on the licensed test server: every object reads back from Coder as the manifest says (the
/// first passwords, never shown, aside), and each generated password is in its Secret.
fn apply_people(env: &LocalEnv) {
    let dir = "examples/coder-people";
    let out = env.kubectl(&["apply", "-k", dir]);
    assert_success(&out, &format!("kubectl apply -k {dir}"));
    for document in kustomizations()[dir]
        .iter()
        .flat_map(|f| yaml_documents(&repo_root().join(f)))
    {
        let name = document["metadata"]["name"].as_str().unwrap();
        let kind = document["kind"].as_str().unwrap();
        let read = env.get(&format!("{}/{name}", kind.to_lowercase()));
        for (field, wanted) in document["spec"].as_object().unwrap() {
            match (kind, field.as_str()) {
                ("CoderUser", "password") => {
                    assert_eq!(read["spec"].get("password"), None, "{read}");
                    let secret = wanted["generate"]["secretName"].as_str().unwrap();
                    let stored = env.get(&format!("secret/{secret}"));
                    assert_eq!(stored["type"], "kubernetes.io/basic-auth", "{secret}");
                    assert_eq!(
                        stored["data"]["password"].as_str().map(str::len),
                        Some(32),
                        "{secret}"
                    );
                }
                ("CoderUser", "roles") | ("CoderGroup", "members") => {
                    let mut read_back: Vec<Value> = read["spec"][field].as_array().unwrap().clone();
                    let mut expected = wanted.as_array().unwrap().clone();
                    read_back.sort_by_key(Value::to_string);
                    expected.sort_by_key(Value::to_string);
                    assert_eq!(read_back, expected, "{kind}/{name} {field}");
                }
                ("CoderTemplate", "files") => assert_eq!(&read["spec"]["files"], wanted, "{name} files"),
                ("CoderTemplate", "acl") => {
                    let entries = |acl: &Value, list: &str| -> BTreeSet<String> {
                        acl[list]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(Value::to_string)
                            .collect()
                    };
                    for list in ["groups", "users"] {
                        assert_eq!(
                            entries(&read["spec"]["acl"], list),
                            entries(wanted, list),
                            "{name} acl {list}"
                        );
                    }
                }
                _ => assert_eq!(&read["spec"][field], wanted, "{kind}/{name} {field}"),
            }
        }
    }
}

/// examples/cloudnativepg without its CloudNativePG Cluster: the control plane takes the PostgreSQL URL from the
/// Secret coder-db-app (key uri) as CloudNativePG writes it (local-up wrote it here) and hands it to coderd.
fn apply_cloudnativepg(env: &LocalEnv) {
    let dir = "examples/cloudnativepg";
    let applied: BTreeSet<String> = kustomizations()[dir]
        .iter()
        .filter(|f| !NOT_APPLIED.iter().any(|(n, _)| n == f))
        .cloned()
        .collect();
    for file in &applied {
        assert_success(
            &env.kubectl(&["apply", "-f", file]),
            &format!("kubectl apply -f {file}"),
        );
    }
    let objects = objects_of(&applied);
    assert_eq!(
        objects,
        BTreeSet::from(["CoderControlPlane/coder".to_owned(), "Namespace/coder".to_owned()])
    );
    let plane = env.wait_for(
        "codercontrolplane/coder",
        60,
        "resolved its database Secret",
        |cp| condition(cp, "DatabaseSecretResolved").is_some_and(|c| c["status"] == "True"),
    );
    assert_eq!(
        condition(&plane, "DatabaseSecretResolved").unwrap()["reason"],
        "Resolved"
    );
    let deployment = env.wait_for("deployment/coder", 60, "was created", |d| d["spec"].is_object());
    let env_vars = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .clone();
    let url = env_vars
        .iter()
        .find(|e| e["name"] == "CODER_PG_CONNECTION_URL")
        .unwrap();
    assert_eq!(
        url["valueFrom"]["secretKeyRef"],
        serde_json::json!({"name": "coder-db-app", "key": "uri"})
    );
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
