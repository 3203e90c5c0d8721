//! Serde types of the Coder API v2, one module per area (mirroring the types of Coder's Go SDK, codersdk). Response types are lenient:
//! missing fields take their default, unknown fields are ignored. Timestamps stay RFC 3339 strings.
//! Fields carrying secrets use [`crate::Secret`], whose `Debug` is redacted.

pub mod buildinfo;
pub mod builds;
pub mod entitlements;
pub mod files;
pub mod groups;
pub mod jobs;
pub mod licenses;
pub mod logs;
pub mod organizations;
pub mod parameters;
pub mod provisioner_keys;
pub mod template_acl;
pub mod template_versions;
pub mod templates;
pub mod users;
pub mod workspace_proxies;
pub mod workspaces;

pub use buildinfo::BuildInfo;
pub use builds::{
    BuildReason, CreateWorkspaceBuildRequest, Transition, WorkspaceBuild, WorkspaceBuildStatus,
};
pub use entitlements::{Entitlement, Entitlements, Feature};
pub use files::{ArchiveKind, UploadedFile};
pub use groups::Group;
pub use jobs::{JobStatus, ProvisionerJob};
pub use licenses::License;
pub use logs::ProvisionerJobLog;
pub use organizations::Organization;
pub use parameters::{TemplateVersionParameter, TemplateVersionParameterOption};
pub use provisioner_keys::{EnsuredProvisionerKey, ProvisionerKey};
pub use template_acl::{TemplateAcl, TemplateAclGroup, TemplateAclUser, UpdateTemplateAcl};
pub use template_versions::{
    CreateTemplateVersionRequest, TemplateVersion, TemplateVersionVariable, VariableValue,
};
pub use templates::{
    CreateTemplateRequest, Template, TemplateAutostartRequirement, TemplateAutostopRequirement,
    UpdateTemplateMeta,
};
pub use users::{MinimalUser, Role, User};
pub use workspace_proxies::{
    CreateWorkspaceProxyRequest, PatchWorkspaceProxy, UpdateWorkspaceProxyResponse, WorkspaceProxy,
    WorkspaceProxyStatus,
};
pub use workspaces::{
    BuildListing, CreateWorkspaceRequest, RichParameterValue, UpdateWorkspaceAutomaticUpdatesRequest,
    UpdateWorkspaceAutostartRequest, UpdateWorkspaceTtlRequest, Workspace, WorkspaceListing, WorkspacesPage,
};
