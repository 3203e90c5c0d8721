//! Locating the control plane and Coder binaries built by `hack/build-testenv.sh`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, bail};

/// Paths of every binary the harness can run.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kube_scheduler: PathBuf,
    /// `None` when kwok failed to build; the rest of the control plane still works.
    pub kwok: Option<PathBuf>,
    /// Why kwok is missing (the build script's status), for the error when kwok is asked for.
    pub kwok_error: Option<String>,
}

/// The build script, found relative to this crate's sources (the harness runs inside the workspace).
pub fn build_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/build-testenv.sh")
}

impl Binaries {
    /// Runs `hack/build-testenv.sh` (which builds whatever is missing; progress goes to stderr) and returns
    /// the binaries it reports. Blocking; the result is cached for the life of the process.
    pub fn locate() -> Result<Self> {
        static CACHE: OnceLock<std::result::Result<Binaries, String>> = OnceLock::new();
        CACHE
            .get_or_init(|| Self::run_script().map_err(|e| format!("{e:#}")))
            .clone()
            .map_err(|e| anyhow!(e))
    }

    fn run_script() -> Result<Self> {
        let (output, hint) = run_build_script(&["etcd", "k8s", "kwok"])?;
        // kwok is built last: when only it fails, etcd and k8s lines were printed and are still usable.
        let stdout = String::from_utf8_lossy(&output.stdout);
        let script = build_script();
        let mut bins = Self::from_script_output(&stdout)
            .with_context(|| format!("{} exited with {}; {hint}", script.display(), output.status))?;
        if !output.status.success() && bins.kwok.is_none() {
            bins.kwok_error = Some(format!(
                "{} exited with {}; {hint}",
                script.display(),
                output.status
            ));
        }
        Ok(bins)
    }

    /// The kwok binary, or an error saying how to build it.
    pub fn kwok(&self) -> Result<&Path> {
        match (&self.kwok, &self.kwok_error) {
            (Some(path), _) => Ok(path),
            (None, Some(error)) => bail!("kwok is not available: {error}"),
            (None, None) => bail!("kwok is not available; run bash {}", build_script().display()),
        }
    }

    /// Parses `name=<bindir>` lines and checks that every binary is there.
    fn from_script_output(stdout: &str) -> Result<Self> {
        let etcd = component_dir(stdout, "etcd")?;
        let k8s = component_dir(stdout, "k8s")?;
        let kwok = component_dir(stdout, "kwok").and_then(|d| bin(&d, "kwok"));
        Ok(Self {
            etcd: bin(&etcd, "etcd")?,
            kube_apiserver: bin(&k8s, "kube-apiserver")?,
            kube_controller_manager: bin(&k8s, "kube-controller-manager")?,
            kube_scheduler: bin(&k8s, "kube-scheduler")?,
            kwok_error: kwok.as_ref().err().map(|e| format!("{e:#}")),
            kwok: kwok.ok(),
        })
    }
}

/// The open-source Coder server and `echotar` (writes echo-provisioner template archives), built by
/// `hack/build-testenv.sh coder`.
#[derive(Debug, Clone)]
pub struct CoderBinaries {
    pub coder: PathBuf,
    pub echotar: PathBuf,
}

impl CoderBinaries {
    /// Runs `hack/build-testenv.sh coder` (which builds Coder when it is missing; progress goes to stderr) and
    /// returns the binaries it reports. Blocking; the result is cached for the life of the process.
    pub fn locate() -> Result<Self> {
        static CACHE: OnceLock<std::result::Result<CoderBinaries, String>> = OnceLock::new();
        CACHE
            .get_or_init(|| Self::run_script().map_err(|e| format!("{e:#}")))
            .clone()
            .map_err(|e| anyhow!(e))
    }

    fn run_script() -> Result<Self> {
        let (output, hint) = run_build_script(&["coder"])?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            bail!(
                "{} exited with {}; {hint}",
                build_script().display(),
                output.status
            );
        }
        Self::from_script_output(&stdout)
            .with_context(|| format!("after {}; {hint}", build_script().display()))
    }

    fn from_script_output(stdout: &str) -> Result<Self> {
        let dir = component_dir(stdout, "coder")?;
        Ok(Self {
            coder: bin(&dir, "coder")?,
            echotar: bin(&dir, "echotar")?,
        })
    }
}

/// Runs the build script for `components`; returns its output and a hint for errors.
fn run_build_script(components: &[&str]) -> Result<(std::process::Output, String)> {
    let script = build_script();
    let command = format!("bash {} {}", script.display(), components.join(" "));
    let hint = format!("build the test binaries by hand to see the full error: {command}");
    let output = Command::new("bash")
        .arg(&script)
        .args(components)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {command}; {hint}"))?;
    Ok((output, hint))
}

/// The directory of a `component=<dir>` line of the build script's output.
fn component_dir(stdout: &str, component: &str) -> Result<PathBuf> {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(component)?.strip_prefix('='))
        .map(PathBuf::from)
        .ok_or_else(|| anyhow!("build script printed no `{component}=<dir>` line; got:\n{stdout}"))
}

fn bin(dir: &Path, name: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(anyhow!("{} is missing", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_script_output() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
        ] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let d = dir.path().display();
        let out = format!("etcd={d}\nk8s={d}\nkwok={d}\n");
        let bins = Binaries::from_script_output(&out).unwrap();
        assert_eq!(bins.kube_scheduler, dir.path().join("kube-scheduler"));

        let no_kwok = Binaries::from_script_output(&format!("etcd={d}\nk8s={d}\n")).unwrap();
        assert!(no_kwok.kwok().is_err());

        let err = Binaries::from_script_output("etcd=/nonexistent\nk8s=/nonexistent\n").unwrap_err();
        assert!(format!("{err:#}").contains("missing"), "{err:#}");
    }

    #[test]
    fn parses_coder_line() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let out = format!("coder={d}\n");
        std::fs::write(dir.path().join("coder"), "").unwrap();
        let err = CoderBinaries::from_script_output(&out).unwrap_err();
        assert_eq!(format!("{err:#}"), format!("{d}/echotar is missing"));
        std::fs::write(dir.path().join("echotar"), "").unwrap();
        let bins = CoderBinaries::from_script_output(&out).unwrap();
        assert_eq!(bins.coder, dir.path().join("coder"));
        assert_eq!(bins.echotar, dir.path().join("echotar"));
        let err = CoderBinaries::from_script_output(&format!("etcd={d}\n")).unwrap_err();
        assert!(format!("{err:#}").contains("no `coder=<dir>` line"), "{err:#}");
    }
}
