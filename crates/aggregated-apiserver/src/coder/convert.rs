//! Pure conversions of Coder answers to the served kinds: names by the name rules, `uid` = Coder ID,
//! `creationTimestamp` = Coder `created_at`, and the `resourceVersion` of each kind (workspace and template version:
//! hex SHA-256 of the converted object with `resourceVersion` unset, as for organizations, groups and users;
//! template: `updated_at` in Unix nanoseconds).

use std::collections::BTreeMap;

use coder_k8s_api::aggregation::{
    API_VERSION, CoderGroup, CoderGroupSpec, CoderGroupStatus, CoderOrganization, CoderOrganizationSpec,
    CoderOrganizationStatus, CoderTemplate, CoderTemplateSettings, CoderTemplateSpec, CoderTemplateStatus,
    CoderTemplateVersion, CoderTemplateVersionJob, CoderTemplateVersionSpec, CoderTemplateVersionStatus,
    CoderUser, CoderUserSpec, CoderUserStatus, CoderWorkspace, CoderWorkspaceParameter, CoderWorkspaceSpec,
    CoderWorkspaceStatus, ORGANIZATION_LABEL, TEMPLATE_LABEL,
};
use coder_k8s_coder_client::types::builds::{Transition, WorkspaceBuildStatus};
use coder_k8s_coder_client::types::groups::Group;
use coder_k8s_coder_client::types::organizations::Organization;
use coder_k8s_coder_client::types::template_versions::TemplateVersion;
use coder_k8s_coder_client::types::templates::Template;
use coder_k8s_coder_client::types::users::User;
use coder_k8s_coder_client::types::workspaces::{Workspace, WorkspaceListing};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use super::{names, template_settings};
use crate::generic::ApiError;

/// A Coder time (RFC 3339); `None` when absent, unparsable or Go's zero time.
pub fn time(value: &str) -> Option<Time> {
    /// Go's zero time, 0001-01-01T00:00:00Z, in Unix seconds.
    const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;
    let parsed: Timestamp = value.trim().parse().ok()?;
    (parsed.as_second() > GO_ZERO_TIME_SECONDS).then_some(Time(parsed))
}

fn metadata(name: String, namespace: &str, uid: uuid::Uuid, created_at: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(namespace.to_owned()),
        uid: Some(uid.to_string()),
        creation_timestamp: time(created_at),
        ..ObjectMeta::default()
    }
}

/// Hex SHA-256 of the object serialized without `resourceVersion`: equal representations, equal tokens. The JSON
/// is hashed as it is written, never held.
fn fingerprint(object: &impl Serialize) -> Result<String, ApiError> {
    let mut hasher = crate::generic::discovery::HashingWriter::default();
    serde_json::to_writer(&mut hasher, object)
        .map_err(|e| ApiError::internal(format!("serialize the object for its resourceVersion: {e}")))?;
    Ok(hasher.hex())
}

fn to_value(object: &impl Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(object).map_err(|e| ApiError::internal(format!("serialize the object: {e}")))
}

/// Whether the latest build is a start that is pending, starting or running.
pub fn workspace_running(workspace: &WorkspaceListing) -> bool {
    let build = &workspace.latest_build;
    build.transition == Transition::Start
        && matches!(
            build.status,
            WorkspaceBuildStatus::Pending | WorkspaceBuildStatus::Starting | WorkspaceBuildStatus::Running
        )
}

fn build_status(status: WorkspaceBuildStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A `CoderWorkspace` in `namespace`, without parameter values (the answer of a write, and what a write checks).
pub fn workspace(namespace: &str, w: &Workspace) -> Result<Value, ApiError> {
    listed_workspace(namespace, &w.listing())
}

/// A `CoderWorkspace` in `namespace` from a listing, without parameter values (lists and watches).
pub fn listed_workspace(namespace: &str, w: &WorkspaceListing) -> Result<Value, ApiError> {
    to_value(&workspace_object(namespace, w)?)
}

/// A `CoderWorkspace` in `namespace` with `parameters`, the values of its latest build (a single get and the
/// answers of writes; left out when there are none, as in a list). They do not enter the resourceVersion: they
/// follow from the latest build, whose ID does.
pub fn workspace_with_parameters(
    namespace: &str,
    w: &Workspace,
    parameters: Vec<CoderWorkspaceParameter>,
) -> Result<Value, ApiError> {
    let mut object = workspace_object(namespace, &w.listing())?;
    object.spec.parameters = Some(parameters).filter(|p| !p.is_empty());
    to_value(&object)
}

fn workspace_object(namespace: &str, w: &WorkspaceListing) -> Result<CoderWorkspace, ApiError> {
    let name = names::workspace_name(&w.organization_name, &w.owner_name, &w.name)?;
    let build = &w.latest_build;
    let mut object = CoderWorkspace {
        api_version: API_VERSION.to_owned(),
        kind: "CoderWorkspace".to_owned(),
        metadata: metadata(name, namespace, w.id, &w.created_at),
        spec: CoderWorkspaceSpec {
            organization: w.organization_name.clone(),
            template_name: w.template_name.clone(),
            template_version_id: build.template_version_id.to_string(),
            running: workspace_running(w),
            ttl_millis: w.ttl_ms,
            ttl: None,
            autostart_schedule: w.autostart_schedule.clone(),
            automatic_updates: Some(w.automatic_updates.clone()).filter(|u| !u.is_empty()),
            parameters: None,
        },
        status: CoderWorkspaceStatus {
            id: w.id.to_string(),
            owner_name: w.owner_name.clone(),
            organization_name: w.organization_name.clone(),
            template_name: w.template_name.clone(),
            latest_build_id: build.id.to_string(),
            latest_build_status: build_status(build.status),
            latest_build_reason: build.reason.clone(),
            auto_shutdown: build.deadline.as_deref().and_then(time),
            last_used_at: time(&w.last_used_at),
        },
    };
    object.metadata.resource_version = Some(fingerprint(&object)?);
    Ok(object)
}

/// A `CoderTemplate` in `namespace`, without `spec.files`, the access list and the active version's inputs (a single
/// get adds them). The settings read back from Coder's template go into the spec and, mirrored, the status.
pub fn template(namespace: &str, t: &Template) -> Result<Value, ApiError> {
    template_object(namespace, t, true)
}

/// [`template`] as lists and watches show it: the settings once, in the spec. A list leaves out what a single read
/// adds (files, access list, version inputs), and the status mirror is for reading one object (`kubectl get -o
/// yaml`, `kubectl diff`); without it a template with every setting is 29 % smaller as JSON (1,417 → 1,009 bytes).
pub fn listed_template(namespace: &str, t: &Template) -> Result<Value, ApiError> {
    template_object(namespace, t, false)
}

fn template_object(namespace: &str, t: &Template, mirror_settings: bool) -> Result<Value, ApiError> {
    let name = names::template_name(&t.organization_name, &t.name)?;
    let updated_at = time(&t.updated_at);
    let resource_version = updated_at
        .as_ref()
        .map(|at| at.0.as_nanosecond().to_string())
        .ok_or_else(|| {
            ApiError::internal(format!(
                "Coder returned template {name:?} without a valid updated_at"
            ))
        })?;
    let mut meta = metadata(name, namespace, t.id, &t.created_at);
    meta.resource_version = Some(resource_version);
    let settings = template_settings::read_back(t);
    to_value(&CoderTemplate {
        api_version: API_VERSION.to_owned(),
        kind: "CoderTemplate".to_owned(),
        metadata: meta,
        spec: CoderTemplateSpec {
            organization: t.organization_name.clone(),
            version_id: t.active_version_id.to_string(),
            display_name: t.display_name.clone(),
            description: t.description.clone(),
            icon: t.icon.clone(),
            files: None,
            running: false,
            settings: settings.clone(),
            ..CoderTemplateSpec::default()
        },
        status: CoderTemplateStatus {
            id: t.id.to_string(),
            organization_name: t.organization_name.clone(),
            active_version_id: t.active_version_id.to_string(),
            deprecated: t.deprecated,
            updated_at,
            auto_shutdown: None,
            settings: if mirror_settings {
                settings
            } else {
                CoderTemplateSettings::default()
            },
            ..CoderTemplateStatus::default()
        },
    })
}

/// A `CoderTemplateVersion` of template `t` in `namespace`. No job error text, files, logs, variables or README.
pub fn template_version(namespace: &str, t: &Template, v: &TemplateVersion) -> Result<Value, ApiError> {
    if v.template_id != Some(t.id) {
        return Err(ApiError::internal(format!(
            "Coder returned template version {} that does not belong to template {}",
            v.id, t.id
        )));
    }
    let name = names::template_version_name(&t.organization_name, &t.name, &v.name)?;
    let mut meta = metadata(name, namespace, v.id, &v.created_at);
    meta.labels = Some(BTreeMap::from([
        (ORGANIZATION_LABEL.to_owned(), t.organization_name.clone()),
        (TEMPLATE_LABEL.to_owned(), t.name.clone()),
    ]));
    let job = &v.job;
    let mut object = CoderTemplateVersion {
        api_version: API_VERSION.to_owned(),
        kind: "CoderTemplateVersion".to_owned(),
        metadata: meta,
        spec: CoderTemplateVersionSpec {
            organization: t.organization_name.clone(),
            template_name: t.name.clone(),
            message: v.message.clone(),
        },
        status: CoderTemplateVersionStatus {
            id: v.id.to_string(),
            template_id: t.id.to_string(),
            active: t.active_version_id == v.id,
            archived: v.archived,
            created_by: v.created_by.username.clone(),
            updated_at: time(&v.updated_at),
            job: CoderTemplateVersionJob {
                status: serde_json::to_value(job.status)
                    .ok()
                    .and_then(|s| s.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                error_code: job.error_code.clone().unwrap_or_default(),
                started_at: job.started_at.as_deref().and_then(time),
                completed_at: job.completed_at.as_deref().and_then(time),
            },
        },
    };
    object.metadata.resource_version = Some(fingerprint(&object)?);
    to_value(&object)
}

/// A `CoderOrganization` in `namespace`.
pub fn organization(namespace: &str, o: &Organization) -> Result<Value, ApiError> {
    let name = names::single_name("organization", &o.name)?;
    let mut object = CoderOrganization {
        api_version: API_VERSION.to_owned(),
        kind: "CoderOrganization".to_owned(),
        metadata: metadata(name, namespace, o.id, &o.created_at),
        spec: CoderOrganizationSpec {
            display_name: o.display_name.clone(),
            description: o.description.clone(),
            icon: o.icon.clone(),
        },
        status: CoderOrganizationStatus {
            id: o.id.to_string(),
            is_default: o.is_default,
            updated_at: time(&o.updated_at),
        },
    };
    object.metadata.resource_version = Some(fingerprint(&object)?);
    to_value(&object)
}

/// A `CoderGroup` of the organization named `organization` in `namespace`; members by user name, sorted. Coder
/// gives a group no creation time.
pub fn group(namespace: &str, organization: &str, g: &Group) -> Result<Value, ApiError> {
    let name = names::group_name(organization, &g.name)?;
    let mut members: Vec<String> = g.members.iter().map(|m| m.username.clone()).collect();
    members.sort();
    let member_count = g
        .total_member_count
        .max(i64::try_from(members.len()).unwrap_or(i64::MAX));
    let mut object = CoderGroup {
        api_version: API_VERSION.to_owned(),
        kind: "CoderGroup".to_owned(),
        metadata: metadata(name, namespace, g.id, ""),
        spec: CoderGroupSpec {
            organization: organization.to_owned(),
            display_name: g.display_name.clone(),
            avatar_url: g.avatar_url.clone(),
            quota_allowance: g.quota_allowance,
            members,
        },
        status: CoderGroupStatus {
            id: g.id.to_string(),
            source: g.source.clone(),
            member_count,
        },
    };
    object.metadata.resource_version = Some(fingerprint(&object)?);
    to_value(&object)
}

/// A `CoderUser` in `namespace`; `organizations` maps each organization the user is a member of (by name) to the
/// user's roles there. Roles are sorted; never a password or token.
pub fn user(
    namespace: &str,
    u: &User,
    organizations: BTreeMap<String, Vec<String>>,
    deletion_policy: &str,
) -> Result<Value, ApiError> {
    let name = names::single_name("user", &u.username)?;
    let mut roles: Vec<String> = u.roles.iter().map(|r| r.name.clone()).collect();
    roles.sort();
    let organizations = organizations
        .into_iter()
        .map(|(org, mut roles)| {
            roles.sort();
            (org, roles)
        })
        .collect();
    let mut object = CoderUser {
        api_version: API_VERSION.to_owned(),
        kind: "CoderUser".to_owned(),
        metadata: metadata(name, namespace, u.id, &u.created_at),
        spec: CoderUserSpec {
            email: u.email.clone(),
            name: u.name.clone(),
            login_type: u.login_type.clone(),
            roles,
            organizations,
            suspended: u.status == "suspended",
            password: None,
            deletion_policy: deletion_policy.to_owned(),
        },
        status: CoderUserStatus {
            id: u.id.to_string(),
            status: u.status.clone(),
            last_seen_at: time(&u.last_seen_at),
        },
    };
    object.metadata.resource_version = Some(fingerprint(&object)?);
    to_value(&object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use coder_k8s_coder_client::types::builds::WorkspaceBuild;
    use coder_k8s_coder_client::types::jobs::{JobStatus, ProvisionerJob};
    use coder_k8s_coder_client::types::templates::{
        TemplateAutostartRequirement, TemplateAutostopRequirement,
    };
    use coder_k8s_coder_client::types::users::MinimalUser;
    use serde_json::json;
    use uuid::Uuid;

    fn coder_workspace() -> Workspace {
        Workspace {
            id: Uuid::from_u128(1),
            created_at: "2026-01-01T10:00:00Z".into(),
            owner_name: "alice".into(),
            organization_name: "acme".into(),
            template_name: "docker".into(),
            name: "dev".into(),
            ttl_ms: Some(3_600_000),
            autostart_schedule: Some("CRON_TZ=UTC 0 9 * * *".into()),
            last_used_at: "2026-01-01T11:00:00.123456Z".into(),
            latest_build: WorkspaceBuild {
                id: Uuid::from_u128(2),
                template_version_id: Uuid::from_u128(3),
                transition: Transition::Start,
                status: WorkspaceBuildStatus::Running,
                deadline: Some("2026-01-01T18:00:00Z".into()),
                ..WorkspaceBuild::default()
            },
            ..Workspace::default()
        }
    }

    #[test]
    fn a_workspace_converts_with_identity_spec_and_status() {
        let object = workspace("coder", &coder_workspace()).unwrap();
        assert_eq!(object["apiVersion"], "aggregation.coder.com/v1alpha1");
        assert_eq!(object["kind"], "CoderWorkspace");
        assert_eq!(object["metadata"]["name"], "acme.alice.dev");
        assert_eq!(object["metadata"]["namespace"], "coder");
        assert_eq!(object["metadata"]["uid"], Uuid::from_u128(1).to_string());
        assert_eq!(object["metadata"]["creationTimestamp"], "2026-01-01T10:00:00Z");
        assert_eq!(
            object["spec"],
            json!({
                "organization": "acme",
                "templateName": "docker",
                "templateVersionID": Uuid::from_u128(3).to_string(),
                "running": true,
                "ttlMillis": 3_600_000,
                "autostartSchedule": "CRON_TZ=UTC 0 9 * * *"
            })
        );
        assert_eq!(object["status"]["latestBuildStatus"], "running");
        assert_eq!(object["status"]["latestBuildID"], Uuid::from_u128(2).to_string());
        assert_eq!(object["status"]["autoShutdown"], "2026-01-01T18:00:00Z");
        assert_eq!(object["status"]["lastUsedAt"], "2026-01-01T11:00:00Z");
    }

    #[test]
    fn a_listing_decoded_from_coders_whole_answer_converts_as_the_whole_workspace_does() {
        let mut whole = coder_workspace();
        whole.automatic_updates = "always".into();
        whole.latest_build.reason = "autostart".into();
        whole.latest_build.job = ProvisionerJob {
            status: JobStatus::Succeeded,
            ..ProvisionerJob::default()
        };
        let answer = serde_json::to_string(&whole).unwrap();
        let listing: WorkspaceListing = serde_json::from_str(&answer).unwrap();
        assert_eq!(listing, whole.listing());
        let listed = listed_workspace("coder", &listing).unwrap();
        assert_eq!(listed, workspace("coder", &whole).unwrap());
        assert_eq!(listed["spec"]["automaticUpdates"], "always");
        assert_eq!(listed["status"]["latestBuildReason"], "autostart");
    }

    #[test]
    fn running_means_a_start_that_is_pending_starting_or_running() {
        let mut w = coder_workspace();
        for (transition, status, running) in [
            (Transition::Start, WorkspaceBuildStatus::Pending, true),
            (Transition::Start, WorkspaceBuildStatus::Starting, true),
            (Transition::Start, WorkspaceBuildStatus::Failed, false),
            (Transition::Stop, WorkspaceBuildStatus::Running, false),
            (Transition::Stop, WorkspaceBuildStatus::Stopped, false),
        ] {
            w.latest_build.transition = transition;
            w.latest_build.status = status;
            assert_eq!(
                workspace_running(&w.listing()),
                running,
                "{transition:?} {status:?}"
            );
        }
    }

    #[test]
    fn the_workspace_fingerprint_follows_every_exposed_field() {
        let base = coder_workspace();
        let rv = |w: &Workspace| workspace("coder", w).unwrap()["metadata"]["resourceVersion"].clone();
        let token = rv(&base);
        assert_eq!(token.as_str().map(str::len), Some(64));
        assert_eq!(rv(&base), token, "stable");
        let mut used = base.clone();
        used.last_used_at = "2026-01-01T12:00:00Z".into();
        let mut stopped = base.clone();
        stopped.latest_build.status = WorkspaceBuildStatus::Stopping;
        let mut backend_only = base.clone();
        backend_only.updated_at = "2026-02-01T00:00:00Z".into();
        assert_ne!(rv(&used), token);
        assert_ne!(rv(&stopped), token);
        assert_eq!(
            rv(&backend_only),
            token,
            "a field the object does not show keeps the token"
        );
    }

    fn coder_template() -> Template {
        Template {
            id: Uuid::from_u128(10),
            created_at: "2026-01-01T09:00:00Z".into(),
            updated_at: "2026-01-02T09:00:00.5Z".into(),
            organization_name: "acme".into(),
            name: "docker".into(),
            display_name: "Docker".into(),
            active_version_id: Uuid::from_u128(11),
            description: "Containers".into(),
            deprecated: true,
            deprecation_message: "use podman".into(),
            icon: "/icon/docker.png".into(),
            default_ttl_ms: 7_200_000,
            activity_bump_ms: 1_800_000,
            autostop_requirement: TemplateAutostopRequirement {
                days_of_week: vec!["sunday".into()],
                weeks: 0,
            },
            autostart_requirement: TemplateAutostartRequirement {
                days_of_week: vec!["friday".into(), "monday".into()],
            },
            allow_user_autostop: true,
            allow_user_cancel_workspace_jobs: true,
            time_til_dormant_ms: 86_400_000,
            max_port_share_level: "public".into(),
            ..Template::default()
        }
    }

    #[test]
    fn a_template_converts_with_updated_at_as_its_resource_version() {
        let object = template("coder", &coder_template()).unwrap();
        assert_eq!(object["metadata"]["name"], "acme.docker");
        assert_eq!(object["metadata"]["resourceVersion"], "1767344400500000000");
        assert_eq!(object["metadata"]["uid"], Uuid::from_u128(10).to_string());
        let settings = json!({
            "defaultTTL": "2h",
            "activityBump": "30m",
            "autostopRequirement": {"daysOfWeek": ["sunday"], "weeks": 1},
            "autostartRequirement": {"daysOfWeek": ["monday", "friday"]},
            "allowUserAutostart": false,
            "allowUserAutostop": true,
            "allowUserCancelWorkspaceJobs": true,
            "failureTTL": "0s",
            "timeTilDormant": "24h",
            "timeTilDormantAutoDelete": "0s",
            "requireActiveVersion": false,
            "deprecationMessage": "use podman",
            "maxPortShareLevel": "public"
        });
        let mut spec = json!({
            "organization": "acme",
            "versionID": Uuid::from_u128(11).to_string(),
            "displayName": "Docker",
            "description": "Containers",
            "icon": "/icon/docker.png"
        });
        for (key, value) in settings.as_object().unwrap() {
            spec[key] = value.clone();
        }
        assert_eq!(object["spec"], spec);
        for (key, value) in settings.as_object().unwrap() {
            assert_eq!(&object["status"][key], value, "status.{key} mirrors the spec");
        }
        assert_eq!(object["status"]["deprecated"], true);
        assert_eq!(
            object["status"]["activeVersionID"],
            Uuid::from_u128(11).to_string()
        );
        // Listed: the same spec, a status without the mirror, and the same resourceVersion.
        let listed = listed_template("coder", &coder_template()).unwrap();
        assert_eq!(listed["spec"], object["spec"]);
        for key in settings.as_object().unwrap().keys() {
            assert_eq!(
                listed["status"].get(key),
                None,
                "status.{key} is left out of lists"
            );
        }
        assert_eq!(listed["status"]["deprecated"], true);
        assert_eq!(listed["metadata"], object["metadata"]);
        let mut broken = coder_template();
        broken.updated_at = String::new();
        assert_eq!(template("coder", &broken).unwrap_err().code, 500);
    }

    fn coder_version(template: &Template) -> TemplateVersion {
        TemplateVersion {
            id: Uuid::from_u128(20),
            template_id: Some(template.id),
            created_at: "2026-01-01T12:00:00Z".into(),
            updated_at: "2026-01-01T12:01:00Z".into(),
            name: "v1.2.3".into(),
            message: "first".into(),
            readme: "README-SECRET".into(),
            created_by: MinimalUser {
                username: "alice".into(),
                name: "Alice Example".into(),
                ..MinimalUser::default()
            },
            job: ProvisionerJob {
                status: JobStatus::Failed,
                error: Some("JOB-ERROR-SECRET".into()),
                error_code: Some("REQUIRED_TEMPLATE_VARIABLES".into()),
                started_at: Some("2026-01-01T12:00:05Z".into()),
                ..ProvisionerJob::default()
            },
            ..TemplateVersion::default()
        }
    }

    #[test]
    fn a_template_version_converts_without_secret_bearing_fields() {
        let t = coder_template();
        let object = template_version("coder", &t, &coder_version(&t)).unwrap();
        assert_eq!(object["metadata"]["name"], "acme.docker.v1.2.3");
        assert_eq!(
            object["metadata"]["labels"],
            json!({"aggregation.coder.com/organization": "acme", "aggregation.coder.com/template": "docker"})
        );
        assert_eq!(
            object["spec"],
            json!({"organization": "acme", "templateName": "docker", "message": "first"})
        );
        assert_eq!(object["status"]["active"], false);
        assert_eq!(object["status"]["createdBy"], "alice");
        assert_eq!(
            object["status"]["job"],
            json!({"status": "failed", "errorCode": "REQUIRED_TEMPLATE_VARIABLES", "startedAt": "2026-01-01T12:00:05Z"})
        );
        let text = object.to_string();
        for secret in ["JOB-ERROR-SECRET", "README-SECRET", "Alice Example"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }

    #[test]
    fn the_version_fingerprint_changes_when_the_version_becomes_active() {
        let t = coder_template();
        let v = coder_version(&t);
        let inactive = template_version("coder", &t, &v).unwrap();
        let mut activated = t.clone();
        activated.active_version_id = v.id;
        let active = template_version("coder", &activated, &v).unwrap();
        assert_eq!(active["status"]["active"], true);
        assert_ne!(
            inactive["metadata"]["resourceVersion"],
            active["metadata"]["resourceVersion"]
        );
        let mut foreign = v;
        foreign.template_id = Some(Uuid::from_u128(99));
        assert_eq!(template_version("coder", &t, &foreign).unwrap_err().code, 500);
    }

    #[test]
    fn times_skip_empty_garbage_and_the_zero_time() {
        assert!(time("").is_none());
        assert!(time("yesterday").is_none());
        assert!(time("0001-01-01T00:00:00Z").is_none());
        assert_eq!(
            serde_json::to_value(time("2026-01-01T00:00:00+02:00")).unwrap(),
            "2025-12-31T22:00:00Z"
        );
    }
}
