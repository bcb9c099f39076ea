#![allow(clippy::unwrap_used, clippy::expect_used)]
//! README.md and docs/*.md say only what is true of this checkout:
//!
//! * every relative link points at a file or directory that exists, and every `#anchor` at a
//!   heading of its target (GitHub's slugs);
//! * every `kfop` / `kfop-operator` subcommand and flag they name exists: in commands (inline
//!   code spans and shell code blocks, including `cargo run -p <bin> -- ...`) against the
//!   subcommand the command reaches, and in bare `--flag` code spans of a paragraph or table
//!   that names the binary against any of its help pages. `kfop`'s command tree comes from its
//!   library's `clap` definition, `kfop-operator`'s from the built binary's `--help` pages.
//!   Flags of other tools (helm, kubectl, cargo, `kfop-bench`, ...) are never checked;
//! * no issue numbers (`#17`): the history lives in bench/results/HISTORY.md.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::CommandFactory;

// ---------------------------------------------------------------------------------------------
// Command trees
// ---------------------------------------------------------------------------------------------

/// A command as its help describes it: its flags and its subcommands.
#[derive(Debug, Clone, Default)]
struct Cmd {
    name: String,
    /// Long flags (without `--`) and whether each takes a value.
    long: BTreeMap<String, bool>,
    /// Short flags and whether each takes a value.
    short: BTreeMap<char, bool>,
    subs: Vec<Cmd>,
}

impl Cmd {
    fn sub(&self, name: &str) -> Option<&Cmd> {
        self.subs.iter().find(|s| s.name == name)
    }

    /// Every long flag of this command and its subcommands.
    fn all_long(&self, into: &mut BTreeSet<String>) {
        into.extend(self.long.keys().cloned());
        for s in &self.subs {
            s.all_long(into);
        }
    }
}

/// `kfop`'s tree from its `clap` definition.
fn from_clap(cmd: &clap::Command) -> Cmd {
    let mut out = Cmd {
        name: cmd.get_name().to_owned(),
        ..Cmd::default()
    };
    for arg in cmd.get_arguments() {
        let takes = arg.get_action().takes_values();
        if let Some(l) = arg.get_long() {
            out.long.insert(l.to_owned(), takes);
        }
        if let Some(s) = arg.get_short() {
            out.short.insert(s, takes);
        }
    }
    out.subs = cmd.get_subcommands().map(from_clap).collect();
    out
}

fn kfop_tree() -> Cmd {
    let mut cmd = kfop::cli::Cli::command();
    cmd.build();
    from_clap(&cmd)
}

/// One help page of clap's format: the subcommands under `Commands:`, the flags under
/// `Options:` (`  -h, --help`, `      --name <VALUE>`).
fn parse_help(name: &str, help: &str) -> (Cmd, Vec<String>) {
    let mut cmd = Cmd {
        name: name.to_owned(),
        ..Cmd::default()
    };
    let mut subs = Vec::new();
    let mut section = "";
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line;
            continue;
        }
        if section == "Commands:" {
            if let Some(rest) = line.strip_prefix("  ")
                && !rest.starts_with(' ')
                && let Some(sub) = rest.split_whitespace().next()
            {
                subs.push(sub.to_owned());
            }
        } else if section.ends_with("Options:") {
            let Some(rest) = line.strip_prefix("  ") else {
                continue;
            };
            let (short, rest) = match rest.strip_prefix('-') {
                Some(r) if !r.starts_with('-') => {
                    let c = r.chars().next().unwrap();
                    (Some(c), r[c.len_utf8()..].trim_start_matches(',').trim_start())
                }
                _ => (None, rest.trim_start()),
            };
            let (long, after) = match rest.strip_prefix("--") {
                Some(r) => {
                    let end = r.find([' ', '=', '[']).unwrap_or(r.len());
                    (Some(r[..end].to_owned()), &r[end..])
                }
                None => (None, rest),
            };
            if short.is_none() && long.is_none() {
                continue;
            }
            let takes = after.trim_start().starts_with('<')
                || after.trim_start().starts_with("[<")
                || after.starts_with("=<");
            if let Some(l) = long {
                cmd.long.insert(l, takes);
            }
            if let Some(s) = short {
                cmd.short.insert(s, takes);
            }
        }
    }
    (cmd, subs)
}

/// `kfop-operator`'s tree from the built binary's `--help` and each subcommand's.
fn operator_tree() -> Cmd {
    fn page(path: &[String]) -> Cmd {
        let bin = env!("CARGO_BIN_EXE_kfop-operator");
        let out = Command::new(bin)
            .args(&path[1..])
            .arg("--help")
            .output()
            .expect("run kfop-operator --help");
        assert!(out.status.success(), "{path:?} --help: {out:?}");
        let (mut cmd, subs) = parse_help(path.last().unwrap(), &String::from_utf8(out.stdout).unwrap());
        for sub in subs {
            if sub == "help" {
                cmd.subs.push(Cmd {
                    name: sub,
                    ..Cmd::default()
                });
                continue;
            }
            let mut p = path.to_vec();
            p.push(sub);
            cmd.subs.push(page(&p));
        }
        cmd
    }
    page(&["kfop-operator".to_owned()])
}

// ---------------------------------------------------------------------------------------------
// Markdown
// ---------------------------------------------------------------------------------------------

/// A piece of a document: a paragraph (consecutive prose lines, a table, a list) or one logical
/// line of a code block, with the line it starts on and, for code, the block's language.
#[derive(Debug)]
struct Block {
    line: usize,
    text: String,
    code: Option<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut fence: Option<(String, String)> = None; // (marker, language)
    let mut para: Option<Block> = None;
    let mut pending: Option<Block> = None; // a code line continued with `\`
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let trimmed = raw.trim_start();
        if let Some((marker, lang)) = &fence {
            if trimmed.starts_with(marker.as_str()) && trimmed.trim_end() == marker {
                out.extend(pending.take());
                fence = None;
                continue;
            }
            let mut b = pending.take().unwrap_or(Block {
                line: line_no,
                text: String::new(),
                code: Some(lang.clone()),
            });
            if let Some(cont) = raw.trim_end().strip_suffix('\\') {
                b.text.push_str(cont);
                b.text.push(' ');
                pending = Some(b);
            } else {
                b.text.push_str(raw);
                out.push(b);
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            out.extend(para.take());
            let marker: String = trimmed.chars().take_while(|c| *c == '`' || *c == '~').collect();
            let lang = trimmed[marker.len()..].trim().to_owned();
            fence = Some((marker, lang));
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with('#') {
            out.extend(para.take());
            if trimmed.starts_with('#') {
                out.push(Block {
                    line: line_no,
                    text: raw.to_owned(),
                    code: None,
                });
            }
            continue;
        }
        match &mut para {
            Some(p) => {
                p.text.push('\n');
                p.text.push_str(raw);
            }
            None => {
                para = Some(Block {
                    line: line_no,
                    text: raw.to_owned(),
                    code: None,
                })
            }
        }
    }
    out.extend(para);
    out.extend(pending);
    out
}

/// The inline code spans of prose, and the prose with them blanked out.
fn code_spans(text: &str) -> (Vec<String>, String) {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut prose = String::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            let c = text[i..].chars().next().unwrap();
            prose.push(c);
            i += c.len_utf8();
            continue;
        }
        let run = bytes[i..].iter().take_while(|b| **b == b'`').count();
        let open = i + run;
        // The closing run: exactly `run` backticks.
        let mut j = open;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let r = bytes[j..].iter().take_while(|b| **b == b'`').count();
                if r == run {
                    close = Some(j);
                    break;
                }
                j += r;
            } else {
                j += 1;
            }
        }
        match close {
            Some(c) => {
                spans.push(text[open..c].replace('\n', " ").trim().to_owned());
                prose.push(' ');
                i = c + run;
            }
            None => {
                prose.push_str(&text[i..open]);
                i = open;
            }
        }
    }
    (spans, prose)
}

/// GitHub's anchor for a heading: lower case, punctuation dropped (but `-` and `_`), each
/// space a `-`.
fn slug(heading: &str) -> String {
    // Code spans keep their text in the slug.
    let text = heading.replace('`', "");
    // A link in a heading keeps its text.
    let mut no_links = String::new();
    let mut rest = text.as_str();
    while let Some(open) = rest.find('[') {
        if let Some(mid) = rest[open..].find("](")
            && let Some(end) = rest[open + mid..].find(')')
        {
            no_links.push_str(&rest[..open]);
            no_links.push_str(&rest[open + 1..open + mid]);
            rest = &rest[open + mid + end + 1..];
        } else {
            break;
        }
    }
    no_links.push_str(rest);
    no_links
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a document's headings (duplicates get `-1`, `-2`, ... as on GitHub).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for b in blocks(text) {
        if b.code.is_some() {
            continue;
        }
        let t = b.text.trim_start();
        let hashes = t.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !t[hashes..].starts_with(' ') {
            continue;
        }
        let heading = t[hashes..].trim().trim_end_matches('#').trim();
        let base = slug(heading);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The lines of prose (outside code blocks, code spans blanked), with their line numbers.
fn prose_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for b in blocks(text) {
        if b.code.is_some() {
            continue;
        }
        let (_, prose) = code_spans(&b.text);
        out.extend(
            prose
                .lines()
                .enumerate()
                .map(|(offset, line)| (b.line + offset, line.to_owned())),
        );
    }
    out
}

/// Inline links `[text](target)` of prose (not in code), with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (number, line) in prose_lines(text) {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("").to_owned();
            out.push((number, target));
            rest = &after[end..];
        }
    }
    out
}

/// What a link's path is: missing, a directory, or a file with its text (markdown only).
enum Target {
    Missing,
    Dir,
    File(Option<String>),
}

fn read_target(path: &Path) -> Target {
    if path.is_dir() {
        Target::Dir
    } else if path.is_file() {
        Target::File(if path.extension().is_some_and(|e| e == "md") {
            std::fs::read_to_string(path).ok()
        } else {
            None
        })
    } else {
        Target::Missing
    }
}

/// Problems with `doc`'s relative links; `read` resolves a path (tests give a fake one).
fn check_links(doc: &Path, text: &str, read: &dyn Fn(&Path) -> Target) -> Vec<String> {
    let dir = doc.parent().unwrap_or(Path::new(""));
    let mut problems = Vec::new();
    for (line, target) in links(text) {
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let where_ = format!("{}:{line}: {target}", doc.display());
        let content = if path.is_empty() {
            Some(text.to_owned())
        } else {
            match read(&dir.join(path)) {
                Target::Missing => {
                    problems.push(format!("{where_}: no such file or directory"));
                    continue;
                }
                Target::Dir => None,
                Target::File(content) => content,
            }
        };
        if let Some(anchor) = anchor {
            match content {
                Some(c) if anchors(&c).contains(anchor) => {}
                Some(c) => problems.push(format!(
                    "{where_}: no heading with anchor #{anchor} (anchors: {})",
                    anchors(&c).into_iter().collect::<Vec<_>>().join(", ")
                )),
                None => problems.push(format!("{where_}: an anchor into a file that is not markdown")),
            }
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------------
// Commands and flags
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Bin {
    Kfop,
    Operator,
}

impl Bin {
    fn name(self) -> &'static str {
        match self {
            Bin::Kfop => "kfop",
            Bin::Operator => "kfop-operator",
        }
    }

    /// `kfop`, `kfop-operator`, or a path to either (`target/release/kfop-operator`).
    fn of(token: &str) -> Option<Bin> {
        match token.rsplit('/').next()? {
            "kfop" => Some(Bin::Kfop),
            "kfop-operator" => Some(Bin::Operator),
            _ => None,
        }
    }
}

/// Where a command's arguments end.
fn ends_command(token: &str) -> bool {
    matches!(token, "|" | "||" | "&&" | ";" | ">" | ">>" | "2>" | "2>&1" | "&")
        || token.starts_with('#')
        || token.starts_with('>')
}

fn clean(token: &str) -> &str {
    token
        .trim_start_matches("$(")
        .trim_start_matches(['(', '"', '\'', '`'])
        .trim_end_matches([',', ';', '"', '\'', '`'])
}

/// Whether `tokens[i]` starts a command: the first word, or the first after `|`, `&&`, `;`,
/// `(`, or after environment assignments (`KUBECONFIG=... kfop ...`).
fn command_position(tokens: &[&str], i: usize) -> bool {
    if tokens[i].starts_with('(') || tokens[i].starts_with("$(") {
        return true;
    }
    let mut j = i;
    while j > 0 {
        let prev = tokens[j - 1];
        if ends_command(prev) && !prev.starts_with('#') {
            return true;
        }
        let assignment = prev.contains('=') && !prev.starts_with('-');
        if !assignment {
            return false;
        }
        j -= 1;
    }
    true
}

/// The invocations of `kfop` / `kfop-operator` in a command line or code span: the binary and
/// its arguments. `cargo run ... -p <bin> -- args` counts; `cargo test -p <bin>` does not.
fn invocations(line: &str) -> Vec<(Bin, Vec<String>)> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = clean(tokens[i]);
        // Only a word in command position runs something: `helm install kfop ...` names a
        // release, `cargo test -p kfop-operator` a package.
        let start = if !command_position(&tokens, i) {
            None
        } else if let Some(bin) = Bin::of(t) {
            Some((bin, i + 1))
        } else if t == "cargo" && tokens.get(i + 1).map(|s| clean(s)) == Some("run") {
            // cargo run [opts] -p|--package|--bin <bin> [opts] -- args
            let mut j = i + 2;
            let mut bin = None;
            while j < tokens.len() && clean(tokens[j]) != "--" && !ends_command(tokens[j]) {
                let tj = clean(tokens[j]);
                if matches!(tj, "-p" | "--package" | "--bin") {
                    bin = tokens.get(j + 1).and_then(|s| Bin::of(clean(s)));
                } else if let Some(v) = tj
                    .strip_prefix("--package=")
                    .or_else(|| tj.strip_prefix("--bin="))
                {
                    bin = Bin::of(v);
                }
                j += 1;
            }
            match bin {
                Some(b) if tokens.get(j).map(|s| clean(s)) == Some("--") => Some((b, j + 1)),
                Some(b) => Some((b, j)),
                None => None,
            }
        } else {
            None
        };
        let Some((bin, first)) = start else {
            i += 1;
            continue;
        };
        let mut args = Vec::new();
        let mut j = first;
        while j < tokens.len() && !ends_command(tokens[j]) {
            let raw = tokens[j];
            let closes = raw.ends_with(')') && !raw.contains('(');
            let tok = clean(raw).trim_end_matches(')');
            if !tok.is_empty() {
                args.push(tok.to_owned());
            }
            j += 1;
            if closes {
                break;
            }
        }
        out.push((bin, args));
        i = j;
    }
    out
}

/// A placeholder in a usage line rather than a word: `FILE`, `<name>`, `[flags]`, `...`.
fn placeholder(token: &str) -> bool {
    token.contains(['<', '>', '[', ']', '$', '=', '/', '.'])
        || token
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == '_' || c == '-')
}

/// Problems with one invocation's subcommands and flags.
fn check_invocation(bin: Bin, args: &[String], root: &Cmd) -> Vec<String> {
    let mut problems = Vec::new();
    let mut cmd = root;
    let mut path = vec![bin.name().to_owned()];
    let mut expect_value = false;
    let mut positional = false;
    for raw in args {
        if expect_value {
            expect_value = false;
            continue;
        }
        let optional = raw.contains('[') || raw.contains(']');
        let tok = raw.trim_matches(['[', ']']).trim_end_matches("...");
        if tok == "--" {
            break;
        }
        if let Some(long) = tok.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            let name = name.trim_end_matches(['.', ':', ')']);
            if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
                continue;
            }
            match cmd.long.get(name) {
                Some(takes) => expect_value = *takes && !inline,
                None => problems.push(format!("`{}` has no flag --{name}", path.join(" "))),
            }
            continue;
        }
        if let Some(short) = tok.strip_prefix('-')
            && short.chars().count() == 1
        {
            let c = short.chars().next().unwrap();
            match cmd.short.get(&c) {
                Some(takes) => expect_value = *takes,
                None => problems.push(format!("`{}` has no flag -{c}", path.join(" "))),
            }
            continue;
        }
        if tok.is_empty() || positional || cmd.subs.is_empty() {
            positional = true;
            continue;
        }
        // A subcommand, or alternatives `up|down|status`.
        let alternatives: Vec<&str> = tok.split('|').collect();
        if alternatives.iter().all(|a| cmd.sub(a).is_some()) {
            // Flags after alternatives are checked against the first.
            cmd = cmd.sub(alternatives[0]).unwrap();
            path.push(alternatives[0].to_owned());
        } else if optional || placeholder(tok) {
            positional = true;
        } else {
            problems.push(format!(
                "`{}` has no subcommand {tok} (it has: {})",
                path.join(" "),
                cmd.subs
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            positional = true;
        }
    }
    problems
}

/// Whether a paragraph names `kfop-operator` (as a word, or a path ending in it; not
/// `kfop-operator-webhook` or `...:kfop-operator`).
fn names_operator(text: &str) -> bool {
    text.match_indices("kfop-operator").any(|(at, m)| {
        let before = text[..at].chars().next_back();
        let after = text[at + m.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
            && !after.is_some_and(|c| c.is_alphanumeric() || matches!(c, '-' | '_'))
    })
}

/// A command of another tool, which has flags of its own: `cargo test ...`, `helm ...`.
fn other_tool(span: &str) -> bool {
    const TOOLS: [&str; 11] = [
        "cargo",
        "helm",
        "kubectl",
        "crane",
        "docker",
        "podman",
        "kustomize",
        "go",
        "python3",
        "git",
        "kfop-bench",
    ];
    let first = span.split_whitespace().next().map(clean).unwrap_or_default();
    let name = first.rsplit('/').next().unwrap_or(first);
    (TOOLS.contains(&name) || first.starts_with("scripts/")) && invocations(span).is_empty()
}

/// Problems with the commands and flags of one document.
fn check_cli(doc: &str, text: &str, trees: &BTreeMap<Bin, Cmd>) -> Vec<String> {
    let shell = |lang: &str| matches!(lang, "sh" | "bash" | "shell" | "console" | "zsh");
    let mut problems = Vec::new();
    for b in blocks(text) {
        let mut named = BTreeSet::new();
        let mut lines = Vec::new();
        let mut bare = Vec::new();
        match &b.code {
            Some(lang) if shell(lang) => {
                // A shell comment ends the line.
                if !b.text.trim_start().starts_with('#') {
                    lines.push(b.text.split(" #").next().unwrap_or_default().to_owned());
                }
            }
            Some(_) => continue,
            None => {
                let (spans, prose) = code_spans(&b.text);
                // Named in prose, the operator claims the paragraph's bare flags unless another
                // tool's command there may own them (`cargo test ...` and `--test`).
                if names_operator(&prose) && !spans.iter().any(|s| other_tool(s)) {
                    named.insert(Bin::Operator);
                }
                for s in spans {
                    if s.starts_with('-') {
                        bare.push(s);
                    } else {
                        lines.push(s);
                    }
                }
            }
        }
        for line in &lines {
            for (bin, args) in invocations(line) {
                named.insert(bin);
                for p in check_invocation(bin, &args, &trees[&bin]) {
                    problems.push(format!("{doc}:{}: {p} (in `{}`)", b.line, line.trim()));
                }
            }
        }
        if named.is_empty() {
            continue;
        }
        // Bare flags: known to one of the binaries the paragraph names, on any of its pages.
        let mut known = BTreeSet::new();
        for bin in &named {
            trees[bin].all_long(&mut known);
        }
        for span in bare {
            for tok in span.split(['/', ' ', '|']) {
                let Some(flag) = tok.strip_prefix("--") else {
                    continue;
                };
                let flag = flag.split('=').next().unwrap();
                if !flag.is_empty() && !known.contains(flag) {
                    problems.push(format!(
                        "{doc}:{}: --{flag} is not a flag of {}",
                        b.line,
                        named.iter().map(|b| b.name()).collect::<Vec<_>>().join(" or ")
                    ));
                }
            }
        }
    }
    problems
}

/// `#17`-style issue numbers outside code.
fn issue_numbers(doc: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (number, line) in prose_lines(text) {
        for (at, _) in line.match_indices('#') {
            let before = line[..at].chars().next_back();
            let digits = line[at + 1..].chars().take_while(char::is_ascii_digit).count();
            if digits > 0 && !before.is_some_and(|c| c.is_alphanumeric() || c == '/' || c == '&') {
                out.push(format!("{doc}:{number}: an issue number: {}", line.trim()));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The documents
// ---------------------------------------------------------------------------------------------

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// README.md and docs/*.md, as (path relative to the root, text).
fn documents() -> Vec<(PathBuf, String)> {
    let root = repo_root();
    let mut paths = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(&root).unwrap().to_owned())
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(root.join(&p)).unwrap();
            (p, text)
        })
        .collect()
}

#[test]
fn relative_links_and_anchors_resolve() {
    let root = repo_root();
    let mut problems = Vec::new();
    for (path, text) in documents() {
        problems.extend(check_links(&path, &text, &|p| read_target(&root.join(p))));
    }
    assert!(problems.is_empty(), "broken links:\n{}", problems.join("\n"));
}

#[test]
fn every_named_subcommand_and_flag_exists() {
    let trees = BTreeMap::from([(Bin::Kfop, kfop_tree()), (Bin::Operator, operator_tree())]);
    let mut problems = Vec::new();
    for (path, text) in documents() {
        problems.extend(check_cli(&path.display().to_string(), &text, &trees));
    }
    assert!(
        problems.is_empty(),
        "the docs name commands or flags that `--help` does not have:\n{}",
        problems.join("\n")
    );
}

#[test]
fn user_docs_carry_no_issue_numbers() {
    let mut problems = Vec::new();
    for (path, text) in documents() {
        problems.extend(issue_numbers(&path.display().to_string(), &text));
    }
    assert!(
        problems.is_empty(),
        "issue numbers belong in bench/results/HISTORY.md or commit messages:\n{}",
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The checks themselves can fail
// ---------------------------------------------------------------------------------------------

fn fake_trees() -> BTreeMap<Bin, Cmd> {
    let operator = parse_help(
        "kfop-operator",
        "The operator\n\nUsage: kfop-operator [OPTIONS] [COMMAND]\n\nCommands:\n  crds    Print CRDs\n  \
         help    Print this message\n\nOptions:\n      --namespace <NAMESPACE>\n          Watch only this\n      \
         --leader-elect\n          Hold a Lease\n  -h, --help\n          Print help\n",
    )
    .0;
    let mut operator = operator;
    operator.subs = vec![
        Cmd {
            name: "crds".into(),
            long: BTreeMap::from([("help".into(), false)]),
            ..Cmd::default()
        },
        Cmd {
            name: "help".into(),
            ..Cmd::default()
        },
    ];
    BTreeMap::from([(Bin::Kfop, kfop_tree()), (Bin::Operator, operator)])
}

#[test]
fn help_pages_parse() {
    let trees = fake_trees();
    let op = &trees[&Bin::Operator];
    assert_eq!(op.long.get("namespace"), Some(&true));
    assert_eq!(op.long.get("leader-elect"), Some(&false));
    assert_eq!(op.short.get(&'h'), Some(&false));
    let kfop = &trees[&Bin::Kfop];
    assert!(kfop.sub("new").unwrap().long.contains_key("no-code"));
    assert!(
        kfop.sub("cluster")
            .unwrap()
            .sub("up")
            .unwrap()
            .long
            .contains_key("detach")
    );
}

#[test]
fn a_bad_flag_or_subcommand_is_found() {
    let trees = fake_trees();
    let doc = "Run `kfop-operator --namespace ns --leader-elect` and `kfop-operator --no-such-flag`.\n\
               \n\
               ```sh\n\
               kfop-operator frobnicate\n\
               kfop new --framework foo --bogus \\\n  --no-code\n\
               cargo run -q -p kfop-operator -- crds --namespace x\n\
               cargo run -p kfop -- gen --check --dir examples/jax\n\
               cargo test -p kfop-operator --test install --nonsense\n\
               helm install kfop charts/kfop --set image.tag=1   # helm's flags are not ours\n\
               kfop cluster up|down --detach\n\
               ```\n\
               \n\
               The operator (`kfop-operator`) takes `--leader-elect` and `--made-up`.\n\
               \n\
               `kfop-bench --soak 30m` and `--lean-plane` are the benchmark's.\n";
    let problems = check_cli("doc.md", doc, &trees);
    let expected = [
        "doc.md:1: `kfop-operator` has no flag --no-such-flag",
        "doc.md:4: `kfop-operator` has no subcommand frobnicate",
        "doc.md:5: `kfop new` has no flag --bogus",
        "doc.md:7: `kfop-operator crds` has no flag --namespace",
        "doc.md:14: --made-up is not a flag of kfop-operator",
    ];
    for e in expected {
        assert!(
            problems.iter().any(|p| p.starts_with(e)),
            "missing {e:?} in {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
}

#[test]
fn a_broken_link_or_anchor_is_found() {
    let doc = "# Title\n\n## Deliberate differences from Kubeflow's training operator\n\n\
               ## `#[training_job]`: the derive macro\n\n\
               See [a](other.md), [b](missing.md), [c](#title), [d](#nope), [e](other.md#second-part),\n\
               [f](other.md#gone), [g](https://example.com/x.md), [h](dir/),\n\
               [i](#deliberate-differences-from-kubeflows-training-operator), [j](#training_job-the-derive-macro)\n\
               and `[not a link](nowhere.md)`.\n\n```md\n[nor this](nowhere.md)\n# Not a heading\n```\n";
    let read = |p: &Path| match p.to_str().unwrap() {
        "docs/other.md" => Target::File(Some("# Other\n\n## Second part\n".into())),
        "docs/dir/" | "docs/dir" => Target::Dir,
        _ => Target::Missing,
    };
    let problems = check_links(Path::new("docs/page.md"), doc, &read);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].starts_with("docs/page.md:7: missing.md: no such file"),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("docs/page.md:7: #nope: no heading"),
        "{problems:#?}"
    );
    assert!(
        problems[2].starts_with("docs/page.md:8: other.md#gone: no heading"),
        "{problems:#?}"
    );
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(slug("kfop new / kfop gen"), "kfop-new--kfop-gen");
    assert_eq!(
        slug("Checking a cluster: `kfop-operator check`"),
        "checking-a-cluster-kfop-operator-check"
    );
    assert_eq!(
        slug("Soak: nothing stranded, memory flat"),
        "soak-nothing-stranded-memory-flat"
    );
    assert_eq!(slug("A [linked](x.md) heading"), "a-linked-heading");
    let dup = anchors("# A\n\n## A\n\n## A\n");
    assert_eq!(dup, BTreeSet::from(["a".into(), "a-1".into(), "a-2".into()]));
}

#[test]
fn issue_numbers_are_found() {
    let found = issue_numbers(
        "d.md",
        "Fixed in #17.\n\nSee [x](#anchor), `#11` in code, a&#35;b.\n",
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("d.md:1:"));
}
