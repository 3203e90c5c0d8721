//! Creating and deleting `CoderUser`s. A create checks everything it can before anything is written (the spec, the
//! organizations, the caller's right to the password Secret), writes a generated password's Secret before the user
//! exists in Coder (so the only copy is never lost) and removes it again if Coder refuses the user. A delete follows
//! the user's deletion policy: `Delete` deletes the user in Coder; `Suspend` suspends it and records that, so the
//! object is gone from the API while Coder keeps the user, its workspaces and its history; creating the object
//! again brings that user back.

use std::collections::BTreeMap;

use coder_k8s_api::aggregation::{CoderUser, CoderUserSecretKeyRef, GROUP};
use coder_k8s_coder_client::types::users::{CreateUserRequest, User};
use coder_k8s_coder_client::{Error as CoderError, Secret as Hidden};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use tokio::time::Instant;
use uuid::Uuid;

use super::errors::map_coder_error;
use super::field_errors::{self, FieldError};
use super::names;
use super::provider::Backend;
use super::resources::{USERS, subject};
use super::user_create::{self, Creation, GENERATED_PASSWORD_KEY, PasswordSource};
use super::user_records::{UserRecord, UserStore};
use super::user_writes::{self, DeletionPolicy, UserChange};
use super::users::{Found, UserStorage, deadline, organization_names};
use super::write_rules::{check_preconditions, coder_write, gone};
use crate::generic::caller::{ExtraAction, authorize};
use crate::generic::{ApiError, Deleted, EventType, RequestContext, Written};

/// The label of a Secret holding a generated password.
pub const GENERATED_PASSWORD_LABEL: &str = "aggregation.coder.com/generated-password";
/// The annotation naming the user a generated password belongs to.
pub const PASSWORD_USER_ANNOTATION: &str = "aggregation.coder.com/user";
/// Letters and digits: 24 of them are about 143 bits, far above what Coder's password rule asks.
const PASSWORD_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const PASSWORD_LENGTH: usize = 24;

/// The first password of a new user and, when generated, the Secret that holds it.
struct FirstPassword {
    value: Hidden,
    generated_into: Option<String>,
}

impl UserStorage {
    /// Creates user `name` as `desired` asks, or brings back the user a delete suspended.
    pub(super) async fn create_user(
        &self,
        ctx: &RequestContext,
        backend: &Backend,
        name: &str,
        desired: CoderUser,
    ) -> Result<Written, ApiError> {
        let requested = names::parse_user_name(name)?;
        let deadline = deadline(ctx);
        if let Some(found) = self.lookup(backend, deadline, name).await? {
            if found.hidden() {
                return self.revive(backend, deadline, name, found, &desired).await;
            }
            return Err(ApiError::already_exists(GROUP, USERS, name));
        }
        let creation = user_create::creation(&desired.spec).map_err(|errors| invalid(name, &errors))?;
        let organization_ids = self.organization_ids(backend, deadline, name, &creation).await?;
        let password = self
            .first_password(
                ctx,
                &backend.namespace,
                name,
                &desired.spec.email,
                &creation.password,
            )
            .await?;
        let request = CreateUserRequest {
            email: desired.spec.email.clone(),
            username: requested,
            name: desired.spec.name.clone(),
            password: password.as_ref().map(|p| p.value.clone()).unwrap_or_default(),
            login_type: creation.login_type.clone(),
            user_status: creation.suspended.then(|| "suspended".to_owned()),
            organization_ids,
        };
        let created = coder_write(
            deadline,
            subject(USERS, name),
            backend.client.create_user(&request),
            |e| creation_refused(e, name),
        )
        .await;
        let user = match created {
            Ok(user) => user,
            Err(error) => return Err(self.forget_password(&backend.namespace, password, error).await),
        };
        self.apply(backend, deadline, name, &user, &creation.then)
            .await
            .map_err(|mut error| {
                error.message = format!(
                    "user {name:?} was created in Coder, but not all of it was set: {}",
                    error.message
                );
                error
            })?;
        Ok(Written {
            object: self.read(backend, deadline, name).await?.1,
            created: true,
            event: Some(EventType::Added),
        })
    }

    /// The IDs of the organizations a new user joins; an unknown name is a 422 before anything is written.
    async fn organization_ids(
        &self,
        backend: &Backend,
        deadline: Instant,
        name: &str,
        creation: &Creation,
    ) -> Result<Vec<Uuid>, ApiError> {
        let known = organization_names(&backend.client, deadline, name).await?;
        let mut ids = Vec::new();
        let mut errors = Vec::new();
        for wanted in &creation.organizations {
            match known.iter().find(|(_, known)| *known == wanted) {
                Some((id, _)) => ids.push(*id),
                None => errors.push(FieldError::not_found(
                    format!("spec.organizations[{wanted}]"),
                    wanted,
                    "no organization of this name",
                )),
            }
        }
        field_errors::check("CoderUser", GROUP, name, &errors)?;
        Ok(ids)
    }

    /// The first password: read from the caller's Secret once they may `get` it, or generated and written to a new
    /// Secret once they may `create` Secrets. `None` for a user without a password.
    async fn first_password(
        &self,
        ctx: &RequestContext,
        namespace: &str,
        name: &str,
        email: &str,
        source: &PasswordSource,
    ) -> Result<Option<FirstPassword>, ApiError> {
        match source {
            PasswordSource::None => Ok(None),
            PasswordSource::Secret(reference) => {
                let store = self.store_for(name, "spec.password.secretKeyRef")?;
                authorize(
                    ctx,
                    &ExtraAction::core("get", "secrets", namespace, &reference.name),
                )
                .await?;
                let value = read_password(store.as_ref(), namespace, name, reference).await?;
                Ok(Some(FirstPassword {
                    value,
                    generated_into: None,
                }))
            }
            PasswordSource::Generate(secret_name) => {
                let store = self.store_for(name, "spec.password.generate")?;
                authorize(
                    ctx,
                    &ExtraAction::core("create", "secrets", namespace, secret_name),
                )
                .await?;
                let value = generate_password()?;
                store
                    .create_secret(namespace, password_secret(secret_name, name, email, &value))
                    .await?;
                Ok(Some(FirstPassword {
                    value,
                    generated_into: Some(secret_name.clone()),
                }))
            }
        }
    }

    /// Coder refused the user: the generated password's Secret goes too (it would hold a password of no user).
    async fn forget_password(
        &self,
        namespace: &str,
        password: Option<FirstPassword>,
        mut error: ApiError,
    ) -> ApiError {
        let (Some(secret), Some(store)) = (password.and_then(|p| p.generated_into), &self.store) else {
            return error;
        };
        if let Err(cleanup) = store.delete_secret(namespace, &secret).await {
            error.message = format!(
                "{} (and the Secret {secret:?} with the generated password could not be removed: {}; delete it \
                 before trying again)",
                error.message, cleanup.message
            );
        }
        error
    }

    /// A create of a user a delete suspended: the record forgets the delete, then the user is changed to `desired`
    /// (activated unless it asks to stay suspended). Its first password is not read again: the user has one.
    async fn revive(
        &self,
        backend: &Backend,
        deadline: Instant,
        name: &str,
        found: Found,
        desired: &CoderUser,
    ) -> Result<Written, ApiError> {
        let held: CoderUser = serde_json::from_value(found.object(&backend.namespace)?)
            .map_err(|e| ApiError::internal(format!("read user {name:?}: {e}")))?;
        let changes = user_writes::plan(&held.spec, &desired.spec)
            .or_else(|errors| field_errors::check("CoderUser", GROUP, name, &errors).map(|()| Vec::new()))?;
        let policy = DeletionPolicy::parse(&desired.spec.deletion_policy).unwrap_or_default();
        let record = UserRecord {
            user_id: found.user.id,
            deletion_policy: policy,
            suspended_by_delete: None,
        };
        self.store_for(name, "spec")?
            .write_record(&backend.namespace, name, &record)
            .await?;
        let changes: Vec<UserChange> = changes
            .into_iter()
            .filter(|c| !matches!(c, UserChange::DeletionPolicy(_)))
            .collect();
        self.apply(backend, deadline, name, &found.user, &changes).await?;
        Ok(Written {
            object: self.read(backend, deadline, name).await?.1,
            created: true,
            event: Some(EventType::Added),
        })
    }

    /// Deletes user `name` as its deletion policy says.
    pub(super) async fn delete_user(
        &self,
        ctx: &RequestContext,
        backend: &Backend,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let deadline = deadline(ctx);
        let (found, object) = self.read(backend, deadline, name).await?;
        check_preconditions(USERS, name, &object, options)?;
        let policy = found
            .record
            .as_ref()
            .map(|r| r.deletion_policy)
            .unwrap_or_default();
        match policy {
            DeletionPolicy::Delete => self.delete_in_coder(backend, deadline, name, &found.user).await?,
            DeletionPolicy::Suspend => {
                self.suspend_for_delete(backend, deadline, name, &found.user)
                    .await?
            }
        }
        Ok(gone(object))
    }

    async fn delete_in_coder(
        &self,
        backend: &Backend,
        deadline: Instant,
        name: &str,
        user: &User,
    ) -> Result<(), ApiError> {
        let id = user.id.to_string();
        coder_write(
            deadline,
            subject(USERS, name),
            backend.client.delete_user(&id),
            |e| deletion_refused(e, name),
        )
        .await?;
        if let Some(store) = &self.store {
            store
                .write_record(&backend.namespace, name, &UserRecord::default())
                .await?;
        }
        Ok(())
    }

    /// Suspends the user (unless it is already) and records that the delete did, with Coder's `updated_at` of the
    /// suspended user, so the object is gone until Coder changes the user or the object is created again.
    async fn suspend_for_delete(
        &self,
        backend: &Backend,
        deadline: Instant,
        name: &str,
        user: &User,
    ) -> Result<(), ApiError> {
        let store = self.store.as_ref().ok_or_else(|| {
            ApiError::method_not_allowed(
                "deleting a user suspends it in Coder, and the server needs its own namespace (POD_NAMESPACE) to \
                 record that; set spec.deletionPolicy: Delete to delete the user in Coder instead",
            )
        })?;
        let suspended = if user.status == "suspended" {
            user.clone()
        } else {
            let id = user.id.to_string();
            coder_write(
                deadline,
                subject(USERS, name),
                backend.client.set_user_suspended(&id, true),
                |e| map_coder_error(e, subject(USERS, name)),
            )
            .await?
        };
        let record = UserRecord {
            user_id: user.id,
            deletion_policy: DeletionPolicy::Suspend,
            suspended_by_delete: Some(suspended.updated_at),
        };
        store
            .write_record(&backend.namespace, name, &record)
            .await
            .map_err(|mut error| {
                error.message = format!(
                    "user {name:?} was suspended in Coder, but the delete could not be recorded, so the object \
                     stays: {}; delete it again",
                    error.message
                );
                error
            })
    }
}

/// The password in the referenced key; a missing Secret or key, or a value that is not text, is a 422 naming the
/// field (never the value).
async fn read_password(
    store: &dyn UserStore,
    namespace: &str,
    name: &str,
    reference: &CoderUserSecretKeyRef,
) -> Result<Hidden, ApiError> {
    let at = "spec.password.secretKeyRef";
    let data = store.read_secret(namespace, &reference.name).await?;
    let error = match data.as_ref().map(|d| d.get(&reference.key)) {
        None => FieldError::not_found(format!("{at}.name"), &reference.name, ""),
        Some(None) => FieldError::not_found(format!("{at}.key"), &reference.key, ""),
        Some(Some(bytes)) => match String::from_utf8(bytes.clone()) {
            Ok(text) if !text.is_empty() => return Ok(Hidden::new(text)),
            _ => FieldError::invalid(
                format!("{at}.key"),
                &reference.key,
                "the value must be non-empty UTF-8 text",
            ),
        },
    };
    Err(invalid(name, &[error]))
}

/// The 422 of `errors` (at least one) in a write of user `name`.
pub(super) fn invalid(name: &str, errors: &[FieldError]) -> ApiError {
    field_errors::invalid("CoderUser", GROUP, name, errors)
        .unwrap_or_else(|| ApiError::invalid(format!("CoderUser {name:?} is invalid")))
}

/// Coder's refusal of a create: a taken user name or email is a 409 that says which can be meant.
fn creation_refused(error: &CoderError, name: &str) -> ApiError {
    if error.status() == Some(409) {
        return ApiError::conflict(format!(
            "Coder refused to create user {name:?}: {} (another Coder user has this user name or email)",
            error.message().trim()
        ))
        .with_details(name, GROUP, USERS);
    }
    map_coder_error(error, subject(USERS, name))
}

/// Coder's refusal of a delete: a user who still owns workspaces (Coder's 417) is a 409 with Coder's message.
fn deletion_refused(error: &CoderError, name: &str) -> ApiError {
    if error.status() == Some(417) {
        return ApiError::conflict(format!(
            "Operation cannot be fulfilled on {USERS}.{GROUP} {name:?}: {}",
            error.message().trim()
        ))
        .with_details(name, GROUP, USERS);
    }
    map_coder_error(error, subject(USERS, name))
}

/// A password of [`PASSWORD_LENGTH`] letters and digits from the system's random source.
fn generate_password() -> Result<Hidden, ApiError> {
    let mut password = String::with_capacity(PASSWORD_LENGTH);
    let mut bytes = [0u8; 64];
    while password.len() < PASSWORD_LENGTH {
        getrandom::fill(&mut bytes)
            .map_err(|e| ApiError::internal(format!("no random bytes for a password: {e}")))?;
        // 62 letters and digits: bytes from 248 up are dropped, so every character is equally likely.
        for byte in bytes.iter().filter(|b| **b < 248) {
            if password.len() < PASSWORD_LENGTH {
                password.push(char::from(
                    PASSWORD_ALPHABET[usize::from(*byte) % PASSWORD_ALPHABET.len()],
                ));
            }
        }
    }
    Ok(Hidden::new(password))
}

/// The Secret of a generated password: `kubernetes.io/basic-auth` with the email Coder's sign-in asks for.
fn password_secret(secret_name: &str, user: &str, email: &str, password: &Hidden) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(secret_name.to_owned()),
            labels: Some(BTreeMap::from([(
                GENERATED_PASSWORD_LABEL.to_owned(),
                "true".to_owned(),
            )])),
            annotations: Some(BTreeMap::from([(
                PASSWORD_USER_ANNOTATION.to_owned(),
                user.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/basic-auth".to_owned()),
        data: Some(BTreeMap::from([
            ("username".to_owned(), ByteString(email.as_bytes().to_vec())),
            (
                GENERATED_PASSWORD_KEY.to_owned(),
                ByteString(password.expose().as_bytes().to_vec()),
            ),
        ])),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_passwords_are_long_letters_and_digits_and_differ() {
        let first = generate_password().unwrap();
        let second = generate_password().unwrap();
        assert_eq!(first.expose().len(), PASSWORD_LENGTH);
        assert!(first.expose().bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(first.expose(), second.expose());
        assert!(!format!("{first:?}").contains(first.expose()));
    }

    #[test]
    fn the_password_secret_is_basic_auth_with_the_email() {
        let secret = password_secret("alice-login", "alice", "alice@example.com", &Hidden::new("pw"));
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/basic-auth"));
        let data = secret.data.unwrap();
        assert_eq!(data["username"].0, b"alice@example.com");
        assert_eq!(data["password"].0, b"pw");
        assert_eq!(
            secret.metadata.annotations.unwrap()[PASSWORD_USER_ANNOTATION],
            "alice"
        );
    }
}
