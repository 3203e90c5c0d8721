//! The `coder-k8s` binary: parses the flags, runs the startup checks and the selected components.

use std::process::ExitCode;

use clap::Parser;
use coder_k8s::{app, build_info, cli::Args, telemetry};

fn main() -> ExitCode {
    if build_info::is_version_request(std::env::args()) {
        println!("{}", build_info::version_line());
        return ExitCode::SUCCESS;
    }
    let args = Args::parse();
    telemetry::init(args.log_format);
    let startup = match app::startup_checks(&args) {
        Ok(startup) => startup,
        Err(error) => return fail(&error),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(&error),
    };
    match runtime.block_on(app::run(startup)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&format!("{error:#}")),
    }
}

/// Logs `application failed` and prints the error alone on stderr, then exits 1 (the v0.1.5 behaviour).
fn fail(error: &dyn std::fmt::Display) -> ExitCode {
    tracing::error!(logger = "setup", error = %error, "application failed");
    eprintln!("{error}");
    ExitCode::from(1)
}
