//! The conditions of a CoderWorkspaceProxy (docs/controllers/workspace-proxy.md), pure: `ProxyRegistered` (an invalid
//! spec, a token Secret or proxy that is not this object's, a failed registration) and `CredentialsReady`. A pass
//! ends when it has set them, with the time of the next one.

use coder_k8s_api::workspace_proxy::{conditions, reasons};

pub use crate::conditions::Requeue as Outcome;
use crate::conditions::{ConditionStatus, Decided};
use crate::credentials;

/// `ProxyRegistered` when Coder holds a proxy of this name that this object did not create.
pub fn proxy_not_owned(proxy_name: &str) -> Decided {
    Decided::new(
        conditions::PROXY_REGISTERED,
        ConditionStatus::False,
        reasons::PROXY_NOT_OWNED,
        format!(
            "Coder already has a workspace proxy named {proxy_name:?} that this object did not create; its token is not regenerated. Delete it in Coder or set bootstrap.proxyName to another name."
        ),
    )
}

/// `ProxyRegistered` for a spec that cannot run (no primary access URL, no token reference).
pub fn invalid_spec(message: &str) -> Decided {
    Decided::new(
        conditions::PROXY_REGISTERED,
        ConditionStatus::False,
        reasons::INVALID_SPEC,
        message,
    )
}

/// `CredentialsReady`: the first refusal (reason, message), or verified.
pub fn credentials_condition(refusal: Option<(&'static str, String)>) -> Decided {
    credentials::condition(
        refusal,
        "every Secret used is a credential Secret for its destination",
    )
}

/// `ProxyRegistered` when the generated token Secret's name is taken by a Secret this proxy does not own.
pub fn token_secret_not_owned(secret: &str) -> Decided {
    Decided::new(
        conditions::PROXY_REGISTERED,
        ConditionStatus::False,
        reasons::TOKEN_SECRET_NOT_OWNED,
        format!(
            "Secret {secret:?} exists and this proxy does not own it; set bootstrap.generatedTokenSecretName to a name that does not exist"
        ),
    )
}

/// `ProxyRegistered` when the registration failed; `message` never holds a credential.
pub fn registration_failed(message: String) -> Decided {
    Decided::new(
        conditions::PROXY_REGISTERED,
        ConditionStatus::False,
        reasons::REGISTRATION_FAILED,
        message,
    )
}

/// `ProxyRegistered` once the proxy holds its token.
pub fn registered() -> Decided {
    Decided::new(
        conditions::PROXY_REGISTERED,
        ConditionStatus::True,
        reasons::REGISTERED,
        "the proxy is registered in Coder",
    )
}

#[cfg(test)]
mod tests {
    use super::super::desired::{ProxyProof, proxy_owned};
    use super::*;

    const CREATED: &str = "2026-12-06T07:00:00Z";

    #[test]
    fn only_the_recorded_proxy_is_taken_over() {
        let recorded = |id| ProxyProof {
            recorded_id: Some(id),
            ..ProxyProof::default()
        };
        assert!(proxy_owned("p1", CREATED, recorded("p1")));
        assert!(!proxy_owned("p1", CREATED, recorded("p2")));
        assert!(
            !proxy_owned("p1", CREATED, ProxyProof::default()),
            "nothing recorded: someone else's proxy"
        );
        assert_eq!(proxy_not_owned("eu").reason, reasons::PROXY_NOT_OWNED);
    }

    #[test]
    fn a_proxy_coder_created_after_the_create_marker_is_taken_over() {
        let marked = |started| ProxyProof {
            create_started_at: Some(started),
            ..ProxyProof::default()
        };
        // The create's answer was lost (a crash): the proxy made after the marker is this object's.
        assert!(proxy_owned("p1", CREATED, marked("2026-12-06T06:59:58Z")));
        // A proxy that was there well before the marker is someone else's, as is any when a time cannot be read.
        assert!(!proxy_owned("p1", CREATED, marked("2026-12-06T07:00:30Z")));
        assert!(!proxy_owned(
            "p1",
            "0001-01-01T00:00:00Z",
            marked("2026-12-06T06:59:58Z")
        ));
        assert!(!proxy_owned("p1", CREATED, marked("not a time")));
    }
}
