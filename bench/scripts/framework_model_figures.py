#!/usr/bin/env python3
"""Figures for "one framework model", measured on a git revision (not the working tree).

usage: bench/scripts/framework_model_figures.py [REV] [DETAILS_FILE] [CHAIN_FILE]
  REV: any git revision (default HEAD), extracted with `git archive` into a temporary directory.
  DETAILS_FILE: where the name lists and file lists go (default /tmp/framework-model-<rev>.md).
  CHAIN_FILE: a hand-traced reconcile chain, lines "N. `path` — what" (default
  bench/results/framework-model/reconcile-chain-228703d.md); each path is checked at REV.
Prints one markdown table on stdout and nothing else. Method: bench/results/framework-model/README.md.
"""
import os, re, subprocess, sys, tempfile
from pathlib import Path

FWS = ["tensorflow", "pytorch", "mpi", "xgboost", "paddle", "jax", "mxnet"]
RECONCILE_MODS = {"controller", "plan", "framework", "hooks", "manifest", "policy", "defaults", "env", "labels",
                  "gang", "api", "status_rule", "cel_rule", "children", "observed_child", "client", "packed",
                  "compact", "cache", "relist", "metrics"}


def strip_comments(text):
    """Rust source with comments removed (string and char literals kept, newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c, two = text[i], text[i:i + 2]
        if two == "//":
            while i < n and text[i] != "\n":
                i += 1
        elif two == "/*":
            depth, i = 1, i + 2
            while i < n and depth:
                if text[i:i + 2] == "/*": depth, i = depth + 1, i + 2
                elif text[i:i + 2] == "*/": depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if text[i] == "\n" else ""); i += 1
        elif (m := re.match(r'b?r(#*)"', text[i:i + 40])) and (i == 0 or not re.match(r"\w", text[i - 1])):
            end = text.find('"' + m.group(1), i + m.end())
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append(text[i:end]); i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1]); i = j + 1
        elif c == "'" and (m := re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])):
            out.append(m.group(0)); i += m.end()
        else:
            out.append(c); i += 1
    return "".join(out)


def without_tests(text):
    """Cut at a line `#[cfg(test)]` followed by `mod tests` (this repo's convention: to the end of file)."""
    m = re.search(r"^[ \t]*#\[cfg\(test\)\][ \t]*\n(\s*\n)*\s*mod tests\b", text, re.M)
    return text[:m.start()] if m else text


def code_lines(text):
    return [l for l in strip_comments(without_tests(text)).split("\n") if l.strip()]


IDENT = re.compile(r"\s*(r#)?([A-Za-z_]\w*)")


def parse_path(s, i, prefix, names):
    """Continue a path (or use tree) after `prefix` at s[i]; add every full path to names."""
    while True:
        m = re.match(r"\s*::\s*", s[i:])
        if not m:
            break
        j = i + m.end()
        if s[j:j + 1] == "{":
            j += 1
            while True:
                j += re.match(r"[\s,]*", s[j:]).end()
                if s[j:j + 1] in ("}", ""):
                    return j + 1
                if s[j:j + 1] == "*":
                    names.add(prefix + "::*"); j += 1; continue
                if not (im := IDENT.match(s[j:])):
                    return j
                if im.group(2) == "self":
                    names.add(prefix); j += im.end()
                else:
                    j = parse_path(s, j + im.end(), prefix + "::" + im.group(2), names)
                j += (re.match(r"\s*as\s+\w+", s[j:]) or re.match("", "")).end()
        if s[j:j + 1] == "*":
            names.add(prefix + "::*"); return j + 1
        if not (im := IDENT.match(s[j:])):
            break
        prefix, i = prefix + "::" + im.group(2), j + im.end()
    names.add(prefix)
    return i


def runtime_names(text, template):
    code = strip_comments(without_tests(text))
    if template:  # askama tags of the scaffold: keep every branch, mark placeholders
        code = re.sub(r"\{\{.*?\}\}", "TEMPLATE", re.sub(r"\{%.*?%\}|\{#.*?#\}", "", code, flags=re.S), flags=re.S)
    names = set()
    for m in re.finditer(r"(?<![\w:])kfop_runtime\b", code):
        parse_path(code, m.end(), "kfop_runtime", names)
    return names


def rust_files(src):
    return sorted(p for p in src.rglob("*.rs") if p.name != "tests.rs" and "tests" not in p.relative_to(src).parts[:-1])


def is_generated(p, src):
    return "generated" in p.relative_to(src).parts[:-1] or "@generated" in p.read_text().split("\n")[0]


def top_level_pub(lib):
    """Top-level `pub` items of lib.rs: (kind, name, hidden-or-gated)."""
    code, items, depth, attrs = strip_comments(lib), [], 0, ""
    kinds = r"(?:async\s+|unsafe\s+|const\s+)*(fn|mod|use|struct|enum|trait|const|static|type|union)"
    for stmt in re.finditer(rf"(#\[[^\]]*\]\s*)|(pub\s+{kinds}\b[^;{{]*)|([{{}};])", code):
        if stmt.group(1) or stmt.group(4):  # an attribute, or the end of an item (which drops its attributes)
            attrs = attrs + stmt.group(1) if stmt.group(1) else ""
            depth += {"{": 1, "}": -1}.get(stmt.group(4), 0); continue
        if depth == 0:
            gated = "doc(hidden)" in attrs or "cfg(" in attrs
            kind = stmt.group(3)
            if kind == "use":
                use = re.sub(r"\w+\s+as\s+(\w+)", r"\1", code[stmt.start():code.index(";", stmt.start())][7:])
                names, first = set(), IDENT.match(use)
                parse_path(use, first.end(), first.group(2), names)
                items += [("use", n.split("::")[-1], gated) for n in sorted(names)]
            else:
                items.append((kind, re.search(kinds + r"\s+(\w+)", stmt.group(2)).group(2), gated))
        attrs = ""
    return items


def module_of(src, path):
    parts = path.relative_to(src).with_suffix("").parts
    return parts[:-1] if parts[-1] in ("mod", "lib") else parts


def import_closure(root, restrict):
    src = root / "runtime/src"
    files = {module_of(src, p): p for p in src.rglob("*.rs") if p.name not in ("tests.rs", "testing.rs")}
    seen, todo = set(), [("controller",)]
    while todo:
        mod = todo.pop()
        if mod in seen or mod not in files or (restrict and mod[0] not in RECONCILE_MODS):
            continue
        seen.add(mod)
        code = strip_comments(without_tests(files[mod].read_text()))
        code = re.sub(r"#\[cfg\((any\()?test[^\]]*\]\s*(pub\s+)?mod\s+\w+\s*;", "", code)
        targets = [list(mod) + [m] for m in re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code, re.M)]
        for kw, base in (("crate", []), ("super", list(mod[:-1])), ("self", list(mod))):
            for m in re.finditer(rf"(?<![\w:]){kw}(?=\s*::)", code):
                names = set(); parse_path(code, m.end(), kw, names)
                targets += [base + n.split("::")[1:] for n in names]
        for t in targets:
            for k in range(len(t), 0, -1):  # the longest prefix that is a module file
                if tuple(t[:k]) in files:
                    todo.append(tuple(t[:k])); break
    return sorted(str(files[m].relative_to(root)) for m in seen)


def main():
    rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
    here = Path(__file__).resolve().parent
    repo = subprocess.run(["git", "-C", str(here), "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True).stdout.strip()
    sha = subprocess.run(["git", "-C", repo, "rev-parse", "--short", rev + "^{commit}"], capture_output=True, text=True).stdout.strip()
    if not sha:
        sys.exit(f"not a revision: {rev}")
    details_path = sys.argv[2] if len(sys.argv) > 2 else f"/tmp/framework-model-{sha}.md"
    chain_path = sys.argv[3] if len(sys.argv) > 3 else here.parent / "results/framework-model/reconcile-chain-228703d.md"
    chain = re.findall(r"^\d+\.\s+`([^`]+)`\s+—\s+(.*)$", Path(chain_path).read_text(), re.M)
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.Popen(["git", "-C", repo, "archive", sha], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", tmp], stdin=archive.stdout, check=True); archive.wait()
        root = Path(tmp)
        lib = (root / "runtime/src/lib.rs").read_text()
        crates = set(re.findall(r"^pub use (\w+);", lib, re.M))  # re-exported crates: kube, serde, ...
        cols = FWS + ["scaffold"]
        names = {c: {"author": set(), "generated": set()} for c in cols}
        lines, warn = {c: {"author": 0, "files": 0, "yaml": None, "gen": 0, "gen_code": 0} for c in cols}, []
        for c in cols:
            base = root / ("templates/operator" if c == "scaffold" else f"examples/{c}")
            if not base.is_dir():
                warn.append(f"{base.relative_to(root)} missing"); continue
            extra = [base / "build.rs"] if (base / "build.rs").exists() else []
            for p in rust_files(base / "src") + extra:
                text = p.read_text()
                gen = p.parent != base and is_generated(p, base / "src")
                names[c]["generated" if gen else "author"] |= runtime_names(text, c == "scaffold")
                if gen:
                    lines[c]["gen"] += len(text.rstrip("\n").split("\n"))
                    lines[c]["gen_code"] += len(code_lines(text))
                else:
                    lines[c]["author"] += len(code_lines(text)); lines[c]["files"] += 1
            if (base / "kfop.yaml").exists():
                yaml = (base / "kfop.yaml").read_text().split("\n")
                lines[c]["yaml"] = sum(1 for l in yaml if l.strip() and not l.strip().startswith("#"))
        live = lambda s: {n for n in s if "TEMPLATE" not in n}
        own = lambda s: {n for n in s if n.split("::")[1] not in crates}
        union = {k: set().union(*(live(names[c][k]) for c in cols)) for k in ("author", "generated")}
        pub = top_level_pub(lib)
        kinds = {k: sum(1 for x in pub if x[0] == k) for k in sorted({x[0] for x in pub})}
        chain_files = sorted({f for f, _ in chain})
        missing = [f for f in chain_files if not (root / f).exists()]
        closure, restricted = import_closure(root, False), import_closure(root, True)

    def row(label, total, per):
        return f"| {label} | {total} | " + " | ".join(str(per(c)) for c in cols) + " |"
    fmt = lambda s: f"{len(s)} ({len(own(s))} own)"
    s7 = lambda k: sum(lines[c][k] or 0 for c in FWS)
    out = [f"| figure at {sha} | all | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols),
           row("kfop_runtime paths in author-written code (distinct; all = union of the 8 columns; own = not through a re-exported crate)",
               fmt(union["author"]), lambda c: fmt(live(names[c]["author"]))),
           row("kfop_runtime paths in generated code", fmt(union["generated"]), lambda c: fmt(live(names[c]["generated"]))),
           row("kfop_runtime paths, author-written or generated", fmt(union["author"] | union["generated"]),
               lambda c: fmt(live(names[c]["author"] | names[c]["generated"]))),
           row("kfop_runtime top-level `pub` items (runtime/src/lib.rs)",
               f"{len(pub)} ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))}; {sum(g for *_, g in pub)} doc(hidden)/cfg-gated)",
               lambda c: "—"),
           row("author-written Rust lines (src/ minus generated, tests cut; non-blank non-comment; all = sum of 7)",
               s7("author"), lambda c: lines[c]["author"]),
           row("author-written Rust files", s7("files"), lambda c: lines[c]["files"]),
           row("kfop.yaml lines (non-blank non-comment)", s7("yaml"), lambda c: "—" if lines[c]["yaml"] is None else lines[c]["yaml"]),
           row("generated Rust lines (total)", s7("gen"), lambda c: lines[c]["gen"]),
           row("generated Rust lines (non-blank non-comment)", s7("gen_code"), lambda c: lines[c]["gen_code"]),
           row("files one PyTorchJob reconcile passes through (hand-traced chain)",
               f"{len(chain_files) - len(missing)} ({sum(f.startswith('runtime/') for f in chain_files if f not in missing)} runtime + "
               f"{sum(f.startswith('examples/') for f in chain_files if f not in missing)} pytorch)"
               + (f"; {len(missing)} listed files missing at this revision" if missing else ""), lambda c: "—"),
           row("runtime files in the `crate::`/`super::`/`mod` closure of controller/mod.rs (all; reconcile modules only)",
               f"{len(closure)}; {len(restricted)}" if closure else "n/a (no runtime/src/controller)", lambda c: "—")]
    print("\n".join(out))

    d = [f"# Framework-model figures at {sha}: details", ""] + [f"- warning: {w}" for w in warn]
    for k in ("author", "generated"):
        d += ["", f"## kfop_runtime paths in {k} code ({len(union[k])})", ""]
        d += [f"- `{n}`" + ("" if n in own(union[k]) else " (re-exported crate)") + " — " +
              ", ".join(c for c in cols if n in names[c][k]) for n in sorted(union[k])]
    tmpl = sorted(n for c in cols for k in ("author", "generated") for n in names[c][k] if "TEMPLATE" in n)
    d += ["", "Scaffold paths with a template placeholder (not counted): " + ", ".join(f"`{n}`" for n in tmpl)]
    d += ["", f"## runtime/src/lib.rs top-level pub items ({len(pub)})", ""]
    d += [f"- {k} `{n}`" + (" (doc(hidden) or cfg-gated)" if g else "") for k, n, g in pub]
    d += ["", f"## Reconcile chain ({len(chain_files)} files; missing at {sha}: {missing or 'none'})", ""]
    d += [f"From `{os.path.relpath(chain_path, repo)}`.", ""] + [f"{i}. `{f}` — {what}" for i, (f, what) in enumerate(chain, 1)]
    d += ["", f"## crate:: closure of runtime/src/controller/mod.rs ({len(closure)})", ""] + [f"- `{f}`" for f in closure]
    d += ["", f"## ... restricted to the reconcile modules ({len(restricted)})", ""] + [f"- `{f}`" for f in restricted]
    Path(details_path).write_text("\n".join(d) + "\n")


if __name__ == "__main__":
    main()
