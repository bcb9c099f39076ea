#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The conformance crate's modules import one way, as the runtime's do (`runtime/tests/imports.rs`;
//! both read `crate::` paths with `kfop_testenv::imports`): the corpus (`cases`) under what a side shows
//! (`snapshot`) under acting on it (`drive`), under the runner. A circle names its modules and
//! the files that close it.
use std::collections::BTreeSet;
use std::path::Path;

use kfop_testenv::imports::{Graph, circles, code, crate_references};

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
