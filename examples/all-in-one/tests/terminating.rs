#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! A pod whose kubelet is gone stays terminating: nothing removes it until the node returns or
//! someone force-deletes it. On a plane of its own, this test stops the part of the kubelet
//! player that removes a terminating pod (pod-reaper, SIGSTOP; kwok still runs and ends pods)
//! while PyTorchJobs run, and checks that the operator decides by the rules instead of waiting
//! in silence:
//! - restartPolicy Never: a running pod deleted from outside counts as failed (Kubeflow's rule),
//!   and the job fails;
//! - restartPolicy ExitCode: a running pod deleted from outside counts as failed and the job
//!   restarts, with no status write loop while the pod stays; its replacement (same name) waits,
//!   and the Restarting condition names the pod once it is 30 s past its grace period, with
//!   reason `PyTorchJobRestartBlocked` and one Warning event;
//!
//! - restartPolicy Never, suspended and resumed while the pods its suspension deleted still
//!   terminate (as an operator killed between the two passes leaves them): those pods count as
//!   neither active nor failed, so the job does not fail;
//!
//! then that once the kubelet returns the pods go, their replacements are created and the jobs
//! succeed.
use std::time::Duration;

use kfop_operator::samples;
use kfop_operator::schemes::{self, Scheme};
use kfop_runtime::api::{JobConditionType, JobStatus};
use kfop_runtime::k8s_openapi::api::core::v1::{Namespace, Pod};
use kfop_runtime::kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kfop_runtime::kube::{Client, ResourceExt};
use kfop_runtime::testing::Operator;
use kfop_testenv::{ControlPlane, PlaneOptions, pods, wait};
use serde_json::json;

mod common;
use common::status as job_status;

const NS: &str = "terminating";

/// A PyTorchJob (Master and one Worker) with `policy` on both roles, pods that run until told
/// otherwise, and a 1 s grace period.
async fn create(jobs: &Api<DynamicObject>, name: &str, policy: &str) {
    let (_, mut job) = samples::sample(Scheme::PyTorchJob).unwrap();
    job.metadata.name = Some(name.to_owned());
    job.metadata.namespace = Some(NS.to_owned());
    for spec in samples::replica_specs_mut(&mut job).unwrap().values_mut() {
        spec["replicas"] = json!(1);
        spec["restartPolicy"] = json!(policy);
        spec["template"]["spec"]["terminationGracePeriodSeconds"] = json!(1);
    }
    jobs.create(&PostParams::default(), &job).await.unwrap();
}

async fn running(pod_api: &Api<Pod>, job: &str) -> Vec<Pod> {
    let selector = format!("training.kubeflow.org/job-name={job}");
    wait::until(
        &format!("{job}'s 2 pods Running"),
        Duration::from_secs(60),
        || {
            let (pod_api, selector) = (pod_api.clone(), selector.clone());
            async move {
                let list = pod_api.list(&ListParams::default().labels(&selector)).await.ok();
                Ok(list.map(|l| l.items).filter(|p| {
                    p.len() == 2
                        && p.iter()
                            .all(|p| pods::phase(p) == "Running" && p.metadata.deletion_timestamp.is_none())
                }))
            }
        },
    )
    .await
    .unwrap()
}

async fn suspend(jobs: &Api<DynamicObject>, name: &str, suspend: bool) {
    let patch = json!({ "spec": { "runPolicy": { "suspend": suspend } } });
    jobs.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Waits until `done` holds for the job's status; fails with the status.
async fn until(
    jobs: &Api<DynamicObject>,
    name: &str,
    what: &str,
    within: Duration,
    done: impl Fn(&JobStatus) -> bool,
) {
    let reached = wait::until(what, within, || {
        let jobs = jobs.clone();
        let done = &done;
        async move { Ok(jobs.get(name).await.ok().filter(|j| done(&job_status(j)))) }
    })
    .await;
    if let Err(error) = reached {
        let job = jobs.get(name).await.unwrap();
        panic!("{name}: {error}; status: {:?}", job.data.get("status"));
    }
}

#[tokio::test]
async fn a_pod_left_terminating_by_a_gone_kubelet_is_counted_and_named() {
    let mut plane = ControlPlane::start(PlaneOptions::default()).await.unwrap();
    let client: Client = plane.client().await.unwrap();
    let all = schemes::parse(&[]).unwrap();
    kfop_testenv::install_crds(&client, all.iter().map(|s| s.crd_without_conversion()))
        .await
        .unwrap();
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": NS } })).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let _operator = Operator::start_with(
        client.clone(),
        NS,
        |c| c.resync_period = Duration::from_secs(3600),
        move |m| kfop_operator::register(m, &all, &Default::default()).unwrap(),
    );
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &samples::api_resource(Scheme::PyTorchJob));
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), NS);
    create(&jobs, "never", "Never").await;
    create(&jobs, "retried", "ExitCode").await;
    create(&jobs, "resumed", "Never").await;
    running(&pod_api, "never").await;
    running(&pod_api, "retried").await;
    running(&pod_api, "resumed").await;

    // The kubelet's last step is gone: nothing removes a terminating pod.
    plane.freeze("pod-reaper", true).unwrap();

    // Never, suspended and resumed before the pods its suspension deleted are gone.
    suspend(&jobs, "resumed", true).await;
    wait::until("resumed's pods terminating", Duration::from_secs(60), || {
        let pod_api = pod_api.clone();
        async move {
            let selector = "training.kubeflow.org/job-name=resumed";
            let list = pod_api.list(&ListParams::default().labels(selector)).await.ok();
            Ok(list.filter(|l| {
                l.items.len() == 2 && l.items.iter().all(|p| p.metadata.deletion_timestamp.is_some())
            }))
        }
    })
    .await
    .unwrap();
    suspend(&jobs, "resumed", false).await;
    until(&jobs, "resumed", "resumed", Duration::from_secs(60), |s| {
        !s.is(JobConditionType::Suspended)
    })
    .await;

    // Never: a running pod deleted from outside (a drain) stays terminating; it counts as failed.
    pod_api
        .delete("never-worker-0", &DeleteParams::default())
        .await
        .unwrap();
    until(
        &jobs,
        "never",
        "Failed while its pod terminates",
        Duration::from_secs(60),
        |s| s.is(JobConditionType::Failed),
    )
    .await;

    // ExitCode: the running worker is deleted from outside too, and stays. It counts as failed
    // and the job restarts; the status settles while the pod stays (PyTorch's rule sets Running
    // for the Master, then Restarting for the Worker, in every pass).
    let stuck = pod_api.get("retried-worker-0").await.unwrap();
    pod_api
        .delete("retried-worker-0", &DeleteParams::default())
        .await
        .unwrap();
    until(&jobs, "retried", "Restarting", Duration::from_secs(60), |s| {
        s.is(JobConditionType::Restarting)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let settled = jobs.get("retried").await.unwrap().resource_version();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        jobs.get("retried").await.unwrap().resource_version(),
        settled,
        "the job is written again and again while its pod terminates"
    );
    let blocked = |s: &JobStatus| {
        s.condition(JobConditionType::Restarting).is_some_and(|c| {
            c.reason == "PyTorchJobRestartBlocked"
                && c.message
                    .contains("pod retried-worker-0 should have terminated by")
        })
    };
    // 1 s of grace and 30 s past it, and the timer that marks it.
    until(
        &jobs,
        "retried",
        "its condition naming the pod",
        Duration::from_secs(60),
        blocked,
    )
    .await;
    let still = pod_api.get("retried-worker-0").await.unwrap();
    assert_eq!(
        still.uid(),
        stuck.uid(),
        "no replacement while the old pod exists"
    );
    let events: Api<kfop_runtime::k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    // Events are written after the pass's status write: the condition can be seen first.
    let blocked_events = wait::until("the RestartBlocked event", wait::default_timeout(), || async {
        let n = (events.list(&ListParams::default()).await.unwrap().items.iter())
            .filter(|e| e.reason.as_deref() == Some("PyTorchJobRestartBlocked"))
            .count();
        Ok((n > 0).then_some(n))
    })
    .await
    .unwrap();
    assert_eq!(blocked_events, 1, "one Warning event says why the job waits");

    // Its pods terminated for the whole of the above (over 30 s): none counted as failed.
    let resumed = job_status(&jobs.get("resumed").await.unwrap());
    assert!(!resumed.is(JobConditionType::Failed), "{resumed:?}");
    let failed: i32 = resumed.replica_statuses.values().map(|r| r.failed).sum();
    assert_eq!(failed, 0, "the suspension's pods counted as failed: {resumed:?}");

    // The kubelet returns: the pods go, their replacements run, and the jobs can finish.
    plane.freeze("pod-reaper", false).unwrap();
    let replacement = wait::until("the replacement Running", Duration::from_secs(60), || {
        let pod_api = pod_api.clone();
        let old = stuck.uid();
        async move {
            let pod = pod_api.get_opt("retried-worker-0").await.ok().flatten();
            Ok(pod.filter(|p| p.uid() != old && pods::phase(p) == "Running"))
        }
    })
    .await
    .unwrap();
    for pod in ["retried-master-0", &replacement.name_any()] {
        pods::finish(&pod_api, pod, 0, 0).await.unwrap();
    }
    until(&jobs, "retried", "Succeeded", Duration::from_secs(60), |s| {
        s.is(JobConditionType::Succeeded)
    })
    .await;
    for pod in running(&pod_api, "resumed").await {
        pods::finish(&pod_api, &pod.name_any(), 0, 0).await.unwrap();
    }
    until(&jobs, "resumed", "Succeeded", Duration::from_secs(60), |s| {
        s.is(JobConditionType::Succeeded)
    })
    .await;
}
