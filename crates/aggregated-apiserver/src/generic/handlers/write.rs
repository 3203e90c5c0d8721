//! The write verbs: create, update and delete, and the hand-off to subresource handlers.

use axum::http::{Method, StatusCode};
use axum::response::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::{Value, json};

use super::{Call, method_not_allowed, params, respond};
use crate::generic::negotiate::{self, Answering};
use crate::generic::registry::{ParentEvent, SubresourceRequest};
use crate::generic::request_info;
use crate::generic::status::ApiError;
use crate::generic::storage::{Deleted, Written};

/// POST to a collection: 201 with the created object.
pub async fn create(call: Call<'_>) -> Result<Response, ApiError> {
    if call.info.name.is_some() {
        return Err(method_not_allowed());
    }
    let format = call.format(Answering::Object)?;
    let mut object = params::object_body(call.headers, &call.body)?;
    check_body(&call, &mut object, None)?;
    let written = call.within(call.def.storage.create(&call.ctx, object)).await?;
    Ok(answer_write(&call, &format, written, StatusCode::CREATED))
}

/// PUT of an item: 200, or 201 when the storage created it.
pub async fn update(call: Call<'_>) -> Result<Response, ApiError> {
    let name = call.name()?;
    let format = call.format(Answering::Object)?;
    let mut object = params::object_body(call.headers, &call.body)?;
    check_body(&call, &mut object, Some(name))?;
    let written = call
        .within(call.def.storage.update(&call.ctx, name, object, false))
        .await?;
    let code = if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(answer_write(&call, &format, written, code))
}

/// Publishes the write's event and answers the written object.
pub(super) fn answer_write(
    call: &Call<'_>,
    format: &crate::generic::negotiate::ResponseFormat,
    written: Written,
    code: StatusCode,
) -> Response {
    call.publish(written.event, &written.object);
    respond::object(call.def, format, code, &written.object)
}

/// Fills in and checks what the URL decides: apiVersion, kind, namespace and (for updates) the name, with
/// kube-apiserver's 400 messages for mismatches.
pub(super) fn check_body(
    call: &Call<'_>,
    object: &mut Value,
    url_name: Option<&str>,
) -> Result<(), ApiError> {
    // A JSON patch may have replaced the whole document; everything below indexes into an object.
    if !object.is_object() {
        return Err(ApiError::invalid("the object must be a JSON object"));
    }
    let group_version = call.group_version();
    fill_or_check(object, "apiVersion", &group_version, |given| {
        format!(
            "the API version in the data ({given}) does not match the expected API version ({group_version})"
        )
    })?;
    let kind = call.def.kind;
    fill_or_check(object, "kind", kind, |given| {
        format!("the kind in the data ({given}) does not match the expected kind ({kind})")
    })?;
    if !object["metadata"].is_object() && !object["metadata"].is_null() {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    if let Some(namespace) = &call.info.namespace {
        let meta = &mut object["metadata"];
        match meta["namespace"].as_str().filter(|ns| !ns.is_empty()) {
            Some(given) if given != namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            Some(_) => {}
            None => meta["namespace"] = namespace.clone().into(),
        }
    }
    if let Some(url_name) = url_name {
        let given = object["metadata"]["name"].as_str().unwrap_or_default();
        if given != url_name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({url_name})"
            )));
        }
    }
    Ok(())
}

fn fill_or_check(
    object: &mut Value,
    field: &str,
    expected: &str,
    mismatch: impl FnOnce(&str) -> String,
) -> Result<(), ApiError> {
    match object[field].as_str().filter(|v| !v.is_empty()) {
        Some(given) if given != expected => Err(ApiError::bad_request(mismatch(given))),
        Some(_) => Ok(()),
        None => {
            object[field] = expected.into();
            Ok(())
        }
    }
}

/// DELETE of an item: the object (200), or a Success Status when the storage only accepted the deletion.
pub async fn delete(mut call: Call<'_>) -> Result<Response, ApiError> {
    let name = call.name()?.to_owned();
    let format = call.format(Answering::Object)?;
    let options = delete_options(&call)?;
    call.ctx.dry_run |= body_dry_run(&options)?;
    let deleted = call
        .within(call.def.storage.delete(&call.ctx, &name, &options))
        .await?;
    Ok(match deleted {
        Deleted::Object { object, event } => {
            call.publish(event, &object);
            respond::object(call.def, &format, StatusCode::OK, &object)
        }
        Deleted::Success { object, event } => {
            let uid = object.as_ref().map(|o| o["metadata"]["uid"].clone());
            if let Some(object) = &object {
                call.publish(event, object);
            }
            let mut details = json!({"name": name, "group": call.info.group, "kind": call.def.plural});
            if let Some(uid) = uid.filter(Value::is_string) {
                details["uid"] = uid;
            }
            respond::success(&format, details)
        }
    })
}

/// DeleteOptions from the body (JSON or YAML) and the query (`gracePeriodSeconds`, `propagationPolicy`,
/// `orphanDependents`), the query winning as in kube-apiserver.
fn delete_options(call: &Call<'_>) -> Result<DeleteOptions, ApiError> {
    let mut options = if call.body.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else {
        let body_type = negotiate::body_type(call.headers, false)?;
        let value = params::decode(body_type, &call.body)?;
        serde_json::from_value(value)
            .map_err(|e| ApiError::bad_request(format!("the body is not a valid DeleteOptions: {e}")))?
    };
    if let Some(raw) = call.query.get("gracePeriodSeconds") {
        options.grace_period_seconds = Some(raw.parse().map_err(|_| {
            ApiError::bad_request(format!(
                "invalid gracePeriodSeconds {raw:?}: expected a whole number"
            ))
        })?);
    }
    if let Some(policy) = call.query.get("propagationPolicy") {
        options.propagation_policy = Some(policy.to_owned());
    }
    if call.query.get("orphanDependents").is_some() {
        options.orphan_dependents = Some(call.query.flag("orphanDependents")?);
    }
    Ok(options)
}

/// `dryRun` inside DeleteOptions: `["All"]` or nothing (422 otherwise, as for the query parameter).
fn body_dry_run(options: &DeleteOptions) -> Result<bool, ApiError> {
    let values = options.dry_run.as_deref().unwrap_or_default();
    if let Some(bad) = values.iter().find(|v| *v != "All") {
        return Err(ApiError::invalid(format!(
            "invalid dryRun value {bad:?}: the only supported value is \"All\""
        )));
    }
    Ok(!values.is_empty())
}

/// A request to `<resource>/<name>/<subresource>`: handed to the subresource's handler when it serves the verb.
pub async fn subresource(call: Call<'_>, subresource: &str, method: Method) -> Result<Response, ApiError> {
    let def = call
        .def
        .subresources
        .iter()
        .find(|s| s.name == subresource)
        .ok_or_else(request_info::not_found)?;
    if !def.verbs.contains(&call.info.verb) {
        return Err(method_not_allowed());
    }
    let name = call.name()?.to_owned();
    let broadcaster = call.broadcaster().cloned();
    let request = SubresourceRequest {
        ctx: call.ctx,
        name,
        method,
        headers: call.headers.clone(),
        body: call.body,
    };
    let mut response = def.handler.handle(request).await?;
    if let Some(event) = response.extensions_mut().remove::<ParentEvent>()
        && let Some(broadcaster) = broadcaster
    {
        broadcaster.publish(event.kind, event.object);
    }
    Ok(response)
}
