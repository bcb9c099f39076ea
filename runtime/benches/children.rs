//! What one reconcile pays to find its job's pods, with N live jobs of 4 pods each cached: the
//! owner index (`Children::of`) against the scan of every cached pod it replaced, measured in
//! the same run. Prints a table; asserts nothing about time.
//!
//! `cargo bench -p kfop-runtime --bench children`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
use std::hint::black_box;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kfop_runtime::children::Children;
use kfop_runtime::relist::Settled;
use kube::runtime::reflector;
use kube::runtime::watcher::Event;

const PODS_PER_JOB: usize = 4;

fn pod(job: usize, index: usize) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some(format!("job-{job}-worker-{index}"));
    pod.metadata.namespace = Some("bench".into());
    pod.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "kubeflow.org/v1".into(),
        kind: "PyTorchJob".into(),
        name: format!("job-{job}"),
        uid: format!("uid-{job}"),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    pod
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

fn main() {
    println!("| live jobs | cached pods | index µs/reconcile | scan µs/reconcile | scan / index |");
    println!("|---:|---:|---:|---:|---:|");
    for jobs in [100, 1_000, 10_000] {
        let (store, mut writer) = reflector::store::<Pod>();
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
                .filter(|p| {
                    p.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.controller == Some(true) && o.uid == uid)
                })
                .count()
        });
        println!(
            "| {jobs} | {} | {index:.2} | {scan:.2} | {:.0}x |",
            jobs * PODS_PER_JOB,
            scan / index
        );
    }
}
