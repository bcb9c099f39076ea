//! The differential run: one private plane with kfop's CRDs and, per [`Lane`] the corpus uses,
//! Kubeflow's training-operator watching one namespace and kfop's operator another, configured
//! alike; every case is driven through its steps on both sides of its lane at once, a snapshot
//! of each side after each step. Cases run [`Options::concurrency`] at a time.
//!
//! Each kind is judged by one Kubeflow release ([`cases::Kind::peer`]): a lane runs one Kubeflow
//! process per release its cases need, all watching the lane's Kubeflow namespace, each for its
//! own kinds only (two controllers never share a kind), next to one kfop process for every kind.
use std::collections::{BTreeMap, BTreeSet};
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

pub const LANES: [Lane; 4] = [
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
    // training-operator v1.8.1's MPI controller beside no mpi-operator (`Kind::lane`).
    Lane {
        name: cases::MPI_V1_LANE,
        kubeflow_gang: None,
        kfop_gang: None,
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
    let all_schemes: Vec<String> = KINDS
        .iter()
        .map(|k| k.scheme())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();

    let plane = roomy_plane().await?;
    let client = plane.client().await?;
    let mut crd_set = operators::kfop_crds(&bin, &all_schemes)?;
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
        let releases = lane_schemes(lane, &corpus)?;
        let kubeflows = futures::future::try_join_all(releases.iter().map(|(peer, schemes)| {
            operators::start_kubeflow(peer, kubeconfig, &kf_ns, schemes, lane.kubeflow_gang)
        }));
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

/// The Kubeflow releases `lane`'s cases need, each with the schemes it enables there: its kinds
/// that may run in the lane (a kind with a lane of its own only there). Fails when two releases
/// would enable one scheme: both would run the lane namespace's jobs of that CRD.
fn lane_schemes(lane: &Lane, corpus: &[Case]) -> Result<Vec<(&'static str, Vec<String>)>> {
    let mut releases: Vec<(&'static str, Vec<String>)> = Vec::new();
    let mut owner: BTreeMap<String, &'static str> = BTreeMap::new();
    for peer in cases::peers() {
        if !corpus.iter().any(|c| c.lane == lane.name && c.kind.peer == peer) {
            continue;
        }
        let schemes: Vec<String> = KINDS
            .iter()
            .filter(|k| k.peer == peer && k.lane.is_none_or(|l| l == lane.name))
            .map(|k| k.scheme())
            .collect();
        for scheme in &schemes {
            if let Some(other) = owner.insert(scheme.clone(), peer) {
                return Err(Error::Operator(format!(
                    "lane {}: {other} and {peer} would both run {scheme}",
                    lane.name
                )));
            }
        }
        releases.push((peer, schemes));
    }
    Ok(releases)
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

/// A plane with room for both sides of every case running at once (the GPU examples ask for 8
/// a pod): a pod pending for capacity on one side only would be a difference of the plane's.
pub(crate) async fn roomy_plane() -> Result<ControlPlane> {
    let nodes = NodeShape {
        cpu: "512".to_owned(),
        memory: "4Ti".to_owned(),
        gpus: "128".to_owned(),
        ..NodeShape::default()
    };
    Ok(ControlPlane::start(PlaneOptions {
        nodes,
        ..PlaneOptions::default()
    })
    .await?)
}

#[cfg(test)]
mod tests {
    use kfop_testenv::peer;

    use super::*;

    #[test]
    fn only_the_mpi_v1_lane_gives_training_operator_mpijobs() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases");
        let corpus: Vec<Case> = cases::load_variants(&dir.join("variants.yaml"))
            .unwrap()
            .into_iter()
            .filter(|c| {
                ["pt-restart-never-1", "mpi-launcher-0", "mpiv1-launcher-0"].contains(&c.name.as_str())
            })
            .collect();
        assert_eq!(corpus.len(), 3);
        let lane = |name: &str| LANES.iter().find(|l| l.name == name).unwrap();
        let default = lane_schemes(lane(cases::DEFAULT_LANE), &corpus).unwrap();
        let of = |releases: &[(&str, Vec<String>)], p: &str| {
            releases
                .iter()
                .find(|(r, _)| *r == p)
                .map(|(_, s)| s.clone())
                .unwrap_or_default()
        };
        assert!(!of(&default, peer::TRAINING_OPERATOR).contains(&"mpijob".to_owned()));
        assert_eq!(of(&default, peer::MPI_OPERATOR_V0_6_0), ["mpijob"]);
        let v1 = lane_schemes(lane(cases::MPI_V1_LANE), &corpus).unwrap();
        assert_eq!(v1.len(), 1, "{v1:?}");
        assert!(of(&v1, peer::TRAINING_OPERATOR).contains(&"mpijob".to_owned()));
    }
}
