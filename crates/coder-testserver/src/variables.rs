//! Template variables as Coder's Terraform provisioner finds them: the `variable` blocks of the `.tf` files at the
//! root of a version's archive (tar or zip), and the values an import stores for them (the request's
//! `user_variable_values`, else the default; a required variable without a value fails the import with
//! `REQUIRED_TEMPLATE_VARIABLES`). The scanner reads the attributes Coder stores (`type`, `description`,
//! `default`, `sensitive`) from plain HCL; it is not a full HCL parser.

use std::io::Read;

use crate::state::VersionVariable;

/// Coder's error code of an import that lacks values for required variables.
pub(crate) const REQUIRED_VARIABLES_CODE: &str = "REQUIRED_TEMPLATE_VARIABLES";

/// What an import of an archive stores: the variables with their values, or the job error naming the required
/// variables without a value.
pub(crate) fn import(
    content_type: &str,
    archive: &[u8],
    values: &[(String, String)],
) -> Result<Vec<VersionVariable>, String> {
    let mut variables = declared(content_type, archive);
    let mut missing = Vec::new();
    for variable in &mut variables {
        variable.value = values
            .iter()
            .find(|(name, _)| *name == variable.name)
            .map_or_else(|| variable.default_value.clone(), |(_, value)| value.clone());
        if variable.required && variable.value.is_empty() {
            missing.push(variable.name.clone());
        }
    }
    if missing.is_empty() {
        Ok(variables)
    } else {
        Err(format!(
            "update job: required template variables need values: {}",
            missing.join(", ")
        ))
    }
}

/// The variables declared by the root `.tf` files of `archive`, in file and then declaration order. An archive
/// that cannot be read declares none.
pub(crate) fn declared(content_type: &str, archive: &[u8]) -> Vec<VersionVariable> {
    let entries = if content_type == "application/zip" {
        zip_entries(archive)
    } else {
        tar_entries(archive)
    };
    let mut roots: Vec<(String, String)> = entries
        .into_iter()
        .filter(|(name, _)| {
            let name = name.trim_start_matches("./");
            name.ends_with(".tf") && !name.contains('/')
        })
        .filter_map(|(name, bytes)| String::from_utf8(bytes).ok().map(|text| (name, text)))
        .collect();
    roots.sort();
    roots.iter().flat_map(|(_, text)| scan(text)).collect()
}

pub(crate) fn zip_entries(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    let Ok(mut zip) = zip::ZipArchive::new(std::io::Cursor::new(archive)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for index in 0..zip.len() {
        let Ok(mut file) = zip.by_index(index) else {
            continue;
        };
        let Ok(name) = file.name().map(|n| n.into_owned()) else {
            continue;
        };
        let mut bytes = Vec::new();
        if file.is_file() && file.read_to_end(&mut bytes).is_ok() {
            out.push((name, bytes));
        }
    }
    out
}

/// The regular files of a ustar archive.
pub(crate) fn tar_entries(tar: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(header) = tar.get(at..at + 512) {
        if header.iter().all(|b| *b == 0) {
            break;
        }
        let text = |range: std::ops::Range<usize>| {
            String::from_utf8_lossy(&header[range])
                .trim_matches(char::from(0))
                .trim()
                .to_owned()
        };
        let Ok(size) = usize::from_str_radix(&text(124..136), 8) else {
            break;
        };
        let prefix = text(345..500);
        let name = match (prefix.is_empty(), text(0..100)) {
            (true, name) => name,
            (false, name) => format!("{prefix}/{name}"),
        };
        let start = at + 512;
        let Some(content) = tar.get(start..start + size) else {
            break;
        };
        if matches!(header[156], b'0' | 0) {
            out.push((name, content.to_vec()));
        }
        at = start + size.div_ceil(512) * 512;
    }
    out
}

/// The `variable "<name>" { ... }` blocks of one file.
fn scan(text: &str) -> Vec<VersionVariable> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(found) = next_block(rest) {
        let (name, body, after) = found;
        out.push(variable(name, body));
        rest = after;
    }
    out
}

/// The next variable block: its name, its body and the text after it.
fn next_block(text: &str) -> Option<(&str, &str, &str)> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(after_keyword) = trimmed.strip_prefix("variable")
            && let Some(quoted) = after_keyword.trim_start().strip_prefix('"')
            && let Some(end) = quoted.find('"')
        {
            let name = &quoted[..end];
            let block_start = offset + (line.len() - trimmed.len());
            let open = text[block_start..].find('{')? + block_start;
            let close = matching_brace(text, open)?;
            return Some((name, &text[open + 1..close], &text[close + 1..]));
        }
        offset += line.len();
    }
    None
}

/// The index of the `}` that closes the `{` at `open`, skipping braces inside strings.
pub(crate) fn matching_brace(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (index, ch) in text[open..].char_indices() {
        match (in_string, ch) {
            (true, '\\') if !escaped => {
                escaped = true;
                continue;
            }
            (true, '"') if !escaped => in_string = false,
            (false, '"') => in_string = true,
            (false, '{') => depth += 1,
            (false, '}') => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + index);
                }
            }
            _ => {}
        }
        escaped = false;
    }
    None
}

fn variable(name: &str, body: &str) -> VersionVariable {
    let mut variable = VersionVariable {
        name: name.to_owned(),
        description: String::new(),
        type_: String::new(),
        default_value: String::new(),
        required: true,
        sensitive: false,
        value: String::new(),
    };
    for line in body.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = literal(value.trim());
        match key.trim() {
            "type" => variable.type_ = value,
            "description" => variable.description = value,
            "sensitive" => variable.sensitive = value == "true",
            "default" if value != "null" => {
                variable.default_value = value;
                variable.required = false;
            }
            _ => {}
        }
    }
    variable
}

/// A quoted HCL string without its quotes and escapes; any other value as written.
pub(crate) fn literal(value: &str) -> String {
    let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return value.to_owned();
    };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(ch) = chars.next() {
        match (ch, chars.clone().next()) {
            ('\\', Some('n')) => {
                out.push('\n');
                chars.next();
            }
            ('\\', Some(next)) => {
                out.push(next);
                chars.next();
            }
            _ => out.push(ch),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const SOURCE: &str = r#"
terraform {}

variable "region" {
  type        = string
  description = "Where { it } runs"
  default     = "eu-west"
}

variable "db_password" {
  type      = string
  sensitive = true
}
"#;

    fn zip(entries: &[(&str, &str)]) -> Vec<u8> {
        use std::io::Write;
        let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, text) in entries {
            writer
                .start_file(*name, zip::write::SimpleFileOptions::default())
                .unwrap();
            writer.write_all(text.as_bytes()).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    #[test]
    fn root_tf_files_declare_the_variables() {
        let archive = zip(&[
            ("main.tf", SOURCE),
            ("modules/app/x.tf", "variable \"nested\" {}\n"),
            ("README.md", "variable \"readme\" {}\n"),
        ]);
        let found = declared("application/zip", &archive);
        let names: Vec<&str> = found.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["region", "db_password"]);
        assert_eq!(found[0].description, "Where { it } runs");
        assert_eq!(
            (found[0].default_value.as_str(), found[0].required),
            ("eu-west", false)
        );
        assert_eq!((found[1].required, found[1].sensitive), (true, true));
        assert_eq!(found[1].type_, "string");
    }

    #[test]
    fn an_import_uses_the_given_values_and_fails_without_required_ones() {
        let archive = zip(&[("main.tf", SOURCE)]);
        let error = import("application/zip", &archive, &[]).unwrap_err();
        assert_eq!(
            error,
            "update job: required template variables need values: db_password"
        );
        let values = [
            ("db_password".to_owned(), "hunter2".to_owned()),
            ("unknown".to_owned(), "x".to_owned()),
        ];
        let stored = import("application/zip", &archive, &values).unwrap();
        assert_eq!(stored.len(), 2);
        assert_eq!(stored[0].value, "eu-west");
        assert_eq!(stored[1].value, "hunter2");
    }

    #[test]
    fn an_unreadable_archive_declares_nothing() {
        assert!(declared("application/zip", b"not a zip").is_empty());
        assert!(declared("application/x-tar", &[1u8; 100]).is_empty());
    }
}
