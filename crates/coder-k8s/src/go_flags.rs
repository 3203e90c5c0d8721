//! The command-line syntax of Go's `flag` package, in front of clap, so every command line the v0.1.5 binary
//! accepted is accepted here and every one it refused is refused with the same text.
//!
//! Go's rules: a flag is `-name` or `--name` (one or two dashes mean the same), its value follows `=` or comes as
//! the next argument; a boolean flag takes its value only after `=` (`-leader-elect`, `-leader-elect=false`);
//! parsing stops at the first argument that is not a flag (or after `--`) and the rest is ignored; a repeated flag
//! keeps its last value; `-h` and `-help` ask for the usage. [`normalize`] checks these rules and rewrites the
//! flags as `--name=value`, which clap then parses and validates.

use std::collections::HashMap;

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Run with these arguments (program name first, every flag as `--name=value` or `--name`); `ignored` are the
    /// arguments after the flags, which Go's `flag` package leaves unread too.
    Run { args: Vec<String>, ignored: Vec<String> },
    /// `-h`, `-help`, `--help`: print the usage.
    Help,
}

/// A command line the Go binary refused; the text is Go's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlagError(pub String);

/// How a flag takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A value, after `=` or as the next argument.
    Value,
    /// A boolean written as `--name=<bool>` for clap.
    Bool,
    /// A boolean that clap takes as a bare switch (`--name`; absent means false).
    Switch,
}

fn shape(arg: &clap::Arg) -> Shape {
    if !arg.get_action().takes_values() {
        Shape::Switch
    } else if arg.get_num_args().is_some_and(|range| range.min_values() == 0) {
        Shape::Bool
    } else {
        Shape::Value
    }
}

/// The flags `command` defines, by long name.
fn shapes(command: &clap::Command) -> HashMap<String, Shape> {
    let mut shapes: HashMap<String, Shape> = command
        .get_arguments()
        .filter_map(|arg| Some((arg.get_long()?.to_owned(), shape(arg))))
        .collect();
    if command.get_version().is_some() {
        shapes.insert("version".to_owned(), Shape::Switch);
    }
    shapes
}

/// `arg` without what follows its first `=`: Go prints the whole argument, but its value can be a credential.
fn without_value(arg: &str) -> String {
    match arg.split_once('=') {
        Some((flag, _)) => format!("{flag}={}", coder_k8s_coder_client::REDACTED),
        None => arg.to_owned(),
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Checks `args` (program name first) against Go's rules for the flags of `command` and rewrites them for clap.
pub fn normalize(command: &clap::Command, args: &[String]) -> Result<Request, FlagError> {
    let shapes = shapes(command);
    let program = args
        .first()
        .cloned()
        .unwrap_or_else(|| command.get_name().to_owned());
    let mut values: Vec<(String, Option<String>)> = Vec::new();
    let mut rest = args.iter().skip(1);
    let mut ignored = Vec::new();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            ignored.extend(rest.by_ref().cloned());
            break;
        }
        let Some(flag) = arg.strip_prefix('-').filter(|flag| !flag.is_empty()) else {
            ignored.push(arg.clone());
            ignored.extend(rest.by_ref().cloned());
            break;
        };
        let flag = flag.strip_prefix('-').unwrap_or(flag);
        if flag.is_empty() || flag.starts_with('-') || flag.starts_with('=') {
            return Err(FlagError(format!("bad flag syntax: {}", without_value(arg))));
        }
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (flag, None),
        };
        let Some(&shape) = shapes.get(name) else {
            if name == "help" || name == "h" {
                return Ok(Request::Help);
            }
            return Err(FlagError(format!("flag provided but not defined: -{name}")));
        };
        let value = match shape {
            Shape::Value => match inline {
                Some(value) => Some(value.to_owned()),
                None => Some(
                    rest.next()
                        .cloned()
                        .ok_or_else(|| FlagError(format!("flag needs an argument: -{name}")))?,
                ),
            },
            Shape::Bool | Shape::Switch => {
                let value = inline.unwrap_or("true");
                let parsed = parse_bool(value).ok_or_else(|| {
                    FlagError(format!(
                        "invalid boolean value {value:?} for -{name}: parse error"
                    ))
                })?;
                Some(parsed.to_string())
            }
        };
        // A repeated flag keeps its last value, as in Go.
        values.retain(|(seen, _)| seen != name);
        values.push((name.to_owned(), value));
    }
    let mut clap_args = vec![program];
    for (name, value) in values {
        match (shapes.get(&name), value.as_deref()) {
            (Some(Shape::Switch), Some("false")) => {}
            (Some(Shape::Switch), _) => clap_args.push(format!("--{name}")),
            (_, Some(value)) => clap_args.push(format!("--{name}={value}")),
            (_, None) => clap_args.push(format!("--{name}")),
        }
    }
    Ok(Request::Run {
        args: clap_args,
        ignored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> clap::Command {
        clap::Command::new("t")
            .version("1")
            .arg(clap::Arg::new("app").long("app"))
            .arg(clap::Arg::new("coder-url").long("coder-url"))
            .arg(
                clap::Arg::new("leader-elect")
                    .long("leader-elect")
                    .num_args(0..=1)
                    .value_parser(clap::value_parser!(bool)),
            )
            .arg(
                clap::Arg::new("verbose")
                    .long("verbose")
                    .action(clap::ArgAction::SetTrue),
            )
    }

    fn run(args: &[&str]) -> Result<Request, FlagError> {
        let mut all = vec!["coder-k8s".to_owned()];
        all.extend(args.iter().map(|arg| (*arg).to_owned()));
        normalize(&command(), &all)
    }

    fn flags(args: &[&str]) -> Vec<String> {
        match run(args) {
            Ok(Request::Run { args, .. }) => args[1..].to_vec(),
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn every_go_form_of_a_value_flag() {
        for form in [
            &["-app=controller"][..],
            &["-app", "controller"],
            &["--app=controller"],
            &["--app", "controller"],
        ] {
            assert_eq!(flags(form), ["--app=controller"], "{form:?}");
        }
        assert_eq!(flags(&["-app="]), ["--app="], "an empty value is a value");
        assert_eq!(
            flags(&["-app", "-coder-url"]),
            ["--app=-coder-url"],
            "the next argument is the value"
        );
    }

    #[test]
    fn boolean_flags_take_a_value_only_after_equals() {
        assert_eq!(flags(&["-leader-elect"]), ["--leader-elect=true"]);
        assert_eq!(flags(&["--leader-elect=false"]), ["--leader-elect=false"]);
        assert_eq!(flags(&["-leader-elect=F"]), ["--leader-elect=false"]);
        assert_eq!(flags(&["-leader-elect=1"]), ["--leader-elect=true"]);
        assert_eq!(flags(&["-verbose"]), ["--verbose"]);
        assert!(flags(&["-verbose=false"]).is_empty());
        assert_eq!(
            run(&["-leader-elect=yes"]),
            Err(FlagError(
                r#"invalid boolean value "yes" for -leader-elect: parse error"#.to_owned()
            ))
        );
        // `false` after a boolean flag is not its value: it ends the flags.
        assert_eq!(
            run(&["-leader-elect", "false", "-app=x"]),
            Ok(Request::Run {
                args: vec!["coder-k8s".to_owned(), "--leader-elect=true".to_owned()],
                ignored: vec!["false".to_owned(), "-app=x".to_owned()],
            })
        );
    }

    #[test]
    fn go_error_texts() {
        let error = |args: &[&str]| run(args).unwrap_err().0;
        assert_eq!(error(&["-bogus"]), "flag provided but not defined: -bogus");
        assert_eq!(error(&["--bogus=1"]), "flag provided but not defined: -bogus");
        assert_eq!(error(&["-app"]), "flag needs an argument: -app");
        assert_eq!(error(&["---app=x"]), "bad flag syntax: ---app=[redacted]");
        assert_eq!(error(&["-=x"]), "bad flag syntax: -=[redacted]");
        assert_eq!(error(&["--="]), "bad flag syntax: --=[redacted]");
        assert_eq!(
            error(&["---coder-session-token=s3cret-value"]),
            "bad flag syntax: ---coder-session-token=[redacted]",
            "a mistyped flag never shows its value"
        );
    }

    #[test]
    fn help_version_repeats_and_the_end_of_the_flags() {
        for help in ["-h", "--h", "-help", "--help"] {
            assert_eq!(run(&["-app=x", help]), Ok(Request::Help), "{help}");
        }
        assert_eq!(flags(&["-version"]), ["--version"]);
        assert_eq!(
            flags(&["-app=a", "--app", "b"]),
            ["--app=b"],
            "the last value wins"
        );
        assert_eq!(
            run(&["-app=a", "--", "-bogus"]),
            Ok(Request::Run {
                args: vec!["coder-k8s".to_owned(), "--app=a".to_owned()],
                ignored: vec!["-bogus".to_owned()],
            })
        );
        assert_eq!(
            run(&["extra", "-bogus"]),
            Ok(Request::Run {
                args: vec!["coder-k8s".to_owned()],
                ignored: vec!["extra".to_owned(), "-bogus".to_owned()],
            })
        );
        assert_eq!(
            run(&["-", "-bogus"]),
            Ok(Request::Run {
                args: vec!["coder-k8s".to_owned()],
                ignored: vec!["-".to_owned(), "-bogus".to_owned()],
            })
        );
    }
}
