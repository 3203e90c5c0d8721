//! The hex digests and hash-truncated names the operator derives: SHA-256, FNV-32a, and the long-name rule under
//! which the Go operator (v0.1.5) named objects, so an upgrade finds its objects under the same names.

use coder_k8s_api::shared::fnv32a;
use sha2::{Digest, Sha256};

/// Lowercase hex of the SHA-256 of `bytes`, cut to the first `len` bytes (`None`: all 32).
pub fn sha256_hex(bytes: &[u8], len: Option<usize>) -> String {
    let digest = Sha256::digest(bytes);
    digest
        .iter()
        .take(len.unwrap_or(digest.len()))
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The 8 lowercase hex digits of the FNV-32a of `bytes`.
pub fn fnv32a_hex(bytes: &[u8]) -> String {
    format!("{:08x}", fnv32a(bytes))
}

/// `<prefix><base><suffix>` when it fits in `limit` bytes; otherwise `<prefix><cut base>-<fnv32a(base)><suffix>`, the
/// base cut to what is left (at least one byte). The hash is of the base alone, never of the prefix or suffix. This
/// is the rule of label values and of names outside Kubernetes (provisioner key names), kept byte for byte.
pub fn hashed_name(prefix: &str, base: &str, suffix: &str, limit: usize) -> String {
    hashed(prefix, base, suffix, limit, false)
}

/// [`hashed_name`] for a Kubernetes object name: a cut that ends in `.` loses the dots, since `<cut>.-<hash>` is no
/// valid name (the Go operator could never create such an object, so there is nothing to stay compatible with).
pub fn hashed_object_name(prefix: &str, base: &str, suffix: &str, limit: usize) -> String {
    hashed(prefix, base, suffix, limit, true)
}

fn hashed(prefix: &str, base: &str, suffix: &str, limit: usize, object_name: bool) -> String {
    let full = format!("{prefix}{base}{suffix}");
    if full.len() <= limit {
        return full;
    }
    let available = limit.saturating_sub(prefix.len() + suffix.len() + 9).max(1);
    let cut = byte_prefix(base, available);
    let cut = if object_name {
        cut.trim_end_matches('.')
    } else {
        cut
    };
    format!("{prefix}{cut}-{}{suffix}", fnv32a_hex(base.as_bytes()))
}

/// The longest prefix of `value` of at most `len` bytes that ends on a character boundary (names are ASCII, so this
/// is Go's byte slice; it only guards against a panic on other input).
pub fn byte_prefix(value: &str, len: usize) -> &str {
    let mut end = len.min(value.len());
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_hex(b"abc", None), abc);
        assert_eq!(sha256_hex(b"abc", Some(8)), &abc[..16]);
        // Published FNV-32a test vectors.
        assert_eq!(fnv32a_hex(b""), "811c9dc5");
        assert_eq!(fnv32a_hex(b"a"), "e40c292c");
        assert_eq!(fnv32a_hex(b"foobar"), "bf9cf968");
    }

    #[test]
    fn short_names_are_kept_and_long_ones_hash_the_base_only() {
        assert_eq!(hashed_name("provisioner-", "p", "", 63), "provisioner-p");
        let base = "p".repeat(60);
        // 63 - 12 - 9 = 42 bytes of the base; the hash is FNV-32a of the 60 p's alone, computed independently:
        // python3 -c "h=0x811c9dc5
        // for x in b'p'*60: h=((h^x)*0x01000193)&0xffffffff
        // print('%08x'%h)"  ->  73896435
        assert_eq!(
            hashed_name("provisioner-", &base, "", 63),
            format!("provisioner-{}-73896435", "p".repeat(42))
        );
        assert_eq!(
            hashed_name("", &base, "-provisioner", 63),
            format!("{}-73896435-provisioner", "p".repeat(42))
        );
    }

    #[test]
    fn a_dash_at_the_cut_is_kept_and_a_dot_only_in_label_values() {
        // The cut (42 bytes) ends in "-": kept as is, as the Go operator did.
        let dash = format!("{}-{}", "a".repeat(41), "b".repeat(30));
        let name = hashed_object_name("provisioner-", &dash, "", 63);
        assert!(
            name.starts_with(&format!("provisioner-{}--", "a".repeat(41))),
            "{name}"
        );
        let dot = format!("{}.{}", "a".repeat(41), "b".repeat(30));
        assert!(hashed_name("provisioner-", &dot, "", 63).contains(".-"));
        let object = hashed_object_name("provisioner-", &dot, "", 63);
        assert!(!object.contains(".-") && object.len() <= 63, "{object}");
    }

    #[test]
    fn non_ascii_input_never_panics() {
        let name = hashed_name("", &"é".repeat(40), "", 63);
        assert!(name.len() <= 63, "{name}");
    }
}
