//! Admission conformance: every job of Kubeflow v1.8.1's webhook test tables
//! (`cases/admission.yaml`) is created, as a server-side dry run, once on a plane with
//! Kubeflow's own CRDs and its validating webhook live, once on a plane with kfop's CRDs. Each
//! side's decision is `accepted` or `rejected: <field>`; Kubeflow's must be the one its test
//! table states (else the corpus is stale), and kfop's must be Kubeflow's unless
//! `allowed-differences.yaml` declares the difference (step [`STEP`], field [`FIELD`]).
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kfop_testenv::{
    Assets, ControlPlane, Peer, PeerBuild, PeerOptions, PeerWebhooks, PlaneOptions, ensure_namespace,
    install_crds,
};
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde::Deserialize;
use serde_json::Value;

use crate::allowed::{AllowedDifferences, Context, Status};
use crate::cases::{KINDS, Kind};
use crate::diff::Difference;
use crate::{Error, Result, operators};

/// The step label of every admission difference.
pub const STEP: &str = "admission";
/// The field of every admission difference; its values are [`Decision::render`]ed.
pub const FIELD: &str = "admission/decision";

/// One job and the decision Kubeflow's test table expects for it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionCase {
    /// `adm-<kind short>-<slug>`.
    pub name: String,
    /// PyTorchJob, TFJob, XGBoostJob, PaddleJob or MXJob.
    pub kind: String,
    /// The test table entry (or, for MXJob, the rule) it comes from.
    pub source: String,
    /// `accepted` or `rejected: <field>`.
    pub expect: String,
    /// `metadata` and `spec`; apiVersion and kind come from `kind`.
    pub job: Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CasesFile {
    /// Anchors the cases share; read through their aliases only.
    #[serde(default, rename = "shared")]
    _shared: Option<serde::de::IgnoredAny>,
    cases: Vec<AdmissionCase>,
}

impl AdmissionCase {
    pub fn kind(&self) -> Result<Kind> {
        Kind::named(&self.kind).ok_or_else(|| self.error(format!("no kind {}", self.kind)))
    }

    /// The field the expected rejection names; `None` when Kubeflow accepts the job.
    pub fn expected_field(&self) -> Option<&str> {
        self.expect.strip_prefix(REJECTED)
    }

    fn error(&self, message: String) -> Error {
        Error::Case {
            case: self.name.clone(),
            message,
        }
    }
}

const ACCEPTED: &str = "accepted";
const REJECTED: &str = "rejected: ";

/// Reads and checks the corpus: known kinds, `adm-` names given once, well-formed expectations.
pub fn load(path: &Path) -> Result<Vec<AdmissionCase>> {
    let text = std::fs::read_to_string(path).map_err(Error::io(path))?;
    let file: CasesFile = serde_saphyr::from_str(&text).map_err(|e| Error::parse(path, e))?;
    let mut seen = std::collections::BTreeSet::new();
    for case in &file.cases {
        case.kind()?;
        if !case.name.starts_with("adm-") || !seen.insert(case.name.as_str()) {
            return Err(case.error("names must start with adm- and be unique".to_owned()));
        }
        if case.expect != ACCEPTED && case.expected_field().is_none_or(str::is_empty) {
            return Err(case.error(format!(
                "expect must be `{ACCEPTED}` or `{REJECTED}<field>`, not {:?}",
                case.expect
            )));
        }
    }
    Ok(file.cases)
}

/// What one side's API server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Accepted,
    /// Rejected: invalid (422, the CRD schema or CEL) or denied (403, a webhook).
    Rejected {
        code: u16,
        message: String,
    },
    /// Anything else (a webhook that could not be called, a conflict): no decision at all.
    Failed(String),
}

impl Answer {
    fn of<T>(result: kube::Result<T>) -> Self {
        match result {
            Ok(_) => Self::Accepted,
            Err(kube::Error::Api(s))
                if s.code == 422 || (s.code == 403 && s.message.contains("denied the request")) =>
            {
                Self::Rejected {
                    code: s.code,
                    message: s.message,
                }
            }
            Err(e) => Self::Failed(e.to_string()),
        }
    }

    /// The message shown in the report.
    pub fn message(&self) -> &str {
        match self {
            Self::Accepted => "",
            Self::Rejected { message, .. } | Self::Failed(message) => message,
        }
    }
}

/// A side's decision on a case, comparable across sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Accepted,
    /// The field its message names: the case's expected field if it names that one, else the
    /// first field it names, else `?`.
    Rejected(String),
    /// No decision: the request failed otherwise.
    Failed,
}

impl Decision {
    pub fn of(answer: &Answer, expected_field: Option<&str>) -> Self {
        match answer {
            Answer::Accepted => Self::Accepted,
            Answer::Failed(_) => Self::Failed,
            Answer::Rejected { message, .. } => {
                let message = normalize_keys(message);
                let field = expected_field
                    .filter(|f| names_field(&message, f))
                    .map(str::to_owned)
                    .or_else(|| first_field(&message))
                    .unwrap_or_else(|| "?".to_owned());
                Self::Rejected(field)
            }
        }
    }

    /// `accepted`, `rejected: <field>` or `failed`: the form of a case's `expect` and of an
    /// admission difference's values.
    pub fn render(&self) -> String {
        match self {
            Self::Accepted => ACCEPTED.to_owned(),
            Self::Rejected(field) => format!("{REJECTED}{field}"),
            Self::Failed => "failed".to_owned(),
        }
    }
}

/// Characters of a field path: `spec.xgbReplicaSpecs.Master.template.spec.containers[0].image`.
fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '[' | ']' | '_' | '-' | '*')
}

/// `message` with map keys written as path segments: Kubeflow's field paths say
/// `spec.tfReplicaSpecs[Worker]`, kfop's `spec.tfReplicaSpecs.Worker`. List indices and `[*]`
/// stay bracketed; so do brackets around anything else (an aggregated error list).
pub fn normalize_keys(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let key_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(after.len());
        let key = &after[..key_len];
        let is_key = after[key_len..].starts_with(']')
            && !key.is_empty()
            && !key.chars().all(|c| c.is_ascii_digit())
            && out.ends_with(|c: char| c.is_ascii_alphanumeric());
        if is_key {
            out.push('.');
            out.push_str(key);
            rest = &after[key_len + 1..];
        } else {
            out.push('[');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Whether `message` names `field` as a whole path (not a longer path starting with it).
fn names_field(message: &str, field: &str) -> bool {
    message.match_indices(field).any(|(at, _)| {
        let before = message[..at].chars().next_back();
        let after = message[at + field.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '.')
            && !after.is_some_and(|c| path_char(c) && c != ']')
    })
}

/// The first `metadata.…` or `spec.…` path in `message`.
fn first_field(message: &str) -> Option<String> {
    let starts = ["metadata.", "spec."];
    let at = starts
        .iter()
        .flat_map(|s| message.match_indices(s).map(|(i, _)| i))
        .filter(|&i| {
            !message[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '.')
        })
        .min()?;
    let path: String = message[at..].chars().take_while(|&c| path_char(c)).collect();
    Some(path.trim_end_matches(['.', ']', '[']).to_owned())
}

/// How a case's kfop decision compares with Kubeflow's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Agreed,
    /// Declared by the entry at this index of the allowed differences.
    Declared(usize),
    Undeclared,
}

/// One case's result.
#[derive(Debug, Clone)]
pub struct Record {
    pub case: AdmissionCase,
    pub kubeflow: Answer,
    pub kfop: Answer,
    pub kubeflow_decision: Decision,
    pub kfop_decision: Decision,
    pub verdict: Verdict,
}

impl Record {
    /// Kubeflow's live decision differs from the one its test table states.
    pub fn stale(&self) -> bool {
        self.kubeflow_decision.render() != self.case.expect
    }

    /// The difference kfop's decision makes, if any.
    pub fn difference(&self) -> Option<Difference> {
        (self.kubeflow_decision != self.kfop_decision).then(|| Difference {
            path: FIELD.to_owned(),
            kubeflow: Some(Value::String(self.kubeflow_decision.render())),
            kfop: Some(Value::String(self.kfop_decision.render())),
        })
    }
}

/// Every case's result and the declarations they were judged by.
#[derive(Debug)]
pub struct Report {
    pub records: Vec<Record>,
    pub allowed: AllowedDifferences,
    pub elapsed: Duration,
}

impl Report {
    pub fn new(
        cases: Vec<AdmissionCase>,
        answers: Vec<(Answer, Answer)>,
        allowed: AllowedDifferences,
    ) -> Self {
        let records = cases
            .into_iter()
            .zip(answers)
            .map(|(case, (kubeflow, kfop))| {
                let expected = case.expected_field();
                let kubeflow_decision = Decision::of(&kubeflow, expected);
                let kfop_decision = Decision::of(&kfop, expected);
                let mut record = Record {
                    case,
                    kubeflow,
                    kfop,
                    kubeflow_decision,
                    kfop_decision,
                    verdict: Verdict::Agreed,
                };
                if let Some(difference) = record.difference() {
                    record.verdict = allowed
                        .find(&record.case.name, STEP, &difference, Context::default())
                        .map_or(Verdict::Undeclared, Verdict::Declared);
                }
                record
            })
            .collect();
        Self {
            records,
            allowed,
            elapsed: Duration::ZERO,
        }
    }

    fn count(&self, f: impl Fn(&Record) -> bool) -> usize {
        self.records.iter().filter(|r| f(r)).count()
    }

    fn declared(&self, status: Status) -> usize {
        self.count(
            |r| matches!(r.verdict, Verdict::Declared(i) if self.allowed.differences[i].status == status),
        )
    }

    pub fn undeclared(&self) -> usize {
        self.count(|r| r.verdict == Verdict::Undeclared)
    }

    pub fn stale(&self) -> usize {
        self.count(Record::stale)
    }

    /// Requests that got no decision on either side (a webhook not called, say).
    pub fn failed(&self) -> usize {
        self.count(|r| r.kubeflow_decision == Decision::Failed || r.kfop_decision == Decision::Failed)
    }

    /// The one-line summary.
    pub fn summary(&self) -> String {
        format!(
            "{} cases: {} agreed, {} declared ({} deliberate, {} bug), {} undeclared; {} stale \
             expectations, {} failed requests; {:.1}s",
            self.records.len(),
            self.count(|r| r.verdict == Verdict::Agreed),
            self.count(|r| matches!(r.verdict, Verdict::Declared(_))),
            self.declared(Status::Deliberate),
            self.declared(Status::Bug),
            self.undeclared(),
            self.stale(),
            self.failed(),
            self.elapsed.as_secs_f64()
        )
    }

    /// A Markdown table of every case, then both sides' messages for the ones that differ or
    /// are stale, then the summary.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "| case | Kubeflow's test expects | Kubeflow | kfop | verdict |\n|---|---|---|---|---|\n",
        );
        for r in &self.records {
            let verdict = match r.verdict {
                Verdict::Agreed => "agreed".to_owned(),
                Verdict::Declared(i) => match self.allowed.differences[i].status {
                    Status::Deliberate => "declared (deliberate)".to_owned(),
                    Status::Bug => "declared (**bug**)".to_owned(),
                },
                Verdict::Undeclared => "**UNDECLARED**".to_owned(),
            };
            let stale = if r.stale() { " **STALE**" } else { "" };
            let _ = writeln!(
                out,
                "| {} | `{}` | `{}`{stale} | `{}` | {verdict} |",
                r.case.name,
                r.case.expect,
                r.kubeflow_decision.render(),
                r.kfop_decision.render()
            );
        }
        out.push('\n');
        for r in &self.records {
            let _ = writeln!(
                out,
                "{} ({}; {}):\n  Kubeflow: {}\n  kfop:     {}",
                r.case.name,
                r.case.kind,
                r.case.source,
                shown(&r.kubeflow),
                shown(&r.kfop)
            );
        }
        let _ = writeln!(out, "\n{}", self.summary());
        out
    }
}

fn shown(answer: &Answer) -> String {
    match answer {
        Answer::Accepted => "accepted".to_owned(),
        Answer::Rejected { code, message } => format!("{code} {message}"),
        Answer::Failed(message) => format!("FAILED {message}"),
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub cases_file: PathBuf,
    pub allowed_file: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        Self {
            cases_file: crate_dir.join("cases/admission.yaml"),
            allowed_file: crate_dir.join("allowed-differences.yaml"),
        }
    }
}

/// The namespace the jobs are sent to on each plane.
const NAMESPACE: &str = "admission";

/// Sends every case to both sides, the two planes at once, and judges the answers.
pub async fn run(options: &Options) -> Result<Report> {
    let started = Instant::now();
    let cases = load(&options.cases_file)?;
    let allowed = AllowedDifferences::load(&options.allowed_file)?;
    // Builds are no-ops on a warm cache; cold, they take minutes (and Go for the peer).
    let bin = tokio::task::spawn_blocking(|| -> Result<_> {
        Assets::locate_or_build()?;
        PeerBuild::locate_or_build(kfop_testenv::peer::TRAINING_OPERATOR)?;
        operators::operator_bin()
    })
    .await
    .map_err(|e| Error::Task(format!("building: {e}")))??;
    let (kubeflow, kfop) = futures::try_join!(kubeflow_answers(&cases), kfop_answers(&cases, &bin))?;
    let mut report = Report::new(cases, kubeflow.into_iter().zip(kfop).collect(), allowed);
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Kubeflow's side: its CRDs, and its operator for the webhook on loopback.
async fn kubeflow_answers(cases: &[AdmissionCase]) -> Result<Vec<Answer>> {
    let plane = ControlPlane::start(PlaneOptions::default()).await?;
    let options = PeerOptions {
        // The release whose webhook tests the corpus is.
        peer: kfop_testenv::peer::TRAINING_OPERATOR.to_owned(),
        webhooks: PeerWebhooks::Loopback,
        install_crds: true,
        ..PeerOptions::default()
    };
    let mut peer = Peer::start(plane.kubeconfig(), NAMESPACE, options).await?;
    let answers = answers(&plane.client().await?, cases).await?;
    // An answer from a webhook that died meanwhile would be no answer of Kubeflow's.
    peer.check_alive()?;
    Ok(answers)
}

/// kfop's side: its CRDs (as `kfop-operator crds` prints them); no operator is needed.
async fn kfop_answers(cases: &[AdmissionCase], bin: &Path) -> Result<Vec<Answer>> {
    let plane = ControlPlane::start(PlaneOptions::default()).await?;
    let client = plane.client().await?;
    let schemes: Vec<String> = KINDS.iter().map(Kind::scheme).collect();
    install_crds(&client, operators::kfop_crds(bin, &schemes)?).await?;
    ensure_namespace(&client, NAMESPACE).await?;
    answers(&client, cases).await
}

/// Creates every case's job as a dry run, in order: nothing is stored, so the cases' names
/// need not differ.
async fn answers(client: &Client, cases: &[AdmissionCase]) -> Result<Vec<Answer>> {
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut out = Vec::with_capacity(cases.len());
    for case in cases {
        let kind = case.kind()?;
        let mut job = case.job.clone();
        if let Some(object) = job.as_object_mut() {
            object.insert("apiVersion".to_owned(), Value::from(kind.api_version()));
            object.insert("kind".to_owned(), Value::from(kind.kind));
        }
        let job: DynamicObject =
            serde_json::from_value(job).map_err(|e| case.error(format!("job is no object: {e}")))?;
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &kind.resource());
        out.push(Answer::of(api.create(&params, &job).await));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(message: &str) -> Answer {
        Answer::Rejected {
            code: 403,
            message: message.to_owned(),
        }
    }

    #[test]
    fn map_keys_read_as_path_segments() {
        assert_eq!(
            normalize_keys(
                "denied the request: [spec.tfReplicaSpecs[Worker].template.spec.containers[0].image: \
                 Required value, spec[*].x]"
            ),
            "denied the request: [spec.tfReplicaSpecs.Worker.template.spec.containers[0].image: \
             Required value, spec[*].x]"
        );
    }

    #[test]
    fn a_rejection_names_the_expected_field_or_its_first() {
        let kubeflow = rejected(
            "admission webhook \"v\" denied the request: [spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image: \
             Required value: must be required, spec.pytorchReplicaSpecs[Worker].template.spec.containers: Required value]",
        );
        let containers = "spec.pytorchReplicaSpecs.Worker.template.spec.containers";
        assert_eq!(
            Decision::of(&kubeflow, Some(containers)).render(),
            format!("rejected: {containers}")
        );
        let image =
            rejected("spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image: Required value");
        assert_eq!(
            Decision::of(&image, Some(containers)).render(),
            format!("rejected: {containers}[0].image")
        );
        assert_eq!(
            Decision::of(
                &rejected("PyTorchJob \"0-test\" is invalid: metadata.name must be a DNS-1035 label"),
                None
            ),
            Decision::Rejected("metadata.name".to_owned())
        );
        assert_eq!(
            Decision::of(&rejected("nothing named"), None).render(),
            "rejected: ?"
        );
        assert_eq!(
            Decision::of(&Answer::Accepted, Some(containers)).render(),
            "accepted"
        );
    }

    #[test]
    fn the_committed_cases_load() {
        let cases = load(&Options::default().cases_file).unwrap();
        for kind in ["PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "MXJob"] {
            let of_kind = cases.iter().filter(|c| c.kind == kind);
            assert!(of_kind.clone().any(|c| c.expect == ACCEPTED), "{kind}");
            assert!(of_kind.count() >= 4, "{kind}");
        }
        assert!(cases.len() >= 30);
    }
}
