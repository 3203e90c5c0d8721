//! Dereference and validate for a CoderTemplateTest pass (docs/controllers/template-test.md): the control plane and
//! a Coder client with its operator token, then the owner, organization, template and version, pinned as soon as
//! Coder names them.

use std::sync::Arc;

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::template_test::reasons;
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::templates::Template;
use coder_k8s_control_plane_access::AccessError;
use kube::ResourceExt;
use uuid::Uuid;

use super::names;
use super::phase;
use super::reconcile::{Pass, Status, unavailable};
use super::status::{self as decide, Step};
use crate::controller::conditions::ConditionStatus;
use crate::controller::error::Result;
use crate::controller::upstream::{Refusal, operator_client};

/// The control plane and a Coder client with its operator token, or the wait (or `ControlPlaneGone`) that says
/// why not.
pub(super) async fn upstream(
    pass: &Pass<'_>,
    status: &Status,
) -> Result<std::result::Result<(CoderClient, Arc<CoderControlPlane>), Step>> {
    let (tt, ctx) = (pass.tt, pass.ctx);
    let namespace = tt.namespace().unwrap_or_default();
    let cp_name = tt.spec.control_plane_ref.name.as_str();
    let not_ready = |message: String| Step::wait(reasons::CONTROL_PLANE_NOT_READY, message);
    let no_access = |message: String| Step::wait(reasons::OPERATOR_ACCESS_NOT_READY, message);
    let Some(control_plane) = ctx.caches.control_planes.get(&namespace, cp_name) else {
        if decide::may_have_workspace(status) {
            return Ok(Err(Step::fail(
                reasons::CONTROL_PLANE_GONE,
                format!("CoderControlPlane {cp_name} is gone, so the workspace can no longer be reached."),
            )
            .with_deleted(ConditionStatus::Unknown, reasons::CONTROL_PLANE_GONE)));
        }
        return Ok(Err(not_ready(format!(
            "CoderControlPlane {cp_name} does not exist."
        ))));
    };
    if control_plane.metadata.deletion_timestamp.is_some() {
        return Ok(Err(not_ready(format!(
            "CoderControlPlane {cp_name} is being deleted."
        ))));
    }
    match operator_client(ctx, &namespace, cp_name).await? {
        Ok(upstream) => Ok(Ok((upstream.coder, upstream.control_plane))),
        Err(refusal) if refusal.is_control_plane_missing() => Ok(Err(not_ready(format!(
            "CoderControlPlane {cp_name} has no status.url yet."
        )))),
        Err(Refusal::Access(AccessError::ClientUnusable)) => Ok(Err(not_ready(format!(
            "CoderControlPlane {cp_name} has no usable Coder URL."
        )))),
        Err(
            Refusal::Access(AccessError::TokenSecretUnavailable { .. }) | Refusal::TokenSecretNotOwned { .. },
        ) => Ok(Err(no_access(format!(
            "The operator token Secret of CoderControlPlane {cp_name} has no token yet."
        )))),
        Err(Refusal::Access(_)) => Ok(Err(no_access(format!(
            "CoderControlPlane {cp_name} has no operator access yet."
        )))),
    }
}

/// Resolves and pins the owner, organization, template and version; `None` when every input is ready and the
/// workspace name is free.
pub(super) async fn resolve_inputs(
    pass: &Pass<'_>,
    coder: &CoderClient,
    control_plane: &CoderControlPlane,
    status: &mut Status,
) -> Option<Step> {
    let cp_name = control_plane.name_any();
    let configured = control_plane
        .spec
        .template_tests
        .as_ref()
        .and_then(|t| t.owner_user_id.as_deref())
        .filter(|id| !id.is_empty());
    let Some(owner) = configured.and_then(|id| Uuid::parse_str(id).ok()) else {
        return Some(Step::wait(
            reasons::OWNER_NOT_CONFIGURED,
            format!("Set spec.templateTests.ownerUserID (a Coder user UUID) on CoderControlPlane {cp_name}."),
        ));
    };
    resolve_all(pass, coder, owner, status).await.err()
}

pub(super) async fn resolve_all(
    pass: &Pass<'_>,
    coder: &CoderClient,
    owner: Uuid,
    status: &mut Status,
) -> std::result::Result<(), Step> {
    let organizations = check_owner(pass, coder, owner).await?;
    let (organization, template) = find_template(pass, coder, owner, &organizations).await?;
    resolve_version(pass, coder, template.id, template.active_version_id, status).await?;
    status.organization_id = Some(organization.to_string());
    status.template_id = Some(template.id.to_string());
    status.owner_id = Some(owner.to_string());
    status.workspace_name = Some(pass.name.clone());
    name_is_free(pass, coder, owner).await
}

/// The organization's ID and the template, checked to be what was asked for, in an organization of the owner and
/// not deprecated.
async fn find_template(
    pass: &Pass<'_>,
    coder: &CoderClient,
    owner: Uuid,
    organizations: &[Uuid],
) -> std::result::Result<(Uuid, Template), Step> {
    let spec = &pass.tt.spec;
    let not_found = |what: String| Step::wait(reasons::TEMPLATE_NOT_FOUND, what);
    let (org_name, template_name) = names::template_parts(&spec.template)
        .ok_or_else(|| not_found(format!("{:?} is not <organization>.<template>.", spec.template)))?;
    let organization = match coder.organization(org_name).await {
        Err(e) if e.is_not_found() => {
            return Err(not_found(format!(
                "Coder organization {org_name:?} does not exist."
            )));
        }
        other => other.map_err(unavailable("get organization"))?,
    };
    pass.answered(
        "organization",
        &org_name.to_lowercase(),
        &organization.name.to_lowercase(),
    )?;
    if !organizations.contains(&organization.id) {
        return Err(Step::wait(
            reasons::OWNER_NOT_ELIGIBLE,
            format!("Coder user {owner} is not a member of organization {org_name:?}."),
        ));
    }
    let template = match coder
        .template_by_name(&organization.id.to_string(), template_name)
        .await
    {
        Err(e) if e.is_not_found() => {
            return Err(not_found(format!(
                "Coder template {:?} does not exist.",
                spec.template
            )));
        }
        other => other.map_err(unavailable("get template"))?,
    };
    pass.answered(
        "template",
        &template_name.to_lowercase(),
        &template.name.to_lowercase(),
    )?;
    pass.answered(
        "template organization",
        &organization.id.to_string(),
        &template.organization_id.to_string(),
    )?;
    if template.deprecated {
        return Err(Step::fail(
            reasons::TEMPLATE_DEPRECATED,
            format!(
                "Coder template {:?} is deprecated and accepts no new workspaces.",
                spec.template
            ),
        ));
    }
    Ok((organization.id, template))
}

/// Before any create of this test, a workspace under its name is someone else's: the run fails and never touches
/// it.
async fn name_is_free(pass: &Pass<'_>, coder: &CoderClient, owner: Uuid) -> std::result::Result<(), Step> {
    match coder
        .workspace_by_owner_and_name(&owner.to_string(), &pass.name)
        .await
    {
        Ok(_) if !created_nothing(pass).await => {
            pass.outdated.store(true, std::sync::atomic::Ordering::Relaxed);
            Err(Step::wait(
                reasons::CREATING_WORKSPACE,
                "The test's status was read before its last write; reading it again.",
            ))
        }
        Ok(_) => Err(Step::fail(
            reasons::WORKSPACE_NAME_CONFLICT,
            format!("Coder user {owner} already has a workspace named {}.", pass.name),
        )),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(decide::coder_unavailable("get workspace by name", &e)),
    }
}

/// Whether the object as the API server has it (not the cache) records no create: only then is a workspace under
/// the test's name someone else's. A read that fails counts as "not sure".
async fn created_nothing(pass: &Pass<'_>) -> bool {
    let api: kube::Api<coder_k8s_api::template_test::CoderTemplateTest> =
        kube::Api::namespaced(pass.ctx.client.clone(), &pass.tt.namespace().unwrap_or_default());
    match api.get_status(&pass.tt.name_any()).await {
        Ok(fresh) => fresh
            .status
            .is_none_or(|s| s.create_attempt_time.is_none() && s.workspace_id.is_none()),
        Err(_) => false,
    }
}

/// The owner eligibility rules; returns the owner's organizations.
pub(super) async fn check_owner(
    pass: &Pass<'_>,
    coder: &CoderClient,
    owner: Uuid,
) -> std::result::Result<Vec<Uuid>, Step> {
    let refuse = |why: String| Step::wait(reasons::OWNER_NOT_ELIGIBLE, format!("Coder user {owner}: {why}"));
    let user = match coder.user(&owner.to_string()).await {
        Err(e) if e.is_not_found() => return Err(refuse("the user does not exist.".to_owned())),
        other => other.map_err(unavailable("get owner"))?,
    };
    pass.answered("user", &owner.to_string(), &user.id.to_string())?;
    if let Some(why) = phase::owner_refusal(&user) {
        return Err(refuse(why));
    }
    for organization in &user.organization_ids {
        let org = coder
            .organization_by_id(*organization)
            .await
            .map_err(unavailable("get owner organization"))?;
        pass.answered("organization", &organization.to_string(), &org.id.to_string())?;
        let members = coder
            .organization_members(&organization.to_string())
            .await
            .map_err(unavailable("get owner membership"))?;
        let member = members.iter().find(|m| m.user_id == owner);
        if let Some(why) = phase::organization_refusal(*organization, &org.default_org_member_roles, member) {
            return Err(refuse(why));
        }
    }
    Ok(user.organization_ids)
}

/// Finds the version under test and pins it as soon as Coder names it (the active version is resolved once).
pub(super) async fn resolve_version(
    pass: &Pass<'_>,
    coder: &CoderClient,
    template: Uuid,
    active: Uuid,
    status: &mut Status,
) -> std::result::Result<(), Step> {
    let spec = &pass.tt.spec;
    let pinned = status
        .template_version_id
        .clone()
        .or_else(|| spec.version.id.clone());
    let (answer, asked) = match (pinned, spec.version.name.as_deref()) {
        (Some(id), _) => {
            let id = Uuid::parse_str(&id).map_err(|_| {
                Step::wait(
                    reasons::TEMPLATE_VERSION_NOT_FOUND,
                    format!("Version ID {id:?} is not a UUID."),
                )
            })?;
            (coder.template_version(id).await, id.to_string())
        }
        (None, Some(name)) => (
            coder.template_version_by_name(template, name).await,
            name.to_owned(),
        ),
        (None, None) => (coder.template_version(active).await, active.to_string()),
    };
    let version = match answer {
        Err(e) if e.is_not_found() => {
            return Err(Step::wait(
                reasons::TEMPLATE_VERSION_NOT_FOUND,
                format!("The version of template {:?} does not exist.", spec.template),
            ));
        }
        other => other.map_err(unavailable("get template version"))?,
    };
    let answered_as = if spec.version.name.is_some() && status.template_version_id.is_none() {
        version.name.clone()
    } else {
        version.id.to_string()
    };
    pass.answered("version", &asked, &answered_as)?;
    if version.template_id == Some(template) {
        status.template_version_id = Some(version.id.to_string());
        status.template_version_name = Some(version.name.clone());
    }
    match phase::version_step(&version, template, &spec.template) {
        Some(step) => Err(step),
        None => Ok(()),
    }
}
