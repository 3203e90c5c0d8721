//! `spec.acl`: a template's access list by user and group name. Reads turn Coder's list into names; a write checks
//! the entries, resolves every name to its Coder ID (an unknown name is a 422 naming the entry) and sends Coder only
//! the difference, because Coder's access-list update merges: each list the spec gives becomes the whole list (an
//! entry not listed is sent with the role `""`, which removes it), a list the spec leaves out is not touched.

use std::collections::BTreeMap;

use coder_k8s_api::aggregation::{CoderTemplateAcl, CoderTemplateAclEntry};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::Error as CoderError;
use coder_k8s_coder_client::types::template_acl::{
    ROLE_ADMIN, ROLE_REMOVED, ROLE_USE, TemplateAcl, UpdateTemplateAcl,
};
use tokio::time::Instant;
use uuid::Uuid;

use super::errors::{Subject, within};
use super::field_errors::FieldError;
use crate::generic::ApiError;

/// The roles an entry may have.
pub const ROLES: [&str; 2] = [ROLE_USE, ROLE_ADMIN];

/// Coder's list by name, each list sorted by name (Coder answers in no fixed order).
pub fn read_back(acl: &TemplateAcl) -> CoderTemplateAcl {
    let sorted = |mut entries: Vec<CoderTemplateAclEntry>| {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Some(entries)
    };
    CoderTemplateAcl {
        groups: sorted(
            acl.groups
                .iter()
                .map(|g| CoderTemplateAclEntry {
                    name: g.name.clone(),
                    role: g.role.clone(),
                })
                .collect(),
        ),
        users: sorted(
            acl.users
                .iter()
                .map(|u| CoderTemplateAclEntry {
                    name: u.username.clone(),
                    role: u.role.clone(),
                })
                .collect(),
        ),
    }
}

/// Coder's longest username and group name.
const MAX_USER_NAME: usize = 32;
const MAX_GROUP_NAME: usize = 255;

/// Coder's rule for user and group names (`^[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*$`): ASCII letters and digits joined by
/// single hyphens. Checked before a name goes into a Coder URL path, where `..`, `/` or `?` would reach another
/// endpoint.
fn valid_coder_name(name: &str, max: usize) -> bool {
    name.len() <= max
        && name
            .split('-')
            .all(|run| !run.is_empty() && run.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// The rules of the entries: a name Coder could have, a known role, each name once per list.
pub fn validate(acl: &CoderTemplateAcl) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (list, entries) in [("groups", &acl.groups), ("users", &acl.users)] {
        let max = if list == "users" {
            MAX_USER_NAME
        } else {
            MAX_GROUP_NAME
        };
        let mut seen: Vec<&str> = Vec::new();
        for (index, entry) in entries.iter().flatten().enumerate() {
            let at = format!("spec.acl.{list}[{index}]");
            if entry.name.is_empty() {
                errors.push(FieldError::required(format!("{at}.name"), ""));
            } else if !valid_coder_name(&entry.name, max) {
                errors.push(FieldError::invalid(
                    format!("{at}.name"),
                    &entry.name,
                    format!(
                        "must be ASCII letters and digits joined by single '-', at most {max} characters"
                    ),
                ));
            } else if seen.contains(&entry.name.as_str()) {
                errors.push(FieldError::duplicate(format!("{at}.name"), &entry.name));
            }
            seen.push(&entry.name);
            if !ROLES.contains(&entry.role.as_str()) {
                errors.push(FieldError::unsupported(format!("{at}.role"), &entry.role, &ROLES));
            }
        }
    }
    errors
}

/// The lists a spec gives, by Coder ID: `None` for a list left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub users: Option<BTreeMap<Uuid, String>>,
    pub groups: Option<BTreeMap<Uuid, String>>,
}

/// A name that resolved, or the field error of one that did not.
type Lookup = Result<Uuid, FieldError>;

/// Resolves every name of `acl` (already validated): users by username, groups by name in `organization`. Names
/// Coder does not know, or knows under another spelling, are 422 field errors (all of them at once); Coder's own
/// refusals (403 `Template RBAC is a Premium feature` for groups on an unlicensed Coder) are passed on.
pub async fn resolve(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    organization: &str,
    acl: &CoderTemplateAcl,
) -> Result<Result<Resolved, Vec<FieldError>>, ApiError> {
    let mut errors = Vec::new();
    let mut lists = Vec::new();
    for (list, entries) in [("users", &acl.users), ("groups", &acl.groups)] {
        let Some(entries) = entries else {
            lists.push(None);
            continue;
        };
        let mut ids = BTreeMap::new();
        for (index, entry) in entries.iter().enumerate() {
            let path = format!("spec.acl.{list}[{index}].name");
            let found = if list == "users" {
                user_id(client, deadline, subject, &path, &entry.name).await?
            } else {
                group_id(client, deadline, subject, organization, &path, &entry.name).await?
            };
            match found {
                Ok(id) => {
                    ids.insert(id, entry.role.clone());
                }
                Err(error) => errors.push(error),
            }
        }
        lists.push(Some(ids));
    }
    if !errors.is_empty() {
        return Ok(Err(errors));
    }
    let mut lists = lists.into_iter();
    Ok(Ok(Resolved {
        users: lists.next().flatten(),
        groups: lists.next().flatten(),
    }))
}

async fn user_id(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    path: &str,
    name: &str,
) -> Result<Lookup, ApiError> {
    // Coder reads `me` and IDs as well as usernames; only the exact username counts here.
    let found = match tokio::time::timeout_at(deadline, client.user(name)).await {
        Ok(Ok(user)) => user,
        // Coder answers 400 for a user it does not know.
        Ok(Err(CoderError::Rejected { status: 400, .. } | CoderError::NotFound { .. })) => {
            return Ok(Err(FieldError::not_found(
                path,
                name,
                "Coder has no user of this name",
            )));
        }
        Ok(Err(error)) => return Err(super::errors::map_coder_error(&error, subject)),
        Err(_) => return Err(super::errors::timed_out(subject)),
    };
    if found.username != name {
        return Ok(Err(FieldError::invalid(
            path,
            name,
            format!("Coder's user is named {:?}: use that name", found.username),
        )));
    }
    Ok(Ok(found.id))
}

async fn group_id(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    organization: &str,
    path: &str,
    name: &str,
) -> Result<Lookup, ApiError> {
    match tokio::time::timeout_at(deadline, client.group_by_name(organization, name)).await {
        Ok(Ok(group)) => Ok(Ok(group.id)),
        Ok(Err(error)) if error.is_not_found() => Ok(Err(FieldError::not_found(
            path,
            name,
            format!("organization {organization:?} has no group of this name"),
        ))),
        Ok(Err(error)) => Err(super::errors::map_coder_error(&error, subject)),
        Err(_) => Err(super::errors::timed_out(subject)),
    }
}

/// The update that turns `current` into `desired`: new and changed entries with their role, entries missing from a
/// given list with [`ROLE_REMOVED`]; empty when nothing changes.
pub fn difference(current: &TemplateAcl, desired: &Resolved) -> UpdateTemplateAcl {
    let users: BTreeMap<Uuid, String> = current.users.iter().map(|u| (u.id, u.role.clone())).collect();
    let groups: BTreeMap<Uuid, String> = current.groups.iter().map(|g| (g.id, g.role.clone())).collect();
    UpdateTemplateAcl {
        user_perms: desired
            .users
            .as_ref()
            .map(|d| diff(&users, d))
            .unwrap_or_default(),
        group_perms: desired
            .groups
            .as_ref()
            .map(|d| diff(&groups, d))
            .unwrap_or_default(),
    }
}

fn diff(current: &BTreeMap<Uuid, String>, desired: &BTreeMap<Uuid, String>) -> BTreeMap<Uuid, String> {
    let mut out: BTreeMap<Uuid, String> = desired
        .iter()
        .filter(|(id, role)| current.get(*id) != Some(*role))
        .map(|(id, role)| (*id, role.clone()))
        .collect();
    for id in current.keys().filter(|id| !desired.contains_key(*id)) {
        out.insert(*id, ROLE_REMOVED.to_owned());
    }
    out
}

/// Coder's access list of template `id`, or the refusal of a Coder without Template RBAC: Coder's own 403 passed on,
/// and for open-source Coder (which has no such route) a 422 naming `spec.acl` and the feature.
pub async fn current(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    id: Uuid,
) -> Result<Result<TemplateAcl, FieldError>, ApiError> {
    match tokio::time::timeout_at(deadline, client.template_acl(id)).await {
        Ok(Ok(acl)) => Ok(Ok(acl)),
        Ok(Err(error)) if error.is_route_not_found() => Ok(Err(not_served())),
        Ok(Err(error)) => Err(super::errors::map_coder_error(&error, subject)),
        Err(_) => Err(super::errors::timed_out(subject)),
    }
}

/// Whether Coder serves access lists, for a create (which has no template to read the list of yet): Coder gates the
/// route before it looks the template up, so the nil ID is asked. Answers as [`current`] does for an update: Coder's
/// own 403 passed on when the feature is not licensed, [`not_served`] on open-source Coder.
pub async fn served(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
) -> Result<Result<(), FieldError>, ApiError> {
    match tokio::time::timeout_at(deadline, client.template_acl(Uuid::nil())).await {
        // Past the gate: there is no such template.
        Ok(Ok(_)) => Ok(Ok(())),
        Ok(Err(error)) if error.is_not_found() => Ok(Ok(())),
        Ok(Err(error)) if error.is_route_not_found() => Ok(Err(not_served())),
        Ok(Err(error)) => Err(super::errors::map_coder_error(&error, subject)),
        Err(_) => Err(super::errors::timed_out(subject)),
    }
}

/// The field error of `spec.acl` on a Coder that serves no access lists (open-source Coder).
pub fn not_served() -> FieldError {
    FieldError::forbidden(
        "spec.acl",
        "needs Coder's premium feature Template RBAC (template_rbac), which open-source Coder does not have; nothing was changed",
    )
}

/// The access list a read shows: Coder's, or `None` where Coder serves none (not licensed, open source).
pub async fn shown(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    id: Uuid,
) -> Result<Option<CoderTemplateAcl>, ApiError> {
    match tokio::time::timeout_at(deadline, client.template_acl(id)).await {
        Ok(Ok(acl)) => Ok(Some(read_back(&acl))),
        Ok(Err(error)) if error.is_route_not_found() || matches!(error, CoderError::Forbidden { .. }) => {
            Ok(None)
        }
        Ok(Err(error)) => Err(super::errors::map_coder_error(&error, subject)),
        Err(_) => Err(super::errors::timed_out(subject)),
    }
}

/// Sends `update` when it changes anything.
pub async fn write(
    client: &CoderClient,
    deadline: Instant,
    subject: Subject<'_>,
    id: Uuid,
    update: &UpdateTemplateAcl,
) -> Result<(), ApiError> {
    if update.is_empty() {
        return Ok(());
    }
    within(deadline, subject, client.update_template_acl(id, update)).await
}

#[cfg(test)]
mod tests {
    use coder_k8s_coder_client::types::template_acl::{TemplateAclGroup, TemplateAclUser};

    use super::*;

    fn entry(name: &str, role: &str) -> CoderTemplateAclEntry {
        CoderTemplateAclEntry {
            name: name.into(),
            role: role.into(),
        }
    }

    #[test]
    fn reads_show_names_sorted() {
        let acl = TemplateAcl {
            users: vec![
                TemplateAclUser {
                    id: Uuid::from_u128(2),
                    username: "bob".into(),
                    role: "use".into(),
                },
                TemplateAclUser {
                    id: Uuid::from_u128(1),
                    username: "alice".into(),
                    role: "admin".into(),
                },
            ],
            groups: vec![TemplateAclGroup {
                id: Uuid::from_u128(9),
                name: "Everyone".into(),
                role: "use".into(),
            }],
        };
        assert_eq!(
            read_back(&acl),
            CoderTemplateAcl {
                groups: Some(vec![entry("Everyone", "use")]),
                users: Some(vec![entry("alice", "admin"), entry("bob", "use")]),
            }
        );
    }

    #[test]
    fn entries_need_a_name_a_known_role_and_no_repeats() {
        let acl = CoderTemplateAcl {
            groups: Some(vec![entry("", "use")]),
            users: Some(vec![entry("alice", "owner"), entry("alice", "use")]),
        };
        let errors: Vec<String> = validate(&acl).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "spec.acl.groups[0].name: Required value",
                "spec.acl.users[0].role: Unsupported value: \"owner\": supported values: \"use\", \"admin\"",
                "spec.acl.users[1].name: Duplicate value: \"alice\"",
            ]
        );
        assert!(validate(&CoderTemplateAcl::default()).is_empty());
    }

    #[test]
    fn names_that_are_not_coder_names_are_refused_before_they_reach_a_url() {
        let acl = CoderTemplateAcl {
            groups: Some(vec![
                entry("Everyone", "use"),
                entry("dev-team-2", "admin"),
                entry("..", "use"),
                entry(&"g".repeat(256), "use"),
            ]),
            users: Some(vec![
                entry("a/b", "use"),
                entry("x?y", "use"),
                entry("-bob", "use"),
                entry("al--ice", "use"),
                entry(&"u".repeat(33), "use"),
                entry(&"u".repeat(32), "use"),
            ]),
        };
        let errors: Vec<String> = validate(&acl).iter().map(ToString::to_string).collect();
        let rule = "must be ASCII letters and digits joined by single '-', at most";
        let g256 = "g".repeat(256);
        let u33 = "u".repeat(33);
        assert_eq!(
            errors,
            [
                format!("spec.acl.groups[2].name: Invalid value: \"..\": {rule} 255 characters"),
                format!("spec.acl.groups[3].name: Invalid value: \"{g256}\": {rule} 255 characters"),
                format!("spec.acl.users[0].name: Invalid value: \"a/b\": {rule} 32 characters"),
                format!("spec.acl.users[1].name: Invalid value: \"x?y\": {rule} 32 characters"),
                format!("spec.acl.users[2].name: Invalid value: \"-bob\": {rule} 32 characters"),
                format!("spec.acl.users[3].name: Invalid value: \"al--ice\": {rule} 32 characters"),
                format!("spec.acl.users[4].name: Invalid value: \"{u33}\": {rule} 32 characters"),
            ]
        );
    }

    #[test]
    fn only_the_difference_is_sent_and_a_list_left_out_is_untouched() {
        let (alice, bob, carol, everyone) = (
            Uuid::from_u128(1),
            Uuid::from_u128(2),
            Uuid::from_u128(3),
            Uuid::from_u128(9),
        );
        let current = TemplateAcl {
            users: vec![
                TemplateAclUser {
                    id: alice,
                    username: "alice".into(),
                    role: "use".into(),
                },
                TemplateAclUser {
                    id: bob,
                    username: "bob".into(),
                    role: "admin".into(),
                },
            ],
            groups: vec![TemplateAclGroup {
                id: everyone,
                name: "Everyone".into(),
                role: "use".into(),
            }],
        };
        let desired = Resolved {
            users: Some(BTreeMap::from([
                (alice, "admin".to_owned()),
                (carol, "use".to_owned()),
            ])),
            groups: None,
        };
        let update = difference(&current, &desired);
        assert_eq!(
            update.user_perms,
            BTreeMap::from([
                (alice, "admin".to_owned()),
                (bob, String::new()),
                (carol, "use".to_owned()),
            ])
        );
        assert!(update.group_perms.is_empty(), "groups left out are kept");
        let same = Resolved {
            users: Some(BTreeMap::from([
                (alice, "use".to_owned()),
                (bob, "admin".to_owned()),
            ])),
            groups: Some(BTreeMap::from([(everyone, "use".to_owned())])),
        };
        assert!(difference(&current, &same).is_empty());
        let none = Resolved {
            users: None,
            groups: Some(BTreeMap::new()),
        };
        assert_eq!(
            difference(&current, &none).group_perms,
            BTreeMap::from([(everyone, String::new())])
        );
    }
}
