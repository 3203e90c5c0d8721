//! The bearer token of `--mcp-token-file`: the file rules (one token of at least 32 bytes without whitespace, one
//! trailing newline ignored) and [`TokenFile`], which re-reads the file when it changes so a rotated token takes
//! effect without a restart, and warns once when the file becomes unusable. Errors name the file, never its content.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use subtle::ConstantTimeEq as _;

/// Minimum length of the MCP bearer token.
pub const MIN_TOKEN_BYTES: usize = 32;

/// The largest token file read; a token is far shorter, so a bigger file is refused rather than read.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The MCP bearer token. Its Debug output never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct McpToken(String);

impl McpToken {
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token, compared in constant time (no early exit on the first differing byte).
    pub fn matches(&self, presented: &[u8]) -> bool {
        bool::from(self.0.as_bytes().ct_eq(presented))
    }
}

impl fmt::Debug for McpToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("McpToken(<redacted>)")
    }
}

/// Why the token file cannot be used. The message names the file and the rule, never the content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TokenFileError(pub String);

/// Reads the token file and checks its rules.
pub fn read_token_file(path: &Path) -> Result<McpToken, TokenFileError> {
    let shown = path.display().to_string();
    let fail =
        |reason: String| TokenFileError(format!("assertion failed: --mcp-token-file {shown:?} {reason}"));
    let size = std::fs::metadata(path)
        .map_err(|error| {
            TokenFileError(format!(
                "assertion failed: read --mcp-token-file {shown:?}: {error}"
            ))
        })?
        .len();
    if size > MAX_TOKEN_FILE_BYTES {
        return Err(fail(format!("is larger than {MAX_TOKEN_FILE_BYTES} bytes")));
    }
    let content = std::fs::read(path).map_err(|error| {
        TokenFileError(format!(
            "assertion failed: read --mcp-token-file {shown:?}: {error}"
        ))
    })?;
    let content = String::from_utf8(content).map_err(|_| fail("is not UTF-8 text".to_owned()))?;
    parse_token(&content).map_err(|reason| fail(reason.to_owned()))
}

/// The token rules on the file's text; the error is the broken rule.
fn parse_token(content: &str) -> Result<McpToken, &'static str> {
    let token = content
        .strip_suffix("\r\n")
        .or_else(|| content.strip_suffix('\n'))
        .unwrap_or(content);
    if token.is_empty() {
        return Err("is empty");
    }
    if token.chars().any(char::is_whitespace) {
        return Err("contains whitespace; it must hold exactly one token");
    }
    if token.len() < MIN_TOKEN_BYTES {
        return Err("holds a token shorter than 32 bytes");
    }
    Ok(McpToken(token.to_owned()))
}

/// What identifies one version of the file: a rotation (a Secret volume swaps a symlink, an editor renames or
/// rewrites) changes at least one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl FileStamp {
    fn of(path: &Path) -> std::io::Result<Self> {
        let metadata = std::fs::metadata(path)?;
        Ok(Self {
            modified: metadata.modified().ok(),
            len: metadata.len(),
            inode: inode(&metadata),
        })
    }
}

#[cfg(unix)]
fn inode(metadata: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(metadata)
}

#[cfg(not(unix))]
fn inode(_: &std::fs::Metadata) -> u64 {
    0
}

/// The token file, checked on every request with one `stat` and re-read only when it changed (a missing file
/// counts as one state: it is not re-read until it appears). While the file is missing or breaks a rule, no token is
/// accepted (fail closed), so emptying the file revokes access; that is logged once per change of the reason, not
/// on every refused request.
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    current: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    /// The version read last; `None` when the file could not be found (or `stat` failed).
    stamp: Option<FileStamp>,
    /// That version's token, or why it cannot be used.
    token: Result<McpToken, TokenFileError>,
}

impl TokenFile {
    /// Reads the file once; a broken file is an error here (the process refuses to start).
    pub fn open(path: &Path) -> Result<Self, TokenFileError> {
        let stamp = FileStamp::of(path).ok();
        let token = read_token_file(path)?;
        Ok(Self {
            path: path.to_owned(),
            current: Mutex::new(Loaded {
                stamp,
                token: Ok(token),
            }),
        })
    }

    /// Whether `presented` is the file's current token.
    pub fn accepts(&self, presented: &[u8]) -> bool {
        let mut loaded = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let stamp = FileStamp::of(&self.path).ok();
        if stamp != loaded.stamp {
            loaded.stamp = stamp;
            let read = read_token_file(&self.path);
            self.log_change(&loaded.token, &read);
            loaded.token = read;
        }
        loaded.token.as_ref().is_ok_and(|token| token.matches(presented))
    }

    /// Logs a new token, the file becoming unusable, or a new reason why; not a version that changes nothing (a
    /// broken file rewritten with the same fault), so a broken file does not log once per request.
    fn log_change(
        &self,
        before: &Result<McpToken, TokenFileError>,
        after: &Result<McpToken, TokenFileError>,
    ) {
        if before == after {
            return;
        }
        match after {
            Ok(_) => {
                tracing::info!(path = %self.path.display(), "MCP token file changed; using the new token")
            }
            Err(error) => {
                tracing::warn!(%error, "MCP token file unusable; refusing every request until it is fixed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_file(content: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, content).unwrap();
        (dir, path)
    }

    #[test]
    fn token_file_rules() {
        let good = "a".repeat(32);
        let (_d, path) = with_file(format!("{good}\n").as_bytes());
        assert_eq!(read_token_file(&path).unwrap().expose(), good);
        let (_d, path) = with_file(format!("{good}\r\n").as_bytes());
        assert_eq!(read_token_file(&path).unwrap().expose(), good);
        let (_d, path) = with_file(b"");
        assert!(read_token_file(&path).unwrap_err().0.ends_with("is empty"));
        let (_d, path) = with_file(b"short\n");
        assert!(
            read_token_file(&path)
                .unwrap_err()
                .0
                .contains("shorter than 32 bytes")
        );
        let (_d, path) = with_file(format!("{good} {good}").as_bytes());
        assert!(read_token_file(&path).unwrap_err().0.contains("whitespace"));
        let (_d, path) = with_file(format!("{good}\n\n").as_bytes());
        assert!(read_token_file(&path).unwrap_err().0.contains("whitespace"));
        let (_d, path) = with_file(&[0xff; 40]);
        assert!(read_token_file(&path).unwrap_err().0.contains("not UTF-8"));
        let (_d, path) = with_file(&vec![b'a'; 5000]);
        assert!(
            read_token_file(&path)
                .unwrap_err()
                .0
                .contains("larger than 4096 bytes")
        );
        let missing = Path::new("/nonexistent/token");
        assert!(
            read_token_file(missing)
                .unwrap_err()
                .0
                .contains("read --mcp-token-file")
        );
    }

    #[test]
    fn the_token_never_appears_in_errors_or_debug() {
        let secret = "s3cr3t-but-short";
        let (_d, path) = with_file(secret.as_bytes());
        assert!(!read_token_file(&path).unwrap_err().0.contains(secret));
        let long = "x".repeat(40);
        let (_d, path) = with_file(long.as_bytes());
        assert!(!format!("{:?}", read_token_file(&path).unwrap()).contains(&long));
        assert!(!format!("{:?}", TokenFile::open(&path).unwrap()).contains(&long));
    }

    #[test]
    fn matches_only_the_exact_token() {
        let token = parse_token(&"k".repeat(40)).unwrap();
        assert!(token.matches("k".repeat(40).as_bytes()));
        assert!(!token.matches("k".repeat(39).as_bytes()));
        assert!(!token.matches("k".repeat(41).as_bytes()));
        assert!(!token.matches(format!("{}j", "k".repeat(39)).as_bytes()));
        assert!(!token.matches(b""));
    }

    #[test]
    fn a_rotated_file_is_used_without_reopening_and_a_broken_one_accepts_nothing() {
        let old = "o".repeat(32);
        let new = "n".repeat(48);
        let (_d, path) = with_file(old.as_bytes());
        let file = TokenFile::open(&path).unwrap();
        assert!(file.accepts(old.as_bytes()));
        // Rotation the way a Secret volume does it: a new file renamed over the old one.
        let staged = path.with_extension("new");
        std::fs::write(&staged, format!("{new}\n")).unwrap();
        std::fs::rename(&staged, &path).unwrap();
        assert!(file.accepts(new.as_bytes()));
        assert!(!file.accepts(old.as_bytes()));
        std::fs::write(&path, "").unwrap();
        assert!(!file.accepts(new.as_bytes()));
        assert!(!file.accepts(b""));
        std::fs::remove_file(&path).unwrap();
        assert!(!file.accepts(new.as_bytes()));
        std::fs::write(&path, &old).unwrap();
        assert!(file.accepts(old.as_bytes()));
    }

    /// Counts the WARN events logged while it is the default subscriber.
    struct Warnings(std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
        fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            if *event.metadata().level() == tracing::Level::WARN {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }

    #[test]
    fn a_broken_file_is_warned_about_once_per_change_not_on_every_request() {
        use tracing_subscriber::layer::SubscriberExt as _;
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let subscriber = tracing_subscriber::registry().with(Warnings(count.clone()));
        let warnings = || count.load(std::sync::atomic::Ordering::SeqCst);
        let good = "g".repeat(32);
        let (_d, path) = with_file(good.as_bytes());
        let file = TokenFile::open(&path).unwrap();
        let refuses_100_times = |presented: &str| (0..100).all(|_| !file.accepts(presented.as_bytes()));
        tracing::subscriber::with_default(subscriber, || {
            std::fs::remove_file(&path).unwrap();
            assert!(refuses_100_times(&good));
            assert_eq!(warnings(), 1, "a missing file warns once");
            std::fs::write(&path, "").unwrap();
            assert!(refuses_100_times(&good));
            assert_eq!(warnings(), 2, "missing, then empty: a new reason");
            std::fs::write(&path, "short").unwrap();
            assert!(refuses_100_times("short"));
            assert_eq!(warnings(), 3, "empty, then too short: a new reason");
            std::fs::write(&path, "shorter-still-but-longer").unwrap();
            assert!(refuses_100_times("shorter-still-but-longer"));
            assert_eq!(warnings(), 3, "rewritten with the same fault");
            let rotated = "r".repeat(40);
            std::fs::write(&path, &rotated).unwrap();
            assert!(file.accepts(rotated.as_bytes()), "a fixed file is used at once");
            std::fs::remove_file(&path).unwrap();
            assert!(refuses_100_times(&rotated));
            std::fs::write(&path, &good).unwrap();
            assert!(
                file.accepts(good.as_bytes()),
                "a file that reappears is used at once"
            );
        });
        assert_eq!(warnings(), 4);
    }
}
