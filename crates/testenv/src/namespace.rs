//! Unique namespaces, so tests sharing one control plane do not see each other's objects.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::Result;

use crate::pki::random_hex;

/// A namespace created for one test. It is not deleted automatically: the control plane is thrown away
/// at the end of the run anyway, and without KCM's namespace controller a deletion would never finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestNamespace {
    name: String,
}

impl TestNamespace {
    pub(crate) fn new(name: String) -> Self {
        Self { name }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Deref for TestNamespace {
    type Target = str;

    fn deref(&self) -> &str {
        &self.name
    }
}

impl AsRef<str> for TestNamespace {
    fn as_ref(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for TestNamespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// `<prefix>-<counter>-<random>`, turned into a valid DNS-1123 label (lowercase alphanumerics and `-`,
/// at most 63 characters).
pub(crate) fn unique_name(prefix: &str) -> Result<String> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let mut clean: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    clean.truncate(40);
    let clean = clean.trim_matches('-');
    let clean = if clean.is_empty() { "test" } else { clean };
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Ok(format!("{clean}-{n}-{}", random_hex(3)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_unique() {
        let a = unique_name("My_Test::case").unwrap();
        let b = unique_name("My_Test::case").unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("my-test--case-"), "{a}");
        let long = unique_name(&"x".repeat(100)).unwrap();
        assert!(long.len() <= 63, "{long}");
        assert!(unique_name("--").unwrap().starts_with("test-"));
        for name in [a, b, long] {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            );
        }
    }
}
