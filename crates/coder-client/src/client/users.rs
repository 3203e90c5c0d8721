//! User calls of [`CoderClient`]: the caller (`me`), a user by ID or name, every user, and a user's roles.

use super::{CoderClient, Result};
use crate::types::users::{User, UserRoles, UsersPage};

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
}
