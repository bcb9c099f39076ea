#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Malformed manifests: each gives one line naming the position, the field and the fix.
use std::path::Path;

use kfop::manifest::{default_manifest, parse, parse_with_warnings};

const GOOD: &str = "apiVersion: kfop.dev/v1alpha1
kind: Framework
metadata:
  name: foo
spec:
  group: kubeflow.org
  version: v1
  kind: FooJob
  container:
    name: foo
    portName: foo-port
    port: 9999
  roles:
    - name: Master
      master: true
      restartPolicy: OnFailure
    - name: Worker
  env:
    - name: RANK
      value: \"{rank}\"
  status:
    success:
      - allOf: Master
";

fn error_for(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "fixture does not contain {from:?}");
    let text = GOOD.replacen(from, to, 1);
    let err = parse(&text, Path::new("kfop.yaml")).expect_err(&format!("accepted after {from:?} -> {to:?}"));
    let line = err.to_string();
    assert!(!line.contains('\n'), "one line: {line}");
    line
}

#[test]
fn the_fixture_and_the_default_manifest_are_valid() {
    let m = parse(GOOD, Path::new("kfop.yaml")).unwrap();
    assert_eq!(
        (m.kind.as_str(), m.plural.as_str(), m.controller_name.as_str()),
        ("FooJob", "foojobs", "foojob-controller")
    );
    assert_eq!(m.replica_specs_field, "fooReplicaSpecs");
    let d = parse(
        &default_manifest("bar", "bar.example.com"),
        Path::new("kfop.yaml"),
    )
    .unwrap();
    assert_eq!(d.kind, "BarJob");
    assert_eq!(d.roles.len(), 2);
}

#[test]
fn malformed_manifests() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "apiVersion: kfop.dev/v1alpha1",
            "apiVersion: kfop.dev/v9",
            "kfop.yaml:1:13: apiVersion: must be kfop.dev/v1alpha1",
        ),
        (
            "kind: Framework",
            "kind: Operator",
            "kfop.yaml:2:7: kind: must be Framework",
        ),
        (
            "  name: foo\nspec",
            "  name: Foo_Bar\nspec",
            "kfop.yaml:4:9: metadata.name: must be lower-case",
        ),
        (
            "group: kubeflow.org",
            "group: kubeflow",
            "kfop.yaml:6:10: spec.group: must be a DNS subdomain",
        ),
        (
            "version: v1",
            "version: 1.0",
            "kfop.yaml:7:12: spec.version: must look like v1",
        ),
        (
            "kind: FooJob",
            "kind: foo_job",
            "kfop.yaml:8:9: spec.kind: must be UpperCamelCase",
        ),
        (
            "port: 9999",
            "port: 70000",
            "kfop.yaml:12:11: spec.container.port: 70000 is not a port; use 1-65535",
        ),
        (
            "portName: foo-port",
            "portName: a-very-long-port-name",
            "spec.container.portName: must be a DNS label of at most 15",
        ),
        (
            "    - name: Worker\n",
            "    - name: Master\n",
            "spec.roles[1].name: role `Master` is declared twice",
        ),
        (
            "restartPolicy: OnFailure",
            "restartPolicy: Sometimes",
            "spec.roles[0].restartPolicy: `Sometimes` is not a restart policy; use Always, OnFailure, Never, ExitCode",
        ),
        (
            "value: \"{rank}\"",
            "value: \"{rnak}\"",
            "spec.env[0].value: unknown variable `{rnak}`",
        ),
        (
            "value: \"{rank}\"",
            "value: \"{port.Chief}\"",
            "spec.env[0].value: unknown role `Chief`",
        ),
        (
            "  - name: RANK",
            "  - name: 1RANK",
            "spec.env[0].name: must be a C identifier",
        ),
        (
            "allOf: Master",
            "allOf: Boss",
            "kfop.yaml:23:16: spec.status.success[0].allOf: unknown role `Boss`; declared roles are Master, Worker",
        ),
        (
            "      - allOf: Master\n",
            "      - allOf: Master\n        anyOf: Worker\n",
            "kfop.yaml:23:9: spec.status.success[0]: give exactly one of allOf, anyOf or indexZeroOf",
        ),
        (
            "  status:",
            "  resources: [gpus]\n  status:",
            "spec.resources[0]: unknown resource `gpus`",
        ),
        (
            "  status:",
            "  scale: Chief\n  status:",
            "spec.scale: unknown role `Chief`",
        ),
        (
            "  status:\n",
            "  status:\n    rule: hook\n",
            "spec.status.success: applies to the `successRules` rule only: the `hook` rule decides success itself; remove it or use rule `successRules`",
        ),
        (
            "  status:\n    success:\n      - allOf: Master\n",
            "  status:\n    rule: hook\n",
            "spec.status.rule: `hook` needs `hooks: true` in spec",
        ),
        (
            "  status:\n    success:\n      - allOf: Master\n",
            "  status:\n    rule: leaderOrFollowers\n    leader: Master\n",
            "spec.status.followers: the leaderOrFollowers rule needs the followers' role",
        ),
        (
            "  status:\n    success:\n      - allOf: Master\n",
            "  status:\n    rule: leaderOrFollowers\n    followers: Boss\n",
            "spec.status.followers: unknown role `Boss`",
        ),
        (
            "  status:\n",
            "  status:\n    rule: majority\n",
            "spec.status.rule: `majority` is not `successRules`, `leaderOrFollowers`, `hook` or `cel`",
        ),
        (
            "  status:\n",
            "  status:\n    followers: Worker\n",
            "spec.status.followers: applies to the `leaderOrFollowers` rule only",
        ),
        (
            "  status:\n    success:\n      - allOf: Master\n",
            "  hooks: true\n  status:\n    rule: hook\n    subject: foojob\n",
            "spec.status.subject: applies to the `successRules` and `cel` rules only, not `hook`; remove it",
        ),
        (
            "  status:",
            "  masterPods: first\n  status:",
            "spec.masterPods: `first` is not `roles` (the master roles' pods) or `indexZero`",
        ),
        // The deprecated spelling, `spec.success`: its entries are checked as they were, and it
        // is not given with `status.success`.
        (
            "  status:\n    success:\n      - allOf: Master\n",
            "  success:\n    - allOf: Boss\n",
            "kfop.yaml:22:14: spec.success[0].allOf: unknown role `Boss`; declared roles are Master, Worker",
        ),
        (
            "  status:\n    success:\n      - allOf: Master\n",
            "  status:\n    rule: hook\n  success:\n    - allOf: Master\n",
            "spec.success: the `hook` status rule decides success itself; remove spec.success or use rule `successRules`",
        ),
        (
            "  status:",
            "  success:\n    - allOf: Worker\n  status:",
            "kfop.yaml:22:5: spec.success: the success rules are given twice, here and in spec.status.success; remove spec.success (deprecated)",
        ),
        ("port: 9999", "port: many", "kfop.yaml:12:11: invalid i64"),
        (
            "    port: 9999\n",
            "",
            "kfop.yaml:11:15: spec.container.port: portName needs a port number",
        ),
        ("  group:", "  groop: x\n  group:", "unknown field `groop`"),
        (
            "    - name: Worker\n",
            "    - name: Worker\n      minReplicas: 3\n      maxReplicas: 1\n",
            "spec.roles[1].minReplicas: minReplicas 3 is above maxReplicas 1",
        ),
    ];
    assert!(cases.len() >= 10);
    for (from, to, expected) in cases {
        let line = error_for(from, to);
        assert!(
            line.contains(expected),
            "{from:?} -> {to:?}\n  got:      {line}\n  expected: {expected}"
        );
    }
}

#[test]
fn the_deprecated_success_list_loads_the_same_with_a_warning() {
    let old = GOOD.replacen(
        "  status:\n    success:\n      - allOf: Master\n",
        "  success:\n    - allOf: Master\n",
        1,
    );
    assert_ne!(old, GOOD);
    let new = parse_with_warnings(GOOD, Path::new("kfop.yaml")).unwrap();
    assert_eq!(new.warnings, []);
    let old = parse_with_warnings(&old, Path::new("kfop.yaml")).unwrap();
    assert_eq!(old.model, new.model);
    let warnings: Vec<String> = old.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            "kfop.yaml:22:5: spec.success: deprecated: move this list to spec.status.success \
          (the same entries, indented under `status:`); it is read as that"
        ]
    );
    // `parse` gives the model alone.
    assert_eq!(parse(GOOD, Path::new("kfop.yaml")).unwrap(), new.model);
}

#[test]
fn the_default_manifest_has_no_warnings() {
    let scaffold = default_manifest("bar", "bar.example.com");
    assert!(
        scaffold.contains("  status:\n    rule: successRules\n    success:\n"),
        "{scaffold}"
    );
    let v = parse_with_warnings(&scaffold, Path::new("kfop.yaml")).unwrap();
    assert_eq!(v.warnings, []);
    assert_eq!(v.model.success.len(), 2);
}

#[test]
fn unreadable_manifest_says_how_to_make_one() {
    let err = kfop::manifest::load(Path::new("/nonexistent/kfop.yaml")).unwrap_err();
    assert!(err.to_string().contains("create one with `kfop new`"), "{err}");
}

#[test]
fn a_framework_without_a_port() {
    let no_port = GOOD.replacen("    portName: foo-port\n    port: 9999\n", "", 1);
    let m = parse(&no_port, Path::new("kfop.yaml")).unwrap();
    assert_eq!(m.port, None);
    // A template reading a port then has none to read.
    let reads_port = no_port.replacen("{rank}", "{port.Master}", 1);
    let err = parse(&reads_port, Path::new("kfop.yaml"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "kfop.yaml:18:14: spec.env[0].value: reads {port.<Role>} but the framework declares no port"
        ),
        "{err}"
    );
}
