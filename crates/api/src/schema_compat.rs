//! Rewrites of the generated CRD schemas so that they accept what v0.1.5's CRDs accepted and reject what they
//! rejected, where the schema derived from the Rust types differs: an optional `spec`, the quantity pattern, and
//! object references whose `name` may be empty. Also the one rewrite that keeps a CRD small enough for
//! `kubectl apply` without `--server-side`: the embedded Container and Lifecycle types keep their structure and
//! validation but not the descriptions of their nested fields (Kubernetes documents those types).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use serde_json::{Value, json};

/// The pattern Kubernetes gives every `resource.Quantity` (limits, requests, `divisor`, `sizeLimit`), so an invalid
/// quantity is rejected when the object is written, not at every later apply of the Deployment.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Fields of the embedded Kubernetes types that are quantities (besides the values of resource maps).
const QUANTITY_FIELDS: &[&str] = &["divisor", "sizeLimit"];

/// The description Kubernetes gives the `name` of a local object reference that may be empty for backwards
/// compatibility; Kubernetes' own CRDs default it to `""` instead of requiring it.
const MAY_BE_EMPTY_NAME: &str = "Name of the referent. This field is effectively required, but due to backwards compatibility is allowed to be empty.";

/// Spec fields holding whole Kubernetes Container (or Lifecycle) types, whose nested descriptions are dropped: with
/// them, a kind's CRD would outgrow the 256 KiB annotation client-side `kubectl apply` writes.
const UNDOCUMENTED_INSIDE: &[&str] = &["initContainers", "extraContainers", "lifecycle"];

/// Whether an object of the kind may omit `spec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spec {
    /// `spec` is required.
    Required,
    /// `spec` may be omitted; the API server then stores `spec: {}` with the defaults of its fields.
    Optional,
}

/// `crd` with its schema rewritten; see the module documentation.
pub fn adjust(mut crd: CustomResourceDefinition, spec: Spec) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        if let Some(adjusted) = serde_json::to_value(&*schema)
            .ok()
            .map(|value| adjust_schema(value, spec))
            .and_then(|value| serde_json::from_value::<JSONSchemaProps>(value).ok())
        {
            *schema = adjusted;
        }
    }
    crd
}

/// `crd` whose objects always show a `status`, `{}` until the controller writes one: Flux evaluates a health check's
/// CEL with the object's top-level fields as its variables, so on an object without `status` every expression that
/// names it fails (`no such attribute`), even `has(status.phase)`. kube-apiserver fills the default in when it reads
/// the object.
pub fn status_defaults_to_empty(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let status = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|root| root.properties.as_mut())
            .and_then(|properties| properties.get_mut("status"));
        if let Some(status) = status {
            status.default =
                Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON(json!({})));
        }
    }
    crd
}

/// The rewrite of one version's root schema.
pub fn adjust_schema(mut root: Value, spec: Spec) -> Value {
    walk(&mut root, None);
    if let Some(fields) = root
        .pointer_mut("/properties/spec/properties")
        .and_then(Value::as_object_mut)
    {
        for (_, field) in fields
            .iter_mut()
            .filter(|(name, _)| UNDOCUMENTED_INSIDE.contains(&name.as_str()))
        {
            for child in ["items", "properties"] {
                if let Some(nested) = field.get_mut(child) {
                    drop_descriptions(nested);
                }
            }
        }
    }
    if spec == Spec::Optional {
        remove_required(&mut root, "spec");
        if let Some(spec) = root
            .pointer_mut("/properties/spec")
            .and_then(Value::as_object_mut)
        {
            spec.insert("default".to_owned(), json!({}));
        }
    }
    root
}

fn walk(node: &mut Value, key: Option<&str>) {
    let Some(object) = node.as_object_mut() else {
        return;
    };
    let is_int_or_string = object.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    if is_int_or_string && key.is_some_and(|k| QUANTITY_FIELDS.contains(&k) || k == "additionalProperties") {
        object.insert(
            "anyOf".to_owned(),
            json!([{"type": "integer"}, {"type": "string"}]),
        );
        object.insert("pattern".to_owned(), json!(QUANTITY_PATTERN));
    }
    let empty_name_allowed = object
        .get("properties")
        .and_then(|p| p.pointer("/name/description"))
        .and_then(Value::as_str)
        .is_some_and(|d| d.starts_with(MAY_BE_EMPTY_NAME));
    if empty_name_allowed {
        remove_required(node, "name");
        if let Some(name) = node
            .pointer_mut("/properties/name")
            .and_then(Value::as_object_mut)
        {
            name.insert("default".to_owned(), json!(""));
        }
    }
    let Some(object) = node.as_object_mut() else {
        return;
    };
    if let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) {
        for (name, property) in properties.iter_mut() {
            walk(property, Some(name));
        }
    }
    for child in ["items", "additionalProperties"] {
        if let Some(value) = object.get_mut(child) {
            walk(value, Some(child));
        }
    }
}

/// Removes every `description` in `node` and below (a property named `description` stays).
fn drop_descriptions(node: &mut Value) {
    match node {
        Value::Object(object) => {
            if object.get("description").is_some_and(Value::is_string) {
                object.remove("description");
            }
            for (key, child) in object.iter_mut() {
                if key == "properties" {
                    // The children of `properties` are field names, any of which may be called `description`.
                    if let Some(fields) = child.as_object_mut() {
                        fields.values_mut().for_each(drop_descriptions);
                    }
                } else {
                    drop_descriptions(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(drop_descriptions),
        _ => {}
    }
}

fn remove_required(node: &mut Value, field: &str) {
    let Some(object) = node.as_object_mut() else {
        return;
    };
    let now_empty = match object.get_mut("required").and_then(Value::as_array_mut) {
        Some(required) => {
            required.retain(|r| r.as_str() != Some(field));
            required.is_empty()
        }
        None => false,
    };
    if now_empty {
        object.remove("required");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_containers_keep_their_structure_without_nested_descriptions() {
        let container = json!({"type": "object", "description": "A container.", "required": ["name"],
            "properties": {"name": {"type": "string", "description": "Name."},
                "description": {"type": "string", "description": "A field named description."}}});
        let root = json!({"properties": {"spec": {"properties": {
            "extraContainers": {"type": "array", "description": "Sidecars.", "items": container},
            "volumes": {"type": "array", "description": "Volumes.", "items": container},
        }}}});
        let adjusted = adjust_schema(root, Spec::Required);
        let spec = &adjusted["properties"]["spec"]["properties"];
        assert_eq!(
            spec["extraContainers"]["description"], "Sidecars.",
            "the field keeps its own"
        );
        let item = &spec["extraContainers"]["items"];
        assert!(item.get("description").is_none());
        assert!(item.pointer("/properties/name/description").is_none());
        assert_eq!(item["required"], json!(["name"]));
        assert_eq!(
            item.pointer("/properties/description/type"),
            Some(&json!("string"))
        );
        assert_eq!(
            spec["volumes"]["items"]["description"], "A container.",
            "other fields are untouched"
        );
    }

    #[test]
    fn optional_spec_defaults_to_an_empty_object() {
        let root = json!({"required": ["spec"], "properties": {"spec": {"type": "object"}}});
        let adjusted = adjust_schema(root.clone(), Spec::Optional);
        assert!(adjusted.get("required").is_none());
        assert_eq!(adjusted.pointer("/properties/spec/default"), Some(&json!({})));
        let kept = adjust_schema(root, Spec::Required);
        assert_eq!(kept["required"], json!(["spec"]));
        assert!(kept.pointer("/properties/spec/default").is_none());
    }

    #[test]
    fn quantities_get_the_kubernetes_pattern_and_other_fields_do_not() {
        let quantity = json!({"x-kubernetes-int-or-string": true});
        let root = json!({"properties": {
            "divisor": quantity,
            "limits": {"type": "object", "additionalProperties": quantity},
            "port": quantity,
        }});
        let adjusted = adjust_schema(root, Spec::Required);
        for path in ["/properties/divisor", "/properties/limits/additionalProperties"] {
            assert_eq!(
                adjusted.pointer(&format!("{path}/pattern")),
                Some(&json!(QUANTITY_PATTERN)),
                "{path}"
            );
            assert_eq!(
                adjusted.pointer(&format!("{path}/anyOf")),
                Some(&json!([{"type": "integer"}, {"type": "string"}]))
            );
        }
        assert!(adjusted.pointer("/properties/port/pattern").is_none());
    }

    #[test]
    fn a_reference_name_that_may_be_empty_defaults_to_empty() {
        let root = json!({"properties": {"secretKeyRef": {
            "required": ["key", "name"],
            "properties": {
                "key": {"type": "string"},
                "name": {"type": "string", "description": format!("{MAY_BE_EMPTY_NAME} More info: x")},
            },
        }, "ref": {
            "required": ["name"],
            "properties": {"name": {"type": "string", "description": "Name of the Secret."}},
        }}});
        let adjusted = adjust_schema(root, Spec::Required);
        assert_eq!(
            adjusted.pointer("/properties/secretKeyRef/required"),
            Some(&json!(["key"]))
        );
        assert_eq!(
            adjusted.pointer("/properties/secretKeyRef/properties/name/default"),
            Some(&json!(""))
        );
        assert_eq!(
            adjusted.pointer("/properties/ref/required"),
            Some(&json!(["name"])),
            "our own references stay required"
        );
    }
}
