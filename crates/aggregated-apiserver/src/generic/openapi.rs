//! OpenAPI v2 and v3 documents for the served group, built from the registry's schemas.
//!
//! kube-apiserver downloads `/openapi/v2` and `/openapi/v3` (Accept `application/json`) and merges them into the
//! cluster's documents; it converts the merged v2 document to protobuf for kubectl, so the v2 document must be
//! strict Swagger 2.0 (no `anyOf`, `nullable`, `$defs` or type arrays). For v3 it proxies
//! `/openapi/v3/apis/<group>/<version>` to this server, which is what `kubectl explain` reads. Each kind is a
//! definition named `<reversed group>.<version>.<Kind>` with `x-kubernetes-group-version-kind`; `metadata` refers to
//! `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`, included from k8s-openapi's schemas. A schemars schema's
//! `$defs` become definitions named with the same prefix.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ListMeta, ObjectMeta, Status};
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::discovery::{Document, hex_sha256};
use super::negotiate::{Answering, response_format};
use super::registry::{Registry, ResourceDef, Verb};

/// Answers `/openapi/v2`, `/openapi/v3` and `/openapi/v3/apis/<group>/<version>`, or `None` for other paths.
///
/// `path` may carry the query: `?hash=` of the v3 index is honoured (a matching hash makes the answer cacheable
/// for good, as kube-apiserver's is). JSON only; an `Accept` without JSON (protobuf) gets 406.
pub fn answer(registry: &Registry, path: &str, headers: &HeaderMap) -> Option<Response> {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let path = path.trim_end_matches('/');
    let group_version_path = format!("/openapi/v3/{}", group_version_key(registry));
    let body = match path {
        "/openapi/v2" => v2_document(registry),
        "/openapi/v3" => v3_index(registry),
        _ if path == group_version_path => v3_document(registry),
        _ => return None,
    };
    if let Err(error) = response_format(headers, Answering::Document, None) {
        return Some(error.into_response());
    }
    let immutable = path == group_version_path && query_hash(query) == Some(document_hash(&body));
    let mut response = Document {
        body,
        content_type: "application/json".to_owned(),
    }
    .into_response_for(headers);
    if immutable {
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, immutable, max-age=31536000"),
        );
    }
    Some(response)
}

fn query_hash(query: &str) -> Option<String> {
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "hash")
        .map(|(_, value)| value.into_owned())
}

/// `apis/<group>/<version>`: the key of the v3 index.
fn group_version_key(registry: &Registry) -> String {
    format!("apis/{}", registry.group_version())
}

fn document_hash(document: &Value) -> String {
    hex_sha256(document.to_string().as_bytes())
}

/// The `/openapi/v3` index: one entry for the served group version, with the hash of its current document.
pub fn v3_index(registry: &Registry) -> Value {
    let key = group_version_key(registry);
    let hash = document_hash(&v3_document(registry));
    json!({"paths": {&key: {"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}}})
}

/// The Swagger 2.0 document of `/openapi/v2`.
pub fn v2_document(registry: &Registry) -> Value {
    let definitions: Map<String, Value> = definitions(registry)
        .into_iter()
        .map(|(name, schema)| (name, sanitize(&schema, Dialect::V2)))
        .collect();
    json!({
        "swagger": "2.0",
        "info": info(registry),
        "paths": v2_paths(registry),
        "definitions": definitions,
    })
}

/// The OpenAPI 3.0 document of `/openapi/v3/apis/<group>/<version>`.
pub fn v3_document(registry: &Registry) -> Value {
    let schemas: Map<String, Value> = definitions(registry)
        .into_iter()
        .map(|(name, schema)| (name, sanitize(&schema, Dialect::V3)))
        .collect();
    json!({
        "openapi": "3.0.0",
        "info": info(registry),
        "paths": v3_paths(registry),
        "components": {"schemas": schemas},
    })
}

fn info(registry: &Registry) -> Value {
    json!({"title": registry.group, "version": registry.version})
}

// ---------------------------------------------------------------------------------------------------------------
// Definitions

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";

/// A reference in the neutral form used while building; [`sanitize`] moves it for v3.
fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/definitions/{name}")})
}

/// `aggregation.coder.com` + `v1alpha1` → `com.coder.aggregation.v1alpha1.`: the prefix of the group's names.
pub fn definition_prefix(registry: &Registry) -> String {
    let reversed: Vec<&str> = registry.group.split('.').rev().collect();
    format!("{}.{}.", reversed.join("."), registry.version)
}

/// Every definition of the documents: the kinds, their lists, their schemas' `$defs`, and the meta types.
pub fn definitions(registry: &Registry) -> BTreeMap<String, Value> {
    let mut definitions = meta_definitions();
    let prefix = definition_prefix(registry);
    for def in &registry.resources {
        let (kind, nested) = kind_definition(registry, def, &prefix);
        for (name, schema) in nested {
            definitions.entry(name).or_insert(schema);
        }
        definitions.insert(format!("{prefix}{}", def.kind), kind);
        definitions.insert(
            format!("{prefix}{}", def.list_kind),
            list_definition(registry, def, &prefix),
        );
    }
    definitions
}

/// ObjectMeta, ListMeta, DeleteOptions and Status with everything they refer to, from k8s-openapi.
fn meta_definitions() -> BTreeMap<String, Value> {
    let mut generator = SchemaSettings::draft07().into_generator();
    generator.subschema_for::<ObjectMeta>();
    generator.subschema_for::<ListMeta>();
    generator.subschema_for::<DeleteOptions>();
    generator.subschema_for::<Status>();
    generator.take_definitions(true).into_iter().collect()
}

fn gvk(registry: &Registry, kind: &str) -> Value {
    json!([{"group": registry.group, "version": registry.version, "kind": kind}])
}

fn type_meta_properties() -> [(&'static str, Value); 2] {
    [
        (
            "apiVersion",
            json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}),
        ),
        (
            "kind",
            json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}),
        ),
    ]
}

/// The kind's definition and the definitions hoisted out of its schema's `$defs`.
fn kind_definition(registry: &Registry, def: &ResourceDef, prefix: &str) -> (Value, Vec<(String, Value)>) {
    let own_name = format!("{prefix}{}", def.kind);
    let mut schema = def.schema.clone();
    let mut nested = Vec::new();
    if let Some(object) = schema.as_object_mut() {
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(defs)) = object.remove(key) {
                nested.extend(defs);
            }
        }
        for key in ["$schema", "$id", "title"] {
            object.remove(key);
        }
    }
    let rename = |name: &str| nested_name(prefix, name);
    rewrite_refs(&mut schema, &|target| {
        local_ref_target(target, &own_name, &rename)
    });
    let nested = nested
        .into_iter()
        .map(|(name, mut schema)| {
            rewrite_refs(&mut schema, &|target| {
                local_ref_target(target, &own_name, &rename)
            });
            (rename(&name), schema)
        })
        .collect();
    finish_kind_schema(&mut schema, registry, def);
    (schema, nested)
}

/// The name a schema's own `$defs` entry gets: k8s types keep theirs, the rest get the group's prefix.
fn nested_name(prefix: &str, name: &str) -> String {
    if name.starts_with("io.k8s.") {
        name.to_owned()
    } else {
        format!("{prefix}{name}")
    }
}

/// Where a local `$ref` of a registry schema points in the documents; `None` keeps it.
fn local_ref_target(target: &str, own_name: &str, rename: &dyn Fn(&str) -> String) -> Option<String> {
    if target == "#" {
        return Some(format!("#/definitions/{own_name}"));
    }
    let name = target
        .strip_prefix("#/$defs/")
        .or_else(|| target.strip_prefix("#/definitions/"))?;
    Some(format!("#/definitions/{}", rename(name)))
}

/// `type: object`, apiVersion/kind/metadata properties, the group-version-kind extension.
fn finish_kind_schema(schema: &mut Value, registry: &Registry, def: &ResourceDef) {
    if !schema.is_object() {
        *schema = json!({});
    }
    let object = schema.as_object_mut().into_iter().next();
    let Some(object) = object else { return };
    object.insert("type".into(), "object".into());
    let properties = object.entry("properties").or_insert_with(|| json!({}));
    if let Some(properties) = properties.as_object_mut() {
        for (name, property) in type_meta_properties() {
            properties.insert(name.into(), property);
        }
        properties.insert("metadata".into(), reference(OBJECT_META));
    }
    object.insert("x-kubernetes-group-version-kind".into(), gvk(registry, def.kind));
}

fn list_definition(registry: &Registry, def: &ResourceDef, prefix: &str) -> Value {
    let [api_version, kind] = type_meta_properties();
    json!({
        "description": format!("{} is a list of {}.", def.list_kind, def.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            api_version.0: api_version.1,
            kind.0: kind.1,
            "items": {"type": "array", "items": reference(&format!("{prefix}{}", def.kind))},
            "metadata": reference(LIST_META),
        },
        "x-kubernetes-group-version-kind": gvk(registry, def.list_kind),
    })
}

/// Applies `target` to every `$ref` string in `value`; a `None` answer leaves the reference as it is.
fn rewrite_refs(value: &mut Value, target: &dyn Fn(&str) -> Option<String>) {
    match value {
        Value::Object(object) => {
            for (key, child) in object.iter_mut() {
                match child {
                    Value::String(reference) if key == "$ref" => {
                        if let Some(new) = target(reference) {
                            *reference = new;
                        }
                    }
                    _ => rewrite_refs(child, target),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rewrite_refs(item, target)),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Sanitizing JSON Schema into OpenAPI schema objects

/// Which OpenAPI version a schema is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// Swagger 2.0: no `nullable`, `anyOf`, `oneOf` or `not`.
    V2,
    /// OpenAPI 3.0: `nullable` instead of `null` in `type`.
    V3,
}

/// The schema keywords both versions share.
const COMMON_KEYS: &[&str] = &[
    "$ref",
    "format",
    "title",
    "description",
    "default",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "additionalProperties",
    "type",
    "items",
    "allOf",
    "properties",
    "readOnly",
    "example",
];

/// The keywords only OpenAPI 3.0 has.
const V3_KEYS: &[&str] = &["nullable", "oneOf", "anyOf", "not", "writeOnly", "deprecated"];

/// A JSON Schema (draft 7 / 2020-12, as schemars writes it) as an OpenAPI schema object of `dialect`: type
/// arrays become one type (and `nullable` in v3), `anyOf [X, null]` becomes X, `const` an `enum`, `examples` an
/// `example`; keywords the dialect does not have are dropped (vendor extensions `x-` are kept).
pub fn sanitize(schema: &Value, dialect: Dialect) -> Value {
    let Some(object) = schema.as_object() else {
        return json!({});
    };
    let mut object = object.clone();
    let nullable = collapse_nullable(&mut object);
    normalize_keywords(&mut object);
    let mut out = Map::new();
    for (key, value) in object {
        if let Some(value) = sanitize_keyword(&key, value, dialect) {
            out.insert(key, value);
        }
    }
    if nullable && dialect == Dialect::V3 {
        out.insert("nullable".into(), true.into());
    }
    if dialect == Dialect::V3
        && let Some(Value::String(reference)) = out.remove("$ref")
    {
        let reference = reference.replacen("#/definitions/", "#/components/schemas/", 1);
        if out.is_empty() {
            out.insert("$ref".into(), reference.into());
        } else {
            // v3 ignores a `$ref`'s siblings: wrap it so a description or `nullable` still counts.
            out.insert("allOf".into(), json!([{"$ref": reference}]));
        }
    }
    Value::Object(out)
}

/// Removes `null` from `anyOf`/`oneOf` (merging a single remaining alternative in) and then from `type`; answers
/// whether the schema allowed null.
fn collapse_nullable(object: &mut Map<String, Value>) -> bool {
    let mut nullable = false;
    for key in ["anyOf", "oneOf"] {
        nullable |= collapse_null_alternative(object, key);
    }
    match object.get("type").cloned() {
        Some(Value::Array(types)) => {
            let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
            nullable |= kept.len() < types.len();
            match kept.as_slice() {
                [single] => object.insert("type".into(), single.clone()),
                _ => object.remove("type"),
            };
        }
        Some(Value::String(type_)) if type_ == "null" => {
            object.remove("type");
            nullable = true;
        }
        _ => {}
    }
    nullable
}

/// `anyOf: [X, {type: null}]` → X merged into the schema; `[X, Y, null]` → `[X, Y]`. Answers whether a null
/// alternative was there.
fn collapse_null_alternative(object: &mut Map<String, Value>, key: &str) -> bool {
    let Some(Value::Array(alternatives)) = object.get(key).cloned() else {
        return false;
    };
    let is_null = |s: &Value| s.get("type") == Some(&json!("null"));
    if !alternatives.iter().any(is_null) {
        return false;
    }
    let kept: Vec<Value> = alternatives.into_iter().filter(|s| !is_null(s)).collect();
    object.remove(key);
    match kept.as_slice() {
        [Value::Object(single)] => {
            for (k, v) in single {
                object.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        [] => {}
        _ => {
            object.insert(key.into(), Value::Array(kept));
        }
    }
    true
}

/// `const` → `enum`, `examples` → `example`, numeric `exclusiveMinimum`/`exclusiveMaximum` → the boolean form.
fn normalize_keywords(object: &mut Map<String, Value>) {
    if let Some(value) = object.remove("const") {
        object.insert("enum".into(), json!([value]));
    }
    if let Some(Value::Array(examples)) = object.remove("examples")
        && let Some(first) = examples.into_iter().next()
    {
        object.entry("example").or_insert(first);
    }
    for (exclusive, bound) in [("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")] {
        if let Some(limit) = object.get(exclusive).filter(|v| v.is_number()).cloned() {
            object.insert(bound.into(), limit);
            object.insert(exclusive.into(), true.into());
        }
    }
}

/// One keyword of a schema in `dialect`, its sub-schemas sanitized; `None` drops it.
fn sanitize_keyword(key: &str, value: Value, dialect: Dialect) -> Option<Value> {
    if key.starts_with("x-") {
        return Some(value);
    }
    let known = COMMON_KEYS.contains(&key) || (dialect == Dialect::V3 && V3_KEYS.contains(&key));
    if !known {
        return None;
    }
    Some(match (key, value) {
        ("properties", Value::Object(properties)) => Value::Object(
            properties
                .into_iter()
                .map(|(name, schema)| (name, sanitize(&schema, dialect)))
                .collect(),
        ),
        ("items" | "not", schema @ Value::Object(_)) => sanitize(&schema, dialect),
        ("items", _) => return None,
        ("additionalProperties", schema @ Value::Object(_)) => sanitize(&schema, dialect),
        ("allOf" | "anyOf" | "oneOf", Value::Array(schemas)) => {
            Value::Array(schemas.iter().map(|s| sanitize(s, dialect)).collect())
        }
        (_, value) => value,
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Paths

/// One HTTP operation of the group, rendered into either document.
#[derive(Clone, Debug)]
struct Operation {
    method: &'static str,
    /// `x-kubernetes-action`.
    action: &'static str,
    operation_id: String,
    kind: String,
    query: &'static [&'static str],
    /// The request body's schema, if the operation has one.
    body: Option<Value>,
    response: Value,
    /// `application/*-patch+*` types for a patch; JSON/YAML otherwise.
    consumes: &'static [&'static str],
}

const LIST_QUERY: &[&str] = &[
    "labelSelector",
    "fieldSelector",
    "limit",
    "continue",
    "resourceVersion",
    "resourceVersionMatch",
    "timeoutSeconds",
    "watch",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "pretty",
];
const WRITE_QUERY: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "pretty"];
const PATCH_QUERY: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force", "pretty"];
const DELETE_QUERY: &[&str] = &["dryRun", "gracePeriodSeconds", "propagationPolicy", "pretty"];
const READ_QUERY: &[&str] = &["pretty"];

const JSON_TYPES: &[&str] = &["application/json", "application/yaml"];
/// The patch bodies the handlers accept. Strategic merge patch is not among them (415), so it must not be
/// advertised: kubectl's client-side apply sends one to every type whose OpenAPI lists it.
const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// `aggregation.coder.com` + `v1alpha1` → `AggregationCoderComV1alpha1`, for operation ids.
fn operation_prefix(registry: &Registry) -> String {
    registry
        .group
        .split(['.', '-'])
        .chain(std::iter::once(registry.version))
        .map(capitalize)
        .collect()
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Every path of the group and its operations, in a stable order.
fn operations(registry: &Registry) -> BTreeMap<String, Vec<Operation>> {
    let mut paths: BTreeMap<String, Vec<Operation>> = BTreeMap::new();
    for def in &registry.resources {
        let names = Names::of(registry, def);
        let applies = |shape: &&Shape| {
            offers(def, shape.verb) && (shape.place != Place::AllNamespaces || def.namespaced)
        };
        for shape in SHAPES.iter().filter(applies) {
            let operation = names.operation(shape);
            paths.entry(names.path(shape.place)).or_default().push(operation);
        }
        subresource_operations(def, &names, &mut paths);
    }
    paths
}

/// Lists are published when a resource serves list or watch (a watch is a list with `?watch=true`).
fn offers(def: &ResourceDef, verb: Verb) -> bool {
    def.serves(verb) || (verb == Verb::List && def.serves(Verb::Watch))
}

/// Where an operation is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// `/apis/<gv>/<plural>` of a namespaced resource: lists across namespaces.
    AllNamespaces,
    Collection,
    Item,
}

/// What a request or response body is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Payload {
    Nothing,
    Kind,
    List,
    Patch,
    DeleteOptions,
    Status,
}

/// One verb's operation: where it is, its HTTP method, `x-kubernetes-action` and bodies.
struct Shape {
    verb: Verb,
    place: Place,
    method: &'static str,
    action: &'static str,
    /// The verb of the operation id (`read`, `replace`, ...), as kube-apiserver names them.
    id_verb: &'static str,
    query: &'static [&'static str],
    body: Payload,
    response: Payload,
    consumes: &'static [&'static str],
}

#[rustfmt::skip]
const SHAPES: &[Shape] = &[
    Shape { verb: Verb::List, place: Place::AllNamespaces, method: "get", action: "list", id_verb: "list", query: LIST_QUERY, body: Payload::Nothing, response: Payload::List, consumes: JSON_TYPES },
    Shape { verb: Verb::List, place: Place::Collection, method: "get", action: "list", id_verb: "list", query: LIST_QUERY, body: Payload::Nothing, response: Payload::List, consumes: JSON_TYPES },
    Shape { verb: Verb::Create, place: Place::Collection, method: "post", action: "post", id_verb: "create", query: WRITE_QUERY, body: Payload::Kind, response: Payload::Kind, consumes: JSON_TYPES },
    Shape { verb: Verb::DeleteCollection, place: Place::Collection, method: "delete", action: "deletecollection", id_verb: "deletecollection", query: LIST_QUERY, body: Payload::DeleteOptions, response: Payload::Status, consumes: JSON_TYPES },
    Shape { verb: Verb::Get, place: Place::Item, method: "get", action: "get", id_verb: "read", query: READ_QUERY, body: Payload::Nothing, response: Payload::Kind, consumes: JSON_TYPES },
    Shape { verb: Verb::Update, place: Place::Item, method: "put", action: "put", id_verb: "replace", query: WRITE_QUERY, body: Payload::Kind, response: Payload::Kind, consumes: JSON_TYPES },
    Shape { verb: Verb::Patch, place: Place::Item, method: "patch", action: "patch", id_verb: "patch", query: PATCH_QUERY, body: Payload::Patch, response: Payload::Kind, consumes: PATCH_TYPES },
    Shape { verb: Verb::Delete, place: Place::Item, method: "delete", action: "delete", id_verb: "delete", query: DELETE_QUERY, body: Payload::DeleteOptions, response: Payload::Kind, consumes: JSON_TYPES },
];

/// The paths, definition names and operation-id parts of one resource.
struct Names {
    kind: &'static str,
    namespaced: bool,
    all_namespaces: String,
    collection: String,
    item: String,
    kind_definition: String,
    list_definition: String,
    /// `AggregationCoderComV1alpha1`.
    id_group: String,
}

impl Names {
    fn of(registry: &Registry, def: &ResourceDef) -> Self {
        let prefix = definition_prefix(registry);
        let all_namespaces = format!("/apis/{}/{}", registry.group_version(), def.plural);
        let collection = if def.namespaced {
            format!(
                "/apis/{}/namespaces/{{namespace}}/{}",
                registry.group_version(),
                def.plural
            )
        } else {
            all_namespaces.clone()
        };
        Self {
            kind: def.kind,
            namespaced: def.namespaced,
            item: format!("{collection}/{{name}}"),
            all_namespaces,
            collection,
            kind_definition: format!("{prefix}{}", def.kind),
            list_definition: format!("{prefix}{}", def.list_kind),
            id_group: operation_prefix(registry),
        }
    }

    fn path(&self, place: Place) -> String {
        match place {
            Place::AllNamespaces => self.all_namespaces.clone(),
            Place::Collection => self.collection.clone(),
            Place::Item => self.item.clone(),
        }
    }

    fn payload(&self, payload: Payload) -> Option<Value> {
        match payload {
            Payload::Nothing => None,
            Payload::Kind => Some(reference(&self.kind_definition)),
            Payload::List => Some(reference(&self.list_definition)),
            Payload::Patch => {
                Some(json!({"type": "object", "description": "The patch, in the format Content-Type names."}))
            }
            Payload::DeleteOptions => Some(reference(DELETE_OPTIONS)),
            Payload::Status => Some(reference(STATUS)),
        }
    }

    /// kube-apiserver's operation ids: `listAggregationCoderComV1alpha1NamespacedCoderWorkspace`,
    /// `...CoderWorkspaceForAllNamespaces`.
    fn operation_id(&self, id_verb: &str, place: Place, suffix: &str) -> String {
        let (scope, all) = match place {
            Place::AllNamespaces if self.namespaced => ("", "ForAllNamespaces"),
            _ if self.namespaced => ("Namespaced", ""),
            _ => ("", ""),
        };
        format!("{id_verb}{}{scope}{}{suffix}{all}", self.id_group, self.kind)
    }

    fn operation(&self, shape: &Shape) -> Operation {
        Operation {
            method: shape.method,
            action: shape.action,
            operation_id: self.operation_id(shape.id_verb, shape.place, ""),
            kind: self.kind.to_owned(),
            query: shape.query,
            body: self.payload(shape.body),
            response: self
                .payload(shape.response)
                .unwrap_or_else(|| json!({"type": "object"})),
            consumes: shape.consumes,
        }
    }
}

/// `<item>/<subresource>` operations for the verbs each subresource serves. Their bodies are opaque objects: the
/// registry knows a subresource's kind, not its schema.
fn subresource_operations(def: &ResourceDef, names: &Names, paths: &mut BTreeMap<String, Vec<Operation>>) {
    for sub in &def.subresources {
        let opaque = json!({"type": "object", "description": format!("{} of the {}.", sub.kind, def.kind)});
        let on_sub = paths.entry(format!("{}/{}", names.item, sub.name)).or_default();
        for &verb in sub.verbs {
            // A subresource's create is a POST to it (as `pods/eviction`), its other verbs act as on an item.
            let at_item = |s: &&Shape| s.verb == verb && (s.place == Place::Item || verb == Verb::Create);
            let Some(shape) = SHAPES.iter().find(at_item) else {
                continue;
            };
            let body = (shape.body != Payload::Nothing).then(|| match shape.body {
                Payload::Patch | Payload::DeleteOptions => names.payload(shape.body).unwrap_or_default(),
                _ => opaque.clone(),
            });
            on_sub.push(Operation {
                method: shape.method,
                action: shape.action,
                operation_id: names.operation_id(shape.id_verb, Place::Item, &capitalize(sub.name)),
                kind: sub.kind.to_owned(),
                query: READ_QUERY,
                body,
                response: opaque.clone(),
                consumes: shape.consumes,
            });
        }
    }
}

/// A query parameter's type, for both documents.
fn query_type(name: &str) -> (&'static str, &'static str) {
    match name {
        "limit" | "timeoutSeconds" | "gracePeriodSeconds" => ("integer", "int64"),
        "watch" | "allowWatchBookmarks" | "sendInitialEvents" | "force" => ("boolean", ""),
        _ => ("string", ""),
    }
}

fn path_parameter_names(path: &str) -> Vec<&'static str> {
    ["namespace", "name"]
        .into_iter()
        .filter(|p| path.contains(&format!("{{{p}}}")))
        .collect()
}

fn v2_paths(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (path, operations) in operations(registry) {
        let mut item = Map::new();
        let parameters: Vec<Value> = path_parameter_names(&path)
            .into_iter()
            .map(|name| json!({"name": name, "in": "path", "required": true, "type": "string", "uniqueItems": true}))
            .collect();
        item.insert("parameters".into(), parameters.into());
        for operation in operations {
            item.insert(operation.method.into(), v2_operation(registry, &operation));
        }
        paths.insert(path, item.into());
    }
    paths.into()
}

fn v2_operation(registry: &Registry, operation: &Operation) -> Value {
    let mut parameters: Vec<Value> = operation
        .query
        .iter()
        .map(|&name| {
            let (type_, format) = query_type(name);
            let mut parameter = json!({"name": name, "in": "query", "type": type_, "uniqueItems": true});
            if !format.is_empty() {
                parameter["format"] = format.into();
            }
            parameter
        })
        .collect();
    if let Some(body) = &operation.body {
        parameters.push(
            json!({"name": "body", "in": "body", "required": true, "schema": sanitize(body, Dialect::V2)}),
        );
    }
    json!({
        "operationId": operation.operation_id,
        "tags": [operation_prefix(registry)],
        "schemes": ["https"],
        "consumes": operation.consumes,
        "produces": ["application/json", "application/yaml"],
        "parameters": parameters,
        "responses": {
            "200": {"description": "OK", "schema": sanitize(&operation.response, Dialect::V2)},
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": operation.action,
        "x-kubernetes-group-version-kind": gvk(registry, &operation.kind)[0],
    })
}

fn v3_paths(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (path, operations) in operations(registry) {
        let mut item = Map::new();
        let parameters: Vec<Value> = path_parameter_names(&path)
            .into_iter()
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}}))
            .collect();
        item.insert("parameters".into(), parameters.into());
        for operation in operations {
            item.insert(operation.method.into(), v3_operation(registry, &operation));
        }
        paths.insert(path, item.into());
    }
    paths.into()
}

fn v3_operation(registry: &Registry, operation: &Operation) -> Value {
    let parameters: Vec<Value> = operation
        .query
        .iter()
        .map(|&name| {
            let (type_, format) = query_type(name);
            let mut schema = json!({"type": type_, "uniqueItems": true});
            if !format.is_empty() {
                schema["format"] = format.into();
            }
            json!({"name": name, "in": "query", "schema": schema})
        })
        .collect();
    let response = sanitize(&operation.response, Dialect::V3);
    let mut rendered = json!({
        "operationId": operation.operation_id,
        "tags": [operation_prefix(registry)],
        "parameters": parameters,
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": response.clone()}, "application/yaml": {"schema": response}}},
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": operation.action,
        "x-kubernetes-group-version-kind": gvk(registry, &operation.kind)[0],
    });
    if let Some(body) = &operation.body {
        let schema = sanitize(body, Dialect::V3);
        let content: Map<String, Value> = operation
            .consumes
            .iter()
            .map(|&media_type| (media_type.to_owned(), json!({"schema": schema})))
            .collect();
        rendered["requestBody"] = json!({"required": true, "content": content});
    }
    rendered
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generic::discovery::fixtures;
    use axum::http::StatusCode;

    const WIDGET: &str = "com.example.toys.v1alpha1.Widget";

    /// Every `$ref` in `value`.
    fn refs(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(object) => {
                for (key, child) in object {
                    match child {
                        Value::String(target) if key == "$ref" => found.push(target.clone()),
                        _ => refs(child, found),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| refs(item, found)),
            _ => {}
        }
    }

    /// Every key in `value` that `bad` refuses, with its path, and `type` arrays.
    fn offending_keys(value: &Value, bad: &[&str], at: &str, found: &mut Vec<String>) {
        match value {
            Value::Object(object) => {
                for (key, child) in object {
                    if bad.contains(&key.as_str()) || (key == "type" && child.is_array()) {
                        found.push(format!("{at}/{key}"));
                    }
                    offending_keys(child, bad, &format!("{at}/{key}"), found);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| offending_keys(item, bad, at, found)),
            _ => {}
        }
    }

    fn assert_refs_resolve(document: &Value, prefix: &str, definitions: &Value) {
        let mut found = Vec::new();
        refs(document, &mut found);
        assert!(found.len() > 10, "{found:?}");
        for target in found {
            let name = target
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("{target} is not under {prefix}"));
            assert!(definitions.get(name).is_some(), "{target} does not resolve");
        }
    }

    #[test]
    fn the_prefix_reverses_the_group() {
        let mut registry = fixtures::registry();
        registry.group = "aggregation.coder.com";
        assert_eq!(definition_prefix(&registry), "com.coder.aggregation.v1alpha1.");
        assert_eq!(operation_prefix(&registry), "AggregationCoderComV1alpha1");
    }

    #[test]
    fn v2_defines_each_kind_and_list_with_their_group_version_kind() {
        let document = v2_document(&fixtures::registry());
        assert_eq!(document["swagger"], "2.0");
        let definitions = &document["definitions"];
        let widget = &definitions[WIDGET];
        assert_eq!(
            widget["x-kubernetes-group-version-kind"],
            json!([{"group": "toys.example.com", "version": "v1alpha1", "kind": "Widget"}])
        );
        assert_eq!(widget["type"], "object");
        assert_eq!(
            widget["properties"]["metadata"]["$ref"],
            format!("#/definitions/{OBJECT_META}")
        );
        assert_eq!(widget["properties"]["kind"]["type"], "string");
        assert_eq!(
            widget["properties"]["spec"]["$ref"],
            "#/definitions/com.example.toys.v1alpha1.WidgetSpec"
        );
        let list = &definitions["com.example.toys.v1alpha1.WidgetList"];
        assert_eq!(list["x-kubernetes-group-version-kind"][0]["kind"], "WidgetList");
        assert_eq!(
            list["properties"]["items"]["items"]["$ref"],
            format!("#/definitions/{WIDGET}")
        );
        assert_eq!(
            list["properties"]["metadata"]["$ref"],
            format!("#/definitions/{LIST_META}")
        );
        let gadget = &definitions["com.example.toys.v1alpha1.Gadget"];
        assert_eq!(gadget["properties"]["spec"]["properties"]["n"]["type"], "integer");
    }

    #[test]
    fn v2_hoists_schemars_defs_and_every_reference_resolves() {
        let document = v2_document(&fixtures::registry());
        let definitions = &document["definitions"];
        let part = &definitions["com.example.toys.v1alpha1.Part"];
        assert_eq!(part["properties"]["name"]["type"], "string");
        let spec = &definitions["com.example.toys.v1alpha1.WidgetSpec"];
        assert_eq!(
            spec["properties"]["parts"]["items"]["$ref"],
            "#/definitions/com.example.toys.v1alpha1.Part"
        );
        assert_eq!(
            spec["properties"]["color"]["description"],
            "The colour of the widget."
        );
        for meta in [
            OBJECT_META,
            LIST_META,
            DELETE_OPTIONS,
            STATUS,
            "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
        ] {
            assert!(definitions.get(meta).is_some(), "{meta} is missing");
        }
        assert_refs_resolve(&document, "#/definitions/", definitions);
    }

    #[test]
    fn v2_is_strict_swagger_two() {
        let document = v2_document(&fixtures::registry());
        let mut found = Vec::new();
        let bad = [
            "anyOf",
            "oneOf",
            "not",
            "nullable",
            "$defs",
            "$schema",
            "const",
            "examples",
            "components",
        ];
        offending_keys(&document, &bad, "", &mut found);
        assert!(found.is_empty(), "{found:?}");
        // The optional size was `type: [integer, null]` in the JSON Schema.
        let size = &document["definitions"]["com.example.toys.v1alpha1.WidgetSpec"]["properties"]["size"];
        assert_eq!(size["type"], "integer", "{size}");
    }

    #[test]
    fn v2_paths_carry_kubernetes_actions() {
        let document = v2_document(&fixtures::registry());
        let paths = &document["paths"];
        let base = "/apis/toys.example.com/v1alpha1";
        let collection = &paths[format!("{base}/namespaces/{{namespace}}/widgets")];
        assert_eq!(collection["get"]["x-kubernetes-action"], "list");
        assert_eq!(
            collection["get"]["responses"]["200"]["schema"]["$ref"],
            "#/definitions/com.example.toys.v1alpha1.WidgetList"
        );
        assert_eq!(collection["post"]["x-kubernetes-action"], "post");
        assert!(
            collection.get("delete").is_none(),
            "widgets do not serve deletecollection"
        );
        let item = &paths[format!("{base}/namespaces/{{namespace}}/widgets/{{name}}")];
        let actions: Vec<&Value> = ["get", "put", "patch", "delete"]
            .iter()
            .map(|m| &item[*m]["x-kubernetes-action"])
            .collect();
        assert_eq!(
            actions,
            [&json!("get"), &json!("put"), &json!("patch"), &json!("delete")]
        );
        assert_eq!(item["patch"]["consumes"][1], "application/merge-patch+json");
        assert_eq!(item["parameters"][1]["name"], "name");
        let log = &paths[format!("{base}/namespaces/{{namespace}}/widgets/{{name}}/log")];
        assert_eq!(log["get"]["x-kubernetes-group-version-kind"]["kind"], "WidgetLog");
        assert_eq!(
            paths[format!("{base}/widgets")]["get"]["operationId"],
            "listToysExampleComV1alpha1WidgetForAllNamespaces"
        );
        let gadgets = &paths[format!("{base}/gadgets")];
        assert_eq!(gadgets["get"]["operationId"], "listToysExampleComV1alpha1Gadget");
        assert!(gadgets.get("post").is_none());
        assert!(paths[format!("{base}/gadgets/{{name}}")]["get"].is_object());
        for (path, item) in paths.as_object().unwrap() {
            for (method, operation) in item
                .as_object()
                .unwrap()
                .iter()
                .filter(|(m, _)| *m != "parameters")
            {
                assert!(operation["responses"]["200"].is_object(), "{method} {path}");
            }
        }
    }

    #[test]
    fn a_subresource_create_is_a_post_to_it() {
        let mut registry = fixtures::registry();
        let mut start = registry.resources[0].subresources[0].clone();
        (start.name, start.kind, start.verbs) = ("start", "WidgetStart", &[Verb::Create, Verb::Get]);
        registry.resources[0].subresources.push(start);
        let document = v2_document(&registry);
        let path = "/apis/toys.example.com/v1alpha1/namespaces/{namespace}/widgets/{name}/start";
        let post = &document["paths"][path]["post"];
        assert_eq!(post["x-kubernetes-action"], "post", "{}", document["paths"][path]);
        assert_eq!(
            post["operationId"],
            "createToysExampleComV1alpha1NamespacedWidgetStart"
        );
        assert_eq!(post["x-kubernetes-group-version-kind"]["kind"], "WidgetStart");
        assert_eq!(
            post["parameters"].as_array().unwrap().last().unwrap()["in"],
            "body"
        );
        assert_eq!(
            document["paths"][path]["get"]["operationId"],
            "readToysExampleComV1alpha1NamespacedWidgetStart"
        );
    }

    #[test]
    fn each_operation_id_is_unique() {
        let document = v2_document(&fixtures::registry());
        let mut ids = Vec::new();
        for item in document["paths"].as_object().unwrap().values() {
            for (method, operation) in item.as_object().unwrap() {
                if method != "parameters" {
                    ids.push(operation["operationId"].as_str().unwrap().to_owned());
                }
            }
        }
        let count = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), count, "{ids:?}");
        assert!(count >= 10, "{ids:?}");
    }

    #[test]
    fn v3_uses_components_and_nullable() {
        let document = v3_document(&fixtures::registry());
        assert_eq!(document["openapi"], "3.0.0");
        let schemas = &document["components"]["schemas"];
        assert_refs_resolve(&document, "#/components/schemas/", schemas);
        let widget = &schemas[WIDGET];
        assert_eq!(
            widget["properties"]["metadata"]["$ref"],
            format!("#/components/schemas/{OBJECT_META}")
        );
        let status = &widget["properties"]["status"];
        assert_eq!(status["nullable"], true, "{status}");
        assert_eq!(
            status["allOf"][0]["$ref"],
            "#/components/schemas/com.example.toys.v1alpha1.WidgetStatus"
        );
        let size = &schemas["com.example.toys.v1alpha1.WidgetSpec"]["properties"]["size"];
        assert_eq!(
            (&size["type"], &size["nullable"]),
            (&json!("integer"), &json!(true))
        );
        let mut found = Vec::new();
        offending_keys(
            &document,
            &["$defs", "$schema", "const", "definitions"],
            "",
            &mut found,
        );
        assert!(found.is_empty(), "{found:?}");
        let item =
            &document["paths"]["/apis/toys.example.com/v1alpha1/namespaces/{namespace}/widgets/{name}"];
        assert!(item["patch"]["requestBody"]["content"]["application/apply-patch+yaml"].is_object());
        // Not served (415), so not advertised: kubectl's client-side apply would send it.
        assert!(item["patch"]["requestBody"]["content"]["application/strategic-merge-patch+json"].is_null());
        assert_eq!(
            item["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            format!("#/components/schemas/{WIDGET}")
        );
    }

    #[test]
    fn sanitize_turns_json_schema_idioms_into_openapi() {
        let schema = json!({
            "$schema": "x", "title": "T", "type": ["string", "null"], "const": "a", "examples": ["a"],
            "exclusiveMinimum": 3, "x-kubernetes-preserve-unknown-fields": true, "unevaluatedProperties": false,
        });
        assert_eq!(
            sanitize(&schema, Dialect::V2),
            json!({"title": "T", "type": "string", "enum": ["a"], "example": "a", "minimum": 3, "exclusiveMinimum": true,
                   "x-kubernetes-preserve-unknown-fields": true})
        );
        let choice = json!({"oneOf": [{"type": "string"}, {"type": "integer"}], "description": "d"});
        assert_eq!(sanitize(&choice, Dialect::V2), json!({"description": "d"}));
        assert_eq!(sanitize(&choice, Dialect::V3), choice);
        let optional_ref = json!({"anyOf": [{"$ref": "#/definitions/A"}, {"type": "null"}]});
        assert_eq!(
            sanitize(&optional_ref, Dialect::V2),
            json!({"$ref": "#/definitions/A"})
        );
        assert_eq!(
            sanitize(&optional_ref, Dialect::V3),
            json!({"nullable": true, "allOf": [{"$ref": "#/components/schemas/A"}]})
        );
        assert_eq!(
            sanitize(&json!({"$ref": "#/definitions/A"}), Dialect::V3),
            json!({"$ref": "#/components/schemas/A"})
        );
        assert_eq!(
            sanitize(&json!({"type": "array", "items": false}), Dialect::V2),
            json!({"type": "array"})
        );
    }

    #[test]
    fn a_null_alternative_with_a_nullable_type_collapses_to_one_type() {
        let schema = json!({"anyOf": [{"type": ["string", "null"]}, {"type": "null"}]});
        assert_eq!(sanitize(&schema, Dialect::V2), json!({"type": "string"}));
        assert_eq!(
            sanitize(&schema, Dialect::V3),
            json!({"type": "string", "nullable": true})
        );
        assert_eq!(
            sanitize(&json!({"type": "null"}), Dialect::V3),
            json!({"nullable": true})
        );
    }

    #[test]
    fn recursive_and_k8s_references_are_mapped() {
        let mut registry = fixtures::registry();
        registry.resources[1].schema = json!({
            "type": "object",
            "properties": {
                "parent": {"$ref": "#"},
                "owner": {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"},
            },
            "$defs": {"io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference": {"type": "object"}},
        });
        let definitions = &v2_document(&registry)["definitions"];
        let gadget = &definitions["com.example.toys.v1alpha1.Gadget"];
        assert_eq!(
            gadget["properties"]["parent"]["$ref"],
            "#/definitions/com.example.toys.v1alpha1.Gadget"
        );
        assert_eq!(
            gadget["properties"]["owner"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"
        );
        assert!(
            definitions
                .get("com.example.toys.v1alpha1.io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference")
                .is_none()
        );
    }

    /// Schema-like JSON built from the keywords schemars and hand-written schemas use.
    fn schema_like() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(json!({"type": ["string", "null"]})),
            Just(json!({"type": "integer", "format": "int32", "minimum": 0})),
            Just(json!({"type": "null"})),
            Just(json!({"const": "a"})),
            Just(json!({"$ref": "#/definitions/A"})),
            Just(json!({"examples": [1], "exclusiveMaximum": 4})),
            Just(json!(true)),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            let keyword = prop_oneof![
                Just("anyOf"),
                Just("oneOf"),
                Just("allOf"),
                Just("not"),
                Just("items"),
                Just("properties"),
                Just("additionalProperties"),
                Just("$defs"),
                Just("nullable"),
                Just("prefixItems"),
            ];
            (keyword, proptest::collection::vec(inner, 1..3)).prop_map(|(keyword, children)| match keyword {
                "anyOf" | "oneOf" | "allOf" | "prefixItems" => json!({keyword: children}),
                "properties" | "$defs" => {
                    let named: Map<String, Value> = children
                        .into_iter()
                        .enumerate()
                        .map(|(i, c)| (format!("p{i}"), c))
                        .collect();
                    json!({"type": "object", keyword: named})
                }
                "nullable" => json!({"nullable": true, "description": "d"}),
                _ => json!({keyword: children[0]}),
            })
        })
    }

    proptest::proptest! {
        /// Whatever JSON Schema comes in, the v2 form has no keyword Swagger 2.0 lacks and no type array, and
        /// the v3 form no type array and no `#/definitions/` reference.
        #[test]
        fn sanitized_schemas_fit_their_dialect(schema in schema_like()) {
            let v2 = sanitize(&schema, Dialect::V2);
            let mut found = Vec::new();
            offending_keys(&v2, &["anyOf", "oneOf", "not", "nullable", "$defs", "const", "examples", "prefixItems"], "", &mut found);
            proptest::prop_assert!(found.is_empty(), "{found:?} in {v2}");
            proptest::prop_assert!(!v2.to_string().contains(r#""type":"null""#), "{v2}");
            let v3 = sanitize(&schema, Dialect::V3);
            let mut found = Vec::new();
            offending_keys(&v3, &["$defs", "const", "examples", "prefixItems"], "", &mut found);
            proptest::prop_assert!(found.is_empty(), "{found:?} in {v3}");
            proptest::prop_assert!(!v3.to_string().contains("#/definitions/"), "{v3}");
        }
    }

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        headers
    }

    async fn get(path: &str, accept_value: &str) -> (StatusCode, HeaderMap, Value) {
        let response = answer(&fixtures::registry(), path, &accept(accept_value)).expect("an OpenAPI path");
        let (status, headers) = (response.status(), response.headers().clone());
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            headers,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    #[tokio::test]
    async fn the_v3_index_points_at_the_current_document() {
        let (status, _, index) = get("/openapi/v3", "application/json").await;
        assert_eq!(status, 200);
        let url = index["paths"]["apis/toys.example.com/v1alpha1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .to_owned();
        let hash = document_hash(&v3_document(&fixtures::registry()));
        assert_eq!(
            url,
            format!("/openapi/v3/apis/toys.example.com/v1alpha1?hash={hash}")
        );
        let (status, headers, document) = get(&url, "application/json").await;
        assert_eq!(status, 200);
        assert_eq!(document["openapi"], "3.0.0");
        assert_eq!(
            headers[header::CACHE_CONTROL],
            "public, immutable, max-age=31536000"
        );
        let (_, headers, _) = get(
            "/openapi/v3/apis/toys.example.com/v1alpha1?hash=old",
            "application/json",
        )
        .await;
        assert!(headers.get(header::CACHE_CONTROL).is_none());
    }

    #[tokio::test]
    async fn json_is_served_to_the_aggregator_and_protobuf_alone_is_refused() {
        let (status, headers, document) = get("/openapi/v2", "application/json").await;
        assert_eq!((status, &document["swagger"]), (StatusCode::OK, &json!("2.0")));
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        assert!(headers.get(header::ETAG).is_some());
        let protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        let (status, _, error) = get("/openapi/v2", protobuf).await;
        assert_eq!(
            (status, &error["reason"]),
            (StatusCode::NOT_ACCEPTABLE, &json!("NotAcceptable"))
        );
        let (status, _, _) = get("/openapi/v2", &format!("{protobuf}, application/json")).await;
        assert_eq!(status, StatusCode::OK);
        let v3_protobuf = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf";
        let (status, _, _) = get("/openapi/v3/apis/toys.example.com/v1alpha1", v3_protobuf).await;
        assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    }

    #[test]
    fn other_paths_are_not_openapi() {
        let registry = fixtures::registry();
        for path in [
            "/openapi",
            "/openapi/v3/apis/other.example.com/v1",
            "/openapi/v4",
            "/apis",
        ] {
            assert!(answer(&registry, path, &HeaderMap::new()).is_none(), "{path}");
        }
    }
}
