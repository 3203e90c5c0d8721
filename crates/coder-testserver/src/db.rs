//! Coder's PostgreSQL tables the test server reads and writes (never cached across requests): users, organizations,
//! organization_members, api_keys.

use std::sync::Arc;

use tokio_postgres::{Client, NoTls, Row};
use uuid::Uuid;

/// `to_char` format producing RFC 3339 UTC with microseconds.
macro_rules! ts {
    ($col:literal) => {
        concat!(
            "to_char(",
            $col,
            " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
        )
    };
}

const USER_COLUMNS: &str = concat!(
    "id, username, name, email, avatar_url, status::text, login_type::text, rbac_roles, is_system, ",
    ts!("created_at"),
    ", ",
    ts!("updated_at"),
    ", to_char(last_seen_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), deleted"
);

const ORG_COLUMNS: &str = concat!(
    "id, name, display_name, description, icon, is_default, ",
    ts!("created_at"),
    ", ",
    ts!("updated_at")
);

/// A row of `users`.
#[derive(Clone, Debug)]
pub(crate) struct User {
    pub id: Uuid,
    pub username: String,
    pub name: String,
    pub email: String,
    pub avatar_url: String,
    pub status: String,
    pub login_type: String,
    pub rbac_roles: Vec<String>,
    pub is_system: bool,
    pub created_at: String,
    pub updated_at: String,
    pub last_seen_at: String,
    /// Deleted (Coder keeps the row; only a lookup by ID still finds it).
    pub deleted: bool,
}

impl User {
    fn from_row(row: &Row) -> Result<Self, tokio_postgres::Error> {
        Ok(Self {
            id: row.try_get(0)?,
            username: row.try_get(1)?,
            name: row.try_get(2)?,
            email: row.try_get(3)?,
            avatar_url: row.try_get(4)?,
            status: row.try_get(5)?,
            login_type: row.try_get(6)?,
            rbac_roles: row.try_get(7)?,
            is_system: row.try_get(8)?,
            created_at: row.try_get(9)?,
            updated_at: row.try_get(10)?,
            last_seen_at: row.try_get(11)?,
            deleted: row.try_get(12)?,
        })
    }

    pub(crate) fn is_owner(&self) -> bool {
        self.rbac_roles.iter().any(|r| r == "owner")
    }
}

const MEMBER_COLUMNS: &str = concat!(
    "organization_id, user_id, ",
    ts!("created_at"),
    ", ",
    ts!("updated_at"),
    ", roles"
);

/// A row of `organization_members`.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub organization_id: Uuid,
    pub user_id: Uuid,
    pub created_at: String,
    pub updated_at: String,
    pub roles: Vec<String>,
}

impl Member {
    fn from_row(row: &Row) -> Result<Self, tokio_postgres::Error> {
        Ok(Self {
            organization_id: row.try_get(0)?,
            user_id: row.try_get(1)?,
            created_at: row.try_get(2)?,
            updated_at: row.try_get(3)?,
            roles: row.try_get(4)?,
        })
    }
}

/// A user to insert (Coder's `InsertUserParams` as `postUser` fills them).
pub(crate) struct NewUser<'a> {
    pub email: &'a str,
    pub username: &'a str,
    pub name: &'a str,
    /// Coder's `pbkdf2-sha256` hash, or empty for a user without a password.
    pub hashed_password: &'a [u8],
    pub login_type: &'a str,
    /// `active`, `dormant`, `suspended`; empty for `dormant`; anything else is PostgreSQL's error.
    pub status: &'a str,
    pub organization_ids: &'a [Uuid],
}

/// A row of `organizations`.
#[derive(Clone, Debug)]
pub(crate) struct Organization {
    pub id: Uuid,
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub icon: String,
    pub is_default: bool,
    pub created_at: String,
    pub updated_at: String,
}

impl Organization {
    fn from_row(row: &Row) -> Result<Self, tokio_postgres::Error> {
        Ok(Self {
            id: row.try_get(0)?,
            name: row.try_get(1)?,
            display_name: row.try_get(2)?,
            description: row.try_get(3)?,
            icon: row.try_get(4)?,
            is_default: row.try_get(5)?,
            created_at: row.try_get(6)?,
            updated_at: row.try_get(7)?,
        })
    }
}

/// A row of `api_keys`, as the authentication middleware needs it.
pub(crate) struct ApiKey {
    pub user_id: Uuid,
    pub hashed_secret: Vec<u8>,
    pub expired: bool,
    pub expires_at: String,
}

/// One shared connection, reopened when it breaks.
pub(crate) struct Db {
    url: String,
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
}

impl Db {
    pub(crate) async fn connect(url: &str) -> anyhow::Result<Self> {
        let client = open(url).await?;
        Ok(Self {
            url: url.to_owned(),
            client: tokio::sync::Mutex::new(Some(Arc::new(client))),
        })
    }

    pub(crate) async fn client(&self) -> Result<Arc<Client>, tokio_postgres::Error> {
        let mut guard = self.client.lock().await;
        if let Some(client) = guard.as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        let client = Arc::new(open(&self.url).await?);
        *guard = Some(client.clone());
        Ok(client)
    }

    pub(crate) async fn api_key(&self, id: &str) -> Result<Option<ApiKey>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = concat!(
            "SELECT user_id, hashed_secret, expires_at <= now(), ",
            ts!("expires_at"),
            " FROM api_keys WHERE id = $1"
        );
        let Some(row) = client.query_opt(sql, &[&id]).await? else {
            return Ok(None);
        };
        Ok(Some(ApiKey {
            user_id: row.try_get(0)?,
            hashed_secret: row.try_get(1)?,
            expired: row.try_get(2)?,
            expires_at: row.try_get(3)?,
        }))
    }

    /// Sliding expiry, as Coder does it: when `expires_at - now <= lifetime - 1h`, push `expires_at` to
    /// `now + lifetime`; `last_used` at most once an hour.
    pub(crate) async fn touch_api_key(&self, id: &str) -> Result<(), tokio_postgres::Error> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE api_keys SET \
                 expires_at = CASE WHEN expires_at - now() <= make_interval(secs => lifetime_seconds - 3600) \
                   THEN now() + make_interval(secs => lifetime_seconds) ELSE expires_at END, \
                 last_used = CASE WHEN now() - last_used > interval '1 hour' THEN now() ELSE last_used END \
                 WHERE id = $1 AND (expires_at - now() <= make_interval(secs => lifetime_seconds - 3600) \
                   OR now() - last_used > interval '1 hour')",
                &[&id],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn user_by_id(&self, id: Uuid) -> Result<Option<User>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1 AND deleted = false");
        client
            .query_opt(&sql, &[&id])
            .await?
            .as_ref()
            .map(User::from_row)
            .transpose()
    }

    /// Coder's `GetUserByID`: the user with this ID, deleted or not (what `{user}` resolves an ID to).
    pub(crate) async fn user_by_id_any(&self, id: Uuid) -> Result<Option<User>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1");
        client
            .query_opt(&sql, &[&id])
            .await?
            .as_ref()
            .map(User::from_row)
            .transpose()
    }

    /// Coder's `GetUserByEmailOrUsername`: a user (not deleted, system users too) whose username or email equals one
    /// of these in any case; with its `hashed_password`.
    pub(crate) async fn user_by_email_or_username(
        &self,
        username: &str,
        email: &str,
    ) -> Result<Option<(User, Vec<u8>)>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {USER_COLUMNS}, hashed_password FROM users \
             WHERE (lower(username) = lower($1) OR lower(email) = lower($2)) AND deleted = false LIMIT 1"
        );
        client
            .query_opt(&sql, &[&username, &email])
            .await?
            .map(|row| Ok((User::from_row(&row)?, row.try_get(13)?)))
            .transpose()
    }

    /// Coder's `InsertUser` (no site roles; an empty status is `dormant`) and an `InsertOrganizationMember` without
    /// roles per organization, in one statement: all or nothing, as Coder's transaction.
    pub(crate) async fn insert_user(&self, user: &NewUser<'_>) -> Result<User, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "WITH u AS (INSERT INTO users (id, email, username, name, hashed_password, created_at, updated_at, \
             rbac_roles, login_type, status) VALUES ($1, $2, $3, $4, $5, now(), now(), '{{}}'::text[], \
             ($6::text)::login_type, COALESCE(NULLIF($7::text, '')::user_status, 'dormant'::user_status)) \
             RETURNING *), \
             m AS (INSERT INTO organization_members (organization_id, user_id, created_at, updated_at, roles) \
             SELECT o.id, u.id, now(), now(), '{{}}'::text[] FROM u, unnest($8::uuid[]) WITH ORDINALITY AS o(id, n) \
             ORDER BY o.n) \
             SELECT {USER_COLUMNS} FROM u"
        );
        let id = Uuid::new_v4();
        let row = client
            .query_one(
                &sql,
                &[
                    &id,
                    &user.email,
                    &user.username,
                    &user.name,
                    &user.hashed_password,
                    &user.login_type,
                    &user.status,
                    &user.organization_ids,
                ],
            )
            .await?;
        User::from_row(&row)
    }

    /// Coder's `UpdateUserDeletedByID` (`deleted = true`, nothing else on the row; memberships stay), with what Coder's
    /// `trigger_update_users` does on its schema: the user's API keys go.
    pub(crate) async fn delete_user(&self, id: Uuid) -> Result<(), tokio_postgres::Error> {
        let client = self.client().await?;
        client
            .execute(
                "WITH k AS (DELETE FROM api_keys WHERE user_id = $1) UPDATE users SET deleted = true WHERE id = $1",
                &[&id],
            )
            .await?;
        Ok(())
    }

    /// The dormant user who signs in becomes active and seen (Coder's `UpdateUserStatus` with `UserIsSeen`).
    pub(crate) async fn activate_signed_in_user(
        &self,
        id: Uuid,
    ) -> Result<Option<User>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "UPDATE users SET status = 'active'::user_status, updated_at = now(), \
             last_seen_at = (now() AT TIME ZONE 'UTC') WHERE id = $1 RETURNING {USER_COLUMNS}"
        );
        client
            .query_opt(&sql, &[&id])
            .await?
            .as_ref()
            .map(User::from_row)
            .transpose()
    }

    /// The organization with this ID, deleted or not (Coder's `GetOrganizationByID`), or the default one for the nil
    /// ID (`GetDefaultOrganization`).
    pub(crate) async fn organization_by_id_any(
        &self,
        id: Uuid,
    ) -> Result<Option<Uuid>, tokio_postgres::Error> {
        let client = self.client().await?;
        let row = if id.is_nil() {
            client
                .query_opt(
                    "SELECT id FROM organizations WHERE is_default = true LIMIT 1",
                    &[],
                )
                .await?
        } else {
            client
                .query_opt("SELECT id FROM organizations WHERE id = $1", &[&id])
                .await?
        };
        row.map(|r| r.try_get(0)).transpose()
    }

    /// Every user a list shows (not deleted, not a system user), by user name.
    pub(crate) async fn users(&self) -> Result<Vec<User>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM users WHERE deleted = false AND is_system = false ORDER BY lower(username)"
        );
        client
            .query(&sql, &[])
            .await?
            .iter()
            .map(User::from_row)
            .collect()
    }

    pub(crate) async fn user_by_username(
        &self,
        username: &str,
    ) -> Result<Option<User>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql =
            format!("SELECT {USER_COLUMNS} FROM users WHERE lower(username) = lower($1) AND deleted = false");
        client
            .query_opt(&sql, &[&username])
            .await?
            .as_ref()
            .map(User::from_row)
            .transpose()
    }

    /// Dormant users are activated on their first authenticated request.
    pub(crate) async fn activate_user(&self, id: Uuid) -> Result<(), tokio_postgres::Error> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE users SET status = 'active'::user_status, updated_at = now() WHERE id = $1 \
                 AND status = 'dormant'::user_status",
                &[&id],
            )
            .await?;
        Ok(())
    }

    /// Active, non-system users (the `user_limit` actual count).
    pub(crate) async fn active_user_count(&self) -> Result<i64, tokio_postgres::Error> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(*) FROM users WHERE deleted = false AND is_system = false \
                 AND status = 'active'::user_status",
                &[],
            )
            .await?;
        row.try_get(0)
    }

    pub(crate) async fn organizations(&self) -> Result<Vec<Organization>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql =
            format!("SELECT {ORG_COLUMNS} FROM organizations WHERE deleted = false ORDER BY created_at, id");
        client
            .query(&sql, &[])
            .await?
            .iter()
            .map(Organization::from_row)
            .collect()
    }

    /// Organization ids and org roles of a user's memberships.
    pub(crate) async fn memberships(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<(Uuid, Vec<String>)>, tokio_postgres::Error> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT m.organization_id, m.roles FROM organization_members m \
                 JOIN organizations o ON o.id = m.organization_id \
                 WHERE m.user_id = $1 AND o.deleted = false ORDER BY o.created_at, o.id",
                &[&user_id],
            )
            .await?;
        rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect()
    }

    /// The users with a membership of `org` (not deleted; system users included, as Coder's
    /// `protect_deleting_organizations` trigger counts them), by user name. What Coder lists as members leaves the
    /// system users out: see [`Db::listed_members`] and the groups' member lists.
    pub(crate) async fn organization_members(&self, org: Uuid) -> Result<Vec<User>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM users WHERE deleted = false AND id IN \
             (SELECT user_id FROM organization_members WHERE organization_id = $1) ORDER BY username"
        );
        client
            .query(&sql, &[&org])
            .await?
            .iter()
            .map(User::from_row)
            .collect()
    }

    /// Coder's `OrganizationMembers` query for one organization: the users with a membership of `org` (not
    /// deleted), by user name; a `user_id` other than the nil UUID and a `github_user_id` other than 0 narrow it to
    /// that user, and system users (`is_system`) are left out unless `include_system`.
    pub(crate) async fn listed_members(
        &self,
        org: Uuid,
        user_id: Uuid,
        github_user_id: i64,
        include_system: bool,
    ) -> Result<Vec<User>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM users WHERE deleted = false AND id IN \
             (SELECT user_id FROM organization_members WHERE organization_id = $1) \
             AND ($2::uuid = '00000000-0000-0000-0000-000000000000'::uuid OR id = $2::uuid) \
             AND ($3::bigint = 0 OR github_com_user_id = $3::bigint) \
             AND ($4::bool OR is_system = false) ORDER BY username"
        );
        client
            .query(&sql, &[&org, &user_id, &github_user_id, &include_system])
            .await?
            .iter()
            .map(User::from_row)
            .collect()
    }

    pub(crate) async fn insert_organization(
        &self,
        name: &str,
        display_name: &str,
        description: &str,
        icon: &str,
    ) -> Result<Uuid, tokio_postgres::Error> {
        let client = self.client().await?;
        let id = Uuid::new_v4();
        client
            .execute(
                "INSERT INTO organizations (id, name, display_name, description, icon, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, now(), now())",
                &[&id, &name, &display_name, &description, &icon],
            )
            .await?;
        Ok(id)
    }

    /// Coder's `UpdateOrganization`: sets the four fields and `updated_at = now()`; the updated organization, or
    /// `None` when there is no such (undeleted) organization. A name another undeleted organization has (compared in
    /// lower case, index `idx_organization_name_lower`) is a unique violation.
    pub(crate) async fn update_organization(
        &self,
        id: Uuid,
        name: &str,
        display_name: &str,
        description: &str,
        icon: &str,
    ) -> Result<Option<Organization>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "UPDATE organizations SET updated_at = now(), name = $2, display_name = $3, description = $4, icon = $5 \
             WHERE id = $1 AND deleted = false RETURNING {ORG_COLUMNS}"
        );
        client
            .query_opt(&sql, &[&id, &name, &display_name, &description, &icon])
            .await?
            .as_ref()
            .map(Organization::from_row)
            .transpose()
    }

    /// The user IDs of every `organization_members` row of `org` (deleted users included), as Coder's
    /// `group_members` rows outlive only those memberships.
    pub(crate) async fn organization_member_ids(
        &self,
        org: Uuid,
    ) -> Result<Vec<Uuid>, tokio_postgres::Error> {
        let client = self.client().await?;
        client
            .query(
                "SELECT user_id FROM organization_members WHERE organization_id = $1",
                &[&org],
            )
            .await?
            .iter()
            .map(|r| r.try_get(0))
            .collect()
    }

    /// Soft-deletes an organization, as Coder does (`deleted = true`).
    pub(crate) async fn delete_organization(&self, id: Uuid) -> Result<u64, tokio_postgres::Error> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE organizations SET deleted = true, updated_at = now() WHERE id = $1",
                &[&id],
            )
            .await
    }

    pub(crate) async fn add_member(
        &self,
        org: Uuid,
        user: Uuid,
        roles: &[&str],
    ) -> Result<(), tokio_postgres::Error> {
        let client = self.client().await?;
        let roles: Vec<String> = roles.iter().map(|r| (*r).to_owned()).collect();
        client
            .execute(
                "INSERT INTO organization_members (organization_id, user_id, created_at, updated_at, roles) \
                 VALUES ($1, $2, now(), now(), $3) ON CONFLICT (organization_id, user_id) DO NOTHING",
                &[&org, &user, &roles],
            )
            .await?;
        Ok(())
    }

    /// Coder's `UpdateUserProfile` as `putUserProfile` calls it: the username and name, `updated_at = now()`.
    pub(crate) async fn update_user_profile(
        &self,
        id: Uuid,
        username: &str,
        name: &str,
    ) -> Result<Option<User>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "UPDATE users SET username = $2, name = $3, updated_at = now() WHERE id = $1 RETURNING {USER_COLUMNS}"
        );
        client
            .query_opt(&sql, &[&id, &username, &name])
            .await?
            .as_ref()
            .map(User::from_row)
            .transpose()
    }

    /// Coder's `UpdateUserStatus` (the user not seen): the status and `updated_at = now()`; `last_seen_at` stays.
    pub(crate) async fn update_user_status(
        &self,
        id: Uuid,
        status: &str,
    ) -> Result<Option<User>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "UPDATE users SET status = ($2::text)::user_status, updated_at = now() WHERE id = $1 \
             RETURNING {USER_COLUMNS}"
        );
        client
            .query_opt(&sql, &[&id, &status])
            .await?
            .as_ref()
            .map(User::from_row)
            .transpose()
    }

    /// Coder's `UpdateUserRoles`: the site roles without duplicates (`updated_at` stays).
    pub(crate) async fn update_user_roles(
        &self,
        id: Uuid,
        roles: &[String],
    ) -> Result<Option<User>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "UPDATE users SET rbac_roles = ARRAY(SELECT DISTINCT UNNEST($2::text[])) WHERE id = $1 \
             RETURNING {USER_COLUMNS}"
        );
        client
            .query_opt(&sql, &[&id, &roles])
            .await?
            .as_ref()
            .map(User::from_row)
            .transpose()
    }

    /// The `organization_members` row of `user` in `org`.
    pub(crate) async fn member(
        &self,
        org: Uuid,
        user: Uuid,
    ) -> Result<Option<Member>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {MEMBER_COLUMNS} FROM organization_members WHERE organization_id = $1 AND user_id = $2"
        );
        client
            .query_opt(&sql, &[&org, &user])
            .await?
            .as_ref()
            .map(Member::from_row)
            .transpose()
    }

    /// Every `organization_members` row of `org`.
    pub(crate) async fn member_rows(&self, org: Uuid) -> Result<Vec<Member>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!("SELECT {MEMBER_COLUMNS} FROM organization_members WHERE organization_id = $1");
        client
            .query(&sql, &[&org])
            .await?
            .iter()
            .map(Member::from_row)
            .collect()
    }

    /// Coder's `InsertOrganizationMember` without roles; a user who is already a member is a unique violation of
    /// `organization_members_pkey`.
    pub(crate) async fn insert_member(&self, org: Uuid, user: Uuid) -> Result<Member, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "INSERT INTO organization_members (organization_id, user_id, created_at, updated_at, roles) \
             VALUES ($1, $2, now(), now(), '{{}}'::text[]) RETURNING {MEMBER_COLUMNS}"
        );
        Member::from_row(&client.query_one(&sql, &[&org, &user]).await?)
    }

    /// Coder's `DeleteOrganizationMember`.
    pub(crate) async fn delete_member(&self, org: Uuid, user: Uuid) -> Result<u64, tokio_postgres::Error> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM organization_members WHERE organization_id = $1 AND user_id = $2",
                &[&org, &user],
            )
            .await
    }

    /// Coder's `UpdateMemberRoles`: the organization roles without duplicates (`updated_at` stays).
    pub(crate) async fn update_member_roles(
        &self,
        org: Uuid,
        user: Uuid,
        roles: &[String],
    ) -> Result<Option<Member>, tokio_postgres::Error> {
        let client = self.client().await?;
        let sql = format!(
            "UPDATE organization_members SET roles = ARRAY(SELECT DISTINCT UNNEST($3::text[])) \
             WHERE organization_id = $1 AND user_id = $2 RETURNING {MEMBER_COLUMNS}"
        );
        client
            .query_opt(&sql, &[&org, &user, &roles])
            .await?
            .as_ref()
            .map(Member::from_row)
            .transpose()
    }

    /// Inserts a user (or updates the site roles of an existing one), makes it a member of every
    /// organization and inserts an API token; returns `<id>-<secret>`.
    pub(crate) async fn mint_token(
        &self,
        username: &str,
        site_roles: &[&str],
        lifetime_seconds: i64,
    ) -> anyhow::Result<String> {
        let client = self.client().await?;
        let roles: Vec<String> = site_roles.iter().map(|r| (*r).to_owned()).collect();
        let user_id: Uuid = match self.user_by_username(username).await? {
            Some(user) => {
                client
                    .execute(
                        "UPDATE users SET rbac_roles = $2, updated_at = now() WHERE id = $1",
                        &[&user.id, &roles],
                    )
                    .await?;
                user.id
            }
            None => {
                let id = Uuid::new_v4();
                let email = format!("{username}@testserver.invalid");
                client
                    .execute(
                        "INSERT INTO users (id, email, username, name, hashed_password, created_at, updated_at, \
                         rbac_roles, login_type, status) VALUES ($1, $2, $3, $3, $4, now(), now(), $5, \
                         'password'::login_type, 'active'::user_status)",
                        &[&id, &email, &username, &b"none".as_slice(), &roles],
                    )
                    .await?;
                id
            }
        };
        client
            .execute(
                "INSERT INTO organization_members (organization_id, user_id, created_at, updated_at, roles) \
                 SELECT id, $1, now(), now(), '{}'::text[] FROM organizations WHERE deleted = false \
                 ON CONFLICT (organization_id, user_id) DO NOTHING",
                &[&user_id],
            )
            .await?;
        let (id, secret) = self.insert_token(user_id, None, lifetime_seconds).await?;
        Ok(format!("{id}-{secret}"))
    }

    /// Inserts an `api_keys` row of login type `token`; returns `(id, secret)`.
    pub(crate) async fn insert_token(
        &self,
        user_id: Uuid,
        token_name: Option<&str>,
        lifetime_seconds: i64,
    ) -> anyhow::Result<(String, String)> {
        let client = self.client().await?;
        let id = crate::util::random_alphanumeric(10)?;
        let secret = crate::util::random_alphanumeric(22)?;
        let name = match token_name {
            Some(name) => name.to_owned(),
            None => format!("testserver-{}", id.to_lowercase()),
        };
        let hashed = crate::util::sha256(secret.as_bytes());
        client
            .execute(
                "INSERT INTO api_keys (id, hashed_secret, user_id, last_used, expires_at, created_at, updated_at, \
                 login_type, lifetime_seconds, ip_address, token_name, scopes, allow_list) \
                 VALUES ($1, $2, $3, now(), now() + make_interval(secs => $4::bigint), now(), now(), \
                 'token'::login_type, $4::bigint, '0.0.0.0'::inet, $5, ARRAY['coder:all']::api_key_scope[], \
                 ARRAY['*:*']::text[])",
                &[&id, &hashed.as_slice(), &user_id, &lifetime_seconds, &name],
            )
            .await?;
        Ok((id, secret))
    }

    /// The session key of a password login, as Coder's `createAPIKey` inserts it: login type `password`, no name,
    /// the default session lifetime (24 h), never used (`last_used` is Go's zero time), scope `coder:all`, allow list
    /// `*:*`; returns `<id>-<secret>`.
    pub(crate) async fn insert_login_key(&self, user_id: Uuid) -> anyhow::Result<String> {
        let client = self.client().await?;
        let id = crate::util::random_alphanumeric(10)?;
        let secret = crate::util::random_alphanumeric(22)?;
        let hashed = crate::util::sha256(secret.as_bytes());
        client
            .execute(
                "INSERT INTO api_keys (id, hashed_secret, user_id, last_used, expires_at, created_at, updated_at, \
                 login_type, lifetime_seconds, ip_address, token_name, scopes, allow_list) \
                 VALUES ($1, $2, $3, '0001-01-01 00:00:00+00', now() + interval '24 hours', now(), now(), \
                 'password'::login_type, 86400, '0.0.0.0'::inet, '', ARRAY['coder:all']::api_key_scope[], \
                 ARRAY['*:*']::text[])",
                &[&id, &hashed.as_slice(), &user_id],
            )
            .await?;
        Ok(format!("{id}-{secret}"))
    }
}

async fn open(url: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}
