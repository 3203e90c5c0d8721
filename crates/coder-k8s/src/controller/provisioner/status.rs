//! Pure decisions behind the CoderProvisioner conditions and its provisioner key (docs/controllers/provisioner.md):
//! control-plane access, the entitlement gate, credentials, the key plan (reuse, create, rotate, replace) and the
//! Deployment's readiness.

use coder_k8s_api::provisioner::{CoderProvisionerStatus, conditions, reasons};
use coder_k8s_api::shared::WorkloadPhase;
use coder_k8s_coder_client::Error as CoderError;
use coder_k8s_control_plane_access::AccessError;

use crate::controller::conditions::{ConditionStatus, Decided};
use crate::controller::credentials;

/// The phase a pass starts from: the last one, so that a failed gate keeps it (as the Go operator did); `Pending`
/// for a provisioner that never had one. Only a pass that applies the Deployment sets it anew.
pub fn phase_before_gates(last: Option<WorkloadPhase>) -> WorkloadPhase {
    last.unwrap_or(WorkloadPhase::Pending)
}

/// `ControlPlaneReady` and `OperatorAccessReady` for an access failure.
pub fn access_refused(control_plane: &str, error: &AccessError) -> Vec<Decided> {
    if error.is_control_plane_missing() {
        return vec![Decided::new(
            conditions::CONTROL_PLANE_READY,
            ConditionStatus::False,
            reasons::CONTROL_PLANE_UNAVAILABLE,
            error.message(),
        )];
    }
    let reason = match error {
        AccessError::TokenSecretRefMissing { .. } => reasons::OPERATOR_TOKEN_SECRET_REF_MISSING,
        AccessError::AccessNotReady { .. } => reasons::OPERATOR_ACCESS_NOT_READY,
        AccessError::TokenSecretUnavailable { .. } => reasons::OPERATOR_TOKEN_SECRET_UNAVAILABLE,
        AccessError::TokenSecretRefInvalid { .. }
        | AccessError::ClientUnusable
        | AccessError::ControlPlaneUnavailable { .. } => reasons::OPERATOR_TOKEN_SECRET_REF_INVALID,
    };
    vec![
        control_plane_available(control_plane),
        Decided::new(
            conditions::OPERATOR_ACCESS_READY,
            ConditionStatus::False,
            reason,
            error.message(),
        ),
    ]
}

fn control_plane_available(control_plane: &str) -> Decided {
    Decided::new(
        conditions::CONTROL_PLANE_READY,
        ConditionStatus::True,
        reasons::CONTROL_PLANE_AVAILABLE,
        format!("CoderControlPlane {control_plane:?} is available"),
    )
}

/// `ControlPlaneReady` and `OperatorAccessReady` when the operator token can be used.
pub fn access_ready(control_plane: &str) -> Vec<Decided> {
    vec![
        control_plane_available(control_plane),
        Decided::new(
            conditions::OPERATOR_ACCESS_READY,
            ConditionStatus::True,
            reasons::OPERATOR_ACCESS_READY,
            "the operator token is available",
        ),
    ]
}

/// `ExternalProvisionersEntitled` for the gate's outcome.
pub fn entitlement_condition(outcome: Result<bool, &CoderError>) -> Decided {
    let (status, reason, message) = match outcome {
        Ok(true) => (
            ConditionStatus::True,
            reasons::ENTITLED,
            "external provisioner daemons are entitled".to_owned(),
        ),
        Ok(false) => (
            ConditionStatus::False,
            reasons::NOT_ENTITLED,
            "the Coder licence does not entitle external provisioner daemons".to_owned(),
        ),
        Err(e) if e.is_route_not_found() || matches!(e, CoderError::NotFound { .. }) => (
            ConditionStatus::False,
            reasons::NOT_SUPPORTED,
            "this Coder deployment has no entitlements API".to_owned(),
        ),
        Err(e @ (CoderError::Unauthorized { .. } | CoderError::Forbidden { .. })) => (
            ConditionStatus::False,
            reasons::FORBIDDEN,
            format!("reading entitlements: {e}"),
        ),
        Err(e) => (
            ConditionStatus::False,
            reasons::ENTITLEMENTS_QUERY_FAILED,
            format!("reading entitlements: {e}"),
        ),
    };
    Decided::new(
        conditions::EXTERNAL_PROVISIONERS_ENTITLED,
        status,
        reason,
        message,
    )
}

/// `CredentialsReady`: the first refusal (reason, message), or verified.
pub fn credentials_condition(refusal: Option<(&'static str, String)>) -> Decided {
    credentials::condition(
        refusal,
        "every Secret the pods receive is a credential Secret for the control plane's origin",
    )
}

/// What the key was made from; a change of any of these rotates the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyInputs {
    pub organization_name: String,
    pub key_name: String,
    pub tags_hash: String,
    pub control_plane: String,
    pub control_plane_url: String,
}

/// Whether the recorded key still matches its inputs, so that, with its Secret present, no Coder call is needed.
/// `resolved` is what the spec's organization (a name, or an alias such as `default`) was last found to be in
/// Coder: `(spec organization, organization ID)`.
pub fn key_current(
    status: &CoderProvisionerStatus,
    inputs: &KeyInputs,
    resolved: Option<(&str, &str)>,
) -> bool {
    let Some(organization_id) = status.organization_id.as_deref() else {
        return false;
    };
    let same_organization = status.organization_name.as_deref() == Some(inputs.organization_name.as_str())
        || resolved == Some((inputs.organization_name.as_str(), organization_id));
    status.provisioner_key_id.is_some() && same_organization && !drifted(status, organization_id, inputs)
}

/// The fact kept after a key step: the spec's organization and the ID Coder resolved it to.
pub fn resolved_fact(spec_organization: &str, organization_id: &str) -> String {
    format!("{organization_id} {spec_organization}")
}

/// Reads [`resolved_fact`] back as `(spec organization, organization ID)`.
pub fn parse_resolved(fact: &str) -> Option<(&str, &str)> {
    let (organization_id, spec_organization) = fact.split_once(' ')?;
    Some((spec_organization, organization_id))
}

/// Whether a recorded key was made from other inputs than now (organization ID, name, tags, control plane).
pub fn drifted(status: &CoderProvisionerStatus, organization_id: &str, inputs: &KeyInputs) -> bool {
    status.provisioner_key_id.is_some()
        && (status.organization_id.as_deref() != Some(organization_id)
            || status.provisioner_key_name.as_deref() != Some(inputs.key_name.as_str())
            || status.tags_hash.as_deref() != Some(inputs.tags_hash.as_str())
            || status.control_plane_ref_name.as_deref() != Some(inputs.control_plane.as_str())
            || status.control_plane_url.as_deref() != Some(inputs.control_plane_url.as_str()))
}

/// What to do with the key in Coder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyPlan {
    /// The stored Secret holds the key Coder lists under this ID.
    Reuse { key_id: String },
    /// No key of this name: create one.
    Create,
    /// A key of this name that this provisioner created but cannot use (no Secret, or drift): delete it, then
    /// create one, so there is never more than one.
    Replace { old_name: String },
    /// A key of this name that this provisioner did not create: neither used nor deleted.
    NotOwned { name: String },
    /// The key only `status.provisionerKeyID` names (a key Secret without a recorded ID) can no longer be used as
    /// it is (no key in the Secret, or drift): replacing it would delete it on the status's word, so nothing is done.
    Unproven { name: String },
}

/// A key Coder lists under the spec's name.
#[derive(Clone, Copy, Debug)]
pub struct ListedKey<'a> {
    pub id: &'a str,
    pub name: &'a str,
}

/// What proves that a key Coder lists is this provisioner's. `status.provisionerKeyID` is not among the proofs:
/// anyone with status write access can set it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyProof<'a> {
    /// The key ID the operator wrote on the owned key Secret (`coder.com/provisioner-key-id`) once it learnt it.
    pub annotated_id: Option<&'a str>,
    /// This operator process created a key of this name in this organization and has not learnt its ID yet.
    pub created_here: bool,
    /// `status.provisionerKeyID` of a provisioner whose owned key Secret holds a key but carries no recorded ID (the
    /// Go operator's, or this operator's from before it recorded IDs there): that key is used as it is, but never
    /// replaced or deleted on the status's word.
    pub legacy_id: Option<&'a str>,
}

/// Decides from Coder's key of this name (if any), the proof of ownership, whether the owned Secret holds a key,
/// and drift. A listed key is this provisioner's only when the key Secret names its ID (or it was just created
/// here): a key of the same name made by anyone else is never taken over or deleted, and a key only the status names
/// is at most used as it is.
pub fn key_plan(
    listed: Option<ListedKey<'_>>,
    proof: KeyProof<'_>,
    secret_holds_key: bool,
    drifted: bool,
) -> KeyPlan {
    let Some(listed) = listed else {
        return KeyPlan::Create;
    };
    let proven = proof.created_here || proof.annotated_id == Some(listed.id);
    let usable = secret_holds_key && !drifted;
    let legacy = proof.legacy_id == Some(listed.id);
    match (proven, usable, legacy) {
        (true, true, _) | (false, true, true) => KeyPlan::Reuse {
            key_id: listed.id.to_owned(),
        },
        (true, false, _) => KeyPlan::Replace {
            old_name: listed.name.to_owned(),
        },
        (false, false, true) => KeyPlan::Unproven {
            name: listed.name.to_owned(),
        },
        (false, _, false) => KeyPlan::NotOwned {
            name: listed.name.to_owned(),
        },
    }
}

/// `ProvisionerKeyReady` when Coder holds a key of this name that this provisioner did not create.
pub fn key_not_owned(name: &str) -> Decided {
    Decided::new(
        conditions::PROVISIONER_KEY_READY,
        ConditionStatus::False,
        reasons::PROVISIONER_KEY_NOT_OWNED,
        format!(
            "Coder already has a provisioner key named {name:?} that this provisioner did not create (its ID is not status.provisionerKeyID); it is neither used nor deleted. Delete it in Coder (`coder provisioner keys delete`) or set spec.key.name to another name."
        ),
    )
}

/// `ProvisionerKeyReady` when the key that only `status.provisionerKeyID` names would have to be replaced.
pub fn key_unproven(name: &str) -> Decided {
    Decided::new(
        conditions::PROVISIONER_KEY_READY,
        ConditionStatus::False,
        reasons::PROVISIONER_KEY_NOT_OWNED,
        format!(
            "Coder has a provisioner key named {name:?} that only status.provisionerKeyID names (the key Secret records no key ID); it is neither replaced nor deleted. Delete it in Coder (`coder provisioner keys delete`) and the next pass creates a new one."
        ),
    )
}

/// `CredentialsReady` when the key Secret was created by someone else while the key was being made.
pub fn key_secret_taken(secret: &str) -> Decided {
    credentials_condition(Some((
        reasons::KEY_SECRET_NOT_OWNED,
        format!(
            "Secret {secret:?} appeared while the provisioner key was created and this provisioner does not own it; it was not changed, and the new key was deleted again"
        ),
    )))
}

/// `OperatorAccessReady` when the operator token Secret is not controlled by the control plane.
pub fn token_secret_not_owned(control_plane: &str, secret: &str) -> Vec<Decided> {
    vec![
        control_plane_available(control_plane),
        Decided::new(
            conditions::OPERATOR_ACCESS_READY,
            ConditionStatus::False,
            reasons::OPERATOR_TOKEN_SECRET_NOT_OWNED,
            format!(
                "Secret {secret:?} named as the operator token of CoderControlPlane {control_plane:?} is not controlled by that control plane; it is not read"
            ),
        ),
    ]
}

/// `ProvisionerKeyReady` after a failed Coder call.
pub fn key_failed(error: &CoderError) -> Decided {
    let reason = if matches!(error, CoderError::RateLimited { .. }) {
        reasons::RATE_LIMITED
    } else {
        reasons::PROVISIONER_KEY_FAILED
    };
    Decided::new(
        conditions::PROVISIONER_KEY_READY,
        ConditionStatus::False,
        reason,
        format!("provisioner key: {error}"),
    )
}

/// `ProvisionerKeyReady` and `ProvisionerKeySecretReady` once the key is in Coder and in its Secret.
pub fn key_ready(secret: &str) -> Vec<Decided> {
    vec![
        Decided::new(
            conditions::PROVISIONER_KEY_READY,
            ConditionStatus::True,
            reasons::PROVISIONER_KEY_READY,
            "the provisioner key exists in Coder",
        ),
        Decided::new(
            conditions::PROVISIONER_KEY_SECRET_READY,
            ConditionStatus::True,
            reasons::SECRET_READY,
            format!("Secret {secret:?} holds the key"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> KeyInputs {
        KeyInputs {
            organization_name: "coder".to_owned(),
            key_name: "p".to_owned(),
            tags_hash: "h".to_owned(),
            control_plane: "cp".to_owned(),
            control_plane_url: "http://cp".to_owned(),
        }
    }

    fn recorded() -> CoderProvisionerStatus {
        CoderProvisionerStatus {
            provisioner_key_id: Some("k1".to_owned()),
            organization_id: Some("o1".to_owned()),
            organization_name: Some("coder".to_owned()),
            provisioner_key_name: Some("p".to_owned()),
            tags_hash: Some("h".to_owned()),
            control_plane_ref_name: Some("cp".to_owned()),
            control_plane_url: Some("http://cp".to_owned()),
            ..Default::default()
        }
    }

    #[test]
    fn a_current_key_needs_no_coder_call_and_any_input_change_drifts() {
        assert!(key_current(&recorded(), &inputs(), None));
        assert!(!key_current(&CoderProvisionerStatus::default(), &inputs(), None));
        let mut changed = inputs();
        changed.tags_hash = "other".to_owned();
        assert!(!key_current(&recorded(), &changed, None));
        assert!(drifted(&recorded(), "o1", &changed));
        assert!(drifted(&recorded(), "o2", &inputs()), "another organization");
        assert!(
            !drifted(&CoderProvisionerStatus::default(), "o1", &changed),
            "no key yet, nothing drifts"
        );
        let mut renamed_org = inputs();
        renamed_org.organization_name = "other".to_owned();
        assert!(
            !key_current(&recorded(), &renamed_org, None),
            "a new organization name is looked up in Coder"
        );
        // `default` resolved to the organization named `coder` (ID o1) needs no new look-up.
        let mut alias = inputs();
        alias.organization_name = "default".to_owned();
        assert!(!key_current(&recorded(), &alias, None));
        let fact = resolved_fact("default", "o1");
        assert_eq!(parse_resolved(&fact), Some(("default", "o1")));
        assert!(key_current(&recorded(), &alias, parse_resolved(&fact)));
        assert!(
            !key_current(&recorded(), &alias, Some(("default", "o2"))),
            "resolved to another organization"
        );
    }

    fn annotated(id: &str) -> KeyProof<'_> {
        KeyProof {
            annotated_id: Some(id),
            ..KeyProof::default()
        }
    }

    #[test]
    fn key_plans() {
        let k1 = Some(ListedKey { id: "k1", name: "p" });
        assert_eq!(
            key_plan(k1, annotated("k1"), true, false),
            KeyPlan::Reuse {
                key_id: "k1".to_owned()
            }
        );
        assert_eq!(
            key_plan(k1, annotated("k1"), false, false),
            KeyPlan::Replace {
                old_name: "p".to_owned()
            }
        );
        assert_eq!(
            key_plan(k1, annotated("k1"), true, true),
            KeyPlan::Replace {
                old_name: "p".to_owned()
            }
        );
        assert_eq!(key_plan(None, annotated("k1"), true, false), KeyPlan::Create);
        assert_eq!(key_plan(None, KeyProof::default(), false, false), KeyPlan::Create);
    }

    #[test]
    fn a_key_this_provisioner_did_not_create_is_never_used_or_replaced() {
        let k1 = Some(ListedKey { id: "k1", name: "p" });
        let not_owned = KeyPlan::NotOwned { name: "p".to_owned() };
        for (proof, secret_holds_key, drifted) in [
            (KeyProof::default(), false, false),
            (KeyProof::default(), true, false),
            (KeyProof::default(), false, true),
            (annotated("k0"), true, false),
            (annotated("k0"), false, false),
            (annotated("k0"), true, true),
        ] {
            assert_eq!(
                key_plan(k1, proof, secret_holds_key, drifted),
                not_owned,
                "{proof:?}, secret holds a key {secret_holds_key}, drifted {drifted}"
            );
        }
        let here = KeyProof {
            created_here: true,
            ..KeyProof::default()
        };
        assert_eq!(
            key_plan(k1, here, false, false),
            KeyPlan::Replace {
                old_name: "p".to_owned()
            },
            "created by this operator, ID not learnt yet"
        );
        let condition = key_not_owned("p");
        assert_eq!(
            (condition.reason, condition.status),
            (reasons::PROVISIONER_KEY_NOT_OWNED, ConditionStatus::False)
        );
    }

    #[test]
    fn a_key_only_the_status_names_is_used_as_it_is_but_never_replaced() {
        let k1 = Some(ListedKey { id: "k1", name: "p" });
        let legacy = KeyProof {
            legacy_id: Some("k1"),
            ..KeyProof::default()
        };
        assert_eq!(
            key_plan(k1, legacy, true, false),
            KeyPlan::Reuse {
                key_id: "k1".to_owned()
            },
            "a key the Go operator recorded keeps working"
        );
        for (secret_holds_key, drifted) in [(false, false), (true, true)] {
            assert_eq!(
                key_plan(k1, legacy, secret_holds_key, drifted),
                KeyPlan::Unproven { name: "p".to_owned() }
            );
        }
        let other = KeyProof {
            legacy_id: Some("k0"),
            ..KeyProof::default()
        };
        assert_eq!(
            key_plan(k1, other, true, false),
            KeyPlan::NotOwned { name: "p".to_owned() }
        );
        assert_eq!(key_unproven("p").reason, reasons::PROVISIONER_KEY_NOT_OWNED);
    }

    #[test]
    fn a_failed_gate_keeps_the_last_phase() {
        assert_eq!(
            phase_before_gates(Some(WorkloadPhase::Ready)),
            WorkloadPhase::Ready
        );
        assert_eq!(phase_before_gates(None), WorkloadPhase::Pending);
    }

    #[test]
    fn access_reasons() {
        let missing = access_refused(
            "cp",
            &AccessError::ControlPlaneUnavailable {
                control_plane: "cp".to_owned(),
            },
        );
        assert_eq!(
            (missing.len(), missing[0].reason),
            (1, reasons::CONTROL_PLANE_UNAVAILABLE)
        );
        let not_ready = access_refused(
            "cp",
            &AccessError::AccessNotReady {
                control_plane: "cp".to_owned(),
            },
        );
        assert_eq!(not_ready[0].reason, reasons::CONTROL_PLANE_AVAILABLE);
        assert_eq!(not_ready[1].reason, reasons::OPERATOR_ACCESS_NOT_READY);
        assert_eq!(access_ready("cp")[1].status, ConditionStatus::True);
    }

    #[test]
    fn entitlement_reasons() {
        assert_eq!(entitlement_condition(Ok(true)).reason, reasons::ENTITLED);
        assert_eq!(entitlement_condition(Ok(false)).reason, reasons::NOT_ENTITLED);
        let forbidden = CoderError::Forbidden {
            message: "no".to_owned(),
        };
        assert_eq!(entitlement_condition(Err(&forbidden)).reason, reasons::FORBIDDEN);
    }
}
