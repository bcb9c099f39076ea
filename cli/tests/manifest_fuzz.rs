#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Property tests of the manifest parser on bad input: random text, random documents shaped like
//! a manifest, and mutations of valid manifests. Parsing never panics; an error is one line that
//! points into the text or names a field.
use std::collections::BTreeSet;
use std::path::Path;

use kfop::manifest::{ManifestError, default_manifest, parse, parse_with_warnings};
use kfop_runtime::env::Template;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

/// Valid, and between them they set every field the parser knows.
const FULL: &str = r#"apiVersion: kfop.dev/v1alpha1
kind: Framework
metadata:
  name: bar
spec:
  group: bar.example.com
  version: v2beta1
  kind: BarJob
  plural: barjobs
  shortNames: [bj]
  controllerName: bar-controller
  frameworkName: bar
  replicaSpecsField: barReplicaSpecs
  container:
    name: bar
    portName: bar-port
    port: 2222
  roles:
    - name: Chief
      master: true
      restartPolicy: ExitCode
      minReplicas: 0
      maxReplicas: 1
      defaultReplicas: 1
    - name: Worker
      restartPolicy: Never
      defaultReplicas: 2
  scale: Worker
  resources: [configmaps, secrets]
  env:
    - name: PEERS
      value: "{hosts.Worker} {{x}}"
      roles: [Worker]
      unless: [Chief]
      index: 0
      containers: default
    - name: POD_IP
      fieldRef: status.podIP
      containers: all
  status:
    rule: successRules
    subject: barjob
    exitCodeRestartEvents: true
    success:
      - anyOf: Worker
      - indexZeroOf: Chief
"#;

/// The first segment of every field an error may name.
const FIELD_ROOTS: [&str; 4] = ["apiVersion", "kind", "metadata", "spec"];

/// The invariants of any parse: a valid model, or an error that is one line starting with
/// `kfop.yaml:line:column: `, whose position is inside `text` or which names a manifest field.
fn check(text: &str) -> Result<(), TestCaseError> {
    match parse_with_warnings(text, Path::new("kfop.yaml")) {
        Ok(validated) => {
            for warning in &validated.warnings {
                // A warning has an error's form.
                check_error(
                    &ManifestError {
                        file: warning.file.clone(),
                        line: warning.line,
                        column: warning.column,
                        field: warning.field.clone(),
                        message: warning.message.clone(),
                    },
                    text,
                )?;
                prop_assert_eq!(warning.to_string().lines().count(), 1);
            }
            let model = validated.model;
            prop_assert!(!model.roles.is_empty());
            if let Some((name, port)) = &model.port {
                prop_assert!((1..=65535).contains(port) && !name.is_empty() && name.len() <= 15);
            }
            let roles: Vec<&str> = model.roles.iter().map(|r| r.name.as_str()).collect();
            for env in &model.env {
                prop_assert!(env.value.is_some() != env.field_ref.is_some());
                if let Some(value) = &env.value {
                    prop_assert!(Template::parse(value, &roles).is_ok(), "{value:?} accepted");
                }
            }
        }
        Err(e) => check_error(&e, text)?,
    }
    Ok(())
}

fn check_error(e: &ManifestError, text: &str) -> Result<(), TestCaseError> {
    let shown = e.to_string();
    prop_assert!(!e.message.is_empty(), "no message: {shown}");
    prop_assert!(!shown.contains('\n'), "more than one line: {shown:?}");
    let position = format!("kfop.yaml:{}:{}: ", e.line, e.column);
    prop_assert!(shown.starts_with(&position), "{shown}");
    prop_assert!(
        e.line > 0 || !e.field.is_empty(),
        "neither position nor field: {shown}"
    );
    // At most one past the last line, where an unexpected end of input is.
    prop_assert!(e.line <= text.lines().count() + 1, "line past the end: {shown}");
    if e.line > 0 {
        prop_assert!(e.column > 0, "line without column: {shown}");
    }
    if !e.field.is_empty() {
        let root = e.field.split(['.', '[']).next().unwrap_or_default();
        prop_assert!(FIELD_ROOTS.contains(&root), "unknown field path: {shown}");
    }
    Ok(())
}

/// A YAML node; scalars are already encoded.
#[derive(Debug, Clone)]
enum Yaml {
    Scalar(String),
    Map(Vec<(String, Yaml)>),
    List(Vec<Yaml>),
}

impl Yaml {
    /// Block style, `indent` spaces deep; empty collections in flow style.
    fn emit(&self, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match self {
            Self::Scalar(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Self::Map(entries) if entries.is_empty() => out.push_str("{}\n"),
            Self::List(items) if items.is_empty() => out.push_str("[]\n"),
            Self::Map(entries) => {
                for (key, value) in entries {
                    out.push_str(&format!("{pad}{key}:"));
                    value.emit_nested(indent, out);
                }
            }
            Self::List(items) => {
                for item in items {
                    out.push_str(&format!("{pad}-"));
                    item.emit_nested(indent, out);
                }
            }
        }
    }

    /// After `key:` or `-`: a scalar or empty collection on the same line, else the next lines.
    fn emit_nested(&self, indent: usize, out: &mut String) {
        let block = match self {
            Self::Scalar(_) => false,
            Self::Map(entries) => !entries.is_empty(),
            Self::List(items) => !items.is_empty(),
        };
        if block {
            out.push('\n');
            self.emit(indent + 2, out);
        } else {
            out.push(' ');
            self.emit(indent, out);
        }
    }
}

/// A double-quoted YAML string.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What a manifest's fields hold: strings and integers with values that pass validation and
/// values that do not.
#[derive(Debug)]
enum Shape {
    Str {
        good: &'static [&'static str],
        bad: &'static [&'static str],
    },
    Int(i64, i64),
    Bool,
    /// Keys, whether each is required, and their shapes.
    Map(&'static [(&'static str, bool, Shape)]),
    List(&'static Shape),
}

const REQUIRED: bool = true;
const OPTIONAL: bool = false;

const ROLE_NAME: Shape = Shape::Str {
    good: &["Master", "Worker", "Chief"],
    bad: &["worker", "ps", "", "Wor\nker"],
};
const ROLE_LIST: Shape = Shape::List(&ROLE_NAME);
const REPLICAS: Shape = Shape::Int(0, 4);
const ROLE: Shape = Shape::Map(&[
    ("name", REQUIRED, ROLE_NAME),
    ("master", OPTIONAL, Shape::Bool),
    (
        "restartPolicy",
        OPTIONAL,
        Shape::Str {
            good: &["Always", "OnFailure", "Never", "ExitCode"],
            bad: &["Sometimes", "never", "On\nFailure"],
        },
    ),
    ("minReplicas", OPTIONAL, REPLICAS),
    ("maxReplicas", OPTIONAL, REPLICAS),
    ("defaultReplicas", OPTIONAL, REPLICAS),
]);
const ENV: Shape = Shape::Map(&[
    (
        "name",
        REQUIRED,
        Shape::Str {
            good: &["RANK", "MASTER_ADDR", "_X1"],
            bad: &["1BAD", "A-B", ""],
        },
    ),
    (
        "value",
        OPTIONAL,
        Shape::Str {
            good: &["{rank}", "{host.Worker.0}:{port.Worker}", "{{literal}}", "plain"],
            bad: &["{nope}", "{", "}", "{fqdn.Worker.-1}", "{replicas.Ch\nief}"],
        },
    ),
    (
        "fieldRef",
        OPTIONAL,
        Shape::Str {
            good: &["status.podIP"],
            bad: &["", "no.such.field"],
        },
    ),
    ("roles", OPTIONAL, ROLE_LIST),
    ("requires", OPTIONAL, ROLE_LIST),
    ("unless", OPTIONAL, ROLE_LIST),
    ("index", OPTIONAL, Shape::Int(0, 3)),
    (
        "containers",
        OPTIONAL,
        Shape::Str {
            good: &["all", "default"],
            bad: &["some"],
        },
    ),
]);
const SUCCESS: Shape = Shape::Map(&[
    ("allOf", OPTIONAL, ROLE_NAME),
    ("anyOf", OPTIONAL, ROLE_NAME),
    ("indexZeroOf", OPTIONAL, ROLE_NAME),
]);
const CEL_EXPRESSION: Shape = Shape::Str {
    good: &[
        "true",
        "replicas.Worker.succeeded >= replicas.Worker.total",
        "has(replicas.Chief) && replicas.Chief.failed > 0",
    ],
    bad: &["replicas.Boss.failed > 0", "replicas.Worker.succeeded >= )", ""],
};
const STATUS: Shape = Shape::Map(&[
    (
        "rule",
        OPTIONAL,
        Shape::Str {
            good: &["successRules", "leaderOrFollowers", "cel", "hook"],
            bad: &["majority", "SuccessRules"],
        },
    ),
    ("leader", OPTIONAL, ROLE_NAME),
    ("followers", OPTIONAL, ROLE_NAME),
    (
        "subject",
        OPTIONAL,
        Shape::Str {
            good: &["foojob"],
            bad: &["", "foo\njob"],
        },
    ),
    ("exitCodeRestartEvents", OPTIONAL, Shape::Bool),
    ("succeeded", OPTIONAL, CEL_EXPRESSION),
    ("running", OPTIONAL, CEL_EXPRESSION),
    ("failed", OPTIONAL, CEL_EXPRESSION),
    ("success", OPTIONAL, Shape::List(&SUCCESS)),
]);
const DNS_NAME: Shape = Shape::Str {
    good: &["foo", "foo-bar", "x1"],
    bad: &["Foo", "foo-", "-foo", "a.b", ""],
};
const MANIFEST: Shape = Shape::Map(&[
    (
        "apiVersion",
        REQUIRED,
        Shape::Str {
            good: &["kfop.dev/v1alpha1"],
            bad: &["kfop.dev/v1"],
        },
    ),
    (
        "kind",
        REQUIRED,
        Shape::Str {
            good: &["Framework"],
            bad: &["Operator"],
        },
    ),
    ("metadata", REQUIRED, Shape::Map(&[("name", REQUIRED, DNS_NAME)])),
    (
        "spec",
        REQUIRED,
        Shape::Map(&[
            (
                "group",
                REQUIRED,
                Shape::Str {
                    good: &["kubeflow.org", "a.example.com"],
                    bad: &["kubeflow", "a..b", "Ex.com", "."],
                },
            ),
            (
                "version",
                REQUIRED,
                Shape::Str {
                    good: &["v1", "v2beta1", "v1alpha3"],
                    bad: &["v1alpha", "1.0", "v", "vbeta1", "v1gamma2", "v٣"],
                },
            ),
            (
                "kind",
                REQUIRED,
                Shape::Str {
                    good: &["FooJob"],
                    bad: &["fooJob", "Foo_Job", "", "Ä"],
                },
            ),
            ("plural", OPTIONAL, DNS_NAME),
            ("shortNames", OPTIONAL, Shape::List(&DNS_NAME)),
            ("controllerName", OPTIONAL, DNS_NAME),
            ("frameworkName", OPTIONAL, DNS_NAME),
            (
                "replicaSpecsField",
                OPTIONAL,
                Shape::Str {
                    good: &["fooReplicaSpecs"],
                    bad: &["FooSpecs", "foo_specs", ""],
                },
            ),
            (
                "container",
                REQUIRED,
                Shape::Map(&[
                    ("name", REQUIRED, DNS_NAME),
                    (
                        "portName",
                        REQUIRED,
                        Shape::Str {
                            good: &["foo-port"],
                            bad: &["a-very-long-port-name", "P"],
                        },
                    ),
                    ("port", REQUIRED, Shape::Int(1, 65535)),
                ]),
            ),
            ("roles", REQUIRED, Shape::List(&ROLE)),
            ("scale", OPTIONAL, ROLE_NAME),
            (
                "resources",
                OPTIONAL,
                Shape::List(&Shape::Str {
                    good: &["pods", "configmaps", "podgroups"],
                    bad: &["gpus", "Pods", "pods\n"],
                }),
            ),
            ("env", OPTIONAL, Shape::List(&ENV)),
            // Deprecated for `status.success`, and still read.
            ("success", OPTIONAL, Shape::List(&SUCCESS)),
            ("status", OPTIONAL, STATUS),
            ("hooks", OPTIONAL, Shape::Bool),
            (
                "masterPods",
                OPTIONAL,
                Shape::Str {
                    good: &["roles", "indexZero"],
                    bad: &["first"],
                },
            ),
        ]),
    ),
]);

/// Every key of the manifest, for documents of no particular shape.
fn keys(shape: &'static Shape, out: &mut Vec<&'static str>) {
    match shape {
        Shape::Map(fields) => {
            for (key, _, value) in *fields {
                out.push(key);
                keys(value, out);
            }
        }
        Shape::List(item) => keys(item, out),
        Shape::Str { .. } | Shape::Int(..) | Shape::Bool => {}
    }
}

/// Strings validation has no reason to expect, control characters among them.
fn odd_string() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "[a-zA-Z0-9\n\t\r{}. -]{0,8}"]
}

/// A scalar of any type: numbers at and past the integer limits, strings quoted or plain.
fn scalar() -> BoxedStrategy<String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (-3..70_000i64).prop_map(|n| n.to_string()),
        Just("99999999999999999999".to_owned()),
        any::<bool>().prop_map(|b| b.to_string()),
        Just("~".to_owned()),
        Just("1.5".to_owned()),
        odd_string().prop_map(|s| quoted(&s)),
        "[a-zA-Z0-9 ._{}:-]{0,12}",
    ]
    .boxed()
}

/// A node of any shape, with keys from the manifest (and one that is not).
fn any_node() -> BoxedStrategy<Yaml> {
    let mut names = Vec::new();
    keys(&MANIFEST, &mut names);
    names.push("unknownField");
    let key = proptest::sample::select(names).prop_map(str::to_owned);
    scalar()
        .prop_map(Yaml::Scalar)
        .prop_recursive(3, 24, 4, move |inner| {
            prop_oneof![
                proptest::collection::vec((key.clone(), inner.clone()), 0..4).prop_map(Yaml::Map),
                proptest::collection::vec(inner, 0..4).prop_map(Yaml::List),
            ]
        })
        .boxed()
}

/// A node of `shape`: mostly the right type with a valid value (each check of the validator
/// is reached only past the checks before it), sometimes a bad value or anything at all.
fn node(shape: &'static Shape) -> BoxedStrategy<Yaml> {
    let shaped = match shape {
        Shape::Str { good, bad } => prop_oneof![
            36 => proptest::sample::select(*good).prop_map(str::to_owned),
            3 => proptest::sample::select(*bad).prop_map(str::to_owned),
            1 => odd_string(),
        ]
        .prop_map(|s| Yaml::Scalar(quoted(&s)))
        .boxed(),
        Shape::Int(lo, hi) => prop_oneof![39 => *lo..=*hi, 1 => any::<i64>()]
            .prop_map(|n| Yaml::Scalar(n.to_string()))
            .boxed(),
        Shape::Bool => prop_oneof![
            39 => any::<bool>().prop_map(|b| b.to_string()),
            1 => Just("yes".to_owned()),
        ]
        .prop_map(Yaml::Scalar)
        .boxed(),
        Shape::Map(fields) => fields
            .iter()
            .map(|(key, required, value)| {
                let present = if *required { 0.98 } else { 0.5 };
                proptest::option::weighted(present, node(value))
                    .prop_map(move |v| v.map(|v| (key.to_string(), v)))
            })
            .collect::<Vec<_>>()
            .prop_map(|entries| Yaml::Map(entries.into_iter().flatten().collect()))
            .boxed(),
        Shape::List(item) => proptest::collection::vec(node(item), 0..4)
            .prop_map(Yaml::List)
            .boxed(),
    };
    prop_oneof![200 => shaped, 1 => any_node()].boxed()
}

fn document(root: BoxedStrategy<Yaml>) -> impl Strategy<Value = String> {
    root.prop_map(|doc| {
        let mut text = String::new();
        doc.emit(0, &mut text);
        text
    })
}

/// One edit of a manifest's text.
#[derive(Debug, Clone)]
enum Edit {
    DeleteLine(Index),
    DuplicateLine(Index),
    SwapLines(Index, Index),
    ReplaceValue(Index, String),
    Indent(Index, usize),
    Dedent(Index, usize),
    Truncate(Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<Index>().prop_map(Edit::DeleteLine),
        any::<Index>().prop_map(Edit::DuplicateLine),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        (any::<Index>(), scalar()).prop_map(|(i, v)| Edit::ReplaceValue(i, v)),
        (any::<Index>(), 1..5usize).prop_map(|(i, n)| Edit::Indent(i, n)),
        (any::<Index>(), 1..5usize).prop_map(|(i, n)| Edit::Dedent(i, n)),
        any::<Index>().prop_map(Edit::Truncate),
    ]
}

fn apply(text: &str, edit: &Edit) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let len = lines.len();
    if len == 0 {
        return String::new();
    }
    match edit {
        Edit::DeleteLine(i) => {
            lines.remove(i.index(len));
        }
        Edit::DuplicateLine(i) => {
            let i = i.index(len);
            lines.insert(i, lines[i].clone());
        }
        Edit::SwapLines(a, b) => {
            lines.swap(a.index(len), b.index(len));
        }
        Edit::ReplaceValue(i, value) => {
            let line = &mut lines[i.index(len)];
            let start = line
                .find(": ")
                .map(|at| at + 2)
                .or_else(|| line.find("- ").map(|at| at + 2))
                .unwrap_or(line.len());
            line.replace_range(start.., value);
        }
        Edit::Indent(i, n) => lines[i.index(len)].insert_str(0, &" ".repeat(*n)),
        Edit::Dedent(i, n) => {
            let line = &mut lines[i.index(len)];
            let spaces = line.len() - line.trim_start_matches(' ').len();
            line.drain(..spaces.min(*n));
        }
        Edit::Truncate(i) => {
            let mut at = i.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            return text[..at].to_owned();
        }
    }
    lines.join("\n") + "\n"
}

fn valid_manifest() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(FULL.to_owned()),
        Just(default_manifest("foo", "kubeflow.org")),
        Just(default_manifest("a-long-framework-name", "x.example.com")),
    ]
}

#[test]
fn the_fixtures_are_valid() {
    let full = parse_with_warnings(FULL, Path::new("kfop.yaml")).unwrap();
    assert_eq!(full.warnings, []);
    let full = full.model;
    assert_eq!((full.roles.len(), full.env.len(), full.success.len()), (2, 2, 2));
    parse(
        &default_manifest("a-long-framework-name", "x.example.com"),
        Path::new("kfop.yaml"),
    )
    .unwrap();
}

/// Shaped documents get past the YAML layer: some are valid and the errors name many fields,
/// so the property below tests validation, not only syntax errors. The seed is fixed.
#[test]
fn shaped_documents_reach_validation() {
    let mut runner = TestRunner::deterministic();
    let strategy = document(node(&MANIFEST));
    let (mut valid, mut fields) = (0, BTreeSet::new());
    for _ in 0..256 {
        let text = strategy.new_tree(&mut runner).unwrap().current();
        match parse(&text, Path::new("kfop.yaml")) {
            Ok(_) => valid += 1,
            Err(e) if e.field.is_empty() => {}
            Err(e) => {
                fields.insert(e.field.replace(|c: char| c.is_ascii_digit(), ""));
            }
        }
    }
    assert!(
        valid > 0 && fields.len() >= 10,
        "{valid} valid, fields {fields:?}"
    );
}

proptest! {
    /// Any text at all.
    #[test]
    fn random_text(text in any::<String>()) {
        check(&text)?;
    }

    /// Text made of YAML's punctuation, where a YAML parser has the most branches.
    #[test]
    fn yaml_punctuation(text in "([-:{}\\[\\],&*!|>'\"%@`#?~ \t\n]|[a-z]{1,4}|0x1|\\.inf|<<){0,40}") {
        check(&text)?;
    }

    /// Documents shaped like a manifest, with valid and invalid values and wrong types.
    #[test]
    fn manifest_shaped_documents(text in document(node(&MANIFEST))) {
        check(&text)?;
    }

    /// Documents of any shape whose keys are the manifest's.
    #[test]
    fn documents_with_manifest_keys(text in document(any_node())) {
        check(&text)?;
    }

    /// A valid manifest after a few line edits or a truncation.
    #[test]
    fn mutated_manifests(
        base in valid_manifest(),
        edits in proptest::collection::vec(edit(), 1..4),
    ) {
        let text = edits.iter().fold(base, |text, e| apply(&text, e));
        check(&text)?;
    }
}
