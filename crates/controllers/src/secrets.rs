//! Reading values out of Secrets.

use k8s_openapi::api::core::v1::Secret;

/// The UTF-8 value of `key` in `secret`, if the Secret, the key and valid text are all there.
pub fn value(secret: Option<&Secret>, key: &str) -> Option<String> {
    let bytes = secret?.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    #[test]
    fn values() {
        let secret = Secret {
            data: Some(BTreeMap::from([
                ("a".to_owned(), ByteString(b"x".to_vec())),
                ("bad".to_owned(), ByteString(vec![0xff])),
            ])),
            ..Secret::default()
        };
        assert_eq!(value(Some(&secret), "a").as_deref(), Some("x"));
        assert_eq!(value(Some(&secret), "bad"), None);
        assert_eq!(value(Some(&secret), "missing"), None);
        assert_eq!(value(None, "a"), None);
    }
}
