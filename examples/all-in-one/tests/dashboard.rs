#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The Grafana dashboard (`deploy/grafana-dashboard.json`) queries only metrics the operator
//! exports, and every metric the operator registers is exported here, on a panel and in
//! docs/install.md's metrics table: a renamed or new metric fails here, not on a platform team's
//! screen.
use std::collections::BTreeSet;

use kfop_runtime::k8s_openapi::api::core::v1::ConfigMap;
use kfop_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kfop_runtime::k8s_openapi::jiff::Timestamp;
use kfop_runtime::metrics::{
    self, ClientAttemptLabels, ClientForbiddenLabels, ClientRequestLabels, Metrics, ReconcileResult,
};
use kfop_runtime::plan::{Hold, Progress};
use kfop_runtime::serde_json;

const PREFIXES: [&str; 4] = ["training_operator_", "controller_runtime_", "workqueue_", "kfop_"];

/// The metric names a PromQL expression reads.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for prefix in PREFIXES {
        for (at, _) in expr.match_indices(prefix) {
            let name: String = expr[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            names.insert(name);
        }
    }
    names
}

/// The family an exported sample name belongs to (`x_total` of counter `x`, `x_bucket` of
/// histogram `x`).
fn family(sample: &str) -> &str {
    let sample = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| sample.strip_suffix(s))
        .unwrap_or(sample);
    sample.strip_suffix("_total").unwrap_or(sample)
}

/// What the operator exports once every family has a series (an empty family is not encoded).
fn exported() -> String {
    let metrics = Metrics::new();
    metrics.job_created("ns", "pytorch");
    metrics.job_deleted("ns", "pytorch");
    metrics.job_succeeded("ns", "pytorch");
    metrics.job_failed("ns", "pytorch");
    metrics.job_restarted("ns", "pytorch");
    metrics.controller_started("pytorchjob-controller");
    metrics
        .reconcile("pytorchjob-controller")
        .set_result(ReconcileResult::Error);
    let labels = ClientRequestLabels {
        verb: "create",
        resource: "pods".to_owned(),
        code: "201".to_owned(),
    };
    metrics::client().requests.get_or_create(&labels).inc();
    let attempt = ClientAttemptLabels {
        verb: "create",
        resource: "pods".to_owned(),
    };
    metrics::client().attempts.get_or_create(&attempt).inc();
    let forbidden = ClientForbiddenLabels {
        verb: "create",
        group: "events.k8s.io".to_owned(),
        resource: "events".to_owned(),
        namespace: "ns".to_owned(),
    };
    metrics::client().forbidden.get_or_create(&forbidden).inc();
    metrics.queue("pytorchjob-controller", || 1);
    metrics.queue_waited("pytorchjob-controller", std::time::Duration::from_millis(3));
    metrics.failure_reaction(
        "PyTorchJob",
        metrics::Reaction::Restarting,
        std::time::Duration::from_millis(40),
    );
    let mut job = ConfigMap::default();
    job.metadata.uid = Some("uid".to_owned());
    job.metadata.creation_timestamp = Some(Time(Timestamp::now()));
    let first = Progress {
        first_pass: true,
        held: Some(Hold::Gang),
        ..Progress::default()
    };
    metrics.job_progress("PyTorchJob", &job, first);
    let running = Progress {
        pods_created: true,
        pods_running: true,
        ..Progress::default()
    };
    metrics.job_progress("PyTorchJob", &job, running);
    metrics.encode()
}

/// The families `Metrics::new` registers, read from its source (an empty family is not encoded,
/// so `exported` alone would miss one nothing gives a series): the first argument of each
/// `register`, `register_with_unit` (whose unit, seconds, prometheus-client appends) and
/// `job_counter` call outside the tests.
fn registered() -> BTreeSet<String> {
    let runtime = concat!(env!("CARGO_MANIFEST_DIR"), "/../../runtime/src/engine");
    let mut names = BTreeSet::new();
    for file in ["metrics.rs", "metrics/lifecycle.rs"] {
        let text = std::fs::read_to_string(format!("{runtime}/{file}")).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (call, suffix) in [
            ("register(", ""),
            ("register_with_unit(", "_seconds"),
            ("job_counter(", ""),
        ] {
            for (at, _) in code.match_indices(call) {
                let rest = code[at + call.len()..].trim_start();
                let Some(literal) = rest.strip_prefix('"') else {
                    continue;
                };
                let name: String = literal.chars().take_while(|c| *c != '"').collect();
                if PREFIXES.iter().any(|p| name.starts_with(p)) {
                    names.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    assert!(names.len() >= 15, "read {names:?}");
    names
}

/// The families `exported` encodes, from its `# TYPE` lines.
fn exported_families(exported: &str) -> BTreeSet<String> {
    exported
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_owned())
        .collect()
}

#[test]
fn every_registered_metric_is_exported_here() {
    let exported = exported_families(&exported());
    for name in registered() {
        assert!(
            exported.contains(&name),
            "{name} is registered but `exported()` gives it no series, so the checks of the \
             dashboard and docs/install.md would not see it: give it one"
        );
    }
}

#[test]
fn install_md_documents_every_exported_metric() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/install.md")).unwrap();
    // The metrics table's first column: | `name` | labels | what |
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|name| PREFIXES.iter().any(|p| name.starts_with(p)))
        .map(|name| family(name).to_owned())
        .collect();
    let exported = exported_families(&exported());
    for family in &exported {
        assert!(
            documented.contains(family),
            "{family} is exported but not in docs/install.md's metrics table"
        );
    }
    for name in &documented {
        assert!(
            exported.contains(name),
            "docs/install.md documents {name}, which the operator does not export"
        );
    }
}

#[test]
fn every_panel_queries_exported_metrics() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/grafana-dashboard.json"
    ))
    .unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let exported = exported();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 6, "{} panels", panels.len());
    let mut ids = BTreeSet::new();
    let mut queried = BTreeSet::new();
    for panel in panels {
        assert!(ids.insert(panel["id"].as_u64().unwrap()), "panel ids are unique");
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{} has no query", panel["title"]);
        for target in targets {
            let names = metric_names(target["expr"].as_str().unwrap());
            assert!(
                !names.is_empty(),
                "{}: no operator metric in {}",
                panel["title"],
                target["expr"]
            );
            queried.extend(names);
        }
    }
    for name in &queried {
        let family = family(name);
        assert!(
            exported.contains(&format!("# TYPE {family} ")),
            "the dashboard queries {name}, but the operator exports no {family}:\n{exported}"
        );
    }
    // Every family the operator exports is on the dashboard.
    for line in exported.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let family = line.split(' ').next().unwrap();
        assert!(
            queried.iter().any(|q| self::family(q) == family),
            "{family} is on no panel"
        );
    }
}
