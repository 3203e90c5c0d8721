//! Table and PartialObjectMetadata representations of objects and lists.
//!
//! Shapes follow kube-apiserver: a `meta.k8s.io/v1` Table has `columnDefinitions` (`Name`, the resource's columns,
//! `Age`) and `rows` of `{cells, object}`, where `object` is a PartialObjectMetadata, the full object or absent as
//! `includeObject` asks. PartialObjectMetadata carries `apiVersion: meta.k8s.io/v1` and the object's metadata only.

use std::sync::LazyLock;
use std::time::{SystemTime, UNIX_EPOCH};

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::negotiate::IncludeObject;
use super::registry::{Column, ResourceDef};

const META_V1: &str = "meta.k8s.io/v1";

/// A `meta.k8s.io/v1` Table of borrowed objects, encoded as it is serialized: the rows borrow each object (or its
/// metadata) instead of copying it into a JSON tree per row. Fields are in the order a JSON map of the same Table
/// would list them, so either encoding gives the same bytes.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Table<'a> {
    api_version: &'static str,
    column_definitions: Vec<Value>,
    kind: &'static str,
    metadata: Value,
    rows: Vec<Row<'a>>,
}

impl Table<'_> {
    /// The Table as a JSON value (the object of a watch event, and tests).
    pub fn to_value(&self) -> Value {
        to_value(self)
    }
}

#[derive(Debug, Serialize)]
struct Row<'a> {
    cells: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<RowObject<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum RowObject<'a> {
    Metadata(PartialObjectMetadata<'a>),
    Object(&'a Value),
}

/// A `meta.k8s.io/v1` Table of `objects`: `Name`, the resource's columns, `Age`; each row's `object` per
/// `include`. `list_metadata` is the list's `metadata` (resourceVersion, continue).
pub fn table<'a>(
    def: &ResourceDef,
    objects: &'a [Value],
    list_metadata: Value,
    include: IncludeObject,
) -> Table<'a> {
    table_at(def, objects, list_metadata, include, unix_now())
}

/// [`table`] with the current time given, so ages are testable.
pub fn table_at<'a>(
    def: &ResourceDef,
    objects: &'a [Value],
    list_metadata: Value,
    include: IncludeObject,
    now_unix_seconds: i64,
) -> Table<'a> {
    Table {
        api_version: META_V1,
        column_definitions: column_definitions(&def.columns),
        kind: "Table",
        metadata: list_metadata,
        rows: objects
            .iter()
            .map(|object| row(&def.columns, object, include, now_unix_seconds))
            .collect(),
    }
}

/// `Name`, the resource's columns in order, then `Age`.
pub fn column_definitions(columns: &[Column]) -> Vec<Value> {
    let name = definition("Name", "string", "name", &OBJECT_META_DOCS.name, 0);
    let age = definition("Age", "string", "", &OBJECT_META_DOCS.creation_timestamp, 0);
    let own = columns
        .iter()
        .map(|c| definition(c.name, c.type_, c.format, c.description, c.priority));
    std::iter::once(name)
        .chain(own)
        .chain(std::iter::once(age))
        .collect()
}

fn definition(name: &str, type_: &str, format: &str, description: &str, priority: i32) -> Value {
    json!({
        "name": name,
        "type": type_,
        "format": format,
        "description": description,
        "priority": priority,
    })
}

fn row<'a>(columns: &[Column], object: &'a Value, include: IncludeObject, now_unix_seconds: i64) -> Row<'a> {
    let name = object.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
    let own = columns.iter().map(|c| (c.cell)(object));
    let age = Value::String(age_cell(object, now_unix_seconds));
    let cells: Vec<Value> = std::iter::once(name)
        .chain(own)
        .chain(std::iter::once(age))
        .collect();
    let object = match include {
        IncludeObject::None => None,
        IncludeObject::Metadata => Some(RowObject::Metadata(partial_object_metadata(object))),
        IncludeObject::Object => Some(RowObject::Object(object)),
    };
    Row { cells, object }
}

/// The `Age` cell: kubectl's short duration since `metadata.creationTimestamp`, `<unknown>` without one.
pub fn age_cell(object: &Value, now_unix_seconds: i64) -> String {
    age_since(creation_seconds(object), now_unix_seconds)
}

/// `metadata.creationTimestamp` in Unix seconds, when the object has a valid one.
pub fn creation_seconds(object: &Value) -> Option<i64> {
    object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<Timestamp>().ok())
        .map(|timestamp| timestamp.as_second())
}

/// The `Age` cell of an object created at `created` (Unix seconds; `None`: `<unknown>`).
pub fn age_since(created: Option<i64>, now_unix_seconds: i64) -> String {
    match created {
        Some(created) => human_duration(now_unix_seconds - created),
        None => "<unknown>".to_owned(),
    }
}

/// A duration as kubectl prints ages: `45s`, `3m12s`, `25m`, `5h3m`, `2d4h`, `3y12d`. Precision drops as the
/// duration grows. Up to one second in the future counts as `0s` (clock skew); further is `<invalid>`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    let seconds = seconds.max(0);
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_remainder(minutes, "m", seconds % 60, "s");
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return with_remainder(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return with_remainder(days, "d", hours % 24, "h");
    }
    if days < 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if years < 8 {
        return with_remainder(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

/// `3m` or `3m12s`: the smaller unit only when it is not zero.
fn with_remainder(big: i64, big_unit: &str, small: i64, small_unit: &str) -> String {
    if small == 0 {
        format!("{big}{big_unit}")
    } else {
        format!("{big}{big_unit}{small}{small_unit}")
    }
}

/// `meta.k8s.io/v1` PartialObjectMetadata of one object, borrowing its metadata.
///
/// kube-apiserver answers the conversion's own type, `meta.k8s.io/v1` `PartialObjectMetadata`, with the object's
/// metadata; the object's apiVersion and kind are not kept.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartialObjectMetadata<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Cow<'a, Value>,
}

impl PartialObjectMetadata<'_> {
    /// As a JSON value (the object of a watch event, and tests).
    pub fn to_value(&self) -> Value {
        to_value(self)
    }
}

/// The PartialObjectMetadata of `object`; `{}` as its metadata when it has none.
pub fn partial_object_metadata(object: &Value) -> PartialObjectMetadata<'_> {
    PartialObjectMetadata {
        api_version: META_V1,
        kind: "PartialObjectMetadata",
        metadata: object
            .get("metadata")
            .map_or_else(|| Cow::Owned(Value::Object(Map::new())), Cow::Borrowed),
    }
}

/// `meta.k8s.io/v1` PartialObjectMetadataList of borrowed objects.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartialObjectMetadataList<'a> {
    api_version: &'static str,
    items: Vec<PartialObjectMetadata<'a>>,
    kind: &'static str,
    metadata: Value,
}

impl PartialObjectMetadataList<'_> {
    /// As a JSON value (tests).
    pub fn to_value(&self) -> Value {
        to_value(self)
    }
}

/// `meta.k8s.io/v1` PartialObjectMetadataList of `objects`.
pub fn partial_object_metadata_list(
    objects: &[Value],
    list_metadata: Value,
) -> PartialObjectMetadataList<'_> {
    PartialObjectMetadataList {
        api_version: META_V1,
        items: objects.iter().map(partial_object_metadata).collect(),
        kind: "PartialObjectMetadataList",
        metadata: list_metadata,
    }
}

/// A representation of JSON values and static strings as a JSON value: it cannot fail (every map key is a string).
fn to_value(representation: &impl Serialize) -> Value {
    serde_json::to_value(representation).unwrap_or(Value::Null)
}

/// The clock the Age cells are written at, in Unix seconds.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The descriptions of ObjectMeta's `name` and `creationTimestamp`, read from k8s-openapi's schema so the Name and
/// Age columns say what kube-apiserver's say.
struct ObjectMetaDocs {
    name: String,
    creation_timestamp: String,
}

static OBJECT_META_DOCS: LazyLock<ObjectMetaDocs> = LazyLock::new(|| {
    let schema = schemars::SchemaGenerator::default().into_root_schema_for::<ObjectMeta>();
    let describe = |field: &str| {
        schema
            .as_value()
            .pointer(&format!("/properties/{field}/description"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    ObjectMetaDocs {
        name: describe("name"),
        creation_timestamp: describe("creationTimestamp"),
    }
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generic::discovery::fixtures;

    const NOW: i64 = 1_700_000_000; // 2023-11-14T22:13:20Z

    fn workspace(name: &str, created: &str) -> Value {
        json!({
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created, "uid": "u-1"},
            "spec": {"color": "blue"},
        })
    }

    #[test]
    fn human_duration_matches_kubectl_at_each_boundary() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (192, "3m12s"),
            (599, "9m59s"),
            (600, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 3 * 60, "5h3m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (2 * 86400 + 4 * 3600, "2d4h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (3 * 365 * 86400 + 12 * 86400, "3y12d"),
            (8 * 365 * 86400, "8y"),
            (20 * 365 * 86400 + 5 * 86400, "20y"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(human_duration(seconds), expected, "{seconds} s");
        }
    }

    /// Seconds of a `human_duration` string, and its smallest unit.
    fn parse_duration(text: &str) -> (i64, i64) {
        let (mut total, mut number, mut smallest) = (0, 0, 0);
        for c in text.chars() {
            if let Some(digit) = c.to_digit(10) {
                number = number * 10 + i64::from(digit);
                continue;
            }
            smallest = match c {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                'd' => 86400,
                'y' => 365 * 86400,
                other => panic!("unexpected {other} in {text}"),
            };
            total += number * smallest;
            number = 0;
        }
        (total, smallest)
    }

    proptest::proptest! {
        /// An age never overstates and loses less than the smallest unit it shows.
        #[test]
        fn human_duration_truncates_to_its_last_unit(seconds in 0i64..20 * 365 * 86400) {
            let text = human_duration(seconds);
            let (shown, unit) = parse_duration(&text);
            proptest::prop_assert!(shown <= seconds && seconds - shown < unit, "{seconds} s shown as {text}");
            proptest::prop_assert!(text.len() <= 7, "{text}");
        }
    }

    #[test]
    fn age_counts_from_the_creation_timestamp() {
        assert_eq!(age_cell(&workspace("a", "2023-11-14T22:10:08Z"), NOW), "3m12s");
        assert_eq!(age_cell(&json!({"metadata": {}}), NOW), "<unknown>");
        assert_eq!(age_cell(&workspace("a", "yesterday"), NOW), "<unknown>");
    }

    #[test]
    fn columns_are_name_then_the_resources_then_age() {
        let def = fixtures::widgets();
        let got = table_at(
            &def,
            &[],
            json!({"resourceVersion": "7"}),
            IncludeObject::None,
            NOW,
        )
        .to_value();
        let names: Vec<&str> = got["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Color", "Size", "Age"]);
        assert_eq!(got["columnDefinitions"][0]["format"], "name");
        assert!(
            got["columnDefinitions"][0]["description"]
                .as_str()
                .unwrap()
                .starts_with("Name must be unique within a namespace"),
            "{}",
            got["columnDefinitions"][0]
        );
        assert!(
            !got["columnDefinitions"][3]["description"]
                .as_str()
                .unwrap()
                .is_empty()
        );
        assert_eq!(got["columnDefinitions"][2]["priority"], 1);
        assert_eq!(
            (&got["kind"], &got["apiVersion"]),
            (&json!("Table"), &json!("meta.k8s.io/v1"))
        );
        assert_eq!(got["metadata"], json!({"resourceVersion": "7"}));
        assert_eq!(got["rows"], json!([]));
    }

    #[test]
    fn rows_carry_cells_and_partial_metadata_by_default() {
        let def = fixtures::widgets();
        let object = workspace("w1", "2023-11-14T22:13:15Z");
        let got = table_at(&def, &[object], json!({}), IncludeObject::Metadata, NOW).to_value();
        let row = &got["rows"][0];
        assert_eq!(row["cells"], json!(["w1", "blue", null, "5s"]));
        assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(row["object"]["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(row["object"]["metadata"]["uid"], "u-1");
        assert!(row["object"].get("spec").is_none());
    }

    #[test]
    fn include_object_decides_what_a_row_carries() {
        let def = fixtures::widgets();
        let object = workspace("w1", "2023-11-14T22:13:15Z");
        let full = table_at(
            &def,
            std::slice::from_ref(&object),
            json!({}),
            IncludeObject::Object,
            NOW,
        )
        .to_value();
        assert_eq!(full["rows"][0]["object"], object);
        let none = table_at(&def, &[object], json!({}), IncludeObject::None, NOW).to_value();
        assert!(none["rows"][0].get("object").is_none(), "{}", none["rows"][0]);
    }

    #[test]
    fn a_table_encodes_to_the_bytes_of_its_json_value() {
        let def = fixtures::widgets();
        let objects = [
            workspace("a", "2023-11-14T22:13:15Z"),
            json!({"metadata": {"name": "b"}, "spec": {"color": "red"}}),
        ];
        for include in [
            IncludeObject::None,
            IncludeObject::Metadata,
            IncludeObject::Object,
        ] {
            let table = table_at(&def, &objects, json!({"resourceVersion": "3"}), include, NOW);
            let direct = serde_json::to_string(&table).unwrap();
            assert_eq!(direct, table.to_value().to_string(), "{include:?}");
            assert!(direct.contains(r#""cells":["a","#), "{direct}");
        }
        let list = partial_object_metadata_list(&objects, json!({"resourceVersion": "3"}));
        assert_eq!(serde_json::to_string(&list).unwrap(), list.to_value().to_string());
        assert_eq!(list.to_value()["items"][1]["metadata"], json!({"name": "b"}));
        assert_eq!(
            partial_object_metadata(&json!({"kind": "X"})).to_value()["metadata"],
            json!({})
        );
    }

    #[test]
    fn partial_object_metadata_keeps_only_metadata() {
        let object = workspace("w1", "2023-11-14T22:13:15Z");
        assert_eq!(
            partial_object_metadata(&object).to_value(),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]})
        );
    }

    #[test]
    fn partial_object_metadata_list_wraps_each_item() {
        let objects = [
            workspace("a", "2023-11-14T22:13:15Z"),
            workspace("b", "2023-11-14T22:13:15Z"),
        ];
        let list = partial_object_metadata_list(&objects, json!({"resourceVersion": "9"})).to_value();
        assert_eq!(list["kind"], "PartialObjectMetadataList");
        assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(list["metadata"]["resourceVersion"], "9");
        let names: Vec<&Value> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| &i["metadata"]["name"])
            .collect();
        assert_eq!(names, [&json!("a"), &json!("b")]);
        assert_eq!(list["items"][1]["kind"], "PartialObjectMetadata");
    }
}
