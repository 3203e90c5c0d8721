//! PATCH: JSON merge patch and JSON patch over the current object, and server-side apply as a best effort (the
//! applied fields merged over the current object, or the object created when missing, which needs `create` too; no
//! field ownership is kept).
//! Strategic merge patch is refused with 415, as kube-apiserver refuses it for custom resources.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::write::{answer_write, check_body};
use super::{Call, params};
use crate::generic::negotiate::{self, Answering, BodyType, ResponseFormat};
use crate::generic::status::ApiError;

pub async fn patch(call: Call<'_>) -> Result<Response, ApiError> {
    let name = call.name()?.to_owned();
    let body_type = negotiate::body_type(call.headers, true)?;
    let format = call.format(Answering::Object)?;
    // A patch reads the current object first: a write the storage refuses must not even reach its backend.
    call.def.storage.check_write(&call.ctx)?;
    match body_type {
        BodyType::MergePatch | BodyType::JsonPatch => patch_existing(call, &name, body_type, &format).await,
        BodyType::ApplyPatch => apply(call, &name, &format).await,
        BodyType::StrategicMergePatch | BodyType::Json | BodyType::Yaml => {
            Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ))
        }
    }
}

/// How often a patch that names no resourceVersion is applied: after a 409 Conflict caused by a change of the object
/// between the read and the write, it is applied again to the object as it is now, as kube-apiserver retries such
/// patches against the latest object.
const PATCH_ATTEMPTS: usize = 5;

async fn patch_existing(
    call: Call<'_>,
    name: &str,
    body_type: BodyType,
    format: &ResponseFormat,
) -> Result<Response, ApiError> {
    let pinned = pins_resource_version(body_type, &call.body);
    let mut conflict: Option<(Value, ApiError)> = None;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut object = call.within(call.def.storage.patch_base(&call.ctx, name)).await?;
        let version = object["metadata"]["resourceVersion"].clone();
        if let Some((seen, err)) = conflict.take()
            && seen == version
        {
            // Nothing changed since the conflict: applying the patch again cannot help.
            return Err(err);
        }
        if body_type == BodyType::JsonPatch {
            apply_json_patch(&mut object, &call.body)?;
        } else {
            let patch = params::decode(BodyType::MergePatch, &call.body)?;
            json_patch::merge(&mut object, &patch);
        }
        check_body(&call, &mut object, Some(name))?;
        match call
            .within(call.def.storage.update(&call.ctx, name, object, false))
            .await
        {
            Ok(written) => return Ok(answer_write(&call, format, written, StatusCode::OK)),
            Err(err) if attempt < PATCH_ATTEMPTS && retryable(&err, pinned) => {
                conflict = Some((version, err))
            }
            Err(err) => return Err(err),
        }
    }
}

/// A 409 Conflict (not AlreadyExists) of a patch that did not pin a resourceVersion.
fn retryable(err: &ApiError, pinned: bool) -> bool {
    err.code == 409 && err.reason == "Conflict" && !pinned
}

/// Whether the patch names `metadata.resourceVersion`: then a conflict is the caller's to resolve.
fn pins_resource_version(body_type: BodyType, body: &[u8]) -> bool {
    match body_type {
        BodyType::JsonPatch => serde_json::from_slice::<json_patch::Patch>(body).is_ok_and(|patch| {
            patch.0.iter().any(|op| {
                let path = match op {
                    json_patch::PatchOperation::Add(o) => &o.path,
                    json_patch::PatchOperation::Remove(o) => &o.path,
                    json_patch::PatchOperation::Replace(o) => &o.path,
                    json_patch::PatchOperation::Move(o) => &o.path,
                    json_patch::PatchOperation::Copy(o) => &o.path,
                    json_patch::PatchOperation::Test(o) => &o.path,
                };
                path.as_str() == "/metadata/resourceVersion"
            })
        }),
        _ => params::decode(body_type, body).is_ok_and(|patch| {
            patch["metadata"]["resourceVersion"]
                .as_str()
                .is_some_and(|v| !v.is_empty())
        }),
    }
}

fn apply_json_patch(object: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    let patch: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not a valid JSON patch: {e}")))?;
    json_patch::patch(object, &patch.0)
        .map_err(|e| ApiError::invalid(format!("the JSON patch could not be applied: {e}")))
}

/// Server-side apply: `fieldManager` is required (422, as kube-apiserver answers); the applied object is merged
/// over the current one, or, when there is none, created through the update path once the caller has passed a
/// second authorization with the verb `create`.
async fn apply(call: Call<'_>, name: &str, format: &ResponseFormat) -> Result<Response, ApiError> {
    if call.query.get("fieldManager").is_none_or(str::is_empty) {
        return Err(ApiError::invalid(
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    }
    let mut applied = params::decode(BodyType::ApplyPatch, &call.body)?;
    if let Some(meta) = applied["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
    check_body(&call, &mut applied, Some(name))?;
    let pinned = applied["metadata"]["resourceVersion"]
        .as_str()
        .is_some_and(|v| !v.is_empty());
    let mut conflict: Option<(Value, ApiError)> = None;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let target = applied_to_current(&call, name, &applied).await?;
        if let Some((seen, err)) = conflict.take()
            && seen == target.version
        {
            return Err(err);
        }
        if target.creates {
            call.authorize_create().await?;
        }
        match call
            .within(
                call.def
                    .storage
                    .update(&call.ctx, name, target.object, target.creates),
            )
            .await
        {
            Ok(written) => {
                let code = if written.created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                return Ok(answer_write(&call, format, written, code));
            }
            // Deleted between the read and the write: applied again, now as a create (with its authorization).
            Err(err) if attempt < PATCH_ATTEMPTS && err.code == 404 && !target.creates => {}
            Err(err) if attempt < PATCH_ATTEMPTS && retryable(&err, pinned) => {
                conflict = Some((target.version, err))
            }
            Err(err) => return Err(err),
        }
    }
}

/// What one apply attempt writes: the applied fields over the current object, or the applied object alone when
/// there is none (`creates`).
struct ApplyTarget {
    object: Value,
    /// The current object's resourceVersion (null when it is missing).
    version: Value,
    creates: bool,
}

async fn applied_to_current(call: &Call<'_>, name: &str, applied: &Value) -> Result<ApplyTarget, ApiError> {
    match call.within(call.def.storage.patch_base(&call.ctx, name)).await {
        Ok(mut current) => {
            let version = current["metadata"]["resourceVersion"].clone();
            json_patch::merge(&mut current, applied);
            Ok(ApplyTarget {
                object: current,
                version,
                creates: false,
            })
        }
        Err(err) if err.code == 404 => Ok(ApplyTarget {
            object: applied.clone(),
            version: Value::Null,
            creates: true,
        }),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_errors_are_classified() {
        let mut object = json!({"spec": {"n": 1}});
        apply_json_patch(&mut object, br#"[{"op":"replace","path":"/spec/n","value":2}]"#).expect("patch");
        assert_eq!(object["spec"]["n"], 2);
        let err = apply_json_patch(&mut object, br#"[{"op":"test","path":"/spec/n","value":9}]"#)
            .expect_err("failed test op");
        assert_eq!(err.code, 422);
        let err = apply_json_patch(&mut object, b"{}").expect_err("not a patch");
        assert_eq!(err.code, 400);
    }

    #[test]
    fn only_patches_that_name_a_resource_version_pin_it() {
        let pins = |body_type, body: &str| pins_resource_version(body_type, body.as_bytes());
        assert!(pins(
            BodyType::MergePatch,
            r#"{"metadata":{"resourceVersion":"7"}}"#
        ));
        assert!(!pins(BodyType::MergePatch, r#"{"spec":{"running":false}}"#));
        assert!(!pins(
            BodyType::MergePatch,
            r#"{"metadata":{"resourceVersion":null}}"#
        ));
        assert!(pins(
            BodyType::JsonPatch,
            r#"[{"op":"test","path":"/metadata/resourceVersion","value":"7"}]"#
        ));
        assert!(!pins(
            BodyType::JsonPatch,
            r#"[{"op":"replace","path":"/spec/n","value":2}]"#
        ));
        assert!(retryable(&ApiError::conflict("changed"), false));
        assert!(!retryable(&ApiError::conflict("changed"), true));
        assert!(!retryable(&ApiError::already_exists("g", "r", "n"), false));
        assert!(!retryable(&ApiError::bad_request("no"), false));
    }
}
