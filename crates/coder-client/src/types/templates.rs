//! `/api/v2/organizations/{organization}/templates`, `/api/v2/templates/{template}`.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `Template`: what the operator uses and every setting [`UpdateTemplateMeta`] sends back (others ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Template {
    /// ID.
    pub id: Uuid,
    /// Created.
    pub created_at: String,
    /// Updated.
    pub updated_at: String,
    /// Organization.
    pub organization_id: Uuid,
    /// Organization name.
    pub organization_name: String,
    /// Name.
    pub name: String,
    /// Display name.
    pub display_name: String,
    /// Provisioner.
    pub provisioner: String,
    /// Active version.
    pub active_version_id: Uuid,
    /// Active users.
    pub active_user_count: i64,
    /// Description.
    pub description: String,
    /// Deprecated (a non-empty `deprecation_message`).
    pub deprecated: bool,
    /// Why the template is deprecated; empty when it is not.
    pub deprecation_message: String,
    /// Icon.
    pub icon: String,
    /// Default workspace TTL, in milliseconds.
    pub default_ttl_ms: i64,
    /// How far activity pushes a workspace's deadline, in milliseconds (0: never).
    pub activity_bump_ms: i64,
    /// When workspaces must restart (premium: advanced template scheduling).
    pub autostop_requirement: TemplateAutostopRequirement,
    /// When workspaces may autostart (premium: advanced template scheduling).
    pub autostart_requirement: TemplateAutostartRequirement,
    /// Creator.
    pub created_by_id: Uuid,
    /// Creator name.
    pub created_by_name: String,
    /// Users may set their own autostart schedule (premium: advanced template scheduling).
    pub allow_user_autostart: bool,
    /// Users may set their own TTL (premium: advanced template scheduling).
    pub allow_user_autostop: bool,
    /// Users may cancel their workspaces' builds.
    pub allow_user_cancel_workspace_jobs: bool,
    /// Failed workspaces stop after this long, in milliseconds (premium: advanced template scheduling).
    pub failure_ttl_ms: i64,
    /// Inactive workspaces go dormant after this long, in milliseconds (premium: advanced template scheduling).
    pub time_til_dormant_ms: i64,
    /// Dormant workspaces are deleted after this long, in milliseconds (premium: advanced template scheduling).
    pub time_til_dormant_autodelete_ms: i64,
    /// Require the active version (premium: access control).
    pub require_active_version: bool,
    /// The widest port-sharing level (`owner`, `authenticated`, `organization`, `public`); open-source Coder
    /// always renders `public`.
    pub max_port_share_level: String,
    /// How workspace apps answer CORS requests (`simple` or `passthru`).
    pub cors_behavior: String,
    /// Use the classic parameter flow when creating workspaces.
    pub use_classic_parameter_flow: bool,
}

/// `TemplateAutostopRequirement`: the days on which workspaces must restart, and every how many weeks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateAutostopRequirement {
    /// Lower-case weekday names (`monday` … `sunday`); empty means never.
    pub days_of_week: Vec<String>,
    /// Weeks between required restarts; Coder renders 0 as 1.
    pub weeks: i64,
}

/// `TemplateAutostartRequirement`: the days on which workspaces may autostart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateAutostartRequirement {
    /// Lower-case weekday names (`monday` … `sunday`); empty means never.
    pub days_of_week: Vec<String>,
}

/// `CreateTemplateRequest`: the template's name, first version and texts, and the settings Coder's create takes
/// (each left out when `None`, so Coder's default applies; the deprecation message is not among them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CreateTemplateRequest {
    /// Name.
    pub name: String,
    /// The version to start with.
    pub template_version_id: Uuid,
    /// Display name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// Description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Icon.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub icon: String,
    /// Do not grant the Everyone group `use`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disable_everyone_group_access: bool,
    /// Require the active version (premium: access control; kept false unlicensed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub require_active_version: bool,
    /// Default workspace TTL, in milliseconds (Coder: 0 when left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_ttl_ms: Option<i64>,
    /// Activity bump, in milliseconds (Coder: one hour when left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activity_bump_ms: Option<i64>,
    /// Autostop requirement (premium: advanced template scheduling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autostop_requirement: Option<TemplateAutostopRequirement>,
    /// Autostart requirement (premium: advanced template scheduling; every day when left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autostart_requirement: Option<TemplateAutostartRequirement>,
    /// Users may cancel their workspaces' builds (Coder: false when left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_user_cancel_workspace_jobs: Option<bool>,
    /// Users may set their own autostart schedule (premium; true when left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_user_autostart: Option<bool>,
    /// Users may set their own TTL (premium; true when left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_user_autostop: Option<bool>,
    /// Failure TTL, in milliseconds (premium).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_ttl_ms: Option<i64>,
    /// Time until dormant, in milliseconds (premium; Coder's create names it `dormant_ttl_ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dormant_ttl_ms: Option<i64>,
    /// Time until a dormant workspace is deleted, in milliseconds (premium; `delete_ttl_ms` on create).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete_ttl_ms: Option<i64>,
    /// Widest port-sharing level (premium: control shared ports; Coder refuses it unlicensed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_port_share_level: Option<String>,
}

/// `UpdateTemplateMeta`, the whole body of `PATCH /api/v2/templates/{id}` as Coder v2.30.0 reads it.
///
/// Coder writes the request over the template rather than merging it, field by field:
/// * Kept when left out (`None` here): `name` (also when empty), `display_name`, `description`, `icon`,
///   `autostop_requirement`, `autostart_requirement`, `deprecation_message`, `max_port_share_level`,
///   `cors_behavior` (also when empty) and `use_classic_parameter_flow`.
/// * Written as sent, so zero or `false` when left out: `default_ttl_ms`, `activity_bump_ms`,
///   `allow_user_cancel_workspace_jobs`, and with advanced template scheduling licensed `allow_user_autostart`,
///   `allow_user_autostop`, `failure_ttl_ms`, `time_til_dormant_ms`, `time_til_dormant_autodelete_ms`, and with
///   access control licensed `require_active_version`. Unlicensed, Coder keeps those premium settings whatever
///   is sent.
/// * Actions, not settings (nothing to keep): `update_workspace_last_used_at` and `update_workspace_dormant_at`
///   touch the template's workspaces when true; `disable_everyone_group_access` true removes the Everyone group's
///   access and false leaves the access list alone.
///
/// Coder's own `coder templates edit` therefore reads the template first and sends every setting back; so does
/// [`UpdateTemplateMeta::from_template`]: change only what should change on the body it returns. There is
/// deliberately no `Default`, whose zeros would reset the template's schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpdateTemplateMeta {
    /// A new name; `None` keeps the name (and Coder answers 304 for an unchanged template only when it is sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Display name (an empty string clears it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Description (an empty string clears it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Icon (an empty string clears it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    /// Default workspace TTL, in milliseconds.
    pub default_ttl_ms: i64,
    /// Activity bump, in milliseconds.
    pub activity_bump_ms: i64,
    /// Autostop requirement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autostop_requirement: Option<TemplateAutostopRequirement>,
    /// Autostart requirement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autostart_requirement: Option<TemplateAutostartRequirement>,
    /// Users may set their own autostart schedule.
    pub allow_user_autostart: bool,
    /// Users may set their own TTL.
    pub allow_user_autostop: bool,
    /// Users may cancel their workspaces' builds.
    pub allow_user_cancel_workspace_jobs: bool,
    /// Failure TTL, in milliseconds.
    pub failure_ttl_ms: i64,
    /// Time until dormant, in milliseconds.
    pub time_til_dormant_ms: i64,
    /// Time until a dormant workspace is deleted, in milliseconds.
    pub time_til_dormant_autodelete_ms: i64,
    /// Set the template's workspaces' `last_used_at` to now.
    pub update_workspace_last_used_at: bool,
    /// Set the template's dormant workspaces' `dormant_at` to now.
    pub update_workspace_dormant_at: bool,
    /// Require the active version.
    pub require_active_version: bool,
    /// Deprecation message (an empty string un-deprecates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecation_message: Option<String>,
    /// Remove the Everyone group's access.
    pub disable_everyone_group_access: bool,
    /// Widest port-sharing level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_port_share_level: Option<String>,
    /// CORS behaviour of workspace apps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cors_behavior: Option<String>,
    /// Classic parameter flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_classic_parameter_flow: Option<bool>,
}

impl UpdateTemplateMeta {
    /// The body that changes nothing: every setting of `template` (read just before) as Coder rendered it. The
    /// name is left out (kept), and the workspace and access-list actions are off.
    pub fn from_template(template: &Template) -> Self {
        Self {
            name: None,
            display_name: Some(template.display_name.clone()),
            description: Some(template.description.clone()),
            icon: Some(template.icon.clone()),
            default_ttl_ms: template.default_ttl_ms,
            activity_bump_ms: template.activity_bump_ms,
            autostop_requirement: Some(template.autostop_requirement.clone()),
            autostart_requirement: Some(template.autostart_requirement.clone()),
            allow_user_autostart: template.allow_user_autostart,
            allow_user_autostop: template.allow_user_autostop,
            allow_user_cancel_workspace_jobs: template.allow_user_cancel_workspace_jobs,
            failure_ttl_ms: template.failure_ttl_ms,
            time_til_dormant_ms: template.time_til_dormant_ms,
            time_til_dormant_autodelete_ms: template.time_til_dormant_autodelete_ms,
            update_workspace_last_used_at: false,
            update_workspace_dormant_at: false,
            require_active_version: template.require_active_version,
            deprecation_message: Some(template.deprecation_message.clone()),
            disable_everyone_group_access: false,
            // Left out when not rendered: an empty level is not one Coder accepts.
            max_port_share_level: Some(template.max_port_share_level.clone())
                .filter(|level| !level.is_empty()),
            cors_behavior: Some(template.cors_behavior.clone()),
            use_classic_parameter_flow: Some(template.use_classic_parameter_flow),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use super::{Template, UpdateTemplateMeta};

    /// A template as Coder v2.30.0 renders it, every setting away from its default.
    fn rendered() -> Value {
        json!({
            "id": "5f0c3c1e-7b1a-4b8e-9d2a-0c6f1e2d3a4b",
            "name": "docker",
            "display_name": "Docker",
            "description": "Containers",
            "icon": "/icon/docker.png",
            "deprecated": true,
            "deprecation_message": "use podman",
            "default_ttl_ms": 7_200_000,
            "activity_bump_ms": 1_800_000,
            "autostop_requirement": {"days_of_week": ["monday", "saturday"], "weeks": 3},
            "autostart_requirement": {"days_of_week": ["tuesday", "sunday"]},
            "allow_user_autostart": false,
            "allow_user_autostop": false,
            "allow_user_cancel_workspace_jobs": true,
            "failure_ttl_ms": 120_000,
            "time_til_dormant_ms": 86_400_000,
            "time_til_dormant_autodelete_ms": 172_800_000,
            "require_active_version": true,
            "max_port_share_level": "authenticated",
            "cors_behavior": "passthru",
            "use_classic_parameter_flow": true,
            "build_time_stats": {"start": {}},
        })
    }

    #[test]
    fn the_body_from_a_template_sends_every_setting_back_as_read() {
        let template: Template = serde_json::from_value(rendered()).unwrap();
        let body = serde_json::to_value(UpdateTemplateMeta::from_template(&template)).unwrap();
        assert_eq!(
            body,
            json!({
                "display_name": "Docker",
                "description": "Containers",
                "icon": "/icon/docker.png",
                "default_ttl_ms": 7_200_000,
                "activity_bump_ms": 1_800_000,
                "autostop_requirement": {"days_of_week": ["monday", "saturday"], "weeks": 3},
                "autostart_requirement": {"days_of_week": ["tuesday", "sunday"]},
                "allow_user_autostart": false,
                "allow_user_autostop": false,
                "allow_user_cancel_workspace_jobs": true,
                "failure_ttl_ms": 120_000,
                "time_til_dormant_ms": 86_400_000,
                "time_til_dormant_autodelete_ms": 172_800_000,
                "update_workspace_last_used_at": false,
                "update_workspace_dormant_at": false,
                "require_active_version": true,
                "deprecation_message": "use podman",
                "disable_everyone_group_access": false,
                "max_port_share_level": "authenticated",
                "cors_behavior": "passthru",
                "use_classic_parameter_flow": true,
            })
        );
    }

    #[test]
    fn empty_day_lists_are_sent_as_empty_lists_not_left_out() {
        let mut value = rendered();
        value["autostop_requirement"] = json!({"days_of_week": [], "weeks": 1});
        value["autostart_requirement"] = json!({"days_of_week": []});
        let template: Template = serde_json::from_value(value).unwrap();
        let body = serde_json::to_value(UpdateTemplateMeta::from_template(&template)).unwrap();
        assert_eq!(
            body["autostop_requirement"],
            json!({"days_of_week": [], "weeks": 1})
        );
        assert_eq!(body["autostart_requirement"], json!({"days_of_week": []}));
    }
}
