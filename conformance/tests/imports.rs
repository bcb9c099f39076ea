#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The conformance crate's modules import one way, as the runtime's do (`runtime/tests/imports.rs`,
//! whose reading of `crate::` paths this repeats): the corpus (`cases`) under what a side shows
//! (`snapshot`) under acting on it (`drive`), under the runner. A circle names its modules and
//! the files that close it.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module -> (module it references -> files that do).
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Drops `//` comments (doc links are not imports) and the `#[cfg(test)] mod tests { .. }`
/// block that ends a file.
fn code(text: &str) -> String {
    let without_comments: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    match without_comments.find("#[cfg(test)]\nmod tests {") {
        Some(at) => without_comments[..at].to_owned(),
        None => without_comments,
    }
}

/// The first path segment of every `crate::` path: `crate::a::b` and `crate::{a::x, b}`.
fn crate_references(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            out.insert(ident(rest));
            continue;
        };
        let (mut depth, mut item) = (0, String::new());
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.insert(ident(item.trim()));
                    item.clear();
                    continue;
                }
                _ => {}
            }
            if depth == 0 {
                item.push(c);
            }
        }
        out.insert(ident(item.trim()));
    }
    out.remove("");
    out
}

/// The top-level modules of `src` (files and directories, `lib.rs` left out) and whom they
/// reference.
fn graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let top = rel.components().next().unwrap().as_os_str().to_string_lossy();
            let top = top.trim_end_matches(".rs").to_owned();
            if top == "lib" {
                continue;
            }
            let references = crate_references(&code(&std::fs::read_to_string(&path).unwrap()));
            let node = graph.entry(top.clone()).or_default();
            for module in references.into_iter().filter(|m| *m != top) {
                node.entry(module).or_default().insert(rel.display().to_string());
            }
        }
    }
    // `crate::Error` and the like are re-exports of lib.rs, not modules.
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for edges in graph.values_mut() {
        edges.retain(|m, _| modules.contains(m));
    }
    graph
}

/// A circle through `start`, if there is one (depth-first search for a path back to it).
fn circle(graph: &Graph, start: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &Graph,
        start: &str,
        at: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(at).into_iter().flat_map(BTreeMap::keys) {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, next, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_owned()];
    walk(graph, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

/// Every circle, one line each: `a -> b (files), b -> a (files)`.
fn circles(graph: &Graph) -> Vec<String> {
    graph
        .keys()
        .filter_map(|module| circle(graph, module))
        .map(|path| {
            let hops: Vec<String> = path
                .iter()
                .zip(path.iter().cycle().skip(1))
                .map(|(from, to)| {
                    let files: Vec<&str> = graph[from][to].iter().map(String::as_str).collect();
                    format!("{from} -> {to} ({})", files.join(" "))
                })
                .collect();
            hops.join(", ")
        })
        .collect()
}

#[test]
fn conformance_modules_import_one_way() {
    let graph = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The parser sees the layering it guards, so an empty graph cannot pass.
    for (from, to) in [("drive", "snapshot"), ("drive", "cases"), ("snapshot", "cases")] {
        assert!(graph[from].contains_key(to), "{from} -> {to} not seen: {graph:?}");
    }
    let circles = circles(&graph);
    assert!(
        circles.is_empty(),
        "import circles in conformance/src:\n{}",
        circles.join("\n")
    );
}

#[test]
fn a_circle_is_named_with_the_files_that_close_it() {
    let mut graph = Graph::new();
    for (from, to, file) in [
        ("cases", "snapshot", "cases.rs"),
        ("snapshot", "cases", "snapshot.rs"),
        ("drive", "cases", "drive.rs"),
    ] {
        let files = graph.entry(from.to_owned()).or_default().entry(to.to_owned());
        files.or_default().insert(file.to_owned());
    }
    assert_eq!(
        circles(&graph),
        [
            "cases -> snapshot (cases.rs), snapshot -> cases (snapshot.rs)",
            "snapshot -> cases (snapshot.rs), cases -> snapshot (cases.rs)",
        ]
    );
    let text = "use crate::{cases::Case, snapshot::{self, Depth}, Error};\n// crate::runner in a comment\nfn f() { crate::glob::matches() }\n#[cfg(test)]\nmod tests {\n    use crate::report;\n}\n";
    let refs: Vec<String> = crate_references(&code(text)).into_iter().collect();
    assert_eq!(refs, ["Error", "cases", "glob", "snapshot"]);
}
