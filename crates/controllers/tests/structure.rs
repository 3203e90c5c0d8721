//! The shape rules of this crate, checked on its own sources so they stay true: no function is longer than 60
//! lines, no two files import each other (directly or around a circle), and no step nests one `Result` in another
//! (a step stops with `Halt`, see `src/halt.rs`). The checks read the sources as rustfmt writes them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest a function of the crate may be, in lines from its signature to its closing brace.
const MAX_FUNCTION_LINES: usize = 60;

/// A source file: its module path (`["control_plane", "reconcile"]`; empty for `lib.rs`) and its text.
struct Source {
    path: PathBuf,
    module: Vec<String>,
    text: String,
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    let found: Vec<Source> = files
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(&root).unwrap().with_extension("");
            let mut module: Vec<String> = relative
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            Source { path, module, text }
        })
        .collect();
    assert!(
        found.len() > 40,
        "the crate's sources were not found under {}",
        root.display()
    );
    found
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// Every function as (name, first line, length in lines): from a line that starts a function to the line that
/// closes it at the same indentation.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let Some(name) = function_name(trimmed) else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue; // a declaration without a body (a trait method)
        }
        let closing = format!("{}}}", " ".repeat(indent));
        let end = lines[start..]
            .iter()
            .position(|l| {
                l.trim_end() == closing || (l.starts_with(&closing) && l.trim_end().len() <= indent + 2)
            })
            .map_or(start, |offset| start + offset);
        found.push((name, start + 1, end - start + 1));
    }
    found
}

/// The name of the function a trimmed line starts, if it starts one.
fn function_name(trimmed: &str) -> Option<String> {
    let mut words = trimmed.split_whitespace().peekable();
    while let Some(word) = words.peek() {
        if word.starts_with("pub") || ["async", "const", "unsafe", "extern"].contains(word) {
            words.next();
        } else {
            break;
        }
    }
    if words.next()? != "fn" {
        return None;
    }
    let name: String = words
        .next()?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

#[test]
fn no_function_is_longer_than_sixty_lines() {
    let mut long = Vec::new();
    let mut counted = 0;
    for source in sources() {
        for (name, line, length) in functions(&source.text) {
            counted += 1;
            if length > MAX_FUNCTION_LINES {
                long.push(format!(
                    "{}:{line} {name} ({length} lines)",
                    source.path.display()
                ));
            }
        }
    }
    assert!(
        counted > 500,
        "only {counted} functions found: the scan is broken"
    );
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_function_scan_measures_bodies() {
    let text = "fn short() {\n    one();\n}\n\npub(crate) async fn long(\n    a: u8,\n) -> u8 {\n    a\n}\n";
    assert_eq!(
        functions(text),
        [("short".to_owned(), 1, 3), ("long".to_owned(), 5, 5)]
    );
}

/// The module paths a file refers to (`crate::…`, `super::…`, `self::…`, and a child module's name, in `use`
/// declarations and in code), resolved against the file's own module path among the crate's `modules`. Inside the
/// file's `mod tests`, `super` is the file itself.
fn references(source: &Source, modules: &BTreeSet<Vec<String>>) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut in_tests = false;
    for line in source.text.lines() {
        if line.starts_with("mod tests {") || line.starts_with("pub(super) mod tests {") {
            in_tests = true;
        }
        let code = line.split("//").next().unwrap_or_default();
        for path in paths(code) {
            let child = [source.module.clone(), vec![path[0].clone()]].concat();
            let resolved = match path[0].as_str() {
                "crate" | "super" | "self" => resolve(&source.module, &path, in_tests),
                _ if modules.contains(&child) => Some([source.module.clone(), path.clone()].concat()),
                _ => None,
            };
            found.extend(resolved);
        }
    }
    let trees = use_trees(&source.text);
    found.extend(
        trees
            .into_iter()
            .filter_map(|path| resolve(&source.module, &path, false)),
    );
    found
}

/// The paths of two or more segments written in one line of code (`a::b`, `crate::a::B`).
fn paths(code: &str) -> Vec<Vec<String>> {
    let is_path = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    let mut found = Vec::new();
    for (index, _) in code.match_indices("::") {
        let start = code[..index].rfind(|c: char| !is_path(c)).map_or(0, |i| i + 1);
        let path: String = code[start..].chars().take_while(|c| is_path(*c)).collect();
        let segments: Vec<String> = path
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if segments.len() > 1 && !found.contains(&segments) {
            found.push(segments);
        }
    }
    found
}

/// The expanded paths of the `use` declarations that group names in braces (`use super::{coder, inputs};`).
fn use_trees(text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("\nuse ").or_else(|| rest.find("\npub use ")) {
        let declaration = &rest[start + 1..];
        let end = declaration.find(';').unwrap_or(declaration.len());
        let tree: String = declaration[..end]
            .trim_start_matches("pub ")
            .trim_start_matches("use ")
            .split_whitespace()
            .collect();
        if tree.contains('{') {
            expand("", &tree, &mut found);
        }
        rest = &declaration[end..];
    }
    found
}

fn expand(prefix: &str, tree: &str, out: &mut Vec<Vec<String>>) {
    let Some(open) = tree.find('{') else {
        let path = format!("{prefix}{}", tree.split(" as ").next().unwrap_or(tree));
        out.push(
            path.split("::")
                .filter(|s| !s.is_empty() && *s != "self")
                .map(str::to_owned)
                .collect(),
        );
        return;
    };
    let head = format!("{prefix}{}", &tree[..open]);
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut depth = 0;
    let mut part = String::new();
    for c in inner.chars().chain(std::iter::once(',')) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            if !part.trim().is_empty() {
                expand(&head, part.trim(), out);
            }
            part.clear();
        } else {
            part.push(c);
        }
    }
}

/// A path written in module `module` as an absolute module path; `None` for paths outside the crate.
fn resolve(module: &[String], path: &[String], in_tests: bool) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.to_vec();
    let mut segments = path.iter().peekable();
    match segments.peek()?.as_str() {
        "crate" => {
            base.clear();
            segments.next();
        }
        "self" => {
            segments.next();
        }
        "super" => {
            let mut first = true;
            while segments.peek().is_some_and(|s| *s == "super") {
                segments.next();
                // The first `super` of a test module names the file itself.
                if !(first && in_tests) {
                    base.pop()?;
                }
                first = false;
            }
        }
        _ => return None,
    }
    base.extend(segments.cloned());
    Some(base)
}

/// The import graph between files: an edge from each file to every other file whose module it refers to (the
/// longest module path a reference starts with).
fn graph(sources: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeMap<Vec<String>, String> = sources
        .iter()
        .map(|s| (s.module.clone(), s.path.display().to_string()))
        .collect();
    let known: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    let mut edges = BTreeMap::new();
    for source in sources {
        let from = source.path.display().to_string();
        let targets: &mut BTreeSet<String> = edges.entry(from.clone()).or_default();
        for reference in references(source, &known) {
            let target = (0..=reference.len())
                .rev()
                .find_map(|len| modules.get(&reference[..len]))
                .cloned();
            if let Some(target) = target.filter(|t| *t != from) {
                targets.insert(target);
            }
        }
    }
    edges
}

/// The circles of the graph: every strongly connected set of more than one file.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reaches = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(node) = todo.pop() {
            for next in edges.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> = edges.keys().map(|node| (node, reaches(node))).collect();
    let mut found: Vec<Vec<String>> = Vec::new();
    for (node, reached) in &reach {
        let circle: Vec<String> = reached
            .iter()
            .filter(|other| reach.get(other).is_some_and(|back| back.contains(*node)))
            .cloned()
            .collect();
        if !circle.is_empty() && !found.iter().any(|c| c.contains(node)) {
            found.push(circle);
        }
    }
    found
}

#[test]
fn no_two_files_import_each_other() {
    let sources = sources();
    let edges = graph(&sources);
    let count: usize = edges.values().map(BTreeSet::len).sum();
    assert!(count > 200, "only {count} imports found: the scan is broken");
    let circles = circles(&edges);
    assert!(circles.is_empty(), "import circles:\n{circles:#?}");
}

#[test]
fn the_import_scan_finds_a_circle() {
    let source = |path: &str, module: &[&str], text: &str| Source {
        path: PathBuf::from(path),
        module: module.iter().map(|s| (*s).to_owned()).collect(),
        text: text.to_owned(),
    };
    let sources = [
        source("lib.rs", &[], "pub mod a;\npub mod b;\n"),
        source(
            "a/mod.rs",
            &["a"],
            "use crate::b::Thing;\npub mod c;\nfn f() { c::go(); }\n",
        ),
        source("a/c.rs", &["a", "c"], "\nuse super::{x, y};\n"),
        source(
            "b.rs",
            &["b"],
            "fn f() { crate::a::c::go(); }\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
    ];
    let edges = graph(&sources);
    assert_eq!(
        edges["a/mod.rs"],
        BTreeSet::from(["b.rs".to_owned(), "a/c.rs".to_owned()]),
        "a child module named in code"
    );
    assert_eq!(edges["a/c.rs"], BTreeSet::from(["a/mod.rs".to_owned()]));
    assert_eq!(
        edges["b.rs"],
        BTreeSet::from(["a/c.rs".to_owned()]),
        "a test's `super` is its file"
    );
    let found = circles(&edges);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 3, "a/mod.rs → b.rs → a/c.rs → a/mod.rs");
}

/// The return types of every function signature, with white space folded.
fn return_types(text: &str) -> Vec<String> {
    let folded: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    folded
        .match_indices(") -> ")
        .map(|(index, _)| {
            let rest = &folded[index + 5..];
            let end = rest.find(['{', ';']).unwrap_or(rest.len());
            let end = rest[..end].find(" where ").unwrap_or(end);
            rest[..end].trim().to_owned()
        })
        .collect()
}

#[test]
fn no_step_nests_one_result_in_another() {
    let mut nested = Vec::new();
    let mut signatures = 0;
    for source in sources() {
        for returned in return_types(&source.text) {
            signatures += 1;
            if returned.matches("Result<").count() > 1 {
                nested.push(format!("{}: -> {returned}", source.path.display()));
            }
        }
        for pattern in ["Ok(Err(", "Err(Ok(", "Ok(Ok("] {
            if source.text.contains(pattern) {
                nested.push(format!("{}: {pattern}", source.path.display()));
            }
        }
    }
    assert!(
        signatures > 400,
        "only {signatures} signatures found: the scan is broken"
    );
    assert!(nested.is_empty(), "nested results:\n{}", nested.join("\n"));
}

#[test]
fn the_result_scan_sees_a_nested_result() {
    let text = "async fn f(\n    a: u8,\n) -> Result<std::result::Result<u8, String>, Error> {\n";
    assert_eq!(return_types(text)[0].matches("Result<").count(), 2);
}
