//! Taking over an owned object that the Go operator (v0.1.x) wrote with create/update. Such an object's fields are
//! recorded under an Update manager, so a field our apply later drops would stay behind. On the first touch the
//! fields that both the old manager and our desired state set move to our apply manager (what client-go's
//! csaupgrade does for kubectl); the rest (values the API server defaulted, fields only the Go operator set) stay
//! with the old manager, so the takeover itself changes nothing in the object and rolls no pod.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::apply::{FIELD_MANAGER, Namespaced, claimed_owner, held_by};
use super::context::Context;

/// Managers whose create/update entries are ours to take over: the Go operator's binary is `coder-k8s`, and the
/// API server names an Update manager after the client's user agent, so its writes are recorded under that name.
const LEGACY_MANAGERS: &[&str] = &[FIELD_MANAGER];
/// The manager of the dry-run apply that asks the API server which fields our desired state sets.
const PROBE_MANAGER: &str = "coder-k8s-takeover-probe";

const UPDATE: &str = "Update";
const APPLY: &str = "Apply";

/// The managed-fields list after taking over: the part of every legacy Update entry (main resource only) that
/// `ours` (the field set of our desired state) also sets moves into our Apply entry. `None` when nothing moves.
pub fn taken_over(entries: &[ManagedFieldsEntry], ours: &Value) -> Option<Vec<ManagedFieldsEntry>> {
    let mut moved = Value::Object(Map::new());
    let mut result = Vec::with_capacity(entries.len() + 1);
    for entry in entries {
        let Some(FieldsV1(fields)) = entry.fields_v1.as_ref().filter(|_| is_legacy(entry)) else {
            result.push(entry.clone());
            continue;
        };
        let shared = intersection(fields, ours);
        if is_empty(&shared) {
            result.push(entry.clone());
            continue;
        }
        union(&mut moved, &shared);
        let rest = difference(fields, ours);
        if !is_empty(&rest) {
            result.push(ManagedFieldsEntry {
                fields_v1: Some(FieldsV1(rest)),
                ..entry.clone()
            });
        }
    }
    if is_empty(&moved) {
        return None;
    }
    match result.iter_mut().find(|e| is_our_apply(e)) {
        Some(apply) => {
            let mut fields = apply.fields_v1.take().map_or_else(|| json!({}), |f| f.0);
            union(&mut fields, &moved);
            apply.fields_v1 = Some(FieldsV1(fields));
        }
        None => result.push(our_apply_entry(entries, moved)),
    }
    Some(result)
}

fn our_apply_entry(entries: &[ManagedFieldsEntry], fields: Value) -> ManagedFieldsEntry {
    let legacy = entries.iter().find(|e| is_legacy(e));
    ManagedFieldsEntry {
        manager: Some(FIELD_MANAGER.to_owned()),
        operation: Some(APPLY.to_owned()),
        api_version: legacy.and_then(|e| e.api_version.clone()),
        time: legacy.and_then(|e| e.time.clone()),
        fields_type: Some("FieldsV1".to_owned()),
        fields_v1: Some(FieldsV1(fields)),
        subresource: None,
    }
}

fn is_legacy(entry: &ManagedFieldsEntry) -> bool {
    entry.operation.as_deref() == Some(UPDATE)
        && entry.subresource.as_deref().unwrap_or_default().is_empty()
        && entry
            .manager
            .as_deref()
            .is_some_and(|manager| LEGACY_MANAGERS.contains(&manager))
}

fn is_our_apply(entry: &ManagedFieldsEntry) -> bool {
    entry.operation.as_deref() == Some(APPLY)
        && entry.manager.as_deref() == Some(FIELD_MANAGER)
        && entry.subresource.as_deref().unwrap_or_default().is_empty()
}

// A FieldsV1 set is a tree of JSON objects: each key names a field (`f:`), list item (`k:`/`v:`/`i:`) of its
// parent; an empty object marks a member leaf, and `"."` inside a non-empty object marks the node itself as a member.

fn is_empty(set: &Value) -> bool {
    set.as_object().is_none_or(Map::is_empty)
}

/// Whether the node `value` stands for is itself a member of the set.
fn is_member(value: &Value) -> bool {
    value
        .as_object()
        .is_none_or(|children| children.is_empty() || children.contains_key("."))
}

fn children(value: &Value) -> Map<String, Value> {
    let mut children = value.as_object().cloned().unwrap_or_default();
    children.remove(".");
    children
}

/// The node for a path whose own membership is `member` and whose child set is `children`; `None` when empty.
fn node(member: bool, mut children: Map<String, Value>) -> Option<Value> {
    match (member, children.is_empty()) {
        (false, true) => None,
        (true, true) => Some(json!({})),
        (member, false) => {
            if member {
                children.insert(".".to_owned(), json!({}));
            }
            Some(Value::Object(children))
        }
    }
}

/// The paths in both sets.
pub fn intersection(a: &Value, b: &Value) -> Value {
    let (a, b) = (children(a), children(b));
    let mut result = Map::new();
    for (key, left) in &a {
        let Some(right) = b.get(key) else { continue };
        let inner = intersection(left, right);
        let member = is_member(left) && is_member(right);
        if let Some(value) = node(member, children(&inner)) {
            result.insert(key.clone(), value);
        }
    }
    Value::Object(result)
}

/// The paths of `a` that are not in `b`.
pub fn difference(a: &Value, b: &Value) -> Value {
    let (a, b) = (children(a), children(b));
    let mut result = Map::new();
    for (key, left) in a {
        let Some(right) = b.get(&key) else {
            result.insert(key, left);
            continue;
        };
        let inner = difference(&left, right);
        let member = is_member(&left) && !is_member(right);
        if let Some(value) = node(member, children(&inner)) {
            result.insert(key, value);
        }
    }
    Value::Object(result)
}

/// The paths in either set.
fn union(into: &mut Value, other: &Value) {
    let (Value::Object(into), Value::Object(other)) = (into, other) else {
        return;
    };
    for (key, value) in other {
        match into.get_mut(key) {
            Some(existing) if is_empty(existing) && !is_empty(value) => {
                *existing = value.clone();
                if let Value::Object(children) = existing {
                    children.insert(".".to_owned(), json!({}));
                }
            }
            Some(existing) if !is_empty(existing) && is_empty(value) => {
                if let Value::Object(children) = existing {
                    children.insert(".".to_owned(), json!({}));
                }
            }
            Some(existing) => union(existing, value),
            None => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Reads the live object (managed fields are not cached), asks the API server with a dry-run apply which fields
/// `desired` sets, and moves those from the legacy manager to ours, guarded by the resourceVersion. Only objects
/// held by the owner the desired state claims (controller reference or owner-UID annotation) are taken over. Returns whether it patched.
pub async fn take_over<K>(ctx: &Context, desired: &K) -> Result<bool, kube::Error>
where
    K: Namespaced + Serialize,
{
    let Some(owner) = claimed_owner(desired.meta()).map(str::to_owned) else {
        return Ok(false);
    };
    let name = desired.name_any();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &desired.namespace().unwrap_or_default());
    let Some(live) = api.get_opt(&name).await? else {
        return Ok(false);
    };
    let entries = live.meta().managed_fields.clone().unwrap_or_default();
    if !held_by(live.meta(), &owner) || !entries.iter().any(is_legacy) {
        return Ok(false);
    }
    let probe = PatchParams::apply(PROBE_MANAGER).force().dry_run();
    let probed = api.patch(&name, &probe, &Patch::Apply(desired)).await?;
    let ours = probed
        .meta()
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some(PROBE_MANAGER))
        .and_then(|e| e.fields_v1.as_ref())
        .map_or_else(|| json!({}), |f| f.0.clone());
    let Some(entries) = taken_over(&entries, &ours) else {
        return Ok(false);
    };
    // A resourceVersion in a merge patch makes it conditional: a change in between answers 409 and is retried.
    let patch = json!({"metadata": {"resourceVersion": live.resource_version(), "managedFields": entries}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    tracing::info!(kind = %K::kind(&()), namespace = %desired.namespace().unwrap_or_default(), %name,
        "took over the fields the previous operator wrote with update");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(manager: &str, operation: &str, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.to_owned()),
            operation: Some(operation.to_owned()),
            api_version: Some("apps/v1".to_owned()),
            fields_type: Some("FieldsV1".to_owned()),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    fn env(names: &[&str]) -> Value {
        let mut items = Map::new();
        items.insert(".".to_owned(), json!({}));
        for name in names {
            items.insert(
                format!("k:{{\"name\":\"{name}\"}}"),
                json!({".": {}, "f:name": {}, "f:value": {}}),
            );
        }
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"coder\"}": {
            ".": {}, "f:env": items
        }}}}}})
    }

    #[test]
    fn intersection_and_difference_of_field_sets() {
        let a = json!({"f:spec": {"f:replicas": {}, "f:paused": {}, "f:strategy": {".": {}, "f:type": {}}}});
        let b = json!({"f:spec": {"f:replicas": {}, "f:strategy": {"f:type": {}}}});
        assert_eq!(
            intersection(&a, &b),
            json!({"f:spec": {"f:replicas": {}, "f:strategy": {"f:type": {}}}})
        );
        assert_eq!(
            difference(&a, &b),
            json!({"f:spec": {"f:paused": {}, "f:strategy": {}}}),
            "the strategy node itself stays a member of the first set only"
        );
        assert_eq!(intersection(&a, &json!({})), json!({}));
        assert_eq!(difference(&a, &json!({})), a);
    }

    #[test]
    fn nothing_to_take_over_without_a_legacy_update_entry() {
        let ours = env(&["A"]);
        let entries = [
            entry("coder-k8s", APPLY, env(&["A"])),
            entry("kubectl-edit", UPDATE, env(&["A"])),
        ];
        assert_eq!(taken_over(&entries, &ours), None);
        let status = ManagedFieldsEntry {
            subresource: Some("status".to_owned()),
            ..entry("coder-k8s", UPDATE, json!({"f:status": {}}))
        };
        assert_eq!(
            taken_over(&[status], &json!({"f:status": {}})),
            None,
            "status entries stay"
        );
    }

    #[test]
    fn shared_fields_move_to_our_apply_entry_and_the_rest_stays() {
        let mut legacy = env(&["A", "B"]);
        legacy["f:spec"]["f:progressDeadlineSeconds"] = json!({});
        let user = entry(
            "kubectl-edit",
            UPDATE,
            json!({"f:metadata": {"f:labels": {"f:team": {}}}}),
        );
        let result = taken_over(
            &[entry("coder-k8s", UPDATE, legacy), user.clone()],
            &env(&["A", "B"]),
        )
        .unwrap();
        assert_eq!(result.len(), 3);
        assert_eq!(
            result[0].fields_v1,
            Some(FieldsV1(json!({"f:spec": {"f:progressDeadlineSeconds": {}}}))),
            "the defaulted field stays with the old manager"
        );
        assert_eq!(result[0].operation.as_deref(), Some(UPDATE));
        assert_eq!(result[1], user, "other managers keep their fields");
        let ours = &result[2];
        assert_eq!(
            (
                ours.manager.as_deref(),
                ours.operation.as_deref(),
                ours.api_version.as_deref()
            ),
            (Some("coder-k8s"), Some(APPLY), Some("apps/v1"))
        );
        assert_eq!(ours.fields_v1, Some(FieldsV1(env(&["A", "B"]))));
    }

    #[test]
    fn fully_shared_legacy_entry_disappears_into_an_existing_apply_entry() {
        let apply = entry(
            "coder-k8s",
            APPLY,
            json!({"f:metadata": {"f:annotations": {"f:h": {}}}}),
        );
        let result = taken_over(&[apply, entry("coder-k8s", UPDATE, env(&["A"]))], &env(&["A"])).unwrap();
        assert_eq!(result.len(), 1);
        let mut expected = env(&["A"]);
        expected["f:metadata"] = json!({"f:annotations": {"f:h": {}}});
        assert_eq!(result[0].fields_v1, Some(FieldsV1(expected)));
    }

    #[test]
    fn union_keeps_membership_of_a_node_that_gains_children() {
        let mut set = json!({"f:spec": {"f:strategy": {}}});
        union(&mut set, &json!({"f:spec": {"f:strategy": {"f:type": {}}}}));
        assert_eq!(set, json!({"f:spec": {"f:strategy": {".": {}, "f:type": {}}}}));
    }
}
