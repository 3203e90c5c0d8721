//! Delegated authorization: a SubjectAccessReview per request, with short caches and a `system:masters` bypass.
//! Failures to decide are errors (the server answers 500): the server fails closed.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes as KubeResourceAttributes, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use kube::api::Api;

use super::auth::{Attributes, Authorizer, Decision};
use super::kube_call::create_review;
use super::status::ApiError;
use super::ttl_cache::TtlCache;

/// Members of this group may do anything, as in kube-apiserver; no review is sent for them.
pub const SYSTEM_MASTERS: &str = "system:masters";
/// How long an allowed or denied answer is reused for the same attributes.
pub const DECISION_CACHE_TTL: Duration = Duration::from_secs(10);
const DECISION_CACHE_CAPACITY: usize = 10_000;

/// Asks kube-apiserver, through SubjectAccessReview, whether each request may proceed.
pub struct SubjectAccessReviewAuthorizer {
    client: kube::Client,
    decisions: TtlCache<Attributes, Decision>,
}

impl std::fmt::Debug for SubjectAccessReviewAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubjectAccessReviewAuthorizer")
            .finish_non_exhaustive()
    }
}

impl SubjectAccessReviewAuthorizer {
    pub fn new(client: kube::Client) -> Self {
        Self::with_cache_ttl(client, DECISION_CACHE_TTL)
    }

    /// With a different cache lifetime (tests use a short one to see entries expire).
    pub fn with_cache_ttl(client: kube::Client, ttl: Duration) -> Self {
        Self {
            client,
            decisions: TtlCache::new(ttl, DECISION_CACHE_CAPACITY),
        }
    }

    async fn review(&self, attributes: &Attributes) -> Result<Decision, ApiError> {
        let review = SubjectAccessReview {
            spec: review_spec(attributes)?,
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = create_review(&api, &review).await.map_err(|message| {
            ApiError::internal(format!(
                "authorize the request: create subjectaccessreviews.authorization.k8s.io: {message}"
            ))
        })?;
        let status = answer.status.unwrap_or_default();
        Ok(if status.allowed && status.denied != Some(true) {
            Decision::Allow
        } else {
            Decision::Deny(status.reason.unwrap_or_default())
        })
    }
}

#[async_trait]
impl Authorizer for SubjectAccessReviewAuthorizer {
    async fn authorize(&self, attributes: &Attributes) -> Result<Decision, ApiError> {
        if attributes.user.groups.iter().any(|g| g == SYSTEM_MASTERS) {
            return Ok(Decision::Allow);
        }
        if let Some(decision) = self.decisions.get(attributes, Instant::now()) {
            return Ok(decision);
        }
        let decision = self.review(attributes).await?;
        self.decisions
            .insert(attributes.clone(), decision.clone(), Instant::now());
        Ok(decision)
    }
}

/// The review's spec: who, and either the resource or the non-resource path. Empty strings are left out, as
/// kube-apiserver's own clients do.
fn review_spec(attributes: &Attributes) -> Result<SubjectAccessReviewSpec, ApiError> {
    let user = &attributes.user;
    let verb = non_empty(&attributes.verb);
    let mut spec = SubjectAccessReviewSpec {
        user: non_empty(&user.name),
        uid: non_empty(&user.uid),
        groups: (!user.groups.is_empty()).then(|| user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone().into_iter().collect()),
        ..SubjectAccessReviewSpec::default()
    };
    match (&attributes.resource, &attributes.path) {
        (Some(resource), _) => {
            spec.resource_attributes = Some(KubeResourceAttributes {
                group: non_empty(&resource.group),
                version: non_empty(&resource.version),
                resource: non_empty(&resource.resource),
                subresource: non_empty(&resource.subresource),
                namespace: non_empty(&resource.namespace),
                name: non_empty(&resource.name),
                verb,
                ..KubeResourceAttributes::default()
            });
        }
        (None, Some(path)) => {
            spec.non_resource_attributes = Some(NonResourceAttributes {
                path: Some(path.clone()),
                verb,
            });
        }
        (None, None) => {
            return Err(ApiError::internal(
                "authorize the request: neither a resource nor a path to review",
            ));
        }
    }
    Ok(spec)
}

fn non_empty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_owned())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::generic::auth::{ResourceAttributes, UserInfo};

    fn user() -> UserInfo {
        UserInfo {
            name: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["devs".into()],
            extra: BTreeMap::from([("scopes".to_owned(), vec!["read".to_owned()])]),
        }
    }

    #[test]
    fn resource_requests_carry_every_attribute() {
        let spec = review_spec(&Attributes {
            user: user(),
            verb: "get".into(),
            resource: Some(ResourceAttributes {
                group: "aggregation.coder.com".into(),
                version: "v1alpha1".into(),
                resource: "coderworkspaces".into(),
                subresource: "start".into(),
                namespace: "team".into(),
                name: "org.alice.ws".into(),
            }),
            path: None,
        })
        .unwrap();
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "user": "alice",
                "uid": "u-1",
                "groups": ["devs"],
                "extra": {"scopes": ["read"]},
                "resourceAttributes": {
                    "group": "aggregation.coder.com",
                    "version": "v1alpha1",
                    "resource": "coderworkspaces",
                    "subresource": "start",
                    "namespace": "team",
                    "name": "org.alice.ws",
                    "verb": "get",
                },
            })
        );
    }

    #[test]
    fn non_resource_requests_carry_the_path_and_empty_fields_are_left_out() {
        let spec = review_spec(&Attributes {
            user: UserInfo {
                name: "bob".into(),
                ..UserInfo::default()
            },
            verb: "get".into(),
            resource: None,
            path: Some("/openapi/v2".into()),
        })
        .unwrap();
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            serde_json::json!({
                "user": "bob",
                "nonResourceAttributes": {"path": "/openapi/v2", "verb": "get"},
            })
        );
    }

    #[test]
    fn attributes_without_resource_or_path_are_an_error() {
        let error = review_spec(&Attributes {
            user: user(),
            verb: "get".into(),
            resource: None,
            path: None,
        })
        .unwrap_err();
        assert_eq!(error.code, 500);
    }
}
