//! The Coder calls of a CoderAIGatewayKey (docs/controllers/ai-gateway-key.md): keys are found in Coder's list by
//! the names this object derives from its UID (`ck8s-<uid>-<serial>`), never by an ID read from the status; the
//! key of a lost create answer and the replaced keys past their grace period are deleted; a new key is created
//! after its cleanup record and its pending marker.

use coder_k8s_api::ai_gateway_key::{CoderAIGatewayKey, key_serial};
use coder_k8s_coder_client::{CoderClient, Error as CoderError, Secret, found};
use k8s_openapi::jiff::Timestamp;

use super::desired::{self, NewKey};
use super::status::{Outcome, coder_failed};
use crate::halt::Halt;
use crate::pass::Pass;

/// Deletes the key of a lost create answer and the replaced keys past their grace period, and forgets them.
pub async fn tidy(pass: &mut Pass<'_, CoderAIGatewayKey>, coder: &CoderClient) -> Result<(), Halt<Outcome>> {
    let expired = desired::expired(&pass.status, pass.now);
    if pass.status.pending_key.is_none() && expired.is_empty() {
        return Ok(());
    }
    let listed = coder
        .ai_gateway_keys()
        .await
        .map_err(|e| Halt::Settled(coder_failed("list the AI Gateway keys", &e)))?;
    let mut doomed: Vec<i64> = expired.iter().map(|k| k.serial).collect();
    doomed.extend(pass.status.pending_key.iter().map(|k| k.serial));
    for listed_key in &listed {
        let serial = key_serial(&pass.uid, &listed_key.name);
        if serial.is_some_and(|s| doomed.contains(&s)) {
            found(coder.delete_ai_gateway_key(listed_key.id).await).map_err(|e| {
                let action = format!("delete the AI Gateway key {}", listed_key.name);
                Halt::Settled(coder_failed(&action, &e))
            })?;
        }
    }
    pass.status.previous_keys.retain(|k| !doomed.contains(&k.serial));
    pass.status.pending_key = None;
    Ok(())
}

/// Creates the key named for `serial`: what the status records of it, and its value (which goes to the Secret,
/// never to the status).
pub async fn create(
    coder: &CoderClient,
    name: &str,
    serial: i64,
    now: Timestamp,
) -> Result<(NewKey, Secret), Halt<Outcome>> {
    let created = coder
        .create_ai_gateway_key(name)
        .await
        .map_err(|e| Halt::Settled(coder_failed("create the AI Gateway key", &e)))?;
    let key = NewKey {
        id: created.id.to_string(),
        name: created.name,
        serial,
        key_prefix: created.key_prefix,
        created_at: created.created_at.parse::<Timestamp>().unwrap_or(now),
    };
    Ok((key, created.key))
}

/// Deletes every key in Coder whose name is one of this UID's (`ck8s-<uid>-<serial>`). Only Coder's own 404 counts
/// as already gone.
pub async fn delete_every_key(coder: &CoderClient, uid: &str) -> Result<usize, CoderError> {
    let mut deleted = 0;
    for listed in coder.ai_gateway_keys().await? {
        if key_serial(uid, &listed.name).is_some() {
            found(coder.delete_ai_gateway_key(listed.id).await)?;
            deleted += 1;
        }
    }
    Ok(deleted)
}
