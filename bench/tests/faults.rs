#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The soak's fault figures must see what they rule out. One short soak with two faults injected:
//! `create` on events taken away from the operator's ClusterRole, and every child watch event of
//! the job `soak-0` dropped inside the operator (`KFOP_FAULT_DROP_CHILD_EVENTS_OF`), with a 20 s
//! resync so the dropped events are healed, and counted, within the run (longer than the 10 s
//! a reconcile's writes are given to reach the caches, so the reconcile a resync itself started
//! does not hide the next step's lost event). The soak must fail on
//! exactly those two: 403s classified as a permission the role lacks (none as transient), and
//! found work for `soak-0` alone.
mod support;
use support::bench_with_env;

#[test]
fn a_missing_rule_and_a_dropped_child_event_are_both_counted() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench_with_env(
        &[
            "--soak",
            "5s",
            "--rate",
            "1",
            "--nodes",
            "2",
            "--soak-resync",
            "20s",
            "--soak-without-permission",
            "create:events",
        ],
        dir.path(),
        &[("KFOP_FAULT_DROP_CHILD_EVENTS_OF", "soak-0")],
    );
    let report = std::fs::read_to_string(dir.path().join("soak.md")).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the soak passed with both faults:\n{report}"
    );
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("soak.json"))
            .unwrap_or_else(|e| panic!("no soak.json ({e}):\n{stderr}")),
    )
    .unwrap();
    let failures: Vec<&str> = json["failures"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert_eq!(failures.len(), 2, "{report}");
    assert!(failures.iter().any(|f| f.contains("does not grant")), "{report}");
    assert!(failures.iter().any(|f| f.contains("found work")), "{report}");
    // Every job still converges (the resync heals soak-0; events are not needed to run a job),
    // so only the figures can tell.
    assert_eq!(json["converged"].as_u64(), json["jobs"].as_u64(), "{report}");

    assert!(json["forbidden_responses"].as_f64().unwrap() > 0.0, "{report}");
    assert_eq!(json["forbidden_transient"].as_f64(), Some(0.0), "{report}");
    let denied: Vec<&str> = json["forbidden"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d.as_str())
        .collect();
    assert!(
        denied
            .iter()
            .any(|d| d.starts_with("create events.k8s.io/events in soak") && d.contains("lacks it")),
        "{denied:?}"
    );

    assert!(json["resync_found_work"].as_f64().unwrap() >= 1.0, "{report}");
    let log = plain(&std::fs::read_to_string(dir.path().join("operator-soak.log")).unwrap());
    let found: Vec<&str> = log.lines().filter(|l| l.contains("resync found work")).collect();
    assert!(!found.is_empty(), "{log}");
    assert!(
        found.iter().all(|l| l.contains("job=soak-0")),
        "only the job whose events were dropped: {found:#?}"
    );
}

/// `text` without ANSI colour sequences (`ESC [ ... m`), as the operator may colour its log.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
