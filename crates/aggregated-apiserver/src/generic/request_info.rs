//! Parses a request path and method into what Kubernetes calls request info: resource or non-resource, verb,
//! namespace, resource, name, subresource.
//!
//! Resource requests live under `/apis/<group>/<version>/`:
//! - `namespaces/<ns>/<resource>[/<name>[/<subresource>]]`: a namespaced request;
//! - `<resource>[/<name>[/<subresource>]]`: cluster scope (for a namespaced resource: the all-namespaces list or
//!   watch);
//! - `namespaces` and `namespaces/<ns>`: the core `namespaces` resource, which the dispatcher does not serve (404).
//!
//! Everything else (`/apis`, `/apis/<group>`, `/apis/<group>/<version>`, `/openapi/...`, `/healthz`, ...) is a
//! non-resource request. Bad paths (empty or dot segments, encoded slashes, too many segments) are a 404 Status,
//! never a panic.

use super::registry::Verb;
use super::status::ApiError;

/// What a request addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestInfo {
    /// A path that names no resource; `verb` is the HTTP method in lower case, as kube-apiserver authorizes it.
    NonResource {
        path: String,
        verb: String,
    },
    Resource(ResourceRequest),
}

/// A request for a resource (or one of its subresources).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceRequest {
    pub group: String,
    pub version: String,
    /// `None` at cluster scope (an all-namespaces list or watch of a namespaced resource).
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub verb: Verb,
}

/// Longest path this server looks at; longer ones are refused before any parsing work.
const MAX_PATH_LEN: usize = 8192;

/// Parses `method` and `path` (the raw, still percent-encoded path) with the query's `watch` flag.
pub fn parse(method: &http::Method, path: &str, watch: bool) -> Result<RequestInfo, ApiError> {
    if path.len() > MAX_PATH_LEN || !path.starts_with('/') {
        return Err(not_found());
    }
    let Some(rest) = path.strip_prefix("/apis/").filter(|rest| !rest.is_empty()) else {
        return Ok(non_resource(method, path));
    };
    let segments = decode_segments(rest)?;
    if segments.len() < 3 {
        return Ok(non_resource(method, path));
    }
    let (group, version, tail) = (&segments[0], &segments[1], &segments[2..]);
    let (namespace, parts) = split_namespace(tail);
    if parts.len() > 3 {
        return Err(not_found());
    }
    let resource = parts[0].clone();
    let name = parts.get(1).cloned();
    let subresource = parts.get(2).cloned();
    let verb = verb_for(method, name.is_some(), watch)?;
    Ok(RequestInfo::Resource(ResourceRequest {
        group: group.clone(),
        version: version.clone(),
        namespace,
        resource,
        name,
        subresource,
        verb,
    }))
}

/// Splits `namespaces/<ns>/...` into the namespace and the rest. `namespaces` and `namespaces/<ns>` alone address
/// the core `namespaces` resource (`namespaces/<ns>` with the name and namespace both `<ns>`, as kube does).
fn split_namespace(tail: &[String]) -> (Option<String>, Vec<String>) {
    if tail[0] == "namespaces" && tail.len() >= 3 {
        return (Some(tail[1].clone()), tail[2..].to_vec());
    }
    if tail[0] == "namespaces" && tail.len() == 2 {
        return (Some(tail[1].clone()), tail.to_vec());
    }
    (None, tail.to_vec())
}

/// kube-apiserver's verb for an HTTP method on an item (`has_name`) or a collection.
fn verb_for(method: &http::Method, has_name: bool, watch: bool) -> Result<Verb, ApiError> {
    let verb = match *method {
        http::Method::GET | http::Method::HEAD if watch => Verb::Watch,
        http::Method::GET | http::Method::HEAD if has_name => Verb::Get,
        http::Method::GET | http::Method::HEAD => Verb::List,
        http::Method::POST => Verb::Create,
        http::Method::PUT => Verb::Update,
        http::Method::PATCH => Verb::Patch,
        http::Method::DELETE if has_name => Verb::Delete,
        http::Method::DELETE => Verb::DeleteCollection,
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource: {method}"
            )));
        }
    };
    Ok(verb)
}

fn non_resource(method: &http::Method, path: &str) -> RequestInfo {
    RequestInfo::NonResource {
        path: path.to_owned(),
        verb: method.as_str().to_ascii_lowercase(),
    }
}

/// Splits and percent-decodes the path after `/apis/`. A trailing slash is tolerated; empty segments elsewhere,
/// `.`/`..`, decoded `/` and invalid UTF-8 are refused.
fn decode_segments(rest: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    rest.split('/').map(decode_segment).collect()
}

fn decode_segment(raw: &str) -> Result<String, ApiError> {
    let bytes = percent_decode(raw).ok_or_else(not_found)?;
    let segment = String::from_utf8(bytes).map_err(|_| not_found())?;
    let bad = segment.is_empty()
        || segment == "."
        || segment == ".."
        || segment.contains('/')
        || segment.chars().any(char::is_control);
    if bad {
        return Err(not_found());
    }
    Ok(segment)
}

/// `%XX` decoding; `None` for a malformed escape.
/// `%XX` escapes decoded; `None` for a malformed escape.
pub(crate) fn percent_decode(raw: &str) -> Option<Vec<u8>> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = raw.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// kube-apiserver's answer to a path it has no route for.
pub fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;
    use proptest::prelude::*;

    fn resource(method: Method, path: &str, watch: bool) -> ResourceRequest {
        match parse(&method, path, watch) {
            Ok(RequestInfo::Resource(r)) => r,
            other => panic!("{path}: expected a resource request, got {other:?}"),
        }
    }

    #[test]
    fn namespaced_item_and_subresource() {
        let r = resource(Method::GET, "/apis/g.io/v1/namespaces/ns/things/a.b/log", false);
        assert_eq!((r.group.as_str(), r.version.as_str()), ("g.io", "v1"));
        assert_eq!(r.namespace.as_deref(), Some("ns"));
        assert_eq!(r.resource, "things");
        assert_eq!(r.name.as_deref(), Some("a.b"));
        assert_eq!(r.subresource.as_deref(), Some("log"));
        assert_eq!(r.verb, Verb::Get);
    }

    #[test]
    fn verbs_follow_kube_apiserver() {
        let item = "/apis/g/v1/namespaces/ns/things/x";
        let coll = "/apis/g/v1/namespaces/ns/things";
        let cases = [
            (Method::GET, item, false, Verb::Get),
            (Method::GET, coll, false, Verb::List),
            (Method::GET, coll, true, Verb::Watch),
            (Method::GET, item, true, Verb::Watch),
            (Method::POST, coll, false, Verb::Create),
            (Method::PUT, item, false, Verb::Update),
            (Method::PATCH, item, false, Verb::Patch),
            (Method::DELETE, item, false, Verb::Delete),
            (Method::DELETE, coll, false, Verb::DeleteCollection),
        ];
        for (method, path, watch, verb) in cases {
            assert_eq!(
                resource(method.clone(), path, watch).verb,
                verb,
                "{method} {path}"
            );
        }
    }

    #[test]
    fn cluster_wide_collection_has_no_namespace() {
        let r = resource(Method::GET, "/apis/g/v1/things", true);
        assert_eq!(r.namespace, None);
        assert_eq!(r.resource, "things");
        assert_eq!(r.verb, Verb::Watch);
    }

    #[test]
    fn a_namespace_itself_is_the_core_namespaces_resource() {
        let r = resource(Method::GET, "/apis/g/v1/namespaces/team-a", false);
        assert_eq!(r.resource, "namespaces");
        assert_eq!(r.name.as_deref(), Some("team-a"));
        assert_eq!(
            resource(Method::GET, "/apis/g/v1/namespaces", false).resource,
            "namespaces"
        );
    }

    #[test]
    fn discovery_and_other_paths_are_non_resource() {
        for path in [
            "/apis",
            "/apis/",
            "/apis/g",
            "/apis/g/v1",
            "/apis/g/v1/",
            "/openapi/v2",
            "/healthz",
            "/",
        ] {
            assert_eq!(
                parse(&Method::GET, path, false),
                Ok(RequestInfo::NonResource {
                    path: path.into(),
                    verb: "get".into()
                })
            );
        }
    }

    #[test]
    fn bad_paths_are_not_found() {
        for path in [
            "/apis/g/v1/namespaces/ns/things/x/log/more",
            "/apis/g/v1//things",
            "/apis/g/v1/namespaces/ns/things/..",
            "/apis/g/v1/namespaces/ns/things/a%2Fb",
            "/apis/g/v1/namespaces/ns/things/%zz",
            "/apis/g/v1/namespaces/ns/things/%ff",
            "relative",
        ] {
            let err = parse(&Method::GET, path, false).expect_err(path);
            assert_eq!((err.code, err.reason), (404, "NotFound"), "{path}");
        }
    }

    #[test]
    fn unknown_methods_are_405() {
        let err = parse(&Method::OPTIONS, "/apis/g/v1/things", false).expect_err("options");
        assert_eq!(err.code, 405);
    }

    #[test]
    fn percent_encoded_names_are_decoded() {
        let r = resource(Method::GET, "/apis/g/v1/namespaces/ns/things/a%2Eb", false);
        assert_eq!(r.name.as_deref(), Some("a.b"));
    }

    fn segment() -> impl Strategy<Value = String> {
        "[a-z0-9][a-z0-9.-]{0,20}".prop_filter("not a dot segment", |s| s != "." && s != "..")
    }

    proptest! {
        #[test]
        fn never_panics(path in "\\PC{0,200}", watch: bool) {
            let _ = parse(&Method::GET, &path, watch);
            let _ = parse(&Method::DELETE, &format!("/apis/{path}"), watch);
        }

        #[test]
        fn never_panics_on_slashes_and_escapes(path in "(/|%|[0-9a-fA-F]|[a-z]|\\.){0,60}") {
            let _ = parse(&Method::PATCH, &format!("/apis{path}"), false);
        }

        #[test]
        fn valid_paths_round_trip(
            group in segment(),
            version in segment(),
            namespace in proptest::option::of(segment()),
            resource_name in segment().prop_filter("not the namespaces resource", |s| s != "namespaces"),
            name in proptest::option::of(segment()),
            subresource in segment(),
            with_subresource: bool,
        ) {
            let subresource = name.as_ref().filter(|_| with_subresource).map(|_| subresource);
            let mut path = format!("/apis/{group}/{version}");
            if let Some(ns) = &namespace {
                path.push_str(&format!("/namespaces/{ns}"));
            }
            path.push('/');
            path.push_str(&resource_name);
            for part in name.iter().chain(subresource.iter()) {
                path.push('/');
                path.push_str(part);
            }
            let parsed = parse(&Method::PUT, &path, false);
            prop_assert_eq!(parsed, Ok(RequestInfo::Resource(ResourceRequest {
                group, version, namespace, resource: resource_name, name, subresource, verb: Verb::Update,
            })));
        }
    }
}
