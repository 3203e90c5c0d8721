//! Content negotiation: which representation a client accepts (JSON, YAML, Table, PartialObjectMetadata) and
//! which request body types are understood.
//!
//! The rules follow kube-apiserver: `Accept` is a list of media ranges, tried by descending q-value and then by
//! specificity (`application/json` before `application/*` before `*/*`), header order breaking ties. A range may ask
//! for a conversion with `as`, `g` and `v` (`as=Table;g=meta.k8s.io;v=v1`). Protobuf is not served: a client that
//! lists a JSON fallback gets JSON, one that accepts only protobuf gets 406 at once.

use axum::http::{HeaderMap, header};

use super::status::ApiError;

/// What a response should be encoded as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseFormat {
    Json,
    Yaml,
    /// `application/json;as=Table;v=v1;g=meta.k8s.io` (v1beta1 too); `include_object` from `?includeObject=`.
    Table {
        include_object: IncludeObject,
    },
    /// `as=PartialObjectMetadata` for a single object.
    PartialObjectMetadata,
    /// `as=PartialObjectMetadataList` for a list.
    PartialObjectMetadataList,
}

/// `?includeObject=None|Metadata|Object` of a Table request (default `Metadata`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

/// What is being answered: decides which `as=` forms are acceptable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answering {
    /// One object of a served resource (get, create, update, patch, delete).
    Object,
    /// A list of a served resource.
    List,
    /// A watch stream.
    Watch,
    /// Discovery, OpenAPI, Status: JSON only.
    Document,
}

/// One media range of an `Accept` header, lower-cased where HTTP says case does not matter.
#[derive(Clone, Debug, PartialEq)]
pub struct MediaRange {
    pub type_: String,
    pub subtype: String,
    /// The q-value, clamped to 0..=1; 1 when absent, 0 when unparsable (as Go's goautoneg does).
    pub q: f32,
    /// The `as`, `g` and `v` parameters (case kept: kinds are case-sensitive).
    pub as_: Option<String>,
    pub g: Option<String>,
    pub v: Option<String>,
}

impl MediaRange {
    /// Whether this range covers `type_/subtype` (wildcards included).
    pub fn matches(&self, type_: &str, subtype: &str) -> bool {
        (self.type_ == "*" || self.type_ == type_) && (self.subtype == "*" || self.subtype == subtype)
    }

    /// Whether the range asks for the conversion `as` of the API group `g` at one of `versions`.
    pub fn asks_for(&self, as_: &str, g: &str, versions: &[&str]) -> bool {
        self.as_.as_deref() == Some(as_)
            && self.g.as_deref() == Some(g)
            && self.v.as_deref().is_some_and(|v| versions.contains(&v))
    }

    /// 2 for `type/subtype`, 1 for `type/*`, 0 for `*/*`: the tie-breaker after the q-value.
    fn specificity(&self) -> u8 {
        u8::from(self.type_ != "*") + u8::from(self.subtype != "*")
    }
}

/// The media ranges of `Accept`, best first: q-value, then specificity, then header order. Ranges with q=0 and
/// malformed ranges are left out; a missing or empty header means `*/*`.
pub fn accepted_ranges(headers: &HeaderMap) -> Result<Vec<MediaRange>, ApiError> {
    let mut text = String::new();
    for value in headers.get_all(header::ACCEPT) {
        let value = value
            .to_str()
            .map_err(|_| ApiError::not_acceptable("the Accept header is not valid text"))?;
        if !text.is_empty() {
            text.push(',');
        }
        text.push_str(value);
    }
    if text.trim().is_empty() {
        text = "*/*".to_owned();
    }
    let mut ranges: Vec<MediaRange> = text.split(',').filter_map(parse_media_range).collect();
    ranges.retain(|r| r.q > 0.0);
    ranges.sort_by(|a, b| {
        b.q.total_cmp(&a.q)
            .then_with(|| b.specificity().cmp(&a.specificity()))
    });
    Ok(ranges)
}

/// One `type/subtype;param=value...` range, or `None` when it has no `/`.
fn parse_media_range(text: &str) -> Option<MediaRange> {
    let mut parts = text.split(';');
    let (type_, subtype) = parts.next()?.trim().split_once('/')?;
    let (type_, subtype) = (
        type_.trim().to_ascii_lowercase(),
        subtype.trim().to_ascii_lowercase(),
    );
    if type_.is_empty() || subtype.is_empty() {
        return None;
    }
    let mut range = MediaRange {
        type_,
        subtype,
        q: 1.0,
        as_: None,
        g: None,
        v: None,
    };
    for param in parts {
        let Some((key, value)) = param.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"').to_owned();
        match key.trim().to_ascii_lowercase().as_str() {
            "q" => range.q = value.parse::<f32>().map_or(0.0, |q| q.clamp(0.0, 1.0)),
            "as" => range.as_ = Some(value),
            "g" => range.g = Some(value),
            "v" => range.v = Some(value),
            _ => {}
        }
    }
    Some(range)
}

/// The group and versions of the `as=` conversions served here.
const META_GROUP: &str = "meta.k8s.io";
const META_VERSIONS: &[&str] = &["v1", "v1beta1"];

/// The format one range asks for, if this server can produce it for `answering`.
fn format_for(range: &MediaRange, answering: Answering) -> Option<Conversion> {
    if range.as_.is_some() {
        return conversion_for(range, answering);
    }
    if range.matches("application", "json") {
        return Some(Conversion::Json);
    }
    if range.matches("application", "yaml") && answering != Answering::Document {
        return Some(Conversion::Yaml);
    }
    None
}

/// A range with `as=`: only JSON encodings of the meta.k8s.io conversions that fit what is being answered.
fn conversion_for(range: &MediaRange, answering: Answering) -> Option<Conversion> {
    if !range.matches("application", "json") {
        return None;
    }
    let asks = |as_| range.asks_for(as_, META_GROUP, META_VERSIONS);
    match answering {
        Answering::Document => None,
        _ if asks("Table") => Some(Conversion::Table),
        Answering::Object | Answering::Watch if asks("PartialObjectMetadata") => {
            Some(Conversion::PartialObjectMetadata)
        }
        Answering::List if asks("PartialObjectMetadataList") => Some(Conversion::PartialObjectMetadataList),
        _ => None,
    }
}

/// A negotiated format before `includeObject` is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conversion {
    Json,
    Yaml,
    Table,
    PartialObjectMetadata,
    PartialObjectMetadataList,
}

/// Picks the response format from the `Accept` header (and `includeObject`), honouring q-values and wildcards.
/// An `Accept` that allows nothing this server produces → 406 NotAcceptable.
pub fn response_format(
    headers: &HeaderMap,
    answering: Answering,
    include_object: Option<&str>,
) -> Result<ResponseFormat, ApiError> {
    let chosen = accepted_ranges(headers)?
        .iter()
        .find_map(|range| format_for(range, answering))
        .ok_or_else(|| not_acceptable(answering))?;
    Ok(match chosen {
        Conversion::Json => ResponseFormat::Json,
        Conversion::Yaml => ResponseFormat::Yaml,
        Conversion::Table => ResponseFormat::Table {
            include_object: parse_include_object(include_object)?,
        },
        Conversion::PartialObjectMetadata => ResponseFormat::PartialObjectMetadata,
        Conversion::PartialObjectMetadataList => ResponseFormat::PartialObjectMetadataList,
    })
}

/// The 406 answer, naming what would have been accepted.
pub fn not_acceptable(answering: Answering) -> ApiError {
    let types = match answering {
        Answering::Document => "application/json",
        _ => "application/json, application/yaml",
    };
    ApiError::not_acceptable(format!("only the following media types are accepted: {types}"))
}

/// `?includeObject=`: `Metadata` when absent or empty.
pub fn parse_include_object(value: Option<&str>) -> Result<IncludeObject, ApiError> {
    match value.unwrap_or("") {
        "" | "Metadata" => Ok(IncludeObject::Metadata),
        "None" => Ok(IncludeObject::None),
        "Object" => Ok(IncludeObject::Object),
        other => Err(ApiError::bad_request(format!(
            "includeObject {other:?} is not supported: use None, Metadata or Object"
        ))),
    }
}

/// How a write's body is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyType {
    Json,
    Yaml,
    MergePatch,
    JsonPatch,
    StrategicMergePatch,
    ApplyPatch,
}

/// The body type from `Content-Type`: 415 UnsupportedMediaType for anything else (and for a patch type on a
/// create/update, or a non-patch type on a patch). A create or update without `Content-Type` is read as JSON;
/// a patch must say which kind of patch it is.
pub fn body_type(headers: &HeaderMap, is_patch: bool) -> Result<BodyType, ApiError> {
    let media_type = match headers.get(header::CONTENT_TYPE) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| unsupported(is_patch))?
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase(),
        ),
    };
    let found = match media_type.as_deref() {
        None if !is_patch => Some(BodyType::Json),
        None => None,
        Some(media_type) => body_type_named(media_type),
    };
    match found {
        Some(body) if body.is_patch() == is_patch => Ok(body),
        _ => Err(unsupported(is_patch)),
    }
}

fn body_type_named(media_type: &str) -> Option<BodyType> {
    Some(match media_type {
        "application/json" => BodyType::Json,
        "application/yaml" => BodyType::Yaml,
        "application/merge-patch+json" => BodyType::MergePatch,
        "application/json-patch+json" => BodyType::JsonPatch,
        "application/strategic-merge-patch+json" => BodyType::StrategicMergePatch,
        "application/apply-patch+yaml" => BodyType::ApplyPatch,
        _ => return None,
    })
}

impl BodyType {
    pub fn is_patch(self) -> bool {
        !matches!(self, Self::Json | Self::Yaml)
    }
}

fn unsupported(is_patch: bool) -> ApiError {
    let types = if is_patch {
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, \
         application/apply-patch+yaml"
    } else {
        "application/json, application/yaml"
    };
    ApiError::unsupported_media_type(format!(
        "the body of the request was in an unknown format - accepted media types include: {types}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use proptest::prelude::*;

    const KUBECTL_GET: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    const METADATA_LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        headers
    }

    fn content_type(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
        headers
    }

    fn format(value: &str, answering: Answering) -> Result<ResponseFormat, ApiError> {
        response_format(&accept(value), answering, None)
    }

    const TABLE: ResponseFormat = ResponseFormat::Table {
        include_object: IncludeObject::Metadata,
    };

    #[test]
    fn kubectl_get_gets_a_table_for_lists_objects_and_watches() {
        for answering in [Answering::List, Answering::Object, Answering::Watch] {
            assert_eq!(format(KUBECTL_GET, answering).unwrap(), TABLE, "{answering:?}");
        }
    }

    #[test]
    fn a_document_falls_back_to_json_past_the_table_ranges() {
        assert_eq!(
            format(KUBECTL_GET, Answering::Document).unwrap(),
            ResponseFormat::Json
        );
    }

    #[test]
    fn the_v1beta1_table_is_served_too() {
        let value = "application/json;as=Table;v=v1beta1;g=meta.k8s.io";
        assert_eq!(format(value, Answering::List).unwrap(), TABLE);
    }

    #[test]
    fn a_table_of_another_group_or_version_is_not_served() {
        for value in [
            "application/json;as=Table;v=v2;g=meta.k8s.io",
            "application/json;as=Table;v=v1;g=example.com",
            "application/json;as=Table;v=v1",
            "application/yaml;as=Table;v=v1;g=meta.k8s.io",
        ] {
            assert_eq!(format(value, Answering::List).unwrap_err().code, 406, "{value}");
        }
    }

    #[test]
    fn the_metadata_client_gets_partial_object_metadata_lists_without_protobuf() {
        assert_eq!(
            format(METADATA_LIST, Answering::List).unwrap(),
            ResponseFormat::PartialObjectMetadataList
        );
    }

    #[test]
    fn partial_object_metadata_fits_objects_and_watches_and_the_list_form_fits_lists() {
        let single = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1";
        assert_eq!(
            format(single, Answering::Object).unwrap(),
            ResponseFormat::PartialObjectMetadata
        );
        assert_eq!(
            format(single, Answering::Watch).unwrap(),
            ResponseFormat::PartialObjectMetadata
        );
        assert_eq!(
            format(list, Answering::List).unwrap(),
            ResponseFormat::PartialObjectMetadataList
        );
        assert_eq!(format(single, Answering::List).unwrap_err().code, 406);
        assert_eq!(format(list, Answering::Object).unwrap_err().code, 406);
        assert_eq!(format(single, Answering::Document).unwrap_err().code, 406);
    }

    #[test]
    fn protobuf_alone_is_refused_with_a_not_acceptable_status() {
        let error = format("application/vnd.kubernetes.protobuf", Answering::List).unwrap_err();
        assert_eq!((error.code, error.reason), (406, "NotAcceptable"));
        assert!(error.message.contains("application/json"), "{}", error.message);
    }

    #[test]
    fn protobuf_with_a_json_fallback_gets_json() {
        let value = "application/vnd.kubernetes.protobuf, application/json";
        assert_eq!(format(value, Answering::Object).unwrap(), ResponseFormat::Json);
    }

    #[test]
    fn yaml_is_served_for_objects_but_not_documents() {
        assert_eq!(
            format("application/yaml", Answering::Object).unwrap(),
            ResponseFormat::Yaml
        );
        assert_eq!(
            format("application/yaml", Answering::Document).unwrap_err().code,
            406
        );
    }

    #[test]
    fn q_values_order_the_ranges() {
        let value = "application/json;q=0.5, application/yaml;q=0.9";
        assert_eq!(format(value, Answering::Object).unwrap(), ResponseFormat::Yaml);
        let value = "application/yaml;q=0.1, application/json";
        assert_eq!(format(value, Answering::Object).unwrap(), ResponseFormat::Json);
    }

    #[test]
    fn q_zero_and_unparsable_q_exclude_a_range() {
        assert_eq!(
            format("application/json;q=0", Answering::Object)
                .unwrap_err()
                .code,
            406
        );
        assert_eq!(
            format("application/json;q=high", Answering::Object)
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn wildcards_and_a_missing_header_mean_json() {
        for value in ["*/*", "application/*", "text/html, */*;q=0.1"] {
            assert_eq!(
                format(value, Answering::Object).unwrap(),
                ResponseFormat::Json,
                "{value}"
            );
        }
        let none = response_format(&HeaderMap::new(), Answering::Document, None).unwrap();
        assert_eq!(none, ResponseFormat::Json);
    }

    #[test]
    fn a_specific_type_beats_a_wildcard_of_the_same_q() {
        assert_eq!(
            format("*/*, application/yaml", Answering::Object).unwrap(),
            ResponseFormat::Yaml
        );
    }

    #[test]
    fn media_types_and_parameter_names_are_case_insensitive() {
        let value = "Application/JSON;AS=Table;G=meta.k8s.io;V=v1";
        assert_eq!(format(value, Answering::List).unwrap(), TABLE);
    }

    #[test]
    fn malformed_ranges_are_skipped() {
        assert_eq!(
            format("garbage, application/json", Answering::Object).unwrap(),
            ResponseFormat::Json
        );
        assert_eq!(format("garbage", Answering::Object).unwrap_err().code, 406);
    }

    #[test]
    fn include_object_is_read_for_tables_only() {
        let headers = accept(KUBECTL_GET);
        for (value, expected) in [
            (None, IncludeObject::Metadata),
            (Some("Metadata"), IncludeObject::Metadata),
            (Some("None"), IncludeObject::None),
            (Some("Object"), IncludeObject::Object),
        ] {
            let got = response_format(&headers, Answering::List, value).unwrap();
            assert_eq!(
                got,
                ResponseFormat::Table {
                    include_object: expected
                }
            );
        }
        let error = response_format(&headers, Answering::List, Some("object")).unwrap_err();
        assert_eq!(error.code, 400);
        let json = response_format(&accept("application/json"), Answering::List, Some("bogus"));
        assert_eq!(json.unwrap(), ResponseFormat::Json);
    }

    #[test]
    fn write_bodies_are_json_or_yaml() {
        assert_eq!(
            body_type(&content_type("application/json"), false).unwrap(),
            BodyType::Json
        );
        let charset = content_type("application/json; charset=utf-8");
        assert_eq!(body_type(&charset, false).unwrap(), BodyType::Json);
        assert_eq!(
            body_type(&content_type("application/yaml"), false).unwrap(),
            BodyType::Yaml
        );
        assert_eq!(body_type(&HeaderMap::new(), false).unwrap(), BodyType::Json);
        for refused in [
            "application/vnd.kubernetes.protobuf",
            "application/cbor",
            "application/merge-patch+json",
        ] {
            let error = body_type(&content_type(refused), false).unwrap_err();
            assert_eq!(
                (error.code, error.reason),
                (415, "UnsupportedMediaType"),
                "{refused}"
            );
        }
    }

    #[test]
    fn patch_bodies_name_their_patch_type() {
        for (value, expected) in [
            ("application/merge-patch+json", BodyType::MergePatch),
            ("application/json-patch+json", BodyType::JsonPatch),
            (
                "application/strategic-merge-patch+json",
                BodyType::StrategicMergePatch,
            ),
            ("application/apply-patch+yaml", BodyType::ApplyPatch),
            (
                "Application/Apply-Patch+YAML; charset=utf-8",
                BodyType::ApplyPatch,
            ),
        ] {
            assert_eq!(
                body_type(&content_type(value), true).unwrap(),
                expected,
                "{value}"
            );
        }
        for refused in [
            "application/apply-patch+cbor",
            "application/json",
            "application/yaml",
            "text/plain",
        ] {
            assert_eq!(
                body_type(&content_type(refused), true).unwrap_err().code,
                415,
                "{refused}"
            );
        }
        assert_eq!(body_type(&HeaderMap::new(), true).unwrap_err().code, 415);
    }

    proptest! {
        /// No header value, however hostile, panics; the answer is a format or a 406/400.
        #[test]
        fn any_accept_header_gets_a_format_or_a_status(value in "[ -~]{0,120}") {
            if let Ok(value) = HeaderValue::from_str(&value) {
                let mut headers = HeaderMap::new();
                headers.insert(header::ACCEPT, value);
                for answering in [Answering::Object, Answering::List, Answering::Watch, Answering::Document] {
                    if let Err(error) = response_format(&headers, answering, None) {
                        prop_assert_eq!(error.code, 406);
                    }
                }
            }
        }

        /// A JSON range anywhere with q > 0 means the request is never refused.
        #[test]
        fn a_json_fallback_is_always_enough(prefix in "[a-z/;=.,*]{0,40}") {
            let value = format!("{prefix},application/json");
            if let Ok(value) = HeaderValue::from_str(&value) {
                let mut headers = HeaderMap::new();
                headers.insert(header::ACCEPT, value);
                prop_assert!(response_format(&headers, Answering::Document, None).is_ok());
            }
        }
    }
}
