//! `GET /api/v2/users/{user}`.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A role of a user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Role {
    /// e.g. `owner`.
    pub name: String,
    /// e.g. `Owner`.
    pub display_name: String,
    /// Set for organization roles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<Uuid>,
}

/// `User`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct User {
    /// ID.
    pub id: Uuid,
    /// Username.
    pub username: String,
    /// Name.
    pub name: String,
    /// Avatar URL.
    pub avatar_url: String,
    /// Email.
    pub email: String,
    /// Created (RFC 3339).
    pub created_at: String,
    /// Updated (RFC 3339).
    pub updated_at: String,
    /// Last seen (RFC 3339).
    pub last_seen_at: String,
    /// `active`, `dormant` or `suspended`.
    pub status: String,
    /// `password`, `github`, `oidc`, `token`, `none`.
    pub login_type: String,
    /// Organizations the user belongs to.
    pub organization_ids: Vec<Uuid>,
    /// Site roles.
    pub roles: Vec<Role>,
    /// A service account (a headless user).
    pub is_service_account: bool,
}

/// `GetUsersResponse`: `GET /api/v2/users`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UsersPage {
    /// The users.
    pub users: Vec<User>,
    /// How many users match the search in all.
    pub count: i64,
}

/// `UserRoles`: `GET /api/v2/users/{user}/roles`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserRoles {
    /// Site role names.
    pub roles: Vec<String>,
    /// Role names in each organization the user is a member of (an empty list for a plain member).
    pub organization_roles: std::collections::BTreeMap<Uuid, Vec<String>>,
}

/// `OrganizationMemberWithUserData` (the fields the operator uses).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OrganizationMember {
    /// The member's user name.
    pub username: String,
    /// The member.
    pub user_id: Uuid,
    /// The organization.
    pub organization_id: Uuid,
    /// Roles in the organization.
    pub roles: Vec<Role>,
}

impl User {
    /// Whether the user has the site role `name`.
    pub fn has_role(&self, name: &str) -> bool {
        self.roles.iter().any(|r| r.name == name)
    }
}

/// `MinimalUser` (`created_by` of template versions).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MinimalUser {
    /// ID.
    pub id: Uuid,
    /// Username.
    pub username: String,
    /// Name.
    pub name: String,
    /// Avatar URL.
    pub avatar_url: String,
}

/// `PUT /api/v2/users/{user}/profile`: Coder sets both fields (the user name is required, so the current one is sent
/// to keep it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateUserProfileRequest {
    pub username: String,
    pub name: String,
}

/// `PUT /api/v2/users/{user}/roles` and `PUT /api/v2/organizations/{organization}/members/{user}/roles`: the whole
/// list of roles, which replaces the current one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateRoles {
    pub roles: Vec<String>,
}

/// `POST /api/v2/users` (Coder's `CreateUserRequestWithOrgs`). The password is sent only for login type
/// `password`, and never shown by `Debug`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateUserRequest {
    pub email: String,
    pub username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "crate::Secret::is_empty")]
    pub password: crate::Secret,
    /// `password`, `oidc`, `github` or `none`; Coder takes `password` when empty.
    pub login_type: String,
    /// `active`, `dormant` or `suspended`; Coder makes a new user `dormant` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_status: Option<String>,
    /// At least one (Coder refuses an empty list).
    pub organization_ids: Vec<Uuid>,
}

/// `POST /api/v2/users/login` (password login).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoginWithPasswordRequest {
    pub email: String,
    pub password: crate::Secret,
}

/// The answer of a password login.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoginWithPasswordResponse {
    pub session_token: crate::Secret,
}
