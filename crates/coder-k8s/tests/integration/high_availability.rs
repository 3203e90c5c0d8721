//! The all-mode install walked on a control plane with kwok nodes: `dist/install-all.yaml` applied as
//! docs/install.md says, its pods stood in for by coder-k8s processes running as the bundle's ServiceAccount, and a
//! TCP forwarder standing in for the Service (it sends new connections to the replicas whose `/readyz` answers 200,
//! as endpoints do). Then a rollout: a new replica starts, the old ones get SIGTERM one after the other, and
//! aggregated requests through kube-apiserver keep answering all the while. And failover in controller mode: a
//! leader killed during a round of creates, or while Coder's answer to a key create is on its way, loses no key and
//! leaves none behind.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coder_k8s_testenv::ControlPlane;
use tokio::sync::OnceCell;

use coder_k8s_api::provisioner::CoderProvisioner;

use crate::control_plane::{Harness, harness};
use crate::lifecycle::{json_of, walk};
use crate::provisioner::{create_provisioner, ready_control_plane, sample_spec};
use crate::support::wait_for;
use crate::support::{Process, assert_success, kubectl, kwok_control_plane, stdout};

/// A replica: the process and the ports of its aggregated API and health servers.
struct Replica {
    name: String,
    process: Process,
    api_port: u16,
    health_port: u16,
}

fn start_replica(kubeconfig: &std::path::Path, name: &str) -> Replica {
    let [api_port, health_port] = coder_k8s_testenv::free_ports::<2>().unwrap();
    let log = std::fs::File::create(
        std::env::temp_dir().join(format!("coder-k8s-ha-{}-{name}.log", std::process::id())),
    )
    .unwrap();
    let process = Process(
        std::process::Command::new(env!("CARGO_BIN_EXE_coder-k8s"))
            .args(["--app=all", "--shutdown-delay=2s"])
            .arg(format!("--apiserver-bind-address=127.0.0.1:{api_port}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{health_port}"))
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAMESPACE", "coder-system")
            .env("POD_NAME", name)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    Replica {
        name: name.to_owned(),
        process,
        api_port,
        health_port,
    }
}

/// The Service stand-in: new connections go to a ready replica (round robin), open ones stay where they are.
#[derive(Clone, Default)]
struct Forwarder {
    /// (health port, API port) of the replicas.
    replicas: Arc<Mutex<Vec<(u16, u16)>>>,
    ready: Arc<Mutex<Vec<u16>>>,
    next: Arc<AtomicUsize>,
}

impl Forwarder {
    fn add(&self, replica: &Replica) {
        self.replicas
            .lock()
            .unwrap()
            .push((replica.health_port, replica.api_port));
    }

    /// Listens on a free port; returns it. Readiness is polled every 100 ms.
    async fn start(&self) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let probe = self.clone();
        tokio::spawn(async move {
            loop {
                let replicas = probe.replicas.lock().unwrap().clone();
                let mut ready = Vec::new();
                for (health, api) in replicas {
                    if matches!(crate::cli::http_get(health, "/readyz").await, Some((200, _))) {
                        ready.push(api);
                    }
                }
                *probe.ready.lock().unwrap() = ready;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let forward = self.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = {
                    let ready = forward.ready.lock().unwrap();
                    (!ready.is_empty())
                        .then(|| ready[forward.next.fetch_add(1, Ordering::Relaxed) % ready.len()])
                };
                let Some(target) = target else { continue };
                tokio::spawn(async move {
                    let address = SocketAddr::from(([127, 0, 0, 1], target));
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(address).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        port
    }
}

async fn control_plane_with_two_nodes() -> &'static ControlPlane {
    static CP: OnceCell<ControlPlane> = OnceCell::const_new();
    kwok_control_plane(&CP, &["node-a", "node-b"]).await
}

fn lease_holder(cp: &ControlPlane) -> String {
    let out = kubectl(
        cp,
        &[
            "-n",
            "coder-system",
            "get",
            "lease",
            coder_k8s::leader::LEASE_NAME,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
        None,
    );
    stdout(&out).trim().to_owned()
}

async fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < limit, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_mode_install_walks_and_keeps_the_aggregated_api_answering_through_a_rollout() {
    let cp = control_plane_with_two_nodes().await;
    let install = tokio::task::spawn_blocking(move || walk(cp, "docs/install.md", "install-all"));

    // The pods are kwok's; their stand-ins run as the bundle's ServiceAccount once it exists.
    wait_until("the ServiceAccount", Duration::from_secs(60), || {
        kubectl(
            cp,
            &["-n", "coder-system", "get", "serviceaccount", "coder-k8s"],
            None,
        )
        .status
        .success()
    })
    .await;
    let token = kubectl(
        cp,
        &[
            "-n",
            "coder-system",
            "create",
            "token",
            "coder-k8s",
            "--duration=2h",
        ],
        None,
    );
    assert_success(&token, "a ServiceAccount token");
    let kubeconfig = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        kubeconfig.path(),
        coder_k8s_testenv::kubeconfig::render(cp.server_url(), cp.ca_pem(), stdout(&token).trim()),
    )
    .unwrap();
    let forwarder = Forwarder::default();
    let port = forwarder.start().await;
    let mut replicas = vec![start_replica(kubeconfig.path(), "replica-a")];
    forwarder.add(&replicas[0]);
    wait_until("replica-a to lead", Duration::from_secs(60), || {
        lease_holder(cp) == "replica-a"
    })
    .await;
    replicas.push(start_replica(kubeconfig.path(), "replica-b"));
    forwarder.add(&replicas[1]);

    // kube-apiserver reaches the Service's stand-in: an ExternalName to this machine, on the forwarder's port.
    wait_until("the APIService", Duration::from_secs(60), || {
        kubectl(cp, &["get", "apiservice", "v1alpha1.aggregation.coder.com"], None)
            .status
            .success()
    })
    .await;
    let service = r#"{"spec":{"type":"ExternalName","externalName":"localhost","clusterIP":null,"clusterIPs":null,"selector":null,"ipFamilies":null,"ipFamilyPolicy":null,"internalTrafficPolicy":null}}"#;
    let out = kubectl(
        cp,
        &[
            "-n",
            "coder-system",
            "patch",
            "service",
            "coder-k8s-apiserver",
            "--type=merge",
            "-p",
            service,
        ],
        None,
    );
    assert_success(&out, "point the Service at this machine");
    let out = kubectl(
        cp,
        &[
            "patch",
            "apiservice",
            "v1alpha1.aggregation.coder.com",
            "--type=merge",
            "-p",
            &format!(r#"{{"spec":{{"service":{{"port":{port}}}}}}}"#),
        ],
        None,
    );
    assert_success(&out, "the forwarder's port");

    let out = install.await.unwrap();
    assert_success(&out, "the install-all walkthrough");
    crate::lifecycle::assert_example_output("docs/install.md", "install-all", &out);
    let out = walk(cp, "docs/install.md", "install-check");
    assert_success(&out, "the install-check walkthrough");
    let printed = stdout(&out);
    assert!(printed.contains("replica-a"), "the Lease holder: {printed}");
    for resource in [
        "coderworkspaces",
        "codertemplates",
        "codertemplateversions",
        "coderorganizations",
        "codergroups",
        "coderusers",
    ] {
        assert!(printed.contains(resource), "{resource} is served: {printed}");
    }
    let pods = json_of(
        &kubectl(
            cp,
            &[
                "-n",
                "coder-system",
                "get",
                "pods",
                "-l",
                "app=coder-k8s",
                "-o",
                "json",
            ],
            None,
        ),
        "pods",
    );
    let mut nodes: Vec<&str> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pod| pod["spec"]["nodeName"].as_str().unwrap_or_default())
        .collect();
    nodes.sort_unstable();
    assert_eq!(nodes, ["node-a", "node-b"], "two pods, spread over the nodes");

    // Aggregated requests through kube-apiserver, every 100 ms, while the replicas roll.
    let client = cp.client().unwrap();
    let (failures, answered) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicUsize::new(0)));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let requests = {
        let (failures, answered, stop) = (failures.clone(), answered.clone(), stop.clone());
        tokio::spawn(async move {
            let request =
                http::Request::get("/apis/aggregation.coder.com/v1alpha1/namespaces/default/coderworkspaces")
                    .body(Vec::new())
                    .unwrap();
            while !stop.load(Ordering::Relaxed) {
                match client.request_text(request.clone()).await {
                    Ok(_) => answered.fetch_add(1, Ordering::Relaxed),
                    Err(error) => {
                        failures.lock().unwrap().push(error.to_string());
                        0
                    }
                };
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let new = start_replica(kubeconfig.path(), "replica-c");
    forwarder.add(&new);
    wait_until("replica-c ready", Duration::from_secs(60), || {
        forwarder.ready.lock().unwrap().contains(&new.api_port)
    })
    .await;
    replicas.push(new);
    // The old replicas go one after the other, the leader first, as a rollout with maxUnavailable 0 does.
    for old in replicas.drain(..2) {
        let stopping = Instant::now();
        let status = tokio::task::spawn_blocking(move || old.process.stop())
            .await
            .unwrap();
        assert!(
            status.success(),
            "{} exits cleanly on SIGTERM: {status}",
            old.name
        );
        assert!(
            stopping.elapsed() < Duration::from_secs(15),
            "{} took {:?}",
            old.name,
            stopping.elapsed()
        );
    }
    let takeover = wait_until("replica-c to lead", Duration::from_secs(20), || {
        lease_holder(cp) == "replica-c"
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    requests.await.unwrap();
    let failures = failures.lock().unwrap().clone();
    assert_eq!(
        failures,
        Vec::<String>::new(),
        "every aggregated request answered through the rollout"
    );
    assert!(answered.load(Ordering::Relaxed) >= 20, "requests were made");
    eprintln!(
        "replica-c took the Lease {takeover:?} after replica-b stopped; {} requests answered",
        answered.load(Ordering::Relaxed)
    );
    let available = kubectl(
        cp,
        &[
            "get",
            "apiservice",
            "v1alpha1.aggregation.coder.com",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Available")].status}"#,
        ],
        None,
    );
    assert_eq!(
        stdout(&available).trim(),
        "True",
        "the APIService stays Available"
    );
}

/// `coder-k8s --app=controller` with leader election on the Lease in the harness's namespace, as replica `name`.
pub(crate) fn replica(h: &Harness, name: &str) -> Process {
    let log = std::fs::File::create(
        std::env::temp_dir().join(format!("coder-k8s-ha-{}-{name}.log", std::process::id())),
    )
    .unwrap();
    let mut command = crate::support::operator_command(h.cp, &h.ns);
    command
        .arg("--leader-elect=true")
        .env("POD_NAME", name)
        // The reconciles too, for a failure's post-mortem (the path is in the file name above).
        .env("RUST_LOG", "info,coder_k8s_controllers=debug")
        .stderr(log);
    Process(command.spawn().unwrap())
}

async fn lease_holder_of(h: &Harness) -> Option<String> {
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> = h.api();
    leases
        .get_opt(coder_k8s::leader::LEASE_NAME)
        .await
        .ok()
        .flatten()
        .and_then(|lease| lease.spec?.holder_identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_a_killed_leader_within_the_lease_time_with_no_lost_or_duplicated_key() {
    let h = harness("ha").await;
    ready_control_plane(&h).await;
    // From here only the two replicas reconcile.
    h.stop.send(true).unwrap();
    let mut leader = Some(replica(&h, "replica-a"));
    wait_for(
        || async { lease_holder_of(&h).await.as_deref() == Some("replica-a") },
        "replica-a to lead",
    )
    .await;
    let _standby = replica(&h, "replica-b");

    // A round of creates; the leader dies (SIGKILL: no Lease release) once it has made some of their keys.
    // Half the objects come before the kill, half while no replica leads.
    let names: Vec<String> = (0..8).map(|i| format!("builds-{i}")).collect();
    for name in &names[..4] {
        create_provisioner(&h, name, sample_spec()).await;
    }
    wait_for(
        || async { !h.server.provisioner_keys().is_empty() },
        "the leader's first keys",
    )
    .await;
    let killed_at = std::time::Instant::now();
    // Dropping the process kills it with SIGKILL and reaps it.
    drop(leader.take().expect("the leader"));
    for name in &names[4..] {
        create_provisioner(&h, name, sample_spec()).await;
    }
    wait_for(
        || async { lease_holder_of(&h).await.as_deref() == Some("replica-b") },
        "replica-b to take the Lease",
    )
    .await;
    let takeover = killed_at.elapsed();
    // The Lease is valid 15 s after the last renewal; the standby checks when it runs out.
    assert!(
        takeover <= std::time::Duration::from_secs(17),
        "the standby took {takeover:?}"
    );

    let provisioners = h.api::<CoderProvisioner>();
    // Up to 90 s (the test shares two cores with others); on a timeout the conditions say where each object stands.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let mut waiting = Vec::new();
        for name in &names {
            let status = provisioners.get(name).await.unwrap().status.unwrap_or_default();
            if status.provisioner_key_id.is_none_or(|id| id.is_empty()) {
                let conditions: Vec<String> = status
                    .conditions
                    .iter()
                    .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
                    .collect();
                waiting.push(format!("{name}: {conditions:?}"));
            }
        }
        if waiting.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "provisioners without their key:\n{}",
            waiting.join("\n")
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let mut key_names: Vec<String> = h
        .server
        .provisioner_keys()
        .iter()
        .filter_map(|key| key["name"].as_str().map(str::to_owned))
        .collect();
    key_names.sort();
    assert_eq!(
        key_names, names,
        "one key per provisioner in Coder: none lost, none twice"
    );
    for name in &names {
        let object = provisioners.get(name).await.unwrap();
        let id = object.status.and_then(|s| s.provisioner_key_id).unwrap();
        let key = h
            .server
            .provisioner_keys()
            .into_iter()
            .find(|key| key["name"] == name.as_str())
            .unwrap();
        assert_eq!(key["id"], id.as_str(), "{name}: its status names its key");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_killed_while_coder_creates_a_key_leaves_no_key_behind() {
    use coder_k8s_coder_testserver::{Fault, FaultRule};
    let h = harness("killed-create").await;
    ready_control_plane(&h).await;
    h.stop.send(true).unwrap();
    // Coder creates the key, and its answer never reaches the operator that asked.
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: "/api/v2/organizations/".to_owned(),
        fault: Fault::HandleThenHold(std::time::Duration::from_secs(120)),
        times: Some(1),
    });
    let first = replica(&h, "first");
    create_provisioner(&h, "builds", sample_spec()).await;
    wait_for(
        || async { h.server.provisioner_keys().len() == 1 },
        "the key created in Coder, its answer held",
    )
    .await;
    let orphan = h.server.provisioner_keys()[0]["id"].as_str().unwrap().to_owned();
    drop(first); // SIGKILL: the key's value is lost with the process
    let _second = replica(&h, "second");

    let provisioners = h.api::<CoderProvisioner>();
    wait_for(
        || async {
            let status = provisioners
                .get("builds")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            status.provisioner_key_id.is_some_and(|id| id != orphan)
        },
        "the next leader to replace the key whose value was lost",
    )
    .await;
    let id = provisioners
        .get("builds")
        .await
        .unwrap()
        .status
        .unwrap()
        .provisioner_key_id
        .unwrap();
    let keys = h.server.provisioner_keys();
    assert_eq!(keys.len(), 1, "the orphan was deleted, one key is left: {keys:?}");
    assert_eq!(keys[0]["id"], id.as_str());
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = h.api();
    let secret = secrets.get("builds-provisioner-key").await.unwrap();
    let annotations = secret.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("coder.com/provisioner-key-id"), Some(&id));
    assert!(
        annotations
            .get("coder.com/provisioner-key-create-started-at")
            .is_none_or(String::is_empty),
        "the create marker is spent once the ID is recorded: {annotations:?}"
    );
    assert!(
        secret.data.unwrap_or_default()["key"].0.len() > 10,
        "the Secret holds the new key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_killed_while_coder_creates_a_proxy_leaves_it_to_the_next_one() {
    use crate::workspace_proxy::{create_proxy, mark, wait_reason};
    use coder_k8s_coder_testserver::{Entitlement, Fault, FaultRule};
    use k8s_openapi::api::core::v1::Secret;
    let h = harness("killed-proxy").await;
    h.stop.send(true).unwrap();
    h.server.set_entitlement("workspace_proxy", Entitlement::Entitled);
    let admin_token = h.server.mint_token("proxy-admin", &["owner"]).await.unwrap();
    let coder_url = h.server.url().as_str().trim_end_matches('/').to_owned();
    h.put_secret("coder-admin", &[("token", &admin_token)]).await;
    mark(&h, "coder-admin", &coder_url).await;
    // Coder creates the proxy, and its answer (the only copy of the token) never reaches the operator that asked.
    h.server.add_fault(FaultRule {
        method: Some("POST".to_owned()),
        path_prefix: "/api/v2/workspaceproxies".to_owned(),
        fault: Fault::HandleThenHold(Duration::from_secs(120)),
        times: Some(1),
    });
    let first = replica(&h, "first");
    let spec = serde_json::json!({"bootstrap": {"coderURL": coder_url, "credentialsSecretRef": {"name": "coder-admin"}}});
    create_proxy(&h, "east", spec).await;
    let coder = h.coder(&admin_token);
    wait_for(
        || async { coder.workspace_proxy("east").await.is_ok() },
        "the proxy created in Coder, its answer held",
    )
    .await;
    let created = coder.workspace_proxy("east").await.unwrap();
    let secrets: kube::Api<Secret> = h.api();
    let marked = secrets.get("east-proxy-token").await.unwrap();
    let marker = marked.metadata.annotations.clone().unwrap_or_default();
    assert!(
        marker
            .get("coder.com/workspace-proxy-create-started-at")
            .is_some_and(|at| !at.is_empty()),
        "the owned token Secret was marked before the create: {marker:?}"
    );
    assert!(
        marked.data.unwrap_or_default()["token"].0.is_empty(),
        "no token before Coder answers"
    );
    drop(first); // SIGKILL: the token is lost with the process
    let _second = replica(&h, "second");

    wait_reason(&h, "east", "ProxyRegistered", "Registered").await;
    let taken_over = coder.workspace_proxy("east").await.unwrap();
    assert_eq!(taken_over.id, created.id, "the same proxy, not a second one");
    let secret = secrets.get("east-proxy-token").await.unwrap();
    let annotations = secret.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get("coder.com/workspace-proxy-id"),
        Some(&created.id.to_string())
    );
    assert!(
        annotations
            .get("coder.com/workspace-proxy-create-started-at")
            .is_none_or(String::is_empty),
        "the create marker is spent once the token is stored: {annotations:?}"
    );
    let token = String::from_utf8(secret.data.unwrap()["token"].0.clone()).unwrap();
    assert!(
        token.starts_with(&format!("{}:", created.id)),
        "the Secret holds a token of that proxy"
    );
    // The whole request log: one create (the lost one), then the token regenerated on that proxy.
    let writes: Vec<(String, String)> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/api/v2/workspaceproxies") && r.method != "GET")
        .map(|r| (r.method, r.path))
        .collect();
    assert_eq!(
        writes,
        vec![
            ("POST".to_owned(), "/api/v2/workspaceproxies".to_owned()),
            (
                "PATCH".to_owned(),
                format!("/api/v2/workspaceproxies/{}", created.id)
            ),
        ],
        "Coder's proxy writes"
    );
}
