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
use coder_k8s_api::aggregation::{CoderTemplate, CoderTemplateSpec, GROUP};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::files::ArchiveKind;
use coder_k8s_coder_client::types::organizations::Organization;
use coder_k8s_coder_client::types::template_versions::CreateTemplateVersionRequest;
use coder_k8s_coder_client::types::templates::{CreateTemplateRequest, Template, UpdateTemplateMeta};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;
use tokio::time::Instant;
use uuid::Uuid;

use super::archive;
use super::convert;
use super::errors::within;
use super::names::{self, TemplateName};
use super::provider::{Backend, Provider};
use super::resources::{TEMPLATES, at, backend_of, column, schema, subject};
use super::template_import::{SettingsSource, WaitSettings, process_environment, wait_for_import};
use crate::generic::{
    ApiError, Column, Deleted, EventType, RequestContext, ResourceDef, Storage, Verb, Written,
};

/// The verbs `codertemplates` serves.
pub const TEMPLATE_VERBS: &[Verb] = &[
    Verb::Get,
    Verb::List,
    Verb::Watch,
    Verb::Create,
    Verb::Update,
    Verb::Patch,
    Verb::Delete,
];

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
        storage: Arc::new(TemplateStorage { provider, settings }),
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
}

/// Every template of every organization, sorted by organization and name.
pub(super) async fn all_templates(
    client: &CoderClient,
    deadline: Instant,
    resource: &str,
) -> Result<Vec<Template>, ApiError> {
    let organizations = within(deadline, subject(resource, ""), client.organizations()).await?;
    let mut templates = Vec::new();
    for organization in organizations {
        templates.extend(
            within(
                deadline,
                subject(resource, ""),
                client.templates(&organization.name),
            )
            .await?,
        );
    }
    templates.sort_by(|a, b| (&a.organization_name, &a.name).cmp(&(&b.organization_name, &b.name)));
    Ok(templates)
}

/// The organization the first segment of `name` names, exactly as spelled: an organization Coder does not show the
/// operator (missing or unreadable) is a 404 of the object, another spelling (`default`, an ID, other casing) a 400
/// that gives the organization to use. The template segment is not looked at yet.
pub(super) async fn named_organization(
    client: &CoderClient,
    deadline: Instant,
    resource: &str,
    name: &str,
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
            "template name {name:?}: organization segment {organization:?} resolves to organization {:?}; use organization {:?} in the name (the template segment is not checked yet)",
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

/// Coder cannot preview a write, so a dry run would really change Coder: refused before any Coder call.
fn refuse_dry_run(ctx: &RequestContext) -> Result<(), ApiError> {
    if ctx.dry_run {
        return Err(ApiError::bad_request(format!(
            "server-side dry-run is not supported for {TEMPLATES}; nothing was changed"
        )));
    }
    Ok(())
}

/// kube-apiserver's 409 wording for this resource.
fn conflict(name: &str, detail: &str) -> ApiError {
    ApiError::conflict(format!(
        "Operation cannot be fulfilled on {TEMPLATES}.{GROUP} {name:?}: {detail}"
    ))
    .with_details(name, GROUP, TEMPLATES)
}

/// A request body as a `CoderTemplate`.
fn parse_body(object: Value) -> Result<CoderTemplate, ApiError> {
    serde_json::from_value(object)
        .map_err(|e| ApiError::bad_request(format!("the body is not a valid CoderTemplate: {e}")))
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

/// The raw zip of a template version's source.
async fn source_zip(
    client: &CoderClient,
    deadline: Instant,
    name: &str,
    version: Uuid,
) -> Result<bytes::Bytes, ApiError> {
    let subject = subject(TEMPLATES, name);
    let version = within(deadline, subject, client.template_version(version)).await?;
    if version.job.file_id.is_nil() {
        return Err(ApiError::internal(format!(
            "Coder returned template version {} without a source file",
            version.id
        )));
    }
    within(
        deadline,
        subject,
        client.download_file_zip(version.job.file_id, archive::MAX_ZIP_BYTES + 1),
    )
    .await
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

impl TemplateStorage {
    async fn backend(&self, ctx: &RequestContext, name: &str) -> Result<Backend, ApiError> {
        backend_of(self.provider.as_ref(), ctx)
            .await?
            .ok_or_else(|| ApiError::not_found(GROUP, TEMPLATES, name))
    }

    /// The template and its converted object with `spec.files`.
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
        let zip = source_zip(&backend.client, ctx.deadline, name, template.active_version_id).await?;
        with_files(
            convert::template(&backend.namespace, template)?,
            text_files(&zip)?,
        )
    }

    fn wait_settings(&self) -> Result<WaitSettings, ApiError> {
        WaitSettings::from_source(&self.settings)
            .map_err(|e| ApiError::internal(format!("invalid template build wait settings: {e}")))
    }

    /// Uploads `zip`, creates a version from it (attached to `template` when given) and waits for its import.
    async fn import(
        &self,
        backend: &Backend,
        ctx: &RequestContext,
        name: &str,
        organization: &str,
        zip: Vec<u8>,
        template: Option<&Template>,
    ) -> Result<Uuid, ApiError> {
        let client = &backend.client;
        let subject = subject(TEMPLATES, name);
        let file = within(
            ctx.deadline,
            subject,
            client.upload_file(ArchiveKind::Zip, zip.into()),
        )
        .await?;
        let mut request = CreateTemplateVersionRequest::terraform(file.id);
        if let Some(template) = template {
            request.template_id = Some(template.id);
            // A new version of an existing template is imported by the template's own provisioner.
            if !template.provisioner.is_empty() {
                request.provisioner = template.provisioner.clone();
            }
        }
        let version = within(
            ctx.deadline,
            subject,
            client.create_template_version(organization, &request),
        )
        .await?;
        let settings = self.wait_settings()?;
        wait_for_import(client, &settings, version.id, wait_deadline(ctx), subject).await?;
        Ok(version.id)
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
        let backend = self.backend(ctx, &name).await?;
        let org = named_organization(
            &backend.client,
            ctx.deadline,
            TEMPLATES,
            &name,
            &parsed.organization,
        )
        .await?;
        let version_id = match (source, pinned) {
            (Some(zip), _) => self.import(&backend, ctx, &name, &org.name, zip, None).await?,
            (None, Some(version)) => version,
            (None, None) => {
                return Err(ApiError::internal(
                    "a template create had neither files nor a version",
                ));
            }
        };
        let request = CreateTemplateRequest {
            name: parsed.template.clone(),
            template_version_id: version_id,
            display_name: spec.display_name.clone(),
            description: spec.description.clone(),
            icon: spec.icon.clone(),
            ..CreateTemplateRequest::default()
        };
        let created = within(
            ctx.deadline,
            subject(TEMPLATES, &name),
            backend.client.create_template(&org.name, &request),
        )
        .await?;
        Ok(Written {
            object: convert::template(&backend.namespace, &created)?,
            created: true,
            event: Some(EventType::Added),
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
        let desired_files = match &desired.spec.files {
            Some(files) => {
                archive::build(files).map_err(|e| invalid_files(&e))?;
                Some(archive::normalize(files).map_err(|e| invalid_files(&e))?)
            }
            None => None,
        };
        let current_zip = source_zip(client, ctx.deadline, name, current.active_version_id).await?;
        let current_files = text_files(&current_zip)?;
        let meta_changed =
            metadata_update(current, &desired.spec) != UpdateTemplateMeta::from_template(current);
        let source_changed = desired_files
            .as_ref()
            .is_some_and(|files| *files != current_files);
        if !meta_changed && !source_changed {
            return Ok(Written {
                object: with_files(current_object, current_files)?,
                created: false,
                event: None,
            });
        }
        let subject = subject(TEMPLATES, name);
        // The metadata body is built from the template as last read: after an import, the re-read that found
        // it unchanged.
        let mut latest = current.clone();
        if let Some(files) = desired_files.filter(|_| source_changed) {
            let merged = archive::merge(&current_zip, &files).map_err(|e| invalid_files(&e))?;
            let version = self
                .import(
                    backend,
                    ctx,
                    name,
                    &current.organization_name,
                    merged,
                    Some(current),
                )
                .await?;
            latest = self
                .check_unchanged_during_import(ctx, name, client, current, &current_rv)
                .await?;
            within(
                ctx.deadline,
                subject,
                client.promote_template_version(current.id, version),
            )
            .await?;
        }
        if meta_changed {
            within(
                ctx.deadline,
                subject,
                client.update_template_meta(current.id, &metadata_update(&latest, &desired.spec)),
            )
            .await?;
        }
        let refreshed = within(ctx.deadline, subject, client.template(current.id)).await?;
        Ok(Written {
            object: self.object_of(backend, ctx, name, &refreshed).await?,
            created: false,
            event: Some(EventType::Modified),
        })
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
            name,
            "the template changed in Coder while the new source was importing; the new version was not activated and nothing else was changed: read the template again and retry",
        ))
    }
}

/// The metadata body that gives template `current` (read just before) what `spec` sets: Coder resets every setting
/// a body leaves out, so the body starts from all of `current`'s settings and the spec replaces the ones it
/// carries (display name, description, icon). A setting added to the spec later is one more line here.
fn metadata_update(current: &Template, spec: &CoderTemplateSpec) -> UpdateTemplateMeta {
    UpdateTemplateMeta {
        display_name: Some(spec.display_name.clone()),
        description: Some(spec.description.clone()),
        icon: Some(spec.icon.clone()),
        ..UpdateTemplateMeta::from_template(current)
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
    let given_rv = desired.metadata.resource_version.as_deref().unwrap_or_default();
    if given_rv.is_empty() {
        return Err(ApiError::bad_request(
            "metadata.resourceVersion is required for update",
        ));
    }
    if given_rv != current_rv {
        return Err(conflict(
            name,
            &format!("resource version mismatch: got {given_rv:?}, current is {current_rv:?}"),
        ));
    }
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

/// `preconditions.uid` and `preconditions.resourceVersion` (an explicit empty value counts), worded as
/// kube-apiserver does.
fn check_preconditions(name: &str, current: &Value, options: &DeleteOptions) -> Result<(), ApiError> {
    let Some(preconditions) = &options.preconditions else {
        return Ok(());
    };
    let actual_uid = current["metadata"]["uid"].as_str().unwrap_or_default();
    if let Some(uid) = &preconditions.uid
        && uid != actual_uid
    {
        return Err(conflict(
            name,
            &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual_uid}"),
        ));
    }
    let actual_rv = current["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    if let Some(rv) = &preconditions.resource_version
        && rv != actual_rv
    {
        return Err(conflict(
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual_rv}"
            ),
        ));
    }
    Ok(())
}

#[async_trait]
impl Storage for TemplateStorage {
    async fn get(&self, ctx: &RequestContext, name: &str) -> Result<Value, ApiError> {
        let parsed = names::parse_template_name(name)?;
        let backend = self.backend(ctx, name).await?;
        Ok(self.read(&backend, ctx, name, &parsed).await?.1)
    }

    async fn list(&self, ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
        let mut objects = Vec::new();
        for backend in self.provider.resolve(ctx.namespace.as_deref()).await? {
            for template in all_templates(&backend.client, ctx.deadline, TEMPLATES).await? {
                objects.push(convert::template(&backend.namespace, &template)?);
            }
        }
        Ok(objects)
    }

    async fn create(&self, ctx: &RequestContext, object: Value) -> Result<Written, ApiError> {
        refuse_dry_run(ctx)?;
        self.create_template(ctx, parse_body(object)?).await
    }

    async fn update(
        &self,
        ctx: &RequestContext,
        name: &str,
        object: Value,
        allow_create: bool,
    ) -> Result<Written, ApiError> {
        refuse_dry_run(ctx)?;
        let parsed = names::parse_template_name(name)?;
        let desired = parse_body(object)?;
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
        refuse_dry_run(ctx)?;
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
        check_preconditions(name, &object, options)?;
        within(
            ctx.deadline,
            subject(TEMPLATES, name),
            backend.client.delete_template(template.id),
        )
        .await?;
        Ok(Deleted::Success {
            object: Some(object),
            event: Some(EventType::Deleted),
        })
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
        parse_body(json!({
            "metadata": {"name": "acme.docker", "resourceVersion": rv},
            "spec": {"organization": organization, "versionID": version}
        }))
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
        let body = metadata_update(&current, &spec);
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
        assert_eq!(
            metadata_update(&current, &spec),
            UpdateTemplateMeta::from_template(&current)
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
        assert!(check_preconditions("acme.docker", &object, &DeleteOptions::default()).is_ok());
        assert!(check_preconditions("acme.docker", &object, &options(Some("u1"), Some("7"))).is_ok());
        let error = check_preconditions("acme.docker", &object, &options(Some(""), None)).unwrap_err();
        assert_eq!(error.code, 409);
        assert!(
            error
                .message
                .ends_with("Precondition failed: UID in precondition: , UID in object meta: u1")
        );
        let error = check_preconditions("acme.docker", &object, &options(None, Some("6"))).unwrap_err();
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
        let error = refuse_dry_run(&ctx).unwrap_err();
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
