//! Authorizing, inside a storage call, an action a request implies beyond its own verb: a storage that acts on
//! another object for the caller (for example reads a Secret an object refers to, with the server's own
//! credentials) must first know the caller may do that themselves. The handlers run every storage call with the
//! server's authorizer in scope; [`authorize`] asks it about the request's caller and fails closed.

use std::future::Future;
use std::sync::Arc;

use super::auth::{Attributes, Authorizer, Decision, ResourceAttributes};
use super::handlers::forbidden;
use super::status::ApiError;
use super::storage::RequestContext;

tokio::task_local! {
    static AUTHORIZER: Arc<dyn Authorizer>;
}

/// Runs `work` (a storage call of one request) with `authorizer` available to [`authorize`]. Embedders that call a
/// storage directly (tests) wrap the call in this too.
pub async fn with_authorizer<F: Future>(authorizer: Arc<dyn Authorizer>, work: F) -> F::Output {
    AUTHORIZER.scope(authorizer, work).await
}

/// One more action of the caller of `ctx`: `verb` on `resource` (group, version, resource, namespace, name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraAction {
    pub verb: &'static str,
    pub resource: ResourceAttributes,
}

impl ExtraAction {
    /// `verb` on the core-group object `resource`/`name` in `namespace` (e.g. `get` of a Secret).
    pub fn core(verb: &'static str, resource: &str, namespace: &str, name: &str) -> Self {
        Self {
            verb,
            resource: ResourceAttributes {
                group: String::new(),
                version: "v1".to_owned(),
                resource: resource.to_owned(),
                subresource: String::new(),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            },
        }
    }
}

/// Whether the caller of `ctx` may also do `action`: `Ok` when the authorizer allows it, kube-apiserver's 403
/// (`secrets "db" is forbidden: User "alice" cannot get resource "secrets" ...`) when it denies it, and a 500 when
/// it cannot decide or no authorizer is in scope.
pub async fn authorize(ctx: &RequestContext, action: &ExtraAction) -> Result<(), ApiError> {
    let attributes = Attributes {
        user: ctx.user.clone(),
        verb: action.verb.to_owned(),
        resource: Some(action.resource.clone()),
        path: None,
    };
    let Ok(authorizer) = AUTHORIZER.try_with(Arc::clone) else {
        return Err(ApiError::internal(
            "authorization of a further action could not be decided (no authorizer in scope), so the request was refused",
        ));
    };
    match authorizer.authorize(&attributes).await {
        Ok(Decision::Allow) => Ok(()),
        Ok(Decision::Deny(reason)) => Err(forbidden(&attributes, &reason)),
        Err(error) => Err(ApiError::internal(format!(
            "authorization could not be decided, so the request was refused: {}",
            error.message
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;
    use crate::generic::auth::UserInfo;

    /// Allows `get` of the Secret `allowed` only, and records every question.
    #[derive(Default)]
    struct OneSecret {
        asked: Mutex<Vec<Attributes>>,
    }

    #[async_trait]
    impl Authorizer for OneSecret {
        async fn authorize(&self, attributes: &Attributes) -> Result<Decision, ApiError> {
            self.asked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(attributes.clone());
            let name = attributes.resource.as_ref().map(|r| r.name.as_str());
            Ok(match name {
                Some("allowed") => Decision::Allow,
                Some("broken") => return Err(ApiError::internal("review failed")),
                _ => Decision::Deny(String::new()),
            })
        }
    }

    fn ctx() -> RequestContext {
        RequestContext {
            user: UserInfo {
                name: "alice".into(),
                groups: vec!["dev".into()],
                ..UserInfo::default()
            },
            namespace: Some("team".into()),
            deadline: tokio::time::Instant::now(),
            dry_run: false,
            query: BTreeMap::new(),
        }
    }

    #[tokio::test]
    async fn the_caller_is_asked_about_and_a_denial_is_kube_apiservers_403() {
        let authorizer = Arc::new(OneSecret::default());
        let secret = |name| ExtraAction::core("get", "secrets", "team", name);
        let (allowed, denied, broken) = with_authorizer(authorizer.clone(), async {
            (
                authorize(&ctx(), &secret("allowed")).await,
                authorize(&ctx(), &secret("db")).await,
                authorize(&ctx(), &secret("broken")).await,
            )
        })
        .await;
        assert_eq!(allowed, Ok(()));
        let denied = denied.unwrap_err();
        assert_eq!(denied.code, 403);
        assert_eq!(
            denied.message,
            "secrets \"db\" is forbidden: User \"alice\" cannot get resource \"secrets\" in API group \"\" in the namespace \"team\""
        );
        assert_eq!(broken.unwrap_err().code, 500);
        let asked = authorizer.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 3);
        assert_eq!(asked[1].user.name, "alice");
        assert_eq!(asked[1].user.groups, ["dev"]);
        assert_eq!(asked[1].verb, "get");
        assert_eq!(asked[1].resource, Some(secret("db").resource));
    }

    #[tokio::test]
    async fn without_an_authorizer_in_scope_the_action_is_refused() {
        let error = authorize(&ctx(), &ExtraAction::core("get", "secrets", "team", "allowed"))
            .await
            .unwrap_err();
        assert_eq!(error.code, 500);
        assert!(
            error.message.contains("no authorizer in scope"),
            "{}",
            error.message
        );
    }
}
