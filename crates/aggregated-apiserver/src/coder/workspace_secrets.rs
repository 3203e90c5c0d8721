//! Workspace parameter values from Secrets. The server reads Secrets with its own (the operator's) credentials, so
//! a value is read only after the server's authorizer (a SubjectAccessReview) says the caller may `get` that
//! Secret: otherwise anyone allowed to write workspaces could copy any Secret of the namespace into Coder. Every
//! reference of a write is authorized before any Secret is read and before anything reaches Coder.
//!
//! Coder keeps only the values, so the server records which parameter of which workspace came from which Secret
//! key: one ConfigMap per workspace in the server's own namespace, `ck8s-wsparams-<hash of namespace/name>`, with
//! the names and keys only, never a value. Reads show a recorded parameter as its reference instead of its value.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use coder_k8s_api::aggregation::{CoderWorkspaceSecretKeyRef, CoderWorkspaceSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use uuid::Uuid;

use super::field_errors::FieldError;
use super::workspace_settings::{FieldErrors, parameter_field};
use crate::generic::caller::{ExtraAction, authorize};
use crate::generic::kube_call::{REVIEW_TIMEOUT, kube_message};
use crate::generic::{ApiError, RequestContext};

/// The label every reference record carries.
pub const RECORD_LABEL: &str = "aggregation.coder.com/parameter-references";
const RECORD_PREFIX: &str = "ck8s-wsparams-";

/// Which parameters of one workspace came from which Secret keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The Coder workspace the record was written for, once known: a record of an earlier workspace with the same
    /// name does not apply.
    pub workspace_id: Option<Uuid>,
    pub references: BTreeMap<String, CoderWorkspaceSecretKeyRef>,
}

/// What the workspace storage needs of Kubernetes for parameters from Secrets (the caller's permission is the
/// server authorizer's to decide).
#[async_trait]
pub trait ParameterSecrets: Send + Sync {
    /// The data of Secret `secret` in `namespace`; `None` when it does not exist.
    async fn read(
        &self,
        namespace: &str,
        secret: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ApiError>;
    /// The record of workspace `name` in `namespace`.
    async fn recorded(&self, namespace: &str, name: &str) -> Result<Option<Record>, ApiError>;
    /// Writes the record of workspace `name` (removes it when it holds no reference).
    async fn record(&self, namespace: &str, name: &str, record: &Record) -> Result<(), ApiError>;
}

/// The values of the spec's Secret references, by parameter name. The caller's `get` of every Secret is authorized
/// first (a denial is kube-apiserver's 403 and nothing is read); then each value is read, and a missing Secret or
/// key, or a value that is not UTF-8 text, is a 422 naming the field (never the value). Without `secrets` a
/// reference is refused.
pub async fn secret_values(
    secrets: Option<&Arc<dyn ParameterSecrets>>,
    ctx: &RequestContext,
    namespace: &str,
    name: &str,
    spec: &CoderWorkspaceSpec,
) -> Result<BTreeMap<String, String>, ApiError> {
    let references: Vec<(usize, &str, &CoderWorkspaceSecretKeyRef)> = spec
        .parameters
        .iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, p)| Some((i, p.name.as_str(), &p.value_from.as_ref()?.secret_key_ref)))
        .collect();
    if references.is_empty() {
        return Ok(BTreeMap::new());
    }
    let Some(secrets) = secrets else {
        let mut errors = FieldErrors::default();
        for (index, _, _) in &references {
            errors.push(FieldError::forbidden(
                format!("{}.valueFrom", parameter_field(*index)),
                "values from Secrets need the server's own namespace to record references in (set POD_NAMESPACE)",
            ));
        }
        return errors.into_result(name).map(|()| BTreeMap::new());
    };
    for (_, _, reference) in &references {
        authorize(
            ctx,
            &ExtraAction::core("get", "secrets", namespace, &reference.name),
        )
        .await?;
    }
    let mut data: BTreeMap<&str, Option<BTreeMap<String, Vec<u8>>>> = BTreeMap::new();
    let mut errors = FieldErrors::default();
    let mut values = BTreeMap::new();
    for (index, parameter, reference) in references {
        if !data.contains_key(reference.name.as_str()) {
            let read = secrets.read(namespace, &reference.name).await?;
            data.insert(&reference.name, read);
        }
        let field = format!("{}.valueFrom.secretKeyRef", parameter_field(index));
        let Some(Some(secret)) = data.get(reference.name.as_str()) else {
            errors.push(FieldError::not_found(
                format!("{field}.name"),
                &reference.name,
                "",
            ));
            continue;
        };
        let Some(bytes) = secret.get(&reference.key) else {
            errors.push(FieldError::not_found(format!("{field}.key"), &reference.key, ""));
            continue;
        };
        match String::from_utf8(bytes.clone()) {
            Ok(text) => {
                values.insert(parameter.to_owned(), text);
            }
            Err(_) => errors.push(FieldError::invalid(
                format!("{field}.key"),
                &reference.key,
                "the Secret's value must be UTF-8 text",
            )),
        }
    }
    errors.into_result(name)?;
    Ok(values)
}

/// The references recorded for workspace `name` with Coder ID `workspace_id`; none without `secrets` or a record
/// (or with a record of an earlier workspace of that name).
pub async fn recorded_references(
    secrets: Option<&Arc<dyn ParameterSecrets>>,
    namespace: &str,
    name: &str,
    workspace_id: Uuid,
) -> Result<BTreeMap<String, CoderWorkspaceSecretKeyRef>, ApiError> {
    let Some(secrets) = secrets else {
        return Ok(BTreeMap::new());
    };
    Ok(secrets
        .recorded(namespace, name)
        .await?
        .filter(|r| r.workspace_id.is_none_or(|id| id == workspace_id))
        .map(|r| r.references)
        .unwrap_or_default())
}

/// The record's ConfigMap name: a hash, since workspace names may hold capitals.
pub fn record_name(namespace: &str, name: &str) -> String {
    let hash = crate::generic::discovery::hex_sha256(format!("{namespace}/{name}").as_bytes());
    format!("{RECORD_PREFIX}{}", &hash[..40])
}

/// [`ParameterSecrets`] on kube-apiserver: Secrets read and records kept with the server's own credentials,
/// records in `records_namespace`.
pub struct KubeParameterSecrets {
    kube: kube::Client,
    records_namespace: String,
}

impl KubeParameterSecrets {
    pub fn new(kube: kube::Client, records_namespace: impl Into<String>) -> Self {
        Self {
            kube,
            records_namespace: records_namespace.into(),
        }
    }

    fn records(&self) -> Api<ConfigMap> {
        Api::namespaced(self.kube.clone(), &self.records_namespace)
    }
}

/// A kube call within [`REVIEW_TIMEOUT`]; `what` names it in the 500.
pub(super) async fn bounded<T>(
    what: &str,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, ApiError> {
    match tokio::time::timeout(REVIEW_TIMEOUT, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(ApiError::internal(format!("{what}: {}", kube_message(&error)))),
        Err(_) => Err(ApiError::internal(format!(
            "{what}: no answer within {REVIEW_TIMEOUT:?}"
        ))),
    }
}

#[async_trait]
impl ParameterSecrets for KubeParameterSecrets {
    async fn read(
        &self,
        namespace: &str,
        secret: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ApiError> {
        let api: Api<Secret> = Api::namespaced(self.kube.clone(), namespace);
        let found = bounded(&format!("read secret {namespace}/{secret}"), api.get_opt(secret)).await?;
        Ok(found.map(|s| {
            s.data
                .unwrap_or_default()
                .into_iter()
                .map(|(key, bytes)| (key, bytes.0))
                .collect()
        }))
    }

    async fn recorded(&self, namespace: &str, name: &str) -> Result<Option<Record>, ApiError> {
        let record = record_name(namespace, name);
        let found = bounded(
            &format!("read the parameter references {record}"),
            self.records().get_opt(&record),
        )
        .await?;
        let Some(data) = found.and_then(|c| c.data) else {
            return Ok(None);
        };
        // A record of another object (a hash collision, or a hand-made ConfigMap) does not apply.
        if data.get("namespace").map(String::as_str) != Some(namespace)
            || data.get("name").map(String::as_str) != Some(name)
        {
            return Ok(None);
        }
        let references = data
            .get("references")
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        let workspace_id = data.get("workspaceID").and_then(|id| Uuid::parse_str(id).ok());
        Ok(Some(Record {
            workspace_id,
            references,
        }))
    }

    async fn record(&self, namespace: &str, name: &str, record: &Record) -> Result<(), ApiError> {
        let record_name = record_name(namespace, name);
        let what = format!("write the parameter references {record_name}");
        let api = self.records();
        if record.references.is_empty() {
            // Absent already is as good as deleted.
            let delete = async {
                match api.delete(&record_name, &DeleteParams::default()).await {
                    Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                    other => other.map(|_| ()),
                }
            };
            return bounded(&what, delete).await;
        }
        let references = serde_json::to_string(&record.references)
            .map_err(|e| ApiError::internal(format!("{what}: {e}")))?;
        let mut data = BTreeMap::from([
            ("namespace".to_owned(), namespace.to_owned()),
            ("name".to_owned(), name.to_owned()),
            ("references".to_owned(), references),
        ]);
        if let Some(id) = record.workspace_id {
            data.insert("workspaceID".to_owned(), id.to_string());
        }
        let mut config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(record_name.clone()),
                labels: Some(BTreeMap::from([(RECORD_LABEL.to_owned(), "true".to_owned())])),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..ConfigMap::default()
        };
        match bounded(&what, api.get_opt(&record_name)).await? {
            Some(existing) => {
                config_map.metadata.resource_version = existing.metadata.resource_version;
                bounded(
                    &what,
                    api.replace(&record_name, &PostParams::default(), &config_map),
                )
                .await?;
            }
            None => {
                bounded(&what, api.create(&PostParams::default(), &config_map)).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generic::caller::with_authorizer;
    use crate::generic::{Attributes, Authorizer, Decision, UserInfo};
    use coder_k8s_api::aggregation::{CoderWorkspaceParameter, CoderWorkspaceParameterSource};
    use std::sync::Mutex;

    /// Secrets in memory; every read is logged.
    #[derive(Default)]
    struct Memory {
        secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
        reads: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl ParameterSecrets for Memory {
        async fn read(&self, _ns: &str, secret: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>, ApiError> {
            self.reads.lock().unwrap().push(secret.to_owned());
            Ok(self.secrets.get(secret).cloned())
        }
        async fn recorded(&self, _ns: &str, _name: &str) -> Result<Option<Record>, ApiError> {
            Ok(None)
        }
        async fn record(&self, _ns: &str, _name: &str, _record: &Record) -> Result<(), ApiError> {
            Ok(())
        }
    }

    /// Denies `get` of the Secret `other`; logs every question.
    #[derive(Default)]
    struct DeniesOther(Mutex<Vec<String>>);

    #[async_trait]
    impl Authorizer for DeniesOther {
        async fn authorize(&self, attributes: &Attributes) -> Result<Decision, ApiError> {
            let resource = attributes.resource.clone().unwrap_or_default();
            self.0.lock().unwrap().push(format!(
                "{} {} {}/{} as {}",
                attributes.verb, resource.resource, resource.namespace, resource.name, attributes.user.name
            ));
            Ok(if resource.name == "other" {
                Decision::Deny(String::new())
            } else {
                Decision::Allow
            })
        }
    }

    fn from_secret(name: &str, secret: &str, key: &str) -> CoderWorkspaceParameter {
        CoderWorkspaceParameter {
            name: name.into(),
            value: None,
            value_from: Some(CoderWorkspaceParameterSource {
                secret_key_ref: CoderWorkspaceSecretKeyRef {
                    name: secret.into(),
                    key: key.into(),
                },
            }),
        }
    }

    fn spec(parameters: Vec<CoderWorkspaceParameter>) -> CoderWorkspaceSpec {
        CoderWorkspaceSpec {
            parameters: Some(parameters),
            ..CoderWorkspaceSpec::default()
        }
    }

    fn ctx() -> RequestContext {
        RequestContext {
            user: UserInfo {
                name: "bob".into(),
                ..UserInfo::default()
            },
            namespace: Some("team".into()),
            deadline: tokio::time::Instant::now(),
            dry_run: false,
            query: BTreeMap::new(),
        }
    }

    fn db() -> BTreeMap<String, BTreeMap<String, Vec<u8>>> {
        BTreeMap::from([(
            "db".to_owned(),
            BTreeMap::from([
                ("pw".to_owned(), b"hunter2".to_vec()),
                ("bin".to_owned(), vec![0xff]),
            ]),
        )])
    }

    #[tokio::test]
    async fn every_reference_is_authorized_before_any_secret_is_read() {
        let memory = Arc::new(Memory {
            secrets: db(),
            ..Memory::default()
        });
        let secrets: Arc<dyn ParameterSecrets> = memory.clone();
        let authorizer = Arc::new(DeniesOther::default());
        let wanted = spec(vec![from_secret("a", "db", "pw"), from_secret("b", "other", "k")]);
        let err = with_authorizer(
            authorizer.clone(),
            secret_values(Some(&secrets), &ctx(), "team", "o.u.w", &wanted),
        )
        .await
        .unwrap_err();
        assert_eq!((err.code, err.reason), (403, "Forbidden"));
        assert_eq!(
            err.message,
            r#"secrets "other" is forbidden: User "bob" cannot get resource "secrets" in API group "" in the namespace "team""#
        );
        assert_eq!(
            *authorizer.0.lock().unwrap(),
            ["get secrets team/db as bob", "get secrets team/other as bob"]
        );
        assert!(memory.reads.lock().unwrap().is_empty(), "a Secret was read");
    }

    #[tokio::test]
    async fn values_are_read_and_missing_ones_name_the_field_not_the_value() {
        let memory = Arc::new(Memory {
            secrets: db(),
            ..Memory::default()
        });
        let secrets: Arc<dyn ParameterSecrets> = memory.clone();
        let authorizer = Arc::new(DeniesOther::default());
        let good = spec(vec![from_secret("a", "db", "pw"), from_secret("b", "db", "pw")]);
        let values = with_authorizer(
            authorizer.clone(),
            secret_values(Some(&secrets), &ctx(), "team", "o.u.w", &good),
        )
        .await
        .unwrap();
        assert_eq!(
            values,
            BTreeMap::from([("a".into(), "hunter2".into()), ("b".into(), "hunter2".into())])
        );
        assert_eq!(
            *memory.reads.lock().unwrap(),
            ["db"],
            "a Secret is read once per request"
        );
        let bad = spec(vec![
            from_secret("a", "gone", "pw"),
            from_secret("b", "db", "nope"),
            from_secret("c", "db", "bin"),
        ]);
        let err = with_authorizer(
            authorizer,
            secret_values(Some(&secrets), &ctx(), "team", "o.u.w", &bad),
        )
        .await
        .unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            r#"CoderWorkspace.aggregation.coder.com "o.u.w" is invalid: [spec.parameters[0].valueFrom.secretKeyRef.name: Not found: "gone", spec.parameters[1].valueFrom.secretKeyRef.key: Not found: "nope", spec.parameters[2].valueFrom.secretKeyRef.key: Invalid value: "bin": the Secret's value must be UTF-8 text]"#
        );
        assert!(!err.message.contains("hunter2"));
    }

    #[tokio::test]
    async fn without_a_record_store_a_reference_is_refused_and_plain_values_pass() {
        let wanted = spec(vec![from_secret("a", "db", "pw")]);
        let err = secret_values(None, &ctx(), "team", "o.u.w", &wanted)
            .await
            .unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message
                .contains("spec.parameters[0].valueFrom: Forbidden: values from Secrets need"),
            "{}",
            err.message
        );
        let plain = spec(vec![CoderWorkspaceParameter {
            name: "a".into(),
            value: Some("x".into()),
            value_from: None,
        }]);
        assert!(
            secret_values(None, &ctx(), "team", "o.u.w", &plain)
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn record_names_are_short_lowercase_and_differ_per_workspace() {
        let a = record_name("team", "Acme.Alice.Dev");
        assert!(a.starts_with("ck8s-wsparams-") && a.len() == 54, "{a}");
        assert_eq!(a, a.to_lowercase());
        assert_ne!(a, record_name("team", "Acme.Alice.Dev2"));
        assert_ne!(a, record_name("other", "Acme.Alice.Dev"));
    }
}
