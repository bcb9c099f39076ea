#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The runtime's modules import one way: no module of `runtime/src` reaches back to itself
//! through `crate::` paths in non-test code, and the layers (the folders `kit`, `engine`,
//! `process`, whose modules keep the crate's flat paths) import only downward: the process uses
//! the engine and the kit, the engine the kit. A circle would tie the pure planner to the layers
//! above it; these tests name the modules and the files that break the rule.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kfop_testenv::imports::{Graph, circles, code, crate_references};

/// Names of modules a file declares under `#[cfg(test)]` (`mod tf_table;`): test-only files.
fn test_only_children(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0].trim() == "#[cfg(test)]")
        .filter_map(|w| {
            w[1].trim()
                .strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_owned)
        })
        .collect()
}

/// The layer folders, lowest first.
const LAYERS: [&str; 3] = ["kit", "engine", "process"];

/// The module a file belongs to: its first path component, or inside a layer folder its second.
fn module_of(rel: &Path) -> (Option<String>, String) {
    let mut parts = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    let first = parts.next().unwrap_or_default();
    if LAYERS.contains(&first.as_str())
        && let Some(second) = parts.next()
    {
        return (Some(first), second.trim_end_matches(".rs").to_owned());
    }
    (None, first.trim_end_matches(".rs").to_owned())
}

/// Each module's layer.
fn layers(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for layer in LAYERS {
        for entry in std::fs::read_dir(src.join(layer)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let module = name.trim_end_matches(".rs").to_owned();
            if module != "mod" {
                out.insert(module, layer.to_owned());
            }
        }
    }
    out
}

/// Only Rust files are modules; data beside them (test fixtures) is not read.
fn is_rust(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "rs")
}

/// Module -> (module it references -> files that do).
fn graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    let mut stack = vec![src.to_path_buf()];
    let mut test_only: BTreeSet<std::path::PathBuf> = BTreeSet::new();
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in &entries {
            if path.is_dir() {
                stack.push(path.clone());
                continue;
            }
            if !is_rust(path) {
                continue;
            }
            let text = std::fs::read_to_string(path).unwrap();
            let base = if path.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs") {
                dir.clone()
            } else {
                path.with_extension("")
            };
            for child in test_only_children(&text) {
                test_only.insert(base.join(format!("{child}.rs")));
            }
        }
    }
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if !is_rust(&path) {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let (_, top) = module_of(rel);
            if ["lib", "mod"].contains(&top.as_str())
                || path.file_name().is_some_and(|n| n == "tests.rs")
                || test_only.contains(&path)
            {
                continue;
            }
            let references = crate_references(&code(&std::fs::read_to_string(&path).unwrap()));
            let node = graph.entry(top.clone()).or_default();
            for module in references.into_iter().filter(|m| *m != top) {
                node.entry(module).or_default().insert(rel.display().to_string());
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for edges in graph.values_mut() {
        edges.retain(|m, _| modules.contains(m));
    }
    graph
}

#[test]
fn runtime_modules_import_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src);
    assert!(
        graph.contains_key("plan") && graph.contains_key("framework"),
        "{graph:?}"
    );
    assert!(
        graph["plan"].contains_key("framework"),
        "the planner reads the framework: the parser must see that"
    );
    let circles = circles(&graph);
    assert!(
        circles.is_empty(),
        "import circles in runtime/src:\n{}",
        circles.join("\n")
    );
}

#[test]
fn layers_import_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (graph, layers) = (graph(&src), layers(&src));
    assert_eq!(
        layers.get("plan").map(String::as_str),
        Some("engine"),
        "{layers:?}"
    );
    assert_eq!(
        layers.get("framework").map(String::as_str),
        Some("kit"),
        "{layers:?}"
    );
    let rank = |module: &str| {
        LAYERS
            .iter()
            .position(|l| Some(*l) == layers.get(module).map(String::as_str))
    };
    let mut upward = Vec::new();
    for (from, edges) in &graph {
        for (to, files) in edges {
            if rank(to) > rank(from) {
                upward.push(format!(
                    "{from} ({}) -> {to} ({}): {}",
                    layers[from],
                    layers[to],
                    files.iter().cloned().collect::<Vec<_>>().join(" ")
                ));
            }
        }
    }
    assert!(upward.is_empty(), "imports up a layer:\n{}", upward.join("\n"));
}
