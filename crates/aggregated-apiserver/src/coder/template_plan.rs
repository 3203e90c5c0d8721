//! What a write of a `CoderTemplate` will do, worked out and checked before anything is written: the spec's own
//! rules (one 422 with every field error), the premium features its changes need, the access-list names resolved
//! to Coder IDs, and the values of a new version's variables (Secrets read only for a caller allowed to read them).

use coder_k8s_api::aggregation::{CoderTemplateAcl, CoderTemplateSpec, GROUP};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::template_acl::{TemplateAcl, UpdateTemplateAcl};
use tokio::time::Instant;
use uuid::Uuid;

use super::errors::{Subject, within};
use super::field_errors::{self, FieldError};
use super::provider::Provider;
use super::template_settings::{Desired, Feature, Licensed};
use super::{template_acl, template_inputs, template_settings};
use crate::generic::{ApiError, RequestContext};

/// The kind in 422 messages.
const KIND: &str = "CoderTemplate";

/// The 422 of `errors` about template `name`, `Ok` when there are none.
pub fn check(name: &str, errors: &[FieldError]) -> Result<(), ApiError> {
    field_errors::check(KIND, GROUP, name, errors)
}

/// The 422 of `errors` (at least one) about template `name`.
pub fn refused(name: &str, errors: &[FieldError]) -> ApiError {
    field_errors::invalid(KIND, GROUP, name, errors)
        .unwrap_or_else(|| ApiError::internal("a write was refused without a reason"))
}

/// The spec's own rules (settings, access list, version inputs), all reported at once; the parsed settings.
pub fn validate(name: &str, spec: &CoderTemplateSpec) -> Result<Desired, ApiError> {
    let mut errors = Vec::new();
    let desired = template_settings::parse(&spec.settings).unwrap_or_else(|e| {
        errors.extend(e);
        Desired::default()
    });
    if let Some(acl) = &spec.settings.acl {
        errors.extend(template_acl::validate(acl));
    }
    errors.extend(template_inputs::validate(spec));
    check(name, &errors)?;
    Ok(desired)
}

/// The premium features the deployment is licensed for (none on open-source Coder, which has no `/entitlements`).
pub async fn licensed(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
) -> Result<Licensed, ApiError> {
    match tokio::time::timeout_at(deadline, client.entitlements()).await {
        Ok(Ok(entitlements)) => Ok(Licensed::of(Some(entitlements))),
        Ok(Err(error)) if error.is_route_not_found() => Ok(Licensed::of(None)),
        Ok(Err(error)) => Err(super::errors::map_coder_error(&error, subject)),
        Err(_) => Err(super::errors::timed_out(subject)),
    }
}

/// Refuses the changes whose feature is not licensed and that Coder would keep without an error (a 422 naming each
/// field and its feature). Answers whether a port-sharing change that Coder will refuse (with its own message) must
/// go first, so that nothing else is written before Coder refuses it.
pub async fn premium(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    name: &str,
    changes: &[(&'static str, Feature)],
) -> Result<bool, ApiError> {
    if changes.is_empty() {
        return Ok(false);
    }
    let licensed = licensed(client, deadline, subject).await?;
    let errors: Vec<FieldError> = changes
        .iter()
        .filter(|(_, feature)| matches!(feature, Feature::Scheduling | Feature::AccessControl))
        .filter(|(_, feature)| !licensed.has(*feature))
        .map(|(path, feature)| FieldError::forbidden(*path, licensed.refusal(*feature)))
        .collect();
    check(name, &errors)?;
    Ok(changes
        .iter()
        .any(|(_, feature)| *feature == Feature::SharedPorts && !licensed.has(Feature::SharedPorts)))
}

/// The access-list names of `acl` resolved to Coder IDs (a 422 naming every unknown entry).
pub async fn resolve_acl(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    name: &str,
    organization: &str,
    acl: &CoderTemplateAcl,
) -> Result<template_acl::Resolved, ApiError> {
    match template_acl::resolve(client, deadline, subject, organization, acl).await? {
        Ok(resolved) => Ok(resolved),
        Err(errors) => Err(refused(name, &errors)),
    }
}

/// The access-list update an existing template needs: Coder's list read first (Coder's own refusal passed on, a
/// 422 on open-source Coder), the names resolved, and only the difference kept.
pub async fn acl_update(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    name: &str,
    organization: &str,
    template: Uuid,
    acl: &CoderTemplateAcl,
) -> Result<UpdateTemplateAcl, ApiError> {
    let current: TemplateAcl = match template_acl::current(client, deadline, subject, template).await? {
        Ok(current) => current,
        Err(error) => return Err(refused(name, &[error])),
    };
    let resolved = resolve_acl(client, deadline, subject, name, organization, acl).await?;
    Ok(template_acl::difference(&current, &resolved))
}

/// The values of a new version's variables (`Ok` with the values and the Secret references to record), the Secrets
/// read for a caller allowed to read them.
pub async fn variable_values(
    ctx: &RequestContext,
    provider: &dyn Provider,
    namespace: &str,
    name: &str,
    wanted: &template_inputs::Wanted,
) -> Result<template_inputs::Resolved, ApiError> {
    match template_inputs::resolve_values(ctx, provider, namespace, &wanted.variables).await? {
        Ok(resolved) => Ok(resolved),
        Err(errors) => Err(refused(name, &errors)),
    }
}

/// A new version's name must be free in the template (Coder would refuse it after the upload): a 422 when a version
/// of that name exists.
pub async fn version_name_free(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    name: &str,
    template: Uuid,
    version_name: Option<&str>,
) -> Result<(), ApiError> {
    let Some(version_name) = version_name else {
        return Ok(());
    };
    match tokio::time::timeout_at(deadline, client.template_version_by_name(template, version_name)).await {
        Ok(Ok(_)) => Err(refused(
            name,
            &[FieldError::invalid(
                "spec.versionName",
                version_name,
                "the template already has a version of this name: a new version needs a new name",
            )],
        )),
        Ok(Err(error)) if error.is_not_found() => Ok(()),
        Ok(Err(error)) => Err(super::errors::map_coder_error(&error, subject)),
        Err(_) => Err(super::errors::timed_out(subject)),
    }
}

/// Sends the metadata body when it changes anything; answers the template as Coder returned it.
pub async fn write_metadata(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    id: Uuid,
    body: &coder_k8s_coder_client::types::templates::UpdateTemplateMeta,
) -> Result<(), ApiError> {
    within(deadline, subject, client.update_template_meta(id, body))
        .await
        .map(drop)
}

/// After the writes: the settings Coder did not take (a 500 naming them; the rest was written).
pub fn check_applied(
    desired: &Desired,
    after: &coder_k8s_coder_client::types::templates::Template,
) -> Result<(), ApiError> {
    let missing = template_settings::not_applied(desired, after);
    if missing.is_empty() {
        return Ok(());
    }
    Err(ApiError::internal(format!(
        "Coder kept its own value of {} although it was sent; the other changes were written (is the premium feature licensed?)",
        missing.join(", ")
    )))
}
