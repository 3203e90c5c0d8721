//! User calls of [`CoderClient`]: the caller (`me`) and a user by ID or name.

use super::{CoderClient, Result};
use crate::types::users::User;

impl CoderClient {
    /// `GET /api/v2/users/me`.
    pub async fn me(&self) -> Result<User> {
        self.user("me").await
    }

    /// `GET /api/v2/users/{user}` (UUID, username or `me`).
    pub async fn user(&self, user: &str) -> Result<User> {
        self.get_json(&["users", user], &[]).await
    }
}
