//! The aggregated API server behind kube-apiserver's APIService `v1alpha1.aggregation.coder.com`.
//!
//! Three parts, by dependency direction:
//! - [`generic`]: a small Kubernetes API extension server that knows nothing of Coder: request parsing, delegated
//!   authentication and authorization, discovery, OpenAPI, the verb handlers over a per-resource [`generic::Storage`],
//!   Table output, watch streams and `Status` errors. Resources are registered in one [`generic::Registry`].
//! - [`serving`]: the serving certificate kept in the Secret `coder-k8s-apiserver-tls`, renewed and hot-reloaded,
//!   and the controller that keeps the APIService's `caBundle` in step with it.
//! - [`coder`]: the `aggregation.coder.com/v1alpha1` resources: their registry table, name rules, the control-plane
//!   provider that picks the Coder deployment for a namespace, and Coder error mapping.
//! - [`run`]: the start-up sequence and serving loop a process calls.

pub mod coder;
pub mod generic;
pub mod run;
pub mod serving;
