//! `cargo xtask generate` writes the generated artefacts; `cargo xtask check` fails when they drift.
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
        "check" => xtask::drifted(&root).and_then(|drifted| {
            if drifted.is_empty() {
                println!("generated files are up to date");
                Ok(())
            } else {
                for path in &drifted {
                    eprintln!("out of date: {}", path.display());
                }
                anyhow::bail!(
                    "generated files drifted from the Rust types; run `cargo xtask generate` and commit"
                )
            }
        }),
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
            "usage: cargo xtask generate|check|image-write|image-check"
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
