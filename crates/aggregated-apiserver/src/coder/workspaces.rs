//! `coderworkspaces`: Coder workspaces as `CoderWorkspace` objects named `<organization>.<owner>.<workspace>`.

use std::sync::Arc;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderWorkspace, GROUP};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition, WorkspaceBuild};
use coder_k8s_coder_client::types::workspaces::Workspace;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;
use tokio::time::Instant;

use super::convert;
use super::errors::{map_coder_error, timed_out, within};
use super::names::{self, WorkspaceName};
use super::provider::{Backend, Provider};
use super::resources::{TEMPLATES, WORKSPACES, at, backend_of, column, schema, subject};
use super::workspace_rules::{self as rules, UpdateChange};
use crate::generic::{
    ApiError, Column, Deleted, EventType, RequestContext, ResourceDef, Storage, Verb, Written,
};

/// Every verb of `coderworkspaces`; `deletecollection` is not served.
const VERBS: &[Verb] = &[
    Verb::Get,
    Verb::List,
    Verb::Watch,
    Verb::Create,
    Verb::Update,
    Verb::Patch,
    Verb::Delete,
];

/// The `coderworkspaces` resource.
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
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
        storage: Arc::new(WorkspaceStorage { provider }),
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
}

/// Workspaces per Coder page.
const PAGE: u32 = 100;
/// Pages fetched at once after the first: where Coder answers pages in parallel, a list of 1,000 workspaces waits for
/// about four rounds of pages instead of ten, with the same Coder calls.
const PAGES_AT_ONCE: usize = 4;

/// Every workspace Coder shows the operator. The first page tells Coder's count; the other pages are fetched
/// [`PAGES_AT_ONCE`] at a time. Should the count grow meanwhile, the pages after it are fetched one by one until a
/// short page; a workspace seen twice (shifted by a delete between pages) is kept once.
async fn all_workspaces(client: &CoderClient, ctx: &RequestContext) -> Result<Vec<Workspace>, ApiError> {
    let page = |offset: u32| {
        within(
            ctx.deadline,
            subject(WORKSPACES, ""),
            client.workspaces("", PAGE, offset),
        )
    };
    let first = page(0).await?;
    let mut count = first.count;
    let mut full = first.workspaces.len() == PAGE as usize;
    let mut workspaces = first.workspaces;
    if full {
        let planned = u32::try_from(count.max(0)).unwrap_or(u32::MAX);
        let offsets = (1..).map(|n| n * PAGE).take_while(|offset| *offset < planned);
        let pages: Vec<_> = futures::stream::iter(offsets)
            .map(page)
            .buffered(PAGES_AT_ONCE)
            .try_collect()
            .await?;
        for next in pages {
            full = next.workspaces.len() == PAGE as usize;
            count = count.max(next.count);
            workspaces.extend(next.workspaces);
        }
    }
    let listed = |workspaces: &Vec<Workspace>| i64::try_from(workspaces.len()).unwrap_or(i64::MAX);
    while full && listed(&workspaces) < count {
        let next = page(u32::try_from(workspaces.len()).unwrap_or(u32::MAX)).await?;
        full = next.workspaces.len() == PAGE as usize;
        count = count.max(next.count);
        workspaces.extend(next.workspaces);
    }
    let mut seen = std::collections::HashSet::new();
    workspaces.retain(|w| seen.insert(w.id));
    Ok(workspaces)
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
    /// `POST /users/{owner}/workspaces` after the checks of the name, the organization, the owner, the template and
    /// a pinned version; with `running: false` a stop build is queued next (its failure is ignored: the workspace
    /// exists, and a later update of `spec.running` can stop it).
    async fn create_workspace(&self, ctx: &RequestContext, object: Value) -> Result<Written, ApiError> {
        let (workspace, name) = rules::parse_create(object)?;
        let requested = names::parse_workspace_name(&name)?;
        rules::check_create_spec(&workspace, &requested)?;
        let pinned = rules::pinned_version(&workspace)?;
        let namespace = namespace_of(ctx)?;
        let Some(backend) = backend_of(self.provider.as_ref(), ctx).await? else {
            return Err(ApiError::service_unavailable(format!(
                "namespace {namespace:?} is not served: no Coder deployment is configured for it"
            )));
        };
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
        let request = rules::create_request(&workspace, &requested.workspace, template.id, pinned);
        let mut created = within(
            ctx.deadline,
            on_workspace,
            client.create_workspace(&requested.owner, &request),
        )
        .await?;
        if !workspace.spec.running {
            let stop = CreateWorkspaceBuildRequest::transition(Transition::Stop);
            match within(
                ctx.deadline,
                on_workspace,
                client.create_workspace_build(created.id, &stop),
            )
            .await
            {
                Ok(build) => created.latest_build = build,
                Err(error) => tracing::info!(
                    workspace = %name,
                    error = %error.message,
                    "the stop build after creating a workspace with running: false was refused; the workspace stays started"
                ),
            }
        }
        Ok(Written {
            object: convert::workspace(namespace, &created)?,
            created: true,
            event: Some(EventType::Added),
        })
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
}

#[async_trait]
impl Storage for WorkspaceStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let resolved = resolve(self.provider.as_ref(), ctx, name, ctx.deadline).await?;
        convert::workspace(&resolved.backend.namespace, &resolved.workspace)
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        let mut objects = Vec::new();
        for backend in self.provider.resolve(ctx.namespace.as_deref()).await? {
            for workspace in all_workspaces(&backend.client, ctx).await? {
                objects.push(convert::workspace(&backend.namespace, &workspace)?);
            }
        }
        Ok(objects)
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

    /// Only `spec.running` changes (a start or stop build); server-side apply creates a missing workspace.
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
        let current_object = convert::workspace(&backend.namespace, &workspace)?;
        let current: CoderWorkspace = serde_json::from_value(current_object.clone())
            .map_err(|e| ApiError::internal(format!("read back a converted workspace: {e}")))?;
        let desired: CoderWorkspace = serde_json::from_value(object)
            .map_err(|e| ApiError::bad_request(format!("the body is not a valid CoderWorkspace: {e}")))?;
        let transition = match rules::check_update(name, &requested, &current, &desired)? {
            UpdateChange::Nothing => {
                return Ok(Written {
                    object: current_object,
                    created: false,
                    event: None,
                });
            }
            UpdateChange::Build(transition) => transition,
        };
        let request = rules::build_request(transition, &workspace)?;
        let build = within(
            ctx.deadline,
            subject(WORKSPACES, name),
            client.create_workspace_build(workspace.id, &request),
        )
        .await?;
        Ok(Written {
            object: with_build(&backend.namespace, workspace, build)?,
            created: false,
            event: Some(EventType::Modified),
        })
    }

    /// Queues a delete build: Coder deletes the workspace asynchronously, so the answer is a `Status` of success
    /// and watchers get a `MODIFIED` event of the workspace with that build, not `DELETED`.
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
