//! `cargo xtask generate` writes the generated artefacts; `cargo xtask check [VERSION]` fails when they drift or when
//! the shipped files disagree on the release version (or, given one, do not state VERSION);
//! `cargo xtask release VERSION` writes VERSION into every shipped file and regenerates.
//! `cargo xtask image-write OUT --version V --revision R --ca-bundle FILE --amd64 BIN --arm64 BIN` writes the OCI
//! image layout; `cargo xtask image-check DIR` reads one back and checks it (see `xtask::image`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use xtask::image::{ImageInput, PlatformBinary};

fn main() -> ExitCode {
    let root = xtask::repo_root();
    let command = std::env::args().nth(1).unwrap_or_default();
    let result = match command.as_str() {
        "generate" => xtask::write_all(&root).map(|written| {
            for path in written {
                println!("wrote {}", path.display());
            }
        }),
        "check" => check(&root, std::env::args().nth(2)),
        "release" => std::env::args()
            .nth(2)
            .context("usage: cargo xtask release VERSION")
            .and_then(|version| release(&root, &version)),
        "image-write" => image_write(std::env::args().skip(2).collect()),
        "image-check" => std::env::args()
            .nth(2)
            .context("usage: cargo xtask image-check DIR")
            .and_then(|dir| xtask::image::check_layout(std::path::Path::new(&dir)))
            .map(|report| {
                for line in report {
                    println!("ok: {line}");
                }
            }),
        _ => Err(anyhow::anyhow!(
            "usage: cargo xtask generate|check [VERSION]|release VERSION|image-write|image-check"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Generated files up to date, and every shipped file stating the same release version (`expected` when given).
fn check(root: &std::path::Path, expected: Option<String>) -> Result<()> {
    let drifted = xtask::drifted(root)?;
    for path in &drifted {
        eprintln!("out of date: {}", path.display());
    }
    if !drifted.is_empty() {
        anyhow::bail!("generated files drifted from their sources; run `cargo xtask generate` and commit");
    }
    let expected = match expected {
        Some(version) => version,
        None => xtask::release::workspace_version(root)?,
    };
    let disagreements = xtask::release::disagreements(root, &expected)?;
    for line in &disagreements {
        eprintln!("version: {line}");
    }
    if !disagreements.is_empty() {
        anyhow::bail!(
            "the shipped files do not all state version {expected}; run `cargo xtask release {expected}`"
        );
    }
    println!("generated files are up to date; every shipped file states version {expected}");
    Ok(())
}

/// Writes `version` into the workspace, the chart and the manifests, updates the lock file's workspace entries and
/// regenerates `dist/install.yaml`.
fn release(root: &std::path::Path, version: &str) -> Result<()> {
    for path in xtask::release::set_version(root, version)? {
        println!("wrote {}", path.display());
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["update", "--workspace", "--offline"])
        .current_dir(root)
        .status()
        .context("run cargo update --workspace")?;
    anyhow::ensure!(status.success(), "cargo update --workspace failed ({status})");
    println!("wrote Cargo.lock");
    for path in xtask::write_all(root)? {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// `image-write OUT --version V --revision R --ca-bundle FILE --amd64 BIN --arm64 BIN`
fn image_write(args: Vec<String>) -> Result<()> {
    let usage = "usage: cargo xtask image-write OUT --version V --revision R --ca-bundle FILE --amd64 BIN --arm64 BIN";
    let (out, options) = args.split_first().context(usage)?;
    let mut pairs = std::collections::BTreeMap::new();
    for pair in options.chunks(2) {
        let [name, value] = pair else {
            anyhow::bail!("{usage}");
        };
        pairs.insert(name.as_str(), value.clone());
    }
    let mut take = |name: &str| {
        pairs
            .remove(name)
            .with_context(|| format!("missing {name}; {usage}"))
    };
    let input = ImageInput {
        version: take("--version")?,
        revision: take("--revision")?,
        ca_bundle: PathBuf::from(take("--ca-bundle")?),
        platforms: vec![
            PlatformBinary {
                architecture: "amd64".into(),
                binary: take("--amd64")?.into(),
            },
            PlatformBinary {
                architecture: "arm64".into(),
                binary: take("--arm64")?.into(),
            },
        ],
    };
    anyhow::ensure!(pairs.is_empty(), "unknown options {:?}; {usage}", pairs.keys());
    xtask::image::write_layout(std::path::Path::new(out), &input)?;
    println!("wrote the image layout {out} ({})", input.version);
    Ok(())
}
