//! Owned kinds whose API is optional in a cluster: the Gateway API's HTTPRoute and the Prometheus Operator's
//! ServiceMonitor. Each has a static type that carries only metadata, so the objects the control plane writes can be
//! watched and cached like every other owned object once their API is found (see `k8s::OptionalWatch`); without the
//! CRDs nothing is watched and a control plane that wants such an object says so and retries.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Serialize};

/// A metadata-only static type for a namespaced kind outside k8s-openapi.
macro_rules! metadata_only_kind {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $group:literal, $version:literal, $plural:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, Deserialize, Serialize)]
        pub struct $name {
            pub metadata: ObjectMeta,
        }

        impl Resource for $name {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }

            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($group)
            }

            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }

            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }

            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

metadata_only_kind!(
    /// `gateway.networking.k8s.io/v1` HTTPRoute, metadata only.
    HttpRoute,
    "HTTPRoute",
    "gateway.networking.k8s.io",
    "v1",
    "httproutes"
);

metadata_only_kind!(
    /// `monitoring.coreos.com/v1` ServiceMonitor, metadata only.
    ServiceMonitor,
    "ServiceMonitor",
    "monitoring.coreos.com",
    "v1",
    "servicemonitors"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_optional_resources() {
        assert_eq!(HttpRoute::api_version(&()), "gateway.networking.k8s.io/v1");
        assert_eq!(
            HttpRoute::url_path(&(), Some("team")),
            "/apis/gateway.networking.k8s.io/v1/namespaces/team/httproutes"
        );
        assert_eq!(ServiceMonitor::api_version(&()), "monitoring.coreos.com/v1");
        assert_eq!(
            ServiceMonitor::url_path(&(), Some("team")),
            "/apis/monitoring.coreos.com/v1/namespaces/team/servicemonitors"
        );
    }
}
