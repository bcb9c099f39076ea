//! Admission tables: each row sends one job to the real API server as an untyped object (so
//! inputs a typed struct could not even hold reach it) and checks the verdict; the table of
//! messages (`| kind | input | API server message |`) documents what users see.
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// What the API server must do with a row's job.
#[derive(Clone, Debug)]
pub enum Verdict {
    Accepted,
    /// Rejected as invalid (HTTP 422) with a message containing every fragment: the field and
    /// what is wrong with it.
    Rejected(Vec<String>),
}

impl Verdict {
    pub fn rejected(fragments: &[&str]) -> Self {
        Self::Rejected(fragments.iter().map(|f| (*f).to_owned()).collect())
    }

    pub fn is_rejected(&self) -> bool {
        matches!(self, Self::Rejected(_))
    }
}

/// One row: a job, optionally a change to it once stored, and the verdict on the last step.
#[derive(Clone, Debug)]
pub struct Case {
    pub what: String,
    pub resource: ApiResource,
    pub name: String,
    pub spec: Value,
    /// A merge patch applied after the job is created (for rules on updates, e.g. immutability).
    pub change: Option<Value>,
    pub verdict: Verdict,
}

impl Case {
    pub fn new(
        what: impl Into<String>,
        resource: &ApiResource,
        name: &str,
        spec: Value,
        verdict: Verdict,
    ) -> Self {
        Self {
            what: what.into(),
            resource: resource.clone(),
            name: name.to_owned(),
            spec,
            change: None,
            verdict,
        }
    }

    /// The verdict is then the patch's; the job itself must be accepted.
    pub fn changed(mut self, patch: Value) -> Self {
        self.change = Some(patch);
        self
    }
}

/// The printed table and the rows that did not get their verdict, one line each.
#[derive(Debug, Default)]
pub struct Report {
    pub table: String,
    pub failures: Vec<String>,
}

/// Sends every case to `namespace`, in order. Job names must be unique per kind among the cases
/// that are accepted.
pub async fn run(client: Client, namespace: &str, cases: &[Case]) -> Report {
    let mut report = Report {
        table: "| kind | input | API server message |\n|---|---|---|\n".to_owned(),
        failures: Vec::new(),
    };
    for case in cases {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &case.resource);
        let label = format!("{} {}", case.resource.kind, case.what);
        let (shown, failure) = match (outcome(&api, case).await, &case.verdict) {
            (Outcome::Stored, Verdict::Accepted) => ("accepted".to_owned(), None),
            (Outcome::Stored, Verdict::Rejected(_)) => ("accepted".to_owned(), Some("accepted".to_owned())),
            (Outcome::Invalid(message), Verdict::Rejected(fragments)) => {
                let missing = fragments.iter().find(|f| !message.contains(f.as_str()));
                let failure = missing.map(|m| format!("message lacks {m:?}: {message}"));
                (message, failure)
            }
            (Outcome::Invalid(message) | Outcome::Error(message), _) => (message.clone(), Some(message)),
        };
        if let Some(failure) = failure {
            report.failures.push(format!("{label}: {failure}"));
        }
        // A `|` in a message would split its cell.
        let shown = shown.replace('|', "\\|");
        report
            .table
            .push_str(&format!("| {} | {} | {shown} |\n", case.resource.kind, case.what));
    }
    report
}

/// What happened to a case's last step.
enum Outcome {
    Stored,
    /// Rejected as invalid (422), with the API server's message.
    Invalid(String),
    /// Anything else, including a rejected job whose change was to be checked.
    Error(String),
}

async fn outcome(api: &Api<DynamicObject>, case: &Case) -> Outcome {
    let job = json!({
        "apiVersion": case.resource.api_version,
        "kind": case.resource.kind,
        "metadata": { "name": case.name },
        "spec": case.spec,
    });
    let job = match serde_json::from_value::<DynamicObject>(job) {
        Ok(job) => job,
        Err(e) => return Outcome::Error(format!("not an object: {e}")),
    };
    let created = Outcome::of(api.create(&PostParams::default(), &job).await);
    match (&case.change, created) {
        (Some(patch), Outcome::Stored) => {
            let params = PatchParams::default();
            Outcome::of(api.patch(&case.name, &params, &Patch::Merge(patch)).await)
        }
        (Some(_), Outcome::Invalid(message)) => {
            Outcome::Error(format!("the job to change was rejected: {message}"))
        }
        (_, created) => created,
    }
}

impl Outcome {
    fn of<T>(result: kube::Result<T>) -> Self {
        match result {
            Ok(_) => Self::Stored,
            Err(kube::Error::Api(status)) if status.code == 422 => Self::Invalid(status.message),
            Err(e) => Self::Error(format!("unexpected error: {e}")),
        }
    }
}
