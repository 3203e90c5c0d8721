//! The `coder-k8s` binary: parses the flags, runs the startup checks and the selected components.

use std::process::ExitCode;

use coder_k8s::cli::{CommandLine, LogFormat, parse_command_line};
use coder_k8s::{app, build_info, telemetry};

fn main() -> ExitCode {
    // Arguments that are not UTF-8 are read lossily rather than panicking.
    let raw: Vec<String> = std::env::args_os()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    if build_info::is_version_request(raw.iter().cloned()) {
        println!("{}", build_info::version_line());
        return ExitCode::SUCCESS;
    }
    let (args, ignored) = match parse_command_line(&raw) {
        Ok(CommandLine::Run { args, ignored }) => (args, ignored),
        Ok(CommandLine::Print(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            // As Go's flag package: the error, then the usage, on stderr; then the v0.1.5 exit.
            telemetry::init(LogFormat::default());
            eprintln!("{}", error.message);
            eprint!("{}", error.usage);
            log_failure(&error.message);
            return ExitCode::from(1);
        }
    };
    telemetry::init(args.log_format);
    if !ignored.is_empty() {
        // Only how many: an argument can hold a credential (e.g. a mistyped flag after the first non-flag).
        tracing::warn!(count = ignored.len(), "ignoring the arguments after the flags");
    }
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
    log_failure(error);
    eprintln!("{error}");
    ExitCode::from(1)
}

fn log_failure(error: &dyn std::fmt::Display) {
    tracing::error!(logger = "setup", error = %error, "application failed");
}
