//! Coder v2.30.0's `userpassword` package: the `$pbkdf2-sha256$<iterations>$<salt>$<hash>` format of
//! `users.hashed_password` (PBKDF2 with HMAC-SHA-256, 64-byte key, unpadded standard base64), its comparison, and the
//! strength rule of new passwords (`go-password-validator` v0.3.0 at 52 bits of entropy, then at most 64 bytes).

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use sha2::{Digest as _, Sha256};

/// Go's `base64.RawStdEncoding`: no padding, trailing bits not checked.
const RAW_STD: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone),
);
const SCHEME: &str = "pbkdf2-sha256";
/// The iteration count of new hashes: 1, as Coder hashes while its own Go tests run (its server uses 65535, which
/// takes seconds in an unoptimised test build). The count is part of the hash, so [`compare`] reads either, and real
/// Coder reads these.
const ITERATIONS: u32 = 1;
const KEY_LENGTH: usize = 64;
const SALT_LENGTH: usize = 16;
/// What Coder compares a password against when the user has no hash (or does not exist): the hash of `hunter2`.
const SIMULATED_PASSWORD: &str = "hunter2";
const MIN_ENTROPY: f64 = 52.0;
const MAX_LENGTH: usize = 64;

/// Coder's `userpassword.Hash`: a random 16-byte salt, [`ITERATIONS`] rounds.
pub(crate) fn hash(password: &str) -> anyhow::Result<String> {
    let mut salt = [0u8; SALT_LENGTH];
    getrandom::fill(&mut salt).map_err(|e| anyhow::anyhow!("read random bytes for salt: {e}"))?;
    Ok(hash_with(password, &salt, ITERATIONS))
}

fn hash_with(password: &str, salt: &[u8], iterations: u32) -> String {
    let key = pbkdf2_sha256(password.as_bytes(), salt, iterations);
    format!(
        "${SCHEME}${iterations}${}${}",
        RAW_STD.encode(salt),
        RAW_STD.encode(key)
    )
}

/// Coder's `userpassword.Compare`: whether `password` matches `hashed` (an empty hash is compared as the hash of
/// `hunter2`, as Coder does); `Err` for a hash Coder cannot read (its login answers those with a 500).
pub(crate) fn compare(hashed: &[u8], password: &str) -> Result<bool, String> {
    if hashed.is_empty() {
        return Ok(password == SIMULATED_PASSWORD);
    }
    if hashed.len() < KEY_LENGTH {
        return Err(format!("hash too short: {}", hashed.len()));
    }
    let text = String::from_utf8_lossy(hashed);
    let parts: Vec<&str> = text.splitn(5, '$').collect();
    let &[prefix, scheme, iterations, salt, _] = parts.as_slice() else {
        return Err(format!("hash has too many parts: {}", parts.len()));
    };
    if !prefix.is_empty() {
        return Err("hash prefix is invalid".to_owned());
    }
    if scheme != SCHEME {
        return Err(format!("hash isn't {SCHEME:?} scheme: {scheme:?}"));
    }
    let iterations: i64 = iterations
        .parse()
        .map_err(|e| format!("parse iter from hash: {e}"))?;
    let salt = RAW_STD.decode(salt).map_err(|e| format!("decode salt: {e}"))?;
    // Go's PBKDF2 runs one round for any count below 2; the hash text keeps the count as written.
    let rounds = u32::try_from(iterations.max(1)).unwrap_or(u32::MAX);
    let key = pbkdf2_sha256(password.as_bytes(), &salt, rounds);
    let computed = format!(
        "${SCHEME}${iterations}${}${}",
        RAW_STD.encode(&salt),
        RAW_STD.encode(key)
    );
    Ok(crate::util::constant_time_eq(computed.as_bytes(), hashed))
}

/// HMAC-SHA-256 (RFC 2104) with the key's inner and outer states computed once.
struct HmacSha256 {
    inner: Sha256,
    outer: Sha256,
}

impl HmacSha256 {
    fn new(key: &[u8]) -> Self {
        let mut block = [0u8; 64];
        if key.len() > block.len() {
            block[..32].copy_from_slice(&Sha256::digest(key));
        } else {
            block[..key.len()].copy_from_slice(key);
        }
        let pad = |byte: u8| {
            let mut hasher = Sha256::new();
            hasher.update(block.map(|b| b ^ byte));
            hasher
        };
        Self {
            inner: pad(0x36),
            outer: pad(0x5c),
        }
    }

    fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut inner = self.inner.clone();
        for part in parts {
            inner.update(part);
        }
        let mut outer = self.outer.clone();
        outer.update(inner.finalize());
        outer.finalize().into()
    }
}

/// PBKDF2 (RFC 8018) with HMAC-SHA-256 and a 64-byte key.
fn pbkdf2_sha256(password: &[u8], salt: &[u8], iterations: u32) -> [u8; KEY_LENGTH] {
    let prf = HmacSha256::new(password);
    let mut key = [0u8; KEY_LENGTH];
    for (index, chunk) in (1u32..).zip(key.chunks_mut(32)) {
        let mut u = prf.mac(&[salt, &index.to_be_bytes()]);
        let mut t = u;
        for _ in 1..iterations {
            u = prf.mac(&[&u]);
            for (acc, byte) in t.iter_mut().zip(u) {
                *acc ^= byte;
            }
        }
        chunk.copy_from_slice(&t[..chunk.len()]);
    }
    key
}

/// Coder's `userpassword.Validate`: the error text Coder puts in the `password` validation, or `Ok`.
pub(crate) fn validate(password: &str) -> Result<(), String> {
    if entropy(password) < MIN_ENTROPY {
        return Err(weakness(password));
    }
    if password.len() > MAX_LENGTH {
        return Err(format!("password must be no more than {MAX_LENGTH} characters"));
    }
    Ok(())
}

const REPLACE_CHARS: &str = "!@$&*";
const SEP_CHARS: &str = "_-., ";
const OTHER_SPECIAL_CHARS: &str = "\"#%'()+/:;<=>?[\\]^{|}~";
const LOWER_CHARS: &str = "abcdefghijklmnopqrstuvwxyz";
const UPPER_CHARS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const DIGIT_CHARS: &str = "0123456789";
/// The character classes in the validator's order; a character outside all of them counts on its own.
const CLASSES: [&str; 6] = [
    REPLACE_CHARS,
    SEP_CHARS,
    OTHER_SPECIAL_CHARS,
    LOWER_CHARS,
    UPPER_CHARS,
    DIGIT_CHARS,
];

/// The class of `c` (an index into [`CLASSES`]), if any.
fn class_of(c: char) -> Option<usize> {
    CLASSES.iter().position(|class| class.contains(c))
}

/// The size of the alphabet the password draws from: every class it uses in full, plus each distinct other character.
fn base(password: &str) -> usize {
    let mut distinct: Vec<char> = password.chars().collect();
    distinct.sort_unstable();
    distinct.dedup();
    let mut used = [false; CLASSES.len()];
    let mut base = 0;
    for c in distinct {
        match class_of(c) {
            Some(class) => used[class] = true,
            None => base += 1,
        }
    }
    base + CLASSES
        .iter()
        .zip(used)
        .filter(|(_, used)| *used)
        .map(|(class, _)| class.len())
        .sum::<usize>()
}

/// The validator's length: runs of three or more equal characters, and of three or more characters of a keyboard or
/// alphabet sequence (forwards or backwards), shortened to two; the result's length in bytes.
fn length(password: &str) -> usize {
    const SEQUENCES: [&str; 5] = [
        "0123456789",
        "qwertyuiop",
        "asdfghjkl",
        "zxcvbnm",
        "abcdefghijklmnopqrstuvwxyz",
    ];
    let mut chars = remove_repeats(password.chars().collect());
    for sequence in SEQUENCES {
        chars = remove_sequence(chars, &sequence.chars().collect::<Vec<_>>());
    }
    for sequence in SEQUENCES {
        chars = remove_sequence(chars, &sequence.chars().rev().collect::<Vec<_>>());
    }
    chars.iter().map(|c| c.len_utf8()).sum()
}

/// The validator's `removeMoreThanTwoRepeatingChars` (its two previous characters start as NUL).
fn remove_repeats(mut chars: Vec<char>) -> Vec<char> {
    let (mut prev_prev, mut prev) = ('\0', '\0');
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == prev && c == prev_prev {
            chars.remove(i);
        } else {
            i += 1;
        }
        prev_prev = prev;
        prev = c;
    }
    chars
}

/// The validator's `removeMoreThanTwoFromSequence`, step for step: for each position it walks the whole sequence,
/// advancing in the password on every match and dropping the third and later characters of a matching run.
fn remove_sequence(mut chars: Vec<char>, sequence: &[char]) -> Vec<char> {
    let mut matches = 0;
    let mut i = 0;
    while i < chars.len() {
        for &expected in sequence {
            if i >= chars.len() {
                break;
            }
            if chars[i] != expected {
                matches = 0;
                continue;
            }
            matches += 1;
            if matches > 2 {
                chars.remove(i);
            } else {
                i += 1;
            }
        }
        i += 1;
    }
    chars
}

/// Go's `math.Log2` of a positive integer: exact for powers of two, else `Log(frac) * (1/Ln2) + exp`.
fn go_log2(x: usize) -> f64 {
    let x = x as u64;
    let exp = 64 - i64::from(x.leading_zeros());
    #[allow(clippy::cast_precision_loss)]
    let frac = x as f64 / (exp as f64).exp2();
    if frac == 0.5 {
        #[allow(clippy::cast_precision_loss)]
        return (exp - 1) as f64;
    }
    #[allow(clippy::cast_precision_loss)]
    let exp = exp as f64;
    frac.ln() * std::f64::consts::LOG2_E + exp
}

/// The validator's entropy: `log2(base)` added once per character of the length.
fn entropy(password: &str) -> f64 {
    let base = base(password);
    let length = length(password);
    if base == 0 {
        return 0.0;
    }
    let step = go_log2(base);
    (0..length).fold(0.0, |total, _| total + step)
}

/// The validator's advice for a password below the entropy.
fn weakness(password: &str) -> String {
    let mut used = [false; CLASSES.len()];
    for class in password.chars().filter_map(class_of) {
        used[class] = true;
    }
    let [replace, sep, other_special, lower, upper, digits] = used;
    let mut advice = Vec::new();
    if !other_special || !sep || !replace {
        advice.push("including more special characters");
    }
    if !lower {
        advice.push("using lowercase letters");
    }
    if !upper {
        advice.push("using uppercase letters");
    }
    if !digits {
        advice.push("using numbers");
    }
    if advice.is_empty() {
        "insecure password, try using a longer password".to_owned()
    } else {
        format!(
            "insecure password, try {} or using a longer password",
            advice.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pbkdf2_matches_the_rfc_7914_vectors() {
        let key = pbkdf2_sha256(b"passwd", b"salt", 1);
        assert_eq!(
            crate::util::hex(&key),
            "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc\
             49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783"
        );
        let key = pbkdf2_sha256(b"Password", b"NaCl", 80_000);
        assert_eq!(
            crate::util::hex(&key),
            "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56\
             a1d425a1225833549adb841b51c9b3176a272bdebba1d078478f62b397f33c8d"
        );
    }

    #[test]
    fn a_hash_compares_equal_to_its_password_only() {
        let hashed = hash_with("Correct-Horse-9!", b"0123456789abcdef", 3);
        assert!(
            hashed.starts_with("$pbkdf2-sha256$3$MDEyMzQ1Njc4OWFiY2RlZg$"),
            "{hashed}"
        );
        assert_eq!(compare(hashed.as_bytes(), "Correct-Horse-9!"), Ok(true));
        assert_eq!(compare(hashed.as_bytes(), "correct-Horse-9!"), Ok(false));
        assert_eq!(compare(b"", "hunter2"), Ok(true), "Coder's simulated hash");
        assert_eq!(compare(b"", "other"), Ok(false));
        assert_eq!(compare(b"none", "none"), Err("hash too short: 4".to_owned()));
    }

    #[test]
    fn coders_own_hashes_compare() {
        // Made by Coder v2.30.0's userpassword.Hash("Sup3r-Secret!Pass_word") (65535 iterations).
        let hashed = "$pbkdf2-sha256$65535$TB8Wz96vbFnRPLs4DRhSUQ$4KDbY5UwWUVOUuh9TQSHDQx149h/F2Y8aQ0i6pW+kkUTM4K+bqPS+n06VpDb+BtpzC7fgilHU8Dj5YVks3KsjQ";
        assert_eq!(compare(hashed.as_bytes(), "Sup3r-Secret!Pass_word"), Ok(true));
        assert_eq!(compare(hashed.as_bytes(), "Sup3r-Secret!Pass_wore"), Ok(false));
    }

    #[test]
    fn strength_follows_the_validator() {
        assert_eq!(
            validate("short"),
            Err("insecure password, try including more special characters, using uppercase letters, using numbers \
                 or using a longer password"
                .to_owned())
        );
        assert_eq!(
            validate(""),
            Err(
                "insecure password, try including more special characters, using lowercase letters, using \
                 uppercase letters, using numbers or using a longer password"
                    .to_owned()
            )
        );
        assert_eq!(validate("Correct-Horse-Battery-9!"), Ok(()));
        assert_eq!(validate("Sup3r-Secret!Pass_word"), Ok(()));
        assert_eq!(
            validate(&"Correct-Horse-Battery-9!".repeat(3)),
            Err("password must be no more than 64 characters".to_owned())
        );
        // Sequences and repeats count for two characters at most.
        assert_eq!(length("aaaa"), 2);
        assert_eq!(length("abcdef"), 2);
        assert_eq!(length("qwerty1"), 3);
        assert_eq!(length("9876x"), 3);
        assert_eq!(base("abcdA"), 52);
        assert_eq!(base("123ü"), 11);
        assert_eq!(base("^_"), 27);
        // 16 symbols (digits, the five replace characters, the backtick, which is in no class) over 13 characters:
        // exactly 52 bits. A character of several bytes counts as several.
        assert_eq!(entropy("!0@2$4&6*8`1!"), 52.0);
        assert_eq!(length("ü"), 2);
    }
}
