//! A real PostgreSQL server from the Debian `postgresql` packages, on a free loopback port in a temp dir.
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

/// A running PostgreSQL server.
#[derive(Debug)]
pub struct Postgres {
    process: ManagedProcess,
    port: u16,
    root: PathBuf,
    reaper: Mutex<Option<Child>>,
}

/// The PostgreSQL server shared by every test in this process, started on first use.
pub async fn shared() -> Result<&'static Postgres> {
    static SHARED: OnceCell<Postgres> = OnceCell::const_new();
    SHARED.get_or_try_init(Postgres::start).await
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
            match Self::start_once(&bin, root).await {
                Err(e) if attempt < 3 && format!("{e:#}").contains("already in use") => attempt += 1,
                result => return result,
            }
        }
    }

    async fn start_once(bin: &Path, as_root: bool) -> Result<Self> {
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

    /// A connection to `database`; its connection task runs on the current runtime.
    pub async fn connect(&self, database: &str) -> Result<tokio_postgres::Client> {
        let (client, connection) = tokio_postgres::connect(&self.url(database), tokio_postgres::NoTls)
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
