//! The Coder calls of a CoderAIProvider (docs/controllers/ai-provider.md): find the object's provider (by the
//! recorded or shown ID when it proves to be the object's, else by name), create it after its cleanup record, patch
//! only what differs, delete it.

use coder_k8s_api::ai_provider::CoderAIProvider;
use coder_k8s_coder_client::ai::AiProvider;
use coder_k8s_coder_client::{CoderClient, Error as CoderError, found};

use super::inputs::Inputs;
use super::status::{Outcome, coder_failed};
use crate::cleanup_records::{self, write_before_create};
use crate::error::Error;
use crate::halt::Halt;
use crate::pass::Pass;

/// What Coder holds for the object.
pub enum Found {
    Ours(Box<AiProvider>),
    Nothing,
    /// A provider with the object's name that this object did not create.
    Foreign,
}

/// The object's provider: by the recorded or shown ID when it proves to be ours, else by name.
pub async fn find(
    coder: &CoderClient,
    inputs: &Inputs,
    status_id: Option<&str>,
) -> Result<Found, CoderError> {
    for id in inputs.recorded_id().iter().map(String::as_str).chain(status_id) {
        if let Some(live) = found(coder.ai_provider(id).await)?
            && inputs.owns(&live, status_id)
        {
            return Ok(Found::Ours(Box::new(live)));
        }
    }
    Ok(match found(coder.ai_provider(&inputs.desired.name).await)? {
        Some(live) if inputs.owns(&live, status_id) => Found::Ours(Box::new(live)),
        Some(_) => Found::Foreign,
        None => Found::Nothing,
    })
}

/// The cleanup record first (no create without it), then the create; the new provider's ID.
pub async fn create(
    pass: &mut Pass<'_, CoderAIProvider>,
    coder: &CoderClient,
    inputs: &Inputs,
    deployment: &str,
) -> Result<String, Halt<Outcome>> {
    write_before_create(pass.ctx, &inputs.record(pass, deployment, None)).await?;
    // The deployment is recorded with the first create: a later change of deployment stalls the object.
    pass.status.coder_deployment_id = Some(deployment.to_owned());
    let created = coder
        .create_ai_provider(&inputs.desired.create_request())
        .await
        .map_err(|error| Halt::Settled(coder_failed("create the provider", &error)))?;
    let id = created.id.to_string();
    record_id(pass, inputs, deployment, &id).await?;
    Ok(id)
}

/// Patches what differs from Coder's `live` provider (the Secret values when `send_secrets`); its ID.
pub async fn update(
    pass: &Pass<'_, CoderAIProvider>,
    coder: &CoderClient,
    inputs: &Inputs,
    (live, send_secrets): (&AiProvider, bool),
    deployment: &str,
) -> Result<String, Halt<Outcome>> {
    let id = live.id.to_string();
    // A provider from before cleanup records existed gets its record now.
    let recorded = pass.status.coder_deployment_id.as_deref().unwrap_or(deployment);
    record_id(pass, inputs, recorded, &id).await?;
    if let Some(patch) = inputs.desired.patch(live, send_secrets) {
        coder
            .patch_ai_provider(&id, &patch)
            .await
            .map_err(|error| Halt::Settled(coder_failed("update the provider", &error)))?;
    }
    Ok(id)
}

async fn record_id(
    pass: &Pass<'_, CoderAIProvider>,
    inputs: &Inputs,
    deployment: &str,
    id: &str,
) -> Result<(), Error> {
    let record = inputs.record(pass, deployment, Some(id.to_owned()));
    cleanup_records::write(pass.ctx, &record)
        .await
        .map_err(Error::from)
}

/// Deletes the object's provider, if Coder holds one that proves to be the object's.
pub async fn delete(coder: &CoderClient, inputs: &Inputs, status_id: Option<&str>) -> Result<(), CoderError> {
    match find(coder, inputs, status_id).await? {
        Found::Ours(live) => found(coder.delete_ai_provider(&live.id.to_string()).await).map(|_| ()),
        Found::Nothing | Found::Foreign => Ok(()),
    }
}
