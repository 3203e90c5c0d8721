//! Starting etcd, kube-apiserver and optionally kube-controller-manager, kube-scheduler and kwok.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Client, Config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::binaries::Binaries;
use crate::kubeconfig;
use crate::kwok;
use crate::namespace::{TestNamespace, unique_name};
use crate::pki::Pki;
use crate::process::{ManagedProcess, spawn_reaper};

/// Default time each component gets to become ready; generous because the machines have 2 cores.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Lines of a component's log included in start-up errors.
const LOG_TAIL_LINES: usize = 40;
const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// How long a new RBAC grant may take to reach the authorizer before [`ControlPlane::wait_until_allowed`] gives up.
const RBAC_PROPAGATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Options for [`ControlPlane`]; get one from [`ControlPlane::builder`].
#[derive(Debug, Clone)]
pub struct ControlPlaneBuilder {
    controller_manager: bool,
    scheduler: bool,
    kwok: bool,
    dir: Option<PathBuf>,
    startup_timeout: Duration,
    apiserver_args: Vec<String>,
}

impl Default for ControlPlaneBuilder {
    fn default() -> Self {
        Self {
            controller_manager: false,
            scheduler: false,
            kwok: false,
            dir: None,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            apiserver_args: Vec::new(),
        }
    }
}

impl ControlPlaneBuilder {
    /// Also run kube-controller-manager (Deployments, ReplicaSets, GC, namespace deletion, ServiceAccounts).
    /// Enables the `ServiceAccount` admission plugin, which is disabled without it.
    pub fn controller_manager(mut self, enabled: bool) -> Self {
        self.controller_manager = enabled;
        self
    }

    /// Also run kube-scheduler.
    pub fn scheduler(mut self, enabled: bool) -> Self {
        self.scheduler = enabled;
        self
    }

    /// Also run kwok, which fakes kubelets for nodes made by [`ControlPlane::create_fake_node`].
    pub fn kwok(mut self, enabled: bool) -> Self {
        self.kwok = enabled;
        self
    }

    /// kube-controller-manager + kube-scheduler + kwok: enough for Deployments to become Available.
    pub fn with_kwok(self) -> Self {
        self.controller_manager(true).scheduler(true).kwok(true)
    }

    /// Keep all state (PKI, etcd data, logs, kubeconfig) under `dir` instead of a temp dir, and leave it
    /// there afterwards. The `etcd`, `pki` and `run` subdirectories are wiped at start: every start is a
    /// fresh cluster.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// How long each component may take to become ready (default [`DEFAULT_STARTUP_TIMEOUT`]).
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// An extra kube-apiserver flag, e.g. `--feature-gates=...`; appended after the harness's own flags.
    pub fn apiserver_arg(mut self, arg: impl Into<String>) -> Self {
        self.apiserver_args.push(arg.into());
        self
    }

    /// Locates (building if missing) the binaries and starts the control plane. Returns once
    /// kube-apiserver's `/readyz` is OK and the optional components are healthy.
    pub async fn start(self) -> Result<ControlPlane> {
        let binaries = tokio::task::spawn_blocking(Binaries::locate)
            .await
            .context("binary lookup task failed")??;
        if self.kwok {
            binaries.kwok()?;
        }
        // Free ports are picked by binding port 0 and releasing it, so another process can grab one before
        // etcd or kube-apiserver binds it; retry such a start with new ports.
        const ATTEMPTS: u32 = 3;
        let mut attempt = 1;
        loop {
            match self.start_once(&binaries).await {
                Err(e) if attempt < ATTEMPTS && format!("{e:#}").contains("address already in use") => {
                    tracing::warn!("port conflict while starting the control plane, retrying: {e:#}");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn start_once(&self, binaries: &Binaries) -> Result<ControlPlane> {
        let started = Instant::now();
        let (temp_dir, root) = match &self.dir {
            Some(dir) => (None, prepare_user_dir(dir)?),
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("coder-k8s-testenv-")
                    .tempdir()
                    .context("creating temp dir")?;
                let root = temp.path().to_owned();
                (Some(temp), root)
            }
        };
        for sub in ["logs", "run", "etcd"] {
            fs::create_dir_all(root.join(sub))
                .with_context(|| format!("creating {}/{sub}", root.display()))?;
        }
        let reaper = match &temp_dir {
            Some(_) => Some(spawn_reaper(&root)?),
            None => None,
        };
        let pki = Pki::generate(&root.join("pki"))?;
        let [etcd_client, etcd_peer, apiserver, kcm_port, scheduler_port] = crate::free_ports()?;
        let server_url = format!("https://127.0.0.1:{apiserver}");
        let kubeconfig_path = root.join("kubeconfig");
        fs::write(
            &kubeconfig_path,
            kubeconfig::render(&server_url, &pki.ca_pem, &pki.admin_token),
        )
        .with_context(|| format!("writing {}", kubeconfig_path.display()))?;

        // Built before anything runs, so an early `?` drops it and stops whatever was started.
        let mut cp = ControlPlane {
            processes: Vec::new(),
            pki,
            server_url,
            kubeconfig_path,
            root,
            reaper: Mutex::new(reaper),
            controller_manager: self.controller_manager,
            _temp_dir: temp_dir,
        };

        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        let etcd_args = vec![
            "--name=testenv".to_owned(),
            format!("--data-dir={}", cp.root.join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=testenv={peer_url}"),
            // Test data is disposable; fsync dominates etcd latency on slow disks.
            "--unsafe-no-fsync".to_owned(),
        ];
        let etcd = cp.spawn("etcd", &binaries.etcd, &etcd_args)?;
        let etcd_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, etcd_client));
        cp.wait_until(etcd, "etcd /health", self.startup_timeout, || {
            etcd_healthy(etcd_addr)
        })
        .await?;

        let mut apiserver_args = self.default_apiserver_args(&cp, &etcd_url, apiserver);
        apiserver_args.extend(self.apiserver_args.iter().cloned());
        let apiserver_proc = cp.spawn("kube-apiserver", &binaries.kube_apiserver, &apiserver_args)?;
        let admin = cp.client()?;
        cp.wait_until(
            apiserver_proc,
            "kube-apiserver /readyz",
            self.startup_timeout,
            || readyz(&admin),
        )
        .await?;
        tracing::info!(elapsed = ?started.elapsed(), url = %cp.server_url, "kube-apiserver ready");

        let kubeconfig = cp.kubeconfig_path.display().to_string();
        let mut health_checks = Vec::new();
        if self.controller_manager {
            let pki = &cp.pki;
            let args = vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".to_owned(),
                format!("--secure-port={kcm_port}"),
                format!("--cert-dir={}", cp.root.join("run").display()),
                "--leader-elect=false".to_owned(),
                format!("--root-ca-file={}", pki.ca_cert.display()),
                format!(
                    "--service-account-private-key-file={}",
                    pki.sa_private_key.display()
                ),
                format!("--cluster-signing-cert-file={}", pki.ca_cert.display()),
                format!("--cluster-signing-key-file={}", pki.ca_key.display()),
                "--controllers=*".to_owned(),
                "--use-service-account-credentials=false".to_owned(),
            ];
            let idx = cp.spawn(
                "kube-controller-manager",
                &binaries.kube_controller_manager,
                &args,
            )?;
            health_checks.push((idx, "kube-controller-manager /healthz", kcm_port));
        }
        if self.scheduler {
            let args = vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".to_owned(),
                format!("--secure-port={scheduler_port}"),
                "--leader-elect=false".to_owned(),
            ];
            let idx = cp.spawn("kube-scheduler", &binaries.kube_scheduler, &args)?;
            health_checks.push((idx, "kube-scheduler /healthz", scheduler_port));
        }
        if self.kwok {
            let stages = tokio::task::spawn_blocking(kwok::default_stage_configs)
                .await
                .context("kwok stage lookup task failed")??;
            cp.spawn("kwok", binaries.kwok()?, &kwok::args(&kubeconfig, &stages))?;
        }
        for (idx, what, port) in health_checks {
            let client = insecure_client(port)?;
            cp.wait_until(idx, what, self.startup_timeout, || healthz(&client))
                .await?;
        }
        if self.controller_manager {
            // The ServiceAccount admission plugin rejects pods until KCM has created the `default` SA.
            let sa_api: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
            let kcm = cp.process_index("kube-controller-manager")?;
            cp.wait_until(kcm, "the default ServiceAccount", self.startup_timeout, || {
                exists(&sa_api, "default")
            })
            .await?;
        }
        if let Some((name, status)) = cp.exited() {
            bail!(
                "{name} exited with {status}; last lines of {}:\n{}",
                cp.log_dir().join(format!("{name}.log")).display(),
                cp.process(&name)
                    .map(|p| p.log_tail(LOG_TAIL_LINES))
                    .unwrap_or_default()
            );
        }
        tracing::info!(elapsed = ?started.elapsed(), dir = %cp.root.display(), "control plane ready");
        Ok(cp)
    }

    fn default_apiserver_args(&self, cp: &ControlPlane, etcd_url: &str, port: u16) -> Vec<String> {
        let pki = &cp.pki;
        let mut args = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--cert-dir={}", cp.root.join("run").display()),
            format!("--tls-cert-file={}", pki.apiserver_cert.display()),
            format!("--tls-private-key-file={}", pki.apiserver_key.display()),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".to_owned(),
            // Without it kube-apiserver looks for a default-route interface, which sandboxes may lack.
            "--advertise-address=127.0.0.1".to_owned(),
            "--service-cluster-ip-range=10.0.0.0/16".to_owned(),
            "--allow-privileged=true".to_owned(),
            "--authorization-mode=RBAC".to_owned(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
            format!("--service-account-key-file={}", pki.sa_public_key.display()),
            format!(
                "--service-account-signing-key-file={}",
                pki.sa_private_key.display()
            ),
            format!("--token-auth-file={}", pki.token_file.display()),
            format!("--client-ca-file={}", pki.ca_cert.display()),
            // Saves CPU on small machines; tests do not need fairness between clients.
            "--enable-priority-and-fairness=false".to_owned(),
            // API aggregation: kube-apiserver proxies to extension servers with the front-proxy client cert,
            // and publishes these settings in kube-system/extension-apiserver-authentication.
            format!(
                "--requestheader-client-ca-file={}",
                pki.front_proxy_ca_cert.display()
            ),
            "--requestheader-allowed-names=front-proxy-client".to_owned(),
            "--requestheader-username-headers=X-Remote-User".to_owned(),
            "--requestheader-group-headers=X-Remote-Group".to_owned(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_owned(),
            "--requestheader-uid-headers=X-Remote-Uid".to_owned(),
            format!(
                "--proxy-client-cert-file={}",
                pki.front_proxy_client_cert.display()
            ),
            format!("--proxy-client-key-file={}", pki.front_proxy_client_key.display()),
        ];
        if !self.controller_manager {
            // Without KCM no `default` ServiceAccount is ever created, and the plugin would reject every pod.
            args.push("--disable-admission-plugins=ServiceAccount".to_owned());
        }
        args
    }
}

/// A running control plane. Dropping it stops every process and removes its temp dir; a control plane kept
/// in a `static` (see [`crate::shared`]) is cleaned up by watchdogs when the test process exits.
#[derive(Debug)]
pub struct ControlPlane {
    /// In start order; stopped in reverse.
    processes: Vec<ManagedProcess>,
    pki: Pki,
    server_url: String,
    kubeconfig_path: PathBuf,
    root: PathBuf,
    reaper: Mutex<Option<Child>>,
    controller_manager: bool,
    /// Dropped after `Drop::drop` has stopped the processes, which removes the directory.
    _temp_dir: Option<tempfile::TempDir>,
}

impl ControlPlane {
    pub fn builder() -> ControlPlaneBuilder {
        ControlPlaneBuilder::default()
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// A kubeconfig (server, `certificate-authority-data`, admin token) usable by kubectl and Go tools.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// `kubectl` with `KUBECONFIG` pointing at this control plane.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.env("KUBECONFIG", &self.kubeconfig_path);
        cmd
    }

    /// A kube config for the admin user (`system:masters`).
    pub fn config(&self) -> Result<Config> {
        let url = self
            .server_url
            .parse()
            .with_context(|| format!("parsing {}", self.server_url))?;
        let mut config = Config::new(url);
        config.root_cert = Some(vec![self.pki.ca_der.clone()]);
        config.auth_info.token = Some(self.pki.admin_token.clone().into());
        Ok(config)
    }

    /// A new admin client. Call it in the runtime that will use the client: kube clients are tied to the
    /// tokio runtime that created them, and every `#[tokio::test]` has its own.
    pub fn client(&self) -> Result<Client> {
        Client::try_from(self.config()?).context("building admin kube client")
    }

    /// A new client that impersonates `user` in `groups` (the API server adds `system:authenticated`),
    /// for RBAC tests.
    pub fn client_as(&self, user: &str, groups: &[&str]) -> Result<Client> {
        let mut config = self.config()?;
        config.auth_info.impersonate = Some(user.to_owned());
        if !groups.is_empty() {
            config.auth_info.impersonate_groups = Some(groups.iter().map(|g| (*g).to_owned()).collect());
        }
        Client::try_from(config).with_context(|| format!("building kube client impersonating {user}"))
    }

    /// Bearer token of the `admin` user (`system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.pki.admin_token
    }

    /// The cluster CA (PEM file): it signed the serving certificate and is the `--client-ca-file`.
    pub fn ca_cert_path(&self) -> &Path {
        &self.pki.ca_cert
    }

    /// The cluster CA as PEM text.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// The front-proxy CA (PEM file): extension API servers verify kube-apiserver's proxy requests with it.
    pub fn front_proxy_ca_cert_path(&self) -> &Path {
        &self.pki.front_proxy_ca_cert
    }

    /// Every PKI file.
    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// The directory holding PKI, etcd data, logs and the kubeconfig.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// `<dir>/logs`, with one `<component>.log` per process.
    pub fn log_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// The running processes, in start order.
    pub fn processes(&self) -> &[ManagedProcess] {
        &self.processes
    }

    /// The first process that has exited, if any: the control plane is then broken.
    pub fn exited(&self) -> Option<(String, ExitStatus)> {
        self.processes
            .iter()
            .find_map(|p| p.exit_status().map(|status| (p.name().to_owned(), status)))
    }

    /// Creates a namespace named `<prefix>-<n>-<random>` and returns it.
    pub async fn namespace(&self, prefix: &str) -> Result<TestNamespace> {
        let name = unique_name(prefix)?;
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some([("coder-k8s-testenv".to_owned(), "true".to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(self.client()?)
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        Ok(TestNamespace::new(name))
    }

    /// Creates the kwok-managed node `name` (see [`kwok::fake_node`]; [`kwok::FAKE_NODE_NAME`] is the usual
    /// name) if it does not exist, and waits until kwok reports it Ready. Needs the control plane to run
    /// kwok ([`ControlPlaneBuilder::with_kwok`]).
    pub async fn create_fake_node(&self, name: &str) -> Result<Node> {
        let kwok = self
            .process_index("kwok")
            .context("create_fake_node needs a control plane started with kwok")?;
        let nodes: Api<Node> = Api::all(self.client()?);
        match nodes.create(&PostParams::default(), &kwok::fake_node(name)).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(e).with_context(|| format!("creating node {name}")),
        }
        self.wait_until(
            kwok,
            &format!("node {name} Ready"),
            DEFAULT_STARTUP_TIMEOUT,
            || node_ready(&nodes, name),
        )
        .await?;
        nodes
            .get(name)
            .await
            .with_context(|| format!("reading node {name}"))
    }

    /// Waits until kube-apiserver's authorizer allows `user` the request `attributes` describes. RBAC objects
    /// reach the authorizer through its own watch, so a Role or binding created a moment ago may not apply yet;
    /// a test that grants and then acts as the user waits here first, or it fails now and then on a slow machine.
    pub async fn wait_until_allowed(&self, user: &str, attributes: ResourceAttributes) -> Result<()> {
        self.wait_for_review(SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(vec!["system:authenticated".to_owned()]),
            resource_attributes: Some(attributes),
            ..SubjectAccessReviewSpec::default()
        })
        .await
    }

    /// [`ControlPlane::wait_until_allowed`] for a non-resource path such as `/openapi/v3/...`.
    pub async fn wait_until_path_allowed(&self, user: &str, verb: &str, path: &str) -> Result<()> {
        self.wait_for_review(SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(vec!["system:authenticated".to_owned()]),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_owned()),
                verb: Some(verb.to_owned()),
            }),
            ..SubjectAccessReviewSpec::default()
        })
        .await
    }

    async fn wait_for_review(&self, spec: SubjectAccessReviewSpec) -> Result<()> {
        let reviews: Api<SubjectAccessReview> = Api::all(self.client()?);
        let review = SubjectAccessReview {
            spec,
            ..SubjectAccessReview::default()
        };
        let deadline = Instant::now() + RBAC_PROPAGATION_TIMEOUT;
        loop {
            let answer = reviews
                .create(&PostParams::default(), &review)
                .await
                .context("creating a SubjectAccessReview")?;
            if answer.status.is_some_and(|status| status.allowed) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "still not allowed after {RBAC_PROPAGATION_TIMEOUT:?}: {:?}",
                    review.spec
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Whether kube-controller-manager runs (and so the ServiceAccount admission plugin is enabled).
    pub fn has_controller_manager(&self) -> bool {
        self.controller_manager
    }

    /// Stops every process, newest first. Idempotent; also done on drop.
    pub fn stop(&self) {
        for process in self.processes.iter().rev() {
            process.stop();
        }
        let mut reaper = self
            .reaper
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(mut reaper) = reaper.take() {
            let _ = reaper.kill();
            let _ = reaper.wait();
        }
    }

    fn spawn(&mut self, name: &str, program: &Path, args: &[String]) -> Result<usize> {
        tracing::debug!(name, ?args, "starting");
        // When the owner dies, all watchdogs fire at once; etcd waits so kube-apiserver can shut down
        // cleanly instead of hanging on a vanished etcd until it is killed.
        let orphan_delay = if name == "etcd" {
            Duration::from_secs(5)
        } else {
            Duration::ZERO
        };
        let process = ManagedProcess::spawn_with_orphan_delay(
            orphan_delay,
            name,
            program,
            args,
            &self.log_dir().join(format!("{name}.log")),
            &self.root.join("run").join(format!("{name}.pid")),
        )?;
        self.processes.push(process);
        Ok(self.processes.len() - 1)
    }

    fn process(&self, name: &str) -> Option<&ManagedProcess> {
        self.processes.iter().find(|p| p.name() == name)
    }

    fn process_index(&self, name: &str) -> Result<usize> {
        self.processes
            .iter()
            .position(|p| p.name() == name)
            .ok_or_else(|| anyhow!("{name} is not running in this control plane"))
    }

    /// Polls `check` until it succeeds; fails early, with the log tail, if process `idx` exits, and with
    /// the last check error and the log tail on timeout.
    async fn wait_until<F, Fut>(&self, idx: usize, what: &str, timeout: Duration, mut check: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        let process = self
            .processes
            .get(idx)
            .ok_or_else(|| anyhow!("no process #{idx}"))?;
        let started = Instant::now();
        let deadline = started + timeout;
        let mut last_error = anyhow!("not checked yet");
        loop {
            if let Some(status) = process.exit_status() {
                bail!(
                    "{} exited with {status} while waiting for {what}; last lines of {}:\n{}",
                    process.name(),
                    process.log_path().display(),
                    process.log_tail(LOG_TAIL_LINES)
                );
            }
            match tokio::time::timeout(Duration::from_secs(5), check()).await {
                Ok(Ok(())) => {
                    tracing::debug!(what, elapsed = ?started.elapsed(), "ready");
                    return Ok(());
                }
                Ok(Err(e)) => last_error = e,
                Err(_) => last_error = anyhow!("check timed out after 5 s"),
            }
            if Instant::now() >= deadline {
                bail!(
                    "timed out after {timeout:?} waiting for {what} (last error: {last_error:#}); last lines of {}:\n{}",
                    process.log_path().display(),
                    process.log_tail(LOG_TAIL_LINES)
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Creates `dir` and removes the state a previous run left there, so each start is a fresh cluster.
fn prepare_user_dir(dir: &Path) -> Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = std::path::absolute(dir).with_context(|| format!("resolving {}", dir.display()))?;
    for sub in ["etcd", "pki", "run"] {
        let path = dir.join(sub);
        if path.exists() {
            fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(dir)
}

/// etcd answers plain HTTP; a tiny HTTP/1.0 request avoids another client dependency.
async fn etcd_healthy(addr: SocketAddr) -> Result<()> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    if response.starts_with("HTTP/1.0 200") && response.contains(r#""health":"true""#) {
        Ok(())
    } else {
        Err(anyhow!(
            "etcd /health: {}",
            response.lines().last().unwrap_or_default()
        ))
    }
}

async fn exists<K>(api: &Api<K>, name: &str) -> Result<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get(name).await.map(|_| ()).map_err(anyhow::Error::from)
}

async fn node_ready(nodes: &Api<Node>, name: &str) -> Result<()> {
    let node = nodes.get(name).await?;
    if kwok::is_ready(&node) {
        Ok(())
    } else {
        Err(anyhow!("node {name} is not Ready yet"))
    }
}

async fn readyz(client: &Client) -> Result<()> {
    get_text(client, "/readyz").await
}

async fn healthz(client: &Client) -> Result<()> {
    get_text(client, "/healthz").await
}

async fn get_text(client: &Client, path: &str) -> Result<()> {
    let request = http::Request::get(path).body(Vec::new())?;
    let body = client.request_text(request).await?;
    if body.trim() == "ok" {
        Ok(())
    } else {
        Err(anyhow!("{path}: {body}"))
    }
}

/// An anonymous client for the self-signed /healthz endpoints of KCM and the scheduler.
fn insecure_client(port: u16) -> Result<Client> {
    let mut config = Config::new(format!("https://127.0.0.1:{port}").parse()?);
    config.accept_invalid_certs = true;
    Client::try_from(config).context("building health check client")
}
