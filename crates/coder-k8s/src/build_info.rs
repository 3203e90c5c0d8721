//! What the binary was built from, for `coder-k8s --version`: the crate version and the git commit (`unknown` when
//! the build had neither a git checkout nor `CODER_K8S_COMMIT`).

/// The release version of this build.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit this build was made from, or `unknown`.
pub const COMMIT: &str = env!("CODER_K8S_COMMIT");

/// The line `--version` prints, for example `coder-k8s 0.2.0 (commit 0123abcd…)`.
pub fn version_line() -> String {
    format!("coder-k8s {VERSION} (commit {COMMIT})")
}

/// Whether the command line asks for the version: `--version` (or Go's single-dash `-version`) as the first
/// argument. Checked before flag parsing, so it works whatever else the flags would reject.
pub fn is_version_request<I: IntoIterator<Item = String>>(args: I) -> bool {
    matches!(args.into_iter().nth(1).as_deref(), Some("--version" | "-version"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn version_flag_as_first_argument_is_a_version_request() {
        assert!(is_version_request(argv(&["coder-k8s", "--version"])));
        assert!(is_version_request(argv(&["coder-k8s", "-version"])));
    }

    #[test]
    fn other_command_lines_are_not_version_requests() {
        assert!(!is_version_request(argv(&["coder-k8s"])));
        assert!(!is_version_request(argv(&["coder-k8s", "--app=controller"])));
        assert!(!is_version_request(argv(&["coder-k8s", "--app", "--version"])));
    }

    #[test]
    fn version_line_names_version_and_commit() {
        let line = version_line();
        assert!(line.starts_with(&format!("coder-k8s {VERSION} (commit ")));
        assert!(line.ends_with(&format!("{COMMIT})")));
        assert!(!COMMIT.is_empty());
    }
}
