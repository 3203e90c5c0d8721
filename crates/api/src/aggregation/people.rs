//! Types of the aggregated resources for Coder's people and their grouping: `CoderOrganization` (named like the
//! organization), `CoderGroup` (`<organization>.<group>`) and `CoderUser` (named like the user). Read from Coder on
//! every request, like the workspace and template kinds; the same omission rules apply (an empty string, number or
//! time is left out unless a field comment says it is always written).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Coder organization. `metadata.name` is the organization's name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderOrganization {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CoderOrganizationSpec,
    #[serde(default)]
    pub status: CoderOrganizationStatus,
}

/// What an organization shows about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderOrganizationSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// An icon URL or path (`/emojis/1f3e2.png`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub icon: String,
}

/// The observed state of an organization.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderOrganizationStatus {
    /// The Coder organization ID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Whether this is the deployment's default organization (every deployment has one). Always written.
    #[serde(default)]
    pub is_default: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Time>,
}

/// A list of organizations.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderOrganizationList {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
    /// Always written, also when empty.
    #[serde(default)]
    pub items: Vec<CoderOrganization>,
}

/// A Coder group. `metadata.name` is `<organization>.<group>`, the group's name exactly as Coder spells it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderGroup {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CoderGroupSpec,
    #[serde(default)]
    pub status: CoderGroupStatus,
}

/// What a group is and who is in it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderGroupSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub organization: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(default, rename = "avatarURL", skip_serializing_if = "String::is_empty")]
    pub avatar_url: String,
    /// The workspace quota each member brings (quotas are a Premium feature). Always written.
    #[serde(default)]
    pub quota_allowance: i64,
    /// The members' user names, sorted. Always written, also when empty.
    #[serde(default)]
    pub members: Vec<String>,
}

/// The observed state of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderGroupStatus {
    /// The Coder group ID (the organization's ID for its `Everyone` group).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Where the group comes from: `user` (made in Coder or through this API) or `oidc` (synced from the identity
    /// provider; Coder changes its members on each login).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// How many members the group has. Always written.
    #[serde(default)]
    pub member_count: i64,
}

/// A list of groups.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderGroupList {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
    /// Always written, also when empty.
    #[serde(default)]
    pub items: Vec<CoderGroup>,
}

/// A Coder user. `metadata.name` is the user name exactly as Coder spells it. Never holds a password.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderUser {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CoderUserSpec,
    #[serde(default)]
    pub status: CoderUserStatus,
}

/// Who a user is, how they sign in and what they may do.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderUserSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub email: String,
    /// The full name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `password`, `oidc`, `github` or `none`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub login_type: String,
    /// Site-wide roles (`owner`, `user-admin`, `template-admin`, `auditor`), sorted. Always written, also when empty.
    #[serde(default)]
    pub roles: Vec<String>,
    /// The organizations the user is a member of, by name, each with the roles the user holds there (sorted; empty
    /// for a plain member). Always written, also when empty.
    #[serde(default)]
    pub organizations: BTreeMap<String, Vec<String>>,
    /// Whether the user is suspended (cannot sign in). Always written.
    #[serde(default)]
    pub suspended: bool,
    /// Where the first password of a new `password` user comes from. Read only when the user is created, never
    /// shown by a read, and never the password itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<CoderUserPassword>,
    /// What deleting the object does in Coder: `Suspend` (the default: the user can no longer sign in, and keeps
    /// its workspaces and history) or `Delete` (Coder refuses while the user owns workspaces). Always shown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub deletion_policy: String,
}

/// The first password of a new user: exactly one of `secretKeyRef` and `generate`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderUserPassword {
    /// A key of an existing Secret in the namespace that holds the password; the caller must be allowed to `get`
    /// that Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<CoderUserSecretKeyRef>,
    /// A new Secret the server creates with a generated password; the caller must be allowed to `create` Secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate: Option<CoderUserGeneratedPassword>,
}

/// A key of a Secret in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderUserSecretKeyRef {
    /// The Secret's name.
    #[serde(default)]
    pub name: String,
    /// The key in the Secret's data; its value must be UTF-8 text.
    #[serde(default)]
    pub key: String,
}

/// Where a generated password is written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderUserGeneratedPassword {
    /// The Secret to create (type `kubernetes.io/basic-auth`: `username` is the user's email, which Coder's sign-in
    /// asks for, and `password` the generated password). It must not exist yet.
    #[serde(default)]
    pub secret_name: String,
}

/// The observed state of a user.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderUserStatus {
    /// The Coder user ID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Coder's status: `active`, `dormant` (not seen for a while, or never) or `suspended`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<Time>,
}

/// A list of users.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoderUserList {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
    /// Always written, also when empty.
    #[serde(default)]
    pub items: Vec<CoderUser>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn always_written_fields_are_written_and_empty_ones_left_out() {
        let user = serde_json::to_value(CoderUser::default()).unwrap();
        assert_eq!(
            user,
            json!({
                "metadata": {},
                "spec": {"roles": [], "organizations": {}, "suspended": false},
                "status": {}
            })
        );
        let group = serde_json::to_value(CoderGroup::default()).unwrap();
        assert_eq!(group["spec"], json!({"quotaAllowance": 0, "members": []}));
        assert_eq!(group["status"], json!({"memberCount": 0}));
        let organization = serde_json::to_value(CoderOrganization::default()).unwrap();
        assert_eq!(organization["status"], json!({"isDefault": false}));
    }

    #[test]
    fn a_group_reads_back_as_written() {
        let group = json!({
            "apiVersion": "aggregation.coder.com/v1alpha1",
            "kind": "CoderGroup",
            "metadata": {"name": "default.platform"},
            "spec": {"organization": "default", "displayName": "Platform", "avatarURL": "/emojis/1f6e0.png",
                     "quotaAllowance": 5, "members": ["alice", "bob"]},
            "status": {"id": "7", "source": "user", "memberCount": 2}
        });
        let parsed: CoderGroup = serde_json::from_value(group.clone()).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), group);
    }
}
