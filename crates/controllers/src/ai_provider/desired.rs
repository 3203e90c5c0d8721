//! The provider a CoderAIProvider asks for, how Coder's provider differs from it, and what proves that Coder's
//! provider is this object's. Pure: the Secret values come in already read; the secret parts (API keys, AWS keys)
//! are never compared with Coder, which does not return them, so they are sent again whenever their digest changes.

use coder_k8s_api::ai_provider::{
    AIProviderType, CoderAIProviderSpec, DEFAULT_ACCESS_KEY_ID_SECRET_KEY, DEFAULT_API_KEY_SECRET_KEY,
    DEFAULT_SECRET_ACCESS_KEY_SECRET_KEY,
};
use coder_k8s_api::shared::SecretKeySelector;
use coder_k8s_coder_client::Secret;
use coder_k8s_coder_client::ai::{
    AiProvider, AiProviderKeyPatch, CreateAiProviderRequest, PatchAiProviderRequest,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::cleanup_records::record::{Created, Record, RecordKind, created_since};

/// A Secret key the spec reads: `(Secret name, data key)`.
pub type SecretKeyRef = (String, String);

/// Every Secret key the spec reads, in the order the values are used: the API keys, then the AWS key pair.
pub fn secret_refs(spec: &CoderAIProviderSpec) -> Vec<SecretKeyRef> {
    let pick = |s: &SecretKeySelector, default: &str| (s.name.clone(), s.key_or(default).to_owned());
    let mut refs: Vec<SecretKeyRef> = spec
        .api_key_secret_refs
        .iter()
        .map(|s| pick(s, DEFAULT_API_KEY_SECRET_KEY))
        .collect();
    if let Some(bedrock) = spec.settings.as_ref().and_then(|s| s.bedrock.as_ref()) {
        refs.extend(
            bedrock
                .access_key_id_secret_ref
                .iter()
                .map(|s| pick(s, DEFAULT_ACCESS_KEY_ID_SECRET_KEY)),
        );
        refs.extend(
            bedrock
                .secret_access_key_secret_ref
                .iter()
                .map(|s| pick(s, DEFAULT_SECRET_ACCESS_KEY_SECRET_KEY)),
        );
    }
    refs
}

/// The provider the spec asks for, with the Secret values (trimmed) in `secret_refs` order.
#[derive(Clone, Debug)]
pub struct Desired {
    pub type_: String,
    pub name: String,
    pub display_name: Option<String>,
    pub enabled: bool,
    pub base_url: String,
    pub api_keys: Vec<Secret>,
    /// Settings without their secret fields (what Coder returns), and the AWS key pair when set.
    pub settings: Option<Value>,
    pub aws_keys: Option<(Secret, Secret)>,
}

/// Builds the desired provider; `values` are the Secret values in `secret_refs` order.
pub fn desired(spec: &CoderAIProviderSpec, name: &str, values: Vec<String>) -> Desired {
    let mut values = values.into_iter().map(|v| Secret::new(v.trim().to_owned()));
    let api_keys: Vec<Secret> = values.by_ref().take(spec.api_key_secret_refs.len()).collect();
    let bedrock = spec.settings.as_ref().and_then(|s| s.bedrock.as_ref());
    let aws_keys = match (values.next(), values.next()) {
        (Some(id), Some(secret)) => Some((id, secret)),
        _ => None,
    };
    let settings = bedrock.map(|b| {
        let mut map = Map::new();
        map.insert("_type".to_owned(), json!("bedrock"));
        map.insert("_version".to_owned(), json!(1));
        for (key, value) in [
            ("region", &b.region),
            ("model", &b.model),
            ("small_fast_model", &b.small_fast_model),
            ("role_arn", &b.role_arn),
        ] {
            if let Some(value) = value {
                map.insert(key.to_owned(), json!(value));
            }
        }
        Value::Object(map)
    });
    Desired {
        type_: type_name(spec.type_),
        name: name.to_owned(),
        display_name: spec.display_name.clone().filter(|d| !d.is_empty()),
        enabled: spec.is_enabled(),
        base_url: spec.base_url.clone(),
        api_keys,
        settings,
        aws_keys,
    }
}

/// Coder's name of a provider type (the CRD's enum values are Coder's).
pub fn type_name(type_: AIProviderType) -> String {
    match serde_json::to_value(type_) {
        Ok(Value::String(name)) => name,
        _ => String::new(),
    }
}

impl Desired {
    /// The settings as sent: with the AWS key pair when the spec names one.
    fn settings_sent(&self) -> Option<Value> {
        let mut settings = self.settings.clone()?;
        if let (Some((id, secret)), Some(map)) = (&self.aws_keys, settings.as_object_mut()) {
            map.insert("access_key".to_owned(), json!(id.expose()));
            map.insert("access_key_secret".to_owned(), json!(secret.expose()));
        }
        Some(settings)
    }

    /// The settings a patch sends. Coder replaces its whole settings block with the one sent and keeps only the
    /// write-only AWS keys when they are left out, so the block starts from Coder's `live` one (of the same
    /// `_type`) and the spec's fields go over it: a setting the spec does not set (an admin's `small_fast_model`,
    /// Coder's own `external_id`) is sent back unchanged instead of being cleared.
    fn settings_patched(&self, live: &Value) -> Option<Value> {
        let sent = self.settings_sent()?;
        let Some(live) = live.as_object().filter(|l| l.get("_type") == sent.get("_type")) else {
            return Some(sent);
        };
        let mut merged = live.clone();
        // Coder never returns the AWS keys; should one ever appear, it is not echoed back.
        merged.remove("access_key");
        merged.remove("access_key_secret");
        if let Value::Object(spec) = sent {
            merged.extend(spec);
        }
        Some(Value::Object(merged))
    }

    pub fn create_request(&self) -> CreateAiProviderRequest {
        CreateAiProviderRequest {
            provider_type: self.type_.clone(),
            name: self.name.clone(),
            display_name: self.display_name.clone(),
            enabled: self.enabled,
            base_url: self.base_url.clone(),
            api_keys: (!self.api_keys.is_empty()).then(|| self.api_keys.clone()),
            settings: self.settings_sent(),
        }
    }

    /// SHA-256 of the secret parts, to notice a changed Secret value without keeping the value.
    pub fn secrets_digest(&self) -> String {
        let mut hasher = Sha256::new();
        for key in &self.api_keys {
            hasher.update(key.expose().as_bytes());
            hasher.update([0]);
        }
        if let Some((id, secret)) = &self.aws_keys {
            hasher.update(id.expose().as_bytes());
            hasher.update([0]);
            hasher.update(secret.expose().as_bytes());
        }
        hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// What a PATCH must change so Coder's `live` provider matches; `None` when nothing differs.
    /// `send_secrets`: the secret parts changed (or are not known to be in Coder) and are sent again.
    pub fn patch(&self, live: &AiProvider, send_secrets: bool) -> Option<PatchAiProviderRequest> {
        let mut patch = PatchAiProviderRequest::default();
        let display = self.display_name.as_ref().filter(|d| **d != live.display_name);
        patch.display_name = display.cloned();
        patch.enabled = (self.enabled != live.enabled).then_some(self.enabled);
        patch.base_url = (self.base_url != live.base_url).then(|| self.base_url.clone());
        let settings_differ = self
            .settings
            .as_ref()
            .is_some_and(|s| !settings_match(s, &live.settings));
        if settings_differ || (send_secrets && self.aws_keys.is_some()) {
            patch.settings = self.settings_patched(&live.settings);
        }
        if send_secrets || self.api_keys.len() != live.api_keys.len() {
            let keys = self
                .api_keys
                .iter()
                .cloned()
                .map(|api_key| AiProviderKeyPatch::Add { api_key });
            patch.api_keys = Some(keys.collect());
        }
        let changed = patch.display_name.is_some()
            || patch.enabled.is_some()
            || patch.base_url.is_some()
            || patch.settings.is_some()
            || patch.api_keys.is_some();
        changed.then_some(patch)
    }
}

/// Whether every field the spec sets has the same value in Coder's settings (Coder may add its own, such as an
/// external ID, and never returns the secret ones).
fn settings_match(desired: &Value, live: &Value) -> bool {
    let Some(desired) = desired.as_object() else {
        return true;
    };
    desired.iter().all(|(key, value)| live.get(key) == Some(value))
}

/// What can prove that a provider in Coder is the object's.
pub struct Proof<'a> {
    /// The object's signed record and the time it was written, if trusted.
    pub record: Option<(&'a Record, Option<&'a Time>)>,
    /// The Go operator's unsigned record of the object, read only when there is no signed one.
    pub unsigned: Option<&'a Record>,
    /// `status.providerID`, which anyone with status write access can set.
    pub status_id: Option<&'a str>,
}

/// Whether `live` is the object's provider. It must have the object's provider name (`name`), and: the signed
/// cleanup record names its ID; or the signed record was written before a create whose answer was lost, at a
/// trusted time, and Coder created the provider after it; or, for an object of the Go operator (no signed record
/// yet), its unsigned record and `status.providerID` both name that ID — two writes (a ConfigMap in the operator
/// namespace and the object's status) that no status writer alone can make. An ID in status alone proves nothing,
/// and neither does the name.
pub fn owned(live: &AiProvider, name: &str, proof: Proof<'_>) -> bool {
    if live.name != name {
        return false;
    }
    let id = live.id.to_string();
    match proof.record {
        Some((record, written)) => match &record.created {
            Created::Provider {
                id: Some(recorded), ..
            } => *recorded == id,
            Created::Provider { id: None, .. } => created_since(&live.created_at, written),
            _ => false,
        },
        None => proof.unsigned.is_some_and(|record| {
            let recorded = match &record.created {
                Created::Provider {
                    name: recorded_name,
                    id: Some(recorded),
                } => recorded_name == name && *recorded == id,
                _ => false,
            };
            record.kind == RecordKind::AIProvider && recorded && proof.status_id == Some(id.as_str())
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: Value) -> CoderAIProviderSpec {
        serde_json::from_value(value).unwrap()
    }

    fn openai() -> CoderAIProviderSpec {
        spec(json!({
            "controlPlaneRef": {"name": "coder"}, "type": "openai", "baseURL": "https://api.openai.com/v1/",
            "apiKeySecretRefs": [{"name": "openai"}, {"name": "openai", "key": "second"}],
        }))
    }

    fn live_of(desired: &Desired) -> AiProvider {
        AiProvider {
            provider_type: desired.type_.clone(),
            name: desired.name.clone(),
            display_name: desired.display_name.clone().unwrap_or_default(),
            enabled: desired.enabled,
            base_url: desired.base_url.clone(),
            api_keys: vec![Default::default(); desired.api_keys.len()],
            settings: desired.settings.clone().unwrap_or_default(),
            ..AiProvider::default()
        }
    }

    #[test]
    fn secret_refs_default_their_keys_and_come_in_order() {
        assert_eq!(
            secret_refs(&openai()),
            vec![
                ("openai".to_owned(), "api-key".to_owned()),
                ("openai".to_owned(), "second".to_owned())
            ]
        );
        let bedrock = spec(json!({
            "controlPlaneRef": {"name": "coder"}, "type": "bedrock", "baseURL": "https://bedrock.example.com",
            "settings": {"bedrock": {"region": "us-east-1", "accessKeyIDSecretRef": {"name": "aws"}, "secretAccessKeySecretRef": {"name": "aws"}}},
        }));
        assert_eq!(
            secret_refs(&bedrock),
            vec![
                ("aws".to_owned(), "AWS_ACCESS_KEY_ID".to_owned()),
                ("aws".to_owned(), "AWS_SECRET_ACCESS_KEY".to_owned())
            ]
        );
        let d = desired(
            &bedrock,
            "bedrock",
            vec!["AKIA".to_owned(), " s3cr3t\n".to_owned()],
        );
        let sent = d.create_request().settings.unwrap();
        assert_eq!(sent["_type"], "bedrock");
        assert_eq!(sent["_version"], 1);
        assert_eq!(sent["region"], "us-east-1");
        assert_eq!(sent["access_key_secret"], "s3cr3t", "values are trimmed");
        assert!(
            d.settings.as_ref().unwrap().get("access_key").is_none(),
            "compared settings hold no secret"
        );
    }

    #[test]
    fn the_create_request_carries_the_trimmed_keys_and_the_type() {
        let d = desired(&openai(), "openai", vec!["sk-1\n".to_owned(), "sk-2".to_owned()]);
        let request = d.create_request();
        assert_eq!(request.provider_type, "openai");
        assert!(request.enabled);
        let keys: Vec<&str> = request
            .api_keys
            .as_ref()
            .unwrap()
            .iter()
            .map(|k| k.expose())
            .collect();
        assert_eq!(keys, ["sk-1", "sk-2"]);
        assert!(request.settings.is_none());
    }

    #[test]
    fn nothing_is_patched_when_coder_matches_and_the_secrets_are_known() {
        let d = desired(&openai(), "openai", vec!["sk-1".to_owned(), "sk-2".to_owned()]);
        assert!(d.patch(&live_of(&d), false).is_none());
        let patch = d.patch(&live_of(&d), true).unwrap();
        assert_eq!(patch.api_keys.unwrap().len(), 2);
        assert!(patch.base_url.is_none() && patch.enabled.is_none());
    }

    #[test]
    fn a_changed_field_is_patched_alone() {
        let d = desired(&openai(), "openai", vec!["sk-1".to_owned(), "sk-2".to_owned()]);
        let mut live = live_of(&d);
        live.enabled = false;
        live.base_url = "https://elsewhere.example.com".to_owned();
        let patch = d.patch(&live, false).unwrap();
        assert_eq!(patch.enabled, Some(true));
        assert_eq!(patch.base_url.as_deref(), Some("https://api.openai.com/v1/"));
        assert!(patch.api_keys.is_none() && patch.settings.is_none());
    }

    fn bedrock() -> CoderAIProviderSpec {
        spec(json!({
            "controlPlaneRef": {"name": "coder"}, "type": "bedrock", "baseURL": "https://bedrock.example.com",
            "settings": {"bedrock": {"region": "eu-west-1", "accessKeyIDSecretRef": {"name": "aws"}, "secretAccessKeySecretRef": {"name": "aws"}}},
        }))
    }

    #[test]
    fn a_settings_patch_sends_back_the_settings_the_spec_does_not_set() {
        let d = desired(
            &bedrock(),
            "bedrock",
            vec!["AKIA".to_owned(), "s3cr3t".to_owned()],
        );
        let mut live = live_of(&d);
        live.settings = json!({"_type": "bedrock", "_version": 1, "region": "us-east-1",
                               "small_fast_model": "haiku", "external_id": "coder-1"});
        let sent = d.patch(&live, false).unwrap().settings.unwrap();
        assert_eq!(
            sent,
            json!({"_type": "bedrock", "_version": 1, "region": "eu-west-1", "small_fast_model": "haiku",
                   "external_id": "coder-1", "access_key": "AKIA", "access_key_secret": "s3cr3t"}),
            "the spec's region and AWS keys over Coder's block"
        );
    }

    #[test]
    fn settings_of_another_type_are_not_merged() {
        let d = desired(&bedrock(), "bedrock", Vec::new());
        let mut live = live_of(&d);
        live.settings = json!({"_type": "vertex", "project": "p"});
        let sent = d.patch(&live, false).unwrap().settings.unwrap();
        assert_eq!(
            sent,
            json!({"_type": "bedrock", "_version": 1, "region": "eu-west-1"})
        );
    }

    #[test]
    fn the_digest_changes_with_any_secret_value() {
        let a = desired(&openai(), "openai", vec!["sk-1".to_owned(), "sk-2".to_owned()]);
        let b = desired(&openai(), "openai", vec!["sk-1".to_owned(), "sk-3".to_owned()]);
        assert_ne!(a.secrets_digest(), b.secrets_digest());
        assert_eq!(a.secrets_digest().len(), 64);
        assert!(!a.secrets_digest().contains("sk-"));
    }

    const P: &str = "3f2c1a9e-1b2c-4d5e-8f90-0123456789ab";

    fn live() -> AiProvider {
        AiProvider {
            id: P.parse().unwrap(),
            name: "openai".to_owned(),
            created_at: "2026-01-01T12:00:10Z".to_owned(),
            ..AiProvider::default()
        }
    }

    fn record(id: Option<&str>) -> Record {
        Record {
            kind: RecordKind::AIProvider,
            namespace: "team".to_owned(),
            name: "openai".to_owned(),
            uid: "u-1".to_owned(),
            deployment_id: "d-1".to_owned(),
            created: Created::Provider {
                name: "openai".to_owned(),
                id: id.map(str::to_owned),
            },
        }
    }

    fn none() -> Proof<'static> {
        Proof {
            record: None,
            unsigned: None,
            status_id: None,
        }
    }

    #[test]
    fn an_id_in_status_alone_proves_nothing() {
        let proof = Proof {
            status_id: Some(P),
            ..none()
        };
        assert!(
            !owned(&live(), "openai", proof),
            "even a provider made after the object"
        );
    }

    #[test]
    fn the_signed_record_proves_its_id_or_a_provider_made_after_it() {
        let signed = record(Some(P));
        let proof = |record| Proof {
            record: Some(record),
            ..none()
        };
        assert!(owned(&live(), "openai", proof((&signed, None))));
        let other = record(Some("00000000-0000-0000-0000-000000000001"));
        let forged = Proof {
            status_id: Some(P),
            ..proof((&other, None))
        };
        assert!(!owned(&live(), "openai", forged), "the record names another ID");
        assert!(!owned(&live(), "other-name", proof((&signed, None))));
        let pending = record(None);
        let before = Time("2026-01-01T12:00:00Z".parse().unwrap());
        let after = Time("2026-01-01T13:00:00Z".parse().unwrap());
        assert!(owned(&live(), "openai", proof((&pending, Some(&before)))));
        assert!(!owned(&live(), "openai", proof((&pending, Some(&after)))));
        assert!(
            !owned(&live(), "openai", proof((&pending, None))),
            "a record whose write time is not trusted"
        );
    }

    #[test]
    fn the_go_operators_unsigned_record_proves_only_with_the_status_naming_the_same_id() {
        let unsigned = record(Some(P));
        let both = Proof {
            unsigned: Some(&unsigned),
            status_id: Some(P),
            ..none()
        };
        assert!(owned(&live(), "openai", both));
        let record_alone = Proof {
            unsigned: Some(&unsigned),
            ..none()
        };
        assert!(!owned(&live(), "openai", record_alone));
        let other = record(Some("00000000-0000-0000-0000-000000000001"));
        let disagreeing = Proof {
            unsigned: Some(&other),
            status_id: Some(P),
            ..none()
        };
        assert!(!owned(&live(), "openai", disagreeing));
        let pending = record(None);
        let without_id = Proof {
            unsigned: Some(&pending),
            status_id: Some(P),
            ..none()
        };
        assert!(
            !owned(&live(), "openai", without_id),
            "an unsigned record's time proves nothing"
        );
    }
}
