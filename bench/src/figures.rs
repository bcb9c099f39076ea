//! Measured figures in the user docs (README.md, docs/*.md) come from committed results under
//! bench/results/: each is marked with its source, and the tests below fail when a marked figure
//! differs from its source or a page quotes a measurement-looking number without a mark.
//!
//! A mark wraps the figure as printed, its source in an HTML comment (invisible on the page):
//!
//! ```text
//! <!--fig burst/summary.json#/operator/throughput_all_pods-->15.4<!--/fig-->
//! <!--fig #/kubeflow/process/cpu_seconds / #/operator/process/cpu_seconds-->3.4<!--/fig-->
//! <!--fig rate20/results.md-->14.0<!--/fig-->
//! ```
//!
//! * A JSON source is an arithmetic expression (`+ - * /`, parentheses, numbers) over values
//!   `FILE#POINTER` (a JSON pointer; `%20` for a space in a key), FILE relative to bench/results/.
//!   `#POINTER` alone reads the page's current default file, set by a line
//!   `<!-- figures: FILE -->`. The figure is the value printed with as many decimals as the
//!   marked text has, with thousands separators when it has them.
//! * Any other source (a results.md, a run's log) is a text: the marked figure must appear in it
//!   as printed. Prefer JSON; results only committed as text have no other source.
//!
//! `KFOP_BLESS=1 cargo test -p kfop-bench docs_figures` rewrites every JSON-sourced figure from
//! its source (after a new run is committed); a text-sourced figure that no longer appears must
//! be edited by hand.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test-only: main.rs declares this module under cfg(test).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The mark's opening, up to its source.
const OPEN: &str = "<!--fig ";
const OPEN_END: &str = "-->";
const CLOSE: &str = "<!--/fig-->";
const DEFAULT_FILE: &str = "<!-- figures: ";

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default()
}

/// The pages checked: README.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// One marked figure on a page.
#[derive(Debug, Clone, PartialEq)]
struct Mark {
    /// Byte range of the figure's text in the page.
    text: std::ops::Range<usize>,
    source: String,
    /// The page's default file where the mark is.
    default_file: Option<String>,
}

/// Every mark on a page, in order.
fn marks(page: &str) -> Result<Vec<Mark>, String> {
    let mut out = Vec::new();
    let mut default_file: Option<String> = None;
    let mut at = 0;
    // Default-file lines and marks, in page order.
    loop {
        let next_mark = page[at..].find(OPEN).map(|i| at + i);
        let next_default = page[at..].find(DEFAULT_FILE).map(|i| at + i);
        match (next_mark, next_default) {
            (_, Some(d)) if next_mark.is_none_or(|m| d < m) => {
                let start = d + DEFAULT_FILE.len();
                let end = page[start..]
                    .find(OPEN_END)
                    .ok_or_else(|| format!("unclosed `{DEFAULT_FILE}` at byte {d}"))?;
                default_file = Some(page[start..start + end].trim().to_owned());
                at = start + end;
            }
            (Some(m), _) => {
                let start = m + OPEN.len();
                let line_end = page[start..].find('\n').map_or(page.len(), |i| start + i);
                let source_end = page[start..line_end]
                    .find(OPEN_END)
                    .ok_or_else(|| format!("a mark without `-->` at {}", excerpt(page, m)))?;
                let source = page[start..start + source_end].trim().to_owned();
                let text_start = start + source_end + OPEN_END.len();
                let text_end = page[text_start..line_end]
                    .find(CLOSE)
                    .map(|i| text_start + i)
                    .ok_or_else(|| format!("a mark not closed on its line at {}", excerpt(page, m)))?;
                out.push(Mark {
                    text: text_start..text_end,
                    source,
                    default_file: default_file.clone(),
                });
                at = text_end + CLOSE.len();
            }
            _ => return Ok(out),
        }
    }
}

fn excerpt(page: &str, at: usize) -> String {
    let line = page[..at].matches('\n').count() + 1;
    let end = page[at..].find('\n').map_or(page.len(), |i| at + i);
    format!("line {line}: {}", &page[at..end])
}

/// Reads committed results files, each once.
#[derive(Default)]
struct Results {
    json: BTreeMap<String, Value>,
    text: BTreeMap<String, String>,
}

impl Results {
    fn text(&mut self, file: &str) -> Result<&str, String> {
        if !self.text.contains_key(file) {
            let path = root().join("bench/results").join(file);
            let text = std::fs::read_to_string(&path).map_err(|e| format!("bench/results/{file}: {e}"))?;
            self.text.insert(file.to_owned(), text);
        }
        Ok(&self.text[file])
    }

    fn value(&mut self, file: &str, pointer: &str) -> Result<f64, String> {
        if !self.json.contains_key(file) {
            let text = self.text(file)?.to_owned();
            let json: Value =
                serde_json::from_str(&text).map_err(|e| format!("bench/results/{file}: {e}"))?;
            self.json.insert(file.to_owned(), json);
        }
        let pointer = pointer.replace("%20", " ");
        let value = self.json[file]
            .pointer(&pointer)
            .ok_or_else(|| format!("bench/results/{file} has nothing at {pointer}"))?;
        match value {
            Value::Number(n) => n.as_f64(),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
        .ok_or_else(|| format!("bench/results/{file}#{pointer} is not a number: {value}"))
    }
}

/// A JSON source's expression, evaluated.
fn evaluate(source: &str, default_file: Option<&str>, results: &mut Results) -> Result<f64, String> {
    let spaced = source.replace('(', " ( ").replace(')', " ) ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut parser = Parser {
        tokens: &tokens,
        at: 0,
        default_file,
        results,
    };
    let value = parser.sum()?;
    if parser.at != tokens.len() {
        return Err(format!("`{source}`: unexpected `{}`", tokens[parser.at]));
    }
    Ok(value)
}

struct Parser<'a> {
    tokens: &'a [&'a str],
    at: usize,
    default_file: Option<&'a str>,
    results: &'a mut Results,
}

impl Parser<'_> {
    fn next_is(&self, ops: &[&str]) -> Option<String> {
        let token = self.tokens.get(self.at)?;
        ops.contains(token).then(|| (*token).to_owned())
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut value = self.product()?;
        while let Some(op) = self.next_is(&["+", "-"]) {
            self.at += 1;
            let rhs = self.product()?;
            value = if op == "+" { value + rhs } else { value - rhs };
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut value = self.factor()?;
        while let Some(op) = self.next_is(&["*", "/"]) {
            self.at += 1;
            let rhs = self.factor()?;
            value = if op == "*" { value * rhs } else { value / rhs };
        }
        Ok(value)
    }

    fn factor(&mut self) -> Result<f64, String> {
        let token = *self
            .tokens
            .get(self.at)
            .ok_or_else(|| "an expression ends early".to_owned())?;
        self.at += 1;
        if token == "(" {
            let value = self.sum()?;
            if self.next_is(&[")"]).is_none() {
                return Err("a `(` without its `)`".to_owned());
            }
            self.at += 1;
            return Ok(value);
        }
        if let Ok(number) = token.parse::<f64>() {
            return Ok(number);
        }
        let (file, pointer) = token
            .split_once('#')
            .ok_or_else(|| format!("`{token}` is neither a number nor FILE#POINTER"))?;
        let file = if file.is_empty() {
            self.default_file
                .ok_or_else(|| format!("`{token}`: no `{DEFAULT_FILE}FILE -->` above it"))?
        } else {
            file
        };
        self.results.value(file, pointer)
    }
}

/// `value` printed as `like` is: the same number of decimals, thousands separators if it has
/// them.
fn render(value: f64, like: &str) -> String {
    let decimals = like.split_once('.').map_or(0, |(_, d)| d.len());
    let plain = format!("{value:.decimals$}");
    if !like.contains(',') {
        return plain;
    }
    let (sign, digits) = plain.strip_prefix('-').map_or(("", plain.as_str()), |d| ("-", d));
    let (int, frac) = digits
        .split_once('.')
        .map_or((digits, None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(frac) => format!("{sign}{grouped}.{frac}"),
        None => format!("{sign}{grouped}"),
    }
}

/// Whether a source is JSON (an expression) rather than a text file.
fn is_json(source: &str) -> bool {
    source.contains('#') || source.parse::<f64>().is_ok() || source.contains(' ')
}

/// Checks every mark of a page; returns the problems and the page with every JSON-sourced figure
/// re-rendered.
fn check_page(page: &str, results: &mut Results) -> (Vec<String>, String) {
    let mut problems = Vec::new();
    let mut rendered = String::with_capacity(page.len());
    let mut copied = 0;
    let marks = match marks(page) {
        Ok(marks) => marks,
        Err(e) => return (vec![e], page.to_owned()),
    };
    for mark in marks {
        let text = &page[mark.text.clone()];
        let here = excerpt(page, mark.text.start);
        if text.trim().is_empty() || text.trim() != text {
            problems.push(format!("{here}: the marked figure `{text}` is empty or padded"));
            continue;
        }
        if is_json(&mark.source) {
            match evaluate(&mark.source, mark.default_file.as_deref(), results) {
                Ok(value) => {
                    let expected = render(value, text);
                    if expected != text {
                        problems.push(format!(
                            "{here}: reads {text}, its source `{}` gives {expected}",
                            mark.source
                        ));
                    }
                    rendered.push_str(&page[copied..mark.text.start]);
                    rendered.push_str(&expected);
                    copied = mark.text.end;
                }
                Err(e) => problems.push(format!("{here}: {e}")),
            }
        } else {
            match results.text(&mark.source) {
                Ok(source) if source.contains(text) => {}
                Ok(_) => problems.push(format!(
                    "{here}: `{text}` does not appear in bench/results/{}",
                    mark.source
                )),
                Err(e) => problems.push(format!("{here}: {e}")),
            }
        }
    }
    rendered.push_str(&page[copied..]);
    (problems, rendered)
}

/// Regions of a page no figure check reads: fenced code, inline code, HTML comments, marked
/// figures, link targets and generated blocks (between `<!-- ... generated ... -->` and
/// `<!-- end of ... -->`), each replaced by a space.
fn prose(page: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    let mut generated = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if line.starts_with("<!-- ") && line.contains("generated") {
            generated = true;
        }
        if generated {
            generated = !line.starts_with("<!-- end of ");
            out.push('\n');
            continue;
        }
        if fenced {
            out.push('\n');
            continue;
        }
        out.push_str(&strip_spans(line));
        out.push('\n');
    }
    out
}

/// A line without its marked figures, comments, inline code and link targets.
fn strip_spans(line: &str) -> String {
    let mut line = line.to_owned();
    // A marked figure becomes a word, so that a number before it does not read as one with the
    // figure's unit.
    for (open, close, with) in [
        (OPEN, CLOSE, " fig "),
        ("<!--", "-->", " "),
        ("](", ")", " "),
        ("`", "`", " code "),
    ] {
        while let Some(start) = line.find(open) {
            let Some(len) = line[start + open.len()..].find(close) else {
                break;
            };
            let end = start + open.len() + len + close.len();
            line.replace_range(start..end, with);
        }
    }
    line
}

/// Units after which a whole number reads as a measurement: a ratio or a size.
const UNITS: [&str; 7] = ["x ", "x,", "x)", "x;", "x.", "MB", "kB"];

/// The measurement-looking numbers in a page's prose: any number with a decimal point (not a
/// version: `v1.8.1`, `1.37+`, `Kubernetes 1.37`; not a quantity: `1.5Gi`), or a whole number
/// followed by a ratio `x` or a size in MB or kB. Whole numbers of seconds, jobs/s or percent are
/// left alone: they are mostly settings (a 10 s pod, 20 jobs/s, 25% of a run).
fn bare_figures(prose: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in prose.lines().enumerate() {
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let starts = bytes[i].is_ascii_digit()
                && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || b".-_/v".contains(&bytes[i - 1])));
            if !starts {
                i += 1;
                continue;
            }
            let mut j = i;
            while j < bytes.len() && (bytes[j].is_ascii_digit() || bytes[j] == b'.' || bytes[j] == b',') {
                j += 1;
            }
            let number = line[i..j].trim_end_matches(['.', ',']);
            let end = i + number.len();
            let rest = line[end..].trim_start_matches(' ');
            let version = number.matches('.').count() > 1
                || rest.starts_with('+')
                || line[..i].ends_with("Kubernetes ")
                || line[..i].ends_with("Go ")
                || line[..i].ends_with("Python ");
            let glued = line[end..]
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() && c != 'x');
            let decimal = number.contains('.');
            let unit = UNITS.iter().any(|u| rest.starts_with(u)) || rest == "x";
            if !version && !glued && (decimal || unit) {
                found.push(format!("line {}: {number} in: {}", n + 1, line.trim()));
            }
            i = j.max(i + 1);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relative(path: &Path) -> String {
        path.strip_prefix(root()).unwrap_or(path).display().to_string()
    }

    /// Every marked figure in README.md and docs/ is its source's; bless to re-render.
    #[test]
    fn docs_figures_match_their_sources() {
        let bless = std::env::var_os("KFOP_BLESS").is_some();
        let mut results = Results::default();
        let mut problems = Vec::new();
        let mut count = 0;
        for path in pages() {
            let page = std::fs::read_to_string(&path).unwrap();
            count += marks(&page).map_or(0, |m| m.len());
            let (found, rendered) = check_page(&page, &mut results);
            if bless && rendered != page {
                std::fs::write(&path, &rendered).unwrap();
            }
            let name = relative(&path);
            problems.extend(found.into_iter().map(|p| format!("{name}: {p}")));
        }
        assert!(count > 100, "{count} marked figures");
        assert!(
            problems.is_empty() || bless,
            "{} figures differ from their sources or have none (KFOP_BLESS=1 cargo test -p \
             kfop-bench docs_figures re-renders JSON-sourced ones):\n{}",
            problems.len(),
            problems.join("\n")
        );
    }

    /// Pages whose figures are not marked yet, with why: each is a gap, not a rule.
    const NOT_YET_MARKED: [(&str, &str); 0] = [];

    /// No page quotes a measurement-looking number without its source.
    #[test]
    fn docs_figures_have_marks() {
        let mut problems = Vec::new();
        for path in pages() {
            let page = std::fs::read_to_string(&path).unwrap();
            let name = relative(&path);
            if NOT_YET_MARKED.iter().any(|(page, _)| *page == name) {
                continue;
            }
            problems.extend(
                bare_figures(&prose(&page))
                    .into_iter()
                    .map(|p| format!("{name}: {p}")),
            );
        }
        assert!(
            problems.is_empty(),
            "{} measurement-looking numbers without a source: mark each as \
             <!--fig FILE#POINTER-->N<!--/fig--> (see bench/src/figures.rs), or say it \
             without a number:\n{}",
            problems.len(),
            problems.join("\n")
        );
    }

    fn results_with(file: &str, json: &str) -> Results {
        let mut results = Results::default();
        results.text.insert(file.to_owned(), json.to_owned());
        results
    }

    #[test]
    fn marks_sources_and_defaults() {
        let page = "a <!--fig x.json#/a-->1.5<!--/fig--> b\n<!-- figures: y.json -->\n\
                    c <!--fig #/b / #/c-->2<!--/fig-->\n";
        let marks = marks(page).unwrap();
        assert_eq!(marks.len(), 2);
        assert_eq!(&page[marks[0].text.clone()], "1.5");
        assert_eq!(marks[0].default_file, None);
        assert_eq!(marks[1].source, "#/b / #/c");
        assert_eq!(marks[1].default_file.as_deref(), Some("y.json"));
        assert!(super::marks("<!--fig x.json#/a-->1\n<!--/fig-->").is_err());
    }

    #[test]
    fn expressions_read_and_compute() {
        let mut results = results_with(
            "r.json",
            r#"{"a": {"b c": 3.0, "d": 1.5}, "list": [{"v": 2}], "n": 1176}"#,
        );
        let mut eval = |s: &str| evaluate(s, Some("r.json"), &mut results);
        assert_eq!(eval("r.json#/a/d").unwrap(), 1.5);
        assert_eq!(eval("#/a/b%20c / #/a/d").unwrap(), 2.0);
        assert_eq!(eval("(#/a/d + 0.5) * #/list/0/v - 1").unwrap(), 3.0);
        assert_eq!(eval("1 + 2 * 3").unwrap(), 7.0);
        assert!(eval("#/missing").is_err());
        assert!(eval("(1 + 2").is_err());
        assert!(eval("1 2").is_err());
        assert_eq!(render(1176.0, "1,176"), "1,176");
        assert_eq!(render(0.4567, "0.46"), "0.46");
        assert_eq!(render(15.43, "15"), "15");
        assert_eq!(render(12345.678, "1,000.0"), "12,345.7");

        let page = "<!--fig r.json#/a/d-->1.6<!--/fig--> and <!--fig r.json#/n-->1,176<!--/fig-->\n";
        let (problems, rendered) = check_page(page, &mut results);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("reads 1.6, its source `r.json#/a/d` gives 1.5"));
        assert_eq!(
            rendered,
            "<!--fig r.json#/a/d-->1.5<!--/fig--> and <!--fig r.json#/n-->1,176<!--/fig-->\n"
        );
    }

    #[test]
    fn text_sources_must_contain_the_figure() {
        let mut results = results_with("r.md", "| CPU | 14.0 ms |");
        let (ok, _) = check_page("<!--fig r.md-->14.0<!--/fig-->", &mut results);
        assert!(ok.is_empty(), "{ok:?}");
        let (bad, _) = check_page("<!--fig r.md-->14.1<!--/fig-->", &mut results);
        assert_eq!(bad.len(), 1, "{bad:?}");
    }

    #[test]
    fn bare_figures_are_found_outside_marks_code_and_generated_blocks() {
        let page = "\
It ran 6.2 times as fast, 55.3 MB, 4x less, 36 kB and 12%.
Kubeflow v1.8.1 on Kubernetes 1.37+, `--kube-api-qps 0.5`, 1,000 jobs, 2 cores, 10 s, 1.5Gi.
Marked: <!--fig r.json#/a-->15.4<!--/fig--> jobs/s. [link](a/1.5.md)
<!-- scale results: generated from x -->
| 1.5 | 2.5 |
<!-- end of scale results -->
```sh
run --rate 0.5
```
";
        let found = bare_figures(&prose(page));
        let numbers: Vec<&str> = found
            .iter()
            .map(|f| f.split(": ").nth(1).unwrap().split(' ').next().unwrap())
            .collect();
        assert_eq!(numbers, ["6.2", "55.3", "4", "36"], "{found:?}");
    }
}
