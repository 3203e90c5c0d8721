//! What a CoderProvisioner pass reads (docs/controllers/provisioner.md): the control plane and its operator token
//! (`ControlPlaneReady`, `OperatorAccessReady`), the entitlement (the control plane's recorded value when fresh,
//! else the last read shared by every user of the control plane, else Coder), the consent of the credential Secrets
//! and the key Secret's ownership (cached metadata), and what earlier passes remember.

use std::time::Duration;

use coder_k8s_api::control_plane::Entitlement;
use coder_k8s_api::provisioner::{CoderProvisioner, reasons};
use k8s_openapi::jiff::Timestamp;

use super::autoscale::Scaled;
use super::coder;
use super::desired::ProvisionerNames;
use super::status::{self as decide, Outcome};
use crate::credentials;
use crate::halt::Halt;
use crate::ownership::controlled_by;
use crate::pass::Pass;
use crate::refusal::Refusal;
use crate::upstream::{Unreachable, Upstream, operator_client};

type ProvisionerPass<'p> = Pass<'p, CoderProvisioner>;

/// How fresh the control plane's recorded entitlement must be to be used instead of a query.
const ENTITLEMENT_FRESHNESS: Duration = Duration::from_secs(120);

/// What a pass remembers of an object for the next ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// The spec's organization and the organization ID Coder resolved it to (`default` is an alias).
    pub resolved_organization: Option<(String, String)>,
    /// The organization ID and name of a key this operator created whose ID it could not learn yet.
    pub created_key: Option<(String, String)>,
    /// `spec.autoscaling`: the replicas last set from the queue, and since when the queue has asked for fewer.
    pub autoscaled: Option<Scaled>,
}

/// Control-plane access: sets `ControlPlaneReady` and `OperatorAccessReady`; a refusal stops the pass.
pub async fn upstream(pass: &mut ProvisionerPass<'_>) -> Result<Upstream, Halt<Outcome>> {
    let cp_name = pass.object.spec.control_plane_ref.name.clone();
    let refusal = match operator_client(pass.ctx, &pass.namespace(), &cp_name).await {
        Ok(upstream) => {
            pass.set_all(decide::access_ready(&cp_name));
            return Ok(upstream);
        }
        Err(Unreachable::Failed(error)) => return Err(Halt::Failed(error)),
        Err(Unreachable::Refused(refusal)) => refusal,
    };
    pass.set_all(match refusal {
        Refusal::TokenSecretNotOwned { secret } => decide::token_secret_not_owned(&cp_name, &secret),
        Refusal::Access(error) => decide::access_refused(&cp_name, &error),
    });
    Err(Halt::Settled(Outcome::after(pass.retry())))
}

/// The entitlement gate (`ExternalProvisionersEntitled`): the control plane's recorded value when fresh, else the
/// last read shared by every user of the control plane within the entitlements interval, else
/// `GET /api/v2/entitlements`. Not entitled: the pass stops (see [`decide::after_entitlement`] for when the next
/// one comes).
pub async fn entitled(pass: &mut ProvisionerPass<'_>, upstream: &Upstream) -> Result<(), Halt<Outcome>> {
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
        None => coder::read_entitlement(pass.ctx, upstream).await,
    };
    let outcome = outcome.as_ref().map(|e| *e);
    pass.set(decide::entitlement_condition(outcome));
    let recorded = cp_status.external_provisioner_daemons_entitlement;
    match decide::after_entitlement(outcome, recorded, pass.ctx.settings.entitlements_interval) {
        None => Ok(()),
        Some(next) => Err(Halt::Settled(next)),
    }
}

/// The credential-Secret rule for every `secretKeyRef` in `spec.extraEnv`, plus the key Secret's ownership (all
/// from cached metadata): `CredentialsReady`. A refusal stops the pass; the Deployment is not changed.
pub fn credentials_ready(
    pass: &mut ProvisionerPass<'_>,
    names: &ProvisionerNames,
    pod_url: &str,
) -> Result<(), Halt<Outcome>> {
    let namespace = pass.namespace();
    let origin = credentials::origin_of(pod_url).unwrap_or_default();
    let cache = pass.ctx.k8s.caches.secrets.metadata();
    let refusal = match cache.meta(&namespace, &names.key_secret) {
        Some(key_secret) if !controlled_by(&key_secret, &pass.uid) => Some((
            reasons::KEY_SECRET_NOT_OWNED,
            format!(
                "Secret {:?} exists and this provisioner does not own it; name a Secret that does not exist in spec.key.secretName",
                names.key_secret
            ),
        )),
        _ => spec_secret_refs(&pass.object.spec).into_iter().find_map(|name| {
            let reason = credentials::refusal(cache.meta(&namespace, &name).as_ref(), &origin)?;
            Some((reason, credentials::refusal_message(&name, reason, &origin)))
        }),
    };
    let refused = refusal.is_some();
    let condition = decide::credentials_condition(refusal);
    if refused {
        return Err(pass.stop(condition));
    }
    pass.set(condition);
    Ok(())
}

/// Every Secret the spec hands to the daemons' pods (see [`credentials::pod_secret_refs`]).
pub fn spec_secret_refs(spec: &coder_k8s_api::provisioner::CoderProvisionerSpec) -> Vec<String> {
    credentials::pod_secret_refs(&spec.extra_env, spec.workload.get(), spec.pod.get())
}
