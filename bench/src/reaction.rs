//! `kfop-bench --failure-reaction JOBS`: how fast a job answers its pod's failure. JOBS live jobs
//! of six bundled kinds (MPIJob's launcher is a batch Job's pod and left out), every role under
//! restartPolicy ExitCode; once all run, each job's first worker is failed as soon as it runs:
//! twice with exit code 137 (retried: the job writes Restarting, deletes the pod and creates its
//! replacement), then with 1 (not retried: the job writes Failed). Failing a pod the moment its
//! replacement runs is the case the child batch delays: the job's last reconcile (the one that
//! saw the pod run) is less than a second old.
//!
//! The same jobs run twice on one plane, each time under a fresh operator: with failures batched
//! like replica counts (the operator's `KFOP_FAULT_BATCH_FAILURES`, a fault-injection hook that
//! restores the behaviour from before failures were answered at once), then as released. Times
//! are taken from the benchmark's own watches: from the pod seen Failed to the job seen
//! Restarting or Failed, and to the replacement pod seen created.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kfop_operator::samples;
use kfop_operator::schemes::Scheme;
use kfop_runtime::api::{JobConditionType, JobStatus};
use kfop_testenv::pods;
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;

use crate::cli::Args;
use crate::error::{Error, Result};
use crate::operator::{self, Operator};
use crate::stats::Percentiles;

/// The kinds measured: every bundled one but MPIJob.
const KINDS: [Scheme; 6] = [
    Scheme::TfJob,
    Scheme::PyTorchJob,
    Scheme::XgBoostJob,
    Scheme::PaddleJob,
    Scheme::JaxJob,
    Scheme::MxJob,
];
/// Failures per job with a retried exit code, before the last, not retried, one.
const RESTARTS: usize = 2;
/// How long one job's failures may take in all.
const JOB_TIMEOUT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(10);

/// The operator's mode of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Mode {
    /// Failures wait for the child batch, like replica counts.
    Batched,
    /// Failures answered at once (the default).
    AtOnce,
}

impl Mode {
    fn env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::Batched => &[("KFOP_FAULT_BATCH_FAILURES", "1")],
            Self::AtOnce => &[],
        }
    }

    fn namespace(self) -> &'static str {
        match self {
            Self::Batched => "reaction-batched",
            Self::AtOnce => "reaction-at-once",
        }
    }
}

/// Seconds from a pod seen Failed to each answer, over every kind and by kind.
#[derive(Debug, Default, Serialize)]
pub struct Answers {
    pub restarting: Option<Percentiles>,
    pub replaced: Option<Percentiles>,
    pub failed: Option<Percentiles>,
    pub by_kind: BTreeMap<String, KindAnswers>,
    /// The operator's own `kfop_failure_reaction_seconds`: answers counted, and their mean, by
    /// kind and reaction.
    pub operator_histogram: BTreeMap<String, (f64, f64)>,
    /// Jobs whose failures did not all get their answer in time, with what was missing.
    pub missing: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct KindAnswers {
    pub restarting: Option<Percentiles>,
    pub replaced: Option<Percentiles>,
    pub failed: Option<Percentiles>,
}

#[derive(Debug, Serialize)]
pub struct ReactionResults {
    pub jobs: usize,
    pub restarts_per_job: usize,
    pub modes: BTreeMap<String, Answers>,
}

/// What the watches saw, with when.
#[derive(Debug, Default)]
struct Seen {
    /// First time each pod incarnation (name, UID) was seen at all, and seen Failed.
    pod_added: HashMap<(String, String), Instant>,
    pod_failed: HashMap<(String, String), Instant>,
    /// Pod incarnations seen Running.
    pod_running: HashSet<(String, String)>,
    /// Per job, the phase each of its pods was last seen in.
    phases: HashMap<String, BTreeMap<String, String>>,
    /// Per job, each time a condition turned True, in order.
    became_true: HashMap<String, Vec<(JobConditionType, Instant)>>,
    true_now: HashMap<String, Vec<JobConditionType>>,
}

type Shared = Arc<Mutex<Seen>>;

pub async fn run(args: &Args, jobs: usize) -> Result<ReactionResults> {
    std::fs::create_dir_all(&args.results).map_err(|e| Error::io(&args.results, e))?;
    let (plane, client) = crate::run::start_plane(args).await?;
    let bin = operator::locate(args.operator_bin.as_deref())?;
    let mut modes = BTreeMap::new();
    for mode in [Mode::Batched, Mode::AtOnce] {
        let answers = run_mode(&client, plane.kubeconfig(), &bin, args, jobs, mode).await?;
        modes.insert(format!("{mode:?}"), answers);
    }
    drop(plane);
    let results = ReactionResults {
        jobs,
        restarts_per_job: RESTARTS,
        modes,
    };
    write(&results, &args.results)?;
    Ok(results)
}

async fn run_mode(
    client: &Client,
    kubeconfig: &Path,
    bin: &Path,
    args: &Args,
    jobs: usize,
    mode: Mode,
) -> Result<Answers> {
    let ns = mode.namespace();
    let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": ns } }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .map_err(Error::kube("creating the namespace"))?;
    let log = args.results.join(format!("operator-{}.log", ns));
    let mut operator =
        Operator::spawn_as(bin, kubeconfig, &args.operator_args, &log, None, mode.env()).await?;
    operator.wait_ready(args.timeout).await?;

    let seen = Shared::default();
    let mut watches = vec![tokio::spawn(watch_pods(client.clone(), ns, seen.clone()))];
    for scheme in KINDS {
        watches.push(tokio::spawn(watch_jobs(client.clone(), ns, scheme, seen.clone())));
    }
    let mut created = Vec::new();
    for i in 0..jobs {
        let scheme = KINDS[i % KINDS.len()];
        let name = format!("r{i}");
        create(client, ns, scheme, &name).await?;
        created.push((scheme, name));
    }
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    // The drivers read what the watches saw: polling the API server for 100 jobs would load the
    // plane whose reaction is measured.
    let drivers: Vec<_> = created
        .iter()
        .map(|(scheme, name)| {
            let (pod_api, seen, name, scheme) = (pod_api.clone(), seen.clone(), name.clone(), *scheme);
            tokio::spawn(async move {
                drive(&pod_api, &seen, &name)
                    .await
                    .map(|samples| (scheme, samples))
            })
        })
        .collect();
    let mut answers = Answers::default();
    let mut all: [Vec<f64>; 3] = Default::default();
    let mut by_kind: BTreeMap<String, [Vec<f64>; 3]> = BTreeMap::new();
    for (driver, (_, name)) in drivers.into_iter().zip(&created) {
        match driver.await {
            Ok(Ok((scheme, samples))) => {
                let kind = by_kind.entry(format!("{scheme:?}")).or_default();
                for (i, sample) in samples.into_iter().enumerate() {
                    all[i].extend(&sample);
                    kind[i].extend(sample);
                }
            }
            Ok(Err(missing)) => answers.missing.push(format!("{name}: {missing}")),
            Err(e) => answers.missing.push(format!("{name}: driver panicked: {e}")),
        }
    }
    [answers.restarting, answers.replaced, answers.failed] = all.map(|s| Percentiles::of(&s));
    answers.by_kind = by_kind
        .into_iter()
        .map(|(kind, [restarting, replaced, failed])| {
            let answers = KindAnswers {
                restarting: Percentiles::of(&restarting),
                replaced: Percentiles::of(&replaced),
                failed: Percentiles::of(&failed),
            };
            (kind, answers)
        })
        .collect();
    let metrics = settled_scrape(&operator, "kfop_failure_reaction_seconds_count").await?;
    for (labels, count) in operator::series(&metrics, "kfop_failure_reaction_seconds_count") {
        let sum = operator::sum(&metrics, "kfop_failure_reaction_seconds_sum", |l| *l == labels);
        let key = format!(
            "{} {}",
            labels.get("kind").map_or("", String::as_str),
            labels.get("reaction").map_or("", String::as_str)
        );
        answers
            .operator_histogram
            .insert(key, (count, if count > 0.0 { sum / count } else { 0.0 }));
    }
    for watch in watches {
        watch.abort();
    }
    operator.stop(Duration::from_secs(5)).await?;
    Ok(answers)
}

/// The operator's metrics once the series `name` stops growing (two scrapes 300 ms apart agree,
/// within 5 s): a pass records its metrics after its writes, so the last answers can land a
/// moment after the drivers saw them.
async fn settled_scrape(operator: &Operator, name: &str) -> Result<String> {
    let mut last = operator.scrape().await?;
    for _ in 0..16 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let next = operator.scrape().await?;
        let total = |text: &str| operator::sum(text, name, |_| true);
        if total(&next) == total(&last) {
            return Ok(next);
        }
        last = next;
    }
    Ok(last)
}

/// A job of `scheme` whose every role runs under restartPolicy ExitCode with a high backoff
/// limit, its pods running until told otherwise.
async fn create(client: &Client, ns: &str, scheme: Scheme, name: &str) -> Result<()> {
    let (_, mut job) = samples::sample(scheme).map_err(|e| Error::Operator(e.to_string()))?;
    job.metadata.name = Some(name.to_owned());
    job.metadata.namespace = Some(ns.to_owned());
    if let Some(spec) = job.data.get_mut("spec").and_then(|s| s.as_object_mut()) {
        let run_policy = spec.entry("runPolicy").or_insert_with(|| json!({}));
        run_policy["backoffLimit"] = json!(1000);
    }
    for spec in samples::replica_specs_mut(&mut job)
        .into_iter()
        .flat_map(|s| s.values_mut())
    {
        spec["restartPolicy"] = json!("ExitCode");
    }
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &samples::api_resource(scheme));
    api.create(&PostParams::default(), &job)
        .await
        .map_err(Error::kube("creating a job"))?;
    Ok(())
}

/// Fails `job`'s first worker (or its first pod) as soon as it runs, `RESTARTS` times with a
/// retried exit code and once with one that is not; returns the seconds from each failure seen
/// to the Restarting seen, the replacement seen, and the Failed seen.
async fn drive(pod_api: &Api<Pod>, seen: &Shared, job: &str) -> std::result::Result<[Vec<f64>; 3], String> {
    let deadline = Instant::now() + JOB_TIMEOUT;
    let target = wait(deadline, || async {
        let seen = lock(seen);
        let pods = seen.phases.get(job)?;
        let all_running = !pods.is_empty() && pods.values().all(|phase| phase == "Running");
        // BTreeMap: names in order, so the first worker or else the first pod.
        all_running.then(|| {
            pods.keys()
                .find(|n| n.contains("-worker-0"))
                .or_else(|| pods.keys().next())
                .cloned()
                .unwrap_or_default()
        })
    })
    .await
    .ok_or_else(|| "never ran".to_owned())?;
    let mut samples: [Vec<f64>; 3] = Default::default();
    // The incarnations already failed: the next one to fail is the other running one.
    let mut ended: Vec<String> = Vec::new();
    for round in 0..=RESTARTS {
        // The pod's current incarnation, running.
        let uid = wait(deadline, || async {
            lock(seen)
                .pod_running
                .iter()
                .find(|(name, uid)| *name == target && !ended.contains(uid))
                .map(|(_, uid)| uid.clone())
        })
        .await
        .ok_or_else(|| format!("round {round}: {target} never ran again"))?;
        let retried = round < RESTARTS;
        pods::finish(pod_api, &target, if retried { 137 } else { 1 }, 0)
            .await
            .map_err(|e| e.to_string())?;
        let key = (target.clone(), uid.clone());
        let failed = wait(deadline, || async { lock(seen).pod_failed.get(&key).copied() })
            .await
            .ok_or_else(|| format!("round {round}: {target} never seen Failed"))?;
        let answered = |condition: JobConditionType| {
            lock(seen)
                .became_true
                .get(job)
                .and_then(|turns| turns.iter().find(|(c, at)| *c == condition && *at >= failed))
                .map(|(_, at)| *at)
        };
        if retried {
            let restarting = wait(deadline, || async { answered(JobConditionType::Restarting) })
                .await
                .ok_or_else(|| format!("round {round}: Restarting never seen"))?;
            let replaced = wait(deadline, || async {
                let seen = lock(seen);
                seen.pod_added
                    .iter()
                    .filter(|((name, u), at)| *name == target && *u != uid && **at >= failed)
                    .map(|(_, at)| *at)
                    .min()
            })
            .await
            .ok_or_else(|| format!("round {round}: {target} never replaced"))?;
            samples[0].push(restarting.duration_since(failed).as_secs_f64());
            samples[1].push(replaced.duration_since(failed).as_secs_f64());
        } else {
            let done = wait(deadline, || async { answered(JobConditionType::Failed) })
                .await
                .ok_or_else(|| format!("round {round}: Failed never seen"))?;
            samples[2].push(done.duration_since(failed).as_secs_f64());
        }
        ended.push(uid);
    }
    Ok(samples)
}

fn lock(seen: &Shared) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Polls `probe` every [`POLL`] until it answers or `deadline` passes.
async fn wait<T, F, Fut>(deadline: Instant, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    loop {
        if let Some(value) = probe().await {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn watch_pods(client: Client, ns: &'static str, seen: Shared) {
    let api: Api<Pod> = Api::namespaced(client, ns);
    let mut events = std::pin::pin!(
        watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    while let Some(event) = events.next().await {
        let Ok(pod) = event else { continue };
        let now = Instant::now();
        let key = (pod.name_any(), pod.uid().unwrap_or_default());
        let mut seen = lock(&seen);
        seen.pod_added.entry(key.clone()).or_insert(now);
        let phase = pods::phase(&pod);
        if phase == "Failed" {
            seen.pod_failed.entry(key.clone()).or_insert(now);
        }
        if phase == "Running" {
            seen.pod_running.insert(key);
        }
        if let Some(job) = pod.labels().get("training.kubeflow.org/job-name") {
            seen.phases
                .entry(job.clone())
                .or_default()
                .insert(pod.name_any(), phase.to_owned());
        }
    }
}

async fn watch_jobs(client: Client, ns: &'static str, scheme: Scheme, seen: Shared) {
    let api: Api<DynamicObject> = Api::namespaced_with(client, ns, &samples::api_resource(scheme));
    let mut events = std::pin::pin!(
        watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    while let Some(event) = events.next().await {
        let Ok(job) = event else { continue };
        let now = Instant::now();
        let status: JobStatus = job
            .data
            .get("status")
            .cloned()
            .and_then(|s| serde_json::from_value(s).ok())
            .unwrap_or_default();
        let true_now: Vec<JobConditionType> = status
            .conditions
            .iter()
            .filter(|c| status.is(c.type_))
            .map(|c| c.type_)
            .collect();
        let name = job.name_any();
        let mut seen = lock(&seen);
        let before = seen
            .true_now
            .insert(name.clone(), true_now.clone())
            .unwrap_or_default();
        let turned: Vec<(JobConditionType, Instant)> = true_now
            .into_iter()
            .filter(|c| !before.contains(c))
            .map(|c| (c, now))
            .collect();
        seen.became_true.entry(name).or_default().extend(turned);
    }
}

fn write(results: &ReactionResults, dir: &Path) -> Result<()> {
    let path = dir.join("reaction.json");
    std::fs::write(&path, serde_json::to_string_pretty(results)?).map_err(|e| Error::io(&path, e))?;
    let path = dir.join("reaction.md");
    std::fs::write(&path, markdown(results)).map_err(|e| Error::io(&path, e))
}

/// The results as Markdown: p50 / p99 per answer and mode, then by kind.
pub fn markdown(r: &ReactionResults) -> String {
    let cell = |p: &Option<Percentiles>| {
        p.as_ref().map_or("-".to_owned(), |p| {
            format!("{:.2} / {:.2} ({})", p.p50, p.p99, p.count)
        })
    };
    let mut text = format!(
        "# kfop failure reaction\n\n{} live jobs of {} kinds, each failing {} times with a retried exit code and once \
         with one that is not, each failure the moment the pod runs. Seconds from the pod seen Failed, p50 / p99 \
         (failures):\n\n| operator | to Restarting | to the replacement pod | to Failed |\n|---|---|---|---|\n",
        r.jobs,
        KINDS.len(),
        r.restarts_per_job
    );
    for (mode, a) in &r.modes {
        text.push_str(&format!(
            "| {mode} | {} | {} | {} |\n",
            cell(&a.restarting),
            cell(&a.replaced),
            cell(&a.failed)
        ));
    }
    for (mode, a) in &r.modes {
        text.push_str(&format!(
            "\n## {mode}, by kind\n\n| kind | to Restarting | to the replacement pod | to Failed |\n|---|---|---|---|\n"
        ));
        for (kind, k) in &a.by_kind {
            text.push_str(&format!(
                "| {kind} | {} | {} | {} |\n",
                cell(&k.restarting),
                cell(&k.replaced),
                cell(&k.failed)
            ));
        }
        if !a.operator_histogram.is_empty() {
            text.push_str("\nThe operator's kfop_failure_reaction_seconds (answers; mean s):");
            for (key, (count, mean)) in &a.operator_histogram {
                text.push_str(&format!(" {key}: {count:.0}; {mean:.3}."));
            }
            text.push('\n');
        }
        for missing in &a.missing {
            text.push_str(&format!("- missing: {missing}\n"));
        }
    }
    text
}
