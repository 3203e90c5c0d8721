//! The one Coder API client of coder-k8s, used by every controller, the aggregated API server and
//! the MCP server.
//!
//! * [`CoderClient`] sends the token in `Coder-Session-Token` ([`SessionToken`], redacted in
//!   `Debug`/`Display`), follows redirects only within the origin of the Coder URL ([`redirect`]),
//!   applies a timeout (30 s) and a body-size cap (4 MiB), and sends `X-Coder-Bypass-Ratelimit: true`
//!   on mutating calls, retrying once without it on 428.
//! * Errors are typed ([`Error`]); only Coder's own 404 is [`Error::NotFound`] (see [`error`]). Their
//!   texts are cleaned of credential-like text and cut short ([`redact`]), because they reach conditions and
//!   Events; a `Retry-After` is capped at [`error::MAX_RETRY_AFTER`].
//! * [`backoff`] computes requeue delays for rate-limited calls; [`calls::counted`] counts the requests a piece of
//!   work sends.
//! * [`ai`] holds the unstable AI routes in one place.
//! * [`schedule`] holds Coder's rules for a workspace's time to live and autostart schedule.
//! * The crate installs rustls' ring provider ([`install_ring_provider`]); aws-lc-rs is not used.

pub mod ai;
pub mod backoff;
pub mod calls;
mod client;
pub mod error;
pub mod observe;
pub mod redact;
pub mod redirect;
pub mod schedule;
mod secret;
pub mod types;

pub use client::{
    BYPASS_RATELIMIT_HEADER, ClientOptions, CoderClient, DEFAULT_LOG_IDLE_TIMEOUT, DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TIMEOUT, JsonAnswer, LogStream, Result, SESSION_TOKEN_HEADER, install_ring_provider,
};
pub use error::{Error, UnavailableReason, found};
pub use secret::{REDACTED, Secret, SessionToken};
