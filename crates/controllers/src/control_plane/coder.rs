//! The Coder side of a CoderControlPlane reconcile (docs/controllers/control-plane.md): operator access (verify the
//! stored token, else bootstrap it in Coder's database), the licence and the entitlements. At rest it calls Coder
//! once per entitlements interval for the entitlements and for the token check; a licence is listed only when its
//! hash was not yet confirmed since the operator started.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use coder_k8s_api::control_plane::{
    CoderControlPlane, CoderControlPlaneSpec, Entitlement, LicenseTier, conditions, reasons,
};
use coder_k8s_api::shared::{
    DEFAULT_LICENSE_SECRET_KEY, DEFAULT_TOKEN_SECRET_KEY, SecretKeySelector, WorkloadPhase,
};
use coder_k8s_coder_client::types::{License, User};
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use coder_k8s_operator_access::{
    OPERATOR_ORGANIZATION_ROLE, OPERATOR_SITE_ROLE, OperatorToken, ensure_operator_access,
    revoke_operator_access,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::desired::{self, ControlPlaneId};
use super::status::{
    TokenSecretOwnership, entitlement_summary, token_secret_condition, token_secret_ownership,
};
use crate::apply::delete_owned;
use crate::conditions::{ConditionStatus, Decided, remove_condition};
use crate::digest::sha256_hex;
use crate::error::Result;
use crate::owned_secret::OwnedSecret;
use crate::ownership::controlled_by;
use crate::pass::Pass;
use crate::secrets;

type ControlPlanePass<'p> = Pass<'p, CoderControlPlane>;

/// Operator access, licence and entitlements, in that order.
pub async fn reconcile(
    pass: &mut ControlPlanePass<'_>,
    id: &ControlPlaneId,
    database_url: Option<&str>,
) -> Result<()> {
    let token = operator_access(pass, id, database_url).await?;
    let coder = token.as_ref().and_then(|t| client(pass, id, t));
    license(pass, coder.as_ref()).await?;
    entitlements(pass, coder.as_ref()).await;
    Ok(())
}

fn token_secret_name(id: &ControlPlaneId, spec: &CoderControlPlaneSpec) -> String {
    spec.operator_access
        .generated_token_secret_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| id.default_operator_token_secret())
}

/// The control plane's one Coder client (reused while the URL and token stay the same).
fn client(pass: &ControlPlanePass<'_>, id: &ControlPlaneId, token: &OperatorToken) -> Option<CoderClient> {
    let url = desired::internal_url(id, &pass.object.spec);
    pass.ctx.clients.client(&pass.uid, &url, &token.expose()).ok()
}

/// Operator access is not ready. The pass asks for no retry: what it waits for here (a database URL, the token
/// Secret freed or written) is a Secret or spec change the control plane watches.
fn not_ready(pass: &mut ControlPlanePass<'_>) {
    pass.status.operator_access_ready = Some(false);
    pass.status.operator_token_secret_ref = None;
}

/// Operator access (docs/controllers/control-plane.md, "Operator access"): returns the working token, if any.
async fn operator_access(
    pass: &mut ControlPlanePass<'_>,
    id: &ControlPlaneId,
    database_url: Option<&str>,
) -> Result<Option<OperatorToken>> {
    let secret_name = token_secret_name(id, &pass.object.spec);
    if pass.object.spec.operator_access.disabled {
        disable_operator_access(pass, id, database_url, secret_name).await?;
        return Ok(None);
    }
    let live = pass.ctx.k8s.secret(&id.namespace, &secret_name).await?;
    let ownership = token_secret_ownership(live.as_deref(), &pass.uid);
    pass.set(token_secret_condition(ownership, &secret_name));
    let Some(url) = database_url.filter(|_| ownership != TokenSecretOwnership::NotOwned) else {
        // Not owned, or no usable PostgreSQL URL (spec.database unresolved): the bootstrap waits.
        not_ready(pass);
        return Ok(None);
    };
    let existing =
        secrets::value(live.as_deref(), DEFAULT_TOKEN_SECRET_KEY).and_then(|t| OperatorToken::parse(&t).ok());
    let Some(token) = working_token(pass, id, url, (existing.as_ref(), live.as_deref())).await else {
        // The bootstrap failed (PostgreSQL or Coder not reachable yet): nothing watched says when it can work.
        not_ready(pass);
        pass.soon(pass.retry());
        return Ok(None);
    };
    if (existing.as_ref() != Some(&token) || live.is_none())
        && !write_token_secret(pass, id, &secret_name, &token, live.as_deref()).await?
    {
        // Someone created the Secret between the check and the write: it is theirs, and stays untouched.
        pass.set(token_secret_condition(
            TokenSecretOwnership::NotOwned,
            &secret_name,
        ));
        not_ready(pass);
        return Ok(None);
    }
    pass.status.operator_access_ready = Some(true);
    pass.status.operator_token_secret_ref = Some(SecretKeySelector {
        name: secret_name,
        key: Some(DEFAULT_TOKEN_SECRET_KEY.to_owned()),
    });
    Ok(Some(token))
}

/// The stored token when Coder still accepts it and its user keeps what the bootstrap grants, else the token the
/// bootstrap creates or repairs in Coder's database (`None` when that fails).
async fn working_token(
    pass: &ControlPlanePass<'_>,
    id: &ControlPlaneId,
    url: &str,
    (existing, live): (Option<&OperatorToken>, Option<&Secret>),
) -> Option<OperatorToken> {
    // A token is trusted for one version of its Secret and one database URL; a 401 from Coder forgets it.
    let version = live
        .and_then(|s| s.metadata.resource_version.as_deref())
        .map(|version| format!("{version}/{}", sha256_hex(url.as_bytes(), Some(8))));
    let cp = pass.object;
    match check_token(pass, id, existing, version.as_deref()).await {
        TokenCheck::Works => existing.cloned(),
        TokenCheck::Drifted(missing) => {
            tracing::info!(name = %id.name, namespace = %id.namespace, %missing, "the operator user lacks what the bootstrap grants; re-enforcing it in Coder's database");
            bootstrap(cp, id, url, existing).await
        }
        TokenCheck::Failed => bootstrap(cp, id, url, existing).await,
    }
}

/// What Coder says about the stored token.
#[derive(Debug, PartialEq, Eq)]
enum TokenCheck {
    /// Accepted, and its user keeps what the bootstrap grants.
    Works,
    /// Accepted, but its user lacks what is named here (for the log): the bootstrap re-enforces it.
    Drifted(String),
    /// No token, refused, or Coder did not answer.
    Failed,
}

/// Whether the stored token works and its user keeps what the bootstrap grants: asked of Coder (`GET /api/v2/users/me`,
/// one call) when its Secret or the database URL changed, and otherwise once per entitlements interval (Coder's
/// entitlements answer without a token, so they cannot tell that a token was revoked). Coder refuses a suspended
/// user's token, so that status is re-enforced through `Failed`.
async fn check_token(
    pass: &ControlPlanePass<'_>,
    id: &ControlPlaneId,
    token: Option<&OperatorToken>,
    version: Option<&str>,
) -> TokenCheck {
    let Some(token) = token else {
        return TokenCheck::Failed;
    };
    let now = SystemTime::now();
    let remembered = pass.memory().verified_token;
    let interval = pass.ctx.settings.entitlements_interval;
    if let Some(version) = version
        && still_verified(remembered.as_ref(), version, now, interval)
    {
        return TokenCheck::Works;
    }
    let check = match client(pass, id, token) {
        Some(coder) => match coder.me().await {
            Ok(user) => missing_grants(&user).map_or(TokenCheck::Works, TokenCheck::Drifted),
            Err(_) => TokenCheck::Failed,
        },
        None => TokenCheck::Failed,
    };
    let verified = version
        .filter(|_| check == TokenCheck::Works)
        .map(|version| (version.to_owned(), now));
    pass.remember(|memory| memory.verified_token = verified);
    check
}

/// What the operator user lacks of what the bootstrap grants, as far as `users/me` shows it: the site role, the
/// `active` status and organization membership. (Coder shows no organization roles of system users, so a changed
/// organization role is restored only at the next bootstrap.)
fn missing_grants(user: &User) -> Option<String> {
    let mut missing = Vec::new();
    if !user.has_role(OPERATOR_SITE_ROLE) {
        missing.push(format!("the site role {OPERATOR_SITE_ROLE}"));
    }
    if user.status != "active" {
        missing.push(format!("the active status (it is {:?})", user.status));
    }
    if user.organization_ids.is_empty() {
        missing.push(format!(
            "organization membership ({OPERATOR_ORGANIZATION_ROLE} in every organization)"
        ));
    }
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// Whether `remembered` verified this `version` less than `interval` before `now`.
fn still_verified(
    remembered: Option<&(String, SystemTime)>,
    version: &str,
    now: SystemTime,
    interval: Duration,
) -> bool {
    let Some((remembered_version, at)) = remembered else {
        return false;
    };
    remembered_version == version && now.duration_since(*at).is_ok_and(|age| age < interval)
}

/// Creates or repairs operator access in Coder's database; `None` (logged) when that fails.
async fn bootstrap(
    cp: &CoderControlPlane,
    id: &ControlPlaneId,
    database_url: &str,
    existing: Option<&OperatorToken>,
) -> Option<OperatorToken> {
    match ensure_operator_access(database_url, &id.namespace, &id.name, existing).await {
        Ok(token) => Some(token),
        Err(error) => {
            let error = error.with_source(database_source(&cp.spec));
            tracing::warn!(name = %id.name, namespace = %id.namespace, %error, "operator access bootstrap failed; retrying");
            None
        }
    }
}

/// Writes the token into the owned Secret (never over someone else's); `false` when the name turned out to be
/// taken by a Secret the control plane does not control.
async fn write_token_secret(
    pass: &ControlPlanePass<'_>,
    id: &ControlPlaneId,
    secret_name: &str,
    token: &OperatorToken,
    live: Option<&Secret>,
) -> Result<bool> {
    let exposed = token.expose();
    let secret = OwnedSecret {
        name: secret_name,
        labels: id.labels(),
        annotations: BTreeMap::new(),
        key: DEFAULT_TOKEN_SECRET_KEY,
        value: exposed.as_bytes(),
    };
    Ok(secret.store(pass.ctx, pass.object, live).await?.is_some())
}

/// `spec.operatorAccess.disabled`: the token is revoked in Coder's database, then the owned token Secret is deleted.
/// While a token may exist (the status still names its Secret, or the owned Secret exists) and the revocation cannot
/// run (no PostgreSQL URL, or the database fails), both stay and the revocation is retried.
async fn disable_operator_access(
    pass: &mut ControlPlanePass<'_>,
    id: &ControlPlaneId,
    database_url: Option<&str>,
    secret_name: String,
) -> Result<()> {
    remove_condition(
        &mut pass.status.conditions,
        conditions::OPERATOR_TOKEN_SECRET_OWNED,
    );
    pass.status.operator_access_ready = Some(false);
    pass.remember(|memory| memory.verified_token = None);
    let pending = pass
        .status
        .operator_token_secret_ref
        .as_ref()
        .map(|r| r.name.clone())
        .unwrap_or(secret_name);
    let cached = pass
        .ctx
        .k8s
        .caches
        .secrets
        .metadata()
        .meta(&id.namespace, &pending);
    let token_may_exist = pass.status.operator_token_secret_ref.is_some()
        || cached.as_ref().is_some_and(|meta| controlled_by(meta, &pass.uid));
    if !revoked(pass, id, database_url, token_may_exist).await {
        pass.status.operator_token_secret_ref = Some(SecretKeySelector {
            name: pending,
            key: Some(DEFAULT_TOKEN_SECRET_KEY.to_owned()),
        });
        pass.soon(pass.retry());
        return Ok(());
    }
    if delete_owned::<Secret>(pass.ctx, &id.namespace, &pending, cached.as_ref(), &pass.uid).await? {
        pass.ctx.k8s.caches.secrets.deleted(&id.namespace, &pending);
    }
    pass.status.operator_token_secret_ref = None;
    Ok(())
}

/// Revokes the operator token in Coder's database; `false` (logged) while that cannot run and a token may exist.
async fn revoked(
    pass: &ControlPlanePass<'_>,
    id: &ControlPlaneId,
    database_url: Option<&str>,
    token_may_exist: bool,
) -> bool {
    let spec = &pass.object.spec;
    match database_url {
        Some(url) => match revoke_operator_access(url, &id.namespace, &id.name).await {
            Ok(_) => true,
            Err(error) => {
                let category = error.category();
                let error = error.with_source(database_source(spec));
                tracing::warn!(name = %id.name, namespace = %id.namespace, category, %error, "operator access is disabled, but revoking the operator token failed; retrying");
                false
            }
        },
        None if token_may_exist => {
            let reason = missing_url_reason(spec, &pass.status.conditions);
            tracing::warn!(name = %id.name, namespace = %id.namespace, %reason, "operator access is disabled, but the operator token cannot be revoked until the PostgreSQL URL is available; retrying");
            false
        }
        // Nothing was issued that could still be valid.
        None => true,
    }
}

/// Why there is no PostgreSQL URL, in words for the log (never the URL): the `DatabaseSecretResolved` message when
/// `spec.database` is set, else the missing `CODER_PG_CONNECTION_URL`.
fn missing_url_reason(spec: &CoderControlPlaneSpec, conditions: &[Condition]) -> String {
    if spec.database.is_none() {
        return format!(
            "spec.database is unset and spec.extraEnv has no usable {}",
            coder_k8s_api::control_plane::PG_CONNECTION_URL_ENV
        );
    }
    conditions
        .iter()
        .find(|c| c.type_ == conditions::DATABASE_SECRET_RESOLVED && c.status != "True")
        .map(|c| c.message.clone())
        .unwrap_or_else(|| format!("{} is not resolved yet", database_source(spec)))
}

/// Where the PostgreSQL URL comes from, for messages (never the URL).
fn database_source(spec: &CoderControlPlaneSpec) -> String {
    match &spec.database {
        Some(database) => format!(
            "Secret {:?} key {:?}",
            database.connection_secret_ref.name,
            database.connection_secret_ref.key.as_deref().unwrap_or_default()
        ),
        None => format!(
            "spec.extraEnv {}",
            coder_k8s_api::control_plane::PG_CONNECTION_URL_ENV
        ),
    }
}

fn license_condition(status: ConditionStatus, reason: &'static str, message: impl Into<String>) -> Decided {
    Decided {
        type_: conditions::LICENSE_APPLIED,
        status,
        reason,
        message: message.into(),
    }
}

/// SHA-256 hex of the trimmed licence JWT (`status.licenseLastAppliedHash`).
pub fn license_hash(jwt: &str) -> String {
    sha256_hex(jwt.trim().as_bytes(), None)
}

/// `LicenseApplied`: uploads only when the hash changed or Coder has none; the licence list is read once per hash
/// since the operator started.
async fn license(pass: &mut ControlPlanePass<'_>, coder: Option<&CoderClient>) -> Result<()> {
    let Some(reference) = pass.object.spec.license_secret_ref.clone() else {
        let unset = license_condition(
            ConditionStatus::Unknown,
            reasons::LICENSE_PENDING,
            "spec.licenseSecretRef is not set",
        );
        pass.set(unset);
        return Ok(());
    };
    let Some(coder) = coder.filter(|_| pass.status.phase == Some(WorkloadPhase::Ready)) else {
        let waiting = "waiting for the control plane to be Ready with operator access";
        pass.set(license_condition(
            ConditionStatus::False,
            reasons::LICENSE_PENDING,
            waiting,
        ));
        return Ok(());
    };
    let key = reference.key_or(DEFAULT_LICENSE_SECRET_KEY);
    let secret = pass.ctx.k8s.secret(&pass.namespace(), &reference.name).await?;
    let Some(jwt) = secrets::value(secret.as_deref(), key).filter(|v| !v.trim().is_empty()) else {
        let message = format!("Secret {:?} with key {key:?} is missing or empty", reference.name);
        pass.set(license_condition(
            ConditionStatus::False,
            reasons::LICENSE_SECRET_MISSING,
            message,
        ));
        pass.soon(pass.retry());
        return Ok(());
    };
    let hash = license_hash(&jwt);
    if pass.status.license_last_applied_hash.as_deref() == Some(hash.as_str())
        && license_present(pass, coder, &hash).await
    {
        let applied = license_condition(
            ConditionStatus::True,
            reasons::LICENSE_APPLIED,
            "the licence is applied",
        );
        pass.set(applied);
        return Ok(());
    }
    upload_license(pass, coder, &jwt, hash).await;
    Ok(())
}

/// Whether Coder holds a licence, asked once per licence hash since the operator started.
async fn license_present(pass: &ControlPlanePass<'_>, coder: &CoderClient, hash: &str) -> bool {
    if pass.memory().confirmed_license.as_deref() == Some(hash) {
        return true;
    }
    let present = matches!(coder.licenses().await, Ok(licenses) if !licenses.is_empty());
    if present {
        pass.remember(|memory| memory.confirmed_license = Some(hash.to_owned()));
    }
    present
}

async fn upload_license(pass: &mut ControlPlanePass<'_>, coder: &CoderClient, jwt: &str, hash: String) {
    let refused = match coder
        .upload_license(&coder_k8s_coder_client::Secret::new(jwt.trim()))
        .await
    {
        Ok(_) => None,
        Err(error) => upload_refusal(&error),
    };
    match refused {
        None => {
            pass.status.license_last_applied = Some(pass.time());
            pass.status.license_last_applied_hash = Some(hash.clone());
            pass.remember(|memory| memory.confirmed_license = Some(hash));
            let applied = license_condition(
                ConditionStatus::True,
                reasons::LICENSE_APPLIED,
                "the licence is applied",
            );
            pass.set(applied);
        }
        Some(decided) => {
            pass.set(decided);
            pass.soon(pass.retry());
        }
    }
}

/// The condition for a failed upload; `None` when Coder already holds the licence.
fn upload_refusal(error: &CoderError) -> Option<Decided> {
    if License::is_duplicate_message(error.message()) {
        return None;
    }
    Some(match error {
        CoderError::Unauthorized { .. } | CoderError::Forbidden { .. } => license_condition(
            ConditionStatus::False,
            reasons::LICENSE_FORBIDDEN,
            format!("Coder refused the licence upload: {error}"),
        ),
        _ if matches!(error, CoderError::NotFound { .. }) || error.is_route_not_found() => license_condition(
            ConditionStatus::False,
            reasons::LICENSE_NOT_SUPPORTED,
            "this Coder deployment has no licences API",
        ),
        _ => license_condition(
            ConditionStatus::False,
            reasons::LICENSE_ERROR,
            format!("licence upload failed: {error}"),
        ),
    })
}

/// Entitlements once Ready with operator access, once per entitlements interval. The check time is written on the
/// first read and when a value changes (both values start as `unknown`), so a steady control plane is not rewritten
/// every 2 minutes.
async fn entitlements(pass: &mut ControlPlanePass<'_>, coder: Option<&CoderClient>) {
    let Some(coder) = coder.filter(|_| pass.status.phase == Some(WorkloadPhase::Ready)) else {
        return;
    };
    let (entitlement, tier) = match coder.entitlements().await {
        Ok(read) => {
            pass.ctx.entitlements.record(&pass.uid, read.clone());
            entitlement_summary(&read)
        }
        Err(error) if error.is_route_not_found() => (Entitlement::Unknown, LicenseTier::Unknown),
        Err(error) => {
            tracing::debug!(%error, "reading entitlements failed; keeping the last values");
            pass.soon(pass.retry());
            return;
        }
    };
    let now = pass.time();
    let status = &mut pass.status;
    if status.external_provisioner_daemons_entitlement != Some(entitlement)
        || status.license_tier != Some(tier)
        || status.entitlements_last_checked.is_none()
    {
        status.external_provisioner_daemons_entitlement = Some(entitlement);
        status.license_tier = Some(tier);
        status.entitlements_last_checked = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verified_token_is_trusted_for_one_interval_and_one_secret_version() {
        use std::time::UNIX_EPOCH;
        let at = UNIX_EPOCH + Duration::from_secs(1_000);
        let fact = ("42/abcd".to_owned(), at);
        let minute = Duration::from_secs(60);
        assert!(still_verified(
            Some(&fact),
            "42/abcd",
            at + Duration::from_secs(59),
            minute
        ));
        assert!(!still_verified(
            Some(&fact),
            "42/abcd",
            at + Duration::from_secs(61),
            minute
        ));
        assert!(
            !still_verified(Some(&fact), "43/abcd", at, minute),
            "a new Secret version"
        );
        assert!(!still_verified(None, "42/abcd", at, minute));
        let far = ("42/abcd".to_owned(), UNIX_EPOCH + Duration::from_secs(1 << 40));
        assert!(
            !still_verified(Some(&far), "42/abcd", at, minute),
            "a remembered time past the clock cannot panic"
        );
    }

    #[test]
    fn missing_grants_names_each_lacking_grant() {
        let user = |value: serde_json::Value| -> User { serde_json::from_value(value).unwrap() };
        let org = "00000000-0000-0000-0000-000000000001";
        assert_eq!(
            missing_grants(&user(serde_json::json!({
                "status": "active", "organization_ids": [org], "roles": [{"name": "owner"}]
            }))),
            None
        );
        assert_eq!(
            missing_grants(&user(serde_json::json!({
                "status": "active", "organization_ids": [org], "roles": [{"name": "auditor"}]
            }))),
            Some("the site role owner".to_owned())
        );
        assert_eq!(
            missing_grants(&user(serde_json::json!({
                "status": "dormant", "organization_ids": [], "roles": []
            }))),
            Some(
                "the site role owner, the active status (it is \"dormant\"), organization membership \
                 (organization-admin in every organization)"
                    .to_owned()
            )
        );
    }

    #[test]
    fn missing_url_reason_explains_without_the_url() {
        let mut spec: CoderControlPlaneSpec = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(
            missing_url_reason(&spec, &[]),
            "spec.database is unset and spec.extraEnv has no usable CODER_PG_CONNECTION_URL"
        );
        spec = serde_json::from_value(serde_json::json!({
            "database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}}
        }))
        .unwrap();
        assert_eq!(
            missing_url_reason(&spec, &[]),
            "Secret \"coder-db-app\" key \"uri\" is not resolved yet"
        );
        let condition = |status: &str, message: &str| Condition {
            type_: conditions::DATABASE_SECRET_RESOLVED.to_owned(),
            status: status.to_owned(),
            reason: "SecretNotFound".to_owned(),
            message: message.to_owned(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
            observed_generation: None,
        };
        assert_eq!(
            missing_url_reason(&spec, &[condition("False", "Secret \"coder-db-app\" not found")]),
            "Secret \"coder-db-app\" not found"
        );
    }

    #[test]
    fn licence_hash_is_of_the_trimmed_jwt() {
        assert_eq!(license_hash(" abc\n"), sha256_hex(b"abc", None));
        assert_eq!(license_hash("abc").len(), 64);
    }

    #[test]
    fn upload_refusals_have_their_reasons() {
        let forbidden = CoderError::Forbidden {
            message: "no".to_owned(),
        };
        assert_eq!(
            upload_refusal(&forbidden).unwrap().reason,
            reasons::LICENSE_FORBIDDEN
        );
    }
}
