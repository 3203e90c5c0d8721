//! `codertemplates`: Coder templates as `CoderTemplate` objects named `<organization>.<template>`.
//!
//! Reads convert Coder's template; a single get also carries the active version's UTF-8 source in `spec.files`.
//! Writes: create from `spec.files` (zip upload, version, wait for the import, template) or from `spec.versionID`;
//! update (a changed source becomes a new version merged with the current binary files, waited for and activated,
//! then the metadata); delete. Server-side dry-run is refused before any Coder call, because Coder cannot preview.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderTemplate, CoderTemplateAcl, CoderTemplateSpec, GROUP};
use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::organizations::Organization;
use coder_k8s_coder_client::types::template_acl::UpdateTemplateAcl;
use coder_k8s_coder_client::types::template_versions::{
    CreateTemplateVersionRequest, TemplateVersionVariable,
};
use coder_k8s_coder_client::types::templates::{CreateTemplateRequest, Template, UpdateTemplateMeta};
use coder_k8s_coder_client::{CoderClient, Error as CoderError, JsonAnswer};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;
use tokio::time::Instant;
use uuid::Uuid;

use super::archive;
use super::convert;
use super::errors::{map_coder_error, within};
use super::field_errors::FieldError;
use super::list_memo::ListMemo;
use super::names::{self, TemplateName};
use super::provider::{Backend, Provider};
use super::resources::{TEMPLATES, at, column, named_backend, schema, subject};
use super::template_import::{self, SettingsSource, WaitSettings, process_environment, wait_for_import};
use super::template_inputs::{self, Active, Wanted};
use super::template_settings::{self, Desired, Texts};
use super::write_rules::{
    check_preconditions, check_resource_version, conflict, gone, parse_body, refuse_dry_run, unchanged,
};
use super::{template_acl, template_plan};
use crate::generic::{
    ApiError, Column, Deleted, EventType, RequestContext, ResourceDef, Storage, Verb, Written,
};

/// The verbs `codertemplates` serves.
pub const TEMPLATE_VERBS: &[Verb] = super::resources::ALL_VERBS;

/// How much earlier than the request's deadline an import wait gives up, so that its own 504 (which says what was
/// waited for) is answered rather than the handler's generic one.
const DEADLINE_MARGIN: Duration = Duration::from_millis(250);

/// The `codertemplates` resource; import waits read `CODER_K8S_TEMPLATE_BUILD_*` from the process environment.
pub fn resource(provider: Arc<dyn Provider>) -> ResourceDef {
    resource_with(provider, process_environment())
}

/// The `codertemplates` resource with the import-wait settings read from `settings` (tests pass a map).
pub fn resource_with(provider: Arc<dyn Provider>, settings: SettingsSource) -> ResourceDef {
    ResourceDef {
        plural: TEMPLATES,
        singular: "codertemplate",
        kind: "CoderTemplate",
        list_kind: "CoderTemplateList",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: TEMPLATE_VERBS,
        schema: schema::<CoderTemplate>(),
        columns: template_columns(),
        subresources: Vec::new(),
        storage: Arc::new(TemplateStorage {
            provider,
            settings,
            listed: ListMemo::default(),
        }),
        watch_feed: None,
    }
}

fn template_columns() -> Vec<Column> {
    vec![
        column("Organization", "string", "The Coder organization.", 0, |o| {
            at(o, &["spec", "organization"]).clone()
        }),
        column(
            "Active Version",
            "string",
            "ID of the active template version.",
            0,
            |o| at(o, &["status", "activeVersionID"]).clone(),
        ),
        column(
            "Deprecated",
            "boolean",
            "Whether the template is deprecated.",
            0,
            |o| Value::Bool(at(o, &["status", "deprecated"]).as_bool().unwrap_or(false)),
        ),
        column("Display Name", "string", "The template's display name.", 1, |o| {
            at(o, &["spec", "displayName"]).clone()
        }),
        column("Updated", "date", "When the template last changed.", 1, |o| {
            at(o, &["status", "updatedAt"]).clone()
        }),
    ]
}

struct TemplateStorage {
    provider: Arc<dyn Provider>,
    settings: SettingsSource,
    /// The last list of each namespace, reused while Coder's answers for it are the same bytes.
    listed: ListMemo<JsonAnswer<Vec<Template>>>,
}

/// Every template of every organization, sorted by organization and name.
pub(super) async fn all_templates(
    client: &CoderClient,
    deadline: Instant,
    resource: &str,
) -> Result<Vec<Template>, ApiError> {
    sorted_templates(&template_answers(client, deadline, resource).await?, resource)
}

/// Coder's answers to the template list of each organization the operator sees, undecoded.
async fn template_answers(
    client: &CoderClient,
    deadline: Instant,
    resource: &str,
) -> Result<Vec<JsonAnswer<Vec<Template>>>, ApiError> {
    let organizations = within(deadline, subject(resource, ""), client.organizations()).await?;
    let mut answers = Vec::with_capacity(organizations.len());
    for organization in organizations {
        answers.push(
            within(
                deadline,
                subject(resource, ""),
                client.templates_answer(&organization.name),
            )
            .await?,
        );
    }
    Ok(answers)
}

/// The templates of `answers`, sorted by organization and name.
fn sorted_templates(
    answers: &[JsonAnswer<Vec<Template>>],
    resource: &str,
) -> Result<Vec<Template>, ApiError> {
    let mut templates = Vec::new();
    for answer in answers {
        templates.extend(
            answer
                .decode()
                .map_err(|e| map_coder_error(&e, subject(resource, "")))?,
        );
    }
    templates.sort_by(|a, b| (&a.organization_name, &a.name).cmp(&(&b.organization_name, &b.name)));
    Ok(templates)
}

/// The organization the first segment of the template name `name` names (see [`exact_organization`]).
pub(super) async fn named_organization(
    client: &CoderClient,
    deadline: Instant,
    resource: &str,
    name: &str,
    organization: &str,
) -> Result<Organization, ApiError> {
    let object = ("template", "template");
    exact_organization(client, deadline, (resource, name, object), organization).await
}

/// The organization the first segment of `name` (a `kind` name whose next segment is `next`) names, exactly as
/// spelled: an organization Coder does not show the operator (missing or unreadable) is a 404 of the object, another
/// spelling (`default`, an ID, other casing) a 400 that gives the organization to use. The next segment is not looked
/// at yet.
pub(super) async fn exact_organization(
    client: &CoderClient,
    deadline: Instant,
    (resource, name, (kind, next)): (&str, &str, (&str, &str)),
    organization: &str,
) -> Result<Organization, ApiError> {
    let found = within(
        deadline,
        subject(resource, name),
        client.organization(organization),
    )
    .await
    .map_err(|e| {
        if e.code == 403 {
            ApiError::not_found(GROUP, resource, name)
        } else {
            e
        }
    })?;
    if found.name.is_empty() {
        return Err(ApiError::internal(format!(
            "Coder returned organization {organization:?} without a name"
        )));
    }
    if found.name != organization {
        return Err(ApiError::bad_request(format!(
            "{kind} name {name:?}: organization segment {organization:?} resolves to organization {:?}; use organization {:?} in the name (the {next} segment is not checked yet)",
            found.name, found.name
        )));
    }
    Ok(found)
}

/// The template `<organization>.<template>` exactly as named: the organization first (see
/// [`named_organization`]), then the template, where another spelling is a 400 naming the canonical name.
pub(super) async fn named_template(
    client: &CoderClient,
    deadline: Instant,
    resource: &str,
    name: &str,
    organization: &str,
    template: &str,
) -> Result<Template, ApiError> {
    let org = named_organization(client, deadline, resource, name, organization).await?;
    let found = within(
        deadline,
        subject(resource, name),
        client.template_by_name(&org.name, template),
    )
    .await?;
    if found.organization_name != org.name {
        return Err(ApiError::not_found(GROUP, resource, name));
    }
    if found.name != template {
        let canonical = names::template_name(&found.organization_name, &found.name)?;
        return Err(ApiError::bad_request(format!(
            "template name {name:?}: template segment {template:?} resolves to template {:?}; use the canonical name {canonical:?}",
            found.name
        )));
    }
    Ok(found)
}

fn invalid_files(error: &archive::ArchiveError) -> ApiError {
    ApiError::bad_request(format!("invalid template spec.files: {error}"))
}

/// The deadline import waits use: a little before the request's.
fn wait_deadline(ctx: &RequestContext) -> Instant {
    ctx.deadline
        .checked_sub(DEADLINE_MARGIN)
        .filter(|d| *d > Instant::now())
        .unwrap_or(ctx.deadline)
}

/// The active version of a template as reads and updates need it: its source (zip and UTF-8 files) and the
/// inputs it was imported with.
struct ActiveVersion {
    zip: bytes::Bytes,
    files: BTreeMap<String, String>,
    inputs: Active,
}

/// Reads the active version of `template`: the version, its source archive and its variables.
async fn active_version(
    client: &CoderClient,
    deadline: Instant,
    name: &str,
    template: &Template,
) -> Result<ActiveVersion, ApiError> {
    let subject = subject(TEMPLATES, name);
    let version = within(
        deadline,
        subject,
        client.template_version(template.active_version_id),
    )
    .await?;
    if version.job.file_id.is_nil() {
        return Err(ApiError::internal(format!(
            "Coder returned template version {} without a source file",
            version.id
        )));
    }
    let zip = within(
        deadline,
        subject,
        client.download_file_zip(version.job.file_id, archive::MAX_ZIP_BYTES + 1),
    )
    .await?;
    let variables = version_variables(client, deadline, subject, version.id).await?;
    Ok(ActiveVersion {
        files: text_files(&zip)?,
        zip,
        inputs: Active::of(&version, variables),
    })
}

/// The variables of a version; none while its import has not finished (Coder answers 403 then).
async fn version_variables(
    client: &CoderClient,
    deadline: Instant,
    subject: super::errors::Subject<'_>,
    version: Uuid,
) -> Result<Vec<TemplateVersionVariable>, ApiError> {
    match tokio::time::timeout_at(deadline, client.template_version_variables(version)).await {
        Ok(Ok(variables)) => Ok(variables),
        Ok(Err(CoderError::Forbidden { .. })) => Ok(Vec::new()),
        Ok(Err(error)) => Err(super::errors::map_coder_error(&error, subject)),
        Err(_) => Err(super::errors::timed_out(subject)),
    }
}

fn text_files(zip: &[u8]) -> Result<BTreeMap<String, String>, ApiError> {
    archive::text_files(zip).map_err(|e| ApiError::internal(format!("fetch template source files: {e}")))
}

/// A `CoderTemplate` with `spec.files` (left out when the source has no UTF-8 file).
fn with_files(mut object: Value, files: BTreeMap<String, String>) -> Result<Value, ApiError> {
    if !files.is_empty() {
        object["spec"]["files"] = serde_json::to_value(files)
            .map_err(|e| ApiError::internal(format!("serialize spec.files: {e}")))?;
    }
    Ok(object)
}

fn json_of(value: &impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(|e| ApiError::internal(format!("serialize the object: {e}")))
}

/// What a single get adds to the converted template: the active version's source, tags and variables in the spec,
/// its name and message in the status, and the access list (where Coder serves one) in both.
fn with_details(
    object: Value,
    active: &ActiveVersion,
    acl: Option<&CoderTemplateAcl>,
) -> Result<Value, ApiError> {
    let mut object = with_files(object, active.files.clone())?;
    object["spec"]["provisionerTags"] = json_of(&active.inputs.tags)?;
    object["spec"]["variables"] = json_of(&active.inputs.shown_variables())?;
    for (key, value) in [
        ("activeVersionName", &active.inputs.name),
        ("activeVersionMessage", &active.inputs.message),
    ] {
        if !value.is_empty() {
            object["status"][key] = Value::String(value.clone());
        }
    }
    if let Some(acl) = acl {
        object["spec"]["acl"] = json_of(acl)?;
        object["status"]["acl"] = json_of(acl)?;
    }
    Ok(object)
}

/// The texts of a spec the metadata body carries.
fn texts(spec: &CoderTemplateSpec) -> Texts {
    Texts {
        display_name: spec.display_name.clone(),
        description: spec.description.clone(),
        icon: spec.icon.clone(),
    }
}

/// The version-input fields a create without `spec.files` must leave out (they describe the version `files`
/// imports).
fn inputs_without_files(spec: &CoderTemplateSpec) -> Vec<FieldError> {
    template_inputs::any_set(spec)
        .into_iter()
        .map(|path| {
            FieldError::forbidden(
                path,
                "describes the version spec.files imports: give spec.files too",
            )
        })
        .collect()
}

/// The name of Coder's built-in group of every organization.
const EVERYONE: &str = "Everyone";

/// Everything an update will change, checked before the first write.
struct UpdatePlan {
    desired: Desired,
    texts: Texts,
    body: UpdateTemplateMeta,
    meta_changed: bool,
    /// Coder will refuse the metadata change with its own message: sent before anything else.
    metadata_first: bool,
    new_version: Option<NewVersion>,
    acl: UpdateTemplateAcl,
}

/// A new version to import: the files to merge over the active source, its inputs and resolved values.
struct NewVersion {
    files: BTreeMap<String, String>,
    wanted: Wanted,
    resolved: template_inputs::Resolved,
}

impl UpdatePlan {
    fn changes_nothing(&self) -> bool {
        !self.meta_changed && self.new_version.is_none() && self.acl.is_empty()
    }
}

impl TemplateStorage {
    async fn backend(&self, ctx: &RequestContext, name: &str) -> Result<Backend, ApiError> {
        named_backend(self.provider.as_ref(), ctx, TEMPLATES, name).await
    }

    /// The template and its converted object with the details of a single get.
    async fn read(
        &self,
        backend: &Backend,
        ctx: &RequestContext,
        name: &str,
        parsed: &TemplateName,
    ) -> Result<(Template, Value), ApiError> {
        let template = named_template(
            &backend.client,
            ctx.deadline,
            TEMPLATES,
            name,
            &parsed.organization,
            &parsed.template,
        )
        .await?;
        let object = self.object_of(backend, ctx, name, &template).await?;
        Ok((template, object))
    }

    async fn object_of(
        &self,
        backend: &Backend,
        ctx: &RequestContext,
        name: &str,
        template: &Template,
    ) -> Result<Value, ApiError> {
        let active = active_version(&backend.client, ctx.deadline, name, template).await?;
        let acl = template_acl::shown(
            &backend.client,
            ctx.deadline,
            subject(TEMPLATES, name),
            template.id,
        )
        .await?;
        with_details(
            convert::template(&backend.namespace, template)?,
            &active,
            acl.as_ref(),
        )
    }

    fn wait_settings(&self) -> Result<WaitSettings, ApiError> {
        WaitSettings::from_source(&self.settings)
            .map_err(|e| ApiError::internal(format!("invalid template build wait settings: {e}")))
    }

    /// Uploads `zip`, creates a version from it with `inputs` (attached to `template` when given), waits for its
    /// import and checks that its source declares the variables given. The values read from Secrets never show in
    /// the error, whatever Coder's text quotes.
    #[allow(clippy::too_many_arguments)]
    async fn import(
        &self,
        backend: &Backend,
        ctx: &RequestContext,
        name: &str,
        organization: &str,
        zip: Vec<u8>,
        template: Option<&Template>,
        inputs: (&Wanted, template_inputs::Resolved),
    ) -> Result<Uuid, ApiError> {
        let secrets: Vec<String> = inputs.1.secret_values().into_iter().map(str::to_owned).collect();
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        self.import_unscrubbed(backend, ctx, name, organization, zip, template, inputs)
            .await
            .map_err(|error| template_import::scrubbed(error, &secrets))
    }

    #[allow(clippy::too_many_arguments)]
    async fn import_unscrubbed(
        &self,
        backend: &Backend,
        ctx: &RequestContext,
        name: &str,
        organization: &str,
        zip: Vec<u8>,
        template: Option<&Template>,
        inputs: (&Wanted, template_inputs::Resolved),
    ) -> Result<Uuid, ApiError> {
        let client = &backend.client;
        let subject = subject(TEMPLATES, name);
        let file = within(
            ctx.deadline,
            subject,
            client.upload_file(ArchiveKind::Zip, zip.into()),
        )
        .await?;
        let mut base = CreateTemplateVersionRequest::terraform(file.id);
        if let Some(template) = template {
            base.template_id = Some(template.id);
            // A new version of an existing template is imported by the template's own provisioner.
            if !template.provisioner.is_empty() {
                base.provisioner = template.provisioner.clone();
            }
        }
        let (wanted, resolved) = inputs;
        let request = template_inputs::request(base, wanted, resolved);
        let version = within(
            ctx.deadline,
            subject,
            client.create_template_version(organization, &request),
        )
        .await?;
        let settings = self.wait_settings()?;
        wait_for_import(client, &settings, version.id, wait_deadline(ctx), subject).await?;
        if !wanted.variables.is_empty() {
            let declared = version_variables(client, ctx.deadline, subject, version.id).await?;
            template_plan::check(name, &template_inputs::check_imported(wanted, &declared))?;
        }
        Ok(version.id)
    }

    /// The inputs of a version to import, its variables' values resolved (Secrets read for an allowed caller).
    async fn version_inputs(
        &self,
        ctx: &RequestContext,
        backend: &Backend,
        name: &str,
        spec: &CoderTemplateSpec,
        active: Option<&Active>,
    ) -> Result<(Wanted, template_inputs::Resolved), ApiError> {
        let wanted = template_inputs::wanted(spec, active);
        let resolved =
            template_plan::variable_values(ctx, self.provider.as_ref(), &backend.namespace, name, &wanted)
                .await?;
        Ok((wanted, resolved))
    }

    async fn create_template(
        &self,
        ctx: &RequestContext,
        desired: CoderTemplate,
    ) -> Result<Written, ApiError> {
        let name = desired.metadata.name.clone().unwrap_or_default();
        if name.is_empty() {
            return Err(ApiError::bad_request("metadata.name must not be empty"));
        }
        let parsed = names::parse_template_name(&name)?;
        let spec = &desired.spec;
        if spec.organization != parsed.organization {
            return Err(ApiError::bad_request(format!(
                "spec.organization {:?} must match organization {:?} parsed from metadata.name",
                spec.organization, parsed.organization
            )));
        }
        // Everything the request can get wrong is checked before the first Coder call.
        let source = match &spec.files {
            Some(files) => Some(archive::build(files).map_err(|e| invalid_files(&e))?),
            None => None,
        };
        let pinned = match &source {
            Some(_) => None,
            None => Some(Uuid::parse_str(&spec.version_id).map_err(|e| {
                ApiError::bad_request(format!(
                    "parse template spec.versionID {:?}: {e}",
                    spec.version_id
                ))
            })?),
        };
        let settings = template_plan::validate(&name, spec)?;
        if source.is_none() {
            template_plan::check(&name, &inputs_without_files(spec))?;
        }
        let backend = self.backend(ctx, &name).await?;
        let client = &backend.client;
        let subject = subject(TEMPLATES, &name);
        let org = named_organization(client, ctx.deadline, TEMPLATES, &name, &parsed.organization).await?;
        let premium = template_settings::premium_on_create(&settings);
        template_plan::premium(client, ctx.deadline, subject, &name, &premium).await?;
        let acl = match &spec.settings.acl {
            Some(acl) => {
                // Coder's own refusal of access lists, as an update gets it, before the upload. Open-source Coder
                // answers a template that does not exist before it would miss the route, so it is told by its
                // missing entitlements.
                if template_plan::licensed(client, ctx.deadline, subject)
                    .await?
                    .is_open_source()
                {
                    return Err(template_plan::refused(&name, &[template_acl::not_served()]));
                }
                if let Err(error) = template_acl::served(client, ctx.deadline, subject).await? {
                    return Err(template_plan::refused(&name, &[error]));
                }
                Some(template_plan::resolve_acl(client, ctx.deadline, subject, &name, &org.name, acl).await?)
            }
            None => None,
        };
        let version_id = match (source, pinned) {
            (Some(zip), _) => {
                let inputs = self.version_inputs(ctx, &backend, &name, spec, None).await?;
                let wanted = inputs.0.clone();
                self.import(&backend, ctx, &name, &org.name, zip, None, (&wanted, inputs.1))
                    .await?
            }
            (None, Some(version)) => version,
            (None, None) => {
                return Err(ApiError::internal(
                    "a template create had neither files nor a version",
                ));
            }
        };
        let mut request = CreateTemplateRequest {
            name: parsed.template.clone(),
            template_version_id: version_id,
            display_name: spec.display_name.clone(),
            description: spec.description.clone(),
            icon: spec.icon.clone(),
            // A given group list without Everyone: the group never gets the access Coder gives it by default.
            disable_everyone_group_access: spec
                .settings
                .acl
                .as_ref()
                .and_then(|a| a.groups.as_ref())
                .is_some_and(|groups| !groups.iter().any(|g| g.name == EVERYONE)),
            ..CreateTemplateRequest::default()
        };
        template_settings::create_settings(&settings, &mut request);
        let created = within(ctx.deadline, subject, client.create_template(&org.name, &request)).await?;
        let written = self
            .finish_create(ctx, &backend, &name, &created, spec, &settings, acl)
            .await?;
        Ok(Written {
            object: convert::template(&backend.namespace, &written)?,
            created: true,
            event: Some(EventType::Added),
        })
    }

    /// After the create: what it could not carry (the deprecation message, the access list), then the check that
    /// Coder took every setting. Answers the template as read last.
    #[allow(clippy::too_many_arguments)]
    async fn finish_create(
        &self,
        ctx: &RequestContext,
        backend: &Backend,
        name: &str,
        created: &Template,
        spec: &CoderTemplateSpec,
        settings: &Desired,
        acl: Option<template_acl::Resolved>,
    ) -> Result<Template, ApiError> {
        let client = &backend.client;
        let subject = subject(TEMPLATES, name);
        let body = template_settings::metadata_body(created, &texts(spec), settings);
        let mut extra = false;
        if template_settings::changes(created, &body) {
            template_plan::write_metadata(client, ctx.deadline, subject, created.id, &body).await?;
            extra = true;
        }
        if let Some(resolved) = acl {
            let current = match template_acl::current(client, ctx.deadline, subject, created.id).await? {
                Ok(current) => current,
                Err(error) => return Err(template_plan::refused(name, &[error])),
            };
            let update = template_acl::difference(&current, &resolved);
            template_acl::write(client, ctx.deadline, subject, created.id, &update).await?;
        }
        let after = if extra {
            within(ctx.deadline, subject, client.template(created.id)).await?
        } else {
            created.clone()
        };
        template_plan::check_applied(settings, &after)?;
        Ok(after)
    }

    /// Works out and checks everything an update will do, before anything is written.
    async fn plan_update(
        &self,
        ctx: &RequestContext,
        backend: &Backend,
        name: &str,
        current: &Template,
        active: &ActiveVersion,
        spec: &CoderTemplateSpec,
    ) -> Result<UpdatePlan, ApiError> {
        let client = &backend.client;
        let subject = subject(TEMPLATES, name);
        let desired = template_plan::validate(name, spec)?;
        let desired_files = match &spec.files {
            Some(files) => {
                archive::build(files).map_err(|e| invalid_files(&e))?;
                Some(archive::normalize(files).map_err(|e| invalid_files(&e))?)
            }
            None => None,
        };
        let body = template_settings::metadata_body(current, &texts(spec), &desired);
        let meta_changed = template_settings::changes(current, &body);
        let premium = template_settings::premium_changes(current, &body);
        let metadata_first = template_plan::premium(client, ctx.deadline, subject, name, &premium).await?;
        let acl = match &spec.settings.acl {
            Some(acl) => {
                template_plan::acl_update(
                    client,
                    ctx.deadline,
                    subject,
                    name,
                    &current.organization_name,
                    current.id,
                    acl,
                )
                .await?
            }
            None => UpdateTemplateAcl::default(),
        };
        let source_changed = desired_files.as_ref().is_some_and(|f| *f != active.files);
        let inputs_changed = !template_inputs::differences(spec, &active.inputs).is_empty();
        let new_version = if source_changed || inputs_changed {
            template_plan::version_name_free(
                client,
                ctx.deadline,
                subject,
                name,
                current.id,
                spec.version_name.as_deref(),
            )
            .await?;
            // Before any Secret is read: what the active version holds that only the spec may give again.
            template_plan::check(name, &template_inputs::unkept(spec, &active.inputs))?;
            let (wanted, resolved) = self
                .version_inputs(ctx, backend, name, spec, Some(&active.inputs))
                .await?;
            Some(NewVersion {
                files: desired_files.unwrap_or_else(|| active.files.clone()),
                wanted,
                resolved,
            })
        } else {
            None
        };
        Ok(UpdatePlan {
            desired,
            texts: texts(spec),
            body,
            meta_changed,
            metadata_first,
            new_version,
            acl,
        })
    }

    async fn update_template(
        &self,
        ctx: &RequestContext,
        name: &str,
        backend: &Backend,
        current: &Template,
        desired: CoderTemplate,
    ) -> Result<Written, ApiError> {
        let client = &backend.client;
        let current_object = convert::template(&backend.namespace, current)?;
        let current_rv = current_object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        check_update(name, current, &current_rv, &desired)?;
        let active = active_version(client, ctx.deadline, name, current).await?;
        let plan = self
            .plan_update(ctx, backend, name, current, &active, &desired.spec)
            .await?;
        if plan.changes_nothing() {
            let acl = template_acl::shown(client, ctx.deadline, subject(TEMPLATES, name), current.id).await?;
            return Ok(unchanged(with_details(current_object, &active, acl.as_ref())?));
        }
        let refreshed = self
            .apply_update(ctx, name, backend, current, &active, plan)
            .await?;
        Ok(Written {
            object: self.object_of(backend, ctx, name, &refreshed).await?,
            created: false,
            event: Some(EventType::Modified),
        })
    }

    /// The writes of a checked plan, in order: a metadata change Coder will refuse first; the new version
    /// (imported, checked, the template unchanged meanwhile, activated); the metadata built from the template as last
    /// read; the access list. Answers the template read afterwards, once Coder is seen to hold every setting.
    async fn apply_update(
        &self,
        ctx: &RequestContext,
        name: &str,
        backend: &Backend,
        current: &Template,
        active: &ActiveVersion,
        plan: UpdatePlan,
    ) -> Result<Template, ApiError> {
        let client = &backend.client;
        let subject = subject(TEMPLATES, name);
        let mut latest = current.clone();
        let mut latest_rv = convert::template("", current)?["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if plan.meta_changed && plan.metadata_first {
            template_plan::write_metadata(client, ctx.deadline, subject, current.id, &plan.body).await?;
            latest = within(ctx.deadline, subject, client.template(current.id)).await?;
            latest_rv = convert::template("", &latest)?["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
        }
        if let Some(version) = plan.new_version {
            let merged = archive::merge(&active.zip, &version.files).map_err(|e| invalid_files(&e))?;
            let id = self
                .import(
                    backend,
                    ctx,
                    name,
                    &current.organization_name,
                    merged,
                    Some(current),
                    (&version.wanted, version.resolved),
                )
                .await?;
            latest = self
                .check_unchanged_during_import(ctx, name, client, &latest, &latest_rv)
                .await?;
            within(
                ctx.deadline,
                subject,
                client.promote_template_version(current.id, id),
            )
            .await?;
        }
        if plan.meta_changed && !plan.metadata_first {
            // Built again from the template as last read (after an import, the re-read that found it unchanged).
            let body = template_settings::metadata_body(&latest, &plan.texts, &plan.desired);
            template_plan::write_metadata(client, ctx.deadline, subject, current.id, &body).await?;
        }
        template_acl::write(client, ctx.deadline, subject, current.id, &plan.acl).await?;
        let refreshed = within(ctx.deadline, subject, client.template(current.id)).await?;
        template_plan::check_applied(&plan.desired, &refreshed)?;
        Ok(refreshed)
    }

    /// After a long import the template must still be the one the update was checked against: replaced or changed
    /// meanwhile, it is left alone (409) and the new version stays inactive. Answers the template as re-read.
    async fn check_unchanged_during_import(
        &self,
        ctx: &RequestContext,
        name: &str,
        client: &CoderClient,
        before: &Template,
        before_rv: &str,
    ) -> Result<Template, ApiError> {
        let now = within(
            ctx.deadline,
            subject(TEMPLATES, name),
            client.template_by_name(&before.organization_name, &before.name),
        )
        .await
        .map(Some)
        .or_else(|e| if e.code == 404 { Ok(None) } else { Err(e) })?;
        let now_rv = match &now {
            Some(t) => convert::template("", t)?["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_owned),
            None => None,
        };
        let same = now.as_ref().is_some_and(|t| t.id == before.id) && now_rv.as_deref() == Some(before_rv);
        if let Some(template) = now.filter(|_| same) {
            return Ok(template);
        }
        Err(conflict(
            TEMPLATES,
            name,
            "the template changed in Coder while the new source was importing; the new version was not activated and nothing else was changed: read the template again and retry",
        ))
    }
}

/// The update rules that need no Coder call: resourceVersion given and current, organization and versionID
/// unchanged.
fn check_update(
    name: &str,
    current: &Template,
    current_rv: &str,
    desired: &CoderTemplate,
) -> Result<(), ApiError> {
    let given_rv = desired.metadata.resource_version.as_deref();
    check_resource_version(TEMPLATES, name, given_rv, current_rv)?;
    if desired.spec.organization != current.organization_name {
        return Err(ApiError::bad_request(format!(
            "spec.organization {:?} must match existing organization {:?}",
            desired.spec.organization, current.organization_name
        )));
    }
    let active = current.active_version_id.to_string();
    if !desired.spec.version_id.is_empty() && desired.spec.version_id != active {
        return Err(ApiError::bad_request(format!(
            "spec.versionID is read-only; to change the active version, update spec.files instead (current: {active:?}, requested: {:?})",
            desired.spec.version_id
        )));
    }
    Ok(())
}

/// Drops `valueFrom` from every entry of `spec.variables`, leaving its name.
fn without_secret_references(object: &mut Value) {
    if let Some(variables) = object
        .pointer_mut("/spec/variables")
        .and_then(Value::as_array_mut)
    {
        for variable in variables.iter_mut().filter_map(Value::as_object_mut) {
            variable.remove("valueFrom");
        }
    }
}

#[async_trait]
impl Storage for TemplateStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let parsed = names::parse_template_name(name)?;
        let backend = self.backend(ctx, name).await?;
        Ok(self.read(&backend, ctx, name, &parsed).await?.1)
    }

    /// The object without the Secret references of its variables: they are read back from the active version's
    /// message, which Coder users who may edit the template can write, so a patch that does not give a reference
    /// itself must not send that Secret's value to Coder (a new version then asks for it in `spec.variables`).
    async fn patch_base(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let mut object = self.get(ctx, name).await?;
        without_secret_references(&mut object);
        Ok(object)
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        Ok(Arc::unwrap_or_clone(self.list_shared(ctx).await?))
    }

    /// Coder is asked every time; the objects of a namespace whose templates are unchanged are the last list's.
    async fn list_shared(&self, ctx: &RequestContext) -> Result<Arc<Vec<Value>>, ApiError> {
        let mut lists = Vec::new();
        for backend in self.provider.resolve(ctx.namespace.as_deref()).await? {
            let answers = template_answers(&backend.client, ctx.deadline, TEMPLATES).await?;
            lists.push(self.listed.objects(&backend.namespace, answers, |answers| {
                sorted_templates(answers, TEMPLATES)?
                    .iter()
                    .map(|t| convert::listed_template(&backend.namespace, t))
                    .collect()
            })?);
        }
        Ok(match <[_; 1]>::try_from(lists) {
            Ok([only]) => only,
            Err(lists) => Arc::new(lists.iter().flat_map(|l| l.iter().cloned()).collect()),
        })
    }

    async fn create(&self, ctx: &RequestContext, object: Value) -> Result<Written, ApiError> {
        refuse_dry_run(ctx, TEMPLATES)?;
        self.create_template(ctx, parse_body(object, "CoderTemplate")?)
            .await
    }

    async fn update(
        &self,
        ctx: &RequestContext,
        name: &str,
        object: Value,
        allow_create: bool,
    ) -> Result<Written, ApiError> {
        refuse_dry_run(ctx, TEMPLATES)?;
        let parsed = names::parse_template_name(name)?;
        let desired = parse_body(object, "CoderTemplate")?;
        let backend = self.backend(ctx, name).await?;
        let found = named_template(
            &backend.client,
            ctx.deadline,
            TEMPLATES,
            name,
            &parsed.organization,
            &parsed.template,
        )
        .await;
        match found {
            Ok(current) => self.update_template(ctx, name, &backend, &current, desired).await,
            Err(error) if error.code == 404 && allow_create => self.create_template(ctx, desired).await,
            Err(error) => Err(error),
        }
    }

    async fn delete(
        &self,
        ctx: &RequestContext,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        refuse_dry_run(ctx, TEMPLATES)?;
        let parsed = names::parse_template_name(name)?;
        let backend = self.backend(ctx, name).await?;
        let template = named_template(
            &backend.client,
            ctx.deadline,
            TEMPLATES,
            name,
            &parsed.organization,
            &parsed.template,
        )
        .await?;
        let object = convert::template(&backend.namespace, &template)?;
        check_preconditions(TEMPLATES, name, &object, options)?;
        within(
            ctx.deadline,
            subject(TEMPLATES, name),
            backend.client.delete_template(template.id),
        )
        .await?;
        Ok(gone(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
    use serde_json::json;

    fn coder_template() -> Template {
        Template {
            id: Uuid::from_u128(1),
            organization_name: "acme".into(),
            name: "docker".into(),
            active_version_id: Uuid::from_u128(2),
            updated_at: "2026-01-01T00:00:00Z".into(),
            ..Template::default()
        }
    }

    fn desired(rv: &str, organization: &str, version: &str) -> CoderTemplate {
        parse_body(
            json!({
                "metadata": {"name": "acme.docker", "resourceVersion": rv},
                "spec": {"organization": organization, "versionID": version}
            }),
            "CoderTemplate",
        )
        .unwrap()
    }

    #[test]
    fn updates_need_the_current_resource_version() {
        let t = coder_template();
        let error = check_update("acme.docker", &t, "5", &desired("", "acme", "")).unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (400, "metadata.resourceVersion is required for update")
        );
        let error = check_update("acme.docker", &t, "5", &desired("4", "acme", "")).unwrap_err();
        assert_eq!(error.code, 409);
        assert_eq!(
            error.message,
            "Operation cannot be fulfilled on codertemplates.aggregation.coder.com \"acme.docker\": resource version mismatch: got \"4\", current is \"5\""
        );
        assert!(check_update("acme.docker", &t, "5", &desired("5", "acme", "")).is_ok());
    }

    #[test]
    fn organization_and_version_id_cannot_change() {
        let t = coder_template();
        let error = check_update("acme.docker", &t, "5", &desired("5", "other", "")).unwrap_err();
        assert_eq!(
            error.message,
            "spec.organization \"other\" must match existing organization \"acme\""
        );
        let active = Uuid::from_u128(2).to_string();
        assert!(check_update("acme.docker", &t, "5", &desired("5", "acme", &active)).is_ok());
        let other = Uuid::from_u128(3).to_string();
        let error = check_update("acme.docker", &t, "5", &desired("5", "acme", &other)).unwrap_err();
        assert_eq!(error.code, 400);
        assert_eq!(
            error.message,
            format!(
                "spec.versionID is read-only; to change the active version, update spec.files instead (current: \"{active}\", requested: \"{other}\")"
            )
        );
    }

    #[test]
    fn the_metadata_body_changes_only_what_the_spec_sets() {
        let current = Template {
            display_name: "Docker".into(),
            description: "old".into(),
            icon: "/old.png".into(),
            default_ttl_ms: 7_200_000,
            activity_bump_ms: 1_800_000,
            allow_user_cancel_workspace_jobs: true,
            max_port_share_level: "public".into(),
            cors_behavior: "passthru".into(),
            ..coder_template()
        };
        let mut spec = desired("5", "acme", "").spec;
        spec.description = "new".into();
        let settings = template_plan::validate("acme.docker", &spec).unwrap();
        let body = template_settings::metadata_body(&current, &texts(&spec), &settings);
        assert_eq!(
            body,
            UpdateTemplateMeta {
                display_name: Some(String::new()),
                description: Some("new".into()),
                icon: Some(String::new()),
                ..UpdateTemplateMeta::from_template(&current)
            }
        );
        assert_eq!(
            (
                body.default_ttl_ms,
                body.activity_bump_ms,
                body.allow_user_cancel_workspace_jobs
            ),
            (7_200_000, 1_800_000, true)
        );
        // The same spec as the template changes nothing.
        spec.display_name = current.display_name.clone();
        spec.description = current.description.clone();
        spec.icon = current.icon.clone();
        let body = template_settings::metadata_body(&current, &texts(&spec), &settings);
        assert_eq!(body, UpdateTemplateMeta::from_template(&current));
        assert!(!template_settings::changes(&current, &body));
    }

    #[test]
    fn every_rule_of_the_spec_is_reported_in_one_422() {
        let mut spec = desired("5", "acme", "").spec;
        spec.settings.default_ttl = Some("2x".into());
        spec.settings.acl = Some(coder_k8s_api::aggregation::CoderTemplateAcl {
            users: Some(vec![coder_k8s_api::aggregation::CoderTemplateAclEntry {
                name: "alice".into(),
                role: "owner".into(),
            }]),
            groups: None,
        });
        spec.version_name = Some("not valid".into());
        let error = template_plan::validate("acme.docker", &spec).unwrap_err();
        assert_eq!((error.code, error.reason), (422, "Invalid"));
        assert!(
            error.message.starts_with(
                "CoderTemplate.aggregation.coder.com \"acme.docker\" is invalid: [spec.defaultTTL: Invalid value: \"2x\""
            ),
            "{}",
            error.message
        );
        for field in ["spec.acl.users[0].role", "spec.versionName"] {
            assert!(error.message.contains(field), "{field}: {}", error.message);
        }
    }

    #[test]
    fn a_create_without_files_leaves_the_version_inputs_out() {
        let mut spec = desired("", "acme", "").spec;
        assert!(inputs_without_files(&spec).is_empty());
        spec.version_name = Some("v1".into());
        spec.provisioner_tags = Some(BTreeMap::new());
        let errors: Vec<String> = inputs_without_files(&spec)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "spec.provisionerTags: Forbidden: describes the version spec.files imports: give spec.files too",
                "spec.versionName: Forbidden: describes the version spec.files imports: give spec.files too",
            ]
        );
    }

    #[test]
    fn delete_preconditions_compare_explicit_values() {
        let object = json!({"metadata": {"uid": "u1", "resourceVersion": "7"}});
        let options = |uid: Option<&str>, rv: Option<&str>| DeleteOptions {
            preconditions: Some(Preconditions {
                uid: uid.map(str::to_owned),
                resource_version: rv.map(str::to_owned),
            }),
            ..DeleteOptions::default()
        };
        assert!(check_preconditions(TEMPLATES, "acme.docker", &object, &DeleteOptions::default()).is_ok());
        assert!(
            check_preconditions(TEMPLATES, "acme.docker", &object, &options(Some("u1"), Some("7"))).is_ok()
        );
        let error =
            check_preconditions(TEMPLATES, "acme.docker", &object, &options(Some(""), None)).unwrap_err();
        assert_eq!(error.code, 409);
        assert!(
            error
                .message
                .ends_with("Precondition failed: UID in precondition: , UID in object meta: u1")
        );
        let error =
            check_preconditions(TEMPLATES, "acme.docker", &object, &options(None, Some("6"))).unwrap_err();
        assert!(
            error
                .message
                .ends_with("ResourceVersion in precondition: 6, ResourceVersion in object meta: 7")
        );
    }

    #[test]
    fn dry_runs_are_refused_with_the_documented_message() {
        let ctx = RequestContext {
            user: Default::default(),
            namespace: Some("ns".into()),
            deadline: Instant::now(),
            dry_run: true,
            query: BTreeMap::new(),
        };
        let error = refuse_dry_run(&ctx, TEMPLATES).unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (
                400,
                "server-side dry-run is not supported for codertemplates; nothing was changed"
            )
        );
    }

    #[test]
    fn files_are_added_only_when_there_are_some() {
        let object = json!({"spec": {"organization": "acme"}});
        assert_eq!(with_files(object.clone(), BTreeMap::new()).unwrap(), object);
        let files = BTreeMap::from([("main.tf".to_owned(), "x".to_owned())]);
        assert_eq!(
            with_files(object, files).unwrap()["spec"]["files"],
            json!({"main.tf": "x"})
        );
    }
}
