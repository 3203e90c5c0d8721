//! Reading credentials and asserted identities out of a request, as Kubernetes does: the front proxy's
//! identity headers, the bearer token, and the user and groups of a client certificate's subject.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, HeaderName, header};
use rustls_pki_types::CertificateDer;

use super::config::RequestHeaderConfig;
use crate::generic::auth::UserInfo;

const AUTHENTICATED_GROUP: &str = "system:authenticated";
const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
const ANONYMOUS_USER: &str = "system:anonymous";

/// The identity a trusted front proxy asserts in the configured headers. `None` without a non-empty username
/// header. Values that are not visible ASCII are skipped rather than guessed at.
pub(crate) fn identity_from_headers(config: &RequestHeaderConfig, headers: &HeaderMap) -> Option<UserInfo> {
    let name = first_value(headers, &config.username_headers)?;
    Some(UserInfo {
        name,
        uid: first_value(headers, &config.uid_headers).unwrap_or_default(),
        groups: all_values(headers, &config.group_headers),
        extra: extra_values(headers, &config.extra_prefixes),
    })
}

/// The first non-empty value among `names`, in their configured order.
fn first_value(headers: &HeaderMap, names: &[String]) -> Option<String> {
    names
        .iter()
        .filter_map(|name| header_name(name))
        .find_map(|name| {
            let first = headers.get(&name)?.to_str().ok()?;
            (!first.is_empty()).then(|| first.to_owned())
        })
}

/// Every non-empty value of every header in `names`.
fn all_values(headers: &HeaderMap, names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter_map(|name| header_name(name))
        .flat_map(|name| {
            headers
                .get_all(&name)
                .iter()
                .filter_map(|value| value.to_str().ok())
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `<prefix><key>` headers: the key lower-cased and percent-decoded (so keys may hold characters header names
/// cannot), every value kept.
fn extra_values(headers: &HeaderMap, prefixes: &[String]) -> BTreeMap<String, Vec<String>> {
    let prefixes: Vec<String> = prefixes.iter().map(|p| p.to_ascii_lowercase()).collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        // Header names are stored lower-case.
        let Some(key) = prefixes
            .iter()
            .find_map(|prefix| name.as_str().strip_prefix(prefix.as_str()))
        else {
            continue;
        };
        if key.is_empty() {
            continue;
        }
        let Ok(value) = value.to_str() else { continue };
        extra
            .entry(percent_decode(key))
            .or_default()
            .push(value.to_owned());
    }
    extra
}

fn header_name(name: &str) -> Option<HeaderName> {
    HeaderName::from_bytes(name.as_bytes()).ok()
}

/// Percent-decodes `key` like Go's `url.PathUnescape`; an invalid escape or a result that is not UTF-8 leaves the
/// key as it was.
pub(crate) fn percent_decode(key: &str) -> String {
    crate::generic::request_info::percent_decode(key)
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_else(|| key.to_owned())
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive); `None` otherwise.
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A client certificate's identity: the subject's CN as the user and its O values as groups. `None` when the
/// certificate cannot be parsed or has no CN.
pub(crate) fn certificate_identity(leaf: &CertificateDer<'_>) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())?
        .to_owned();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_owned)
        .collect();
    Some(UserInfo {
        name,
        groups,
        ..UserInfo::default()
    })
}

/// The common name of a certificate's subject (for the front proxy's allowed names).
pub(crate) fn common_name(leaf: &CertificateDer<'_>) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?;
    Some(cn.to_owned())
}

/// Adds `system:authenticated` to an authenticated user's groups, as kube-apiserver does for every authenticator.
pub(crate) fn with_authenticated_group(mut user: UserInfo) -> UserInfo {
    let marked = user
        .groups
        .iter()
        .any(|g| g == AUTHENTICATED_GROUP || g == UNAUTHENTICATED_GROUP);
    if user.name != ANONYMOUS_USER && !marked {
        user.groups.push(AUTHENTICATED_GROUP.to_owned());
    }
    user
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn config() -> RequestHeaderConfig {
        RequestHeaderConfig {
            username_headers: vec!["X-Remote-User".into(), "X-Other-User".into()],
            uid_headers: vec!["X-Remote-Uid".into()],
            group_headers: vec!["X-Remote-Group".into(), "X-Other-Group".into()],
            extra_prefixes: vec!["X-Remote-Extra-".into(), "X-Other-Extra-".into()],
            ..RequestHeaderConfig::default()
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn reads_user_uid_groups_and_extra_from_the_configured_headers() {
        let user = identity_from_headers(
            &config(),
            &headers(&[
                ("X-Remote-User", "alice"),
                ("X-Remote-Uid", "uid-1"),
                ("X-Remote-Group", "devs"),
                ("X-Remote-Group", "system:authenticated"),
                ("X-Other-Group", "ops"),
                ("X-Remote-Extra-Scopes", "read"),
                ("X-Remote-Extra-Scopes", "write"),
                ("x-other-extra-acme.com%2fproject", "p1"),
                ("X-Unrelated", "ignored"),
            ]),
        )
        .unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.uid, "uid-1");
        assert_eq!(user.groups, ["devs", "system:authenticated", "ops"]);
        assert_eq!(
            user.extra,
            BTreeMap::from([
                ("acme.com/project".to_owned(), vec!["p1".to_owned()]),
                ("scopes".to_owned(), vec!["read".to_owned(), "write".to_owned()]),
            ])
        );
    }

    #[test]
    fn the_first_non_empty_username_header_wins_and_none_means_no_identity() {
        let user = identity_from_headers(
            &config(),
            &headers(&[("X-Remote-User", ""), ("X-Other-User", "bob")]),
        );
        assert_eq!(user.unwrap().name, "bob");
        assert_eq!(
            identity_from_headers(&config(), &headers(&[("X-Remote-Group", "devs")])),
            None
        );
        let unconfigured = RequestHeaderConfig::default();
        assert_eq!(
            identity_from_headers(&unconfigured, &headers(&[("X-Remote-User", "alice")])),
            None
        );
    }

    #[test]
    fn a_value_that_is_not_text_is_skipped_not_a_panic() {
        let mut map = headers(&[("X-Remote-User", "alice")]);
        map.append("x-remote-group", HeaderValue::from_bytes(b"\xff\xfe").unwrap());
        map.append("x-remote-group", HeaderValue::from_static("devs"));
        map.append("x-remote-extra-k", HeaderValue::from_bytes(b"\xff").unwrap());
        let user = identity_from_headers(&config(), &map).unwrap();
        assert_eq!(user.groups, ["devs"]);
        assert!(user.extra.is_empty());
    }

    #[test]
    fn percent_decoding_matches_path_unescape() {
        assert_eq!(percent_decode("acme.com%2fproject"), "acme.com/project");
        assert_eq!(percent_decode("a%20b"), "a b");
        assert_eq!(percent_decode("plain"), "plain");
        assert_eq!(percent_decode("bad%zz"), "bad%zz");
        assert_eq!(percent_decode("short%2"), "short%2");
        assert_eq!(percent_decode("notutf8%ff"), "notutf8%ff");
    }

    #[test]
    fn bearer_tokens_follow_kubernetes_parsing() {
        assert_eq!(
            bearer_token(&headers(&[("Authorization", "Bearer abc")])),
            Some("abc")
        );
        assert_eq!(
            bearer_token(&headers(&[("Authorization", "bearer abc extra")])),
            Some("abc")
        );
        assert_eq!(bearer_token(&headers(&[("Authorization", "Basic abc")])), None);
        assert_eq!(bearer_token(&headers(&[("Authorization", "Bearer")])), None);
        assert_eq!(bearer_token(&headers(&[("Authorization", "Bearer  abc")])), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn certificate_subjects_give_user_and_groups() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "carol");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "team-a");
        let cert = params.self_signed(&key).unwrap();
        let user = certificate_identity(cert.der()).unwrap();
        assert_eq!(user.name, "carol");
        assert_eq!(user.groups, ["team-a"]);
        assert_eq!(common_name(cert.der()).as_deref(), Some("carol"));

        let mut no_cn = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        no_cn.distinguished_name = rcgen::DistinguishedName::new();
        let no_cn = no_cn.self_signed(&key).unwrap();
        assert_eq!(certificate_identity(no_cn.der()), None);
        assert_eq!(certificate_identity(&CertificateDer::from(vec![1, 2, 3])), None);
    }

    #[test]
    fn authenticated_group_is_added_once() {
        let user = with_authenticated_group(UserInfo {
            name: "a".into(),
            groups: vec!["x".into()],
            ..UserInfo::default()
        });
        assert_eq!(user.groups, ["x", AUTHENTICATED_GROUP]);
        assert_eq!(with_authenticated_group(user.clone()), user);
        let anonymous = UserInfo {
            name: ANONYMOUS_USER.into(),
            ..UserInfo::default()
        };
        assert_eq!(with_authenticated_group(anonymous.clone()), anonymous);
    }
}
