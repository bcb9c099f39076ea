#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The small-N mode CI runs: the whole benchmark with a handful of jobs, checking that it
//! completes and writes parseable results. No timing assertions.
mod support;
use support::bench;

#[test]
fn small_run_writes_results() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench(
        &[
            "--jobs",
            "5",
            "--complete-after",
            "1s",
            "--nodes",
            "2",
            "--timeout",
            "3m",
            "--compare-all-schemes",
            "--replay",
            "full",
            "--peer",
            "kubeflow",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "kfop-bench failed:\n{stderr}");

    let md = std::fs::read_to_string(dir.path().join("results.md")).unwrap();
    assert!(md.starts_with("# kfop scale benchmark"), "{md}");
    assert!(md.contains("## Targets"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap()).unwrap();
    for phase in ["operator", "ceiling", "all_schemes", "kubeflow"] {
        assert_eq!(json[phase]["jobs"], 5, "{phase}: {json}");
        assert_eq!(
            json[phase]["incomplete"], 0,
            "{phase} left jobs unfinished:\n{stderr}"
        );
    }
    for phase in ["operator", "kubeflow"] {
        assert!(
            json[phase]["requests"]["per_job"].as_f64().unwrap() > 0.0,
            "{phase}: {json}"
        );
        assert!(!json[phase]["samples"].as_array().unwrap().is_empty(), "{phase}");
    }
    let replay = &json["replay"][0];
    assert_eq!(replay["name"], "replay: the operator's requests", "{json}");
    assert_eq!(replay["jobs"], 5, "{json}");
    assert_eq!(
        replay["incomplete"], 0,
        "the replay left jobs without pods:\n{stderr}"
    );
    assert!(md.contains("| operator / Kubeflow |"), "{md}");
    for plot in ["latency.svg", "rss.svg"] {
        let svg = std::fs::read_to_string(dir.path().join(plot)).unwrap();
        assert!(svg.starts_with("<svg"), "{plot}");
    }
}

/// `--failure-reaction` with one job of each of its six kinds: every failure gets its answer in
/// both modes, and the operator's own histogram counted them. No timing assertions.
#[test]
fn failure_reaction_answers_every_failure() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench(&["--failure-reaction", "6", "--timeout", "3m"], dir.path());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "kfop-bench failed:\n{stderr}");

    let md = std::fs::read_to_string(dir.path().join("reaction.md")).unwrap();
    assert!(md.starts_with("# kfop failure reaction"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("reaction.json")).unwrap()).unwrap();
    let restarts = json["restarts_per_job"].as_u64().unwrap();
    for mode in ["Batched", "AtOnce"] {
        let answers = &json["modes"][mode];
        assert_eq!(answers["missing"], serde_json::json!([]), "{mode}: {json}");
        for (answer, count) in [
            ("restarting", 6 * restarts),
            ("replaced", 6 * restarts),
            ("failed", 6),
        ] {
            assert_eq!(answers[answer]["count"], count, "{mode} {answer}: {json}");
        }
        assert_eq!(answers["by_kind"].as_object().unwrap().len(), 6, "{mode}: {json}");
        let counted: f64 = answers["operator_histogram"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v[0].as_f64().unwrap())
            .sum();
        assert!(counted > 0.0, "{mode}: the operator counted no reaction: {json}");
    }
}
