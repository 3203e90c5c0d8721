//! Calls to kube-apiserver made while serving a request (TokenReview, SubjectAccessReview): bounded in time so a
//! stalled kube-apiserver fails the request instead of holding it, and their errors worded by kube's own message.

use std::time::Duration;

use kube::api::{Api, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How long one review may take. Well under kube-apiserver's 60 s proxy timeout, so the caller still gets an
/// answer from this server.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// The message of a kube error: the Status message when kube-apiserver answered one, else the error itself.
pub fn kube_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// Creates `review` (a TokenReview or SubjectAccessReview) within [`REVIEW_TIMEOUT`]. The error is a message.
pub async fn create_review<K>(api: &Api<K>, review: &K) -> Result<K, String>
where
    K: Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    match tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), review)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => Err(kube_message(&error)),
        Err(_) => Err(format!("no answer within {REVIEW_TIMEOUT:?}")),
    }
}
