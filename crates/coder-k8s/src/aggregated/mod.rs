//! The aggregated API server in this process (`--app=all` beside the controllers, `--app=aggregated-apiserver`
//! alone): the standalone flag rules, the Kubernetes configuration used for delegated authentication, and the
//! start of the server from the `coder-k8s-aggregated-apiserver` crate.

mod flags;
mod kubeconfig;
mod serve;

pub use flags::{StaticBackend, standalone_backend};
pub use kubeconfig::{DelegationConfigError, delegation_config};
pub use serve::run;
