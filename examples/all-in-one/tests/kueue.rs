#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout)]
//! Kueue v0.17.0 and v0.19.2 next to kfop: Kueue (built from its Go module, run out of cluster by
//! `kfop_testenv::Peer`, its integrations `kubeflow.org/{pytorchjob,tfjob,mpijob,...}` on: v0.19
//! has them off unless its configuration lists them, as this one does) queues
//! PyTorchJobs, TFJobs and MPIJobs (then XGBoost, Paddle and JAX jobs) labelled
//! `kueue.x-k8s.io/queue-name` against a ClusterQueue's CPU quota. Its webhook suspends them at creation; the ones that fit are admitted (un-suspended)
//! and kfop runs them to Succeeded, which finishes their Workloads and frees the quota for the
//! ones that waited suspended, with no pods. A job `managedBy` MultiKueue is left alone by kfop.
use std::time::Duration;

use kfop_operator::samples;
use kfop_operator::schemes::{self, Scheme};
use kfop_runtime::api::JobConditionType;
use kfop_runtime::k8s_openapi::api::core::v1::Pod;
use kfop_runtime::kube::Api;
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::kube::api::{DynamicObject, PostParams};
use kfop_runtime::serde_json::json;
use kfop_runtime::testing::Operator;
use kfop_testenv::peer::{KUEUE_V0_17_0, KUEUE_V0_19_2};
use kfop_testenv::{Peer, PeerOptions, TestEnv, TestNamespace, pods, wait};

mod common;
use common::{
    LOCAL_QUEUE, QUEUE_LABEL, job_pods, pod_count, queues, running_pods, status, until_succeeded, workload,
};

/// `scheme`'s sample job named `name`, each pod requesting one CPU (and nothing else: the
/// ClusterQueue covers CPU only), labelled for the LocalQueue unless `queue` is false.
fn job(scheme: Scheme, name: &str, queue: bool) -> DynamicObject {
    let (_, mut job) = samples::sample(scheme).unwrap();
    job.metadata.name = Some(name.to_owned());
    if queue {
        job.metadata.labels = Some([(QUEUE_LABEL.to_owned(), LOCAL_QUEUE.to_owned())].into());
    }
    for spec in samples::replica_specs_mut(&mut job).unwrap().values_mut() {
        for container in spec["template"]["spec"]["containers"].as_array_mut().unwrap() {
            container["resources"] = json!({ "requests": { "cpu": "1" } });
        }
    }
    job
}

fn jobs(ns: &TestNamespace, scheme: Scheme) -> Api<DynamicObject> {
    Api::namespaced_with(ns.client(), ns.name(), &samples::api_resource(scheme))
}

fn suspended(job: &DynamicObject) -> bool {
    job.data["spec"]["runPolicy"]["suspend"] == json!(true)
}

/// Creates the job; Kueue's mutating webhook must have suspended it in the create itself.
async fn create_queued(ns: &TestNamespace, scheme: Scheme, name: &str) {
    let created = jobs(ns, scheme)
        .create(&PostParams::default(), &job(scheme, name, true))
        .await
        .unwrap();
    assert!(
        suspended(&created),
        "{name}: Kueue did not suspend it at creation: {:?}",
        created.data["spec"]["runPolicy"]
    );
}

/// Waits until Kueue has admitted the job (its Workload Admitted, the job un-suspended) and kfop
/// runs all its pods.
async fn admitted_and_running(ns: &TestNamespace, scheme: Scheme, name: &str) -> Vec<Pod> {
    workload(&ns.client(), ns.name(), name, Some(("Admitted", true))).await;
    let api = jobs(ns, scheme);
    wait::until(&format!("{name} un-suspended"), wait::default_timeout(), || {
        let api = api.clone();
        async move { Ok(api.get(name).await.ok().filter(|j| !suspended(j)).map(|_| ())) }
    })
    .await
    .unwrap();
    running_pods(ns, name, pod_count(scheme)).await
}

/// Ends the job's pods with exit code 0, the ones that decide success (master, launcher) last, so
/// that none is cleaned up before it is ended; then waits for kfop's Succeeded.
async fn finish_and_succeed(ns: &TestNamespace, scheme: Scheme, name: &str, pods_of_job: Vec<Pod>) {
    let mut pods_of_job = pods_of_job;
    let decides = |p: &Pod| {
        let role = p.labels().get("training.kubeflow.org/replica-type").cloned();
        matches!(role.as_deref(), Some("master" | "launcher"))
    };
    pods_of_job.sort_by_key(|p| decides(p));
    let pod_api: Api<Pod> = ns.api();
    for pod in &pods_of_job {
        pods::finish(&pod_api, &pod.name_any(), 0, 0).await.unwrap();
    }
    until_succeeded(&jobs(ns, scheme), name, "after Kueue admitted it").await;
}

#[tokio::test]
async fn kueue_queues_kubeflow_jobs_that_kfop_runs() {
    queues_kubeflow_jobs(KUEUE_V0_17_0, "kueue").await;
}

/// The same with Kueue v0.19.2, its Kubeflow integrations listed in its configuration.
#[tokio::test]
async fn kueue_v0_19_queues_kubeflow_jobs_that_kfop_runs() {
    queues_kubeflow_jobs(KUEUE_V0_19_2, "kueue19").await;
}

async fn queues_kubeflow_jobs(peer: &str, namespace: &str) {
    let started = std::time::Instant::now();
    let env = TestEnv::shared().unwrap();
    let all = schemes::parse(&[]).unwrap();
    env.install_crds(all.iter().map(|s| s.crd_without_conversion()))
        .await
        .unwrap();
    let ns = env.namespace(namespace).await.unwrap();
    let options = PeerOptions {
        peer: peer.to_owned(),
        operator_namespace: "kueue-system".to_owned(),
        ..PeerOptions::default()
    };
    let kueue = Peer::start(env.kubeconfig(), ns.name(), options).await.unwrap();
    let _operator = Operator::start_with(
        ns.client(),
        ns.name(),
        |_| {},
        move |m| kfop_operator::register(m, &all, &Default::default()).unwrap(),
    );

    // The first three fill the quota exactly.
    let first = [
        (Scheme::PyTorchJob, "pt-first"),
        (Scheme::TfJob, "tf-first"),
        (Scheme::MpiJob, "mpi-first"),
    ];
    let quota: usize = first.iter().map(|(s, _)| pod_count(*s)).sum();
    queues(&ns.client(), ns.name(), quota, None).await;

    // Dispatched to a MultiKueue worker cluster: this cluster's operator must not run it.
    let elsewhere = "pt-multikueue";
    let mut multikueue = job(Scheme::PyTorchJob, elsewhere, false);
    multikueue.data["spec"]["runPolicy"] = json!({ "managedBy": "kueue.x-k8s.io/multikueue" });
    jobs(&ns, Scheme::PyTorchJob)
        .create(&PostParams::default(), &multikueue)
        .await
        .unwrap();

    let mut running = Vec::new();
    let mut created = Vec::new();
    for (scheme, name) in first {
        created.push(std::time::Instant::now());
        create_queued(&ns, scheme, name).await;
    }
    for ((scheme, name), at) in first.into_iter().zip(created) {
        running.push(admitted_and_running(&ns, scheme, name).await);
        println!(
            "{peer} {name}: created to all pods running {:.2} s",
            at.elapsed().as_secs_f64()
        );
    }

    // With the quota used up, the next ones wait suspended: Kueue reserves them no quota, and
    // kfop reports them Suspended and creates no pods.
    // The other kinds Kueue integrates: 7 CPUs, so that all fit once the first ones are done.
    let waiting = [
        (Scheme::XgBoostJob, "xgb-waiting"),
        (Scheme::PaddleJob, "paddle-waiting"),
        (Scheme::JaxJob, "jax-waiting"),
    ];
    for (scheme, name) in waiting {
        create_queued(&ns, scheme, name).await;
        // Kueue v0.17 marks each QuotaReserved=False at once; v0.19 may not have tried the last
        // one yet (its condition list empty but for PodsReady): either way no quota is reserved.
        let w = workload(&ns.client(), ns.name(), name, None).await;
        let reserved = w["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "QuotaReserved" && c["status"] == "True");
        assert!(
            !reserved,
            "{name}: quota reserved while the quota is used up: {w}"
        );
    }
    for (scheme, name) in waiting {
        let api = jobs(&ns, scheme);
        wait::until(
            &format!("{name} reported Suspended"),
            wait::default_timeout(),
            || {
                let api = api.clone();
                async move {
                    Ok(api
                        .get(name)
                        .await
                        .ok()
                        .filter(|j| status(j).is(JobConditionType::Suspended)))
                }
            },
        )
        .await
        .unwrap();
    }
    // Give a wrongly started job time to show pods.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (scheme, name) in waiting {
        let job = jobs(&ns, scheme).get(name).await.unwrap();
        assert!(suspended(&job), "{name} was un-suspended without quota");
        assert!(
            job_pods(&ns, name).await.is_empty(),
            "{name} has pods while suspended"
        );
    }

    // kfop's Succeeded finishes each Workload, which frees the quota for the waiting jobs.
    for ((scheme, name), pods_of_job) in first.into_iter().zip(running) {
        finish_and_succeed(&ns, scheme, name, pods_of_job).await;
        workload(&ns.client(), ns.name(), name, Some(("Finished", true))).await;
    }
    for (scheme, name) in waiting {
        let pods_of_job = admitted_and_running(&ns, scheme, name).await;
        finish_and_succeed(&ns, scheme, name, pods_of_job).await;
    }

    // All that time kfop left the MultiKueue job alone: no pods, no status.
    let untouched = jobs(&ns, Scheme::PyTorchJob).get(elsewhere).await.unwrap();
    assert!(
        job_pods(&ns, elsewhere).await.is_empty(),
        "kfop ran a job managed by MultiKueue"
    );
    assert!(
        untouched
            .data
            .get("status")
            .is_none_or(|s| s.is_null() || s == &json!({})),
        "kfop wrote the status of a job managed by MultiKueue: {:?}",
        untouched.data.get("status")
    );
    println!("{peer}: {:.1} s", started.elapsed().as_secs_f64());
    drop(kueue);
}
