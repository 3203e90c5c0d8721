//! The controllers of `coder.com/v1alpha1` (docs/controllers/README.md), one module per kind, each in one shape:
//! `inputs` (what a pass reads) → `desired` (pure: what should exist) → `status` (pure: conditions and reasons) →
//! `reconcile` (the I/O shell) with `coder` (its Coder calls) and `mod` (wiring: the kind's triggers and steps).
//! What they share is written once, in layers that never import upward:
//! - leaves, pure: `labels` (every label and annotation), `digest`, `decode`, `conditions`, `ownership`, `refusal`,
//!   `sync_status` (the AI kinds' outcome), `credentials`, `secrets`, `takeover`, `halt` (the one stop type),
//!   `error`, `metrics`, `optional_kinds` (HTTPRoute and ServiceMonitor), `settings`, `workload` (pure builders of
//!   env, Services and the settings every workload kind shares), `memory` (per-object memory), `rate_limits` (the
//!   gates);
//! - the Kubernetes side: `cache` (watch caches), `k8s` (client, recorder, the process's caches), `context`;
//! - the writers: `apply`, `owned_secret`, `finalizer`, `status_writer`, `cleanup_records`, `upstream`;
//! - the machinery: `kind`, `pass`, `triggers`, `runner`, and [`CONTROLLERS`], the table the process starts.

pub mod ai_gateway_key;
pub mod ai_provider;
pub mod apply;
pub mod cache;
pub mod cleanup_records;
pub mod conditions;
pub mod context;
pub mod control_plane;
pub mod credentials;
pub mod decode;
pub mod digest;
pub mod error;
pub mod finalizer;
pub mod halt;
pub mod k8s;
pub mod kind;
pub mod labels;
pub mod mcp_server;
pub mod memory;
pub mod metrics;
pub mod optional_kinds;
pub mod owned_secret;
pub mod owner_index;
pub mod ownership;
pub mod pass;
pub mod provisioner;
pub mod rate_limits;
pub mod refusal;
pub mod runner;
pub mod secrets;
pub mod settings;
pub mod slim;
pub mod status_writer;
pub mod sync_status;
pub mod takeover;
pub mod template_test;
pub mod triggers;
pub mod upstream;
pub mod workload;
pub mod workspace_proxy;

use std::sync::Arc;

use coder_k8s_api::ai_gateway_key::CoderAIGatewayKey;
use coder_k8s_api::ai_provider::CoderAIProvider;
use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::mcp_server::CoderMCPServer;
use coder_k8s_api::provisioner::CoderProvisioner;
use coder_k8s_api::template_test::CoderTemplateTest;
use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
use futures::future::BoxFuture;

use crate::context::Context;
use crate::runner::{Controller, Shutdown};

/// One task of the controller process: its name in logs and `/healthz`, the kind it reconciles (none for the
/// sweep), and how it runs until shutdown.
pub struct Loop {
    pub name: &'static str,
    pub kind: Option<&'static str>,
    pub run: fn(Arc<Context>, Shutdown) -> BoxFuture<'static, ()>,
}

impl Loop {
    const fn controller<K: Controller>(name: &'static str) -> Self {
        Self {
            name,
            kind: Some(K::KIND),
            run: runner::task::<K>,
        }
    }
}

/// Every task of the controller process, in start order: the seven kinds (their watches, triggers and caches are
/// declared with each kind's `Controller`), then the cleanup-record sweep.
pub const CONTROLLERS: [Loop; 8] = [
    Loop::controller::<CoderControlPlane>("CoderControlPlane controller"),
    Loop::controller::<CoderProvisioner>("CoderProvisioner controller"),
    Loop::controller::<CoderWorkspaceProxy>("CoderWorkspaceProxy controller"),
    Loop::controller::<CoderTemplateTest>("CoderTemplateTest controller"),
    Loop::controller::<CoderAIGatewayKey>("CoderAIGatewayKey controller"),
    Loop::controller::<CoderAIProvider>("CoderAIProvider controller"),
    Loop::controller::<CoderMCPServer>("CoderMCPServer controller"),
    Loop {
        name: "cleanup-record sweep",
        kind: None,
        run: cleanup_records::sweep::task,
    },
];

/// Kinds whose reconciler runs: every kind of `coder.com/v1alpha1`.
pub fn built() -> Vec<&'static str> {
    CONTROLLERS.iter().filter_map(|task| task.kind).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_runs_once_and_each_task_is_named_for_it() {
        let kinds = built();
        assert_eq!(
            kinds,
            [
                "CoderControlPlane",
                "CoderProvisioner",
                "CoderWorkspaceProxy",
                "CoderTemplateTest",
                "CoderAIGatewayKey",
                "CoderAIProvider",
                "CoderMCPServer",
            ]
        );
        for task in &CONTROLLERS {
            match task.kind {
                Some(kind) => assert_eq!(task.name, format!("{kind} controller")),
                None => assert_eq!(task.name, "cleanup-record sweep"),
            }
        }
    }
}
