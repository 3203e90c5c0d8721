//! Control-plane access: the one place that answers "which Coder does this object talk to, and with which token?".
//!
//! The provisioner controller, the future AI controllers, the aggregated API server and the MCP server all need the
//! same three steps: find the `CoderControlPlane` an object refers to, check that its operator access is ready and
//! read its operator token, and build (or reuse) a Coder client for the control plane's in-cluster URL. This crate
//! holds those decisions as pure functions over objects the caller already has (from a watch cache or a GET), plus
//! the per-control-plane client and entitlement caches. It knows nothing of controllers: failures are an
//! [`AccessError`] that a controller maps to a condition reason and a server maps to an HTTP status.

mod clients;
mod resolve;
mod url;

pub use clients::{ClientCache, ClientSettings, EntitlementMemo};
pub use resolve::{AccessError, Target, TokenSource, resolve, token_source};
pub use url::{http_service_port, internal_url, service_host, tls_enabled};
