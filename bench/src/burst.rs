//! `--burst-jobs N` with `--soak`: the benchmark's N PyTorchJobs (1 master + 3 workers whose pods end
//! with exit code 0) submitted all at once when the soak starts, next to its mixed work. Under
//! `--chaos` they meet the operator kills first and the other faults while they drain. Every job
//! must reach Succeeded and stay there, with its replica counts right, and then be deleted.
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use serde::Serialize;

use crate::error::Result;
use crate::observe::Observed;
use crate::retry;
use crate::stats::{self, Percentiles};
use crate::submit::{self, MASTERS, PODS_PER_JOB, Pace, WORKERS};

/// Deletes in flight when the burst is cleaned up.
const DELETE_PARALLELISM: usize = 32;
/// How long a request may keep failing (an API server restarting) before it counts as failed.
const RETRY_FOR: Duration = Duration::from_secs(120);

/// What became of the burst.
#[derive(Debug, Default, Serialize)]
pub struct BurstResults {
    pub jobs: usize,
    pub succeeded: usize,
    /// Seconds from submission to Succeeded, per job.
    pub to_succeeded: Option<Percentiles>,
    /// Seconds from the first submission to the last job's Succeeded.
    pub all_succeeded_seconds: Option<f64>,
    /// Jobs that never reached Succeeded.
    pub stranded: Vec<String>,
    /// Jobs seen leaving Succeeded (or Running again) after reaching it.
    pub regressed: Vec<String>,
    /// Jobs whose final replica statuses are impossible for a job that succeeded: the master not
    /// succeeded, a failure or an active replica counted, or more replicas than the job has.
    pub wrong_counts: Vec<String>,
    /// Jobs that could not be deleted or did not go.
    pub not_deleted: Vec<String>,
}

/// The names the burst's jobs get.
pub fn names(jobs: usize) -> Vec<String> {
    (0..jobs).map(submit::job_name).collect()
}

/// Submits `jobs` PyTorchJobs into `namespace` at once, waits up to `within` for them to
/// succeed, checks their counts, deletes them and waits until they are gone.
pub async fn run(
    client: &Client,
    namespace: &str,
    jobs: usize,
    parallelism: usize,
    train: Duration,
    within: Duration,
) -> Result<BurstResults> {
    let observed = Observed::new(Instant::now(), PODS_PER_JOB);
    let watches = observed.watch(client, namespace, Some(&submit::pytorch_resource()));
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &submit::pytorch_resource());
    submit::submit(&api, jobs, train, Pace::AllAtOnce { parallelism }, &observed).await?;
    observed
        .wait_until(within, "the burst to succeed", |t| {
            t.count(|m| m.succeeded) >= jobs
        })
        .await;
    let mut results = BurstResults {
        jobs,
        wrong_counts: settled_counts(&api, jobs).await,
        ..BurstResults::default()
    };
    results.not_deleted = delete_all(&api, jobs).await;
    for watch in watches {
        watch.abort();
    }
    let timeline = observed.snapshot();
    let marks = timeline.submitted_jobs();
    results.succeeded = timeline.count(|m| m.succeeded);
    results.to_succeeded = Percentiles::of(&stats::latencies(
        marks.iter().filter_map(|m| m.submitted.map(|s| (s, m.succeeded))),
    ));
    let first = marks.first().and_then(|m| m.submitted).unwrap_or_default();
    results.all_succeeded_seconds =
        stats::all_reached(&marks.iter().map(|m| m.succeeded).collect::<Vec<_>>()).map(|last| last - first);
    results.stranded = timeline
        .jobs
        .iter()
        .filter(|(_, m)| m.submitted.is_some() && m.succeeded.is_none())
        .map(|(name, _)| name.clone())
        .collect();
    results.regressed = timeline.regressed();
    Ok(results)
}

/// The burst's jobs whose replica statuses do not count every replica as succeeded.
/// How long a job's counts may take to settle after it succeeded.
const SETTLE_FOR: Duration = Duration::from_secs(30);

/// [`wrong_counts`] once the counts have settled: the pass that sets Succeeded writes the counts
/// it saw (a worker may still be Running then), and the next pass, a moment later as in
/// Kubeflow's `ReconcileJobs`, moves active replicas to succeeded. Under chaos that pass can wait
/// for a restarted operator, so counts that are still wrong after [`SETTLE_FOR`] are reported.
async fn settled_counts(api: &Api<DynamicObject>, jobs: usize) -> Vec<String> {
    let deadline = Instant::now() + SETTLE_FOR;
    loop {
        let wrong = wrong_counts(api, jobs).await;
        if wrong.is_empty() || Instant::now() >= deadline {
            return wrong;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn wrong_counts(api: &Api<DynamicObject>, jobs: usize) -> Vec<String> {
    let names: BTreeSet<String> = names(jobs).into_iter().collect();
    let all = ListParams::default();
    let list = match retry::until(Instant::now() + RETRY_FOR, Duration::from_secs(1), || {
        api.list(&all)
    })
    .await
    {
        Ok(list) => list,
        Err(e) => return vec![format!("listing the burst: {e}")],
    };
    list.items
        .iter()
        .filter(|job| names.contains(&job.name_any()))
        .filter_map(|job| {
            let statuses = job.data.pointer("/status/replicaStatuses")?;
            let count = |role: &str, field: &str| {
                let n = statuses
                    .pointer(&format!("/{role}/{field}"))
                    .and_then(serde_json::Value::as_u64);
                usize::try_from(n.unwrap_or(0)).unwrap_or(usize::MAX)
            };
            // Kubeflow counts only Running, Succeeded and Failed pods, and a PyTorchJob succeeds
            // with its master: a worker still Pending then is in no count. So: the master
            // succeeded, nothing failed or is still active, and no role counts past its replicas.
            let wrong = count("Master", "succeeded") != MASTERS
                || [("Master", MASTERS), ("Worker", WORKERS)]
                    .iter()
                    .any(|(role, replicas)| {
                        count(role, "active") != 0
                            || count(role, "failed") != 0
                            || count(role, "succeeded") > *replicas
                    });
            wrong.then(|| format!("{}: {statuses}", job.name_any()))
        })
        .collect()
}

/// Deletes every job of the burst and waits until they are gone; what could not be.
async fn delete_all(api: &Api<DynamicObject>, jobs: usize) -> Vec<String> {
    let failed: Vec<String> = futures::stream::iter(names(jobs))
        .map(|name| async move {
            let deleted = retry::until(Instant::now() + RETRY_FOR, Duration::from_secs(1), || async {
                match api.delete(&name, &DeleteParams::background()).await {
                    Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                    other => other.map(|_| ()),
                }
            })
            .await;
            deleted.err().map(|e| format!("{name}: {e}"))
        })
        .buffer_unordered(DELETE_PARALLELISM)
        .filter_map(|failed| async move { failed })
        .collect()
        .await;
    if !failed.is_empty() {
        return failed;
    }
    let names: BTreeSet<String> = names(jobs).into_iter().collect();
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        let left: Vec<String> = match api.list(&ListParams::default()).await {
            Ok(list) => list
                .items
                .iter()
                .map(ResourceExt::name_any)
                .filter(|name| names.contains(name))
                .collect(),
            Err(e) => vec![format!("listing the burst: {e}")],
        };
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
