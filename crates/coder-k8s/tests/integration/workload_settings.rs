//! The Deployment, pod and Service settings the workload kinds share, the control plane's monitoring, and the
//! provisioner's scale subresource and autoscaling from Coder's job queue, on the real kube-apiserver (with
//! kube-controller-manager for the HorizontalPodAutoscaler) and the Coder API test server.

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use coder_k8s_coder_client::types::{ArchiveKind, CreateTemplateVersionRequest};
use coder_k8s_testenv::ControlPlane;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::control_plane::{Harness, harness};
use crate::provisioner::{create_provisioner, ready_control_plane, sample_spec, wait_reason};
use crate::support::wait_for;
use crate::support::{assert_success, install_crds, kubectl};

const CP: &str = "codercontrolplane-sample";

fn pod_spec(deployment: &Deployment) -> &k8s_openapi::api::core::v1::PodSpec {
    deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

async fn deployment(h: &Harness, name: &str) -> Deployment {
    let api = h.api::<Deployment>();
    wait_for(
        || async { api.get_opt(name).await.unwrap().is_some() },
        "the Deployment",
    )
    .await;
    api.get(name).await.unwrap()
}

/// Waits until `check` holds for the Deployment `name`, and returns it.
async fn deployment_where(
    h: &Harness,
    name: &str,
    what: &str,
    check: impl Fn(&Deployment) -> bool,
) -> Deployment {
    let api = h.api::<Deployment>();
    wait_for(
        || async { api.get_opt(name).await.unwrap().as_ref().is_some_and(&check) },
        what,
    )
    .await;
    api.get(name).await.unwrap()
}

async fn merge<K>(api: &Api<K>, name: &str, patch: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

fn service_monitors(h: &Harness) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
        "servicemonitors",
    );
    Api::namespaced_with(h.admin.clone(), &h.ns, &resource)
}

/// The Prometheus Operator's ServiceMonitor CRD, reduced to what the operator writes.
const SERVICE_MONITOR_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"#;

#[tokio::test]
async fn a_control_plane_takes_the_shared_settings_a_budget_and_monitoring() {
    let h = harness("wl-cp").await;
    h.put_secret("coder-db-app", &[("uri", &h.db_url)]).await;
    let mut spec: Value = json!({
        "database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}},
        "deploymentLabels": {"team": "platform"},
        "deploymentAnnotations": {"owner": "platform"},
        "podLabels": {"tier": "coder", "app.kubernetes.io/name": "not-the-selector"},
        "podAnnotations": {"app.kubernetes.io/component": "coderd"},
        "priorityClassName": "system-cluster-critical",
        "imagePullPolicy": "IfNotPresent",
        "strategy": {"type": "Recreate"},
        "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["db.internal"]}],
        "initContainers": [{"name": "wait-for-db", "image": "busybox"}],
        "extraContainers": [{"name": "log-shipper", "image": "busybox"}],
        "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
        "podDisruptionBudget": {"minAvailable": 1},
        "monitoring": {"serviceMonitor": {"enabled": true, "labels": {"release": "prometheus"}, "interval": "15s"}},
    });
    spec["service"] = json!({"port": h.server.url().port().unwrap(), "sessionAffinity": "ClientIP"});
    let object = CoderControlPlane::new(CP, serde_json::from_value(spec).unwrap());
    h.api::<CoderControlPlane>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap();

    let d = deployment(&h, CP).await;
    let labels = d.metadata.labels.clone().unwrap();
    assert_eq!(labels["team"], "platform");
    assert_eq!(d.metadata.annotations.as_ref().unwrap()["owner"], "platform");
    let spec = d.spec.as_ref().unwrap();
    assert_eq!(spec.strategy.as_ref().unwrap().type_.as_deref(), Some("Recreate"));
    let template = spec.template.metadata.as_ref().unwrap();
    let pod_labels = template.labels.as_ref().unwrap();
    assert_eq!(pod_labels["tier"], "coder");
    assert_eq!(
        pod_labels["app.kubernetes.io/name"], "coder-control-plane",
        "the selector label is kept"
    );
    assert_eq!(
        template.annotations.as_ref().unwrap()["app.kubernetes.io/component"],
        "coderd"
    );
    let pod = pod_spec(&d);
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );
    assert_eq!(pod.host_aliases.as_ref().unwrap()[0].ip, "10.1.2.3");
    assert_eq!(pod.init_containers.as_ref().unwrap()[0].name, "wait-for-db");
    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["coder", "log-shipper"]);
    let coder = &pod.containers[0];
    assert_eq!(coder.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert!(coder.lifecycle.as_ref().unwrap().pre_stop.is_some());
    let env: Vec<(&str, &str)> = coder
        .env
        .as_ref()
        .unwrap()
        .iter()
        .filter_map(|e| Some((e.name.as_str(), e.value.as_deref()?)))
        .collect();
    assert!(env.contains(&("CODER_PROMETHEUS_ENABLE", "true")), "{env:?}");
    assert!(
        env.contains(&("CODER_PROMETHEUS_ADDRESS", "0.0.0.0:2112")),
        "{env:?}"
    );
    let ports: Vec<(&str, i32)> = coder
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| (p.name.as_deref().unwrap_or_default(), p.container_port))
        .collect();
    assert!(ports.contains(&("prometheus-http", 2112)), "{ports:?}");

    let service = h.api::<Service>().get(CP).await.unwrap();
    let service_spec = service.spec.unwrap();
    assert_eq!(service_spec.session_affinity.as_deref(), Some("ClientIP"));
    assert!(
        !service_spec.ports.unwrap().iter().any(|p| p.port == 2112),
        "the metrics port stays off the main Service"
    );
    let metrics = h.api::<Service>();
    wait_for(
        || async {
            metrics
                .get_opt("codercontrolplane-sample-metrics")
                .await
                .unwrap()
                .is_some()
        },
        "the metrics Service",
    )
    .await;
    let metrics_service = metrics.get("codercontrolplane-sample-metrics").await.unwrap();
    let metrics_spec = metrics_service.spec.unwrap();
    assert_eq!(metrics_spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(metrics_spec.ports.unwrap()[0].port, 2112);
    let budgets = h.api::<PodDisruptionBudget>();
    wait_for(
        || async { budgets.get_opt(CP).await.unwrap().is_some() },
        "the PodDisruptionBudget",
    )
    .await;
    let budget = budgets.get(CP).await.unwrap().spec.unwrap();
    assert_eq!(
        budget.min_available,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    assert_eq!(
        budget.selector.unwrap().match_labels.unwrap()["app.kubernetes.io/instance"],
        CP
    );

    // Without the Prometheus Operator's CRDs the control plane works on: its operator access becomes ready.
    h.deployment_ready(CP).await;
    h.wait_operator_access(CP, true).await;
    let monitors = service_monitors(&h);
    assert!(
        monitors.list(&Default::default()).await.is_err(),
        "the ServiceMonitor API is not installed yet"
    );

    // Installed later: the next pass of the control plane finds the API and writes the ServiceMonitor.
    let out = kubectl(
        h.cp,
        &["apply", "--server-side", "-f", "-"],
        Some(SERVICE_MONITOR_CRD),
    );
    assert_success(&out, "install the ServiceMonitor CRD");
    let out = kubectl(
        h.cp,
        &[
            "wait",
            "--for=condition=Established",
            "crd/servicemonitors.monitoring.coreos.com",
            "--timeout=60s",
        ],
        None,
    );
    assert_success(&out, "wait for the ServiceMonitor CRD");
    let cps = h.api::<CoderControlPlane>();
    merge(&cps, CP, json!({"metadata": {"annotations": {"touched": "1"}}})).await;
    wait_for(
        || async {
            monitors
                .get_opt("codercontrolplane-sample-metrics")
                .await
                .is_ok_and(|m| m.is_some())
        },
        "the ServiceMonitor",
    )
    .await;
    let monitor = monitors.get("codercontrolplane-sample-metrics").await.unwrap();
    assert_eq!(monitor.metadata.labels.as_ref().unwrap()["release"], "prometheus");
    assert_eq!(monitor.data["spec"]["endpoints"][0]["port"], "prometheus-http");
    assert_eq!(monitor.data["spec"]["endpoints"][0]["interval"], "15s");
    assert_eq!(
        monitor.data["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"],
        "metrics"
    );

    // Turning the settings off removes what they made.
    merge(
        &cps,
        CP,
        json!({"spec": {"monitoring": null, "podDisruptionBudget": null}}),
    )
    .await;
    // Up to 150 s: under load the removal can wait for the control plane's 2-minute ServiceMonitor retry.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(150);
    loop {
        let service = metrics.get_opt("codercontrolplane-sample-metrics").await.unwrap();
        let budget = budgets.get_opt(CP).await.unwrap();
        let monitor = monitors
            .get_opt("codercontrolplane-sample-metrics")
            .await
            .unwrap();
        if service.is_none() && budget.is_none() && monitor.is_none() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still there: metrics Service {}, budget {}, ServiceMonitor {}",
            service.is_some(),
            budget.is_some(),
            monitor.is_some()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let d = deployment_where(&h, CP, "the metrics port to go", |d| {
        !pod_spec(d).containers[0]
            .ports
            .as_ref()
            .is_some_and(|ports| ports.iter().any(|p| p.container_port == 2112))
    })
    .await;
    assert!(
        !pod_spec(&d).containers[0]
            .env
            .as_ref()
            .unwrap()
            .iter()
            .any(|e| e.name.starts_with("CODER_PROMETHEUS")),
        "the Prometheus variables went with the port"
    );
}

#[tokio::test]
async fn admission_refuses_a_sidecar_named_like_the_operators_container_and_a_double_budget() {
    let h = harness("wl-admit").await;
    let try_create = |kind: &'static str, spec: Value| {
        let cp = h.cp;
        let ns = h.ns.clone();
        async move {
            let manifest = json!({"apiVersion": "coder.com/v1alpha1", "kind": kind,
                "metadata": {"name": "x", "namespace": ns}, "spec": spec});
            kubectl(cp, &["create", "-f", "-"], Some(&manifest.to_string()))
        }
    };
    let sidecar = |name: &str| json!([{"name": name, "image": "busybox"}]);
    let cases = [
        (
            "CoderControlPlane",
            json!({"extraContainers": sidecar("coder")}),
            "coder",
        ),
        (
            "CoderControlPlane",
            json!({"initContainers": sidecar("coder")}),
            "coder",
        ),
        (
            "CoderProvisioner",
            json!({"controlPlaneRef": {"name": CP}, "extraContainers": sidecar("provisioner")}),
            "provisioner",
        ),
        (
            "CoderWorkspaceProxy",
            json!({"primaryAccessURL": "https://coder.example.com", "extraContainers": sidecar("workspace-proxy")}),
            "workspace-proxy",
        ),
    ];
    for (kind, spec, container) in cases {
        let out = try_create(kind, spec).await;
        assert!(
            !out.status.success(),
            "{kind} with a container {container} was accepted"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("must not name a container {container}")),
            "{kind}: {stderr}"
        );
    }
    let out = try_create(
        "CoderControlPlane",
        json!({"podDisruptionBudget": {"minAvailable": 1, "maxUnavailable": 1}}),
    )
    .await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("at most one of minAvailable and maxUnavailable"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A sidecar of another name is accepted.
    let out = try_create(
        "CoderControlPlane",
        json!({"extraContainers": sidecar("shipper")}),
    )
    .await;
    assert_success(&out, "a control plane with a sidecar");
}

#[tokio::test]
async fn a_provisioner_takes_pod_settings_and_every_secret_it_hands_on_must_consent() {
    let h = harness("wl-prov").await;
    ready_control_plane(&h).await;
    h.put_secret("cloud", &[("token", "s3cret")]).await;
    h.put_secret("corp-ca", &[("ca.crt", "-----BEGIN CERTIFICATE-----")])
        .await;
    let mut spec = sample_spec();
    spec["serviceAccount"] =
        json!({"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/builds"}});
    spec["nodeSelector"] = json!({"pool": "builds"});
    spec["tolerations"] = json!([{"key": "builds", "operator": "Exists"}]);
    spec["securityContext"] = json!({"runAsNonRoot": true});
    spec["certs"] = json!({"secrets": [{"name": "corp-ca", "key": "ca.crt"}]});
    spec["volumes"] = json!([{"name": "cloud", "secret": {"secretName": "cloud"}}]);
    spec["volumeMounts"] = json!([{"name": "cloud", "mountPath": "/var/run/cloud"}]);
    spec["podDisruptionBudget"] = json!({});
    create_provisioner(&h, "p", spec).await;
    // The Secret volume is handed to the daemons' pods, so it must be a credential Secret for the control plane.
    wait_reason(&h, "p", "CredentialsReady", "CredentialSecretNotMarked").await;
    assert!(
        h.api::<Deployment>()
            .get_opt("provisioner-p")
            .await
            .unwrap()
            .is_none()
    );
    let origin = format!(
        "http://{CP}.{}.svc.cluster.local:{}",
        h.ns,
        h.server.url().port().unwrap()
    );
    let mark = json!({"metadata": {"labels": {"coder.com/credential": "true"},
        "annotations": {"coder.com/credential-destinations": origin}}});
    merge(&h.api::<k8s_openapi::api::core::v1::Secret>(), "cloud", mark).await;
    wait_reason(&h, "p", "CredentialsReady", "CredentialsVerified").await;

    let d = deployment(&h, "provisioner-p").await;
    let pod = pod_spec(&d);
    assert_eq!(pod.node_selector.as_ref().unwrap()["pool"], "builds");
    assert_eq!(
        pod.tolerations.as_ref().unwrap()[0].key.as_deref(),
        Some("builds")
    );
    let volumes: Vec<&str> = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(volumes, ["ca-cert-corp-ca", "cloud"]);
    let container = &pod.containers[0];
    assert_eq!(
        container.security_context.as_ref().unwrap().run_as_non_root,
        Some(true)
    );
    let mounts: Vec<&str> = container
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert_eq!(mounts, ["/etc/ssl/certs/corp-ca.crt", "/var/run/cloud"]);
    let sa = h.api::<ServiceAccount>().get("p-provisioner").await.unwrap();
    assert_eq!(
        sa.metadata.annotations.unwrap()["eks.amazonaws.com/role-arn"],
        "arn:aws:iam::1:role/builds"
    );
    let budgets = h.api::<PodDisruptionBudget>();
    wait_for(
        || async { budgets.get_opt("provisioner-p").await.unwrap().is_some() },
        "the budget",
    )
    .await;

    // A sidecar that takes an unmarked Secret is refused too, and the Deployment stays as it was.
    h.put_secret("other", &[("v", "x")]).await;
    let sidecar = json!({"spec": {"extraContainers": [{"name": "uploader", "image": "busybox",
        "envFrom": [{"secretRef": {"name": "other"}}]}]}});
    merge(&h.api::<CoderProvisioner>(), "p", sidecar).await;
    wait_reason(&h, "p", "CredentialsReady", "CredentialSecretNotMarked").await;
    let unchanged = h.api::<Deployment>().get("provisioner-p").await.unwrap();
    assert_eq!(pod_spec(&unchanged).containers.len(), 1);
}

#[tokio::test]
async fn a_workspace_proxy_gets_its_own_service_account_and_service_settings() {
    let h = harness("wl-proxy").await;
    h.put_secret("proxy-token", &[("token", "t0ken")]).await;
    let origin = "https://coder.example.com";
    let mark = json!({"metadata": {"labels": {"coder.com/credential": "true"},
        "annotations": {"coder.com/credential-destinations": origin}}});
    merge(
        &h.api::<k8s_openapi::api::core::v1::Secret>(),
        "proxy-token",
        mark,
    )
    .await;
    let spec = json!({
        "primaryAccessURL": origin,
        "proxySessionTokenSecretRef": {"name": "proxy-token"},
        "serviceAccount": {"annotations": {"iam.gke.io/gcp-service-account": "proxy@p.iam.gserviceaccount.com"}},
        "resources": {"requests": {"cpu": "250m"}},
        "service": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "loadBalancerClass": "example.com/lb",
            "nodePort": 31080, "extraPorts": [{"name": "metrics", "port": 2112, "targetPort": 2112}]},
    });
    let proxy = CoderWorkspaceProxy::new("edge", serde_json::from_value(spec).unwrap());
    h.api::<CoderWorkspaceProxy>()
        .create(&PostParams::default(), &proxy)
        .await
        .unwrap();
    let d = deployment(&h, "wsproxy-edge").await;
    let pod = pod_spec(&d);
    assert_eq!(pod.service_account_name.as_deref(), Some("wsproxy-edge"));
    assert!(pod.containers[0].resources.as_ref().unwrap().requests.is_some());
    let sa = h.api::<ServiceAccount>().get("wsproxy-edge").await.unwrap();
    assert_eq!(
        sa.metadata.annotations.unwrap()["iam.gke.io/gcp-service-account"],
        "proxy@p.iam.gserviceaccount.com"
    );
    let service = h
        .api::<Service>()
        .get("wsproxy-edge")
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(service.external_traffic_policy.as_deref(), Some("Local"));
    assert_eq!(service.load_balancer_class.as_deref(), Some("example.com/lb"));
    let ports: Vec<(String, Option<i32>)> = service
        .ports
        .unwrap()
        .into_iter()
        .map(|p| (p.name.unwrap_or_default(), p.node_port.filter(|_| p.port == 80)))
        .collect();
    assert_eq!(ports[0], ("http".to_owned(), Some(31080)));
    assert_eq!(ports[1].0, "metrics");
}

/// A template version tagged `queue=<queue>`: its import job waits for a daemon with that tag.
async fn queue_job(h: &Harness, token: &str, queue: &str) {
    let client = h.coder(token);
    let organization = client.default_organization().await.unwrap().name;
    let tar = coder_k8s_testenv::one_file_tar("main.tf", b"terraform {}\n");
    let file = client
        .upload_file(ArchiveKind::Tar, bytes::Bytes::from(tar))
        .await
        .unwrap();
    let mut request = CreateTemplateVersionRequest::terraform(file.id);
    request.tags = [("queue".to_owned(), queue.to_owned())].into();
    client
        .create_template_version(&organization, &request)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_scale_subresource_and_autoscaling_from_the_job_queue() {
    let h = harness("wl-scale").await;
    let token = ready_control_plane(&h).await;
    h.server.hold_jobs_tagged("queue", "builds");
    let mut spec = sample_spec();
    spec["tags"] = json!({"queue": "builds"});
    create_provisioner(&h, "p", spec).await;
    h.deployment_ready("provisioner-p").await;
    wait_reason(&h, "p", "DeploymentReady", "MinimumReplicasReady").await;
    let provisioners = h.api::<CoderProvisioner>();
    wait_for(
        || async {
            let status = provisioners.get("p").await.unwrap().status.unwrap_or_default();
            status.replicas == Some(1)
                && status
                    .selector
                    .as_deref()
                    .is_some_and(|s| s.contains("app.kubernetes.io/instance=p"))
        },
        "status.replicas and status.selector",
    )
    .await;
    // Without spec.autoscaling nothing reads the queue.
    assert!(
        !h.server
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/provisionerjobs")),
        "the queue was read for a provisioner that does not autoscale"
    );

    // `kubectl scale` goes through the scale subresource to spec.replicas, and on to the Deployment.
    let out = kubectl(
        h.cp,
        &["scale", "-n", &h.ns, "coderprovisioner/p", "--replicas=2"],
        None,
    );
    assert_success(&out, "kubectl scale");
    assert_eq!(provisioners.get("p").await.unwrap().spec.replicas, Some(2));
    deployment_where(&h, "provisioner-p", "two replicas", |d| {
        d.spec.as_ref().unwrap().replicas == Some(2)
    })
    .await;

    // Autoscaling: three queued jobs the daemons can take, one they cannot.
    for queue in ["builds", "builds", "builds", "other"] {
        queue_job(&h, &token, queue).await;
    }
    let autoscaling =
        json!({"spec": {"autoscaling": {"minReplicas": 1, "maxReplicas": 5, "scaleDownDelay": "2s"}}});
    merge(&provisioners, "p", autoscaling).await;
    deployment_where(&h, "provisioner-p", "three daemons for three jobs", |d| {
        d.spec.as_ref().unwrap().replicas == Some(3)
    })
    .await;
    let status = provisioners.get("p").await.unwrap().status.unwrap();
    let jobs = status.jobs.unwrap();
    assert_eq!(
        (jobs.pending, jobs.running),
        (3, 0),
        "only the jobs tagged queue=builds count"
    );
    assert_eq!(status.replicas, Some(3));
    assert_eq!(h.metrics.provisioner_jobs(&h.ns, "p"), (3, 0));
    assert_eq!(
        provisioners.get("p").await.unwrap().spec.replicas,
        Some(2),
        "the operator does not write the spec"
    );

    // The jobs run and end; once the queue has wanted fewer daemons for the delay, one is left.
    h.server.release_held_jobs();
    deployment_where(&h, "provisioner-p", "back to minReplicas", |d| {
        d.spec.as_ref().unwrap().replicas == Some(1)
    })
    .await;
    let jobs = provisioners.get("p").await.unwrap().status.unwrap().jobs.unwrap();
    assert_eq!((jobs.pending, jobs.running), (0, 0));
}

/// A control plane with kube-controller-manager (its HorizontalPodAutoscaler controller) and the CRDs.
async fn control_plane_with_controller_manager() -> &'static ControlPlane {
    static CP_WITH_KCM: OnceCell<ControlPlane> = OnceCell::const_new();
    CP_WITH_KCM
        .get_or_init(|| async {
            let cp = ControlPlane::builder()
                .controller_manager(true)
                .start()
                .await
                .expect("start a control plane with kube-controller-manager");
            install_crds(&cp);
            cp
        })
        .await
}

#[tokio::test]
async fn a_horizontal_pod_autoscaler_scales_a_provisioner_through_the_scale_subresource() {
    let cp = control_plane_with_controller_manager().await;
    let h = crate::control_plane::harness_on(cp, "wl-hpa").await;
    ready_control_plane(&h).await;
    create_provisioner(&h, "p", sample_spec()).await;
    deployment(&h, "provisioner-p").await;
    let hpa = json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "p", "namespace": h.ns},
        "spec": {"scaleTargetRef": {"apiVersion": "coder.com/v1alpha1", "kind": "CoderProvisioner", "name": "p"},
            "minReplicas": 3, "maxReplicas": 4,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]},
    });
    let out = kubectl(h.cp, &["apply", "-f", "-"], Some(&hpa.to_string()));
    assert_success(&out, "create the HorizontalPodAutoscaler");
    // With no metrics it still keeps the target at minReplicas, through the scale subresource.
    let provisioners = h.api::<CoderProvisioner>();
    wait_for(
        || async { provisioners.get("p").await.unwrap().spec.replicas == Some(3) },
        "the HorizontalPodAutoscaler to set three replicas",
    )
    .await;
    deployment_where(&h, "provisioner-p", "three daemons", |d| {
        d.spec.as_ref().unwrap().replicas == Some(3)
    })
    .await;
}
