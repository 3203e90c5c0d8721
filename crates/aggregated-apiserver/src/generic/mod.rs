//! A generic Kubernetes API extension server. Nothing here knows of Coder: a caller registers resources, each with
//! a [`Storage`], and gets an HTTP server value that kube-apiserver can aggregate.

pub mod auth;
pub mod authn;
pub mod authz;
pub mod caller;
pub mod discovery;
pub mod encoded_lists;
pub mod feed;
pub mod handlers;
pub mod kube_call;
pub mod memory;
pub mod metrics;
pub mod negotiate;
pub mod openapi;
pub mod registry;
pub mod request_info;
pub mod selectors;
pub mod server;
pub mod status;
pub mod storage;
pub mod table;
pub mod tls;
mod ttl_cache;
pub mod watch;

pub use auth::{Attributes, Authenticator, Authorizer, Decision, PeerCertificates, UserInfo};
pub use feed::{FeedLease, FeedRequest, WatchFeed};
pub use registry::{
    Column, ParentEvent, Registry, ResourceDef, SubresourceDef, SubresourceHandler, SubresourceRequest, Verb,
};
pub use server::ApiServer;
pub use status::ApiError;
pub use storage::{Deleted, EventType, RequestContext, Storage, Written};

/// Why the server cannot start (the process exits with this message). Messages begin with what was being set up,
/// e.g. `configure delegated authentication: ...`, and never contain a credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartupError(pub String);

impl std::fmt::Display for StartupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartupError {}
