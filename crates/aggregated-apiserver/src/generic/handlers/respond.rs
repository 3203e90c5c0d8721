//! Encodes answers in the negotiated representation: JSON, YAML, Table or PartialObjectMetadata(List).

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::generic::negotiate::ResponseFormat;
use crate::generic::registry::ResourceDef;
use crate::generic::status::ApiError;
use crate::generic::table;

const JSON: &str = "application/json";
const YAML: &str = "application/yaml";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const PARTIAL: &str = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io";
const PARTIAL_LIST: &str = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";

/// One object (get, create, update, patch, delete).
pub fn object(def: &ResourceDef, format: &ResponseFormat, code: StatusCode, object: &Value) -> Response {
    match format {
        ResponseFormat::Json => encoded(code, JSON, object),
        ResponseFormat::Yaml => yaml(code, object),
        ResponseFormat::Table { include_object } => {
            let list_meta = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
            let table = table::table(def, std::slice::from_ref(object), list_meta, *include_object);
            encoded(code, TABLE, &table)
        }
        ResponseFormat::PartialObjectMetadata | ResponseFormat::PartialObjectMetadataList => {
            encoded(code, PARTIAL, &table::partial_object_metadata(object))
        }
    }
}

/// A list with `metadata` `list_meta`. The objects are borrowed: a list is encoded without copying them.
pub fn list(
    def: &ResourceDef,
    group_version: &str,
    format: &ResponseFormat,
    items: &[Value],
    list_meta: Value,
) -> Response {
    if *format == ResponseFormat::Yaml {
        let list = ListBody {
            api_version: group_version,
            kind: def.list_kind,
            metadata: list_meta,
            items,
        };
        return yaml(StatusCode::OK, &list);
    }
    match list_json(def, group_version, format, items, list_meta, table::unix_now()) {
        Ok(text) => encoded_list(format, text),
        Err(e) => ApiError::internal(format!("could not encode the answer as JSON: {e}")).into_response(),
    }
}

/// The JSON text of a list as JSON, Table (Age cells at `now_unix_seconds`) or PartialObjectMetadataList.
pub(crate) fn list_json(
    def: &ResourceDef,
    group_version: &str,
    format: &ResponseFormat,
    items: &[Value],
    list_meta: Value,
    now_unix_seconds: i64,
) -> serde_json::Result<String> {
    match format {
        ResponseFormat::Table { include_object } => serde_json::to_string(&table::table_at(
            def,
            items,
            list_meta,
            *include_object,
            now_unix_seconds,
        )),
        ResponseFormat::PartialObjectMetadata | ResponseFormat::PartialObjectMetadataList => {
            serde_json::to_string(&table::partial_object_metadata_list(items, list_meta))
        }
        ResponseFormat::Json | ResponseFormat::Yaml => serde_json::to_string(&ListBody {
            api_version: group_version,
            kind: def.list_kind,
            metadata: list_meta,
            items,
        }),
    }
}

/// A list already encoded as `format` (JSON, Table or PartialObjectMetadataList).
pub fn encoded_list(format: &ResponseFormat, text: String) -> Response {
    let content_type = match format {
        ResponseFormat::Table { .. } => TABLE,
        ResponseFormat::PartialObjectMetadata | ResponseFormat::PartialObjectMetadataList => PARTIAL_LIST,
        ResponseFormat::Json | ResponseFormat::Yaml => JSON,
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], text).into_response()
}

/// A `<Kind>List` as JSON or YAML.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ListBody<'a> {
    api_version: &'a str,
    kind: &'a str,
    metadata: Value,
    items: &'a [Value],
}

/// A `Status` with `status: Success` (a delete the storage answers without an object).
pub fn success(format: &ResponseFormat, details: Value) -> Response {
    let status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    });
    if *format == ResponseFormat::Yaml {
        yaml(StatusCode::OK, &status)
    } else {
        encoded(StatusCode::OK, JSON, &status)
    }
}

fn encoded(code: StatusCode, content_type: &'static str, value: &impl serde::Serialize) -> Response {
    match serde_json::to_string(value) {
        Ok(text) => (code, [(header::CONTENT_TYPE, content_type)], text).into_response(),
        Err(e) => ApiError::internal(format!("could not encode the answer as JSON: {e}")).into_response(),
    }
}

fn yaml(code: StatusCode, value: &impl serde::Serialize) -> Response {
    match serde_saphyr::to_string(value) {
        Ok(text) => (code, [(header::CONTENT_TYPE, YAML)], text).into_response(),
        Err(e) => ApiError::internal(format!("could not encode the answer as YAML: {e}")).into_response(),
    }
}
