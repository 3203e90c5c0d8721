//! The release version, pinned in every file that ships it: the workspace version (what `coder-k8s --version` and the
//! image's `org.opencontainers.image.version` label say), the chart's `version` and `appVersion` (the image tag the
//! chart runs when `image.tag` is empty), and the operator image tag of `deploy/deployment.yaml` and of the generated
//! bundles in `dist/`. `cargo xtask release VERSION` writes them all; `cargo xtask check` fails when they disagree,
//! so no shipped manifest runs a floating tag or an image of another release.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The repository the shipped manifests pull the operator from.
pub const IMAGE_REPOSITORY: &str = "ghcr.io/coder/coder-k8s";

/// One place that states the release version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pin {
    /// `version` of `[workspace.package]` in `Cargo.toml`.
    WorkspaceVersion,
    /// `version:` of the chart.
    ChartVersion,
    /// `appVersion:` of the chart.
    ChartAppVersion,
    /// The tag of the operator image in a manifest.
    ImageTag,
}

/// Every file and the pins it holds. The bundles in `dist/` are generated from `deploy/deployment.yaml`, so `release`
/// does not edit them (regenerating does); they are still checked, in case they were not regenerated.
pub const PINNED: &[(&str, &[Pin])] = &[
    ("Cargo.toml", &[Pin::WorkspaceVersion]),
    (
        "charts/coder-k8s/Chart.yaml",
        &[Pin::ChartVersion, Pin::ChartAppVersion],
    ),
    ("deploy/deployment.yaml", &[Pin::ImageTag]),
    ("dist/install.yaml", &[Pin::ImageTag]),
    ("dist/install-all.yaml", &[Pin::ImageTag]),
];

/// A line holding a pin: the text before the value, the value, the text after it.
#[derive(Debug, PartialEq, Eq)]
pub struct PinnedLine {
    pub index: usize,
    pub before: String,
    pub value: String,
    pub after: String,
}

/// The first line of `text` holding `pin`.
pub fn find(text: &str, pin: Pin) -> Option<PinnedLine> {
    let mut section = "";
    for (index, line) in text.lines().enumerate() {
        if line.starts_with('[') {
            section = line.trim();
        }
        let found = match pin {
            Pin::WorkspaceVersion if section == "[workspace.package]" => split(line, "version = \"", "\""),
            Pin::WorkspaceVersion => None,
            Pin::ChartVersion => split(line, "version: ", ""),
            Pin::ChartAppVersion => split(line, "appVersion: \"", "\""),
            Pin::ImageTag => line.find(&format!("image: {IMAGE_REPOSITORY}:")).and_then(|at| {
                let prefix = &line[..at + "image: ".len() + IMAGE_REPOSITORY.len() + 1];
                split(line, prefix, "")
            }),
        };
        if let Some((before, value, after)) = found {
            return Some(PinnedLine {
                index,
                before,
                value,
                after,
            });
        }
    }
    None
}

/// `line` as `prefix`, value, rest: the value ends at `suffix`, or with an empty `suffix` at the first blank (a YAML
/// comment may follow).
fn split(line: &str, prefix: &str, suffix: &str) -> Option<(String, String, String)> {
    let rest = line.strip_prefix(prefix)?;
    let end = if suffix.is_empty() {
        rest.find(char::is_whitespace).unwrap_or(rest.len())
    } else {
        rest.find(suffix)?
    };
    Some((prefix.to_owned(), rest[..end].to_owned(), rest[end..].to_owned()))
}

/// The workspace version: the version every other pin must state.
pub fn workspace_version(root: &Path) -> Result<String> {
    let text = read(root, "Cargo.toml")?;
    find(&text, Pin::WorkspaceVersion)
        .map(|line| line.value)
        .context("Cargo.toml has no version in [workspace.package]")
}

/// Every pin that does not state `expected`, or is missing, as `file: what` lines.
pub fn disagreements(root: &Path, expected: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for (file, pins) in PINNED {
        let text = read(root, file)?;
        for pin in *pins {
            match find(&text, *pin) {
                Some(line) if line.value == expected => {}
                Some(line) => out.push(format!(
                    "{file}: {pin:?} is {:?}, expected {expected:?}",
                    line.value
                )),
                None => out.push(format!("{file}: no {pin:?} found")),
            }
        }
    }
    Ok(out)
}

/// A release version: `MAJOR.MINOR.PATCH` with an optional `-pre.release` suffix, no leading `v` (image tags and the
/// chart carry it without one).
pub fn validate(version: &str) -> Result<()> {
    let (core, pre) = version.split_once('-').unwrap_or((version, ""));
    let numbers: Vec<&str> = core.split('.').collect();
    let numeric = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let pre_ok = version.find('-').is_none()
        || (!pre.is_empty()
            && pre
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'));
    if numbers.len() != 3 || !numbers.iter().all(|part| numeric(part)) || !pre_ok {
        bail!("{version:?} is not a release version (MAJOR.MINOR.PATCH[-PRERELEASE], without a leading v)");
    }
    Ok(())
}

/// Writes `version` into every hand-written pin (the generated bundles in `dist/` follow on `generate`).
pub fn set_version(root: &Path, version: &str) -> Result<Vec<PathBuf>> {
    validate(version)?;
    let mut written = Vec::new();
    for (file, pins) in PINNED.iter().filter(|(file, _)| !file.starts_with("dist/")) {
        let text = read(root, file)?;
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        for pin in *pins {
            let line = find(&text, *pin).with_context(|| format!("{file}: no {pin:?} found"))?;
            lines[line.index] = format!("{}{version}{}", line.before, line.after);
        }
        let mut updated = lines.join("\n");
        if text.ends_with('\n') {
            updated.push('\n');
        }
        fs::write(root.join(file), updated).with_context(|| format!("write {file}"))?;
        written.push(PathBuf::from(file));
    }
    Ok(written)
}

fn read(root: &Path, path: &str) -> Result<String> {
    fs::read_to_string(root.join(path)).with_context(|| format!("read {path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_workspace_version_only_in_its_section() {
        let text = "[package]\nversion = \"9.9.9\"\n[workspace.package]\nname = \"x\"\nversion = \"0.2.0\"\n";
        let line = find(text, Pin::WorkspaceVersion).expect("found");
        assert_eq!((line.index, line.value.as_str()), (4, "0.2.0"));
    }

    #[test]
    fn finds_the_image_tag_at_any_indentation_and_keeps_what_follows() {
        let line = find(
            "      - image: ghcr.io/coder/coder-k8s:0.2.0 # pinned\n",
            Pin::ImageTag,
        )
        .expect("found");
        assert_eq!(line.before, "      - image: ghcr.io/coder/coder-k8s:");
        assert_eq!((line.value.as_str(), line.after.as_str()), ("0.2.0", " # pinned"));
        assert!(find("image: ghcr.io/coder/coder:latest\n", Pin::ImageTag).is_none());
    }

    #[test]
    fn the_chart_version_is_not_mistaken_for_the_app_version() {
        let text = "apiVersion: v2\nversion: 0.2.0\nappVersion: \"0.3.0\"\n";
        assert_eq!(find(text, Pin::ChartVersion).expect("found").value, "0.2.0");
        assert_eq!(find(text, Pin::ChartAppVersion).expect("found").value, "0.3.0");
    }

    #[test]
    fn release_versions_have_three_numbers_and_no_v() {
        for good in ["0.2.0", "1.10.3", "0.3.0-rc.1"] {
            assert!(validate(good).is_ok(), "{good}");
        }
        for bad in [
            "v0.2.0",
            "0.2",
            "0.2.0.1",
            "latest",
            "0.2.x",
            "0.2.0-",
            "0.2.0-rc/1",
            "",
        ] {
            assert!(validate(bad).is_err(), "{bad}");
        }
    }
}
