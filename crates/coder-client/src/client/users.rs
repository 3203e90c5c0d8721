//! User calls of [`CoderClient`]: the caller (`me`), a user by ID or name, every user, and a user's roles; and the
//! writes of a user: create, delete, profile, site roles, status, organization memberships and their roles; and a
//! password login (to check a password works).

use reqwest::Method;

use super::{CoderClient, Result};
use crate::types::users::{
    CreateUserRequest, LoginWithPasswordRequest, LoginWithPasswordResponse, UpdateRoles,
    UpdateUserProfileRequest, User, UserRoles, UsersPage,
};

impl CoderClient {
    /// `GET /api/v2/users/me`.
    pub async fn me(&self) -> Result<User> {
        self.user("me").await
    }

    /// `GET /api/v2/users/{user}` (UUID, username or `me`).
    pub async fn user(&self, user: &str) -> Result<User> {
        self.get_json(&["users", user], &[]).await
    }

    /// `GET /api/v2/users`: every user (Coder's default search, no limit), in Coder's order.
    pub async fn users(&self) -> Result<Vec<User>> {
        let page: UsersPage = self.get_json(&["users"], &[]).await?;
        Ok(page.users)
    }

    /// `GET /api/v2/users/{user}/roles`: the site roles and the roles in each organization the user is a member of.
    pub async fn user_roles(&self, user: &str) -> Result<UserRoles> {
        self.get_json(&["users", user, "roles"], &[]).await
    }

    /// `POST /api/v2/users` (201). Coder's refusals (a taken user name or email: 409; an invalid password: 400)
    /// never repeat the password: it is removed from the error text.
    pub async fn create_user(&self, request: &CreateUserRequest) -> Result<User> {
        let password = request.password.expose();
        let redact: &[&str] = if password.is_empty() { &[] } else { &[password] };
        self.send_json_redacting(Method::POST, &["users"], request, redact)
            .await
    }

    /// `DELETE /api/v2/users/{user}`. Coder refuses a user who still owns workspaces (417) and the caller itself
    /// (403).
    pub async fn delete_user(&self, user: &str) -> Result<()> {
        self.send_no_content::<()>(Method::DELETE, &["users", user], None)
            .await
    }

    /// `POST /api/v2/users/login`: a session token for a password login.
    pub async fn login_with_password(
        &self,
        request: &LoginWithPasswordRequest,
    ) -> Result<LoginWithPasswordResponse> {
        let password = request.password.expose();
        self.send_json_redacting(Method::POST, &["users", "login"], request, &[password])
            .await
    }

    /// `PUT /api/v2/users/{user}/profile`: user name and full name.
    pub async fn update_user_profile(&self, user: &str, request: &UpdateUserProfileRequest) -> Result<User> {
        self.send_json(Method::PUT, &["users", user, "profile"], request)
            .await
    }

    /// `PUT /api/v2/users/{user}/roles`: the whole list of site roles (`member` is implicit).
    pub async fn update_user_roles(&self, user: &str, request: &UpdateRoles) -> Result<User> {
        self.send_json(Method::PUT, &["users", user, "roles"], request)
            .await
    }

    /// `PUT /api/v2/users/{user}/status/suspend` (`suspended = true`) or `.../activate`.
    pub async fn set_user_suspended(&self, user: &str, suspended: bool) -> Result<User> {
        let action = if suspended { "suspend" } else { "activate" };
        self.send_json(Method::PUT, &["users", user, "status", action], &())
            .await
    }

    /// `POST /api/v2/organizations/{organization}/members/{user}`: the user joins without roles.
    pub async fn add_organization_member(&self, organization: &str, user: &str) -> Result<()> {
        self.send_no_content::<()>(
            Method::POST,
            &["organizations", organization, "members", user],
            None,
        )
        .await
    }

    /// `DELETE /api/v2/organizations/{organization}/members/{user}` (Coder also drops the user from the
    /// organization's groups).
    pub async fn remove_organization_member(&self, organization: &str, user: &str) -> Result<()> {
        self.send_no_content::<()>(
            Method::DELETE,
            &["organizations", organization, "members", user],
            None,
        )
        .await
    }

    /// `PUT /api/v2/organizations/{organization}/members/{user}/roles`: the whole list of the member's roles there.
    pub async fn update_member_roles(
        &self,
        organization: &str,
        user: &str,
        request: &UpdateRoles,
    ) -> Result<()> {
        self.send_no_content(
            Method::PUT,
            &["organizations", organization, "members", user, "roles"],
            Some(request),
        )
        .await
    }
}
