//! `CoderAIProvider`: one AI provider (AI settings > Providers) in a Coder deployment.
//!
//! The operator creates the provider with `POST /api/v2/ai/providers`, keeps it in line with the spec with
//! `PATCH /api/v2/ai/providers/{id}` and deletes it with `DELETE /api/v2/ai/providers/{id}` when the object goes.
//! Coder cannot change the `type` or the `name` of a provider, so both are immutable here.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::shared::{ControlPlaneReference, SecretKeySelector, conditions_schema};

/// Finalizer that deletes the provider in Coder before the object goes.
pub const FINALIZER: &str = "coder.com/ai-provider-cleanup";
/// Data key of an API key in a Secret when `apiKeySecretRefs[].key` is empty.
pub const DEFAULT_API_KEY_SECRET_KEY: &str = "api-key";
/// Data key of the AWS access key ID when `settings.bedrock.accessKeyIDSecretRef.key` is empty.
pub const DEFAULT_ACCESS_KEY_ID_SECRET_KEY: &str = "AWS_ACCESS_KEY_ID";
/// Data key of the AWS secret access key when `settings.bedrock.secretAccessKeySecretRef.key` is empty.
pub const DEFAULT_SECRET_ACCESS_KEY_SECRET_KEY: &str = "AWS_SECRET_ACCESS_KEY";
/// Coder's rule for provider names (the CHECK constraint on `ai_providers.name`).
pub const NAME_PATTERN: &str = "^[a-z0-9]+(-[a-z0-9]+)*$";

/// Condition types of this kind.
pub mod conditions {
    pub use crate::shared::sync_status::conditions::{READY, RECONCILING, STALLED};
}

/// Condition reasons of this kind.
pub mod reasons {
    pub use crate::shared::sync_status::reasons::{
        CLEANUP_RECORD_FAILED, CODER_DEPLOYMENT_CHANGED, CODER_UNAVAILABLE, CONTROL_PLANE_NOT_READY,
        DELETING, NOT_SUPPORTED, OPERATOR_ACCESS_NOT_READY, REJECTED, SYNCED,
    };
    /// Reason: a referenced Secret or one of its keys is missing or empty.
    pub const SECRET_NOT_READY: &str = "SecretNotReady";
    /// Reason (stalled): a provider with this name exists in Coder and was not created for this object.
    pub const NAME_CONFLICT: &str = "NameConflict";
}

/// An AI provider in Coder (AI settings > Providers), kept in line with this spec by the operator.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "coder.com",
    version = "v1alpha1",
    kind = "CoderAIProvider",
    plural = "coderaiproviders",
    namespaced,
    status = "CoderAIProviderStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "CoderAIProvider manages one AI provider (AI settings > Providers) in the Coder deployment of a CoderControlPlane: it creates, updates and deletes the provider and feeds it API keys from Secrets.",
    validation = kube::core::Rule::new(
        "has(self.spec.name) || (size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]+(-[a-z0-9]+)*$'))"
    ).message("spec.name is required when metadata.name is not a valid Coder provider name (at most 63 lowercase letters and digits, single hyphens between them)"),
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason", priority = "1"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(
    validation = kube::core::Rule::new("self.type == oldSelf.type")
        .message("type is immutable; create a new CoderAIProvider"),
    validation = kube::core::Rule::new(
        "has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)"
    ).message("name is immutable; create a new CoderAIProvider"),
    validation = kube::core::Rule::new(
        "!(self.type in ['bedrock', 'copilot']) || !has(self.apiKeySecretRefs) || size(self.apiKeySecretRefs) == 0"
    ).message("apiKeySecretRefs must be empty for type bedrock and copilot"),
    validation = kube::core::Rule::new(
        "!has(self.settings) || !has(self.settings.bedrock) || self.type in ['anthropic', 'bedrock']"
    ).message("settings.bedrock is only valid for type anthropic or bedrock"),
    validation = kube::core::Rule::new(
        "self.type != 'bedrock' || (has(self.settings) && has(self.settings.bedrock) && (has(self.settings.bedrock.region) || has(self.settings.bedrock.roleARN) || has(self.settings.bedrock.accessKeyIDSecretRef)))"
    ).message("type bedrock requires settings.bedrock with a region, a roleARN or static credentials")
)]
#[serde(rename_all = "camelCase")]
pub struct CoderAIProviderSpec {
    /// The CoderControlPlane (same namespace) whose Coder deployment holds the provider. Its operator user must be a
    /// site owner.
    pub control_plane_ref: ControlPlaneReference,
    /// Protocol Coder uses to talk to the upstream provider. Immutable.
    #[serde(rename = "type")]
    pub type_: AIProviderType,
    /// Provider name in Coder: lowercase letters and digits, with single hyphens between them. Coder uses it in URLs
    /// and it is unique in a deployment. When unset, the operator uses `metadata.name`, which must then follow the same
    /// rule. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = NAME_PATTERN))]
    pub name: Option<String>,
    /// Name shown in the Coder dashboard. When unset, Coder chooses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub display_name: Option<String>,
    /// Whether the provider is enabled in Coder. Default true.
    #[serde(default = "default_true", skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Absolute `http` or `https` URL of the upstream API, for example `https://api.openai.com/v1/`. Coder requires
    /// it for every type.
    #[serde(rename = "baseURL")]
    #[schemars(
        length(min = 1, max = 2048),
        regex(pattern = r"^https?://[^\s/?#]+([/?#]\S*)?$")
    )]
    pub base_url: String,
    /// Secret keys (same namespace) that hold the provider API keys, sent to Coder in this order. The key defaults
    /// to `api-key`. Surrounding whitespace, such as a trailing newline, is removed before sending. Must be empty
    /// for types `bedrock` (credentials in `settings.bedrock`) and `copilot` (request-time GitHub OAuth tokens).
    /// Coder never returns the keys; the operator sends them again when a referenced Secret changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub api_key_secret_refs: Vec<SecretKeySelector>,
    /// Type-specific settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<AIProviderSettings>,
}

fn default_true() -> Option<bool> {
    Some(true)
}

impl CoderAIProviderSpec {
    /// Whether the provider is enabled (the default when `enabled` is unset).
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

impl CoderAIProvider {
    /// The provider name in Coder: `spec.name`, or `metadata.name` when the spec names none.
    pub fn coder_name(&self) -> &str {
        match self.spec.name.as_deref() {
            Some(name) if !name.is_empty() => name,
            _ => self.metadata.name.as_deref().unwrap_or_default(),
        }
    }
}

/// Whether `name` follows Coder's provider name rule `^[a-z0-9]+(-[a-z0-9]+)*$`.
pub fn is_valid_provider_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Protocol Coder uses to talk to an upstream AI provider (Coder's `AIProviderType`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AIProviderType {
    /// OpenAI.
    #[default]
    #[serde(rename = "openai")]
    OpenAI,
    /// Anthropic; with `settings.bedrock` it authenticates against AWS Bedrock.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// Azure OpenAI.
    #[serde(rename = "azure")]
    Azure,
    /// Google.
    #[serde(rename = "google")]
    Google,
    /// Any OpenAI-compatible endpoint.
    #[serde(rename = "openai-compat")]
    OpenAICompat,
    /// OpenRouter.
    #[serde(rename = "openrouter")]
    OpenRouter,
    /// Vercel AI Gateway.
    #[serde(rename = "vercel")]
    Vercel,
    /// AWS Bedrock; needs `settings.bedrock` and takes no API keys.
    #[serde(rename = "bedrock")]
    Bedrock,
    /// GitHub Copilot; authenticates with request-time GitHub OAuth tokens and takes no API keys.
    #[serde(rename = "copilot")]
    Copilot,
}

impl AIProviderType {
    /// The value Coder uses in `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAI => "openai",
            Self::Anthropic => "anthropic",
            Self::Azure => "azure",
            Self::Google => "google",
            Self::OpenAICompat => "openai-compat",
            Self::OpenRouter => "openrouter",
            Self::Vercel => "vercel",
            Self::Bedrock => "bedrock",
            Self::Copilot => "copilot",
        }
    }

    /// Whether Coder accepts API keys for this type (`bedrock` and `copilot` reject them).
    pub fn accepts_api_keys(self) -> bool {
        !matches!(self, Self::Bedrock | Self::Copilot)
    }
}

/// Type-specific provider settings (Coder's `AIProviderSettings`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AIProviderSettings {
    /// AWS Bedrock settings. Required for type `bedrock`; optional for type `anthropic` (Claude through Bedrock);
    /// not allowed for other types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bedrock: Option<BedrockSettings>,
}

/// How Coder reaches Claude models on AWS Bedrock (Coder's `AIProviderBedrockSettings`). Without static credentials,
/// Coder uses the AWS identity of its pods (for example IRSA or EKS Pod Identity).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(
    validation = kube::core::Rule::new("has(self.accessKeyIDSecretRef) == has(self.secretAccessKeySecretRef)")
        .message("accessKeyIDSecretRef and secretAccessKeySecretRef must be set together")
)]
#[serde(rename_all = "camelCase")]
pub struct BedrockSettings {
    /// AWS region of the Bedrock endpoint, for example `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub region: Option<String>,
    /// Bedrock model identifier for primary requests. Default: Coder's deployment default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub model: Option<String>,
    /// Bedrock model identifier for background tasks (a small, fast model). Default: Coder's deployment default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub small_fast_model: Option<String>,
    /// IAM role that Coder assumes through STS before it calls Bedrock.
    #[serde(default, rename = "roleARN", skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 2048),
        regex(pattern = r"^arn:[a-z0-9-]+:iam::[0-9]{12}:role/\S+$")
    )]
    pub role_arn: Option<String>,
    /// Secret key (same namespace) with the AWS access key ID. The key defaults to `AWS_ACCESS_KEY_ID`. Set together
    /// with `secretAccessKeySecretRef`.
    #[serde(
        default,
        rename = "accessKeyIDSecretRef",
        skip_serializing_if = "Option::is_none"
    )]
    pub access_key_id_secret_ref: Option<SecretKeySelector>,
    /// Secret key (same namespace) with the AWS secret access key. The key defaults to `AWS_SECRET_ACCESS_KEY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key_secret_ref: Option<SecretKeySelector>,
}

/// Observed state of a CoderAIProvider.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CoderAIProviderStatus {
    /// Generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// ID of the provider in Coder. Set once Coder confirmed the create; the operator updates and deletes by this ID.
    #[serde(default, rename = "providerID", skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// Deployment ID (from `GET /api/v2/buildinfo`) of the Coder deployment that holds the provider. When the control
    /// plane reaches another deployment, the object stalls with `CoderDeploymentChanged`.
    #[serde(
        default,
        rename = "coderDeploymentID",
        skip_serializing_if = "Option::is_none"
    )]
    pub coder_deployment_id: Option<String>,
    /// `Pending` while the operator works, `Ready` when Coder matches the spec, `Stalled` when a person must act.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AIProviderPhase>,
    /// Conditions: `Ready`, `Reconciling`, `Stalled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// Phase of the CoderAIProvider: `Pending` while the operator works towards the spec, `Ready` when the
/// provider in Coder matches the spec, `Stalled` when the operator cannot go on without a change by a person
/// (the `Stalled` condition says why).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AIProviderPhase {
    /// The operator is working towards the spec; the conditions say what it waits for.
    #[default]
    Pending,
    /// The provider in Coder matches the spec.
    Ready,
    /// The operator cannot go on without a change by a person; the `Stalled` condition says why.
    Stalled,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use kube::core::ObjectMeta;

    fn crd_json() -> String {
        serde_json::to_string(&CoderAIProvider::crd()).expect("serialise the CRD")
    }

    #[test]
    fn crd_names_and_printer_columns() {
        let crd = CoderAIProvider::crd();
        assert_eq!(crd.spec.group, "coder.com");
        assert_eq!(crd.spec.names.kind, "CoderAIProvider");
        assert_eq!(crd.spec.names.plural, "coderaiproviders");
        assert_eq!(crd.spec.scope, "Namespaced");
        let version = &crd.spec.versions[0];
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns, ["Type", "Phase", "Reason", "Age"]);
    }

    #[test]
    fn crd_carries_cel_messages_and_acronym_fields() {
        let json = crd_json();
        for needle in [
            "apiKeySecretRefs must be empty for type bedrock and copilot",
            "type is immutable; create a new CoderAIProvider",
            "name is immutable; create a new CoderAIProvider",
            "settings.bedrock is only valid for type anthropic or bedrock",
            "type bedrock requires settings.bedrock with a region, a roleARN or static credentials",
            "accessKeyIDSecretRef and secretAccessKeySecretRef must be set together",
            "spec.name is required when metadata.name is not a valid Coder provider name",
            "\"baseURL\"",
            "\"providerID\"",
            "\"coderDeploymentID\"",
            "\"roleARN\"",
            "\"openai-compat\"",
            "x-kubernetes-list-map-keys",
        ] {
            assert!(json.contains(needle), "CRD lacks {needle}");
        }
        assert!(!json.contains("baseUrl"));
    }

    #[test]
    fn crd_yaml_serialises() {
        let yaml = serde_saphyr::to_string(&CoderAIProvider::crd()).expect("serialise the CRD as YAML");
        assert!(yaml.contains("coderaiproviders.coder.com"));
    }

    #[test]
    fn spec_round_trips_with_defaults() {
        let spec: CoderAIProviderSpec = serde_json::from_value(serde_json::json!({
            "controlPlaneRef": {"name": "cp"},
            "type": "openai-compat",
            "baseURL": "https://llm.example.com/v1/",
            "apiKeySecretRefs": [{"name": "llm"}],
        }))
        .expect("parse spec");
        assert_eq!(spec.type_, AIProviderType::OpenAICompat);
        assert!(spec.is_enabled());
        assert_eq!(
            spec.api_key_secret_refs[0].key_or(DEFAULT_API_KEY_SECRET_KEY),
            "api-key"
        );
        let value = serde_json::to_value(&spec).expect("serialise spec");
        assert_eq!(value["type"], "openai-compat");
        assert_eq!(value["baseURL"], "https://llm.example.com/v1/");
        assert!(value.get("name").is_none());
    }

    #[test]
    fn type_strings_match_serde() {
        for t in [
            AIProviderType::OpenAI,
            AIProviderType::Anthropic,
            AIProviderType::Azure,
            AIProviderType::Google,
            AIProviderType::OpenAICompat,
            AIProviderType::OpenRouter,
            AIProviderType::Vercel,
            AIProviderType::Bedrock,
            AIProviderType::Copilot,
        ] {
            assert_eq!(serde_json::to_value(t).expect("serialise"), t.as_str());
        }
        assert!(!AIProviderType::Bedrock.accepts_api_keys());
        assert!(!AIProviderType::Copilot.accepts_api_keys());
        assert!(AIProviderType::OpenAI.accepts_api_keys());
    }

    #[test]
    fn coder_name_falls_back_to_metadata_name() {
        let mut provider = CoderAIProvider {
            metadata: ObjectMeta {
                name: Some("openai-main".into()),
                ..ObjectMeta::default()
            },
            spec: CoderAIProviderSpec::default(),
            status: None,
        };
        assert_eq!(provider.coder_name(), "openai-main");
        provider.spec.name = Some("openai".into());
        assert_eq!(provider.coder_name(), "openai");
    }

    #[test]
    fn provider_name_rule() {
        for ok in ["openai", "a", "my-provider-2", "0"] {
            assert!(is_valid_provider_name(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a.b", "a_b", "a b"] {
            assert!(!is_valid_provider_name(bad), "{bad}");
        }
    }
}
