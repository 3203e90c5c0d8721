//! Taking over an owned object that the Go operator (v0.1.x) wrote with create/update. Such an object's fields are
//! recorded under an Update manager, so a field our apply later drops would stay behind. On the first touch the
//! fields that both the old manager and our desired state set move to our apply manager (what client-go's
//! csaupgrade does for kubectl); the rest (values the API server defaulted, fields only the Go operator set) stays in
//! the object without a manager, so the takeover itself changes nothing in the object and rolls no pod. The same
//! happens to objects this operator created (create-only, so under an Update entry) before their first apply. Pure:
//! the field-set arithmetic; `apply` reads the live object and sends the patch.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, ObjectMeta};
use serde_json::{Map, Value, json};

use crate::labels::{FIELD_MANAGER, LEGACY_FIELDS_MARK};

/// Managers whose create/update entries are ours to take over: the Go operator's binary is `coder-k8s`, and the
/// API server names an Update manager after the client's user agent, so its writes are recorded under that name.
const LEGACY_MANAGERS: &[&str] = &[FIELD_MANAGER];

/// Whether `entries` hold an Update entry of ours for the main resource (the Go operator's writes, or a create of
/// this operator).
pub fn has_legacy_entries(entries: &[ManagedFieldsEntry]) -> bool {
    entries.iter().any(is_legacy)
}

/// Whether the object with `meta` (cached: marked; read: its managed fields) waits for a takeover.
pub fn takeover_due(meta: &ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(LEGACY_FIELDS_MARK))
        || has_legacy_entries(meta.managed_fields.as_deref().unwrap_or_default())
}

/// The manager of the dry-run apply that asks the API server which fields our desired state sets.
pub const PROBE_MANAGER: &str = "coder-k8s-takeover-probe";

const UPDATE: &str = "Update";
const APPLY: &str = "Apply";

/// The managed-fields list after taking over: the part of every legacy Update entry (main resource only) that
/// `ours` (the field set of our desired state) also sets moves into our Apply entry, and the legacy entries go. What
/// only they held (values the API server defaulted, fields only the Go operator set) stays in the object unowned,
/// so no apply of ours ever removes it. `None` when there is no legacy entry.
pub fn taken_over(entries: &[ManagedFieldsEntry], ours: &Value) -> Option<Vec<ManagedFieldsEntry>> {
    if !has_legacy_entries(entries) {
        return None;
    }
    let mut moved = Value::Object(Map::new());
    for entry in entries.iter().filter(|e| is_legacy(e)) {
        if let Some(FieldsV1(fields)) = &entry.fields_v1 {
            union(&mut moved, &claimed(fields, ours));
        }
    }
    let mut result: Vec<ManagedFieldsEntry> = entries.iter().filter(|e| !is_legacy(e)).cloned().collect();
    if is_empty(&moved) {
        // The API server ignores an empty managed-fields list, so with nothing else left there is nothing to send.
        return (!result.is_empty()).then_some(result);
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
#[cfg(test)]
fn intersection(a: &Value, b: &Value) -> Value {
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

/// The paths of a legacy set that our apply takes over: those our desired state `ours` also sets, and every list
/// item of a list `ours` sets that `ours` no longer has, so that the apply removes an item the desired state dropped
/// since the legacy write (a Service port whose number changed, an env var that went). Other fields only the legacy
/// entry holds (values the API server defaulted) stay unowned.
pub fn claimed(legacy: &Value, ours: &Value) -> Value {
    let (a, b) = (children(legacy), children(ours));
    let mut result = Map::new();
    for (key, left) in &a {
        let value = match b.get(key) {
            Some(right) => node(
                is_member(left) && is_member(right),
                children(&claimed(left, right)),
            ),
            None if is_list_item(key) => Some(left.clone()),
            None => None,
        };
        if let Some(value) = value {
            result.insert(key.clone(), value);
        }
    }
    Value::Object(result)
}

/// Whether a field-set key names an item of a list (by key fields, value or index) rather than a field.
fn is_list_item(key: &str) -> bool {
    ["k:", "v:", "i:"].iter().any(|prefix| key.starts_with(prefix))
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

/// A name for the dry-run object of the takeover probe (in `apply`): valid wherever `name` is (a DNS label at
/// most), and not one the operator ever writes.
pub fn probe_name(name: &str) -> String {
    let base: String = name.chars().take(40).collect();
    format!("{}-ck8s-takeover-probe", base.trim_end_matches(['-', '.']))
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
    fn intersection_of_field_sets() {
        let a = json!({"f:spec": {"f:replicas": {}, "f:paused": {}, "f:strategy": {".": {}, "f:type": {}}}});
        let b = json!({"f:spec": {"f:replicas": {}, "f:strategy": {"f:type": {}}}});
        assert_eq!(
            intersection(&a, &b),
            json!({"f:spec": {"f:replicas": {}, "f:strategy": {"f:type": {}}}}),
            "the strategy node itself is a member of the first set only"
        );
        assert_eq!(intersection(&a, &json!({})), json!({}));
        assert_eq!(intersection(&a, &a), a);
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
        assert!(!has_legacy_entries(&entries));
    }

    #[test]
    fn list_items_the_desired_state_dropped_move_to_our_apply_entry_so_the_apply_removes_them() {
        let mut legacy = env(&["A", "OLD"]);
        legacy["f:spec"]["f:progressDeadlineSeconds"] = json!({});
        let result = taken_over(&[entry("coder-k8s", UPDATE, legacy)], &env(&["A", "NEW"])).unwrap();
        assert_eq!(
            result[0].fields_v1,
            Some(FieldsV1(env(&["A", "OLD"]))),
            "the dropped item OLD is ours now (the apply removes it); NEW was never the legacy entry's; the defaulted \
             field stays unowned"
        );
        let service = |port: u16| {
            json!({"f:spec": {"f:ports": {".": {}, format!("k:{{\"port\":{port},\"protocol\":\"TCP\"}}"): {
                ".": {}, "f:name": {}, "f:port": {}}}, "f:sessionAffinity": {}}})
        };
        let mut ours = service(18080);
        ours["f:spec"]
            .as_object_mut()
            .unwrap()
            .remove("f:sessionAffinity");
        let moved = claimed(&service(80), &ours);
        assert_eq!(
            moved,
            json!({"f:spec": {"f:ports": {".": {}, "k:{\"port\":80,\"protocol\":\"TCP\"}": {
                ".": {}, "f:name": {}, "f:port": {}}}}}),
            "the old port is taken over whole; the defaulted session affinity is not"
        );
        assert_eq!(
            claimed(&service(80), &json!({})),
            json!({}),
            "nothing under a field ours does not set"
        );
    }

    #[test]
    fn the_probe_name_is_a_dns_label_for_any_name() {
        assert_eq!(probe_name("coder"), "coder-ck8s-takeover-probe");
        let long = probe_name(&format!("{}-x", "a".repeat(39)));
        assert!(long.len() <= 63 && !long.contains("--"), "{long}");
    }

    #[test]
    fn a_legacy_entry_sharing_nothing_still_goes_and_marks_the_object() {
        let legacy = entry("coder-k8s", UPDATE, json!({"f:spec": {"f:paused": {}}}));
        assert!(has_legacy_entries(std::slice::from_ref(&legacy)));
        let meta = ObjectMeta {
            managed_fields: Some(vec![legacy.clone()]),
            ..ObjectMeta::default()
        };
        assert!(takeover_due(&meta));
        assert_eq!(
            taken_over(std::slice::from_ref(&legacy), &env(&["A"])),
            None,
            "an empty list would be ignored"
        );
        let user = entry("kubectl-edit", UPDATE, json!({"f:metadata": {}}));
        assert_eq!(
            taken_over(&[legacy, user.clone()], &env(&["A"])),
            Some(vec![user])
        );
        let marked = ObjectMeta {
            annotations: Some([(LEGACY_FIELDS_MARK.to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        };
        assert!(takeover_due(&marked), "the cache's mark");
        assert!(!takeover_due(&ObjectMeta::default()));
    }

    #[test]
    fn shared_fields_move_to_our_apply_entry_and_the_rest_is_left_unowned() {
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
        assert_eq!(result.len(), 2, "the legacy entry is gone: {result:?}");
        assert_eq!(result[0], user, "other managers keep their fields");
        assert!(
            !serde_json::to_string(&result)
                .unwrap()
                .contains("progressDeadlineSeconds"),
            "the defaulted field is left without a manager, so no apply of ours removes it"
        );
        let ours = &result[1];
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
