//! The aggregated API server in this process (`--app=all` beside the controllers, `--app=aggregated-apiserver`
//! alone): the standalone flag rules, the Kubernetes configuration used for delegated authentication, the
//! controllers' caches as its source of control planes in `all` mode, and the start of the server from the
//! `coder-k8s-aggregated-apiserver` crate.

mod cached_reads;
mod flags;
mod kubeconfig;
mod serve;

pub use cached_reads::CachedReads;
pub use flags::{StaticBackend, standalone_backend};
pub use kubeconfig::{DelegationConfigError, delegation_config};
pub use serve::run;
