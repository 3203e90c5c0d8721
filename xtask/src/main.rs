//! `cargo xtask generate` writes the generated artefacts; `cargo xtask check` fails when they drift.

use std::process::ExitCode;

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
        _ => Err(anyhow::anyhow!("usage: cargo xtask generate|check")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
