#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout)]
//! The lifecycle metrics agree with the jobs' own timestamps: `kfop-operator` runs four
//! PyTorchJobs on the local plane, one created suspended and resumed two seconds later; its
//! `/metrics` then counts each job once in `kfop_job_pods_created_seconds` and
//! `kfop_job_pods_running_seconds`, with values bounded by the jobs' and pods' timestamps, the
//! suspension in `kfop_job_held_seconds` as its conditions date it, and an empty queue
//! (`workqueue_depth` 0) that every job passed through (`workqueue_queue_duration_seconds`).
//!
//! Timestamps have one-second resolution, and each stage is observed by the first reconcile
//! after it happened: a recorded value lies between what the timestamps give and that plus 1 s
//! (truncation) plus the reconcile's lag behind the pod event (the controller coalesces a job's
//! child events for up to a second, then the watch and the queue: [`LAG`] allows for a loaded,
//! shared CI machine).
mod common;

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use kfop_operator::samples;
use kfop_operator::schemes::{self, Scheme};
use kfop_runtime::k8s_openapi::api::core::v1::Pod;
use kfop_runtime::k8s_openapi::jiff::Timestamp;
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kfop_testenv::peer::{OperatorProcess, http_get};
use kfop_testenv::{TestEnv, TestNamespace, wait};
use serde_json::{Value, json};

use common::{job_pods, pod_count, running_pods};

/// The most a reconcile may trail the event it observes here.
const LAG: f64 = 4.0;
/// Timestamps' resolution.
const TRUNCATION: f64 = 1.0;
const KIND: &str = r#"kind="PyTorchJob""#;
const QUEUE: &str = r#"name="pytorchjob-controller""#;

/// One sample's value: the line starting with `name{` whose labels contain `labels`.
fn sample(metrics: &str, name: &str, labels: &str) -> Option<f64> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix('{'))
        .filter_map(|rest| rest.split_once("} "))
        .find(|(l, _)| l.contains(labels))
        .and_then(|(_, v)| v.parse().ok())
}

/// A histogram's buckets `(le, count)`, its count and its sum.
fn histogram(metrics: &str, name: &str, labels: &str) -> (Vec<(f64, f64)>, f64, f64) {
    let buckets = metrics
        .lines()
        .filter_map(|l| {
            l.strip_prefix(&format!("{name}_bucket{{le=\""))?
                .split_once("\",")
        })
        .filter(|(_, rest)| rest.contains(labels))
        .filter_map(|(le, rest)| {
            Some((
                le.parse().unwrap_or(f64::INFINITY),
                rest.split_once("} ")?.1.parse().ok()?,
            ))
        })
        .collect();
    let count = sample(metrics, &format!("{name}_count"), labels).unwrap_or(0.0);
    let sum = sample(metrics, &format!("{name}_sum"), labels).unwrap_or(0.0);
    (buckets, count, sum)
}

/// Seconds from `from` to `to`.
fn seconds(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64()
}

/// The histogram holds one value per entry of `expected`, each in `[e, e + slack]`: its count,
/// its sum, and every bucket's count lie within what those ranges allow.
fn agrees(metrics: &str, name: &str, labels: &str, expected: &[f64], slack: f64) {
    let (buckets, count, sum) = histogram(metrics, name, labels);
    println!("{name}{{{labels}}}: count {count}, sum {sum:.2}, timestamps give {expected:.1?}");
    assert_eq!(count, expected.len() as f64, "{name}: one value per job");
    let low: f64 = expected.iter().sum();
    assert!(
        (low..=low + slack * count).contains(&sum),
        "{name}: sum {sum} outside [{low}, {}]",
        low + slack * count
    );
    assert!(!buckets.is_empty(), "{name}: no buckets");
    for (le, in_bucket) in buckets {
        let surely = expected.iter().filter(|e| *e + slack <= le).count() as f64;
        let maybe = expected.iter().filter(|e| **e <= le).count() as f64;
        assert!(
            (surely..=maybe).contains(&in_bucket),
            "{name}: bucket le={le} holds {in_bucket}, timestamps allow {surely}..={maybe}"
        );
    }
}

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn scrape(metrics: SocketAddr) -> String {
    http_get(metrics, "/metrics")
        .map(|(_, body)| body)
        .unwrap_or_default()
}

fn timestamp(value: &Value) -> Timestamp {
    value.as_str().unwrap().parse().unwrap()
}

/// When the job's `type_` condition last became `status`.
fn condition_time(job: &DynamicObject, type_: &str, status: &str) -> Option<Timestamp> {
    job.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == status)
        .map(|c| timestamp(&c["lastTransitionTime"]))
}

async fn start(env: &TestEnv, ns: &TestNamespace, metrics: SocketAddr) -> OperatorProcess {
    let args = [
        format!("--namespace={}", ns.name()),
        "--enable-scheme=pytorchjob".to_owned(),
        format!("--metrics-bind-address={metrics}"),
    ];
    common::start_operator(env, &args, metrics, &[]).await
}

#[tokio::test]
async fn lifecycle_histograms_agree_with_the_jobs_timestamps() {
    let started = Instant::now();
    let env = TestEnv::shared().unwrap();
    let pytorch = schemes::parse(&["pytorchjob".to_owned()]).unwrap();
    env.install_crds(pytorch.iter().map(|s| s.crd_without_conversion()))
        .await
        .unwrap();
    let ns = env.namespace("lifecycle").await.unwrap();
    let metrics = free_addr();
    let mut operator = start(env, &ns, metrics).await;

    let api: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &samples::api_resource(Scheme::PyTorchJob));
    let names = ["run-0", "run-1", "run-2", "held"];
    for name in names {
        let (_, mut job) = samples::sample(Scheme::PyTorchJob).unwrap();
        job.metadata.name = Some(name.to_owned());
        if name == "held" {
            job.data["spec"]["runPolicy"]["suspend"] = json!(true);
        }
        api.create(&PostParams::default(), &job).await.unwrap();
    }
    wait::until("held suspended", wait::default_timeout(), || async {
        let job = api.get("held").await.ok();
        Ok(job.filter(|j| condition_time(j, "Suspended", "True").is_some()))
    })
    .await
    .unwrap();
    // A hold long enough to stand out from the others' times.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let resume = json!({ "spec": { "runPolicy": { "suspend": false } } });
    api.patch("held", &PatchParams::default(), &Patch::Merge(&resume))
        .await
        .unwrap();

    let pods = pod_count(Scheme::PyTorchJob);
    let (mut to_created, mut to_running) = (Vec::new(), Vec::new());
    for name in names {
        running_pods(&ns, name, pods).await;
        let job = api.get(name).await.unwrap();
        let created = job.creation_timestamp().unwrap().0;
        let job_pods: Vec<Pod> = job_pods(&ns, name).await;
        let last = |of: fn(&Pod) -> Timestamp| job_pods.iter().map(of).max().unwrap();
        to_created.push(seconds(created, last(|p| p.creation_timestamp().unwrap().0)));
        let start_time = |p: &Pod| p.status.as_ref().unwrap().start_time.as_ref().unwrap().0;
        to_running.push(seconds(created, last(start_time)));
    }
    let held = api.get("held").await.unwrap();
    let resumed = condition_time(&held, "Suspended", "False").expect("resumed");
    let held_for = seconds(held.creation_timestamp().unwrap().0, resumed);

    // The last reconcile may still be on its way when the pods show Running.
    let text = wait::until("every job counted Running", wait::default_timeout(), || async {
        let text = scrape(metrics);
        let done = sample(&text, "kfop_job_pods_running_seconds_count", KIND) == Some(names.len() as f64)
            && sample(&text, "workqueue_depth", QUEUE) == Some(0.0);
        Ok(done.then_some(text))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; /metrics:\n{}", scrape(metrics)));

    let slack = TRUNCATION + LAG;
    agrees(&text, "kfop_job_pods_created_seconds", KIND, &to_created, slack);
    agrees(&text, "kfop_job_pods_running_seconds", KIND, &to_running, slack);
    // Recorded by the reconcile that wrote the resumed condition, right after planning it at its
    // clock: the condition's truncation, and the milliseconds from the plan to the record.
    agrees(
        &text,
        "kfop_job_held_seconds",
        &format!(r#"{KIND},reason="suspended""#),
        &[held_for],
        TRUNCATION + 0.25,
    );
    assert!(held_for >= 2.0, "held {held_for} s, resumed after 2 s");

    // Every job waited in the queue at least once, none longer than the test ran.
    let (_, waits, waited) = histogram(&text, "workqueue_queue_duration_seconds", QUEUE);
    assert!(waits >= names.len() as f64, "{waits} queue waits");
    assert!(
        waited <= waits * started.elapsed().as_secs_f64(),
        "{waited} s waited in all"
    );
    operator.check_alive().unwrap();
    println!("lifecycle metrics: {:.1} s", started.elapsed().as_secs_f64());
}
