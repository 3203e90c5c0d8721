//! The `aggregation.coder.com/v1alpha1` resources served through the generic server: the registry table, name
//! rules, the control-plane provider that picks a namespace's Coder deployment, and Coder error mapping.

pub mod archive;
pub mod convert;
pub mod errors;
pub mod field_errors;
pub mod first_build_stop;
pub mod groups;
pub mod k8s_names;
pub mod list_memo;
pub mod names;
pub mod organizations;
pub mod poll_cadence;
pub mod promote;
pub mod provider;
pub mod resources;
pub mod template_acl;
pub mod template_import;
pub mod template_inputs;
pub mod template_plan;
pub mod template_settings;
pub mod template_versions;
pub mod templates;
pub mod transitions;
pub mod user_create;
pub mod user_lifecycle;
pub mod user_records;
pub mod user_writes;
pub mod users;
pub mod workspace_list;
pub mod workspace_log;
pub mod workspace_rules;
pub mod workspace_secrets;
pub mod workspace_settings;
pub mod workspace_writes;
pub mod workspaces;
pub mod world_watch;
pub mod write_rules;

pub use provider::{
    ApiReads, Backend, ControlPlaneProvider, ControlPlaneReads, Provider, StaticBackend, StaticProvider,
    UnconfiguredProvider,
};
pub use resources::{registry, registry_with};
