//! Integration tests of the `coder-k8s` binary and the CRDs, against a real etcd + kube-apiserver built from Go
//! modules (crates/testenv) and the real kubectl.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod aggregated;
mod ai_gateway_key;
mod ai_provider;
mod cleanup_records;
mod cli;
mod coder_errors;
mod coder_writes;
mod compat;
mod control_plane;
mod crds;
mod high_availability;
mod lifecycle;
mod manifests;
mod mcp;
mod mcp_server;
mod observability;
mod operator_access;
mod ownership;
mod packaging;
mod provisioner;
mod rbac;
mod rbac_hardening;
mod real_coder;
mod support;
mod template_test;
mod upgrade;
mod workload_settings;
mod workspace_proxy;
