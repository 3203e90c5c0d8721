//! Discovery documents: `/apis`, the group, the version (legacy), and aggregated discovery (v2) for clients that ask.

use axum::http::HeaderMap;
use axum::response::Response;

use super::registry::Registry;

/// Answers a discovery path (`/apis`, `/apis/<group>`, `/apis/<group>/<version>`), or `None` for other paths.
/// `/apis` answers aggregated discovery (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList) when `Accept` asks for
/// it, else the legacy APIGroupList; JSON by default.
pub fn answer(_registry: &Registry, _path: &str, _headers: &HeaderMap) -> Option<Response> {
    None
}
