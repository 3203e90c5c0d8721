//! What ships: `--version`, the kustomize layout (`config/default`, the `Kustomization` files beside the v0.1.5
//! `kubectl apply -f` directories, `config/crd/dormant`, `config/quickstart`, `examples/`), `dist/install.yaml`, and
//! the Helm chart (`helm lint`, `helm template` per mode against values.schema.json, `helm install` into the real
//! kube-apiserver, then `kubectl auth can-i` for its ServiceAccount and the rendered pod specs).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{assert_success, control_plane_with_crds, kubectl, path, repo_root, stderr, stdout};

/// Objects of a multi-document YAML text, keyed by `kind/namespace/name`.
fn objects(yaml: &str) -> BTreeMap<String, Value> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("parse YAML documents");
    documents
        .into_iter()
        .filter(|d| !d.is_null())
        .map(|d| {
            let key = format!(
                "{}/{}/{}",
                d["kind"].as_str().expect("kind"),
                d["metadata"]["namespace"].as_str().unwrap_or(""),
                d["metadata"]["name"].as_str().expect("name")
            );
            (key, d)
        })
        .collect()
}

/// The value with every number as a float: kustomize writes `minimum: 1` where the generated YAML has `1.0`.
fn numbers_as_floats(value: &Value) -> Value {
    match value {
        Value::Number(n) => serde_json::json!(n.as_f64()),
        Value::Array(items) => Value::Array(items.iter().map(numbers_as_floats).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), numbers_as_floats(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn kustomize(dir: &str) -> String {
    let out = Command::new("kubectl")
        .args(["kustomize", &path(dir)])
        .output()
        .expect("run kubectl kustomize");
    assert_success(&out, &format!("kubectl kustomize {dir}"));
    stdout(&out)
}

/// The objects `kubectl apply -f DIR/` would apply: every `.yaml` file of the directory.
fn objects_of_yaml_files(dir: &str) -> BTreeMap<String, Value> {
    let mut all = BTreeMap::new();
    for entry in std::fs::read_dir(repo_root().join(dir)).expect("read dir") {
        let file = entry.expect("dir entry").path();
        if file.extension().is_some_and(|e| e == "yaml") {
            all.extend(objects(&std::fs::read_to_string(&file).expect("read")));
        }
    }
    all
}

fn kinds(objects: &BTreeMap<String, Value>) -> Vec<String> {
    objects.keys().cloned().collect()
}

#[test]
fn version_flag_prints_the_crate_version_and_the_git_commit() {
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo_root())
        .output()
        .expect("git rev-parse");
    let commit = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    assert_eq!(commit.len(), 40, "the tests run in a git checkout");
    for flag in ["--version", "-version"] {
        let out = Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
            .arg(flag)
            .output()
            .expect("run coder-k8s");
        assert_success(&out, flag);
        assert_eq!(
            stdout(&out),
            format!("coder-k8s {} (commit {commit})\n", env!("CARGO_PKG_VERSION")),
            "{flag}"
        );
    }
}

/// The operator image of this release: the one every shipped manifest must run.
fn release_image() -> String {
    format!("ghcr.io/coder/coder-k8s:{}", env!("CARGO_PKG_VERSION"))
}

/// The images of every container (init containers included) of the workloads in `objects`.
fn images(objects: &BTreeMap<String, Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (key, object) in objects {
        let pod = &object["spec"]["template"]["spec"];
        for list in ["initContainers", "containers"] {
            for container in pod[list].as_array().into_iter().flatten() {
                out.push((
                    key.clone(),
                    container["image"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    out
}

#[test]
fn every_shipped_manifest_runs_the_image_of_this_release_and_the_release_is_past_v015() {
    let version: Vec<u64> = env!("CARGO_PKG_VERSION")
        .split(['.', '-'])
        .take(3)
        .map(|part| part.parse().expect("numeric version"))
        .collect();
    assert!(
        version > vec![0, 1, 5],
        "version {version:?} must be past the Go operator's 0.1.5"
    );
    let deploy = std::fs::read_to_string(repo_root().join("deploy/deployment.yaml")).expect("read");
    let bundle = std::fs::read_to_string(repo_root().join("dist/install.yaml")).expect("read");
    let bundle_all = std::fs::read_to_string(repo_root().join("dist/install-all.yaml")).expect("read");
    let shipped = [
        ("deploy/deployment.yaml", objects(&deploy)),
        ("dist/install.yaml", objects(&bundle)),
        ("dist/install-all.yaml", objects(&bundle_all)),
        ("config/default", objects(&kustomize("config/default"))),
        ("config/all", objects(&kustomize("config/all"))),
        ("chart (controller)", template(&[])),
        ("chart (all)", template(&["mode=all"])),
        (
            "chart (all, mcp)",
            template(&["mode=all", "mcp.enabled=true", "mcp.tokenSecret.name=t"]),
        ),
    ];
    for (source, objects) in shipped {
        let images = images(&objects);
        assert!(!images.is_empty(), "{source} runs no container");
        for (key, image) in images {
            assert_eq!(image, release_image(), "{source}: {key}");
        }
    }
    let chart = std::fs::read_to_string(path(&format!("{CHART}/Chart.yaml"))).expect("read");
    for line in [
        format!("version: {}", env!("CARGO_PKG_VERSION")),
        format!("appVersion: \"{}\"", env!("CARGO_PKG_VERSION")),
    ] {
        assert!(
            chart.lines().any(|l| l == line),
            "Chart.yaml has no line {line:?}"
        );
    }
}

#[test]
fn kustomizations_beside_the_v015_apply_directories_list_every_file_and_hide_from_kubectl_apply_f() {
    for dir in [
        "config/crd/bases",
        "config/rbac",
        "deploy",
        "config/apiserver-standalone",
    ] {
        let root = repo_root().join(dir);
        assert!(
            root.join("Kustomization").is_file(),
            "{dir}/Kustomization (a .yaml name would be applied by `kubectl apply -f {dir}/`)"
        );
        assert!(!root.join("kustomization.yaml").exists(), "{dir}");
        assert!(!root.join("kustomization.yml").exists(), "{dir}");
    }
    for dir in ["config/crd/bases", "config/rbac", "config/apiserver-standalone"] {
        let built = objects(&kustomize(dir));
        assert!(built.len() >= 5, "{dir}: {:?}", kinds(&built));
        assert_eq!(
            kinds(&built),
            kinds(&objects_of_yaml_files(dir)),
            "{dir}: the Kustomization must list exactly the files `kubectl apply -f {dir}/` applies"
        );
    }
    let deploy = objects(&kustomize("deploy"));
    assert_eq!(kinds(&deploy), ["Deployment/coder-system/coder-k8s"]);
}

/// The objects of `kubectl kustomize DIR`, after checking that the generated `bundle` holds exactly them.
fn kustomize_equals_bundle(dir: &str, bundle: &str) -> BTreeMap<String, Value> {
    let built = objects(&kustomize(dir));
    let in_bundle = objects(&std::fs::read_to_string(repo_root().join(bundle)).expect("read"));
    assert_eq!(kinds(&built), kinds(&in_bundle), "{dir} and {bundle}");
    for (key, object) in &built {
        assert!(
            numbers_as_floats(object) == numbers_as_floats(&in_bundle[key]),
            "{key} differs between {dir} and {bundle}"
        );
    }
    built
}

#[tokio::test]
async fn config_default_is_dist_install_and_applies_in_controller_mode() {
    let built = kustomize_equals_bundle("config/default", "dist/install.yaml");
    // Controller mode: no aggregated API parts at all.
    for key in built.keys() {
        assert!(
            !key.starts_with("APIService/")
                && !key.contains("auth-delegator")
                && !key.contains("authentication-reader")
                && !key.contains("apiservice-cabundle")
                && !key.contains("coder-k8s-apiserver"),
            "{key} does not belong to a controller-mode install"
        );
    }
    let deployment = &built["Deployment/coder-system/coder-k8s"];
    assert_controller_pod(&deployment["spec"]["template"]["spec"]);
    let namespaces: Vec<&str> = built
        .keys()
        .filter(|k| k.starts_with("Namespace/"))
        .map(String::as_str)
        .collect();
    assert_eq!(namespaces, ["Namespace//coder-system"]);

    let cp = control_plane_with_crds().await;
    let out = kubectl(
        cp,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-k",
            &path("config/default"),
        ],
        None,
    );
    assert_success(&out, "kubectl apply -k config/default");
    let out = kubectl(
        cp,
        &[
            "get",
            "deployment",
            "coder-k8s",
            "-n",
            "coder-system",
            "-o",
            "json",
        ],
        None,
    );
    assert_success(&out, "get the Deployment");
    let live: Value = serde_json::from_slice(&out.stdout).expect("Deployment JSON");
    assert_controller_pod(&live["spec"]["template"]["spec"]);
    let out = kubectl(cp, &["get", "apiservice", "v1alpha1.aggregation.coder.com"], None);
    assert!(!out.status.success(), "no APIService may be installed");
}

#[tokio::test]
async fn config_all_is_dist_install_all_with_the_aggregated_api_and_two_spread_replicas() {
    let built = kustomize_equals_bundle("config/all", "dist/install-all.yaml");
    // Everything of the controller install, plus the aggregated API's objects and the budget.
    let controller = objects(&kustomize("config/default"));
    let extra: Vec<&String> = built.keys().filter(|k| !controller.contains_key(*k)).collect();
    assert_eq!(
        extra,
        [
            "APIService//v1alpha1.aggregation.coder.com",
            "ClusterRole//coder-k8s-apiservice-cabundle",
            "ClusterRoleBinding//coder-k8s-apiservice-cabundle",
            "ClusterRoleBinding//coder-k8s-auth-delegator",
            "PodDisruptionBudget/coder-system/coder-k8s",
            "RoleBinding/kube-system/coder-k8s-authentication-reader",
            "Service/coder-system/coder-k8s-apiserver",
        ]
    );
    assert!(controller.keys().all(|k| built.contains_key(k)));

    let deployment = &built["Deployment/coder-system/coder-k8s"];
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0
    );
    let pod = &deployment["spec"]["template"]["spec"];
    let spread = &pod["topologySpreadConstraints"][0];
    assert_eq!(spread["topologyKey"], "kubernetes.io/hostname", "{pod}");
    assert_eq!(spread["labelSelector"]["matchLabels"]["app"], "coder-k8s");
    let container = &pod["containers"][0];
    assert!(
        container.get("args").is_none(),
        "no args: the image's default mode, all"
    );
    let ports: Vec<&str> = container["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| p["name"].as_str().expect("port name"))
        .collect();
    assert_eq!(ports, ["health", "https", "mcp"]);
    assert_hardened(pod, container);
    let budget = &built["PodDisruptionBudget/coder-system/coder-k8s"];
    assert_eq!(budget["spec"]["minAvailable"], 1);
    assert_eq!(
        budget["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    let service = &built["Service/coder-system/coder-k8s-apiserver"];
    assert_eq!(
        service["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );

    // The real API server accepts every object (a dry run: an APIService without a running server behind it would
    // break discovery for the other tests sharing this control plane).
    let cp = control_plane_with_crds().await;
    let out = kubectl(
        cp,
        &["apply", "--server-side", "-k", &path("config/namespace")],
        None,
    );
    assert_success(&out, "kubectl apply -k config/namespace");
    let out = kubectl(
        cp,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--dry-run=server",
            "-k",
            &path("config/all"),
        ],
        None,
    );
    assert_success(&out, "kubectl apply --dry-run=server -k config/all");
    for key in built.keys() {
        let (kind, rest) = key.split_once('/').expect("key");
        let name = rest.rsplit('/').next().expect("name");
        let applied = stdout(&out)
            .lines()
            .any(|line| line.starts_with(&kind.to_lowercase()) && line.contains(&format!("/{name} ")));
        assert!(applied, "{key} was not applied: {}", stdout(&out));
    }
}

/// The pod of a controller-mode install: `--app=controller`, only the health port, the hardened security context.
fn assert_controller_pod(pod: &Value) {
    let container = &pod["containers"][0];
    assert_eq!(container["args"], serde_json::json!(["--app=controller"]));
    let ports: Vec<&str> = container["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| p["name"].as_str().expect("port name"))
        .collect();
    assert_eq!(ports, ["health"]);
    assert_hardened(pod, container);
}

fn assert_hardened(pod: &Value, container: &Value) {
    let security = &container["securityContext"];
    assert_eq!(security["runAsUser"], 65532, "{security}");
    assert_eq!(security["runAsNonRoot"], true, "{security}");
    assert_eq!(security["readOnlyRootFilesystem"], true, "{security}");
    assert_eq!(security["allowPrivilegeEscalation"], false, "{security}");
    assert_eq!(
        security["capabilities"]["drop"],
        serde_json::json!(["ALL"]),
        "{security}"
    );
    assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault", "{security}");
    assert_eq!(
        pod["securityContext"]["runAsUser"], 65532,
        "{}",
        pod["securityContext"]
    );
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
}

/// Minimal stand-ins for the CRDs of the examples' third-party kinds (CloudNativePG, Argo CD), so that the examples
/// can be checked by the real API server; their own schemas are not under test here.
fn stub_crd(group: &str, kind: &str, plural: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  names: {{kind: {kind}, plural: {plural}, listKind: {kind}List, singular: {lower}}}
  scope: Namespaced
  versions:
    - name: {version}
      served: true
      storage: true
      schema:
        openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
",
        lower = kind.to_lowercase(),
        version = if group == "argoproj.io" { "v1alpha1" } else { "v1" },
    )
}

#[tokio::test]
async fn dormant_quickstart_and_examples_build_and_the_served_kinds_pass_the_api_server() {
    let cp = control_plane_with_crds().await;
    for ns in ["coder", "argocd"] {
        let out = kubectl(cp, &["create", "namespace", ns], None);
        assert!(out.status.success() || String::from_utf8_lossy(&out.stderr).contains("AlreadyExists"));
    }
    let stubs = [
        stub_crd("postgresql.cnpg.io", "Cluster", "clusters"),
        stub_crd("argoproj.io", "ApplicationSet", "applicationsets"),
    ]
    .join("---\n");
    assert_success(&kubectl(cp, &["apply", "-f", "-"], Some(&stubs)), "stub CRDs");
    let out = kubectl(
        cp,
        &[
            "wait",
            "--for=condition=Established",
            "crd/clusters.postgresql.cnpg.io",
            "crd/applicationsets.argoproj.io",
        ],
        None,
    );
    assert_success(&out, "stub CRDs established");

    // The aggregated API's kinds (aggregation.coder.com) need the aggregated API server: built and named here,
    // applied through it in manifests.rs.
    let quickstart = objects(&kustomize("config/quickstart"));
    assert_eq!(
        kinds(&quickstart),
        [
            "CoderTemplate/coder/coder.quickstart-template",
            "CoderWorkspace/coder/coder.coder-k8s-operator.quickstart-workspace",
            "Namespace//coder",
        ]
    );
    assert_eq!(
        quickstart["CoderWorkspace/coder/coder.coder-k8s-operator.quickstart-workspace"]["spec"]["running"],
        false
    );
    let templates = objects(&kustomize("examples/coder-templates"));
    assert_eq!(kinds(&templates), ["CoderTemplate/coder/coder.smoke-scratch"]);

    for (dir, expected) in [
        (
            "config/crd/dormant",
            vec!["CustomResourceDefinition//coderworkspacepools.coder.com"],
        ),
        (
            "examples/cloudnativepg",
            vec![
                "Cluster/coder/coder-db",
                "CoderControlPlane/coder/coder",
                "Namespace//coder",
            ],
        ),
        (
            "examples/production",
            vec![
                "Cluster/coder/coder-db",
                "CoderControlPlane/coder/coder",
                "Namespace//coder",
            ],
        ),
        ("examples/argocd", vec!["ApplicationSet/argocd/coder-k8s-stack"]),
    ] {
        let yaml = kustomize(dir);
        assert_eq!(kinds(&objects(&yaml)), expected, "{dir}");
        // Server-side dry run: the API server validates every object (schemas, CEL rules) and stores nothing, so
        // the dormant CRD and the example control plane stay out of the other tests' way.
        let out = kubectl(cp, &["apply", "--dry-run=server", "-f", "-"], Some(&yaml));
        assert_success(
            &out,
            &format!("kubectl apply --dry-run=server (kubectl kustomize {dir})"),
        );
    }
    let plane = &objects(&kustomize("examples/cloudnativepg"))["CoderControlPlane/coder/coder"];
    assert_eq!(
        plane["spec"]["database"]["connectionSecretRef"],
        serde_json::json!({"name": "coder-db-app", "key": "uri"})
    );
    // The production overlay keeps the database wiring and pins what docs/production.md says it pins.
    let production = objects(&kustomize("examples/production"));
    let plane = &production["CoderControlPlane/coder/coder"];
    assert_eq!(
        plane["spec"]["database"]["connectionSecretRef"],
        serde_json::json!({"name": "coder-db-app", "key": "uri"})
    );
    assert_eq!(plane["spec"]["image"], "ghcr.io/coder/coder:v2.30.0");
    assert_eq!(plane["spec"]["replicas"], 2);
    assert_eq!(production["Cluster/coder/coder-db"]["spec"]["instances"], 3);
}

// ---------------------------------------------------------------------------------------------------------------
// Helm chart

const CHART: &str = "charts/coder-k8s";

/// The helm CLI, built from its Go module by hack/build-testenv.sh when missing.
pub(crate) fn helm_binary() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("hack/build-testenv.sh"))
        .arg("helm")
        .output()
        .expect("run hack/build-testenv.sh helm");
    assert_success(&out, "hack/build-testenv.sh helm");
    let dir = stdout(&out)
        .lines()
        .find_map(|l| l.strip_prefix("helm=").map(PathBuf::from))
        .expect("helm=<bin dir> line");
    dir.join("helm")
}

fn helm(args: &[&str], kubeconfig: Option<&std::path::Path>) -> Output {
    let mut command = Command::new(helm_binary());
    command.args(args);
    // Helm keeps no state outside the cluster that these tests need; keep its cache out of $HOME.
    let home = std::env::temp_dir().join("coder-k8s-helm-home");
    command
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    if let Some(config) = kubeconfig {
        command.env("KUBECONFIG", config);
    }
    command.output().expect("run helm")
}

pub(crate) fn template(sets: &[&str]) -> BTreeMap<String, Value> {
    let chart = path(CHART);
    let mut args = vec!["template", "coder-k8s", &chart, "--namespace", "coder-system"];
    for set in sets {
        args.extend_from_slice(&["--set", set]);
    }
    let out = helm(&args, None);
    assert_success(&out, &format!("helm template {sets:?}"));
    objects(&stdout(&out))
}

const NO_APISERVICE: &str = "aggregatedAPI.apiService.enabled=false";

const STANDALONE: &[&str] = &[
    "mode=aggregated-apiserver",
    "standalone.coderURL=https://coder.example.com",
    "standalone.coderNamespace=coder",
    "standalone.sessionTokenSecret.name=coder-owner-token",
];

#[test]
fn helm_chart_lints_and_renders_each_mode_as_the_values_say() {
    let out = helm(&["lint", "--strict", &path(CHART)], None);
    assert_success(&out, "helm lint");

    let controller = template(&[]);
    let deployment = &controller["Deployment/coder-system/coder-k8s"];
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["args"],
        serde_json::json!(["--app=controller", "--leader-elect=true"])
    );
    assert_eq!(pod["containers"][0]["image"], release_image());
    assert_hardened(pod, &pod["containers"][0]);
    assert!(controller.contains_key("ClusterRole//coder-k8s-manager"));
    assert!(controller.contains_key("Service/coder-system/coder-k8s-metrics"));
    assert!(
        !controller
            .keys()
            .any(|k| k.contains("auth-delegator") || k.starts_with("APIService/"))
    );

    let all = template(&["mode=all"]);
    assert!(all.contains_key("ClusterRoleBinding//coder-k8s-auth-delegator"));
    assert!(all.contains_key("RoleBinding/kube-system/coder-k8s-authentication-reader"));
    assert_eq!(
        all["APIService//v1alpha1.aggregation.coder.com"]["spec"]["service"],
        serde_json::json!({"name": "coder-k8s-apiserver", "namespace": "coder-system", "port": 443}),
        "the Service name is fixed: the serving certificate is issued for it"
    );
    assert!(
        all["APIService//v1alpha1.aggregation.coder.com"]["spec"]
            .get("insecureSkipTLSVerify")
            .is_none(),
        "the server manages caBundle; TLS is verified"
    );
    assert_eq!(
        all["Service/coder-system/coder-k8s-apiserver"]["spec"]["ports"][0]["targetPort"],
        "https"
    );
    let without_api = template(&["mode=all", "aggregatedAPI.apiService.enabled=false"]);
    assert!(
        !without_api
            .keys()
            .any(|k| k.starts_with("APIService/") || k.contains("apiserver")),
        "{:?}",
        kinds(&without_api)
    );
    let controller_with_flag = template(&["aggregatedAPI.apiService.enabled=true"]);
    assert!(
        !controller_with_flag.keys().any(|k| k.starts_with("APIService/")),
        "controller mode serves no aggregated API"
    );

    let standalone = template(STANDALONE);
    assert!(
        !standalone.contains_key("ClusterRole//coder-k8s-manager"),
        "the standalone server runs no controllers"
    );
    let placeholder = &standalone["Secret/coder-system/coder-k8s-apiserver-tls"];
    assert_eq!(placeholder["type"], "coder.com/aggregated-apiserver-serving-ca");
    assert!(
        placeholder.get("data").is_none(),
        "an empty placeholder the server fills"
    );
    assert!(
        !all.contains_key("Secret/coder-system/coder-k8s-apiserver-tls"),
        "all mode creates it"
    );
    let container =
        &standalone["Deployment/coder-system/coder-k8s"]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["args"],
        serde_json::json!([
            "--app=aggregated-apiserver",
            "--coder-url=https://coder.example.com",
            "--coder-namespace=coder"
        ])
    );
    assert_eq!(container["env"][2]["name"], "CODER_SESSION_TOKEN");
    assert_eq!(
        container["env"][2]["valueFrom"]["secretKeyRef"]["name"],
        "coder-owner-token"
    );

    let options = template(&[
        "mcp.enabled=true",
        "mcp.tokenSecret.name=mcp-token",
        "admissionPolicy.enabled=true",
        "metrics.serviceMonitor.enabled=true",
        "replicas=2",
    ]);
    let pod = &options["Deployment/coder-system/coder-k8s"]["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][1]["args"][0], "--app=mcp-http");
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "mcp-token");
    assert!(options.contains_key("ValidatingAdmissionPolicy//coder-k8s-status-operator-only"));
    assert!(options.contains_key("ServiceMonitor/coder-system/coder-k8s"));
}

#[test]
fn helm_chart_runs_two_spread_replicas_with_a_budget_where_it_serves_the_aggregated_api() {
    let deployment_of =
        |objects: &BTreeMap<String, Value>| objects["Deployment/coder-system/coder-k8s"].clone();
    let budget = "PodDisruptionBudget/coder-system/coder-k8s";

    // Controller mode: one replica, no budget, no spread, the default rollout.
    let controller = template(&[]);
    let deployment = deployment_of(&controller);
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert!(deployment["spec"].get("strategy").is_none(), "{deployment}");
    assert!(
        deployment["spec"]["template"]["spec"]
            .get("topologySpreadConstraints")
            .is_none()
    );
    assert!(!controller.contains_key(budget));

    for mode in ["all", STANDALONE[0]] {
        let sets: Vec<&str> = if mode == "all" {
            vec!["mode=all"]
        } else {
            STANDALONE.to_vec()
        };
        let objects = template(&sets);
        let deployment = deployment_of(&objects);
        assert_eq!(deployment["spec"]["replicas"], 2, "{mode}");
        assert_eq!(
            deployment["spec"]["strategy"]["rollingUpdate"],
            serde_json::json!({"maxUnavailable": 0, "maxSurge": 1}),
            "{mode}"
        );
        let selector = &deployment["spec"]["selector"]["matchLabels"];
        let spread = &deployment["spec"]["template"]["spec"]["topologySpreadConstraints"];
        assert_eq!(spread.as_array().map(Vec::len), Some(1), "{mode}: {spread}");
        assert_eq!(spread[0]["topologyKey"], "kubernetes.io/hostname");
        assert_eq!(spread[0]["whenUnsatisfiable"], "ScheduleAnyway");
        assert_eq!(&spread[0]["labelSelector"]["matchLabels"], selector);
        assert_eq!(objects[budget]["spec"]["minAvailable"], 1, "{mode}");
        assert_eq!(&objects[budget]["spec"]["selector"]["matchLabels"], selector);
    }

    // One value each: the replica count, the budget, the spread.
    let single = template(&["mode=all", "replicas=1"]);
    assert_eq!(deployment_of(&single)["spec"]["replicas"], 1);
    assert!(
        !single.contains_key(budget),
        "a budget over one pod would block every drain"
    );
    let no_budget = template(&["mode=all", "podDisruptionBudget.enabled=false"]);
    assert!(!no_budget.contains_key(budget));
    let three = template(&["replicas=3", "podDisruptionBudget.minAvailable=2"]);
    assert_eq!(
        deployment_of(&three)["spec"]["replicas"],
        3,
        "controller mode with a warm standby"
    );
    assert_eq!(three[budget]["spec"]["minAvailable"], 2);
    let zones = template(&[
        "mode=all",
        "topologySpreadConstraints[0].maxSkew=1",
        "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
        "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
    ]);
    let spread = &deployment_of(&zones)["spec"]["template"]["spec"]["topologySpreadConstraints"];
    assert_eq!(
        spread.as_array().map(Vec::len),
        Some(1),
        "the list replaces the default: {spread}"
    );
    assert_eq!(spread[0]["topologyKey"], "topology.kubernetes.io/zone");
}

#[test]
fn helm_values_outside_the_schema_or_the_modes_rules_are_refused() {
    for (sets, message) in [
        (vec!["mode=bogus"], "mode"),
        (vec!["replicas=0"], "replicas"),
        (vec!["imageTag=1"], "imageTag"),
        (vec!["mode=aggregated-apiserver"], "standalone.coderURL"),
        (vec!["replicas=2", "leaderElection=false"], "leaderElection"),
        // all mode runs two replicas by default, which needs leader election too; the message says the way out.
        (vec!["mode=all", "leaderElection=false"], "set replicas=1"),
        (vec!["podDisruptionBudget.minAvailable=many"], "minAvailable"),
        (vec!["topologySpreadConstraints[0].maxSkew=1"], "topologyKey"),
        (vec!["mcp.enabled=true"], "mcp.tokenSecret.name"),
    ] {
        let mut args = vec!["template".to_owned(), "coder-k8s".to_owned(), path(CHART)];
        for set in &sets {
            args.extend(["--set".to_owned(), (*set).to_owned()]);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = helm(&refs, None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{sets:?} must be refused");
        assert!(stderr.contains(message), "{sets:?}: {stderr}");
    }
}

#[tokio::test]
async fn helm_install_grants_the_service_account_exactly_its_modes_access() {
    let cp = control_plane_with_crds().await;
    let kubeconfig = Some(cp.kubeconfig_path());
    let can_i = |sa: &str, args: &[&str]| -> String {
        let mut full = vec!["auth", "can-i"];
        full.extend_from_slice(args);
        let user = format!("system:serviceaccount:{sa}");
        full.extend_from_slice(&["--as", &user]);
        stdout(&kubectl(cp, &full, None)).trim().to_owned()
    };
    for (release, namespace, sets) in [
        ("helm-ctl", "helm-controller", vec![]),
        // The APIService is cluster-wide and would lead kube-apiserver to a server that does not run here.
        ("helm-all", "helm-all", vec!["mode=all", NO_APISERVICE]),
        ("helm-api", "helm-api", [STANDALONE, &[NO_APISERVICE]].concat()),
    ] {
        let chart = path(CHART);
        let mut args = vec![
            "upgrade",
            "--install",
            release,
            &chart,
            "--namespace",
            namespace,
            "--create-namespace",
        ];
        for set in &sets {
            args.extend_from_slice(&["--set", set]);
        }
        let out = helm(&args, kubeconfig);
        assert_success(&out, &format!("helm install {release}"));
    }

    let controller = "helm-controller:helm-ctl-coder-k8s";
    assert_eq!(
        can_i(
            controller,
            &[
                "patch",
                "codercontrolplanes.coder.com",
                "--subresource=status",
                "-n",
                "x"
            ]
        ),
        "yes"
    );
    assert_eq!(
        can_i(controller, &["create", "deployments.apps", "-n", "coder"]),
        "yes"
    );
    assert_eq!(
        can_i(controller, &["create", "configmaps", "-n", "helm-controller"]),
        "yes"
    );
    assert_eq!(
        can_i(controller, &["create", "configmaps", "-n", "coder"]),
        "no",
        "cleanup records only in its own namespace"
    );
    assert_eq!(
        can_i(controller, &["create", "tokenreviews.authentication.k8s.io"]),
        "no"
    );

    let all = "helm-all:helm-all-coder-k8s";
    assert_eq!(
        can_i(
            all,
            &[
                "patch",
                "codercontrolplanes.coder.com",
                "--subresource=status",
                "-n",
                "x"
            ]
        ),
        "yes"
    );
    assert_eq!(
        can_i(all, &["create", "tokenreviews.authentication.k8s.io"]),
        "yes"
    );
    assert_eq!(
        can_i(
            all,
            &[
                "get",
                "configmaps/extension-apiserver-authentication",
                "-n",
                "kube-system"
            ]
        ),
        "yes"
    );
    assert_eq!(
        can_i(
            all,
            &[
                "patch",
                "apiservices.apiregistration.k8s.io/v1alpha1.aggregation.coder.com"
            ]
        ),
        "yes"
    );
    assert_eq!(
        can_i(
            all,
            &[
                "patch",
                "apiservices.apiregistration.k8s.io/v1beta1.metrics.k8s.io"
            ]
        ),
        "no"
    );

    let standalone = "helm-api:helm-api-coder-k8s";
    assert_eq!(
        can_i(standalone, &["create", "tokenreviews.authentication.k8s.io"]),
        "yes"
    );
    assert_eq!(
        can_i(
            standalone,
            &[
                "patch",
                "codercontrolplanes.coder.com",
                "--subresource=status",
                "-n",
                "x"
            ]
        ),
        "no"
    );
    assert_eq!(
        can_i(standalone, &["create", "deployments.apps", "-n", "coder"]),
        "no"
    );
    for (verb, expected) in [("get", "yes"), ("update", "yes"), ("delete", "no")] {
        assert_eq!(
            can_i(
                standalone,
                &[verb, "secrets/coder-k8s-apiserver-tls", "-n", "helm-api"]
            ),
            expected,
            "{verb} on its serving-CA Secret"
        );
    }
    assert_eq!(
        can_i(standalone, &["create", "secrets", "-n", "helm-api"]),
        "no",
        "the standalone identity fills the placeholder instead of creating Secrets"
    );

    for (namespace, name, app) in [
        ("helm-controller", "helm-ctl-coder-k8s", "controller"),
        ("helm-all", "helm-all-coder-k8s", "all"),
        ("helm-api", "helm-api-coder-k8s", "aggregated-apiserver"),
    ] {
        let out = kubectl(
            cp,
            &["get", "deployment", name, "-n", namespace, "-o", "json"],
            None,
        );
        assert_success(&out, name);
        let live: Value = serde_json::from_slice(&out.stdout).expect("Deployment JSON");
        let pod = &live["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], name);
        assert_eq!(pod["containers"][0]["args"][0], format!("--app={app}"));
        assert_hardened(pod, &pod["containers"][0]);
    }
    let out = kubectl(cp, &["get", "apiservice", "v1alpha1.aggregation.coder.com"], None);
    assert!(
        !out.status.success(),
        "the releases here were installed without the APIService"
    );
}

/// The standalone aggregated API server's manifests, applied as the troubleshooting guide says: its identity can check
/// callers, read and fill (but not create) its serving-CA Secret, and patch only its own APIService.
#[tokio::test]
async fn apiserver_standalone_manifests_grant_exactly_the_standalone_servers_access() {
    let cp = control_plane_with_crds().await;
    let out = kubectl(cp, &["create", "namespace", "coder-system"], None);
    assert!(
        out.status.success() || stderr(&out).contains("AlreadyExists"),
        "{}",
        stderr(&out)
    );
    for file in [
        "config/apiserver-standalone/",
        "config/rbac/apiservice-cabundle-role.yaml",
    ] {
        assert_success(&kubectl(cp, &["apply", "-f", &path(file)], None), file);
    }
    let placeholder = kubectl(
        cp,
        &[
            "get",
            "secret",
            "coder-k8s-apiserver-tls",
            "-n",
            "coder-system",
            "-o",
            "json",
        ],
        None,
    );
    assert_success(&placeholder, "the placeholder Secret");
    let placeholder: Value = serde_json::from_slice(&placeholder.stdout).expect("Secret JSON");
    assert_eq!(placeholder["type"], "coder.com/aggregated-apiserver-serving-ca");
    assert!(
        placeholder.get("data").is_none(),
        "an empty placeholder: {placeholder}"
    );
    let can_i = |args: &[&str]| -> String {
        let mut full = vec!["auth", "can-i"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["--as", "system:serviceaccount:coder-system:coder-k8s-apiserver"]);
        stdout(&kubectl(cp, &full, None)).trim().to_owned()
    };
    for (args, expected) in [
        (vec!["create", "tokenreviews.authentication.k8s.io"], "yes"),
        (vec!["create", "subjectaccessreviews.authorization.k8s.io"], "yes"),
        (
            vec![
                "get",
                "configmaps/extension-apiserver-authentication",
                "-n",
                "kube-system",
            ],
            "yes",
        ),
        (
            vec!["get", "secrets/coder-k8s-apiserver-tls", "-n", "coder-system"],
            "yes",
        ),
        (
            vec!["update", "secrets/coder-k8s-apiserver-tls", "-n", "coder-system"],
            "yes",
        ),
        (vec!["create", "secrets", "-n", "coder-system"], "no"),
        (vec!["get", "secrets/other", "-n", "coder-system"], "no"),
        (
            vec![
                "patch",
                "apiservices.apiregistration.k8s.io/v1alpha1.aggregation.coder.com",
            ],
            "yes",
        ),
        (
            vec![
                "patch",
                "apiservices.apiregistration.k8s.io/v1beta1.metrics.k8s.io",
            ],
            "no",
        ),
        (vec!["list", "codercontrolplanes.coder.com", "-n", "coder"], "no"),
    ] {
        assert_eq!(can_i(&args), expected, "{args:?}");
    }
}

/// `config/prometheus`: a metrics Service that selects the operator's pods and targets the port serving `/metrics`,
/// a ServiceMonitor that selects that Service by its labels and scrapes its port, and the alerting rules.
#[test]
fn config_prometheus_scrapes_the_operators_metrics_port() {
    let built = objects(&kustomize("config/prometheus"));
    assert_eq!(
        kinds(&built),
        [
            "PrometheusRule/coder-system/coder-k8s",
            "Service/coder-system/coder-k8s-metrics",
            "ServiceMonitor/coder-system/coder-k8s"
        ]
    );
    let service = &built["Service/coder-system/coder-k8s-metrics"];
    let monitor = &built["ServiceMonitor/coder-system/coder-k8s"];
    let deploy = objects(&kustomize("deploy"));
    let deployment = &deploy["Deployment/coder-system/coder-k8s"];
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(
            &pod_labels[key], value,
            "the Service selects the operator's pods by {key}"
        );
    }
    let port = &service["spec"]["ports"][0];
    let target = port["targetPort"].as_str().unwrap();
    let container_ports = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap();
    let served = container_ports.iter().find(|p| p["name"] == target).unwrap();
    assert_eq!(
        served["containerPort"], 8081,
        "/metrics is served on the health port"
    );
    for (key, value) in monitor["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(
            &service["metadata"]["labels"][key], value,
            "the ServiceMonitor selects the Service by {key}"
        );
    }
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], port["name"]);
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
}
