//! `CoderTemplateTest`: an immutable, Job-like test that builds one workspace from one template version.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::shared::conditions_schema;

/// Finalizer that deletes the test workspace in Coder.
pub const FINALIZER: &str = "coder.com/template-test-cleanup";
/// Annotation that keeps (`retain`) or deletes (`delete`) the test workspace.
pub const DELETION_POLICY_ANNOTATION: &str = "coder.com/deletion-policy";

/// Condition types of a CoderTemplateTest.
pub mod conditions {
    pub use crate::shared::sync_status::conditions::{READY, RECONCILING, STALLED};
    /// The test workspace is gone from Coder (or retained on purpose).
    pub const WORKSPACE_DELETED: &str = "WorkspaceDeleted";
}

/// Reasons of `status.reason` and of the conditions (the same reason on `Ready`, `Reconciling` and `Stalled`).
pub mod reasons {
    // Waiting: the phase stays Pending or Running and `Reconciling` is True.
    /// The controller started the test.
    pub const INITIALIZING: &str = "Initializing";
    /// The control plane is missing, being deleted or has no URL.
    pub const CONTROL_PLANE_NOT_READY: &str = "ControlPlaneNotReady";
    /// The control plane has no usable operator access yet.
    pub const OPERATOR_ACCESS_NOT_READY: &str = "OperatorAccessNotReady";
    /// The control plane names no test workspace owner.
    pub const OWNER_NOT_CONFIGURED: &str = "OwnerNotConfigured";
    /// The configured owner may not own test workspaces.
    pub const OWNER_NOT_ELIGIBLE: &str = "OwnerNotEligible";
    /// The organization or template does not exist.
    pub const TEMPLATE_NOT_FOUND: &str = "TemplateNotFound";
    /// The template version does not exist.
    pub const TEMPLATE_VERSION_NOT_FOUND: &str = "TemplateVersionNotFound";
    /// The template version is still importing.
    pub const TEMPLATE_VERSION_IMPORTING: &str = "TemplateVersionImporting";
    /// The create request is about to be sent.
    pub const CREATING_WORKSPACE: &str = "CreatingWorkspace";
    /// Coder's answer proved the create had no effect; it is sent again.
    pub const CREATE_RETRYING: &str = "CreateRetrying";
    /// The create's outcome is uncertain; Coder is read, the create never resent.
    pub const CONFIRMING_CREATE: &str = "ConfirmingCreate";
    /// The start build runs.
    pub const WAITING_FOR_BUILD: &str = "WaitingForBuild";
    /// An agent is not yet connected and ready.
    pub const WAITING_FOR_AGENTS: &str = "WaitingForAgents";
    /// Every agent is ready; the workspace is deleted next.
    pub const AGENTS_READY: &str = "AgentsReady";
    /// The delete build runs.
    pub const DELETING_WORKSPACE: &str = "DeletingWorkspace";
    /// A Coder call failed; the controller waits and retries.
    pub const CODER_UNAVAILABLE: &str = "CoderUnavailable";
    /// Coder answered about something other than the controller asked for.
    pub const CODER_ANSWER_MISMATCH: &str = "CoderAnswerMismatch";
    // Final success.
    /// The agents became ready and the delete build succeeded.
    pub const SUCCEEDED: &str = "Succeeded";
    // Failures: `Ready` False, `Stalled` True.
    /// `timeoutSeconds` passed; the message names the last wait.
    pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
    /// The template is deprecated and accepts no new workspaces.
    pub const TEMPLATE_DEPRECATED: &str = "TemplateDeprecated";
    /// The template version is archived.
    pub const TEMPLATE_VERSION_ARCHIVED: &str = "TemplateVersionArchived";
    /// The template version's import failed or was canceled.
    pub const TEMPLATE_VERSION_IMPORT_FAILED: &str = "TemplateVersionImportFailed";
    /// The version does not belong to the template.
    pub const TEMPLATE_VERSION_MISMATCH: &str = "TemplateVersionMismatch";
    /// Coder refused the create (a 4xx other than 409).
    pub const CREATE_REJECTED: &str = "CreateRejected";
    /// The create's outcome could not be proven either way.
    pub const CREATE_OUTCOME_UNKNOWN: &str = "CreateOutcomeUnknown";
    /// The owner already has a workspace of the test's name that is not the test's.
    pub const WORKSPACE_NAME_CONFLICT: &str = "WorkspaceNameConflict";
    /// The start build failed.
    pub const BUILD_FAILED: &str = "BuildFailed";
    /// Someone else canceled the start build.
    pub const BUILD_CANCELED: &str = "BuildCanceled";
    /// The workspace has no agents, so nothing proves that it works.
    pub const NO_AGENTS: &str = "NoAgents";
    /// An agent did not connect in time.
    pub const AGENT_CONNECTION_TIMEOUT: &str = "AgentConnectionTimeout";
    /// An agent's startup script failed.
    pub const AGENT_START_ERROR: &str = "AgentStartError";
    /// An agent's startup script timed out.
    pub const AGENT_START_TIMEOUT: &str = "AgentStartTimeout";
    /// An agent is shutting down or off.
    pub const AGENT_STOPPED: &str = "AgentStopped";
    /// Someone else started another build of the workspace.
    pub const WORKSPACE_CHANGED_EXTERNALLY: &str = "WorkspaceChangedExternally";
    /// Someone else deleted the workspace.
    pub const WORKSPACE_DELETED_EXTERNALLY: &str = "WorkspaceDeletedExternally";
    /// The delete build failed (it is retried with backoff).
    pub const DELETE_BUILD_FAILED: &str = "DeleteBuildFailed";
    /// The control plane is gone, so the workspace can no longer be reached.
    pub const CONTROL_PLANE_GONE: &str = "ControlPlaneGone";
    // `WorkspaceDeleted` only.
    /// True: the delete build succeeded.
    pub const DELETED: &str = "Deleted";
    /// True: someone else deleted the workspace.
    pub const DELETED_EXTERNALLY: &str = "DeletedExternally";
    /// True: no create request was ever sent.
    pub const NOT_CREATED: &str = "NotCreated";
    /// False: the workspace may exist and is deleted next.
    pub const CLEANUP_PENDING: &str = "CleanupPending";
    /// False: the delete build runs.
    pub const DELETING: &str = "Deleting";
    /// False: a delete build failed; the next one waits for its backoff.
    pub const DELETE_RETRYING: &str = "DeleteRetrying";
    /// False: Coder cannot be reached; cleanup waits.
    pub const CONTROL_PLANE_UNAVAILABLE: &str = "ControlPlaneUnavailable";
    /// False: the workspace is kept on purpose (`coder.com/deletion-policy: retain`, allowed by the control plane).
    pub const RETAINED: &str = "Retained";
    /// Unknown: whether the workspace is this test's is not proven.
    pub const OWNERSHIP_UNKNOWN: &str = "OwnershipUnknown";
}

/// A test of one Coder template version: the operator creates a workspace, waits until its agents are ready, then
/// deletes it. The spec is immutable; create a new object to test again.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "coder.com",
    version = "v1alpha1",
    kind = "CoderTemplateTest",
    plural = "codertemplatetests",
    namespaced,
    status = "CoderTemplateTestStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "CoderTemplateTest builds a workspace from one template version, waits for its agents, then deletes it.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Template", type_ = "string", json_path = ".spec.template"),
    printcolumn(name = "Version", type_ = "string", json_path = ".status.templateVersionName"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.reason"),
    printcolumn(name = "Duration", type_ = "string", json_path = ".status.duration"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(validation = kube::core::Rule::new("self == oldSelf").message("spec is immutable, create a new CoderTemplateTest"))]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateTestSpec {
    /// The CoderControlPlane in the same namespace whose operator access runs the test.
    pub control_plane_ref: TemplateTestControlPlaneReference,
    /// Template to test, as `<organization>.<template>`.
    #[schemars(
        length(max = 65),
        regex(pattern = r"^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*\.[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$")
    )]
    #[x_kube(
        validation = kube::core::Rule::new("self.split('.').all(s, s.size() <= 32)")
            .message("organization and template names must each have at most 32 characters"),
        validation = kube::core::Rule::new("self.split('.').all(s, s != 'new' && s != 'create')")
            .message("organization and template names must not be new or create")
    )]
    pub template: String,
    /// Which version of the template to test: exactly one of `name`, `id` or `active: true`.
    pub version: TemplateVersionSelector,
    /// Values of the template's rich parameters, as plain text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub parameters: Vec<TemplateTestParameter>,
    /// Upper bound of the whole test in seconds. Cleanup continues after it.
    #[serde(default = "default_timeout", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 7200))]
    pub timeout_seconds: Option<i32>,
    /// Delete the object this many seconds after it finished and its workspace is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
}

fn default_timeout() -> Option<i32> {
    Some(900)
}

/// Reference to the control plane of a template test.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TemplateTestControlPlaneReference {
    /// Name of the CoderControlPlane in the same namespace.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
}

/// Selects one template version.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(
    validation = kube::core::Rule::new("[has(self.name), has(self.id), has(self.active)].filter(x, x).size() == 1")
        .message("set exactly one of name, id, or active"),
    validation = kube::core::Rule::new("!has(self.active) || self.active")
        .message("active must be true when set")
)]
#[serde(rename_all = "camelCase")]
pub struct TemplateVersionSelector {
    /// Name of the template version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 64),
        regex(pattern = r"^[a-zA-Z0-9]+([_.-][a-zA-Z0-9]+)*$")
    )]
    pub name: Option<String>,
    /// UUID of the template version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 36), extend("format" = "uuid"))]
    pub id: Option<String>,
    /// Test the template's active version, resolved once when the test starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
}

/// A rich parameter value.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TemplateTestParameter {
    /// Parameter name.
    #[schemars(length(min = 1, max = 128))]
    pub name: String,
    /// Parameter value (plain text, never a secret).
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub value: String,
}

/// Phase of a template test.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TemplateTestPhase {
    /// Waiting to start.
    #[default]
    Pending,
    /// The workspace is being built, checked or deleted.
    Running,
    /// The workspace became ready and was deleted.
    Succeeded,
    /// The test failed; `reason` says why.
    Failed,
}

/// Observed state of a CoderTemplateTest.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateTestStatus {
    /// Generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Phase of the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<TemplateTestPhase>,
    /// Reason of the current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Short human-readable message; never Coder details, logs, parameters or tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub message: Option<String>,
    /// When the test started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the test reached a final phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// How long the run took, from `startTime` to `completionTime` (for example `2m13s`); set when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Coder organization ID.
    #[serde(default, rename = "organizationID", skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<String>,
    /// Coder template ID.
    #[serde(default, rename = "templateID", skip_serializing_if = "Option::is_none")]
    pub template_id: Option<String>,
    /// Coder template version ID under test.
    #[serde(
        default,
        rename = "templateVersionID",
        skip_serializing_if = "Option::is_none"
    )]
    pub template_version_id: Option<String>,
    /// Name of the template version under test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_version_name: Option<String>,
    /// Coder user ID that owns the test workspace.
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// Name of the test workspace (`ktt-` and 28 hex characters of the object UID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_name: Option<String>,
    /// When the workspace create was sent; set before the call so an uncertain create is never repeated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_attempt_time: Option<Time>,
    /// Coder workspace ID.
    #[serde(default, rename = "workspaceID", skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// Coder ID of the start build.
    #[serde(default, rename = "startBuildID", skip_serializing_if = "Option::is_none")]
    pub start_build_id: Option<String>,
    /// Coder ID of the delete build.
    #[serde(default, rename = "deleteBuildID", skip_serializing_if = "Option::is_none")]
    pub delete_build_id: Option<String>,
    /// When every agent was connected and ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents_ready_time: Option<Time>,
    /// Failed delete builds so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_attempts: Option<i32>,
    /// Conditions: `Ready`, `Reconciling`, `Stalled`, `WorkspaceDeleted`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}
