//! The outcomes of a CoderAIProvider pass, pure: the shared ones (control plane, operator access, deployment,
//! cleanup record, Coder errors) with this kind's wording, and its own (`Synced`, `SecretNotReady`, `NameConflict`).

use coder_k8s_api::ai_provider::reasons;
use coder_k8s_coder_client::Error as CoderError;

pub use crate::sync_status::Outcome;
use crate::sync_status::outcomes;
pub use crate::sync_status::outcomes::{
    buildinfo_failed, control_plane_not_ready, deployment_changed, record_failed, refused,
};

/// What providers need from Coder, said when Coder refuses a provider call.
pub const NEEDS: &str =
    "AI providers need a Coder version with the AI providers API, and the operator user must be a site owner";

/// The provider in Coder matches the spec.
pub fn synced(name: &str) -> Outcome {
    Outcome::ready(
        reasons::SYNCED,
        format!("Provider {name} in Coder matches the spec."),
    )
}

/// A referenced Secret or its key is missing or empty (names only, never a value).
pub fn secret_not_ready(secret: &str, key: &str) -> Outcome {
    Outcome::pending(
        reasons::SECRET_NOT_READY,
        format!("Secret {secret} has no non-empty key {key:?}."),
    )
}

/// A provider with this name exists in Coder and is not this object's.
pub fn name_conflict(name: &str) -> Outcome {
    Outcome::stalled(
        reasons::NAME_CONFLICT,
        format!(
            "A provider named {name} exists in Coder and was not created for this object; delete it in Coder or choose another spec.name."
        ),
    )
}

/// A failed Coder call during `action`.
pub fn coder_failed(action: &str, error: &CoderError) -> Outcome {
    outcomes::coder_failed(action, error, NEEDS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync_status::SyncPhase;

    #[test]
    fn outcomes_name_objects_never_values() {
        let missing = secret_not_ready("openai", "api-key");
        assert_eq!(missing.reason, "SecretNotReady");
        assert_eq!(missing.phase, SyncPhase::Pending);
        assert_eq!(name_conflict("openai").phase, SyncPhase::Stalled);
        assert_eq!(synced("openai").phase, SyncPhase::Ready);
        let changed = deployment_changed(Some("old"), "new").unwrap();
        assert_eq!(changed.reason, "CoderDeploymentChanged");
        assert!(deployment_changed(Some("same"), "same").is_none());
        assert!(
            deployment_changed(None, "new").is_none(),
            "nothing created yet: nothing changed"
        );
        let rejected = coder_failed(
            "create the provider",
            &CoderError::Rejected {
                status: 400,
                message: "Validation failed.".to_owned(),
            },
        );
        assert_eq!(
            (rejected.reason, rejected.phase),
            ("Rejected", SyncPhase::Stalled)
        );
    }
}
