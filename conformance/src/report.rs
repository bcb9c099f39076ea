//! The runner's result: every difference of every case, each declared by an entry of the
//! allowed-differences file or not, rendered as Markdown tables.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::time::Duration;

use serde_json::{Value, json};

use crate::allowed::{AllowedDifferences, Context, Status};
use crate::cases::Kind;
use crate::diff::{Difference, diff, render};
use crate::drive::Settled;
use crate::snapshot::{META, events_recorded};

/// Both sides after one step.
#[derive(Debug, Clone)]
pub struct StepRecord {
    /// `<n>: <step>`, what allowed-difference `step` patterns match.
    pub label: String,
    pub kubeflow: Settled,
    pub kfop: Settled,
}

/// One case as it ran.
#[derive(Debug, Clone)]
pub struct CaseRecord {
    pub case: String,
    pub kind: &'static str,
    pub source: String,
    pub steps: Vec<StepRecord>,
    /// What stopped the case (the API refused the job, a side's client failed).
    pub error: Option<String>,
    pub elapsed: Duration,
}

impl CaseRecord {
    /// A case that did not run, and why.
    pub fn failed(case: &crate::cases::Case, error: String) -> Self {
        Self {
            case: case.name.clone(),
            kind: case.kind.key,
            source: case.source.clone(),
            steps: Vec::new(),
            error: Some(error),
            elapsed: Duration::ZERO,
        }
    }
}

/// One distinct difference of a case: the same field with the same two values after several
/// steps is one, reported at the first.
#[derive(Debug, Clone)]
pub struct Found {
    pub case: String,
    pub kind: &'static str,
    pub step: String,
    pub steps: usize,
    pub difference: Difference,
    /// The declaring entry's index in the allowed-differences file.
    pub allowed: Option<usize>,
    /// Events Kubeflow had recorded about the job by then (its recorder throttles at 25).
    pub kubeflow_events: u64,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub records: Vec<CaseRecord>,
    pub found: Vec<Found>,
    pub allowed: AllowedDifferences,
    /// The Kubeflow release of each peer (`training-operator` -> `v1.8.1`).
    pub versions: Vec<(&'static str, String)>,
}

/// The operator judging `kind`: its peer folder without the version (`mpi-operator-v0.6.0` ->
/// `mpi-operator`).
fn operator_of(kind: &str) -> &'static str {
    let peer = Kind::named(kind).map_or("?", |k| k.peer);
    peer.split_once("-v").map_or(peer, |(name, _)| name)
}

impl Report {
    pub fn new(
        records: Vec<CaseRecord>,
        allowed: AllowedDifferences,
        versions: Vec<(&'static str, String)>,
    ) -> Self {
        let mut found = Vec::new();
        for record in &records {
            let mut seen: BTreeMap<(String, String, String), usize> = BTreeMap::new();
            for step in &record.steps {
                let context = Context {
                    kubeflow_events_recorded: events_recorded(&step.kubeflow.snapshot),
                };
                for difference in diff(&compared(&step.kubeflow.snapshot), &compared(&step.kfop.snapshot)) {
                    let key = (
                        difference.path.clone(),
                        render(difference.kubeflow.as_ref()),
                        render(difference.kfop.as_ref()),
                    );
                    if let Some(&i) = seen.get(&key) {
                        let earlier: &mut Found = &mut found[i];
                        earlier.steps += 1;
                        continue;
                    }
                    seen.insert(key, found.len());
                    found.push(Found {
                        case: record.case.clone(),
                        kind: record.kind,
                        step: step.label.clone(),
                        steps: 1,
                        allowed: allowed.find(&record.case, &step.label, &difference, context),
                        kubeflow_events: context.kubeflow_events_recorded,
                        difference,
                    });
                }
            }
        }
        Self {
            records,
            found,
            allowed,
            versions,
        }
    }

    /// The Kubeflow release that judged `kind`.
    fn version_of(&self, kind: &str) -> &str {
        let peer = Kind::named(kind).map(|k| k.peer);
        self.versions
            .iter()
            .find(|(p, _)| Some(*p) == peer)
            .map_or("?", |(_, v)| v.as_str())
    }

    /// `training-operator v1.8.1 (MXJob, PyTorchJob) and v1.9.0 (JAXJob) and mpi-operator
    /// v0.6.0 (MPIJob)`: each release with the kinds it judged, the operator named when it
    /// changes.
    fn judges(&self) -> String {
        let mut by_version: Vec<(&str, &str, BTreeSet<&str>)> = Vec::new();
        for record in &self.records {
            let operator = operator_of(record.kind);
            let version = self.version_of(record.kind);
            match by_version
                .iter_mut()
                .find(|(o, v, _)| *o == operator && *v == version)
            {
                Some((_, _, kinds)) => {
                    kinds.insert(record.kind);
                }
                None => by_version.push((operator, version, BTreeSet::from([record.kind]))),
            }
        }
        by_version.sort();
        let mut previous = "";
        by_version
            .iter()
            .map(|(operator, v, kinds)| {
                let kinds = kinds.iter().copied().collect::<Vec<_>>().join(", ");
                let named = if *operator == previous {
                    format!("{v} ({kinds})")
                } else {
                    format!("{operator} {v} ({kinds})")
                };
                previous = operator;
                named
            })
            .collect::<Vec<_>>()
            .join(" and ")
    }

    /// Undeclared differences plus cases that could not run: what must be 0.
    pub fn failures(&self) -> usize {
        self.found.iter().filter(|f| f.allowed.is_none()).count()
            + self.records.iter().filter(|r| r.error.is_some()).count()
    }

    fn case_counts(&self, case: &str) -> (usize, usize) {
        let of_case = self.found.iter().filter(|f| f.case == case);
        let declared = of_case.clone().filter(|f| f.allowed.is_some()).count();
        (declared, of_case.count() - declared)
    }

    /// The summary per kind, the undeclared differences, the declared ones by entry, every
    /// case, and the entries nothing matched.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## Differential conformance: Kubeflow {} vs kfop\n\n\
             | kind | Kubeflow | cases | identical | declared differences | undeclared |\n\
             |---|---|---|---|---|---|",
            self.judges()
        );
        let mut kinds: Vec<&str> = self.records.iter().map(|r| r.kind).collect();
        kinds.dedup();
        kinds.sort();
        kinds.dedup();
        let mut total = (0, 0, 0, 0);
        for kind in kinds.iter().copied().map(Some).chain([None]) {
            let records: Vec<&CaseRecord> = self
                .records
                .iter()
                .filter(|r| kind.is_none_or(|k| r.kind == k))
                .collect();
            let (mut identical, mut declared, mut undeclared) = (0, 0, 0);
            for r in &records {
                let (d, u) = self.case_counts(&r.case);
                let u = u + usize::from(r.error.is_some());
                identical += usize::from(d + u == 0);
                declared += d;
                undeclared += u;
            }
            match kind {
                Some(k) => {
                    let _ = writeln!(
                        out,
                        "| {k} | {} | {} | {identical} | {declared} | {undeclared} |",
                        self.version_of(k),
                        records.len()
                    );
                    total = (
                        total.0 + records.len(),
                        total.1 + identical,
                        total.2 + declared,
                        total.3 + undeclared,
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "| **all** | | **{}** | **{}** | **{}** | **{}** |",
                        total.0, total.1, total.2, total.3
                    );
                }
            }
        }

        let undeclared: Vec<&Found> = self.found.iter().filter(|f| f.allowed.is_none()).collect();
        let errors: Vec<&CaseRecord> = self.records.iter().filter(|r| r.error.is_some()).collect();
        if !undeclared.is_empty() || !errors.is_empty() {
            let _ = writeln!(
                out,
                "\n### Undeclared (declare each in allowed-differences.yaml or fix it)\n\n\
                 | case | step | field | Kubeflow | kfop |\n|---|---|---|---|---|"
            );
            for f in &undeclared {
                let _ = writeln!(out, "{}", found_row(f));
            }
            for r in errors {
                let _ = writeln!(
                    out,
                    "| {} | - | (case did not run) | {} | |",
                    r.case,
                    cell(r.error.as_deref().unwrap_or_default())
                );
            }
        }

        let _ = writeln!(
            out,
            "\n### Declared differences found, by entry\n\n\
             | # | status | cases | first case | step | field | Kubeflow | kfop |\n|---|---|---|---|---|---|---|---|"
        );
        let mut unused = Vec::new();
        for (i, entry) in self.allowed.differences.iter().enumerate() {
            let hits: Vec<&Found> = self.found.iter().filter(|f| f.allowed == Some(i)).collect();
            let Some(first) = hits.first() else {
                unused.push(i);
                continue;
            };
            let mut cases: Vec<&str> = hits.iter().map(|f| f.case.as_str()).collect();
            cases.dedup();
            let status = match entry.status {
                Status::Deliberate => "deliberate",
                Status::Bug => "bug",
            };
            let _ = writeln!(
                out,
                "| {i} | {status} | {} | {} | {} | `{}` | {} | {} |",
                cases.len(),
                first.case,
                cell(&first.step),
                cell(&first.difference.path),
                value_cell(first.difference.kubeflow.as_ref()),
                value_cell(first.difference.kfop.as_ref()),
            );
        }
        if !unused.is_empty() {
            let _ = writeln!(
                out,
                "\nEntries no difference matched (stale, or their cases did not run): {unused:?}"
            );
        }

        let _ = writeln!(
            out,
            "\n### Cases\n\n| case | source | steps | seconds | declared | undeclared | notes |\n|---|---|---|---|---|---|---|"
        );
        for r in &self.records {
            let (d, u) = self.case_counts(&r.case);
            let notes: Vec<String> = r
                .steps
                .iter()
                .flat_map(|s| {
                    let kf = s
                        .kubeflow
                        .notes
                        .iter()
                        .map(move |n| format!("{} kubeflow: {n}", s.label));
                    let kfop = s.kfop.notes.iter().map(move |n| format!("{} kfop: {n}", s.label));
                    kf.chain(kfop)
                })
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1} | {d} | {} | {} |",
                r.case,
                r.source,
                r.steps.len(),
                r.elapsed.as_secs_f64(),
                u + usize::from(r.error.is_some()),
                cell(&notes.join("; "))
            );
        }
        out
    }

    /// Every difference found, for tools: case, step, field, both values and its entry.
    pub fn json(&self) -> Value {
        let found: Vec<Value> = self
            .found
            .iter()
            .map(|f| {
                json!({
                    "case": f.case, "kind": f.kind, "step": f.step, "steps": f.steps,
                    "field": f.difference.path,
                    "kubeflow": f.difference.kubeflow, "kfop": f.difference.kfop,
                    "allowed": f.allowed, "kubeflowEvents": f.kubeflow_events,
                })
            })
            .collect();
        json!({ "found": found })
    }

    /// Every snapshot of every case, both sides, for looking into a difference.
    pub fn snapshots_json(&self) -> Value {
        let cases: serde_json::Map<String, Value> = self
            .records
            .iter()
            .map(|r| {
                let steps: Vec<Value> = r
                    .steps
                    .iter()
                    .map(|s| {
                        json!({
                            "step": s.label,
                            "kubeflow": s.kubeflow.snapshot, "kubeflowNotes": s.kubeflow.notes,
                            "kfop": s.kfop.snapshot, "kfopNotes": s.kfop.notes,
                        })
                    })
                    .collect();
                (r.case.clone(), Value::Array(steps))
            })
            .collect();
        Value::Object(cases)
    }
}

/// A snapshot without its context part.
fn compared(snapshot: &Value) -> Value {
    let mut snapshot = snapshot.clone();
    if let Some(map) = snapshot.as_object_mut() {
        map.remove(META);
    }
    snapshot
}

fn found_row(f: &Found) -> String {
    format!(
        "| {} | {} | `{}` | {} | {} |",
        f.case,
        cell(&f.step),
        cell(&f.difference.path),
        value_cell(f.difference.kubeflow.as_ref()),
        value_cell(f.difference.kfop.as_ref())
    )
}

/// A value for a table cell, cut at 160 characters.
fn value_cell(value: Option<&Value>) -> String {
    let text = render(value);
    let cut: String = text.chars().take(160).collect();
    let text = if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    };
    format!("`{}`", cell(&text))
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settled(snapshot: Value) -> Settled {
        Settled {
            snapshot,
            notes: Vec::new(),
        }
    }

    #[test]
    fn repeated_differences_count_once_and_undeclared_fail() {
        let allowed = AllowedDifferences::parse(
            "differences:\n  - case: '*'\n    field: 'events/*'\n    status: deliberate\n    why: w\n",
        )
        .unwrap();
        let step = |n: usize, kfop_value: &str| StepRecord {
            label: format!("{n}: running"),
            kubeflow: settled(json!({ "events": { "Normal A: b": true }, "x": "1" })),
            kfop: settled(json!({ "events": {}, "x": kfop_value })),
        };
        let record = CaseRecord {
            case: "pt-a".to_owned(),
            kind: "PyTorchJob",
            source: "variant a".to_owned(),
            steps: vec![step(1, "1"), step(2, "1"), step(3, "2")],
            error: None,
            elapsed: Duration::from_secs(3),
        };
        let versions = vec![(kfop_testenv::peer::TRAINING_OPERATOR, "v1.8.1".to_owned())];
        let report = Report::new(vec![record], allowed, versions);
        assert_eq!(report.found.len(), 2);
        assert_eq!(report.found[0].steps, 3);
        assert_eq!(report.found[0].allowed, Some(0));
        assert_eq!(report.found[1].step, "3: running");
        assert_eq!(report.failures(), 1);
        let text = report.render();
        assert!(
            text.starts_with(
                "## Differential conformance: Kubeflow training-operator v1.8.1 (PyTorchJob) vs kfop"
            ),
            "{text}"
        );
        assert!(text.contains("| PyTorchJob | v1.8.1 | 1 | 0 | 1 | 1 |"), "{text}");
        assert!(text.contains("| pt-a | 3: running | `x` | `1` | `2` |"), "{text}");
    }
}
