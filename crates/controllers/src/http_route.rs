//! A static type for the Gateway API's HTTPRoute, carrying only metadata, so that the control plane's routes can be
//! watched and cached like every other owned object (the Gateway API is optional: without its CRDs the watch keeps
//! retrying and the control plane falls back to reading the route when it needs to).

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Serialize};

/// `gateway.networking.k8s.io/v1` HTTPRoute, metadata only.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct HttpRoute {
    pub metadata: ObjectMeta,
}

impl Resource for HttpRoute {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("HTTPRoute")
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("gateway.networking.k8s.io")
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("httproutes")
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_gateway_api_resource() {
        assert_eq!(HttpRoute::api_version(&()), "gateway.networking.k8s.io/v1");
        assert_eq!(
            HttpRoute::url_path(&(), Some("team")),
            "/apis/gateway.networking.k8s.io/v1/namespaces/team/httproutes"
        );
    }
}
