//! `kfop-bench --soak DURATION`: the default all-in-one operator (every kind) under a steady mixed
//! workload for minutes. Each job runs one scenario to its expected end — succeed, fail, restart
//! under ExitCode, suspend and resume, deleted mid-run — driven only as a kubelet would (kwok
//! annotations on pods) and then deleted. At the end every job must have reached its end on its
//! own, no resync may have found work (a lost event), and the operator's RSS late in the run must
//! be within 10% of its level after the first minute.
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kfop_operator::samples;
use kfop_operator::schemes::Scheme;
use kfop_runtime::api::{JobConditionType, JobStatus};
use kfop_testenv::pods;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;

use crate::cli::Args;
use crate::error::{Error, Result};
use crate::operator::{self, Operator};
use crate::sample::{Sample, Sampler};

const NAMESPACE: &str = "soak";
/// How long one job may take to reach its expected end.
const JOB_DEADLINE: Duration = Duration::from_secs(120);
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

/// The soak's results.
#[derive(Debug, Serialize)]
pub struct SoakResults {
    pub duration_seconds: f64,
    pub rate: f64,
    pub resync_period_seconds: f64,
    pub jobs: usize,
    pub converged: usize,
    /// Jobs that did not reach their expected end, with what was seen.
    pub stranded: Vec<String>,
    pub by_kind_and_scenario: BTreeMap<String, usize>,
    pub resyncs: f64,
    pub resync_found_work: f64,
    pub rss_after_first_minute_mb: f64,
    pub live_jobs_after_first_minute: f64,
    pub rss_at_end_mb: f64,
    pub live_jobs_at_end: f64,
    pub peak_rss_mb: f64,
    pub failures: Vec<String>,
}

/// Runs the soak for `duration`; fails when any check fails (after writing the results).
pub async fn run(args: &Args, duration: Duration) -> Result<SoakResults> {
    let bin = operator::locate(args.operator_bin.as_deref())?;
    std::fs::create_dir_all(&args.results).map_err(|e| Error::io(&args.results, e))?;
    let (plane, client) = crate::run::start_plane(args).await?;
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NAMESPACE.to_owned());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(Error::kube("creating the soak namespace"))?;

    // The default operator: every kind, default flags, but for the resync period under test.
    let mut flags = vec![format!("--resync-period={}s", args.soak_resync.as_secs_f64())];
    flags.extend(args.operator_args.iter().cloned());
    let log = args.results.join("operator-soak.log");
    let mut operator = Operator::spawn(&bin, plane.kubeconfig(), &flags, &log).await?;
    operator.wait_ready(Duration::from_secs(60)).await?;
    let start = Instant::now();
    let sampler = Sampler::start(operator.pid(), start, Duration::from_secs(1));
    let live = Arc::new(AtomicUsize::new(0));
    let live_samples = live_sampler(live.clone(), start);

    let interval = Duration::from_secs_f64(1.0 / args.rate.max(0.01));
    let mut drivers = Vec::new();
    let mut n = 0usize;
    let kinds: Vec<Scheme> = Scheme::ALL.iter().map(|(_, s)| *s).collect();
    while start.elapsed() < duration {
        let kind = kinds[n % kinds.len()];
        // Kinds and scenarios cycle at co-prime periods (7 and 5), so every pair comes up.
        let scenario = match SCENARIOS[n % SCENARIOS.len()] {
            // An MPIJob's launcher is a batch Job's pod, replaced under a new name: no ExitCode
            // restart by index to drive.
            Scenario::Restart if kind == Scheme::MpiJob => Scenario::Succeed,
            scenario => scenario,
        };
        let name = format!("soak-{n}");
        let (client, live) = (client.clone(), live.clone());
        live.fetch_add(1, Ordering::Relaxed);
        drivers.push(tokio::spawn(async move {
            let outcome = drive(&client, kind, scenario, &name).await;
            live.fetch_sub(1, Ordering::Relaxed);
            (kind, scenario, name, outcome)
        }));
        n += 1;
        tokio::time::sleep(interval).await;
    }
    let submitting = start.elapsed();
    let mut results = SoakResults {
        duration_seconds: submitting.as_secs_f64(),
        rate: args.rate,
        resync_period_seconds: args.soak_resync.as_secs_f64(),
        jobs: drivers.len(),
        converged: 0,
        stranded: Vec::new(),
        by_kind_and_scenario: BTreeMap::new(),
        resyncs: 0.0,
        resync_found_work: 0.0,
        rss_after_first_minute_mb: 0.0,
        live_jobs_after_first_minute: 0.0,
        rss_at_end_mb: 0.0,
        live_jobs_at_end: 0.0,
        peak_rss_mb: 0.0,
        failures: Vec::new(),
    };
    for driver in drivers {
        match driver.await {
            Ok((kind, scenario, name, outcome)) => {
                *results
                    .by_kind_and_scenario
                    .entry(format!("{kind:?} {scenario:?}"))
                    .or_default() += 1;
                match outcome {
                    Ok(()) => results.converged += 1,
                    Err(seen) => results
                        .stranded
                        .push(format!("{kind:?} {name} ({scenario:?}): {seen}")),
                }
            }
            Err(e) => results.stranded.push(format!("driver panicked: {e}")),
        }
    }
    let metrics = operator.scrape().await?;
    results.resyncs = operator::sum(&metrics, "kfop_resyncs_total", |_| true);
    results.resync_found_work = operator::sum(&metrics, "kfop_resync_found_work_total", |_| true);
    let samples = sampler.stop();
    let lives = live_samples.stop();
    summarize_rss(&mut results, &samples, &lives, submitting);
    check(&mut results, duration);
    operator.stop(Duration::from_secs(10)).await?;
    write(&results, &args.results)?;
    drop(plane);
    if results.failures.is_empty() {
        Ok(results)
    } else {
        Err(Error::Phase {
            phase: "soak".into(),
            message: results.failures.join("; "),
        })
    }
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
    if results.resync_found_work > 0.0 {
        results.failures.push(format!(
            "resyncs found work {} times (watch events were lost)",
            results.resync_found_work
        ));
    }
    if results.resyncs < 1.0 && duration.as_secs_f64() > results.resync_period_seconds {
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

fn write(results: &SoakResults, dir: &Path) -> Result<()> {
    let path = dir.join("soak.json");
    std::fs::write(&path, serde_json::to_string_pretty(results)?).map_err(|e| Error::io(&path, e))?;
    let path = dir.join("soak.md");
    std::fs::write(&path, markdown(results)).map_err(|e| Error::io(&path, e))
}

/// The soak's results as a Markdown table.
pub fn markdown(r: &SoakResults) -> String {
    let mut text = format!(
        "# kfop soak\n\n| | |\n|---|---|\n\
         | duration (s) | {:.0} |\n| rate (jobs/s) | {} |\n| resync period (s) | {:.0} |\n\
         | jobs (7 kinds x 5 scenarios) | {} |\n| converged | {} |\n| stranded | {} |\n\
         | resyncs / found work | {:.0} / {:.0} |\n\
         | RSS after the first minute (MB, live jobs) | {:.1} ({:.1}) |\n\
         | RSS at the end (MB, live jobs) | {:.1} ({:.1}) |\n| peak RSS (MB) | {:.1} |\n",
        r.duration_seconds,
        r.rate,
        r.resync_period_seconds,
        r.jobs,
        r.converged,
        r.stranded.len(),
        r.resyncs,
        r.resync_found_work,
        r.rss_after_first_minute_mb,
        r.live_jobs_after_first_minute,
        r.rss_at_end_mb,
        r.live_jobs_at_end,
        r.peak_rss_mb,
    );
    for line in r.stranded.iter().chain(&r.failures) {
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
async fn drive(client: &Client, kind: Scheme, scenario: Scenario, name: &str) -> Result<(), String> {
    let resource = samples::api_resource(kind);
    let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let job = job_for(kind, scenario, name).map_err(|e| e.to_string())?;
    jobs.create(&PostParams::default(), &job)
        .await
        .map_err(|e| format!("creating: {e}"))?;
    let deadline = Instant::now() + JOB_DEADLINE;
    let driver = Driver {
        jobs: &jobs,
        pods: &pod_api,
        name,
        deadline,
    };
    let expected = match scenario {
        Scenario::Succeed => Some(JobConditionType::Succeeded),
        Scenario::Fail => Some(JobConditionType::Failed),
        Scenario::Restart => {
            let pods = driver.running_pods().await?;
            let first = pods.first().ok_or("no pods")?;
            let (victim, uid) = (first.name_any(), first.uid());
            pods::finish(&pod_api, &victim, 137, 0)
                .await
                .map_err(|e| e.to_string())?;
            driver
                .until("the killed pod replaced", |_, pods| {
                    pods.iter()
                        .any(|p| p.name_any() == victim && p.uid() != uid && pods::phase(p) == "Running")
                })
                .await?;
            driver.finish_all().await?;
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
            driver.running_pods().await?;
            driver.finish_all().await?;
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
        let (status, _) = driver.look().await?;
        if !status.is_some_and(|s| s.is(condition)) {
            return Err(format!("left {condition:?} on its own"));
        }
    }
    jobs.delete(name, &DeleteParams::background())
        .await
        .map_err(|e| format!("deleting: {e}"))?;
    driver.until_gone().await
}

/// The sample of `kind` shaped for `scenario`.
fn job_for(kind: Scheme, scenario: Scenario, name: &str) -> Result<DynamicObject, samples::SampleError> {
    let (_, mut job) = samples::sample(kind)?;
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
    async fn until(&self, what: &str, done: impl Fn(&JobStatus, &[Pod]) -> bool) -> Result<(), String> {
        loop {
            let (status, pods) = self.look().await?;
            let status = status.ok_or_else(|| format!("job gone while waiting for {what}"))?;
            if done(&status, &pods) {
                return Ok(());
            }
            if Instant::now() >= self.deadline {
                let conditions: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
                let phases: Vec<String> = pods
                    .iter()
                    .map(|p| format!("{}={}", p.name_any(), pods::phase(p)))
                    .collect();
                return Err(format!(
                    "no {what} after {}s; conditions {conditions:?}, pods {phases:?}",
                    JOB_DEADLINE.as_secs()
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
        Ok(self.look().await?.1)
    }

    /// Ends every running pod with exit code 0, as finished training would.
    async fn finish_all(&self) -> Result<(), String> {
        for pod in self.look().await?.1 {
            if pods::phase(&pod) == "Running" {
                pods::finish(self.pods, &pod.name_any(), 0, 0)
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    async fn suspend(&self, suspend: bool) -> Result<(), String> {
        let patch = json!({ "spec": { "runPolicy": { "suspend": suspend } } });
        self.jobs
            .patch(self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| format!("setting suspend={suspend}: {e}"))
    }

    /// Waits until the job and its pods are gone.
    async fn until_gone(&self) -> Result<(), String> {
        loop {
            let (status, pods) = self.look().await?;
            if status.is_none() && pods.is_empty() {
                return Ok(());
            }
            if Instant::now() >= self.deadline + JOB_DEADLINE {
                return Err(format!("job or {} pods left after deletion", pods.len()));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
