//! The differential run: one private plane with kfop's CRDs and, per [`Lane`] the corpus uses,
//! Kubeflow's training-operator watching one namespace and kfop's operator another, configured
//! alike; every case is driven through its steps on both sides of its lane at once, a snapshot
//! of each side after each step. Cases run [`Options::concurrency`] at a time.
//!
//! Each kind is judged by one Kubeflow release ([`cases::Kind::peer`]): a lane runs one Kubeflow
//! process per release its cases need, all watching the lane's Kubeflow namespace, each for its
//! own kinds only (two controllers never share a kind), next to one kfop process for every kind.
use std::path::{Path, PathBuf};
use std::time::Instant;

use futures::StreamExt;
use kfop_testenv::{Assets, ControlPlane, NodeShape, PeerBuild, PlaneOptions, crds, install_crds};
use kube::api::{Api, DeleteParams, DynamicObject};

use crate::allowed::AllowedDifferences;
use crate::cases::{self, Case, KINDS, Step};
use crate::drive::Side;
use crate::operators;
use crate::report::{CaseRecord, Report, StepRecord};
use crate::{Error, Result, glob};

/// A pair of operators configured alike, each watching its own namespace
/// (`conformance-<lane>-kubeflow`, `conformance-<lane>-kfop`; they normalize to `<ns>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    pub name: &'static str,
    /// `--gang-scheduler-name` of each. Kubeflow takes any other name than volcano as
    /// scheduler-plugins' scheduler name, kfop `scheduler-plugins` as its default name.
    pub kubeflow_gang: Option<&'static str>,
    pub kfop_gang: Option<&'static str>,
}

pub const LANES: [Lane; 3] = [
    Lane {
        name: cases::DEFAULT_LANE,
        kubeflow_gang: None,
        kfop_gang: None,
    },
    Lane {
        name: "volcano",
        kubeflow_gang: Some("volcano"),
        kfop_gang: Some("volcano"),
    },
    Lane {
        name: "scheduler-plugins",
        kubeflow_gang: Some("scheduler-plugins-scheduler"),
        kfop_gang: Some("scheduler-plugins"),
    },
];

impl Lane {
    pub fn namespace(&self, side: &str) -> String {
        format!("conformance-{}-{side}", self.name)
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    /// Cases running at once (each drives both sides at once).
    pub concurrency: usize,
    /// Only cases whose name matches one of these globs (all when empty).
    pub only: Vec<String>,
    /// `cases/` with `examples.yaml` and `variants.yaml`.
    pub cases_dir: PathBuf,
    pub allowed_file: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        Self {
            concurrency: 4,
            only: Vec::new(),
            cases_dir: crate_dir.join("cases"),
            allowed_file: crate_dir.join("allowed-differences.yaml"),
        }
    }
}

/// The corpus: the examples of the peers' modules (`(peer, examples dir)`), then the variants.
pub fn corpus(options: &Options, modules: &[(&str, PathBuf)]) -> Result<Vec<Case>> {
    let mut all = cases::load_examples(&options.cases_dir.join("examples.yaml"), modules)?;
    all.extend(cases::load_variants(&options.cases_dir.join("variants.yaml"))?);
    cases::check(&all)?;
    if let Some(case) = all.iter().find(|c| !LANES.iter().any(|l| l.name == c.lane)) {
        return Err(Error::Case {
            case: case.name.clone(),
            message: format!("no lane {}", case.lane),
        });
    }
    Ok(all
        .into_iter()
        .filter(|c| options.only.is_empty() || options.only.iter().any(|p| glob::matches(p, &c.name)))
        .collect())
}

/// Runs the corpus and compares the sides. Fails only when the run itself cannot proceed (no
/// plane, an operator died); differences are the report's.
pub async fn run(options: &Options) -> Result<Report> {
    let allowed = AllowedDifferences::load(&options.allowed_file)?;
    // Builds are no-ops on a warm cache; cold, they take minutes (and Go for the peers).
    let (peers, bin) = tokio::task::spawn_blocking(|| -> Result<_> {
        Assets::locate_or_build()?;
        let peers = cases::peers()
            .into_iter()
            .map(|peer| Ok((peer, PeerBuild::locate_or_build(peer)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok((peers, operators::operator_bin()?))
    })
    .await
    .map_err(|e| Error::Task(format!("building: {e}")))??;
    let (peers, modules) = tokio::task::spawn_blocking(move || -> Result<_> {
        let modules = peers
            .iter()
            .map(|(peer, build)| Ok((*peer, build.module_source()?.join("examples"))))
            .collect::<Result<Vec<_>>>()?;
        Ok((peers, modules))
    })
    .await
    .map_err(|e| Error::Task(format!("go list: {e}")))??;
    let corpus = corpus(options, &modules)?;
    let schemes = |peer: Option<&str>| -> Vec<String> {
        KINDS
            .iter()
            .filter(|k| peer.is_none_or(|p| k.peer == p))
            .map(|k| k.scheme())
            .collect()
    };

    // Room for both sides of every case running at once (the GPU examples ask for 8 a pod):
    // a pod pending for capacity on one side only would be a difference of the plane's.
    let nodes = NodeShape {
        cpu: "512".to_owned(),
        memory: "4Ti".to_owned(),
        gpus: "128".to_owned(),
        ..NodeShape::default()
    };
    let plane = ControlPlane::start(PlaneOptions {
        nodes,
        ..PlaneOptions::default()
    })
    .await?;
    let client = plane.client().await?;
    let mut crd_set = operators::kfop_crds(&bin, &schemes(None))?;
    crd_set.extend(crds::pod_groups()?);
    install_crds(&client, crd_set).await?;
    // One operator pair per lane the corpus uses; they live until every case ran.
    let mut operators = Vec::new();
    let mut sides: Vec<(&'static str, (Side, Side))> = Vec::new();
    for lane in LANES.iter().filter(|l| corpus.iter().any(|c| c.lane == l.name)) {
        let (kf_ns, kfop_ns) = (lane.namespace("kubeflow"), lane.namespace("kfop"));
        for ns in [&kf_ns, &kfop_ns] {
            kfop_testenv::ensure_namespace(&client, ns).await?;
        }
        let side = |namespace| Side {
            client: client.clone(),
            namespace,
        };
        let pair = (side(kf_ns.clone()), side(kfop_ns.clone()));
        // Claims first: the volume controller binds them while the operators start.
        for case in corpus.iter().filter(|c| c.lane == lane.name) {
            pair.0.provide_claims(case).await?;
            pair.1.provide_claims(case).await?;
        }
        // Every release the lane's cases need, and kfop, start at once.
        let kubeconfig = plane.kubeconfig();
        let releases: Vec<(&str, Vec<String>)> = cases::peers()
            .into_iter()
            .filter(|p| corpus.iter().any(|c| c.lane == lane.name && c.kind.peer == *p))
            .map(|p| (p, schemes(Some(p))))
            .collect();
        let kubeflows = futures::future::try_join_all(releases.iter().map(|(peer, schemes)| {
            operators::start_kubeflow(peer, kubeconfig, &kf_ns, schemes, lane.kubeflow_gang)
        }));
        let all_schemes = schemes(None);
        // One lane serves the conversion webhook: lanes serving it at different loopback URLs
        // would each repoint the CRD at themselves, and every CRD update closes every MPIJob
        // watch (mpi-operator's informer then stalled for whole cases).
        let webhook = operators.is_empty();
        let kfop = operators::start_kfop(&bin, kubeconfig, &kfop_ns, &all_schemes, lane.kfop_gang, webhook);
        operators.push(futures::try_join!(kubeflows, kfop)?);
        sides.push((lane.name, pair));
    }

    let total = corpus.len();
    let mut records: Vec<(usize, CaseRecord)> = futures::stream::iter(corpus.iter().enumerate())
        .map(|(i, case)| {
            let sides = sides.iter().find(|(lane, _)| *lane == case.lane).map(|(_, s)| s);
            async move {
                let record = match sides {
                    Some(sides) => run_case(case, sides).await,
                    None => CaseRecord::failed(case, format!("no lane {}", case.lane)),
                };
                eprintln!(
                    "[{}/{total}] {} ({:.1}s){}",
                    i + 1,
                    case.name,
                    record.elapsed.as_secs_f64(),
                    record
                        .error
                        .as_deref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                );
                (i, record)
            }
        })
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await;
    records.sort_by_key(|(i, _)| *i);

    // A difference from an operator that died meanwhile would be no difference of behaviour.
    for (kubeflows, kfop) in &mut operators {
        for kubeflow in kubeflows {
            kubeflow.check_alive()?;
        }
        kfop.check_alive()?;
    }
    drop(operators);
    drop(plane);
    let versions = peers
        .iter()
        .map(|(peer, build)| (*peer, build.version().to_owned()))
        .collect();
    Ok(Report::new(
        records.into_iter().map(|(_, r)| r).collect(),
        allowed,
        versions,
    ))
}

/// Creates the job on both sides, then acts and settles each step on both at once.
async fn run_case(case: &Case, (kubeflow, kfop): &(Side, Side)) -> CaseRecord {
    let started = Instant::now();
    let mut record = CaseRecord::failed(case, String::new());
    record.error = None;
    let result: Result<()> = async {
        // Both jobs start at once: an example's pods end a fixed time after they run.
        futures::try_join!(kubeflow.prepare(case), kfop.prepare(case))?;
        futures::try_join!(kubeflow.create(case), kfop.create(case))?;
        for (i, step) in case.steps.iter().enumerate() {
            let (a, b) = futures::try_join!(step_on(kubeflow, case, step), step_on(kfop, case, step))?;
            record.steps.push(StepRecord {
                label: format!("{}: {step}", i + 1),
                kubeflow: a,
                kfop: b,
            });
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        record.error = Some(e.to_string());
    }
    // Finished jobs may keep running pods (cleanPodPolicy None); later cases need the room.
    if !matches!(case.steps.last(), Some(Step::Delete | Step::Gone)) {
        for side in [kubeflow, kfop] {
            let jobs: Api<DynamicObject> =
                Api::namespaced_with(side.client.clone(), &side.namespace, &case.kind.resource());
            let _ = jobs.delete(&case.name, &DeleteParams::background()).await;
        }
    }
    record.elapsed = started.elapsed();
    record
}

async fn step_on(side: &Side, case: &Case, step: &Step) -> Result<crate::drive::Settled> {
    let mut notes = side.act(case, step).await?;
    let mut settled = side.settle(case, step).await?;
    notes.append(&mut settled.notes);
    settled.notes = notes;
    Ok(settled)
}
