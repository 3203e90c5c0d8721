//! A spec that sets none of the workload settings added after v0.1.5 (labels and annotations, scheduling, sidecars,
//! budgets, Service options, monitoring, autoscaling) gives the same desired objects as before they existed: the
//! hashes below were taken with the operator of that time, and a changed hash would apply every Deployment, Service
//! and ServiceAccount again on an upgrade (and roll the pods). Each spec sets every field v0.1.5 had on its kind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use coder_k8s_controllers::apply::desired_hash;
use coder_k8s_controllers::{control_plane, provisioner, workspace_proxy};
use serde_json::json;

fn cp_spec() -> serde_json::Value {
    json!({
        "image": "ghcr.io/coder/coder:v2.30.0", "replicas": 2,
        "service": {"type": "LoadBalancer", "port": 443, "annotations": {"a": "b"}},
        "extraArgs": ["--verbose"], "extraEnv": [{"name": "X", "value": "1"}],
        "imagePullSecrets": [{"name": "pull"}],
        "database": {"connectionSecretRef": {"name": "db", "key": "uri"}},
        "tls": {"secretNames": ["tls"]},
        "resources": {"requests": {"cpu": "1"}}, "securityContext": {"runAsNonRoot": true},
        "podSecurityContext": {"fsGroup": 1000},
        "nodeSelector": {"pool": "coder"}, "tolerations": [{"key": "k", "operator": "Exists"}],
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        "certs": {"secrets": [{"name": "ca", "key": "ca.crt"}]},
        "volumes": [{"name": "v", "emptyDir": {}}], "volumeMounts": [{"name": "v", "mountPath": "/v"}],
        "envFrom": [{"configMapRef": {"name": "cfg"}}],
        "expose": {"ingress": {"host": "coder.example.com", "className": "nginx"}},
        "rbac": {"workspaceNamespaces": ["ws"]},
        "serviceAccount": {"annotations": {"x": "y"}},
    })
}
fn provisioner_spec() -> serde_json::Value {
    json!({"controlPlaneRef": {"name": "cp"}, "replicas": 2, "tags": {"queue": "q"}, "image": "img",
        "extraArgs": ["--verbose"], "extraEnv": [{"name": "X", "value": "1"}],
        "resources": {"limits": {"memory": "1Gi"}}, "imagePullSecrets": [{"name": "pull"}],
        "terminationGracePeriodSeconds": 900})
}
fn proxy_spec() -> serde_json::Value {
    json!({"image": "img", "replicas": 2, "service": {"type": "NodePort", "port": 8080, "annotations": {"a": "b"}},
        "primaryAccessURL": "https://coder.example.com", "proxySessionTokenSecretRef": {"name": "t"},
        "derpOnly": true, "extraArgs": ["--x"], "extraEnv": [{"name": "X", "value": "1"}],
        "imagePullSecrets": [{"name": "pull"}]})
}

#[test]
fn a_control_planes_objects_keep_their_hashes() {
    let mut cp = CoderControlPlane::new("coder", serde_json::from_value(cp_spec()).unwrap());
    cp.metadata.namespace = Some("team".into());
    cp.metadata.uid = Some("uid-1".into());
    let d = control_plane::desired::desired_state(&cp, &Default::default()).unwrap();
    assert_eq!(desired_hash(&d.deployment), "b46c1c70a3bf49ee");
    assert_eq!(desired_hash(&d.service), "8160242f7949de94");
    assert_eq!(desired_hash(&d.service_account.unwrap()), "9f6f9362f651fbe2");
    assert_eq!(desired_hash(&d.ingress.unwrap()), "8312464ce4c63bac");
    assert_eq!(desired_hash(&d.workspace_rbac), "ff22b5dd2e9790d4");
    assert!(d.pod_disruption_budget.is_none() && d.metrics_service.is_none() && d.service_monitor.is_none());
}

#[test]
fn a_provisioners_objects_keep_their_hashes() {
    let mut p = CoderProvisioner::new("p", serde_json::from_value(provisioner_spec()).unwrap());
    p.metadata.namespace = Some("team".into());
    p.metadata.uid = Some("uid-2".into());
    let inputs = provisioner::desired::Inputs {
        control_plane_url: "http://cp.team.svc.cluster.local".into(),
        control_plane_image: Some("img".into()),
        key_checksum: "abc".into(),
        replicas: None,
    };
    let d = provisioner::desired::desired_state(&p, &inputs).unwrap();
    assert_eq!(desired_hash(&d.deployment), "2bab866e2ce5c9d7");
    assert_eq!(desired_hash(&d.service_account), "732f58b6454e02e5");
    assert!(d.pod_disruption_budget.is_none());
}

#[test]
fn a_workspace_proxys_objects_keep_their_hashes() {
    let mut w = CoderWorkspaceProxy::new("w", serde_json::from_value(proxy_spec()).unwrap());
    w.metadata.namespace = Some("team".into());
    w.metadata.uid = Some("uid-3".into());
    let url = workspace_proxy::desired::primary_access_url(&w.spec).unwrap();
    let token = workspace_proxy::desired::token_reference("w", &w.spec).unwrap();
    let d = workspace_proxy::desired::desired_state(&w, &url, &token).unwrap();
    assert_eq!(desired_hash(&d.deployment), "313d3f0711c5fc4b");
    assert_eq!(desired_hash(&d.service), "380e396f0c7c6db5");
    assert!(d.service_account.is_none() && d.pod_disruption_budget.is_none());
}
