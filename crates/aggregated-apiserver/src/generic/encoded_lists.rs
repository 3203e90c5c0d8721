//! Lists kept encoded while a storage keeps the objects they were encoded from.
//!
//! A storage that answers an unchanged list with the very objects of its last answer (see
//! [`Storage::list_shared`](super::Storage::list_shared)) would still have every list encoded again: for a Table,
//! each row's cells and object, for JSON every object. Here the encoded rows and items are kept beside a weak
//! reference to those objects, so the next list of the same objects only joins bytes. A Table row is kept in two
//! pieces around its Age cell, which depends on the clock and is written afresh for every answer.
//!
//! The bytes are the same as those of a fresh encoding (a unit test compares them for every representation).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use serde::Serialize;
use serde_json::Value;

use super::negotiate::IncludeObject;
use super::registry::ResourceDef;
use super::table;

/// How many encoded lists are kept at most, over all resources and namespaces; the oldest goes first.
const MAX_ENTRIES: usize = 64;

/// The representations kept encoded (YAML is not: nothing asks for it often).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Representation {
    /// A `<Kind>List` as JSON.
    Json,
    /// A `meta.k8s.io/v1` Table with rows carrying what `includeObject` asks for.
    Table(IncludeObject),
    /// A `meta.k8s.io/v1` PartialObjectMetadataList.
    PartialObjectMetadataList,
}

/// The encoded parts of one list that do not depend on its metadata or the clock.
enum Parts {
    /// The objects, each encoded, joined by commas.
    Json(String),
    /// The PartialObjectMetadata of each object, encoded, joined by commas.
    PartialObjectMetadataList(String),
    /// The Table's column definitions and its rows.
    Table { columns: String, rows: Vec<Row> },
}

/// One Table row as `{"cells":[<cells before Age>` + the Age cell + `<the rest>`.
struct Row {
    before_age: String,
    created: Option<i64>,
    after_age: String,
}

struct Entry {
    plural: &'static str,
    representation: Representation,
    items: Weak<Vec<Value>>,
    parts: Arc<Parts>,
}

/// The encoded lists of one server (see the module documentation).
#[derive(Default)]
pub struct EncodedLists {
    entries: Mutex<Vec<Entry>>,
}

impl EncodedLists {
    /// The list of `items` of `def` as `representation`, with `list_metadata`, its Age cells at `now_unix_seconds`:
    /// joined from the kept parts when these very items were encoded before, otherwise encoded and kept.
    pub fn encode(
        &self,
        def: &ResourceDef,
        group_version: &str,
        representation: Representation,
        items: &Arc<Vec<Value>>,
        list_metadata: &Value,
        now_unix_seconds: i64,
    ) -> String {
        let parts = self.parts(def, representation, items);
        join(def, group_version, &parts, list_metadata, now_unix_seconds)
    }

    /// How many encoded lists are kept (entries whose objects are gone included until the next insert).
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn parts(
        &self,
        def: &ResourceDef,
        representation: Representation,
        items: &Arc<Vec<Value>>,
    ) -> Arc<Parts> {
        let found = self.entries().iter().find_map(|entry| {
            (entry.plural == def.plural
                && entry.representation == representation
                && std::ptr::eq(entry.items.as_ptr(), Arc::as_ptr(items)))
            .then(|| entry.parts.clone())
        });
        if let Some(parts) = found {
            return parts;
        }
        // Encoded outside the lock: lists of other resources do not wait for this one.
        let parts = Arc::new(encode_parts(def, representation, items));
        let mut entries = self.entries();
        // A weak reference that no longer upgrades belongs to objects the storage has let go of.
        entries.retain(|entry| entry.items.strong_count() > 0);
        if entries.len() >= MAX_ENTRIES {
            entries.remove(0);
        }
        entries.push(Entry {
            plural: def.plural,
            representation,
            items: Arc::downgrade(items),
            parts: parts.clone(),
        });
        parts
    }

    fn entries(&self) -> MutexGuard<'_, Vec<Entry>> {
        // Each change is one push, retain or remove, so the list is whole after a panic elsewhere.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// JSON of a value made of JSON values and static strings: it cannot fail (every map key is a string).
fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn encode_parts(def: &ResourceDef, representation: Representation, items: &[Value]) -> Parts {
    match representation {
        Representation::Json => Parts::Json(joined(items.iter().map(json))),
        Representation::PartialObjectMetadataList => Parts::PartialObjectMetadataList(joined(
            items.iter().map(|o| json(&table::partial_object_metadata(o))),
        )),
        Representation::Table(include) => Parts::Table {
            columns: json(&table::column_definitions(&def.columns)),
            rows: items.iter().map(|object| row(def, object, include)).collect(),
        },
    }
}

fn joined(encoded: impl Iterator<Item = String>) -> String {
    let mut out = String::new();
    for (n, item) in encoded.enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(&item);
    }
    out
}

/// A row of [`table::table`] in its two pieces around the Age cell.
fn row(def: &ResourceDef, object: &Value, include: IncludeObject) -> Row {
    let mut before_age = String::from("{\"cells\":[");
    before_age.push_str(&json(object.pointer("/metadata/name").unwrap_or(&Value::Null)));
    for column in &def.columns {
        before_age.push(',');
        before_age.push_str(&json(&(column.cell)(object)));
    }
    before_age.push(',');
    let mut after_age = String::from("]");
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            after_age.push_str(",\"object\":");
            after_age.push_str(&json(&table::partial_object_metadata(object)));
        }
        IncludeObject::Object => {
            after_age.push_str(",\"object\":");
            after_age.push_str(&json(object));
        }
    }
    after_age.push('}');
    Row {
        before_age,
        created: table::creation_seconds(object),
        after_age,
    }
}

/// The whole answer: the same bytes as encoding the list's representation with serde (fields in the order of the
/// structs of `respond` and `table`).
fn join(
    def: &ResourceDef,
    group_version: &str,
    parts: &Parts,
    list_metadata: &Value,
    now_unix_seconds: i64,
) -> String {
    let metadata = json(list_metadata);
    match parts {
        Parts::Json(items) => [
            "{\"apiVersion\":",
            &json(&group_version),
            ",\"kind\":",
            &json(&def.list_kind),
            ",\"metadata\":",
            &metadata,
            ",\"items\":[",
            items,
            "]}",
        ]
        .concat(),
        Parts::PartialObjectMetadataList(items) => [
            "{\"apiVersion\":\"meta.k8s.io/v1\",\"items\":[",
            items,
            "],\"kind\":\"PartialObjectMetadataList\",\"metadata\":",
            &metadata,
            "}",
        ]
        .concat(),
        Parts::Table { columns, rows } => {
            let size = rows
                .iter()
                .map(|r| r.before_age.len() + r.after_age.len() + 12)
                .sum::<usize>();
            let mut out = String::with_capacity(size + columns.len() + metadata.len() + 96);
            out.push_str("{\"apiVersion\":\"meta.k8s.io/v1\",\"columnDefinitions\":");
            out.push_str(columns);
            out.push_str(",\"kind\":\"Table\",\"metadata\":");
            out.push_str(&metadata);
            out.push_str(",\"rows\":[");
            for (n, row) in rows.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(&row.before_age);
                out.push('"');
                out.push_str(&table::age_since(row.created, now_unix_seconds));
                out.push('"');
                out.push_str(&row.after_age);
            }
            out.push_str("]}");
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::generic::discovery::fixtures;
    use crate::generic::handlers::respond;
    use crate::generic::negotiate::ResponseFormat;

    const NOW: i64 = 1_700_000_000;

    fn objects() -> Arc<Vec<Value>> {
        Arc::new(vec![
            json!({
                "apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "a", "namespace": "ns", "creationTimestamp": "2023-11-14T22:13:15Z", "uid": "u-a"},
                "spec": {"color": "blue \"quoted\" <b>"},
            }),
            json!({"metadata": {"name": "b", "creationTimestamp": "not a time"}, "spec": {"color": "red"}}),
            json!({"metadata": {"name": "c"}}),
        ])
    }

    const FORMATS: [(Representation, ResponseFormat); 5] = [
        (Representation::Json, ResponseFormat::Json),
        (
            Representation::Table(IncludeObject::None),
            ResponseFormat::Table {
                include_object: IncludeObject::None,
            },
        ),
        (
            Representation::Table(IncludeObject::Metadata),
            ResponseFormat::Table {
                include_object: IncludeObject::Metadata,
            },
        ),
        (
            Representation::Table(IncludeObject::Object),
            ResponseFormat::Table {
                include_object: IncludeObject::Object,
            },
        ),
        (
            Representation::PartialObjectMetadataList,
            ResponseFormat::PartialObjectMetadataList,
        ),
    ];

    #[test]
    fn kept_lists_have_the_bytes_of_a_fresh_encoding_in_every_representation() {
        let def = fixtures::widgets();
        let items = objects();
        let lists = EncodedLists::default();
        let metadata = json!({"resourceVersion": "12"});
        for empty in [false, true] {
            let items = if empty {
                Arc::new(Vec::new())
            } else {
                items.clone()
            };
            for (representation, format) in &FORMATS {
                let fresh = respond::list_json(&def, "example.com/v1", format, &items, metadata.clone(), NOW)
                    .unwrap();
                for round in ["first (encoded)", "second (joined from the kept parts)"] {
                    let kept = lists.encode(&def, "example.com/v1", *representation, &items, &metadata, NOW);
                    assert_eq!(kept, fresh, "{representation:?}, {round}, empty: {empty}");
                }
            }
        }
    }

    #[test]
    fn the_age_cells_follow_the_clock_while_the_rest_is_kept() {
        let def = fixtures::widgets();
        let items = objects();
        let lists = EncodedLists::default();
        let table = Representation::Table(IncludeObject::None);
        let at = |now| lists.encode(&def, "v1", table, &items, &json!({}), now);
        let first: Value = serde_json::from_str(&at(NOW)).unwrap();
        let later: Value = serde_json::from_str(&at(NOW + 3600)).unwrap();
        assert_eq!(first["rows"][0]["cells"][3], "5s");
        assert_eq!(later["rows"][0]["cells"][3], "60m");
        assert_eq!(later["rows"][1]["cells"][3], "<unknown>");
        assert_eq!(lists.len(), 1, "one kept list served both");
    }

    #[test]
    fn other_objects_are_encoded_afresh_and_gone_ones_are_dropped() {
        let def = fixtures::widgets();
        let lists = EncodedLists::default();
        let first = objects();
        let json_list =
            |items: &Arc<Vec<Value>>| lists.encode(&def, "v1", Representation::Json, items, &json!({}), NOW);
        json_list(&first);
        // Equal objects in another allocation are another list: only the same shared objects are a hit.
        let mut changed = (*first).clone();
        changed[2] = json!({"metadata": {"name": "c2"}});
        let second = Arc::new(changed);
        assert!(json_list(&second).contains("\"c2\""));
        assert_eq!(lists.len(), 2);
        drop(first);
        let third = objects();
        json_list(&third);
        assert_eq!(
            lists.len(),
            2,
            "the entry of the dropped objects went when the third was kept"
        );
        assert!(!json_list(&third).contains("\"c2\""));
    }

    #[test]
    fn at_most_the_bound_is_kept() {
        let def = fixtures::widgets();
        let lists = EncodedLists::default();
        let alive: Vec<_> = (0..MAX_ENTRIES + 5).map(|_| objects()).collect();
        for items in &alive {
            lists.encode(&def, "v1", Representation::Json, items, &json!({}), NOW);
        }
        assert_eq!(lists.len(), MAX_ENTRIES);
    }
}
