//! End-to-end checks of the test control plane against real binaries.

use std::time::{Duration, Instant};

use coder_k8s_testenv::{ControlPlane, kwok, shared};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};

#[tokio::test]
async fn namespace_is_visible_to_real_kubectl() {
    let cp = shared().await.unwrap();
    let ns = cp.namespace("kubectl").await.unwrap();

    let output = cp.kubectl().args(["get", "ns", "-o", "name"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "kubectl get ns failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.lines().any(|l| l == format!("namespace/{ns}")), "{stdout}");

    // The kube client sees the same object.
    let got = Api::<Namespace>::all(cp.client().unwrap())
        .get(&ns)
        .await
        .unwrap();
    assert_eq!(got.name_any(), ns.name());
}

#[tokio::test]
async fn impersonated_user_needs_rbac() {
    let cp = shared().await.unwrap();
    let ns = cp.namespace("rbac").await.unwrap();

    let as_alice: Api<Secret> = Api::namespaced(cp.client_as("alice", &["dev"]).unwrap(), &ns);
    match as_alice.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("expected 403 for alice, got {other:?}"),
    }

    // Granting the group access through a RoleBinding makes the same call succeed.
    let admin = cp.client().unwrap();
    let role = Role {
        metadata: kube::api::ObjectMeta {
            name: Some("secret-reader".into()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".into()]),
            verbs: vec!["list".into()],
            ..Default::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = RoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some("dev-reads-secrets".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "secret-reader".into(),
        },
        subjects: Some(vec![Subject {
            kind: "Group".into(),
            name: "dev".into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin, &ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    // RBAC reads from an informer cache, so the binding can take a moment to apply.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match as_alice.list(&ListParams::default()).await {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("not allowed yet: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("alice still cannot list secrets after the RoleBinding: {e}"),
        }
    }
}

#[tokio::test]
async fn aggregation_settings_are_published() {
    let cp = shared().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), "kube-system");
    let cm = cms.get("extension-apiserver-authentication").await.unwrap();
    let data = cm.data.unwrap_or_default();
    assert_eq!(
        data.get("requestheader-allowed-names").map(String::as_str),
        Some(r#"["front-proxy-client"]"#)
    );
    let front_proxy_ca = std::fs::read_to_string(cp.front_proxy_ca_cert_path()).unwrap();
    assert_eq!(
        data.get("requestheader-client-ca-file").map(|s| s.trim()),
        Some(front_proxy_ca.trim())
    );
    assert_eq!(
        data.get("client-ca-file").map(|s| s.trim()),
        Some(std::fs::read_to_string(cp.ca_cert_path()).unwrap().trim())
    );
}

/// KCM creates the ReplicaSet and Pods, the scheduler binds them to the kwok node, kwok marks them Ready.
#[tokio::test]
async fn deployment_becomes_available_with_kwok() {
    let started = Instant::now();
    let cp = ControlPlane::builder().with_kwok().start().await.unwrap();
    eprintln!(
        "control plane with KCM, scheduler and kwok ready in {:?}",
        started.elapsed()
    );
    let node = cp.create_fake_node(kwok::FAKE_NODE_NAME).await.unwrap();
    assert!(kwok::is_ready(&node));
    // The harness adds no kwok taint (the controller manager may add its own not-ready taints for a moment).
    assert!(
        node.spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .iter()
            .all(|t| !t.key.starts_with("kwok.x-k8s.io"))
    );

    let ns = cp.namespace("kwok").await.unwrap();
    let client = cp.client().unwrap();
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                // kwok never pulls the image, so any name works.
                "spec": { "containers": [{ "name": "web", "image": "example.invalid/web:1" }] }
            }
        }
    }))
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let d = deployments.get("web").await.unwrap();
        let status = d.status.unwrap_or_default();
        let available = status
            .conditions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True");
        if available && status.available_replicas == Some(2) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "deployment not Available after 120 s: {status:?}; logs in {}",
            cp.log_dir().display()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("deployment Available {:?} after start", started.elapsed());
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &ns);
    for pod in pods.list(&ListParams::default()).await.unwrap() {
        let spec = pod.spec.unwrap_or_default();
        assert_eq!(spec.node_name.as_deref(), Some(kwok::FAKE_NODE_NAME));
    }
    assert!(Api::<Node>::all(client).get(kwok::FAKE_NODE_NAME).await.is_ok());

    // Dropping a non-shared control plane stops its processes and removes its directory.
    let dir = cp.dir().to_owned();
    let pids: Vec<u32> = cp.processes().iter().filter_map(|p| p.pid()).collect();
    assert_eq!(pids.len(), 5);
    drop(cp);
    for pid in pids {
        assert!(!coder_k8s_testenv::is_alive(pid), "pid {pid} survived drop");
    }
    assert!(!dir.exists(), "{} survived drop", dir.display());
}

#[tokio::test]
async fn start_failure_reports_the_component_log() {
    let err = ControlPlane::builder()
        .apiserver_arg("--no-such-flag")
        .start()
        .await
        .unwrap_err();
    let message = format!("{err:#}");
    assert!(message.contains("kube-apiserver exited"), "{message}");
    assert!(message.contains("unknown flag: --no-such-flag"), "{message}");
}
