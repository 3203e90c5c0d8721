//! The one builder of a Secret that an object owns (operator token, provisioner key, proxy token): Opaque, one
//! key, the owner's labels and a controller owner reference, so it goes with its owner.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};

/// What goes into an owned Secret besides the owner.
pub struct OwnedSecret<'a> {
    pub name: &'a str,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub key: &'a str,
    pub value: &'a [u8],
}

impl OwnedSecret<'_> {
    /// The Secret, owned by `owner` in its namespace; `None` when the owner is not stored yet (no UID).
    pub fn build<O: Resource<DynamicType = ()>>(self, owner: &O) -> Option<Secret> {
        let owner_reference = owner.controller_owner_ref(&())?;
        Some(Secret {
            metadata: ObjectMeta {
                name: Some(self.name.to_owned()),
                namespace: owner.namespace(),
                labels: Some(self.labels),
                annotations: (!self.annotations.is_empty()).then_some(self.annotations),
                owner_references: Some(vec![owner_reference]),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_owned()),
            data: Some(BTreeMap::from([(
                self.key.to_owned(),
                ByteString(self.value.to_vec()),
            )])),
            ..Secret::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn owned_by_its_owner_with_one_key() {
        let mut owner = ConfigMap::default();
        owner.metadata.name = Some("owner".to_owned());
        owner.metadata.namespace = Some("team".to_owned());
        let secret = |owner: &ConfigMap| {
            OwnedSecret {
                name: "owner-token",
                labels: BTreeMap::from([("a".to_owned(), "b".to_owned())]),
                annotations: BTreeMap::new(),
                key: "token",
                value: b"s3cret",
            }
            .build(owner)
        };
        assert!(secret(&owner).is_none(), "no UID yet, no owner reference");
        owner.metadata.uid = Some("uid-1".to_owned());
        let built = secret(&owner).unwrap();
        assert_eq!(built.metadata.namespace.as_deref(), Some("team"));
        let reference = &built.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (reference.uid.as_str(), reference.controller),
            ("uid-1", Some(true))
        );
        assert_eq!(built.data.unwrap()["token"].0, b"s3cret");
        assert!(built.metadata.annotations.is_none());
    }
}
