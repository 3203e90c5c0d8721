//! PATCH: JSON merge patch and JSON patch over the current object, and server-side apply as a best effort (the
//! applied fields merged over the current object, or the object created when missing; no field ownership is kept).
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

async fn patch_existing(
    call: Call<'_>,
    name: &str,
    body_type: BodyType,
    format: &ResponseFormat,
) -> Result<Response, ApiError> {
    let mut object = call.within(call.def.storage.get(&call.ctx, name)).await?;
    if body_type == BodyType::JsonPatch {
        apply_json_patch(&mut object, &call.body)?;
    } else {
        let patch = params::decode(BodyType::MergePatch, &call.body)?;
        json_patch::merge(&mut object, &patch);
    }
    check_body(&call, &mut object, Some(name))?;
    let written = call
        .within(call.def.storage.update(&call.ctx, name, object, false))
        .await?;
    Ok(answer_write(&call, format, written, StatusCode::OK))
}

fn apply_json_patch(object: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    let patch: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not a valid JSON patch: {e}")))?;
    json_patch::patch(object, &patch.0)
        .map_err(|e| ApiError::invalid(format!("the JSON patch could not be applied: {e}")))
}

/// Server-side apply: `fieldManager` is required (422, as kube-apiserver answers); the applied object is merged
/// over the current one, or created through the update path when there is none.
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
    let object = match call.within(call.def.storage.get(&call.ctx, name)).await {
        Ok(mut current) => {
            json_patch::merge(&mut current, &applied);
            current
        }
        Err(err) if err.code == 404 => applied,
        Err(err) => return Err(err),
    };
    let written = call
        .within(call.def.storage.update(&call.ctx, name, object, true))
        .await?;
    let code = if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(answer_write(&call, format, written, code))
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
}
