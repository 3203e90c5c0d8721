//! The one hex-digest helper: SHA-256, in full or cut to its first bytes.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_hex(b"abc", None), abc);
        assert_eq!(sha256_hex(b"abc", Some(8)), &abc[..16]);
    }
}
