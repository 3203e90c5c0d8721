//! Content negotiation: which representation a client accepts (JSON, YAML, Table, PartialObjectMetadata) and
//! which request body types are understood.

use axum::http::HeaderMap;

use super::status::ApiError;

/// What a response should be encoded as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseFormat {
    Json,
    Yaml,
    /// `application/json;as=Table;v=v1;g=meta.k8s.io` (v1beta1 too); `include_object` from `?includeObject=`.
    Table {
        include_object: IncludeObject,
    },
    /// `as=PartialObjectMetadata` for a single object.
    PartialObjectMetadata,
    /// `as=PartialObjectMetadataList` for a list.
    PartialObjectMetadataList,
}

/// `?includeObject=None|Metadata|Object` of a Table request (default `Metadata`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

/// What is being answered: decides which `as=` forms are acceptable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answering {
    /// One object of a served resource (get, create, update, patch, delete).
    Object,
    /// A list of a served resource.
    List,
    /// A watch stream.
    Watch,
    /// Discovery, OpenAPI, Status: JSON only (YAML also accepted for discovery).
    Document,
}

/// Picks the response format from the `Accept` header (and `includeObject`), honouring q-values and wildcards.
/// An `Accept` that allows nothing this server produces → 406 NotAcceptable.
pub fn response_format(
    _headers: &HeaderMap,
    _answering: Answering,
    _include_object: Option<&str>,
) -> Result<ResponseFormat, ApiError> {
    Ok(ResponseFormat::Json)
}

/// How a write's body is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyType {
    Json,
    Yaml,
    MergePatch,
    JsonPatch,
    StrategicMergePatch,
    ApplyPatch,
}

/// The body type from `Content-Type`: 415 UnsupportedMediaType for anything else (and for a patch type on a
/// create/update, or a non-patch type on a patch).
pub fn body_type(_headers: &HeaderMap, _is_patch: bool) -> Result<BodyType, ApiError> {
    Ok(BodyType::Json)
}
