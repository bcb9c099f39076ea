//! The declared differences (`conformance/allowed-differences.yaml`): where kfop may differ
//! from Kubeflow and why, each either a deliberate fix or a known kfop bug. The runner fails on
//! any difference no entry declares; [`AllowedDifferences::doc_section`] renders the file
//! for docs/compatibility.md. Its `schemaPaths` declare where kfop's CRD schemas lack or type
//! otherwise a path of Kubeflow's (`tests/schemas.rs`).
use std::path::Path;

use serde::Deserialize;

use crate::diff::{Difference, render};
use crate::{Error, Result, glob};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// kfop does the right thing where Kubeflow has a bug, or chose otherwise on purpose.
    Deliberate,
    /// kfop is wrong; the entry stays until it is fixed.
    Bug,
}

/// client-go's event recorder, which Kubeflow's operator uses, lets 25 events about one object
/// through and then one per 5 minutes (its spam filter; repeats count).
pub const KUBEFLOW_EVENT_BURST: u64 = 25;

/// A circumstance an entry applies in, beyond its patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum When {
    /// Kubeflow had recorded [`KUBEFLOW_EVENT_BURST`] events about the job by then, so its
    /// recorder dropped later ones.
    KubeflowEventsThrottled,
}

/// What an entry's `when` is checked against: how the step went on the Kubeflow side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Context {
    pub kubeflow_events_recorded: u64,
}

/// One declared difference. Every pattern is a glob ([`crate::glob`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Allowed {
    /// Case names.
    pub case: String,
    /// Step labels (`3: exit worker-1 code 137`).
    #[serde(default = "any")]
    pub step: String,
    /// Snapshot field paths (`pods/*/spec/containers/*/env/PYTHONUNBUFFERED/value`).
    pub field: String,
    /// Kubeflow's value as rendered ([`render`]: `<absent>` when it lacks the field).
    #[serde(default = "any")]
    pub kubeflow: String,
    #[serde(default = "any")]
    pub kfop: String,
    #[serde(default)]
    pub when: Option<When>,
    pub status: Status,
    pub why: String,
}

fn any() -> String {
    "*".to_owned()
}

impl Allowed {
    pub fn covers(&self, case: &str, step: &str, difference: &Difference, context: Context) -> bool {
        let applies = match self.when {
            None => true,
            Some(When::KubeflowEventsThrottled) => context.kubeflow_events_recorded >= KUBEFLOW_EVENT_BURST,
        };
        applies
            && glob::matches(&self.case, case)
            && glob::matches(&self.step, step)
            && glob::matches(&self.field, &difference.path)
            && glob::matches(&self.kubeflow, &render(difference.kubeflow.as_ref()))
            && glob::matches(&self.kfop, &render(difference.kfop.as_ref()))
    }
}

/// A deliberate difference no lifecycle diff observes (performance, flags, write methods).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unobserved {
    pub kubeflow: String,
    pub kfop: String,
}

/// A declared schema difference (`tests/schemas.rs`): a path of a Kubeflow CRD's schema that
/// kfop's CRD of the same kind and version lacks or types otherwise ([`crate::schema_paths`]).
/// Every pattern is a glob.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllowedSchemaPath {
    /// Kubeflow releases (`training-operator v1.8.1`, `mpi-operator v0.6.0`).
    #[serde(default = "any")]
    pub release: String,
    /// `<Kind>/<version>` (`PaddleJob/v1`).
    pub schema: String,
    /// Schema paths (`spec.elasticPolicy.metrics[*].type`).
    pub path: String,
    /// Kubeflow's type at the path, as [`crate::schema_paths::Held::values`] renders it.
    #[serde(default = "any")]
    pub kubeflow: String,
    /// kfop's (`<absent>` for a path it lacks).
    #[serde(default = "any")]
    pub kfop: String,
    pub status: Status,
    pub why: String,
}

impl AllowedSchemaPath {
    /// Whether this entry declares the difference at `path` of `schema` (`<Kind>/<version>`) in
    /// Kubeflow's `release`, with both sides' `values`.
    pub fn covers(&self, release: &str, schema: &str, path: &str, (kubeflow, kfop): (&str, &str)) -> bool {
        glob::matches(&self.release, release)
            && glob::matches(&self.schema, schema)
            && glob::matches(&self.path, path)
            && glob::matches(&self.kubeflow, kubeflow)
            && glob::matches(&self.kfop, kfop)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllowedDifferences {
    pub differences: Vec<Allowed>,
    #[serde(default)]
    pub beyond_the_diff: Vec<Unobserved>,
    #[serde(default)]
    pub schema_paths: Vec<AllowedSchemaPath>,
}

/// The markers around docs/compatibility.md's generated section.
pub const DOC_BEGIN: &str = "<!-- generated from conformance/allowed-differences.yaml: begin -->";
pub const DOC_END: &str = "<!-- generated from conformance/allowed-differences.yaml: end -->";

impl AllowedDifferences {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(Error::io(path))?;
        Self::parse(&text).map_err(|e| Error::parse(path, e))
    }

    pub fn parse(text: &str) -> Result<Self, serde_saphyr::Error> {
        serde_saphyr::from_str(text)
    }

    /// The first schema entry declaring the difference at `path` (see
    /// [`AllowedSchemaPath::covers`]), by index.
    pub fn find_schema_path(
        &self,
        release: &str,
        schema: &str,
        path: &str,
        values: (&str, &str),
    ) -> Option<usize> {
        self.schema_paths
            .iter()
            .position(|a| a.covers(release, schema, path, values))
    }

    /// The first entry declaring `difference`, by index.
    pub fn find(&self, case: &str, step: &str, difference: &Difference, context: Context) -> Option<usize> {
        self.differences
            .iter()
            .position(|a| a.covers(case, step, difference, context))
    }

    /// The file as a Markdown table: cases, field, both values, status and why.
    pub fn markdown_table(&self) -> String {
        let mut out =
            String::from("| cases | field | Kubeflow | kfop | status | why |\n|---|---|---|---|---|---|\n");
        for a in &self.differences {
            let status = match a.status {
                Status::Deliberate => "deliberate",
                Status::Bug => "**bug**",
            };
            let mut cases = if a.step == "*" {
                code(&a.case)
            } else {
                format!("{} at {}", code(&a.case), code(&a.step))
            };
            if a.when == Some(When::KubeflowEventsThrottled) {
                cases.push_str(&format!(", once Kubeflow recorded {KUBEFLOW_EVENT_BURST} events"));
            }
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                cases,
                code(&a.field),
                code(&a.kubeflow),
                code(&a.kfop),
                status,
                cell(a.why.trim())
            ));
        }
        out
    }
}

impl AllowedDifferences {
    /// docs/compatibility.md's section: the differences the differential run judged, then those
    /// beyond it.
    pub fn doc_section(&self) -> String {
        let mut out = format!(
            "{DOC_BEGIN}\nJudged against Kubeflow itself, by the differential lifecycle run and the \
             admission run (each difference they saw, matched by case, field and both values):\n\n{}",
            self.markdown_table()
        );
        if !self.beyond_the_diff.is_empty() {
            out.push_str("\nBeyond what a lifecycle diff can see:\n\n| Kubeflow | kfop |\n|---|---|\n");
            for u in &self.beyond_the_diff {
                out.push_str(&format!("| {} | {} |\n", cell(&u.kubeflow), cell(&u.kfop)));
            }
        }
        out.push_str(&self.schema_paths_section());
        out.push_str(DOC_END);
        out
    }

    /// The schema paths' part of [`Self::doc_section`].
    fn schema_paths_section(&self) -> String {
        let mut out = String::from(
            "\nSchemas: every property path of the CRDs Kubeflow ships (each kind and version of \
             training-operator v1.8.1 and v1.9.0 and mpi-operator v0.6.0) is in kfop's CRD of the \
             same kind and version with a type that takes the same values, or below a node of \
             kfop's that keeps unknown fields (`cargo test -p kfop-conformance --test schemas`)",
        );
        if self.schema_paths.is_empty() {
            out.push_str("; none is declared otherwise.\n");
            return out;
        }
        out.push_str(
            ", but for these:\n\n| Kubeflow | schema | path | Kubeflow | kfop | status | why |\n\
             |---|---|---|---|---|---|---|\n",
        );
        for a in &self.schema_paths {
            let status = match a.status {
                Status::Deliberate => "deliberate",
                Status::Bug => "**bug**",
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                code(&a.release),
                code(&a.schema),
                code(&a.path),
                code(&a.kubeflow),
                code(&a.kfop),
                status,
                cell(a.why.trim())
            ));
        }
        out
    }

    /// `doc` with its generated section replaced by [`Self::doc_section`]; `None` when
    /// the markers are missing.
    pub fn update_doc(&self, doc: &str) -> Option<String> {
        let start = doc.find(DOC_BEGIN)?;
        let end = doc[start..].find(DOC_END)? + start + DOC_END.len();
        Some(format!("{}{}{}", &doc[..start], self.doc_section(), &doc[end..]))
    }
}

/// A pattern as inline code (`*` reads as "any").
fn code(pattern: &str) -> String {
    if pattern == "*" {
        "any".to_owned()
    } else {
        format!("`{}`", cell(pattern))
    }
}

/// Text safe inside a table cell: no line breaks, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FILE: &str = r#"
differences:
  - case: "*"
    field: "events/Normal ExitedWithCode:*"
    kubeflow: "true"
    kfop: <absent>
    status: deliberate
    why: >
      Kubeflow re-emits it on every reconcile;
      the pod's own status carries the code.
  - case: "xgb-*"
    step: "2: *"
    field: pods/*/env/PYTHONUNBUFFERED/value
    status: bug
    why: "kfop sets 0 | Kubeflow 1"
"#;

    #[test]
    fn entries_match_case_step_field_and_values() {
        let allowed = AllowedDifferences::parse(FILE).unwrap();
        let event = Difference {
            path: "events/Normal ExitedWithCode: Pod: <ns>.j-worker-0 exited with code 0".to_owned(),
            kubeflow: Some(json!(true)),
            kfop: None,
        };
        assert_eq!(
            allowed.find("pt-x", "1: running", &event, Context::default()),
            Some(0)
        );
        let reversed = Difference {
            kubeflow: None,
            kfop: Some(json!(true)),
            ..event
        };
        assert_eq!(
            allowed.find("pt-x", "1: running", &reversed, Context::default()),
            None
        );
        // `*` spans path segments.
        let env = Difference {
            path: "pods/j-master-0/spec/containers/xgboost/env/PYTHONUNBUFFERED/value".to_owned(),
            kubeflow: Some(json!("1")),
            kfop: Some(json!("0")),
        };
        assert_eq!(
            allowed.find(
                "xgb-clean-all",
                "2: exit master-0 code 0",
                &env,
                Context::default()
            ),
            Some(1)
        );
        assert_eq!(
            allowed.find(
                "pt-clean-all",
                "2: exit master-0 code 0",
                &env,
                Context::default()
            ),
            None
        );
        assert_eq!(
            allowed.find("xgb-clean-all", "1: running", &env, Context::default()),
            None
        );
    }

    #[test]
    fn throttled_entries_need_kubeflow_past_its_event_burst() {
        let allowed = AllowedDifferences::parse(
            "differences:\n  - case: '*'\n    field: 'events/*'\n    kubeflow: <absent>\n    \
             when: kubeflowEventsThrottled\n    status: deliberate\n    why: w\n",
        )
        .unwrap();
        let event = Difference {
            path: "events/Normal TFJobSucceeded: TFJob <ns>/j successfully completed.".to_owned(),
            kubeflow: None,
            kfop: Some(json!(true)),
        };
        let quiet = Context {
            kubeflow_events_recorded: 24,
        };
        let throttled = Context {
            kubeflow_events_recorded: 25,
        };
        assert_eq!(allowed.find("j", "4: exit", &event, quiet), None);
        assert_eq!(allowed.find("j", "4: exit", &event, throttled), Some(0));
    }

    #[test]
    fn renders_as_a_markdown_table() {
        let allowed = AllowedDifferences::parse(FILE).unwrap();
        assert_eq!(
            allowed.markdown_table(),
            "| cases | field | Kubeflow | kfop | status | why |\n\
             |---|---|---|---|---|---|\n\
             | any | `events/Normal ExitedWithCode:*` | `true` | `<absent>` | deliberate | \
             Kubeflow re-emits it on every reconcile; the pod's own status carries the code. |\n\
             | `xgb-*` at `2: *` | `pods/*/env/PYTHONUNBUFFERED/value` | any | any | **bug** | \
             kfop sets 0 \\| Kubeflow 1 |\n"
        );
    }

    /// docs/compatibility.md shows the committed file; `KFOP_BLESS=1` rewrites its section.
    #[test]
    fn the_compatibility_doc_section_is_current() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let allowed = AllowedDifferences::load(&root.join("allowed-differences.yaml")).unwrap();
        let doc_path = root.join("../docs/compatibility.md");
        let doc = std::fs::read_to_string(&doc_path).unwrap();
        let updated = allowed
            .update_doc(&doc)
            .expect("docs/compatibility.md has the generated-section markers");
        if std::env::var_os("KFOP_BLESS").is_some() {
            std::fs::write(&doc_path, &updated).unwrap();
        } else {
            assert!(
                updated == doc,
                "docs/compatibility.md's deliberate differences are stale: run KFOP_BLESS=1 cargo test -p kfop-conformance --lib"
            );
        }
    }

    #[test]
    fn the_committed_file_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("allowed-differences.yaml");
        let allowed = AllowedDifferences::load(&path).unwrap();
        for a in &allowed.differences {
            assert!(!a.why.trim().is_empty(), "{a:?}");
        }
        for a in &allowed.schema_paths {
            assert!(!a.why.trim().is_empty(), "{a:?}");
        }
    }

    /// The differences a full run on Kubernetes 1.37 reported for the elastic PyTorchJob whose
    /// HPA wrote it before Kubeflow's first status update, as its report printed them.
    #[test]
    fn kubeflows_lost_created_condition_is_declared() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("allowed-differences.yaml");
        let allowed = AllowedDifferences::load(&path).unwrap();
        let created = serde_json::json!({"message": "PyTorchJob pt-elastic-max-only is created.", "reason": "PyTorchJobCreated", "status": "True"});
        let found = [
            (
                "1: running",
                "job/status/conditionOrder",
                Some("Running".into()),
                Some("Created,Running".into()),
            ),
            ("1: running", "job/status/conditions/Created", None, Some(created)),
            (
                "2: exit * code 0",
                "job/status/conditionOrder",
                Some("Running,Succeeded".into()),
                Some("Created,Running,Succeeded".into()),
            ),
        ];
        for (step, path, kubeflow, kfop) in found {
            let difference = Difference {
                path: path.to_owned(),
                kubeflow,
                kfop,
            };
            let context = Context {
                kubeflow_events_recorded: 0,
            };
            let entry = allowed.find("pt-elastic-max-only", step, &difference, context);
            assert!(entry.is_some(), "{difference}");
        }
    }

    const SCHEMA_FILE: &str = r#"
differences: []
schemaPaths:
  - release: "training-operator *"
    schema: PaddleJob/v1
    path: "spec.elasticPolicy|spec.elasticPolicy.*"
    kfop: <absent>
    status: bug
    why: not yet
"#;

    #[test]
    fn schema_entries_match_release_schema_path_and_values() {
        let allowed = AllowedDifferences::parse(SCHEMA_FILE).unwrap();
        let missing = ("integer", "<absent>");
        let find = |release, schema, path, values| allowed.find_schema_path(release, schema, path, values);
        assert_eq!(
            find(
                "training-operator v1.9.0",
                "PaddleJob/v1",
                "spec.elasticPolicy",
                ("object", "<absent>")
            ),
            Some(0)
        );
        assert_eq!(
            find(
                "training-operator v1.8.1",
                "PaddleJob/v1",
                "spec.elasticPolicy.metrics[*].type",
                missing
            ),
            Some(0)
        );
        assert_eq!(
            find(
                "mpi-operator v0.6.0",
                "PaddleJob/v1",
                "spec.elasticPolicy",
                missing
            ),
            None
        );
        assert_eq!(
            find(
                "training-operator v1.8.1",
                "PyTorchJob/v1",
                "spec.elasticPolicy",
                missing
            ),
            None
        );
        assert_eq!(
            find(
                "training-operator v1.8.1",
                "PaddleJob/v1",
                "spec.elasticPolicyX",
                missing
            ),
            None
        );
        assert_eq!(
            find(
                "training-operator v1.8.1",
                "PaddleJob/v1",
                "spec.elasticPolicy",
                ("integer", "string")
            ),
            None
        );
    }

    #[test]
    fn schema_entries_render_in_the_doc_section() {
        let none = AllowedDifferences::parse("differences: []\n").unwrap();
        assert!(none.doc_section().contains("; none is declared otherwise.\n"));
        let section = AllowedDifferences::parse(SCHEMA_FILE).unwrap().doc_section();
        assert!(
            section.contains(
                "| `training-operator *` | `PaddleJob/v1` | `spec.elasticPolicy\\|spec.elasticPolicy.*` \
                 | any | `<absent>` | **bug** | not yet |\n"
            ),
            "{section}"
        );
    }
}
