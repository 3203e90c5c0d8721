//! Template source archives: `spec.files` (relative path → UTF-8 text) to a zip for Coder, a Coder zip back to
//! `spec.files`, and the merge of new text files into the current archive that keeps its binary files. Pure: no
//! I/O. Every function enforces the source limits, and reads never trust a size an archive declares.

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

/// Largest archive sent to or read from Coder.
pub const MAX_ZIP_BYTES: usize = 20 << 20;
/// Largest total size of the extracted files.
pub const MAX_EXTRACTED_BYTES: usize = 40 << 20;
/// Most files (entries) in one archive.
pub const MAX_ENTRIES: usize = 2000;
/// Largest single file.
pub const MAX_FILE_BYTES: usize = 2 << 20;

/// Why an archive or a file map was refused; the message names the path and the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveError(pub String);

impl std::fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn refuse<T>(message: String) -> Result<T, ArchiveError> {
    Err(ArchiveError(message))
}

/// The cleaned form of a source path (`a/./b//c` → `a/b/c`), or why it cannot name a file inside the archive:
/// empty, the root, absolute, or reaching a parent directory.
pub fn clean_path(path: &str) -> Result<String, ArchiveError> {
    if path.is_empty() {
        return refuse(format!(
            "validate template source path {path:?}: path must not be empty"
        ));
    }
    if path.starts_with('/') || path.starts_with('\\') {
        return refuse(format!(
            "validate template source path {path:?}: path must be relative"
        ));
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return refuse(format!(
                    "validate template source path {path:?}: path must not contain parent directory components"
                ));
            }
            part => parts.push(part),
        }
    }
    if parts.is_empty() {
        return refuse(format!(
            "validate template source path {path:?}: path must not resolve to root"
        ));
    }
    Ok(parts.join("/"))
}

/// `files` with cleaned paths; two paths that clean to the same one are refused.
pub fn normalize(files: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ArchiveError> {
    let mut normalized = BTreeMap::new();
    for (path, content) in files {
        let cleaned = clean_path(path)?;
        if normalized.insert(cleaned.clone(), content.clone()).is_some() {
            return refuse(format!("duplicate normalized template source path {cleaned:?}"));
        }
    }
    Ok(normalized)
}

/// Counts file sizes against the per-file and total limits.
#[derive(Default)]
struct Budget {
    total: usize,
}

impl Budget {
    fn take(&mut self, path: &str, size: usize) -> Result<(), ArchiveError> {
        if size > MAX_FILE_BYTES {
            return refuse(format!(
                "template source file {path:?} exceeds max file size: {size} > {MAX_FILE_BYTES}"
            ));
        }
        self.total = self.total.saturating_add(size);
        if self.total > MAX_EXTRACTED_BYTES {
            return refuse(format!(
                "template source files exceed max total size: {} > {MAX_EXTRACTED_BYTES}",
                self.total
            ));
        }
        Ok(())
    }
}

fn check_count(count: usize) -> Result<(), ArchiveError> {
    if count > MAX_ENTRIES {
        return refuse(format!(
            "template source file count exceeds limit: {count} > {MAX_ENTRIES}"
        ));
    }
    Ok(())
}

fn check_zip_size(size: usize) -> Result<(), ArchiveError> {
    if size > MAX_ZIP_BYTES {
        return refuse(format!(
            "template source zip exceeds max size: {size} > {MAX_ZIP_BYTES}"
        ));
    }
    Ok(())
}

/// One file of an archive that was read: its cleaned path and its bytes.
struct Entry {
    path: String,
    bytes: Vec<u8>,
    /// Its index in the archive, to copy it unchanged.
    index: usize,
}

fn open(archive: &[u8]) -> Result<ZipArchive<Cursor<&[u8]>>, ArchiveError> {
    check_zip_size(archive.len())?;
    let zip = ZipArchive::new(Cursor::new(archive))
        .map_err(|e| ArchiveError(format!("open template source zip: {e}")))?;
    if zip.len() > MAX_ENTRIES {
        return refuse(format!(
            "template source zip contains too many entries: {} > {MAX_ENTRIES}",
            zip.len()
        ));
    }
    Ok(zip)
}

/// Every file of `archive` (directories skipped) whose cleaned path `keep` accepts, read within the limits. A
/// declared size is checked first, and the bytes are read with a cap, so a lying header cannot exhaust memory.
fn read_entries(
    archive: &[u8],
    mut keep: impl FnMut(&str) -> bool,
    budget: &mut Budget,
) -> Result<Vec<Entry>, ArchiveError> {
    let mut zip = open(archive)?;
    let mut entries = Vec::new();
    for index in 0..zip.len() {
        let mut file = zip
            .by_index(index)
            .map_err(|e| ArchiveError(format!("open template source zip entry {index}: {e}")))?;
        if file.is_dir() {
            continue;
        }
        let raw_name = file
            .name()
            .map_err(|e| ArchiveError(format!("read the name of template source zip entry {index}: {e}")))?;
        let path = clean_path(&raw_name)?;
        if !keep(&path) {
            continue;
        }
        let declared = usize::try_from(file.size()).unwrap_or(usize::MAX);
        budget.take(&path, declared)?;
        let mut bytes = Vec::new();
        let cap = u64::try_from(MAX_FILE_BYTES + 1).unwrap_or(u64::MAX);
        (&mut file)
            .take(cap)
            .read_to_end(&mut bytes)
            .map_err(|e| ArchiveError(format!("read template source file {path:?}: {e}")))?;
        if bytes.len() > MAX_FILE_BYTES {
            return refuse(format!(
                "template source file {path:?} exceeds max file size: {} > {MAX_FILE_BYTES}",
                bytes.len()
            ));
        }
        // The declared size was counted; correct the total by what was really read.
        budget.total = budget.total.saturating_sub(declared);
        budget.take(&path, bytes.len())?;
        entries.push(Entry { path, bytes, index });
    }
    Ok(entries)
}

/// The UTF-8 files of `archive` as `spec.files`; binary files are left out (they are kept by [`merge`]).
pub fn text_files(archive: &[u8]) -> Result<BTreeMap<String, String>, ArchiveError> {
    let entries = read_entries(archive, |_| true, &mut Budget::default())?;
    Ok(entries
        .into_iter()
        .filter_map(|e| String::from_utf8(e.bytes).ok().map(|text| (e.path, text)))
        .collect())
}

fn options() -> SimpleFileOptions {
    SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .unix_permissions(0o644)
}

fn write_error(e: impl std::fmt::Display) -> ArchiveError {
    ArchiveError(format!("write template source zip: {e}"))
}

/// Checks text files against the limits (adding to `budget`).
fn check_text(files: &BTreeMap<String, String>, budget: &mut Budget) -> Result<(), ArchiveError> {
    for (path, content) in files {
        budget.take(path, content.len())?;
    }
    Ok(())
}

fn add_text(writer: &mut ZipWriter<Cursor<Vec<u8>>>, path: &str, content: &str) -> Result<(), ArchiveError> {
    writer.start_file(path, options()).map_err(write_error)?;
    writer.write_all(content.as_bytes()).map_err(write_error)
}

fn finish(writer: ZipWriter<Cursor<Vec<u8>>>) -> Result<Vec<u8>, ArchiveError> {
    let bytes = writer.finish().map_err(write_error)?.into_inner();
    check_zip_size(bytes.len())?;
    Ok(bytes)
}

/// A deflated zip of `files` (paths cleaned, sorted), within the limits.
pub fn build(files: &BTreeMap<String, String>) -> Result<Vec<u8>, ArchiveError> {
    check_count(files.len())?;
    let files = normalize(files)?;
    check_text(&files, &mut Budget::default())?;
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    for (path, content) in &files {
        add_text(&mut writer, path, content)?;
    }
    finish(writer)
}

/// A zip of the new text `files` plus every binary (non-UTF-8) file of `current` that `files` does not name,
/// copied unchanged (its header and compressed bytes). Text files of `current` that `files` leaves out are
/// dropped: `spec.files` holds every text file.
pub fn merge(current: &[u8], files: &BTreeMap<String, String>) -> Result<Vec<u8>, ArchiveError> {
    check_count(files.len())?;
    let files = normalize(files)?;
    let mut budget = Budget::default();
    let kept: Vec<Entry> = read_entries(current, |path| !files.contains_key(path), &mut budget)?
        .into_iter()
        .filter(|e| std::str::from_utf8(&e.bytes).is_err())
        .collect();
    // Only the kept binary files count against the total, with the new text files.
    budget = Budget::default();
    for entry in &kept {
        budget.take(&entry.path, entry.bytes.len())?;
    }
    check_text(&files, &mut budget)?;
    check_count(files.len() + kept.len())?;
    let mut source = open(current)?;
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    let mut kept = kept.into_iter().peekable();
    let mut text = files.iter().peekable();
    // Both lists are sorted by path: write them interleaved so the archive is sorted too.
    loop {
        let take_binary = match (kept.peek(), text.peek()) {
            (None, None) => break,
            (Some(binary), Some((path, _))) => binary.path.as_str() < path.as_str(),
            (Some(_), None) => true,
            (None, Some(_)) => false,
        };
        if take_binary {
            if let Some(entry) = kept.next() {
                let file = source.by_index_raw(entry.index).map_err(write_error)?;
                writer
                    .raw_copy_file_rename(file, &entry.path)
                    .map_err(write_error)?;
            }
        } else if let Some((path, content)) = text.next() {
            add_text(&mut writer, path, content)?;
        }
    }
    finish(writer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(p, c)| ((*p).to_owned(), (*c).to_owned()))
            .collect()
    }

    /// A zip with raw byte entries (binary ones too), stored without compression.
    fn raw_zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
        for (path, bytes) in entries {
            writer
                .start_file(
                    *path,
                    SimpleFileOptions::default().compression_method(CompressionMethod::Stored),
                )
                .unwrap();
            writer.write_all(bytes).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    fn message<T: std::fmt::Debug>(result: Result<T, ArchiveError>) -> String {
        result.unwrap_err().0
    }

    #[test]
    fn paths_are_cleaned_and_escapes_refused() {
        assert_eq!(clean_path("a/./b//c.tf").unwrap(), "a/b/c.tf");
        assert_eq!(clean_path("main.tf/").unwrap(), "main.tf");
        assert!(message(clean_path("")).ends_with("path must not be empty"));
        assert!(message(clean_path("/etc/passwd")).ends_with("path must be relative"));
        assert!(message(clean_path("a/../../x")).ends_with("parent directory components"));
        assert!(message(clean_path("./.")).ends_with("path must not resolve to root"));
        assert_eq!(
            message(normalize(&files(&[("a//b", "1"), ("a/b", "2")]))),
            "duplicate normalized template source path \"a/b\""
        );
    }

    #[test]
    fn a_built_archive_reads_back_to_the_same_files() {
        let source = files(&[("main.tf", "terraform {}\n"), ("modules/x/ü.tf", "# ü\n")]);
        let zip = build(&source).unwrap();
        assert_eq!(text_files(&zip).unwrap(), source);
        assert_eq!(&zip[..4], b"PK\x03\x04");
    }

    #[test]
    fn the_per_file_limit_holds_at_its_boundary() {
        let at_limit = "a".repeat(MAX_FILE_BYTES);
        assert!(build(&files(&[("big.tf", &at_limit)])).is_ok());
        let over = "a".repeat(MAX_FILE_BYTES + 1);
        assert_eq!(
            message(build(&files(&[("big.tf", &over)]))),
            format!(
                "template source file \"big.tf\" exceeds max file size: {} > {MAX_FILE_BYTES}",
                MAX_FILE_BYTES + 1
            )
        );
    }

    #[test]
    fn the_entry_limit_holds_at_its_boundary() {
        let many = |n: usize| {
            (0..n)
                .map(|i| (format!("f{i}.tf"), String::new()))
                .collect::<BTreeMap<_, _>>()
        };
        let zip = build(&many(MAX_ENTRIES)).unwrap();
        assert_eq!(text_files(&zip).unwrap().len(), MAX_ENTRIES);
        assert_eq!(
            message(build(&many(MAX_ENTRIES + 1))),
            "template source file count exceeds limit: 2001 > 2000"
        );
    }

    #[test]
    fn the_extracted_total_holds_at_its_boundary() {
        let file = "a".repeat(MAX_FILE_BYTES);
        let twenty = (0..20)
            .map(|i| (format!("f{i}"), file.clone()))
            .collect::<BTreeMap<_, _>>();
        assert_eq!(
            twenty.values().map(String::len).sum::<usize>(),
            MAX_EXTRACTED_BYTES
        );
        let zip = build(&twenty).unwrap();
        assert_eq!(text_files(&zip).unwrap().len(), 20);
        let mut over = twenty;
        over.insert("one-more".into(), "b".into());
        assert_eq!(
            message(build(&over)),
            format!(
                "template source files exceed max total size: {} > {MAX_EXTRACTED_BYTES}",
                MAX_EXTRACTED_BYTES + 1
            )
        );
    }

    #[test]
    fn the_zip_size_limit_is_checked_on_reads_and_writes() {
        assert_eq!(
            message(text_files(&vec![0u8; MAX_ZIP_BYTES + 1])),
            format!(
                "template source zip exceeds max size: {} > {MAX_ZIP_BYTES}",
                MAX_ZIP_BYTES + 1
            )
        );
        assert!(check_zip_size(MAX_ZIP_BYTES).is_ok());
        assert!(message(text_files(b"not a zip")).starts_with("open template source zip"));
    }

    #[test]
    fn reads_refuse_archives_over_the_limits() {
        let big = vec![b'a'; MAX_FILE_BYTES + 1];
        assert!(message(text_files(&raw_zip(&[("big", &big)]))).contains("exceeds max file size"));
        assert!(message(text_files(&raw_zip(&[("../evil", b"x")]))).contains("parent directory"));
    }

    #[test]
    fn text_files_leave_binary_files_out() {
        let zip = raw_zip(&[
            ("main.tf", b"ok"),
            ("logo.png", &[0x89, 0x50, 0xff, 0xfe]),
            ("dir/", b""),
        ]);
        assert_eq!(text_files(&zip).unwrap(), files(&[("main.tf", "ok")]));
    }

    #[test]
    fn a_merge_keeps_binary_files_and_replaces_text_files() {
        let png: &[u8] = &[0x89, 0x50, 0x4e, 0x47, 0xff, 0x00];
        let current = raw_zip(&[
            ("a.bin", png),
            ("main.tf", b"old"),
            ("old.tf", b"dropped"),
            ("z.bin", &[0xff]),
        ]);
        let merged = merge(&current, &files(&[("main.tf", "new"), ("b.tf", "added")])).unwrap();
        assert_eq!(
            text_files(&merged).unwrap(),
            files(&[("b.tf", "added"), ("main.tf", "new")])
        );
        let mut archive = ZipArchive::new(Cursor::new(&merged[..])).unwrap();
        let names: Vec<String> = (0..archive.len())
            .map(|i| archive.by_index(i).unwrap().name().unwrap().into_owned())
            .collect();
        assert_eq!(names, ["a.bin", "b.tf", "main.tf", "z.bin"]);
        let mut kept = Vec::new();
        archive.by_name("a.bin").unwrap().read_to_end(&mut kept).unwrap();
        assert_eq!(kept, png);
    }

    #[test]
    fn a_text_file_replaces_a_binary_file_of_the_same_path() {
        let current = raw_zip(&[("logo.txt", &[0xff, 0xfe])]);
        let merged = merge(&current, &files(&[("logo.txt", "now text")])).unwrap();
        assert_eq!(text_files(&merged).unwrap(), files(&[("logo.txt", "now text")]));
        let archive = ZipArchive::new(Cursor::new(&merged[..])).unwrap();
        assert_eq!(archive.len(), 1);
    }

    #[test]
    fn a_merge_counts_kept_binary_files_against_the_limits() {
        let binary = vec![0xffu8; 16];
        let entries: Vec<(String, Vec<u8>)> = (0..MAX_ENTRIES)
            .map(|i| (format!("b{i}.bin"), binary.clone()))
            .collect();
        let borrowed: Vec<(&str, &[u8])> = entries.iter().map(|(p, b)| (p.as_str(), b.as_slice())).collect();
        let current = raw_zip(&borrowed);
        assert!(merge(&current, &BTreeMap::new()).is_ok());
        assert_eq!(
            message(merge(&current, &files(&[("main.tf", "x")]))),
            "template source file count exceeds limit: 2001 > 2000"
        );
    }
}
