//! Planner tables: the state machine and every job policy, with no cluster.
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use serde_json::json;

use super::*;
use crate::api::{CleanPodPolicy, JobConditionType as C, RestartPolicy};
use crate::framework::observed_service;
use crate::testing::{TestFramework, TestJob, job, replica};

fn t(secs: i64) -> Time {
    Time(Timestamp::from_second(1_700_000_000 + secs).unwrap())
}

fn mw(workers: i32, policy: Option<RestartPolicy>) -> TestJob {
    job(
        "ns",
        "tj",
        &[
            ("Master", replica(1, policy)),
            ("Worker", replica(workers, policy)),
        ],
    )
}

/// A pod of `role`/`index` as the planner would have created it, in `phase`.
fn pod(job: &TestJob, role: &str, index: i32, phase: &str) -> Arc<ObservedPod> {
    let specs = crate::defaults::defaulted_specs(&TestFramework::default().info, &job.spec.replica_specs);
    let mut pod = build_pod(
        &TestFramework::default().loaded(),
        job,
        &specs,
        (role, index),
        &Scheduling::default(),
    )
    .unwrap()
    .pod;
    pod.metadata.uid = Some(format!("uid-{role}-{index}"));
    pod.status = Some(serde_json::from_value(json!({ "phase": phase })).unwrap());
    Arc::new(pod.into())
}

fn with_exit(pod: Arc<ObservedPod>, code: i32, restarts: i32) -> Arc<ObservedPod> {
    let mut pod = (*pod).clone();
    let status = pod.status.get_or_insert_default();
    status.container_statuses = Some(vec![
        serde_json::from_value(json!({
            "name": "main", "image": "busybox", "imageID": "", "ready": false, "restartCount": restarts,
            "state": { "terminated": { "exitCode": code } },
        }))
        .unwrap(),
    ]);
    Arc::new(pod)
}

fn with_restarts(pod: Arc<ObservedPod>, restarts: i32) -> Arc<ObservedPod> {
    let mut pod = (*pod).clone();
    pod.status.get_or_insert_default().container_statuses = Some(vec![
        serde_json::from_value(json!({
            "name": "main", "image": "busybox", "imageID": "", "ready": true, "restartCount": restarts,
        }))
        .unwrap(),
    ]);
    Arc::new(pod)
}

fn service(job: &TestJob, role: &str, index: i32) -> Arc<ObservedService> {
    let specs = crate::defaults::defaulted_specs(&TestFramework::default().info, &job.spec.replica_specs);
    Arc::new(observed_service(build_service(
        &TestFramework::default().info,
        job,
        crate::labels::owner_reference(job, &()),
        &specs[role],
        role,
        index,
    )))
}

fn all_children(job: &TestJob, workers: i32, phase: &str) -> Observed {
    let mut pods = vec![pod(job, "Master", 0, phase)];
    let mut services = vec![service(job, "Master", 0)];
    for i in 0..workers {
        pods.push(pod(job, "Worker", i, phase));
        services.push(service(job, "Worker", i));
    }
    Observed {
        pods,
        services,
        ..Observed::default()
    }
}

fn run(job: &TestJob, observed: &Observed, now: i64) -> Plan {
    plan(&TestFramework::default().loaded(), job, observed, &t(now)).unwrap()
}

/// Runs a plan and stores its status on the job, as the applier would.
fn step(job: &mut TestJob, observed: &Observed, now: i64) -> Plan {
    let p = run(job, observed, now);
    if let Some(status) = &p.status {
        job.status = Some(status.clone());
    }
    p
}

fn conditions(job: &TestJob) -> Vec<(C, &'static str, String)> {
    job.status
        .as_ref()
        .map(|s| {
            s.conditions
                .iter()
                .map(|c| {
                    let status = match c.status {
                        ConditionStatus::True => "True",
                        ConditionStatus::False => "False",
                        ConditionStatus::Unknown => "Unknown",
                    };
                    (c.type_, status, c.reason.clone())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn names<T: ResourceExt>(objs: &[T]) -> Vec<String> {
    let mut names: Vec<String> = objs.iter().map(ResourceExt::name_any).collect();
    names.sort();
    names
}

fn refs(children: &[ChildRef]) -> Vec<&str> {
    let mut names: Vec<&str> = children.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    names
}

#[test]
fn new_job_gets_created_condition_and_all_children() {
    let mut j = mw(3, None);
    j.metadata.uid = Some("job-uid".into());
    let p = step(&mut j, &Observed::default(), 0);
    assert_eq!(
        conditions(&j),
        [(C::Created, "True", "TestJobCreated".to_owned())]
    );
    assert_eq!(
        j.status.as_ref().unwrap().conditions[0].message,
        "TestJob tj is created."
    );
    assert_eq!(p.metrics, [JobMetric::Created]);
    let expected = ["tj-master-0", "tj-worker-0", "tj-worker-1", "tj-worker-2"];
    assert_eq!(names(&p.create_pods), expected);
    assert_eq!(names(&p.create_services), expected);

    let master = p
        .create_pods
        .iter()
        .find(|p| p.name_any() == "tj-master-0")
        .unwrap();
    let labels = master.labels();
    assert_eq!(
        labels["training.kubeflow.org/operator-name"],
        "testjob-controller"
    );
    assert_eq!(labels["training.kubeflow.org/job-name"], "tj");
    assert_eq!(labels["training.kubeflow.org/replica-type"], "master");
    assert_eq!(labels["training.kubeflow.org/replica-index"], "0");
    assert_eq!(labels["training.kubeflow.org/job-role"], "master");
    let worker = p
        .create_pods
        .iter()
        .find(|p| p.name_any() == "tj-worker-1")
        .unwrap();
    assert!(!worker.labels().contains_key("training.kubeflow.org/job-role"));
    let owner = &master.owner_references()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str()
        ),
        ("test.kfop.dev/v1", "TestJob", "tj", "job-uid")
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    assert_eq!(
        master.spec.as_ref().unwrap().restart_policy.as_deref(),
        Some("OnFailure")
    );

    let svc = p
        .create_services
        .iter()
        .find(|s| s.name_any() == "tj-worker-1")
        .unwrap();
    let spec = svc.spec.as_ref().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(
        spec.selector.as_ref().unwrap()["training.kubeflow.org/replica-index"],
        "1"
    );
    let port = &spec.ports.as_ref().unwrap()[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("test-port"), 7777));
}

/// A framework's per-job default replaces the role's static one only where the spec sets none.
#[test]
fn a_per_job_restart_default_applies_only_where_the_spec_sets_none() {
    let framework = TestFramework {
        restart_default: Some(("Master", RestartPolicy::Never)),
        ..TestFramework::default()
    }
    .loaded();
    let policies = |j: &TestJob| -> Vec<Option<String>> {
        let p = plan(&framework, j, &Observed::default(), &t(0)).unwrap();
        p.create_pods
            .iter()
            .map(|pod| pod.spec.as_ref().and_then(|s| s.restart_policy.clone()))
            .collect()
    };
    let unset = job(
        "ns",
        "tj",
        &[("Master", replica(1, None)), ("Worker", replica(1, None))],
    );
    assert_eq!(policies(&unset), [Some("Never".into()), Some("OnFailure".into())]);
    let set = job("ns", "tj", &[("Master", replica(1, Some(RestartPolicy::Always)))]);
    assert_eq!(policies(&set), [Some("Always".into())]);
}

#[test]
fn exit_code_policy_creates_never_pods_and_template_policy_is_overridden_with_a_warning() {
    let mut spec = replica(1, Some(RestartPolicy::ExitCode));
    spec.template.spec.as_mut().unwrap().restart_policy = Some("Always".into());
    let j = job("ns", "tj", &[("Worker", spec)]);
    let p = run(&j, &Observed::default(), 0);
    assert_eq!(
        p.create_pods[0].spec.as_ref().unwrap().restart_policy.as_deref(),
        Some("Never")
    );
    assert!(
        p.events
            .iter()
            .any(|e| e.reason == "SetPodTemplateRestartPolicy" && e.type_ == EventType::Warning)
    );
}

#[test]
fn running_pods_make_the_job_running_with_replica_counts() {
    let mut j = mw(3, None);
    step(&mut j, &Observed::default(), 0);
    let p = {
        let o = all_children(&j, 3, "Running");
        step(&mut j, &o, 1)
    };
    assert!(p.create_pods.is_empty() && p.create_services.is_empty());
    assert_eq!(
        conditions(&j),
        [
            (C::Created, "True", "TestJobCreated".into()),
            (C::Running, "True", "TestJobRunning".into())
        ]
    );
    let status = j.status.as_ref().unwrap();
    assert_eq!(status.replica_statuses["Worker"].active, 3);
    assert_eq!(status.replica_statuses["Master"].active, 1);
    assert_eq!(status.start_time, Some(t(0)));
    assert_eq!(
        status.replica_statuses["Worker"].selector.as_deref(),
        Some(
            "training.kubeflow.org/job-name=tj,training.kubeflow.org/operator-name=testjob-controller,\
             training.kubeflow.org/replica-type=worker"
        )
    );
    let again = {
        let o = all_children(&j, 3, "Running");
        step(&mut j, &o, 2)
    };
    assert!(
        again.status.is_none() && again.events.is_empty(),
        "a steady job writes and emits nothing"
    );
}

#[test]
fn pending_pods_count_nothing_and_the_job_is_not_running() {
    let mut j = mw(1, None);
    {
        let o = all_children(&j, 1, "Pending");
        step(&mut j, &o, 0)
    };
    assert_eq!(conditions(&j).len(), 1);
    assert_eq!(j.status.as_ref().unwrap().replica_statuses["Worker"].active, 0);
}

#[test]
fn master_success_succeeds_the_job_once() {
    let mut j = mw(2, None);
    {
        let o = all_children(&j, 2, "Running");
        step(&mut j, &o, 0)
    };
    let mut obs = all_children(&j, 2, "Running");
    obs.pods[0] = pod(&j, "Master", 0, "Succeeded");
    let p = step(&mut j, &obs, 5);
    assert_eq!(
        conditions(&j),
        [
            (C::Created, "True", "TestJobCreated".into()),
            (C::Running, "False", "TestJobRunning".into()),
            (C::Succeeded, "True", "TestJobSucceeded".into())
        ]
    );
    assert_eq!(j.status.as_ref().unwrap().completion_time, Some(t(5)));
    assert_eq!(p.metrics, [JobMetric::Succeeded]);
    assert_eq!(
        p.events.iter().filter(|e| e.reason == "TestJobSucceeded").count(),
        1
    );
    assert!(p.requeue_after.is_some(), "cleanup follows in the next pass");
    // Active replicas are counted as succeeded in the same write, not by a second one.
    let counts = |j: &TestJob| {
        let worker = &j.status.as_ref().unwrap().replica_statuses["Worker"];
        (worker.succeeded, worker.active)
    };
    assert_eq!(counts(&j), (2, 0));

    // The next pass: finished; nothing is created and the status stays as written.
    let p = step(&mut j, &obs, 6);
    assert!(p.create_pods.is_empty() && p.metrics.is_empty() && p.events.is_empty());
    assert!(p.status.is_none(), "no second write: {:?}", p.status);
    assert_eq!(counts(&j), (2, 0));
}

#[test]
fn clean_pod_policy_on_finished_jobs() {
    for (policy, deleted_pods, deleted_services) in [
        (
            CleanPodPolicy::All,
            vec!["tj-master-0", "tj-worker-0", "tj-worker-1"],
            3,
        ),
        (CleanPodPolicy::Running, vec!["tj-worker-0", "tj-worker-1"], 2),
        (CleanPodPolicy::None, vec![], 0),
    ] {
        let mut j = mw(2, None);
        j.spec.run_policy.clean_pod_policy = Some(policy);
        let mut obs = all_children(&j, 2, "Running");
        obs.pods[0] = pod(&j, "Master", 0, "Succeeded");
        step(&mut j, &obs, 0);
        assert!(j.status.as_ref().unwrap().is(C::Succeeded));
        let p = step(&mut j, &obs, 1);
        assert_eq!(refs(&p.delete_pods), deleted_pods, "{policy:?}");
        assert_eq!(p.delete_services.len(), deleted_services, "{policy:?}");
        assert!(
            p.delete_pods.iter().all(|c| c.uid.is_some()),
            "deletes carry a UID precondition"
        );
    }
}

/// A failed pod whose deletion never completes (a finalizer nobody removes, a kubelet gone)
/// keeps its name, so its replacement waits; 30 s past its grace period the job says so in its
/// Restarting condition, once, and until then asks to be looked at again at that moment.
#[test]
fn a_pod_left_terminating_is_named_in_the_restarting_condition() {
    let mut j = mw(2, Some(RestartPolicy::OnFailure));
    let running = all_children(&j, 2, "Running");
    step(&mut j, &running, 0);
    let mut obs = all_children(&j, 2, "Running");
    let mut failed = with_exit(pod(&j, "Worker", 1, "Failed"), 1, 0);
    // Deleted with a 10 s grace period: it should be gone by 10 s.
    Arc::make_mut(&mut failed).metadata.deletion_timestamp = Some(t(10));
    obs.pods[2] = failed;
    let early = step(&mut j, &obs, 15);
    assert!(early.create_pods.is_empty(), "the name is taken");
    assert!(early.delete_pods.is_empty(), "deleted already");
    assert_eq!(early.requeue_after, Some(Duration::from_secs(25)), "at 40 s");
    let message = |j: &TestJob| j.status.as_ref().unwrap().conditions[1].message.clone();
    assert_eq!(
        message(&j),
        "job tj is restarting because Worker replica(s) failed."
    );
    let late = step(&mut j, &obs, 40);
    assert!(late.create_pods.is_empty());
    assert!(late.status.is_some(), "the condition says why it waits");
    assert_eq!(
        conditions(&j)[1],
        (C::Restarting, "True", "TestJobRestartBlocked".into())
    );
    assert!(
        message(&j).contains(&format!(
            "pod tj-worker-1 should have terminated by {} and has not",
            t(10).0
        )),
        "{}",
        message(&j)
    );
    assert_eq!(late.events.len(), 1, "{:?}", late.events);
    let again = step(&mut j, &obs, 90);
    assert!(again.status.is_none() && again.events.is_empty(), "said once");
}

/// Pods the suspension deleted may still be terminating when the job resumes: they count as
/// neither active nor failed, so a job under restartPolicy Never resumes instead of failing;
/// a running pod deleted after the resume still counts as failed.
#[test]
fn pods_deleted_by_a_suspension_do_not_fail_the_resumed_job() {
    let mut j = mw(1, Some(RestartPolicy::Never));
    let running = all_children(&j, 1, "Running");
    step(&mut j, &running, 0);
    j.spec.run_policy.suspend = Some(true);
    step(&mut j, &running, 10);
    j.spec.run_policy.suspend = Some(false);
    let mut obs = all_children(&j, 1, "Running");
    for p in &mut obs.pods {
        let meta = &mut Arc::make_mut(p).metadata;
        // Deleted at 10 s with a 30 s grace period.
        meta.deletion_timestamp = Some(t(40));
        meta.deletion_grace_period_seconds = Some(30);
    }
    step(&mut j, &obs, 20);
    assert!(!j.status.as_ref().unwrap().is(C::Failed), "{:?}", conditions(&j));
    let worker = &j.status.as_ref().unwrap().replica_statuses["Worker"];
    assert_eq!((worker.active, worker.failed), (0, 0));

    // A drain after the resume is a failure again.
    let mut drained = all_children(&j, 1, "Running");
    let meta = &mut Arc::make_mut(&mut drained.pods[1]).metadata;
    meta.deletion_timestamp = Some(t(60));
    meta.deletion_grace_period_seconds = Some(30);
    step(&mut j, &drained, 31);
    assert!(j.status.as_ref().unwrap().is(C::Failed), "{:?}", conditions(&j));
}

/// Workers scaled away are deleted and, while they terminate, count as neither active nor
/// failed: under restartPolicy Never a scale-down does not fail the job (Kubeflow waits for the
/// deletion before its next pass, so it never counts them).
#[test]
fn pods_deleted_by_a_scale_down_do_not_fail_the_job() {
    let mut j = mw(3, Some(RestartPolicy::Never));
    let running = all_children(&j, 3, "Running");
    step(&mut j, &running, 0);
    j.spec.replica_specs.get_mut("Worker").unwrap().replicas = Some(1);
    let p = step(&mut j, &running, 1);
    let deleted: Vec<_> = p.delete_pods.iter().map(|c| c.name.clone()).collect();
    assert_eq!(deleted, ["tj-worker-1", "tj-worker-2"]);

    let mut terminating = all_children(&j, 3, "Running");
    for p in &mut terminating.pods[2..] {
        Arc::make_mut(p).metadata.deletion_timestamp = Some(t(31));
    }
    let p = step(&mut j, &terminating, 2);
    assert!(p.delete_pods.is_empty(), "{:?}", p.delete_pods);
    assert!(!j.status.as_ref().unwrap().is(C::Failed), "{:?}", conditions(&j));
    let worker = &j.status.as_ref().unwrap().replica_statuses["Worker"];
    assert_eq!((worker.active, worker.failed), (1, 0));
}

/// A running pod deleted from outside (a drain) whose kubelet is gone stays terminating; it
/// counts as failed, and the job's status settles: passes over the same pods write nothing
/// (the PyTorchJob rule's flip within one pass is covered by the terminating integration test).
#[test]
fn a_running_pod_left_terminating_settles_the_status() {
    for policy in [RestartPolicy::ExitCode, RestartPolicy::OnFailure] {
        let mut j = mw(1, Some(policy));
        let running = all_children(&j, 1, "Running");
        step(&mut j, &running, 0);
        let mut obs = all_children(&j, 1, "Running");
        let mut drained = pod(&j, "Worker", 0, "Running");
        Arc::make_mut(&mut drained).metadata.deletion_timestamp = Some(t(31));
        obs.pods[1] = drained;
        let mut writes = Vec::new();
        for now in 1..6 {
            let p = step(&mut j, &obs, now);
            writes.push((now, p.status.is_some(), conditions(&j)));
        }
        assert!(
            writes[1..].iter().all(|(_, wrote, _)| !wrote),
            "{policy:?}: {writes:#?}"
        );
    }
}

#[test]
fn failed_pod_with_on_failure_is_replaced_and_the_job_restarts() {
    let mut j = mw(2, Some(RestartPolicy::OnFailure));
    {
        let o = all_children(&j, 2, "Running");
        step(&mut j, &o, 0)
    };
    let mut obs = all_children(&j, 2, "Running");
    obs.pods[2] = with_exit(pod(&j, "Worker", 1, "Failed"), 1, 0);
    let p = step(&mut j, &obs, 1);
    assert_eq!(refs(&p.delete_pods), ["tj-worker-1"]);
    assert_eq!(p.metrics, [JobMetric::Restarted]);
    assert_eq!(
        conditions(&j)[1],
        (C::Restarting, "True", "TestJobRestarting".into())
    );
    assert_eq!(
        j.status.as_ref().unwrap().conditions[1].message,
        "job tj is restarting because Worker replica(s) failed."
    );
    // The replacement runs: Running replaces Restarting.
    let p = {
        let o = all_children(&j, 2, "Running");
        step(&mut j, &o, 2)
    };
    assert!(p.metrics.is_empty());
    assert_eq!(conditions(&j)[1], (C::Running, "True", "TestJobRunning".into()));
}

#[test]
fn exit_code_policy_retries_signals_and_fails_on_application_errors() {
    let mut j = mw(1, Some(RestartPolicy::ExitCode));
    {
        let o = all_children(&j, 1, "Running");
        step(&mut j, &o, 0)
    };

    let mut killed = all_children(&j, 1, "Running");
    killed.pods[1] = with_exit(pod(&j, "Worker", 0, "Failed"), 137, 0);
    let p = run(&j, &killed, 1);
    assert_eq!(refs(&p.delete_pods), ["tj-worker-0"]);
    assert!(!p.status.as_ref().unwrap().is(C::Failed));

    // Failed before any container ran (the kubelet rejected it): retried, as Kubeflow's 0xbeef.
    let mut rejected = all_children(&j, 1, "Running");
    rejected.pods[1] = pod(&j, "Worker", 0, "Failed");
    let p = run(&j, &rejected, 1);
    assert_eq!(refs(&p.delete_pods), ["tj-worker-0"]);
    assert!(!p.status.as_ref().unwrap().is(C::Failed));

    let mut crashed = all_children(&j, 1, "Running");
    crashed.pods[1] = with_exit(pod(&j, "Worker", 0, "Failed"), 1, 0);
    let p = step(&mut j, &crashed, 1);
    assert!(p.delete_pods.is_empty());
    let failed = j.status.as_ref().unwrap().condition(C::Failed).unwrap().clone();
    assert_eq!(failed.reason, "TestJobFailed");
    assert_eq!(
        failed.message,
        "job \"tj\" is failing because \"Worker\" replica(s) failed."
    );
    assert_eq!(p.metrics, [JobMetric::Failed]);
}

#[test]
fn failed_pod_with_never_fails_the_job() {
    let mut j = mw(2, Some(RestartPolicy::Never));
    let mut obs = all_children(&j, 2, "Running");
    obs.pods[1] = with_exit(pod(&j, "Worker", 0, "Failed"), 2, 0);
    let p = step(&mut j, &obs, 0);
    assert!(p.delete_pods.is_empty());
    let status = j.status.as_ref().unwrap();
    assert_eq!(
        status.condition(C::Failed).unwrap().message,
        "TestJob tj is failed because 1 Worker replica(s) failed."
    );
    assert_eq!(status.replica_statuses["Worker"].failed, 1);
    // Failed is final: later passes create nothing, whatever the pods do.
    let p = step(&mut j, &Observed::default(), 1);
    assert!(p.create_pods.is_empty() && p.create_services.is_empty());
}

#[test]
fn backoff_limit_fails_the_job_and_honours_clean_pod_policy() {
    let mut j = mw(4, Some(RestartPolicy::OnFailure));
    j.spec.run_policy.backoff_limit = Some(4);
    {
        let o = all_children(&j, 4, "Running");
        step(&mut j, &o, 0)
    };
    let mut obs = all_children(&j, 4, "Running");
    for p in obs.pods.iter_mut().skip(1) {
        *p = with_restarts(p.clone(), 1);
    }
    let p = step(&mut j, &obs, 1);
    let status = j.status.as_ref().unwrap();
    assert_eq!(
        status.condition(C::Failed).unwrap().message,
        "Job tj has failed because it has reached the specified backoff limit"
    );
    assert_eq!(status.completion_time, Some(t(1)));
    assert!(
        p.delete_pods.is_empty(),
        "cleanPodPolicy None keeps the pods (Kubeflow deletes them, #3419)"
    );

    let mut j = mw(4, Some(RestartPolicy::OnFailure));
    j.spec.run_policy.backoff_limit = Some(4);
    j.spec.run_policy.clean_pod_policy = Some(CleanPodPolicy::All);
    let p = step(&mut j, &obs, 1);
    assert_eq!(p.delete_pods.len(), 5);
    assert_eq!(p.delete_services.len(), 5);
}

#[test]
fn backoff_limit_not_reached() {
    let mut j = mw(4, Some(RestartPolicy::OnFailure));
    j.spec.run_policy.backoff_limit = Some(5);
    let mut obs = all_children(&j, 4, "Running");
    for p in obs.pods.iter_mut().skip(1) {
        *p = with_restarts(p.clone(), 1);
    }
    step(&mut j, &obs, 0);
    assert!(!j.status.as_ref().unwrap().is(C::Failed));
}

#[test]
fn active_deadline_fails_the_job_and_is_requeued_until_then() {
    let mut j = mw(1, None);
    j.spec.run_policy.active_deadline_seconds = Some(60);
    let p = {
        let o = all_children(&j, 1, "Running");
        step(&mut j, &o, 0)
    };
    assert_eq!(
        p.requeue_after,
        Some(Duration::from_secs(60)),
        "a timed requeue, not another event, fires it"
    );
    let p = {
        let o = all_children(&j, 1, "Running");
        step(&mut j, &o, 45)
    };
    assert_eq!(p.requeue_after, Some(Duration::from_secs(15)));
    let p = {
        let o = all_children(&j, 1, "Running");
        step(&mut j, &o, 60)
    };
    let status = j.status.as_ref().unwrap();
    assert_eq!(
        status.condition(C::Failed).unwrap().message,
        "Job tj has failed because it was active longer than specified deadline"
    );
    assert!(
        p.events
            .iter()
            .any(|e| e.reason == "TestJobFailed" && e.type_ == EventType::Warning)
    );
    assert_eq!(p.metrics, [JobMetric::Failed]);
}

#[test]
fn ttl_requeues_then_deletes_the_job() {
    let mut j = mw(1, None);
    j.spec.run_policy.ttl_seconds_after_finished = Some(3);
    let mut obs = all_children(&j, 1, "Running");
    obs.pods[0] = pod(&j, "Master", 0, "Succeeded");
    step(&mut j, &obs, 0);
    let p = step(&mut j, &obs, 1);
    assert_eq!(
        (p.requeue_after, p.delete_job),
        (Some(Duration::from_secs(2)), false)
    );
    let p = step(&mut j, &obs, 3);
    assert!(p.delete_job);
}

#[test]
fn created_suspended_has_no_pods_and_exactly_created_and_suspended() {
    let mut j = mw(2, None);
    j.spec.run_policy.suspend = Some(true);
    let p = step(&mut j, &Observed::default(), 0);
    assert!(p.create_pods.is_empty() && p.create_services.is_empty());
    assert_eq!(
        conditions(&j),
        [
            (C::Created, "True", "TestJobCreated".into()),
            (C::Suspended, "True", "TestJobSuspended".into())
        ]
    );
    let status = j.status.as_ref().unwrap();
    assert_eq!(status.conditions[1].message, "TestJob tj is suspended.");
    assert!(status.start_time.is_none());
    let again = step(&mut j, &Observed::default(), 1);
    assert!(
        again.events.is_empty() && again.status.is_none(),
        "no event on every reconcile"
    );
}

/// mpi-operator's wording and suspension: its messages, a Created event, and a job created
/// suspended gets Running=False after Suspended and zeroed counts for every role.
#[test]
fn created_suspended_the_mpi_operator_way() {
    let framework = TestFramework {
        lifecycle: |job| LifecycleWording {
            created: format!("{} {}/{} is created.", job.kind, job.namespace, job.name),
            created_event: true,
            suspended: "suspended".into(),
            running_suspended: "running, suspended".into(),
            resumed: "resumed".into(),
            suspension_reports_every_role: true,
        },
        ..TestFramework::default()
    }
    .loaded();
    let mut j = mw(2, None);
    j.spec.run_policy.suspend = Some(true);
    let p = plan(&framework, &j, &Observed::default(), &t(0)).unwrap();
    j.status = p.status.clone();
    assert_eq!(
        conditions(&j),
        [
            (C::Created, "True", "TestJobCreated".into()),
            (C::Suspended, "True", "TestJobSuspended".into()),
            (C::Running, "False", "TestJobSuspended".into())
        ]
    );
    let status = j.status.as_ref().unwrap();
    let messages: Vec<&str> = status.conditions.iter().map(|c| c.message.as_str()).collect();
    assert_eq!(
        messages,
        ["TestJob ns/tj is created.", "suspended", "running, suspended"]
    );
    let counts: Vec<(&str, i32, i32, i32)> = (status.replica_statuses.iter())
        .map(|(role, s)| (role.as_str(), s.active, s.succeeded, s.failed))
        .collect();
    assert_eq!(counts, [("Master", 0, 0, 0), ("Worker", 0, 0, 0)]);
    let events: Vec<(&str, &str)> = p
        .events
        .iter()
        .map(|e| (e.reason.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        events,
        [
            ("TestJobCreated", "TestJob ns/tj is created."),
            ("TestJobSuspended", "suspended")
        ]
    );
}

#[test]
fn suspend_then_resume() {
    let mut j = mw(2, None);
    {
        let o = all_children(&j, 2, "Running");
        step(&mut j, &o, 0)
    };
    j.spec.run_policy.suspend = Some(true);
    let p = {
        let o = all_children(&j, 2, "Running");
        step(&mut j, &o, 10)
    };
    assert_eq!(p.delete_pods.len(), 3);
    assert_eq!(p.delete_services.len(), 3);
    assert_eq!(
        conditions(&j),
        [
            (C::Created, "True", "TestJobCreated".into()),
            (C::Running, "False", "TestJobSuspended".into()),
            (C::Suspended, "True", "TestJobSuspended".into())
        ]
    );
    let status = j.status.as_ref().unwrap();
    assert_eq!(status.start_time, Some(t(0)), "startTime is kept while suspended");
    assert!(status.replica_statuses.values().all(|r| r.active == 0));

    j.spec.run_policy.suspend = Some(false);
    let p = step(&mut j, &Observed::default(), 20);
    assert_eq!(p.create_pods.len(), 3);
    assert_eq!(
        j.status.as_ref().unwrap().start_time,
        Some(t(20)),
        "startTime restarts on resume"
    );
    assert!(p.events.iter().any(|e| e.reason == "TestJobResumed"));
    {
        let o = all_children(&j, 2, "Running");
        step(&mut j, &o, 21)
    };
    assert_eq!(
        conditions(&j),
        [
            (C::Created, "True", "TestJobCreated".into()),
            (C::Suspended, "False", "TestJobResumed".into()),
            (C::Running, "True", "TestJobRunning".into())
        ]
    );
}

#[test]
fn scale_down_and_up_by_index() {
    let mut j = mw(3, None);
    {
        let o = all_children(&j, 3, "Running");
        step(&mut j, &o, 0)
    };
    j.spec.replica_specs.get_mut("Worker").unwrap().replicas = Some(2);
    let p = {
        let o = all_children(&j, 3, "Running");
        step(&mut j, &o, 1)
    };
    assert_eq!(refs(&p.delete_pods), ["tj-worker-2"]);
    assert_eq!(refs(&p.delete_services), ["tj-worker-2"]);
    assert!(p.create_pods.is_empty());

    j.spec.replica_specs.get_mut("Worker").unwrap().replicas = Some(4);
    let p = {
        let o = all_children(&j, 2, "Running");
        step(&mut j, &o, 2)
    };
    assert_eq!(names(&p.create_pods), ["tj-worker-2", "tj-worker-3"]);
    assert_eq!(names(&p.create_services), ["tj-worker-2", "tj-worker-3"]);
    assert!(p.delete_pods.is_empty());
}

#[test]
fn jobs_managed_elsewhere_or_being_deleted_are_left_alone() {
    let mut j = mw(1, None);
    j.spec.run_policy.managed_by = Some("kueue.x-k8s.io/multikueue".into());
    let p = run(&j, &Observed::default(), 0);
    assert!(p.create_pods.is_empty() && p.status.is_none());

    j.spec.run_policy.managed_by = Some("kubeflow.org/training-operator".into());
    assert_eq!(run(&j, &Observed::default(), 0).create_pods.len(), 2);

    let mut j = mw(1, None);
    j.metadata.deletion_timestamp = Some(t(0));
    let p = run(&j, &Observed::default(), 0);
    assert!(p.create_pods.is_empty() && p.status.is_none());
}

#[test]
fn worker_only_job_succeeds_when_all_workers_succeed() {
    let mut j = job("ns", "w", &[("Worker", replica(2, None))]);
    let succeeded = |j: &TestJob, n: i32| Observed {
        pods: (0..2)
            .map(|i| pod(j, "Worker", i, if i < n { "Succeeded" } else { "Running" }))
            .collect(),
        ..Observed::default()
    };
    let o = succeeded(&j, 1);
    step(&mut j, &o, 0);
    assert!(!j.status.as_ref().unwrap().is(C::Succeeded));
    assert!(j.status.as_ref().unwrap().is(C::Running));
    let o = succeeded(&j, 2);
    step(&mut j, &o, 1);
    assert!(j.status.as_ref().unwrap().is(C::Succeeded));
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn phase() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("Pending"),
            Just("Running"),
            Just("Succeeded"),
            Just("Failed")
        ]
    }

    fn policy() -> impl Strategy<Value = RestartPolicy> {
        prop_oneof![
            Just(RestartPolicy::OnFailure),
            Just(RestartPolicy::Never),
            Just(RestartPolicy::ExitCode)
        ]
    }

    /// An observed pod: role, index, phase, the exit code of its terminated container (signals
    /// among them) and whether it is being deleted.
    type SeenPod = (&'static str, i32, &'static str, Option<i32>, bool);

    fn seen_pod() -> impl Strategy<Value = SeenPod> {
        (
            prop_oneof![Just("Master"), Just("Worker")],
            0..5i32,
            phase(),
            proptest::option::of(prop_oneof![0..3i32, 126..140i32, any::<i32>()]),
            any::<bool>(),
        )
    }

    /// The pods, and a service for each, as the planner of a job with both roles would have
    /// created them (the job may since have lost a role or replicas).
    fn observe(seen: &[SeenPod]) -> Observed {
        let maker = mw(5, None);
        let mut observed = Observed::default();
        for (role, index, phase, exit, deleting) in seen {
            let mut p = pod(&maker, role, *index, phase);
            if let Some(code) = exit {
                p = with_exit(p, *code, 0);
            }
            if *deleting {
                Arc::make_mut(&mut p).metadata.deletion_timestamp = Some(t(0));
            }
            observed.pods.push(p);
            observed.services.push(service(&maker, role, *index));
        }
        observed
    }

    proptest! {
        /// Whatever the caches show, a plan never creates a pod whose (role, index) already has a
        /// pod that is not being deleted, never creates two for one (role, index), and never
        /// creates past the replica count.
        #[test]
        fn never_two_pods_for_one_replica(
            workers in 0..5i32,
            seen in proptest::collection::vec((0..6i32, phase(), any::<bool>()), 0..8),
            policy in policy(),
            suspended in any::<bool>(),
        ) {
            let mut j = mw(workers, Some(policy));
            j.spec.run_policy.suspend = Some(suspended);
            let mut observed = Observed::default();
            for (index, phase, killed) in &seen {
                let p = pod(&j, "Worker", *index, phase);
                observed.pods.push(if *killed && *phase == "Failed" { with_exit(p, 137, 0) } else { p });
            }
            let p = run(&j, &observed, 0);
            let created = names(&p.create_pods);
            let mut unique = created.clone();
            unique.dedup();
            prop_assert_eq!(&unique, &created);
            let deleted: Vec<&str> = refs(&p.delete_pods);
            for name in &created {
                let present = observed.pods.iter().any(|o| &o.name_any() == name && !deleted.contains(&name.as_str()));
                prop_assert!(!present, "{} created while it exists", name);
                let index: i32 = name.rsplit('-').next().unwrap().parse().unwrap();
                let role = if name.contains("master") { "Master" } else { "Worker" };
                prop_assert!(index < j.spec.replica_specs[role].replicas(), "{} past the replica count", name);
            }
            if suspended {
                prop_assert!(created.is_empty());
            }
        }

        /// Applying plans to the caches converges: after a few steps the planner finds nothing
        /// left to do, so a resync of a healthy job sends no request and counts no found work.
        #[test]
        fn applied_plans_reach_a_fixed_point(
            workers in 0..4i32,
            seen in proptest::collection::vec((0..4i32, phase()), 0..6),
            policy in policy(),
            suspended in any::<bool>(),
        ) {
            let mut j = mw(workers, Some(policy));
            j.spec.run_policy.suspend = Some(suspended);
            let mut observed = Observed::default();
            for (index, phase) in &seen {
                if !observed.pods.iter().any(|p| p.name_any().ends_with(&format!("worker-{index}"))) {
                    observed.pods.push(pod(&j, "Worker", *index, phase));
                }
            }
            let mut steps = 0;
            loop {
                let p = step(&mut j, &observed, 0);
                if !p.has_work() {
                    break;
                }
                steps += 1;
                prop_assert!(steps < 6, "still planning work after {} steps: {:?}", steps, p);
                let gone = refs(&p.delete_pods);
                observed.pods.retain(|o| !gone.contains(&o.name_any().as_str()));
                let gone = refs(&p.delete_services);
                observed.services.retain(|o| !gone.contains(&o.name_any().as_str()));
                for mut created in p.create_pods {
                    created.metadata.uid = Some(format!("uid-{}-{steps}", created.name_any()));
                    observed.pods.push(Arc::new(created.into()));
                }
                for mut created in p.create_services {
                    created.metadata.uid = Some(format!("uid-{}", created.name_any()));
                    observed.services.push(Arc::new(observed_service(created)));
                }
            }
        }

        /// A finished job is never resurrected: whatever its spec and pods, the plan creates
        /// nothing, keeps the terminal condition True and Running not True (its conditions do
        /// not change at all) and counts no new outcome.
        #[test]
        fn finished_jobs_are_never_resurrected(
            master in any::<bool>(),
            workers in 0..4i32,
            policy in proptest::option::of(policy()),
            clean in proptest::option::of(prop_oneof![Just(CleanPodPolicy::All), Just(CleanPodPolicy::Running), Just(CleanPodPolicy::None)]),
            backoff_limit in proptest::option::of(0..3i32),
            deadline in proptest::option::of(0..3i64),
            ttl in proptest::option::of(0..3i32),
            suspended in any::<bool>(),
            history in proptest::collection::vec(prop_oneof![Just(C::Running), Just(C::Restarting), Just(C::Suspended)], 0..3),
            succeeded in any::<bool>(),
            seen in proptest::collection::vec(seen_pod(), 0..8),
        ) {
            let mut roles = vec![("Worker", replica(workers, policy))];
            if master {
                roles.push(("Master", replica(1, policy)));
            }
            let mut j = job("ns", "tj", &roles);
            let run_policy = &mut j.spec.run_policy;
            (run_policy.clean_pod_policy, run_policy.backoff_limit) = (clean, backoff_limit);
            (run_policy.active_deadline_seconds, run_policy.ttl_seconds_after_finished) = (deadline, ttl);
            run_policy.suspend = Some(suspended);
            // A status the planner could have written: earlier conditions, then the outcome.
            let mut status = crate::api::JobStatus {
                start_time: Some(t(0)),
                completion_time: Some(t(1)),
                ..crate::api::JobStatus::default()
            };
            for type_ in std::iter::once(C::Created).chain(history) {
                set_condition(&mut status, type_, ConditionStatus::True, reason("TestJob", type_.as_str()), String::new(), &t(0));
            }
            let (type_, base) = if succeeded { (C::Succeeded, "Succeeded") } else { (C::Failed, "Failed") };
            set_condition(&mut status, type_, ConditionStatus::True, reason("TestJob", base), String::new(), &t(1));
            j.status = Some(status);

            let p = run(&j, &observe(&seen), 2);
            prop_assert!(p.create_pods.is_empty() && p.create_services.is_empty() && p.create_objects.is_empty());
            let before = j.status.unwrap();
            let after = p.status.unwrap_or_else(|| before.clone());
            prop_assert!(after.is(type_) && !after.is(C::Running), "{:?}", after.conditions);
            prop_assert_eq!(&after.conditions, &before.conditions);
            prop_assert!(p.metrics.is_empty(), "{:?}", p.metrics);
        }
    }
}

#[test]
fn work_names_what_a_plan_would_change() {
    assert_eq!(Plan::default().work(), "");
    assert!(!Plan::default().has_work());
    let plan = Plan {
        create_pods: vec![Pod::default(), Pod::default()],
        status: Some(JobStatus::default()),
        requeue_after: Some(Duration::from_secs(1)),
        ..Plan::default()
    };
    assert!(plan.has_work());
    assert_eq!(plan.work(), "2 pod creates, 1 status change");
}

#[test]
fn native_gang_creates_its_pod_group_then_pods_naming_it_and_deletes_it_when_finished() {
    let native = crate::gang::GangScheduler::native();
    let kind = crate::gang::native_api_resource();
    let mut j = mw(2, None);
    let mut observed = Observed {
        scheduling: Scheduling {
            scheduler: native.clone(),
            ..Scheduling::default()
        },
        ..Observed::default()
    };
    // The group first: no pod before the cache shows it.
    let p = step(&mut j, &observed, 0);
    assert!(p.create_pods.is_empty());
    let [group] = p.create_objects.as_slice() else {
        panic!("{:?}", p.create_objects);
    };
    assert_eq!(group.resource, kind);
    assert_eq!(
        group.object.data["spec"],
        json!({"schedulingPolicy": {"gang": {"minCount": 3}}})
    );

    // Then every pod, each naming it, sent to kube-scheduler.
    let mut cached = group.object.clone();
    cached.metadata.uid = Some("uid-pg".to_owned());
    observed.objects = vec![Arc::new(cached)];
    let p = step(&mut j, &observed, 1);
    assert_eq!(
        names(&p.create_pods),
        ["tj-master-0", "tj-worker-0", "tj-worker-1"]
    );
    for pod in &p.create_pods {
        let spec = serde_json::to_value(pod.spec.as_ref().unwrap()).unwrap();
        assert_eq!(spec["schedulingGroup"], json!({"podGroupName": "tj"}));
        assert_eq!(spec["schedulerName"], "default-scheduler");
    }
    assert!(p.create_objects.is_empty() && p.patch_objects.is_empty());

    // A finished job's group is deleted.
    let mut done = all_children(&j, 2, "Succeeded");
    done.scheduling = observed.scheduling.clone();
    done.objects = observed.objects.clone();
    let _ = step(&mut j, &done, 2);
    let p = step(&mut j, &done, 3);
    assert!(j.status.as_ref().unwrap().is(C::Succeeded));
    assert_eq!(p.delete_objects.len(), 1, "{:?}", p.delete_objects);
    assert_eq!(p.delete_objects[0].resource, kind);
}
