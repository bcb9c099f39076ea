//! Reading a crate's `crate::` imports from its source, for the tests that keep a crate's modules
//! importing one way (`runtime/tests/imports.rs`, `conformance/tests/imports.rs`).
use std::collections::{BTreeMap, BTreeSet};

/// Module -> (module it references -> files that do).
pub type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Drops `//` comments (doc links are not imports) and the `#[cfg(test)] mod tests { .. }`
/// block that ends a file.
pub fn code(text: &str) -> String {
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
pub fn crate_references(code: &str) -> BTreeSet<String> {
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

/// The files through which `from` references `to`, space-separated.
pub fn files(graph: &Graph, from: &str, to: &str) -> String {
    let files: Vec<&str> = graph
        .get(from)
        .and_then(|edges| edges.get(to))
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    files.join(" ")
}

/// Every circle, one line each: `a -> b (files), b -> a (files)`.
pub fn circles(graph: &Graph) -> Vec<String> {
    graph
        .keys()
        .filter_map(|module| circle(graph, module))
        .map(|path| {
            let hops: Vec<String> = path
                .iter()
                .zip(path.iter().cycle().skip(1))
                .map(|(from, to)| format!("{from} -> {to} ({})", files(graph, from, to)))
                .collect();
            hops.join(", ")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_and_plain_paths_but_not_comments() {
        let text = "use crate::{api::X, plan::{a, b}, env};\n// crate::gang in a comment\nfn f() { crate::labels::x() }\n#[cfg(test)]\nmod tests {\n    use crate::testing;\n}\n";
        let refs: Vec<String> = crate_references(&code(text)).into_iter().collect();
        assert_eq!(refs, ["api", "env", "labels", "plan"]);
    }

    #[test]
    fn a_circle_names_the_files_that_close_it() {
        let mut graph = Graph::new();
        graph
            .entry("a".into())
            .or_default()
            .entry("b".into())
            .or_default()
            .insert("a.rs".into());
        graph
            .entry("b".into())
            .or_default()
            .entry("a".into())
            .or_default()
            .insert("b/x.rs".into());
        graph
            .entry("c".into())
            .or_default()
            .entry("a".into())
            .or_default()
            .insert("c.rs".into());
        assert_eq!(
            circles(&graph),
            ["a -> b (a.rs), b -> a (b/x.rs)", "b -> a (b/x.rs), a -> b (a.rs)"]
        );
    }
}
