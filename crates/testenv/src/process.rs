//! Child processes that cannot outlive the process that started them.
//!
//! A control plane kept in a `static` is never dropped, and `unsafe` (needed for `prctl(PR_SET_PDEATHSIG)`)
//! is forbidden, so each binary runs under a small bash watchdog: it polls the owner's pid every second and
//! stops the binary once the owner is gone. Processes are spawned with `std::process`, not tokio, so they do
//! not depend on the runtime of whichever test happened to start them.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// `$1` owner pid, `$2` pid file, `$3` seconds to wait after the owner is gone, `$4..` the command. Stops
/// the command (TERM, then KILL after 10 s) when the owner exits or when the watchdog itself gets
/// TERM/INT/HUP; otherwise exits with the command's status.
const WATCHDOG: &str = r#"
owner=$1; pidfile=$2; orphan_delay=$3; shift 3
"$@" </dev/null &
child=$!
echo "$child" >"$pidfile"
stop() {
  trap - TERM INT HUP
  kill -TERM "$child" 2>/dev/null
  for _ in $(seq 1 100); do
    kill -0 "$child" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$child" 2>/dev/null
  wait "$child" 2>/dev/null
  exit 143
}
trap stop TERM INT HUP
while kill -0 "$owner" 2>/dev/null; do
  # `wait` on a background sleep, so a trapped signal is handled at once rather than after the sleep.
  sleep 1 &
  wait $!
  if ! kill -0 "$child" 2>/dev/null; then
    wait "$child"
    exit $?
  fi
done
echo "watchdog: owner process $owner is gone; stopping $1 in ${orphan_delay}s" >&2
sleep "$orphan_delay" &
wait $!
stop
"#;

/// How long [`ManagedProcess::stop`] waits for the watchdog before killing everything.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// A binary running under the watchdog, with its output in a log file.
#[derive(Debug)]
pub struct ManagedProcess {
    name: String,
    watchdog: Mutex<Child>,
    log_path: PathBuf,
    pid_file: PathBuf,
}

impl ManagedProcess {
    /// Starts `program args...`; stdout and stderr go to `log_path` (truncated), and the binary's own pid
    /// is written to `pid_file`.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        log_path: &Path,
        pid_file: &Path,
    ) -> Result<Self> {
        Self::spawn_owned_by(
            std::process::id(),
            Duration::ZERO,
            name,
            program,
            args,
            log_path,
            pid_file,
        )
    }

    /// Like [`Self::spawn`], but when the owner dies the binary is stopped only after `orphan_delay`, so
    /// that components depending on it (kube-apiserver on etcd) can shut down first.
    pub(crate) fn spawn_with_orphan_delay(
        orphan_delay: Duration,
        name: &str,
        program: &Path,
        args: &[String],
        log_path: &Path,
        pid_file: &Path,
    ) -> Result<Self> {
        Self::spawn_owned_by(
            std::process::id(),
            orphan_delay,
            name,
            program,
            args,
            log_path,
            pid_file,
        )
    }

    /// Like [`Self::spawn`], with changes to the inherited environment: `(name, Some(value))` sets a variable,
    /// `(name, None)` removes it.
    pub fn spawn_with_env(
        name: &str,
        program: &Path,
        args: &[String],
        envs: &[(OsString, Option<OsString>)],
        log_path: &Path,
        pid_file: &Path,
    ) -> Result<Self> {
        Self::spawn_owned_by_with_env(
            std::process::id(),
            Duration::ZERO,
            name,
            program,
            args,
            envs,
            log_path,
            pid_file,
        )
    }

    fn spawn_owned_by(
        owner: u32,
        orphan_delay: Duration,
        name: &str,
        program: &Path,
        args: &[String],
        log_path: &Path,
        pid_file: &Path,
    ) -> Result<Self> {
        Self::spawn_owned_by_with_env(owner, orphan_delay, name, program, args, &[], log_path, pid_file)
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn_owned_by_with_env(
        owner: u32,
        orphan_delay: Duration,
        name: &str,
        program: &Path,
        args: &[String],
        envs: &[(OsString, Option<OsString>)],
        log_path: &Path,
        pid_file: &Path,
    ) -> Result<Self> {
        let log = File::create(log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let log_err = log.try_clone().context("duplicating log file handle")?;
        let mut command = Command::new("bash");
        for (key, value) in envs {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        let watchdog = command
            .arg("-c")
            .arg(WATCHDOG)
            .arg("testenv-watchdog")
            .arg(owner.to_string())
            .arg(pid_file)
            .arg(orphan_delay.as_secs().to_string())
            .arg(program)
            .args(args)
            // Own process group: a terminal's Ctrl-C reaches only the owner, which then stops the
            // components in order (or, if it dies, the watchdogs do).
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .with_context(|| format!("spawning {name} ({}) under bash", program.display()))?;
        tracing::debug!(name, pid = watchdog.id(), log = %log_path.display(), "spawned");
        Ok(Self {
            name: name.to_owned(),
            watchdog: Mutex::new(watchdog),
            log_path: log_path.to_owned(),
            pid_file: pid_file.to_owned(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Pid of the binary itself (not of its watchdog), once the watchdog has written it.
    pub fn pid(&self) -> Option<u32> {
        fs::read_to_string(&self.pid_file).ok()?.trim().parse().ok()
    }

    /// Pid of the bash watchdog; sending it TERM stops the binary cleanly.
    pub fn watchdog_pid(&self) -> u32 {
        self.lock().id()
    }

    /// `Some(status)` once the binary (and so its watchdog) has exited.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.lock().try_wait().ok().flatten()
    }

    /// The last `lines` lines of the log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path, lines)
    }

    /// Stops the binary: TERM to the watchdog (which TERMs, then KILLs, the binary), then KILL as a last
    /// resort. Idempotent.
    pub fn stop(&self) {
        let mut watchdog = self.lock();
        if matches!(watchdog.try_wait(), Ok(Some(_))) {
            return;
        }
        send_signal("TERM", watchdog.id());
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if matches!(watchdog.try_wait(), Ok(Some(_)) | Err(_)) {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        tracing::warn!(name = %self.name, "did not stop in time; killing it");
        if let Some(pid) = self.pid() {
            send_signal("KILL", pid);
        }
        let _ = watchdog.kill();
        let _ = watchdog.wait();
    }

    fn lock(&self) -> MutexGuard<'_, Child> {
        // A poisoned lock only means another thread panicked while holding it; the Child is still usable.
        self.watchdog
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sends a signal through bash's `kill` builtin (no `unsafe` libc call needed).
pub fn send_signal(signal: &str, pid: u32) {
    let _ = Command::new("bash")
        .arg("-c")
        .arg(r#"kill -s "$1" "$2" 2>/dev/null"#)
        .arg("kill")
        .arg(signal)
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Whether a process with this pid exists (`kill -0`).
pub fn is_alive(pid: u32) -> bool {
    Command::new("bash")
        .arg("-c")
        .arg(r#"kill -0 "$1" 2>/dev/null"#)
        .arg("kill")
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Cancels the reaper in `reaper` (if still there) and removes `dir` now: the end of a server stopped by its owner.
/// Idempotent.
pub(crate) fn reap_now(reaper: &Mutex<Option<Child>>, dir: &Path) {
    let reaper = reaper
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    if let Some(mut reaper) = reaper {
        let _ = reaper.kill();
        let _ = reaper.wait();
        let _ = fs::remove_dir_all(dir);
    }
}

/// Removes `dir` a while after the current process has exited: a control plane kept in a `static` is never
/// dropped, so nothing else would clean its temp dir. Kill the returned child to cancel.
pub(crate) fn spawn_reaper(dir: &Path) -> Result<Child> {
    Command::new("bash")
        .arg("-c")
        // The delay lets the watchdogs stop their binaries (etcd: 5 s delay + up to 10 s) before their
        // files go.
        .arg(r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done; sleep 20; rm -rf -- "$2""#)
        .arg("testenv-reaper")
        .arg(std::process::id().to_string())
        .arg(dir)
        // Out of the terminal's process group, so a Ctrl-C that kills the owner does not kill the reaper.
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("spawning temp dir reaper")
}

/// The last `lines` lines of a file (at most its last 64 KiB are read).
pub fn log_tail(path: &Path, lines: usize) -> String {
    const MAX: u64 = 64 * 1024;
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(MAX)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_terminates_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let proc = ManagedProcess::spawn(
            "sleeper",
            Path::new("sleep"),
            &["300".to_owned()],
            &dir.path().join("sleep.log"),
            &dir.path().join("sleep.pid"),
        )
        .unwrap();
        let pid = wait_for_pid(&proc);
        assert!(is_alive(pid));
        assert!(proc.exit_status().is_none());
        proc.stop();
        assert!(proc.exit_status().is_some());
        assert!(!is_alive(pid), "binary survived stop()");
    }

    fn wait_for_pid(proc: &ManagedProcess) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(pid) = proc.pid() {
                return pid;
            }
            assert!(Instant::now() < deadline, "pid file never written");
            thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn binary_dies_with_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        let mut owner = Command::new("sleep").arg("1").spawn().unwrap();
        let proc = ManagedProcess::spawn_owned_by(
            owner.id(),
            Duration::ZERO,
            "orphan",
            Path::new("sleep"),
            &["300".to_owned()],
            &dir.path().join("o.log"),
            &dir.path().join("o.pid"),
        )
        .unwrap();
        let pid = wait_for_pid(&proc);
        owner.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while is_alive(pid) {
            assert!(Instant::now() < deadline, "binary outlived its owner");
            thread::sleep(Duration::from_millis(100));
        }
        assert!(proc.log_tail(5).contains("is gone"), "{}", proc.log_tail(5));
    }

    #[test]
    fn exit_status_reports_early_exit() {
        let dir = tempfile::tempdir().unwrap();
        let proc = ManagedProcess::spawn(
            "failing",
            Path::new("bash"),
            &["-c".to_owned(), "echo boom; exit 3".to_owned()],
            &dir.path().join("f.log"),
            &dir.path().join("f.pid"),
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = proc.exit_status() {
                break status;
            }
            assert!(Instant::now() < deadline, "watchdog did not exit");
            thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(status.code(), Some(3));
        assert_eq!(proc.log_tail(5), "boom");
    }
}
