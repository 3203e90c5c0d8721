//! `/api/v2/templates/{template}/acl`: who may use or administer a template (premium: Template RBAC).
//!
//! Coder v2.30.0 serves these routes only with the `template_rbac` feature licensed: an unlicensed enterprise build
//! answers 403 `Template RBAC is a Premium feature. Contact sales!`, the open-source build `Route not found.`. The
//! access list Coder answers leaves out deleted and suspended users (their entries stay stored), and names its group
//! list `group`, not `groups`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `TemplateRole` as written: `admin` or `use`.
pub const ROLE_ADMIN: &str = "admin";
/// `TemplateRole` `use`.
pub const ROLE_USE: &str = "use";
/// The role that removes an entry in an [`UpdateTemplateAcl`] (`codersdk.TemplateRoleDeleted`).
pub const ROLE_REMOVED: &str = "";

/// `TemplateUser`: a user (the fields the operator uses) and its role.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateAclUser {
    /// User ID.
    pub id: Uuid,
    /// Username.
    pub username: String,
    /// `admin` or `use`.
    pub role: String,
}

/// `TemplateGroup`: a group (the fields the operator uses) and its role.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateAclGroup {
    /// Group ID (the `Everyone` group's is the organization ID).
    pub id: Uuid,
    /// Group name.
    pub name: String,
    /// `admin` or `use`.
    pub role: String,
}

/// `TemplateACL`, the answer of `GET /templates/{template}/acl`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateAcl {
    /// Users with a role (deleted and suspended users are left out by Coder).
    pub users: Vec<TemplateAclUser>,
    /// Groups with a role; Coder's JSON name is `group`.
    #[serde(rename = "group")]
    pub groups: Vec<TemplateAclGroup>,
}

/// `UpdateTemplateACL`, the body of `PATCH /templates/{template}/acl`. Coder merges it into the stored list: an
/// entry sets that user's or group's role, the role [`ROLE_REMOVED`] removes it, and entries left out stay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateTemplateAcl {
    /// User ID → role.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub user_perms: BTreeMap<Uuid, String>,
    /// Group ID → role.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub group_perms: BTreeMap<Uuid, String>,
}

impl UpdateTemplateAcl {
    /// Whether the body changes nothing.
    pub fn is_empty(&self) -> bool {
        self.user_perms.is_empty() && self.group_perms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn the_group_list_is_read_from_coders_group_field() {
        let acl: TemplateAcl = serde_json::from_value(json!({
            "users": [{"id": Uuid::from_u128(1), "username": "alice", "email": "a@x", "role": "admin"}],
            "group": [{"id": Uuid::from_u128(2), "name": "Everyone", "members": [], "role": "use"}],
        }))
        .unwrap();
        assert_eq!(acl.users[0].username, "alice");
        assert_eq!(acl.users[0].role, "admin");
        assert_eq!(acl.groups[0].name, "Everyone");
        assert_eq!(acl.groups[0].role, "use");
    }

    #[test]
    fn an_update_sends_only_the_maps_it_has() {
        let mut update = UpdateTemplateAcl::default();
        assert!(update.is_empty());
        assert_eq!(serde_json::to_value(&update).unwrap(), json!({}));
        update
            .user_perms
            .insert(Uuid::from_u128(1), ROLE_REMOVED.to_owned());
        assert!(!update.is_empty());
        assert_eq!(
            serde_json::to_value(&update).unwrap(),
            json!({"user_perms": {Uuid::from_u128(1).to_string(): ""}})
        );
    }
}
