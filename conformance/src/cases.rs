//! The corpus: what each case runs and the lifecycle it drives the job through, read from data.
//!
//! * `cases/examples.yaml` lists every job example of the peers' Go modules (`examples/`) of
//!   the kinds each peer judges ([`Kind::peer`]), each run with its spec unchanged;
//!   [`load_examples`] fails when a module has one the file does not list, so a version bump
//!   cannot silently shrink the corpus.
//! * `cases/variants.yaml` holds one small job per kind and variants over them (restart
//!   policies and exit codes, cleanPodPolicy, backoffLimit, suspend, ...), each a matrix of
//!   axes substituted into a spec patch and a list of steps ([`load_variants`]).
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use kfop_testenv::peer;
use kube::api::ApiResource;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::{Error, Result, glob};

/// What a generated name's random suffix becomes: a pod a batch Job creates
/// (`<job>-launcher-x7k2p`) is expected and keyed `<job>-launcher-<random>` on both sides.
pub const RANDOM_SUFFIX: &str = "<random>";

/// A job kind under test: its API, the names Kubeflow gives its parts and the Kubeflow release
/// that judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    pub kind: &'static str,
    pub plural: &'static str,
    /// The JSON name of the replica-spec map.
    pub specs: &'static str,
    /// The container named after the framework.
    pub container: &'static str,
    /// The peer (folder under `testenv/peers/`) whose operator its cases run under.
    pub peer: &'static str,
    /// The API version the cases create (`v1`; mpi-operator's MPIJob `v2beta1`).
    pub version: &'static str,
    /// The role whose pod a batch Job of the operator's runs (MPIJob's Launcher): its pod is
    /// `<job>-<type>-<random>`, which snapshots key as `<job>-<type>-<random>` on both sides.
    pub batch_role: Option<&'static str>,
    /// The role whose one pod is named `<job>-<type>`, without an index (training-operator's
    /// MPIJob v1 launcher).
    pub bare_role: Option<&'static str>,
    /// The lane all its cases run in, when it cannot share one: the Kubeflow processes of a lane
    /// share a namespace, and two controllers of one CRD (mpi-operator and training-operator's
    /// MPI controller both serve `mpijobs.kubeflow.org`, at any version) would both run its jobs.
    pub lane: Option<&'static str>,
    /// How cases and reports name it: the kind, or `<kind>/<version>` for a second version of one.
    pub key: &'static str,
}

/// The Kubeflow release most kinds are judged by.
const V1_8_1: &str = peer::TRAINING_OPERATOR;

/// The kinds both operators serve from one CRD. JAXJob exists only from Kubeflow v1.9, which
/// judges it; v1.9 dropped MXJob, so v1.8.1 stays the judge of the others. MPIJob is v1 in
/// training-operator and v2beta1 in kfop, two APIs of one CRD name: mpi-operator v0.6.0, whose
/// API kfop's is, judges v2beta1, and v1.8.1 a job created as v1 (kfop runs that one as v1.8.1
/// does).
pub const KINDS: [Kind; 8] = [
    Kind {
        kind: "PyTorchJob",
        plural: "pytorchjobs",
        specs: "pytorchReplicaSpecs",
        container: "pytorch",
        peer: V1_8_1,
        version: "v1",
        batch_role: None,
        bare_role: None,
        lane: None,
        key: "PyTorchJob",
    },
    Kind {
        kind: "TFJob",
        plural: "tfjobs",
        specs: "tfReplicaSpecs",
        container: "tensorflow",
        peer: V1_8_1,
        version: "v1",
        batch_role: None,
        bare_role: None,
        lane: None,
        key: "TFJob",
    },
    Kind {
        kind: "XGBoostJob",
        plural: "xgboostjobs",
        specs: "xgbReplicaSpecs",
        container: "xgboost",
        peer: V1_8_1,
        version: "v1",
        batch_role: None,
        bare_role: None,
        lane: None,
        key: "XGBoostJob",
    },
    Kind {
        kind: "PaddleJob",
        plural: "paddlejobs",
        specs: "paddleReplicaSpecs",
        container: "paddle",
        peer: V1_8_1,
        version: "v1",
        batch_role: None,
        bare_role: None,
        lane: None,
        key: "PaddleJob",
    },
    Kind {
        kind: "MXJob",
        plural: "mxjobs",
        specs: "mxReplicaSpecs",
        container: "mxnet",
        peer: V1_8_1,
        version: "v1",
        batch_role: None,
        bare_role: None,
        lane: None,
        key: "MXJob",
    },
    Kind {
        kind: "JAXJob",
        plural: "jaxjobs",
        specs: "jaxReplicaSpecs",
        container: "jax",
        peer: peer::TRAINING_OPERATOR_V1_9_0,
        version: "v1",
        batch_role: None,
        bare_role: None,
        lane: None,
        key: "JAXJob",
    },
    Kind {
        kind: "MPIJob",
        plural: "mpijobs",
        specs: "mpiReplicaSpecs",
        container: "mpi",
        peer: peer::MPI_OPERATOR_V0_6_0,
        version: "v2beta1",
        batch_role: Some("Launcher"),
        bare_role: None,
        lane: None,
        key: "MPIJob",
    },
    // A job created as v1 kfop runs as training-operator v1.8.1's MPI controller does, which
    // judges it in a lane of its own (see `lane`).
    Kind {
        kind: "MPIJob",
        plural: "mpijobs",
        specs: "mpiReplicaSpecs",
        container: "mpi",
        peer: V1_8_1,
        version: "v1",
        batch_role: None,
        bare_role: Some("Launcher"),
        lane: Some(MPI_V1_LANE),
        key: "MPIJob/v1",
    },
];

/// The lane of MPIJob v1 cases: training-operator v1.8.1 with its MPI controller, and no
/// mpi-operator, on the Kubeflow side.
pub const MPI_V1_LANE: &str = "mpi-v1";

/// The peers judging [`KINDS`], each once, in the order of the kinds.
pub fn peers() -> Vec<&'static str> {
    let mut peers: Vec<&'static str> = Vec::new();
    for kind in &KINDS {
        if !peers.contains(&kind.peer) {
            peers.push(kind.peer);
        }
    }
    peers
}

impl Kind {
    /// The kind of key [`Kind::key`] (`MPIJob` is v2beta1, `MPIJob/v1` training-operator's).
    pub fn named(key: &str) -> Option<Self> {
        KINDS.iter().copied().find(|k| k.key == key)
    }

    /// The kind of a job document: its `kind` at its `apiVersion`.
    pub fn of(kind: &str, api_version: &str) -> Option<Self> {
        KINDS
            .iter()
            .copied()
            .find(|k| k.kind == kind && k.api_version() == api_version)
    }

    /// The `--enable-scheme` value of both operators.
    pub fn scheme(&self) -> String {
        self.kind.to_ascii_lowercase()
    }

    pub fn api_version(&self) -> String {
        format!("kubeflow.org/{}", self.version)
    }

    pub fn resource(&self) -> ApiResource {
        ApiResource {
            group: "kubeflow.org".to_owned(),
            version: self.version.to_owned(),
            api_version: self.api_version(),
            kind: self.kind.to_owned(),
            plural: self.plural.to_owned(),
        }
    }
}

/// One step of a case's lifecycle. After each, the runner waits for both sides to settle and
/// records a snapshot of each.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Step {
    /// Nothing to do: the state the job settles in (e.g. right after creation).
    Settle,
    /// Wait until every replica's pod runs.
    Running,
    /// Wait until the job has Succeeded or Failed (or is gone).
    Finished,
    /// kwok ends the running pods whose name after `<job>-` matches one of `pods` (globs).
    Exit(Exit),
    /// The kubelet restarted a running pod's containers in place this often.
    RestartCount(RestartCount),
    /// The kubelet evicts the running pods whose name after `<job>-` matches one of `pods`
    /// (globs): their phase becomes Failed with reason Evicted.
    Evict(Evict),
    Suspend,
    Resume,
    /// Let time pass (deadlines, TTLs).
    Wait(Wait),
    /// Delete the job (background propagation) and wait for it and its children to go.
    Delete,
    /// Wait for the job and its children to go (a TTL deletes it).
    Gone,
    /// Change an annotation of the job: an event for its operator, nothing else.
    Poke,
    /// Volcano admits the job's PodGroup (its phase becomes Inqueue), which lets pods be created.
    AdmitPodGroup,
    /// A JSON merge patch of the job's spec, as a user (or an autoscaler) would send;
    /// `replicaSpecs` stands for the kind's replica map.
    Patch(Value),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Exit {
    pub pods: Vec<String>,
    pub code: i32,
    #[serde(default)]
    pub restarts: i32,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Evict {
    pub pods: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestartCount {
    pub pod: String,
    pub count: i32,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Wait {
    pub seconds: u64,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Settle => f.write_str("settle"),
            Self::Running => f.write_str("running"),
            Self::Finished => f.write_str("finished"),
            Self::Exit(e) if e.restarts == 0 => write!(f, "exit {} code {}", e.pods.join(","), e.code),
            Self::Exit(e) => write!(
                f,
                "exit {} code {} after {} restarts",
                e.pods.join(","),
                e.code,
                e.restarts
            ),
            Self::RestartCount(r) => write!(f, "restart-count {} {}", r.pod, r.count),
            Self::Evict(e) => write!(f, "evict {}", e.pods.join(",")),
            Self::Suspend => f.write_str("suspend"),
            Self::Resume => f.write_str("resume"),
            Self::Wait(w) => write!(f, "wait {}s", w.seconds),
            Self::Delete => f.write_str("delete"),
            Self::Gone => f.write_str("gone"),
            Self::Poke => f.write_str("poke"),
            Self::AdmitPodGroup => f.write_str("admit-pod-group"),
            Self::Patch(p) => write!(f, "patch {p}"),
        }
    }
}

/// One job, run the same way under both operators.
#[derive(Debug, Clone)]
pub struct Case {
    /// Unique in the corpus; also the job's name (both sides' namespaces hold every case's job).
    pub name: String,
    pub kind: Kind,
    /// Where the case comes from (an example file or a variant).
    pub source: String,
    /// The operator pair it runs under ([`crate::runner::LANES`]: gang scheduling or not).
    pub lane: String,
    /// The job object, without a namespace.
    pub job: Value,
    pub steps: Vec<Step>,
}

impl Case {
    /// The pods Kubeflow names for the spec: `<job>-<lowercased type>-<index>`; the batch
    /// role's one pod `<job>-<lowercased type>-<random>` (the key snapshots give it).
    pub fn expected_pods(&self) -> Vec<String> {
        let specs = self.job["spec"][self.kind.specs]
            .as_object()
            .cloned()
            .unwrap_or_default();
        specs
            .iter()
            .flat_map(|(role, spec)| {
                let replicas = spec["replicas"].as_u64().unwrap_or(1);
                let batch = self.kind.batch_role == Some(role.as_str());
                let bare = self.kind.bare_role == Some(role.as_str());
                (0..replicas).map(move |i| {
                    let role = role.to_ascii_lowercase();
                    if bare {
                        return format!("{}-{role}", self.name);
                    }
                    let index = if batch {
                        RANDOM_SUFFIX.to_owned()
                    } else {
                        i.to_string()
                    };
                    format!("{}-{role}-{index}", self.name)
                })
            })
            .collect()
    }

    /// The PersistentVolumeClaims the pod templates mount; the runner provides them bound, as
    /// the examples' own `pvc.yaml` files would.
    pub fn claims(&self) -> BTreeSet<String> {
        let specs = self.job["spec"][self.kind.specs]
            .as_object()
            .cloned()
            .unwrap_or_default();
        specs
            .values()
            .flat_map(|spec| {
                spec["template"]["spec"]["volumes"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|v| {
                v["persistentVolumeClaim"]["claimName"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    }
}

/// Whether `suffix` (a pod name after `<job>-`) is one of `patterns`.
pub fn targets(patterns: &[String], suffix: &str) -> bool {
    patterns.iter().any(|p| glob::matches(p, suffix))
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(Error::io(path))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExamplesFile {
    /// Added to every replica's pod template, so kwok ends the pods.
    template_annotations: BTreeMap<String, String>,
    steps: Vec<Step>,
    examples: Vec<ExampleEntry>,
    /// Example files of kinds not under test, with why.
    #[serde(default)]
    skipped: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExampleEntry {
    /// Relative to the module's `examples/`.
    file: String,
    /// The job's name, when the example's own is taken by another example.
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    steps: Option<Vec<Step>>,
    /// Merged over the file's `templateAnnotations` (a lifecycle scripted pod by pod must not
    /// race pods ending on their own).
    #[serde(default)]
    template_annotations: BTreeMap<String, String>,
}

/// The examples of `cases_file`, specs unchanged but for the template annotations the file adds.
/// `modules` holds each peer's `examples/`; an entry is read from the module of the peer judging
/// its kind (v1.9.0's `pytorch/simple.yaml` is no JAX example, v1.8.1's is the PyTorch one).
/// Fails if a module holds a job that the file neither lists nor skips, unless another peer
/// judges its kind (v1.9.0's PyTorch examples are not v1.9.0's to judge).
pub fn load_examples(cases_file: &Path, modules: &[(&str, PathBuf)]) -> Result<Vec<Case>> {
    let file: ExamplesFile =
        serde_saphyr::from_str(&read(cases_file)?).map_err(|e| Error::parse(cases_file, e))?;
    let listed: BTreeSet<&str> = file
        .examples
        .iter()
        .map(|e| e.file.as_str())
        .chain(file.skipped.keys().map(String::as_str))
        .collect();
    // Relative path -> the file, in the module of the peer judging its job's kind.
    let mut judged: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut unlisted = Vec::new();
    for (peer, examples_dir) in modules {
        for path in yaml_files(examples_dir)? {
            let relative = path
                .strip_prefix(examples_dir)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            let judges: Vec<Option<&str>> = documents(&path)?
                .iter()
                .filter(|d| {
                    d["apiVersion"]
                        .as_str()
                        .is_some_and(|v| v.starts_with("kubeflow.org/"))
                })
                .map(|d| {
                    let kind = d["kind"].as_str().unwrap_or_default();
                    Kind::of(kind, d["apiVersion"].as_str().unwrap_or_default()).map(|k| k.peer)
                })
                .collect();
            if judges.contains(&Some(*peer))
                && let Some(other) = judged.insert(relative.clone(), path.clone())
            {
                return Err(Error::parse(
                    &path,
                    format!("two peers judge a job of this name: {}", other.display()),
                ));
            }
            // A job of a kind nobody judges is every module's to list or skip.
            let ours = judges.iter().any(|j| j.is_none_or(|p| p == *peer));
            if ours && !listed.contains(relative.as_str()) {
                unlisted.push(path.display().to_string());
            }
        }
    }
    if !unlisted.is_empty() {
        return Err(Error::parse(
            cases_file,
            format!("lists neither of these jobs: {unlisted:?}"),
        ));
    }
    file.examples
        .iter()
        .map(|entry| {
            let path = judged.get(&entry.file).ok_or_else(|| {
                Error::parse(
                    cases_file,
                    format!(
                        "{}: no peer's module holds it as a job of a kind that peer judges",
                        entry.file
                    ),
                )
            })?;
            example_case(&file, entry, path)
        })
        .collect()
}

fn example_case(file: &ExamplesFile, entry: &ExampleEntry, path: &Path) -> Result<Case> {
    let mut docs = documents(path)?;
    if docs.len() != 1 {
        return Err(Error::parse(path, "expected one job document"));
    }
    let mut job = docs.remove(0);
    let kind_name = job["kind"].as_str().unwrap_or_default().to_owned();
    let api_version = job["apiVersion"].as_str().unwrap_or_default().to_owned();
    let kind = Kind::of(&kind_name, &api_version).ok_or_else(|| {
        Error::parse(
            path,
            format!("kind {kind_name:?} of {api_version} is not under test"),
        )
    })?;
    let name = match &entry.name {
        Some(name) => name.clone(),
        None => job["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
    };
    // Only the name and namespace change: each side puts the job in its own namespace.
    job["metadata"] = json!({ "name": name });
    let specs = job["spec"][kind.specs].as_object_mut();
    for spec in specs.into_iter().flat_map(|m| m.values_mut()) {
        let template = &mut spec["template"];
        if !template["metadata"].is_object() {
            template["metadata"] = json!({});
        }
        let annotations = &mut template["metadata"]["annotations"];
        if !annotations.is_object() {
            *annotations = json!({});
        }
        for (key, value) in file
            .template_annotations
            .iter()
            .chain(&entry.template_annotations)
        {
            annotations[key] = Value::from(value.clone());
        }
    }
    Ok(Case {
        name,
        kind,
        source: format!("examples/{}", entry.file),
        lane: kind.lane.unwrap_or(DEFAULT_LANE).to_owned(),
        job,
        steps: entry.steps.clone().unwrap_or_else(|| file.steps.clone()),
    })
}

/// Every `*.yaml` under `dir`, sorted.
fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).map_err(Error::io(&dir))? {
            let path = entry.map_err(Error::io(&dir))?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The YAML documents of `path` (examples may hold several, e.g. a Service and a Pod).
fn documents(path: &Path) -> Result<Vec<Value>> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(&read(path)?).map_err(|e| Error::parse(path, e))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VariantsFile {
    /// The image of every container (kwok runs nothing).
    image: String,
    bases: BTreeMap<String, Base>,
    variants: Vec<Variant>,
}

/// The small job a kind's variants start from.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Base {
    /// Prefix of the case names (`pt-restart-never-1`).
    short: String,
    /// Replica types and counts.
    roles: BTreeMap<String, u32>,
    /// Extra spec fields (MXJob's jobMode).
    #[serde(default)]
    spec: Map<String, Value>,
    /// Variables of this kind for the variants (`${ends}`: the pods whose success ends it).
    #[serde(default)]
    vars: BTreeMap<String, Value>,
    /// Only the variants naming this kind in their `kinds` apply (MPIJob: a launcher Job and
    /// workers, not the replica lifecycles of the others).
    #[serde(default)]
    explicit: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Variant {
    /// A template over the axes; prefixed with the kind's `short`.
    name: String,
    /// Only these kinds (default: every base).
    #[serde(default)]
    kinds: Vec<String>,
    /// The operator pair (default: no gang scheduling).
    #[serde(default = "default_lane")]
    lane: String,
    /// Every combination of these values is a case.
    #[serde(default)]
    axes: BTreeMap<String, Vec<Value>>,
    /// A JSON merge patch of the spec; its key `replicaSpecs` stands for the kind's map.
    #[serde(default)]
    patch: Value,
    steps: Vec<Value>,
}

/// The lane of cases that name none: both operators without gang scheduling.
pub const DEFAULT_LANE: &str = "default";

fn default_lane() -> String {
    DEFAULT_LANE.to_owned()
}

/// The variants of `cases_file`: for each variant, each kind it applies to and each combination
/// of its axes, a case named `<short>-<name>`. Variables: the axes, the base's `vars` and
/// `container` (the framework's container name).
pub fn load_variants(cases_file: &Path) -> Result<Vec<Case>> {
    let file: VariantsFile =
        serde_saphyr::from_str(&read(cases_file)?).map_err(|e| Error::parse(cases_file, e))?;
    let mut cases = Vec::new();
    for variant in &file.variants {
        for (kind_name, base) in &file.bases {
            let named = variant.kinds.contains(kind_name);
            if (!variant.kinds.is_empty() || base.explicit) && !named {
                continue;
            }
            let kind = Kind::named(kind_name).ok_or_else(|| {
                Error::parse(cases_file, format!("base {kind_name} is not a kind under test"))
            })?;
            // A kind with a lane of its own runs nowhere else.
            let lane = match kind.lane {
                Some(own) if variant.lane != DEFAULT_LANE && variant.lane != own => {
                    return Err(Error::parse(
                        cases_file,
                        format!("variant {}: {kind_name} runs only in lane {own}", variant.name),
                    ));
                }
                Some(own) => own.to_owned(),
                None => variant.lane.clone(),
            };
            for axes in combinations(&variant.axes) {
                // Built in: the framework's container name.
                let mut vars = BTreeMap::from([("container".to_owned(), Value::from(kind.container))]);
                vars.extend(base.vars.clone());
                vars.extend(axes);
                let fail = |message: String| {
                    Error::parse(cases_file, format!("variant {}: {message}", variant.name))
                };
                let name = substitute(&Value::from(variant.name.clone()), &vars).map_err(&fail)?;
                let name =
                    format!("{}-{}", base.short, name.as_str().unwrap_or_default()).to_ascii_lowercase();
                let mut job = base_job(kind, base, &file.image, &name);
                let patch = substitute(&variant.patch, &vars).map_err(&fail)?;
                apply_patch(&mut job["spec"], &patch, kind).map_err(&fail)?;
                let steps = variant
                    .steps
                    .iter()
                    .map(|s| {
                        let s = substitute(s, &vars)?;
                        serde_json::from_value(s).map_err(|e| e.to_string())
                    })
                    .collect::<Result<Vec<Step>, String>>()
                    .map_err(&fail)?;
                cases.push(Case {
                    name,
                    kind,
                    source: format!("variant {}", variant.name),
                    lane: lane.clone(),
                    job,
                    steps,
                });
            }
        }
    }
    Ok(cases)
}

fn base_job(kind: Kind, base: &Base, image: &str, name: &str) -> Value {
    let specs: Map<String, Value> = base
        .roles
        .iter()
        .map(|(role, replicas)| {
            let template = json!({ "spec": { "containers": [{ "name": kind.container, "image": image }] } });
            (
                role.clone(),
                json!({ "replicas": replicas, "template": template }),
            )
        })
        .collect();
    let mut spec = base.spec.clone();
    spec.insert(kind.specs.to_owned(), Value::Object(specs));
    json!({
        "apiVersion": kind.api_version(),
        "kind": kind.kind,
        "metadata": { "name": name },
        "spec": spec,
    })
}

/// Every assignment of one value per axis (one empty assignment without axes).
fn combinations(axes: &BTreeMap<String, Vec<Value>>) -> Vec<BTreeMap<String, Value>> {
    axes.iter().fold(vec![BTreeMap::new()], |acc, (axis, values)| {
        acc.iter()
            .flat_map(|partial| {
                values.iter().map(move |v| {
                    let mut next = partial.clone();
                    next.insert(axis.clone(), v.clone());
                    next
                })
            })
            .collect()
    })
}

/// `value` with `${var}` replaced: a string that is exactly `${var}` becomes the variable's
/// value (so numbers stay numbers), a longer string gets its text.
fn substitute(value: &Value, vars: &BTreeMap<String, Value>) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => {
            if let Some(var) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
                && !var.contains('}')
            {
                return vars.get(var).cloned().ok_or_else(|| format!("no variable {var}"));
            }
            let mut out = String::new();
            let mut rest = s.as_str();
            while let Some(start) = rest.find("${") {
                out.push_str(&rest[..start]);
                let end = rest[start..]
                    .find('}')
                    .ok_or_else(|| format!("unclosed ${{ in {s:?}"))?;
                let var = &rest[start + 2..start + end];
                match vars.get(var) {
                    Some(Value::String(v)) => out.push_str(v),
                    Some(v) => out.push_str(&v.to_string()),
                    None => return Err(format!("no variable {var}")),
                }
                rest = &rest[start + end + 1..];
            }
            out.push_str(rest);
            Value::String(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| substitute(v, vars))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = substitute(&Value::from(k.clone()), vars)?;
                    let key = key.as_str().map_or_else(|| key.to_string(), str::to_owned);
                    Ok((key, substitute(v, vars)?))
                })
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// RFC 7386 merge of `patch` into `spec`; `replicaSpecs` names the kind's replica map, and may
/// only name replica types the base has (a patch must not invent a role without a template);
/// a null removes one.
fn apply_patch(spec: &mut Value, patch: &Value, kind: Kind) -> Result<(), String> {
    let Some(patch) = patch.as_object() else {
        return if patch.is_null() {
            Ok(())
        } else {
            Err("patch is not a map".to_owned())
        };
    };
    for (key, value) in patch {
        if key == "replicaSpecs" {
            let roles = value.as_object().cloned().unwrap_or_default();
            for (role, role_patch) in roles {
                // Indexing a missing key would insert it: look it up first.
                let roles = spec.get_mut(kind.specs).and_then(Value::as_object_mut);
                match roles {
                    Some(roles) if roles.contains_key(&role) && role_patch.is_null() => {
                        roles.remove(&role);
                    }
                    Some(roles) if roles.contains_key(&role) => {
                        if let Some(target) = roles.get_mut(&role) {
                            merge(target, &role_patch);
                        }
                    }
                    _ => return Err(format!("{} has no replica type {role}", kind.kind)),
                }
            }
        } else {
            merge(&mut spec[key], value);
        }
    }
    Ok(())
}

fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(fields) => {
            if !target.is_object() {
                *target = json!({});
            }
            for (key, value) in fields {
                if value.is_null() {
                    if let Some(map) = target.as_object_mut() {
                        map.remove(key);
                    }
                } else {
                    merge(&mut target[key], value);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// Fails on what would make two cases collide on the plane: a repeated name, or a name that is
/// no DNS-1035 label short enough for `<name>-<type>-<index>` pod and service names.
pub fn check(cases: &[Case]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for case in cases {
        let fail = |message: &str| Error::Case {
            case: case.name.clone(),
            message: message.to_owned(),
        };
        if !seen.insert(case.name.as_str()) {
            return Err(fail("two cases have this name; give one a `name`"));
        }
        let label = case.name.len() <= 45
            && case.name.starts_with(|c: char| c.is_ascii_lowercase())
            && case
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !case.name.ends_with('-');
        if !label {
            return Err(fail("not a DNS-1035 label of at most 45 characters"));
        }
        if case.steps.is_empty() {
            return Err(fail("no steps"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_read_as_yaml() {
        let steps: Vec<Step> = serde_saphyr::from_str(
            "- running\n- exit: {pods: [worker-1], code: 137}\n- restartCount: {pod: worker-0, count: 1}\n\
             - wait: {seconds: 3}\n- suspend\n",
        )
        .unwrap();
        assert_eq!(steps[0], Step::Running);
        assert_eq!(steps[1].to_string(), "exit worker-1 code 137", "{:?}", steps[1]);
        assert_eq!(steps[2].to_string(), "restart-count worker-0 1");
        assert_eq!(steps[3], Step::Wait(Wait { seconds: 3 }));
        assert_eq!(steps[4], Step::Suspend);
    }

    #[test]
    fn substitution_keeps_types() {
        let vars = BTreeMap::from([
            ("code".to_owned(), json!(137)),
            ("policy".to_owned(), json!("ExitCode")),
        ]);
        assert_eq!(substitute(&json!("${code}"), &vars).unwrap(), json!(137));
        assert_eq!(
            substitute(&json!("restart-${policy}-${code}"), &vars).unwrap(),
            json!("restart-ExitCode-137")
        );
        assert!(substitute(&json!("${nope}"), &vars).is_err());
    }

    #[test]
    fn combinations_cover_every_axis() {
        let axes = BTreeMap::from([
            ("a".to_owned(), vec![json!(1), json!(2)]),
            ("b".to_owned(), vec![json!("x"), json!("y"), json!("z")]),
        ]);
        assert_eq!(combinations(&axes).len(), 6);
        assert_eq!(combinations(&BTreeMap::new()).len(), 1);
    }

    #[test]
    fn patches_merge_into_existing_roles_only() {
        let kind = KINDS[0];
        let base = Base {
            short: "pt".to_owned(),
            roles: BTreeMap::from([("Master".to_owned(), 1), ("Worker".to_owned(), 2)]),
            spec: Map::new(),
            vars: BTreeMap::new(),
            explicit: false,
        };
        let mut job = base_job(kind, &base, "img", "pt-x");
        let patch = json!({ "runPolicy": { "cleanPodPolicy": "All" }, "replicaSpecs": { "Worker": { "restartPolicy": "Never" } } });
        apply_patch(&mut job["spec"], &patch, kind).unwrap();
        assert_eq!(job["spec"]["runPolicy"]["cleanPodPolicy"], "All");
        assert_eq!(
            job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"],
            "Never"
        );
        assert_eq!(job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"], 2);
        let bad = json!({ "replicaSpecs": { "Chief": { "replicas": 1 } } });
        assert!(apply_patch(&mut job["spec"], &bad, kind).is_err());
        let case = Case {
            name: "pt-x".to_owned(),
            kind,
            source: String::new(),
            lane: DEFAULT_LANE.to_owned(),
            job,
            steps: vec![Step::Running],
        };
        assert_eq!(
            case.expected_pods(),
            ["pt-x-master-0", "pt-x-worker-0", "pt-x-worker-1"]
        );
    }

    fn job(kind: &str, name: &str) -> String {
        format!(
            "apiVersion: kubeflow.org/v1\nkind: {kind}\nmetadata: {{name: {name}}}\n\
             spec: {{r: {{Worker: {{replicas: 1, template: {{spec: {{containers: []}}}}}}}}}}\n"
        )
    }

    #[test]
    fn examples_come_from_the_module_of_the_release_judging_their_kind() {
        let root = std::env::temp_dir().join(format!("kfop-examples-{}", std::process::id()));
        let write = |module: &str, file: &str, text: String| {
            let path = root.join(module).join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("old", "pytorch/simple.yaml", job("PyTorchJob", "old-simple"));
        write("old", "mpi/x.yaml", job("MPIJob", "x"));
        write("new", "pytorch/simple.yaml", job("PyTorchJob", "new-simple"));
        write("new", "mpi/x.yaml", job("MPIJob", "x"));
        write("new", "jax/demo.yaml", job("JAXJob", "jax-demo"));
        let cases_file = root.join("examples.yaml");
        let modules = [
            (peer::TRAINING_OPERATOR, root.join("old")),
            (peer::TRAINING_OPERATOR_V1_9_0, root.join("new")),
        ];
        let listing = |files: &str| {
            std::fs::write(
                &cases_file,
                format!(
                    "templateAnnotations: {{}}\nsteps: [running]\nexamples: [{files}]\n\
                     skipped: {{mpi/x.yaml: MPIJob is not under test}}\n"
                ),
            )
            .unwrap();
            load_examples(&cases_file, &modules)
        };
        let cases = listing("{file: pytorch/simple.yaml}, {file: jax/demo.yaml}").unwrap();
        let names: Vec<(&str, &str)> = cases.iter().map(|c| (c.name.as_str(), c.kind.kind)).collect();
        assert_eq!(names, [("old-simple", "PyTorchJob"), ("jax-demo", "JAXJob")]);
        let unlisted = listing("{file: pytorch/simple.yaml}").unwrap_err().to_string();
        assert!(unlisted.contains("jax/demo.yaml"), "{unlisted}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn mpijob_v1_is_training_operators_in_a_lane_of_its_own() {
        let v1 = Kind::of("MPIJob", "kubeflow.org/v1").unwrap();
        assert_eq!(
            (v1.peer, v1.key, v1.lane),
            (peer::TRAINING_OPERATOR, "MPIJob/v1", Some(MPI_V1_LANE))
        );
        let v2 = Kind::of("MPIJob", "kubeflow.org/v2beta1").unwrap();
        assert_eq!(Kind::named("MPIJob"), Some(v2));
        assert_eq!(v2.peer, peer::MPI_OPERATOR_V0_6_0);
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases");
        let cases = load_variants(&dir.join("variants.yaml")).unwrap();
        let case = cases.iter().find(|c| c.name == "mpiv1-launcher-1").unwrap();
        assert_eq!(case.lane, MPI_V1_LANE);
        assert_eq!(case.job["apiVersion"], "kubeflow.org/v1");
        assert_eq!(
            case.expected_pods(),
            [
                "mpiv1-launcher-1-launcher",
                "mpiv1-launcher-1-worker-0",
                "mpiv1-launcher-1-worker-1"
            ]
        );
    }

    #[test]
    fn the_committed_variants_load_and_are_distinct() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases");
        let cases = load_variants(&dir.join("variants.yaml")).unwrap();
        assert!(cases.len() > 20, "{}", cases.len());
        check(&cases).unwrap();
        for case in &cases {
            assert!(!case.expected_pods().is_empty(), "{}", case.name);
        }
    }
}
