//! One benchmark run: the plane, the operator phase(s), the ceiling phase, the results files.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kfop_testenv::{ControlPlane, NodeShape, Peer, PeerOptions, PlaneOptions};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};

use crate::ceiling::{self, Children};
use crate::cli::{Args, ClientLimit, PeerOperator};
use crate::error::{Error, Result};
use crate::observe::Observed;
use crate::operator::{self, Operator};
use crate::results::{Paced, Phase, ProcessStats, RequestMetrics, RequestStats, Run, RunConfig};
use crate::sample::{Sample, Sampler};
use crate::submit::{self, PODS_PER_JOB, Pace};
use crate::timeline::Timeline;
use crate::{plot, report};

/// How long the ceiling waits for kwok to run its pods once they all exist.
const CEILING_RUNNING_GRACE: Duration = Duration::from_secs(20);

/// How long the idle reading waits after the operator is ready.
const IDLE_SETTLE: Duration = Duration::from_secs(2);

/// The ceiling phase's namespace.
pub const CEILING_NAMESPACE: &str = "bench-ceiling";
/// The replay phase's namespace.
const REPLAY_NAMESPACE: &str = "bench-replay";

/// How long a finished phase's namespace may take to go.
const CLEAR_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs the benchmark and writes results.md, results.json, latency.svg and rss.svg.
pub async fn run(args: &Args) -> Result<Run> {
    let bin = operator::locate(args.operator_bin.as_deref())?;
    std::fs::create_dir_all(&args.results).map_err(|e| Error::io(&args.results, e))?;
    let results = std::fs::canonicalize(&args.results).map_err(|e| Error::io(&args.results, e))?;

    let (plane, client) = start_plane(args).await?;

    let mut config = config(args);
    let schemes = args.enable_scheme.clone();
    // One operator phase on this plane with this binary.
    let operator_run =
        async |phase: OperatorPhase<'_>| operator_phase(args, &bin, &plane, &client, &phase).await;
    let (first, captured) = operator_run(OperatorPhase {
        name: format!("operator ({})", schemes.join(",")),
        namespace: "bench-operator",
        schemes: &schemes,
        capture: !args.no_ceiling,
        rate: args.rate,
        threads: args.concurrency,
        limit: None,
        log: results.join("operator.log"),
    })
    .await?;

    let (ceiling, replay) = match captured {
        Some(jobs) => {
            let mut levels = args.replay.clone();
            levels.sort_unstable();
            levels.dedup();
            let mut replay = Vec::new();
            for level in levels {
                let requests = ceiling::Requests::Operator {
                    run_for: args.complete_after,
                    replay: level,
                };
                let phase = CeilingPhase {
                    name: level.phase_name(),
                    namespace: REPLAY_NAMESPACE,
                    requests,
                };
                replay.push(ceiling_phase(args, &plane, &client, jobs.clone(), phase).await?);
            }
            let phase = ceiling_phase(
                args,
                &plane,
                &client,
                jobs,
                CeilingPhase {
                    name: "ceiling (plain client)",
                    namespace: CEILING_NAMESPACE,
                    requests: ceiling::Requests::Children,
                },
            )
            .await?;
            (Some(phase), replay)
        }
        None => (None, Vec::new()),
    };

    let all_schemes = if args.compare_all_schemes {
        let every: Vec<String> = kfop_operator::schemes::Scheme::ALL
            .iter()
            .map(|(name, _)| (*name).to_owned())
            .collect();
        let (phase, _) = operator_run(OperatorPhase {
            name: format!("operator (all {} kinds)", every.len()),
            namespace: "bench-all-kinds",
            schemes: &every,
            capture: false,
            rate: args.rate,
            threads: args.concurrency,
            limit: None,
            log: results.join("operator-all-kinds.log"),
        })
        .await?;
        Some(phase)
    } else {
        None
    };
    let paced = match ceiling.as_ref().and_then(|c| c.throughput_all_pods) {
        Some(ceiling_rate) if args.paced => {
            let rate = ceiling_rate / 2.0;
            let (phase, _) = operator_run(OperatorPhase {
                name: format!("operator at {rate:.1} jobs/s (half the ceiling)"),
                namespace: "bench-paced",
                schemes: &schemes,
                capture: false,
                rate,
                threads: args.concurrency,
                limit: None,
                log: results.join("operator-paced.log"),
            })
            .await?;
            Some(Paced { rate, phase })
        }
        _ => None,
    };
    // The operator at other settings: Kubeflow's defaults, then each client limit asked for.
    let mut settings = Vec::new();
    let kubeflow_defaults =
        args.equal_settings
            .then_some((1, ClientLimit::KUBEFLOW, "kubeflow-defaults".to_owned()));
    let limits = args.client_limit.iter().map(|limit| {
        let tag = format!("qps-{}-burst-{}", limit.qps, limit.burst);
        (args.concurrency, *limit, tag)
    });
    for (threads, limit, tag) in kubeflow_defaults.into_iter().chain(limits) {
        let name = if tag == "kubeflow-defaults" {
            format!(
                "operator at Kubeflow's defaults ({threads} thread, QPS {}, burst {})",
                limit.qps, limit.burst
            )
        } else {
            format!("operator at QPS {}, burst {}", limit.qps, limit.burst)
        };
        let (phase, _) = operator_run(OperatorPhase {
            name,
            namespace: "bench-settings",
            schemes: &schemes,
            capture: false,
            rate: args.rate,
            threads,
            limit: Some(limit),
            log: results.join(format!("operator-{tag}.log")),
        })
        .await?;
        settings.push(phase);
    }
    let (kubeflow, kubeflow_matched) = match args.peer {
        Some(PeerOperator::Kubeflow) => {
            let defaults = kubeflow_phase(args, &plane, &client, KubeflowSettings::Defaults).await?;
            let matched = if args.equal_settings {
                Some(kubeflow_phase(args, &plane, &client, KubeflowSettings::Kfop).await?)
            } else {
                None
            };
            (Some(defaults), matched)
        }
        None => (None, None),
    };
    config.date = date();

    let run = Run {
        config,
        operator: first,
        ceiling,
        replay,
        all_schemes,
        kubeflow,
        paced,
        settings,
        kubeflow_matched,
    };
    write_results(&run, &results)?;
    drop(plane);
    Ok(run)
}

/// The local plane with `--nodes` kwok nodes and every bundled CRD installed.
pub async fn start_plane(args: &Args) -> Result<(ControlPlane, Client)> {
    let started = Instant::now();
    let plane = ControlPlane::start(PlaneOptions {
        nodes: NodeShape {
            count: args.nodes,
            ..NodeShape::default()
        },
        service_work: !args.lean_plane,
        ..PlaneOptions::default()
    })
    .await?;
    tracing::info!(
        elapsed_s = started.elapsed().as_secs_f64(),
        kubeconfig = %plane.kubeconfig().display(),
        "control plane up"
    );
    let client = plane.client().await?;
    let all = kfop_operator::schemes::parse(&[]).map_err(|e| Error::Operator(e.to_string()))?;
    kfop_testenv::install_crds(&client, all.iter().map(|s| kfop_operator::crds::of(*s))).await?;
    Ok((plane, client))
}

pub fn config(args: &Args) -> RunConfig {
    let mut operator_args = client_flags(args);
    operator_args.extend(args.operator_args.iter().cloned());
    RunConfig {
        jobs: args.jobs,
        pods_per_job: PODS_PER_JOB,
        rate: args.rate,
        concurrency: args.concurrency,
        complete_after_seconds: args.complete_after.as_secs_f64(),
        nodes: args.nodes,
        schemes: args.enable_scheme.clone(),
        operator_args,
        cores: std::thread::available_parallelism().map_or(0, usize::from),
        date: String::new(),
        lean_plane: args.lean_plane,
    }
}

/// `--qps` and `--burst` as the operator's flags.
fn client_flags(args: &Args) -> Vec<String> {
    let mut flags = Vec::new();
    if let Some(qps) = args.qps {
        flags.push(format!("--kube-api-qps={qps}"));
    }
    if let Some(burst) = args.burst {
        flags.push(format!("--kube-api-burst={burst}"));
    }
    flags
}

/// Writes every results file into `dir`.
pub fn write_results(run: &Run, dir: &Path) -> Result<()> {
    let summary = run.summary();
    for (name, run) in [("results.json", run), ("summary.json", &summary)] {
        let path = dir.join(name);
        let json = serde_json::to_string_pretty(run)?;
        std::fs::write(&path, json).map_err(|e| Error::io(&path, e))?;
    }
    let path = dir.join("results.md");
    std::fs::write(&path, report::markdown(run)).map_err(|e| Error::io(&path, e))?;
    plot::write(run, dir)
}

pub struct OperatorPhase<'a> {
    pub name: String,
    pub namespace: &'a str,
    pub schemes: &'a [String],
    /// Capture the created pods and services for the ceiling.
    pub capture: bool,
    /// Jobs per second; 0 for all at once.
    pub rate: f64,
    /// `--controller-threads`.
    pub threads: u16,
    /// A client-side limit in place of the run's `--qps`/`--burst`.
    pub limit: Option<ClientLimit>,
    pub log: PathBuf,
}

async fn create_namespace(client: &Client, name: &str) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.to_owned());
    api.create(&PostParams::default(), &ns)
        .await
        .map_err(Error::kube(format!("creating namespace {name}")))?;
    Ok(())
}

/// Deletes a finished phase's namespace and waits until it is gone, so every phase starts on a
/// plane without the pods, services and events of the ones before: left in place, the phase
/// run third (every kind) was slower in each run than the first, while each run first on a
/// fresh plane was not.
async fn clear_namespace(client: &Client, name: &str) -> Result<()> {
    let started = Instant::now();
    let api: Api<Namespace> = Api::all(client.clone());
    api.delete(name, &DeleteParams::background())
        .await
        .map_err(Error::kube(format!("deleting namespace {name}")))?;
    while api
        .get_opt(name)
        .await
        .map_err(Error::kube(format!("reading namespace {name}")))?
        .is_some()
    {
        if started.elapsed() > CLEAR_TIMEOUT {
            return Err(Error::Phase {
                phase: format!("clearing namespace {name}"),
                message: format!("still there {CLEAR_TIMEOUT:?} after its deletion"),
            });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tracing::info!(
        namespace = name,
        elapsed_s = started.elapsed().as_secs_f64(),
        "namespace cleared"
    );
    Ok(())
}

/// Submits the jobs to a fresh operator process watching only `phase.namespace`, waits for
/// every job to succeed (or the timeout), then clears the namespace.
pub async fn operator_phase(
    args: &Args,
    bin: &Path,
    plane: &ControlPlane,
    client: &Client,
    phase: &OperatorPhase<'_>,
) -> Result<(Phase, Option<BTreeMap<String, Children>>)> {
    tracing::info!(phase = %phase.name, jobs = args.jobs, "operator phase");
    create_namespace(client, phase.namespace).await?;
    let mut flags: Vec<String> = phase
        .schemes
        .iter()
        .map(|s| format!("--enable-scheme={s}"))
        .collect();
    flags.push(format!("--namespace={}", phase.namespace));
    flags.push(format!("--controller-threads={}", phase.threads));
    match phase.limit {
        Some(limit) => flags.extend(limit.flags()),
        None => flags.extend(client_flags(args)),
    }
    flags.extend(args.operator_args.iter().cloned());
    let mut operator = Operator::spawn(bin, plane.kubeconfig(), &flags, &phase.log).await?;
    operator.wait_ready(Duration::from_secs(60)).await?;
    let measured = measure(
        args,
        phase.rate,
        client,
        phase.namespace,
        &phase.name,
        (operator.pid(), apiserver_pid(plane)),
        || operator.scrape(),
    )
    .await?;
    let captured = if phase.capture {
        tokio::time::sleep(ceiling::CAPTURE_SETTLE).await;
        Some(ceiling::capture(client, phase.namespace).await?)
    } else {
        None
    };
    operator.stop(Duration::from_secs(10)).await?;
    clear_namespace(client, phase.namespace).await?;
    Ok((
        measured.phase(&phase.name, RequestMetrics::KFOP, args.jobs),
        captured,
    ))
}

/// What one operator process did with the workload: the jobs' timeline, its RSS and CPU, and
/// its metrics before and after.
struct Measured {
    timeline: Timeline,
    samples: Vec<Sample>,
    before: String,
    after: String,
    server_cpu_seconds: Option<f64>,
}

impl Measured {
    fn phase(self, name: &str, metrics: RequestMetrics, jobs: usize) -> Phase {
        let mut result = Phase::from_timeline(name, self.timeline, true);
        result.process = ProcessStats::of(&self.samples);
        result.requests = Some(RequestStats::between(metrics, &self.before, &self.after, jobs));
        result.server_cpu_seconds = self.server_cpu_seconds;
        result.samples = self.samples;
        tracing::info!(
            phase = %name,
            throughput_all_pods = ?result.throughput_all_pods,
            throughput_succeeded = ?result.throughput_succeeded,
            incomplete = result.incomplete,
            "phase done"
        );
        result
    }
}

/// Submits the jobs into `namespace` at `rate` (0: all at once), watched by the operator process
/// `pid` whose metrics `scrape` reads, and waits for every job to succeed (or the timeout);
/// `server` is kube-apiserver's process, whose CPU time the phase reads.
async fn measure<Fut>(
    args: &Args,
    rate: f64,
    client: &Client,
    namespace: &str,
    name: &str,
    (pid, server): (u32, Option<u32>),
    scrape: impl Fn() -> Fut,
) -> Result<Measured>
where
    Fut: std::future::Future<Output = Result<String>>,
{
    let start = Instant::now();
    let sampler = Sampler::start(pid, start, args.sample_every);
    tokio::time::sleep(IDLE_SETTLE).await;
    let before = scrape().await?;
    let server_cpu = ServerCpu::start(server);

    let observed = Observed::new(start, PODS_PER_JOB);
    let resource = submit::pytorch_resource();
    let watches = observed.watch(client, namespace, Some(&resource));
    let jobs_api = kube::Api::namespaced_with(client.clone(), namespace, &resource);
    let pace = if rate > 0.0 {
        Pace::Rate(rate)
    } else {
        Pace::AllAtOnce {
            parallelism: args.submit_parallelism,
        }
    };
    submit::submit(&jobs_api, args.jobs, args.complete_after, pace, &observed).await?;
    let jobs = args.jobs;
    observed
        .wait_until(args.timeout, name, |t| t.count(|m| m.succeeded) >= jobs)
        .await;
    let server_cpu_seconds = server_cpu.seconds();
    let after = scrape().await?;
    // A last reading with every job still present.
    tokio::time::sleep(args.sample_every).await;
    let samples = sampler.stop();
    for watch in watches {
        watch.abort();
    }
    Ok(Measured {
        timeline: observed.snapshot(),
        samples,
        before,
        after,
        server_cpu_seconds,
    })
}

/// kube-apiserver's process on `plane`.
pub fn apiserver_pid(plane: &ControlPlane) -> Option<u32> {
    let pids = plane.state().pids;
    pids.into_iter()
        .find(|(name, _)| name == "kube-apiserver")
        .map(|(_, pid)| pid)
}

/// kube-apiserver's CPU time from a start; none when its process cannot be read.
struct ServerCpu(Option<(u32, f64)>);

impl ServerCpu {
    fn start(pid: Option<u32>) -> Self {
        Self(pid.and_then(|pid| Some((pid, crate::sample::read(pid, 0.0).ok()?.cpu_seconds))))
    }

    fn seconds(&self) -> Option<f64> {
        let (pid, start) = self.0?;
        Some(crate::sample::read(pid, 0.0).ok()?.cpu_seconds - start)
    }
}

/// Which settings Kubeflow's training-operator runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KubeflowSettings {
    /// Its defaults: one reconcile thread, client QPS 20 and burst 30 (controller-runtime's).
    Defaults,
    /// kfop's: `--concurrency` reconcile threads and no client-side limit, on v1.8.1 built with
    /// the client-limit flags it lacks (`testenv/peers/training-operator-client-flags`).
    Kfop,
}

/// Kubeflow training-operator v1.8.1 on the same workload, watching its own namespace, out of
/// cluster; the namespace is cleared afterwards.
async fn kubeflow_phase(
    args: &Args,
    plane: &ControlPlane,
    client: &Client,
    settings: KubeflowSettings,
) -> Result<Phase> {
    let (name, namespace, options) = match settings {
        KubeflowSettings::Defaults => (
            "Kubeflow training-operator v1.8.1".to_owned(),
            "bench-kubeflow",
            PeerOptions::default(),
        ),
        KubeflowSettings::Kfop => (
            format!(
                "Kubeflow v1.8.1 at kfop's settings ({} threads, no client limit)",
                args.concurrency
            ),
            "bench-kubeflow-matched",
            PeerOptions {
                peer: TRAINING_OPERATOR_CLIENT_FLAGS.to_owned(),
                controller_threads: u32::from(args.concurrency),
                // client-go's limiter is off for a negative QPS.
                extra_args: vec!["--kube-api-qps=-1".to_owned()],
                ..PeerOptions::default()
            },
        ),
    };
    tracing::info!(phase = name, jobs = args.jobs, "peer phase");
    let peer = Peer::start(
        plane.kubeconfig(),
        namespace,
        PeerOptions {
            enable_schemes: vec!["pytorchjob".to_owned()],
            // The plane has kfop's CRDs, which serve the same API.
            install_crds: false,
            start_timeout: Duration::from_secs(120),
            ..options
        },
    )
    .await?;
    let addr = peer.metrics_addr();
    let server = (peer.pid(), apiserver_pid(plane));
    let measured = measure(args, args.rate, client, namespace, &name, server, || {
        operator::scrape(addr)
    })
    .await?;
    drop(peer);
    clear_namespace(client, namespace).await?;
    Ok(measured.phase(&name, RequestMetrics::CLIENT_GO, args.jobs))
}

/// training-operator v1.8.1 with `--kube-api-qps` and `--kube-api-burst` added.
const TRAINING_OPERATOR_CLIENT_FLAGS: &str = "training-operator-client-flags";

/// A plain-client phase: which requests it sends per job, and where.
pub struct CeilingPhase {
    pub name: &'static str,
    pub namespace: &'static str,
    pub requests: ceiling::Requests,
}

/// Sends `phase.requests` for the captured jobs with a plain client, `--concurrency` jobs at a
/// time, waits until every job's pods exist, then clears the namespace.
pub async fn ceiling_phase(
    args: &Args,
    plane: &ControlPlane,
    client: &Client,
    jobs: BTreeMap<String, Children>,
    phase: CeilingPhase,
) -> Result<Phase> {
    let namespace = phase.namespace;
    tracing::info!(phase = phase.name, jobs = jobs.len(), "plain-client phase");
    create_namespace(client, namespace).await?;
    let observed = Observed::new(Instant::now(), PODS_PER_JOB);
    let watches = observed.watch(client, namespace, None);
    let count = jobs.len();
    let concurrency = usize::from(args.concurrency);
    let server_cpu = ServerCpu::start(apiserver_pid(plane));
    ceiling::run(client, namespace, jobs, concurrency, phase.requests, &observed).await?;
    // Every pod must exist; Running is kwok's pace, so it gets only a short grace.
    observed
        .wait_until(args.timeout, phase.name, |t| t.count(|m| m.all_pods) >= count)
        .await;
    let server_cpu_seconds = server_cpu.seconds();
    observed
        .wait_until(CEILING_RUNNING_GRACE, "all pods Running", |t| {
            t.count(|m| m.all_running) >= count
        })
        .await;
    for watch in watches {
        watch.abort();
    }
    clear_namespace(client, namespace).await?;
    let mut result = Phase::from_timeline(phase.name, observed.snapshot(), false);
    result.server_cpu_seconds = server_cpu_seconds;
    tracing::info!(phase = phase.name, throughput_all_pods = ?result.throughput_all_pods, "plain-client phase done");
    Ok(result)
}

/// Today's UTC date (YYYY-MM-DD) from the system clock.
pub fn date() -> String {
    kfop_runtime::k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%d")
        .to_string()
}
