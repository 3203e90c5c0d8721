//! What the tests of `coderorganizations`, `codergroups` and `coderusers` share: a registry over one Coder for the
//! namespace `people`, a request context in it, and a get through a resource's storage.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use coder_k8s_aggregated_apiserver::coder::{StaticBackend, StaticProvider, registry};
use coder_k8s_aggregated_apiserver::generic::{ApiError, Registry, RequestContext, UserInfo};
use coder_k8s_control_plane_access::ClientSettings;
use serde_json::Value;

pub const NAMESPACE: &str = "people";

/// The served resources over the Coder at `url`, for the namespace [`NAMESPACE`].
pub fn registry_over(url: url::Url, token: &str) -> Registry {
    let backend = StaticBackend {
        url,
        token: token.to_owned(),
        namespace: NAMESPACE.to_owned(),
    };
    let settings = ClientSettings {
        timeout: Duration::from_secs(20),
        service_address_override: None,
    };
    registry(Arc::new(
        StaticProvider::new(&backend, &settings).expect("a static provider"),
    ))
}

/// A request in [`NAMESPACE`] with 30 s to go.
pub fn ctx() -> RequestContext {
    RequestContext {
        user: UserInfo::default(),
        namespace: Some(NAMESPACE.to_owned()),
        deadline: tokio::time::Instant::now() + Duration::from_secs(30),
        dry_run: false,
        query: BTreeMap::new(),
    }
}

/// A get of `name` in `plural` through its storage.
pub async fn get(registry: &Registry, plural: &str, name: &str) -> Result<Value, ApiError> {
    let resource = registry.resource(plural).expect("a served resource");
    resource.storage.get(&ctx(), name).await
}
