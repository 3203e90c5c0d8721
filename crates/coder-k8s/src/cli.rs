//! Command-line flags and their startup validation. The error texts are exactly those of coder-k8s v0.1.5, so scripts
//! and tests that match them keep working.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use coder_k8s_api::duration::parse_go_duration;

/// The modes of `--app`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppMode {
    /// Controllers plus the aggregated API server (the default). Never the MCP server.
    All,
    /// Controllers only.
    Controller,
    /// The aggregated API server only, with a static Coder backend from the flags.
    AggregatedApiserver,
    /// The MCP server only.
    McpHttp,
}

impl AppMode {
    /// Parses `--app`; an unknown value gets the exact v0.1.5 error.
    pub fn parse(value: &str) -> Result<Self, StartupError> {
        match value {
            "all" => Ok(Self::All),
            "controller" => Ok(Self::Controller),
            "aggregated-apiserver" => Ok(Self::AggregatedApiserver),
            "mcp-http" => Ok(Self::McpHttp),
            other => Err(StartupError(format!(
                "assertion failed: unsupported --app value {other:?}; must be one of: all, controller, aggregated-apiserver, mcp-http"
            ))),
        }
    }

    /// The value as written on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Controller => "controller",
            Self::AggregatedApiserver => "aggregated-apiserver",
            Self::McpHttp => "mcp-http",
        }
    }
}

/// Log output format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Flags of the `coder-k8s` binary.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "coder-k8s",
    version,
    about = "Kubernetes operator, aggregated API server and MCP server for Coder"
)]
pub struct Args {
    /// Component to run: all, controller, aggregated-apiserver or mcp-http.
    #[arg(long, default_value = "all")]
    pub app: String,
    /// Coder URL for the standalone aggregated API server.
    #[arg(long, default_value = "")]
    pub coder_url: String,
    /// Coder session token (owner) for the standalone aggregated API server.
    #[arg(long, default_value = "", env = "CODER_SESSION_TOKEN", hide_env_values = true)]
    pub coder_session_token: String,
    /// Kubernetes namespace that the standalone aggregated API server serves.
    #[arg(long, default_value = "")]
    pub coder_namespace: String,
    /// Timeout of every Coder API call (Go duration, for example 30s). 0 means 30s.
    #[arg(long, default_value = "30s")]
    pub coder_request_timeout: String,
    /// File with the MCP bearer token (required for --app=mcp-http).
    #[arg(long)]
    pub mcp_token_file: Option<PathBuf>,
    /// Address of the MCP server (--app=mcp-http). The default listens on the loopback only: reach it with kubectl
    /// port-forward. Another address exposes a bearer-token-only admin endpoint to the network (docs/mcp.md).
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub mcp_bind_address: String,
    /// Address of the health, readiness and metrics server. Without a host (`:8081`) it listens on every IPv6 and
    /// IPv4 address (IPv4 only where IPv6 is unavailable).
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: String,
    /// Address of the aggregated API server (HTTPS; modes all and aggregated-apiserver). Without a host (`:6443`) it
    /// listens on every IPv6 and IPv4 address.
    #[arg(long, default_value = ":6443")]
    pub apiserver_bind_address: String,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Resolve Coder Service hosts (`*.svc.cluster.local`) to this IP address: for an operator running outside the
    /// cluster (local environment, tests). URLs, Host headers and the same-origin rule are unchanged.
    #[arg(long)]
    pub service_address_override: Option<std::net::IpAddr>,
    /// Leader election on the Lease `coder-k8s-controller.coder.com`. Only the holder runs the controllers.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Reconciles of one kind that run at the same time (at least 1).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reconciles: u16,
    /// Refuse control planes whose workspace RBAC (`spec.rbac.extraRules`, `spec.rbac.workspaceNamespaces`) grants
    /// Secrets, RBAC objects, the verbs escalate/bind/impersonate or wildcards, or reaches a namespace without the
    /// label `coder.com/workspace-namespace=true`. Off by default (v0.1.5 behaviour).
    #[arg(long, default_value_t = false)]
    pub restrict_workspace_rbac: bool,
    /// After SIGTERM, how long the aggregated API server keeps serving while `/readyz` already fails (Go duration, 0
    /// to stop at once): time for the Service's endpoints to drop this pod before its listener closes, so no request
    /// reaches a closed port during a rollout. Must stay below the pod's termination grace period.
    #[arg(long, default_value = "5s")]
    pub shutdown_delay: String,
    /// Requeue interval of the controllers (Go duration). Hidden: for tests and benchmarks.
    #[arg(long, default_value = "30s", hide = true)]
    pub requeue_interval: String,
    /// Requeue interval of the entitlement checks (Go duration). Hidden: for tests and benchmarks.
    #[arg(long, default_value = "2m", hide = true)]
    pub entitlements_interval: String,
    /// Reconcile only this namespace (default: every namespace). Hidden: for tests.
    #[arg(long, hide = true)]
    pub watch_namespace: Option<String>,
}

/// A startup error: printed as is, exit code 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StartupError(pub String);

/// Validated settings derived from [`Args`].
#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: AppMode,
    pub coder_url: Option<url::Url>,
    pub coder_request_timeout: Duration,
    pub health_probe_bind_address: String,
    pub apiserver_bind_address: String,
    pub mcp_bind_address: String,
    pub log_format: LogFormat,
    pub leader_elect: bool,
    pub service_address_override: Option<std::net::IpAddr>,
    pub max_concurrent_reconciles: u16,
    pub restrict_workspace_rbac: bool,
    pub shutdown_delay: Duration,
    pub requeue_interval: Duration,
    pub entitlements_interval: Duration,
    pub watch_namespace: Option<String>,
}

/// Default Coder request timeout.
pub const DEFAULT_CODER_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

impl Args {
    /// Validates the flags that every mode checks at startup.
    pub fn validate(&self) -> Result<Settings, StartupError> {
        let mode = AppMode::parse(&self.app)?;
        let coder_url = if self.coder_url.is_empty() {
            None
        } else {
            Some(validate_coder_url(&self.coder_url)?)
        };
        Ok(Settings {
            mode,
            coder_url,
            coder_request_timeout: validate_request_timeout(&self.coder_request_timeout)?,
            health_probe_bind_address: self.health_probe_bind_address.clone(),
            apiserver_bind_address: self.apiserver_bind_address.clone(),
            mcp_bind_address: self.mcp_bind_address.clone(),
            log_format: self.log_format,
            leader_elect: self.leader_elect,
            service_address_override: self.service_address_override,
            max_concurrent_reconciles: self.max_concurrent_reconciles,
            restrict_workspace_rbac: self.restrict_workspace_rbac,
            shutdown_delay: validate_shutdown_delay(&self.shutdown_delay)?,
            requeue_interval: validate_interval("--requeue-interval", &self.requeue_interval)?,
            entitlements_interval: validate_interval("--entitlements-interval", &self.entitlements_interval)?,
            watch_namespace: self.watch_namespace.clone().filter(|ns| !ns.is_empty()),
        })
    }
}

/// A hidden interval flag: a positive Go duration.
fn validate_interval(flag: &str, value: &str) -> Result<Duration, StartupError> {
    let parsed = parse_go_duration(value)
        .map_err(|error| StartupError(format!("assertion failed: invalid {flag} {value:?}: {error}")))?;
    if parsed.negative || parsed.duration.is_zero() {
        return Err(StartupError(format!(
            "assertion failed: {flag} must be positive (got {value:?})"
        )));
    }
    Ok(parsed.duration)
}

/// The longest `--shutdown-delay`: it must leave the reconciles and connections in flight time to finish within
/// Kubernetes' default termination grace period of 30 s.
pub const MAX_SHUTDOWN_DELAY: Duration = Duration::from_secs(20);

/// `--shutdown-delay`: a Go duration from 0 to [`MAX_SHUTDOWN_DELAY`].
pub fn validate_shutdown_delay(value: &str) -> Result<Duration, StartupError> {
    let parsed = parse_go_duration(value)
        .map_err(|error| StartupError(format!("invalid --shutdown-delay {value:?}: {error}")))?;
    if parsed.negative || parsed.duration > MAX_SHUTDOWN_DELAY {
        return Err(StartupError(format!(
            "--shutdown-delay must be between 0s and {}s (got {value:?})",
            MAX_SHUTDOWN_DELAY.as_secs()
        )));
    }
    Ok(parsed.duration)
}

/// `--coder-url` must parse, have a scheme and a host, and use http or https (case-insensitive). The error quotes
/// the value without its user information, which may hold a password or token.
pub fn validate_coder_url(value: &str) -> Result<url::Url, StartupError> {
    let invalid = |reason: &str| {
        StartupError(format!(
            "assertion failed: invalid --coder-url {:?}: {reason}",
            without_userinfo(value)
        ))
    };
    const NEEDS: &str = "must include scheme and host (for example, https://coder.example.com)";
    if !value.contains("://") {
        // A relative reference such as `coder.example.com` has neither scheme nor host.
        return Err(invalid(NEEDS));
    }
    let parsed = match url::Url::parse(value) {
        Ok(parsed) => parsed,
        Err(url::ParseError::EmptyHost) => return Err(invalid(NEEDS)),
        Err(error) => return Err(invalid(&error.to_string())),
    };
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid(NEEDS));
    }
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid("scheme must be http or https"));
    }
    Ok(parsed)
}

/// `value` with the user information of its authority (`user:password@`, also without a scheme) replaced: up to
/// the last `@` of the whole value, since a password may contain `/`, `?` or `#` (over-redacting a path with an
/// `@` in an error message is the safe side).
fn without_userinfo(value: &str) -> String {
    let (scheme, rest) = match value.find("://") {
        Some(at) => value.split_at(at + 3),
        None => ("", value),
    };
    match rest.rfind('@') {
        Some(at) => format!("{scheme}{}{}", coder_k8s_coder_client::REDACTED, &rest[at..]),
        None => value.to_owned(),
    }
}

/// What the command line asks for.
#[derive(Debug)]
pub enum CommandLine {
    /// Run with these flags; `ignored` are the arguments after the flags (Go's `flag` package ignores them too).
    Run { args: Box<Args>, ignored: Vec<String> },
    /// Print this text (help or version) on stdout and exit 0.
    Print(String),
}

/// A refused command line: the message (Go's text where the v0.1.5 binary refused it) and the usage to print after.
#[derive(Debug)]
pub struct CommandLineError {
    pub message: String,
    pub usage: String,
}

/// Parses the command line (program name first) with Go's flag syntax ([`crate::go_flags`]), then clap's types.
pub fn parse_command_line(raw: &[String]) -> Result<CommandLine, CommandLineError> {
    use clap::CommandFactory as _;
    let mut command = Args::command();
    let usage = command.render_help().to_string();
    let refused = |message: String| CommandLineError {
        message,
        usage: usage.clone(),
    };
    let (args, ignored) = match crate::go_flags::normalize(&command, raw) {
        Ok(crate::go_flags::Request::Help) => return Ok(CommandLine::Print(usage.clone())),
        Ok(crate::go_flags::Request::Run { args, ignored }) => (args, ignored),
        Err(error) => return Err(refused(error.0)),
    };
    match Args::try_parse_from(args) {
        Ok(args) => Ok(CommandLine::Run {
            args: Box::new(args),
            ignored,
        }),
        Err(error)
            if matches!(
                error.kind(),
                clap::error::ErrorKind::DisplayVersion | clap::error::ErrorKind::DisplayHelp
            ) =>
        {
            Ok(CommandLine::Print(error.to_string()))
        }
        Err(error) => Err(refused(clap_message(&error))),
    }
}

/// The first line of a clap error without clap's `error: ` prefix.
fn clap_message(error: &clap::Error) -> String {
    let text = error.to_string();
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_owned()
}

/// `--coder-request-timeout`: a Go duration; 0 means the 30 s default; negative is an error.
pub fn validate_request_timeout(value: &str) -> Result<Duration, StartupError> {
    let parsed = parse_go_duration(value).map_err(|error| {
        StartupError(format!(
            "assertion failed: invalid --coder-request-timeout {value:?}: {error}"
        ))
    })?;
    if parsed.negative {
        return Err(StartupError(format!(
            "assertion failed: coder request timeout must not be negative (got {value:?})"
        )));
    }
    Ok(if parsed.duration.is_zero() {
        DEFAULT_CODER_REQUEST_TIMEOUT
    } else {
        parsed.duration
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_app_has_the_contract_message() {
        let error = AppMode::parse("bogus").unwrap_err();
        assert_eq!(
            error.0,
            r#"assertion failed: unsupported --app value "bogus"; must be one of: all, controller, aggregated-apiserver, mcp-http"#
        );
        for mode in [
            AppMode::All,
            AppMode::Controller,
            AppMode::AggregatedApiserver,
            AppMode::McpHttp,
        ] {
            assert_eq!(AppMode::parse(mode.as_str()), Ok(mode));
        }
    }

    #[test]
    fn coder_url_rules() {
        assert!(validate_coder_url("https://coder.example.com").is_ok());
        assert!(validate_coder_url("HTTP://coder.example.com:8080/").is_ok());
        assert_eq!(
            validate_coder_url("coder.example.com").unwrap_err().0,
            r#"assertion failed: invalid --coder-url "coder.example.com": must include scheme and host (for example, https://coder.example.com)"#
        );
        assert_eq!(
            validate_coder_url("http://").unwrap_err().0,
            r#"assertion failed: invalid --coder-url "http://": must include scheme and host (for example, https://coder.example.com)"#
        );
        assert_eq!(
            validate_coder_url("ftp://coder.example.com").unwrap_err().0,
            r#"assertion failed: invalid --coder-url "ftp://coder.example.com": scheme must be http or https"#
        );
        assert_eq!(
            validate_coder_url("ftp://admin:hunter2@coder.example.com")
                .unwrap_err()
                .0,
            r#"assertion failed: invalid --coder-url "ftp://[redacted]@coder.example.com": scheme must be http or https"#
        );
        assert_eq!(
            validate_coder_url("admin:hunter2@coder.example.com/x")
                .unwrap_err()
                .0,
            r#"assertion failed: invalid --coder-url "[redacted]@coder.example.com/x": must include scheme and host (for example, https://coder.example.com)"#
        );
        let error = validate_coder_url("http://user:s3cret@exa mple.com")
            .unwrap_err()
            .0;
        assert!(!error.contains("s3cret") && !error.contains("user"), "{error}");
        for url in [
            "https://admin:pa/ss@host",
            "https://u:p#w@host:x",
            "https://u:p?w@host:99999",
        ] {
            let error = validate_coder_url(url).unwrap_err().0;
            assert!(error.contains("https://[redacted]@host"), "{error}");
            assert!(
                !error.contains("pa/ss") && !error.contains("p#w") && !error.contains("p?w"),
                "{error}"
            );
        }
        let parse_error = validate_coder_url("http://exa mple.com").unwrap_err().0;
        assert!(parse_error.starts_with(r#"assertion failed: invalid --coder-url "http://exa mple.com": "#));
    }

    #[test]
    fn request_timeout_rules() {
        assert_eq!(validate_request_timeout("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(validate_request_timeout("0"), Ok(DEFAULT_CODER_REQUEST_TIMEOUT));
        assert_eq!(validate_request_timeout("1m30s"), Ok(Duration::from_secs(90)));
        assert!(
            validate_request_timeout("-5s")
                .unwrap_err()
                .0
                .starts_with("assertion failed: coder request timeout must not be negative")
        );
        assert!(validate_request_timeout("soon").is_err());
    }

    fn command_line(args: &[&str]) -> Result<CommandLine, CommandLineError> {
        let raw: Vec<String> = std::iter::once("coder-k8s")
            .chain(args.iter().copied())
            .map(str::to_owned)
            .collect();
        parse_command_line(&raw)
    }

    fn parsed(args: &[&str]) -> Args {
        match command_line(args) {
            Ok(CommandLine::Run { args, .. }) => *args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn go_flag_forms_reach_the_typed_flags() {
        let args = parsed(&[
            "-app=controller",
            "-coder-url",
            "https://coder.example.com",
            "--max-concurrent-reconciles",
            "3",
            "-leader-elect=false",
        ]);
        assert_eq!(args.app, "controller");
        assert_eq!(args.coder_url, "https://coder.example.com");
        assert_eq!(args.max_concurrent_reconciles, 3);
        assert!(!args.leader_elect);
        assert!(parsed(&["-leader-elect"]).leader_elect);
        assert!(parsed(&[]).leader_elect);
        assert_eq!(parsed(&[]).health_probe_bind_address, ":8081");
    }

    #[test]
    fn refused_command_lines_carry_a_message_and_the_usage() {
        let error = command_line(&["-bogus"]).unwrap_err();
        assert_eq!(error.message, "flag provided but not defined: -bogus");
        assert!(error.usage.contains("--app"), "{}", error.usage);
        let error = command_line(&["-max-concurrent-reconciles=0"]).unwrap_err();
        assert!(
            error.message.contains("max-concurrent-reconciles"),
            "{}",
            error.message
        );
        assert!(matches!(command_line(&["-h"]), Ok(CommandLine::Print(text)) if text.contains("--app")));
        assert!(matches!(command_line(&["-version"]), Ok(CommandLine::Print(_))));
    }

    #[test]
    fn hidden_interval_flags() {
        let settings = Args::parse_from(["coder-k8s"]).validate().unwrap();
        assert_eq!(settings.requeue_interval, Duration::from_secs(30));
        assert_eq!(settings.entitlements_interval, Duration::from_secs(120));
        let args = Args::parse_from([
            "coder-k8s",
            "--requeue-interval=2s",
            "--entitlements-interval=1m30s",
        ]);
        let settings = args.validate().unwrap();
        assert_eq!(settings.requeue_interval, Duration::from_secs(2));
        assert_eq!(settings.entitlements_interval, Duration::from_secs(90));
        for bad in ["0", "-1s", "soon"] {
            let args = Args::parse_from(["coder-k8s", &format!("--requeue-interval={bad}")]);
            assert!(args.validate().is_err(), "{bad}");
        }
        use clap::CommandFactory as _;
        let help = Args::command().render_long_help().to_string();
        assert!(!help.contains("requeue-interval") && !help.contains("entitlements-interval"));
    }

    #[test]
    fn shutdown_delay_is_a_bounded_go_duration() {
        let settings = Args::parse_from(["coder-k8s"]).validate().unwrap();
        assert_eq!(settings.shutdown_delay, Duration::from_secs(5));
        for (value, expected) in [
            ("0", 0),
            ("0s", 0),
            ("2s", 2_000),
            ("1500ms", 1_500),
            ("20s", 20_000),
        ] {
            let args = Args::parse_from(["coder-k8s", &format!("--shutdown-delay={value}")]);
            assert_eq!(
                args.validate().unwrap().shutdown_delay,
                Duration::from_millis(expected),
                "{value}"
            );
        }
        for bad in ["-1s", "21s", "1m", "soon"] {
            let args = Args::parse_from(["coder-k8s", &format!("--shutdown-delay={bad}")]);
            let error = args.validate().unwrap_err();
            assert!(error.0.contains("--shutdown-delay"), "{bad}: {error}");
        }
    }

    #[test]
    fn workspace_rbac_hardening_is_opt_in() {
        let settings = Args::parse_from(["coder-k8s"]).validate().unwrap();
        assert!(!settings.restrict_workspace_rbac, "v0.1.5 behaviour by default");
        let settings = Args::parse_from(["coder-k8s", "--restrict-workspace-rbac"])
            .validate()
            .unwrap();
        assert!(settings.restrict_workspace_rbac);
    }
}
