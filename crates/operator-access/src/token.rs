//! Coder API tokens (`<10 chars>-<22 chars>`, charset `0-9A-Za-z`) and the operator's token name.

use std::fmt;

use sha2::{Digest as _, Sha256};

/// Length of the token id (the `api_keys.id` column).
pub const ID_LEN: usize = 10;
/// Length of the token secret (hashed into `api_keys.hashed_secret`).
pub const SECRET_LEN: usize = 22;

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Why a token could not be generated or parsed. Never contains the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("API token is not in the format <10 chars>-<22 chars> from 0-9A-Za-z")]
    InvalidFormat,
    #[error("the system random number generator failed")]
    Random,
}

/// A Coder session token `<id>-<secret>`. `Debug` and `Display` never show its value.
#[derive(Clone, PartialEq, Eq)]
pub struct OperatorToken {
    id: String,
    secret: String,
}

impl OperatorToken {
    /// A new random token (rejection sampling over the OS random source, no modulo bias).
    pub fn generate() -> Result<Self, TokenError> {
        Ok(Self {
            id: random_string(ID_LEN)?,
            secret: random_string(SECRET_LEN)?,
        })
    }

    /// Parses `<id>-<secret>` with Coder's `SplitAPIToken` rules: exactly two parts on `-`, lengths 10
    /// and 22, and (as generated) only `0-9A-Za-z`. No trimming.
    pub fn parse(token: &str) -> Result<Self, TokenError> {
        let mut parts = token.split('-');
        let (Some(id), Some(secret), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(TokenError::InvalidFormat);
        };
        let valid =
            |part: &str, len: usize| part.len() == len && part.bytes().all(|b| b.is_ascii_alphanumeric());
        if !valid(id, ID_LEN) || !valid(secret, SECRET_LEN) {
            return Err(TokenError::InvalidFormat);
        }
        Ok(Self {
            id: id.to_owned(),
            secret: secret.to_owned(),
        })
    }

    /// The id part (`api_keys.id`); not secret on its own.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The secret part. Handle with care.
    pub fn expose_secret(&self) -> &str {
        &self.secret
    }

    /// The whole token `<id>-<secret>`, e.g. for writing it into a Secret. Handle with care.
    pub fn expose(&self) -> String {
        format!("{}-{}", self.id, self.secret)
    }

    /// `sha256(secret)`, the raw 32 bytes stored in `api_keys.hashed_secret`.
    pub fn hashed_secret(&self) -> [u8; 32] {
        let digest = Sha256::digest(self.secret.as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(digest.as_slice());
        out
    }
}

impl fmt::Debug for OperatorToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OperatorToken(<redacted>)")
    }
}

impl fmt::Display for OperatorToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted operator token>")
    }
}

fn random_string(len: usize) -> Result<String, TokenError> {
    // 248 = 4 * 62: bytes at or above it are rejected so every character is equally likely.
    const LIMIT: u8 = 248;
    let mut out = String::with_capacity(len);
    let mut buf = [0u8; 64];
    while out.len() < len {
        getrandom::fill(&mut buf).map_err(|_| TokenError::Random)?;
        for &b in &buf {
            if out.len() == len {
                break;
            }
            if b < LIMIT {
                out.push(char::from(ALPHABET[usize::from(b % 62)]));
            }
        }
    }
    Ok(out)
}

/// 64-bit FNV-1a.
fn fnv1a64(parts: &[&[u8]]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for part in parts {
        for &b in *part {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    hash
}

/// `coder-k8s-operator-<16 hex of FNV-64a(namespace, 0x00, name)>`: the `api_keys.token_name` of the
/// token for the control plane `namespace/name`.
pub fn token_name(namespace: &str, name: &str) -> String {
    let hash = fnv1a64(&[namespace.as_bytes(), &[0], name.as_bytes()]);
    format!("coder-k8s-operator-{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a written independently: u128 arithmetic reduced mod 2^64 instead of wrapping u64.
    fn reference_fnv(bytes: &[u8]) -> u64 {
        let mut h: u128 = 14_695_981_039_346_656_037;
        for &b in bytes {
            h ^= u128::from(b);
            h = (h * 1_099_511_628_211) % (1u128 << 64);
        }
        u64::try_from(h).unwrap()
    }

    #[test]
    fn fnv_matches_published_vectors() {
        assert_eq!(fnv1a64(&[b""]), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(&[b"a"]), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(&[b"foobar"]), 0x85944171f73967e8);
    }

    #[test]
    fn token_name_hashes_namespace_nul_name() {
        let expected = format!("coder-k8s-operator-{:016x}", reference_fnv(b"coder\0my-coder"));
        assert_eq!(token_name("coder", "my-coder"), expected);
        assert_eq!(expected.len(), "coder-k8s-operator-".len() + 16);
        // The separator matters: ("ab", "c") and ("a", "bc") differ.
        assert_ne!(token_name("ab", "c"), token_name("a", "bc"));
    }

    #[test]
    fn generated_tokens_parse_and_differ() {
        let a = OperatorToken::generate().unwrap();
        let b = OperatorToken::generate().unwrap();
        assert_ne!(a, b);
        let exposed = a.expose();
        assert_eq!(exposed.len(), 33);
        assert_eq!(OperatorToken::parse(&exposed).unwrap(), a);
        assert_eq!(a.id().len(), ID_LEN);
        assert_eq!(a.expose_secret().len(), SECRET_LEN);
    }

    #[test]
    fn parse_rejects_bad_formats() {
        let good_id = "abcdEFGH01";
        let good_secret = "0123456789abcdefghijKL";
        assert!(OperatorToken::parse(&format!("{good_id}-{good_secret}")).is_ok());
        for bad in [
            String::new(),
            good_id.to_owned(),
            format!("{good_id}{good_secret}"),
            format!("{good_id}-{good_secret}-x"),
            format!("{good_id}x-{good_secret}"),
            format!("{good_id}-{good_secret}x"),
            format!("abcdEFGH0_-{good_secret}"),
            format!("{good_id}-0123456789abcdefghijK!"),
            format!("{good_id}-{good_secret}\n"),
            format!(" {good_id}-{good_secret}"),
        ] {
            assert_eq!(
                OperatorToken::parse(&bad),
                Err(TokenError::InvalidFormat),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn hashed_secret_is_sha256_of_the_secret() {
        let token = OperatorToken::parse("abcdEFGH01-0123456789abcdefghijKL").unwrap();
        let expected: Vec<u8> = Sha256::digest(b"0123456789abcdefghijKL").to_vec();
        assert_eq!(token.hashed_secret().to_vec(), expected);
    }

    #[test]
    fn debug_and_display_hide_the_value() {
        let token = OperatorToken::generate().unwrap();
        for shown in [
            format!("{token:?}"),
            format!("{token}"),
            format!("{:?}", Some(&token)),
        ] {
            assert!(!shown.contains(token.id()), "{shown}");
            assert!(!shown.contains(token.expose_secret()), "{shown}");
        }
    }

    #[test]
    fn alphabet_is_the_62_alphanumerics() {
        assert!(ALPHABET.iter().all(u8::is_ascii_alphanumeric));
        let mut sorted = ALPHABET.to_vec();
        sorted.dedup();
        assert_eq!(sorted.len(), 62);
    }
}
