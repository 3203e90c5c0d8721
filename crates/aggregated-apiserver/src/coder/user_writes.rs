//! What an update of a `CoderUser` changes in Coder (pure): the spec read from Coder and the spec asked for become
//! the list of Coder calls that turn one into the other, in an order that works (a user joins an organization
//! before roles are set there), or the field errors of what cannot change through this API. The deletion policy,
//! which Coder has no field for, is the one change kept in the server's own user record.

use std::collections::BTreeSet;

use coder_k8s_api::aggregation::CoderUserSpec;

use super::field_errors::FieldError;

/// One Coder call of a user update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserChange {
    /// `POST /organizations/{organization}/members/{user}`.
    Join(String),
    /// `PUT /organizations/{organization}/members/{user}/roles` with the whole list.
    OrganizationRoles(String, Vec<String>),
    /// `DELETE /organizations/{organization}/members/{user}`.
    Leave(String),
    /// `PUT /users/{user}/roles` with the whole list of site roles.
    SiteRoles(Vec<String>),
    /// `PUT /users/{user}/profile` with the user name kept and this full name.
    FullName(String),
    /// `PUT /users/{user}/status/suspend` (`true`) or `/activate`.
    Suspended(bool),
    /// The server's user record: what deleting the object will do.
    DeletionPolicy(DeletionPolicy),
}

/// What deleting a `CoderUser` does in Coder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeletionPolicy {
    /// The user is suspended and keeps its workspaces and history; the object is gone from the API.
    #[default]
    Suspend,
    /// The user is deleted in Coder (refused while it owns workspaces).
    Delete,
}

impl DeletionPolicy {
    /// `spec.deletionPolicy`: empty is the default.
    pub fn parse(value: &str) -> Result<Self, FieldError> {
        match value {
            "" | "Suspend" => Ok(Self::Suspend),
            "Delete" => Ok(Self::Delete),
            other => Err(FieldError::unsupported(
                "spec.deletionPolicy",
                other,
                &["Suspend", "Delete"],
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Suspend => "Suspend",
            Self::Delete => "Delete",
        }
    }
}

impl UserChange {
    /// What the change does, for the message of an update that stopped part way.
    pub fn describe(&self) -> String {
        match self {
            Self::Join(organization) => format!("joined organization {organization:?}"),
            Self::OrganizationRoles(organization, roles) => {
                format!("set the roles in organization {organization:?} to {roles:?}")
            }
            Self::Leave(organization) => format!("left organization {organization:?}"),
            Self::SiteRoles(roles) => format!("set the site roles to {roles:?}"),
            Self::FullName(name) => format!("set the full name to {name:?}"),
            Self::Suspended(true) => "suspended the user".to_owned(),
            Self::Suspended(false) => "activated the user".to_owned(),
            Self::DeletionPolicy(policy) => format!("recorded the deletion policy {:?}", policy.as_str()),
        }
    }
}

fn sorted(roles: &[String]) -> BTreeSet<&str> {
    roles.iter().map(String::as_str).collect()
}

fn owned(roles: &[String]) -> Vec<String> {
    sorted(roles).into_iter().map(str::to_owned).collect()
}

/// The fields Coder lets nobody change through its API (an email address, how the user signs in). Left out (empty)
/// keeps them: a manifest that relied on Coder's default login type applies again unchanged.
fn read_only(current: &CoderUserSpec, desired: &CoderUserSpec) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if !desired.email.is_empty() && desired.email != current.email {
        errors.push(FieldError::forbidden(
            "spec.email",
            format!(
                "the email address cannot be changed through Coder's API (it is {:?})",
                current.email
            ),
        ));
    }
    if !desired.login_type.is_empty() && desired.login_type != current.login_type {
        errors.push(FieldError::forbidden(
            "spec.loginType",
            format!(
                "the login type cannot be changed here (it is {:?})",
                current.login_type
            ),
        ));
    }
    errors
}

/// The calls that turn `current` into `desired`, in order: memberships joined (with their roles), roles changed,
/// memberships left, site roles, full name, suspension, then the deletion policy. Roles compare as sets. The
/// password is not compared: it is read only when a user is created.
pub fn plan(current: &CoderUserSpec, desired: &CoderUserSpec) -> Result<Vec<UserChange>, Vec<FieldError>> {
    let mut errors = read_only(current, desired);
    let policy = DeletionPolicy::parse(&desired.deletion_policy).map_err(|e| errors.push(e));
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut changes = Vec::new();
    for (organization, roles) in &desired.organizations {
        match current.organizations.get(organization) {
            None => {
                changes.push(UserChange::Join(organization.clone()));
                if !roles.is_empty() {
                    changes.push(UserChange::OrganizationRoles(organization.clone(), owned(roles)));
                }
            }
            Some(held) if sorted(held) != sorted(roles) => {
                changes.push(UserChange::OrganizationRoles(organization.clone(), owned(roles)));
            }
            Some(_) => {}
        }
    }
    for organization in current.organizations.keys() {
        if !desired.organizations.contains_key(organization) {
            changes.push(UserChange::Leave(organization.clone()));
        }
    }
    if sorted(&current.roles) != sorted(&desired.roles) {
        changes.push(UserChange::SiteRoles(owned(&desired.roles)));
    }
    if current.name != desired.name {
        changes.push(UserChange::FullName(desired.name.clone()));
    }
    if current.suspended != desired.suspended {
        changes.push(UserChange::Suspended(desired.suspended));
    }
    if let Ok(policy) = policy
        && DeletionPolicy::parse(&current.deletion_policy) != Ok(policy)
    {
        changes.push(UserChange::DeletionPolicy(policy));
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn alice() -> CoderUserSpec {
        CoderUserSpec {
            email: "alice@example.com".to_owned(),
            name: "Alice".to_owned(),
            login_type: "oidc".to_owned(),
            roles: strings(&["auditor"]),
            organizations: BTreeMap::from([
                ("acme".to_owned(), strings(&["organization-admin"])),
                ("globex".to_owned(), Vec::new()),
            ]),
            suspended: false,
            password: None,
            deletion_policy: "Suspend".to_owned(),
        }
    }

    #[test]
    fn the_same_spec_changes_nothing_whatever_the_order_of_roles() {
        let mut desired = alice();
        desired.roles = strings(&["auditor"]);
        assert_eq!(plan(&alice(), &desired), Ok(Vec::new()));
        let mut both = alice();
        both.roles = strings(&["template-admin", "auditor"]);
        let mut reordered = both.clone();
        reordered.roles = strings(&["auditor", "template-admin"]);
        assert_eq!(plan(&both, &reordered), Ok(Vec::new()));
    }

    #[test]
    fn every_difference_is_one_call_in_an_order_that_works() {
        let mut desired = alice();
        desired.organizations = BTreeMap::from([
            ("acme".to_owned(), Vec::new()),
            ("initech".to_owned(), strings(&["organization-auditor"])),
        ]);
        desired.roles = strings(&["template-admin", "auditor"]);
        desired.name = "Alice A.".to_owned();
        desired.suspended = true;
        assert_eq!(
            plan(&alice(), &desired),
            Ok(vec![
                UserChange::OrganizationRoles("acme".to_owned(), Vec::new()),
                UserChange::Join("initech".to_owned()),
                UserChange::OrganizationRoles("initech".to_owned(), strings(&["organization-auditor"])),
                UserChange::Leave("globex".to_owned()),
                UserChange::SiteRoles(strings(&["auditor", "template-admin"])),
                UserChange::FullName("Alice A.".to_owned()),
                UserChange::Suspended(true),
            ])
        );
    }

    #[test]
    fn a_new_plain_membership_is_one_join() {
        let mut desired = alice();
        desired.organizations.insert("initech".to_owned(), Vec::new());
        assert_eq!(
            plan(&alice(), &desired),
            Ok(vec![UserChange::Join("initech".to_owned())])
        );
    }

    #[test]
    fn email_and_login_type_cannot_change() {
        let mut desired = alice();
        desired.email = "mallory@example.com".to_owned();
        desired.login_type = "password".to_owned();
        desired.suspended = true;
        let errors = plan(&alice(), &desired).unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["spec.email", "spec.loginType"]);
    }

    #[test]
    fn the_deletion_policy_is_a_record_change_and_empty_means_suspend() {
        let mut desired = alice();
        desired.deletion_policy = String::new();
        assert_eq!(plan(&alice(), &desired), Ok(Vec::new()));
        desired.deletion_policy = "Delete".to_owned();
        desired.suspended = true;
        assert_eq!(
            plan(&alice(), &desired),
            Ok(vec![
                UserChange::Suspended(true),
                UserChange::DeletionPolicy(DeletionPolicy::Delete)
            ])
        );
        desired.deletion_policy = "Archive".to_owned();
        let errors = plan(&alice(), &desired).unwrap_err();
        assert_eq!(errors[0].path, "spec.deletionPolicy");
    }

    #[test]
    fn a_left_out_email_or_login_type_keeps_coders() {
        let mut desired = alice();
        desired.email = String::new();
        desired.login_type = String::new();
        assert_eq!(plan(&alice(), &desired), Ok(Vec::new()));
    }

    #[test]
    fn each_change_says_what_it_did() {
        assert_eq!(
            UserChange::Join("acme".to_owned()).describe(),
            "joined organization \"acme\""
        );
        assert_eq!(UserChange::Suspended(false).describe(), "activated the user");
    }
}
