//! What one reconcile pays to find its job's pods, with N live jobs of 4 pods each cached: the
//! owner index (`Children::of`) against the scan of every cached pod it replaced, measured in
//! the same run; and a whole pure pass (the index lookup, then planning the job from its
//! running pods), whose cost must not grow with N. Prints a table; asserts nothing about time.
//! Each figure is the fastest of [`ROUNDS`] rounds of a few milliseconds, the sizes' rounds
//! taking turns, so that other processes on a shared machine inflate it less, and each size
//! alike (a round the scheduler preempted is not the fastest).
//!
//! `cargo bench -p kfop-runtime --bench children`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
use std::hint::black_box;
use std::time::Instant;

use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kfop_runtime::Loaded;
use kfop_runtime::child_index::{Cached, Children};
use kfop_runtime::compact::CachedPod;
use kfop_runtime::labels;
use kfop_runtime::plan::{Observed, ObservedPod, plan};
use kfop_runtime::relist::Settled;
use kfop_runtime::testing::{TestFramework, TestJob, job, replica};
use kube::runtime::reflector;
use kube::runtime::watcher::Event;

const PODS_PER_JOB: usize = 4;

/// A running worker pod of `job-<job>`, labelled as the planner labels its pods.
fn pod(job: usize, index: usize) -> CachedPod {
    let mut pod = ObservedPod::default();
    pod.metadata.name = Some(format!("job-{job}-worker-{index}"));
    pod.metadata.namespace = Some("bench".into());
    pod.metadata.labels = Some(
        [
            (labels::JOB_NAME, format!("job-{job}")),
            (labels::REPLICA_TYPE, "worker".to_owned()),
            (labels::REPLICA_INDEX, index.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
    );
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    });
    pod.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "kubeflow.org/v1".into(),
        kind: "PyTorchJob".into(),
        name: format!("job-{job}"),
        uid: format!("uid-{job}"),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    pod.into()
}

/// Rounds of each measurement; the fastest counts.
const ROUNDS: usize = 40;
/// Lookups per round: a few milliseconds, so that some rounds run without being preempted.
const LOOKUPS: usize = 500;

/// One measurement: a lookup's cost, the fastest mean of any round so far. Each round looks up
/// the next jobs, so at 10,000 jobs a round does not find the last one's in the CPU caches.
#[derive(Default)]
struct Fastest {
    next: usize,
    micros: Option<f64>,
}

impl Fastest {
    fn round(&mut self, lookups: usize, mut find: impl FnMut(usize) -> usize) {
        let started = Instant::now();
        let mut found = 0;
        for i in self.next..self.next + lookups {
            found += find(i);
        }
        black_box(found);
        self.next += lookups;
        let mean = started.elapsed().as_secs_f64() * 1e6 / lookups as f64;
        self.micros = Some(self.micros.map_or(mean, |m| m.min(mean)));
    }

    fn micros(&self) -> f64 {
        self.micros.unwrap_or(f64::NAN)
    }
}

/// `job-<n>` with the 4 workers of [`pod`], its uid the pods' owner.
fn test_job(n: usize) -> TestJob {
    let mut j = job("bench", &format!("job-{n}"), &[("Worker", replica(4, None))]);
    j.metadata.uid = Some(format!("uid-{n}"));
    j
}

/// `jobs` live jobs of [`PODS_PER_JOB`] running pods each, cached and indexed.
struct Live {
    jobs: usize,
    job_objects: Vec<TestJob>,
    store: reflector::Store<CachedPod>,
    children: Children<CachedPod>,
}

impl Live {
    fn new(jobs: usize) -> Self {
        let (store, mut writer) = reflector::store::<CachedPod>();
        let children = Children::new(store.clone(), ());
        for job in 0..jobs {
            for index in 0..PODS_PER_JOB {
                let p = pod(job, index);
                writer.apply_watcher_event(&Event::Apply(p.clone()));
                children.record(&Settled::Present(p));
            }
        }
        Self {
            jobs,
            job_objects: (0..jobs).map(test_job).collect(),
            store,
            children,
        }
    }

    /// The job of the `i`th lookup, spread over all jobs.
    fn pick(&self, i: usize) -> usize {
        (i * 7919) % self.jobs
    }

    fn uid(&self, i: usize) -> String {
        format!("uid-{}", self.pick(i))
    }

    fn index(&self, i: usize) -> usize {
        let pods = self.children.of(&self.uid(i));
        assert_eq!(pods.len(), PODS_PER_JOB);
        pods.len()
    }

    fn scan(&self, i: usize) -> usize {
        let uid = self.uid(i);
        (self.store.state().into_iter())
            .filter(|p| p.controller().is_some_and(|o| o.uid == uid))
            .count()
    }

    fn pass(&self, framework: &Loaded<TestFramework>, now: &Time, i: usize) -> usize {
        let job = &self.job_objects[self.pick(i)];
        let observed = Observed {
            pods: self.children.of(&self.uid(i)),
            ..Observed::default()
        };
        let p = plan(framework, job, &observed, now).unwrap();
        p.create_pods.len() + observed.pods.len()
    }
}

fn main() {
    let framework = TestFramework::default().loaded();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let sizes = [100, 1_000, 10_000];
    let live: Vec<Live> = sizes.into_iter().map(Live::new).collect();
    let mut index: Vec<Fastest> = sizes.iter().map(|_| Fastest::default()).collect();
    let mut scan: Vec<Fastest> = sizes.iter().map(|_| Fastest::default()).collect();
    let mut pass: Vec<Fastest> = sizes.iter().map(|_| Fastest::default()).collect();
    // Rounds alternate between the sizes, so a busy spell of the machine slows each alike; the
    // first round of each warms the allocator and is measured like the rest.
    for round in 0..ROUNDS {
        for (n, live) in live.iter().enumerate() {
            index[n].round(LOOKUPS, |i| live.index(i));
            pass[n].round(LOOKUPS, |i| live.pass(&framework, &now, i));
            // A scan reads every cached pod: a few rounds of a few lookups give its size.
            if round < 3 {
                scan[n].round(LOOKUPS / 50, |i| live.scan(i));
            }
        }
    }
    println!(
        "| live jobs | cached pods | index µs/reconcile | scan µs/reconcile | scan / index | index + plan µs/reconcile |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for (n, jobs) in sizes.iter().enumerate() {
        let (index, scan, pass) = (index[n].micros(), scan[n].micros(), pass[n].micros());
        println!(
            "| {jobs} | {} | {index:.2} | {scan:.2} | {:.0}x | {pass:.2} |",
            jobs * PODS_PER_JOB,
            scan / index
        );
    }
    println!(
        "\nwhole pass at 10000 live jobs / at 100: {:.2}x (fastest of {ROUNDS} rounds each)",
        pass[2].micros() / pass[0].micros()
    );
}
