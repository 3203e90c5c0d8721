//! Who holds an object the operator writes, decided from its metadata, pure: the controller owner reference (or,
//! across namespaces, the owner-UID annotation), and the `ResourcesOwned` condition that names every object under a
//! name the operator writes that its custom resource does not hold (such an object is reported, never written or
//! adopted).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::conditions::{ConditionStatus, Decided};
use crate::labels::OWNER_UID_ANNOTATION;
use crate::slim::Live;

/// An object under a name the operator writes that the custom resource does not control: it is never written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotOwned {
    pub kind: String,
    pub name: String,
}

/// Who holds the name of an object the operator is about to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    /// No such object: it is created.
    Nobody,
    /// The custom resource is its controller owner: it is applied.
    Owner,
    /// Someone else's object (another owner, or none): left alone and reported.
    Other,
}

/// Decides who holds an object whose live view is `live` (`None`: it does not exist), for the owner `owner_uid`.
pub fn holder(live: Option<&Live>, owner_uid: &str) -> Holder {
    match live {
        None => Holder::Nobody,
        Some(live) if held_by(live, owner_uid) => Holder::Owner,
        Some(_) => Holder::Other,
    }
}

/// The owner the desired object claims: its controller reference's UID, else its owner-UID annotation.
pub fn claimed_owner(desired: &ObjectMeta) -> Option<&str> {
    controller_uid(desired).or_else(|| {
        desired
            .annotations
            .as_ref()?
            .get(OWNER_UID_ANNOTATION)
            .map(String::as_str)
    })
}

/// Whether `owner_uid` holds the object seen as `live`: as its controller, or through the owner-UID annotation.
pub fn held_by(live: &Live, owner_uid: &str) -> bool {
    controlled_by(&live.metadata, owner_uid) || live.claimed_by() == Some(owner_uid)
}

/// The UID of the controller owner that `meta` names (the one owner reference with `controller: true`).
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// Whether `uid` is the controller owner of the object with `meta`.
pub fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|owner| owner.controller == Some(true) && owner.uid == uid)
}

/// `ResourcesOwned=False/ResourceNotOwned` naming every object that is not the custom resource's, or `None` (the
/// condition is then removed: it is shown only while there is a conflict).
pub fn ownership_condition(not_owned: &[NotOwned]) -> Option<Decided> {
    use coder_k8s_api::shared::ownership::{RESOURCE_NOT_OWNED, RESOURCES_OWNED};
    if not_owned.is_empty() {
        return None;
    }
    let listed: Vec<String> = not_owned
        .iter()
        .map(|o| format!("{} {:?}", o.kind, o.name))
        .collect();
    Some(Decided::new(
        RESOURCES_OWNED,
        ConditionStatus::False,
        RESOURCE_NOT_OWNED,
        format!(
            "{} already exist(s) and this object is not the controller owner; the operator does not change or adopt them. Delete them, or give them an owner reference to this object with controller=true.",
            listed.join(", ")
        ),
    ))
}

/// How much earlier than a create marker Coder's clock may date what it created: the operator and Coder read
/// different clocks.
const CLOCK_SKEW_SECONDS: i64 = 5;

/// Whether Coder created something at `created_at` after a create that began at `started_at` (both RFC 3339; Coder's
/// clock may be [`CLOCK_SKEW_SECONDS`] behind). Used with a create marker on an owned Secret, written before a create
/// whose answer carries the only copy of a credential: what Coder created after the marker is the marker holder's,
/// even when the process that asked died before it stored the answer. Unreadable times prove nothing.
pub fn created_after(created_at: &str, started_at: &str) -> bool {
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    match (created_at.parse::<Timestamp>(), started_at.parse::<Timestamp>()) {
        (Ok(created), Ok(started)) => started
            .checked_sub(SignedDuration::from_secs(CLOCK_SKEW_SECONDS))
            .is_ok_and(|earliest| created >= earliest),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn an_object_held_by_someone_else_is_never_written() {
        let owned_by = |uid: &str, controller| ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                uid: uid.to_owned(),
                controller: Some(controller),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        };
        let held = |meta: ObjectMeta| holder(Some(&Live::of(meta)), "u1");
        assert_eq!(holder(None, "u1"), Holder::Nobody);
        assert_eq!(held(owned_by("u1", true)), Holder::Owner);
        assert_eq!(held(owned_by("u2", true)), Holder::Other);
        assert_eq!(held(owned_by("u1", false)), Holder::Other);
        assert_eq!(held(ObjectMeta::default()), Holder::Other);
        // Across namespaces the owner-UID annotation is the claim.
        let claimed = |uid: &str| ObjectMeta {
            annotations: Some([(OWNER_UID_ANNOTATION.to_owned(), uid.to_owned())].into()),
            ..ObjectMeta::default()
        };
        assert_eq!(held(claimed("u1")), Holder::Owner);
        assert_eq!(held(claimed("u2")), Holder::Other);
        assert_eq!(controller_uid(&owned_by("u1", true)), Some("u1"));
        assert_eq!(controller_uid(&owned_by("u1", false)), None);
    }

    #[test]
    fn foreign_objects_are_named_in_the_condition() {
        assert!(ownership_condition(&[]).is_none());
        let condition = ownership_condition(&[
            NotOwned {
                kind: "Deployment".to_owned(),
                name: "coder".to_owned(),
            },
            NotOwned {
                kind: "Service".to_owned(),
                name: "coder".to_owned(),
            },
        ])
        .unwrap();
        assert_eq!(
            (condition.type_, condition.reason),
            ("ResourcesOwned", "ResourceNotOwned")
        );
        assert!(
            condition.message.contains("Deployment \"coder\"")
                && condition.message.contains("Service \"coder\""),
            "{}",
            condition.message
        );
    }

    #[test]
    fn only_the_controller_owner_controls() {
        let owner = |uid: &str, controller| OwnerReference {
            uid: uid.to_owned(),
            controller,
            ..OwnerReference::default()
        };
        let meta = ObjectMeta {
            owner_references: Some(vec![owner("a", None), owner("b", Some(true))]),
            ..ObjectMeta::default()
        };
        assert!(controlled_by(&meta, "b"));
        assert!(!controlled_by(&meta, "a"), "an owner that is not the controller");
        assert!(!controlled_by(&ObjectMeta::default(), "b"));
    }

    #[test]
    fn only_what_coder_created_after_a_create_marker_counts() {
        let at = "2026-12-06T07:00:00Z";
        assert!(created_after(at, "2026-12-06T06:59:59Z"));
        // Coder's clock a little behind the operator's.
        assert!(created_after(at, "2026-12-06T07:00:05Z"));
        assert!(!created_after(at, "2026-12-06T07:00:06Z"));
        assert!(!created_after("soon", at));
        assert!(!created_after(at, "yesterday"));
    }
}
