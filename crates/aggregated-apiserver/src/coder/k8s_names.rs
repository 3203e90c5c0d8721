//! Kubernetes object names and Secret data keys as kube-apiserver accepts them. A Secret name a caller gives goes
//! into the path of a Kubernetes call, so one such as `a/b` or `a?b` would be authorized under one name and reach
//! another object: every such name is checked with these first.

/// Lowercase alphanumeric labels with inner `-`, joined by `.`, at most 253 characters (an RFC 1123 subdomain).
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// A key of a Secret's data: alphanumerics, `-`, `_` and `.`, at most 253, neither `.` nor starting with `..`.
pub fn is_secret_data_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key != "."
        && !key.starts_with("..")
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_reach_another_path_are_refused() {
        for good in ["alice-password", "a.b-c", "x"] {
            assert!(is_dns_subdomain(good), "{good}");
        }
        for bad in [
            "",
            "a/b",
            "a?b",
            "A",
            "-a",
            "a-",
            "a..b",
            "../x",
            &"a".repeat(254),
        ] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
        for good in ["password", "tls.crt", "a_b-c"] {
            assert!(is_secret_data_key(good), "{good}");
        }
        for bad in ["", ".", "..x", "a/b", "a b"] {
            assert!(!is_secret_data_key(bad), "{bad}");
        }
    }
}
