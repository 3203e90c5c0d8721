//! The provisioner key in Coder (docs/controllers/provisioner.md): a recorded key that still matches its inputs and
//! whose Secret holds it makes no Coder call; otherwise the organization, drift, the key plan and its calls. A key is
//! this provisioner's only when its key Secret records its ID (or this process just created it); the status alone
//! proves nothing. Also the entitlement read.

use coder_k8s_api::provisioner::{CoderProvisioner, CoderProvisionerStatus};
use coder_k8s_api::shared::SecretKeySelector;
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::desired::{self, KeyCleanup, KeyInputs, KeyPlan, KeyProof, ListedKey, ProvisionerNames};
use super::status::{self as decide, Outcome};
use crate::context::Context;
use crate::error::Error;
use crate::halt::Halt;
use crate::owned_secret::{OwnedSecret, step_annotations};
use crate::ownership::controlled_by;
use crate::pass::Pass;
use crate::secrets;
use crate::status_writer;
use crate::upstream::Upstream;

/// Log line when the key's inputs changed (v0.1.5 text).
pub const DRIFT_LOG: &str = "spec drift detected, rotating provisioner key";

type ProvisionerPass<'p> = Pass<'p, CoderProvisioner>;

/// Whether the control plane's Coder entitles external provisioner daemons: the last read shared by every user of
/// the control plane within the entitlements interval, else `GET /api/v2/entitlements`.
pub async fn read_entitlement(ctx: &Context, upstream: &Upstream) -> Result<bool, CoderError> {
    let uid = &upstream.target.uid;
    let entitlements = match ctx.entitlements.fresh(uid, ctx.settings.entitlements_interval) {
        Some(entitlements) => entitlements,
        None => {
            let read = upstream.coder.entitlements().await?;
            ctx.entitlements.record(uid, read.clone());
            read
        }
    };
    Ok(entitlements.is_entitled("external_provisioner_daemons"))
}

/// `ProvisionerKeyReady` after a failed Coder call; the next pass waits out the object's backoff after a 429.
fn failed(pass: &mut ProvisionerPass<'_>, error: &CoderError) -> Halt<Outcome> {
    pass.set(decide::key_failed(error));
    Halt::Settled(Outcome::after(pass.ctx.rate_limits.after(
        &pass.uid,
        error,
        pass.retry(),
    )))
}

/// The provisioner key: the stored one when the recorded key still matches its inputs, else the one the key plan
/// reuses or creates in Coder. Records it in the status (`ProvisionerKeyReady`, `ProvisionerKeySecretReady`).
pub async fn key(
    pass: &mut ProvisionerPass<'_>,
    upstream: &Upstream,
    names: &ProvisionerNames,
) -> Result<String, Halt<Outcome>> {
    // After a 429 the object waits out its backoff, even when a watch event wakes it early.
    if let Some(remaining) = pass.ctx.rate_limits.remaining(&pass.uid) {
        return Err(Halt::Settled(Outcome::after(remaining)));
    }
    let secret = pass.ctx.k8s.secret(&pass.namespace(), &names.key_secret).await?;
    let stored = secrets::value(secret.as_deref(), &names.key_secret_key).filter(|k| !k.is_empty());
    let inputs = KeyInputs {
        organization_name: desired::organization_name(&pass.object.spec).to_owned(),
        key_name: names.key_name.clone(),
        tags_hash: desired::tags_hash(&pass.object.spec.tags),
        control_plane: pass.object.spec.control_plane_ref.name.clone(),
        control_plane_url: upstream.target.pod_url.clone(),
    };
    let resolved = pass.memory().resolved_organization;
    let resolved = resolved.as_ref().map(|(name, id)| (name.as_str(), id.as_str()));
    let key = match stored {
        Some(key) if desired::key_current(&pass.status, &inputs, resolved) => key,
        stored => in_coder(pass, &upstream.coder, names, &inputs, (stored, secret.as_deref())).await?,
    };
    pass.ctx.rate_limits.passed(&pass.uid);
    record_key(pass, &inputs, names);
    if let Some(organization_id) = pass.status.organization_id.clone() {
        let spec_organization = inputs.organization_name.clone();
        pass.remember(|memory| memory.resolved_organization = Some((spec_organization, organization_id)));
    }
    Ok(key)
}

/// The Coder half of the key: organization, drift, the key plan and its calls.
async fn in_coder(
    pass: &mut ProvisionerPass<'_>,
    coder: &CoderClient,
    names: &ProvisionerNames,
    inputs: &KeyInputs,
    (stored, live_secret): (Option<String>, Option<&Secret>),
) -> Result<String, Halt<Outcome>> {
    let organization = coder
        .organization(&inputs.organization_name)
        .await
        .map_err(|e| failed(pass, &e))?;
    let org = organization.id.to_string();
    let drifted = desired::drifted(&pass.status, &org, inputs);
    let annotated = annotated_key_id(live_secret, &pass.uid);
    // The key the status names, before a rotation forgets it: usable as it is only with a key Secret from before
    // key IDs were recorded there.
    let legacy_id = pass
        .status
        .provisioner_key_id
        .clone()
        .filter(|_| annotated.is_none() && stored.is_some());
    let created_here = pass.memory().created_key == Some((org.clone(), names.key_name.clone()));
    if drifted {
        rotate_out(pass, coder, annotated.as_deref()).await;
    }
    let listed = coder.provisioner_keys(&org).await.map_err(|e| failed(pass, &e))?;
    let listed = listed
        .into_iter()
        .find(|k| k.name.eq_ignore_ascii_case(&names.key_name));
    pass.status.organization_id = Some(org.clone());
    pass.status.organization_name = Some(organization.name.clone());
    let listed_id = listed.as_ref().map(|k| k.id.to_string());
    let create_started_at = secret_annotation(live_secret, &pass.uid, desired::KEY_CREATE_STARTED_ANNOTATION);
    let proof = KeyProof {
        annotated_id: annotated.as_deref(),
        created_here,
        legacy_id: legacy_id.as_deref(),
        create_started_at: create_started_at.as_deref(),
    };
    let listed = listed_id
        .as_deref()
        .zip(listed.as_ref())
        .map(|(id, k)| ListedKey {
            id,
            name: &k.name,
            created_at: &k.created_at,
        });
    let plan = desired::key_plan(listed, proof, stored.is_some(), drifted);
    follow(
        pass,
        names,
        (plan, proof),
        stored,
        (coder, org.as_str(), live_secret),
    )
    .await
}

/// Carries out the key plan (decided with `proof`).
async fn follow(
    pass: &mut ProvisionerPass<'_>,
    names: &ProvisionerNames,
    (plan, proof): (KeyPlan, KeyProof<'_>),
    stored: Option<String>,
    (coder, org, live_secret): (&CoderClient, &str, Option<&Secret>),
) -> Result<String, Halt<Outcome>> {
    match (plan, stored) {
        (KeyPlan::NotOwned { name }, _) => Err(pass.stop(decide::key_not_owned(&name))),
        (KeyPlan::Unproven { name }, _) => Err(pass.stop(decide::key_unproven(&name))),
        (KeyPlan::Reuse { key_id }, Some(stored)) => {
            if proof.annotated_id != Some(key_id.as_str()) {
                // Created by this process or under the Secret's create marker, and an earlier pass stopped before
                // the Secret recorded the key's ID (a legacy key is reused as it is, without a record).
                let recorded = (stored.as_str(), None, Some(key_id.clone()));
                write_key_secret(pass, names, recorded, live_secret).await?;
            }
            pass.status.provisioner_key_id = Some(key_id);
            Ok(stored)
        }
        (KeyPlan::Replace { old_name }, _) => {
            coder
                .delete_provisioner_key(org, &old_name)
                .await
                .map_err(|e| failed(pass, &e))?;
            create_key(pass, coder, org, names, live_secret).await
        }
        (KeyPlan::Create | KeyPlan::Reuse { .. }, _) => {
            create_key(pass, coder, org, names, live_secret).await
        }
    }
}

/// Spec drift: the key the key Secret records is deleted (best effort: a failure leaves it valid in Coder, and says
/// so). A key only the status names is not deleted.
async fn rotate_out(pass: &mut ProvisionerPass<'_>, coder: &CoderClient, annotated: Option<&str>) {
    let p = pass.object;
    tracing::info!(name = %p.name_any(), namespace = ?p.namespace(), "{DRIFT_LOG}");
    match desired::key_cleanup(&pass.status, annotated) {
        KeyCleanup::Nothing => {}
        KeyCleanup::Unproven => unproven_key_stays(p, &pass.status),
        KeyCleanup::Delete {
            organization_id,
            key_id,
        } => {
            if let Err(error) = delete_proven_key(coder, organization_id, key_id).await {
                tracing::warn!(name = %p.name_any(), %error, "deleting the old provisioner key failed; it stays valid in Coder");
            }
        }
    }
    pass.status.provisioner_key_id = None;
}

/// The key ID recorded on the key Secret, when this provisioner controls that Secret.
pub fn annotated_key_id(secret: Option<&Secret>, uid: &str) -> Option<String> {
    secret_annotation(secret, uid, desired::KEY_ID_ANNOTATION)
}

/// A non-empty annotation of the key Secret, when this provisioner controls that Secret.
fn secret_annotation(secret: Option<&Secret>, uid: &str, annotation: &str) -> Option<String> {
    let secret = secret.filter(|s| controlled_by(&s.metadata, uid))?;
    secret
        .metadata
        .annotations
        .as_ref()?
        .get(annotation)
        .filter(|value| !value.is_empty())
        .cloned()
}

/// Logs that the key `status.provisionerKeyID` names is not deleted: nothing the operator wrote proves it is this
/// provisioner's.
pub fn unproven_key_stays(p: &CoderProvisioner, status: &CoderProvisionerStatus) {
    if status.provisioner_key_id.is_some() {
        tracing::warn!(name = %p.name_any(), namespace = ?p.namespace(), organization_id = ?status.organization_id,
            provisioner_key_id = ?status.provisioner_key_id,
            "the provisioner key status.provisionerKeyID names is not deleted: the key Secret records no key ID, so nothing proves the key is this provisioner's; it stays valid in Coder (delete it with `coder provisioner keys delete`)");
    }
}

/// Creates the key. The owned key Secret is written first, empty, with the create marker: a key Coder creates after
/// it is this provisioner's, so a create cut off before the key reached the Secret (a crash, a lost leader) is
/// replaced on the next pass instead of left in Coder. A key Secret someone else holds stops it before any Coder
/// call. Then the key goes into the Secret at once, and once its ID is listed the Secret records the ID instead of
/// the marker: the proof of ownership that outlives this process. Until then the process also remembers that it
/// created the key.
async fn create_key(
    pass: &mut ProvisionerPass<'_>,
    coder: &CoderClient,
    org: &str,
    names: &ProvisionerNames,
    live_secret: Option<&Secret>,
) -> Result<String, Halt<Outcome>> {
    let marker = Some(Timestamp::now().to_string());
    let Some(pending) = write_key_secret(pass, names, ("", marker.clone(), None), live_secret).await? else {
        return Err(pass.stop(decide::key_secret_taken(&names.key_secret)));
    };
    write_create_marker(pass, org, names).await?;
    let created = coder
        .create_provisioner_key(org, &names.key_name, &pass.object.spec.tags)
        .await
        .map_err(|e| failed(pass, &e))?;
    let created_key = (org.to_owned(), names.key_name.clone());
    pass.remember(|memory| memory.created_key = Some(created_key));
    let stored = write_key_secret(pass, names, (created.expose(), marker, None), Some(&pending))
        .await?
        .ok_or_else(|| pass.stop(decide::key_secret_taken(&names.key_secret)))?;
    let listed = coder.provisioner_keys(org).await.map_err(|e| failed(pass, &e))?;
    let key_id = listed
        .into_iter()
        .find(|k| k.name.eq_ignore_ascii_case(&names.key_name))
        .map(|k| k.id.to_string());
    if let Some(key_id) = key_id {
        // The Secret records which key it holds: the proof of ownership that outlives this process.
        let recorded = (created.expose(), None, Some(key_id.clone()));
        write_key_secret(pass, names, recorded, Some(&stored)).await?;
        pass.status.provisioner_key_id = Some(key_id);
        return Ok(created.expose().to_owned());
    }
    // The in-memory note stays until the status holding this ID is written (`settle`): if this pass fails before
    // that, the next one still knows the key is this provisioner's.
    pass.status.provisioner_key_id = None;
    Ok(created.expose().to_owned())
}

/// Records in the status, before the one create call, which key is about to be made and when (the Go operator's
/// fields). It proves nothing: anyone with status write access could write it. A key left by a crash before its
/// Secret was written is reported as not this provisioner's, never deleted.
async fn write_create_marker(
    pass: &mut ProvisionerPass<'_>,
    org: &str,
    names: &ProvisionerNames,
) -> Result<(), kube::Error> {
    pass.status.organization_id = Some(org.to_owned());
    pass.status.provisioner_key_name = Some(names.key_name.clone());
    pass.status.provisioner_key_id = None;
    pass.status.key_create_started_at = Some(Time(Timestamp::now()));
    status_writer::write(pass, Vec::new()).await.map(|_| ())
}

fn record_key(pass: &mut ProvisionerPass<'_>, inputs: &KeyInputs, names: &ProvisionerNames) {
    let status = &mut pass.status;
    if status.provisioner_key_id.is_some() {
        status.key_create_started_at = None;
    }
    status.provisioner_key_name = Some(inputs.key_name.clone());
    status.tags_hash = Some(inputs.tags_hash.clone());
    status.control_plane_ref_name = Some(inputs.control_plane.clone());
    status.control_plane_url = Some(inputs.control_plane_url.clone());
    status.secret_ref = Some(SecretKeySelector {
        name: names.key_secret.clone(),
        key: Some(names.key_secret_key.clone()),
    });
    pass.set_all(decide::key_ready(&names.key_secret));
}

/// Deletes the key with `key_id` (the one the key Secret records), found by its ID in the organization the status
/// recorded (never by spec names).
pub async fn delete_proven_key(coder: &CoderClient, org: &str, key_id: &str) -> Result<(), CoderError> {
    let keys = coder.provisioner_keys(org).await?;
    match keys.into_iter().find(|k| k.id.to_string() == key_id) {
        Some(key) => match coder.delete_provisioner_key(org, &key.name).await {
            Ok(()) | Err(CoderError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        },
        None => Ok(()),
    }
}

/// Writes the key (empty before the create), the create marker and the key's ID in Coder into the owned key Secret;
/// `None` when the name is taken by a Secret this provisioner does not control (nothing is written). An annotation
/// given as `None` that the live Secret carries is emptied (the Secret keeps others' annotations, and an empty one
/// proves nothing), so the marker and a stale ID never outlive their step.
async fn write_key_secret(
    pass: &ProvisionerPass<'_>,
    names: &ProvisionerNames,
    (key, marker, key_id): (&str, Option<String>, Option<String>),
    live: Option<&Secret>,
) -> Result<Option<Secret>, Error> {
    let mut annotations = std::collections::BTreeMap::new();
    let step = [
        (desired::KEY_CREATE_STARTED_ANNOTATION, marker),
        (desired::KEY_ID_ANNOTATION, key_id),
    ];
    step_annotations(&mut annotations, live, step);
    let secret = OwnedSecret {
        name: &names.key_secret,
        labels: desired::labels(&pass.name()),
        annotations,
        key: &names.key_secret_key,
        value: key.as_bytes(),
    };
    secret.store(pass.ctx, pass.object, live).await
}
