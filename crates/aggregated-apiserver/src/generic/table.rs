//! Table and PartialObjectMetadata representations of objects and lists.

use serde_json::Value;

use super::negotiate::IncludeObject;
use super::registry::ResourceDef;

/// A `meta.k8s.io/v1` Table of `objects`: `Name`, the resource's columns, `Age`; each row's `object` per
/// `include`. `list_metadata` is the list's `metadata` (resourceVersion, continue).
pub fn table(
    _def: &ResourceDef,
    _objects: &[Value],
    _list_metadata: Value,
    _include: IncludeObject,
) -> Value {
    Value::Null
}

/// `meta.k8s.io/v1` PartialObjectMetadata of one object (apiVersion/kind of the object kept as kube does).
pub fn partial_object_metadata(_object: &Value) -> Value {
    Value::Null
}

/// `meta.k8s.io/v1` PartialObjectMetadataList of `objects`.
pub fn partial_object_metadata_list(_objects: &[Value], _list_metadata: Value) -> Value {
    Value::Null
}
