//! Delegated authentication, authorization and the TLS accept loop against the real test control plane
//! (etcd + kube-apiserver started with the front-proxy flags).
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod authn;
mod authz;
mod support;
mod tls;
