//! `GET /api/v2/entitlements` (enterprise builds; AGPL builds answer `Route not found.`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Entitlement of one feature.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Entitlement {
    /// Licensed.
    Entitled,
    /// License expired, still in its grace period.
    GracePeriod,
    /// Not licensed.
    #[default]
    NotEntitled,
    /// A value this client does not know.
    #[serde(other)]
    Unknown,
}

impl Entitlement {
    /// `entitled` or `grace_period`.
    pub fn is_entitled(self) -> bool {
        matches!(self, Self::Entitled | Self::GracePeriod)
    }
}

/// One feature of the entitlements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Feature {
    /// Entitlement.
    pub entitlement: Entitlement,
    /// Enabled.
    pub enabled: bool,
    /// Limit for limit features.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    /// Actual usage for limit features.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<i64>,
    /// Soft limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soft_limit: Option<i64>,
}

/// `Entitlements`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Entitlements {
    /// Per feature name.
    pub features: BTreeMap<String, Feature>,
    /// Warnings.
    pub warnings: Vec<String>,
    /// Errors.
    pub errors: Vec<String>,
    /// Whether a license is installed.
    pub has_license: bool,
    /// Trial license.
    pub trial: bool,
    /// Telemetry required.
    pub require_telemetry: bool,
    /// When they were computed (RFC 3339).
    pub refreshed_at: String,
}

impl Entitlements {
    /// The entitlement of `feature` (`not_entitled` when absent).
    pub fn entitlement(&self, feature: &str) -> Entitlement {
        self.features
            .get(feature)
            .map(|f| f.entitlement)
            .unwrap_or_default()
    }

    /// Whether `feature` is entitled (`entitled` or `grace_period`).
    pub fn is_entitled(&self, feature: &str) -> bool {
        self.entitlement(feature).is_entitled()
    }

    /// Whether `feature` is enabled.
    pub fn is_enabled(&self, feature: &str) -> bool {
        self.features.get(feature).is_some_and(|f| f.enabled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_features_and_unknown_values() {
        let e: Entitlements = serde_json::from_str(
            r#"{"features":{"external_provisioner_daemons":{"entitlement":"grace_period","enabled":true},
               "x":{"entitlement":"future","enabled":false},"user_limit":{"entitlement":"not_entitled","enabled":false,"actual":3}},
               "has_license":true}"#,
        )
        .unwrap();
        assert!(e.is_entitled("external_provisioner_daemons"));
        assert!(e.is_enabled("external_provisioner_daemons"));
        assert_eq!(e.entitlement("x"), Entitlement::Unknown);
        assert!(!e.is_entitled("workspace_proxy"));
        assert_eq!(e.features["user_limit"].actual, Some(3));
    }
}
