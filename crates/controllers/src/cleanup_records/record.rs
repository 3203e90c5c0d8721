//! A cleanup record as data: the ConfigMap `ck8s-cleanup-<object UID>` in the operator namespace, labelled
//! `coder.com/cleanup-record: <kind>`, that names an object, the Coder deployment it created something in, and what
//! it created (a provider ID, a key-name prefix, an MCP server config). It holds no secret. Pure: building and
//! reading the ConfigMap.

use std::collections::BTreeMap;

use coder_k8s_api::ai_gateway_key::key_name_prefix;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ObjectMeta;

use crate::labels::{CLEANUP_RECORD_LABEL as LABEL, MANAGED_BY};
/// The name prefix of every cleanup record.
pub const NAME_PREFIX: &str = "ck8s-cleanup-";

/// The kinds that write cleanup records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordKind {
    AIProvider,
    AIGatewayKey,
    MCPServer,
}

impl RecordKind {
    pub const ALL: [Self; 3] = [Self::AIProvider, Self::AIGatewayKey, Self::MCPServer];

    /// The Kubernetes kind, as written in the label and in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AIProvider => "CoderAIProvider",
            Self::AIGatewayKey => "CoderAIGatewayKey",
            Self::MCPServer => "CoderMCPServer",
        }
    }

    pub fn parse(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == kind)
    }
}

/// What the object created (or is about to create) in Coder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    /// An AI provider: its name, and its ID once Coder answered the create.
    Provider { name: String, id: Option<String> },
    /// AI Gateway keys: every key whose name starts with this prefix (`ck8s-<uid>-`).
    KeyPrefix(String),
    /// An MCP server config in an organization: its slug, and its ID once Coder answered the create.
    McpServer {
        organization_id: String,
        slug: String,
        id: Option<String>,
    },
}

/// One cleanup record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub kind: RecordKind,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub deployment_id: String,
    pub created: Created,
}

/// The ConfigMap name of the record of the object with this UID.
pub fn record_name(uid: &str) -> String {
    format!("{NAME_PREFIX}{uid}")
}

mod keys {
    pub const KIND: &str = "kind";
    pub const NAMESPACE: &str = "namespace";
    pub const NAME: &str = "name";
    pub const UID: &str = "uid";
    pub const DEPLOYMENT_ID: &str = "coderDeploymentID";
    pub const PROVIDER_NAME: &str = "providerName";
    pub const PROVIDER_ID: &str = "providerID";
    pub const KEY_NAME_PREFIX: &str = "keyNamePrefix";
    pub const ORGANIZATION_ID: &str = "organizationID";
    pub const SLUG: &str = "slug";
    pub const SERVER_ID: &str = "serverID";
}

impl Record {
    /// The record as the ConfigMap the operator applies in `operator_namespace`.
    pub fn to_config_map(&self, operator_namespace: &str) -> ConfigMap {
        let mut data = BTreeMap::from([
            (keys::KIND, self.kind.as_str().to_owned()),
            (keys::NAMESPACE, self.namespace.clone()),
            (keys::NAME, self.name.clone()),
            (keys::UID, self.uid.clone()),
            (keys::DEPLOYMENT_ID, self.deployment_id.clone()),
        ]);
        match &self.created {
            Created::Provider { name, id } => {
                data.insert(keys::PROVIDER_NAME, name.clone());
                if let Some(id) = id {
                    data.insert(keys::PROVIDER_ID, id.clone());
                }
            }
            Created::KeyPrefix(prefix) => {
                data.insert(keys::KEY_NAME_PREFIX, prefix.clone());
            }
            Created::McpServer {
                organization_id,
                slug,
                id,
            } => {
                data.insert(keys::ORGANIZATION_ID, organization_id.clone());
                data.insert(keys::SLUG, slug.clone());
                if let Some(id) = id {
                    data.insert(keys::SERVER_ID, id.clone());
                }
            }
        }
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(record_name(&self.uid)),
                namespace: Some(operator_namespace.to_owned()),
                labels: Some(BTreeMap::from([
                    (LABEL.to_owned(), self.kind.as_str().to_owned()),
                    ("app.kubernetes.io/managed-by".to_owned(), MANAGED_BY.to_owned()),
                ])),
                ..ObjectMeta::default()
            },
            data: Some(data.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
            ..ConfigMap::default()
        }
    }

    /// Every field in a fixed order, one per line: what the signature covers.
    pub fn canonical(&self) -> String {
        let created = match &self.created {
            Created::Provider { name, id } => {
                format!("provider\n{name}\n{}", id.as_deref().unwrap_or_default())
            }
            Created::KeyPrefix(prefix) => format!("keys\n{prefix}"),
            Created::McpServer {
                organization_id,
                slug,
                id,
            } => format!(
                "mcp\n{organization_id}\n{slug}\n{}",
                id.as_deref().unwrap_or_default()
            ),
        };
        [
            self.kind.as_str(),
            &self.namespace,
            &self.name,
            &self.uid,
            &self.deployment_id,
            &created,
        ]
        .join("\n")
    }

    /// Reads a record; the error names what is missing or wrong (never a value).
    pub fn from_config_map(config_map: &ConfigMap) -> Result<Self, String> {
        let data = config_map.data.clone().unwrap_or_default();
        let field = |key: &str| -> Result<String, String> {
            data.get(key)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("the record has no {key}"))
        };
        let optional = |key: &str| {
            data.get(key)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let kind = RecordKind::parse(&field(keys::KIND)?).ok_or("the record names an unknown kind")?;
        let uid = field(keys::UID)?;
        if config_map.metadata.name.as_deref() != Some(record_name(&uid).as_str()) {
            return Err("the record's name does not match its uid".to_owned());
        }
        let created = match kind {
            RecordKind::AIProvider => Created::Provider {
                name: field(keys::PROVIDER_NAME)?,
                id: optional(keys::PROVIDER_ID),
            },
            RecordKind::AIGatewayKey => {
                let prefix = field(keys::KEY_NAME_PREFIX)?;
                // A record can only name the keys of its own UID: the prefix is derived, never trusted.
                if prefix != key_name_prefix(&uid) {
                    return Err("the record's key name prefix does not belong to its uid".to_owned());
                }
                Created::KeyPrefix(prefix)
            }
            RecordKind::MCPServer => Created::McpServer {
                organization_id: field(keys::ORGANIZATION_ID)?,
                slug: field(keys::SLUG)?,
                id: optional(keys::SERVER_ID),
            },
        };
        Ok(Self {
            kind,
            namespace: field(keys::NAMESPACE)?,
            name: field(keys::NAME)?,
            uid,
            deployment_id: field(keys::DEPLOYMENT_ID)?,
            created,
        })
    }
}

/// Whether Coder's `created_at` is not earlier than `record_created` (with 5 seconds for clock differences between
/// Coder and the Kubernetes API server): a record written after something existed did not precede its create, so
/// it is no proof that the operator made it.
pub fn created_since(created_at: &str, record_created: Option<&Time>) -> bool {
    let (Ok(created), Some(record)) = (created_at.parse::<k8s_openapi::jiff::Timestamp>(), record_created)
    else {
        return false;
    };
    let slack = k8s_openapi::jiff::SignedDuration::from_secs(5);
    record
        .0
        .checked_sub(slack)
        .is_ok_and(|earliest| created >= earliest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "3f2c1a9e-1b2c-4d5e-8f90-0123456789ab";

    fn key_record() -> Record {
        Record {
            kind: RecordKind::AIGatewayKey,
            namespace: "team".to_owned(),
            name: "gateway".to_owned(),
            uid: UID.to_owned(),
            deployment_id: "d-1".to_owned(),
            created: Created::KeyPrefix(key_name_prefix(UID)),
        }
    }

    #[test]
    fn a_record_round_trips_through_its_config_map() {
        let provider = Record {
            kind: RecordKind::AIProvider,
            created: Created::Provider {
                name: "openai".to_owned(),
                id: Some("p-1".to_owned()),
            },
            ..key_record()
        };
        let mcp = Record {
            kind: RecordKind::MCPServer,
            created: Created::McpServer {
                organization_id: "o-1".to_owned(),
                slug: "github".to_owned(),
                id: None,
            },
            ..key_record()
        };
        for record in [key_record(), provider, mcp] {
            let cm = record.to_config_map("coder-system");
            assert_eq!(
                cm.metadata.name.as_deref(),
                Some(format!("ck8s-cleanup-{UID}").as_str())
            );
            assert_eq!(cm.metadata.namespace.as_deref(), Some("coder-system"));
            assert_eq!(cm.metadata.labels.as_ref().unwrap()[LABEL], record.kind.as_str());
            assert_eq!(Record::from_config_map(&cm), Ok(record));
        }
    }

    #[test]
    fn a_key_record_holds_the_prefix_of_its_uid() {
        let cm = key_record().to_config_map("coder-system");
        assert_eq!(
            cm.data.as_ref().unwrap()["keyNamePrefix"],
            "ck8s-3f2c1a9e1b2c4d5e8f900123456789ab-"
        );
    }

    #[test]
    fn a_record_aimed_at_other_keys_is_refused() {
        let mut cm = key_record().to_config_map("coder-system");
        cm.data
            .as_mut()
            .unwrap()
            .insert("keyNamePrefix".to_owned(), "ck8s-".to_owned());
        assert!(Record::from_config_map(&cm).unwrap_err().contains("prefix"));
        let mut renamed = key_record().to_config_map("coder-system");
        renamed.metadata.name = Some("ck8s-cleanup-other".to_owned());
        assert!(Record::from_config_map(&renamed).unwrap_err().contains("name"));
    }

    #[test]
    fn an_incomplete_record_says_what_is_missing() {
        let mut cm = key_record().to_config_map("coder-system");
        cm.data.as_mut().unwrap().remove("coderDeploymentID");
        assert_eq!(
            Record::from_config_map(&cm),
            Err("the record has no coderDeploymentID".to_owned())
        );
        cm.data
            .as_mut()
            .unwrap()
            .insert("kind".to_owned(), "Pod".to_owned());
        assert_eq!(
            Record::from_config_map(&cm),
            Err("the record names an unknown kind".to_owned())
        );
    }

    fn time(text: &str) -> Time {
        Time(text.parse().unwrap())
    }

    #[test]
    fn only_something_created_after_the_record_counts_as_ours() {
        let record = time("2026-01-01T12:00:00Z");
        assert!(created_since("2026-01-01T12:00:05Z", Some(&record)));
        assert!(
            created_since("2026-01-01T11:59:57Z", Some(&record)),
            "seconds of clock difference"
        );
        assert!(!created_since("2026-01-01T11:59:30Z", Some(&record)));
        assert!(!created_since("2026-01-01T11:00:00Z", Some(&record)));
        assert!(!created_since("not a time", Some(&record)));
        assert!(!created_since("2026-01-01T12:00:05Z", None));
    }
}
