//! Build script: records the git commit the binary is built from (for `coder-k8s --version`).
//!
//! `CODER_K8S_COMMIT` in the build environment wins (a container build has no `.git`); otherwise `git rev-parse HEAD`;
//! `unknown` when neither is available (a source tarball).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CODER_K8S_COMMIT");
    let commit = std::env::var("CODER_K8S_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the file of the branch it points at (a commit).
    for path in ["HEAD", "packed-refs"] {
        watch_git_path(path);
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch_git_path(&branch);
    }
    println!("cargo:rustc-env=CODER_K8S_COMMIT={}", commit.trim());
}

/// Asks cargo to rerun this script when the named file of the git directory changes (worktrees included).
fn watch_git_path(name: &str) {
    if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", name])
        && std::path::Path::new(&path).exists()
    {
        println!("cargo:rerun-if-changed={path}");
    }
}

/// The trimmed stdout of a successful git command, `None` when git is missing or fails.
fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}
