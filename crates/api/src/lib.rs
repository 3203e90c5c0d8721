//! Types of the `coder.com/v1alpha1` custom resources, one module per kind, plus the generators of their CRDs and
//! reference documentation.

// `#[kube(printcolumn(...))]` repeats keys such as `type_` and `json_path` by design.
#![allow(clippy::duplicated_attributes)]

pub mod aggregation;
pub mod ai_gateway_key;
pub mod ai_provider;
pub mod control_plane;
pub mod duration;
pub mod generate;
pub mod mcp_server;
pub mod provisioner;
pub mod schema_compat;
pub mod shared;
pub mod template_test;
pub mod workload;
pub mod workspace_proxy;
