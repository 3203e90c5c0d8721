//! The CoderProvisioner reconcile (docs/controllers/provisioner.md): dereference the control plane and its operator
//! token (control-plane access) → validate the entitlement and the credential Secrets → the provisioner key (from
//! the pure key plan) → build and apply the ServiceAccount, Role, RoleBinding and Deployment → status. A provisioner
//! whose recorded key still matches its inputs and whose key Secret holds the key makes no Coder call.

use std::sync::Arc;
use std::time::Duration;

use coder_k8s_api::control_plane::Entitlement;
use coder_k8s_api::provisioner::{CoderProvisioner, CoderProvisionerStatus, reasons};
use coder_k8s_api::shared::{SecretKeySelector, WorkloadPhase};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::desired::{self, Inputs};
use super::names::{self, ProvisionerNames, tags_hash};
use super::status::{self as decide, KeyInputs, KeyPlan, KeyProof};
use crate::controller::apply::{apply_deployment, apply_owned, controlled_by, report_ownership};
use crate::controller::conditions::Draft;
use crate::controller::context::Context;
use crate::controller::credentials;
use crate::controller::error::{Error, Result};
use crate::controller::owned_secret::{self, OwnedSecret, Written};
use crate::controller::runner::Cleanup;
use crate::controller::secrets;
use crate::controller::status_writer::write_status;
use crate::controller::upstream::{Refusal, Upstream, operator_client};

/// Log line when the key's inputs changed (v0.1.5 text).
pub const DRIFT_LOG: &str = "spec drift detected, rotating provisioner key";
/// How fresh the control plane's recorded entitlement must be to be used instead of a query.
const ENTITLEMENT_FRESHNESS: Duration = Duration::from_secs(120);

/// The status being built by one reconcile.
type Run = Draft<CoderProvisionerStatus>;

/// Facts kept per provisioner between reconciles.
mod facts {
    /// The spec's organization and the organization ID Coder resolved it to (`default` is an alias).
    pub const RESOLVED_ORGANIZATION: &str = "resolved-organization";
    /// `<organization ID> <key name>` of a key this operator created whose ID it could not learn yet.
    pub const CREATED_KEY: &str = "created-key";
}

/// One reconcile of a live provisioner.
pub async fn apply_spec(provisioner: Arc<CoderProvisioner>, ctx: Arc<Context>) -> Result<Action> {
    let (p, ctx) = (provisioner.as_ref(), ctx.as_ref());
    let uid = p.metadata.uid.clone().ok_or(Error::MissingMetadata)?;
    let names = names::names(&p.name_any(), &p.spec);
    let mut run = Run {
        // The status this provisioner really has, even when the cache has not caught up with the last write.
        status: ctx
            .statuses
            .effective(&uid, p.status.as_ref())
            .unwrap_or_default(),
        generation: p.metadata.generation,
        now: Time(Timestamp::now()),
    };
    run.status.phase = Some(decide::phase_before_gates(run.status.phase));
    let retry = ctx.settings.retry_interval;
    let Some(upstream) = upstream(p, ctx, &mut run).await? else {
        return finish(p, ctx, run, retry).await;
    };
    if !entitled(ctx, &upstream, &mut run).await {
        return finish(p, ctx, run, ctx.settings.entitlements_interval).await;
    }
    if !credentials_ready(p, ctx, &names, &upstream.target.pod_url, &mut run).await? {
        // The Deployment is not changed while a credential is refused.
        return finish(p, ctx, run, retry).await;
    }
    let key = match provisioner_key(p, ctx, &uid, &upstream, &names, &mut run).await? {
        Ok(key) => key,
        Err(requeue) => return finish(p, ctx, run, requeue).await,
    };
    let ready = apply_objects(p, ctx, &upstream, &key, &mut run).await?;
    run.status.ready_replicas = Some(ready);
    run.set(crate::controller::conditions::deployment_ready(
        ready,
        "the provisioner Deployment",
    ));
    run.status.phase = Some(if ready > 0 {
        WorkloadPhase::Ready
    } else {
        WorkloadPhase::Pending
    });
    let requeue = if ready > 0 {
        ctx.settings.entitlements_interval
    } else {
        retry
    };
    finish(p, ctx, run, requeue).await
}

/// Control-plane access: sets `ControlPlaneReady` and `OperatorAccessReady`; `None` when not usable.
async fn upstream(p: &CoderProvisioner, ctx: &Context, run: &mut Run) -> Result<Option<Upstream>> {
    let namespace = p.namespace().unwrap_or_default();
    let cp_name = p.spec.control_plane_ref.name.as_str();
    match operator_client(ctx, &namespace, cp_name).await? {
        Ok(upstream) => {
            run.set_all(decide::access_ready(cp_name));
            Ok(Some(upstream))
        }
        Err(Refusal::TokenSecretNotOwned { secret }) => {
            run.set_all(decide::token_secret_not_owned(cp_name, &secret));
            Ok(None)
        }
        Err(Refusal::Access(error)) => {
            run.set_all(decide::access_refused(cp_name, &error));
            Ok(None)
        }
    }
}

/// The entitlement gate: the control plane's recorded value when fresh, else the last read shared by every user of
/// the control plane within the entitlements interval, else `GET /api/v2/entitlements`.
async fn entitled(ctx: &Context, upstream: &Upstream, run: &mut Run) -> bool {
    let cp_status = upstream.control_plane.status.clone().unwrap_or_default();
    let fresh = cp_status
        .entitlements_last_checked
        .as_ref()
        .and_then(|t| Duration::try_from(Timestamp::now().duration_since(t.0)).ok())
        .is_some_and(|age| age < ENTITLEMENT_FRESHNESS);
    // `unknown` (for example a Coder without an entitlements API) is no answer: Coder is asked, and says why.
    let recorded = cp_status
        .external_provisioner_daemons_entitlement
        .filter(|value| fresh && *value != Entitlement::Unknown);
    let outcome = match recorded {
        Some(value) => Ok(matches!(value, Entitlement::Entitled | Entitlement::GracePeriod)),
        None => read_entitlement(ctx, upstream).await,
    };
    let condition = decide::entitlement_condition(outcome.as_ref().map(|e| *e));
    let entitled = condition.status == crate::controller::conditions::ConditionStatus::True;
    run.set(condition);
    entitled
}

async fn read_entitlement(ctx: &Context, upstream: &Upstream) -> std::result::Result<bool, CoderError> {
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

/// The credential-Secret rule for every `secretKeyRef` in `spec.extraEnv`, plus the key Secret's ownership (all
/// from cached metadata).
async fn credentials_ready(
    p: &CoderProvisioner,
    ctx: &Context,
    names: &ProvisionerNames,
    pod_url: &str,
    run: &mut Run,
) -> Result<bool> {
    let namespace = p.namespace().unwrap_or_default();
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let origin = credentials::origin_of(pod_url).unwrap_or_default();
    let cache = ctx.caches.secrets.metadata();
    let refusal = match cache.meta(&namespace, &names.key_secret) {
        Some(key_secret) if !controlled_by(&key_secret, &uid) => Some((
            reasons::KEY_SECRET_NOT_OWNED,
            format!(
                "Secret {:?} exists and this provisioner does not own it; name a Secret that does not exist in spec.key.secretName",
                names.key_secret
            ),
        )),
        _ => credentials::secret_refs(&p.spec.extra_env)
            .into_iter()
            .find_map(|name| {
                let reason = credentials::refusal(cache.meta(&namespace, &name).as_ref(), &origin)?;
                Some((reason, credentials::refusal_message(&name, reason, &origin)))
            }),
    };
    let condition = decide::credentials_condition(refusal);
    let ready = condition.status == crate::controller::conditions::ConditionStatus::True;
    run.set(condition);
    Ok(ready)
}

/// The provisioner key: `Ok(key)` when it is in Coder and in its Secret, `Err(requeue)` when a Coder call failed
/// (the condition says why).
async fn provisioner_key(
    p: &CoderProvisioner,
    ctx: &Context,
    uid: &str,
    upstream: &Upstream,
    names: &ProvisionerNames,
    run: &mut Run,
) -> Result<std::result::Result<String, Duration>> {
    // After a 429 the object waits out its backoff, even when a watch event wakes it early.
    if let Some(remaining) = ctx.rate_limit_remaining(uid) {
        return Ok(Err(remaining));
    }
    let namespace = p.namespace().unwrap_or_default();
    let secret = ctx
        .caches
        .secrets
        .get(&ctx.client, &namespace, &names.key_secret)
        .await?;
    let stored = secrets::value(secret.as_deref(), &names.key_secret_key).filter(|k| !k.is_empty());
    let inputs = KeyInputs {
        organization_name: names::organization_name(&p.spec).to_owned(),
        key_name: names.key_name.clone(),
        tags_hash: tags_hash(&p.spec.tags),
        control_plane: p.spec.control_plane_ref.name.clone(),
        control_plane_url: upstream.target.pod_url.clone(),
    };
    let resolved = ctx.fact(uid, facts::RESOLVED_ORGANIZATION);
    let key = match stored {
        Some(key)
            if decide::key_current(
                &run.status,
                &inputs,
                resolved.as_deref().and_then(decide::parse_resolved),
            ) =>
        {
            key
        }
        stored => match key_in_coder(
            p,
            ctx,
            uid,
            upstream,
            names,
            &inputs,
            (stored, secret.as_deref()),
            run,
        )
        .await?
        {
            Ok(key) => key,
            Err(requeue) => return Ok(Err(requeue)),
        },
    };
    ctx.rate_limit_passed(uid);
    record_key(run, &inputs, names);
    if let Some(organization_id) = run.status.organization_id.as_deref() {
        let fact = decide::resolved_fact(&inputs.organization_name, organization_id);
        ctx.set_fact(uid, facts::RESOLVED_ORGANIZATION, Some(fact));
    }
    Ok(Ok(key))
}

/// Why the Coder half of the key stopped: a Coder answer (a condition and a requeue), a key or key Secret of this
/// name that is someone else's (a condition), or a Kubernetes error.
enum KeyError {
    Coder(CoderError),
    NotOwned(crate::controller::conditions::Decided),
    Kube(Error),
}

impl From<CoderError> for KeyError {
    fn from(error: CoderError) -> Self {
        Self::Coder(error)
    }
}

impl From<Error> for KeyError {
    fn from(error: Error) -> Self {
        Self::Kube(error)
    }
}

/// The Coder half of the key: organization, drift, the key plan and its calls. `Err(requeue)` after a failed Coder
/// call (the condition says why).
#[allow(clippy::too_many_arguments)]
async fn key_in_coder(
    p: &CoderProvisioner,
    ctx: &Context,
    uid: &str,
    upstream: &Upstream,
    names: &ProvisionerNames,
    inputs: &KeyInputs,
    stored: (Option<String>, Option<&Secret>),
    run: &mut Run,
) -> Result<std::result::Result<String, Duration>> {
    match plan_and_apply_key(p, ctx, &upstream.coder, names, inputs, stored, run).await {
        Ok(key) => Ok(Ok(key)),
        Err(KeyError::Kube(error)) => Err(error),
        Err(KeyError::NotOwned(condition)) => {
            run.set(condition);
            Ok(Err(ctx.settings.retry_interval))
        }
        Err(KeyError::Coder(error)) => {
            run.set(decide::key_failed(&error));
            Ok(Err(backoff_for(ctx, uid, &error, ctx.settings.retry_interval)))
        }
    }
}

async fn plan_and_apply_key(
    p: &CoderProvisioner,
    ctx: &Context,
    coder: &CoderClient,
    names: &ProvisionerNames,
    inputs: &KeyInputs,
    (stored, live_secret): (Option<String>, Option<&Secret>),
    run: &mut Run,
) -> std::result::Result<String, KeyError> {
    let organization = coder.organization(&inputs.organization_name).await?;
    let org = organization.id.to_string();
    let drifted = decide::drifted(&run.status, &org, inputs);
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let annotated = annotated_key_id(live_secret, &uid);
    // The key the status names, before a rotation forgets it: usable as it is only with a key Secret from before
    // key IDs were recorded there.
    let legacy_id = run
        .status
        .provisioner_key_id
        .clone()
        .filter(|_| annotated.is_none() && stored.is_some());
    let created_here = ctx.fact(&uid, facts::CREATED_KEY) == Some(created_fact(&org, &names.key_name));
    if drifted {
        rotate_out(p, coder, run, annotated.as_deref()).await;
    }
    let listed = coder
        .provisioner_keys(&org)
        .await?
        .into_iter()
        .find(|k| k.name.eq_ignore_ascii_case(&names.key_name));
    run.status.organization_id = Some(org.clone());
    run.status.organization_name = Some(organization.name.clone());
    let listed_id = listed.as_ref().map(|k| k.id.to_string());
    let proof = KeyProof {
        annotated_id: annotated.as_deref(),
        created_here,
        legacy_id: legacy_id.as_deref(),
    };
    let plan = decide::key_plan(
        listed_id
            .as_deref()
            .zip(listed.as_ref())
            .map(|(id, k)| decide::ListedKey { id, name: &k.name }),
        proof,
        stored.is_some(),
        drifted,
    );
    match (plan, stored) {
        (KeyPlan::NotOwned { name }, _) => Err(KeyError::NotOwned(decide::key_not_owned(&name))),
        (KeyPlan::Unproven { name }, _) => Err(KeyError::NotOwned(decide::key_unproven(&name))),
        (KeyPlan::Reuse { key_id }, Some(stored)) => {
            if created_here && annotated.as_deref() != Some(key_id.as_str()) {
                // Created by this process, whose earlier pass stopped before the Secret recorded the key's ID.
                write_key_secret(p, ctx, names, (&stored, Some(&key_id)), live_secret).await?;
            }
            run.status.provisioner_key_id = Some(key_id);
            Ok(stored)
        }
        (KeyPlan::Replace { old_name }, _) => {
            coder.delete_provisioner_key(&org, &old_name).await?;
            create_key(p, ctx, coder, &org, names, live_secret, run).await
        }
        (KeyPlan::Create | KeyPlan::Reuse { .. }, _) => {
            create_key(p, ctx, coder, &org, names, live_secret, run).await
        }
    }
}

/// The fact kept when a key was created but its ID is not known yet.
fn created_fact(org: &str, key_name: &str) -> String {
    format!("{org} {key_name}")
}

/// Spec drift: the key the key Secret records is deleted (best effort: a failure leaves it valid in Coder, and says
/// so). A key only the status names is not deleted.
async fn rotate_out(p: &CoderProvisioner, coder: &CoderClient, run: &mut Run, annotated: Option<&str>) {
    tracing::info!(name = %p.name_any(), namespace = ?p.namespace(), "{DRIFT_LOG}");
    match annotated {
        Some(key_id) => {
            if let Err(error) = delete_proven_key(coder, &run.status, key_id).await {
                tracing::warn!(name = %p.name_any(), %error, "deleting the old provisioner key failed; it stays valid in Coder");
            }
        }
        None => unproven_key_stays(p, &run.status),
    }
    run.status.provisioner_key_id = None;
}

/// The key ID recorded on the key Secret, when this provisioner controls that Secret.
fn annotated_key_id(secret: Option<&Secret>, uid: &str) -> Option<String> {
    let secret = secret.filter(|s| controlled_by(&s.metadata, uid))?;
    secret
        .metadata
        .annotations
        .as_ref()?
        .get(names::KEY_ID_ANNOTATION)
        .filter(|id| !id.is_empty())
        .cloned()
}

/// Logs that the key `status.provisionerKeyID` names is not deleted: nothing the operator wrote proves it is this
/// provisioner's.
fn unproven_key_stays(p: &CoderProvisioner, status: &CoderProvisionerStatus) {
    if status.provisioner_key_id.is_some() {
        tracing::warn!(name = %p.name_any(), namespace = ?p.namespace(), organization_id = ?status.organization_id,
            provisioner_key_id = ?status.provisioner_key_id,
            "the provisioner key status.provisionerKeyID names is not deleted: the key Secret records no key ID, so nothing proves the key is this provisioner's; it stays valid in Coder (delete it with `coder provisioner keys delete`)");
    }
}

/// Creates the key, writes its Secret first (a key in Coder without its Secret is replaced on the next pass of this
/// process), then records its ID on the Secret and in the status: the Secret's record is the proof that the key is
/// this provisioner's. Until the ID is known, the operator process remembers that it created the key. A key Secret
/// someone created in the meantime is left alone and the new key deleted again.
#[allow(clippy::too_many_arguments)]
async fn create_key(
    p: &CoderProvisioner,
    ctx: &Context,
    coder: &CoderClient,
    org: &str,
    names: &ProvisionerNames,
    live_secret: Option<&Secret>,
    run: &mut Run,
) -> std::result::Result<String, KeyError> {
    write_create_marker(p, ctx, org, names, run).await?;
    let created = coder
        .create_provisioner_key(org, &names.key_name, &p.spec.tags)
        .await?;
    let uid = p.metadata.uid.clone().unwrap_or_default();
    ctx.set_fact(&uid, facts::CREATED_KEY, Some(created_fact(org, &names.key_name)));
    let Some(stored) = write_key_secret(p, ctx, names, (created.expose(), None), live_secret).await? else {
        if let Err(error) = coder.delete_provisioner_key(org, &names.key_name).await {
            tracing::warn!(name = %p.name_any(), %error, "deleting the provisioner key just created failed; it stays valid in Coder");
        }
        ctx.set_fact(&uid, facts::CREATED_KEY, None);
        return Err(KeyError::NotOwned(decide::key_secret_taken(&names.key_secret)));
    };
    let listed = coder.provisioner_keys(org).await?;
    let listed = listed
        .into_iter()
        .find(|k| k.name.eq_ignore_ascii_case(&names.key_name));
    let key_id = listed.map(|k| k.id.to_string());
    if let Some(key_id) = key_id.as_deref() {
        // The Secret records which key it holds: the proof of ownership that outlives this process.
        write_key_secret(p, ctx, names, (created.expose(), Some(key_id)), Some(&stored)).await?;
    }
    // The in-memory note stays until the status holding this ID is written (`finish`): if this pass fails before
    // that, the next one still knows the key is this provisioner's.
    run.status.provisioner_key_id = key_id;
    Ok(created.expose().to_owned())
}

/// Records in the status, before the one create call, which key is about to be made and when (the Go operator's
/// fields). It proves nothing: anyone with status write access could write it. A key left by a crash before its
/// Secret was written is reported as not this provisioner's, never deleted.
async fn write_create_marker(
    p: &CoderProvisioner,
    ctx: &Context,
    org: &str,
    names: &ProvisionerNames,
    run: &mut Run,
) -> std::result::Result<(), KeyError> {
    run.status.organization_id = Some(org.to_owned());
    run.status.provisioner_key_name = Some(names.key_name.clone());
    run.status.provisioner_key_id = None;
    run.status.key_create_started_at = Some(Time(Timestamp::now()));
    let current = ctx
        .statuses
        .effective(&p.metadata.uid.clone().unwrap_or_default(), p.status.as_ref());
    write_status(ctx, p, current.as_ref(), &run.status, Vec::new())
        .await
        .map_err(|error| KeyError::Kube(error.into()))?;
    Ok(())
}

fn record_key(run: &mut Run, inputs: &KeyInputs, names: &ProvisionerNames) {
    let status = &mut run.status;
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
    run.set_all(decide::key_ready(&names.key_secret));
}

/// Deletes the key with `key_id` (the one the key Secret records), found in the organization `status` recorded by
/// its ID (never by spec names).
async fn delete_proven_key(
    coder: &CoderClient,
    status: &CoderProvisionerStatus,
    key_id: &str,
) -> std::result::Result<(), CoderError> {
    let Some(org) = &status.organization_id else {
        return Ok(());
    };
    let keys = coder.provisioner_keys(org).await?;
    match keys.into_iter().find(|k| k.id.to_string() == key_id) {
        Some(key) => match coder.delete_provisioner_key(org, &key.name).await {
            Ok(()) | Err(CoderError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        },
        None => Ok(()),
    }
}

/// Writes the key (and, once known, its ID in Coder) into the owned key Secret; `None` when the name is taken by a
/// Secret this provisioner does not control (nothing is written).
async fn write_key_secret(
    p: &CoderProvisioner,
    ctx: &Context,
    names: &ProvisionerNames,
    (key, key_id): (&str, Option<&str>),
    live: Option<&Secret>,
) -> Result<Option<Secret>> {
    let secret = OwnedSecret {
        name: &names.key_secret,
        labels: names::labels(&p.name_any()),
        annotations: key_id
            .map(|id| (names::KEY_ID_ANNOTATION.to_owned(), id.to_owned()))
            .into_iter()
            .collect(),
        key: &names.key_secret_key,
        value: key.as_bytes(),
    }
    .build(p)
    .ok_or(Error::MissingMetadata)?;
    match owned_secret::write(ctx, secret, live).await? {
        Written::Stored(stored) => {
            ctx.caches.secrets.wrote((*stored).clone());
            Ok(Some(*stored))
        }
        Written::Foreign => Ok(None),
    }
}

/// Applies the ServiceAccount, Role, RoleBinding and Deployment, except those of the same names the provisioner
/// does not control (`ResourcesOwned`); returns the Deployment's ready replicas.
async fn apply_objects(
    p: &CoderProvisioner,
    ctx: &Context,
    upstream: &Upstream,
    key: &str,
    run: &mut Run,
) -> Result<i32> {
    let namespace = p.namespace().unwrap_or_default();
    let inputs = Inputs {
        control_plane_url: upstream.target.pod_url.clone(),
        control_plane_image: Some(upstream.control_plane.spec.image.clone()),
        key_checksum: names::key_checksum(key),
    };
    let desired = desired::desired_state(p, &inputs).ok_or(Error::MissingMetadata)?;
    let caches = &ctx.caches;
    let sa = caches
        .service_accounts
        .meta(&namespace, &desired.service_account.name_any());
    let mut not_owned = Vec::new();
    not_owned.extend(
        apply_owned(ctx, desired.service_account, sa.as_ref())
            .await?
            .err(),
    );
    let role = caches.roles.meta(&namespace, &desired.role.name_any());
    not_owned.extend(apply_owned(ctx, desired.role, role.as_ref()).await?.err());
    let binding = caches
        .role_bindings
        .meta(&namespace, &desired.role_binding.name_any());
    not_owned.extend(
        apply_owned(ctx, desired.role_binding, binding.as_ref())
            .await?
            .err(),
    );
    let ready = match apply_deployment(ctx, desired.deployment).await? {
        Ok(ready) => ready,
        Err(foreign) => {
            not_owned.push(foreign);
            0
        }
    };
    report_ownership(run, &not_owned);
    Ok(ready)
}

/// The requeue after a failed Coder call: the per-object rate-limit backoff after a 429, else `retry`.
fn backoff_for(ctx: &Context, uid: &str, error: &CoderError, retry: Duration) -> Duration {
    match error {
        CoderError::RateLimited { retry_after, .. } => ctx.rate_limited(uid, *retry_after),
        _ => retry,
    }
}

/// Writes the status when it changed and requeues.
async fn finish(p: &CoderProvisioner, ctx: &Context, mut run: Run, requeue: Duration) -> Result<Action> {
    run.status.observed_generation = p.metadata.generation;
    // Compared with what this provisioner really has: a pass that wrote the create marker has already changed it,
    // and the status memo must chain this write to that one, or a wake-up before the cache catches up would start
    // from the marker alone and write the rate-limit condition away.
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let current = ctx.statuses.effective(&uid, p.status.as_ref());
    write_status(ctx, p, current.as_ref(), &run.status, Vec::new()).await?;
    if run.status.provisioner_key_id.is_some() {
        // The recorded ID is now the proof of ownership; the note of a key created here is no longer needed (the
        // status marker was cleared in this write, see `record_key`).
        ctx.set_fact(&uid, facts::CREATED_KEY, None);
    }
    Ok(Action::requeue(requeue))
}

/// Best-effort key deletion (v0.1.5): by the recorded organization and the key ID the key Secret records (the
/// status's ID alone proves nothing); no Coder call without them; the finalizer is always released in the end, and a
/// failure or a key left in Coder is logged with the fact that the key stays valid. Retryable answers are retried
/// within the cleanup window.
pub async fn cleanup(provisioner: Arc<CoderProvisioner>, ctx: Arc<Context>) -> Result<Cleanup> {
    let (p, ctx) = (provisioner.as_ref(), ctx.as_ref());
    let status = p.status.clone().unwrap_or_default();
    if status.provisioner_key_id.is_none() || status.organization_id.is_none() {
        return Ok(Cleanup::Done);
    }
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let names = names::names(&p.name_any(), &p.spec);
    let namespace = p.namespace().unwrap_or_default();
    let secret = ctx
        .caches
        .secrets
        .get(&ctx.client, &namespace, &names.key_secret)
        .await?;
    let Some(key_id) = annotated_key_id(secret.as_deref(), &uid) else {
        unproven_key_stays(p, &status);
        return Ok(Cleanup::Done);
    };
    let mut scratch = Run::new(CoderProvisionerStatus::default(), None);
    let failure = match upstream(p, ctx, &mut scratch).await {
        Ok(Some(upstream)) => match delete_proven_key(&upstream.coder, &status, &key_id).await {
            Ok(()) => None,
            Err(error) if error.is_retryable() && deleting_for(p) < ctx.settings.cleanup_retry_window => {
                // Only Coder's own 404 proves the key is gone; a proxy's 404 or an outage is retried for a while.
                tracing::info!(name = %p.name_any(), %error, "retrying the provisioner key delete");
                return Ok(Cleanup::WaitFor(backoff_for(
                    ctx,
                    &uid,
                    &error,
                    Duration::from_secs(2),
                )));
            }
            Err(error) => Some(error.to_string()),
        },
        Ok(None) => Some("the control plane or its operator token is not available".to_owned()),
        Err(error) => Some(error.to_string()),
    };
    if let Some(reason) = failure {
        tracing::warn!(
            name = %p.name_any(),
            namespace = ?p.namespace(),
            organization_id = ?status.organization_id,
            provisioner_key_id = ?status.provisioner_key_id,
            %reason,
            "could not delete the provisioner key in Coder; releasing the finalizer anyway, and the key stays valid in Coder (delete it with `coder provisioner keys delete`)"
        );
    }
    Ok(Cleanup::Done)
}

fn deleting_for(p: &CoderProvisioner) -> Duration {
    p.metadata
        .deletion_timestamp
        .as_ref()
        .and_then(|t| Duration::try_from(Timestamp::now().duration_since(t.0)).ok())
        .unwrap_or_default()
}
