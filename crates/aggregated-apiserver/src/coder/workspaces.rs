//! `coderworkspaces`: Coder workspaces as `CoderWorkspace` objects named `<organization>.<owner>.<workspace>`. A
//! single get shows the latest build's parameter values; lists and watches leave them out.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderWorkspace, CoderWorkspaceSecretKeyRef, CoderWorkspaceSpec, GROUP};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition, WorkspaceBuild};
use coder_k8s_coder_client::types::workspaces::{RichParameterValue, Workspace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;
use tokio::time::Instant;

use super::convert;
use super::errors::{map_coder_error, timed_out, within};
use super::first_build_stop;
use super::list_memo::ListMemo;
use super::names::{self, WorkspaceName};
use super::provider::{Backend, Provider};
use super::resources::{TEMPLATES, WORKSPACES, at, backend_of, column, schema, subject};
use super::workspace_list::{Page, all_workspaces};
use super::workspace_rules as rules;
use super::workspace_secrets::{ParameterSecrets, secret_values};
use super::workspace_settings::{self as settings, FieldErrors, SettingsChanges, WantedValue};
use super::workspace_writes::Target;
use super::write_rules;
use crate::generic::{
    ApiError, Column, Deleted, EventType, RequestContext, ResourceDef, Storage, Verb, Written,
};

/// Every verb of `coderworkspaces`; `deletecollection` is not served.
const VERBS: &[Verb] = super::resources::ALL_VERBS;

/// The `coderworkspaces` resource, without parameter values from Secrets (a reference is refused).
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
    resource_with(provider, None)
}

/// The `coderworkspaces` resource; `secrets` serves parameter values from Secrets and their records.
pub fn resource_with(provider: Arc<dyn Provider>, secrets: Option<Arc<dyn ParameterSecrets>>) -> ResourceDef {
    ResourceDef {
        plural: WORKSPACES,
        singular: "coderworkspace",
        kind: "CoderWorkspace",
        list_kind: "CoderWorkspaceList",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: VERBS,
        schema: schema::<CoderWorkspace>(),
        columns: workspace_columns(),
        subresources: Vec::new(),
        storage: Arc::new(WorkspaceStorage {
            provider,
            secrets,
            listed: ListMemo::default(),
        }),
        watch_feed: None,
    }
}

fn workspace_columns() -> Vec<Column> {
    vec![
        column("Organization", "string", "The Coder organization.", 0, |o| {
            at(o, &["spec", "organization"]).clone()
        }),
        column("Owner", "string", "The workspace owner.", 0, |o| {
            at(o, &["status", "ownerName"]).clone()
        }),
        column(
            "Template",
            "string",
            "The template the workspace is built from.",
            0,
            |o| at(o, &["spec", "templateName"]).clone(),
        ),
        column(
            "Running",
            "boolean",
            "Whether the workspace is started.",
            0,
            |o| at(o, &["spec", "running"]).clone(),
        ),
        column(
            "Last Build Status",
            "string",
            "Status of the latest build.",
            0,
            |o| at(o, &["status", "latestBuildStatus"]).clone(),
        ),
        column("Latest Build ID", "string", "ID of the latest build.", 1, |o| {
            at(o, &["status", "latestBuildID"]).clone()
        }),
        column(
            "Auto Shutdown",
            "date",
            "When the workspace stops automatically.",
            1,
            |o| at(o, &["status", "autoShutdown"]).clone(),
        ),
        column("Last Used", "date", "When the workspace was last used.", 1, |o| {
            at(o, &["status", "lastUsedAt"]).clone()
        }),
    ]
}

struct WorkspaceStorage {
    provider: Arc<dyn Provider>,
    secrets: Option<Arc<dyn ParameterSecrets>>,
    /// The last list of each namespace, reused while Coder sends the same pages.
    listed: ListMemo<Page>,
}

/// A workspace found under its canonical name, and the backend that serves it.
pub(crate) struct Resolved {
    pub backend: Backend,
    pub workspace: Workspace,
}

/// Looks `name` up in the Coder deployment of the request's namespace and checks that it is the workspace's
/// canonical name, before any further Coder call: a workspace of another organization (or of one the operator
/// cannot read) is an opaque 404, aliases and other casing are a 400 naming the canonical name. Every Coder call
/// ends by `deadline`.
pub(crate) async fn resolve(
    provider: &dyn Provider,
    ctx: &RequestContext,
    name: &str,
    deadline: Instant,
) -> Result<Resolved, ApiError> {
    let requested = names::parse_workspace_name(name)?;
    let Some(backend) = backend_of(provider, ctx).await? else {
        return Err(ApiError::not_found(GROUP, WORKSPACES, name));
    };
    let workspace = fetch(&backend.client, &requested, name, deadline).await?;
    verify_identity(&backend.client, &requested, name, &workspace, deadline).await?;
    Ok(Resolved { backend, workspace })
}

/// `GET /users/{owner}/workspace/{workspace}` by the requested segments (Coder resolves aliases and casing).
async fn fetch(
    client: &CoderClient,
    requested: &WorkspaceName,
    name: &str,
    deadline: Instant,
) -> Result<Workspace, ApiError> {
    within(
        deadline,
        subject(WORKSPACES, name),
        client.workspace_by_owner_and_name(&requested.owner, &requested.workspace),
    )
    .await
}

/// Organization membership first (by ID once the names differ, so an alias such as `default` is recognised while
/// another organization's workspace stays an opaque 404), then the canonical-name rule.
async fn verify_identity(
    client: &CoderClient,
    requested: &WorkspaceName,
    name: &str,
    workspace: &Workspace,
    deadline: Instant,
) -> Result<(), ApiError> {
    if workspace.organization_name != requested.organization {
        let organization = verify_organization(client, requested, name, deadline).await?;
        if organization.id != workspace.organization_id {
            return Err(ApiError::not_found(GROUP, WORKSPACES, name));
        }
    }
    rules::check_canonical_workspace(name, requested, workspace)
}

/// The requested organization, read to verify membership: a denied read is the same opaque 404 as another
/// organization's workspace, so a probe cannot tell whether the workspace exists.
async fn verify_organization(
    client: &CoderClient,
    requested: &WorkspaceName,
    name: &str,
    deadline: Instant,
) -> Result<coder_k8s_coder_client::types::organizations::Organization, ApiError> {
    let subject = subject(WORKSPACES, name);
    match tokio::time::timeout_at(deadline, client.organization(&requested.organization)).await {
        Ok(Ok(organization)) => Ok(organization),
        Ok(Err(coder_k8s_coder_client::Error::Forbidden { .. })) => {
            Err(ApiError::not_found(GROUP, WORKSPACES, name))
        }
        Ok(Err(error)) => Err(map_coder_error(&error, subject)),
        Err(_) => Err(timed_out(subject)),
    }
}

/// The converted workspace with `build` as its latest build (the answer of a write that queued it).
pub(crate) fn with_build(
    namespace: &str,
    mut workspace: Workspace,
    build: WorkspaceBuild,
) -> Result<Value, ApiError> {
    if !build.updated_at.is_empty() {
        workspace.updated_at.clone_from(&build.updated_at);
    }
    workspace.latest_build = build;
    convert::workspace(namespace, &workspace)
}

/// The namespace of a namespaced request (the handlers only route namespaced writes here).
fn namespace_of(ctx: &RequestContext) -> Result<&str, ApiError> {
    ctx.namespace
        .as_deref()
        .ok_or_else(|| ApiError::bad_request("namespace is required"))
}

impl WorkspaceStorage {
    fn target<'a>(&'a self, ctx: &RequestContext, backend: &'a Backend, name: &'a str) -> Target<'a> {
        Target {
            client: &backend.client,
            namespace: &backend.namespace,
            name,
            deadline: ctx.deadline,
            secrets: self.secrets.as_ref(),
        }
    }

    /// `POST /users/{owner}/workspaces` after the checks of the name, the settings, the Secret references (the
    /// caller's permission first), the organization, the owner, the template, a pinned version and the parameter
    /// names; the references are recorded before Coder gets the values. Then a time to live the spec turns off is
    /// turned off (Coder applies the template's default on create), and with `running: false` a stop build is
    /// queued, or, while Coder refuses it during the first build, queued once that build ended
    /// ([`first_build_stop`]). Their failures are logged only: the workspace exists, and a later write finishes them.
    async fn create_workspace(&self, ctx: &RequestContext, object: Value) -> Result<Written, ApiError> {
        let (workspace, name) = rules::parse_create(object)?;
        let requested = names::parse_workspace_name(&name)?;
        rules::check_create_spec(&workspace, &requested)?;
        let pinned = rules::pinned_version(&workspace)?;
        let changes = checked_settings(&workspace.spec, None, &name)?;
        let namespace = namespace_of(ctx)?;
        let Some(backend) = backend_of(self.provider.as_ref(), ctx).await? else {
            return Err(ApiError::service_unavailable(format!(
                "namespace {namespace:?} is not served: no Coder deployment is configured for it"
            )));
        };
        let secret_values =
            secret_values(self.secrets.as_ref(), ctx, namespace, &name, &workspace.spec).await?;
        let wanted = settings::wanted_values(&workspace.spec, &secret_values);
        let target = self.target(ctx, &backend, &name);
        let client = &backend.client;
        let on_workspace = subject(WORKSPACES, &name);
        let organization = within(
            ctx.deadline,
            on_workspace,
            client.organization(&requested.organization),
        )
        .await?;
        // The owner is resolved before any write, so an alias such as `me` is refused instead of creating a
        // workspace that would be served under another name.
        let owner = within(ctx.deadline, on_workspace, client.user(&requested.owner)).await?;
        rules::check_canonical_segments(
            &name,
            &requested,
            &organization.name,
            &owner.username,
            &requested.workspace,
            false,
        )?;
        let template_name = names::template_name(&requested.organization, &workspace.spec.template_name)
            .unwrap_or_else(|_| workspace.spec.template_name.clone());
        let template = within(
            ctx.deadline,
            subject(TEMPLATES, &template_name),
            client.template_by_name(&organization.id.to_string(), &workspace.spec.template_name),
        )
        .await?;
        if let Some(version) = pinned {
            let found = within(ctx.deadline, on_workspace, client.template_version(version)).await?;
            rules::check_version_of_template(&workspace, found.template_id, template.id)?;
        }
        if !wanted.is_empty() {
            let version = pinned.unwrap_or(template.active_version_id);
            target.check_parameters(version, &wanted, None).await?;
        }
        // Recorded before Coder gets a value from a Secret. The references of a workspace that already has this
        // name (Coder then refuses the create) stay in, so this create never uncovers that workspace's values.
        let previous = target.stored_record().await?;
        let references = settings::references(&workspace.spec);
        if !references.is_empty() {
            let before = previous
                .as_ref()
                .map(|r| r.references.clone())
                .unwrap_or_default();
            let both = settings::record_after_failure(&before, &references, true);
            target.record(None, both).await?;
        }
        let request = rules::create_request(&requested.workspace, template.id, pinned, &changes, &wanted);
        let schedule = changes.autostart.clone().flatten().unwrap_or_default();
        let answer = within(
            ctx.deadline,
            on_workspace,
            client.create_workspace_redacting(
                &requested.owner,
                &request,
                &settings::sensitive_values(&wanted),
            ),
        )
        .await;
        let mut created = match answer {
            Ok(created) => created,
            Err(error) => {
                // After a timeout or a 5xx Coder may have created the workspace with the values: the record stays.
                if !references.is_empty() && settings::certainly_refused(&error) {
                    let (id, before) = previous
                        .map(|r| (r.workspace_id, r.references))
                        .unwrap_or_default();
                    restore_record(&target, id, before).await;
                }
                return Err(match error.message.starts_with("Invalid Autostart Schedule.") {
                    true => target.refused_setting(error, "spec.autostartSchedule", &schedule),
                    false => error,
                });
            }
        };
        self.finish_create(&target, &workspace, &changes, previous.is_some(), &mut created)
            .await;
        Ok(Written {
            object: target.written(&created).await?,
            created: true,
            event: Some(EventType::Added),
        })
    }

    /// What a create does after Coder created the workspace; failures are logged, never answered. The record
    /// becomes this workspace's (`had_record`: one of this name was there before, which no longer applies).
    async fn finish_create(
        &self,
        target: &Target<'_>,
        workspace: &CoderWorkspace,
        changes: &SettingsChanges,
        had_record: bool,
        created: &mut Workspace,
    ) {
        let name = target.name;
        if changes.ttl_ms == Some(None) && created.ttl_ms.is_some() {
            match target.write_ttl(created.id, None).await {
                Ok(()) => created.ttl_ms = None,
                Err(error) => {
                    tracing::info!(workspace = %name, error = %error.message, "turning off the template's default time to live after the create failed")
                }
            }
        }
        let references = settings::references(&workspace.spec);
        if (had_record || !references.is_empty())
            && let Err(error) = target.record(Some(created.id), references).await
        {
            // The record without the ID still applies to this workspace.
            tracing::info!(workspace = %name, error = %error.message, "recording the workspace ID of the parameter references failed");
        }
        if !workspace.spec.running {
            let stop = CreateWorkspaceBuildRequest::transition(Transition::Stop);
            match within(
                target.deadline,
                subject(WORKSPACES, name),
                target.client.create_workspace_build(created.id, &stop),
            )
            .await
            {
                Ok(build) => created.latest_build = build,
                // Coder refuses a stop while the first build is active: stop once it has ended.
                Err(error) => {
                    tracing::debug!(workspace = %name, error = %error.message, "the stop build waits for the first build");
                    first_build_stop::stop_after_first_build(
                        target.client.clone(),
                        created.id,
                        created.latest_build.id,
                    );
                }
            }
        }
    }

    /// Server-side apply of a missing workspace: membership in the organization is verified as for an existing
    /// workspace (a denied organization is a 404), then the workspace is created.
    async fn create_on_update(
        &self,
        ctx: &RequestContext,
        client: &CoderClient,
        requested: &WorkspaceName,
        name: &str,
        object: Value,
    ) -> Result<Written, ApiError> {
        verify_organization(client, requested, name, ctx.deadline).await?;
        self.create_workspace(ctx, object).await
    }

    /// An update of a workspace that exists: the checks, then what differs from Coder, written in order.
    async fn update_existing(
        &self,
        ctx: &RequestContext,
        backend: &Backend,
        name: &str,
        requested: &WorkspaceName,
        mut workspace: Workspace,
        object: Value,
    ) -> Result<Written, ApiError> {
        let current: CoderWorkspace =
            serde_json::from_value(convert::workspace(&backend.namespace, &workspace)?)
                .map_err(|e| ApiError::internal(format!("read back a converted workspace: {e}")))?;
        let desired: CoderWorkspace = serde_json::from_value(object)
            .map_err(|e| ApiError::bad_request(format!("the body is not a valid CoderWorkspace: {e}")))?;
        rules::check_update(name, requested, &current, &desired)?;
        let changes = checked_settings(&desired.spec, Some(&workspace), name)?;
        let secret_values = secret_values(
            self.secrets.as_ref(),
            ctx,
            &backend.namespace,
            name,
            &desired.spec,
        )
        .await?;
        let wanted = settings::wanted_values(&desired.spec, &secret_values);
        let target = self.target(ctx, backend, name);
        let plan = plan_build(&target, &workspace, &current, &desired, &changes, &wanted).await?;
        let recorded = target.recorded(workspace.id).await?;
        let references = settings::recorded_after(&recorded, &desired.spec);
        if changes.is_empty() && plan.build.is_none() && references == recorded {
            let object = match &plan.values {
                Some(values) => target.shown_with(&workspace, values).await?,
                None => target.shown(&workspace).await?,
            };
            return Ok(write_rules::unchanged(object));
        }
        // Recorded before Coder gets a value from a Secret, so no read ever shows it; put back if the writes fail
        // before the build could carry the new values.
        let record_changes = references != recorded;
        if record_changes {
            target.record(Some(workspace.id), references.clone()).await?;
        }
        let sensitive = settings::sensitive_values(&plan.changed);
        let written = target
            .write_update(&mut workspace, &changes, plan.build.as_ref(), &sensitive)
            .await;
        if let Err(failure) = written {
            let kept = settings::record_after_failure(&recorded, &references, failure.build_may_be_queued);
            if record_changes && kept != references {
                restore_record(&target, Some(workspace.id), kept).await;
            }
            return Err(failure.error);
        }
        Ok(Written {
            object: target.written(&workspace).await?,
            created: false,
            event: Some(EventType::Modified),
        })
    }
}

/// Puts `references` back as the workspace's record after a write Coder refused (logged when that fails too: a
/// record naming a Secret the value did not come from shows the reference, never a value).
async fn restore_record(
    target: &Target<'_>,
    workspace: Option<uuid::Uuid>,
    references: BTreeMap<String, CoderWorkspaceSecretKeyRef>,
) {
    if let Err(error) = target.record(workspace, references).await {
        tracing::info!(workspace = %target.name, error = %error.message, "putting back the parameter references after a refused write failed");
    }
}

/// The settings of `spec` checked (a 422 naming every bad field), with what differs from `current`.
fn checked_settings(
    spec: &CoderWorkspaceSpec,
    current: Option<&Workspace>,
    name: &str,
) -> Result<SettingsChanges, ApiError> {
    let mut errors = FieldErrors::default();
    let changes = settings::settings_changes(spec, current, &mut errors);
    errors.into_result(name)?;
    Ok(changes)
}

/// The build an update queues, if any, and the parameter values it changes.
struct BuildPlan {
    /// The latest build's values, when the spec sets parameters.
    values: Option<Vec<RichParameterValue>>,
    changed: Vec<WantedValue>,
    build: Option<CreateWorkspaceBuildRequest>,
}

/// Compares the spec's parameter values with the latest build's, decides the build (a change of `running`, or
/// changed values: see [`settings::build_for`]) and checks the changed values against the version it builds.
async fn plan_build(
    target: &Target<'_>,
    workspace: &Workspace,
    current: &CoderWorkspace,
    desired: &CoderWorkspace,
    changes: &SettingsChanges,
    wanted: &[WantedValue],
) -> Result<BuildPlan, ApiError> {
    let (values, changed) = if wanted.is_empty() {
        (None, Vec::new())
    } else {
        let values = target.build_values(workspace.latest_build.id).await?;
        let changed = settings::changed_values(wanted, Some(&values));
        (Some(values), changed)
    };
    let updates = changes
        .automatic_updates
        .as_deref()
        .unwrap_or(&workspace.automatic_updates);
    let transition = settings::build_for(current.spec.running, desired.spec.running, !changed.is_empty());
    let mut build = transition
        .map(|t| rules::build_request_with(t, workspace, updates))
        .transpose()?;
    if let Some(request) = build.as_mut().filter(|_| !changed.is_empty()) {
        let version = request
            .template_version_id
            .unwrap_or(workspace.latest_build.template_version_id);
        target
            .check_parameters(version, &changed, values.as_deref())
            .await?;
        request.rich_parameter_values = settings::rich_values(&changed);
    }
    Ok(BuildPlan {
        values,
        changed,
        build,
    })
}

#[async_trait]
impl Storage for WorkspaceStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let resolved = resolve(self.provider.as_ref(), ctx, name, ctx.deadline).await?;
        self.target(ctx, &resolved.backend, name)
            .shown(&resolved.workspace)
            .await
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        Ok(Arc::unwrap_or_clone(self.list_shared(ctx).await?))
    }

    /// Coder is asked every time; the objects of a namespace whose pages are unchanged are the last list's.
    async fn list_shared(&self, ctx: &RequestContext) -> Result<Arc<Vec<Value>>, ApiError> {
        let mut lists = Vec::new();
        for backend in self.provider.resolve(ctx.namespace.as_deref()).await? {
            lists.push(all_workspaces(&backend.client, ctx, &backend.namespace, &self.listed).await?);
        }
        Ok(match <[_; 1]>::try_from(lists) {
            Ok([only]) => only,
            Err(lists) => Arc::new(lists.iter().flat_map(|l| l.iter().cloned()).collect()),
        })
    }

    fn check_write(&self, ctx: &RequestContext) -> Result<(), ApiError> {
        if ctx.dry_run {
            return Err(rules::dry_run_unsupported(WORKSPACES));
        }
        Ok(())
    }

    async fn create(&self, ctx: &RequestContext, object: Value) -> Result<Written, ApiError> {
        self.check_write(ctx)?;
        self.create_workspace(ctx, object).await
    }

    /// `spec.running` (a start or stop build), the settings and parameter values change; server-side apply
    /// creates a missing workspace.
    async fn update(
        &self,
        ctx: &RequestContext,
        name: &str,
        object: Value,
        allow_create: bool,
    ) -> Result<Written, ApiError> {
        self.check_write(ctx)?;
        let requested = names::parse_workspace_name(name)?;
        let Some(backend) = backend_of(self.provider.as_ref(), ctx).await? else {
            if allow_create {
                return self.create_workspace(ctx, object).await;
            }
            return Err(ApiError::not_found(GROUP, WORKSPACES, name));
        };
        let client = &backend.client;
        let workspace = match fetch(client, &requested, name, ctx.deadline).await {
            Ok(workspace) => workspace,
            Err(error) if error.code == 404 && allow_create => {
                return self.create_on_update(ctx, client, &requested, name, object).await;
            }
            Err(error) => return Err(error),
        };
        verify_identity(client, &requested, name, &workspace, ctx.deadline).await?;
        self.update_existing(ctx, &backend, name, &requested, workspace, object)
            .await
    }

    /// Queues a delete build: Coder deletes the workspace asynchronously, so the answer is a `Status` of success
    /// and watchers get a `MODIFIED` event of the workspace with that build, not `DELETED`. The workspace's record
    /// of parameter references goes with it.
    async fn delete(
        &self,
        ctx: &RequestContext,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        self.check_write(ctx)?;
        let Resolved { backend, workspace } =
            resolve(self.provider.as_ref(), ctx, name, ctx.deadline).await?;
        let current = convert::workspace(&backend.namespace, &workspace)?;
        rules::check_delete_preconditions(options, &current, WORKSPACES, name)?;
        let request = CreateWorkspaceBuildRequest::transition(Transition::Delete);
        let build = within(
            ctx.deadline,
            subject(WORKSPACES, name),
            backend.client.create_workspace_build(workspace.id, &request),
        )
        .await?;
        if let Err(error) = self
            .target(ctx, &backend, name)
            .record(None, Default::default())
            .await
        {
            tracing::info!(workspace = %name, error = %error.message, "removing the parameter references of a deleted workspace failed");
        }
        Ok(Deleted::Success {
            object: Some(with_build(&backend.namespace, workspace, build)?),
            event: Some(EventType::Modified),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Unserved;

    #[async_trait]
    impl Provider for Unserved {
        async fn resolve(&self, _namespace: Option<&str>) -> Result<Vec<Backend>, ApiError> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn every_verb_but_deletecollection_is_served() {
        let def = resource(Arc::new(Unserved));
        assert_eq!(
            def.verbs,
            [
                Verb::Get,
                Verb::List,
                Verb::Watch,
                Verb::Create,
                Verb::Update,
                Verb::Patch,
                Verb::Delete
            ]
        );
        assert!(
            def.subresources.is_empty(),
            "start and stop are attached by the registry"
        );
    }

    fn ctx(dry_run: bool) -> RequestContext {
        RequestContext {
            user: crate::generic::UserInfo::default(),
            namespace: Some("team".into()),
            deadline: Instant::now() + std::time::Duration::from_secs(5),
            dry_run,
            query: Default::default(),
        }
    }

    #[tokio::test]
    async fn dry_run_writes_are_refused_before_the_provider_is_asked() {
        let storage = resource(Arc::new(super::super::provider::UnconfiguredProvider)).storage;
        let message = "server-side dry-run is not supported for coderworkspaces; nothing was changed";
        // The unconfigured provider would answer 503: a 400 proves nothing was resolved.
        let errors = [
            storage
                .create(&ctx(true), serde_json::json!({}))
                .await
                .unwrap_err(),
            storage
                .update(&ctx(true), "a.b.c", serde_json::json!({}), true)
                .await
                .unwrap_err(),
            storage
                .delete(&ctx(true), "a.b.c", &DeleteOptions::default())
                .await
                .unwrap_err(),
            storage.check_write(&ctx(true)).unwrap_err(),
        ];
        for error in errors {
            assert_eq!((error.code, error.message.as_str()), (400, message));
        }
        assert!(storage.check_write(&ctx(false)).is_ok());
        assert_eq!(storage.create(&ctx(false), serde_json::json!({"metadata": {"name": "a.b.c"}, "spec": {"organization": "a", "templateName": "t"}})).await.unwrap_err().code, 503);
    }
}
