//! Taking over from Kubeflow under live jobs, and handing back. Jobs of every kind are started
//! under Kubeflow with its own CRDs, as a cluster runs it today ([`Scenario`]), and driven
//! through lifecycles of the corpus (`cases/variants.yaml`); `cases/takeover.yaml` says after
//! which step of each kfop takes over and after which it hands back, so that at each handover
//! the jobs are in every state a live cluster has (pods running, restarting, suspended, a
//! deadline or TTL counting, finished with cleanup to do).
//!
//! Each scenario runs twice on private planes: a control run where Kubeflow keeps running
//! ([`Mode::Control`], the oracle) and the takeover run ([`Mode::Takeover`]): stop Kubeflow,
//! replace its CRDs with kfop's, `kfop-operator adopt`, start kfop; later `kfop-operator
//! migrate-storage`, then the hand-back (`migrate-storage --to` Kubeflow's stored version, stop
//! kfop, Kubeflow's CRDs, start Kubeflow). Before the takeover both runs are Kubeflow's alone;
//! from it on each takes a snapshot after every step, and the pairs are diffed as the
//! differential cases are ([`crate::report::Report`], declared differences from
//! `allowed-differences.yaml`). Each handover also measures what the diff cannot: pods and
//! services recreated (new UID under the same name), fields of a stored job lost to the new
//! CRDs (each job read in full before and after the swap), conditions regressed, and the
//! storage versions.
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kfop_testenv::{Peer, PeerBuild, install_crds, peer};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cases::{self, Case, KINDS, Kind, Step};
use crate::diff::{diff, render};
use crate::drive::{Settled, Side};
use crate::report::{CaseRecord, StepRecord};
use crate::{Error, Result, glob, operators};

/// The namespace of every job (the same on every plane, so snapshots compare).
pub const NAMESPACE: &str = "team";

/// The MPIJob CRD, which kfop serves in two versions.
const MPIJOBS: &str = "mpijobs.kubeflow.org";

/// The mark of the API an MPIJob was created in (`examples/mpi/src/convert.rs`).
const CREATED_AS: &str = "kfop.dev/created-as";

/// Cases in flight at once on one plane.
const CONCURRENCY: usize = 16;

/// How a cluster runs Kubeflow today.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// training-operator v1.8.1 alone, every kind; MPIJob `v1` stored as `v1`.
    TrainingOperator,
    /// training-operator v1.8.1 with MPI off, and mpi-operator v0.6.0 (MPIJob `v2beta1`).
    WithMpiOperator,
}

impl Scenario {
    pub const ALL: [Self; 2] = [Self::TrainingOperator, Self::WithMpiOperator];

    pub fn name(self) -> &'static str {
        match self {
            Self::TrainingOperator => "A: training-operator v1.8.1",
            Self::WithMpiOperator => "B: training-operator v1.8.1 + mpi-operator v0.6.0",
        }
    }

    /// The kinds its jobs are of: training-operator v1.8.1's, MPIJob as the scenario serves it.
    pub fn kinds(self) -> Vec<Kind> {
        KINDS
            .iter()
            .copied()
            .filter(|k| match self {
                Self::TrainingOperator => k.peer == peer::TRAINING_OPERATOR,
                Self::WithMpiOperator => {
                    (k.peer == peer::TRAINING_OPERATOR && k.kind != "MPIJob")
                        || k.peer == peer::MPI_OPERATOR_V0_6_0
                }
            })
            .collect()
    }

    fn schemes(self) -> Vec<String> {
        let mut schemes: Vec<String> = self.kinds().iter().map(Kind::scheme).collect();
        schemes.sort();
        schemes.dedup();
        schemes
    }

    /// The version MPIJobs are stored in under Kubeflow.
    pub fn kubeflow_storage(self) -> &'static str {
        match self {
            Self::TrainingOperator => "v1",
            Self::WithMpiOperator => "v2beta1",
        }
    }

    /// Kubeflow's CRDs as its manifests install them: training-operator's (without its MPIJob
    /// in B), and mpi-operator's MPIJob in B. Blocks.
    pub fn kubeflow_crds(self) -> Result<Vec<CustomResourceDefinition>> {
        let mut crds = PeerBuild::locate_or_build(peer::TRAINING_OPERATOR)?.crds()?;
        if self == Self::WithMpiOperator {
            crds.retain(|c| c.name_any() != MPIJOBS);
            crds.extend(PeerBuild::locate_or_build(peer::MPI_OPERATOR_V0_6_0)?.crds()?);
        }
        Ok(crds)
    }

    /// Kubeflow's operators watching [`NAMESPACE`], on the CRDs installed.
    async fn start_kubeflow(self, kubeconfig: &Path) -> Result<Vec<Peer>> {
        let schemes = self.schemes();
        Ok(match self {
            Self::TrainingOperator => vec![
                operators::start_kubeflow(peer::TRAINING_OPERATOR, kubeconfig, NAMESPACE, &schemes, None)
                    .await?,
            ],
            Self::WithMpiOperator => {
                let training: Vec<String> = schemes.iter().filter(|s| *s != "mpijob").cloned().collect();
                let mpi = ["mpijob".to_owned()];
                let (a, b) = futures::try_join!(
                    operators::start_kubeflow(
                        peer::TRAINING_OPERATOR,
                        kubeconfig,
                        NAMESPACE,
                        &training,
                        None
                    ),
                    operators::start_kubeflow(peer::MPI_OPERATOR_V0_6_0, kubeconfig, NAMESPACE, &mpi, None),
                )?;
                vec![a, b]
            }
        })
    }
}

/// The two runs of a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Kubeflow throughout: the oracle.
    Control,
    /// kfop takes over, then hands back.
    Takeover,
}

/// `cases/takeover.yaml`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TakeoverFile {
    splits: Vec<Split>,
}

/// Cases (a glob over corpus names) and the steps each runs under Kubeflow before the takeover
/// and before the hand-back.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Split {
    cases: String,
    takeover: usize,
    hand_back: usize,
}

/// A case and where its steps are cut.
#[derive(Debug, Clone)]
pub struct Planned {
    pub case: Case,
    pub takeover: usize,
    pub hand_back: usize,
}

impl Planned {
    fn phase(&self, phase: usize) -> Range<usize> {
        let len = self.case.steps.len();
        match phase {
            0 => 0..self.takeover.min(len),
            1 => self.takeover.min(len)..self.hand_back.min(len),
            _ => self.hand_back.min(len)..len,
        }
    }
}

/// The corpus cases of `scenario` that `takeover.yaml` splits, in the lanes without gang
/// scheduling.
pub fn plan(cases_dir: &Path, scenario: Scenario) -> Result<Vec<Planned>> {
    let file = cases_dir.join("takeover.yaml");
    let text = std::fs::read_to_string(&file).map_err(Error::io(&file))?;
    let splits: TakeoverFile = serde_saphyr::from_str(&text).map_err(|e| Error::parse(&file, e))?;
    let kinds = scenario.kinds();
    let corpus = cases::load_variants(&cases_dir.join("variants.yaml"))?;
    Ok(corpus
        .into_iter()
        .filter(|c| kinds.contains(&c.kind) && (c.lane == cases::DEFAULT_LANE || c.kind.lane.is_some()))
        .filter_map(|case| {
            let split = splits
                .splits
                .iter()
                .find(|s| glob::matches(&s.cases, &case.name))?;
            Some(Planned {
                takeover: split.takeover,
                hand_back: split.hand_back,
                case,
            })
        })
        .collect())
}

/// What one handover did to the jobs, measured.
#[derive(Debug, Clone, Default)]
pub struct Handover {
    /// Jobs, pods and services there when the old operator stopped.
    pub jobs: usize,
    pub pods: usize,
    pub services: usize,
    /// `pod <name>`/`service <name>` there with another UID once the new operator settled.
    pub recreated: Vec<String>,
    /// `<Kind> <name>: <path>` a job held before the CRD swap and not after, or with another
    /// value (anything but a zero value the new schema defaults or the old one did not).
    pub fields_lost: Vec<String>,
    /// Zero values a job gained or lost by the swap (defaults of kfop's schemas), for
    /// information.
    pub fields_added: Vec<String>,
    /// `<Kind> <name>: <condition>` gone, or no longer True, or with another transition time
    /// for the same status, once the new operator settled.
    pub conditions_regressed: Vec<String>,
    /// What `migrate-storage` printed before this handover (hand-back) or after it (takeover).
    pub storage: Vec<String>,
    /// Facts checked on the way, e.g. `MPIJob/v1 x read in v1 and v2beta1, created-as v1`.
    pub checks: Vec<String>,
    /// What `kfop-operator adopt` printed (takeover).
    pub adopted: Option<String>,
    /// From stopping the old operator to the new one ready.
    pub elapsed: Duration,
    /// When the new operator was ready.
    pub ready_at: Option<Timestamp>,
}

/// One run of a scenario: every case's snapshots by step label, and the handovers.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub steps: BTreeMap<String, Vec<(String, Settled)>>,
    pub errors: BTreeMap<String, String>,
    pub takeover: Option<Handover>,
    pub hand_back: Option<Handover>,
    /// Jobs with a deadline that failed: `<name>` -> (startTime, the Failed condition's time).
    pub deadlines: BTreeMap<String, (Timestamp, Timestamp)>,
    pub elapsed: Duration,
}

/// Both runs of a scenario as the differential report pairs them, from the takeover on: the
/// control run is the `kubeflow` side, the takeover run the `kfop` side.
pub fn records(planned: &[Planned], control: &RunRecord, takeover: &RunRecord) -> Vec<CaseRecord> {
    planned
        .iter()
        .map(|p| {
            let mut record = CaseRecord::failed(&p.case, String::new());
            let error = [control, takeover]
                .iter()
                .filter_map(|r| r.errors.get(&p.case.name))
                .cloned()
                .collect::<Vec<_>>();
            record.error = (!error.is_empty()).then(|| error.join("; "));
            let empty = Vec::new();
            let a = control.steps.get(&p.case.name).unwrap_or(&empty);
            let b = takeover.steps.get(&p.case.name).unwrap_or(&empty);
            // Before the takeover both runs are Kubeflow's alone: context, not the oracle.
            let skip = p.phase(0).len();
            for ((label, x), (other, y)) in a.iter().zip(b).skip(skip) {
                if label != other {
                    record.error = Some(format!("steps out of line: {label} vs {other}"));
                    break;
                }
                record.steps.push(StepRecord {
                    label: label.clone(),
                    kubeflow: x.clone(),
                    kfop: y.clone(),
                });
            }
            record
        })
        .collect()
}

/// Runs `scenario` in `mode` on a plane of its own; `bin` is kfop-operator.
pub async fn run(scenario: Scenario, mode: Mode, planned: &[Planned], bin: &Path) -> Result<RunRecord> {
    let started = Instant::now();
    let kubeflow_crds = tokio::task::spawn_blocking(move || scenario.kubeflow_crds())
        .await
        .map_err(|e| Error::Task(format!("reading Kubeflow's CRDs: {e}")))??;
    let plane = crate::runner::roomy_plane().await?;
    let client = plane.client().await?;
    install_crds(&client, kubeflow_crds.clone()).await?;
    kfop_testenv::ensure_namespace(&client, NAMESPACE).await?;
    let side = Side {
        client: client.clone(),
        namespace: NAMESPACE.to_owned(),
    };
    let mut kubeflow = scenario.start_kubeflow(plane.kubeconfig()).await?;
    let mut run = RunRecord {
        steps: BTreeMap::new(),
        errors: BTreeMap::new(),
        takeover: None,
        hand_back: None,
        deadlines: BTreeMap::new(),
        elapsed: Duration::ZERO,
    };

    let progress = |what: &str| {
        eprintln!(
            "[{} {mode:?} {:.0}s] {what}",
            scenario.name(),
            started.elapsed().as_secs_f64()
        )
    };
    progress("jobs starting under Kubeflow");
    phase(&side, planned, 0, &mut run).await;
    progress("handing over");
    if mode == Mode::Takeover {
        let mut handover = Handover::default();
        let stopping = Instant::now();
        for mut peer in kubeflow.drain(..) {
            peer.check_alive()?;
            drop(peer);
        }
        // Read once nothing reconciles: a TTL deleting a job in between would be no loss.
        let at = Observed::read(&side, planned).await?;
        let kfop_crds = operators::kfop_crds(bin, &scenario.schemes())?;
        install_crds(&client, kfop_crds).await?;
        let swapped = Observed::read(&side, planned).await?;
        at.compare_fields(&swapped, &mut handover);
        handover.adopted = Some(kfop_command(
            bin,
            plane.kubeconfig(),
            &["adopt", &format!("--namespace={NAMESPACE}")],
        )?);
        let mut kfop = operators::start_kfop(
            bin,
            plane.kubeconfig(),
            NAMESPACE,
            &scenario.schemes(),
            None,
            true,
        )
        .await?;
        handover.elapsed = stopping.elapsed();
        handover.ready_at = Some(Timestamp::now());
        check_v1_mpijobs(&side, planned, &mut handover, false).await?;
        settle_all(&side, planned, "takeover: settle", &mut run).await;
        Observed::read(&side, planned)
            .await?
            .compare_objects(&at, &mut handover);
        run.takeover = Some(handover);
        progress("kfop runs the jobs");
        phase(&side, planned, 1, &mut run).await;
        progress("migrating storage and handing back");

        // The storage-version migration, then the hand-back.
        let mut handover = Handover::default();
        let migrated = migrate_storage(bin, plane.kubeconfig(), "v2beta1")?;
        let stored = stored_versions(&client).await?;
        if let Some(t) = run.takeover.as_mut() {
            t.storage = vec![
                migrated,
                format!("status.storedVersions after: [{}]", stored.join(", ")),
            ];
        }
        check_v1_mpijobs(
            &side,
            planned,
            run.takeover.as_mut().unwrap_or(&mut handover),
            true,
        )
        .await?;
        let back = migrate_storage(bin, plane.kubeconfig(), scenario.kubeflow_storage())?;
        let stored = stored_versions(&client).await?;
        handover.storage = vec![
            back,
            format!("status.storedVersions after: [{}]", stored.join(", ")),
        ];
        let stopping = Instant::now();
        kfop.check_alive()?;
        drop(kfop);
        let at = Observed::read(&side, planned).await?;
        // kfop's MPIJob CRD converts through kfop's webhook; Kubeflow's converts nothing, which
        // forbids a webhook configuration (and the URL kfop set is no field the apply owns).
        let none = json!({ "spec": { "conversion": { "strategy": "None", "webhook": null } } });
        Api::<CustomResourceDefinition>::all(client.clone())
            .patch(MPIJOBS, &PatchParams::default(), &Patch::Merge(&none))
            .await
            .map_err(Error::kube("turning MPIJob's conversion off"))?;
        install_crds(&client, kubeflow_crds).await?;
        let swapped = Observed::read(&side, planned).await?;
        at.compare_fields(&swapped, &mut handover);
        kubeflow = scenario.start_kubeflow(plane.kubeconfig()).await?;
        handover.elapsed = stopping.elapsed();
        handover.ready_at = Some(Timestamp::now());
        settle_all(&side, planned, "hand-back: settle", &mut run).await;
        Observed::read(&side, planned)
            .await?
            .compare_objects(&at, &mut handover);
        run.hand_back = Some(handover);
    } else {
        settle_all(&side, planned, "takeover: settle", &mut run).await;
        phase(&side, planned, 1, &mut run).await;
        settle_all(&side, planned, "hand-back: settle", &mut run).await;
    }
    progress("Kubeflow runs the jobs again");
    phase(&side, planned, 2, &mut run).await;
    progress("done");
    for peer in &mut kubeflow {
        peer.check_alive()?;
    }
    drop(kubeflow);
    drop(plane);
    run.elapsed = started.elapsed();
    Ok(run)
}

/// A case's snapshots by step label after a phase, or what stopped it.
type CaseDone = (String, Result<Vec<(String, Settled)>>);

/// Runs phase `phase` (0 also creates the jobs) of every case, [`CONCURRENCY`] at a time.
async fn phase(side: &Side, planned: &[Planned], phase: usize, run: &mut RunRecord) {
    let done: Vec<CaseDone> = futures::stream::iter(planned)
        .map(|p| async move {
            let result = async {
                if phase == 0 {
                    side.prepare(&p.case).await?;
                    side.create(&p.case).await?;
                }
                let mut steps = Vec::new();
                for i in p.phase(phase) {
                    let step = &p.case.steps[i];
                    steps.push((format!("{}: {step}", i + 1), step_on(side, &p.case, step).await?));
                }
                Ok(steps)
            }
            .await;
            (p.case.name.clone(), result)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    record(run, done);
    for p in planned
        .iter()
        .filter(|p| p.case.job["spec"]["runPolicy"]["activeDeadlineSeconds"].is_number())
    {
        if let Ok(Some(job)) = jobs(side, &p.case.kind).get_opt(&p.case.name).await
            && let Some(times) = deadline_fired(&job.data["status"])
        {
            run.deadlines.insert(p.case.name.clone(), times);
        }
    }
}

/// Settles every job where it is (a handover's first look), snapshots labelled `label`.
async fn settle_all(side: &Side, planned: &[Planned], label: &str, run: &mut RunRecord) {
    let done: Vec<CaseDone> = futures::stream::iter(planned)
        .map(|p| async move {
            let settled = side.settle(&p.case, &Step::Settle).await;
            (p.case.name.clone(), settled.map(|s| vec![(label.to_owned(), s)]))
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    record(run, done);
}

fn record(run: &mut RunRecord, done: Vec<CaseDone>) {
    for (name, result) in done {
        match result {
            Ok(steps) => run.steps.entry(name).or_default().extend(steps),
            Err(e) => {
                run.errors.entry(name).or_insert_with(|| e.to_string());
            }
        }
    }
}

async fn step_on(side: &Side, case: &Case, step: &Step) -> Result<Settled> {
    let mut notes = side.act(case, step).await?;
    let mut settled = side.settle(case, step).await?;
    notes.append(&mut settled.notes);
    settled.notes = notes;
    Ok(settled)
}

fn jobs(side: &Side, kind: &Kind) -> Api<DynamicObject> {
    Api::namespaced_with(side.client.clone(), &side.namespace, &kind.resource())
}

/// A failed job's startTime and the time of its Failed condition.
fn deadline_fired(status: &Value) -> Option<(Timestamp, Timestamp)> {
    let failed = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Failed" && c["status"] == "True")?;
    let time = |v: &Value| v.as_str().and_then(|s| s.parse::<Timestamp>().ok());
    Some((time(&status["startTime"])?, time(&failed["lastTransitionTime"])?))
}

/// Every job read in full, and the UIDs of the namespace's pods and services.
struct Observed {
    jobs: BTreeMap<String, (Kind, Value)>,
    uids: BTreeMap<String, String>,
}

impl Observed {
    async fn read(side: &Side, planned: &[Planned]) -> Result<Self> {
        let mut found = BTreeMap::new();
        for p in planned {
            let job = jobs(side, &p.case.kind)
                .get_opt(&p.case.name)
                .await
                .map_err(Error::kube(format!(
                    "reading {} {}",
                    p.case.kind.key, p.case.name
                )))?;
            if let Some(job) = job {
                let value = serde_json::to_value(job).map_err(|e| Error::Build(e.to_string()))?;
                found.insert(p.case.name.clone(), (p.case.kind, value));
            }
        }
        let mut uids = BTreeMap::new();
        let pods: Api<Pod> = Api::namespaced(side.client.clone(), &side.namespace);
        for pod in pods
            .list(&ListParams::default())
            .await
            .map_err(Error::kube("listing pods"))?
        {
            uids.insert(format!("pod {}", pod.name_any()), pod.uid().unwrap_or_default());
        }
        let services: Api<Service> = Api::namespaced(side.client.clone(), &side.namespace);
        for service in services
            .list(&ListParams::default())
            .await
            .map_err(Error::kube("listing services"))?
        {
            uids.insert(
                format!("service {}", service.name_any()),
                service.uid().unwrap_or_default(),
            );
        }
        Ok(Self { jobs: found, uids })
    }

    /// Fields of the jobs as stored before the CRD swap (`self`) against after (`swapped`).
    fn compare_fields(&self, swapped: &Self, handover: &mut Handover) {
        handover.jobs = self.jobs.len();
        handover.pods = self.uids.keys().filter(|k| k.starts_with("pod ")).count();
        handover.services = self.uids.len() - handover.pods;
        for (name, (kind, before)) in &self.jobs {
            let Some((_, after)) = swapped.jobs.get(name) else {
                handover
                    .fields_lost
                    .push(format!("{} {name}: the whole job", kind.key));
                continue;
            };
            for d in diff(before, after) {
                let line = format!(
                    "{} {name}: {} ({} -> {})",
                    kind.key,
                    d.path,
                    render(d.kubeflow.as_ref()),
                    render(d.kfop.as_ref())
                );
                // A zero value appearing or going is a schema's default (kfop's CRDs default
                // replica counters and runPolicy, Kubeflow's do not): the same to both operators'
                // types, where zero and absent read alike.
                let zero = |v: Option<&Value>| {
                    v.is_none_or(|v| matches!(v, Value::Bool(false)) || *v == json!(0) || *v == json!({}))
                };
                if zero(d.kubeflow.as_ref()) && zero(d.kfop.as_ref()) {
                    handover.fields_added.push(line);
                } else {
                    handover.fields_lost.push(line);
                }
            }
        }
    }

    /// What the new operator did to the objects and conditions there at the handover (`at`).
    fn compare_objects(&self, at: &Self, handover: &mut Handover) {
        for (object, uid) in &at.uids {
            if self.uids.get(object).is_some_and(|now| now != uid) {
                handover.recreated.push(object.clone());
            }
        }
        for (name, (kind, before)) in &at.jobs {
            let Some((_, after)) = self.jobs.get(name) else {
                continue; // a TTL deleted it: the diff against the control run judges that
            };
            let conditions = |job: &Value| -> BTreeMap<String, Value> {
                job["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| (c["type"].as_str().unwrap_or_default().to_owned(), c.clone()))
                    .collect()
            };
            let now = conditions(after);
            for (kind_of, was) in conditions(before) {
                let why = match now.get(&kind_of) {
                    None => Some("gone".to_owned()),
                    Some(c)
                        if ["Succeeded", "Failed"].contains(&kind_of.as_str())
                            && was["status"] == "True"
                            && c["status"] != "True" =>
                    {
                        Some(format!("{} -> {}", was["status"], c["status"]))
                    }
                    Some(c)
                        if c["status"] == was["status"]
                            && c["lastTransitionTime"] != was["lastTransitionTime"] =>
                    {
                        Some(format!(
                            "lastTransitionTime {} -> {}",
                            was["lastTransitionTime"], c["lastTransitionTime"]
                        ))
                    }
                    Some(_) => None,
                };
                if let Some(why) = why {
                    handover
                        .conditions_regressed
                        .push(format!("{} {name}: {kind_of} {why}", kind.key));
                }
            }
        }
    }
}

/// The MPIJobs created as `v1` that Kubeflow stored: each read in both versions, marked
/// created-as `v1` in `v2beta1`; once `persisted`, marked when read as `v1` too (stored so).
async fn check_v1_mpijobs(
    side: &Side,
    planned: &[Planned],
    handover: &mut Handover,
    persisted: bool,
) -> Result<()> {
    let v1 = planned.iter().filter(|p| p.case.kind.key == "MPIJob/v1");
    let v2beta1 = KINDS
        .iter()
        .copied()
        .find(|k| k.key == "MPIJob")
        .ok_or_else(|| Error::Operator("no MPIJob kind".to_owned()))?;
    let (mut read, mut marked, mut stored) = (0, 0, 0);
    for p in v1 {
        let Some(as_v1) = jobs(side, &p.case.kind)
            .get_opt(&p.case.name)
            .await
            .map_err(Error::kube(format!("reading MPIJob {} as v1", p.case.name)))?
        else {
            continue;
        };
        let as_v2 = jobs(side, &v2beta1)
            .get(&p.case.name)
            .await
            .map_err(Error::kube(format!("reading MPIJob {} as v2beta1", p.case.name)))?;
        read += 1;
        marked += usize::from(as_v2.annotations().get(CREATED_AS).map(String::as_str) == Some("v1"));
        stored += usize::from(as_v1.annotations().get(CREATED_AS).map(String::as_str) == Some("v1"));
    }
    if read > 0 {
        handover.checks.push(if persisted {
            format!("MPIJob created as v1: {stored} of {read} carry created-as v1 as stored (read in v1)")
        } else {
            format!("MPIJob created as v1: {read} read in v1 and v2beta1, {marked} of {read} created-as v1 in v2beta1")
        });
    }
    Ok(())
}

/// `kfop-operator migrate-storage --to <to>`, as a user runs it; what it printed.
fn migrate_storage(bin: &Path, kubeconfig: &Path, to: &str) -> Result<String> {
    kfop_command(bin, kubeconfig, &["migrate-storage", &format!("--to={to}")])
}

/// `kfop-operator <args>` against the plane, as a user runs it; what it printed.
fn kfop_command(bin: &Path, kubeconfig: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new(bin)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .output()
        .map_err(Error::io(bin))?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if output.status.success() {
        Ok(text)
    } else {
        Err(Error::Operator(format!(
            "`{}` failed ({}): {text}{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )))
    }
}

async fn stored_versions(client: &kube::Client) -> Result<Vec<String>> {
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(MPIJOBS)
        .await
        .map_err(Error::kube("reading the MPIJob CRD"))?;
    Ok(crd.status.and_then(|s| s.stored_versions).unwrap_or_default())
}

/// The default `cases/` directory.
pub fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cases")
}
