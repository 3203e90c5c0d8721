//! OpenAPI v2 and v3 documents for the served group, built from the registry's schemas.

use axum::http::HeaderMap;
use axum::response::Response;

use super::registry::Registry;

/// Answers `/openapi/v2`, `/openapi/v3` and `/openapi/v3/apis/<group>/<version>`, or `None` for other paths.
pub fn answer(_registry: &Registry, _path: &str, _headers: &HeaderMap) -> Option<Response> {
    None
}
