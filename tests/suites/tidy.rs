//! The tree's house rules (issue 65: rooms a newcomer can live in), checked on the files
//! themselves: every source file opens with a `//!` module doc; no source file is over 600
//! lines; the boundary holds (the front end — `api`, `store`, `cli`, `bench`, the binary —
//! reaches the core only through `engine`, and the core never imports the front end or its
//! async and database crates); no file glob-imports another module; sibling modules import
//! each other one way (no circles); and the three documents
//! a newcomer reads first fit on a page.
//! ARCHITECTURE.md states these rules; this file is what keeps them true.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The most lines a source file may have.
const MAX_LINES: usize = 600;

/// The front end: it talks to the core through `engine` only.
const FRONT_END: [&str; 4] = ["api", "store", "cli", "bench"];
/// The core modules the front end must not name directly.
const BEHIND_ENGINE: [&str; 5] = ["synth", "ten", "baselines", "bounds", "limits"];
/// The pure core: no front end, no async runtime, no web server, no database.
const CORE: [&str; 10] =
    ["topology", "collective", "ten", "synth", "baselines", "schedule", "validate", "sim", "bounds", "limits"];
/// What the core must not import: the front end's modules (and `engine` above it)…
const ABOVE_CORE: [&str; 5] = ["engine", "api", "store", "cli", "bench"];
/// …and the crates that belong to the edges.
const EDGE_CRATES: [&str; 3] = ["tokio", "axum", "sqlx"];

/// (document, most lines)
const DOCS: [(&str, usize); 3] = [("README.md", 300), ("docs/BENCHMARKS.md", 800), ("ARCHITECTURE.md", 250)];
/// The widest table cell ARCHITECTURE.md may have, in characters.
const MAX_CELL: usize = 600;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A path relative to the repository, for messages.
fn shown(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", shown(p)))
}

/// Every `.rs` file at or beneath `p` (a directory or one file), into `out`.
fn collect(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        let entries = fs::read_dir(p).unwrap_or_else(|e| panic!("cannot list {}: {e}", shown(p)));
        for entry in entries {
            collect(&entry.expect("a directory entry").path(), out);
        }
    } else if p.is_file() && p.extension().is_some_and(|x| x == "rs") {
        out.push(p.to_path_buf());
    }
}

/// Every `.rs` file under src/, sorted.
fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(&root().join("src"), &mut out);
    out.sort();
    out
}

/// The files of module `name`: src/name.rs and everything under src/name/. A module that has
/// moved fails here, so the boundary's lists are updated rather than silently checking nothing.
fn module(name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(&root().join("src").join(format!("{name}.rs")), &mut out);
    collect(&root().join("src").join(name), &mut out);
    assert!(!out.is_empty(), "tidy: module `{name}` has no src/{name}.rs nor src/{name}/; update the lists in tidy.rs");
    out.sort();
    out
}

/// The lines before the first `#[cfg(test)]`, numbered from 1: unit tests may reach anywhere.
fn non_test_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l)).take_while(|(_, l)| !l.contains("#[cfg(test)]"))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `line` names `word` as a whole path segment (so `crate::ten` is not `crate::tenants`).
fn names(line: &str, word: &str) -> bool {
    line.match_indices(word).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// Fails with every problem found, one a line, under `what`.
fn report(what: &str, problems: Vec<String>) {
    assert!(problems.is_empty(), "{what} ({} found):\n  {}\n", problems.len(), problems.join("\n  "));
}

#[test]
fn every_source_file_opens_with_a_module_doc() {
    let mut problems = Vec::new();
    for p in sources() {
        let text = read(&p);
        match text.lines().find(|l| !l.trim().is_empty()) {
            Some(l) if l.starts_with("//!") => {}
            Some(l) => problems.push(format!("{}: opens with `{}`, not a `//!` module doc", shown(&p), l.trim())),
            None => problems.push(format!("{}: is empty, with no `//!` module doc", shown(&p))),
        }
    }
    report("source files must open with a `//!` line saying what the module is for", problems);
}

#[test]
fn no_source_file_is_over_600_lines() {
    let mut problems = Vec::new();
    for p in sources() {
        let n = read(&p).lines().count();
        if n > MAX_LINES {
            problems.push(format!("{}: {n} lines (limit {MAX_LINES})", shown(&p)));
        }
    }
    report("source files over the ceiling; split them by job", problems);
}

/// `crate::m` and `ccsynth::m` for each module `m`.
fn paths(mods: &[&str]) -> Vec<String> {
    mods.iter().flat_map(|m| [format!("crate::{m}"), format!("ccsynth::{m}")]).collect()
}

/// Every line of `files`, outside unit tests, that names one of `forbidden`, into `problems`.
fn crossings(files: Vec<PathBuf>, forbidden: &[String], rule: &str, problems: &mut Vec<String>) {
    for p in files {
        let text = read(&p);
        for (n, line) in non_test_lines(&text) {
            for bad in forbidden.iter().filter(|bad| names(line, bad)) {
                problems.push(format!("{}:{n}: {} — `{bad}` ({rule})", shown(&p), line.trim()));
            }
        }
    }
}

#[test]
fn the_boundary_holds() {
    let mut problems = Vec::new();
    let front_end: Vec<PathBuf> =
        FRONT_END.iter().flat_map(|m| module(m)).chain([root().join("src/main.rs")]).collect();
    crossings(front_end, &paths(&BEHIND_ENGINE), "the front end goes through `engine`", &mut problems);

    let mut above = paths(&ABOVE_CORE);
    above.extend(EDGE_CRATES.iter().map(|c| c.to_string()));
    let core: Vec<PathBuf> = CORE.iter().flat_map(|m| module(m)).collect();
    crossings(core, &above, "the core imports nothing above it", &mut problems);

    report("imports across the boundary (limit: none)", problems);
}

/// A glob import of another module (`use super::*;`, `pub use args::*;`) hides what a file
/// uses or exports; outside unit tests every such import names its items. An enum's own
/// variants (`use ViolationKind::*;` in a match) and a crate's `prelude::*` stay allowed.
#[test]
fn no_glob_imports_across_modules() {
    let mut problems = Vec::new();
    for p in sources().into_iter().filter(|p| !p.ends_with("tests.rs")) {
        let text = read(&p);
        for (n, line) in non_test_lines(&text) {
            let code = line.trim_start();
            let code = code.strip_prefix("pub(crate) ").or_else(|| code.strip_prefix("pub ")).unwrap_or(code);
            let Some(path) = code.strip_prefix("use ").and_then(|r| r.strip_suffix("::*;")) else { continue };
            let enum_variants = !path.contains("::") && path.starts_with(|c: char| c.is_uppercase());
            if !enum_variants && !path.ends_with("prelude") {
                problems.push(format!("{}:{n}: {}", shown(&p), line.trim()));
            }
        }
    }
    report("glob imports of other modules (limit: none); name what is used", problems);
}

#[test]
fn docs_fit_on_a_page() {
    let mut problems = Vec::new();
    for (doc, limit) in DOCS {
        let n = read(&root().join(doc)).lines().count();
        if n > limit {
            problems.push(format!("{doc}: {n} lines (limit {limit})"));
        }
    }
    let map = read(&root().join("ARCHITECTURE.md"));
    for (i, line) in map.lines().enumerate().filter(|(_, l)| l.trim_start().starts_with('|')) {
        for cell in line.split('|').map(str::trim) {
            let width = cell.chars().count();
            if width > MAX_CELL {
                let start: String = cell.chars().take(40).collect();
                problems.push(format!(
                    "ARCHITECTURE.md:{}: a table cell of {width} characters (limit {MAX_CELL}): `{start}…`",
                    i + 1
                ));
            }
        }
    }
    report("documents a newcomer cannot read through", problems);
}

/// The sibling modules of `dir` (src/x/) that `file` (at `depth` directories below `dir`)
/// names outside unit tests: through `super::` (as many as it takes to reach `dir`'s module,
/// `{a, b::c}` lists included) or through the crate path `crate::x::` / `ccsynth::x::`.
fn siblings_named(file: &Path, depth: usize, module_path: &str, siblings: &BTreeSet<String>) -> BTreeSet<String> {
    let text = read(file);
    // The code outside unit tests, comments dropped, as one string: a `use` list may span lines.
    let code: String = non_test_lines(&text).map(|(_, l)| format!("{} ", l.split("//").next().unwrap_or(""))).collect();
    let prefixes = ["super::".repeat(depth), format!("crate::{module_path}::"), format!("ccsynth::{module_path}::")];
    let mut found = BTreeSet::new();
    for prefix in &prefixes {
        for (at, _) in code.match_indices(prefix.as_str()) {
            if code[..at].chars().next_back().is_some_and(|c| is_ident(c) || c == ':') {
                continue; // a longer path (super::super:: read as super::)
            }
            for head in first_segments(&code[at + prefix.len()..]) {
                if siblings.contains(&head) {
                    found.insert(head);
                }
            }
        }
    }
    found
}

/// The first segment of each path at the start of `rest`: one (`a::b`), or each item of a
/// brace list (`{a, b::{c, d}, e}`: a, b, e), however it is spread over lines.
fn first_segments(rest: &str) -> Vec<String> {
    let ident = |t: &str| t.trim_start().chars().take_while(|&c| is_ident(c)).collect::<String>();
    let Some(list) = rest.strip_prefix('{') else { return vec![ident(rest)] };
    let (mut heads, mut depth, mut item) = (Vec::new(), 0usize, String::new());
    for c in list.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                heads.push(ident(&item));
                item.clear();
                continue;
            }
            _ => {}
        }
        if depth == 0 {
            item.push(c);
        }
    }
    heads.push(ident(&item));
    heads
}

/// A cycle in `edges` (sibling → siblings it names), if any, as its members in order.
fn a_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        v: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(v.to_string(), 1);
        stack.push(v.to_string());
        for w in edges.get(v).into_iter().flatten() {
            match state.get(w.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|s| s == w).unwrap_or(0);
                    return Some(stack[from..].to_vec());
                }
                0 => {
                    if let Some(c) = visit(w, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(v.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for v in edges.keys() {
        if state.get(v.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(v, edges, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

/// Sibling modules import each other one way (issue 65): in every module with submodules,
/// the graph of which submodule names which (outside unit tests) has no cycle, so each can be
/// read knowing only those below it.
#[test]
fn sibling_modules_import_each_other_one_way() {
    let mut problems = Vec::new();
    let mut dirs = vec![root().join("src")];
    while let Some(dir) = dirs.pop() {
        let mut children: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for entry in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
            if entry.is_dir() {
                dirs.push(entry.clone());
                let mut files = Vec::new();
                collect(&entry, &mut files);
                let name = entry.file_name().unwrap().to_string_lossy().to_string();
                children.entry(name).or_default().extend(files);
            } else if entry.extension().is_some_and(|e| e == "rs") {
                let stem = entry.file_stem().unwrap().to_string_lossy().to_string();
                if !["mod", "lib", "main", "tests"].contains(&stem.as_str()) {
                    children.entry(stem).or_default().push(entry);
                }
            }
        }
        let rel = dir.strip_prefix(root().join("src")).unwrap();
        let module_path = rel.to_string_lossy().replace('/', "::");
        let names: BTreeSet<String> = children.keys().cloned().collect();
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (name, files) in &children {
            for f in files.iter().filter(|f| !f.ends_with("tests.rs")) {
                // A directory module's mod.rs sits one level below its own module.
                let depth = f.strip_prefix(&dir).unwrap().components().count() - usize::from(f.ends_with("mod.rs"));
                let mut named = siblings_named(f, depth, &module_path, &names);
                named.remove(name);
                edges.entry(name.clone()).or_default().extend(named);
            }
        }
        if rel.as_os_str().is_empty() {
            continue; // the crate root's modules: the boundary test orders them
        }
        if let Some(cycle) = a_cycle(&edges) {
            problems.push(format!("src/{}: {} -> {}", rel.display(), cycle.join(" -> "), cycle[0]));
        }
    }
    report("submodules that import each other in a circle (limit: none)", problems);
}
