//! The alerting rules, the Grafana dashboard and the metrics they name: the rules pass `promtool check rules` and their
//! unit tests (`promtool test rules`, built from the Prometheus Go module), every dashboard query is valid PromQL,
//! every coder-k8s metric they name is one the operator serves, and the chart and config/prometheus ship the same
//! rules.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::packaging::template;
use crate::support::{assert_success, path, stdout};

const ALERTS: &str = "config/prometheus/alerts.yaml";
const ALERT_TESTS: &str = "config/prometheus/alerts-test.yaml";
const DASHBOARD: &str = "config/grafana/coder-k8s-dashboard.json";

/// promtool, built from its Go module by hack/build-testenv.sh when missing.
fn promtool() -> PathBuf {
    let out = Command::new("bash")
        .arg(path("hack/build-testenv.sh"))
        .arg("prometheus")
        .output()
        .expect("run hack/build-testenv.sh prometheus");
    assert_success(&out, "hack/build-testenv.sh prometheus");
    let dir = stdout(&out)
        .lines()
        .find_map(|l| l.strip_prefix("prometheus=").map(PathBuf::from))
        .expect("prometheus=<bin dir> line");
    dir.join("promtool")
}

#[test]
fn the_alerting_rules_pass_promtool_and_their_unit_tests() {
    let promtool = promtool();
    let out = Command::new(&promtool)
        .args(["check", "rules", &path(ALERTS)])
        .output()
        .unwrap();
    assert_success(&out, "promtool check rules");
    let out = Command::new(&promtool)
        .args(["test", "rules", &path(ALERT_TESTS)])
        .output()
        .unwrap();
    assert_success(&out, "promtool test rules");
    // Every alert of the file has a unit test.
    let rules = yaml(ALERTS);
    let tests = std::fs::read_to_string(path(ALERT_TESTS)).unwrap();
    let alerts = alert_names(&rules);
    assert!(alerts.len() >= 10, "{alerts:?}");
    for alert in &alerts {
        assert!(
            tests.contains(&format!("alertname: {alert}")),
            "{alert} has no unit test in {ALERT_TESTS}"
        );
    }
}

#[test]
fn a_broken_rule_fails_its_unit_test() {
    // The unit tests can fail: the same tests against a rules file whose leader alert never fires.
    let dir = tempfile::tempdir().unwrap();
    let broken = std::fs::read_to_string(path(ALERTS)).unwrap().replace(
        "max(coder_k8s_leader) < 1 or absent(coder_k8s_leader)",
        "max(coder_k8s_leader) < 0",
    );
    std::fs::write(dir.path().join("alerts.yaml"), broken).unwrap();
    std::fs::copy(path(ALERT_TESTS), dir.path().join("alerts-test.yaml")).unwrap();
    let out = Command::new(promtool())
        .args(["test", "rules"])
        .arg(dir.path().join("alerts-test.yaml"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "a rule that never fires passed its tests");
    let report = format!("{}{}", stdout(&out), crate::support::stderr(&out));
    assert!(report.contains("alertname: CoderK8sNoLeader"), "{report}");
}

#[test]
fn every_dashboard_query_is_valid_promql() {
    let dashboard = dashboard();
    assert_eq!(dashboard["uid"], "coder-k8s-operator");
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 36);
    let exprs = dashboard_exprs(&dashboard);
    assert!(exprs.len() >= 10, "{exprs:?}");
    // promtool parses each query as the expression of a recording rule.
    let rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(n, expr)| serde_json::json!({"record": format!("dashboard:panel_{n}"), "expr": expr}))
        .collect();
    let file = serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]});
    let dir = tempfile::tempdir().unwrap();
    let rules_path = dir.path().join("dashboard-rules.yaml");
    std::fs::write(&rules_path, serde_json::to_string(&file).unwrap()).unwrap();
    let out = Command::new(promtool())
        .args(["check", "rules"])
        .arg(&rules_path)
        .output()
        .unwrap();
    assert_success(&out, "promtool check rules of the dashboard's queries");
    for panel in dashboard["panels"].as_array().unwrap() {
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
        for key in ["h", "w", "x", "y"] {
            assert!(
                panel["gridPos"][key].is_u64(),
                "{}: gridPos.{key}",
                panel["title"]
            );
        }
    }
}

/// The families the operator serves, each given one sample (the encoder describes only families with samples). The
/// Coder requests reach this registry because no other test of this binary registers the process's metrics.
async fn served_families() -> BTreeSet<String> {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = coder_k8s::metrics::ProcessMetrics::register(&mut registry);
    metrics.leader.set(1);
    drop(metrics.reconciles.start("CoderControlPlane"));
    metrics.reconciles.failure("CoderControlPlane", "kube");
    metrics
        .reconciles
        .set_cleanup_records_unmatched("CoderAIProvider", 0);
    metrics.reconciles.cleanup_record_swept("CoderAIProvider");
    metrics
        .reconciles
        .cleanup_released_without_delete("CoderAIProvider");
    metrics.reconciles.template_test_finished("Succeeded");
    metrics.reconciles.set_provisioner_jobs("coder", "p", 0, 0);
    let workspaces = "/apis/aggregation.coder.com/v1alpha1/namespaces/coder/coderworkspaces";
    metrics
        .apiserver
        .observe(&http::Method::GET, workspaces, None, 200, 0.01);
    metrics
        .mcp
        .called("check_health", coder_k8s_mcp_server::metrics::Outcome::Ok);
    // Nothing listens on port 1: both requests fail, and are counted.
    let nowhere = "http://127.0.0.1:1/".parse().unwrap();
    let coder = coder_k8s_coder_client::CoderClient::anonymous(nowhere).unwrap();
    let _ = coder.buildinfo().await;
    let kube = metrics
        .kube_requests
        .client(kube::Config::new("https://127.0.0.1:1".parse().unwrap()))
        .unwrap();
    let _ = kube.apiserver_version().await;
    let mut served = String::new();
    prometheus_client::encoding::text::encode(&mut served, &registry).unwrap();
    served
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn every_coder_k8s_metric_the_rules_and_dashboard_name_is_served() {
    let families = served_families().await;
    let mut named = metric_names(&std::fs::read_to_string(path(ALERTS)).unwrap());
    named.extend(dashboard_exprs(&dashboard()).iter().flat_map(|e| metric_names(e)));
    assert!(named.len() >= 8, "{named:?}");
    for name in &named {
        let family = ["_total", "_bucket", "_count", "_sum"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        assert!(
            families.contains(family),
            "{name} is not served; the operator's families: {families:?}"
        );
    }
}

#[test]
fn the_chart_and_config_prometheus_ship_the_same_rules() {
    let groups = yaml(ALERTS)["groups"].clone();
    let rendered = template(&["metrics.prometheusRule.enabled=true"]);
    let rule = rendered
        .values()
        .find(|o| o["kind"] == "PrometheusRule")
        .expect("the chart renders a PrometheusRule");
    assert_eq!(rule["spec"]["groups"], groups);
    assert!(
        !template(&[]).values().any(|o| o["kind"] == "PrometheusRule"),
        "off by default"
    );
    let kustomized = yaml("config/prometheus/prometheusrule.yaml");
    assert_eq!(kustomized["spec"]["groups"], groups);
}

fn yaml(relative: &str) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(path(relative)).unwrap()).unwrap()
}

fn dashboard() -> Value {
    serde_json::from_str(&std::fs::read_to_string(path(DASHBOARD)).unwrap()).unwrap()
}

fn dashboard_exprs(dashboard: &Value) -> Vec<String> {
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().unwrap().to_owned())
        .collect()
}

fn alert_names(rules: &Value) -> Vec<String> {
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["alert"].as_str().map(str::to_owned))
        .collect()
}

/// The `coder_k8s_…` metric names in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("coder_k8s_") {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}
