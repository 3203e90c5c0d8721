//! Types of the `aggregation.coder.com/v1alpha1` resources that the aggregated API server serves from Coder (never
//! stored in etcd): `CoderWorkspace`, `CoderTemplate`, `CoderTemplateVersion`, their lists, and the bodies of the
//! `start`/`stop`, `promote` and `log` subresources. Field names and omission rules follow the v0.1.5 JSON: a
//! string, number or time is left out when empty, except where a field comment says it is always written.
//! [`names`] holds the syntax of their object names.

pub mod names;

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
    /// Time to live of a running workspace in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_millis: Option<i64>,
    /// Cron schedule of automatic starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostart_schedule: Option<String>,
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
