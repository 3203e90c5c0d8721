//! The rules every write of a Coder-backed resource follows before anything reaches Coder, worded as
//! kube-apiserver words them: no dry run (Coder cannot preview a write), a body of the resource's kind, an update
//! that names the current resourceVersion, and the preconditions of a delete; and how a refused Coder write reads.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde::de::DeserializeOwned;
use serde_json::Value;

use coder_k8s_api::aggregation::GROUP;
use coder_k8s_coder_client::Error as CoderError;

use super::errors::{Subject, timed_out};
use crate::generic::{ApiError, Deleted, EventType, RequestContext, Written};

/// Coder cannot preview a write, so a dry run would really change Coder: refused before any Coder call.
pub fn refuse_dry_run(ctx: &RequestContext, resource: &str) -> Result<(), ApiError> {
    if ctx.dry_run {
        return Err(ApiError::bad_request(format!(
            "server-side dry-run is not supported for {resource}; nothing was changed"
        )));
    }
    Ok(())
}

/// kube-apiserver's 409 wording for `name` of `resource`.
pub fn conflict(resource: &str, name: &str, detail: &str) -> ApiError {
    ApiError::conflict(format!(
        "Operation cannot be fulfilled on {resource}.{GROUP} {name:?}: {detail}"
    ))
    .with_details(name, GROUP, resource)
}

/// A request body as the resource's kind `T` (named `kind` in the error).
pub fn parse_body<T: DeserializeOwned>(object: Value, kind: &str) -> Result<T, ApiError> {
    serde_json::from_value(object)
        .map_err(|e| ApiError::bad_request(format!("the body is not a valid {kind}: {e}")))
}

/// An update must carry the object's current resourceVersion: Coder has no compare-and-swap, so this is what keeps
/// a stale update from undoing a change made meanwhile.
pub fn check_resource_version(
    resource: &str,
    name: &str,
    given: Option<&str>,
    current: &str,
) -> Result<(), ApiError> {
    let given = given.unwrap_or_default();
    if given.is_empty() {
        return Err(ApiError::bad_request(
            "metadata.resourceVersion is required for update",
        ));
    }
    if given != current {
        return Err(conflict(
            resource,
            name,
            &format!("resource version mismatch: got {given:?}, current is {current:?}"),
        ));
    }
    Ok(())
}

/// [`check_resource_version`] against the object as read now.
pub fn check_current_version(
    resource: &str,
    name: &str,
    given: Option<&str>,
    current: &Value,
) -> Result<(), ApiError> {
    let current_rv = current["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    check_resource_version(resource, name, given, current_rv)
}

/// The answer of an update that changes nothing: the object as it is, nothing sent, no event.
pub fn unchanged(object: Value) -> Written {
    Written {
        object,
        created: false,
        event: None,
    }
}

/// The answer of a delete Coder carried out: the object as it was, and the event watchers get.
pub fn gone(object: Value) -> Deleted {
    Deleted::Success {
        object: Some(object),
        event: Some(EventType::Deleted),
    }
}

/// `preconditions.uid` and `preconditions.resourceVersion` (an explicit empty value counts), worded as
/// kube-apiserver does.
pub fn check_preconditions(
    resource: &str,
    name: &str,
    current: &Value,
    options: &DeleteOptions,
) -> Result<(), ApiError> {
    let Some(preconditions) = &options.preconditions else {
        return Ok(());
    };
    let actual_uid = current["metadata"]["uid"].as_str().unwrap_or_default();
    if let Some(uid) = &preconditions.uid
        && uid != actual_uid
    {
        return Err(conflict(
            resource,
            name,
            &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual_uid}"),
        ));
    }
    let actual_rv = current["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    if let Some(rv) = &preconditions.resource_version
        && rv != actual_rv
    {
        return Err(conflict(
            resource,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual_rv}"
            ),
        ));
    }
    Ok(())
}

/// A write Coder does not serve at all: open-source Coder lacks the Premium routes ("Route not found", or 405
/// where the route exists for reads).
pub fn not_served(error: &CoderError) -> bool {
    error.is_route_not_found() || error.status() == Some(405)
}

/// The 405 of a write of `things` (`organizations`, `groups`) on a Coder that does not serve it: which Premium
/// `feature` it needs, and Coder's own answer.
pub fn not_served_error(things: &str, feature: &str, error: &CoderError) -> ApiError {
    ApiError::method_not_allowed(format!(
        "this Coder deployment does not serve writes of {things}: they are the Premium feature {feature}, which \
         open-source Coder does not have (Coder answered: {})",
        error.message().trim()
    ))
}

/// Runs a Coder write within `deadline`; its error is mapped by `map` and running out of time is a 504 on `subject`.
pub async fn coder_write<T>(
    deadline: tokio::time::Instant,
    subject: Subject<'_>,
    call: impl Future<Output = Result<T, CoderError>>,
    map: impl Fn(&CoderError) -> ApiError,
) -> Result<T, ApiError> {
    match tokio::time::timeout_at(deadline, call).await {
        Ok(result) => result.map_err(|e| map(&e)),
        Err(_) => Err(timed_out(subject)),
    }
}
