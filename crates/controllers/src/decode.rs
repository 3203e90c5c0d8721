//! Decoding of one watched custom object at a time, with an error that names the field and what was expected but never
//! the value (a spec can hold a credential), so one object the Rust types cannot read is reported and skipped instead
//! of failing the list of every object of its kind.

use kube::api::DynamicObject;
use serde::de::DeserializeOwned;

/// Why an object cannot be decoded: the field and what was wrong with it, without the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{path}`: {problem}")]
pub struct DecodeError {
    /// JSON path of the field, for example `spec.replicas`.
    pub path: String,
    /// What was wrong, for example `invalid value, expected i32`.
    pub problem: String,
}

/// The typed object of `object`.
pub fn decode<K: DeserializeOwned>(object: &DynamicObject) -> Result<K, DecodeError> {
    let value = serde_json::to_value(object).map_err(|error| DecodeError {
        path: ".".to_owned(),
        problem: without_values(&error.to_string()),
    })?;
    serde_path_to_error::deserialize(value).map_err(|error| DecodeError {
        path: error.path().to_string(),
        problem: without_values(&error.inner().to_string()),
    })
}

/// Serde's message without the offending value: `invalid type: string "x", expected i32` becomes
/// `invalid type, expected i32`. A message of another shape is replaced, as it may quote the value.
fn without_values(message: &str) -> String {
    if message.starts_with("missing field") {
        return message.to_owned();
    }
    if let Some((head, expected)) = message.split_once(", expected ") {
        let kind = head
            .split([':', '`', '"'])
            .next()
            .unwrap_or_default()
            .trim_end_matches(|c: char| c.is_whitespace() || c.is_ascii_digit())
            .trim();
        return format!("{kind}, expected {expected}");
    }
    "the value does not fit the field's type".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use coder_k8s_api::workspace_proxy::CoderWorkspaceProxy;
    use serde_json::json;

    fn object(spec: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "coder.com/v1alpha1",
            "kind": "CoderWorkspaceProxy",
            "metadata": {"name": "p", "namespace": "team"},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn a_readable_object_decodes() {
        let proxy: CoderWorkspaceProxy = decode(&object(json!({"replicas": 2}))).unwrap();
        assert_eq!(proxy.spec.replicas, Some(2));
        assert_eq!(proxy.metadata.name.as_deref(), Some("p"));
    }

    #[test]
    fn the_error_names_the_field_but_not_the_value() {
        let error =
            decode::<CoderWorkspaceProxy>(&object(json!({"replicas": 4_294_967_296_u64}))).unwrap_err();
        assert_eq!(error.path, "spec.replicas");
        assert_eq!(error.problem, "invalid value, expected i32");
        assert!(!error.to_string().contains("4294967296"), "{error}");

        let error =
            decode::<CoderWorkspaceProxy>(&object(json!({"derpOnly": "hunter2-secret"}))).unwrap_err();
        assert_eq!(error.path, "spec.derpOnly");
        assert_eq!(error.problem, "invalid type, expected a boolean");
        assert!(!error.to_string().contains("hunter2"), "{error}");

        let error =
            decode::<CoderWorkspaceProxy>(&object(json!({"bootstrap": {"coderURL": "u"}}))).unwrap_err();
        assert_eq!(
            error.to_string(),
            "field `spec.bootstrap`: missing field `credentialsSecretRef`"
        );
    }

    #[test]
    fn unknown_message_shapes_are_replaced() {
        assert_eq!(
            without_values("unknown variant `secret-value`, expected one of `A`, `B`"),
            "unknown variant, expected one of `A`, `B`"
        );
        assert_eq!(
            without_values("invalid length 3, expected fewer elements in array"),
            "invalid length, expected fewer elements in array"
        );
        assert_eq!(
            without_values("premature end of input near secret-value"),
            "the value does not fit the field's type"
        );
    }
}
