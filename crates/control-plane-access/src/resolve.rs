//! Pure decisions: is a control plane usable for Coder calls, where is its operator token, and what target does a
//! caller get. The caller supplies the objects (from a watch cache or a GET), so nothing here does I/O.

use coder_k8s_api::control_plane::CoderControlPlane;
use coder_k8s_api::shared::DEFAULT_TOKEN_SECRET_KEY;

/// Why a control plane cannot be used for Coder calls. Messages name objects, never a token or URL credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccessError {
    /// The control plane does not exist or has no `status.url` yet.
    ControlPlaneUnavailable { control_plane: String },
    /// The control plane records no operator token Secret.
    TokenSecretRefMissing { control_plane: String },
    /// The control plane's operator access is not ready.
    AccessNotReady { control_plane: String },
    /// The recorded reference names no Secret.
    TokenSecretRefInvalid { control_plane: String },
    /// The token Secret is missing, or its key is missing or empty.
    TokenSecretUnavailable { secret: String },
    /// The control plane's URL or the token cannot make a client.
    ClientUnusable,
}

impl AccessError {
    /// Whether the control plane itself is missing (as opposed to its operator access).
    pub fn is_control_plane_missing(&self) -> bool {
        matches!(self, Self::ControlPlaneUnavailable { .. })
    }

    /// A message for a condition, a log line or an HTTP error body.
    pub fn message(&self) -> String {
        match self {
            Self::ControlPlaneUnavailable { control_plane } => {
                format!("CoderControlPlane {control_plane:?} does not exist or has no status.url yet")
            }
            Self::TokenSecretRefMissing { control_plane } => {
                format!("CoderControlPlane {control_plane:?} has no operatorTokenSecretRef")
            }
            Self::AccessNotReady { control_plane } => {
                format!("operator access of CoderControlPlane {control_plane:?} is not ready")
            }
            Self::TokenSecretRefInvalid { .. } => "operatorTokenSecretRef names no Secret".to_owned(),
            Self::TokenSecretUnavailable { secret } => {
                format!("the operator token Secret {secret:?} is missing or empty")
            }
            Self::ClientUnusable => "the control plane URL or token cannot be used".to_owned(),
        }
    }

    /// The HTTP status a server answers with: the control plane is not there (404) or not usable yet (503).
    pub fn http_status(&self) -> u16 {
        match self {
            Self::ControlPlaneUnavailable { .. } => 404,
            _ => 503,
        }
    }
}

/// Where the control plane keeps its operator token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenSource {
    pub secret: String,
    pub key: String,
}

/// What a caller gets for a usable control plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// UID of the control plane: the key of the client and entitlement caches.
    pub uid: String,
    /// `status.url`: what pods use to reach Coder.
    pub pod_url: String,
    /// The in-cluster plain-HTTP URL the operator calls.
    pub api_url: String,
}

/// Checks a control plane (`None` when it does not exist) and says where its operator token is. `name` is the name
/// the caller referred to, for messages.
pub fn token_source(
    name: &str,
    control_plane: Option<&CoderControlPlane>,
) -> Result<TokenSource, AccessError> {
    let named = || name.to_owned();
    let status = control_plane
        .and_then(|cp| cp.status.as_ref())
        .filter(|status| status.url.as_deref().is_some_and(|url| !url.trim().is_empty()))
        .ok_or_else(|| AccessError::ControlPlaneUnavailable {
            control_plane: named(),
        })?;
    // The Go operator's gate order: readiness first (a control plane with operator access turned off has neither
    // readiness nor a reference, and reports OperatorAccessNotReady), then the reference, then its name.
    if status.operator_access_ready != Some(true) {
        return Err(AccessError::AccessNotReady {
            control_plane: named(),
        });
    }
    let reference =
        status
            .operator_token_secret_ref
            .as_ref()
            .ok_or_else(|| AccessError::TokenSecretRefMissing {
                control_plane: named(),
            })?;
    if reference.name.trim().is_empty() {
        return Err(AccessError::TokenSecretRefInvalid {
            control_plane: named(),
        });
    }
    Ok(TokenSource {
        secret: reference.name.clone(),
        key: reference.key_or(DEFAULT_TOKEN_SECRET_KEY).to_owned(),
    })
}

/// The target of a control plane whose token source checked out, once the token value is known (`None` when the
/// Secret or key is missing; an empty value counts as missing).
pub fn resolve(
    control_plane: &CoderControlPlane,
    source: &TokenSource,
    token: Option<&str>,
) -> Result<Target, AccessError> {
    if token.is_none_or(str::is_empty) {
        return Err(AccessError::TokenSecretUnavailable {
            secret: source.secret.clone(),
        });
    }
    let meta = &control_plane.metadata;
    let (Some(name), Some(namespace), Some(uid)) = (&meta.name, &meta.namespace, &meta.uid) else {
        return Err(AccessError::ClientUnusable);
    };
    let pod_url = control_plane
        .status
        .as_ref()
        .and_then(|s| s.url.clone())
        .ok_or(AccessError::ClientUnusable)?;
    Ok(Target {
        uid: uid.clone(),
        pod_url,
        api_url: crate::url::internal_url(name, namespace, &control_plane.spec),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use coder_k8s_api::control_plane::CoderControlPlaneStatus;
    use coder_k8s_api::shared::SecretKeySelector;

    fn control_plane(status: CoderControlPlaneStatus) -> CoderControlPlane {
        let mut cp = CoderControlPlane::new("coder", Default::default());
        cp.metadata.namespace = Some("team".to_owned());
        cp.metadata.uid = Some("uid-1".to_owned());
        cp.status = Some(status);
        cp
    }

    fn ready() -> CoderControlPlaneStatus {
        CoderControlPlaneStatus {
            url: Some("http://coder.team.svc.cluster.local:80".to_owned()),
            operator_access_ready: Some(true),
            operator_token_secret_ref: Some(SecretKeySelector {
                name: "coder-operator-token".to_owned(),
                key: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn every_refusal_in_order() {
        assert!(
            token_source("coder", None)
                .unwrap_err()
                .is_control_plane_missing()
        );
        let no_url = CoderControlPlaneStatus { url: None, ..ready() };
        assert_eq!(
            token_source("coder", Some(&control_plane(no_url)))
                .unwrap_err()
                .http_status(),
            404
        );
        let empty_url = CoderControlPlaneStatus {
            url: Some(String::new()),
            operator_access_ready: None,
            ..ready()
        };
        assert!(
            token_source("coder", Some(&control_plane(empty_url)))
                .unwrap_err()
                .is_control_plane_missing(),
            "an empty status.url is the first failing gate"
        );
        let disabled = CoderControlPlaneStatus {
            operator_access_ready: Some(false),
            operator_token_secret_ref: None,
            ..ready()
        };
        assert!(matches!(
            token_source("coder", Some(&control_plane(disabled))),
            Err(AccessError::AccessNotReady { .. })
        ));
        let no_ref = CoderControlPlaneStatus {
            operator_token_secret_ref: None,
            ..ready()
        };
        assert!(matches!(
            token_source("coder", Some(&control_plane(no_ref))),
            Err(AccessError::TokenSecretRefMissing { .. })
        ));
        let not_ready = CoderControlPlaneStatus {
            operator_access_ready: Some(false),
            ..ready()
        };
        assert!(matches!(
            token_source("coder", Some(&control_plane(not_ready))),
            Err(AccessError::AccessNotReady { .. })
        ));
        let mut empty = ready();
        empty.operator_token_secret_ref = Some(SecretKeySelector::default());
        let error = token_source("coder", Some(&control_plane(empty))).unwrap_err();
        assert_eq!(
            error,
            AccessError::TokenSecretRefInvalid {
                control_plane: "coder".to_owned()
            }
        );
        assert_eq!(error.http_status(), 503);
    }

    #[test]
    fn a_ready_control_plane_resolves_once_the_token_is_there() {
        let cp = control_plane(ready());
        let source = token_source("coder", Some(&cp)).unwrap();
        assert_eq!(source.secret, "coder-operator-token");
        assert_eq!(source.key, "token");
        assert!(matches!(
            resolve(&cp, &source, Some("")),
            Err(AccessError::TokenSecretUnavailable { .. })
        ));
        let target = resolve(&cp, &source, Some("abc-secret")).unwrap();
        assert_eq!(target.uid, "uid-1");
        assert_eq!(target.api_url, "http://coder.team.svc.cluster.local:80");
        assert!(!format!("{target:?}").contains("abc-secret"));
    }
}
