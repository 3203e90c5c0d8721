//! Coder v2.30.0's built-in roles as its API renders and assigns them (`coderd/rbac/roles.go`, dbauthz's
//! `canAssignRoles`): display names, the roles a role change may name, and what a caller's roles let it read, update
//! and assign.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::Auth;
use crate::errors::ApiError;
use crate::state::App;

const OWNER: &str = "owner";
const USER_ADMIN: &str = "user-admin";
const ORG_ADMIN: &str = "organization-admin";
const ORG_USER_ADMIN: &str = "organization-user-admin";
/// The organization role every member has implicitly (a system role: stored in `custom_roles`, not built in).
pub(crate) const ORG_MEMBER: &str = "organization-member";
/// The site role every user has implicitly.
pub(crate) const MEMBER: &str = "member";

/// The built-in site roles and their display names.
const SITE_ROLES: &[(&str, &str)] = &[
    (OWNER, "Owner"),
    (MEMBER, "Member"),
    ("auditor", "Auditor"),
    ("template-admin", "Template Admin"),
    (USER_ADMIN, "User Admin"),
];

/// The built-in organization roles and their display names.
const ORG_ROLES: &[(&str, &str)] = &[
    (ORG_ADMIN, "Organization Admin"),
    ("organization-auditor", "Organization Auditor"),
    (ORG_USER_ADMIN, "Organization User Admin"),
    ("organization-template-admin", "Organization Template Admin"),
    (
        "organization-workspace-creation-ban",
        "Organization Workspace Creation Ban",
    ),
];

/// Coder's `SlimRoleFromName` of a site role: `{name, display_name}`, the display name empty for a role that is not
/// built in.
pub(crate) fn slim_site_role(name: &str) -> Value {
    let display_name = SITE_ROLES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, d)| *d);
    json!({ "name": name, "display_name": display_name })
}

/// An organization role as `convertOrganizationMembers` renders it: `{name, display_name, organization_id}`, the
/// display name empty for a role that is not built in (also `organization-member`, a system role).
pub(crate) fn slim_org_role(name: &str, org: Uuid) -> Value {
    let display_name = ORG_ROLES.iter().find(|(n, _)| *n == name).map_or("", |(_, d)| *d);
    json!({ "name": name, "display_name": display_name, "organization_id": org })
}

/// Whether `name` is a site role Coder knows (built in; the test server has no custom roles).
pub(crate) fn is_site_role(name: &str) -> bool {
    SITE_ROLES.iter().any(|(n, _)| *n == name)
}

/// Whether `name` is an organization role Coder knows (built in, or the `organization-member` system role).
pub(crate) fn is_org_role(name: &str) -> bool {
    name == ORG_MEMBER || ORG_ROLES.iter().any(|(n, _)| *n == name)
}

/// Coder's `ChangeRoleSet`: the roles of `to` not in `from` (added) and of `from` not in `to` (removed), each
/// without duplicates, in order.
pub(crate) fn change_role_set(from: &[String], to: &[String]) -> (Vec<String>, Vec<String>) {
    let unique = |list: &[String]| {
        let mut out: Vec<String> = Vec::new();
        for role in list {
            if !out.contains(role) {
                out.push(role.clone());
            }
        }
        out
    };
    let (from, to) = (unique(from), unique(to));
    let added = to.iter().filter(|r| !from.contains(r)).cloned().collect();
    let removed = from.iter().filter(|r| !to.contains(r)).cloned().collect();
    (added, removed)
}

/// The roles of an authenticated caller, as Coder's RBAC subject has them.
pub(crate) struct Caller {
    pub id: Uuid,
    site: Vec<String>,
    orgs: Vec<(Uuid, Vec<String>)>,
}

impl Caller {
    pub(crate) async fn of(app: &App, auth: &Auth) -> Result<Self, ApiError> {
        Ok(Self {
            id: auth.user.id,
            site: auth.user.rbac_roles.clone(),
            orgs: app.db.memberships(auth.user.id).await?,
        })
    }

    fn has_site(&self, roles: &[&str]) -> bool {
        self.site.iter().any(|r| roles.contains(&r.as_str()))
    }

    fn has_org(&self, org: Uuid, roles: &[&str]) -> bool {
        self.orgs
            .iter()
            .any(|(id, held)| *id == org && held.iter().any(|r| roles.contains(&r.as_str())))
    }

    fn has_any_org(&self, roles: &[&str]) -> bool {
        self.orgs
            .iter()
            .any(|(_, held)| held.iter().any(|r| roles.contains(&r.as_str())))
    }

    /// `read` on site users other than itself: owners, user admins, auditors, template admins, and any
    /// organization's admin or user admin (their roles read users site-wide).
    pub(crate) fn reads_users(&self) -> bool {
        self.has_site(&[OWNER, USER_ADMIN, "auditor", "template-admin"])
            || self.has_any_org(&[ORG_ADMIN, ORG_USER_ADMIN])
    }

    /// `read` on user `user`: itself, or any user for those of [`Caller::reads_users`].
    pub(crate) fn reads_user(&self, user: Uuid) -> bool {
        user == self.id || self.reads_users()
    }

    /// `read` on organization `org`: its members, and owners, user admins, auditors and template admins (their roles
    /// read every organization).
    pub(crate) fn reads_organization(&self, org: Uuid) -> bool {
        self.has_site(&[OWNER, USER_ADMIN, "auditor", "template-admin"])
            || self.orgs.iter().any(|(id, _)| *id == org)
    }

    /// What `InsertUser` needs (`assign` of the implied `member` site role, then `create` on users), also `delete`
    /// on users: owners and user admins.
    pub(crate) fn creates_users(&self) -> bool {
        self.has_site(&[OWNER, USER_ADMIN])
    }

    /// `update` on users (their username, status): owners and user admins; nobody else, not even on itself.
    pub(crate) fn updates_users(&self) -> bool {
        self.has_site(&[OWNER, USER_ADMIN])
    }

    /// `update_personal` on `user` (its name): itself, owners and user admins.
    pub(crate) fn updates_personal(&self, user: Uuid) -> bool {
        user == self.id || self.updates_users()
    }

    /// `assign` and `unassign` on site roles: owners and user admins.
    pub(crate) fn assigns_site_roles(&self) -> bool {
        self.has_site(&[OWNER, USER_ADMIN])
    }

    /// `assign`/`unassign` on the organization roles of `org`, also `create` and `delete` of its members: owners,
    /// user admins, and the organization's admins and user admins.
    pub(crate) fn manages_members(&self, org: Uuid) -> bool {
        self.has_site(&[OWNER, USER_ADMIN]) || self.has_org(org, &[ORG_ADMIN, ORG_USER_ADMIN])
    }

    /// Coder's `CanAssignRole` for a site role: owners any, user admins `member`.
    pub(crate) fn may_assign_site_role(&self, role: &str) -> bool {
        self.has_site(&[OWNER]) || (role == MEMBER && self.has_site(&[USER_ADMIN]))
    }

    /// Coder's `CanAssignRole` for an organization role of `org`: owners any, user admins and the organization's
    /// user admins `organization-member`, the organization's admins any organization role.
    pub(crate) fn may_assign_org_role(&self, org: Uuid, role: &str) -> bool {
        self.has_site(&[OWNER])
            || self.has_org(org, &[ORG_ADMIN])
            || (role == ORG_MEMBER && (self.has_site(&[USER_ADMIN]) || self.has_org(org, &[ORG_USER_ADMIN])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_role_change_is_what_is_added_and_what_is_removed_without_duplicates() {
        let (added, removed) = change_role_set(
            &owned(&["auditor", "owner", "auditor"]),
            &owned(&["member", "owner", "member", "template-admin"]),
        );
        assert_eq!(added, owned(&["member", "template-admin"]));
        assert_eq!(removed, owned(&["auditor"]));
    }

    #[test]
    fn roles_render_with_coders_display_names() {
        assert_eq!(
            slim_site_role("user-admin"),
            json!({"name": "user-admin", "display_name": "User Admin"})
        );
        assert_eq!(
            slim_site_role("custom"),
            json!({"name": "custom", "display_name": ""})
        );
        let org = Uuid::nil();
        assert_eq!(
            slim_org_role(ORG_MEMBER, org)["display_name"],
            "",
            "a system role"
        );
        assert!(is_org_role(ORG_MEMBER) && !is_site_role(ORG_MEMBER));
        assert!(is_site_role(MEMBER) && !is_org_role(MEMBER));
    }
}
