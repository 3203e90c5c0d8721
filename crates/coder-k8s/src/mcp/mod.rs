//! The MCP server (`--app=mcp-http`). Built so far: the bearer-token file rules checked at startup. The MCP tools
//! and the HTTP transport are not built yet.

use std::fmt;
use std::path::Path;

use crate::cli::StartupError;

/// Minimum length of the MCP bearer token.
pub const MIN_TOKEN_BYTES: usize = 32;

/// The MCP bearer token. Its Debug output never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct McpToken(String);

impl McpToken {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for McpToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("McpToken(<redacted>)")
    }
}

/// Reads `--mcp-token-file`: one token of at least 32 bytes without whitespace; one trailing newline is ignored.
/// Errors name the file, never its content.
pub fn read_token_file(path: Option<&Path>) -> Result<McpToken, StartupError> {
    let path = path.ok_or_else(|| {
        StartupError("assertion failed: --mcp-token-file is required for --app=mcp-http".to_owned())
    })?;
    let shown = path.display();
    let content = std::fs::read(path).map_err(|error| {
        StartupError(format!(
            "assertion failed: read --mcp-token-file {:?}: {error}",
            shown.to_string()
        ))
    })?;
    let content = String::from_utf8(content).map_err(|_| {
        StartupError(format!(
            "assertion failed: --mcp-token-file {:?} is not UTF-8 text",
            shown.to_string()
        ))
    })?;
    let token = content
        .strip_suffix("\r\n")
        .or_else(|| content.strip_suffix('\n'))
        .unwrap_or(&content);
    let fail = |reason: &str| {
        StartupError(format!(
            "assertion failed: --mcp-token-file {:?} {reason}",
            shown.to_string()
        ))
    };
    if token.is_empty() {
        return Err(fail("is empty"));
    }
    if token.chars().any(char::is_whitespace) {
        return Err(fail("contains whitespace; it must hold exactly one token"));
    }
    if token.len() < MIN_TOKEN_BYTES {
        return Err(fail(&format!(
            "holds a token shorter than {MIN_TOKEN_BYTES} bytes"
        )));
    }
    Ok(McpToken(token.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_file(content: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, content).unwrap();
        (dir, path)
    }

    #[test]
    fn token_file_rules() {
        let good = "a".repeat(32);
        let (_d, path) = with_file(format!("{good}\n").as_bytes());
        assert_eq!(read_token_file(Some(&path)).unwrap().expose(), good);
        let (_d, path) = with_file(good.as_bytes());
        assert!(read_token_file(Some(&path)).is_ok());

        assert!(
            read_token_file(None)
                .unwrap_err()
                .0
                .contains("--mcp-token-file is required")
        );
        let (_d, path) = with_file(b"");
        assert!(read_token_file(Some(&path)).unwrap_err().0.ends_with("is empty"));
        let (_d, path) = with_file(b"short\n");
        assert!(
            read_token_file(Some(&path))
                .unwrap_err()
                .0
                .contains("shorter than 32 bytes")
        );
        let (_d, path) = with_file(format!("{good} {good}").as_bytes());
        assert!(read_token_file(Some(&path)).unwrap_err().0.contains("whitespace"));
        let (_d, path) = with_file(format!("{good}\n\n").as_bytes());
        assert!(read_token_file(Some(&path)).unwrap_err().0.contains("whitespace"));
        let missing = std::path::Path::new("/nonexistent/token");
        assert!(
            read_token_file(Some(missing))
                .unwrap_err()
                .0
                .contains("read --mcp-token-file")
        );
    }

    #[test]
    fn token_never_appears_in_errors_or_debug() {
        let secret = "s3cr3t-but-short";
        let (_d, path) = with_file(secret.as_bytes());
        let error = read_token_file(Some(&path)).unwrap_err().0;
        assert!(!error.contains(secret));
        let long = "x".repeat(40);
        let (_d, path) = with_file(long.as_bytes());
        assert!(!format!("{:?}", read_token_file(Some(&path)).unwrap()).contains(&long));
    }
}
