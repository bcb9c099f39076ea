#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The engine against a real control plane, with the small test framework of
//! `kfop_runtime::testing`: names, labels, owners, the condition state machine and every run
//! policy, driven by kwok pods.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use kfop_runtime::api::{CleanPodPolicy, ConditionStatus, JobConditionType as C, JobStatus, RestartPolicy};
use kfop_runtime::kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kfop_runtime::kube::{CustomResourceExt, ResourceExt};
use kfop_runtime::testing::{Operator, TestFramework, TestJob, job, replica};
use kfop_testenv::{TestEnv, TestNamespace, pods, wait};
use serde_json::json;

struct Fixture {
    ns: TestNamespace,
    jobs: Api<TestJob>,
    pods: Api<Pod>,
    services: Api<Service>,
}

async fn fixture(prefix: &str) -> (Fixture, Operator) {
    let env = TestEnv::shared().unwrap();
    env.install_crds([TestJob::crd()]).await.unwrap();
    let ns = env.namespace(prefix).await.unwrap();
    let operator = Operator::start(ns.client(), ns.name(), |m| {
        m.register(TestFramework::default().loaded())
    });
    let f = Fixture {
        jobs: ns.api(),
        pods: ns.api(),
        services: ns.api(),
        ns,
    };
    (f, operator)
}

fn timeout() -> Duration {
    wait::default_timeout()
}

impl Fixture {
    async fn create(&self, job: TestJob) -> TestJob {
        let mut job = job;
        job.metadata.namespace = Some(self.ns.name().to_owned());
        self.jobs.create(&PostParams::default(), &job).await.unwrap()
    }

    async fn status(&self, name: &str) -> JobStatus {
        self.jobs.get(name).await.unwrap().status.unwrap_or_default()
    }

    async fn wait_condition(&self, name: &str, type_: C) -> JobStatus {
        let waited = wait::until(&format!("{name} {type_:?}"), timeout(), || async {
            let status = self.status(name).await;
            Ok(status.is(type_).then_some(status))
        })
        .await;
        match waited {
            Ok(status) => status,
            Err(e) => panic!("{e}\n{}", self.describe(name).await),
        }
    }

    /// The job's status and its pods' phases, for a failure message.
    async fn describe(&self, name: &str) -> String {
        let status = serde_json::to_string_pretty(&self.status(name).await).unwrap();
        let pods = self.pods.list(&ListParams::default()).await.unwrap().items;
        let pods: Vec<String> = pods
            .iter()
            .map(|p| format!("{} {} {:?}", p.name_any(), pods::phase(p), p.annotations()))
            .collect();
        format!("status: {status}\npods:\n{}", pods.join("\n"))
    }

    async fn pod_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        names.sort();
        names
    }

    async fn wait_pods(&self, expected: &[&str], phase: &str) -> BTreeMap<String, Pod> {
        wait::until(&format!("pods {expected:?} {phase}"), timeout(), || async {
            let list = self.pods.list(&ListParams::default()).await.unwrap().items;
            let ready = list.len() == expected.len()
                && list
                    .iter()
                    .all(|p| expected.contains(&p.name_any().as_str()) && pods::phase(p) == phase);
            Ok(ready.then(|| list.into_iter().map(|p| (p.name_any(), p)).collect()))
        })
        .await
        .unwrap()
    }

    async fn patch_labels(&self, name: &str, n: i32) {
        let patch = json!({ "metadata": { "labels": { "poke": n.to_string() } } });
        self.jobs
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    async fn patch_spec(&self, name: &str, patch: serde_json::Value) {
        self.jobs
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "spec": patch })),
            )
            .await
            .unwrap();
    }
}

fn conditions(status: &JobStatus) -> Vec<(C, ConditionStatus, String)> {
    status
        .conditions
        .iter()
        .map(|c| (c.type_, c.status, c.reason.clone()))
        .collect()
}

fn mw(name: &str, workers: i32, policy: Option<RestartPolicy>) -> TestJob {
    job(
        "",
        name,
        &[
            ("Master", replica(1, policy)),
            ("Worker", replica(workers, policy)),
        ],
    )
}

const MW3: [&str; 4] = ["tj-master-0", "tj-worker-0", "tj-worker-1", "tj-worker-2"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_have_kubeflow_names_labels_and_owners_and_the_job_succeeds() {
    let (f, op) = fixture("resources").await;
    let started = Instant::now();
    let created = f.create(mw("tj", 3, None)).await;
    let all_exist = wait::until("4 pods", timeout(), || async {
        Ok((f.pod_names().await.len() == 4).then(Instant::now))
    })
    .await
    .unwrap();
    println!(
        "latency creation -> all 4 pods exist: {} ms",
        (all_exist - started).as_millis()
    );

    let pods = f.wait_pods(&MW3, "Running").await;
    let master = &pods["tj-master-0"];
    let labels = master.labels();
    assert_eq!(
        labels["training.kubeflow.org/operator-name"],
        "testjob-controller"
    );
    assert_eq!(labels["training.kubeflow.org/job-name"], "tj");
    assert_eq!(labels["training.kubeflow.org/replica-type"], "master");
    assert_eq!(labels["training.kubeflow.org/replica-index"], "0");
    assert_eq!(labels["training.kubeflow.org/job-role"], "master");
    let owner = &master.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("TestJob", "tj"));
    assert_eq!(owner.uid, created.uid().unwrap());
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    let port = &master.spec.as_ref().unwrap().containers[0]
        .ports
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.container_port),
        (Some("test-port"), 7777)
    );

    let mut services: Vec<String> = f
        .services
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    services.sort();
    assert_eq!(services, MW3);
    let svc = f.services.get("tj-worker-2").await.unwrap();
    let spec = svc.spec.unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(spec.ports.unwrap()[0].port, 7777);
    assert_eq!(
        svc.metadata.owner_references.unwrap()[0].uid,
        created.uid().unwrap()
    );

    // Running is set as soon as the master runs; the counts follow as the operator's cache
    // sees the other pods run.
    f.wait_condition("tj", C::Running).await;
    let active = |s: &JobStatus, role: &str| s.replica_statuses.get(role).map(|r| r.active);
    wait::until("1 master and 3 workers active", timeout(), || async {
        let status = f.status("tj").await;
        Ok((active(&status, "Master") == Some(1) && active(&status, "Worker") == Some(3)).then_some(()))
    })
    .await
    .unwrap();

    pods::finish(&f.pods, "tj-master-0", 0, 0).await.unwrap();
    let status = f.wait_condition("tj", C::Succeeded).await;
    assert_eq!(
        conditions(&status),
        [
            (C::Created, ConditionStatus::True, "TestJobCreated".into()),
            (C::Running, ConditionStatus::False, "TestJobRunning".into()),
            (C::Succeeded, ConditionStatus::True, "TestJobSucceeded".into()),
        ]
    );
    assert!(status.completion_time.is_some() && status.start_time.is_some());

    // Later reconciles of the finished job leave its counts alone (a merge patch that omitted
    // zero counts once made `succeeded` grow by `active` on every pass).
    for i in 0..3 {
        f.patch_labels("tj", i).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let status = f.status("tj").await;
    let master = &status.replica_statuses["Master"];
    assert_eq!((master.succeeded, master.active), (1, 0));
    assert_eq!(
        status.replica_statuses["Worker"].succeeded, 3,
        "active workers count as succeeded"
    );
    // One creation event per child, each with its own message and the child as related object.
    let events: Api<k8s_openapi::api::events::v1::Event> = f.ns.api();
    let created: Vec<(String, String)> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("SuccessfulCreatePod"))
        .map(|e| {
            let related = e.related.and_then(|r| r.name).unwrap_or_default();
            (related, e.note.unwrap_or_default())
        })
        .collect();
    let mut expected: Vec<(String, String)> = MW3
        .iter()
        .map(|p| ((*p).to_owned(), format!("Created pod: {p}")))
        .collect();
    let mut created = created;
    created.sort();
    expected.sort();
    assert_eq!(created, expected);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_failure_restarts_the_failed_pod() {
    let (f, op) = fixture("onfailure").await;
    f.create(mw("tj", 1, Some(RestartPolicy::OnFailure))).await;
    let pods = f.wait_pods(&["tj-master-0", "tj-worker-0"], "Running").await;
    let old_uid = pods["tj-worker-0"].uid().unwrap();
    pods::finish(&f.pods, "tj-worker-0", 1, 0).await.unwrap();
    wait::until("a new tj-worker-0 Running", timeout(), || async {
        let pod = f.pods.get_opt("tj-worker-0").await.unwrap();
        Ok(pod
            .filter(|p| p.uid().unwrap() != old_uid && pods::phase(p) == "Running")
            .map(|_| ()))
    })
    .await
    .unwrap();
    let status = f.wait_condition("tj", C::Running).await;
    assert!(!status.is(C::Failed));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_code_policy_restarts_on_137_and_fails_on_1() {
    let (f, op) = fixture("exitcode").await;
    f.create(job(
        "",
        "tj",
        &[("Worker", replica(2, Some(RestartPolicy::ExitCode)))],
    ))
    .await;
    let pods = f.wait_pods(&["tj-worker-0", "tj-worker-1"], "Running").await;
    assert_eq!(
        pods["tj-worker-0"]
            .spec
            .as_ref()
            .unwrap()
            .restart_policy
            .as_deref(),
        Some("Never")
    );
    let old_uid = pods["tj-worker-0"].uid().unwrap();
    pods::finish(&f.pods, "tj-worker-0", 137, 0).await.unwrap();
    wait::until("tj-worker-0 replaced", timeout(), || async {
        let pod = f.pods.get_opt("tj-worker-0").await.unwrap();
        Ok(pod
            .filter(|p| p.uid().unwrap() != old_uid && pods::phase(p) == "Running")
            .map(|_| ()))
    })
    .await
    .unwrap();

    pods::finish(&f.pods, "tj-worker-1", 1, 0).await.unwrap();
    let status = f.wait_condition("tj", C::Failed).await;
    let failed = status.condition(C::Failed).unwrap();
    assert_eq!(failed.reason, "TestJobFailed");
    assert_eq!(
        failed.message,
        "job \"tj\" is failing because \"Worker\" replica(s) failed."
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_limit_fails_the_job() {
    let (f, op) = fixture("backoff").await;
    let mut j = job(
        "",
        "tj",
        &[("Worker", replica(2, Some(RestartPolicy::OnFailure)))],
    );
    j.spec.run_policy.backoff_limit = Some(2);
    f.create(j).await;
    f.wait_pods(&["tj-worker-0", "tj-worker-1"], "Running").await;
    pods::set_restart_count(&f.pods, "tj-worker-0", 1).await.unwrap();
    pods::set_restart_count(&f.pods, "tj-worker-1", 1).await.unwrap();
    let status = f.wait_condition("tj", C::Failed).await;
    assert_eq!(
        status.condition(C::Failed).unwrap().message,
        "Job tj has failed because it has reached the specified backoff limit"
    );
    // cleanPodPolicy defaults to None, which kfop honours on backoff failures (Kubeflow #3419).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(f.pod_names().await.len(), 2);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_deadline_fires_without_any_other_event() {
    let (f, op) = fixture("deadline").await;
    let mut j = job("", "tj", &[("Worker", replica(1, None))]);
    j.spec.run_policy.active_deadline_seconds = Some(3);
    j.spec.run_policy.clean_pod_policy = Some(CleanPodPolicy::All);
    f.create(j).await;
    f.wait_pods(&["tj-worker-0"], "Running").await;
    // Nothing touches the job or its pods from here: only the timed requeue can fail it.
    let status = f.wait_condition("tj", C::Failed).await;
    assert_eq!(
        status.condition(C::Failed).unwrap().message,
        "Job tj has failed because it was active longer than specified deadline"
    );
    wait::until("pods cleaned up", timeout(), || async {
        Ok(f.pod_names().await.is_empty().then_some(()))
    })
    .await
    .unwrap();
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_deletes_the_finished_job() {
    let (f, op) = fixture("ttl").await;
    let mut j = job("", "tj", &[("Worker", replica(1, None))]);
    j.spec.run_policy.ttl_seconds_after_finished = Some(2);
    f.create(j).await;
    f.wait_pods(&["tj-worker-0"], "Running").await;
    pods::finish(&f.pods, "tj-worker-0", 0, 0).await.unwrap();
    f.wait_condition("tj", C::Succeeded).await;
    wait::until("job deleted by TTL", timeout(), || async {
        Ok(f.jobs.get_opt("tj").await.unwrap().is_none().then_some(()))
    })
    .await
    .unwrap();
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_pod_policy_after_success() {
    let (f, op) = fixture("clean").await;
    for (name, policy, left) in [
        ("all", CleanPodPolicy::All, 0),
        ("running", CleanPodPolicy::Running, 2),
        ("none", CleanPodPolicy::None, 3),
    ] {
        let mut j = mw(name, 2, None);
        j.spec.run_policy.clean_pod_policy = Some(policy);
        f.create(j).await;
        let names = [
            format!("{name}-master-0"),
            format!("{name}-worker-0"),
            format!("{name}-worker-1"),
        ];
        wait::until(&format!("{name} pods Running"), timeout(), || async {
            let mut running = 0;
            for n in &names {
                if f.pods
                    .get_opt(n)
                    .await
                    .unwrap()
                    .is_some_and(|p| pods::phase(&p) == "Running")
                {
                    running += 1;
                }
            }
            Ok((running == 3).then_some(()))
        })
        .await
        .unwrap();
        pods::finish(&f.pods, &names[1], 0, 0).await.unwrap();
        wait::until("worker-0 Succeeded", timeout(), || async {
            Ok((pods::phase(&f.pods.get(&names[1]).await.unwrap()) == "Succeeded").then_some(()))
        })
        .await
        .unwrap();
        pods::finish(&f.pods, &names[0], 0, 0).await.unwrap();
        f.wait_condition(name, C::Succeeded).await;
        wait::until(&format!("{policy:?} leaves {left} pods"), timeout(), || async {
            let mut count = 0;
            for n in &names {
                count += usize::from(f.pods.get_opt(n).await.unwrap().is_some());
            }
            Ok((count == left).then_some(()))
        })
        .await
        .unwrap();
    }
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_suspended_then_resumed_then_suspended() {
    let (f, op) = fixture("suspend").await;
    let mut j = mw("tj", 1, None);
    j.spec.run_policy.suspend = Some(true);
    f.create(j).await;
    let status = f.wait_condition("tj", C::Suspended).await;
    assert_eq!(
        conditions(&status),
        [
            (C::Created, ConditionStatus::True, "TestJobCreated".into()),
            (C::Suspended, ConditionStatus::True, "TestJobSuspended".into()),
        ]
    );
    assert!(status.start_time.is_none());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(f.pod_names().await.is_empty());

    f.patch_spec("tj", json!({ "runPolicy": { "suspend": false } }))
        .await;
    f.wait_pods(&["tj-master-0", "tj-worker-0"], "Running").await;
    let status = f.wait_condition("tj", C::Running).await;
    let first_start = status.start_time.clone().unwrap();
    assert_eq!(
        conditions(&status),
        [
            (C::Created, ConditionStatus::True, "TestJobCreated".into()),
            (C::Suspended, ConditionStatus::False, "TestJobResumed".into()),
            (C::Running, ConditionStatus::True, "TestJobRunning".into()),
        ]
    );

    f.patch_spec("tj", json!({ "runPolicy": { "suspend": true } }))
        .await;
    let status = f.wait_condition("tj", C::Suspended).await;
    wait::until("pods and services deleted", timeout(), || async {
        let services = f.services.list(&ListParams::default()).await.unwrap().items;
        Ok((f.pod_names().await.is_empty() && services.is_empty()).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(
        status.start_time,
        Some(first_start),
        "startTime is kept while suspended"
    );
    assert_eq!(
        status.condition(C::Running).unwrap().status,
        ConditionStatus::False
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_and_up_by_index() {
    let (f, op) = fixture("scale").await;
    f.create(job("", "tj", &[("Worker", replica(3, None))])).await;
    let before = f
        .wait_pods(&["tj-worker-0", "tj-worker-1", "tj-worker-2"], "Running")
        .await;
    f.patch_spec("tj", json!({ "replicaSpecs": { "Worker": { "replicas": 2 } } }))
        .await;
    let after = f.wait_pods(&["tj-worker-0", "tj-worker-1"], "Running").await;
    for name in ["tj-worker-0", "tj-worker-1"] {
        assert_eq!(
            before[name].uid(),
            after[name].uid(),
            "{name} untouched by scale-down"
        );
    }
    f.patch_spec("tj", json!({ "replicaSpecs": { "Worker": { "replicas": 4 } } }))
        .await;
    let grown = f
        .wait_pods(
            &["tj-worker-0", "tj-worker-1", "tj-worker-2", "tj-worker-3"],
            "Running",
        )
        .await;
    assert_eq!(
        grown["tj-worker-1"].uid(),
        after["tj-worker-1"].uid(),
        "untouched by scale-up"
    );
    wait::until("4 services", timeout(), || async {
        Ok((f.services.list(&ListParams::default()).await.unwrap().items.len() == 4).then_some(()))
    })
    .await
    .unwrap();
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_restart_mid_job_converges_without_duplicates() {
    let (f, op) = fixture("restart").await;
    f.create(mw("tj", 3, None)).await;
    let pods = f.wait_pods(&MW3, "Running").await;
    op.kill();
    pods::finish(&f.pods, "tj-worker-1", 0, 0).await.unwrap();
    let op = Operator::start(f.ns.client(), f.ns.name(), |m| {
        m.register(TestFramework::default().loaded())
    });
    f.wait_condition("tj", C::Running).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let now = f.pods.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(now.len(), 4, "no extra pod after the restart");
    for pod in &now {
        assert_eq!(
            pod.uid(),
            pods[&pod.name_any()].uid(),
            "{} was not recreated",
            pod.name_any()
        );
    }
    pods::finish(&f.pods, "tj-master-0", 0, 0).await.unwrap();
    let status = f.wait_condition("tj", C::Succeeded).await;
    assert_eq!(
        status
            .conditions
            .iter()
            .filter(|c| c.type_ == C::Succeeded)
            .count(),
        1
    );
    op.stop().await;
}

/// `runPolicy.managedBy` naming another controller (Kueue's MultiKueue) leaves the job entirely
/// alone, while one naming Kubeflow's training operator is run as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_by_another_controller_is_never_touched() {
    let (f, op) = fixture("managed").await;
    let mut external = mw("external", 1, None);
    external.spec.run_policy.managed_by = Some("kueue.x-k8s.io/multikueue".to_owned());
    f.create(external).await;
    let mut ours = mw("ours", 1, None);
    ours.spec.run_policy.managed_by = Some("kubeflow.org/training-operator".to_owned());
    f.create(ours).await;
    f.wait_condition("ours", C::Running).await;
    // The job created at the same time as one the operator already ran has been seen too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let job = f.jobs.get("external").await.unwrap();
    assert!(job.status.is_none(), "{:?}", job.status);
    let names = f.pod_names().await;
    assert!(names.iter().all(|n| n.starts_with("ours-")), "{names:?}");
    let services = f.services.list(&ListParams::default()).await.unwrap().items;
    assert!(services.iter().all(|s| s.name_any().starts_with("ours-")));
    op.stop().await;
}
