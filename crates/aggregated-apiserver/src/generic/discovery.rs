//! Discovery documents: `/apis`, the group, the version (legacy), and aggregated discovery (v2) for clients that ask.
//!
//! kube-apiserver's aggregator asks `/apis` for `apidiscovery.k8s.io` v2 (or v2beta1) `APIGroupDiscoveryList` and
//! recognises the answer by its `Content-Type` parameters; anything else makes it fall back to the legacy
//! `/apis/<group>/<version>` APIResourceList. Both are served, with an `ETag` so its periodic refresh can be a 304.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, GroupVersionForDiscovery,
};
use kube::core::discovery::v2::{
    APIGroupDiscovery, APIGroupDiscoveryList, APIResourceDiscovery, APISubresourceDiscovery,
    APIVersionDiscovery, GroupVersionKind,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::negotiate::{Answering, accepted_ranges, not_acceptable, response_format};
use super::registry::{Registry, ResourceDef, Verb};
use super::status::ApiError;

/// The group of the aggregated discovery types.
const DISCOVERY_GROUP: &str = "apidiscovery.k8s.io";
const DISCOVERY_LIST: &str = "APIGroupDiscoveryList";

/// Answers a discovery path (`/apis`, `/apis/<group>`, `/apis/<group>/<version>`), or `None` for other paths.
/// `/apis` answers aggregated discovery (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList) when `Accept` asks for
/// it, else the legacy APIGroupList; JSON by default.
///
/// `path` may carry a query (`/apis?x=y`); it is ignored. A trailing `/` is tolerated.
pub fn answer(registry: &Registry, path: &str, headers: &HeaderMap) -> Option<Response> {
    let path = path.split('?').next().unwrap_or_default();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let document = match segments.as_slice() {
        ["apis"] => apis(registry, headers),
        ["apis", group] if *group == registry.group => legacy(headers, api_group(registry)),
        ["apis", group, version] if *group == registry.group && *version == registry.version => {
            legacy(headers, api_resource_list(registry))
        }
        _ => return None,
    };
    Some(match document {
        Ok(document) => document.into_response_for(headers),
        Err(error) => error.into_response(),
    })
}

/// A document and the media type it is answered as.
#[derive(Debug)]
pub struct Document {
    pub body: Value,
    pub content_type: String,
}

impl Document {
    fn json(body: Value) -> Self {
        Self {
            body,
            content_type: "application/json".to_owned(),
        }
    }

    /// 200 with the body and its `ETag`, or 304 when `If-None-Match` names that `ETag` already.
    pub fn into_response_for(self, headers: &HeaderMap) -> Response {
        let bytes = self.body.to_string();
        let etag = format!("\"{}\"", hex_sha256(bytes.as_bytes()));
        let status = if if_none_match(headers, &etag) {
            StatusCode::NOT_MODIFIED
        } else {
            StatusCode::OK
        };
        let body = if status == StatusCode::OK {
            bytes
        } else {
            String::new()
        };
        let mut response = (status, body).into_response();
        let response_headers = response.headers_mut();
        for (name, value) in [
            (header::CONTENT_TYPE, self.content_type.as_str()),
            (header::ETAG, etag.as_str()),
            (header::VARY, "Accept"),
        ] {
            if let Ok(value) = HeaderValue::from_str(value) {
                response_headers.insert(name, value);
            }
        }
        response
    }
}

/// Whether `If-None-Match` lists `etag` (or `*`).
fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag == etag || tag.strip_prefix("W/") == Some(etag)
        })
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn hex_sha256(bytes: &[u8]) -> String {
    lower_hex(&Sha256::digest(bytes))
}

/// Lower-case hex of `bytes`, without a formatter call per byte (this runs for every object of a list).
fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    hex
}

/// An [`std::io::Write`] that feeds SHA-256: what is serialized into it is hashed without being kept.
#[derive(Default)]
pub struct HashingWriter(Sha256);

impl HashingWriter {
    /// Lower-case hex of the digest of everything written.
    pub fn hex(self) -> String {
        lower_hex(&self.0.finalize())
    }
}

impl std::io::Write for HashingWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn legacy(headers: &HeaderMap, body: Value) -> Result<Document, ApiError> {
    response_format(headers, Answering::Document, None)?;
    Ok(Document::json(body))
}

/// Which answer `/apis` gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApisFormat {
    /// `apidiscovery.k8s.io/<version>` APIGroupDiscoveryList.
    Aggregated(&'static str),
    Legacy,
}

/// The best `Accept` range `/apis` can answer: aggregated v2 or v2beta1, or plain JSON; else 406.
pub fn apis_format(headers: &HeaderMap) -> Result<ApisFormat, ApiError> {
    for range in accepted_ranges(headers)? {
        if !range.matches("application", "json") {
            continue;
        }
        if range.as_.is_none() {
            return Ok(ApisFormat::Legacy);
        }
        for version in ["v2", "v2beta1"] {
            if range.asks_for(DISCOVERY_LIST, DISCOVERY_GROUP, &[version]) {
                return Ok(ApisFormat::Aggregated(version));
            }
        }
    }
    Err(not_acceptable(Answering::Document))
}

fn apis(registry: &Registry, headers: &HeaderMap) -> Result<Document, ApiError> {
    Ok(match apis_format(headers)? {
        ApisFormat::Legacy => Document::json(api_group_list(registry)),
        ApisFormat::Aggregated(version) => Document {
            body: aggregated(registry, version),
            content_type: format!("application/json;g={DISCOVERY_GROUP};v={version};as={DISCOVERY_LIST}"),
        },
    })
}

fn group_version_for_discovery(registry: &Registry) -> GroupVersionForDiscovery {
    GroupVersionForDiscovery {
        group_version: registry.group_version(),
        version: registry.version.to_owned(),
    }
}

fn group(registry: &Registry) -> APIGroup {
    APIGroup {
        name: registry.group.to_owned(),
        preferred_version: Some(group_version_for_discovery(registry)),
        server_address_by_client_cidrs: None,
        versions: vec![group_version_for_discovery(registry)],
    }
}

/// The `APIGroup` of `/apis/<group>`.
pub fn api_group(registry: &Registry) -> Value {
    serde_json::to_value(group(registry)).unwrap_or_default()
}

/// The `APIGroupList` of `/apis`.
pub fn api_group_list(registry: &Registry) -> Value {
    let list = APIGroupList {
        groups: vec![group(registry)],
    };
    serde_json::to_value(list).unwrap_or_default()
}

fn verbs(verbs: &[Verb]) -> Vec<String> {
    verbs.iter().map(|v| v.as_str().to_owned()).collect()
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|&v| v.to_owned()).collect()
}

/// Empty lists are left out, as kube-apiserver does.
fn non_empty(values: &[&str]) -> Option<Vec<String>> {
    (!values.is_empty()).then(|| strings(values))
}

/// The `APIResourceList` of `/apis/<group>/<version>`: each resource, then each subresource as `<plural>/<name>`.
pub fn api_resource_list(registry: &Registry) -> Value {
    let resources = registry
        .resources
        .iter()
        .flat_map(|def| std::iter::once(api_resource(def)).chain(subresource_entries(def)))
        .collect();
    let list = APIResourceList {
        group_version: registry.group_version(),
        resources,
    };
    serde_json::to_value(list).unwrap_or_default()
}

fn api_resource(def: &ResourceDef) -> APIResource {
    APIResource {
        name: def.plural.to_owned(),
        singular_name: def.singular.to_owned(),
        namespaced: def.namespaced,
        kind: def.kind.to_owned(),
        verbs: verbs(def.verbs),
        short_names: non_empty(def.short_names),
        categories: non_empty(def.categories),
        ..APIResource::default()
    }
}

fn subresource_entries(def: &ResourceDef) -> impl Iterator<Item = APIResource> + '_ {
    def.subresources.iter().map(|sub| APIResource {
        name: format!("{}/{}", def.plural, sub.name),
        singular_name: String::new(),
        namespaced: def.namespaced,
        kind: sub.kind.to_owned(),
        verbs: verbs(sub.verbs),
        ..APIResource::default()
    })
}

/// The `apidiscovery.k8s.io/<version>` APIGroupDiscoveryList of `/apis`: the one group, its one version, every
/// resource with its subresources, fresh.
pub fn aggregated(registry: &Registry, discovery_version: &str) -> Value {
    let version = APIVersionDiscovery {
        version: Some(registry.version.to_owned()),
        resources: registry
            .resources
            .iter()
            .map(|def| resource_discovery(registry, def))
            .collect(),
        freshness: Some("Current".to_owned()),
    };
    let group = APIGroupDiscovery {
        metadata: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(registry.group.to_owned()),
            ..Default::default()
        }),
        versions: vec![version],
    };
    let list = APIGroupDiscoveryList {
        metadata: Some(Default::default()),
        items: vec![group],
    };
    let mut body = serde_json::to_value(list).unwrap_or_default();
    if let Some(object) = body.as_object_mut() {
        object.insert("kind".into(), DISCOVERY_LIST.into());
        object.insert(
            "apiVersion".into(),
            format!("{DISCOVERY_GROUP}/{discovery_version}").into(),
        );
    }
    body
}

fn kind_of(registry: &Registry, kind: &str) -> GroupVersionKind {
    GroupVersionKind {
        group: Some(registry.group.to_owned()),
        version: Some(registry.version.to_owned()),
        kind: Some(kind.to_owned()),
    }
}

fn resource_discovery(registry: &Registry, def: &ResourceDef) -> APIResourceDiscovery {
    let scope = if def.namespaced { "Namespaced" } else { "Cluster" };
    APIResourceDiscovery {
        resource: Some(def.plural.to_owned()),
        response_kind: Some(kind_of(registry, def.kind)),
        scope: Some(scope.to_owned()),
        singular_resource: Some(def.singular.to_owned()),
        verbs: verbs(def.verbs),
        short_names: strings(def.short_names),
        categories: strings(def.categories),
        subresources: def
            .subresources
            .iter()
            .map(|sub| APISubresourceDiscovery {
                subresource: Some(sub.name.to_owned()),
                response_kind: Some(kind_of(registry, sub.kind)),
                accepted_types: Vec::new(),
                verbs: verbs(sub.verbs),
            })
            .collect(),
    }
}

/// A small registry for the tests of discovery, Table output and OpenAPI: a namespaced `widgets` resource with a
/// nested schemars schema, two columns and a `log` subresource, and a cluster-scoped `gadgets` resource.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::sync::Arc;

    use async_trait::async_trait;
    use axum::response::{IntoResponse, Response};
    use schemars::JsonSchema;
    use serde_json::{Value, json};

    use crate::generic::registry::{Column, Registry, ResourceDef, SubresourceDef, Verb};
    use crate::generic::{ApiError, RequestContext, Storage, SubresourceHandler, SubresourceRequest};

    struct NoStorage;

    #[async_trait]
    impl Storage for NoStorage {
        async fn get(&self, _ctx: &RequestContext, _name: &str) -> Result<Value, ApiError> {
            Err(ApiError::internal("not used"))
        }
        async fn list(&self, _ctx: &RequestContext) -> Result<Vec<Value>, ApiError> {
            Ok(Vec::new())
        }
    }

    struct NoLog;

    #[async_trait]
    impl SubresourceHandler for NoLog {
        async fn handle(&self, _request: SubresourceRequest) -> Result<Response, ApiError> {
            Ok("".into_response())
        }
    }

    /// A nested type, so the schema has `$defs` and `$ref`s.
    #[allow(dead_code)]
    #[derive(JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct Widget {
        pub spec: WidgetSpec,
        pub status: Option<WidgetStatus>,
    }

    /// What a widget should look like.
    #[allow(dead_code)]
    #[derive(JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct WidgetSpec {
        /// The colour of the widget.
        pub color: String,
        pub size: Option<u32>,
        pub parts: Vec<Part>,
    }

    /// One part.
    #[allow(dead_code)]
    #[derive(JsonSchema)]
    pub struct Part {
        pub name: String,
    }

    /// What a widget looks like.
    #[allow(dead_code)]
    #[derive(JsonSchema)]
    pub struct WidgetStatus {
        pub ready: bool,
    }

    pub const ALL_VERBS: &[Verb] = &[
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
    ];

    pub fn widgets() -> ResourceDef {
        ResourceDef {
            plural: "widgets",
            singular: "widget",
            kind: "Widget",
            list_kind: "WidgetList",
            short_names: &["wd"],
            categories: &["all", "toys"],
            namespaced: true,
            verbs: ALL_VERBS,
            schema: schemars::schema_for!(Widget).to_value(),
            columns: vec![
                Column {
                    name: "Color",
                    type_: "string",
                    format: "",
                    description: "The colour.",
                    priority: 0,
                    cell: |o| o.pointer("/spec/color").cloned().unwrap_or(Value::Null),
                },
                Column {
                    name: "Size",
                    type_: "integer",
                    format: "",
                    description: "The size.",
                    priority: 1,
                    cell: |o| o.pointer("/spec/size").cloned().unwrap_or(Value::Null),
                },
            ],
            subresources: vec![SubresourceDef {
                name: "log",
                kind: "WidgetLog",
                verbs: &[Verb::Get],
                handler: Arc::new(NoLog),
            }],
            storage: Arc::new(NoStorage),
            watch_feed: None,
        }
    }

    pub fn gadgets() -> ResourceDef {
        ResourceDef {
            plural: "gadgets",
            singular: "gadget",
            kind: "Gadget",
            list_kind: "GadgetList",
            short_names: &[],
            categories: &[],
            namespaced: false,
            verbs: &[Verb::Get, Verb::List],
            schema: json!({
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            }),
            columns: Vec::new(),
            subresources: Vec::new(),
            storage: Arc::new(NoStorage),
            watch_feed: None,
        }
    }

    pub fn registry() -> Registry {
        Registry {
            group: "toys.example.com",
            version: "v1alpha1",
            resources: vec![widgets(), gadgets()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digests_are_lower_hex_whether_hashed_at_once_or_as_written() {
        assert_eq!(
            hex_sha256(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let mut writer = HashingWriter::default();
        std::io::Write::write_all(&mut writer, b"ab").unwrap();
        std::io::Write::write_all(&mut writer, b"c").unwrap();
        assert_eq!(
            writer.hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex_sha256(b"abc"), HashingWriter::default().hex_of(b"abc"));
    }

    impl HashingWriter {
        fn hex_of(mut self, bytes: &[u8]) -> String {
            std::io::Write::write_all(&mut self, bytes).unwrap();
            self.hex()
        }
    }

    const KUBE_AGGREGATOR_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

    fn headers(accept: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
        headers
    }

    async fn body(response: Response) -> (StatusCode, HeaderMap, Value) {
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        (status, headers, value)
    }

    async fn get(path: &str, accept: &str) -> (StatusCode, HeaderMap, Value) {
        body(answer(&fixtures::registry(), path, &headers(accept)).expect("a discovery path")).await
    }

    #[tokio::test]
    async fn apis_answers_the_legacy_group_list_for_plain_json() {
        let (status, headers, list) = get("/apis", "application/json").await;
        assert_eq!(status, 200);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        assert_eq!(
            (&list["kind"], &list["apiVersion"]),
            (&json!("APIGroupList"), &json!("v1"))
        );
        let group = &list["groups"][0];
        assert_eq!(group["name"], "toys.example.com");
        let expected = json!({"groupVersion": "toys.example.com/v1alpha1", "version": "v1alpha1"});
        assert_eq!(group["versions"], json!([expected]));
        assert_eq!(group["preferredVersion"], expected);
        // The typed round trip is what client-go does with the body.
        serde_json::from_value::<APIGroupList>(list).unwrap();
    }

    #[tokio::test]
    async fn apis_answers_aggregated_discovery_to_kube_apiserver() {
        let (status, headers, list) = get("/apis", KUBE_AGGREGATOR_ACCEPT).await;
        assert_eq!(status, 200);
        assert_eq!(
            headers[header::CONTENT_TYPE],
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        assert_eq!(list["kind"], "APIGroupDiscoveryList");
        assert_eq!(list["apiVersion"], "apidiscovery.k8s.io/v2");
        let typed: APIGroupDiscoveryList = serde_json::from_value(list.clone()).unwrap();
        assert_eq!(typed.items.len(), 1);
        let group = &list["items"][0];
        assert_eq!(group["metadata"]["name"], "toys.example.com");
        let version = &group["versions"][0];
        assert_eq!(
            (&version["version"], &version["freshness"]),
            (&json!("v1alpha1"), &json!("Current"))
        );
        let widgets = &version["resources"][0];
        assert_eq!(widgets["resource"], "widgets");
        assert_eq!(
            widgets["responseKind"],
            json!({"group": "toys.example.com", "version": "v1alpha1", "kind": "Widget"})
        );
        assert_eq!(widgets["scope"], "Namespaced");
        assert_eq!(widgets["singularResource"], "widget");
        assert_eq!(
            widgets["verbs"],
            json!(["get", "list", "watch", "create", "update", "patch", "delete"])
        );
        assert_eq!(widgets["shortNames"], json!(["wd"]));
        assert_eq!(widgets["categories"], json!(["all", "toys"]));
        assert_eq!(widgets["subresources"][0]["subresource"], "log");
        assert_eq!(widgets["subresources"][0]["responseKind"]["kind"], "WidgetLog");
        assert_eq!(widgets["subresources"][0]["verbs"], json!(["get"]));
        assert_eq!(version["resources"][1]["scope"], "Cluster");
    }

    #[tokio::test]
    async fn v2beta1_alone_gets_a_v2beta1_document() {
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        let (_, headers, list) = get("/apis", accept).await;
        assert_eq!(list["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        assert!(
            headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .contains("v=v2beta1")
        );
    }

    #[tokio::test]
    async fn kubectl_accept_prefers_aggregated_and_protobuf_only_is_refused() {
        let (_, _, list) = get("/apis", kube::core::discovery::v2::ACCEPT_AGGREGATED_DISCOVERY_V2).await;
        assert_eq!(list["kind"], "APIGroupDiscoveryList");
        let (status, _, error) = get("/apis", "application/vnd.kubernetes.protobuf").await;
        assert_eq!(
            (status, &error["reason"]),
            (StatusCode::NOT_ACCEPTABLE, &json!("NotAcceptable"))
        );
        let (status, _, _) = get(
            "/apis",
            "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList",
        )
        .await;
        assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    }

    #[tokio::test]
    async fn the_group_path_answers_the_api_group() {
        let (status, _, group) = get("/apis/toys.example.com", "application/json").await;
        assert_eq!(status, 200);
        assert_eq!(
            (&group["kind"], &group["name"]),
            (&json!("APIGroup"), &json!("toys.example.com"))
        );
        assert_eq!(group["preferredVersion"]["version"], "v1alpha1");
    }

    #[tokio::test]
    async fn the_version_path_lists_resources_and_subresources() {
        let (status, _, list) = get("/apis/toys.example.com/v1alpha1/", "*/*").await;
        assert_eq!(status, 200);
        assert_eq!(
            (&list["kind"], &list["apiVersion"]),
            (&json!("APIResourceList"), &json!("v1"))
        );
        assert_eq!(list["groupVersion"], "toys.example.com/v1alpha1");
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["widgets", "widgets/log", "gadgets"]);
        let widgets = &list["resources"][0];
        assert_eq!(
            (&widgets["kind"], &widgets["namespaced"], &widgets["singularName"]),
            (&json!("Widget"), &json!(true), &json!("widget"))
        );
        assert_eq!(widgets["shortNames"], json!(["wd"]));
        assert_eq!(widgets["categories"], json!(["all", "toys"]));
        let log = &list["resources"][1];
        assert_eq!(
            (&log["kind"], &log["verbs"], &log["namespaced"]),
            (&json!("WidgetLog"), &json!(["get"]), &json!(true))
        );
        assert!(
            list["resources"][2].get("shortNames").is_none(),
            "{}",
            list["resources"][2]
        );
        serde_json::from_value::<APIResourceList>(list).unwrap();
    }

    #[test]
    fn other_paths_are_not_discovery() {
        let registry = fixtures::registry();
        for path in [
            "/api",
            "/apis/other.example.com",
            "/apis/toys.example.com/v1",
            "/apis/toys.example.com/v1alpha1/widgets",
            "/openapi/v2",
            "/",
        ] {
            assert!(answer(&registry, path, &HeaderMap::new()).is_none(), "{path}");
        }
    }

    #[tokio::test]
    async fn a_matching_if_none_match_gets_304() {
        let registry = fixtures::registry();
        let first = answer(&registry, "/apis", &headers(KUBE_AGGREGATOR_ACCEPT)).unwrap();
        let etag = first.headers()[header::ETAG].clone();
        let mut again = headers(KUBE_AGGREGATOR_ACCEPT);
        again.insert(header::IF_NONE_MATCH, etag.clone());
        let (status, headers, body) = body(answer(&registry, "/apis", &again).unwrap()).await;
        assert_eq!(status, StatusCode::NOT_MODIFIED);
        assert_eq!(headers[header::ETAG], etag);
        assert_eq!(body, Value::Null);
        let legacy = answer(&registry, "/apis", &headers_with_etag("application/json", &etag)).unwrap();
        assert_eq!(
            legacy.status(),
            StatusCode::OK,
            "the legacy document has another ETag"
        );
    }

    fn headers_with_etag(accept: &str, etag: &HeaderValue) -> HeaderMap {
        let mut map = headers(accept);
        map.insert(header::IF_NONE_MATCH, etag.clone());
        map
    }
}
