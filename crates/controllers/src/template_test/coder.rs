//! The Coder lookups of a CoderTemplateTest (docs/controllers/template-test.md): the owner and its organizations, the
//! template and the version under test — pinned as soon as Coder names them — and that the workspace name is free.
//! Every answer is checked to be about what was asked.

use coder_k8s_api::template_test::{CoderTemplateTest, reasons};
use coder_k8s_coder_client::types::templates::Template;
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use kube::ResourceExt;
use uuid::Uuid;

use super::answers::{self, MISMATCH_LOG, Mismatch};
use super::desired;
use super::inputs::{TestPass, timings, workspace};
use super::status::{self as decide, Outcome};
use crate::halt::{Halt, settle};

/// A Coder call failed: the wait `CoderUnavailable` (see [`decide::coder_unavailable`]).
pub fn unavailable(action: &'static str) -> impl Fn(CoderError) -> Halt<Outcome> {
    move |error| Halt::Settled(decide::coder_unavailable(action, &error))
}

/// A Coder answer about something else than was asked: logged as such, and a wait the deadline ends.
pub fn mismatch(pass: &TestPass<'_>, mismatch: Mismatch) -> Outcome {
    let tt = pass.object;
    tracing::error!(name = %tt.name_any(), namespace = ?tt.namespace(), answer = %mismatch.0, "{MISMATCH_LOG}");
    mismatch.step()
}

/// Checks that Coder answered about what was asked (see [`mismatch`]).
pub fn answered(pass: &TestPass<'_>, kind: &str, asked: &str, answer: &str) -> Result<(), Halt<Outcome>> {
    answers::answered(kind, asked, answer).map_err(|m| Halt::Settled(mismatch(pass, m)))
}

/// Resolves and pins the owner, organization, template and version; returns when every input is ready and the
/// workspace name is free.
pub async fn resolve_inputs(
    pass: &mut TestPass<'_>,
    coder: &CoderClient,
    control_plane: &coder_k8s_api::control_plane::CoderControlPlane,
) -> Result<(), Halt<Outcome>> {
    let configured = control_plane
        .spec
        .template_tests
        .as_ref()
        .and_then(|t| t.owner_user_id.as_deref())
        .filter(|id| !id.is_empty());
    let Some(owner) = configured.and_then(|id| Uuid::parse_str(id).ok()) else {
        let cp_name = control_plane.name_any();
        return settle(Outcome::wait(
            reasons::OWNER_NOT_CONFIGURED,
            format!("Set spec.templateTests.ownerUserID (a Coder user UUID) on CoderControlPlane {cp_name}."),
        ));
    };
    let organizations = check_owner(pass, coder, owner).await?;
    let (organization, template) = find_template(pass, coder, owner, &organizations).await?;
    resolve_version(pass, coder, template.id, template.active_version_id).await?;
    pass.status.organization_id = Some(organization.to_string());
    pass.status.template_id = Some(template.id.to_string());
    pass.status.owner_id = Some(owner.to_string());
    pass.status.workspace_name = Some(workspace(pass));
    name_is_free(pass, coder, owner).await
}

/// The organization `name`, checked to be the one asked for and one of the owner's `organizations`.
async fn find_organization(
    pass: &TestPass<'_>,
    coder: &CoderClient,
    (name, owner): (&str, Uuid),
    organizations: &[Uuid],
) -> Result<Uuid, Halt<Outcome>> {
    let organization = match coder.organization(name).await {
        Err(e) if e.is_not_found() => {
            let missing = format!("Coder organization {name:?} does not exist.");
            return settle(Outcome::wait(reasons::TEMPLATE_NOT_FOUND, missing));
        }
        other => other.map_err(unavailable("get organization"))?,
    };
    answered(
        pass,
        "organization",
        &name.to_lowercase(),
        &organization.name.to_lowercase(),
    )?;
    if !organizations.contains(&organization.id) {
        return settle(Outcome::wait(
            reasons::OWNER_NOT_ELIGIBLE,
            format!("Coder user {owner} is not a member of organization {name:?}."),
        ));
    }
    Ok(organization.id)
}

/// The organization's ID and the template, checked to be what was asked for, in an organization of the owner and
/// not deprecated.
async fn find_template(
    pass: &TestPass<'_>,
    coder: &CoderClient,
    owner: Uuid,
    organizations: &[Uuid],
) -> Result<(Uuid, Template), Halt<Outcome>> {
    let spec = &pass.object.spec;
    let not_found = |what: String| settle(Outcome::wait(reasons::TEMPLATE_NOT_FOUND, what));
    let Some((org_name, template_name)) = desired::template_parts(&spec.template) else {
        return not_found(format!("{:?} is not <organization>.<template>.", spec.template));
    };
    let organization = find_organization(pass, coder, (org_name, owner), organizations).await?;
    let template = match coder
        .template_by_name(&organization.to_string(), template_name)
        .await
    {
        Err(e) if e.is_not_found() => {
            return not_found(format!("Coder template {:?} does not exist.", spec.template));
        }
        other => other.map_err(unavailable("get template"))?,
    };
    answered(
        pass,
        "template",
        &template_name.to_lowercase(),
        &template.name.to_lowercase(),
    )?;
    let template_organization = template.organization_id.to_string();
    answered(
        pass,
        "template organization",
        &organization.to_string(),
        &template_organization,
    )?;
    if template.deprecated {
        return settle(Outcome::fail(
            reasons::TEMPLATE_DEPRECATED,
            format!(
                "Coder template {:?} is deprecated and accepts no new workspaces.",
                spec.template
            ),
        ));
    }
    Ok((organization, template))
}

/// Before any create of this test, a workspace under its name is someone else's: the run fails and never touches
/// it.
async fn name_is_free(pass: &TestPass<'_>, coder: &CoderClient, owner: Uuid) -> Result<(), Halt<Outcome>> {
    let name = workspace(pass);
    match coder.workspace_by_owner_and_name(&owner.to_string(), &name).await {
        // The test's status was read before its last write: decide again on the fresh object, write nothing.
        Ok(_) if !created_nothing(pass).await => Err(Halt::Wait(kube::runtime::controller::Action::requeue(
            timings(pass).running,
        ))),
        Ok(_) => settle(Outcome::fail(
            reasons::WORKSPACE_NAME_CONFLICT,
            format!("Coder user {owner} already has a workspace named {name}."),
        )),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => settle(decide::coder_unavailable("get workspace by name", &e)),
    }
}

/// Whether the object as the API server has it (not the cache) records no create: only then is a workspace under
/// the test's name someone else's. A read that fails counts as "not sure".
async fn created_nothing(pass: &TestPass<'_>) -> bool {
    let api: kube::Api<CoderTemplateTest> =
        kube::Api::namespaced(pass.ctx.k8s.client.clone(), &pass.namespace());
    match api.get_status(&pass.name()).await {
        Ok(fresh) => fresh
            .status
            .is_none_or(|s| s.create_attempt_time.is_none() && s.workspace_id.is_none()),
        Err(_) => false,
    }
}

/// The owner eligibility rules; returns the owner's organizations.
async fn check_owner(
    pass: &TestPass<'_>,
    coder: &CoderClient,
    owner: Uuid,
) -> Result<Vec<Uuid>, Halt<Outcome>> {
    let refuse = |why: String| {
        settle(Outcome::wait(
            reasons::OWNER_NOT_ELIGIBLE,
            format!("Coder user {owner}: {why}"),
        ))
    };
    let user = match coder.user(&owner.to_string()).await {
        Err(e) if e.is_not_found() => return refuse("the user does not exist.".to_owned()),
        other => other.map_err(unavailable("get owner"))?,
    };
    answered(pass, "user", &owner.to_string(), &user.id.to_string())?;
    if let Some(why) = answers::owner_refusal(&user) {
        return refuse(why);
    }
    for organization in &user.organization_ids {
        let org = coder
            .organization_by_id(*organization)
            .await
            .map_err(unavailable("get owner organization"))?;
        answered(
            pass,
            "organization",
            &organization.to_string(),
            &org.id.to_string(),
        )?;
        let members = coder
            .organization_members(&organization.to_string())
            .await
            .map_err(unavailable("get owner membership"))?;
        let member = members.iter().find(|m| m.user_id == owner);
        if let Some(why) = answers::organization_refusal(*organization, &org.default_org_member_roles, member)
        {
            return refuse(why);
        }
    }
    Ok(user.organization_ids)
}

/// Finds the version under test and pins it as soon as Coder names it (the active version is resolved once).
async fn resolve_version(
    pass: &mut TestPass<'_>,
    coder: &CoderClient,
    template: Uuid,
    active: Uuid,
) -> Result<(), Halt<Outcome>> {
    let spec = &pass.object.spec;
    let pinned = pass
        .status
        .template_version_id
        .clone()
        .or_else(|| spec.version.id.clone());
    let (answer, asked) = match (pinned, spec.version.name.as_deref()) {
        (Some(id), _) => {
            let Ok(id) = Uuid::parse_str(&id) else {
                let message = format!("Version ID {id:?} is not a UUID.");
                return settle(Outcome::wait(reasons::TEMPLATE_VERSION_NOT_FOUND, message));
            };
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
            let message = format!("The version of template {:?} does not exist.", spec.template);
            return settle(Outcome::wait(reasons::TEMPLATE_VERSION_NOT_FOUND, message));
        }
        other => other.map_err(unavailable("get template version"))?,
    };
    let answered_as = match spec.version.name.is_some() && pass.status.template_version_id.is_none() {
        true => version.name.clone(),
        false => version.id.to_string(),
    };
    answered(pass, "version", &asked, &answered_as)?;
    if version.template_id == Some(template) {
        pass.status.template_version_id = Some(version.id.to_string());
        pass.status.template_version_name = Some(version.name.clone());
    }
    match answers::version_step(&version, template, &spec.template) {
        Some(step) => settle(step),
        None => Ok(()),
    }
}
