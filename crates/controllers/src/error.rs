//! The one error type of every controller, with a bounded category for metrics and logs. Waiting (for referrers,
//! for a retried delete) is not an error: a cleanup says so with [`crate::kind::Cleanup::WaitFor`].

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("the object has no name, namespace or UID yet")]
    MissingMetadata,
}

impl Error {
    /// Bounded category for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Kube(_) => "kube",
            Self::MissingMetadata => "metadata",
        }
    }
}

/// The result of a reconcile step.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_bounded_words() {
        assert_eq!(Error::MissingMetadata.category(), "metadata");
        assert_eq!(
            Error::MissingMetadata.to_string(),
            "the object has no name, namespace or UID yet"
        );
    }
}
