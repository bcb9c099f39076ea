//! What one reconcile pays to find its job's pods, with N live jobs of 4 pods each cached: the
//! owner index (`Children::of`) against the scan of every cached pod it replaced, measured in
//! the same run; and a whole pure pass (the index lookup, then planning the job from its
//! running pods), whose cost must not grow with N. Prints a table; asserts nothing about time.
//!
//! `cargo bench -p kfop-runtime --bench children`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
use std::hint::black_box;
use std::time::Instant;

use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
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

/// Mean microseconds per lookup of `lookups` jobs' pods.
fn mean_micros(lookups: usize, mut find: impl FnMut(usize) -> usize) -> f64 {
    let started = Instant::now();
    let mut found = 0;
    for i in 0..lookups {
        found += find(i);
    }
    black_box(found);
    started.elapsed().as_secs_f64() * 1e6 / lookups as f64
}

/// `job-<n>` with the 4 workers of [`pod`], its uid the pods' owner.
fn test_job(n: usize) -> TestJob {
    let mut j = job("bench", &format!("job-{n}"), &[("Worker", replica(4, None))]);
    j.metadata.uid = Some(format!("uid-{n}"));
    j
}

fn main() {
    println!(
        "| live jobs | cached pods | index µs/reconcile | scan µs/reconcile | scan / index | index + plan µs/reconcile |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    let framework = TestFramework::default().loaded();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut first_pass = None;
    for jobs in [100, 1_000, 10_000] {
        let job_objects: Vec<TestJob> = (0..jobs).map(test_job).collect();
        let (store, mut writer) = reflector::store::<CachedPod>();
        let children = Children::new(store.clone(), ());
        for job in 0..jobs {
            for index in 0..PODS_PER_JOB {
                let p = pod(job, index);
                writer.apply_watcher_event(&Event::Apply(p.clone()));
                children.record(&Settled::Present(p));
            }
        }
        let lookups = 2_000;
        let uid = |i: usize| format!("uid-{}", (i * 7919) % jobs);
        let index = mean_micros(lookups, |i| {
            let pods = children.of(&uid(i));
            assert_eq!(pods.len(), PODS_PER_JOB);
            pods.len()
        });
        let scan = mean_micros(lookups, |i| {
            let uid = uid(i);
            store
                .state()
                .into_iter()
                .filter(|p| p.controller().is_some_and(|o| o.uid == uid))
                .count()
        });
        let pass = mean_micros(lookups, |i| {
            let job = &job_objects[(i * 7919) % jobs];
            let observed = Observed {
                pods: children.of(&uid(i)),
                ..Observed::default()
            };
            let p = plan(&framework, job, &observed, &now).unwrap();
            p.create_pods.len() + observed.pods.len()
        });
        println!(
            "| {jobs} | {} | {index:.2} | {scan:.2} | {:.0}x | {pass:.2} |",
            jobs * PODS_PER_JOB,
            scan / index
        );
        let base = *first_pass.get_or_insert(pass);
        if jobs == 10_000 {
            println!("\nwhole pass at 10000 live jobs / at 100: {:.2}x", pass / base);
        }
    }
}
