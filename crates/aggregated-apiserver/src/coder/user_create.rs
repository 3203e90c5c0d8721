//! What creating a `CoderUser` sends Coder (pure): the fields of Coder's create call, where the first password comes
//! from, and the further calls of [`user_writes::plan`] that give the new user what Coder's create cannot (site
//! roles, roles in its organizations, the deletion policy). Every refusal is a field error, before anything is
//! written.

use coder_k8s_api::aggregation::{CoderUserSecretKeyRef, CoderUserSpec};

use super::field_errors::FieldError;
use super::k8s_names::{is_dns_subdomain, is_secret_data_key};
use super::user_writes::{self, UserChange};

/// The login types Coder creates users with.
pub const LOGIN_TYPES: &[&str] = &["password", "oidc", "github", "none"];

/// The Secret key a generated password is written under (and the user's email under `username`): the keys of a
/// `kubernetes.io/basic-auth` Secret.
pub const GENERATED_PASSWORD_KEY: &str = "password";

/// Where the first password of a new user comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswordSource {
    /// Not a password user.
    None,
    /// A key of an existing Secret of the namespace.
    Secret(CoderUserSecretKeyRef),
    /// A new Secret of this name, holding a password the server generates.
    Generate(String),
}

/// One create: Coder's create call, then `then` (in order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Creation {
    pub login_type: String,
    pub password: PasswordSource,
    /// Joined by the create call itself, without roles.
    pub organizations: Vec<String>,
    /// Coder can create a user suspended.
    pub suspended: bool,
    pub then: Vec<UserChange>,
}

/// The create of `desired`, or every field error of it.
pub fn creation(desired: &CoderUserSpec) -> Result<Creation, Vec<FieldError>> {
    let mut errors = Vec::new();
    if desired.email.is_empty() {
        errors.push(FieldError::required(
            "spec.email",
            "Coder signs users in by email",
        ));
    }
    let login_type = if desired.login_type.is_empty() {
        "password"
    } else {
        desired.login_type.as_str()
    };
    if !LOGIN_TYPES.contains(&login_type) {
        errors.push(FieldError::unsupported("spec.loginType", login_type, LOGIN_TYPES));
    }
    let password = password_source(login_type, desired, &mut errors);
    if desired.organizations.is_empty() {
        errors.push(FieldError::required(
            "spec.organizations",
            "a new user joins at least one organization (a fresh Coder has one, `coder`)",
        ));
    }
    // What Coder holds right after its create call; the plan from there is the rest of the create.
    let created = CoderUserSpec {
        email: desired.email.clone(),
        name: desired.name.clone(),
        login_type: login_type.to_owned(),
        roles: Vec::new(),
        organizations: desired
            .organizations
            .keys()
            .map(|o| (o.clone(), Vec::new()))
            .collect(),
        suspended: desired.suspended,
        password: None,
        deletion_policy: String::new(),
    };
    let desired = CoderUserSpec {
        login_type: login_type.to_owned(),
        ..desired.clone()
    };
    let then = user_writes::plan(&created, &desired).map_err(|e| errors.extend(e));
    match then {
        Ok(then) if errors.is_empty() => Ok(Creation {
            login_type: login_type.to_owned(),
            password,
            organizations: created.organizations.into_keys().collect(),
            suspended: desired.suspended,
            then,
        }),
        _ => Err(errors),
    }
}

/// `spec.password`: exactly one source for a password user, none for the others.
fn password_source(
    login_type: &str,
    desired: &CoderUserSpec,
    errors: &mut Vec<FieldError>,
) -> PasswordSource {
    let (reference, generate) = match &desired.password {
        Some(p) => (p.secret_key_ref.as_ref(), p.generate.as_ref()),
        None => (None, None),
    };
    if login_type != "password" {
        if reference.is_some() || generate.is_some() {
            errors.push(FieldError::forbidden(
                "spec.password",
                format!(
                    "only a user with login type \"password\" has a password (this one is {login_type:?})"
                ),
            ));
        }
        return PasswordSource::None;
    }
    match (reference, generate) {
        (Some(reference), None) => {
            check_reference(reference, errors);
            PasswordSource::Secret(reference.clone())
        }
        (None, Some(generate)) => {
            let field = "spec.password.generate.secretName";
            if generate.secret_name.is_empty() {
                errors.push(FieldError::required(field, ""));
            } else if !is_dns_subdomain(&generate.secret_name) {
                errors.push(FieldError::invalid(
                    field,
                    &generate.secret_name,
                    SECRET_NAME_RULE,
                ));
            }
            PasswordSource::Generate(generate.secret_name.clone())
        }
        (Some(_), Some(_)) => {
            errors.push(FieldError::forbidden(
                "spec.password",
                "give either secretKeyRef or generate, not both",
            ));
            PasswordSource::None
        }
        (None, None) => {
            errors.push(FieldError::required(
                "spec.password",
                "a new user with login type \"password\" needs its first password: secretKeyRef (a key of an \
                 existing Secret) or generate (a new Secret)",
            ));
            PasswordSource::None
        }
    }
}

const SECRET_NAME_RULE: &str =
    "a Secret name must be a lowercase RFC 1123 subdomain of at most 253 characters";

fn check_reference(reference: &CoderUserSecretKeyRef, errors: &mut Vec<FieldError>) {
    let at = "spec.password.secretKeyRef";
    if reference.name.is_empty() {
        errors.push(FieldError::required(format!("{at}.name"), ""));
    } else if !is_dns_subdomain(&reference.name) {
        errors.push(FieldError::invalid(
            format!("{at}.name"),
            &reference.name,
            SECRET_NAME_RULE,
        ));
    }
    if !is_secret_data_key(&reference.key) {
        errors.push(FieldError::invalid(
            format!("{at}.key"),
            &reference.key,
            "a Secret key consists of alphanumeric characters, '-', '_' or '.', at most 253, and is not '.' or \
             starts with '..'",
        ));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use coder_k8s_api::aggregation::{CoderUserGeneratedPassword, CoderUserPassword};

    use super::super::user_writes::DeletionPolicy;
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn bob() -> CoderUserSpec {
        CoderUserSpec {
            email: "bob@example.com".to_owned(),
            name: "Bob".to_owned(),
            login_type: "password".to_owned(),
            organizations: BTreeMap::from([("coder".to_owned(), Vec::new())]),
            password: Some(CoderUserPassword {
                secret_key_ref: None,
                generate: Some(CoderUserGeneratedPassword {
                    secret_name: "bob-login".to_owned(),
                }),
            }),
            ..CoderUserSpec::default()
        }
    }

    fn paths(errors: &[FieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn a_plain_password_user_is_one_create_call() {
        let creation = creation(&bob()).unwrap();
        assert_eq!(
            creation,
            Creation {
                login_type: "password".to_owned(),
                password: PasswordSource::Generate("bob-login".to_owned()),
                organizations: strings(&["coder"]),
                suspended: false,
                then: Vec::new(),
            }
        );
    }

    #[test]
    fn roles_and_the_deletion_policy_follow_the_create() {
        let mut spec = bob();
        spec.roles = strings(&["template-admin"]);
        spec.organizations = BTreeMap::from([
            ("coder".to_owned(), strings(&["organization-auditor"])),
            ("platform".to_owned(), Vec::new()),
        ]);
        spec.suspended = true;
        spec.deletion_policy = "Delete".to_owned();
        let creation = creation(&spec).unwrap();
        assert_eq!(creation.organizations, strings(&["coder", "platform"]));
        assert!(creation.suspended);
        assert_eq!(
            creation.then,
            vec![
                UserChange::OrganizationRoles("coder".to_owned(), strings(&["organization-auditor"])),
                UserChange::SiteRoles(strings(&["template-admin"])),
                UserChange::DeletionPolicy(DeletionPolicy::Delete),
            ]
        );
    }

    #[test]
    fn an_empty_login_type_is_coders_default_password() {
        let mut spec = bob();
        spec.login_type = String::new();
        assert_eq!(creation(&spec).unwrap().login_type, "password");
    }

    #[test]
    fn a_password_user_needs_exactly_one_valid_source() {
        let mut spec = bob();
        spec.password = None;
        assert_eq!(paths(&creation(&spec).unwrap_err()), ["spec.password"]);
        spec.password = Some(CoderUserPassword {
            secret_key_ref: Some(CoderUserSecretKeyRef {
                name: "../other".to_owned(),
                key: "a/b".to_owned(),
            }),
            generate: None,
        });
        assert_eq!(
            paths(&creation(&spec).unwrap_err()),
            [
                "spec.password.secretKeyRef.name",
                "spec.password.secretKeyRef.key"
            ]
        );
        let mut both = bob();
        if let Some(password) = both.password.as_mut() {
            password.secret_key_ref = Some(CoderUserSecretKeyRef {
                name: "a".to_owned(),
                key: "b".to_owned(),
            });
        }
        assert_eq!(paths(&creation(&both).unwrap_err()), ["spec.password"]);
        let mut bad_name = bob();
        bad_name.password = Some(CoderUserPassword {
            secret_key_ref: None,
            generate: Some(CoderUserGeneratedPassword {
                secret_name: "Bob/Login".to_owned(),
            }),
        });
        assert_eq!(
            paths(&creation(&bad_name).unwrap_err()),
            ["spec.password.generate.secretName"]
        );
    }

    #[test]
    fn other_login_types_have_no_password_and_every_error_is_reported_at_once() {
        let mut spec = bob();
        spec.login_type = "oidc".to_owned();
        spec.email = String::new();
        spec.organizations = BTreeMap::new();
        spec.deletion_policy = "Archive".to_owned();
        assert_eq!(
            paths(&creation(&spec).unwrap_err()),
            [
                "spec.email",
                "spec.password",
                "spec.organizations",
                "spec.deletionPolicy"
            ]
        );
        spec = bob();
        spec.login_type = "github".to_owned();
        spec.password = None;
        assert_eq!(creation(&spec).unwrap().password, PasswordSource::None);
        spec.login_type = "token".to_owned();
        assert_eq!(paths(&creation(&spec).unwrap_err()), ["spec.loginType"]);
    }
}
