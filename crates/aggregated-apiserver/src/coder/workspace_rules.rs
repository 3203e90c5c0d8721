//! Pure rules of the `coderworkspaces` writes: the canonical-name rule, the create checks and Coder request, the
//! update rule (resourceVersion, and which spec fields may not change), delete preconditions, dry-run refusal and
//! the version a start build uses. The settings fields have their rules in [`super::workspace_settings`]. No I/O:
//! the storage and the `start`/`stop` handler feed these Coder's answers.

use coder_k8s_api::aggregation::{CoderWorkspace, GROUP};
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition};
use coder_k8s_coder_client::types::workspaces::{CreateWorkspaceRequest, Workspace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;
use uuid::Uuid;

use super::names::WorkspaceName;
use super::resources::WORKSPACES;
use super::workspace_settings::{SettingsChanges, WantedValue, rich_values};
use crate::generic::ApiError;

/// Coder's `automatic_updates` value that makes every start use the template's active version.
const AUTOMATIC_UPDATES_ALWAYS: &str = "always";

/// 400 for a server-side dry run of a write: Coder has no dry-run mode, so nothing may be sent to it.
pub fn dry_run_unsupported(resource: &str) -> ApiError {
    ApiError::bad_request(format!(
        "server-side dry-run is not supported for {resource}; nothing was changed"
    ))
}

/// `Operation cannot be fulfilled on coderworkspaces.aggregation.coder.com "<name>": <reason>`, kube-apiserver's
/// 409 wording.
pub fn workspace_conflict(name: &str, reason: &str) -> ApiError {
    ApiError::conflict(format!(
        "Operation cannot be fulfilled on {WORKSPACES}.{GROUP} {name:?}: {reason}"
    ))
    .with_details(name, GROUP, WORKSPACES)
}

/// The 400 of a request name whose organization or owner segment Coder resolved to another name (an alias such as
/// `default` or `me`, a raw ID, other casing). `hint_workspace` is the leaf placed in the suggested name: the
/// fetched workspace's own name when `leaf_verified`, else the requested leaf (on create, before the workspace
/// exists), and the message then says that the leaf was not checked.
pub fn check_canonical_segments(
    name: &str,
    requested: &WorkspaceName,
    canonical_organization: &str,
    canonical_owner: &str,
    hint_workspace: &str,
    leaf_verified: bool,
) -> Result<(), ApiError> {
    let mut aliases = Vec::new();
    if canonical_organization != requested.organization {
        aliases.push(format!(
            "organization segment {:?} resolves to organization {canonical_organization:?}",
            requested.organization
        ));
    }
    if canonical_owner != requested.owner {
        aliases.push(format!(
            "owner segment {:?} resolves to user {canonical_owner:?}",
            requested.owner
        ));
    }
    if aliases.is_empty() {
        return Ok(());
    }
    let canonical = format!("{canonical_organization}.{canonical_owner}.{hint_workspace}");
    let aliases = aliases.join(", ");
    Err(ApiError::bad_request(if leaf_verified {
        format!("workspace name {name:?}: {aliases}; use the canonical name {canonical:?}")
    } else {
        format!(
            "workspace name {name:?}: {aliases}; use the canonical organization and owner names, for example {canonical:?} (the workspace segment is not checked on create)"
        )
    }))
}

/// The full name check of a workspace Coder found by the requested owner and workspace segments (after its
/// organization was confirmed): every alias segment is corrected at once, then the leaf's casing.
pub fn check_canonical_workspace(
    name: &str,
    requested: &WorkspaceName,
    found: &Workspace,
) -> Result<(), ApiError> {
    check_canonical_segments(
        name,
        requested,
        &found.organization_name,
        &found.owner_name,
        &found.name,
        true,
    )?;
    if found.name != requested.workspace {
        let canonical = format!("{}.{}.{}", found.organization_name, found.owner_name, found.name);
        return Err(ApiError::bad_request(format!(
            "workspace name {name:?}: workspace segment {:?} resolves to workspace {:?}; use the canonical name {canonical:?}",
            requested.workspace, found.name
        )));
    }
    Ok(())
}

/// The body of a create as a `CoderWorkspace`, with the checks that need no Coder call: a name, the organization
/// of the name in `spec.organization`, a template name.
pub fn parse_create(object: Value) -> Result<(CoderWorkspace, String), ApiError> {
    let workspace: CoderWorkspace = serde_json::from_value(object)
        .map_err(|e| ApiError::bad_request(format!("the body is not a valid CoderWorkspace: {e}")))?;
    let name = workspace.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(ApiError::bad_request("metadata.name must not be empty"));
    }
    Ok((workspace, name))
}

/// `spec.organization` must name the organization of `metadata.name`, and `spec.templateName` must be set.
pub fn check_create_spec(workspace: &CoderWorkspace, requested: &WorkspaceName) -> Result<(), ApiError> {
    let spec = &workspace.spec;
    if spec.organization != requested.organization {
        return Err(ApiError::bad_request(format!(
            "spec.organization {:?} must match organization {:?} parsed from metadata.name",
            spec.organization, requested.organization
        )));
    }
    if spec.template_name.is_empty() {
        return Err(ApiError::bad_request("spec.templateName must not be empty"));
    }
    Ok(())
}

/// `spec.templateVersionID` as a UUID, when set.
pub fn pinned_version(workspace: &CoderWorkspace) -> Result<Option<Uuid>, ApiError> {
    let raw = &workspace.spec.template_version_id;
    if raw.is_empty() {
        return Ok(None);
    }
    Uuid::parse_str(raw).map(Some).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid workspace spec: invalid templateVersionID {raw:?}: {e}"
        ))
    })
}

/// 400 unless the pinned version belongs to the template (`version_template` is the version's template in Coder).
pub fn check_version_of_template(
    workspace: &CoderWorkspace,
    version_template: Option<Uuid>,
    template: Uuid,
) -> Result<(), ApiError> {
    if version_template == Some(template) {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "spec.templateVersionID {:?} does not belong to template {:?}",
        workspace.spec.template_version_id, workspace.spec.template_name
    )))
}

/// Coder's create request: the pinned version when there is one, else the template (its active version); the
/// settings the spec sets and its parameter values (Secret values already read). A time to live the spec turns off
/// is left out: Coder then applies the template's default, which the caller turns off afterwards.
pub fn create_request(
    leaf: &str,
    template: Uuid,
    pinned: Option<Uuid>,
    settings: &SettingsChanges,
    values: &[WantedValue],
) -> CreateWorkspaceRequest {
    CreateWorkspaceRequest {
        template_id: pinned.is_none().then_some(template),
        template_version_id: pinned,
        name: leaf.to_owned(),
        autostart_schedule: settings.autostart.clone().flatten(),
        ttl_ms: settings.ttl_ms.flatten(),
        rich_parameter_values: rich_values(values),
        automatic_updates: settings.automatic_updates.clone(),
    }
}

/// The update rule: `spec.organization` (when set) must be the name's organization, `metadata.resourceVersion` is
/// required and must equal the current fingerprint, and the organization, the template and a pinned version may
/// not change (optional fields left out of the body are not changes). The settings and `spec.running` may.
pub fn check_update(
    name: &str,
    requested: &WorkspaceName,
    current: &CoderWorkspace,
    desired: &CoderWorkspace,
) -> Result<(), ApiError> {
    let (have, want) = (&current.spec, &desired.spec);
    if !want.organization.is_empty() && want.organization != requested.organization {
        return Err(ApiError::bad_request(format!(
            "updated object spec.organization {:?} must match organization {:?} parsed from metadata.name",
            want.organization, requested.organization
        )));
    }
    let given = desired.metadata.resource_version.as_deref().unwrap_or_default();
    if given.is_empty() {
        return Err(ApiError::bad_request(
            "metadata.resourceVersion is required for update",
        ));
    }
    let current_version = current.metadata.resource_version.as_deref().unwrap_or_default();
    if given != current_version {
        return Err(workspace_conflict(
            name,
            &format!("resource version mismatch: got {given:?}, current is {current_version:?}"),
        ));
    }
    let immutable_changed = want.organization != have.organization
        || want.template_name != have.template_name
        || (!want.template_version_id.is_empty() && want.template_version_id != have.template_version_id);
    if immutable_changed {
        // v0.1.5's text, kept word for word for clients that match it; the settings fields are mutable now.
        return Err(ApiError::bad_request(
            "workspace update only supports changing spec.running; other spec fields are immutable",
        ));
    }
    Ok(())
}

/// The build request of a transition. A start names the template's active version when the template requires it
/// or the workspace always updates (as the coder CLI does); otherwise Coder reuses the previous build's version.
pub fn build_request(
    transition: Transition,
    workspace: &Workspace,
) -> Result<CreateWorkspaceBuildRequest, ApiError> {
    build_request_with(transition, workspace, &workspace.automatic_updates)
}

/// [`build_request`] with the automatic-update setting the workspace is about to get (an update that sets
/// `always` and starts the workspace starts it on the active version).
pub fn build_request_with(
    transition: Transition,
    workspace: &Workspace,
    automatic_updates: &str,
) -> Result<CreateWorkspaceBuildRequest, ApiError> {
    let mut request = CreateWorkspaceBuildRequest::transition(transition);
    let wants_active =
        workspace.template_require_active_version || automatic_updates == AUTOMATIC_UPDATES_ALWAYS;
    if transition == Transition::Start && wants_active {
        if workspace.template_active_version_id.is_nil() {
            return Err(ApiError::internal(format!(
                "Coder returned workspace {:?} without its template's active version",
                workspace.name
            )));
        }
        request.template_version_id = Some(workspace.template_active_version_id);
    }
    Ok(request)
}

/// Delete preconditions against the object fetched for this request, as kube-apiserver's storage checks them: the
/// UID first, then the resourceVersion; an explicitly empty value is compared like any other. A mismatch is the
/// 409 kube-apiserver answers, and the caller must not touch Coder.
pub fn check_delete_preconditions(
    options: &DeleteOptions,
    current: &Value,
    resource: &str,
    name: &str,
) -> Result<(), ApiError> {
    let Some(preconditions) = &options.preconditions else {
        return Ok(());
    };
    let meta = &current["metadata"];
    let checks = [
        ("UID", preconditions.uid.as_deref(), meta["uid"].as_str()),
        (
            "ResourceVersion",
            preconditions.resource_version.as_deref(),
            meta["resourceVersion"].as_str(),
        ),
    ];
    for (field, wanted, actual) in checks {
        let actual = actual.unwrap_or_default();
        match wanted {
            Some(wanted) if wanted != actual => {
                return Err(ApiError::conflict(format!(
                    "Operation cannot be fulfilled on {resource}.{GROUP} {name:?}: StorageError: invalid object, Code: 4, Key: {name}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {field} in precondition: {wanted}, {field} in object meta: {actual}"
                ))
                .with_details(name, GROUP, resource));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
    use serde_json::json;

    fn requested(name: &str) -> WorkspaceName {
        super::super::names::parse_workspace_name(name).unwrap()
    }

    fn found(organization: &str, owner: &str, name: &str) -> Workspace {
        Workspace {
            organization_name: organization.into(),
            owner_name: owner.into(),
            name: name.into(),
            ..Workspace::default()
        }
    }

    #[test]
    fn canonical_names_pass_and_aliases_name_every_canonical_segment() {
        let ok = check_canonical_workspace(
            "acme.alice.dev",
            &requested("acme.alice.dev"),
            &found("acme", "alice", "dev"),
        );
        assert!(ok.is_ok());
        let err = check_canonical_workspace(
            "default.me.dev",
            &requested("default.me.dev"),
            &found("acme", "alice", "dev"),
        )
        .unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            r#"workspace name "default.me.dev": organization segment "default" resolves to organization "acme", owner segment "me" resolves to user "alice"; use the canonical name "acme.alice.dev""#
        );
        let leaf = check_canonical_workspace(
            "acme.alice.Dev",
            &requested("acme.alice.Dev"),
            &found("acme", "alice", "dev"),
        )
        .unwrap_err();
        assert_eq!(
            leaf.message,
            r#"workspace name "acme.alice.Dev": workspace segment "Dev" resolves to workspace "dev"; use the canonical name "acme.alice.dev""#
        );
        // Alias segments are corrected first, with the fetched leaf in the hint.
        let both = check_canonical_workspace(
            "acme.ALICE.Dev",
            &requested("acme.ALICE.Dev"),
            &found("acme", "alice", "dev"),
        )
        .unwrap_err();
        assert!(
            both.message
                .ends_with(r#"use the canonical name "acme.alice.dev""#),
            "{}",
            both.message
        );
    }

    #[test]
    fn on_create_the_hint_keeps_the_requested_leaf_and_says_it_was_not_checked() {
        let err = check_canonical_segments(
            "acme.me.Box",
            &requested("acme.me.Box"),
            "acme",
            "alice",
            "Box",
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            r#"workspace name "acme.me.Box": owner segment "me" resolves to user "alice"; use the canonical organization and owner names, for example "acme.alice.Box" (the workspace segment is not checked on create)"#
        );
        assert!(
            check_canonical_segments(
                "acme.alice.Box",
                &requested("acme.alice.Box"),
                "acme",
                "alice",
                "Box",
                false
            )
            .is_ok()
        );
    }

    fn object(value: Value) -> CoderWorkspace {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn create_checks_name_organization_and_template() {
        let empty = parse_create(json!({"metadata": {}, "spec": {"running": true}})).unwrap_err();
        assert_eq!(
            (empty.code, empty.message.as_str()),
            (400, "metadata.name must not be empty")
        );
        let not_an_object = parse_create(json!({"spec": {"running": "yes"}})).unwrap_err();
        assert_eq!(not_an_object.code, 400);
        let (workspace, name) = parse_create(json!({
            "metadata": {"name": "acme.alice.dev"},
            "spec": {"organization": "other", "templateName": "docker", "running": true}
        }))
        .unwrap();
        assert_eq!(name, "acme.alice.dev");
        let err = check_create_spec(&workspace, &requested(&name)).unwrap_err();
        assert_eq!(
            err.message,
            r#"spec.organization "other" must match organization "acme" parsed from metadata.name"#
        );
        let no_template = object(json!({"spec": {"organization": "acme", "running": true}}));
        assert_eq!(
            check_create_spec(&no_template, &requested(&name))
                .unwrap_err()
                .message,
            "spec.templateName must not be empty"
        );
    }

    #[test]
    fn a_pinned_version_must_be_a_uuid_of_the_template() {
        let template = Uuid::from_u128(7);
        let unpinned = object(json!({"spec": {"templateName": "docker"}}));
        assert_eq!(pinned_version(&unpinned).unwrap(), None);
        let bad = object(json!({"spec": {"templateName": "docker", "templateVersionID": "v1"}}));
        let err = pinned_version(&bad).unwrap_err();
        assert!(
            err.message
                .starts_with(r#"invalid workspace spec: invalid templateVersionID "v1": "#),
            "{}",
            err.message
        );
        let id = Uuid::from_u128(9);
        let pinned = object(json!({"spec": {"templateName": "docker", "templateVersionID": id.to_string()}}));
        assert_eq!(pinned_version(&pinned).unwrap(), Some(id));
        assert!(check_version_of_template(&pinned, Some(template), template).is_ok());
        let err = check_version_of_template(&pinned, Some(Uuid::from_u128(8)), template).unwrap_err();
        assert_eq!(
            err.message,
            format!(r#"spec.templateVersionID "{id}" does not belong to template "docker""#)
        );
        assert_eq!(
            check_version_of_template(&pinned, None, template)
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn the_create_request_names_the_version_or_else_the_template_and_carries_the_settings() {
        let template = Uuid::from_u128(7);
        let settings = SettingsChanges {
            autostart: Some(Some("CRON_TZ=UTC 0 9 * * 1".into())),
            ttl_ms: Some(Some(60_000)),
            automatic_updates: Some("always".into()),
        };
        let values = [WantedValue {
            index: 0,
            name: "region".into(),
            value: "eu".into(),
            sensitive: false,
        }];
        let by_template = create_request("dev", template, None, &settings, &values);
        assert_eq!(by_template.template_id, Some(template));
        assert_eq!(by_template.template_version_id, None);
        assert_eq!(by_template.ttl_ms, Some(60_000));
        assert_eq!(
            by_template.autostart_schedule.as_deref(),
            Some("CRON_TZ=UTC 0 9 * * 1")
        );
        assert_eq!(by_template.automatic_updates.as_deref(), Some("always"));
        assert_eq!(
            serde_json::to_value(&by_template.rich_parameter_values).unwrap(),
            json!([{"name": "region", "value": "eu"}])
        );
        let by_version = create_request("dev", template, Some(Uuid::from_u128(9)), &settings, &[]);
        assert_eq!(
            (by_version.template_id, by_version.template_version_id),
            (None, Some(Uuid::from_u128(9)))
        );
        assert_eq!(by_version.name, "dev");
        // Turned off: left out, so Coder applies the template's default first.
        let off = SettingsChanges {
            autostart: Some(None),
            ttl_ms: Some(None),
            automatic_updates: None,
        };
        let request = create_request("dev", template, None, &off, &[]);
        assert_eq!(
            (
                request.ttl_ms,
                request.autostart_schedule,
                request.automatic_updates
            ),
            (None, None, None)
        );
    }

    fn current(running: bool) -> CoderWorkspace {
        object(json!({
            "metadata": {"name": "acme.alice.dev", "resourceVersion": "abc"},
            "spec": {"organization": "acme", "templateName": "docker", "templateVersionID": "v-1",
                     "running": running, "ttlMillis": 1000, "autostartSchedule": "s"}
        }))
    }

    fn desired(edit: impl FnOnce(&mut CoderWorkspace)) -> CoderWorkspace {
        let mut object = current(true);
        edit(&mut object);
        object
    }

    #[test]
    fn updates_need_the_current_resource_version() {
        let name = "acme.alice.dev";
        let missing = check_update(
            name,
            &requested(name),
            &current(true),
            &desired(|d| d.metadata.resource_version = None),
        )
        .unwrap_err();
        assert_eq!(
            (missing.code, missing.message.as_str()),
            (400, "metadata.resourceVersion is required for update")
        );
        let stale = check_update(
            name,
            &requested(name),
            &current(true),
            &desired(|d| d.metadata.resource_version = Some("old".into())),
        )
        .unwrap_err();
        assert_eq!((stale.code, stale.reason), (409, "Conflict"));
        assert_eq!(
            stale.message,
            r#"Operation cannot be fulfilled on coderworkspaces.aggregation.coder.com "acme.alice.dev": resource version mismatch: got "old", current is "abc""#
        );
    }

    #[test]
    fn the_organization_template_and_pinned_version_may_not_change() {
        let name = "acme.alice.dev";
        let immutable =
            "workspace update only supports changing spec.running; other spec fields are immutable";
        let edits: [fn(&mut CoderWorkspace); 3] = [
            |d| d.spec.template_name = "other".into(),
            |d| d.spec.template_version_id = "v-2".into(),
            |d| d.spec.organization = String::new(),
        ];
        for edit in edits {
            let err = check_update(name, &requested(name), &current(true), &desired(edit)).unwrap_err();
            assert_eq!((err.code, err.message.as_str()), (400, immutable));
        }
        let wrong_org = check_update(
            name,
            &requested(name),
            &current(true),
            &desired(|d| d.spec.organization = "x".into()),
        )
        .unwrap_err();
        assert_eq!(
            wrong_org.message,
            r#"updated object spec.organization "x" must match organization "acme" parsed from metadata.name"#
        );
        // Optional fields left out are not changes; the settings and running may change.
        let sparse = desired(|d| {
            d.spec.template_version_id = String::new();
            d.spec.ttl_millis = None;
            d.spec.autostart_schedule = None;
        });
        assert!(check_update(name, &requested(name), &current(true), &sparse).is_ok());
        let settings = desired(|d| {
            d.spec.running = false;
            d.spec.ttl_millis = Some(5);
            d.spec.autostart_schedule = Some("t".into());
            d.spec.automatic_updates = Some("always".into());
        });
        assert!(check_update(name, &requested(name), &current(true), &settings).is_ok());
    }

    #[test]
    fn a_start_names_the_active_version_only_when_the_template_or_workspace_asks_for_it() {
        let active = Uuid::from_u128(5);
        let workspace = |require: bool, updates: &str| Workspace {
            template_require_active_version: require,
            automatic_updates: updates.into(),
            template_active_version_id: active,
            ..Workspace::default()
        };
        let version = |transition, w: &Workspace| build_request(transition, w).unwrap().template_version_id;
        assert_eq!(version(Transition::Start, &workspace(false, "never")), None);
        assert_eq!(
            version(Transition::Start, &workspace(true, "never")),
            Some(active)
        );
        assert_eq!(
            version(Transition::Start, &workspace(false, "always")),
            Some(active)
        );
        assert_eq!(version(Transition::Stop, &workspace(true, "always")), None);
        let becoming_always =
            build_request_with(Transition::Start, &workspace(false, "never"), "always").unwrap();
        assert_eq!(becoming_always.template_version_id, Some(active));
        let no_active = Workspace {
            automatic_updates: "always".into(),
            ..Workspace::default()
        };
        assert_eq!(
            build_request(Transition::Start, &no_active).unwrap_err().code,
            500
        );
    }

    #[test]
    fn delete_preconditions_compare_uid_then_resource_version() {
        let object = json!({"metadata": {"uid": "u-1", "resourceVersion": "rv-1"}});
        let options = |uid: Option<&str>, rv: Option<&str>| DeleteOptions {
            preconditions: Some(Preconditions {
                uid: uid.map(str::to_owned),
                resource_version: rv.map(str::to_owned),
            }),
            ..DeleteOptions::default()
        };
        let check = |o: &DeleteOptions| check_delete_preconditions(o, &object, "coderworkspaces", "a.b.c");
        assert!(check(&DeleteOptions::default()).is_ok());
        assert!(check(&options(None, None)).is_ok());
        assert!(check(&options(Some("u-1"), Some("rv-1"))).is_ok());
        let uid = check(&options(Some("x"), Some("stale"))).unwrap_err();
        assert_eq!((uid.code, uid.reason), (409, "Conflict"));
        assert_eq!(
            uid.message,
            r#"Operation cannot be fulfilled on coderworkspaces.aggregation.coder.com "a.b.c": StorageError: invalid object, Code: 4, Key: a.b.c, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: x, UID in object meta: u-1"#
        );
        let rv = check(&options(Some("u-1"), Some("stale"))).unwrap_err();
        assert!(
            rv.message.ends_with("Precondition failed: ResourceVersion in precondition: stale, ResourceVersion in object meta: rv-1"),
            "{}",
            rv.message
        );
        // An explicitly empty value is compared too.
        assert_eq!(check(&options(Some(""), None)).unwrap_err().code, 409);
        assert_eq!(check(&options(None, Some(""))).unwrap_err().code, 409);
    }

    #[test]
    fn dry_run_refusal_names_the_resource() {
        let err = dry_run_unsupported("coderworkspaces");
        assert_eq!(
            (err.code, err.message.as_str()),
            (
                400,
                "server-side dry-run is not supported for coderworkspaces; nothing was changed"
            )
        );
    }
}
