//! Types of the `aggregation.coder.com/v1alpha1` resources that the aggregated API server serves from Coder (never
//! stored in etcd): `CoderWorkspace`, `CoderTemplate`, `CoderTemplateVersion`, their lists, and the bodies of the
//! `start`/`stop`, `promote` and `log` subresources. Field names and omission rules follow the v0.1.5 JSON: a
//! string, number or time is left out when empty, except where a field comment says it is always written.
//! [`people`] holds `CoderOrganization`, `CoderGroup` and `CoderUser`; [`names`] the syntax of all object names.

pub mod names;
pub mod people;

pub use people::*;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "aggregation.coder.com";
/// The API version.
pub const VERSION: &str = "v1alpha1";
/// `<group>/<version>`, the `apiVersion` of every object here.
pub const API_VERSION: &str = "aggregation.coder.com/v1alpha1";

/// Label of a `CoderTemplateVersion` holding its organization name.
pub const ORGANIZATION_LABEL: &str = "aggregation.coder.com/organization";
/// Label of a `CoderTemplateVersion` holding its template name.
pub const TEMPLATE_LABEL: &str = "aggregation.coder.com/template";

/// `spec.running` is required in the published schema (v0.1.5 has no `omitempty` on it); a body without it still
/// reads as `false`, as Go's decoder does.
fn require_running(schema: &mut schemars::Schema) {
    schema.insert("required".to_owned(), serde_json::json!(["running"]));
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn files_absent(files: &Option<BTreeMap<String, String>>) -> bool {
    files.as_ref().is_none_or(BTreeMap::is_empty)
}

/// A Coder workspace. `metadata.name` is `<organization>.<owner>.<workspace>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderWorkspace {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CoderWorkspaceSpec,
    #[serde(default)]
    pub status: CoderWorkspaceStatus,
}

/// The desired state of a workspace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = require_running)]
pub struct CoderWorkspaceSpec {
    /// The Coder organization name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub organization: String,
    /// The template the workspace is built from, by name in the organization.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub template_name: String,
    /// Pins the workspace to one template version (a UUID).
    #[serde(
        default,
        rename = "templateVersionID",
        skip_serializing_if = "String::is_empty"
    )]
    pub template_version_id: String,
    /// Whether the workspace should run: changing it queues a start or stop build. Always written.
    #[serde(default)]
    pub running: bool,
    /// How long a started workspace runs before Coder stops it, in milliseconds (Coder keeps whole minutes, at least
    /// one minute and at most 30 days; 0 turns autostop off). Reads show Coder's value here, left out when autostop
    /// is off. Left out of a write, Coder's value is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_millis: Option<i64>,
    /// The same time to live as a duration (`8h`, `90m`, `1h30m`; `0s` turns autostop off), for writes: it is
    /// stored as `ttlMillis` and reads show only `ttlMillis`. With both set they must agree, unless one of them is
    /// the value Coder has (then the other is the change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// Weekly schedule of automatic starts: `[CRON_TZ=<IANA zone> ]<minute> <hour> * * <days of week>`, for example
    /// `CRON_TZ=Europe/Berlin 30 8 * * 1-5` (UTC without the prefix); an empty string turns autostart off. Left out
    /// of a write, Coder's schedule is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostart_schedule: Option<String>,
    /// `always`: every start uses the template's active version; `never`: a start keeps the version of the previous
    /// build. Reads show Coder's setting; left out of a write, it is kept (a new workspace gets `never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["always", "never"]))]
    pub automatic_updates: Option<String>,
    /// Rich parameter values of the template, by name. A single get shows every value of the latest build (a value
    /// set from a Secret as its reference); lists and watches leave them out. A write sets only the parameters it
    /// lists: the others keep their values. A changed value is built at once when the workspace runs (a start
    /// build), otherwise with a stop build, and the next start uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Vec<CoderWorkspaceParameter>>,
}

/// One rich parameter value: exactly one of `value` and `valueFrom`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderWorkspaceParameter {
    /// The parameter's name in the template version. Required.
    #[serde(default)]
    pub name: String,
    /// The value as text (numbers, booleans and lists as Coder writes them: `4`, `true`, `["a","b"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Where a sensitive value comes from. The value never appears in this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<CoderWorkspaceParameterSource>,
}

/// The source of a sensitive parameter value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderWorkspaceParameterSource {
    /// A key of a Secret in the workspace's namespace. The caller of a write must be allowed to `get` that Secret.
    #[serde(default)]
    pub secret_key_ref: CoderWorkspaceSecretKeyRef,
}

/// A key of a Secret in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderWorkspaceSecretKeyRef {
    /// The Secret's name.
    #[serde(default)]
    pub name: String,
    /// The key in the Secret's data; its value must be UTF-8 text.
    #[serde(default)]
    pub key: String,
}

/// The observed state of a workspace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderWorkspaceStatus {
    /// The Coder workspace ID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub organization_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub template_name: String,
    #[serde(default, rename = "latestBuildID", skip_serializing_if = "String::is_empty")]
    pub latest_build_id: String,
    /// Coder's status of the latest build (`running`, `stopped`, `failed`, ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub latest_build_status: String,
    /// Why Coder ran the latest build: `initiator` (a user or the API, also every build this API queues),
    /// `autostart`, `autostop`, `dormancy`, `dashboard`, `cli`, `ssh_connection`, `vscode_connection` or
    /// `jetbrains_connection`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub latest_build_reason: String,
    /// When the running workspace stops automatically.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_shutdown: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<Time>,
}

/// A list of workspaces.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderWorkspaceList {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
    /// Always written, also when empty.
    #[serde(default)]
    pub items: Vec<CoderWorkspace>,
}

/// A Coder template. `metadata.name` is `<organization>.<template>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplate {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CoderTemplateSpec,
    #[serde(default)]
    pub status: CoderTemplateStatus,
}

/// The desired state of a template.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateSpec {
    /// The Coder organization name: the first segment of `metadata.name`. Always written.
    #[serde(default)]
    pub organization: String,
    /// The template version (a UUID) a template without `files` is created from; read-only afterwards. Always
    /// written (the active version when read).
    #[serde(default, rename = "versionID")]
    pub version_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub icon: String,
    /// The template source of the active version: slash-separated relative path → UTF-8 content. Filled on a
    /// single get, left out of lists.
    #[serde(default, skip_serializing_if = "files_absent")]
    pub files: Option<BTreeMap<String, String>>,
    /// Legacy flag, kept for compatibility.
    #[serde(default, skip_serializing_if = "is_false")]
    pub running: bool,
    /// Coder's settings of the template. Each is optional: a setting left out is left as Coder has it, a setting
    /// given is written. Reads show Coder's current values.
    #[serde(flatten)]
    pub settings: CoderTemplateSettings,
    /// Provisioner tags of the version `files` imports (Coder's `tags`): only provisioners with these tags run
    /// the import. Coder adds `scope` (`organization` unless given) and `owner`, and drops tags with an empty value;
    /// reads show the active version's tags as Coder holds them. Left out: a new version gets the active
    /// version's tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioner_tags: Option<BTreeMap<String, String>>,
    /// Values of the Terraform variables the source declares, for the version `files` imports (Coder's
    /// `user_variable_values`); a declared variable not listed gets its default. Reads show the active version's
    /// variables. Left out: a new version gets the active version's values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<Vec<CoderTemplateVariable>>,
    /// Name of the version `files` imports (Coder picks a random one when left out). Unique within the template,
    /// so a new version needs a new name; a name other than the active version's imports a new version. Write-only:
    /// reads show the active version's name in `status.activeVersionName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_name: Option<String>,
    /// Message of the version `files` imports; a message other than the active version's imports a new version.
    /// Write-only: reads show the active version's message in `status.activeVersionMessage`. Left out: a new version
    /// gets no message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_message: Option<String>,
}

/// Coder's template settings, in the spec (what to write; reads show Coder's values) and mirrored in the status
/// (what Coder holds, so a change made in Coder shows there too). Durations are Kubernetes durations (`8h`,
/// `30m`, `1h30m`, `0s`) of whole milliseconds, read back in the shortest form.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateSettings {
    /// How long a workspace runs before it stops on its own, unless its owner sets another time (`0s`: no
    /// automatic stop). Coder's `default_ttl_ms`.
    #[serde(default, rename = "defaultTTL", skip_serializing_if = "Option::is_none")]
    pub default_ttl: Option<String>,
    /// How far activity in a workspace pushes its automatic stop back (`0s`: activity does not). Coder's
    /// `activity_bump_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity_bump: Option<String>,
    /// When workspaces must restart to pick up the active version. Coder's `autostop_requirement`; premium
    /// (advanced template scheduling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostop_requirement: Option<CoderTemplateAutostopRequirement>,
    /// On which days workspaces may start automatically. Coder's `autostart_requirement`; premium (advanced
    /// template scheduling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostart_requirement: Option<CoderTemplateAutostartRequirement>,
    /// Whether workspace owners may set their own autostart schedule. Coder's `allow_user_autostart`; premium
    /// (advanced template scheduling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_user_autostart: Option<bool>,
    /// Whether workspace owners may set their own automatic stop. Coder's `allow_user_autostop`; premium
    /// (advanced template scheduling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_user_autostop: Option<bool>,
    /// Whether workspace owners may cancel their workspaces' builds. Coder's
    /// `allow_user_cancel_workspace_jobs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_user_cancel_workspace_jobs: Option<bool>,
    /// How long after a failed build a workspace is stopped (`0s` or at least `1m`). Coder's `failure_ttl_ms`;
    /// premium (advanced template scheduling).
    #[serde(default, rename = "failureTTL", skip_serializing_if = "Option::is_none")]
    pub failure_ttl: Option<String>,
    /// How long an unused workspace stays before it turns dormant (`0s` or at least `1m`). Coder's
    /// `time_til_dormant_ms`; premium (advanced template scheduling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_til_dormant: Option<String>,
    /// How long a dormant workspace stays before it is deleted (`0s` or at least `1m`). Coder's
    /// `time_til_dormant_autodelete_ms`; premium (advanced template scheduling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_til_dormant_auto_delete: Option<String>,
    /// Whether workspaces must be built from the active version. Coder's `require_active_version`; premium
    /// (access control).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_active_version: Option<bool>,
    /// Why the template is deprecated (`""`: not deprecated). Coder's `deprecation_message`; setting one is
    /// premium (access control), clearing it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation_message: Option<String>,
    /// The widest level at which workspace ports may be shared: `owner`, `authenticated`, `organization` or
    /// `public`. Coder's `max_port_share_level`; premium (control shared ports): open-source Coder shows `public`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_port_share_level: Option<String>,
    /// Who may use or administer the template, by user and group name. Coder's template access list; premium
    /// (Template RBAC). Each list given is the whole list: entries not listed are removed. Shown on a single get
    /// only, and only when Coder serves access lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<CoderTemplateAcl>,
}

/// When workspaces must restart (Coder's autostop requirement).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateAutostopRequirement {
    /// Lower-case weekday names (`monday` … `sunday`); empty: no required restart. Read back Monday first.
    /// Left out: kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days_of_week: Option<Vec<String>>,
    /// Every how many weeks the restart is required (1 to 16). Left out: kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weeks: Option<i64>,
}

/// When workspaces may start automatically (Coder's autostart requirement).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateAutostartRequirement {
    /// Lower-case weekday names (`monday` … `sunday`); empty: never. Read back Monday first. Left out: kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days_of_week: Option<Vec<String>>,
}

/// A template access list by name. A list left out is kept as Coder has it; a list given is the whole list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateAcl {
    /// Coder groups of the template's organization by name (the built-in `Everyone` group included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<CoderTemplateAclEntry>>,
    /// Coder users by username.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<Vec<CoderTemplateAclEntry>>,
}

/// One user or group of an access list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateAclEntry {
    /// The username or the group name, exactly as Coder spells it.
    #[serde(default)]
    pub name: String,
    /// `use` (create workspaces from the template) or `admin` (also edit it).
    #[serde(default)]
    pub role: String,
}

/// A Terraform variable value: `value`, or `valueFrom` for a value held in a Secret.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateVariable {
    /// The variable's name in the source.
    #[serde(default)]
    pub name: String,
    /// The value. Not for variables the source declares `sensitive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Where the value is read from when a version is imported. The caller must be allowed to `get` the Secret;
    /// the value itself is never shown. Reads show the reference a version was imported with; a sensitive
    /// variable set another way shows its name only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<CoderTemplateVariableSource>,
}

/// The source of a variable's value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateVariableSource {
    /// A key of a Secret in the object's namespace.
    #[serde(default)]
    pub secret_key_ref: CoderTemplateSecretKeyRef,
}

/// A key of a Secret in the object's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateSecretKeyRef {
    /// The Secret's name.
    #[serde(default)]
    pub name: String,
    /// The key in the Secret's data; its value must be UTF-8.
    #[serde(default)]
    pub key: String,
}

/// The observed state of a template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateStatus {
    /// The Coder template ID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub organization_name: String,
    #[serde(default, rename = "activeVersionID", skip_serializing_if = "String::is_empty")]
    pub active_version_id: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub deprecated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Time>,
    /// Legacy timestamp, kept for compatibility.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_shutdown: Option<Time>,
    /// The active version's name (single get only). A write names a new version with `spec.versionName`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub active_version_name: String,
    /// The active version's message (single get only). A write gives a new version one with
    /// `spec.versionMessage`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub active_version_message: String,
    /// The settings as Coder holds them (the same as the spec shows on a read), so that a change made in Coder
    /// shows in the status. Read-only.
    #[serde(flatten)]
    pub settings: CoderTemplateSettings,
}

/// A list of templates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateList {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
    /// Always written, also when empty.
    #[serde(default)]
    pub items: Vec<CoderTemplate>,
}

/// A version of a Coder template (read-only). `metadata.name` is `<organization>.<template>.<version>`; it carries
/// the labels [`ORGANIZATION_LABEL`] and [`TEMPLATE_LABEL`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateVersion {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CoderTemplateVersionSpec,
    #[serde(default)]
    pub status: CoderTemplateVersionStatus,
}

/// What a template version belongs to and says about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateVersionSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub organization: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub template_name: String,
    /// The version's message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The observed state of a template version. No job error text, source files, logs, variables or README.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateVersionStatus {
    /// The Coder template version ID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(default, rename = "templateID", skip_serializing_if = "String::is_empty")]
    pub template_id: String,
    /// Whether this is the template's active version. Always written.
    #[serde(default)]
    pub active: bool,
    /// Always written.
    #[serde(default)]
    pub archived: bool,
    /// Username of the creator.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub created_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Time>,
    /// The import job.
    #[serde(default)]
    pub job: CoderTemplateVersionJob,
}

/// The import job of a template version.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateVersionJob {
    /// Coder's job status (`pending`, `running`, `succeeded`, `failed`, ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Coder's error code of a failed job (never its error text).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error_code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
}

/// A list of template versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateVersionList {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
    /// Always written, also when empty.
    #[serde(default)]
    pub items: Vec<CoderTemplateVersion>,
}

/// Request and response body of `coderworkspaces/<name>/start` and `/stop`. A request needs no fields; a status in
/// the request is ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderWorkspaceTransition {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: CoderWorkspaceTransitionStatus,
}

/// What a start or stop request did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderWorkspaceTransitionStatus {
    /// `start` or `stop`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub transition: String,
    /// `Queued`, `InProgress`, `Unchanged`, or `WouldQueue` (dry run only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub outcome: String,
    /// The request was a server-side dry run: nothing changed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
    /// The workspace build the outcome refers to.
    #[serde(default, rename = "buildID", skip_serializing_if = "String::is_empty")]
    pub build_id: String,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub build_number: i32,
    /// The provisioner job status of that build when the server answered.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job_status: String,
}

fn is_zero_i32(value: &i32) -> bool {
    *value == 0
}

/// Request and response body of `codertemplates/<name>/promote`: activates one version of the template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateVersionPromotion {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CoderTemplateVersionPromotionSpec,
    #[serde(default)]
    pub status: CoderTemplateVersionPromotionStatus,
}

/// The version to activate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateVersionPromotionSpec {
    /// The Coder ID (a UUID) of a version of the template in the request path. Always written.
    #[serde(default, rename = "versionID")]
    pub version_id: String,
}

/// The outcome of a promotion.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderTemplateVersionPromotionStatus {
    /// `Promoted`, `AlreadyActive` or `WouldPromote`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub result: String,
    /// The active version the request saw before it acted.
    #[serde(
        default,
        rename = "previousActiveVersionID",
        skip_serializing_if = "String::is_empty"
    )]
    pub previous_active_version_id: String,
    /// The active version the request saw after it acted.
    #[serde(default, rename = "activeVersionID", skip_serializing_if = "String::is_empty")]
    pub active_version_id: String,
}

/// Values of [`CoderTemplateVersionPromotionStatus::result`].
pub mod promotion_results {
    pub const PROMOTED: &str = "Promoted";
    pub const ALREADY_ACTIVE: &str = "AlreadyActive";
    pub const WOULD_PROMOTE: &str = "WouldPromote";
}

/// Values of [`CoderWorkspaceTransitionStatus::outcome`].
pub mod transition_outcomes {
    pub const QUEUED: &str = "Queued";
    pub const IN_PROGRESS: &str = "InProgress";
    pub const UNCHANGED: &str = "Unchanged";
    pub const WOULD_QUEUE: &str = "WouldQueue";
}

/// Query options of `coderworkspaces/<name>/log`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderWorkspaceLogOptions {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Ends the response after this many bytes (may cut a line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<i64>,
    /// Keeps the response open and streams new entries until the build ends.
    #[serde(default, skip_serializing_if = "is_false")]
    pub follow: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    /// Parses `literal` into `T`, writes it back, and checks that nothing was lost, renamed or added.
    fn round_trip<T: Serialize + DeserializeOwned>(literal: Value) -> T {
        let parsed: T = serde_json::from_value(literal.clone()).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), literal);
        parsed
    }

    #[test]
    fn workspace_round_trips_with_go_field_names() {
        let workspace: CoderWorkspace = round_trip(json!({
            "apiVersion": "aggregation.coder.com/v1alpha1",
            "kind": "CoderWorkspace",
            "metadata": {"name": "acme.alice.dev", "namespace": "coder", "uid": "6c2f"},
            "spec": {
                "organization": "acme",
                "templateName": "docker",
                "templateVersionID": "11111111-1111-1111-1111-111111111111",
                "running": true,
                "ttlMillis": 3600000,
                "autostartSchedule": "CRON_TZ=UTC 30 9 * * 1-5"
            },
            "status": {
                "id": "22222222-2222-2222-2222-222222222222",
                "ownerName": "alice",
                "organizationName": "acme",
                "templateName": "docker",
                "latestBuildID": "33333333-3333-3333-3333-333333333333",
                "latestBuildStatus": "running",
                "autoShutdown": "2026-01-01T20:00:00Z",
                "lastUsedAt": "2026-01-01T12:00:00Z"
            }
        }));
        assert!(workspace.spec.running);
        assert_eq!(workspace.spec.ttl_millis, Some(3_600_000));
    }

    #[test]
    fn a_stopped_workspace_still_writes_running() {
        let value = serde_json::to_value(CoderWorkspace::default()).unwrap();
        assert_eq!(value["spec"], json!({"running": false}));
        assert_eq!(value["status"], json!({}));
    }

    #[test]
    fn running_is_required_in_the_schema() {
        let schema = serde_json::to_value(schemars::schema_for!(CoderWorkspaceSpec)).unwrap();
        assert_eq!(schema["required"], json!(["running"]));
    }

    #[test]
    fn template_round_trips_with_go_field_names() {
        let template: CoderTemplate = round_trip(json!({
            "apiVersion": "aggregation.coder.com/v1alpha1",
            "kind": "CoderTemplate",
            "metadata": {"name": "acme.docker", "namespace": "coder", "resourceVersion": "1767268800000000000"},
            "spec": {
                "organization": "acme",
                "versionID": "44444444-4444-4444-4444-444444444444",
                "displayName": "Docker",
                "description": "Containers",
                "icon": "/icon/docker.png",
                "files": {"main.tf": "terraform {}\n"},
                "running": true
            },
            "status": {
                "id": "55555555-5555-5555-5555-555555555555",
                "organizationName": "acme",
                "activeVersionID": "44444444-4444-4444-4444-444444444444",
                "deprecated": true,
                "updatedAt": "2026-01-01T12:00:00Z",
                "autoShutdown": "2026-01-02T12:00:00Z"
            }
        }));
        assert_eq!(template.spec.files.unwrap().len(), 1);
    }

    #[test]
    fn template_settings_round_trip_in_spec_and_status() {
        let settings = json!({
            "defaultTTL": "8h",
            "activityBump": "1h30m",
            "autostopRequirement": {"daysOfWeek": ["monday", "saturday"], "weeks": 2},
            "autostartRequirement": {"daysOfWeek": ["monday"]},
            "allowUserAutostart": false,
            "allowUserAutostop": true,
            "allowUserCancelWorkspaceJobs": false,
            "failureTTL": "1h",
            "timeTilDormant": "168h",
            "timeTilDormantAutoDelete": "0s",
            "requireActiveVersion": true,
            "deprecationMessage": "use v2",
            "maxPortShareLevel": "authenticated",
            "acl": {
                "groups": [{"name": "Everyone", "role": "use"}],
                "users": [{"name": "alice", "role": "admin"}]
            }
        });
        let mut spec = json!({
            "organization": "acme",
            "versionID": "",
            "provisionerTags": {"env": "prod"},
            "variables": [
                {"name": "region", "value": "eu"},
                {"name": "db_password", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                {"name": "token"}
            ],
            "versionName": "v2",
            "versionMessage": "second"
        });
        let mut status = json!({"activeVersionName": "v1", "activeVersionMessage": "first"});
        for (key, value) in settings.as_object().unwrap() {
            spec[key] = value.clone();
            status[key] = value.clone();
        }
        let template: CoderTemplate = round_trip(json!({"metadata": {}, "spec": spec, "status": status}));
        assert_eq!(template.spec.settings, template.status.settings);
        assert_eq!(template.spec.settings.default_ttl.as_deref(), Some("8h"));
        assert_eq!(
            template.spec.variables.as_ref().map(Vec::len),
            Some(3),
            "{:?}",
            template.spec.variables
        );
        assert_eq!(template.status.active_version_name, "v1");
    }

    #[test]
    fn every_template_setting_is_described_in_the_schema() {
        let schema = serde_json::to_value(schemars::schema_for!(CoderTemplateSpec)).unwrap();
        for field in [
            "defaultTTL",
            "activityBump",
            "autostopRequirement",
            "autostartRequirement",
            "allowUserAutostart",
            "allowUserAutostop",
            "allowUserCancelWorkspaceJobs",
            "failureTTL",
            "timeTilDormant",
            "timeTilDormantAutoDelete",
            "requireActiveVersion",
            "deprecationMessage",
            "maxPortShareLevel",
            "acl",
            "provisionerTags",
            "variables",
            "versionName",
            "versionMessage",
        ] {
            let description = schema["properties"][field]["description"]
                .as_str()
                .unwrap_or_default();
            assert!(description.len() > 20, "{field}: {description:?}");
        }
    }

    #[test]
    fn a_template_always_writes_organization_and_version_id_and_omits_empty_files() {
        let mut template = CoderTemplate::default();
        template.spec.files = Some(BTreeMap::new());
        let value = serde_json::to_value(template).unwrap();
        assert_eq!(value["spec"], json!({"organization": "", "versionID": ""}));
    }

    #[test]
    fn template_version_round_trips_with_go_field_names() {
        round_trip::<CoderTemplateVersion>(json!({
            "apiVersion": "aggregation.coder.com/v1alpha1",
            "kind": "CoderTemplateVersion",
            "metadata": {
                "name": "acme.docker.v1.2.3",
                "namespace": "coder",
                "labels": {"aggregation.coder.com/organization": "acme", "aggregation.coder.com/template": "docker"}
            },
            "spec": {"organization": "acme", "templateName": "docker", "message": "first"},
            "status": {
                "id": "66666666-6666-6666-6666-666666666666",
                "templateID": "55555555-5555-5555-5555-555555555555",
                "active": false,
                "archived": false,
                "createdBy": "alice",
                "updatedAt": "2026-01-01T12:01:00Z",
                "job": {
                    "status": "failed",
                    "errorCode": "REQUIRED_TEMPLATE_VARIABLES",
                    "startedAt": "2026-01-01T12:00:00Z",
                    "completedAt": "2026-01-01T12:00:30Z"
                }
            }
        }));
    }

    #[test]
    fn lists_round_trip_and_write_empty_items() {
        round_trip::<CoderWorkspaceList>(json!({
            "apiVersion": "aggregation.coder.com/v1alpha1",
            "kind": "CoderWorkspaceList",
            "metadata": {"resourceVersion": "1"},
            "items": [{"metadata": {"name": "acme.alice.dev"}, "spec": {"running": false}, "status": {}}]
        }));
        round_trip::<CoderTemplateList>(json!({
            "kind": "CoderTemplateList",
            "metadata": {},
            "items": [{"metadata": {"name": "acme.docker"}, "spec": {"organization": "acme", "versionID": ""}, "status": {}}]
        }));
        round_trip::<CoderTemplateVersionList>(
            json!({"kind": "CoderTemplateVersionList", "metadata": {}, "items": []}),
        );
        assert_eq!(
            serde_json::to_value(CoderWorkspaceList::default()).unwrap()["items"],
            json!([])
        );
    }

    #[test]
    fn subresource_bodies_round_trip_with_go_field_names() {
        round_trip::<CoderWorkspaceTransition>(json!({
            "apiVersion": "aggregation.coder.com/v1alpha1",
            "kind": "CoderWorkspaceTransition",
            "metadata": {"name": "acme.alice.dev", "namespace": "coder"},
            "status": {
                "transition": "start",
                "outcome": "Queued",
                "dryRun": true,
                "buildID": "77777777-7777-7777-7777-777777777777",
                "buildNumber": 4,
                "jobStatus": "pending"
            }
        }));
        round_trip::<CoderTemplateVersionPromotion>(json!({
            "apiVersion": "aggregation.coder.com/v1alpha1",
            "kind": "CoderTemplateVersionPromotion",
            "metadata": {"name": "acme.docker"},
            "spec": {"versionID": "66666666-6666-6666-6666-666666666666"},
            "status": {
                "result": "Promoted",
                "previousActiveVersionID": "44444444-4444-4444-4444-444444444444",
                "activeVersionID": "66666666-6666-6666-6666-666666666666"
            }
        }));
        round_trip::<CoderWorkspaceLogOptions>(json!({
            "apiVersion": "aggregation.coder.com/v1alpha1",
            "kind": "CoderWorkspaceLogOptions",
            "limitBytes": 1024,
            "follow": true
        }));
        // An empty transition request is valid; the promotion always writes its versionID.
        let empty: CoderWorkspaceTransition = serde_json::from_value(json!({})).unwrap();
        assert_eq!(
            serde_json::to_value(empty).unwrap(),
            json!({"metadata": {}, "status": {}})
        );
        assert_eq!(
            serde_json::to_value(CoderTemplateVersionPromotion::default()).unwrap()["spec"],
            json!({"versionID": ""})
        );
    }
}
