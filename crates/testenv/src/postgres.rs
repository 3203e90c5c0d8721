//! A real PostgreSQL server from the Debian `postgresql` packages, on a free loopback port in a temp dir; optionally
//! with TLS (`ssl=on`, a certificate signed by a fresh self-signed CA, see [`Postgres::start_tls`]).
//!
//! initdb and postgres refuse to run as root, so as root both run as the system user `postgres` (via
//! `runuser`) and the temp dir is handed to that user. The server runs under the same watchdog as etcd and
//! stops once the test process is gone.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use tokio::sync::OnceCell;

use crate::process::{ManagedProcess, spawn_reaper};

const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
const NOT_INSTALLED: &str = "PostgreSQL server binaries not found; install the Debian package postgresql (apt-get install -y postgresql)";
/// The superuser created by initdb (trust authentication on loopback).
pub const SUPERUSER: &str = "postgres";
/// On a TLS server: a superuser that `pg_hba.conf` admits over TCP only with TLS (`hostssl`).
pub const TLS_ONLY_ROLE: &str = "tls_only";
/// On a TLS server: a superuser that `pg_hba.conf` admits over TCP only without TLS (`hostnossl`).
pub const PLAIN_ONLY_ROLE: &str = "plain_only";
/// On a TLS server: the only name in its certificate (no IP address, so `127.0.0.1` does not match it).
pub const TLS_HOST_NAME: &str = "localhost";

/// The CA files of a TLS server, readable by the test process.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The self-signed CA that signed the server certificate.
    pub ca_cert: PathBuf,
    /// A self-signed CA that signed nothing.
    pub unrelated_ca_cert: PathBuf,
}

/// A running PostgreSQL server.
#[derive(Debug)]
pub struct Postgres {
    process: ManagedProcess,
    port: u16,
    root: PathBuf,
    tls: Option<TlsFiles>,
    reaper: Mutex<Option<Child>>,
}

/// The PostgreSQL server shared by every test in this process, started on first use.
pub async fn shared() -> Result<&'static Postgres> {
    static SHARED: OnceCell<Postgres> = OnceCell::const_new();
    SHARED.get_or_try_init(Postgres::start).await
}

/// The TLS PostgreSQL server ([`Postgres::start_tls`]) shared by every test in this process, started on first use.
pub async fn shared_tls() -> Result<&'static Postgres> {
    static SHARED: OnceCell<Postgres> = OnceCell::const_new();
    SHARED.get_or_try_init(Postgres::start_tls).await
}

/// `bin` directory holding `initdb` and `postgres`, newest major version first.
pub fn find_bin_dir() -> Result<PathBuf> {
    find_bin_dir_in(Path::new("/usr/lib/postgresql"))
}

fn find_bin_dir_in(base: &Path) -> Result<PathBuf> {
    let mut candidates: Vec<(u32, PathBuf)> = fs::read_dir(base)
        .map_err(|_| anyhow!(NOT_INSTALLED))?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("postgres").is_file()).then_some((version, bin))
        })
        .collect();
    candidates.sort();
    candidates
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| anyhow!(NOT_INSTALLED))
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Coder's schema for the four tables the operator touches, written from Coder's column names and types.
pub const CODER_SCHEMA_SQL: &str = include_str!("fixtures/coder_schema.sql");

impl Postgres {
    /// initdb into a fresh temp dir and start the server; retried on a port conflict.
    pub async fn start() -> Result<Self> {
        Self::start_with(false).await
    }

    /// A dedicated server with `ssl=on` and a certificate for [`TLS_HOST_NAME`] signed by a fresh self-signed CA
    /// ([`Postgres::tls`]). Over TCP, [`TLS_ONLY_ROLE`] is admitted only with TLS, [`PLAIN_ONLY_ROLE`] only without,
    /// [`SUPERUSER`] only with TLS; [`Postgres::connect`] uses the Unix socket.
    pub async fn start_tls() -> Result<Self> {
        let pg = Self::start_with(true).await?;
        let client = pg.connect("postgres").await?;
        client
            .batch_execute(&format!(
                "CREATE ROLE {TLS_ONLY_ROLE} LOGIN SUPERUSER; CREATE ROLE {PLAIN_ONLY_ROLE} LOGIN SUPERUSER"
            ))
            .await
            .context("creating the TLS test roles")?;
        Ok(pg)
    }

    async fn start_with(tls: bool) -> Result<Self> {
        let bin = find_bin_dir()?;
        let root = running_as_root();
        if root {
            let exists = Command::new("id")
                .args(["-u", SUPERUSER])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if !exists {
                bail!(
                    "running as root, but the system user {SUPERUSER} does not exist (initdb and postgres refuse \
                     to run as root; the Debian package postgresql creates that user)"
                );
            }
        }
        let mut attempt = 1;
        loop {
            match Self::start_once(&bin, root, tls).await {
                Err(e) if attempt < 3 && format!("{e:#}").contains("already in use") => attempt += 1,
                result => return result,
            }
        }
    }

    async fn start_once(bin: &Path, as_root: bool, tls: bool) -> Result<Self> {
        let temp = tempfile::Builder::new()
            .prefix("coder-k8s-postgres-")
            .tempdir()
            .context("creating temp dir")?;
        // Removed by the reaper after this process exits (a shared server is never dropped).
        let root = temp.keep();
        let reaper = spawn_reaper(&root)?;
        let data = root.join("data");
        let user_cmd = |program: &Path| -> Command {
            if as_root {
                let mut cmd = Command::new("runuser");
                cmd.args(["-u", SUPERUSER, "--"]).arg(program);
                cmd
            } else {
                Command::new(program)
            }
        };
        let tls_files = if tls { Some(write_tls_files(&root)?) } else { None };
        if as_root {
            let status = Command::new("chown")
                .args(["-R", &format!("{SUPERUSER}:")])
                .arg(&root)
                .status()
                .context("running chown")?;
            if !status.success() {
                bail!("chown {SUPERUSER}: {} failed with {status}", root.display());
            }
        }
        let initdb = user_cmd(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", SUPERUSER, "--auth=trust", "--encoding=UTF8", "--no-sync"])
            .output()
            .context("running initdb")?;
        if !initdb.status.success() {
            bail!(
                "initdb failed with {}:\n{}{}",
                initdb.status,
                String::from_utf8_lossy(&initdb.stdout),
                String::from_utf8_lossy(&initdb.stderr)
            );
        }
        if tls {
            fs::write(data.join("pg_hba.conf"), TLS_PG_HBA).context("writing pg_hba.conf")?;
        }
        let [port] = crate::free_ports()?;
        let postgres = bin.join("postgres");
        let mut args: Vec<String> = Vec::new();
        let program = if as_root {
            args.extend(["-u", SUPERUSER, "--"].map(String::from));
            args.push(postgres.display().to_string());
            PathBuf::from("runuser")
        } else {
            postgres
        };
        args.extend([
            "-D".to_owned(),
            data.display().to_string(),
            "-p".to_owned(),
            port.to_string(),
            "-k".to_owned(),
            root.display().to_string(),
            "-c".to_owned(),
            "listen_addresses=127.0.0.1".to_owned(),
            "-c".to_owned(),
            "fsync=off".to_owned(),
            "-c".to_owned(),
            "max_connections=200".to_owned(),
        ]);
        if tls {
            let dir = root.join("tls");
            for setting in [
                "ssl=on".to_owned(),
                format!("ssl_cert_file={}", dir.join("server.crt").display()),
                format!("ssl_key_file={}", dir.join("server.key").display()),
            ] {
                args.extend(["-c".to_owned(), setting]);
            }
        }
        let process = ManagedProcess::spawn(
            "postgres",
            &program,
            &args,
            &root.join("postgres.log"),
            &root.join("postgres.pid"),
        )?;
        let pg = Self {
            process,
            port,
            root,
            tls: tls_files,
            reaper: Mutex::new(Some(reaper)),
        };
        pg.wait_ready().await?;
        Ok(pg)
    }

    async fn wait_ready(&self) -> Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let mut last_error = anyhow!("not checked yet");
        loop {
            if let Some(status) = self.process.exit_status() {
                bail!(
                    "postgres exited with {status} during startup; last lines of {}:\n{}",
                    self.process.log_path().display(),
                    self.process.log_tail(30)
                );
            }
            match self.connect("postgres").await {
                Ok(_) => return Ok(()),
                Err(e) => last_error = e,
            }
            if Instant::now() >= deadline {
                bail!(
                    "timed out waiting for postgres to accept connections (last error: {last_error:#}); log:\n{}",
                    self.process.log_tail(30)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Directory holding the data dir, socket and `postgres.log`.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// `postgres://postgres@127.0.0.1:PORT/DATABASE?sslmode=disable`.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{SUPERUSER}@127.0.0.1:{}/{database}?sslmode=disable",
            self.port
        )
    }

    /// The CA files of a server from [`Postgres::start_tls`].
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// `postgres://USER@HOST:PORT/DATABASE?QUERY` (no `?` when `query` is empty).
    pub fn url_for(&self, user: &str, host: &str, database: &str, query: &str) -> String {
        let url = format!("postgres://{user}@{host}:{}/{database}", self.port);
        if query.is_empty() {
            url
        } else {
            format!("{url}?{query}")
        }
    }

    /// A superuser connection to `database` over the Unix socket (admitted whatever TCP requires); its
    /// connection task runs on the current runtime.
    pub async fn connect(&self, database: &str) -> Result<tokio_postgres::Client> {
        let mut config = tokio_postgres::Config::new();
        config
            .host_path(&self.root)
            .port(self.port)
            .user(SUPERUSER)
            .dbname(database);
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .with_context(|| format!("connecting to postgres database {database}"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Creates database `name` (letters, digits and `_` only) and returns its URL.
    pub async fn create_database(&self, name: &str) -> Result<String> {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            bail!("invalid database name {name:?}: use letters, digits and _");
        }
        let client = self.connect("postgres").await?;
        client
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .with_context(|| format!("creating database {name}"))?;
        Ok(self.url(name))
    }

    /// A new database with Coder's tables, named `<prefix>_<process id>_<n>`, so tests of several processes sharing
    /// this server never meet. `prefix` may hold letters, digits, `_` and `-` (read as `_`).
    pub async fn unique_coder_database(&self, prefix: &str) -> Result<String> {
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{}_{}_{n}", prefix.replace('-', "_"), std::process::id());
        self.create_coder_database(&name).await
    }

    /// Creates database `name` with Coder's tables that the operator-access bootstrap and the Coder API test server
    /// use (users, organizations, organization_members, api_keys, their enums, one default organization).
    pub async fn create_coder_database(&self, name: &str) -> Result<String> {
        let url = self.create_database(name).await?;
        let client = self.connect(name).await?;
        client
            .batch_execute(CODER_SCHEMA_SQL)
            .await
            .with_context(|| format!("creating the Coder schema in {name}"))?;
        Ok(url)
    }

    /// Stops the server and removes its directory. Idempotent.
    pub fn stop(&self) {
        self.process.stop();
        crate::process::reap_now(&self.reaper, &self.root);
    }
}

/// `pg_hba.conf` of a TLS server: the socket is trusted; over TCP the roles show which transport was used.
const TLS_PG_HBA: &str = "\
local all all trust
hostssl all tls_only 127.0.0.1/32 trust
hostnossl all plain_only 127.0.0.1/32 trust
hostssl all postgres 127.0.0.1/32 trust
";

/// The CA, an unrelated CA, and the server certificate and key (mode 0600, as PostgreSQL demands) under `root/tls`.
fn write_tls_files(root: &Path) -> Result<TlsFiles> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = root.join("tls");
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let server = crate::pki::server_tls("postgres", &[TLS_HOST_NAME])?;
    let write = |name: &str, contents: &str| -> Result<PathBuf> {
        let path = dir.join(name);
        fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    };
    let files = TlsFiles {
        ca_cert: write("ca.crt", &server.ca_pem)?,
        unrelated_ca_cert: write("unrelated-ca.crt", &crate::pki::unrelated_ca_pem("unrelated-ca")?)?,
    };
    write("server.crt", &server.cert_pem)?;
    let key = write("server.key", &server.key_pem)?;
    fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).context("restricting the server key")?;
    Ok(files)
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binaries_explain_how_to_install() {
        let dir = tempfile::tempdir().unwrap();
        for base in [dir.path().join("absent"), dir.path().to_owned()] {
            let err = find_bin_dir_in(&base).unwrap_err().to_string();
            assert_eq!(err, NOT_INSTALLED);
        }
    }

    #[test]
    fn newest_major_version_wins() {
        let dir = tempfile::tempdir().unwrap();
        for version in ["9", "15", "16", "notaversion"] {
            let bin = dir.path().join(version).join("bin");
            fs::create_dir_all(&bin).unwrap();
            fs::write(bin.join("initdb"), "").unwrap();
            fs::write(bin.join("postgres"), "").unwrap();
        }
        // 17 is incomplete (no postgres binary).
        let bin17 = dir.path().join("17").join("bin");
        fs::create_dir_all(&bin17).unwrap();
        fs::write(bin17.join("initdb"), "").unwrap();
        assert_eq!(
            find_bin_dir_in(dir.path()).unwrap(),
            dir.path().join("16").join("bin")
        );
    }
}
