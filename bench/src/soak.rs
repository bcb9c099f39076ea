//! `kfop-bench --soak DURATION`: the default all-in-one operator (every bundled kind, and one
//! registered at run time from a Framework) under a steady mixed workload for minutes. Each job
//! runs one scenario to its expected end — succeed, fail, restart under ExitCode, suspend and
//! resume, deleted mid-run — driven only as a kubelet would (kwok
//! annotations on pods) and then deleted. At the end every job must have reached its end on its
//! own, no resync may have found work (a lost event), and the operator's RSS late in the run must
//! be within 10% of its level after the first minute.
//!
//! The operator's resync period is its default (5 min) unless `--soak-resync` says otherwise: a
//! resync replans every job, so one due before a stranded job's deadline would heal the strand
//! unseen; the results say whether any could have (`resync_could_heal`).
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kfop_operator::samples;
use kfop_operator::schemes::Scheme;
use kfop_runtime::api::{JobConditionType, JobStatus};
use kfop_runtime::dynamic::Framework;
use kfop_testenv::pods;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, CustomResourceExt, ResourceExt};
use serde::Serialize;
use serde_json::json;

use crate::burst;
use crate::chaos::{self, Fault, Operators};
use crate::cli::Args;
use crate::error::{Error, Result};
use crate::frameworks;
use crate::identity;
use crate::operator;
use crate::player::Player;
use crate::retry;
use crate::sample::{Sample, Sampler};

const NAMESPACE: &str = "soak";
/// How long one job may take to reach its expected end.
const JOB_DEADLINE: Duration = Duration::from_secs(120);
/// Under chaos, with restarts and an outage in the way.
const CHAOS_JOB_DEADLINE: Duration = Duration::from_secs(300);
const JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";
const OPERATOR_NAME_LABEL: &str = "training.kubeflow.org/operator-name";
/// How long a pod "trains" before kwok ends it, in the succeed scenario.
const TRAIN: Duration = Duration::from_secs(5);
/// How long a finished job is kept, and must stay finished, before the driver deletes it.
const KEEP_FINISHED: Duration = Duration::from_secs(3);
/// How often drivers look at their job and its pods.
const POLL: Duration = Duration::from_millis(500);
/// RSS is compared between this window after the first minute and the last window of the run.
const RSS_WINDOW: Duration = Duration::from_secs(30);
/// The allowed RSS growth between the two windows.
const RSS_TOLERANCE: f64 = 1.10;

/// What happens to one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Scenario {
    Succeed,
    Fail,
    Restart,
    SuspendResume,
    DeleteMidRun,
}

const SCENARIOS: [Scenario; 5] = [
    Scenario::Succeed,
    Scenario::Fail,
    Scenario::Restart,
    Scenario::SuspendResume,
    Scenario::DeleteMidRun,
];

/// Jobs by how they ended.
#[derive(Debug, Default, Serialize)]
pub struct Tally {
    pub converged: usize,
    pub stranded: usize,
}

/// The soak's results.
#[derive(Debug, Default, Serialize)]
pub struct SoakResults {
    pub chaos: bool,
    pub duration_seconds: f64,
    pub rate: f64,
    pub resync_period_seconds: f64,
    /// Whether a resync could have run before some job's deadline, and so healed a strand the
    /// stranded count would then miss (the period is shorter than the run plus a job's
    /// deadline).
    pub resync_could_heal: bool,
    pub jobs: usize,
    pub converged: usize,
    /// Jobs that did not reach their expected end, with what was seen.
    pub stranded: Vec<String>,
    pub by_kind_and_scenario: BTreeMap<String, usize>,
    /// Jobs by the fault running when they were created (`Calm` without chaos).
    pub by_fault: BTreeMap<String, Tally>,
    /// Pod names created more than once for one replica of a job that never replaces pods.
    pub duplicate_pods: Vec<String>,
    /// Pods with more SuccessfulCreatePod events than they had UIDs: a create reported twice.
    pub duplicate_create_events: Vec<String>,
    /// Pods, services and owned objects left after every job was deleted.
    pub orphans: Vec<String>,
    pub injected: Option<chaos::Injected>,
    /// The PyTorchJobs of `--burst-jobs`, submitted at once at the start (not in `jobs` and the tables
    /// above, which are the mixed work's).
    pub burst: Option<burst::BurstResults>,
    pub resyncs: f64,
    pub resync_found_work: f64,
    /// 403 responses to the operator, which runs as its ServiceAccount (least privilege), to
    /// requests its ClusterRole does not grant (a SubjectAccessReview after the run denies them
    /// too, see [`chaos::classify`]).
    pub forbidden_responses: f64,
    /// 403 responses to requests the ClusterRole grants: the API server denied them while its
    /// RBAC cache was empty after a restart.
    pub forbidden_transient: f64,
    /// Each kind of request denied, with its count and cause.
    pub forbidden: Vec<String>,
    pub rss_after_first_minute_mb: f64,
    pub live_jobs_after_first_minute: f64,
    pub rss_at_end_mb: f64,
    pub live_jobs_at_end: f64,
    pub peak_rss_mb: f64,
    /// (seconds, RSS MB, live jobs) every 10 s, for the memory curve.
    pub rss_curve: Vec<(f64, f64, usize)>,
    /// What the kubelet player (kwok, pod-reaper) logged: plays it failed and pods its sync
    /// touched.
    pub player: Player,
    pub failures: Vec<String>,
}

/// Runs the soak for `duration` (with `--chaos`, under faults); fails when any check fails
/// (after writing the results).
pub async fn run(args: &Args, duration: Duration) -> Result<SoakResults> {
    std::fs::create_dir_all(&args.results).map_err(|e| Error::io(&args.results, e))?;
    let (mut plane, client) = crate::run::start_plane(args).await?;
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NAMESPACE.to_owned());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(Error::kube("creating the soak namespace"))?;

    // The default operator: every kind, default flags, but for the resync period under test.
    let mut flags = vec![format!("--resync-period={}s", args.soak_resync.as_secs_f64())];
    flags.extend(args.operator_args.iter().cloned());
    let mut operators = Operators {
        bin: operator::locate(args.operator_bin.as_deref())?,
        kubeconfig: identity::service_account(
            &plane,
            &client,
            &[RUNTIME_GROUP],
            args.soak_without_permission.as_deref(),
        )
        .await?,
        flags,
        log: args.results.join("operator-soak.log"),
        current: None,
    };
    kfop_testenv::install_crds(&client, [Framework::crd()]).await?;
    operators.start().await?;
    // The run-time kind beside the bundled ones: a Framework applied to the running operator.
    frameworks::apply_ready(&client, 0..1, args.timeout).await?;
    let start = Instant::now();
    // Under chaos the process changes; its memory is not what is measured then.
    let sampler = match (&operators.current, args.chaos) {
        (Some(current), false) => Some(Sampler::start(current.pid(), start, Duration::from_secs(1))),
        _ => None,
    };
    let live = Arc::new(AtomicUsize::new(0));
    let live_samples = live_sampler(live.clone(), start);
    let pods = PodHistory::watch(&client);
    let deadline = if args.chaos {
        CHAOS_JOB_DEADLINE
    } else {
        JOB_DEADLINE
    };

    let faults = args.chaos.then_some(duration);
    let workload = submit(&client, args.rate, start, duration, faults, deadline, live);
    let burst = async {
        if args.burst_jobs == 0 {
            return Ok(None);
        }
        let within = duration + deadline;
        let parallelism = args.submit_parallelism;
        burst::run(&client, NAMESPACE, args.burst_jobs, parallelism, TRAIN, within)
            .await
            .map(Some)
    };
    let (drivers, injected, burst) = if args.chaos {
        let (drivers, injected, burst) = tokio::join!(
            workload,
            chaos::inject(&mut plane, &mut operators, start, duration, NAMESPACE),
            burst
        );
        (drivers, Some(injected?), burst?)
    } else {
        let (drivers, burst) = tokio::join!(workload, burst);
        (drivers, None, burst?)
    };
    let submitting = start.elapsed();
    let mut results = SoakResults {
        duration_seconds: submitting.as_secs_f64(),
        rate: args.rate,
        resync_period_seconds: args.soak_resync.as_secs_f64(),
        resync_could_heal: args.soak_resync < duration + deadline,
        chaos: args.chaos,
        ..SoakResults::default()
    };
    let mut scenarios = BTreeMap::new();
    for driver in drivers {
        match driver.await {
            Ok(job) => {
                *results
                    .by_kind_and_scenario
                    .entry(format!("{} {:?}", job.kind, job.scenario))
                    .or_default() += 1;
                let tally = results.by_fault.entry(format!("{:?}", job.fault)).or_default();
                match job.outcome {
                    Ok(()) => {
                        results.converged += 1;
                        tally.converged += 1;
                    }
                    Err(seen) => {
                        tally.stranded += 1;
                        results.stranded.push(format!(
                            "{} {} ({:?}, during {:?}): {seen}; pod history: {}",
                            job.kind,
                            job.name,
                            job.scenario,
                            job.fault,
                            pods.lives_of(&job.name)
                        ));
                    }
                }
                scenarios.insert(job.name, job.scenario);
            }
            Err(e) => results.stranded.push(format!("driver panicked: {e}")),
        }
    }
    results.jobs = scenarios.len()
        + results
            .stranded
            .iter()
            .filter(|s| s.starts_with("driver"))
            .count();
    // The burst's pods are never replaced either.
    if let Some(burst) = &burst {
        scenarios.extend(
            burst::names(burst.jobs)
                .into_iter()
                .map(|n| (n, Scenario::Succeed)),
        );
    }
    results.burst = burst;
    results.duplicate_create_events = duplicate_create_events(&client, &pods.uids_per_pod()).await;
    results.duplicate_pods = pods.duplicates(&scenarios);
    results.orphans = orphans(&client).await;
    let mut counted = injected.unwrap_or_default();
    operators.finish(&mut counted).await?;
    results.resyncs = counted.resyncs;
    results.resync_found_work = counted.resync_found_work;
    if let Err(e) = chaos::classify(&client, &mut counted.forbidden).await {
        results.failures.push(format!("the causes of 403s: {e}"));
    }
    for denial in &counted.forbidden {
        match denial.permission_missing {
            Some(false) => results.forbidden_transient += denial.responses,
            _ => results.forbidden_responses += denial.responses,
        }
        results.forbidden.push(denial.to_string());
    }
    results.injected = args.chaos.then_some(counted);
    let lives = live_samples.stop();
    if let Some(sampler) = sampler {
        summarize_rss(&mut results, &sampler.stop(), &lives, submitting);
    }
    results.player = Player::read(plane.dir());
    check(&mut results, duration);
    write(&results, &args.results)?;
    drop(plane);
    if results.failures.is_empty() {
        Ok(results)
    } else {
        Err(Error::Phase {
            phase: mode(args.chaos).into(),
            message: results.failures.join("; "),
        })
    }
}

/// The API group of the soak's run-time kind.
const RUNTIME_GROUP: &str = "bench.kfop.dev";

/// A kind the soak runs: each bundled one, and one registered at run time from a Framework
/// (`frameworks::manifest(0)`, JAX-like).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Bundled(Scheme),
    RunTime,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Bundled(scheme) => write!(f, "{scheme:?}"),
            Self::RunTime => write!(f, "{} (run time)", frameworks::kind(0).kind),
        }
    }
}

/// One job's end.
struct JobEnd {
    kind: Kind,
    scenario: Scenario,
    fault: Fault,
    name: String,
    outcome: Result<(), String>,
}

/// Submits a job every `1/rate` s until `duration` has passed; each runs in its own driver and is
/// tallied under the fault of a chaos run lasting `faults`, if any.
async fn submit(
    client: &Client,
    rate: f64,
    start: Instant,
    duration: Duration,
    faults: Option<Duration>,
    deadline: Duration,
    live: Arc<AtomicUsize>,
) -> Vec<tokio::task::JoinHandle<JobEnd>> {
    let interval = Duration::from_secs_f64(1.0 / rate.max(0.01));
    let mut drivers = Vec::new();
    let kinds: Vec<Kind> = Scheme::ALL
        .iter()
        .map(|(_, s)| Kind::Bundled(*s))
        .chain([Kind::RunTime])
        .collect();
    let mut n = 0usize;
    while start.elapsed() < duration {
        let kind = kinds[n % kinds.len()];
        // Kinds and scenarios cycle at co-prime periods (8 and 5), so every pair comes up.
        let scenario = match SCENARIOS[n % SCENARIOS.len()] {
            // An MPIJob's launcher is a batch Job's pod, replaced under a new name: no ExitCode
            // restart by index to drive.
            Scenario::Restart if kind == Kind::Bundled(Scheme::MpiJob) => Scenario::Succeed,
            scenario => scenario,
        };
        let fault = faults.map_or(Fault::Calm, |run| chaos::fault_at(start.elapsed(), run));
        let name = format!("soak-{n}");
        let (client, live) = (client.clone(), live.clone());
        live.fetch_add(1, Ordering::Relaxed);
        drivers.push(tokio::spawn(async move {
            let outcome = drive(&client, kind, scenario, &name, deadline).await;
            live.fetch_sub(1, Ordering::Relaxed);
            JobEnd {
                kind,
                scenario,
                fault,
                name,
                outcome,
            }
        }));
        n += 1;
        tokio::time::sleep(interval).await;
    }
    drivers
}

/// Per pod name: its job and what it went through, as (UID, phase, being deleted) in order.
type PodLives = BTreeMap<String, (String, Vec<(String, String, bool)>)>;

/// Every pod UID and phase seen per pod name, from a watch of the namespace.
struct PodHistory {
    seen: Arc<std::sync::Mutex<PodLives>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodHistory {
    fn watch(client: &Client) -> Self {
        let seen = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
        let into = seen.clone();
        let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(
                watcher(api, watcher::Config::default())
                    .default_backoff()
                    .applied_objects()
            );
            while let Some(event) = events.next().await {
                let (Ok(pod), Ok(mut seen)) = (event, into.lock()) else {
                    continue;
                };
                let job = pod.labels().get(JOB_NAME_LABEL).cloned().unwrap_or_default();
                let (_, lives) = seen.entry(pod.name_any()).or_insert_with(|| (job, Vec::new()));
                let now = (
                    pod.uid().unwrap_or_default(),
                    pods::phase(&pod).to_owned(),
                    pod.metadata.deletion_timestamp.is_some(),
                );
                if lives.last() != Some(&now) {
                    lives.push(now);
                }
            }
        });
        Self { seen, task }
    }

    /// What the pods of `job` went through: `name: uid-prefix phase[ deleting] -> ...`.
    fn lives_of(&self, job: &str) -> String {
        let Ok(seen) = self.seen.lock() else {
            return "pod history poisoned".into();
        };
        let lives: Vec<String> = seen
            .iter()
            .filter(|(_, (owner, _))| owner == job)
            .map(|(pod, (_, lives))| {
                let steps: Vec<String> = lives
                    .iter()
                    .map(|(uid, phase, deleting)| {
                        let short = uid.get(..8).unwrap_or(uid);
                        format!("{short} {phase}{}", if *deleting { " deleting" } else { "" })
                    })
                    .collect();
                format!("{pod}: {}", steps.join(" -> "))
            })
            .collect();
        lives.join("; ")
    }

    /// How many distinct pods (UIDs) each pod name had.
    fn uids_per_pod(&self) -> BTreeMap<String, usize> {
        let Ok(seen) = self.seen.lock() else {
            return BTreeMap::new();
        };
        seen.iter()
            .map(|(pod, (_, lives))| {
                let uids: BTreeSet<&String> = lives.iter().map(|(uid, ..)| uid).collect();
                (pod.clone(), uids.len())
            })
            .collect()
    }

    /// Pod names created more than once for jobs whose scenario never replaces a pod.
    fn duplicates(self, scenarios: &BTreeMap<String, Scenario>) -> Vec<String> {
        self.task.abort();
        let Ok(seen) = self.seen.lock() else {
            return vec!["pod history poisoned".into()];
        };
        seen.iter()
            .filter_map(|(pod, (job, lives))| {
                let uids: BTreeSet<&String> = lives.iter().map(|(uid, ..)| uid).collect();
                let never_replaced = scenarios.get(job).is_some_and(|s| {
                    matches!(s, Scenario::Succeed | Scenario::Fail | Scenario::DeleteMidRun)
                });
                (uids.len() > 1 && never_replaced).then(|| format!("{pod}: {} pods", uids.len()))
            })
            .collect()
    }
}

/// Pods the operator reported creating more often than they were created (`uids` per pod name).
async fn duplicate_create_events(client: &Client, uids: &BTreeMap<String, usize>) -> Vec<String> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NAMESPACE);
    let list = match events.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(e) => return vec![format!("listing events: {e}")],
    };
    let mut created: BTreeMap<String, usize> = BTreeMap::new();
    for event in list {
        if event.reason.as_deref() == Some("SuccessfulCreatePod")
            && let Some(pod) = event.related.and_then(|r| r.name)
        {
            *created.entry(pod).or_default() += 1;
        }
    }
    created
        .into_iter()
        .filter(|(pod, events)| *events > uids.get(pod).copied().unwrap_or(0))
        .map(|(pod, events)| {
            format!(
                "{pod}: {events} create events, {} pods",
                uids.get(&pod).copied().unwrap_or(0)
            )
        })
        .collect()
}

/// Objects kfop made that outlive their (deleted) jobs, after the garbage collector had a minute.
async fn orphans(client: &Client) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = owned_left(client).await;
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn owned_left(client: &Client) -> Vec<String> {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
    let selector = ListParams::default().labels(OPERATOR_NAME_LABEL);
    let mut left = Vec::new();
    macro_rules! collect {
        ($($kind:ty),*) => {$(
            let api: Api<$kind> = Api::namespaced(client.clone(), NAMESPACE);
            match api.list(&selector).await {
                Ok(list) => left.extend(list.items.iter().map(|o| format!("{} {}", stringify!($kind), o.name_any()))),
                Err(e) => left.push(format!("listing {}: {e}", stringify!($kind))),
            }
        )*};
    }
    collect!(Pod, Service, ConfigMap, Secret, Job);
    left
}

fn summarize_rss(results: &mut SoakResults, samples: &[Sample], lives: &[(f64, usize)], end: Duration) {
    let minute = 60.0_f64.min(end.as_secs_f64() / 2.0);
    let window = RSS_WINDOW.as_secs_f64().min(end.as_secs_f64() / 4.0);
    let end = end.as_secs_f64();
    let mean_rss = |from: f64, to: f64| {
        mean(
            samples
                .iter()
                .filter(|s| s.t >= from && s.t < to)
                .map(|s| s.rss_mb),
        )
    };
    #[allow(clippy::cast_precision_loss)]
    let mean_live = |from: f64, to: f64| {
        mean(
            lives
                .iter()
                .filter(|(t, _)| *t >= from && *t < to)
                .map(|(_, n)| *n as f64),
        )
    };
    results.rss_after_first_minute_mb = mean_rss(minute, minute + window);
    results.live_jobs_after_first_minute = mean_live(minute, minute + window);
    results.rss_at_end_mb = mean_rss(end - window, end);
    results.live_jobs_at_end = mean_live(end - window, end);
    results.peak_rss_mb = samples.iter().map(|s| s.peak_rss_mb).fold(0.0, f64::max);
    results.rss_curve = samples
        .iter()
        .step_by(10)
        .map(|s| {
            let live = lives
                .iter()
                .min_by(|a, b| (a.0 - s.t).abs().total_cmp(&(b.0 - s.t).abs()))
                .map_or(0, |(_, n)| *n);
            (s.t.round(), (s.rss_mb * 10.0).round() / 10.0, live)
        })
        .collect();
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0u32), |(s, c), v| (s + v, c + 1));
    if count == 0 { 0.0 } else { sum / f64::from(count) }
}

fn check(results: &mut SoakResults, duration: Duration) {
    if !results.stranded.is_empty() {
        results.failures.push(format!(
            "{} jobs did not reach their expected end",
            results.stranded.len()
        ));
    }
    if !results.duplicate_pods.is_empty() {
        results.failures.push(format!(
            "{} pods were created more than once for one replica",
            results.duplicate_pods.len()
        ));
    }
    if !results.duplicate_create_events.is_empty() {
        results.failures.push(format!(
            "{} pods had more create events than creations",
            results.duplicate_create_events.len()
        ));
    }
    if !results.orphans.is_empty() {
        results
            .failures
            .push(format!("{} objects outlived their jobs", results.orphans.len()));
    }
    if let Some(injected) = &results.injected
        && !(injected.failover_seconds > 0.0 && injected.failover_seconds <= chaos::MAX_FAILOVER_SECONDS)
    {
        results.failures.push(format!(
            "leader failover took {:.1} s (at most {} s)",
            injected.failover_seconds,
            chaos::MAX_FAILOVER_SECONDS
        ));
    }
    if let Some(burst) = &results.burst {
        for (what, jobs) in [
            ("did not succeed", &burst.stranded),
            ("left Succeeded", &burst.regressed),
            ("counted their replicas wrong", &burst.wrong_counts),
            ("were not deleted", &burst.not_deleted),
        ] {
            if !jobs.is_empty() {
                // The first few by name (with their counts, for wrong counts) say which and why.
                let shown: Vec<&str> = jobs.iter().take(5).map(String::as_str).collect();
                results.failures.push(format!(
                    "{} of the burst's {} jobs {what}: {}",
                    jobs.len(),
                    burst.jobs,
                    shown.join("; ")
                ));
            }
        }
    }
    if results.resync_found_work > 0.0 {
        results.failures.push(format!(
            "resyncs found work {} times (watch events were lost)",
            results.resync_found_work
        ));
    }
    if results.forbidden_responses > 0.0 {
        results.failures.push(format!(
            "the operator got {} forbidden responses as its ServiceAccount to requests its ClusterRole does not grant",
            results.forbidden_responses
        ));
    }
    if let Some(injected) = &results.injected
        && !injected.outage_attempts_per_second.is_finite()
    {
        results
            .failures
            .push("the operator's requests during the outage could not be read".into());
    }
    if let Some(injected) = &results.injected
        && injected.outage_attempts_per_second > chaos::MAX_OUTAGE_ATTEMPTS_PER_SECOND
    {
        results.failures.push(format!(
            "the operator sent {:.1} requests/s while the API server was frozen (at most {})",
            injected.outage_attempts_per_second,
            chaos::MAX_OUTAGE_ATTEMPTS_PER_SECOND
        ));
    }
    // One process lives through the whole soak (under chaos they are replaced), so two periods
    // are enough for its first resync.
    if results.injected.is_none()
        && results.resyncs < 1.0
        && duration.as_secs_f64() >= 2.0 * results.resync_period_seconds
    {
        results.failures.push("no resync ran".into());
    }
    if results.rss_after_first_minute_mb > 0.0
        && results.rss_at_end_mb > results.rss_after_first_minute_mb * RSS_TOLERANCE
    {
        results.failures.push(format!(
            "RSS grew from {:.1} MB after the first minute to {:.1} MB at the end (> 10%)",
            results.rss_after_first_minute_mb, results.rss_at_end_mb
        ));
    }
}

fn mode(chaos: bool) -> &'static str {
    if chaos { "chaos" } else { "soak" }
}

/// Writes `soak.json` and `soak.md` (`chaos.*` under chaos) into `dir`.
fn write(results: &SoakResults, dir: &Path) -> Result<()> {
    let stem = mode(results.chaos);
    let path = dir.join(format!("{stem}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(results)?).map_err(|e| Error::io(&path, e))?;
    let path = dir.join(format!("{stem}.md"));
    std::fs::write(&path, markdown(results)).map_err(|e| Error::io(&path, e))
}

/// The soak's results as Markdown tables.
pub fn markdown(r: &SoakResults) -> String {
    let mut text = format!(
        "# kfop {}\n\n| | |\n|---|---|\n\
         | duration (s) | {:.0} |\n| rate (jobs/s) | {} |\n| resync period (s) | {:.0} ({}) |\n\
         | jobs (7 bundled kinds and 1 run-time kind x 5 scenarios) | {} |\n| converged | {} |\n| stranded | {} |\n\
         | pods created twice for one replica | {} |\n| pods with more create events than creations | {} |\n\
         | orphans after deletion | {} |\n\
         | resyncs / found work | {:.0} / {:.0} |\n\
         | 403s to the operator as its ServiceAccount: permission missing / transient (granted) | {:.0} / {:.0} |\n\
         | kubelet player: plays kwok failed (retried by itself); pods the sync touched | {} ({}); {} {:?} |\n",
        mode(r.chaos),
        r.duration_seconds,
        r.rate,
        r.resync_period_seconds,
        if r.resync_could_heal {
            "a resync could heal a strand before its deadline"
        } else {
            "no resync before any job's deadline: a strand stays stranded"
        },
        r.jobs,
        r.converged,
        r.stranded.len(),
        r.duplicate_pods.len(),
        r.duplicate_create_events.len(),
        r.orphans.len(),
        r.resyncs,
        r.resync_found_work,
        r.forbidden_responses,
        r.forbidden_transient,
        r.player.failed_plays,
        r.player.retried_plays,
        r.player.synced_total(),
        r.player.synced,
    );
    if r.chaos {
        if let Some(i) = &r.injected {
            text.push_str(&format!(
                "| operator kills; slowest restart to ready (s) | {}; {:.1} |\n\
                 | kube-apiserver restart to ready (s) | {:.1} |\n| etcd restart to ready (s) | {:.1} |\n\
                 | API server frozen (s); operator requests sent meanwhile; per second, sent (answered) | {:.0}; {:.0}; {:.2} ({:.2}) |\n\
                 | leader SIGKILLed to the standby's first write (s; lease 15 s) | {:.1} |\n",
                i.operator_kills,
                i.max_operator_ready_seconds,
                i.apiserver_restart_seconds,
                i.etcd_restart_seconds,
                i.outage_seconds,
                i.outage_attempts,
                i.outage_attempts_per_second,
                i.outage_answered_per_second,
                i.failover_seconds,
            ));
        }
    } else {
        text.push_str(&format!(
            "| RSS after the first minute (MB, live jobs) | {:.1} ({:.1}) |\n\
             | RSS at the end (MB, live jobs) | {:.1} ({:.1}) |\n| peak RSS (MB) | {:.1} |\n",
            r.rss_after_first_minute_mb,
            r.live_jobs_after_first_minute,
            r.rss_at_end_mb,
            r.live_jobs_at_end,
            r.peak_rss_mb,
        ));
    }
    if let Some(b) = &r.burst {
        let p = |f: fn(&crate::stats::Percentiles) -> f64| b.to_succeeded.as_ref().map_or(f64::NAN, f);
        text.push_str(&format!(
            "| burst: PyTorchJobs at once; succeeded | {}; {} |\n\
             | burst: submission to Succeeded p50 / p99 / max (s) | {:.1} / {:.1} / {:.1} |\n\
             | burst: first submission to the last Succeeded (s) | {:.1} |\n\
             | burst: left Succeeded; wrong replica counts; not deleted | {}; {}; {} |\n",
            b.jobs,
            b.succeeded,
            p(|p| p.p50),
            p(|p| p.p99),
            p(|p| p.max),
            b.all_succeeded_seconds.unwrap_or(f64::NAN),
            b.regressed.len(),
            b.wrong_counts.len(),
            b.not_deleted.len(),
        ));
    }
    text.push_str("\n| jobs created during | converged | stranded |\n|---|---|---|\n");
    for (fault, tally) in &r.by_fault {
        text.push_str(&format!(
            "| {fault} | {} | {} |\n",
            tally.converged, tally.stranded
        ));
    }
    for line in r
        .stranded
        .iter()
        .chain(&r.duplicate_pods)
        .chain(&r.duplicate_create_events)
        .chain(&r.orphans)
        .chain(&r.forbidden)
        .chain(&r.failures)
    {
        text.push_str(&format!("\n- {line}"));
    }
    text.push('\n');
    text
}

/// Samples the number of live jobs every second.
struct LiveSampler {
    samples: Arc<std::sync::Mutex<Vec<(f64, usize)>>>,
    task: tokio::task::JoinHandle<()>,
}

fn live_sampler(live: Arc<AtomicUsize>, start: Instant) -> LiveSampler {
    let samples = Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = samples.clone();
    let task = tokio::spawn(async move {
        loop {
            if let Ok(mut s) = into.lock() {
                s.push((start.elapsed().as_secs_f64(), live.load(Ordering::Relaxed)));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    LiveSampler { samples, task }
}

impl LiveSampler {
    fn stop(self) -> Vec<(f64, usize)> {
        self.task.abort();
        self.samples.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// One job's life: created for `scenario`, driven like a kubelet would, checked to reach its
/// expected end, then deleted. The error says what was last seen.
async fn drive(
    client: &Client,
    kind: Kind,
    scenario: Scenario,
    name: &str,
    within: Duration,
) -> Result<(), String> {
    let resource = match kind {
        Kind::Bundled(scheme) => samples::api_resource(scheme),
        Kind::RunTime => frameworks::kind(0),
    };
    let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let job = job_for(kind, scenario, name)?;
    let driver = Driver {
        jobs: &jobs,
        pods: &pod_api,
        name,
        deadline: Instant::now() + within,
        within,
    };
    driver
        .retrying("creating", || async {
            match jobs.create(&PostParams::default(), &job).await {
                Ok(_) => Ok(()),
                // A retried create whose first try went through.
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        })
        .await?;
    // Whatever happened, the job is deleted after, so what is left over is the operator's.
    let outcome = run_scenario(&driver, scenario).await;
    driver
        .retrying("deleting", || async {
            match jobs.delete(name, &DeleteParams::background()).await {
                Ok(_) => Ok(()),
                // A retried delete whose first try went through.
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        })
        .await?;
    let gone = driver.until_gone().await;
    outcome.and(gone)
}

/// Drives one scenario to its expected end.
async fn run_scenario(driver: &Driver<'_>, scenario: Scenario) -> Result<(), String> {
    let expected = match scenario {
        Scenario::Succeed => Some(JobConditionType::Succeeded),
        Scenario::Fail => Some(JobConditionType::Failed),
        Scenario::Restart => {
            let pods = driver.running_pods().await?;
            let first = pods.first().ok_or("no pods")?;
            let (victim, uid) = (first.name_any(), first.uid());
            driver
                .retrying("killing a pod with 137", || async {
                    pods::finish(driver.pods, &victim, 137, 0)
                        .await
                        .map_err(|e| e.to_string())
                })
                .await?;
            driver
                .until("the killed pod replaced", |_, pods| {
                    pods.iter()
                        .any(|p| p.name_any() == victim && p.uid() != uid && pods::phase(p) == "Running")
                })
                .await?;
            driver.finish_until(JobConditionType::Succeeded).await?;
            Some(JobConditionType::Succeeded)
        }
        Scenario::SuspendResume => {
            driver.running_pods().await?;
            driver.suspend(true).await?;
            driver
                .until("suspended with no pods", |status, pods| {
                    status.is(JobConditionType::Suspended) && pods.is_empty()
                })
                .await?;
            driver.suspend(false).await?;
            driver.finish_until(JobConditionType::Succeeded).await?;
            Some(JobConditionType::Succeeded)
        }
        Scenario::DeleteMidRun => {
            driver.running_pods().await?;
            None
        }
    };
    if let Some(condition) = expected {
        driver
            .until(&format!("{condition:?}"), |status, _| status.is(condition))
            .await?;
        tokio::time::sleep(KEEP_FINISHED).await;
        let (status, _) = driver.retrying("looking again", || driver.look()).await?;
        if !status.is_some_and(|s| s.is(condition)) {
            return Err(format!("left {condition:?} on its own"));
        }
    }
    Ok(())
}

/// The sample of `kind` shaped for `scenario`.
fn job_for(kind: Kind, scenario: Scenario, name: &str) -> Result<DynamicObject, String> {
    let mut job = match kind {
        Kind::Bundled(scheme) => samples::sample(scheme).map_err(|e| e.to_string())?.1,
        Kind::RunTime => frameworks::job(0, name, None).map_err(|e| e.to_string())?,
    };
    job.metadata.name = Some(name.to_owned());
    job.metadata.namespace = Some(NAMESPACE.to_owned());
    let annotations = match scenario {
        Scenario::Succeed => {
            Some(json!({ pods::COMPLETE_AFTER_MS_ANNOTATION: TRAIN.as_millis().to_string() }))
        }
        Scenario::Fail => Some(json!({ pods::EXIT_CODE_ANNOTATION: "1" })),
        _ => None,
    };
    if scenario == Scenario::Fail
        && let Some(spec) = job.data.get_mut("spec").and_then(|s| s.as_object_mut())
    {
        let run_policy = spec.entry("runPolicy").or_insert_with(|| json!({}));
        run_policy["backoffLimit"] = json!(0);
    }
    for spec in samples::replica_specs_mut(&mut job)
        .into_iter()
        .flat_map(|s| s.values_mut())
    {
        if scenario == Scenario::Fail {
            spec["restartPolicy"] = json!("Never");
        }
        if scenario == Scenario::Restart {
            spec["restartPolicy"] = json!("ExitCode");
        }
        if let Some(annotations) = &annotations {
            spec["template"]["metadata"]["annotations"] = annotations.clone();
        }
    }
    Ok(job)
}

struct Driver<'a> {
    jobs: &'a Api<DynamicObject>,
    pods: &'a Api<Pod>,
    name: &'a str,
    deadline: Instant,
    within: Duration,
}

impl Driver<'_> {
    /// The job's status and pods now (pods being deleted are left out).
    async fn look(&self) -> Result<(Option<JobStatus>, Vec<Pod>), String> {
        let job = self.jobs.get_opt(self.name).await.map_err(|e| e.to_string())?;
        let status = job.map(|j| {
            j.data
                .get("status")
                .cloned()
                .and_then(|s| serde_json::from_value(s).ok())
                .unwrap_or_default()
        });
        let selector = format!("training.kubeflow.org/job-name={}", self.name);
        let mut pods = self
            .pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| e.to_string())?
            .items;
        pods.retain(|p| p.metadata.deletion_timestamp.is_none());
        pods.sort_by_key(ResourceExt::name_any);
        Ok((status, pods))
    }

    /// Waits until `done` holds for the job's status and pods, or the job's deadline.
    /// Runs `call` until it succeeds, for as long as the job may take and its cleanup after (the
    /// API server may be restarting or frozen under chaos).
    async fn retrying<T, Fut>(&self, what: &str, call: impl FnMut() -> Fut) -> Result<T, String>
    where
        Fut: std::future::Future<Output = Result<T, String>>,
    {
        retry::until(self.deadline + self.within, POLL, call)
            .await
            .map_err(|e| format!("{what}: {e}"))
    }

    async fn until(&self, what: &str, done: impl Fn(&JobStatus, &[Pod]) -> bool) -> Result<(), String> {
        loop {
            let (status, pods) = self.retrying("looking", || self.look()).await?;
            let status = status.ok_or_else(|| format!("job gone while waiting for {what}"))?;
            if done(&status, &pods) {
                return Ok(());
            }
            if Instant::now() >= self.deadline {
                // Enough to tell a lost event from a wrong decision: each condition's reason and
                // message, each pod's phase and the exit it was told to make.
                let conditions: Vec<String> = status
                    .conditions
                    .iter()
                    .map(|c| format!("{:?}={:?} {}: {}", c.type_, c.status, c.reason, c.message))
                    .collect();
                let phases: Vec<String> = pods
                    .iter()
                    .map(|p| {
                        let exit = p.annotations().get(pods::EXIT_CODE_ANNOTATION);
                        format!("{}={} exit={exit:?}", p.name_any(), pods::phase(p))
                    })
                    .collect();
                return Err(format!(
                    "no {what} after {}s; conditions {conditions:?}, pods {phases:?}",
                    self.within.as_secs()
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits for every replica's pod to run: the job is Running and none of its pods is not.
    async fn running_pods(&self) -> Result<Vec<Pod>, String> {
        self.until("Running with every pod running", |status, pods| {
            status.is(JobConditionType::Running)
                && !pods.is_empty()
                && pods.iter().all(|p| pods::phase(p) == "Running")
        })
        .await?;
        Ok(self.retrying("looking", || self.look()).await?.1)
    }

    /// Ends each pod with exit code 0 once it runs, as finished training would, until the job
    /// is `condition`. Pods are ended as they come: a pod the operator creates later than its
    /// siblings (after a restart, or while a replaced pod is still terminating) runs and ends
    /// like them. Ending only the pods running at one look left such a pod running for good, and
    /// its job waiting on it: the harness's strand, not the operator's.
    async fn finish_until(&self, condition: JobConditionType) -> Result<(), String> {
        loop {
            let (status, pods) = self.retrying("looking", || self.look()).await?;
            if status.as_ref().is_some_and(|s| s.is(condition)) {
                return Ok(());
            }
            for pod in pods.iter().filter(|p| pods::phase(p) == "Running") {
                self.retrying("ending a pod", || async {
                    pods::finish(self.pods, &pod.name_any(), 0, 0)
                        .await
                        .map_err(|e| e.to_string())
                })
                .await?;
            }
            // The wait for the condition, with what was seen, once the deadline passes.
            if Instant::now() >= self.deadline {
                return self
                    .until(&format!("{condition:?}"), |s, _| s.is(condition))
                    .await;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn suspend(&self, suspend: bool) -> Result<(), String> {
        let patch = json!({ "spec": { "runPolicy": { "suspend": suspend } } });
        self.retrying(&format!("setting suspend={suspend}"), || async {
            self.jobs
                .patch(self.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await
    }

    /// Waits until the job and its pods are gone.
    async fn until_gone(&self) -> Result<(), String> {
        loop {
            let (status, pods) = self.retrying("looking", || self.look()).await?;
            if status.is_none() && pods.is_empty() {
                return Ok(());
            }
            if Instant::now() >= self.deadline + self.within {
                return Err(format!("job or {} pods left after deletion", pods.len()));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
