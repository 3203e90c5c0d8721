//! Why an object cannot reach Coder through its control plane now, pure: each kind maps a refusal to its own
//! condition or outcome.

use coder_k8s_control_plane_access::AccessError;

/// Why an object cannot reach Coder through its control plane now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The named Secret holds the token but is not controlled by the control plane: it is not read.
    TokenSecretNotOwned { secret: String },
    /// The control plane is missing or not ready, or its operator access is not.
    Access(AccessError),
}

impl Refusal {
    /// Whether the control plane itself is missing or has no URL (as opposed to its operator access).
    pub fn is_control_plane_missing(&self) -> bool {
        matches!(self, Self::Access(error) if error.is_control_plane_missing())
    }

    /// A message for a condition; it names objects, never the token.
    pub fn message(&self, control_plane: &str) -> String {
        match self {
            Self::TokenSecretNotOwned { secret } => format!(
                "Secret {secret:?} named as the operator token of CoderControlPlane {control_plane:?} is not controlled by that control plane; it is not read"
            ),
            Self::Access(error) => error.message(),
        }
    }
}
